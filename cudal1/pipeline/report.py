"""What a finished training run says in the terminal: `task_outcomes`, `format_run_summary`.

Per task: the best speedup the seeds reached and the best the policy's own rollouts reached
(self-training and contrastive RL), so a reader sees at once whether training beat the seeds;
then where each stage lies on MLflow's two step axes, the last unit's pass rate and fast_1, the
registered model versions, the MLflow run with the command that serves its store and the page to
open (`mlflow_review_lines`), and the run directory.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cudal1.pipeline.metrics import OVERVIEW


def written_by_policy(origin: str) -> bool:
    """Whether an exemplar origin names a rollout ("step<k>/g<group>/s<sample>", `Rollout.origin`);
    every other origin (seed, reference, dataset records) is stage-1 data."""
    return origin.startswith("step")


def task_outcomes(task_ids: Sequence[str], exemplars: Mapping[str, Iterable[Any]]) -> list[dict[str, Any]]:
    """One row per task: {"task", "seed_best", "policy_best", "beat_seed"}.

    `exemplars[task_id]` holds the buffer's `Exemplar`s (correct solutions with `speedup` in × and
    an `origin`, see `written_by_policy`). `seed_best` / `policy_best` are the best speedups (×) of seed-origin and
    policy-origin exemplars (None when there are none); `beat_seed` is True when the policy's best
    is strictly above the seeds' best (or the policy has one and the seeds none), False when it has
    one that is not, None when the policy has no correct solution for the task.
    """
    rows = []
    for task_id in task_ids:
        seed_best = policy_best = None
        for e in exemplars.get(task_id, ()):
            if written_by_policy(e.origin):
                policy_best = e.speedup if policy_best is None else max(policy_best, e.speedup)
            else:
                seed_best = e.speedup if seed_best is None else max(seed_best, e.speedup)
        beat = None if policy_best is None else (seed_best is None or policy_best > seed_best)
        rows.append({"task": task_id, "seed_best": seed_best, "policy_best": policy_best, "beat_seed": beat})
    return rows


UNIT_NAMES = {"sft": "epoch", "self_train": "round", "contrastive_rl": "step"}
"""What a unit of each stage is called: the stage's own counter, which `RunState.history` rows
carry as "unit" (1 for its first)."""


def step_ranges(history: Sequence[Mapping[str, Any]], key: str = "step") -> dict[str, tuple[int, int]]:
    """Stage → (first, last) MLflow step of its history rows, in the order the stages ran: where
    each stage lies on one of the run's step axes. `key` "step": the learner calls over all
    stages (`RunState.step`; a row's step is where its unit's metrics are logged);
    "overview_step": the `_overview/` charts' axis (`RunState.overview_step`). Rows without a
    stage or that key are skipped."""
    ranges: dict[str, tuple[int, int]] = {}
    for h in history:
        stage, step = h.get("stage"), h.get(key)
        if stage is None or step is None:
            continue
        first, last = ranges.get(stage, (int(step), int(step)))
        ranges[stage] = (min(first, int(step)), max(last, int(step)))
    return ranges


MLFLOW_UI_ADDRESS = "http://127.0.0.1:5000"
"""Where `mlflow ui` serves when given no --host or --port (its defaults)."""

MODEL_TRAINING_VIEW = "workflowType=machine_learning"
"""The URL query that opens MLflow's UI (3.17) in its "Model training" view (runs, metric charts,
model registry). Without it, and without an earlier click on the sidebar's "Model training"
switch (kept in the browser's local storage), the UI opens an experiment in its GenAI view
(traces, sessions, judges). The experiment tag `mlflow.experimentKind` does not change that in
3.17: its UI takes the view from the switch or this query (tests/test_mlflow_ui.py opens the page
`mlflow_review_lines` prints)."""


def mlflow_command(python: str | None = None, cwd: str | os.PathLike[str] | None = None) -> str:
    """The `mlflow` command of the Python environment `python` (default: this process's
    interpreter) belongs to: the `mlflow` script beside the interpreter, written relative to `cwd`
    (default: the current directory) when it lies under it (".venv/bin/mlflow"), else absolute;
    `<python> -m mlflow` when there is no such script."""
    python = python or sys.executable
    script = Path(python).parent / "mlflow"
    if not script.is_file():
        return f"{shlex.quote(python)} -m mlflow"
    here = Path.cwd() if cwd is None else Path(cwd)
    try:
        shown = str(script.relative_to(here))
    except ValueError:
        shown = str(script)
    return shlex.quote(shown)


def run_page(base_url: str, experiment_id: str, run_id: str) -> str:
    """The run's "Model metrics" page (its charts, `_overview/` first) in MLflow's UI at
    `base_url`, in the "Model training" view (`MODEL_TRAINING_VIEW`)."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}/model-metrics?{MODEL_TRAINING_VIEW}"


def mlflow_review_lines(
    tracking_uri: str | None, experiment_id: str | None, run_id: str, python: str | None = None
) -> list[str]:
    """How to look at MLflow run `run_id`, as summary lines.

    A local store (`sqlite:///...`): the command that serves it, with the environment's own
    `mlflow` (`mlflow_command`) and the store's URI, then the run's page on `mlflow ui`'s default
    address (`run_page`). A tracking server (`http://`, `https://`): the run's page on it. Any
    other store: its URI only. Without `experiment_id` no page is named.
    """
    uri = tracking_uri or ""
    if uri.startswith("sqlite:///"):
        lines = [f"MLflow run {run_id}: {mlflow_command(python)} ui --backend-store-uri {shlex.quote(uri)}"]
        if experiment_id is not None:
            lines.append(f"then open {run_page(MLFLOW_UI_ADDRESS, experiment_id, run_id)}")
        return lines
    if uri.startswith(("http://", "https://")) and experiment_id is not None:
        return [f"MLflow run {run_id}: open {run_page(uri, experiment_id, run_id)}"]
    return [f"MLflow run {run_id} in {uri}"]


def format_run_summary(
    outcomes: Sequence[Mapping[str, Any]],
    history: Sequence[Mapping[str, Any]],
    versions: Mapping[str, str],
    run_dir: str,
    run_id: str | None,
    tracking_uri: str | None,
    experiment_id: str | None = None,
) -> str:
    """The summary block printed when a training run ends (plain text, one item per line).

    `history` is `RunState.history` (per-unit rows with "step", "stage", "unit", and "pass_rate"
    and "fast_1" where rollouts were sampled); `versions` maps stage → registered model version of
    `cudal1-policy`; `experiment_id` is the MLflow run's experiment (for the page to open). Three
    counters are named apart: a stage's own units (`UNIT_NAMES`: "contrastive_rl step 3"), the
    `_overview/` charts' step (one per point, rows' "overview_step") and the other metrics' MLflow
    step, the learner calls since the run began (`step_ranges` says where each stage lies on
    either axis).
    """

    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}x"

    width = max([len("task"), *(len(o["task"]) for o in outcomes)])
    lines = ["run summary", f"  {'task':<{width}}  {'seeds':>8}  {'policy':>8}  beat seed"]
    for o in outcomes:
        # None: no correct rollout other than a stage-1 solution (the buffer keeps one copy of a
        # program, the first), e.g. the default's RL writing its fast variant again
        beat = {True: "yes", False: "no", None: "no new correct solution"}[o["beat_seed"]]
        lines.append(f"  {o['task']:<{width}}  {x(o['seed_best']):>8}  {x(o['policy_best']):>8}  {beat}")
    n_beat = sum(1 for o in outcomes if o["beat_seed"])
    lines.append(f"  the policy beat its seeds on {n_beat} of {len(outcomes)} tasks")

    def ranges(axis: Mapping[str, tuple[int, int]]) -> str:
        return ", ".join(f"{stage} {a}-{b}" if a != b else f"{stage} {a}" for stage, (a, b) in axis.items())

    overview = step_ranges(history, "overview_step")
    if overview:
        sft_units = [h.get("unit") for h in history if h.get("stage") == "sft" and h.get("overview_step") is not None]
        every = sft_units[0] if len(sft_units) > 1 and isinstance(sft_units[0], int) else 1
        sampled_sft = f"; sft: one per {every} epochs" if every > 1 else ""
        lines.append(f"  {OVERVIEW}/ charts' step axis (one point per unit{sampled_sft}): {ranges(overview)}")
    axis = step_ranges(history)
    if axis:
        lines.append(f"  other charts' step axis (learner calls since the run began): {ranges(axis)}")
    sampled = [(i, h) for i, h in enumerate(history) if "pass_rate" in h]
    if sampled:
        i, last = sampled[-1]
        stage = last.get("stage")
        unit = last.get("unit") or sum(1 for h in history[: i + 1] if h.get("stage") == stage)
        fast = f", fast_1 {last['fast_1']:.2f}" if "fast_1" in last else ""
        at = f"MLflow step {last.get('step')}"
        if last.get("overview_step") is not None:
            at += f", {OVERVIEW}/ step {last['overview_step']}"
        lines.append(
            f"  last sampled unit: {stage} {UNIT_NAMES.get(stage, 'unit')} {unit} ({at}): "
            f"pass rate {last['pass_rate']:.2f}{fast}"
        )
    if versions:
        lines.append(
            "  registered: " + ", ".join(f"models:/cudal1-policy/{v} ({stage})" for stage, v in versions.items())
        )
    if run_id:
        lines.extend(f"  {line}" for line in mlflow_review_lines(tracking_uri, experiment_id, run_id))
    lines.append(f"  run directory: {run_dir}")
    return "\n".join(lines)
