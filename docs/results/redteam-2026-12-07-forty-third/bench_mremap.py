"""Cost of the moved-input trick's steps in a plain process (a memfd slot mapped with MAP_POPULATE,
as the host maps it)."""
import ctypes, mmap, os, time, sys
sys.path.insert(0, ".")
import torch
sys.argv = ["x"]
import importlib.util
spec = importlib.util.spec_from_file_location("c", "candidates/moved_input_pages_colmean.py")
c = importlib.util.module_from_spec(spec); spec.loader.exec_module(c)
torch.set_num_threads(1)
m = c.ModelNew()
NB = c.NB
ts = {"forward": [], "honest": [], "unmap_old": []}
keep = []
for i in range(60):
    fd = os.memfd_create("slot"); os.ftruncate(fd, NB)
    t0 = time.perf_counter()
    mm = mmap.mmap(fd, NB, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    x = torch.frombuffer(mm, dtype=torch.float32).view(2048, 2048)
    x.normal_()
    t1 = time.perf_counter(); ref = c._honest(x); t2 = time.perf_counter()
    out = m(x); t3 = time.perf_counter()
    assert torch.equal(out, ref)
    ts["honest"].append(t2 - t1); ts["forward"].append(t3 - t2)
    keep.append(out)
    del x
    t4 = time.perf_counter(); mm.close(); ts["unmap_old"].append(time.perf_counter() - t4)
for k, v in ts.items():
    v = sorted(v)[5:-5] or sorted(v)
    print(k, "median ms", round(1000 * v[len(v) // 2], 3))
