"""The MLflow adapter: the one module of cudal1 that writes to MLflow (`cudal1.review` only reads).

`Tracker` wraps one MLflow run: the resolved config as params, per-step metrics, text / JSON /
table / plot artifacts, and checkpoints registered as model versions. It talks to MLflow through
`MlflowClient` with an explicit run id (no fluent "active run" global), so several trackers, Ray
actors and tests never step on each other.

Default store (`tracking.uri` null and no MLFLOW_TRACKING_URI in the environment): one SQLite
database per project, `<current working directory>/runs/mlflow.db`, with artifacts in
`<current working directory>/runs/mlartifacts/` (`default_tracking_uri`). Every job started from
the project's root (train, optimize, evaluate, and serve where it fetches a registered model)
logs there whatever its run_dir or out_dir, so `mlflow ui --backend-store-uri
sqlite:///runs/mlflow.db` shows all of them side by side. The order is `tracking.uri`, then
MLFLOW_TRACKING_URI, then that default (`resolve_tracking_uri`). SQLite is MLflow 3's default and
recommended local backend (the `./mlruns` file store is in keep-the-lights-on mode since 3.7) and,
unlike the file store, it holds the model registry.

Failure policy: the constructor fails loudly (`TrackingError`) when the store cannot be reached or
the run to resume does not exist. After that, an MLflow or I/O error inside a logging call never
reaches the training loop: it is logged as a warning (once per method, then at debug level) and
counted in `Tracker.errors`; the call returns None. Caller mistakes (a missing file, a wrong file
extension) still raise, since those are bugs in the caller. Limits: a remote server that hangs
makes each call wait for MLflow's own HTTP retries (MLFLOW_HTTP_REQUEST_MAX_RETRIES,
MLFLOW_HTTP_REQUEST_TIMEOUT); lower those in the environment for flaky servers.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")


class TrackingError(RuntimeError):
    """The tracking store or run could not be opened."""


DEFAULT_STORE = Path("runs") / "mlflow.db"
"""The default store's file, relative to the project directory (`default_tracking_uri`)."""


def default_tracking_uri(project_dir: str | os.PathLike[str] | None = None) -> str:
    """`sqlite:///<abs project_dir>/runs/mlflow.db`: the project's one local store, shared by every
    run and job started there. `project_dir` defaults to the current working directory (where a
    job is started: the jobs do not change directory); the path is made absolute here, so a later
    change of directory keeps the same store."""
    root = Path.cwd() if project_dir is None else Path(project_dir)
    return f"sqlite:///{(root / DEFAULT_STORE).resolve()}"


def resolve_tracking_uri(uri: str | None, default: str | None = None) -> str:
    """The store a job uses: `uri` (`tracking.uri`) if set, else $MLFLOW_TRACKING_URI if set, else
    `default` if given (e.g. the local store a resumed run started in), else
    `default_tracking_uri()`."""
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or default or default_tracking_uri()


def local_store_path(uri: str | None) -> Path | None:
    """The database file of a local `sqlite:///` URI (absolute as written); None for any other
    store (a server, an in-memory database, None)."""
    prefix = "sqlite:///"
    if not uri or not uri.startswith(prefix):
        return None
    path = uri[len(prefix) :]
    if not path or path.startswith(":memory:"):
        return None
    return Path(path)


def _local_artifact_root(uri: str) -> Path | None:
    """`mlartifacts/` beside a local SQLite file; None for other stores (they choose their own).

    Without this, MLflow's client-side SQLite store puts artifacts in `./mlruns` of whatever the
    current directory happens to be.
    """
    path = local_store_path(uri)
    return None if path is None else path.resolve().parent / "mlartifacts"


def flatten_config(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys: {"a": {"b": 1}} -> {"a.b": 1}. Lists and other leaves stay."""
    flat: dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_config(value, name + "."))
        else:
            flat[name] = value
    return flat


def _param_value(value: Any, limit: int) -> str:
    text = json.dumps(value, default=str) if isinstance(value, (list, tuple, dict)) else str(value)
    if len(text) > limit:
        marker = "...[truncated]"
        text = text[: limit - len(marker)] + marker
    return text


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_\-. /:]")


def metric_key(name: str) -> str:
    """`name` with the characters MLflow rejects in metric names (anything but letters, digits and
    `_-. /:`) replaced by `_`."""
    return _UNSAFE_NAME.sub("_", name) or "_"


def _finite(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _cell(value: Any) -> Any:
    """A table cell pandas/CSV can hold: scalars as they are, anything else as JSON text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, default=str, sort_keys=True)


class Tracker:
    """One MLflow run of a training job, or a no-op when disabled.

    Args:
        uri: MLflow tracking URI (`sqlite:///...`, `http://host:5000`, `databricks`, ...). None:
            MLFLOW_TRACKING_URI if set, else `default_uri` if given, else the project's store
            `default_tracking_uri()` (`runs/mlflow.db` under the current working directory).
        experiment: experiment name; created if missing (with artifacts beside a local SQLite file).
        run_dir: the training run's directory (its name is the default run name; its absolute
            path the run's tag `cudal1.run_dir`). Need not exist; it does not choose the store.
        run_name: MLflow run name; default `run_dir.name`.
        enabled: False makes every method a no-op returning None, and mlflow is never imported.
        resume_run_id: re-open this run (status back to RUNNING) instead of creating one; metrics
            logged afterwards extend its history.
        system_metrics_s: > 0 samples this machine's CPU, memory, disk, network (and GPUs that
            pynvml sees) every that many seconds into "system/..." metrics (MLflow's
            SystemMetricsMonitor, a thread) until `close`; 0 (default) does not.
        default_uri: the store to use when neither `uri` nor MLFLOW_TRACKING_URI names one,
            instead of the project's (a resumed run passes the local store it started in).

    Raises:
        TrackingError: the store cannot be opened (unsupported scheme, unwritable path,
            unreachable server after MLflow's retries) or `resume_run_id` does not exist.
    """

    def __init__(
        self,
        uri: str | None,
        experiment: str,
        run_dir: Path,
        run_name: str | None = None,
        enabled: bool = True,
        resume_run_id: str | None = None,
        system_metrics_s: float = 0.0,
        default_uri: str | None = None,
    ):
        self.enabled = enabled
        self.errors = 0
        """Logging calls that failed inside MLflow (each also logged)."""
        self._warned: set[str] = set()
        self._closed = False
        self._run_id: str | None = None
        self.uri: str | None = None
        self.experiment_id: str | None = None
        """The MLflow experiment the run belongs to (None when disabled)."""
        self._system_metrics: Any = None
        if not enabled:
            return

        import mlflow  # noqa: F401  (here, so a disabled tracker costs no import time)
        from mlflow import MlflowClient
        from mlflow.utils import validation

        self._limits = (
            validation.MAX_PARAM_VAL_LENGTH,
            validation.MAX_PARAMS_TAGS_PER_BATCH,
            validation.MAX_METRICS_PER_BATCH,
        )
        run_dir = Path(run_dir)
        self.uri = resolve_tracking_uri(uri, default_uri)
        try:
            artifact_root = _local_artifact_root(self.uri)
            if artifact_root is not None:
                artifact_root.parent.mkdir(parents=True, exist_ok=True)
            self._client = MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)
            if resume_run_id:
                run = self._client.get_run(resume_run_id)
                self._client.update_run(resume_run_id, status="RUNNING")
            else:
                exp = self._client.get_experiment_by_name(experiment)
                if exp is None:
                    location = artifact_root.as_uri() if artifact_root is not None else None
                    exp_id = self._client.create_experiment(experiment, artifact_location=location)
                else:
                    exp_id = exp.experiment_id
                run = self._client.create_run(
                    exp_id, run_name=run_name or run_dir.name, tags={"cudal1.run_dir": str(run_dir.resolve())}
                )
        except Exception as e:  # MLflow raises many types (MlflowException, OSError, requests, ...)
            what = f"run {resume_run_id!r}" if resume_run_id else f"experiment {experiment!r}"
            raise TrackingError(
                f"cannot open MLflow tracking store {self.uri!r} ({what}): {type(e).__name__}: {e}"
            ) from e
        self._run_id = run.info.run_id
        self.experiment_id = str(run.info.experiment_id)
        self._artifact_uri = run.info.artifact_uri
        log.info("MLflow run %s in %s", self._run_id, self.uri)
        if system_metrics_s > 0:
            self._system_metrics = self._guard(
                "system metrics", lambda: self._start_system_metrics(system_metrics_s, resume=bool(resume_run_id))
            )

    def _start_system_metrics(self, interval_s: float, resume: bool) -> Any:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        monitor = SystemMetricsMonitor(
            self._run_id, sampling_interval=interval_s, resume_logging=resume, tracking_uri=self.uri
        )
        monitor.start()
        return monitor

    # -- plumbing ---------------------------------------------------------------------------------

    @property
    def run_id(self) -> str | None:
        """The MLflow run id (persist it to resume), or None when disabled."""
        return self._run_id

    @property
    def active(self) -> bool:
        return self.enabled and not self._closed

    def _guard(self, what: str, fn: Callable[[], T]) -> T | None:
        """Run one MLflow call; an error becomes a warning (the first per `what`) and None."""
        if not self.active:
            return None
        try:
            return fn()
        except Exception as e:
            self.errors += 1
            level = logging.DEBUG if what in self._warned else logging.WARNING
            self._warned.add(what)
            log.log(
                level,
                "MLflow %s failed (training goes on; later failures of this call are logged at debug level): %s: %s",
                what,
                type(e).__name__,
                e,
            )
            return None

    # -- params and metrics -----------------------------------------------------------------------

    def log_config(self, cfg: Mapping[str, Any] | Any) -> None:
        """Log a (nested) config as params with dotted keys, and in full as `config.json`.

        `cfg` is a mapping or a dataclass instance (an OmegaConf config: pass
        `OmegaConf.to_container(cfg, resolve=True)`). Values longer than MLflow's limit (6000
        characters) are truncated in the params (the artifact keeps them whole); params go in
        batches of MLflow's maximum (100). MLflow params are immutable: on a resumed run, keys
        already logged keep their first value (a changed one is warned about), new keys are added.
        """
        if not self.active:
            return None
        if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
            cfg = dataclasses.asdict(cfg)
        if not isinstance(cfg, Mapping):
            raise TypeError(f"log_config wants a mapping or a dataclass, got {type(cfg).__name__}")
        self.log_dict(dict(cfg), "config.json")
        max_len, max_batch, _ = self._limits
        params = {k: _param_value(v, max_len) for k, v in flatten_config(cfg).items()}

        def write() -> None:
            from mlflow.entities import Param

            existing = self._client.get_run(self._run_id).data.params
            changed = sorted(k for k, v in params.items() if k in existing and existing[k] != v)
            if changed:
                log.warning(
                    "MLflow params are immutable; keeping the first value of %s (the new values are in config.json)",
                    ", ".join(changed),
                )
            new = [Param(k, v) for k, v in params.items() if k not in existing]
            for i in range(0, len(new), max_batch):
                self._client.log_batch(self._run_id, params=new[i : i + max_batch], synchronous=True)

        return self._guard("log_config", write)

    def log_metrics(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log metrics for one step. None, NaN, ±inf and non-numbers are skipped without error.

        Keys pass through `metric_key` (one bad character would otherwise fail the whole batch).
        """
        if not self.active:
            return None
        values = {metric_key(k): x for k, v in metrics.items() if (x := _finite(v)) is not None}
        if not values:
            return None

        def write() -> None:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            entries = [Metric(k, v, now, int(step)) for k, v in values.items()]
            batch = self._limits[2]
            for i in range(0, len(entries), batch):
                self._client.log_batch(self._run_id, metrics=entries[i : i + batch], synchronous=True)

        return self._guard("log_metrics", write)

    # -- artifacts --------------------------------------------------------------------------------

    def log_text(self, text: str, artifact_file: str) -> None:
        """Write `text` to the run's artifacts at `artifact_file` (e.g. "samples/step_3.md")."""
        return self._guard("log_text", lambda: self._client.log_text(self._run_id, text, artifact_file))

    def log_dict(self, d: Mapping[str, Any] | Sequence[Any], artifact_file: str) -> None:
        """Write `d` as JSON (YAML when `artifact_file` ends in .yaml/.yml); non-JSON values as str."""
        if not self.active:
            return None
        if artifact_file.endswith((".yaml", ".yml")):
            plain = json.loads(json.dumps(d, default=str))
            return self._guard("log_dict", lambda: self._client.log_dict(self._run_id, plain, artifact_file))
        text = json.dumps(d, indent=2, default=str)
        return self._guard("log_dict", lambda: self._client.log_text(self._run_id, text, artifact_file))

    def log_artifact(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        """Upload a file, or a directory as a folder named like it, under `artifact_path`.

        Raises:
            FileNotFoundError: `path` does not exist.
        """
        if not self.active:
            return None
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(path)
        return self._guard("log_artifact", lambda: self._client.log_artifact(self._run_id, str(path), artifact_path))

    def log_table(self, rows: Sequence[Mapping[str, Any]], artifact_file: str) -> None:
        """Log a results table, one dict per row (e.g. one per task: id, status, speedup).

        `.json`: MLflow's table artifact (`MlflowClient.log_table`, shown as a table in the UI).
        `.csv`: a CSV with the union of the rows' keys as columns. Non-scalar cells become JSON text.

        Raises:
            ValueError: `artifact_file` ends in neither .json nor .csv.
        """
        if not artifact_file.endswith((".json", ".csv")):
            raise ValueError(f"log_table writes .json or .csv, not {artifact_file!r}")
        if not self.active:
            return None
        columns: dict[str, None] = {}
        for row in rows:
            columns.update(dict.fromkeys(row))
        cells = [{c: _cell(row.get(c)) for c in columns} for row in rows]

        def write() -> None:
            if artifact_file.endswith(".json"):
                import pandas as pd

                self._client.log_table(self._run_id, pd.DataFrame(cells, columns=list(columns)), artifact_file)
                return
            with tempfile.TemporaryDirectory() as tmp:
                local = Path(tmp) / Path(artifact_file).name
                with local.open("w", newline="") as f:
                    writer = csv.DictWriter(f, fieldnames=list(columns))
                    writer.writeheader()
                    writer.writerows(cells)
                self._client.log_artifact(self._run_id, str(local), _parent(artifact_file))

        return self._guard("log_table", write)

    def log_curves(
        self, history: Sequence[Mapping[str, Any]], keys: Sequence[str], artifact_file: str, title: str = ""
    ) -> None:
        """Plot each of `keys` against step, one panel per key, and log the PNG.

        Args:
            history: one dict per logged step, e.g. the metrics dicts of each step; the x value is
                the entry's "step" (its index when absent). Missing / None / NaN values are gaps.
            keys: metric names, one panel each (e.g. ["reward/mean", "speedup/mean", "fast_1"]).
            artifact_file: where in the run's artifacts, ending in .png (e.g. "plots/reward.png").
            title: figure title.

        Raises:
            ValueError: no keys, or `artifact_file` does not end in .png.
        """
        if not artifact_file.endswith(".png") or not keys:
            raise ValueError(f"log_curves needs keys and a .png artifact_file, got {keys!r}, {artifact_file!r}")
        if not self.active:
            return None

        def write() -> None:
            with tempfile.TemporaryDirectory() as tmp:
                local = Path(tmp) / Path(artifact_file).name
                plot_curves(history, keys, local, title)
                self._client.log_artifact(self._run_id, str(local), _parent(artifact_file))

        return self._guard("log_curves", write)

    # -- model registry ---------------------------------------------------------------------------

    def register_checkpoint(
        self, local_dir: str | os.PathLike, model_name: str, tags: Mapping[str, Any] | None = None
    ) -> str | None:
        """Save a Hugging Face causal-LM checkpoint directory as an MLflow transformers model
        ("text-generation") and register it as a model version.

        The model goes to the run's artifacts as `models/<dir name>/` (MLflow's layout: `MLmodel`,
        `model/`, `components/tokenizer/`), with pip requirements pinned to the installed torch,
        transformers, tokenizers and safetensors (MLflow's own inference of them trips on the
        packages the CPU install removes). A new version of `model_name` (created if missing)
        points at it, linked to this run, with `tags` (values as strings, e.g. {"stage": "sft",
        "step": 40}). Then `mlflow.pyfunc.load_model("models:/<name>/<version>")`,
        `mlflow.transformers.load_model(...)` and `checkpoint_from_registry` all work. Returns the
        version number as a string ("1", "2", ...), or None when disabled or MLflow failed.

        Raises:
            NotADirectoryError: `local_dir` is not a directory.
        """
        if not self.active:
            return None
        local_dir = Path(local_dir)
        if not local_dir.is_dir():
            raise NotADirectoryError(local_dir)
        artifact_path = f"models/{local_dir.resolve().name}"
        str_tags = {str(k): str(v) for k, v in (tags or {}).items()}

        def write() -> str:
            from mlflow.exceptions import MlflowException
            from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode

            with tempfile.TemporaryDirectory() as tmp:
                saved = Path(tmp) / "model"
                save_transformers_model(local_dir, saved)
                self._client.log_artifacts(self._run_id, str(saved), artifact_path)
            try:
                self._client.create_registered_model(model_name)
            except MlflowException as e:
                if e.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
                    raise
            version = self._client.create_model_version(
                model_name, source=f"{self._artifact_uri}/{artifact_path}", run_id=self._run_id, tags=str_tags
            )
            return str(version.version)

        return self._guard("register_checkpoint", write)

    # -- lifecycle --------------------------------------------------------------------------------

    def close(self, status: str = "FINISHED") -> None:
        """End the run with `status` ("FINISHED", "FAILED" or "KILLED"); later calls are no-ops.

        Raises:
            ValueError: an unknown status.
        """
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {RUN_STATUSES}, got {status!r}")
        if not self.active:
            return None
        if self._system_metrics is not None:
            self._guard("system metrics", self._system_metrics.finish)
        self._guard("close", lambda: self._client.set_terminated(self._run_id, status))
        self._closed = True
        return None

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close("FINISHED")
        else:
            self.close("KILLED" if issubclass(exc_type, KeyboardInterrupt) else "FAILED")


def _pinned_requirements() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    pins = []
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        try:
            pins.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            pins.append(name)
    return pins


def save_transformers_model(checkpoint: str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write the Hugging Face causal-LM checkpoint directory `checkpoint` as an MLflow
    transformers model ("text-generation") at `dest` (which must not exist). Returns `dest`.
    Raises whatever `mlflow.transformers.save_model` raises for a directory it cannot load."""
    import mlflow.transformers

    dest = Path(dest)
    mlflow.transformers.save_model(
        transformers_model=str(checkpoint),
        path=str(dest),
        task="text-generation",
        pip_requirements=_pinned_requirements(),
    )
    return dest


def checkpoint_from_registry(uri: str, dest: str | os.PathLike, tracking_uri: str | None = None) -> Path:
    """A local Hugging Face checkpoint directory (config, weights and tokenizer in one place, as
    vLLM and `cudal1.policy.model` load it) for a registered model version, e.g.
    "models:/cudal1-policy/3", downloaded under `dest` (reused when already there).

    Raises:
        ValueError: `uri` is not a "models:/" URI, or the version holds no transformers model.
        mlflow.exceptions.MlflowException: the model or version does not exist.
    """
    import shutil

    from mlflow.artifacts import download_artifacts

    if not uri.startswith("models:/"):
        raise ValueError(f"expected a registered model URI like 'models:/cudal1-policy/1', got {uri!r}")
    dest = Path(dest)
    out = dest / "checkpoint"
    if (out / "config.json").is_file():
        return out
    if tracking_uri:
        import mlflow

        mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_registry_uri(tracking_uri)
    local = Path(download_artifacts(artifact_uri=uri, dst_path=str(dest / "download")))
    weights, tokenizer = local / "model", local / "components" / "tokenizer"
    if not (weights / "config.json").is_file():
        raise ValueError(f"{uri} is not a transformers model saved by cudal1 (no model/config.json in it)")
    tmp = dest / "checkpoint.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(weights, tmp)
    if tokenizer.is_dir():
        for f in tokenizer.iterdir():
            if f.is_file():
                shutil.copy2(f, tmp / f.name)
    tmp.rename(out)
    shutil.rmtree(dest / "download", ignore_errors=True)
    return out


def _parent(artifact_file: str) -> str | None:
    parent = os.path.dirname(artifact_file)
    return parent or None


def stage_starts(history: Sequence[Mapping[str, Any]]) -> list[tuple[float, str]]:
    """(step, stage) where each run of equal "stage" values in `history` begins, in order; rows
    without a stage are skipped."""
    starts: list[tuple[float, str]] = []
    for i, entry in enumerate(history):
        stage = entry.get("stage")
        if stage and (not starts or starts[-1][1] != stage):
            starts.append((float(entry.get("step", i)), str(stage)))
    return starts


def plot_curves(history: Sequence[Mapping[str, Any]], keys: Sequence[str], path: Path, title: str = "") -> Path:
    """Draw one panel per key (value against step) into a PNG at `path`; returns `path`.

    Where history rows carry a "stage", each stage's first step gets a dashed vertical line, named
    in the top panel (`stage_starts`). Uses matplotlib's object API with the Agg renderer, so no
    display and no pyplot global state.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 2.2 * len(keys) + 0.6), layout="constrained")
    axes = fig.subplots(len(keys), 1, sharex=True, squeeze=False)[:, 0]
    starts = stage_starts(history)
    for ax in axes:
        for step, _ in starts:
            ax.axvline(step, color="0.5", linestyle="--", linewidth=0.8)
    for step, stage in starts:
        axes[0].annotate(
            stage,
            (step, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, -2),
            textcoords="offset points",
            va="top",
            fontsize=8,
            color="0.3",
        )
    for ax, key in zip(axes, keys):
        points = [
            (float(entry.get("step", i)), y)
            for i, entry in enumerate(history)
            if (y := _finite(entry.get(key))) is not None
        ]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o" if len(points) <= 50 else None, markersize=3, linewidth=1.2)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel(key)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel("step")
    if title:
        fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110)
    return path
