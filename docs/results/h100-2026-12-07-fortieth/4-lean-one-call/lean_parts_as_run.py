"""Which part of the honest CUDA host's one-call round trip a lean host skips (diagnosis).

Each variant is sin_chain's ModelNew (per-call forwards, no batching) in a host whose call
handler is changed in one way; per evaluation: the median one-call gap (candidate - reference
host) in the calibration (both hosts honest, running the reference) and in the pass, and
their difference (what the variant gains in the floor)."""
import json, os, statistics as st, sys, time
sys.path.insert(0, "tests/bench")
from evalkit import SIN_CHAIN
from cudal1.bench.evaluator import evaluate
from cudal1.bench.settings import EvalSettings

HEAD = '''
import select, sys, torch, torch.nn as nn
def chain(y):
    for _ in range(16):
        y = torch.sin(y) * 0.5 + y
    return y
class ModelNew(nn.Module):
    def forward(self, x):
        return chain(x)
def _host():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    return f.f_locals["handlers"], f.f_locals["self"]
handlers, host = _host()
def spin(deadline, spinning=False):
    while not select.select([host.chan.sock], [], [], 0)[0]:
        pass
'''
LEAN = '''
inner = handlers["call"]
def lean(msg):
    if not host.cuda:
        return inner(msg)
    host._map_inputs(msg)
    with torch.no_grad():
        outs = [FORWARD(*args) for args in host.sets]
    torch.cuda.synchronize()
    host.previous = outs
    leaves = [[host._locate(o, host.out_specs[0])] for o in outs]
    host.chan.send("done", k=msg["k"], leaves=leaves, values=[[] for _ in outs], mismatch=None, hack=None, error=None)
    host.chan.send("audited", hack=None)
handlers["call"] = lean
'''
NOEVENTS = '''
def tf(sets, place):
    outs = [host.model(*args) for args in sets]
    place(outs)
    host._sync()
    return [0.0] * len(sets), outs
if host.cuda:
    host._timed_forwards = tf
'''
VARIANTS = {
    "honest": "",
    "spin": "host.chan._wait = spin\n",
    "lean": LEAN.replace("FORWARD", "host.model"),
    "lean_spin": LEAN.replace("FORWARD", "host.model") + "host.chan._wait = spin\n",
    "lean_direct_spin": LEAN.replace("FORWARD", "chain") + "host.chan._wait = spin\n",
    "noevents": NOEVENTS,
}

def gaps(r):
    rt = r.round_trips or {}
    def g(a, b):
        return st.median([x["wall_ms"] - y["wall_ms"] for x, y in zip(rt.get(a, []), rt.get(b, []))] or [float("nan")])
    def m(k):
        return st.median([x["wall_ms"] for x in rt.get(k, [])] or [float("nan")])
    def parts(k):
        out = {}
        for t in rt.get(k, []):
            for a, b in (t.get("host_parts_ms") or {}).items():
                out.setdefault(a, []).append(b)
        ans = st.median([t["answered_ms"] for t in rt.get(k, []) if t.get("answered_ms") is not None] or [float("nan")])
        return {a: round(st.median(b), 4) for a, b in out.items()} | {"answered": round(ans, 4)}
    cal = g("calibration one-call candidate", "calibration one-call reference")
    pas = g("one-call candidate", "one-call reference")
    return {"cal": round(cal, 4), "pass": round(pas, 4), "gain": round(pas - cal, 4),
            "ref_cal": round(m("calibration one-call reference"), 4), "ref_pass": round(m("one-call reference"), 4),
            "cand_pass": round(m("one-call candidate"), 4), "cand_parts": parts("one-call candidate"),
            "ref_parts": parts("one-call reference")}

def main():
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(VARIANTS)
    reps = int(os.environ.get("REPS", "2"))
    budget = float(os.environ.get("BUDGET_S", "240"))
    n1 = int(os.environ.get("ONE_CALL", "300"))
    backend = os.environ.get("BACKEND", "cuda")
    s = EvalSettings.for_backend(backend, rounds=3, max_rounds=8, calls_per_round=10,
                                 one_call_rounds=n1 if backend == "cuda" else 0, one_call_share=0.0)
    out = open(os.environ.get("OUTF", "/dev/null"), "a")
    t0 = time.time()
    rows = {}
    for rep in range(reps):
        for name in (names if rep % 2 == 0 else names[::-1]):
            if time.time() - t0 > budget:
                print("budget spent", flush=True); break
            a = time.time()
            r = evaluate(SIN_CHAIN, HEAD + VARIANTS[name], backend, settings=s)
            row = {"variant": name, "status": r.status.value, "speedup": r.speedup, "s": round(time.time() - a, 1)}
            if backend == "cuda":
                row |= gaps(r)
            print(json.dumps(row), flush=True)
            out.write(json.dumps({"variant": name, "result": r.to_dict()}) + "\n"); out.flush()
            rows.setdefault(name, []).append(row)
    for name, rs in rows.items():
        if backend == "cuda":
            print(f"SUMMARY {name:18s} gain(pass-cal) " + " ".join(f"{x['gain']:+.4f}" for x in rs)
                  + " | pass " + " ".join(f"{x['pass']:+.4f}" for x in rs) + " | " + str([x['status'] for x in rs]))
main()
