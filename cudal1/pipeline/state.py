"""The run's progress on disk (`<run_dir>/state.json`), written atomically after each checkpoint.

A resumed run reads it to know which stages are finished, where the unfinished one stopped, the
global step counter, and the MLflow run to continue.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any


@dataclasses.dataclass
class RunState:
    """Progress of one training run.

    Attributes:
        completed: stages finished, in order ("sft", "self_train", "contrastive_rl").
        stage: the stage in progress (None before the first and after the last).
        unit: units of `stage` finished (SFT epochs, self-training rounds, RL steps).
        step: global step counter: one per learner call since the run began (an SFT batch's
            `sft_step`, an RL step's `grpo_step`; each may take several optimizer updates, which
            the learner's `version` counts), and one per self-training round or RL step without
            one (so that each unit logs at a step of its own); MLflow's step of every metric but
            the `_overview/` ones.
        overview_step: points logged on the `_overview/` charts so far (their MLflow step: one
            per self-training round and RL step, at most `OVERVIEW_SFT_POINTS` for SFT's epochs;
            `cudal1.pipeline.metrics.overview_due`).
        checkpoint: directory of the last learner checkpoint, or None.
        checkpoint_tag: the tag of that checkpoint in the directory (the one this state belongs to;
            a later save that the state never recorded is not loaded).
        mlflow_run_id: the MLflow run this training logs to.
        mlflow_uri: that run's store when it is a local SQLite file (`sqlite:///<abs path>`), so a
            resume from another directory, and `cudal1.review`, find it; None for a server (its
            URI comes from the config or the environment again) or without tracking.
        history: per-unit summary rows (reward, speedup, ...) for the curves.
        registered: stage → the model version of `cudal1-policy` its export was registered as.
        tie_noise: the RL stage's between-evaluation noise (`cudal1.rl.noise.TieNoise.to_dict`),
            saved with each checkpoint so a resumed run keeps its calibrated tie floors; None
            before the stage or with `reward.tie_calibration` false.
    """

    completed: list[str] = dataclasses.field(default_factory=list)
    stage: str | None = None
    unit: int = 0
    step: int = 0
    overview_step: int = 0
    checkpoint: str | None = None
    checkpoint_tag: str | None = None
    mlflow_run_id: str | None = None
    mlflow_uri: str | None = None
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    registered: dict[str, str] = dataclasses.field(default_factory=dict)
    tie_noise: dict[str, Any] | None = None

    @classmethod
    def load(cls, run_dir: Path) -> "RunState":
        """The saved state, or a fresh one when the run directory has none."""
        path = Path(run_dir) / "state.json"
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def tracking_store(self, run_dir: Path) -> str | None:
        """The local MLflow store to continue this run in when neither `tracking.uri` nor
        MLFLOW_TRACKING_URI names one: `mlflow_uri`, else, for a run recorded before the store
        was per project (an MLflow run id and no `mlflow_uri`), `<run_dir's parent>/mlflow.db`
        when that file exists (the default then); None: the project's default store."""
        if self.mlflow_uri is not None:
            return self.mlflow_uri
        old = Path(run_dir).resolve().parent / "mlflow.db"
        return f"sqlite:///{old}" if self.mlflow_run_id and old.is_file() else None

    def save(self, run_dir: Path) -> None:
        """Write state.json atomically (a crash leaves the old or the new file, never half of one)."""
        path = Path(run_dir) / "state.json"
        tmp = path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump(dataclasses.asdict(self), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
