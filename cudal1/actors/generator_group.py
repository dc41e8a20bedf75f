"""A generator group: M rollout engines, each a Ray actor in a placement group of its own, used
by the driver as one generator.

Each engine is a `RolloutActor` (`cudal1.rollout.RolloutGenerator` around vLLM, or transformers)
with `tensor_parallel_size` = k engine workers inside it (vLLM's own processes, on the k GPUs of
its placement group's bundle). Prompts are split over the engines in contiguous shards of nearly
equal size and the answers put back in prompt order; every engine samples all `n` responses of
each of its prompts, so a GRPO group never spans engines.

Weights reach every engine the same way they reach one: a copy through Ray's object store
(`update_weights`), or one broadcast group of size 1 + M·k (`open_broadcast`): the learner is
rank 0, engine i's workers are ranks 1 + i·k ... (i+1)·k, and a sync is the learner's
`broadcast_weights` while every engine runs `receive_weights`. Where one engine shares the
learner's GPU (`rollout.weight_sync=ipc`), `sync_ipc` hands it CUDA IPC handles of the learner's
buckets instead (`cudal1.engines.cuda_ipc`): `colocated_placement_group` reserves the one bundle
{CPU: both actors' CPUs, GPU: 1} that the learner and the engine are both scheduled into, each with
its fractional `num_gpus`, so Ray gives both the same GPU.
The driver does not call these itself: it syncs through the one transport `rollout.weight_sync`
chose (`cudal1.actors.weight_transport`).

`generate_stream` hands out each prompt's group as its engine finishes it: every engine runs
`RolloutGenerator.generate_stream` as a Ray streaming generator (`ShellHandle` `.stream`, an
`ObjectRefGenerator`), and the group waits on all of them at once (`ray.wait`), so the driver can
start evaluating one group while the others are still sampled (`cudal1.pipeline.rollouts`).

Limits: prompts are split when a call starts, not balanced while it runs (an engine given long
responses finishes last). A stream abandoned before its end keeps its engines busy until they
finish that call (the next call waits for them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.placement_group import remove_placement_group

from cudal1.actors.cluster import in_bundle, reserve
from cudal1.actors.shells import ShellHandle, remote_class, wait_all
from cudal1.rollout.generator import RolloutGenerator
from cudal1.training.shards import contiguous_bounds as shard_bounds  # the learner group's split, for prompts

log = logging.getLogger(__name__)

RolloutActor = remote_class(RolloutGenerator)
"""The rollout generator's shell (vLLM or transformers engine); give it GPUs with `.options(num_gpus=1)`."""


class EngineStreamError(RuntimeError):
    """A rollout engine failed while streaming its groups (its actor died, or it raised).

    Raised by `GeneratorGroup.generate_stream` only after every group that did finish (on this
    engine before it failed, and on every other engine) was handed out.

    Attributes:
        engine: the failed engine's index in the group.
        delivered: groups that engine handed out before it failed.
        assigned: prompts it was given.
    """

    def __init__(self, engine: int, delivered: int, assigned: int, cause: BaseException) -> None:
        kind = "died" if isinstance(cause, RayActorError) else "failed"
        inner = getattr(cause, "cause", None) if isinstance(cause, RayTaskError) else None
        shown = inner if isinstance(inner, BaseException) else cause  # the engine's own exception, when it raised
        first = str(shown).strip().splitlines()
        super().__init__(
            f"rollout engine {engine} {kind} after {delivered} of its {assigned} groups: "
            f"{type(shown).__name__}: {first[0] if first else ''}"
        )
        self.engine, self.delivered, self.assigned = engine, delivered, assigned


def broadcast_ranks(num_engines: int, workers_per_engine: int) -> tuple[list[int], int]:
    """(first rank of each engine, world size) of the weight-broadcast group: the learner is rank
    0 and engine i's k workers take ranks 1 + i·k ... (i+1)·k. broadcast_ranks(2, 2) == ([1, 3], 5)."""
    if num_engines < 1 or workers_per_engine < 1:
        raise ValueError(f"need at least one engine and one worker each, not {num_engines} x {workers_per_engine}")
    return [1 + i * workers_per_engine for i in range(num_engines)], 1 + num_engines * workers_per_engine


def colocated_placement_group(
    num_cpus: float, node_resources: dict[str, float] | None = None, timeout_s: float = 900.0
) -> Any:
    """Reserve one bundle {CPU: num_cpus, GPU: 1} (plus `node_resources`, e.g. {"node:IP": 0.001}
    to pin it) for a learner rank 0 and a rollout engine that share its GPU: actors scheduled into
    bundle 0 of the returned placement group with fractional num_gpus (summing to at most 1) are
    given that bundle's one GPU. Raises TimeoutError when no node grants it within `timeout_s`."""
    bundle = {"CPU": float(num_cpus), "GPU": 1.0, **(node_resources or {})}
    return reserve(
        [bundle],
        "STRICT_PACK",
        "cudal1-colocated",
        timeout_s,
        f"no node could reserve the colocated learner+engine bundle {bundle}",
    )


class GeneratorGroup:
    """M rollout engines as one generator (see the module docstring).

    Args:
        engines: the engines' handles (`ShellHandle`s of `RolloutActor`s), in rank order.
        workers_per_engine: k, the tensor-parallel workers inside each engine (vLLM: one broadcast
            rank each; the transformers engine has 1).
        placement_groups: the placement groups to remove on `kill` (one per engine, or none).
    """

    def __init__(
        self, engines: Sequence[ShellHandle], workers_per_engine: int = 1, placement_groups: Sequence[Any] = ()
    ) -> None:
        if not engines:
            raise ValueError("a generator group needs at least one engine")
        self.engines = list(engines)
        self.workers_per_engine = int(workers_per_engine)
        self._placement_groups = list(placement_groups)

    @classmethod
    def start(
        cls,
        model_path: str,
        backend: str,
        *,
        num_engines: int = 1,
        tensor_parallel_size: int = 1,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        ready_timeout_s: float = 900.0,
        colocated: Any = None,
        **generator_kwargs: Any,
    ) -> "GeneratorGroup":
        """Start `num_engines` engines, each in a placement group of one bundle
        {CPU: num_cpus, GPU: num_gpus × tensor_parallel_size} (STRICT_PACK: an engine's workers on
        one node); `generator_kwargs` go to `RolloutGenerator`, engine i with seed + i. Blocks
        until each engine's placement group is reserved (up to `ready_timeout_s` each), then
        returns while the engines load; call `ready()`.

        With `colocated` (a placement group of `colocated_placement_group`, shared with the
        learner's rank 0) the one engine goes into its bundle 0 with `num_gpus` of its GPU instead;
        the group then owns that placement group and removes it on `kill`.

        Raises:
            ValueError: num_engines or tensor_parallel_size below 1; with `colocated`, more than one
                engine or worker, or num_gpus not in (0, 1).
            TimeoutError: a placement group could not be reserved within `ready_timeout_s` (the
                cluster lacks the resources; the preflight check normally says so earlier).
        """
        if num_engines < 1 or tensor_parallel_size < 1:
            raise ValueError(
                f"num_engines ({num_engines}) and tensor_parallel_size ({tensor_parallel_size}) must be >= 1"
            )
        bundle: dict[str, float] = {"CPU": float(num_cpus)}
        if num_gpus > 0:
            bundle["GPU"] = float(num_gpus) * tensor_parallel_size
        kwargs = dict(generator_kwargs)
        if colocated is not None:
            if num_engines != 1 or tensor_parallel_size != 1 or not 0 < num_gpus < 1:
                raise ValueError(
                    "a colocated engine is one engine of one worker with a fraction of the GPU "
                    f"(0 < num_gpus < 1); got {num_engines} x {tensor_parallel_size}, num_gpus={num_gpus}"
                )
            engine = RolloutActor.options(
                num_cpus=num_cpus, num_gpus=num_gpus, scheduling_strategy=in_bundle(colocated)
            )
            return cls([engine.remote(model_path, backend, **kwargs)], 1, [colocated])
        if tensor_parallel_size > 1:
            kwargs["tensor_parallel_size"] = tensor_parallel_size
        groups, engines = [], []
        try:
            for i in range(num_engines):
                pg = reserve(
                    [bundle],
                    "STRICT_PACK",
                    f"cudal1-rollout-{i}",
                    ready_timeout_s,
                    f"rollout engine {i}: no node could reserve {bundle}",
                )
                groups.append(pg)
                own = {**kwargs, "seed": int(kwargs.get("seed", 0)) + i}  # engines must not draw the same samples
                engines.append(
                    RolloutActor.options(
                        num_cpus=num_cpus, num_gpus=bundle.get("GPU", 0.0), scheduling_strategy=in_bundle(pg)
                    ).remote(model_path, backend, **own)
                )
        except BaseException:
            _release(engines, groups)
            raise
        return cls(engines, tensor_parallel_size, groups)

    def __len__(self) -> int:
        return len(self.engines)

    def ready(self, timeout_s: float | None = None) -> None:
        """Wait until every engine has loaded; re-raises the first engine's error."""
        wait_all([e.actor.ready.remote() for e in self.engines], timeout_s=timeout_s)

    def generate(self, prompts: Sequence[Sequence[int]], n: int = 1, **sampling: Any) -> list[list[Any]]:
        """`RolloutGenerator.generate` over the group: prompt i's `n` samples are result[i], in
        prompt order, whichever engine made them. `sampling`: max_tokens, temperature, top_p."""
        prompts = [list(p) for p in prompts]
        if not prompts:
            return []
        bounds = [(a, b) for a, b in shard_bounds(len(prompts), len(self.engines)) if b > a]
        refs = [self.engines[i].generate.remote(prompts[a:b], n=n, **sampling) for i, (a, b) in enumerate(bounds)]
        out: list[list[Any]] = []
        for part in wait_all(refs):
            out.extend(part)
        return out

    def generate_stream(
        self, prompts: Sequence[Sequence[int]], n: int = 1, **sampling: Any
    ) -> Iterator[tuple[int, list[Any]]]:
        """`RolloutGenerator.generate_stream` over the group: yields (prompt index, its `n`
        generations) as each group finishes, whichever engine made it (the split is `generate`'s).
        `sampling`: max_tokens (one, or one per prompt), temperature, top_p.

        Raises:
            EngineStreamError: an engine died or raised; raised once the other engines' groups
                (and the failed engine's groups finished before it failed) have all been yielded.
        """
        prompts = [list(p) for p in prompts]
        if not prompts:
            return
        limits = sampling.pop("max_tokens", None)
        per_prompt = limits is not None and not isinstance(limits, int)
        streams: dict[Any, tuple[int, int, int]] = {}  # ObjectRefGenerator -> (engine, first prompt, prompts)
        for i, (a, b) in enumerate(shard_bounds(len(prompts), len(self.engines))):
            if b > a:
                own = dict(sampling)
                if limits is not None:
                    own["max_tokens"] = list(limits[a:b]) if per_prompt else limits
                streams[self.engines[i].generate_stream.stream(prompts[a:b], n=n, **own)] = (i, a, b - a)
        delivered = {i: 0 for i, _, _ in streams.values()}
        failure: EngineStreamError | None = None
        waiting = list(streams)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for stream in ready:
                engine, first, assigned = streams[stream]
                try:
                    ref = next(stream)
                except StopIteration:
                    continue
                try:
                    index, group = ray.get(ref)
                except RayError as e:  # RayActorError: the engine died; RayTaskError: it raised
                    error = EngineStreamError(engine, delivered[engine], assigned, e)
                    log.error("%s", error)
                    failure = failure or error
                    continue  # the other engines' groups still come out before the error
                delivered[engine] += 1
                waiting.append(stream)
                yield first + index, group
        if failure is not None:
            raise failure

    def score(self, prompt_ids: Sequence[int], response_ids: Sequence[int]) -> list[float]:
        """The first engine's `RolloutGenerator.score` (all engines hold the same weights)."""
        return self.engines[0].score(list(prompt_ids), list(response_ids))

    def model_versions(self) -> list[int]:
        """Each engine's `model_version`, in engine order."""
        return [int(v) for v in wait_all([e.actor.get.remote("model_version") for e in self.engines])]

    def update_weights(self, named_weights: Any, version: int) -> float:
        """Load the learner's weights into every engine through the object store (`named_weights`:
        an ObjectRef of the learner's `named_weights()`, fetched once per engine). Returns the
        slowest engine's seconds."""
        return max(wait_all([e.update_weights.remote(named_weights, version) for e in self.engines]))

    def open_broadcast(self, learner: Any, host: str, port: int, backend: str, timeout_s: float = 900.0) -> int:
        """Form the weight-broadcast group of the learner (rank 0, serving on host:port) and every
        engine worker; all sides join together, since each waits for the others. Returns its size."""
        firsts, world = broadcast_ranks(len(self.engines), self.workers_per_engine)
        refs = [learner.init_weight_group.remote(host, port, world, backend)]
        refs += [e.init_weight_group.remote(host, port, r, world, backend) for e, r in zip(self.engines, firsts)]
        wait_all(refs, timeout_s=timeout_s)
        return world

    def receive_weights(self, specs: list[Any], version: int, bucket_mb: float = 256) -> list[Any]:
        """Start every engine's side of one broadcast; returns their ObjectRefs (wait for them with
        the learner's `broadcast_weights`, which must use the same `bucket_mb`)."""
        return [e.receive_weights.remote(specs, version, bucket_mb) for e in self.engines]

    def check_colocated(self, learner: Any) -> str:
        """The GPU UUID the learner (rank 0) and the one engine share.

        Raises:
            ValueError: more than one engine or worker.
            cudal1.engines.cuda_ipc.NotColocatedError: they are on different GPUs (what is needed is said).
        """
        from cudal1.engines.cuda_ipc import NotColocatedError

        if len(self.engines) != 1 or self.workers_per_engine != 1:
            raise ValueError(
                f"ipc weight sync serves one engine of one worker, not {len(self.engines)} x {self.workers_per_engine}"
            )
        mine, theirs = wait_all([self.engines[0].gpu_uuid.remote(), learner.gpu_uuid.remote()])
        if mine != theirs:
            raise NotColocatedError(
                f"rollout.weight_sync=ipc: the engine is on {mine} and the learner's rank 0 on "
                f"{theirs}; both must be scheduled into one placement-group bundle with one GPU "
                "(fractional num_gpus), or use rollout.weight_sync=broadcast"
            )
        return mine

    def sync_ipc(
        self, learner: Any, specs: list[Any], version: int, bucket_mb: float = 256, window_mb: float | None = None
    ) -> dict[str, float]:
        """One learner → engine sync by CUDA IPC: for each window of buckets
        (`cudal1.engines.cuda_ipc.windows`), the learner exports it (`export_ipc`: handles, not
        bytes, pass through Ray), the engine maps, loads and answers, and only then the learner
        frees it (`release_ipc`, also when the engine failed). The engine takes `version` with the
        last window. Returns {"seconds", "windows", "bytes" (weights made visible), "engine_s" (the
        engine's map + load time, summed), "held_bytes" (most device bytes the learner held at once)}."""
        import time

        from cudal1.engines.cuda_ipc import DEFAULT_WINDOW_MB, windows
        from cudal1.engines.weight_sync import plan_buckets

        plan = plan_buckets(specs, bucket_mb)
        parts = windows(specs, plan, window_mb or DEFAULT_WINDOW_MB)
        start, engine_s, held = time.perf_counter(), 0.0, 0.0
        for k, window in enumerate(parts):
            payload = learner.export_ipc.remote(window, bucket_mb)
            try:
                engine_s += wait_all(
                    [self.engines[0].receive_weights_ipc.remote(payload, specs, version, k == len(parts) - 1)]
                )[0]
            finally:
                held = max(held, learner.release_ipc())
        return {
            "seconds": time.perf_counter() - start,
            "windows": float(len(parts)),
            "bytes": float(sum(s.nbytes for s in specs)),
            "engine_s": engine_s,
            "held_bytes": held,
        }

    def kill(self) -> None:
        """Stop the engines and release their placement groups."""
        _release(self.engines, self._placement_groups)


def _release(engines: Sequence[ShellHandle], groups: Sequence[Any]) -> None:
    for e in engines:
        try:
            e.kill()
        except Exception as exc:  # already dead
            log.debug("stopping %s: %s", e, exc)
    for pg in groups:
        try:
            remove_placement_group(pg)
        except Exception as exc:
            log.debug("removing %s: %s", pg, exc)
