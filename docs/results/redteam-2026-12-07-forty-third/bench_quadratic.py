"""Backing.aliased on one output range made of P one-page mappings of P different memfds (each
mapped once, so the range passes): `_aliased_in` compares each VMA in the range with every VMA of
the table, O(P x VMAs) Python steps per question, two questions per read."""
import ctypes, os, sys, time, json
sys.path.insert(0, "/work/main")
from cudal1.bench.backing import Backing
import probe_backing as pb

for P in (256, 1024, 4096):
    r, w = os.pipe(); g_r, g_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        base = pb.libc.mmap(None, P * 4096, 0, 0x22, -1, 0)
        for i in range(P):
            fd = os.memfd_create("p"); os.ftruncate(fd, 4096)
            pb.libc.mmap(base + i * 4096, 4096, 3, 0x11, fd, 0); os.close(fd)
        os.write(w, json.dumps([base, P * 4096]).encode()); os.read(g_r, 1); os._exit(0)
    a, n = json.loads(os.read(r, 4096))
    t0 = time.perf_counter(); got = Backing(pid).aliased([[a, n, 0]]); dt = time.perf_counter() - t0
    os.write(g_w, b"x"); os.waitpid(pid, 0)
    print(f"{P:5d} one-page memfd mappings ({P * 4} KiB output): aliased={got} in {dt * 1000:.0f} ms per question", flush=True)
