"""Everything one training run holds: config, tasks, tokenizer, actor handles, tracker, state.

`RunContext.start(cfg)` starts the actors in the order that fails fastest on a bad cluster
(benchmark pools first: a pool asking for a GPU type nobody has fails in seconds), and
`close()` stops them. The driver owns the loop and the step counter; actors own the resources.
What every job starts the same way (Ray, the tracker, the tasks, the model, the rollout engines)
comes from `cudal1.launch`.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from cudal1.launch import ensure_model, open_tracker, select_tasks, start_generator, start_ray, usable_tasks
from cudal1.pipeline.state import RunState
from cudal1.tasks import Task
from cudal1.tracking import local_store_path

if TYPE_CHECKING:
    from ray.util.placement_group import PlacementGroup
    from transformers import PreTrainedTokenizerBase

    from cudal1.actors.bench_pool import BenchmarkPools
    from cudal1.actors.generator_group import GeneratorGroup
    from cudal1.actors.learner_group import LearnerGroup
    from cudal1.actors.shells import ShellHandle
    from cudal1.actors.weight_transport import WeightTransport
    from cudal1.pipeline.overlap import Background
    from cudal1.pipeline.record import PoolRecorder
    from cudal1.tracking import Tracker

log = logging.getLogger(__name__)


def check_shared_run_dir(run_dir: Path, actors: dict[str, ShellHandle]) -> None:
    """Prove that each actor in `actors` (role → ShellHandle) and the driver see the same
    `run_dir` (`cudal1.actors.storage`). Raises SharedStorageError naming each actor that does not,
    with its node."""
    import ray

    from cudal1.actors.storage import check_answers, write_probe

    probe, token = write_probe(run_dir)
    replies = ray.get([handle.storage_probe(str(probe), token, role) for role, handle in actors.items()])
    check_answers(probe, token, replies)
    log.info("run directory shared with %s", ", ".join(f"{r['role']} ({r['node']})" for r in replies))


DROPPED_JOIN_S = 60.0
"""Seconds `RunContext.close` waits for each dropped sampling thread to end after the actors stopped
(its next call on a stopped engine or pool fails at once; a call already waiting may take longer)."""


@dataclasses.dataclass
class RunContext:
    """Handles of one run: the config, the run directory, the tasks, the policy's tokenizer, the
    run state and tracker, and the actors (None until `start` has started them)."""

    cfg: DictConfig
    run_dir: Path
    model_path: Path
    tasks: list[Task]
    tokenizer: PreTrainedTokenizerBase
    state: RunState
    tracker: Tracker
    rng: random.Random
    pools: BenchmarkPools | None = None
    generator: GeneratorGroup | None = None
    learner: LearnerGroup | None = None
    buffer: ShellHandle | None = None
    """The exemplar buffer's shell (`cudal1.actors.shells.BufferActor`)."""
    weights: WeightTransport | None = None
    """The learner → generator weight transport `rollout.weight_sync` names
    (`cudal1.actors.weight_transport`)."""
    recorder: PoolRecorder | None = None
    """Records the primary pool's correct candidates on the other pools, when there is more than one."""
    dropped: list[Background] = dataclasses.field(default_factory=list)
    """Samples an interrupted stage left running in background threads (`OneStepAhead.drop`);
    `close` waits for them once the actors they call are stopped."""

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    @classmethod
    def start(cls, cfg: DictConfig) -> "RunContext":
        """Create the run directory, the tracker and all actors (Ray started or joined here)."""
        from cudal1.actors.bench_pool import BenchmarkPools
        from cudal1.actors.pool_spec import pool_specs
        from cudal1.actors.shells import BufferActor
        from cudal1.actors.storage import driver_node_options
        from cudal1.actors.weight_transport import weight_transport
        from cudal1.policy.model import load_tokenizer

        run_dir = Path(cfg.run_dir).resolve()
        state_exists = (run_dir / "state.json").exists()
        if state_exists and not cfg.resume:
            raise FileExistsError(f"{run_dir} already holds a run: pass resume=true to continue it, or another run_dir")
        if cfg.resume and not state_exists:
            log.warning("resume=true but %s holds no run: starting a new one", run_dir)
        tasks = select_tasks(cfg)
        # A cluster too small for the job fails here, before anything but the driver's log is written.
        start_ray(cfg, log_dir=run_dir / "logs")
        run_dir.mkdir(parents=True, exist_ok=True)
        state = RunState.load(run_dir)
        model_path = ensure_model(cfg, run_dir)
        tokenizer = load_tokenizer(model_path)
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg))

        tracker = open_tracker(
            cfg,
            run_dir,
            run_name=run_dir.name,
            resume_run_id=state.mlflow_run_id,
            default_uri=state.tracking_store(run_dir),
        )
        state.mlflow_run_id = tracker.run_id
        state.mlflow_uri = tracker.uri if local_store_path(tracker.uri) is not None else None
        if not state_exists:
            tracker.log_config(OmegaConf.to_container(cfg, resolve=True))
        ctx = cls(cfg, run_dir, model_path, tasks, tokenizer, state, tracker, random.Random(cfg.seed + state.step))
        try:
            specs = list(pool_specs(cfg.bench.pools, cfg.tasks.source).values())
            # Actors start concurrently: the pools block until theirs are ready, meanwhile the
            # engine and the learner load.
            rl = cfg.stage.contrastive_rl
            # The buffer and the learner write under run_dir: with ray.storage=driver_node they stay
            # on the driver's node, otherwise the probe below proves they see the same directory.
            pinned = driver_node_options() if cfg.ray.storage == "driver_node" else {}
            ctx.buffer = BufferActor.options(**pinned).remote(
                str(run_dir / "buffer"),
                tau=rl.tau,
                n_buckets=rl.n_buckets,
                k=max(rl.exemplars, 1),
                seed=cfg.seed,
                scale=rl.bucket_scale,
            )
            colocated = start_colocated(cfg, pinned) if cfg.rollout.weight_sync == "ipc" else None
            ctx.generator = start_generator(cfg, model_path, colocated)
            ctx.learner = start_learner(cfg, model_path, pinned, colocated)
            ctx.weights = weight_transport(
                cfg.rollout.weight_sync,
                ctx.learner,
                ctx.generator,
                on_gpus=cfg.learner.num_gpus > 0 and cfg.rollout.num_gpus > 0,
            )
            # A stream whose engines were all replaced samples again once they hold the learner's weights.
            ctx.generator.catch_up = lambda: ctx.weights.sync(int(ctx.learner.attribute("version")))
            ctx.pools = BenchmarkPools(specs, primary=cfg.bench.primary)
            if len(ctx.pools.names) > 1:
                from cudal1.pipeline.record import PoolRecorder

                ctx.recorder = PoolRecorder(ctx.pools, run_dir / "rollouts")
            ctx.tasks = usable_tasks(ctx.tasks, ctx.pools.primary.probe_tasks([t.task_id for t in ctx.tasks]))
            for name, handle in (
                ("buffer", ctx.buffer),
                ("rollout generator", ctx.generator),
                ("learner", ctx.learner),
            ):
                log.info("waiting for the %s", name)
                handle.ready()
            # Ray's actor ids, as the messages of a lost or silent actor name them (`ray list actors`).
            log.info("actors: %s", ", ".join([*ctx.generator.labels(), *ctx.learner.labels()]))
            if cfg.ray.storage == "shared":
                check_shared_run_dir(run_dir, {"buffer": ctx.buffer, **ctx.learner.rank_handles()})
        except BaseException:
            ctx.close(status="FAILED")
            if not state_exists:  # kept for its logs (an engine that failed to start says why there)
                log.warning(
                    "the run stopped before its first stage: %s holds no state.json, so the review skips it; "
                    "MLflow run %s is marked FAILED; its logs are in %s",
                    run_dir,
                    tracker.run_id or "(none)",
                    run_dir / "logs",
                )
            raise
        return ctx

    def close(self, status: str = "FINISHED") -> None:
        """Stop the actors (the buffer is already on disk) and close the MLflow run. A finished run
        first lets the other pools finish recording what was submitted (up to 10 minutes)."""
        if self.recorder is not None:
            self.recorder.close(timeout_s=600.0 if status == "FINISHED" else 5.0)
        if self.pools is not None:
            self.pools.shutdown()
        for handle in (self.generator, self.learner, self.buffer):
            if handle is not None:
                try:
                    handle.kill()
                except Exception as e:  # already dead: nothing to stop
                    log.debug("stopping %s: %s", handle, e)
        # A sampling thread left running would go on calling the stopped actors, and Ray after the
        # driver shut it down.
        for job in self.dropped:
            if not job.join(DROPPED_JOIN_S):
                log.warning("%s still running %.0f s after its run's actors stopped", job.name, DROPPED_JOIN_S)
        self.dropped.clear()
        self.tracker.close(status)


def start_colocated(cfg: DictConfig, pinned: dict[str, Any]) -> PlacementGroup:
    """rollout.weight_sync=ipc: the placement group of one bundle {CPU: learner + engine CPUs,
    GPU: 1} that the learner and the engine both go into (`generator_group.colocated_placement_group`),
    on the driver's node under ray.storage=driver_node."""
    import ray

    from cudal1.actors.generator_group import colocated_placement_group

    node = {f"node:{ray.util.get_node_ip_address()}": 0.001} if pinned else None
    return colocated_placement_group(cfg.learner.num_cpus + cfg.rollout.num_cpus, node)


def start_learner(
    cfg: DictConfig, model_path: Path, pinned: dict[str, Any], colocated: PlacementGroup | None = None
) -> LearnerGroup:
    """The learner: a `cudal1.actors.learner_group.LearnerGroup` of `learner.num_ranks` ranks (one
    rank: one actor, as a single learner always was). `pinned`: the driver-node placement of
    ray.storage=driver_node, which a group of several ranks gets as a node resource in each bundle.
    `colocated`: the placement group of `start_colocated` (weight_sync=ipc), whose bundle 0 the one
    rank shares with the engine."""
    import ray

    from cudal1.actors.cluster import in_bundle
    from cudal1.actors.learner_group import LearnerGroup
    from cudal1.config import effective_tis_cap
    from cudal1.training.config import LearnerConfig

    lc = cfg.learner
    bundle_resources = None
    if colocated is not None:
        pinned = {"scheduling_strategy": in_bundle(colocated)}
    elif pinned and lc.num_ranks > 1:
        bundle_resources, pinned = {f"node:{ray.util.get_node_ip_address()}": 0.001}, {}
    return LearnerGroup.start(
        str(model_path),
        dataclasses.replace(LearnerConfig.from_config(lc), tis_cap=effective_tis_cap(cfg)),
        actor_options=pinned,
        bundle_resources=bundle_resources,
        max_response_len=cfg.rollout.max_tokens,
        device="cuda" if lc.num_gpus > 0 else "cpu",
        seed=cfg.seed,
    )
