"""Sketch of a fix for finding 1 (stale pages): clear the host's soft-dirty bits (write 4 to
/proc/<pid>/clear_refs) before the call, read pagemap bit 55 after the copy. Which ways of
filling an output leave the bit set? (child = this process; read faults done by reading.)"""
import ctypes, mmap, os, numpy as np
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mremap.restype = ctypes.c_void_p
libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
RW, SH, PR, AN, FIX = 3, 1, 2, 0x20, 0x10
N = 1 << 22
P = 4096

def sd(addr, n=N):
    fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    e = np.frombuffer(os.pread(fd, 8 * (n // P), 8 * (addr // P)), dtype=np.uint64); os.close(fd)
    return int(((e >> np.uint64(55)) & np.uint64(1)).sum()), int(((e >> np.uint64(63)) & np.uint64(1)).sum())

def clear():
    with open("/proc/self/clear_refs", "w") as f: f.write("4")

def touch_read(a, n=N):
    buf = (ctypes.c_char * n).from_address(a); bytes(buf)

res = {}
a = libc.mmap(None, N, RW, PR | AN, -1, 0); ctypes.memset(a, 0, N)
clear(); touch_read(a); res["prefaulted, not written after clear"] = sd(a)
ctypes.memset(a, 0, N); res["prefaulted, written after clear"] = sd(a)
b = libc.mmap(None, N, RW, PR | AN, -1, 0); clear(); touch_read(b); res["fresh private anon, read only (zero page)"] = sd(b)
fd = os.memfd_create("o"); os.ftruncate(fd, N); c = libc.mmap(None, N, RW, SH, fd, 0)
clear(); touch_read(c); res["fresh memfd shared, read only"] = sd(c)
src = libc.mmap(None, N, RW, PR | AN, -1, 0); ctypes.memset(src, 0, N)
dst = libc.mmap(None, N, RW, PR | AN, -1, 0)
clear(); libc.mremap(src, N, N, 3, dst); touch_read(dst); res["prefaulted pages mremap'd under the output after clear"] = sd(dst)
s2 = libc.mmap(None, N, RW, PR | AN, -1, 0); ctypes.memset(s2, 0, N); d2 = libc.mmap(None, N, RW, PR | AN, -1, 0)
clear(); libc.mremap(s2, N, N, 3 | 4, d2); touch_read(d2); res["...with MREMAP_DONTUNMAP"] = sd(d2)
for k, v in res.items():
    print(f"{k:60s} soft-dirty {v[0]:5d} / present {v[1]:5d} / pages {N // P}")
