"""The `cudal1` command: evaluate one candidate or a directory of candidates, list the tasks, or build the small model.

    cudal1 eval --task level1/1 --solution my_kernel.py [--backend cpu|cuda] [--json]
    cudal1 eval-suite [--solutions DIR] [--tasks builtin|PATH] [--out results.jsonl] [--resume]
    cudal1 tasks [--tasks builtin|PATH] [--levels L ...] [--ids N ...] [--probe [--backend cuda] [--jobs N] [--json FILE]]
    cudal1 model init-small DIR [--seed N] [--layers N] [--hidden N] [--vocab N] [--max-len N] [--overwrite]

Exit codes: 0 when every evaluated candidate is ok, 1 when one is not (or nothing was
evaluated), 2 on a usage error (unknown task, missing file, unloadable task suite), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cudal1
from cudal1.bench.result import EvalResult, Status
from cudal1.bench.settings import EvalSettings
from cudal1.bench.summary import DEFAULT_PS, format_summary, summarize

LOG_TAIL_LINES = 30
"""Lines of the worker log shown by `cudal1 eval` when the status is not ok."""


class UsageError(Exception):
    """A problem with the command line or its files (exit code 2), not with a candidate."""


def _error_text(exc: BaseException) -> str:
    # str(KeyError("x")) is "'x'": show the message itself.
    return str(exc.args[0]) if len(exc.args) == 1 else str(exc)


def _settings(args: argparse.Namespace) -> EvalSettings:
    overrides = {k: getattr(args, k) for k in ("seed", "rounds") if getattr(args, k, None) is not None}
    timeout_s = getattr(args, "timeout_s", None)
    if timeout_s is not None:
        if not timeout_s > 0:
            raise UsageError(f"--timeout-s must be a positive number of seconds, got {timeout_s}")
        overrides["wall_timeout_s"] = float(timeout_s)
    return EvalSettings.for_backend(args.backend, **overrides)


@contextlib.contextmanager
def _heartbeat(what: str, limit_s: float, every_s: float = 15.0) -> Iterator[None]:
    """While the block runs, one line on stderr every `every_s` seconds: what is running, for how
    long and its limit (s), so a long evaluation (a build, a candidate that hangs until the limit)
    is not a silent terminal. Past the limit the evaluator is still ending the candidate's
    processes and cleaning up, and the line says so."""
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(every_s):
            elapsed = time.monotonic() - t0
            state = f"limit {limit_s:.0f} s" if elapsed <= limit_s else f"past its {limit_s:.0f} s limit: ending it"
            print(f"  {what}: {elapsed:.0f} s ({state})", file=sys.stderr, flush=True)

    thread = threading.Thread(target=beat, name="cudal1-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _load_suite(spec: str, backend: str, **options: Any) -> Any:
    """The `SuiteReport` of "builtin" or a KernelBench path, at the backend's size profile
    (`options`: levels, ids); loader errors become usage errors."""
    from cudal1.tasks import load_builtin, load_suite

    try:
        if spec == "builtin":
            return load_builtin(profile=backend, **options)
        return load_suite(spec, profile=backend, **options)
    except (OSError, ValueError, LookupError, RuntimeError) as exc:
        raise UsageError(f"cannot load tasks {spec!r}: {_error_text(exc)}") from exc


def _probe_suite(spec: str, report: Any, backend: str, **probe: Any) -> None:
    """Run each task's reference of `report` at the backend's size profile
    (`cudal1.bench.probe.probe_suite` with `probe`: device, jobs, ...); a GPU that cannot be used
    becomes a usage error."""
    from cudal1.bench.probe import probe_suite

    try:
        probe_suite(report, backend, **probe)
    except (OSError, ValueError, LookupError, RuntimeError) as exc:
        raise UsageError(f"cannot load tasks {spec!r}: {_error_text(exc)}") from exc


def _check_device(backend: str, device: str | None) -> None:
    """Fail early, as a usage error, when the backend's device cannot be used (e.g. no GPU)."""
    from cudal1.bench.evaluator import default_device, device_info

    try:
        device_info(device or default_device(backend))
    except (RuntimeError, ValueError) as exc:
        # The message may embed the probe's traceback: keep its head and the exception line.
        lines = [ln for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        head = lines[0].split("Traceback")[0].strip()
        last = lines[-1].strip() if len(lines) > 1 else ""
        raise UsageError(f"backend {backend}: {head} {last}".strip()) from exc


def _find_task(tasks: list[Any], ref: str) -> Any:
    from cudal1.tasks import find_task

    try:
        return find_task(tasks, ref)
    except LookupError as exc:
        raise UsageError(_error_text(exc)) from exc


# ---------------------------------------------------------------------------------------------
# cudal1 eval


def _fmt_ms(ms: float) -> str:
    return f"{ms:.4g} ms"


def speedup_formula(result: EvalResult) -> str:
    """How the speedup follows from the printed figures: "max(min(R, B), F) / max(C, F)" with the
    reference median R, the clean baseline B that caps it, the resolution F that floors both, and
    the candidate median C (ms; `cudal1.bench.timing.speedup_stats`), written with the numbers."""
    if result.reference is None or result.candidate is None:
        return "-"
    ref = result.reference.median_ms
    if result.baseline_ms is not None and result.baseline_ms < ref:
        ref_text = f"{result.baseline_ms:.4g} (capped)"
        ref = result.baseline_ms
    else:
        ref_text = f"{ref:.4g}"
    floor = result.resolution_ms or 0.0
    cand = result.candidate.median_ms
    ref_text = f"{floor:.4g} (floor)" if floor > ref else ref_text
    cand_text = f"{floor:.4g} (floor)" if floor > cand else f"{cand:.4g}"
    return f"{ref_text} / {cand_text} ms"


def format_result(result: EvalResult, task: Any = None, solution: Path | None = None) -> str:
    """One screen of text for one `EvalResult`: status, hack kind, labels, times (ms), speedup (×),
    spreads (%), correctness trials run and skipped, message, and the log tail when the status is
    not ok."""
    rows: list[tuple[str, str]] = []
    name = f"  {task.name}" if task is not None else ""
    rows.append(("task", f"{result.task_id}{name}"))
    if solution is not None:
        rows.append(("solution", str(solution)))
    rows.append(("backend", f"{result.backend}  {result.device} {result.arch}".rstrip()))
    rows.append(("status", result.status.value))
    if result.hack_kind is not None:
        rows.append(("hack kind", result.hack_kind.value))
    rows.append(("labels", ", ".join(result.labels) or "-"))
    for key, timing in (("reference", result.reference), ("candidate", result.candidate)):
        if timing is not None:
            rows.append(
                (key, f"{_fmt_ms(timing.median_ms)} median  (spread {timing.spread:.1%}, {timing.calls} calls)")
            )
    if result.calls_per_round is not None and result.resolution_ms is not None:
        cap = f", reference capped at {_fmt_ms(result.baseline_ms)}" if result.baseline_ms is not None else ""
        rows.append(
            (
                "resolution",
                f"{_fmt_ms(result.resolution_ms)} a call  ({result.calls_per_round} calls a round trip{cap})",
            )
        )
    if result.speedup is not None:
        extra = f"  (spread {result.speedup_spread:.1%})" if result.speedup_spread is not None else ""
        if result.remeasured:
            extra += "  re-measured"
        rows.append(("speedup", f"{result.speedup:.3f}×{extra}  = {speedup_formula(result)}"))
    if result.correctness_trials:
        err = f", max abs error {result.max_abs_error:.3g}" if result.max_abs_error is not None else ""
        rows.append(("correctness", f"{result.correctness_trials} trials{err}"))
    for skipped in result.skipped_trials:  # outside the task's domain, as the reference shows
        rows.append(("skipped", skipped))
    if result.build_seconds is not None:
        rows.append(("build", f"{result.build_seconds:.1f} s"))
    if result.eval_seconds is not None:
        rows.append(("evaluation", f"{result.eval_seconds:.1f} s"))
    rows.append(("message", result.message or "-"))
    width = max(len(k) for k, _ in rows)
    text = "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
    if not result.correct and result.log.strip():
        tail = "\n".join(result.log.rstrip().splitlines()[-LOG_TAIL_LINES:])
        text += f"\n--- log (last {LOG_TAIL_LINES} lines) ---\n{tail}"
    return text


def cmd_eval(args: argparse.Namespace) -> int:
    suite = _load_suite(args.tasks, args.backend)
    if Path(args.task).is_file() and not any(t.path == str(Path(args.task).resolve()) for t in suite.tasks):
        from cudal1.tasks import load_task_file

        try:  # a standalone KernelBench-format file, not one of the suite's
            task = load_task_file(args.task, profile=args.backend)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    else:
        task = _find_task(suite.tasks, args.task)
    try:
        source = Path(args.solution).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read solution {str(args.solution)!r}: {exc.strerror or exc}") from exc
    from cudal1.bench.evaluator import evaluate  # imports torch: after the cheap checks

    _check_device(args.backend, args.device)
    settings = _settings(args)
    with _heartbeat(f"evaluating {task.task_id}", settings.wall_timeout_s):
        result = evaluate(task, source, backend=args.backend, device=args.device, settings=settings)
    if args.json:
        print(json.dumps({**result.to_dict(), "solution": str(args.solution)}, indent=2, sort_keys=True))
    else:
        print(format_result(result, task, Path(args.solution)))
    return 0 if result.correct else 1


# ---------------------------------------------------------------------------------------------
# cudal1 eval-suite


def summary_path(out: Path) -> Path:
    """Where eval-suite writes its summary: results.jsonl -> results.summary.json."""
    return out.with_suffix(".summary.json")


def _solutions_for(args: argparse.Namespace, suite: Any) -> tuple[dict[str, Path], list[tuple[Path, str]], str]:
    """(task id -> solution file, unmatched files with reasons, description of the source)."""
    from cudal1.bench.suite import match_solutions

    if args.solutions is None:
        if args.tasks != "builtin":
            raise UsageError("--solutions is required unless --tasks builtin (which has seed solutions)")
        from cudal1.tasks import seed_solutions

        seeds = seed_solutions(kind=args.backend)
        known = {t.task_id for t in suite.tasks}
        return {k: Path(v) for k, v in seeds.items() if k in known}, [], f"builtin seed solutions ({args.backend})"
    try:
        match = match_solutions(Path(args.solutions), [t.task_id for t in suite.tasks])
    except NotADirectoryError as exc:
        raise UsageError(_error_text(exc)) from exc
    return match.matched, match.unmatched, str(args.solutions)


def cmd_eval_suite(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from cudal1.bench.suite import ResultWriter, SuiteJob, read_results, run_suite

    suite = _load_suite(args.tasks, args.backend)
    matched, unmatched, source_desc = _solutions_for(args, suite)
    out = (
        Path(args.out)
        if args.out
        else Path("runs") / f"eval_suite_{args.backend}_{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    )
    if out.exists() and out.stat().st_size > 0 and not (args.resume or args.overwrite):
        raise UsageError(f"{out} exists: pass --resume to continue it or --overwrite to start over")
    if args.overwrite and out.exists():
        out.unlink()
    done, bad_lines = read_results(out) if args.resume else ({}, 0)

    err = sys.stderr
    print(f"tasks: {args.tasks} ({len(suite.tasks)} loaded, {len(suite.failures)} failed to load)", file=err)
    print(f"solutions: {source_desc}: {len(matched)} matched", file=err)
    for path, reason in unmatched:
        print(f"  unmatched: {path}: {reason}", file=err)
    without = sorted({t.task_id for t in suite.tasks} - set(matched))
    if without:
        print(f"  {len(without)} tasks have no solution and are not evaluated", file=err)
    if bad_lines:
        print(f"  {bad_lines} unreadable line(s) in {out} ignored (their tasks are evaluated again)", file=err)

    from cudal1.bench.evaluator import source_hash

    by_id = {t.task_id: t for t in suite.tasks}
    order = sorted(matched, key=lambda tid: (by_id[tid].level, by_id[tid].problem_id))
    sources = {tid: matched[tid].read_text(encoding="utf-8") for tid in order}
    # A result is reused only for the same candidate source: an edited solution is evaluated again.
    stale = [
        tid
        for tid in order
        if tid in done and done[tid].get("candidate_hash") not in (None, "", source_hash(sources[tid]))
    ]
    skipped = [tid for tid in order if tid in done and tid not in stale]
    if skipped:
        print(f"resume: {len(skipped)} task(s) already in {out} are skipped", file=err)
    if stale:
        print(f"resume: {len(stale)} task(s) in {out} have a changed solution and are evaluated again", file=err)
    jobs = [SuiteJob(by_id[tid], sources[tid], matched[tid]) for tid in order if tid not in skipped]
    settings = _settings(args)
    for device in args.device or [None]:
        _check_device(args.backend, device)
    writer = ResultWriter(out)
    counts = {"ok": 0, "not ok": 0}
    bar = tqdm(total=len(jobs), unit="task", desc=f"eval-suite {args.backend}", file=err, disable=None)

    def on_result(job: SuiteJob, result: EvalResult) -> None:
        writer.write(result, solution=str(job.solution))
        counts["ok" if result.correct else "not ok"] += 1
        bar.set_postfix(counts, refresh=False)
        bar.update(1)
        if bar.disable:  # no terminal: one line per result instead of a bar
            print(
                f"{result.task_id}: {result.status.value}" + (f" {result.speedup:.3f}×" if result.speedup else ""),
                file=err,
            )

    try:
        run_suite(
            jobs,
            args.backend,
            settings,
            on_result,
            devices=args.device or [None],
            build_jobs=args.build_jobs,
            overlap=args.overlap,
            per_device=args.per_device,
            reserve_cores=args.reserve_cores,
        )
    except KeyboardInterrupt:
        bar.close()
        print(f"\ninterrupted: results so far are in {out}; continue with --resume", file=err)
        return 130
    bar.close()

    records, _ = read_results(out)
    results = [EvalResult.from_dict(records[tid]) for tid in order if tid in records]
    summary = summarize(results, ps=args.p)
    text = format_summary(summary)
    print(text)
    spath = summary_path(out)
    spath.write_text(
        json.dumps(
            {
                "summary": summary,
                "results_file": str(out),
                "backend": args.backend,
                "tasks": args.tasks,
                "solutions": source_desc,
                "unmatched": [{"file": str(p), "reason": r} for p, r in unmatched],
                "tasks_without_solution": without,
                "task_load_failures": len(suite.failures),
                "settings": settings.to_dict(),
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"results: {out}\nsummary: {spath}", file=err)
    if not results:
        return 1
    return 0 if summary["status_counts"][Status.OK.value] == summary["n"] else 1


# ---------------------------------------------------------------------------------------------
# cudal1 tasks


def cmd_tasks(args: argparse.Namespace) -> int:
    """List a suite's tasks (stdout) and the files that did not load; with --probe, first run each
    reference in a worker and print one line per task to stderr as it finishes."""
    options: dict[str, Any] = {}
    if args.levels:
        options["levels"] = args.levels
    if args.ids:
        options["ids"] = args.ids
    if args.probe:
        from cudal1.bench.evaluator import default_device

        device = args.device or default_device(args.backend)
        _check_device(args.backend, device)
        report = _load_suite(args.tasks, args.backend, **options)
        total = len(report.tasks)
        done = [0]
        print(f"probing {total} tasks on {device} ({args.backend} profile)", file=sys.stderr, flush=True)

        def probed(task: Any, answer: Any) -> None:
            done[0] += 1
            print(f"[{done[0]:>{len(str(total))}}/{total}] {answer.line(task)}", file=sys.stderr, flush=True)

        _probe_suite(
            args.tasks,
            report,
            args.backend,
            device=device,
            jobs=args.jobs,
            timeout_s=args.probe_timeout,
            device_mib=args.device_mib,
            cache_dir=args.cache,
            on_probed=probed,
        )
    else:
        report = _load_suite(args.tasks, args.backend, **options)
    rows = []
    for t in sorted(report.tasks, key=lambda t: (t.level, t.problem_id)):
        note = f"DEGENERATE: {t.degenerate}" if t.degenerate else ""
        rows.append((t.task_id, t.name, ",".join(t.size_profiles) or "-", note))
    if rows:
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for r in rows:
            print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}".rstrip())
    for failure in report.failures:
        print(f"FAILED {failure.path}: {failure.reason}")
    print(report.summary(), file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_dict(), indent=1) + "\n", encoding="utf-8")
    return 0


# ---------------------------------------------------------------------------------------------
# cudal1 model init-small


def cmd_model_init_small(args: argparse.Namespace) -> int:
    from cudal1.policy.small import init_small

    start = time.perf_counter()
    try:
        out = init_small(
            args.dir,
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            num_layers=args.layers,
            max_position_embeddings=args.max_len,
            seed=args.seed,
            overwrite=args.overwrite,
        )
    except (FileExistsError, ValueError) as exc:
        raise UsageError(_error_text(exc)) from exc
    info = json.loads((out / "cudal1_small.json").read_text(encoding="utf-8"))
    print(
        f"small policy in {out}: {info['parameters']:,} parameters, vocabulary {info['vocab_size']}, "
        f"seed {info['seed']} ({time.perf_counter() - start:.1f} s)"
    )
    return 0


# ---------------------------------------------------------------------------------------------
# argument parsing


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tasks", default="builtin", help="task suite: 'builtin' or a KernelBench checkout path (default builtin)"
    )
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu", help="where to run and time (default cpu)")
    p.add_argument("--seed", type=int, default=None, help="base seed of the correctness and timing inputs")
    p.add_argument("--rounds", type=int, default=None, help="timing rounds (default: the backend's EvalSettings)")
    p.add_argument(
        "--timeout-s",
        type=float,
        default=None,
        help="most seconds one evaluation may take, its build included; past it the candidate's result is "
        "'timeout' (default: EvalSettings.wall_timeout_s, 300)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cudal1", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"cudal1 {cudal1.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("eval", help="evaluate one candidate solution against one task")
    p.add_argument("--task", required=True, help="task id (level1/12), task name, or task file path")
    p.add_argument("--solution", required=True, help="Python file defining ModelNew")
    p.add_argument("--device", default=None, help="device for the cuda backend, e.g. cuda:1")
    p.add_argument("--json", action="store_true", help="print the JSON record instead of text")
    _add_common(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("eval-suite", help="evaluate a directory of solutions (default: the builtin seed solutions)")
    p.add_argument("--solutions", default=None, help="directory with level<L>/<id>_<Name>.py solution files")
    p.add_argument("--out", default=None, help="results JSONL (default runs/eval_suite_<backend>_<time>.jsonl)")
    p.add_argument("--resume", action="store_true", help="skip task ids already in --out and append to it")
    p.add_argument("--overwrite", action="store_true", help="delete an existing --out first")
    p.add_argument("--build-jobs", type=int, default=None, help="parallel builds (default: half the build cores)")
    p.add_argument(
        "--per-device",
        type=int,
        default=1,
        help=(
            "cuda: evaluations at a time per device; their setup overlaps, their timing takes turns (default 1). "
            "Each one's set-up widens the other's resolution: on an H200, 2 per device floored 5 of 16 seeds "
            "at 1.3-3.6 ms a call (docs/benchmarks.md)"
        ),
    )
    p.add_argument(
        "--device",
        action="append",
        default=None,
        help="cuda device to time on; repeat for one timing stream per device",
    )
    p.add_argument(
        "--overlap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="time while builds still run (default: on for cuda, off for cpu where builds share the timed cores)",
    )
    p.add_argument(
        "--reserve-cores",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --overlap, keep compilers off the cores the evaluations time on (default: on; see cudal1.bench.cores)",
    )
    p.add_argument(
        "--p", type=float, nargs="+", default=list(DEFAULT_PS), help="fast_p thresholds (default 1.0 1.5 2.0)"
    )
    _add_common(p)
    p.set_defaults(func=cmd_eval_suite)

    p = sub.add_parser("tasks", help="list the tasks of a suite and the files that failed to load")
    p.add_argument("--tasks", default="builtin", help="task suite: 'builtin' or a KernelBench checkout path")
    p.add_argument("--backend", choices=("cpu", "cuda"), default="cpu", help="size profile to load (and probe) at")
    p.add_argument(
        "--probe",
        action="store_true",
        help="also run each reference in a worker (import, degenerate-task check), cached per task",
    )
    p.add_argument(
        "--levels", type=int, nargs="+", default=None, help="levels to load, e.g. --levels 1 2 (default all)"
    )
    p.add_argument(
        "--ids", type=int, nargs="+", default=None, help="problem ids to load in every chosen level (default all)"
    )
    p.add_argument("--device", default=None, help="device the probes run on (default: the backend's first)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="most probes at a time (default: half the cores; on a GPU also as many as its free memory holds)",
    )
    p.add_argument(
        "--device-mib",
        type=int,
        default=None,
        help="GPU memory budgeted per probe, MiB (default 16384); a probe that fails beside others runs again alone",
    )
    p.add_argument("--probe-timeout", type=float, default=60.0, help="seconds per probe (default 60)")
    p.add_argument("--cache", default=None, help="probe cache directory (default: the evaluator's cache)")
    p.add_argument(
        "--json", default=None, help="also write the report (tasks, failures, probe times) to this JSON file"
    )
    p.set_defaults(func=cmd_tasks)

    p = sub.add_parser("model", help="policy checkpoints")
    model_sub = p.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    q = model_sub.add_parser("init-small", help="build the embedded small Qwen2-architecture policy (no download)")
    q.add_argument("dir", help="checkpoint directory to write")
    q.add_argument("--seed", type=int, default=0, help="weight initialisation seed (default 0)")
    q.add_argument("--layers", type=int, default=2, help="transformer layers (default 2)")
    q.add_argument("--hidden", type=int, default=128, help="hidden size, a multiple of 4 heads of 32-128 (default 128)")
    q.add_argument("--vocab", type=int, default=4096, help="BPE vocabulary size (default 4096)")
    q.add_argument("--max-len", type=int, default=8192, help="max_position_embeddings in tokens (default 8192)")
    q.add_argument("--overwrite", action="store_true", help="replace an existing checkpoint in DIR")
    q.set_defaults(func=cmd_model_init_small)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `cudal1` console script. Returns the exit code (see module docstring)."""
    args = build_parser().parse_args(argv)
    if getattr(args, "per_device", 1) < 1:
        print("cudal1: --per-device must be at least 1", file=sys.stderr)
        return 2
    if getattr(args, "build_jobs", 1) is not None and getattr(args, "build_jobs", 1) < 1:
        print("cudal1: --build-jobs must be at least 1", file=sys.stderr)
        return 2
    for name in ("jobs", "device_mib"):
        if getattr(args, name, None) is not None and getattr(args, name) < 1:
            print(f"cudal1: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if getattr(args, "probe_timeout", 1.0) <= 0:
        print("cudal1: --probe-timeout must be positive", file=sys.stderr)
        return 2
    if getattr(args, "rounds", None) is not None and args.rounds < 1:
        print("cudal1: --rounds must be at least 1", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"cudal1: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cudal1: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
