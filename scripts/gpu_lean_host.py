"""Issue 21 item 4 on a GPU: what a candidate host gains by answering leaner than the reference's.

The candidate (tests/bench/candidates/busy_poll_lean_host.py, with its socket spin on) replaces
its host's call handler: it spins on the socket instead of sleeping in select, runs the
forwards with no bookkeeping (no output checks, no parts record) and sends no per-call times, so
the judge counts it at its own clock less the round trip's typical fixed cost. The control is an
honest candidate of the same code. Both are evaluated in turn, `--pairs` times, on each task:

    matmul4096  relu(A @ B), float32 4096x4096 (a few ms a call on an H200)
    scale16m    x * 2 + 1 over 16 Mi float32 (about 0.1 ms a call: the fixed cost weighs most)

Prints one line per evaluation, a median line per task and a last line "CHECK_LEAN PASS" when on
every task the lean host's median speedup is at most `--gain` (default 1.02) times the honest
host's, else "CHECK_LEAN FAIL (...)". `--variants` adds lean hosts that keep one of the honest
host's habits (its own wait instead of the spin, a synchronize after every call) to tell what each
saving is worth (the verdict uses the first named), and `underclaim` the honest host reporting
its forwards' times times `--claim-factor` (0.9): every check done, figures the judge can believe,
so it keeps the tolerance (`timing.candidate_rounds_ms`); `--records FILE` appends every evaluation's
whole result (its round trips included) as JSON lines. BACKEND=cpu runs the same on the CPU
(smaller sizes). Results of 2026-12-03 (FAIL) and 2026-12-04 (PASS): docs/benchmarks.md.

    PYTHONPATH=. python3 scripts/gpu_lean_host.py [--pairs 5] [--gain 1.02] [--rounds 10] [--tasks scale16m] [--variants lean ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings, add_overrides_argument
from cudal1.tasks.task import Task

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = ROOT / "tests" / "bench" / "candidates"
BACKEND = os.environ.get("BACKEND", "cuda")
BIG = BACKEND == "cuda"


def _task(pid: int, name: str, forward: str, inputs: str) -> Task:
    src = textwrap.dedent(
        f"""
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, *args):
                {forward}

        def get_inputs():
            return {inputs}

        def get_init_inputs():
            return []
        """
    )
    return Task(level=1, problem_id=pid, name=name, source=src)


N = 4096 if BIG else 512
M = (1 << 24) if BIG else (1 << 20)
TASKS = {
    "matmul4096": _task(
        931,
        "LeanMatmul",
        "return torch.matmul(args[0], args[1]).relu()",
        f"[torch.randn({N}, {N}), torch.randn({N}, {N})]",
    ),
    "scale16m": _task(932, "LeanScale", "return args[0] * 2.0 + 1.0", f"[torch.randn({M})]"),
}
HONEST = {
    "matmul4096": "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return torch.matmul(a, b).relu()\n",
    "scale16m": "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2.0 + 1.0\n",
}


VARIANTS = {
    # name: (spins on its socket, synchronizes after every call rather than once at the end)
    "lean": (True, False),
    "lean-nospin": (False, False),
    "lean-percall": (True, True),
    "lean-nospin-percall": (False, True),
}
UNDERCLAIM = "underclaim"
"""The variant of the honest host that reports each forward's time times `--claim-factor`
(tests/bench/candidates/underclaiming_host.py): every check done, the figures believable."""


def _swap(src: str, old: str, new: str) -> str:
    """`src` with `old` replaced by `new`; raises ValueError when `old` is not there (the
    candidate file changed, and the variant would silently not be the one named)."""
    if old not in src:
        raise ValueError(f"busy_poll_lean_host.py no longer holds {old[:60]!r}")
    return src.replace(old, new)


def _with_task_model(src: str, task: str) -> str:
    """A candidate file's matmul model (both candidate files hold one) swapped for `task`'s."""
    if task == "scale16m":
        src = _swap(
            src,
            "def forward(self, a, b):\n        return torch.matmul(a, b).relu()",
            "def forward(self, x):\n        return x * 2.0 + 1.0",
        )
    return src


def lean_source(task: str, spin: bool = True, per_call_sync: bool = False) -> str:
    """The busy-polling lean host, its model swapped for the task's and its outputs located the
    way the host does on this backend (`Host._locate`: CUDA IPC on the GPU). `spin`: busy-poll
    the socket (else the host's own wait); `per_call_sync`: a device synchronize after each call
    (as the host does) rather than one after the round trip's last."""
    src = (CANDIDATES / "busy_poll_lean_host.py").read_text().replace("__SPIN__", str(spin))
    src = _with_task_model(src, task)
    # Where the outputs live, as the host itself says (a raw address is the CPU backend's form).
    src = _swap(
        src,
        'leaves=[[{"addr": o.data_ptr(), "strides": list(o.stride())}] for o in outs]',
        "leaves=[[host._locate(o, host.out_specs[0])] for o in outs]",
    )
    if per_call_sync:
        src = _swap(
            src,
            "outs = [host.model(*args) for args in host.sets]",
            "outs = [(host.model(*args), host._sync())[0] for args in host.sets]",
        )
    else:
        src = _swap(
            src,
            "outs = [host.model(*args) for args in host.sets]",
            "outs = [host.model(*args) for args in host.sets]\n            host._sync()",
        )
    return src


def underclaim_source(task: str, factor: float) -> str:
    """The unmodified host that reports each forward's time times `factor` (< 1: an under-claim),
    its model swapped for the task's."""
    if not 0 < factor <= 1:
        raise ValueError(f"the claim factor must lie in (0, 1], got {factor}")
    src = (CANDIDATES / "underclaiming_host.py").read_text().replace("__FACTOR__", repr(float(factor)))
    return _with_task_model(src, task)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--gain", type=float, default=1.02)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument(
        "--tasks", nargs="+", default=list(TASKS), choices=list(TASKS), help="the tasks to run (default all)"
    )
    p.add_argument("--records", default=None, help="write every evaluation's full result here (JSON lines)")
    p.add_argument(
        "--variants",
        nargs="+",
        default=["lean"],
        choices=sorted([*VARIANTS, UNDERCLAIM]),
        help="lean-host variants to hold against the honest host (the verdict uses the first)",
    )
    p.add_argument(
        "--claim-factor",
        type=float,
        default=0.9,
        help=f"the {UNDERCLAIM!r} variant reports its forwards' times times this (default 0.9)",
    )
    add_overrides_argument(p, example="warm_go=true")
    a = p.parse_args()
    overrides = dict(a.set)
    settings = EvalSettings.for_backend(
        BACKEND, rounds=a.rounds, cache_dir=tempfile.mkdtemp(prefix="cudal1-lean-"), **overrides
    )
    bad: list[str] = []
    for name in a.tasks:
        task = TASKS[name]
        codes = {"honest": "import torch\nimport torch.nn as nn\n\n" + HONEST[name]}
        codes.update(
            {
                v: underclaim_source(name, a.claim_factor) if v == UNDERCLAIM else lean_source(name, *VARIANTS[v])
                for v in a.variants
            }
        )
        xs: dict[str, list[float]] = {k: [] for k in codes}
        for i in range(a.pairs):
            for kind, code in codes.items():
                r = evaluate(task, code, BACKEND, settings=settings)
                if a.records:
                    with open(a.records, "a") as f:
                        f.write(json.dumps({"task": name, "pair": i, "kind": kind, "result": r.to_dict()}) + "\n")
                log = r.log or ""
                # The record keeps the log's tail only: with hundreds of one-call rounds the lean
                # host's banner is cut, its per-round "REAL ms" lines are not.
                marks = ("BUSY POLL LEAN HOST", "UNDERCLAIMING HOST", "REAL ms ")
                marked = kind == "honest" or any(m in log for m in marks)
                trips = r.round_trips.get("candidate") or []
                walls = [t["wall_ms"] / max(r.calls_per_round or 1, 1) for t in trips if t.get("wall_ms")]
                parts = [t.get("host_parts_ms") or {} for t in trips]
                desc = [part["locate"] for part in parts if "locate" in part]
                print(
                    f"    {name} {i} {kind}: K={r.calls_per_round} judge wall/K median "
                    f"{statistics.median(walls) if walls else float('nan'):.4f} ms, overhead {r.overhead_ms} ms, "
                    f"locate/round median {statistics.median(desc) if desc else float('nan'):.4f} ms",
                    flush=True,
                )
                ref = r.reference.median_ms if r.reference else float("nan")
                cand = r.candidate.median_ms if r.candidate else float("nan")
                print(
                    f"{name} {i} {kind}: {r.status.value} {r.speedup or 0:.4f}x ref {ref:.4f} ms "
                    f"cand {cand:.4f} ms resolution {r.resolution_ms} "
                    f"{'' if marked else '(lean host NOT in charge) '}{'' if r.status is Status.OK else r.message[:300]}",
                    flush=True,
                )
                if r.status is Status.OK and marked:
                    xs[kind].append(r.speedup)
        if not xs["honest"]:
            bad.append(f"{name}: no honest measurement")
            continue
        h = statistics.median(xs["honest"])
        print(f"{name}: honest median {h:.4f}x {[round(x, 3) for x in sorted(xs['honest'])]}", flush=True)
        for v in a.variants:
            if not xs[v]:
                bad.append(f"{name} {v}: no measurement")
                continue
            c = statistics.median(xs[v])
            print(
                f"{name}: {v} median {c:.4f}x {[round(x, 3) for x in sorted(xs[v])]}, {v}/honest {c / h:.4f}"
                f" (bound {a.gain})",
                flush=True,
            )
            if v == a.variants[0] and c > a.gain * h:
                bad.append(f"{name}: {v}/honest {c / h:.3f}")
    print("CHECK_LEAN PASS" if not bad else f"CHECK_LEAN FAIL ({'; '.join(bad)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
