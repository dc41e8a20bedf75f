"""Sketch of a fix: what /proc/<pid>/pagemap says about each page of an output range, as root,
after the judge-style read (process_vm_readv faults never-written pages in as the zero page).
Counts pages: not present, the shared zero page, file/shared-anon (bit 61), private (anon-exclusive)."""
import ctypes, mmap, os, struct, sys, json
sys.path.insert(0, "/work/main/docs/results/redteam-2026-12-07-forty-third")
import probe_backing as pb

P = 4096
libc = pb.libc

def entries(pid, addr, n):
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(addr // P * 8)
        data = f.read(8 * ((addr + n + P - 1) // P - addr // P))
    return struct.unpack(f"{len(data)//8}Q", data)

def zero_pfn():
    m = mmap.mmap(-1, P, mmap.MAP_PRIVATE)
    a = ctypes.addressof(ctypes.c_char.from_buffer(m))
    _ = m[0]  # read fault: the zero page
    e = entries(os.getpid(), a, P)[0]
    return e & ((1 << 55) - 1)

Z = zero_pfn()

class IoVec(ctypes.Structure):
    _fields_ = [("b", ctypes.c_void_p), ("n", ctypes.c_size_t)]

def classify(pid, addr, n):
    buf = ctypes.create_string_buffer(n)
    lv, rv = IoVec(ctypes.addressof(buf), n), IoVec(addr, n)
    libc.process_vm_readv(pid, ctypes.byref(lv), 1, ctypes.byref(rv), 1, 0)
    c = {"absent": 0, "zero": 0, "file_or_shared": 0, "private": 0}
    for e in entries(pid, addr, n):
        if not e >> 63 & 1:
            c["absent"] += 1
        elif (e & ((1 << 55) - 1)) == Z:
            c["zero"] += 1
        elif e >> 61 & 1:
            c["file_or_shared"] += 1
        else:
            c["private"] += 1
    return c

def run(case):
    r, w = os.pipe(); go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        addr, n = case()
        os.write(w, json.dumps([addr, n]).encode()); os.read(go_r, 1); os._exit(0)
    addr, n = json.loads(os.read(r, 4096))
    res = classify(pid, addr, n)
    os.write(go_w, b"x"); os.waitpid(pid, 0)
    return res

print("zero pfn", Z)
for name in ["c_zero_page", "c_dontunmap", "c_memfd_twice", "c_memfd_moved_once", "c_honest_share_memory",
             "c_honest_from_file_private_twice", "c_honest_file_private_written_twice_mapped"]:
    print(f"{name[2:]:40s}", run(getattr(pb, name)), flush=True)
