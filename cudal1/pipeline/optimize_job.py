"""`jobs/optimize.py`: `Optimizer` over a set of tasks, with files, a table and MLflow.

`optimize_tasks` runs an `Optimizer` on each task and writes, under `out_dir`:

    solutions/level<L>/<id>_<Name>.py   the delivered solution per task (`TaskOutcome.delivered`:
                                        its paid speedup beats the reference and the starting
                                        solutions; none otherwise), in the layout
                                        `cudal1 eval-suite --solutions` and jobs/evaluate.py read;
                                        a standalone program's (task "file/<name>"): file/<name>.py
    reports/level<L>_<id>.json          the task's `TaskOutcome`: every attempt with its evaluation,
                                        each round's prompt, the solution's analysis and design
                                        (a standalone program's: reports/file_<name>.json)
    results.jsonl                       one `EvalResult` per task (`TaskOutcome.table_result`): the
                                        table's input, where a task with nothing delivered is
                                        never a success
    table.json, table.txt               `paper_table` over results.jsonl: mean / median / geomean
                                        speedup, fast_1, fast_1.01, ... (× vs the eager reference)

and logs all of it to MLflow. `run_optimize_job(cfg)` is the Hydra job: it selects the tasks,
starts Ray, the generator group and the primary benchmark pool, and calls `optimize_tasks`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from cudal1.pipeline.evaluate import format_paper_table, paper_table
from cudal1.progress import bar as progress_bar
from cudal1.pipeline.optimize import OptimizeSettings, Optimizer, ProgressCallback, TaskOutcome
from cudal1.tasks.task import Task

log = logging.getLogger(__name__)


def solution_path(root: Path, task: Task) -> Path:
    """`root/level<L>/<id>_<Name>.py` for a suite's task (the suite layout); `root/file/<name>.py`
    for a standalone program (task "file/<name>"), which a later run's `start=` matches by name."""
    if task.standalone:
        return root / f"{task.task_id}.py"
    name = re.sub(r"[^A-Za-z0-9_]+", "_", task.name).strip("_") or "task"
    return root / f"level{task.level}" / f"{task.problem_id}_{name}.py"


def distinct_ids(tasks: Sequence[Task]) -> list[Task]:
    """`tasks` with colliding task ids made distinct, in their order, each change logged. A
    standalone program whose name is taken (two files `a/relu.py`, `b/relu.py`) gets the first free
    numeric suffix: "file/relu", then "file/relu_2" (its start solution is then `relu_2.py`). A
    suite's task whose id is taken (one file loaded twice) gets the next free id of its level."""
    taken = {t.task_id for t in tasks}
    seen: set[str] = set()
    out = []
    for t in tasks:
        if t.task_id in seen:
            if t.standalone:
                k = 2
                while f"{t.task_id}_{k}" in taken:
                    k += 1
                new = dataclasses.replace(t, name=f"{t.name}_{k}")
                log.info("%s (%s) named %s: the name is taken", t.task_id, t.path or t.name, new.task_id)
            else:
                taken_ids = (int(i.split("/")[1]) for i in taken if i.startswith(f"level{t.level}/"))
                new = dataclasses.replace(t, problem_id=max([t.problem_id, *taken_ids]) + 1)
                log.info("%s (%s) renumbered %s: the id is taken", t.task_id, t.path or t.name, new.task_id)
            t = new
            taken.add(t.task_id)
        seen.add(t.task_id)
        out.append(t)
    return out


def task_line(o: TaskOutcome) -> str:
    """One summary line of a task's outcome: "<task id> <name>: <status>: ...", the name left out
    when the id ends with it (a standalone program's "file/<name>")."""
    head = o.task_id if o.task_id.endswith(f"/{o.name}") else f"{o.task_id} {o.name}"
    if not o.delivered:
        return f"{head}: {o.status}: {o.message}"
    s = o.solution
    spread = f" (spread {s.spread:.0%})" if s.spread is not None else ""
    labels = f" [{', '.join(s.labels)}]" if s.labels else ""
    return f"{head}: {o.status}: {s.paid:.2f}x paid{spread}{labels}, from {s.origin}"


def outcome_row(o: TaskOutcome) -> dict[str, Any]:
    """The task's row of MLflow's per-task table (`tables/optimize.json`): status, "delivered", and
    the delivered solution's speedup (×, verified), paid speedup (×), spread, labels, origin and
    analysis (None / "" when nothing is delivered: the message says why), attempts, message."""
    sol = o.solution if o.delivered else None
    return {
        "task_id": o.task_id,
        "name": o.name,
        "status": o.status,
        "delivered": sol is not None,
        "speedup": sol.speedup if sol else None,
        "paid": sol.paid if sol else None,
        "spread": sol.spread if sol else None,
        "labels": ",".join(sol.labels) if sol else "",
        "origin": sol.origin if sol else "",
        "attempts": len(o.attempts),
        "message": o.message[:200],
        "analysis": (sol.analysis if sol else "")[:500],
    }


def optimize_tasks(
    optimizer: Optimizer,
    tasks: Sequence[Task],
    out_dir: str | Path,
    *,
    starts: Mapping[str, Sequence[str]] | None = None,
    tracker: Any = None,
    pool_name: str = "cpu",
    ps: Sequence[float] = (1.0, 1.01),
    progress: bool = True,
    on_progress: ProgressCallback | None = None,
) -> tuple[list[TaskOutcome], list[dict[str, Any]]]:
    """Optimize each task in turn, writing the files of the module doc as results arrive.

    Args:
        optimizer: the loop (its pool evaluates; its generator samples).
        tasks: distinct task ids (see `distinct_ids`).
        out_dir: created if missing.
        starts: {task_id: starting solution sources} (`Optimizer.optimize`'s `start`).
        tracker: a `cudal1.tracking.Tracker` (None: no MLflow).
        pool_name: the table's pool column.
        ps: fast_p thresholds (×).
        progress: a progress bar over tasks, its postfix the current round and best speedup.
        on_progress: also called with every event of `Optimizer.optimize`.

    Returns:
        (one `TaskOutcome` per task, the table's rows from `paper_table`).
    """
    out = Path(out_dir)
    for sub in ("solutions", "reports"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    results_file = out / "results.jsonl"
    results_file.write_text("")
    outcomes: list[TaskOutcome] = []
    bar = progress_bar(total=len(tasks), desc="optimize", unit="task", enabled=progress)

    def show(event: dict[str, Any]) -> None:
        if on_progress is not None:
            on_progress(event)
        if event["event"] == "round_start":
            bar.set_postfix_str(f"{event['task_id']} round {event['round']}/{event['rounds']}")
        elif event["event"] == "round_done":
            best = event["best_speedup"]
            bar.set_postfix_str(
                f"{event['task_id']} round {event['round']}/{event['rounds']}: {event['correct']}/"
                f"{event['evaluated']} correct" + (f", best {best:.2f}x" if best else "")
            )

    try:
        for i, task in enumerate(tasks):
            o = optimizer.optimize(task, start=list((starts or {}).get(task.task_id, ())), on_progress=show)
            outcomes.append(o)
            if o.delivered:
                path = solution_path(out / "solutions", task)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(o.solution.code, encoding="utf-8")
            report = out / "reports" / f"{task.task_id.replace('/', '_')}.json"
            report.write_text(json.dumps({**o.to_dict(), "path": task.path}, indent=1, default=str))
            with results_file.open("a") as f:
                f.write(o.table_result().to_json() + "\n")
            bar.update(1)
            tqdm.write(task_line(o))
            if tracker is not None:
                tracker.log_metrics(
                    {
                        "task/speedup": o.speedup or 0.0,  # 0.0: nothing delivered
                        "task/delivered": float(o.delivered),
                        "task/attempts": float(len(o.attempts)),
                        "task/seconds": o.seconds,
                    },
                    step=i,
                )
    finally:
        bar.close()
    from cudal1.bench.result import EvalResult

    results = [EvalResult.from_dict(json.loads(line)) for line in results_file.read_text().splitlines() if line.strip()]
    rows = paper_table({pool_name: results}, ps)
    text = format_paper_table(rows, ps)
    (out / "table.json").write_text(json.dumps(rows, indent=1))
    (out / "table.txt").write_text(text + "\n")
    if tracker is not None:
        tracker.log_table([outcome_row(o) for o in outcomes], "tables/optimize.json")
        tracker.log_table(
            [{k: v for k, v in r.items() if not k.endswith("_counts")} for r in rows], "tables/paper_table.json"
        )
        for r in rows:
            tracker.log_metrics(
                {f"{r['pool']}/{r['level']}/{k}": v for k, v in r.items() if isinstance(v, (int, float)) and k != "n"},
                step=0,
            )
        for name in ("table.json", "table.txt", "results.jsonl", "solutions", "reports"):
            tracker.log_artifact(out / name)
    return outcomes, rows


def job_tasks(cfg: Any) -> list[Task]:
    """The tasks of an optimize job: its `task_files` (parsed, not executed), else what `cfg.tasks`
    selects (a builtin suite or a KernelBench checkout). Ids made distinct (`distinct_ids`).
    Raises ValueError naming a bad task file (`load_task_file`), ConfigError for an unknown id or source."""
    from cudal1.launch import select_tasks
    from cudal1.tasks import load_task_file

    if cfg.task_files:
        return distinct_ids([load_task_file(Path(p).expanduser()) for p in cfg.task_files])
    return distinct_ids(select_tasks(cfg))


def run_optimize_job(cfg: Any) -> tuple[list[TaskOutcome], list[dict[str, Any]]]:
    """`jobs/optimize.py`: optimize the job's tasks with its model on its primary pool; print each
    task's line, the analyses of the solutions found and the table; write `cfg.out_dir` and MLflow.
    Returns `optimize_tasks`' value. Raises what `start_ray`, model loading and pool creation raise."""
    from omegaconf import OmegaConf

    from cudal1.actors.bench_pool import BenchmarkPool
    from cudal1.actors.pool_spec import pool_specs
    from cudal1.launch import ensure_model, open_tracker, start_generator, start_ray
    from cudal1.pipeline.evaluate import load_solutions
    from cudal1.policy.model import load_tokenizer

    out = Path(cfg.out_dir).resolve()
    tasks = job_tasks(cfg)
    starts: dict[str, list[str]] = {}
    if cfg.start:
        found, skipped = load_solutions(cfg.start, [t.task_id for t in tasks], exclude=[t.path for t in tasks])
        for note in skipped:
            log.debug("start: %s", note)
        for c in found:
            starts.setdefault(c.task_id, []).append(c.source)
        log.info("%d starting solutions from %s (%d skipped)", len(found), cfg.start, len(skipped))
    log.info(
        "%d tasks: %s", len(tasks), ", ".join(t.task_id for t in tasks[:20]) + (", ..." if len(tasks) > 20 else "")
    )
    start_ray(cfg, log_dir=out / "logs")  # the engines' log lines go there, not to the terminal
    out.mkdir(parents=True, exist_ok=True)
    model_path = ensure_model(cfg, out)
    tokenizer = load_tokenizer(model_path)
    # Candidates carry their tasks (`Candidate.task`): the pool's own suite is never looked up, so
    # its actors load the small builtin one (a KernelBench checkout need not be on every node).
    spec = pool_specs(cfg.bench.pools, tasks="builtin")[cfg.bench.primary]
    generator = pool = None
    with open_tracker(cfg, out) as tracker:
        tracker.log_config(OmegaConf.to_container(cfg, resolve=True))
        try:
            generator = start_generator(cfg, model_path)
            pool = BenchmarkPool(spec)
            log.info("waiting for the rollout generator (%s)", model_path)
            generator.ready()
            optimizer = Optimizer(generator, pool, tokenizer, OptimizeSettings.from_config(cfg), progress_bars=True)
            outcomes, rows = optimize_tasks(
                optimizer, tasks, out, starts=starts, tracker=tracker, pool_name=spec.name, ps=list(cfg.ps)
            )
        finally:
            if pool is not None:
                pool.shutdown()
            if generator is not None:
                generator.kill()
    for o in outcomes:
        if o.delivered and o.solution.analysis:
            print(f"\n{o.task_id} analysis ({o.solution.origin}):\n{o.solution.analysis[:1200]}")
    if len(outcomes) > 1:  # one task's line was printed as it finished, just above
        print("\n" + "\n".join(task_line(o) for o in outcomes))
    print("\n" + format_paper_table(rows, list(cfg.ps)), flush=True)
    log.info(
        "solutions, reports and the table in %s%s", out, f"; MLflow run {tracker.run_id}" if tracker.run_id else ""
    )
    return outcomes, rows
