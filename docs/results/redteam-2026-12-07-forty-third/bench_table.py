"""Cost of Backing.aliased for one 16 MiB output range in a memfd mapping (mapped once), in a child
with `extra` other memfd mappings (the VMAs the moved-input candidates leave behind), against the
same range in private anonymous memory."""
import ctypes, os, sys, time, json
sys.path.insert(0, "/work/main")
from cudal1.bench.backing import Backing
import probe_backing as pb

T = 16 << 20
def child(extra, shared):
    fds = []
    for _ in range(extra):
        fd = os.memfd_create("g"); os.ftruncate(fd, 4096); pb.libc.mmap(None, 4096, 3, 1, fd, 0); os.close(fd)
    if shared:
        fd = os.memfd_create("o"); os.ftruncate(fd, T); a = pb.libc.mmap(None, T, 3, 1, fd, 0)
    else:
        a = pb.libc.mmap(None, T, 3, 0x22, -1, 0)
    return a, T

for extra in (0, 100, 400, 1000):
    for shared in (False, True):
        r, w = os.pipe(); g_r, g_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            a, n = child(extra, shared); os.write(w, json.dumps([a, n]).encode()); os.read(g_r, 1); os._exit(0)
        a, n = json.loads(os.read(r, 4096))
        b = Backing(pid)
        ts = []
        for _ in range(20):
            t0 = time.perf_counter(); b.aliased([[a, n, 0]]); ts.append(time.perf_counter() - t0)
        os.write(g_w, b"x"); os.waitpid(pid, 0)
        print(f"extra VMAs {extra:5d} {'memfd' if shared else 'anon '}: median {1000*sorted(ts)[10]:.3f} ms per question (two per read)")
