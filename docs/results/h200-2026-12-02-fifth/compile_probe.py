"""torch.compile in the judge's candidate host: per-call times measured inside the host (CUDA events), on the
slot's view and on a fresh copy, compiled and eager, every 4th call.

    PYTHONPATH=$PWD python3 compile_probe.py level2/1 level2/20   (needs .kb/KernelBench)
"""
import os, sys, tempfile
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
def _ms(fn, *a):
    s, e = _t.cuda.Event(enable_timing=True), _t.cuda.Event(enable_timing=True)
    _t.cuda.synchronize(); s.record(); out = fn(*a); e.record(); e.synchronize()
    return out, s.elapsed_time(e)
def _probe_forward(self, *a, **k):
    _calls[0] += 1
    out, view_ms = _ms(lambda *x: _orig_forward(self, *x), *a)
    if _calls[0] % 4 == 0:
        fresh = [x.clone() if isinstance(x, _t.Tensor) else x for x in a]
        _, fresh_ms = _ms(lambda *x: _orig_forward(self, *x), *fresh)
        _, eager_ms = _ms(lambda *x: Model.forward(self, *x), *fresh)
        _, eager_view_ms = _ms(lambda *x: Model.forward(self, *x), *a)
        d = _cudal1_os.environ.get("TORCH_EXTENSIONS_DIR", "/tmp")
        with open(_cudal1_os.path.join(d, "probe_ms.txt"), "a") as f:
            f.write(f"call {_calls[0]} compiled view {view_ms:.3f} fresh {fresh_ms:.3f} | eager view {eager_view_ms:.3f} fresh {eager_ms:.3f} "
                    f"grad {_t.is_grad_enabled()} inference {_t.is_inference_mode_enabled()} modes {_t._C._len_torch_function_stack()} "
                    f"tf32 {_t.backends.cudnn.allow_tf32} {_t.backends.cuda.matmul.allow_tf32} bench {_t.backends.cudnn.benchmark} "
                    f"threads {_t.get_num_threads()} stream {_t.cuda.current_stream()}\\n")
    return out
ModelNew.forward = _probe_forward
'''
for tid in sys.argv[1:] or ["level2/1"]:
    t = find_task(ts, tid)
    src = compile_candidate(t.source) + PROBE
    r = evaluate(t, src, "cuda", settings=st)
    print(tid, r.status.value, r.speedup, "K", r.calls_per_round, "ref", r.reference and r.reference.median_ms,
          "cand", r.candidate and r.candidate.median_ms, r.labels, (r.message or "")[:300], flush=True)
    path = os.path.join(extensions_dir(st, device_info("cuda:0")["arch"], src), "probe_ms.txt")
    lines = open(path).read().splitlines() if os.path.exists(path) else [f"no {path}"]
    print("\n".join(lines[:6] + ["..."] + lines[-6:]), flush=True)
