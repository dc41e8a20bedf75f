"""The judge's per-thread reading (`worker._thread_cpu_ns`) across an execve by a non-leader thread:
the exec'ing thread takes the leader's tid, so (pid, pid)'s run time jumps by that thread's own
history (spun before the 'start' reading). Prints the busiest delta the judge would compute and
the process's real CPU time in the interval."""
import os, subprocess, sys, time
sys.path.insert(0, "/work/main")
from cudal1.bench import worker

HELPER = r"""
import os, sys, threading, time
def t():
    s = time.thread_time()
    while time.thread_time() - s < 0.15: pass
    os.write(1, b"r\n"); sys.stdin.read(1)
    os.execv("/bin/sleep", ["sleep", "30"])
th = threading.Thread(target=t); th.start(); th.join()
"""
p = subprocess.Popen([sys.executable, "-S", "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
p.stdout.readline()
start = worker._thread_cpu_ns([p.pid]); cpu0 = worker._process_cpu_ns(p.pid); t0 = time.perf_counter()
p.stdin.write(b"g"); p.stdin.flush()
time.sleep(0.02)
end = worker._thread_cpu_ns([p.pid]); cpu1 = worker._process_cpu_ns(p.pid); t1 = time.perf_counter()
busiest = max(max(ns - start.get(k, 0), 0) for k, ns in end.items())
print(f"start threads {start}\nend threads {end}")
print(f"interval {1e3*(t1-t0):.1f} ms, busiest delta {busiest/1e6:.1f} ms, process CPU clock delta {(cpu1-cpu0)/1e6:.1f} ms")
p.kill(); p.wait()
