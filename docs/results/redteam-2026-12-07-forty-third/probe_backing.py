"""Ask cudal1.bench.backing.Backing.aliased directly about mappings a child process sets up
(each case in a fresh child): whether the rule flags (True) or passes (False) the range."""
import ctypes, mmap, os, sys, json
sys.path.insert(0, "/work/main")
import torch
from cudal1.bench.backing import Backing

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
RW = 3
SH, PR, FIX, AN = 0x01, 0x02, 0x10, 0x20
T = 1 << 20


def two_adjacent(fd, flags=SH):
    base = libc.mmap(None, 2 * T, 0, PR | AN, -1, 0)
    libc.mmap(base, T, RW, flags | FIX, fd, 0)
    libc.mmap(base + T, T, RW, flags | FIX, fd, 0)
    return base, 2 * T


def c_memfd_twice():
    fd = os.memfd_create("x"); os.ftruncate(fd, T); return two_adjacent(fd)

def c_mremap_old0():
    a = libc.mmap(None, T, RW, SH | AN, -1, 0)
    b = libc.mremap(a, 0, T, 1, None)  # MREMAP_MAYMOVE, old_size 0: a second mapping
    assert b not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    return b, T

def c_shmat_twice():
    sid = libc.shmget(0, T, 0o1600)
    assert sid >= 0, ctypes.get_errno()
    a = libc.shmat(sid, None, 0); b = libc.shmat(sid, None, 0)
    return b, T

def c_devshm_two_opens():
    p = f"/dev/shm/rt43-{os.getpid()}"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o600); os.ftruncate(fd, T)
    fd2 = os.open(p, os.O_RDWR)
    a = libc.mmap(None, T, RW, SH, fd, 0); b = libc.mmap(None, T, RW, SH, fd2, 0)
    os.unlink(p)
    return b, T

def c_hardlink():
    p = f"/dev/shm/rt43h-{os.getpid()}"
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o600); os.ftruncate(fd, T)
    os.link(p, p + "b"); fd2 = os.open(p + "b", os.O_RDWR)
    a = libc.mmap(None, T, RW, SH, fd, 0); b = libc.mmap(None, T, RW, SH, fd2, 0)
    os.unlink(p); os.unlink(p + "b")
    return b, T

def c_zero_page():
    a = libc.mmap(None, 16 * T, RW, PR | AN, -1, 0)  # never written: every page is the zero page
    return a, 16 * T

def c_dontunmap():
    a = libc.mmap(None, T, RW, PR | AN, -1, 0)
    ctypes.memset(a, 1, T)
    b = libc.mremap(a, T, T, 1 | 4, None)  # MREMAP_MAYMOVE | MREMAP_DONTUNMAP
    assert b not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    return a, T  # the source, left mapped and empty (zero pages)

def c_memfd_moved_once():
    fd = os.memfd_create("slot"); os.ftruncate(fd, T)
    a = libc.mmap(None, T, RW, SH, fd, 0)
    dst = libc.mmap(None, 2 * T, RW, PR | AN, -1, 0)
    libc.mremap(a, T, T, 3, dst)
    return dst, 2 * T

def c_honest_share_memory():
    t = torch.empty(T // 4).share_memory_(); t.fill_(1)
    c_honest_share_memory.keep = t
    return t.data_ptr(), T

def c_honest_from_file_shared():
    p = f"/tmp/rt43f-{os.getpid()}"
    t = torch.from_file(p, shared=True, size=T // 4); t.fill_(1)
    c_honest_from_file_shared.keep = t
    return t.data_ptr(), T

def c_honest_from_file_private_twice():
    p = f"/tmp/rt43g-{os.getpid()}"
    with open(p, "wb") as f:
        f.write(b"\0" * T)
    a = torch.from_file(p, shared=False, size=T // 4); b = torch.from_file(p, shared=False, size=T // 4)
    a.fill_(1); b.fill_(2)  # every byte written (copied on write): private pages of their own
    c_honest_from_file_private_twice.keep = (a, b)
    return b.data_ptr(), T

def c_honest_file_private_written_twice_mapped():
    fd = os.memfd_create("tmpl"); os.ftruncate(fd, T)
    a = libc.mmap(None, T, RW, PR, fd, 0); b = libc.mmap(None, T, RW, PR, fd, 0)
    ctypes.memset(a, 1, T); ctypes.memset(b, 2, T)
    return b, T


def run(case):
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            addr, n = case()
            os.write(w, json.dumps([addr, n]).encode())
        except Exception as e:
            os.write(w, json.dumps(["err", repr(e)]).encode())
        os.read(go_r, 1)
        os._exit(0)
    got = json.loads(os.read(r, 4096))
    if got[0] == "err":
        res = got[1]
    else:
        res = {"query": bool(Backing(pid).aliased([[got[0], got[1], 0]])),
               "maps_only": bool(Backing(pid, use_query=False).aliased([[got[0], got[1], 0]]))}
    os.write(go_w, b"x"); os.waitpid(pid, 0)
    return res


if __name__ == "__main__":
  for name, fn in list(globals().items()):
    if name.startswith("c_"):
        print(f"{name[2:]:40s} flagged: {run(fn)}", flush=True)
