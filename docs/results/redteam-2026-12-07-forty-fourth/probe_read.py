"""Each case in a fresh child process sets up an output; the parent (root) reads it with the
judge's own reader, cudal1.bench.readers.HostMemory.read (query, copy, query, pagemap), and
prints what the rule says ([] = passes) and a pagemap summary.
usage: PYTHONPATH=/tmp/rt44 python probe_read.py [case ...]"""
import ctypes, json, mmap, os, subprocess, sys
import numpy as np

CHILD = r'''
import ctypes, json, mmap, os, sys, time
import numpy as np, torch
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
RW, SH, PR, AN, FIX = 3, 1, 2, 0x20, 0x10
T = 1 << 20
N = 16 * T
keep = []
def f32(addr, n):
    return torch.frombuffer((ctypes.c_char * n).from_address(addr), dtype=torch.float32)
def rng(t):
    return [t.data_ptr(), t.numel() * t.element_size()]
case = sys.argv[1]
lay = None
if case == "torch_zeros_like":
    t = torch.zeros_like(torch.empty(N // 4)); out = [rng(t)]
elif case == "torch_zeros":
    t = torch.zeros(N // 4); out = [rng(t)]
elif case == "torch_empty_fill_thp":
    t = torch.empty(N // 4); t.fill_(1.5); out = [rng(t)]
elif case == "numpy_zeros":
    t = torch.from_numpy(np.zeros(N // 4, dtype=np.float32)); out = [rng(t)]
elif case == "expand_view":
    b = torch.randn(1, 1024); t = b.expand(4096, 1024)
    out = [[t.data_ptr(), 1024 * 4, {"shape": [4096, 1024], "strides": [0, 1], "itemsize": 4}]]
elif case == "same_tensor_twice":
    t = torch.randn(N // 4); out = [rng(t), rng(t)]
elif case == "two_small_outputs_one_page":
    a = torch.randn(64); b = torch.randn(64)
    out = [rng(a), rng(b)]
elif case == "prefaulted_private_anon":  # finding 1: written once (at init), never again
    a = libc.mmap(None, N, RW, PR | AN, -1, 0); ctypes.memset(a, 0, N); out = [[a, N]]
elif case == "never_written_private_anon":
    a = libc.mmap(None, N, RW, PR | AN, -1, 0); out = [[a, N]]
elif case == "never_written_memfd_shared":
    fd = os.memfd_create("out"); os.ftruncate(fd, N)
    a = libc.mmap(None, N, RW, SH, fd, 0); out = [[a, N]]
elif case == "never_written_memfd_private":
    fd = os.memfd_create("out"); os.ftruncate(fd, N)
    a = libc.mmap(None, N, RW, PR, fd, 0); out = [[a, N]]
elif case == "never_written_shared_anon":
    a = libc.mmap(None, N, RW, SH | AN, -1, 0); out = [[a, N]]
elif case == "never_written_devzero_shared":
    fd = os.open("/dev/zero", os.O_RDWR)
    a = libc.mmap(None, N, RW, SH, fd, 0); out = [[a, N]]
elif case == "never_written_tmpfs_file_private":
    p = "/tmp/rt44-probe-%d" % os.getpid()
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o600); os.ftruncate(fd, N); os.unlink(p)
    a = libc.mmap(None, N, RW, PR, fd, 0); out = [[a, N]]
elif case == "never_written_thp":
    a = libc.mmap(None, N + 2 * T, RW, PR | AN, -1, 0); a = (a + 2 * T - 1) // (2 * T) * (2 * T)
    libc.madvise(a, N, 14); out = [[a, N]]
elif case == "punched_memfd_after_write":  # written, then the pages dropped: holes again
    fd = os.memfd_create("out"); os.ftruncate(fd, N)
    a = libc.mmap(None, N, RW, SH, fd, 0); ctypes.memset(a, 0, N)
    libc.madvise(a, N, 9)  # MADV_REMOVE
    out = [[a, N]]
elif case == "ksm_merged_zero":  # written zeros, MADV_MERGEABLE; KSM off by default
    a = libc.mmap(None, N, RW, PR | AN, -1, 0); ctypes.memset(a, 0, N); libc.madvise(a, N, 12); time.sleep(1); out = [[a, N]]
else:
    raise SystemExit("no case " + case)
print(json.dumps(out), flush=True)
sys.stdin.readline()
'''

def main():
    from cudal1.bench.readers import HostMemory
    from cudal1.bench import pagemap
    cases = sys.argv[1:] or [
        "torch_zeros_like", "torch_zeros", "torch_empty_fill_thp", "numpy_zeros", "expand_view",
        "same_tensor_twice", "two_small_outputs_one_page", "prefaulted_private_anon",
        "never_written_private_anon", "never_written_memfd_shared", "never_written_memfd_private",
        "never_written_shared_anon", "never_written_devzero_shared", "never_written_tmpfs_file_private",
        "never_written_thp", "punched_memfd_after_write", "ksm_merged_zero",
    ]
    zf = pagemap.zero_frames()
    print("zero_frames", zf)
    for case in cases:
        p = subprocess.Popen([sys.executable, "-c", CHILD, case], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        try:
            ranges = json.loads(line)
        except Exception:
            print(case, "child failed", line); p.kill(); continue
        total = sum(r[1] for r in ranges)
        fd = os.memfd_create("buf"); os.ftruncate(fd, -(-total * 2 // 4096) * 4096 + 4096)
        hm = HostMemory(p.pid); hm.share(fd)
        at, rr = 0, []
        for r in ranges:
            rr.append([r[0], r[1], at] + r[2:]); at += -(-r[1] // 64) * 64
        res = hm.read(rr)
        # summary of the pagemap after the read
        summ = []
        for r in ranges:
            e = np.frombuffer(pagemap._read_entries(p.pid, r[0], r[1]), dtype=np.uint64)
            pres = (e >> np.uint64(63)) & np.uint64(1)
            file_ = (e >> np.uint64(61)) & np.uint64(1)
            pfn = (e & np.uint64(pagemap._PFN_BITS)).astype(np.int64)
            zero = (pfn == zf[0]) | ((pfn >= zf[1]) & (pfn < zf[2])) if zf else np.zeros_like(pfn, bool)
            summ.append(dict(pages=int(e.size), present=int(pres.sum()), file_or_shared=int(file_.sum()),
                             zero=int(zero.sum()), distinct=int(np.unique(pfn[pres == 1]).size)))
        print(f"{case:36s} rule={res[2] if res[0] is None else res[:2]}  {summ}", flush=True)
        p.stdin.write("\n"); p.stdin.flush(); p.wait()

main()
