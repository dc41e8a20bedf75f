"""cudal1.review on a small hand-written run directory, and notebooks/review.ipynb executed on it.

The run directory is written with the real records (Rollout, EvalResult, Exemplar, RunState), in
the file layout of cudal1.pipeline.stages, so no training is needed.
"""

from __future__ import annotations

import ast
import json
import math
import os
from pathlib import Path

import pytest

from cudal1 import review
from cudal1.bench.result import EvalResult, HackKind, Status, Timing
from cudal1.pipeline.metrics import rollout_metrics
from cudal1.pipeline.state import RunState
from cudal1.records import Exemplar, Generation, Rollout
from cudal1.rl.rewards import Priced

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "review.ipynb"


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, round_medians_ms=[ms], spread=0.0, calls=10)


def _rollout(
    task: str,
    step: int,
    group: int,
    sample: int,
    *,
    status: Status | None = None,
    speedup: float | None = None,
    hack: HackKind | None = None,
    parse_error: str | None = None,
    reward: float = 0.0,
    reason: str | None = None,
) -> Rollout:
    """A rollout priced as the reward prices it: status ok is paid its speedup (reason "ok")
    unless `reason` says otherwise (a copy is status ok, paid as a failure)."""
    result = None
    if status is not None:
        timed = status is Status.OK
        result = EvalResult(
            task,
            status,
            hack_kind=hack,
            speedup=speedup,
            reference=_timing(2.0) if timed else None,
            candidate=_timing(2.0 / speedup) if timed else None,
        )
    gen = Generation([1, 2], [3, 4, 5], [-0.1, -0.2, -0.3], "text", model_version=step)
    sections = {} if parse_error else {"analysis": "a", "code": "class ModelNew: ..."}
    if reason is None:
        reason = "ok" if status is Status.OK else (parse_error or (status.value if status else "not_evaluated"))
    paid = speedup if reason == "ok" else None
    return Rollout(
        task,
        step,
        group,
        sample,
        "prompt",
        gen,
        sections,
        parse_error,
        result,
        Priced(reward, reason, speedup=paid),
        0.0,
    )


ROLLOUTS = {
    "self_train_round0": [
        _rollout("level1/1", 1, 0, 0, status=Status.OK, speedup=1.5, reward=1.5),
        _rollout("level1/1", 1, 0, 1, parse_error="no_code_block"),
    ],
    "rl_step0": [
        _rollout("level1/1", 2, 0, 0, status=Status.OK, speedup=0.8, reward=0.8),
        _rollout("level1/1", 2, 0, 1, status=Status.HACK, hack=HackKind.OUTPUT_ALIASES_INPUT),
        _rollout("level1/2", 2, 1, 0, status=Status.OK, speedup=2.0, reward=2.0),
        _rollout("level1/2", 2, 1, 1, status=Status.INCORRECT),
        _rollout("level1/2", 2, 1, 2, status=Status.OK, speedup=3.0, reward=-1.0, reason="copy"),
    ],
    "rl_step1": [
        _rollout("level1/2", 3, 0, 0, parse_error="no_code_block"),
        _rollout("level1/2", 3, 0, 1, parse_error="truncated"),
        _rollout("level1/1", 3, 1, 0, status=Status.COMPILE_ERROR),
    ],
}
EXEMPLARS = [
    Exemplar("level1/1", "seed a", 1.0, origin="seed"),
    Exemplar("level1/2", "seed b", 1.1, origin="seed"),
    Exemplar("level1/1", "fast a", 1.5, step=1, model_version=1, origin="step1/g0/s0"),
    Exemplar("level1/1", "slow a", 0.8, step=2, model_version=2, origin="step2/g0/s0"),
    Exemplar("level1/2", "fast b", 2.0, step=2, model_version=2, origin="step2/g1/s0"),
]


def write_run(run_dir: Path) -> Path:
    """A three-stage run: state.json, rollouts/*.jsonl, buffer/exemplars.jsonl (with a torn last
    line, as a crash leaves it), exports/sft/."""
    run_dir.mkdir(parents=True)
    history = [{"step": 1, "stage": "sft", "sft_loss": 2.5}]
    for name, rollouts in ROLLOUTS.items():
        (run_dir / "rollouts").mkdir(exist_ok=True)
        with open(run_dir / "rollouts" / f"{name}.jsonl", "w") as f:
            for r in rollouts:
                f.write(json.dumps(r.to_dict()) + "\n")
        history.append({"step": rollouts[0].step, "stage": "x", "pass_rate": 0.0})
    RunState(completed=["sft", "self_train", "contrastive_rl"], step=4, history=history).save(run_dir)
    (run_dir / "buffer").mkdir()
    with open(run_dir / "buffer" / "exemplars.jsonl", "w") as f:
        f.writelines(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in EXEMPLARS)
        f.write('{"task_id": "level1/3", "code": "to')
    (run_dir / "exports" / "sft").mkdir(parents=True)
    return run_dir


@pytest.fixture
def run_dir(tmp_path):
    return write_run(tmp_path / "runs" / "smoke")


def test_load_run_reads_every_file(run_dir):
    run = review.load_run(run_dir)
    assert run.state["completed"] == ["sft", "self_train", "contrastive_rl"]
    assert list(run.history["step"]) == [1, 1, 2, 3]
    assert len(run.rollouts) == 10 and list(run.rollouts.columns) == review.ROLLOUT_COLUMNS
    assert list(run.rollouts["step"]) == sorted(run.rollouts["step"])
    assert run.rollouts.groupby("stage", sort=False).size().to_dict() == {"self_train": 2, "contrastive_rl": 8}
    assert sorted(run.rollouts["unit"].unique()) == [0, 1]
    first = run.rollouts.iloc[0]
    assert (first["status"], first["speedup"], first["reference_ms"]) == ("ok", 1.5, 2.0)
    assert first["candidate_ms"] == pytest.approx(2.0 / 1.5)
    assert first["response_tokens"] == 3 and first["finish_reason"] == "stop"
    unparsed = run.rollouts[run.rollouts["parse_error"].notna()]
    assert set(unparsed["status"]) == {review.UNPARSED} and unparsed["speedup"].isna().all()
    assert len(run.exemplars) == 5  # the torn last line is skipped
    assert run.exports == ["sft"]


def test_load_run_of_an_empty_or_missing_directory(tmp_path):
    run = review.load_run(tmp_path)
    assert run.state == {} and run.exports == []
    assert run.rollouts.empty and list(run.rollouts.columns) == review.ROLLOUT_COLUMNS
    assert review.per_step_table(run).empty
    assert review.status_counts(run).empty and review.best_per_task(run).empty
    with pytest.raises(FileNotFoundError):
        review.load_run(tmp_path / "nope")


def test_per_step_table_matches_the_logged_metrics(run_dir):
    """Same numbers as cudal1.pipeline.metrics computes for MLflow during training."""
    table = review.per_step_table(review.load_run(run_dir))
    assert list(table.index) == [1, 2, 3]
    assert list(table["stage"]) == ["self_train", "contrastive_rl", "contrastive_rl"]
    for rollouts in ROLLOUTS.values():
        row, m = table.loc[rollouts[0].step], rollout_metrics(rollouts)
        assert row["rollouts"] == m["rollouts"]
        assert row["reward_mean"] == pytest.approx(m["reward/mean"])
        assert row["pass_rate"] == pytest.approx(m["pass_rate"])
        assert row["fast_1"] == pytest.approx(m["fast_1"])
        assert row["parse_failure_rate"] == pytest.approx(m["parse_failure_rate"])
        if "speedup/mean" in m:
            assert row["speedup_mean"] == pytest.approx(m["speedup/mean"])
        else:  # no correct rollout at that step
            assert math.isnan(row["speedup_mean"])
    # Step 2: the copy measured at 3.0x is paid as a failure, so it neither passes nor is fast.
    assert table.loc[2, "speedup_mean"] == pytest.approx(1.4) and table.loc[2, "fast_1"] == pytest.approx(1 / 5)
    assert table.loc[2, "pass_rate"] == pytest.approx(2 / 5)


def test_status_hack_and_parse_counts_per_stage(run_dir):
    run = review.load_run(run_dir)
    status = review.status_counts(run)
    assert list(status.index) == ["self_train", "contrastive_rl"]
    assert status.loc["self_train"].to_dict() == {"compile_error": 0, "hack": 0, "incorrect": 0, "ok": 1, "unparsed": 1}
    assert status.loc["contrastive_rl"].to_dict() == {
        "compile_error": 1,
        "hack": 1,
        "incorrect": 1,
        "ok": 3,
        "unparsed": 2,
    }
    hacks = review.status_counts(run, "hack_kind")
    assert hacks.to_dict() == {"output_aliases_input": {"contrastive_rl": 1}}
    parse = review.status_counts(run, "parse_error")
    assert parse.loc["contrastive_rl"].to_dict() == {"no_code_block": 1, "truncated": 1}
    assert parse.loc["self_train"].to_dict() == {"no_code_block": 1, "truncated": 0}
    with pytest.raises(KeyError):
        review.status_counts(run, "colour")


def test_best_per_task_is_the_fastest_correct_exemplar(run_dir):
    best = review.best_per_task(review.load_run(run_dir))
    assert list(best.index) == ["level1/1", "level1/2"]
    assert best.loc["level1/1", ["speedup", "origin", "code", "exemplars"]].tolist() == [
        1.5,
        "step1/g0/s0",
        "fast a",
        3,
    ]
    assert best.loc["level1/2", ["speedup", "origin", "step"]].tolist() == [2.0, "step2/g1/s0", 2]


def test_default_run_dir_prefers_the_env_then_the_newest_finished_run(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDAL1_RUN_DIR", raising=False)
    assert review.default_run_dir(tmp_path) is None
    runs = tmp_path / "runs"
    old, new, running, datasets = runs / "a", runs / "b", runs / "c", runs / "datasets"
    for d in (old, new, running, datasets):
        d.mkdir(parents=True)
    assert review.default_run_dir(tmp_path) is None  # no state.json anywhere: not a run
    (old / "state.json").write_text(json.dumps({"completed": ["sft"], "stage": None}))
    (new / "state.json").write_text(json.dumps({"completed": ["sft", "self_train"], "stage": None}))
    (running / "state.json").write_text(json.dumps({"completed": ["sft"], "stage": "self_train"}))
    os.utime(old, (1, 1))
    os.utime(new, (2, 2))
    assert review.default_run_dir(tmp_path) == new  # "c" and "datasets" are newer, not finished runs
    (tmp_path / "notebooks").mkdir()
    assert review.default_run_dir(tmp_path / "notebooks") == new  # the notebook's working directory
    (new / "state.json").write_text("{torn")
    (old / "state.json").write_text(json.dumps({"completed": [], "stage": "sft"}))
    assert review.default_run_dir(tmp_path) == running  # none finished: the newest with a state
    monkeypatch.setenv("CUDAL1_RUN_DIR", str(old))
    assert review.default_run_dir(tmp_path) == old


def _turn(episode: str, turn: int, ret: float | None, **kw) -> Rollout:
    """A turn of a refinement episode (`_rollout`'s arguments), as `cudal1.pipeline.episodes`
    records it: its episode id, turn, the report its prompt showed (after turn 1) and its return."""
    step, group, sample = (int(part.lstrip("stepgs")) for part in episode.split("/"))
    r = _rollout(kw.pop("task"), step, group, sample, **kw)
    r.episode, r.turn, r.turn_return = episode, turn, ret
    r.feedback = None if turn == 1 else "incorrect: output mismatch"
    return r


EPISODES = {
    # Step 4, one group of level1/2: an episode that fails then passes at 2.0x, one whose turn 1
    # passes at 1.5x and whose copy at turn 2 is paid as a failure, one that never parses then is
    # truncated (left out: no return); step 5, an episode of one turn (an early stop).
    "rl_step4": [
        _turn("step4/g0/s0", 1, -0.5, task="level1/2", status=Status.INCORRECT, reward=-1.0),
        _turn("step4/g0/s0", 2, 2.0, task="level1/2", status=Status.OK, speedup=2.0, reward=2.0),
        _turn("step4/g0/s1", 1, 1.5, task="level1/2", status=Status.OK, speedup=1.5, reward=1.5),
        _turn("step4/g0/s1", 2, -1.0, task="level1/2", status=Status.OK, speedup=1.5, reward=-1.0, reason="copy"),
        _turn("step4/g0/s2", 1, -1.0, task="level1/2", parse_error="no_code_block", reward=-1.0),
        _turn("step4/g0/s2", 2, None, task="level1/2", parse_error="truncated", reward=-1.0),
    ],
    "rl_step5": [_turn("step5/g0/s0", 1, 3.0, task="level1/1", status=Status.OK, speedup=3.0, reward=3.0)],
}


def write_episodes(run_dir: Path) -> Path:
    """`EPISODES`' rollouts/*.jsonl in `run_dir` (steps after those of `write_run`)."""
    (run_dir / "rollouts").mkdir(parents=True, exist_ok=True)
    for name, rollouts in EPISODES.items():
        with open(run_dir / "rollouts" / f"{name}.jsonl", "w") as f:
            f.writelines(json.dumps(r.to_dict()) + "\n" for r in rollouts)
    return run_dir


def test_episode_table_has_one_row_per_episode_with_its_turns(tmp_path, run_dir):
    table = review.episode_table(review.load_run(write_episodes(tmp_path / "turns")))
    assert list(table.index) == ["step4/g0/s0", "step4/g0/s1", "step4/g0/s2", "step5/g0/s0"]
    assert list(table["turns"]) == [2, 2, 2, 1] and list(table["step"]) == [4, 4, 4, 5]
    assert list(table["task_id"]) == ["level1/2"] * 3 + ["level1/1"]
    assert table["statuses"].tolist() == [
        ["incorrect", "ok"],
        ["ok", "ok"],
        [review.UNPARSED, review.UNPARSED],
        ["ok"],
    ]
    speedups = [[None if math.isnan(x) else x for x in row] for row in table["speedups"]]
    assert speedups == [[None, 2.0], [1.5, 1.5], [None, None], [3.0]]
    assert table["reasons"].tolist() == [
        ["incorrect", "ok"],
        ["ok", "copy"],
        ["no_code_block", "truncated"],
        ["ok"],
    ]
    returns = [[None if x is None or math.isnan(x) else x for x in row] for row in table["returns"]]
    assert returns == [[-0.5, 2.0], [1.5, -1.0], [-1.0, None], [3.0]]
    assert list(table["first_passed"]) == [False, True, False, True]
    assert list(table["passed"]) == [True, True, False, True]
    best = [None if math.isnan(x) else x for x in table["best_speedup"]]
    assert best == [2.0, 1.5, None, 3.0]  # the copy measured 1.5x is not paid
    # A single-turn run has no episodes: an empty table with the same columns.
    empty = review.episode_table(review.load_run(run_dir))
    assert empty.empty and list(empty.columns) == list(table.columns)


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    """A run directory beside a real MLflow store (runs/mlflow.db) holding its run's metrics; its
    contrastive RL steps 4 and 5 ran episodes of two turns (`EPISODES`)."""
    pytest.importorskip("mlflow")
    from cudal1.tracking import Tracker

    project = tmp_path_factory.mktemp("tracked")
    run_dir = write_episodes(write_run(project / "runs" / "smoke"))  # a single-turn stage, then turns 2
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        mp.chdir(project)  # the project's default store: runs/mlflow.db, beside the run
        with Tracker(None, "cudal1", run_dir) as tracker:
            tracker.log_metrics({"rl/reward/mean": 0.5, "rl/pass_rate": 0.25}, step=2)
            tracker.log_metrics({"rl/reward/mean": 0.75}, step=3)
    return run_dir


def test_mlflow_metrics_finds_the_run_by_name(tracked_run, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    metrics = review.mlflow_metrics(review.load_run(tracked_run))
    assert metrics["value"].to_dict() == {"rl/pass_rate": 0.25, "rl/reward/mean": 0.75}


def test_mlflow_metrics_reads_the_store_the_run_recorded(tracked_run, tmp_path, monkeypatch):
    """A run directory away from its project's runs/ (run_dir=/scratch/...) is found through the
    local store its state.json names."""
    import shutil

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    moved = tmp_path / "scratch" / tracked_run.name
    shutil.copytree(tracked_run, moved)
    assert review.mlflow_metrics(review.load_run(moved)) is None  # no store beside it, none recorded
    state = json.loads((moved / "state.json").read_text())
    state["mlflow_uri"] = f"sqlite:///{(tracked_run.parent / 'mlflow.db').resolve()}"
    (moved / "state.json").write_text(json.dumps(state))
    metrics = review.mlflow_metrics(review.load_run(moved))
    assert metrics["value"].to_dict() == {"rl/pass_rate": 0.25, "rl/reward/mean": 0.75}


def test_mlflow_metrics_is_none_without_a_store(run_dir, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert review.mlflow_metrics(review.load_run(run_dir)) is None
    assert not (run_dir.parent / "mlflow.db").exists()  # reading never creates a store


def run_notebook(path: Path) -> list[object]:
    """Execute every code cell of a notebook in order in one namespace, as a kernel would, and
    return the value of each cell's last expression (None for cells that end in a statement)."""
    cells = json.loads(path.read_text())["cells"]
    namespace: dict[str, object] = {"__name__": "__main__"}
    values = []
    for i, cell in enumerate(c for c in cells if c["cell_type"] == "code"):
        tree = ast.parse("".join(cell["source"]), filename=f"{path.name}[{i}]")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, f"{path.name}[{i}]", "exec"), namespace)
        values.append(
            eval(compile(ast.Expression(last.value), f"{path.name}[{i}]", "eval"), namespace)
            if last is not None
            else None
        )
    return values


def test_notebook_runs_top_to_bottom(tracked_run, monkeypatch, capsys):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    monkeypatch.setenv("CUDAL1_RUN_DIR", str(tracked_run))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    nb = json.loads(NOTEBOOK.read_text())
    assert all(
        not c.get("outputs") and c.get("execution_count") is None for c in nb["cells"] if c["cell_type"] == "code"
    ), "commit the notebook without outputs"
    try:
        values = run_notebook(NOTEBOOK)
    finally:
        plt.close("all")
    tables = [v for v in values if isinstance(v, pd.DataFrame)]
    assert len(tables) >= 5  # per step, statuses, hacks, parse labels, best per task, MLflow
    assert any("rl/reward/mean" in t.index for t in tables)
    episodes = [t for t in tables if t.index.name == "episode"]
    assert len(episodes) == 1 and list(episodes[0].index) == [
        "step4/g0/s0",
        "step4/g0/s1",
        "step4/g0/s2",
        "step5/g0/s0",
    ]
    assert str(tracked_run) in capsys.readouterr().out


def execute_headless(path: Path, run_dir: Path, timeout_s: int = 300):
    """Execute a notebook in a real Jupyter kernel (ipykernel, through nbclient), headless, on
    `run_dir`; returns the executed notebook. Raises nbclient's CellExecutionError naming the cell
    that failed."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    previous = os.environ.get("CUDAL1_RUN_DIR")
    os.environ["CUDAL1_RUN_DIR"] = str(run_dir)  # the kernel inherits this process's environment
    try:
        nbclient.NotebookClient(
            nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    finally:
        if previous is None:
            os.environ.pop("CUDAL1_RUN_DIR", None)
        else:
            os.environ["CUDAL1_RUN_DIR"] = previous
    return nb


def outputs_text(nb) -> str:
    """Every text output and error of an executed notebook, joined."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") or "".join(out.get("data", {}).get("text/plain", "")))
            if out.get("output_type") == "error":
                parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(parts)
