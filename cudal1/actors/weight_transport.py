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
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cudal1.actors.generator_group import GeneratorGroup
    from cudal1.engines.weight_sync import TensorSpec

log = logging.getLogger(__name__)

KINDS = ("object_store", "broadcast", "ipc")
"""The values of `rollout.weight_sync`, one per transport."""
DEFAULT_BUCKET_MB = 256.0


class WeightTransport(Protocol):
    """Puts the learner's current weights into every engine, tagged `version`."""

    kind: str

    def sync(self, version: int) -> None: ...


class ObjectStoreTransport:
    """The learner's weights through Ray's object store: one `named_weights` of rank 0, fetched by
    every engine."""

    kind = "object_store"

    def __init__(self, learner: Any, generator: GeneratorGroup) -> None:
        self.learner, self.generator = learner, generator

    def sync(self, version: int) -> None:
        self.generator.update_weights(self.learner.named_weights.remote(), version)


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
        self.last: dict[str, float] = {}
        """The learner's figures of the last broadcast ({"bytes", "seconds", "bytes_per_s", "buckets"})."""

    def open(self) -> int:
        """Form the group (every member waits for the others) and fetch the manifest. Returns the
        group's size."""
        host, port = self.endpoint or self.learner.endpoint()
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
        from cudal1.actors.shells import wait_all

        if self.specs is None:
            self.open()
        self.last, *_ = wait_all(
            [
                self.learner.broadcast_weights.remote(self.bucket_mb),
                *self.generator.receive_weights(self.specs, version, self.bucket_mb),
            ]
        )


class IpcTransport:
    """CUDA IPC handles of the learner's buckets for the one engine on its GPU."""

    kind = "ipc"

    def __init__(self, learner: Any, generator: GeneratorGroup) -> None:
        self.learner, self.generator = learner, generator
        self.specs: list[TensorSpec] | None = None
        """The learner's weight manifest, once the colocation is checked."""

    def open(self) -> str:
        """Check that the learner and the engine share a GPU (raises
        `cudal1.engines.cuda_ipc.NotColocatedError` saying what is needed) and fetch the manifest.
        Returns the GPU's UUID."""
        uuid = self.generator.check_colocated(self.learner)
        self.specs = self.learner.weight_manifest()
        log.info("weight sync by CUDA IPC: learner and engine share %s (%d tensors)", uuid, len(self.specs))
        return uuid

    def sync(self, version: int) -> None:
        if self.specs is None:
            self.open()
        self.generator.sync_ipc(self.learner, self.specs, version)


def weight_transport(kind: str, learner: Any, generator: GeneratorGroup, on_gpus: bool = False) -> WeightTransport:
    """The transport `kind` names (`KINDS`); `on_gpus`: learner and engines on GPUs (a broadcast
    then goes over NCCL, else gloo). Nothing is opened before the first `sync`. Raises ValueError
    for an unknown kind."""
    if kind == "object_store":
        return ObjectStoreTransport(learner, generator)
    if kind == "broadcast":
        return BroadcastTransport(learner, generator, "nccl" if on_gpus else "gloo")
    if kind == "ipc":
        return IpcTransport(learner, generator)
    raise ValueError(f"unknown weight transport {kind!r}: expected one of {', '.join(KINDS)}")
