"""Job start-up, shared by every job (`jobs/*.py`) and the Serve application.

What each job does before its own work, in one place:

- `user_errors`: a wrong config value, a cluster too small for the job, a Ray that did not start
  (or no cluster to join at "auto") or a run directory the nodes do not share is not a bug in
  cudal1: the user gets one message naming the key and the value (or each role's needs and each
  node's resources, or what Ray said and where its logs are) and exit code 2, not a traceback. Every
  other exception keeps its traceback.
- `infrastructure_errors`: the pool that computes rewards lost (`RewardSourceLost`) or a broken
  weight sync (`WeightSyncBroken`) is one message and exit code 1, not a traceback and never a
  success.
- `no_empty_output`: a job that fails before its first result leaves no output directory behind
  (a training start that fails once its actors run keeps its directory for the logs, without a
  state.json: `RunContext.start` says so, and the review skips it).
- `output_dir` and `compose`: Hydra's side. A job's output directory defaults to the one Hydra
  resolved for its own logs; `compose` builds a config outside `@hydra.main` (the Serve builder).
- `start_ray`: start or join Ray as `cfg.ray` says, route the engines' log records to files, and
  check that the cluster's nodes can hold every actor the job asks for.
- `open_tracker`: the job's MLflow run (`cudal1.tracking.Tracker`) from `cfg.tracking`.
- `select_tasks`, `usable_tasks`: the tasks `cfg.tasks` selects, then those the primary pool's
  probe kept.
- `ensure_model`, `engine_kwargs`, `start_generator`: the policy checkpoint and its rollout
  engines.

Training's own start-up (the buffer, the learner, the placement of both) is
`cudal1.pipeline.context.RunContext.start`, which builds on these.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from ray.util.placement_group import PlacementGroup

    from cudal1.actors.generator_group import GeneratorGroup
    from cudal1.actors.preflight import ActorNeed
    from cudal1.tasks import Task
    from cudal1.tracking import Tracker

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
"""The checkout (or installed tree) that holds `cudal1/` and `conf/`."""
CONF_DIR = ROOT / "conf"


@contextlib.contextmanager
def user_errors(job: str) -> Iterator[None]:
    """Turn ConfigError, OmegaConf's validation and key errors, InsufficientResources,
    SharedStorageError and RayStartError (Ray did not start or could not be joined) raised inside
    the block into `<job>: <message>` on stderr and SystemExit(2)."""
    from omegaconf.errors import ConfigKeyError, ValidationError

    from cudal1.actors.preflight import InsufficientResources, RayStartError
    from cudal1.actors.storage import SharedStorageError
    from cudal1.config import ConfigError

    errors = (ConfigError, ValidationError, ConfigKeyError, InsufficientResources, SharedStorageError, RayStartError)
    try:
        yield
    except errors as e:
        message = str(e).strip()
        if isinstance(e, (ValidationError, ConfigKeyError)):
            # OmegaConf appends "full_key: ..., object_type=..." lines; the first line and the key suffice.
            key = getattr(e, "full_key", None)
            message = f"config error at {key}: {message.splitlines()[0]}" if key else message.splitlines()[0]
        print(f"{job}: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


@contextlib.contextmanager
def infrastructure_errors(job: str) -> Iterator[None]:
    """Turn what ends a run because its infrastructure is gone, raised inside the block, into
    `<job>: stopped: <message>` and what to do next, on stderr, and SystemExit(1): the run failed,
    but not through a bug in cudal1 or a config value. The run directory keeps everything
    recorded so far. Those are `RewardSourceLost` (the pool that computes rewards is gone: its
    nodes lost, or every recent result a harness failure), `WeightSyncBroken` (the engines sample
    from other weights than the learner's), `LearnerRankLost` (a rank of the learner group died)
    and `ActorStalled` (actors gave no answer within their timeout, each named)."""
    from cudal1.actors.health import ActorStalled, LearnerRankLost, RewardSourceLost, WeightSyncBroken

    try:
        yield
    except (RewardSourceLost, WeightSyncBroken, LearnerRankLost, ActorStalled) as e:
        after = {
            RewardSourceLost: "once the pool's nodes are back",
            WeightSyncBroken: "once the sync is mended",
            LearnerRankLost: "once the rank's node is back",
        }.get(type(e), "once the silent actors are looked into")
        print(
            f"{job}: stopped: {e}\n{job}: what was recorded is kept; {after}, run the job again "
            "(training: the same run_dir with resume=true continues from the last checkpoint)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1) from None


RESULT_FREE = frozenset({"hydra", "logs"})
"""What a job writes into its output directory before its first result: Hydra's log and the
engines' log files (`start_ray`)."""


@contextlib.contextmanager
def no_empty_output(path: str | os.PathLike) -> Iterator[None]:
    """Around a job's start and work: when the block fails (any exception, or SystemExit with a
    non-zero code) and `path` holds nothing but `RESULT_FREE` entries, remove it, so that a start
    that failed (a wrong task id, a cluster too small) leaves no directory that looks like a run.
    A directory with anything else in it (state, checkpoints, a resumed run's files) is kept."""
    try:
        yield
    except BaseException as e:
        if not (isinstance(e, SystemExit) and e.code in (0, None)):
            _remove_if_result_free(Path(path))
        raise


def _remove_if_result_free(path: Path) -> None:
    import shutil

    try:
        entries = {p.name for p in path.iterdir()}
    except OSError:
        return
    if entries <= RESULT_FREE:
        shutil.rmtree(path, ignore_errors=True)
        log.debug("removed %s: the job failed before writing any result", path)


def output_dir(cfg: DictConfig, key: str) -> None:
    """Inside `@hydra.main`: when `cfg[key]` is still the config's default interpolation (such as
    runs/${now:...}), set it to the directory Hydra resolved for its own output (`<dir>/hydra`), so
    that resolving it again later cannot name a second directory."""
    from hydra.core.hydra_config import HydraConfig

    if OmegaConf.is_interpolation(cfg, key):
        cfg[key] = str(Path(HydraConfig.get().run.dir).parent)


def compose(config_name: str, overrides: Sequence[str] = ()) -> DictConfig:
    """conf/<config_name>.yaml with Hydra `overrides` ("key=value"), composed against the schema
    (`cudal1.config.register_schema`) but not yet validated: pass it to the job's `load_*_config`.
    Raises Hydra's and OmegaConf's errors for an override that names no key."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from cudal1.config import register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return hydra_compose(config_name=config_name, overrides=list(overrides))


def start_ray(
    cfg: Any,
    log_dir: Path | None = None,
    needs: list[ActorNeed] | None = None,
    env_vars: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start or join Ray as `cfg.ray` says, then (with `ray.preflight`) check that the cluster's
    nodes can hold every actor the job asks for: `needs`, by default what the job's config asks for
    (`cudal1.actors.preflight.job_needs`). With `log_dir`, the engines' log records of the driver
    and of every actor shell go to files there, not to the terminal (`cudal1.engines.logs`).
    `env_vars` are set in this process's environment (a local cluster's processes inherit it)
    and in the job's runtime environment (every worker of the job, on a joined cluster too).
    Returns `init_ray`'s facts. Raises `cudal1.actors.preflight.RayStartError` when Ray does not
    start or cannot be joined, `cudal1.actors.preflight.InsufficientResources` naming each role's
    needs and each node's resources when the nodes cannot hold the actors."""
    from cudal1.actors.cluster import ClusterConfig, alive_nodes, code_runtime_env, init_ray
    from cudal1.actors.preflight import check_cluster, job_needs

    # Workers must import cudal1 from the same tree as the driver (a local cluster does not
    # upload a working dir; `ray job submit --working-dir .` does).
    env = code_runtime_env(ROOT)
    if env_vars:
        os.environ.update(env_vars)
        env = {**env, "env_vars": {**env.get("env_vars", {}), **env_vars}}
    if log_dir is not None:
        from cudal1.engines.logs import engine_env, route_engine_logs

        route_engine_logs(log_dir, "driver")
        env = {**env, "env_vars": {**env.get("env_vars", {}), **engine_env(log_dir)}}
    facts = init_ray(
        ClusterConfig(
            address=cfg.ray.address,
            num_cpus=cfg.ray.num_cpus,
            num_gpus=cfg.ray.num_gpus,
            object_store_mb=cfg.ray.object_store_mb,
            runtime_env=env,
        )
    )
    if cfg.ray.preflight:
        check_cluster(job_needs(cfg) if needs is None else needs, alive_nodes())
    return facts


def open_tracker(
    cfg: Any,
    out_dir: Path,
    run_name: str | None = None,
    resume_run_id: str | None = None,
    default_uri: str | None = None,
) -> Tracker:
    """The job's MLflow run as `cfg.tracking` says (uri, experiment, enabled, system metrics), with
    `out_dir` as its run directory; `resume_run_id` continues a run. The store: `tracking.uri`,
    else MLFLOW_TRACKING_URI, else `default_uri` (a resumed run's own local store), else the
    project's `runs/mlflow.db` under the current working directory
    (`cudal1.tracking.resolve_tracking_uri`): the same for every job."""
    from cudal1.tracking import Tracker

    t = cfg.tracking
    return Tracker(
        t.uri,
        t.experiment,
        out_dir,
        run_name=run_name,
        enabled=t.enabled,
        resume_run_id=resume_run_id,
        system_metrics_s=t.system_metrics_s,
        default_uri=default_uri,
    )


def select_tasks(cfg: Any) -> list[Task]:
    """The tasks of `cfg.tasks`: the suite's tasks of the given levels, then `ids` (in their order)
    if any, then the first `limit`. Raises ConfigError (a ValueError, which `user_errors` reports
    in one line) for a source that does not exist, an id that names no task (with the closest
    names), or a selection that leaves nothing."""
    from cudal1.tasks import find_task, load_tasks

    from cudal1.config import ConfigError

    try:
        suite = load_tasks(cfg.tasks.source)
    except FileNotFoundError as e:
        raise ConfigError("tasks.source", str(e)) from None
    tasks = [t for t in suite if t.level in set(cfg.tasks.levels)]
    if cfg.tasks.ids:
        try:
            tasks = [find_task(suite, ref) for ref in cfg.tasks.ids]
        except LookupError as e:  # the message names the id and the closest names
            raise ConfigError("tasks.ids", str(e).strip("'\"")) from None
    tasks = [t for t in tasks if not t.degenerate]
    if cfg.tasks.limit:
        tasks = tasks[: cfg.tasks.limit]
    if not tasks:
        raise ConfigError("tasks", f"no tasks selected by tasks={OmegaConf.to_container(cfg.tasks)}")
    return tasks


def usable_tasks(tasks: list[Task], probes: dict[str, dict[str, Any]]) -> list[Task]:
    """`tasks` without those whose reference failed to run or is degenerate on the primary pool's
    device (a wrong candidate passes on a degenerate task, so it can teach nothing), each dropped
    one logged. `probes`: `BenchmarkPool.probe_tasks`' answer. Raises ConfigError (key "tasks", a
    ValueError, which `user_errors` reports in one line) when none is left: the selection, not
    cudal1, has to change."""
    kept = []
    for task in tasks:
        probe = probes.get(task.task_id) or {}
        why = probe.get("failure") or (f"degenerate: {probe['degenerate']}" if probe.get("degenerate") else None)
        if why:
            log.warning("task %s (%s) left out: %s", task.task_id, task.name, why)
        else:
            kept.append(task)
    if not kept:
        from cudal1.errors import ConfigError

        raise ConfigError(
            "tasks",
            f"none of the {len(tasks)} selected tasks can be used on the primary pool's device "
            "(each failed its probe or is degenerate: the warnings above say why)",
        )
    log.info(
        "%d of %d tasks kept after probing their references: %s",
        len(kept),
        len(tasks),
        ", ".join(t.task_id for t in kept[:20]) + (", ..." if len(kept) > 20 else ""),
    )
    return kept


def ensure_model(cfg: Any, out_dir: Path) -> Path:
    """The policy checkpoint directory: `model.path` (a registered "models:/name/version" is
    downloaded under `<out_dir>/registry_model` from the store `cudal1.tracking.resolve_tracking_uri`
    names: `tracking.uri`, MLFLOW_TRACKING_URI, else the project's `runs/mlflow.db`), or the embedded small model built (once) under
    `<out_dir>/base_model`."""
    if cfg.model.path and str(cfg.model.path).startswith("models:/"):
        from cudal1.tracking import checkpoint_from_registry, resolve_tracking_uri

        log.info("fetching %s from the model registry", cfg.model.path)
        uri = resolve_tracking_uri(cfg.tracking.uri)  # the store the training jobs register in
        return checkpoint_from_registry(str(cfg.model.path), out_dir / "registry_model", tracking_uri=uri)
    if cfg.model.path:
        return Path(os.path.expanduser(cfg.model.path))
    path = out_dir / "base_model"
    if not (path / "config.json").exists():
        from cudal1.policy.small import init_small

        small = cfg.model.small
        log.info("building the embedded small model in %s", path)
        init_small(
            path,
            vocab_size=small.vocab_size,
            hidden_size=small.hidden_size,
            intermediate_size=small.intermediate_size,
            num_layers=small.num_layers,
            num_heads=small.num_heads,
            num_kv_heads=small.num_kv_heads,
            max_position_embeddings=small.max_position_embeddings,
            seed=small.seed,
        )
    return path


def engine_kwargs(cfg: Any) -> dict[str, Any]:
    """The rollout engine's extra keyword arguments: `rollout.engine_kwargs`, and for vLLM the KV
    cache size `rollout.kv_cache_gib` unless those name one."""
    extra = dict(OmegaConf.to_container(cfg.rollout.engine_kwargs))
    if cfg.rollout.backend in ("vllm", "auto"):
        extra.setdefault("kv_cache_gib", cfg.rollout.kv_cache_gib)
    return extra


def start_generator(cfg: Any, model_path: str | Path, colocated: PlacementGroup | None = None) -> GeneratorGroup:
    """Start the rollout engines `cfg.rollout` asks for (`rollout.num_engines`, each with
    `tensor_parallel_size` workers) as one `cudal1.actors.generator_group.GeneratorGroup`;
    returns at once (call `.ready()`). `colocated`: the learner's shared placement group (ipc)."""
    from cudal1.actors.generator_group import GeneratorGroup

    ro = cfg.rollout
    return GeneratorGroup.start(
        str(model_path),
        ro.backend,
        num_engines=ro.num_engines,
        tensor_parallel_size=ro.tensor_parallel_size,
        num_cpus=ro.num_cpus,
        num_gpus=ro.num_gpus,
        max_model_len=ro.max_model_len,
        dtype=cfg.model.dtype,
        seed=cfg.seed,
        colocated=colocated,
        timeout_s=ro.timeout_s,
        **engine_kwargs(cfg),
    )
