"""Learner → generator weight sync, one object per transport behind one `sync(version)`.

`weight_transport(kind, learner, generator)` picks the transport once from
`rollout.weight_sync`; the driver then calls `sync(version)` after each update. No transport
writes files.

- `ObjectStoreTransport` ("object_store"): the learner's full weights through Ray's object store,
  fetched once by each engine (`GeneratorGroup.update_weights`). Works anywhere; the slowest for a
  large policy.
- `BroadcastTransport` ("broadcast"): one process group of the learner's rank 0 and every engine
  worker (NCCL between GPUs, gloo otherwise; `cudal1.engines.weight_sync`), opened at the first
  sync, then one bucketed broadcast per sync.
- `IpcTransport` ("ipc"): the engine shares the learner's GPU and maps CUDA IPC handles of the
  learner's buckets (`cudal1.engines.cuda_ipc`); the colocation is checked at the first sync.

`learner` is a `cudal1.actors.learner_group.LearnerGroup` (or one learner shell), `generator` a
`cudal1.actors.generator_group.GeneratorGroup`.

A lost engine: every `sync` first replaces the engines that died since the last call
(`GeneratorGroup.revive`), and an engine lost during the sync itself is replaced and the sync
made once more. A replaced engine is a new member: the broadcast transport then forms a new group
of the learner and the current engines (on a new port; each member drops its old group without a
collective, so nothing waits on the dead one), the IPC transport checks the new engine's GPU
again; the object store has nothing to form. Every wait is limited (`timeout_s`, the generator
group's for the object store) and names the role and actor still silent
(`cudal1.actors.health.ActorStalled`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from cudal1.actors.generator_group import GeneratorGroup
    from cudal1.engines.weight_sync import TensorSpec

log = logging.getLogger(__name__)

T = TypeVar("T")

KINDS = ("object_store", "broadcast", "ipc")
"""The values of `rollout.weight_sync`, one per transport."""
DEFAULT_BUCKET_MB = 256.0


class WeightTransport(Protocol):
    """Puts the learner's current weights into every engine, tagged `version`."""

    kind: str

    def sync(self, version: int) -> None: ...


def _reviving(generator: GeneratorGroup, attempt: Callable[[], T]) -> T:
    """`attempt()` after replacing the generator's dead engines; once more after replacing them
    again when an engine was lost during it (`ActorLost` naming a rollout engine)."""
    from cudal1.actors.health import ActorLost

    generator.revive()
    try:
        return attempt()
    except ActorLost as e:
        if not e.label.startswith("rollout engine") or not generator.revive():
            raise
        log.warning("%s; syncing again with its replacement", e)
        return attempt()


class ObjectStoreTransport:
    """The learner's weights through Ray's object store: one `named_weights` of rank 0, fetched by
    every engine."""

    kind = "object_store"

    def __init__(self, learner: Any, generator: GeneratorGroup) -> None:
        self.learner, self.generator = learner, generator

    def sync(self, version: int) -> None:
        _reviving(self.generator, lambda: self.generator.update_weights(self.learner.named_weights.remote(), version))


class BroadcastTransport:
    """A broadcast over a process group of the learner's rank 0 and every engine worker.

    Args:
        backend: "nccl" (learner and engines on GPUs) or "gloo".
        endpoint: (host, port) where rank 0 serves the group; default `learner.endpoint()`.
        bucket_mb: the size of one broadcast bucket (both sides cut the same buckets).
        timeout_s: how long the members wait for each other when the group opens.
    """

    kind = "broadcast"

    def __init__(
        self,
        learner: Any,
        generator: GeneratorGroup,
        backend: str,
        endpoint: tuple[str, int] | None = None,
        bucket_mb: float = DEFAULT_BUCKET_MB,
        timeout_s: float = 900.0,
    ) -> None:
        self.learner, self.generator, self.backend = learner, generator, backend
        self.endpoint, self.bucket_mb, self.timeout_s = endpoint, bucket_mb, timeout_s
        self.specs: list[TensorSpec] | None = None
        """The learner's weight manifest, once the group is open."""
        self.members: int | None = None
        """The generator's `restarts` when the group was formed (another value: form it again)."""
        self.last: dict[str, float] = {}
        """The learner's figures of the last broadcast ({"bytes", "seconds", "bytes_per_s", "buckets"})."""

    def open(self) -> int:
        """Form the group (every member waits for the others) and fetch the manifest. Returns the
        group's size. Called again after an engine was replaced: a new group on a free port of
        the learner's node (the configured endpoint serves the first group only)."""
        first = self.members is None
        host, port = self.endpoint if self.endpoint is not None and first else self.learner.endpoint()
        self.members = self.generator.restarts
        world = self.generator.open_broadcast(self.learner, host, port, self.backend, timeout_s=self.timeout_s)
        self.specs = self.learner.weight_manifest()
        log.info(
            "weight broadcast group open on %s:%d (%s, %d members, %d tensors)",
            host,
            port,
            self.backend,
            world,
            len(self.specs),
        )
        return world

    def sync(self, version: int) -> None:
        _reviving(self.generator, lambda: self._broadcast(version))

    def _broadcast(self, version: int) -> None:
        from cudal1.actors.learner_group import rank_calls
        from cudal1.actors.shells import wait_named

        if self.specs is None or self.members != self.generator.restarts:
            self.open()
        calls = rank_calls(self.learner, "broadcast_weights", self.bucket_mb)
        calls += list(zip(self.generator.labels(), self.generator.receive_weights(self.specs, version, self.bucket_mb)))
        self.last = wait_named(calls, "weight sync (broadcast)", self.timeout_s)[0]
        self.generator.mark_synced()


class IpcTransport:
    """CUDA IPC handles of the learner's buckets for the one engine on its GPU."""

    kind = "ipc"

    def __init__(self, learner: Any, generator: GeneratorGroup) -> None:
        self.learner, self.generator = learner, generator
        self.specs: list[TensorSpec] | None = None
        """The learner's weight manifest, once the colocation is checked."""
        self.members: int | None = None
        """The generator's `restarts` when the colocation was checked."""

    def open(self) -> str:
        """Check that the learner and the engine share a GPU (raises
        `cudal1.engines.cuda_ipc.NotColocatedError` saying what is needed) and fetch the manifest.
        Returns the GPU's UUID."""
        uuid = self.generator.check_colocated(self.learner)
        self.members = self.generator.restarts
        self.specs = self.learner.weight_manifest()
        log.info("weight sync by CUDA IPC: learner and engine share %s (%d tensors)", uuid, len(self.specs))
        return uuid

    def sync(self, version: int) -> None:
        _reviving(self.generator, lambda: self._sync(version))

    def _sync(self, version: int) -> None:
        if self.specs is None or self.members != self.generator.restarts:
            self.open()
        self.generator.sync_ipc(self.learner, self.specs, version)


def weight_transport(kind: str, learner: Any, generator: GeneratorGroup, on_gpus: bool = False) -> WeightTransport:
    """The transport `kind` names (`KINDS`); `on_gpus`: learner and engines on GPUs (a broadcast
    then goes over NCCL, else gloo). Nothing is opened before the first `sync`. Raises ValueError
    for an unknown kind."""
    if kind == "object_store":
        return ObjectStoreTransport(learner, generator)
    if kind == "broadcast":
        timeout_s = float(getattr(generator, "timeout_s", 900.0))  # the generator group's: rollout.timeout_s
        return BroadcastTransport(learner, generator, "nccl" if on_gpus else "gloo", timeout_s=timeout_s)
    if kind == "ipc":
        return IpcTransport(learner, generator)
    raise ValueError(f"unknown weight transport {kind!r}: expected one of {', '.join(KINDS)}")
