"""Does the judge agree with a plain measurement? Two honest candidates per task, measured both ways.

For every chosen task (KernelBench levels from a checkout, and the builtin suite), two candidates
whose speed is known to be honest (`cudal1.bench.baselines`): the reference itself and
torch.compile of the reference (inductor, mode "default"). Each is evaluated by the judge
(`cudal1.bench.evaluator.evaluate`, the reward's own path, default settings of the backend), and
the same programs are timed in one plain process beside it (`cudal1.bench.inprocess`: CUDA events,
L2 flushed, fresh inputs every call, >= 100 interleaved calls in random order, medians; no
sandbox, for this trusted code only; it starts from a copy of the judge's inductor and Triton
caches of the compile baseline, so both time the same compiled kernels). The report
(`cudal1.bench.agreement`) gives per level the distribution of judge / in-process speedup, the
shares within ±5% and ±10%, the reference's share within 0.98-1.02x, the outliers with their
times on both sides, and a PASS/FAIL line per target (issue 20; over KernelBench levels 1 and 2
when they were run, else over all tasks run).

    # the H200 run (the GPU must be otherwise idle):
    python benchmarks/agreement.py --backend cuda --kernelbench /path/to/KernelBench --levels 1 2 \\
        --builtin --time-budget-s 220 --out agreement.json
    # a CPU smoke run on this machine (KernelBench at batch_size 2, its own sizes are GPU-sized):
    python benchmarks/agreement.py --backend cpu --builtin --kernelbench /work/kernelbench/KernelBench \\
        --levels 1 --batch-size 2 --tasks builtin/level1/12 builtin/level2/1 kernelbench/level1/19

Tasks run level by level in turn (level 1, level 2, builtin, level 1, ...), so a run cut short by
`--time-budget-s` still covers every group. A task is started only when the time left exceeds the
slowest task so far; what was done is reported and written to `--out` (after every task, so an
interrupted run leaves its records too). `--resume FILE` skips the tasks a previous `--out` holds
and reports them together with the new ones. Progress goes to stderr, the report to stdout.
Imports only torch, psutil, tqdm and cudal1's evaluator (no Ray, Hydra or MLflow).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from cudal1.bench import agreement  # noqa: E402
from cudal1.bench.baselines import BASELINES, TORCH_COMPILE, baseline_source, label_baseline  # noqa: E402
from cudal1.bench.evaluator import default_device, device_info, evaluate, extensions_dir  # noqa: E402
from cudal1.bench.inprocess import measure_isolated  # noqa: E402
from cudal1.bench.settings import EvalSettings  # noqa: E402
from cudal1.tasks import load_builtin, load_suite  # noqa: E402
from cudal1.tasks.task import Task  # noqa: E402

KERNELBENCH = "kernelbench"
BUILTIN = "builtin"


def with_batch_size(task: Task, profile: str, batch_size: int) -> Task:
    """`task` with a size profile named `profile` that sets its module-level `batch_size`
    (appended to its source as SIZE_PROFILES; the judge and the in-process timing both apply it).
    For CPU smoke runs of KernelBench files, whose own sizes are GPU-sized. Raises ValueError for
    a task that already has size profiles or no `batch_size`."""
    import ast

    if task.size_profiles:
        raise ValueError(f"{task.task_id} already has size profiles")
    names = {
        t.id
        for node in ast.parse(task.source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    if "batch_size" not in names:
        raise ValueError(f"{task.task_id} has no module-level batch_size")
    source = task.source.rstrip() + f"\n\n\nSIZE_PROFILES = {{{profile!r}: {{'batch_size': {batch_size}}}}}\n"
    return Task(
        level=task.level,
        problem_id=task.problem_id,
        name=task.name,
        source=source,
        suite=task.suite,
        path=task.path,
        size_profiles=(profile,),
    )


def choose_tasks(args: argparse.Namespace) -> list[tuple[str, Task]]:
    """(group, task) pairs to run, interleaved across groups; group is "kernelbench/level<L>" or
    "builtin/level<L>". Raises FileNotFoundError for a checkout without the levels, SystemExit
    for `--tasks` names that match nothing."""
    groups: dict[str, list[Task]] = {}
    if args.kernelbench:
        report = load_suite(args.kernelbench, levels=args.levels)
        for failure in report.failures:
            print(f"not loaded: {failure.path}: {failure.reason}", file=sys.stderr)
        for task in report.tasks:
            if args.batch_size:
                try:
                    task = with_batch_size(task, args.backend, args.batch_size)
                except ValueError:
                    pass  # no batch_size: at its own sizes
            groups.setdefault(f"{KERNELBENCH}/level{task.level}", []).append(task)
    if args.builtin:
        for task in load_builtin(profile=args.backend).tasks:
            groups.setdefault(f"{BUILTIN}/level{task.level}", []).append(task)
    if args.tasks:
        wanted = set(args.tasks)
        groups = {g: [t for t in ts if f"{g.split('/')[0]}/{t.task_id}" in wanted] for g, ts in groups.items()}
        found = {f"{g.split('/')[0]}/{t.task_id}" for g, ts in groups.items() for t in ts}
        if wanted - found:
            raise SystemExit(
                f"--tasks: no such task(s): {sorted(wanted - found)} "
                "(names look like kernelbench/level1/19, builtin/level2/1)"
            )
        groups = {g: ts for g, ts in groups.items() if ts}
    if args.limit:
        groups = {g: ts[: args.limit] for g, ts in groups.items()}
    order, lists = [], [list(ts) for ts in groups.values()]
    names = list(groups)
    while any(lists):
        for name, ts in zip(names, lists):
            if ts:
                order.append((name, ts.pop(0)))
    return order


def run_task(
    group: str,
    task: Task,
    args: argparse.Namespace,
    settings: EvalSettings,
    device: str,
    arch: str,
    lock_key: str,
    timeout_s: float,
) -> dict[str, Any]:
    """Judge both baselines, then time them in a plain child process; the task's record."""
    judged = {}
    for kind in BASELINES:
        started = time.monotonic()
        result = label_baseline(
            evaluate(task, baseline_source(kind, task.source), args.backend, device, settings), kind
        )
        judged[kind] = agreement.judge_entry(result, time.monotonic() - started)
        if args.records:  # the whole result, for the replays of benchmarks/ (one_call_replay.py --count)
            with open(args.records, "a", encoding="utf-8") as f:
                f.write(json.dumps({"kind": kind, "result": result.to_dict()}) + "\n")
        # What a mismeasurement is diagnosed from (the per-round-trip record, its K and fixed cost).
        judged[kind]["timing"] = {
            "calls_per_round": result.calls_per_round,
            "overhead_ms": result.overhead_ms,
            "resolution_ms": result.resolution_ms,
            "remeasured": result.remeasured,
            "round_trips": result.round_trips,
        }
    sources = {kind: baseline_source(kind, task.source) for kind in BASELINES}
    timing, error = None, None
    lock = None
    if args.backend == "cuda":  # alone on the GPU, as the judge's timing is (cudal1.bench.devicelock)
        from cudal1.bench.devicelock import DeviceLock

        lock = DeviceLock(lock_key)
        lock.hold()
    # The child starts from a copy of the judge's build directory of the compile baseline: it runs
    # the kernels the judge compiled and autotuned, so only the measurements differ.
    build_dir = extensions_dir(settings, arch, sources[TORCH_COMPILE])
    try:
        timing = measure_isolated(
            task,
            sources,
            device,
            timeout_s=timeout_s,
            build_dir=build_dir,
            calls=args.calls,
            warmup=args.warmup,
            seed=args.seed,
            flush_l2=args.backend == "cuda",
            profile=args.backend,
        ).to_dict()
    except (RuntimeError, TimeoutError) as exc:
        error = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
    finally:
        if lock is not None:
            lock.release()
    return agreement.task_record(f"{task.task_id}", group, judged, timing, error, name=task.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", default=None, help="a KernelBench checkout (or its directory of level<N>/)")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2], help="KernelBench levels (default 1 2)")
    ap.add_argument("--builtin", action="store_true", help="also every builtin task (all its levels)")
    ap.add_argument(
        "--tasks",
        nargs="+",
        action="extend",
        default=None,
        help="only these, e.g. kernelbench/level1/19 builtin/level2/1 (may be repeated)",
    )
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--device", default=None, help="default: the backend's first device")
    ap.add_argument("--limit", type=int, default=None, help="at most N tasks per group")
    ap.add_argument("--calls", type=int, default=100, help="timed in-process calls per program (>= 100 for the report)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed in-process calls per program first")
    ap.add_argument("--seed", type=int, default=0, help="seed of the in-process inputs and call order")
    ap.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="set KernelBench's batch_size (CPU smoke runs only: its sizes are GPU-sized)",
    )
    ap.add_argument("--time-budget-s", type=float, default=None, help="stop starting tasks when this is spent")
    ap.add_argument("--cache-dir", default=None, help="the evaluator's cache (default: a new temporary directory)")
    ap.add_argument("--out", default=None, help="write the records and the summary here (JSON)")
    ap.add_argument("--resume", default=None, help="a previous --out: skip its tasks, report them too")
    ap.add_argument(
        "--records",
        default=None,
        help='append each judged evaluation as {"kind": reference|torch_compile, "result": EvalResult dict} to this JSONL',
    )
    args = ap.parse_args(argv)
    if not args.kernelbench and not args.builtin:
        ap.error("nothing to run: give --kernelbench PATH and/or --builtin")
    if args.calls < 1:
        ap.error("--calls must be >= 1")

    from tqdm import tqdm

    started = time.monotonic()
    device = args.device or default_device(args.backend)
    info = device_info(device)
    cache = args.cache_dir or tempfile.mkdtemp(prefix="cudal1-agreement-")
    settings = EvalSettings.for_backend(args.backend, cache_dir=cache)
    records: list[dict[str, Any]] = []
    if args.resume and Path(args.resume).exists():
        records = json.loads(Path(args.resume).read_text())["records"]
    done = {(r["group"], r["task_id"]) for r in records}
    todo = [(g, t) for g, t in choose_tasks(args) if (g, t.task_id) not in done]
    print(
        f"{len(todo)} tasks to run on {info['name']} ({args.backend}), {len(done)} from {args.resume}; "
        f"evaluator cache {cache}",
        file=sys.stderr,
    )
    slowest, stopped = 0.0, None
    bar = tqdm(todo, file=sys.stderr, unit="task", dynamic_ncols=True, disable=not sys.stderr.isatty())
    for group, task in bar:
        left = None if args.time_budget_s is None else args.time_budget_s - (time.monotonic() - started)
        if left is not None and left < max(slowest, 1.0):
            stopped = f"time budget spent: {len(todo) - (len(records) - len(done))} of {len(todo)} tasks not run"
            break
        bar.set_postfix_str(f"{group}/{task.task_id.split('/')[-1]}")
        t0 = time.monotonic()
        timeout = 600.0 if left is None else max(60.0, min(600.0, left))
        record = run_task(
            group,
            task,
            args,
            settings,
            device,
            info["arch"],
            info.get("uuid") or f"{os.uname().nodename}-{device}",
            timeout,
        )
        record["seconds"] = round(time.monotonic() - t0, 1)
        slowest = max(slowest, record["seconds"])
        records.append(record)
        j = record["judge"]
        bar.write(
            f"{group}/{task.task_id.split('/')[-1]} {task.name}: judge ref {j['reference']['status']} "
            f"{agreement._x(j['reference']['speedup'])}x, compile {j['torch_compile']['status']} "
            f"{agreement._x(j['torch_compile']['speedup'])}x | in-process "
            f"{agreement._x(agreement.inprocess_ratio(record, 'reference'))}x, "
            f"{agreement._x(agreement.inprocess_ratio(record, 'torch_compile'))}x "
            f"{record['inprocess_error'] or ''} ({record['seconds']:.0f} s)",
            file=sys.stderr,
        )
        if args.out:
            write(args.out, records, info, args, stopped)
    bar.close()
    kb = [r for r in records if r["group"].startswith(KERNELBENCH) and r["group"].split("level")[-1] in ("1", "2")]
    scope = "KernelBench levels 1-2" if kb else "all tasks run (no KernelBench level 1-2 task)"
    print(agreement.format_report(records, kb or records, scope))
    print(
        f"{len(records)} tasks on {info['name']} ({args.backend}) in {time.monotonic() - started:.0f} s"
        + (f"; {stopped}" if stopped else "")
    )
    if args.out:
        write(args.out, records, info, args, stopped)
    return 0


def write(
    path: str, records: list[dict[str, Any]], info: dict[str, Any], args: argparse.Namespace, stopped: str | None
) -> None:
    """The records and their summary as JSON (written to a temporary file, then renamed)."""
    out = {
        "device": info,
        "args": vars(args),
        "stopped": stopped,
        "records": records,
        "groups": agreement.group_summaries(records),
        "outliers": agreement.outliers(records),
    }
    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(out, indent=1, default=str))
    tmp.replace(path)


if __name__ == "__main__":
    sys.exit(main())
