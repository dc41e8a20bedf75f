"""Dynamo's counters as a torch.compile candidate sees them inside the judge's candidate host.

    PYTHONPATH=$PWD python3 compile_counters.py level2/1   (needs .kb/KernelBench)
"""
import json, os, sys, tempfile
from cudal1.bench.evaluator import evaluate, extensions_dir, device_info
from cudal1.bench.baselines import compile_candidate
from cudal1.bench.settings import EvalSettings
from cudal1.tasks import load_suite, find_task

st = EvalSettings.for_backend("cuda", cache_dir=tempfile.mkdtemp())
ts = load_suite(".kb/KernelBench", levels=[1, 2], profile="cuda").tasks
PROBE = '''
import torch as _t
_orig_forward = ModelNew.forward
_calls = [0]
def _probe_forward(self, *a, **k):
    _calls[0] += 1
    out = _orig_forward(self, *a, **k)
    if _calls[0] in (1, 2, 5, 20, 60, 200):
        from torch._dynamo.utils import counters
        d = _cudal1_os.environ.get("TORCH_EXTENSIONS_DIR", "/tmp")
        with open(_cudal1_os.path.join(d, "dynamo_counters.txt"), "a") as f:
            f.write(f"pid {_cudal1_os.getpid()} call {_calls[0]}: " + repr({k: dict(v) for k, v in counters.items() if v}) + "\\n")
            f.write("  inputs: " + repr([(x.data_ptr() % 256, x.storage_offset(), tuple(x.shape), x.stride(), x.is_contiguous()) for x in a if isinstance(x, _t.Tensor)]) + "\\n")
    return out
ModelNew.forward = _probe_forward
'''
for tid in sys.argv[1:] or ["level2/1"]:
    t = find_task(ts, tid)
    src = compile_candidate(t.source) + PROBE
    r = evaluate(t, src, "cuda", settings=st)
    print(tid, r.status.value, r.speedup, "K", r.calls_per_round, "ref", r.reference and r.reference.median_ms,
          "cand", r.candidate and r.candidate.median_ms, r.labels, (r.message or "")[:300], flush=True)
    path = os.path.join(extensions_dir(st, device_info("cuda:0")["arch"], src), "dynamo_counters.txt")
    print(open(path).read() if os.path.exists(path) else f"no {path}")
    print("log tail:", (r.log or "")[-3000:])
