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

An engine that dies (its process killed, its node gone) or gives no group within `timeout_s`
while `generate_stream` runs is replaced: the groups it finished are kept, a new engine is started
in its placement group (`restart`), and the prompts it had not finished are sampled again on the
engines that hold the current weights. The new engine holds the checkpoint's weights, so it
samples nothing (`unsynced`) until the run's next weight sync brings it to the learner's version;
the sync's transport forms its group again with the new member (`restarts` changed,
`cudal1.actors.weight_transport`). When no engine holds the current weights (a group of one),
`catch_up` (the run's weight sync, set by the driver) runs first. What a call recovered is in
`recovery`. Every wait on an engine has a limit (`timeout_s`); a wait that runs out names the
engine and its actor (`cudal1.actors.health.ActorStalled`), and a call on a dead engine outside a
stream raises `cudal1.actors.health.ActorLost` naming it (`revive` replaces such engines before a
sync).

Limits: prompts are split when a call starts, not balanced while it runs (an engine given long
responses finishes last). A stream abandoned before its end keeps its engines busy until they
finish that call (the next call waits for them). Each engine is restarted at most once per call:
an engine that dies again in the same call ends it with `EngineStreamError`; an engine that
raises (a bug, a bad prompt) is not restarted. `generate` (all groups at once) does not recover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError
from ray.util.placement_group import remove_placement_group

from cudal1.actors.cluster import in_bundle, reserve
from cudal1.actors.health import ActorStalled
from cudal1.actors.shells import ShellHandle, remote_class, wait_all, wait_named
from cudal1.rollout.generator import RolloutGenerator
from cudal1.training.shards import contiguous_bounds as shard_bounds  # the learner group's split, for prompts

log = logging.getLogger(__name__)

RolloutActor = remote_class(RolloutGenerator)
"""The rollout generator's shell (vLLM or transformers engine); give it GPUs with `.options(num_gpus=1)`."""

DEFAULT_TIMEOUT_S = 1800.0
"""`rollout.timeout_s`: the longest wait on one engine (a start, a sync, one group's sampling)."""


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


def missing_prompts(assigned: Sequence[int], delivered: set[int]) -> list[int]:
    """The prompts of `assigned` (prompt indices, in order) not in `delivered`: what an engine that
    died still owed. missing_prompts([4, 5, 6], {5}) == [4, 6]."""
    return [i for i in assigned if i not in delivered]


def split_over(indices: Sequence[int], engines: Sequence[int]) -> list[tuple[int, list[int]]]:
    """(engine, its prompt indices) for `indices` cut into contiguous shards of nearly equal size
    over `engines` (as `generate` splits a call); engines given nothing are left out.
    split_over([7, 8, 9], [0, 2]) == [(0, [7, 8]), (2, [9])]. Raises ValueError without engines."""
    if not engines:
        raise ValueError("no engine to sample on")
    bounds = shard_bounds(len(indices), len(engines))
    return [(e, list(indices[a:b])) for e, (a, b) in zip(engines, bounds) if b > a]


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
        start_engine: i -> a new engine i (a `ShellHandle`, started in engine i's placement
            group), for `restart`; None: engines are not restarted (a dead one ends the call).
        timeout_s: the longest wait on one engine: its start, a weight sync, one group's sampling.

    Attributes:
        unsynced: the engines restarted since the last weight sync (they hold the checkpoint's
            weights and sample nothing until a sync clears them, `mark_synced`).
        restarts: engines restarted since the group started (a transport that formed a group of
            its members before must form it again).
        closed: `kill` was called: the engines are stopped for good and `restart` refuses.
        catch_up: called when a stream has prompts to sample again and no engine holds the current
            weights: it must sync every engine (the driver sets the run's weight sync); None: such
            a call ends with `EngineStreamError`.
        recovery: what the last `generate_stream` recovered: {"engine_restarts", "resampled_groups",
            "recovery_s" (seconds from noticing each lost engine to its prompts being sampled again)}.
    """

    def __init__(
        self,
        engines: Sequence[ShellHandle],
        workers_per_engine: int = 1,
        placement_groups: Sequence[Any] = (),
        start_engine: Callable[[int], ShellHandle] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not engines:
            raise ValueError("a generator group needs at least one engine")
        self.engines = list(engines)
        self.workers_per_engine = int(workers_per_engine)
        self._placement_groups = list(placement_groups)
        self.start_engine = start_engine
        self.timeout_s = float(timeout_s)
        self.unsynced: set[int] = set()
        self.restarts = 0
        self.closed = False
        self.catch_up: Callable[[], Any] | None = None
        self.recovery: dict[str, float] = _no_recovery()

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
        timeout_s: float = DEFAULT_TIMEOUT_S,
        **generator_kwargs: Any,
    ) -> "GeneratorGroup":
        """Start `num_engines` engines, each in a placement group of one bundle
        {CPU: num_cpus, GPU: num_gpus × tensor_parallel_size} (STRICT_PACK: an engine's workers on
        one node); `generator_kwargs` go to `RolloutGenerator`, engine i with seed + i. Blocks
        until each engine's placement group is reserved (up to `ready_timeout_s` each), then
        returns while the engines load; call `ready()`. A restarted engine i is started the same
        way in the same placement group (`timeout_s`: the group's `timeout_s`).

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
            start_colocated = lambda i: engine.remote(model_path, backend, **kwargs)  # noqa: E731
            return cls([start_colocated(0)], 1, [colocated], start_colocated, timeout_s)
        if tensor_parallel_size > 1:
            kwargs["tensor_parallel_size"] = tensor_parallel_size
        groups: list[Any] = []

        def start_engine(i: int) -> ShellHandle:
            own = {**kwargs, "seed": int(kwargs.get("seed", 0)) + i}  # engines must not draw the same samples
            options = RolloutActor.options(
                num_cpus=num_cpus, num_gpus=bundle.get("GPU", 0.0), scheduling_strategy=in_bundle(groups[i])
            )
            return options.remote(model_path, backend, **own)

        engines = []
        try:
            for i in range(num_engines):
                groups.append(
                    reserve(
                        [bundle],
                        "STRICT_PACK",
                        f"cudal1-rollout-{i}",
                        ready_timeout_s,
                        f"rollout engine {i}: no node could reserve {bundle}",
                    )
                )
                engines.append(start_engine(i))
        except BaseException:
            _release(engines, groups)
            raise
        return cls(engines, tensor_parallel_size, groups, start_engine, timeout_s)

    def __len__(self) -> int:
        return len(self.engines)

    def label(self, i: int) -> str:
        """How messages name engine i: "rollout engine i (actor <id>)"."""
        return self.engines[i].label(f"rollout engine {i}")

    def labels(self) -> list[str]:
        """`label(i)` of every engine, in engine order."""
        return [self.label(i) for i in range(len(self.engines))]

    def live(self) -> list[int]:
        """The engines that hold the current weights (every engine but the `unsynced` ones)."""
        return [i for i in range(len(self.engines)) if i not in self.unsynced]

    def mark_synced(self) -> None:
        """Every engine now holds the learner's weights (called by the transport after a sync)."""
        self.unsynced.clear()

    def ready(self, timeout_s: float | None = None) -> None:
        """Wait until every engine has loaded; re-raises the first engine's error. Raises
        ActorStalled naming the engines still loading after `timeout_s` (None: `self.timeout_s`)."""
        calls = [(self.label(i), e.actor.ready.remote()) for i, e in enumerate(self.engines)]
        wait_named(calls, "start-up", self.timeout_s if timeout_s is None else timeout_s)

    def _wait(self, refs: Sequence[Any], what: str, engines: Sequence[int] | None = None) -> list[Any]:
        """The values of one call per engine (`engines`: their indices, default all), each wait
        limited to `timeout_s` and any failure naming its engine (`wait_named`)."""
        engines = range(len(self.engines)) if engines is None else engines
        return wait_named([(self.label(i), r) for i, r in zip(engines, refs)], what, self.timeout_s)

    def restart(self, i: int) -> float:
        """Replace engine i by a new one in its placement group (the old actor is killed first, if
        it still runs) and wait until it has loaded; it joins `unsynced`. Returns the seconds.

        Raises:
            RuntimeError: the group was built without `start_engine`, or is closed (a sample still
                running in a background thread after its run stopped must not start new engines).
            ActorStalled: the new engine did not load within `timeout_s`.
            ActorLost, or the engine's own error: it failed to start.
        """
        if self.start_engine is None:
            raise RuntimeError(f"{self.label(i)}: this generator group cannot restart its engines")
        if self.closed:
            raise RuntimeError(f"{self.label(i)}: the generator group is closed; its engines are not restarted")
        t0 = time.perf_counter()
        old = self.label(i)
        try:
            self.engines[i].kill()
        except Exception as exc:  # already gone
            log.debug("stopping %s: %s", old, exc)
        self.engines[i] = self.start_engine(i)
        self.unsynced.add(i)
        self.restarts += 1
        wait_named([(self.label(i), self.engines[i].actor.ready.remote())], "start-up after a restart", self.timeout_s)
        seconds = time.perf_counter() - t0
        log.warning(
            "%s replaced %s in %.1f s; it samples once a weight sync brings it to the learner's version",
            self.label(i),
            old,
            seconds,
        )
        return seconds

    def revive(self) -> list[int]:
        """Restart every engine that is dead or does not answer a ping within `timeout_s` (between
        generate calls: an idle engine answers at once). Returns their indices."""
        refs = [e.actor.ready.remote() for e in self.engines]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
        lost = []
        for i, ref in enumerate(refs):
            if ref not in done:
                log.warning("%s gave no answer to a ping within %.0f s: replacing it", self.label(i), self.timeout_s)
                lost.append(i)
                continue
            try:
                ray.get(ref)
            except RayActorError as exc:
                log.warning("%s is dead (%s): replacing it", self.label(i), str(exc).strip().splitlines()[0])
                lost.append(i)
        for i in lost:
            self.restart(i)
        return lost

    def generate(self, prompts: Sequence[Sequence[int]], n: int = 1, **sampling: Any) -> list[list[Any]]:
        """`RolloutGenerator.generate` over the engines that hold the current weights (`live`):
        prompt i's `n` samples are result[i], in prompt order, whichever engine made them.
        `sampling`: max_tokens, temperature, top_p. Raises ActorLost or ActorStalled naming an
        engine that died or gave no answer within `timeout_s`."""
        prompts = [list(p) for p in prompts]
        if not prompts:
            return []
        parts = split_over(list(range(len(prompts))), self.live())
        refs = [self.engines[e].generate.remote([prompts[i] for i in idx], n=n, **sampling) for e, idx in parts]
        out: list[list[Any]] = []
        for part in self._wait(refs, "generate", [e for e, _ in parts]):
            out.extend(part)
        return out

    def generate_stream(
        self, prompts: Sequence[Sequence[int]], n: int = 1, **sampling: Any
    ) -> Iterator[tuple[int, list[Any]]]:
        """`RolloutGenerator.generate_stream` over the engines that hold the current weights:
        yields (prompt index, its `n` generations) as each group finishes, whichever engine made
        it (the split is `generate`'s). `sampling`: max_tokens (one, or one per prompt),
        temperature, top_p.

        An engine that dies, or from which no group comes within `timeout_s` while no other engine
        delivers either, is replaced (`restart`, once per engine and call) and its unfinished
        prompts are sampled again on the engines that hold the current weights (after `catch_up`
        when none does); `recovery` counts it.

        Raises:
            EngineStreamError: an engine raised, died a second time, or could not be replaced (or
                no engine could take its prompts); raised once every other group has been yielded.
        """
        prompts = [list(p) for p in prompts]
        self.recovery = _no_recovery()
        if not prompts:
            return
        limits = sampling.pop("max_tokens", None)
        per_prompt = limits is not None and not isinstance(limits, int)
        streams: dict[Any, tuple[int, list[int], ShellHandle]] = {}  # stream -> (engine, its prompts, its actor)

        def launch(indices: list[int], engines: list[int]) -> None:
            for e, idx in split_over(indices, engines):
                own = dict(sampling)
                if limits is not None:
                    own["max_tokens"] = [limits[i] for i in idx] if per_prompt else limits
                stream = self.engines[e].generate_stream.stream([prompts[i] for i in idx], n=n, **own)
                streams[stream] = (e, idx, self.engines[e])
                waiting.append(stream)

        waiting: list[Any] = []
        if not self.live() and self.catch_up is not None:  # every engine replaced since the last sync
            self.catch_up()
        launch(list(range(len(prompts))), self.live())
        delivered: dict[Any, set[int]] = {}  # stream -> the prompt indices it handed out
        restarted: set[int] = set()
        failure: EngineStreamError | None = None
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=self.timeout_s)
            lost: list[tuple[Any, BaseException]] = []
            if not ready:  # every engine still sampling is silent: each counts as lost
                lost = [
                    (s, ActorStalled([self.label(streams[s][0])], "generate_stream", self.timeout_s)) for s in waiting
                ]
                waiting = []
            for stream in ready:
                engine, idx, _ = streams[stream]
                try:
                    ref = next(stream)
                except StopIteration:
                    continue
                try:
                    index, group = ray.get(ref, timeout=self.timeout_s)
                except (RayActorError, ray.exceptions.GetTimeoutError) as e:  # died (or its item never came)
                    lost.append((stream, e))
                    continue
                except RayError as e:  # RayTaskError: the engine raised; not restarted
                    error = EngineStreamError(engine, len(delivered.setdefault(stream, set())), len(idx), e)
                    log.error("%s", error)
                    failure = failure or error
                    continue  # the other engines' groups still come out before the error
                delivered.setdefault(stream, set()).add(idx[index])
                waiting.append(stream)
                yield idx[index], group
            for stream, cause in lost:
                engine, idx, actor = streams[stream]
                done = delivered.setdefault(stream, set())
                owed = missing_prompts(idx, done)
                error = EngineStreamError(engine, len(done), len(idx), cause)
                log.error("%s; %d of its groups to sample again", error, len(owed))
                try:
                    if engine in restarted or self.start_engine is None:
                        raise error
                    restarted.add(engine)
                    t0 = time.perf_counter()
                    if self.engines[engine] is actor:  # not replaced yet (a catch-up sync replaces the dead it finds)
                        self.restart(engine)
                    targets = self.live()
                    if not targets and self.catch_up is not None:
                        self.catch_up()
                        targets = self.live()
                    if not targets:
                        raise error
                    launch(owed, targets)
                    self.recovery["engine_restarts"] += 1
                    self.recovery["resampled_groups"] += len(owed)
                    self.recovery["recovery_s"] += time.perf_counter() - t0
                    log.warning(
                        "rollout engine %d: %d groups sampled again on engines %s (recovery %.1f s)",
                        engine,
                        len(owed),
                        sorted({e for e, _ in split_over(owed, targets)}),
                        time.perf_counter() - t0,
                    )
                except Exception as exc:
                    if exc is not error:
                        log.error("rollout engine %d could not be replaced: %s", engine, exc)
                    failure = failure or error
        if failure is not None:
            raise failure

    def score(self, prompt_ids: Sequence[int], response_ids: Sequence[int]) -> list[float]:
        """The first live engine's `RolloutGenerator.score` (all of them hold the same weights)."""
        i = self.live()[0] if self.live() else 0
        return self._wait([self.engines[i].score.remote(list(prompt_ids), list(response_ids))], "score", [i])[0]

    def model_versions(self) -> list[int]:
        """Each engine's `model_version`, in engine order."""
        return [int(v) for v in self._wait([e.actor.get.remote("model_version") for e in self.engines], "a ping")]

    def update_weights(self, named_weights: Any, version: int) -> float:
        """Load the learner's weights into every engine through the object store (`named_weights`:
        an ObjectRef of the learner's `named_weights()`, fetched once per engine); every engine
        then holds them (`mark_synced`). Returns the slowest engine's seconds."""
        refs = [e.update_weights.remote(named_weights, version) for e in self.engines]
        seconds = max(self._wait(refs, "weight sync (object store)"))
        self.mark_synced()
        return seconds

    def open_broadcast(self, learner: Any, host: str, port: int, backend: str, timeout_s: float = 900.0) -> int:
        """Form the weight-broadcast group of the learner (rank 0, serving on host:port) and every
        engine worker; all sides join together, since each waits for the others. A member's earlier
        group, if any, is dropped first (without a collective: a dead member cannot answer).
        Returns its size."""
        from cudal1.actors.learner_group import rank_calls

        firsts, world = broadcast_ranks(len(self.engines), self.workers_per_engine)
        calls = rank_calls(learner, "init_weight_group", host, port, world, backend, timeout_s)
        calls += [
            (self.label(i), e.init_weight_group.remote(host, port, r, world, backend, timeout_s))
            for i, (e, r) in enumerate(zip(self.engines, firsts))
        ]
        wait_named(calls, "forming the weight-broadcast group", timeout_s)
        return world

    def receive_weights(self, specs: list[Any], version: int, bucket_mb: float = 256) -> list[Any]:
        """Start every engine's side of one broadcast; returns their ObjectRefs in engine order
        (wait for them with the learner's `broadcast_weights`, which must use the same `bucket_mb`,
        then `mark_synced`)."""
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
        mine, theirs = wait_all([self.engines[0].gpu_uuid.remote(), learner.gpu_uuid.remote()], self.timeout_s)
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
        last window (`mark_synced`). Returns {"seconds", "windows", "bytes" (weights made visible), "engine_s" (the
        engine's map + load time, summed), "held_bytes" (most device bytes the learner held at once)}."""
        from cudal1.engines.cuda_ipc import DEFAULT_WINDOW_MB, windows
        from cudal1.engines.weight_sync import plan_buckets

        plan = plan_buckets(specs, bucket_mb)
        parts = windows(specs, plan, window_mb or DEFAULT_WINDOW_MB)
        start, engine_s, held = time.perf_counter(), 0.0, 0.0
        for k, window in enumerate(parts):
            payload = learner.export_ipc.remote(window, bucket_mb)
            try:
                engine_s += self._wait(
                    [self.engines[0].receive_weights_ipc.remote(payload, specs, version, k == len(parts) - 1)],
                    "weight sync (ipc)",
                )[0]
            finally:
                held = max(held, learner.release_ipc())
        self.mark_synced()
        return {
            "seconds": time.perf_counter() - start,
            "windows": float(len(parts)),
            "bytes": float(sum(s.nbytes for s in specs)),
            "engine_s": engine_s,
            "held_bytes": held,
        }

    def kill(self) -> None:
        """Stop the engines and release their placement groups; the group is `closed` from now on."""
        self.closed = True
        _release(self.engines, self._placement_groups)


def _no_recovery() -> dict[str, float]:
    return {"engine_restarts": 0.0, "resampled_groups": 0.0, "recovery_s": 0.0}


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
