"""What a candidate host gains in the one-call floor by skipping the stock host's habits (CUDA).

The one-call floor (`cudal1.bench.timing.one_call_floor_ms`) credits a candidate with how much
shorter its host's one-call round trips are than the reference host's, less the two stock hosts'
difference in the calibration. A host the candidate changes after the calibration is credited
with whatever it stops doing. Each variant here is sin_chain's `ModelNew` (48 small operators,
launch-bound, computed call by call: nothing batched) in a host changed in one way:

    honest             the stock host (the control)
    spin               polls its socket between round trips instead of sleeping in select
    noevents           times no forward of its own (no CUDA events) in any round trip
    lean               answers with the forwards, one synchronize and the output locations only
    lean_spin          lean, and polls its socket all the time
    lean_direct_spin   lean_spin, calling the chain itself rather than through the module

Per evaluation: the median one-call gap (candidate host - reference host, ms) in the calibration
(both hosts stock, running the reference) and in the timing pass, and `gain` = pass - calibration
(negative: the variant's one-call round trips shortened by that much against the stock host's).
A last line per variant gives its gains, and "CHECK_LEAN_ONE_CALL PASS" when every variant's
median gain is within `--limit-ms` of the honest control's (default 0.035 ms, a tenth of
sin_chain's 0.35 ms call on an H100), else FAIL. A limit: one evaluation's gain moved by about
±0.04 ms on an H100, so two evaluations a variant tell a 0.1 ms gain from none, not a 0.03 ms one.
Results: docs/benchmarks.md.

    PYTHONPATH=. python3 benchmarks/lean_one_call.py [--variants honest,lean_spin] [--reps 2]
        [--budget-s 240] [--one-call 300] [--records FILE] [--set FIELD=VALUE ...]

BACKEND=cpu runs the variants on the CPU (where one-call rounds are off and the changed handlers
step aside): a smoke run of the script, no figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from evalkit import SIN_CHAIN  # noqa: E402

from cudal1.bench.evaluator import evaluate  # noqa: E402
from cudal1.bench.settings import EvalSettings, add_overrides_argument  # noqa: E402

HEAD = """
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
"""

LEAN = """
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
"""

NOEVENTS = """
def untimed(sets, place, own=True):
    outs = [host.model(*args) for args in sets]
    place(outs)
    host._sync()
    return [0.0] * len(sets), outs


if host.cuda:
    host._timed_forwards = untimed
"""

SPIN = "host.chan._wait = spin\n"

VARIANTS = {
    "honest": "",
    "spin": SPIN,
    "noevents": NOEVENTS,
    "lean": LEAN.replace("FORWARD", "host.model"),
    "lean_spin": LEAN.replace("FORWARD", "host.model") + SPIN,
    "lean_direct_spin": LEAN.replace("FORWARD", "chain") + SPIN,
}


def source(variant: str) -> str:
    """The candidate source of `variant` (one of `VARIANTS`). Raises KeyError for another name."""
    return HEAD + VARIANTS[variant]


def one_call_gaps(round_trips: dict[str, list[dict]]) -> dict[str, float]:
    """From an evaluation's `round_trips`: the median one-call gap (candidate host's round trip
    minus the reference host's, ms, pair by pair) in the calibration ("cal") and in the timing
    pass ("pass"), and "gain" = pass - cal; NaN where a phase has no one-call round trips."""

    def gap(a: str, b: str) -> float:
        pairs = [x["wall_ms"] - y["wall_ms"] for x, y in zip(round_trips.get(a, []), round_trips.get(b, []))]
        return statistics.median(pairs) if pairs else float("nan")

    cal = gap("calibration one-call candidate", "calibration one-call reference")
    run = gap("one-call candidate", "one-call reference")
    return {"cal": cal, "pass": run, "gain": run - cal}


def verdict(gains: dict[str, list[float]], limit_ms: float) -> tuple[bool, str]:
    """(passed, the verdict line): each variant's median gain (ms) against the honest control's;
    passed when none is more than `limit_ms` below it. Raises KeyError without an honest entry."""
    control = statistics.median(gains["honest"])
    worst = min((statistics.median(v) - control, k) for k, v in gains.items() if k != "honest")
    ok = worst[0] >= -limit_ms
    return ok, (
        f"CHECK_LEAN_ONE_CALL {'PASS' if ok else 'FAIL'} (largest gain over the honest host: {worst[1]} "
        f"{-worst[0]:.4f} ms, limit {limit_ms} ms)"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=240.0, help="start no evaluation after this many seconds")
    p.add_argument("--one-call", type=int, default=300, help="one-call rounds in the calibration and each pass")
    p.add_argument("--limit-ms", type=float, default=0.035)
    p.add_argument("--records", help="append every evaluation's whole result here (JSON lines)")
    add_overrides_argument(p, example="warm_go=false")
    args = p.parse_args()
    names = args.variants.split(",")
    backend = os.environ.get("BACKEND", "cuda")
    settings = EvalSettings.for_backend(
        backend,
        **{
            "rounds": 3,
            "max_rounds": 8,
            "calls_per_round": 10,
            "one_call_rounds": args.one_call if backend == "cuda" else 0,
            "one_call_share": 0.0,
            **args.set,
        },
    )
    records = open(args.records, "a") if args.records else None
    started, gains = time.time(), {}
    order = [name for rep in range(args.reps) for name in (names if rep % 2 == 0 else names[::-1])]
    for i, name in enumerate(order):
        if time.time() - started > args.budget_s:
            print(
                f"budget of {args.budget_s} s spent: {len(order) - i} of {len(order)} evaluations not run", flush=True
            )
            break
        t0 = time.time()
        r = evaluate(SIN_CHAIN, source(name), backend, settings=settings)
        row = {"variant": name, "status": r.status.value, "speedup": r.speedup, "s": round(time.time() - t0, 1)}
        if backend == "cuda":
            row |= {k: round(v, 4) for k, v in one_call_gaps(r.round_trips or {}).items()}
            gains.setdefault(name, []).append(row["gain"])
        print(json.dumps(row), flush=True)
        if records:
            records.write(json.dumps({"variant": name, "result": r.to_dict()}) + "\n")
            records.flush()
    if records:
        records.close()
    for name, g in gains.items():
        print(f"{name:18s} gain (pass - calibration), ms: " + " ".join(f"{x:+.4f}" for x in g))
    if backend != "cuda":
        return 0
    if "honest" not in gains or len(gains) < 2:
        print("CHECK_LEAN_ONE_CALL FAIL (no honest control or no variant evaluated)")
        return 1
    ok, line = verdict(gains, args.limit_ms)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
