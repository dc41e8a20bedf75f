"""Evaluate a set of solutions on every benchmark pool and write the paper's table: `load_solutions`,
`paper_table`, `format_paper_table`, `evaluate_solutions`.

The table follows CUDA-L1's per-architecture report (and KernelBench's fast_p): for each pool
(architecture) and level, and for all levels together, the mean / median / geometric-mean speedup
(×) over correct solutions, fast_p for each threshold (share of *all* evaluated tasks that are
correct and faster than p×), the success count, and the counts by status, hack kind and label.
Speedups are against the eager PyTorch reference, as the evaluator measures them.

With a torch.compile baseline (`cudal1.bench.baselines`: torch.compile of each task's reference,
evaluated by the same pools and evaluator as the solutions), each row also says how the solutions
compare with what PyTorch gives for free: `vs_compile_geomean`, the geometric mean over tasks
where both are correct of solution speedup / compile speedup (×; each speedup over its own
evaluation's eager reference, so the reference's drift between the two evaluations cancels; it
equals compile ms / solution ms when the two reference times agree), `vs_compile_fast_1`, the
share of all tasks whose solution is correct and faster than the compile baseline, and
`compile_failed`, the tasks where torch.compile of the reference failed (raised, timed out, gave
wrong outputs). On such a task the solution is held to the eager reference instead (what one
runs when torch.compile fails): it counts in `vs_compile_fast_1` when its speedup is > 1, and
stays out of the geometric mean.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudal1.bench.result import NO_PROGRAM_LABELS, EvalResult, Status
from cudal1.bench.summary import fast_p_key, geometric_mean, summarize
from cudal1.records import Candidate
from cudal1.tasks.task import STANDALONE, standalone_name

if TYPE_CHECKING:
    from cudal1.actors.bench_pool import BenchmarkPools

log = logging.getLogger(__name__)

DEFAULT_PS: tuple[float, ...] = (1.0, 1.01, 1.5, 2.0)
"""fast_p thresholds of the table: fast_1 and fast_1.01 as in the paper, and two more."""


def load_solutions(
    spec: str | Path, task_ids: Sequence[str], exclude: Sequence[str | Path] = ()
) -> tuple[list[Candidate], list[str]]:
    """The solutions `spec` names, one Candidate per task of `task_ids`, and notes on what was skipped.

    `spec` is one of:
      - a directory of solution files laid out as `level<L>/<id>_<Name>.py` (cudal1 eval-suite's
        layout); a standalone program's (task "file/<name>", `cudal1.tasks.Task`) is any
        `<name>.py` in it or below (its stem made safe as the task's name was: "my-relu.py" is
        my_relu's), or `level0/0_<name>.py`; the first in sorted path order counts, and a file of
        `exclude` (the tasks' own files, when the directory holds them) never does;
      - a JSONL file of records with "task_id" and the code in "code" or "source", or a file path
        in "solution" (an eval-suite results file, a buffer's exemplars.jsonl); the last record of
        a task wins;
      - a training run directory: the fastest correct exemplar per task of its buffer.
    Raises FileNotFoundError when `spec` does not exist and ValueError when it holds no solution
    for any of `task_ids`.
    """
    path = Path(spec).expanduser()
    known = set(task_ids)
    skipped: list[str] = []
    found: dict[str, Candidate] = {}
    if not path.exists():
        raise FileNotFoundError(f"no solutions at {path}")
    if path.is_dir() and (path / "buffer" / "exemplars.jsonl").is_file():
        from cudal1.review import best_per_task, load_run

        best = best_per_task(load_run(path))
        for task_id, row in best.iterrows():
            if task_id in known:
                found[task_id] = Candidate(task_id, row["code"], origin=f"{path.name}:{row['origin']}")
            else:
                skipped.append(f"{task_id}: not among the selected tasks")
    elif path.is_dir():
        from cudal1.bench.suite import match_solutions

        match = match_solutions(path, task_ids)
        for task_id, file in match.matched.items():
            found[task_id] = Candidate(task_id, file.read_text(encoding="utf-8"), origin=str(file))
        unmatched = match.unmatched
        standalone = {t.split("/", 1)[1]: t for t in task_ids if t.startswith(f"{STANDALONE}/")}
        if standalone:
            own = {Path(p).resolve() for p in exclude if p}
            unmatched = []
            for file, why in match.unmatched:
                task_id = next((standalone[n] for n in _standalone_names(file) if n in standalone), None)
                if task_id is None:
                    unmatched.append((file, f"{why}; no task {STANDALONE}/{_standalone_names(file)[0]}"))
                elif file.resolve() in own:
                    unmatched.append((file, f"the task file of {task_id} itself"))
                elif task_id in found:
                    unmatched.append((file, f"another solution for {task_id} comes first: {found[task_id].origin}"))
                else:
                    found[task_id] = Candidate(task_id, file.read_text(encoding="utf-8"), origin=str(file))
        skipped += [f"{p}: {why}" for p, why in unmatched]
    else:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                task_id = record["task_id"]
                code = record.get("code") or record.get("source")
                if code is None and record.get("solution"):
                    code = (
                        (path.parent / record["solution"]).read_text(encoding="utf-8")
                        if not Path(record["solution"]).is_absolute()
                        else Path(record["solution"]).read_text()
                    )
            except (ValueError, KeyError, OSError) as e:
                skipped.append(f"{path.name}:{n}: unreadable record ({type(e).__name__}: {e})")
                continue
            if task_id not in known:
                skipped.append(f"{path.name}:{n}: {task_id} is not among the selected tasks")
            elif not code:
                skipped.append(f"{path.name}:{n}: no code, source or solution")
            else:
                found[task_id] = Candidate(task_id, code, origin=f"{path.name}:{n}")
    if not found:
        raise ValueError(
            f"{path} holds no solution for the {len(known)} selected tasks"
            + (f" ({len(skipped)} skipped, e.g. {skipped[0]})" if skipped else "")
        )
    return [found[t] for t in task_ids if t in found], skipped


def _standalone_names(file: Path) -> list[str]:
    """The standalone task names a solution file may belong to: its stem made safe
    (`standalone_name`), then, for `level0/0_<name>.py`, that name."""
    names = [standalone_name(file.stem)]
    if file.parent.name == "level0" and file.stem.startswith("0_"):
        names.append(standalone_name(file.stem[2:]))
    return names


def level_of(task_id: str) -> str:
    """ "level1/12" -> "level1"."""
    return task_id.split("/", 1)[0]


def versus_compile(results: Sequence[EvalResult], baselines: Mapping[str, EvalResult]) -> dict[str, Any]:
    """How `results` (one per task) compare with the torch.compile baseline of their tasks
    (`baselines[task_id]`, the compile baseline's result on the same pool); see the module doc.

    Returns {"compile_n": tasks with a baseline result, "compile_failed": those whose baseline is
    not ok, "vs_compile_geomean": geometric mean of solution speedup / compile speedup (×) over
    tasks where both are ok (None without any), "vs_compile_fast_1": share of all results that
    are correct and faster than the baseline (> 1×; against the eager reference where the
    baseline failed, and where there is no baseline result at all)}.
    """
    ratios, faster, failed, present = [], 0, 0, 0
    for r in results:
        base = baselines.get(r.task_id)
        if base is not None:
            present += 1
            failed += not base.correct
        if not (r.correct and r.speedup):
            continue
        if base is not None and base.correct and base.speedup:
            ratio = r.speedup / base.speedup
            ratios.append(ratio)
            faster += ratio > 1.0
        else:
            faster += r.speedup > 1.0
    return {
        "compile_n": present,
        "compile_failed": failed,
        "vs_compile_geomean": geometric_mean(ratios) if ratios else None,
        "vs_compile_fast_1": faster / len(results) if results else 0.0,
    }


def paper_table(
    results: Mapping[str, Sequence[EvalResult]],
    ps: Sequence[float] = DEFAULT_PS,
    compile_baselines: Mapping[str, Sequence[EvalResult]] | None = None,
) -> list[dict[str, Any]]:
    """One row per (pool, level) and per pool over all levels ("all"), from `results[pool]`.

    Each row: {"pool", "level", "n", "success" (correct count), "pass_rate", "speedup_mean",
    "speedup_median", "speedup_geomean" (× over correct results, None without any), one
    `fast_p_key(p)` entry per p (share of all n), "status_counts", "hack_counts", "label_counts"
    (non-zero entries only)} — `cudal1.bench.summary.summarize` per group. With
    `compile_baselines[pool]` (the torch.compile baseline's results on that pool, one per task),
    also `versus_compile`'s "compile_n", "compile_failed", "vs_compile_geomean" and
    "vs_compile_fast_1" for pools that have them.
    """
    rows = []
    for pool, pool_results in results.items():
        levels = sorted({level_of(r.task_id) for r in pool_results}, key=lambda lv: (len(lv), lv))
        groups = [(lv, [r for r in pool_results if level_of(r.task_id) == lv]) for lv in levels]
        if len(levels) > 1 or not levels:
            groups.append(("all", list(pool_results)))
        base = (
            None
            if compile_baselines is None or pool not in compile_baselines
            else {b.task_id: b for b in compile_baselines[pool]}
        )
        for level, group in groups:
            s = summarize(group, ps)
            rows.append(
                {
                    "pool": pool,
                    "level": level,
                    "n": s["n"],
                    "success": s["n_correct"],
                    "pass_rate": s["pass_rate"],
                    "speedup_mean": s["speedup_mean"],
                    "speedup_median": s["speedup_median"],
                    "speedup_geomean": s["speedup_geomean"],
                    **s["fast_p"],
                    **(versus_compile(group, base) if base is not None else {}),
                    "status_counts": {k: v for k, v in s["status_counts"].items() if v},
                    "hack_counts": {k: v for k, v in s["hack_counts"].items() if v},
                    "label_counts": s["label_counts"],
                    "no_program": _no_program(group),
                }
            )
    return rows


def _no_program(results: Sequence[EvalResult]) -> dict[str, int]:
    """{placeholder label: count} over `results` that stand for no program at all (status
    compile_error by convention, labelled one of `NO_PROGRAM_LABELS`): the table's status line
    names them by what happened, not as build errors."""
    found = Counter(
        label for r in results if r.status is Status.COMPILE_ERROR for label in NO_PROGRAM_LABELS.intersection(r.labels)
    )
    return dict(found)


def format_paper_table(rows: Sequence[Mapping[str, Any]], ps: Sequence[float] = DEFAULT_PS) -> str:
    """The table as aligned text: one line per row of `paper_table` (with the torch.compile
    columns when any row has them: vs_compile geomean ×, fast_1 vs compile, failed / evaluated
    compile baselines), then the non-zero hack and label counts per pool and level."""

    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}x"

    fast = [fast_p_key(p) for p in ps]
    compiled = any("compile_n" in r for r in rows)
    head = [
        "pool",
        "level",
        "n",
        "success",
        "mean",
        "median",
        "geomean",
        *fast,
        *(["vs_compile", "fast_1_vs_compile", "compile_failed"] if compiled else []),
    ]
    body = [
        [
            str(r["pool"]),
            str(r["level"]),
            str(r["n"]),
            str(r["success"]),
            x(r["speedup_mean"]),
            x(r["speedup_median"]),
            x(r["speedup_geomean"]),
            *(f"{r[k]:.2f}" for k in fast),
            *(
                [x(r["vs_compile_geomean"]), f"{r['vs_compile_fast_1']:.2f}", f"{r['compile_failed']}/{r['compile_n']}"]
                if compiled and "compile_n" in r
                else ["-", "-", "-"]
                if compiled
                else []
            ),
        ]
        for r in rows
    ]
    widths = [max(len(c) for c in col) for col in zip(head, *body)]
    lines = [
        "  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
        for line in [head, *body]
    ]
    for r in rows:
        none = r.get("no_program", {})
        statuses = dict(r["status_counts"])
        statuses[Status.COMPILE_ERROR.value] = statuses.get(Status.COMPILE_ERROR.value, 0) - sum(none.values())
        extra = {
            **{f"hack:{k}": v for k, v in r["hack_counts"].items()},
            **{f"status:{k}": v for k, v in statuses.items() if k != Status.OK and v},
            **{f"no program ({k})": v for k, v in none.items()},
            **{f"label:{k}": v for k, v in r["label_counts"].items()},
        }
        if extra:
            lines.append(f"  {r['pool']}/{r['level']}: " + ", ".join(f"{k} {v}" for k, v in extra.items()))
    return "\n".join(lines)


def evaluate_solutions(
    pools: BenchmarkPools,
    candidates: Sequence[Candidate],
    names: Sequence[str] | None = None,
) -> dict[str, list[EvalResult]]:
    """Evaluate `candidates` on each pool of `pools` (a `BenchmarkPools`) named in `names` (default:
    all, primary first), the pools at the same time (each is its own hardware: one `PoolStream`
    per pool, so the job takes as long as its slowest pool, not the sum). Returns {pool name:
    [EvalResult per candidate, in order]}; a harness failure is a labelled result, never an
    exception (see `BenchmarkPool.evaluate_many`). An error or Ctrl-C while waiting cancels every
    pool's calls in flight."""
    names = list(names) if names else [pools.primary.name, *(n for n in pools.names if n != pools.primary.name)]
    with contextlib.ExitStack() as stack:
        streams = {}
        for name in names:
            log.info("evaluating %d solutions on pool %s", len(candidates), name)
            streams[name] = stack.enter_context(pools.pool(name).stream())
            streams[name].submit(list(candidates))
        return {name: stream.results() for name, stream in streams.items()}


def evaluate_compile_baseline(
    pools: BenchmarkPools, tasks: Sequence[Any], candidates: Sequence[Candidate], names: Sequence[str] | None = None
) -> dict[str, list[EvalResult]]:
    """torch.compile of the reference of each task that `candidates` has a solution for, evaluated
    on the pools `names` (default all) exactly as the solutions are (`evaluate_solutions`), each
    result labelled by `cudal1.bench.baselines.label_baseline` ("baseline_failed" when
    torch.compile failed). Returns {pool name: [EvalResult per candidate's task, in order]}.
    Raises KeyError when a candidate's task is not among `tasks`."""
    from cudal1.bench.baselines import TORCH_COMPILE, compile_candidate, label_baseline

    by_id = {t.task_id: t for t in tasks}
    baseline = [
        Candidate(c.task_id, compile_candidate(by_id[c.task_id].source), origin=f"baseline:{TORCH_COMPILE}")
        for c in candidates
    ]
    log.info("evaluating torch.compile of %d references", len(baseline))
    return {
        pool: [label_baseline(r, TORCH_COMPILE) for r in rs]
        for pool, rs in evaluate_solutions(pools, baseline, names).items()
    }


def plot_speedups(results: Mapping[str, Sequence[EvalResult]], path: Path) -> Path:
    """A bar chart of each task's speedup (×, log scale) per pool, failures drawn at 0; returns `path`."""
    from matplotlib.figure import Figure

    tasks = sorted(
        {r.task_id for rs in results.values() for r in rs},
        key=lambda t: (int(level_of(t)[5:] or 0), int(t.split("/")[1]) if t.split("/")[1].isdigit() else 0),
    )
    fig = Figure(figsize=(max(6.0, 0.45 * len(tasks) * max(1, len(results))), 3.6), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(results))
    for i, (pool, rs) in enumerate(results.items()):
        by_task = {r.task_id: (r.speedup if r.correct and r.speedup else 0.0) for r in rs}
        xs = [j + i * width for j in range(len(tasks))]
        ax.bar(xs, [by_task.get(t, 0.0) for t in tasks], width=width, label=pool)
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))], tasks, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("speedup vs eager (×)")
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110)
    return path


def run_evaluate_job(cfg: Any) -> list[dict[str, Any]]:
    """`jobs/evaluate.py`: the solutions of `cfg.solutions` for the tasks `cfg.tasks` selects,
    evaluated on `cfg.pools` (default every pool), with torch.compile of each reference beside
    them when `cfg.compile_baseline` (`evaluate_compile_baseline`), written to `cfg.out_dir` and
    MLflow, the table printed. Returns the table's rows (`paper_table`). Raises what `load_solutions`,
    `cudal1.launch.start_ray` and pool creation raise."""
    from cudal1.actors.bench_pool import BenchmarkPools
    from cudal1.actors.pool_spec import pool_specs
    from cudal1.launch import open_tracker, select_tasks, start_ray

    out = Path(cfg.out_dir).resolve()
    tasks = select_tasks(cfg)
    candidates, skipped = load_solutions(cfg.solutions, [t.task_id for t in tasks])
    outside = [n for n in skipped if "not among the selected tasks" in n or ": no task " in n]
    for note in [n for n in skipped if n not in outside][:20]:
        log.warning("skipped: %s", note)
    if outside:
        log.info("%d solutions for tasks outside the selection left out", len(outside))
    log.info("%d solutions for %d selected tasks from %s", len(candidates), len(tasks), cfg.solutions)
    start_ray(cfg)
    out.mkdir(parents=True, exist_ok=True)
    ps = list(cfg.ps)
    with (
        open_tracker(cfg, out) as tracker,
        BenchmarkPools(
            list(pool_specs(cfg.bench.pools, cfg.tasks.source).values()), primary=cfg.bench.primary
        ) as pools,
    ):
        tracker.log_config(
            {
                "solutions": str(cfg.solutions),
                "tasks": dict(cfg.tasks),
                "pools": list(cfg.pools),
                "compile_baseline": bool(cfg.compile_baseline),
                "bench": {name: dict(p) for name, p in cfg.bench.pools.items()},
            }
        )
        results = evaluate_solutions(pools, candidates, list(cfg.pools) or None)
        compiled = (
            evaluate_compile_baseline(pools, tasks, candidates, list(cfg.pools) or None)
            if cfg.compile_baseline
            else None
        )
        for pool, rs in [*results.items(), *((f"{p}_torch_compile", rs) for p, rs in (compiled or {}).items())]:
            path = out / f"results_{pool}.jsonl"
            # The evaluator's columns: which actor of the pool measured a result is not part of the table.
            path.write_text("".join(dataclasses.replace(r, actor=None).to_json() + "\n" for r in rs))
            tracker.log_table(
                [
                    {
                        "task_id": r.task_id,
                        "status": r.status.value,
                        "speedup": r.speedup,
                        "hack_kind": r.hack_kind.value if r.hack_kind else None,
                        "labels": ",".join(r.labels),
                        "message": r.message[:200],
                    }
                    for r in rs
                ],
                f"tables/results_{pool}.json",
            )
        rows = paper_table(results, ps, compiled)
        text = format_paper_table(rows, ps)
        (out / "table.json").write_text(json.dumps(rows, indent=1))
        (out / "table.txt").write_text(text + "\n")
        plot_speedups(results, out / "speedups.png")
        tracker.log_table(
            [{k: v for k, v in r.items() if not k.endswith("_counts")} for r in rows], "tables/paper_table.json"
        )
        for r in rows:
            tracker.log_metrics(
                {f"{r['pool']}/{r['level']}/{k}": v for k, v in r.items() if isinstance(v, (int, float)) and k != "n"},
                step=0,
            )
        for name in ("table.json", "table.txt", "speedups.png"):
            tracker.log_artifact(out / name)
    print(text, flush=True)
    log.info("results in %s%s", out, f"; MLflow run {tracker.run_id}" if tracker.run_id else "")
    return rows
