"""Read a finished (or running) training run back as pandas tables, for `notebooks/review.ipynb`.

Pure functions over what `jobs/train.py` leaves in a run directory:
  - `state.json`: the `RunState`, whose `history` has one summary row per unit (step, stage, ...).
  - `rollouts/<name>.jsonl`: every `Rollout` of a unit (`self_train_round<k>`, `rl_step<k>`).
  - `buffer/exemplars.jsonl`: the exemplar buffer's append-only log of `Exemplar`s.
  - `exports/<stage>/`: the Hugging Face checkpoint exported after each stage.
Nothing here writes to the run directory. Missing files give empty tables with the same columns,
so a run that stopped early (or is still going) can be reviewed. The MLflow reader imports mlflow
only when called.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from cudal1.bench.result import Status
from cudal1.pipeline.metrics import PASSING

ROLLOUT_COLUMNS = [
    "stage",
    "unit",
    "task_id",
    "step",
    "group",
    "sample",
    "reward",
    "reward_reason",
    "advantage",
    "parse_error",
    "status",
    "hack_kind",
    "labels",
    "speedup",
    "paid_speedup",
    "reference_ms",
    "candidate_ms",
    "finish_reason",
    "response_tokens",
    "model_version",
    "message",
    "episode",
    "turn",
    "turn_return",
]
EXEMPLAR_COLUMNS = ["task_id", "speedup", "status", "step", "model_version", "origin", "analysis", "code"]
UNPARSED = "unparsed"
"""The `status` of a rollout that was never evaluated because its response did not parse."""

# rollouts/<prefix><unit>.jsonl file names, as written by cudal1.pipeline.stages.
_FILE_STAGES = {"self_train_round": "self_train", "rl_step": "contrastive_rl"}


@dataclasses.dataclass
class RunData:
    """One run directory, loaded.

    Attributes:
        run_dir: the directory read.
        state: `state.json` as a dict ({} when absent); keys as in `cudal1.pipeline.state.RunState`.
        history: one row per finished unit from `state["history"]`: step, stage and the summary
            metrics (`reward/mean`, `pass_rate`, `speedup/mean` (×), `fast_1`, or `sft_loss`).
        rollouts: one row per rollout, columns `ROLLOUT_COLUMNS`. `status` is the evaluator's
            status, or `UNPARSED` when the response failed to parse; `speedup` (×) is the
            measured one, set only for status ok, `paid_speedup` (×) the one the reward paid;
            `reference_ms` / `candidate_ms` are median ms per forward call (NaN when not timed);
            `labels` is a list of strings; `episode`, `turn`, `turn_return`: a multi-turn
            refinement episode's id, the turn (1 first) and its return (a single-turn rollout,
            and a record written before episodes existed: None, 1, NaN).
        exemplars: one row per line of the buffer log, columns `EXEMPLAR_COLUMNS` (evicted
            exemplars stay in the log, so this is everything ever accepted).
        exports: names of the stages with an exported checkpoint under `exports/`.
    """

    run_dir: Path
    state: dict[str, Any]
    history: pd.DataFrame
    rollouts: pd.DataFrame
    exemplars: pd.DataFrame
    exports: list[str]


def default_run_dir(cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The run to review: `$CUDAL1_RUN_DIR` if set, else under `./runs` or `../runs` (a
    notebook's working directory is `notebooks/`) the most recently modified *finished* run (its
    state.json names completed stages and no stage in progress), else the most recent directory
    with a state.json, else None. Folders without a state.json (datasets, MLflow artifacts, a run
    that stopped before its first unit) are never picked."""
    env = os.environ.get("CUDAL1_RUN_DIR")
    if env:
        return Path(env)
    cwd = Path(cwd) if cwd is not None else Path.cwd()
    for root in (cwd / "runs", cwd.parent / "runs"):
        runs = [p for p in root.iterdir() if (p / "state.json").is_file()] if root.is_dir() else []
        if not runs:
            continue
        finished = [p for p in runs if _finished(p)]
        return max(finished or runs, key=lambda p: p.stat().st_mtime)
    return None


def _finished(run_dir: Path) -> bool:
    try:
        state = json.loads((run_dir / "state.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return bool(state.get("completed")) and state.get("stage") is None


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a torn or unreadable line (a crash mid-write) is skipped."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def file_unit(stem: str) -> tuple[str, int | None]:
    """`rl_step3` -> ("contrastive_rl", 3); an unknown name -> (name without its digits, the digits)."""
    m = re.fullmatch(r"(.*?)(\d+)?", stem)
    prefix, digits = m.group(1), m.group(2)
    return _FILE_STAGES.get(prefix, prefix.rstrip("_")), int(digits) if digits is not None else None


def _median_ms(timing: dict[str, Any] | None) -> float | None:
    return timing.get("median_ms") if timing else None


def rollout_row(record: dict[str, Any], stage: str, unit: int | None) -> dict[str, Any]:
    """One rollout record (`dataclasses.asdict(Rollout)`, a line of rollouts/*.jsonl) as a flat
    row with the columns `ROLLOUT_COLUMNS` (see `RunData.rollouts`); `message` is the first 200
    characters of the evaluator's message."""
    res = record.get("result") or {}
    gen = record.get("generation") or {}
    parse_error = record.get("parse_error")
    return {
        "stage": stage,
        "unit": unit,
        "task_id": record["task_id"],
        "step": record["step"],
        "group": record.get("group"),
        "sample": record.get("sample"),
        "reward": record.get("reward", 0.0),
        "reward_reason": record.get("reward_reason", ""),
        "advantage": record.get("advantage", 0.0),
        "parse_error": parse_error,
        "status": res.get("status") or (UNPARSED if parse_error is not None else None),
        "hack_kind": res.get("hack_kind"),
        "labels": list(res.get("labels") or []),
        "speedup": res.get("speedup"),
        "paid_speedup": record.get("paid_speedup"),
        "reference_ms": _median_ms(res.get("reference")),
        "candidate_ms": _median_ms(res.get("candidate")),
        "finish_reason": gen.get("finish_reason"),
        "response_tokens": len(gen.get("response_ids") or []),
        "model_version": gen.get("model_version"),
        "message": (res.get("message") or "")[:200],
        "episode": record.get("episode"),
        "turn": record.get("turn", 1),
        "turn_return": record.get("return"),
    }


def load_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Load a run directory's state, rollouts and exemplar buffer.

    Rollout files are read in step order; rows are sorted by (step, group, sample, turn).

    Raises:
        FileNotFoundError: `run_dir` is not a directory.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run directory at {run_dir}")
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    history = pd.DataFrame(state.get("history") or [])
    if history.empty:
        history = pd.DataFrame(columns=["step", "stage"])

    rows = []
    for path in sorted((run_dir / "rollouts").glob("*.jsonl")):
        stage, unit = file_unit(path.stem)
        rows += [rollout_row(r, stage, unit) for r in _read_jsonl(path)]
    rollouts = pd.DataFrame(rows, columns=ROLLOUT_COLUMNS)
    for col in ("speedup", "paid_speedup"):
        rollouts[col] = pd.to_numeric(rollouts[col], errors="coerce")
    for col in ("reference_ms", "candidate_ms", "reward", "advantage", "turn_return"):
        rollouts[col] = pd.to_numeric(rollouts[col], errors="coerce")
    rollouts = rollouts.sort_values(["step", "group", "sample", "turn"], kind="stable").reset_index(drop=True)

    buffer_log = run_dir / "buffer" / "exemplars.jsonl"
    records = _read_jsonl(buffer_log) if buffer_log.exists() else []
    exemplars = pd.DataFrame([{c: r.get(c) for c in EXEMPLAR_COLUMNS} for r in records], columns=EXEMPLAR_COLUMNS)
    exemplars["speedup"] = pd.to_numeric(exemplars["speedup"], errors="coerce")

    exports_dir = run_dir / "exports"
    exports = sorted(p.name for p in exports_dir.iterdir() if p.is_dir()) if exports_dir.is_dir() else []
    return RunData(run_dir, state, history, rollouts, exemplars, exports)


def per_step_table(run: RunData) -> pd.DataFrame:
    """Rollout statistics per step, recomputed from the raw rollouts.

    Same definitions as `cudal1.pipeline.metrics.rollout_metrics`: rates are over all rollouts
    of the step (a parse failure counts as a failure); a rollout passes when the reward paid it
    as correct (`reward_reason` in `metrics.PASSING`); `speedup_mean` (×) is the mean paid
    speedup of the passing rollouts, NaN when there is none; `fast_1` is the share that passes
    with a paid speedup above 1.

    `step` is the rollouts' own step (the global step when they were sampled). The training loop
    logs a unit's metrics to MLflow and `state.json` history after its update has advanced the
    counter, so the same numbers appear there at a later step (one later for an RL step).

    Returns:
        One row per step (sorted), index `step`, columns: stage, rollouts, reward_mean,
        pass_rate, speedup_mean, fast_1, parse_failure_rate. Empty when there are no rollouts.
    """
    columns = ["stage", "rollouts", "reward_mean", "pass_rate", "speedup_mean", "fast_1", "parse_failure_rate"]
    r = run.rollouts
    if r.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="step"))
    ok = r["reward_reason"].isin(PASSING) & r["paid_speedup"].notna()
    frame = r.assign(
        ok=ok.astype(float),
        ok_speedup=r["paid_speedup"].where(ok),
        faster=(ok & (r["paid_speedup"] > 1.0)).astype(float),
        unparsed=r["parse_error"].notna().astype(float),
    )
    table = frame.groupby("step").agg(
        stage=("stage", "first"),
        rollouts=("task_id", "size"),
        reward_mean=("reward", "mean"),
        pass_rate=("ok", "mean"),
        speedup_mean=("ok_speedup", "mean"),
        fast_1=("faster", "mean"),
        parse_failure_rate=("unparsed", "mean"),
    )
    return table[columns]


def status_counts(run: RunData, column: str = "status") -> pd.DataFrame:
    """Counts of a categorical rollout column per stage: stages as rows, values as columns.

    Args:
        column: "status" (including `UNPARSED`), "hack_kind" or "parse_error"; missing values
            (e.g. no hack) are left out.
    Returns:
        Integer counts, index `stage` (in order of first appearance), one column per value seen
        (sorted); empty when no rollout has a value in `column`.
    Raises:
        KeyError: `column` is not a rollout column.
    """
    r = run.rollouts
    values = r[column]
    if values.notna().sum() == 0:
        return pd.DataFrame(index=pd.Index([], name="stage"))
    table = pd.crosstab(r["stage"], values)
    table = table.reindex([s for s in r["stage"].unique() if s in table.index])
    table.columns.name = column
    return table[sorted(table.columns)]


def best_per_task(run: RunData) -> pd.DataFrame:
    """The fastest correct exemplar of each task in the buffer log.

    Returns:
        One row per task (sorted by task_id), index `task_id`, columns: speedup (×), origin
        ("seed" or "step<k>/g<i>/s<j>"), step, model_version, exemplars (correct ones logged for
        that task), code. Ties keep the earliest logged. Empty when the buffer has no exemplar.
    """
    columns = ["speedup", "origin", "step", "model_version", "exemplars", "code"]
    e = run.exemplars
    e = e[(e["status"] == Status.OK.value) & e["speedup"].notna()]
    if e.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="task_id"))
    best = e.loc[e.groupby("task_id", sort=True)["speedup"].idxmax()].set_index("task_id")
    best["exemplars"] = e.groupby("task_id").size()
    return best[columns]


def episode_table(run: RunData) -> pd.DataFrame:
    """The multi-turn refinement episodes of the run (`stage.contrastive_rl.turns` > 1), one row each.

    Returns:
        Index `episode` ("step<k>/g<group>/s<sample>", the first turn's origin), columns: step,
        task_id, turns, statuses (per turn, the evaluator's status or `UNPARSED`), speedups (per
        turn, the measured speedup, ×; NaN where not correct), reasons (per turn, the reward
        reason), rewards, returns (per turn; NaN for a turn left out),
        first_passed / passed (turn 1 / any turn paid as correct, `metrics.PASSING`),
        best_speedup (×, the best paid speedup of a passing turn; NaN for none). Empty when no
        rollout belongs to an episode (a single-turn run, or records written before episodes).
    """
    columns = [
        "step",
        "task_id",
        "turns",
        "statuses",
        "speedups",
        "reasons",
        "rewards",
        "returns",
        "first_passed",
        "passed",
        "best_speedup",
    ]
    r = run.rollouts[run.rollouts["episode"].notna()]
    if r.empty:
        return pd.DataFrame(columns=columns, index=pd.Index([], name="episode"))
    rows = {}
    for episode, turns in r.sort_values("turn", kind="stable").groupby("episode", sort=False):
        passing = turns["reward_reason"].isin(PASSING) & turns["paid_speedup"].notna()
        rows[episode] = {
            "step": turns["step"].iloc[0],
            "task_id": turns["task_id"].iloc[0],
            "turns": len(turns),
            "statuses": list(turns["status"]),
            "speedups": list(turns["speedup"]),
            "reasons": list(turns["reward_reason"]),
            "rewards": list(turns["reward"]),
            "returns": list(turns["turn_return"]),
            "first_passed": bool(passing.iloc[0]),
            "passed": bool(passing.any()),
            "best_speedup": turns["paid_speedup"].where(passing).max(),
        }
    table = pd.DataFrame.from_dict(rows, orient="index", columns=columns)
    table.index.name = "episode"
    return table


def mlflow_metrics(run: RunData, tracking_uri: str | None = None) -> pd.DataFrame | None:
    """The latest value of every metric of the run's MLflow run, or None when there is none.

    The store is `tracking_uri`, else `$MLFLOW_TRACKING_URI`, else the local SQLite store the run
    recorded (`state["mlflow_uri"]`), else `<run_dir's parent>/mlflow.db` (the project's default
    store `runs/mlflow.db` for a run under `runs/`, and the default of runs made before the store
    was per project); a local store whose file does not exist gives None without creating one.
    The run is `state["mlflow_run_id"]`, else the newest run of experiment "cudal1" whose name is
    the run directory's name.

    Returns:
        Index `key` (sorted), one column `value`. None: no store, no such run, or mlflow
        is not installed.
    Raises:
        MlflowException (and its transport errors): the store exists but cannot be read.
    """
    try:
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException
    except ImportError:
        return None
    from cudal1.tracking import local_store_path

    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri is None:
        recorded = local_store_path(run.state.get("mlflow_uri"))
        beside = run.run_dir.resolve().parent / "mlflow.db"
        db = recorded if recorded is not None and recorded.is_file() else beside
        if not db.is_file():
            return None
        uri = f"sqlite:///{db}"
    client = MlflowClient(tracking_uri=uri)
    run_id = run.state.get("mlflow_run_id")
    if not run_id:
        exp = client.get_experiment_by_name("cudal1")
        if exp is None:
            return None
        found = client.search_runs(
            [exp.experiment_id],
            filter_string=f"attributes.run_name = '{run.run_dir.name}'",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not found:
            return None
        run_id = found[0].info.run_id
    try:
        metrics = client.get_run(run_id).data.metrics
    except MlflowException as e:
        if e.error_code == "RESOURCE_DOES_NOT_EXIST":  # the run id is from another store
            return None
        raise
    return pd.Series(metrics, name="value", dtype=float).rename_axis("key").sort_index().to_frame()
