"""Replay: paid speedup of recorded evaluations under the current floor and under a tight cap
(calibration reference median + the floor's allowance, not + a jitter)."""
import glob, gzip, json, math, statistics as st, sys
sys.path.insert(0, "benchmarks")
from cudal1.bench import timing
from cudal1.bench.judge import AFTER_CANDIDATE

def load(path):
    for l in gzip.open(path).read().decode().splitlines():
        d = json.loads(l)
        yield (d.get("kind"), d["result"]) if "result" in d else ("self", d)

def paid(r, rule):
    rt = r.get("round_trips") or {}
    w = lambda k: [t["wall_ms"] for t in rt.get(k, [])]
    cal = list(zip(w("calibration one-call candidate"), w("calibration one-call reference")))
    trips = list(zip(w("one-call candidate"), w("one-call reference")))
    after = w(AFTER_CANDIDATE + "reference")
    if not cal or not trips or not r.get("reference") or not r.get("candidate"):
        return None
    ref = min(r["reference"]["median_ms"], r.get("baseline_ms") or math.inf)
    bias = [c - x for c, x in cal]
    allow = 1.0 * timing.jitter(bias) * (1 / math.sqrt(len(trips)) + 1 / math.sqrt(len(bias)))
    if rule == "now":
        floor, _ = timing.one_call_floor_ms(trips, cal, ref, 1.0, True, after_reference_ms=after)
    else:
        cap = st.median([x for _, x in cal]) + allow
        if rule == "tight+after" and after:
            cap = max(cap, st.median(after) + allow)
        d = [c - min(x, cap) for c, x in trips]
        floor = max(ref + st.median(d) - st.median(bias) - allow, 0.0)
    # candidate's recorded per-call median is already floored as judged: unfloor is impossible; use
    # the larger of it and the new floor for "stricter" rules only
    cand = r["candidate"]["median_ms"]
    if rule != "now":
        now_floor, _ = timing.one_call_floor_ms(trips, cal, ref, 1.0, True, after_reference_ms=after)
        if now_floor >= cand - 1e-6:  # floored as judged: the batched figure is unknown, take the new floor
            cand = max(floor, 0.0)  # (a cheat's batched figure is far below any floor)
        else:
            cand = max(cand, floor)
    return r["reference"]["median_ms"] / cand if cand > 0 else None

rows = []
lean = ["docs/results/h200-2026-12-07-forty-first/4-lean-one-call/lean1-records.jsonl.gz", "docs/results/h100-2026-12-07-fortieth/4-lean-one-call/records.jsonl.gz"]
for f in sorted(glob.glob("docs/results/*/*/guard-trips/*.jsonl.gz")) + sorted(glob.glob("docs/results/*/*/self-records.jsonl.gz")) + lean:
    for kind, r in load(f):
        kind = "lean" if f in lean else (kind or "self")
        if r.get("status") != "ok" or r.get("backend") != "cuda":
            continue
        v = {rule: paid(r, rule) for rule in ("now", "tight", "tight+after")}
        if v["now"] is None:
            continue
        rows.append((f.split("/")[2][:28], kind[:22], r["task_id"], r.get("speedup"), v))
for name, group in (("cheats", [x for x in rows if x[1] not in ("self", "lean")]), ("honest self", [x for x in rows if x[1] == "self"]), ("lean hosts, sin_chain", [x for x in rows if x[1] == "lean"])):
    print(name, len(group))
    for rule in ("now", "tight", "tight+after"):
        xs = [x[4][rule] for x in group]
        print(f"  {rule:12s} min {min(xs):.3f} median {st.median(xs):.3f} max {max(xs):.3f}  >1.25: {sum(x > 1.25 for x in xs)}  <0.95: {sum(x < 0.95 for x in xs)}")
for x in rows:
    if x[1] == "lean":
        print(x[0], x[1], x[2], round(x[3], 3), {k: round(v, 3) for k, v in x[4].items()})
