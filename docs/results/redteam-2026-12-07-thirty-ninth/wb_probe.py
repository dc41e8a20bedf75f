import os, time, subprocess, sys, torch
torch.set_num_threads(1)
x = torch.randn(16, 256)
def bench(n=200):
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); y=x
        for _ in range(16): y=torch.sin(y)*0.5+y
        ts.append((time.perf_counter()-t)*1e3)
    ts.sort(); return round(ts[len(ts)//2],4), round(ts[int(len(ts)*.9)],4)
print("idle", bench())
path = "/work/main/.scratch/redteam39/wbfile"
GB = float(sys.argv[1])
t=time.time()
# writer child writes GB gigabytes of dirty data then exits
pid = os.fork()
if pid == 0:
    fd = os.open(path, os.O_WRONLY|os.O_CREAT|os.O_TRUNC, 0o644)
    buf = os.urandom(1<<20)
    for i in range(int(GB*1024)): os.write(fd, buf)
    os._exit(0)
os.waitpid(pid, 0)
print("write took", round(time.time()-t,2))
for i in range(8):
    d = int(open("/proc/meminfo").read().split("Dirty:")[1].split()[0])//1024
    wbk = int(open("/proc/meminfo").read().split("Writeback:")[1].split()[0])//1024
    print(i, "dirty MiB", d, "wb", wbk, bench())
    time.sleep(0.5)
os.unlink(path)
