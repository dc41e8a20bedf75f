"""Builds made in __init__ and in the first forward, on a CUDA machine (torch, psutil, tqdm only).

Three builtin CUDA seeds are rewritten so that their `load_inline` runs in ModelNew.__init__ or
at the start of the first forward instead of at import, plus one whose CUDA source does not
compile, built in __init__. Each is salted (a fresh source, so a cold build) and goes through:

1. `prebuild` (the build, untimed, no GPU): its wall time and the build seconds it recorded;
2. `evaluate`: status, speedup, build_seconds, the import phase and the prebuild phase, and
   whether the evaluation compiled anything (the build's .so files untouched);
3. for the failing one, a second prebuild and an `evaluate` with no prebuild before it: both must
   fail at once as compile_error, without running nvcc again.

    python3 scripts/gpu_build_in_init.py [--out build_in_init.json]

Expected: prebuild builds every extension (build seconds 15-60 s each, the compile), every
evaluation is ok with an import phase under ~2 s, `compiled in evaluation: False`, and its
build_seconds about the prebuild's; the broken one is compile_error from its prebuild after one
nvcc run, then compile_error in under ~5 s (prebuild and evaluation) with "not rebuilt".
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudal1.bench.evaluator import device_info, evaluate, extensions_dir, prebuild  # noqa: E402
from cudal1.bench.settings import EvalSettings  # noqa: E402
from cudal1.tasks import find_task, load_tasks, seed_solutions  # noqa: E402


def moved(source: str, where: str) -> str:
    """`source` (a seed that builds `_ext` at import) with the build moved into __init__ or the
    first forward. The module-level `_ext = load_inline(...)` becomes a function (a lambda: the
    call's parentheses carry it over several lines); `_ext` starts as None."""
    if source.count("_ext = load_inline(") != 1:
        raise ValueError("expected one `_ext = load_inline(` in the seed")
    out = source.replace("_ext = load_inline(", "_ext = None\n_build = lambda: load_inline(")
    hook = "        global _ext\n        if _ext is None:\n            _ext = _build()\n"
    if where == "init":
        out, n = re.subn(
            r"(class ModelNew\(.*?\n(?:.*\n)*?        super\(\).__init__\(\)\n)", lambda m: m.group(1) + hook, out, 1
        )
    else:
        out, n = re.subn(
            r"(class ModelNew\(.*?\n(?:.*\n)*?    def forward\(self.*\n)", lambda m: m.group(1) + hook, out, 1
        )
    if n != 1:
        raise ValueError(f"could not place the build in {where}")
    return out


def objects(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*.so")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    settings = EvalSettings.for_backend("cuda")
    tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
    salt = f"\n# build-in-init check {time.time_ns()}\n"
    cases = [("level1/12", "init"), ("level1/7", "forward"), ("level2/5", "forward")]
    arch = device_info("cuda:0")["arch"]
    report: dict = {"cases": []}
    for tid, where in cases:
        task = find_task(tasks, tid)
        source = moved(seeds[tid].read_text(), where) + salt
        t0 = time.perf_counter()
        failed = prebuild(task, source, "cuda", settings)
        pre_s = time.perf_counter() - t0
        folder = extensions_dir(settings, arch, source)
        before = objects(folder)
        r = evaluate(task, source, "cuda", settings=settings)
        row = {
            "task": tid,
            "build_in": where,
            "prebuild": "ok" if failed is None else failed.status.value,
            "prebuild_wall_s": round(pre_s, 1),
            "built_objects": len(before),
            "status": r.status.value,
            "speedup": r.speedup,
            "build_seconds": r.build_seconds,
            "import_s": r.phases_s.get("import"),
            "prebuild_s": r.phases_s.get("prebuild"),
            "compiled_in_evaluation": objects(folder) != before,
            "message": r.message[:200],
        }
        report["cases"].append(row)
        print(json.dumps(row))

    # A CUDA build that fails in __init__: compiled once, then failed at once.
    tid = "level1/13"
    task = find_task(tasks, tid)
    broken = moved(seeds[tid].read_text(), "init").replace("__global__", "__global__ not_a_type", 1) + salt
    runs = []
    for what in ("prebuild", "prebuild again", "evaluate"):
        t0 = time.perf_counter()
        r = (
            prebuild(task, broken, "cuda", settings)
            if what.startswith("prebuild")
            else evaluate(task, broken, "cuda", settings=settings)
        )
        runs.append(
            {
                "run": what,
                "status": r.status.value if r else "ok",
                "wall_s": round(time.perf_counter() - t0, 1),
                "build_seconds": r.build_seconds if r else None,
                "not_rebuilt": bool(r and "not rebuilt" in r.message),
                "message": (r.message if r else "")[:160],
            }
        )
        print(json.dumps(runs[-1]))
    report["failing_build"] = runs
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
