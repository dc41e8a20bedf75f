import sys, time, tempfile, pathlib, json
sys.path.insert(0, "/work/main/tests/bench"); sys.path.insert(0, "/work/main/tests")
import evalkit
from cudal1.bench.evaluator import evaluate
from test_redteam import PAD_ROWS
HERE = pathlib.Path(__file__).parent
def src(name, **tok):
    p = HERE / f"{name}.py"
    if p.exists():
        t = p.read_text()
        for k, v in tok.items(): t = t.replace(f"__{k.upper()}__", str(v))
        return t
    return evalkit.candidate(name, **tok)
def go(task, name, tok=None, **ov):
    ov = {"rounds": 6, "max_calls_per_round": 4, "calls_per_round": 2, **ov}
    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        r = evaluate(task, src(name, **(tok or {})), "cpu", settings=evalkit.settings(pathlib.Path(d), **ov))
        wall = time.time() - t0
    line = dict(name=name, tok=tok, status=r.status.value, kind=r.hack_kind.value if r.hack_kind else None,
                speedup=r.speedup, wall_s=round(wall, 2), msg=(r.message or "")[:300],
                wrapped="RING WRAPPED" in r.log, cand_ms=r.candidate.median_ms if r.candidate else None, ref_ms=r.reference.median_ms if r.reference else None, res_ms=r.resolution_ms, K=r.calls_per_round,
                stats=[l for l in r.log.splitlines() if l.startswith("STATS")][-1:])
    print(json.dumps(line), flush=True)
    return r
if __name__ == "__main__":
    import ast
    reps = int(sys.argv[1]); specs = ast.literal_eval(sys.argv[2])
    for rep in range(reps):
        for name, tok in specs:
            go(PAD_ROWS, name, tok)
