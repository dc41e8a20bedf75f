"""The input slot by another name? A memfd named like the judge's slot, mapped by other routes;
what PROCMAP_QUERY names it, and what Backing.aliased (files settled by frames, as root) says."""
import ctypes, os, subprocess, sys, json
CHILD = r'''
import ctypes, os, sys, json, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
T = 1 << 20
fd = os.memfd_create("cudal1-slot"); os.ftruncate(fd, T)
s = libc.mmap(None, T, 3, 1, fd, 0); ctypes.memset(s, 7, T)
case = sys.argv[1]
if case == "proc_self_fd_reopen_shared":
    fd2 = os.open(f"/proc/self/fd/{fd}", os.O_RDWR); a = libc.mmap(None, T, 3, 1, fd2, 0)
elif case == "proc_self_fd_reopen_private":
    fd2 = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY); a = libc.mmap(None, T, 3, 2, fd2, 0)
elif case == "map_files_reopen":
    names = os.listdir("/proc/self/map_files"); p = [n for n in names if int(n.split("-")[0], 16) == s][0]
    fd2 = os.open("/proc/self/map_files/" + p, os.O_RDWR); a = libc.mmap(None, T, 3, 1, fd2, 0)
elif case == "mremap_moved":
    a = libc.mmap(None, T, 3, 0x22, -1, 0); libc.mremap(s, T, T, 3, a)
elif case == "mremap_dontunmap_private_copy":  # private mapping of the slot moved with DONTUNMAP
    p = libc.mmap(None, T, 3, 2, fd, 0); _ = ctypes.string_at(p, T)
    a = libc.mmap(None, T, 3, 0x22, -1, 0); r = libc.mremap(p, T, T, 1 | 2 | 4, a)
    if r != a: a = p
print(json.dumps([[a, T]]), flush=True); sys.stdin.readline()
'''
sys.path.insert(0, "/tmp/rt44")
from cudal1.bench.backing import Backing
for case in ["proc_self_fd_reopen_shared", "proc_self_fd_reopen_private", "map_files_reopen", "mremap_moved", "mremap_dontunmap_private_copy"]:
    p = subprocess.Popen([sys.executable, "-c", CHILD, case], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    try:
        r = json.loads(line)
        print(f"{case:34s} aliased(files settled)={Backing(p.pid).aliased(r, True)}  table={Backing(p.pid, use_query=False).aliased(r)}")
    except Exception as e:
        print(case, "failed", line, e)
    p.stdin.write("\n"); p.stdin.flush(); p.wait()
