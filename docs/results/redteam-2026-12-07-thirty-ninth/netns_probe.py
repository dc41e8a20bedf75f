import os, ctypes, time, sys, resource
N = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def cpu():
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f)); return sum(v) - v[3] - v[4]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setgid(65534); os.setgroups([]); os.setuid(54321)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    assert libc.unshare(0x10000000) == 0
    fds = []
    t = time.time()
    for i in range(N):
        if libc.unshare(0x40000000) != 0: print("fail", ctypes.get_errno()); break
        fds.append(os.open("/proc/self/ns/net", os.O_RDONLY))
    print("made", len(fds), "in", round(time.time() - t, 2), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
t0 = time.time(); c0 = cpu()
for i in range(12):
    time.sleep(0.25)
    c = cpu(); print(f"t={time.time()-t0:.2f}s busy jiffies since exit {c-c0}", flush=True)
