"""Peak RSS of every process of one judged CPU evaluation (the reference as its own candidate on
an N x N relu, K=1), and the candidate host's RSS after each round trip when host.py prints it
(a MEMDBG line, added by hand for the diagnosis): how the 2026-12-02 sixth session found that
nested-output matching held every call's output. Run from the repository root:

    N=8192 python docs/results/h200-2026-12-02-sixth/cpu_memory_probe.py    (OUT=small: x.sum(1))
"""
import os, sys, threading, time, tempfile, psutil, json
sys.path.insert(0, os.getcwd())
from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings
from cudal1.tasks.task import Task
N = int(os.environ.get("N", "8192"))
OUT = os.environ.get("OUT", "big")
task = Task(level=1, problem_id=899, name="relu_huge", source=f'''import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) if OUT == 'big' else x.sum(dim=1)
OUT = '{OUT}'
def get_inputs():
    return [torch.randn({N}, {N})]
def get_init_inputs():
    return []
''')
src = task.source + "\n\nModelNew = Model\n"
peak = {}
stop = False
def watch():
    me = psutil.Process()
    while not stop:
        for p in me.children(recursive=True):
            try:
                rss = p.memory_info().rss
                name = " ".join(p.cmdline())[-60:]
                key = p.pid
                if rss > peak.get(key, (0, ""))[0]:
                    peak[key] = (rss, name)
            except Exception:
                pass
        time.sleep(0.02)
t = threading.Thread(target=watch, daemon=True); t.start()
s = EvalSettings.for_backend("cpu", rounds=2, calls_per_round=1, cache_dir=tempfile.mkdtemp(), memory_limit_mib=16000, wall_timeout_s=300)
r = evaluate(task, src, "cpu", settings=s)
stop = True; t.join()
print(r.status.value, r.message[:200], "K", r.calls_per_round)
tensor_mb = N * N * 4 / 2**20
for pid, (rss, name) in sorted(peak.items(), key=lambda kv: -kv[1][0])[:4]:
    print(f"pid {pid}: peak RSS {rss/2**20:.0f} MiB = {rss/2**20/tensor_mb:.1f} tensors | {name}")
print("\n".join(l for l in r.log.splitlines() if "MEMDBG" in l)[:3000])
