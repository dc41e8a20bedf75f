"""One benchmark pool's specification (`PoolSpec`): Ray-free, so that the config
(`cudal1.config.BenchConfig.pools`) holds it as it is and the pool (`cudal1.actors.bench_pool`)
consumes it whole."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..bench.settings import EvalSettings
from ..errors import ConfigError

RESTART_SLACK_S = 180.0
"""Seconds allowed, per attempt, on top of the evaluator's wall limit: an actor restart re-imports
torch, reloads the tasks and starts a new fork server (tens of seconds on a busy 2-core machine)."""


@dataclasses.dataclass
class PoolSpec:
    """One benchmark pool: which nodes its actors may run on and how they evaluate."""

    name: str = "cpu"
    """Pool name, usually the architecture ("cpu", "h100", "a100")."""
    backend: str = "cpu"
    """"cpu" or "cuda" (passed to the evaluator)."""
    num_actors: int = 1
    """Actors (evaluator workers) in the pool. Actors on one node time at the same time: on a CPU
    pool they share cores and memory bandwidth (noisier speedups); GPU actors get a GPU each."""
    num_cpus: float = 1.0
    """Logical CPUs per actor. Ray sets OMP_NUM_THREADS from it, which the evaluator worker inherits:
    reference and candidate are timed with that many torch threads."""
    num_gpus: float = 0.0
    """GPUs per actor; the actor's evaluator uses "cuda:0", which Ray maps to the GPU it assigned.
    0.5 puts two actors on one GPU: their evaluations' setup overlaps and their timed phases take
    turns (`cudal1.bench.devicelock`), more candidates an hour for noisier sub-millisecond timings
    (docs/benchmarks.md)."""
    accelerator_type: str | None = None
    """Ray's accelerator_type option ("H100", "A100", "H200"): only nodes with that GPU model."""
    resources: dict[str, float] = dataclasses.field(default_factory=dict)
    """Custom resources per actor (e.g. {"bench_test": 1} in tests)."""
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Overrides of `EvalSettings.for_backend(backend)` (field name → value)."""
    tasks: str = "builtin"
    """Where the actors load tasks from: "builtin" or a KernelBench checkout path (on every node)."""
    task_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for `cudal1.tasks.load_tasks` (levels, ids, profile)."""
    max_task_retries: int = 1
    """How often a call in flight on an actor that died is rerun on the restarted actor."""
    call_timeout_s: float | None = None
    """Give up on one call after this long (None: (retries + 1) × (wall_timeout_s + RESTART_SLACK_S))."""
    start_timeout_s: float = 600.0
    """Fail pool creation if the actors are not all running after this long (e.g. their nodes are busy)."""
    check_nodes: bool = True
    """Fail at once when no alive node has the resources one actor needs. Turn off on an
    autoscaling cluster, where such nodes may still be added."""
    build_actors: int = 0
    """CPU actors that build candidates' extensions ahead of timing (`BuildWorker`: at import, in
    __init__ and in the first forward), in parallel, one build per distinct source (0: each timing
    actor builds what it times, inside its evaluation). They build into the evaluator's build
    cache under `settings.cache_dir` and send each build directory, packed and hashed
    (`cudal1.actors.artifacts`), with the candidate to its timing actor, which checks it and puts
    it into its own cache before timing: the two may be on different nodes, provided
    `settings.cache_dir` is the same path on both (torch's build files name it). Where the timing
    actor already sees the build (one host, shared storage) nothing is copied. On a GPU node
    their compilers keep off the cores the node's timing actors time on (`build_cores`,
    `timing_cores`)."""
    build_cpus: float = 2.0
    """Logical CPUs per build actor (each build runs 2 compiler jobs)."""
    build_resources: dict[str, float] = dataclasses.field(default_factory=dict)
    """Custom resources per build actor, to put builds on nodes of their own (e.g. {"builder": 1}
    on CPU-only nodes started with `ray start --resources '{"builder": 8}'`). Empty: any node
    with `build_cpus` free CPUs."""
    lost_after: int | None = None
    """For the pool that computes rewards: this many results in a row (across calls) that are all
    the harness's failures (`HARNESS_LABELS`: an actor died, timed out, or its evaluator raised)
    and the pool counts as lost (`RewardSourceLost`). None: max(4, 2 × num_actors), every actor
    failing twice in a row, a call's retry included, so losing one node of a large pool is not
    enough. A pool that only records never counts as lost."""

    def __post_init__(self) -> None:
        """Check every field. Raises `ConfigError` (a ValueError) naming the config key,
        `bench.pools.<name>.<field>`, so the config's validation is this check."""
        known = {f.name for f in dataclasses.fields(EvalSettings)}
        checks = [
            ("backend", self.backend in ("cpu", "cuda"), f"must be cpu or cuda, not {self.backend!r}"),
            ("num_actors", self.num_actors >= 1, f"must be >= 1, not {self.num_actors}"),
            ("num_gpus", self.backend != "cuda" or self.num_gpus > 0, "a cuda pool needs num_gpus > 0 per actor"),
            ("build_actors", self.build_actors >= 0, f"must be >= 0, not {self.build_actors}"),
            ("build_cpus", self.build_cpus > 0, f"must be > 0, not {self.build_cpus}"),
            ("lost_after", self.lost_after is None or self.lost_after >= 1, f"must be >= 1, not {self.lost_after}"),
            (
                "max_task_retries",
                self.max_task_retries >= 0,
                "must be >= 0 (a finite number: a candidate that kills its actor every time must not be "
                "retried forever)",
            ),
        ]
        checks += [
            (f"settings.{k}", False, f"not an EvalSettings field; known: {', '.join(sorted(known))}")
            for k in self.settings
            if k not in known
        ]
        for field, ok, message in checks:
            if not ok:
                raise ConfigError(f"bench.pools.{self.name}.{field}", message)

    def eval_settings(self) -> EvalSettings:
        """The evaluator settings the actors use. Raises TypeError for an unknown field name."""
        return EvalSettings.for_backend(self.backend, **self.settings)

    def demand(self) -> dict[str, float]:
        """Ray resources one actor needs, as node resource names ("CPU", "GPU", custom ones)."""
        need: dict[str, float] = {"CPU": float(self.num_cpus)}
        if self.num_gpus:
            need["GPU"] = float(self.num_gpus)
        if self.accelerator_type:
            need[f"accelerator_type:{self.accelerator_type}"] = 0.001
        need.update({k: float(v) for k, v in self.resources.items()})
        return need

    def build_demand(self) -> dict[str, float]:
        """Ray resources one build actor needs ("CPU" and `build_resources`)."""
        return {"CPU": float(self.build_cpus), **{k: float(v) for k, v in self.build_resources.items()}}

    def lost_after_results(self) -> int:
        """`lost_after`, or its default max(4, 2 × num_actors)."""
        return self.lost_after if self.lost_after is not None else max(4, 2 * self.num_actors)

    def timeout_per_call_s(self) -> float:
        if self.call_timeout_s is not None:
            return self.call_timeout_s
        return (self.max_task_retries + 1) * (self.eval_settings().wall_timeout_s + RESTART_SLACK_S)


def pool_specs(pools: Mapping[str, Any], tasks: str = "builtin") -> dict[str, PoolSpec]:
    """The `PoolSpec` of every pool of a `bench.pools` config, by name. `pools` maps a name to a
    `PoolSpec`, its OmegaConf node, or a mapping of `PoolSpec` field names; each spec takes its
    name from the key, and its actors load their tasks from `tasks` ("builtin", or a KernelBench
    checkout on every node). Raises ConfigError (a ValueError) as `PoolSpec` does, and for a
    key `PoolSpec` has no field for."""
    from omegaconf import DictConfig, OmegaConf

    specs = {}
    for name, p in pools.items():
        if isinstance(p, DictConfig):
            fields = OmegaConf.to_container(p, resolve=True)
        elif dataclasses.is_dataclass(p):
            fields = dataclasses.asdict(p)
        else:
            fields = dict(p)
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(PoolSpec)})
        if unknown:
            raise ConfigError(f"bench.pools.{name}.{unknown[0]}", "not a PoolSpec field")
        specs[name] = PoolSpec(**{**fields, "name": name, "tasks": tasks})
    return specs
