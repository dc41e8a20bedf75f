"""Learner → rollout-engine weight broadcast over a dedicated process group (NCCL on GPUs, gloo on CPUs).

The learner's rank 0 and every engine worker join a small process group of their own, built
directly from a `TCPStore` (not `init_process_group`), so it neither needs nor disturbs the
default group DeepSpeed uses. The learner broadcasts; engines receive into freshly allocated
tensors on their device and load them. Both sides agree on what travels through a *manifest*:
the ordered (name, shape, dtype) list of the learner's weights, sent once through the driver.

Tensors are packed into flat buckets of one dtype (at most `bucket_mb` each) so that a model with
hundreds of small tensors costs a few collective calls, not hundreds. `plan_buckets` is the pure
function both sides run on the manifest, so they cut the same buckets.

Where the learner and one engine share a GPU, `cudal1.engines.cuda_ipc` passes CUDA IPC handles
of the same buckets instead (rollout.weight_sync=ipc): NCCL cannot form a group on one device.

This module only needs torch: the rollout engines (`vllm_engine`, `hf_engine`) and the learner
call it from inside their own processes.
"""

from __future__ import annotations

import dataclasses
import math
import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist

DEFAULT_BUCKET_MB = 256


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now (for a process group's store; another process may take
    it before it is bound again, which the group's start-up then reports)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One entry of the manifest: HF parameter name, shape, dtype name ("float32", "bfloat16")."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * torch.empty(0, dtype=getattr(torch, self.dtype)).element_size()


def manifest(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> list[TensorSpec]:
    """The manifest of `named_tensors`, in their order."""
    return [TensorSpec(n, tuple(t.shape), str(t.dtype).removeprefix("torch.")) for n, t in named_tensors]


def plan_buckets(specs: Sequence[TensorSpec], bucket_mb: float = DEFAULT_BUCKET_MB) -> list[list[int]]:
    """Group manifest indices into buckets of one dtype and at most `bucket_mb` MiB (a tensor
    larger than that is a bucket of its own), keeping the manifest order within a dtype.
    Deterministic: sender and receivers compute the same plan from the same manifest."""
    limit = bucket_mb * 2**20
    buckets: list[list[int]] = []
    open_bucket: dict[str, tuple[list[int], int]] = {}
    for i, spec in enumerate(specs):
        members, size = open_bucket.get(spec.dtype, ([], 0))
        if members and size + spec.nbytes > limit:
            buckets.append(members)
            members, size = [], 0
        members.append(i)
        open_bucket[spec.dtype] = (members, size + spec.nbytes)
    buckets.extend(members for members, _ in open_bucket.values() if members)
    return buckets


class WeightChannel:
    """One member of a weight-broadcast group: rank 0 sends, ranks 1..world_size-1 receive.

    Args:
        host, port: where rank 0 serves the group's TCPStore (rank 0 creates it; others connect).
        rank, world_size: this member's rank and the group size (learner rank 0 + engine workers).
        backend: "nccl" (tensors on the CUDA device) or "gloo" (CPU tensors).
        device: the device tensors travel on ("cuda:0", "cpu").
        timeout_s: how long to wait for the other members to join and for each collective.

    Raises:
        ValueError: an unknown backend, or nccl with a CPU device.
        RuntimeError / DistStoreError: the members did not all join within `timeout_s`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        rank: int,
        world_size: int,
        backend: str = "nccl",
        device: str = "cuda",
        timeout_s: float = 600.0,
    ) -> None:
        if backend not in ("nccl", "gloo"):
            raise ValueError(f"weight channel backend must be nccl or gloo, not {backend!r}")
        self.device = torch.device(device)
        if backend == "nccl" and self.device.type != "cuda":
            raise ValueError("a nccl weight channel needs a CUDA device")
        self.rank, self.world_size, self.backend = rank, world_size, backend
        timeout = timedelta(seconds=timeout_s)
        store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout, wait_for_workers=True)
        if backend == "nccl":
            torch.cuda.set_device(self.device)
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self.group = dist.ProcessGroupNCCL(store, rank, world_size, options)
        else:
            self.group = dist.ProcessGroupGloo(store, rank, world_size, timeout)
        self._store = store  # rank 0 serves it: keep it alive as long as the group

    def _broadcast(self, flat: torch.Tensor) -> None:
        opts = dist.BroadcastOptions()
        opts.rootRank, opts.rootTensor = 0, 0
        self.group.broadcast([flat], opts).wait()

    def send(
        self,
        named_tensors: Iterable[tuple[str, torch.Tensor]],
        specs: Sequence[TensorSpec],
        bucket_mb: float = DEFAULT_BUCKET_MB,
    ) -> dict[str, float]:
        """Broadcast the tensors (rank 0 only), in the manifest's bucket plan.

        `named_tensors` must hold every manifest name (any device, any order).
        Returns {"bytes", "seconds", "bytes_per_s", "buckets"}.
        Raises KeyError for a manifest name not given, RuntimeError on a non-zero rank.
        """
        if self.rank != 0:
            raise RuntimeError("only rank 0 sends weights")
        start = time.perf_counter()
        tensors = dict(named_tensors)
        plan = plan_buckets(specs, bucket_mb)
        total = 0
        for bucket in plan:
            total += self.send_bucket([tensors[specs[i].name] for i in bucket], specs[bucket[0]].dtype)
        self.synchronize()
        seconds = time.perf_counter() - start
        return {
            "bytes": float(total),
            "seconds": seconds,
            "bytes_per_s": total / seconds if seconds else 0.0,
            "buckets": float(len(plan)),
        }

    def send_bucket(self, tensors: Sequence[torch.Tensor], dtype: str) -> int:
        """Broadcast one bucket (rank 0 only): `tensors` (any device) flattened, cast to `dtype`
        and packed in the order given, which must be the bucket's manifest order. Returns the
        bytes sent. Callers that stream buckets (the learner gathering ZeRO-3 shards bucket by
        bucket) use this; `send` does the same for a whole manifest."""
        if self.rank != 0:
            raise RuntimeError("only rank 0 sends weights")
        parts = [t.detach().reshape(-1).to(self.device, getattr(torch, dtype)) for t in tensors]
        flat = torch.cat(parts) if len(parts) > 1 else parts[0].contiguous()
        self._broadcast(flat)
        return flat.numel() * flat.element_size()

    def synchronize(self) -> None:
        """Wait for the device's queued work (the broadcasts on CUDA); a no-op on the CPU."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def receive(
        self, specs: Sequence[TensorSpec], bucket_mb: float = DEFAULT_BUCKET_MB
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Receive the broadcast (ranks > 0): yields (name, tensor on `device`) per manifest entry,
        bucket by bucket (a bucket's views share one buffer; the caller copies them into place)."""
        if self.rank == 0:
            raise RuntimeError("rank 0 sends; it does not receive")
        for bucket in plan_buckets(specs, bucket_mb):
            dtype = getattr(torch, specs[bucket[0]].dtype)
            flat = torch.empty(sum(specs[i].numel for i in bucket), dtype=dtype, device=self.device)
            self._broadcast(flat)
            offset = 0
            for i in bucket:
                spec = specs[i]
                yield spec.name, flat[offset : offset + spec.numel].view(spec.shape)
                offset += spec.numel

    def close(self) -> None:
        """Release the group (NCCL communicators hold GPU memory) without a collective: `abort`
        where the backend has it, so a member that died cannot hold the others here (a new group
        is then formed of the live members), else `shutdown`. Also stops serving the group's
        store (rank 0)."""
        for name in ("abort", "shutdown"):
            end = getattr(self.group, name, None)
            if end is not None:
                try:
                    end()
                    break
                except Exception:  # already torn down with the process, or not supported
                    continue
        self.group = None
        self._store = None
