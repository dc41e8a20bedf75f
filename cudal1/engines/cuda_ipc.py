"""Learner → rollout-engine weight sync by CUDA IPC, for a learner and an engine on one GPU.

When the learner's rank 0 and a rollout engine share a GPU (`rollout.weight_sync=ipc`), the
weights need not travel at all: the learner packs them into the same dtype buckets as the
broadcast (`weight_sync.plan_buckets` on the manifest), exports each bucket's device memory with
a CUDA IPC handle (`torch.multiprocessing.reductions.reduce_tensor`, i.e. `cudaIpcGetMemHandle`
plus torch's cross-process reference counter and a CUDA event), and sends only those handles, a
few hundred bytes per bucket, to the engine through the driver. The engine maps the buckets
(`cudaIpcOpenMemHandle`), copies every tensor into its own parameters, waits for the copies,
drops its mappings and only then answers; the learner keeps its buckets alive until that answer
and frees them afterwards (`IpcExporter.release`).

A *payload* is a plain dict (str, int, bool, bytes, lists): it crosses Ray and vLLM's msgpack RPC
as it is, without pickle:

    {"format": "cudal1-ipc-1", "device_uuid": "GPU-…",
     "buckets": [{"dtype": "bfloat16", "members": [manifest indices], "numel": N, "handle": {...}}]}

`members` are manifest indices; within a bucket, tensor i starts where the previous one ends
(`bucket_layout`). The engine checks the payload against its copy of the manifest
(`check_payload`) and that the exporting GPU is one of its own (`local_device_index`), so a
learner and an engine on different GPUs get a clear error instead of a failed or wrong mapping.

Limits: same host and same GPU only (CUDA IPC between two devices would need peer access and is
refused here); one exported window of buckets costs that much extra device memory on the learner
until the engine has loaded it (`windows` bounds it); CUDA only (there is no CPU path: use
`broadcast` or `object_store` there).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from cudal1.engines.weight_sync import TensorSpec

FORMAT = "cudal1-ipc-1"
DEFAULT_WINDOW_MB = 2048
"""Most MiB of exported buckets the learner holds at once (one window per engine round trip)."""

_HANDLE_FIELDS = (
    "tensor_offset",
    "storage_handle",
    "storage_size_bytes",
    "storage_offset_bytes",
    "ref_counter_handle",
    "ref_counter_offset",
    "event_handle",
    "event_sync_required",
)


class NotColocatedError(RuntimeError):
    """The payload's GPU is not one this process can see (learner and engine on different GPUs)."""


# ----- pure layout (both sides, no GPU needed)


def bucket_layout(specs: Sequence[TensorSpec], members: Sequence[int]) -> list[tuple[int, int, int]]:
    """(manifest index, element offset, numel) of each member of one flat bucket, in order.

    bucket_layout([a(2x3), b(4)], [0, 1]) == [(0, 0, 6), (1, 6, 4)]."""
    out, offset = [], 0
    for i in members:
        n = specs[i].numel
        out.append((i, offset, n))
        offset += n
    return out


def windows(
    specs: Sequence[TensorSpec], plan: Sequence[Sequence[int]], window_mb: float = DEFAULT_WINDOW_MB
) -> list[list[int]]:
    """Split the bucket plan (`plan_buckets`) into consecutive windows of bucket indices holding
    at most `window_mb` MiB each (a bucket larger than that is a window of its own): what the
    learner exports in one round trip. Raises ValueError for window_mb <= 0."""
    if not window_mb > 0:
        raise ValueError(f"window_mb must be > 0, got {window_mb}")
    limit, out, size = window_mb * 2**20, [], 0
    for b, bucket in enumerate(plan):
        nbytes = sum(specs[i].nbytes for i in bucket)
        if out and out[-1] and size + nbytes <= limit:
            out[-1].append(b)
            size += nbytes
        else:
            out.append([b])
            size = nbytes
    return out


def check_payload(payload: dict[str, Any], specs: Sequence[TensorSpec]) -> None:
    """Check a payload against the receiver's manifest: its format, and for every bucket one dtype
    shared by all members, known member indices, and `numel` equal to the members' total.

    Raises:
        ValueError: naming the first disagreement (a learner and engine with different manifests,
            or a payload from another version of this module).
    """
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} weight payload: {str(payload)[:120]}")
    for k, bucket in enumerate(payload["buckets"]):
        members = list(bucket["members"])
        if not members or any(not 0 <= i < len(specs) for i in members):
            raise ValueError(f"ipc bucket {k}: member indices {members[:5]} outside the manifest of {len(specs)}")
        dtypes = {specs[i].dtype for i in members}
        if dtypes != {bucket["dtype"]}:
            raise ValueError(f"ipc bucket {k}: dtype {bucket['dtype']} but its members are {sorted(dtypes)}")
        total = sum(specs[i].numel for i in members)
        if total != bucket["numel"]:
            raise ValueError(f"ipc bucket {k}: {bucket['numel']} elements exported, the manifest says {total}")


# ----- devices


def device_uuid(device: torch.device | str) -> str:
    """The CUDA device's UUID ("GPU-…"), the same in every process whatever CUDA_VISIBLE_DEVICES says.
    Raises ValueError for a non-CUDA device."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"CUDA IPC needs a CUDA device, not {device}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    return "GPU-" + str(torch.cuda.get_device_properties(index).uuid).removeprefix("GPU-")


def local_device_index(uuid: str) -> int:
    """This process's index of the GPU with `uuid`.

    Raises:
        NotColocatedError: no visible GPU has it (the exporter is on another GPU or host).
    """
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for i in range(count):
        if device_uuid(torch.device("cuda", i)) == uuid:
            return i
    raise NotColocatedError(
        f"rollout.weight_sync=ipc: the learner's GPU {uuid} is not visible here (this process sees {count} GPU(s)); "
        "ipc needs the learner's rank 0 and the engine on the same GPU of one node (one placement-group bundle "
        "with fractional num_gpus); use rollout.weight_sync=broadcast otherwise"
    )


# ----- learner side


class IpcExporter:
    """Packs buckets on the learner's GPU and exports them; holds them until `release`.

    Args:
        device: the learner's CUDA device.

    Raises:
        ValueError: a non-CUDA device.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.uuid = device_uuid(self.device)  # raises on CPU
        self._held: list[torch.Tensor] = []

    @property
    def held_bytes(self) -> int:
        """Device bytes of the buckets exported and not yet released."""
        return sum(t.numel() * t.element_size() for t in self._held)

    def export_bucket(self, tensors: Sequence[torch.Tensor], members: Sequence[int], dtype: str) -> dict[str, Any]:
        """Pack `tensors` (the bucket's members, in order; any device) flat as `dtype` on the
        device, keep the buffer, and return the bucket's payload entry."""
        parts = [t.detach().reshape(-1).to(self.device, getattr(torch, dtype)) for t in tensors]
        flat = torch.cat(parts) if len(parts) > 1 else parts[0].clone()  # always our own buffer
        self._held.append(flat)
        # reduce_tensor's arguments for rebuild_cuda_tensor: (cls, size, stride, tensor_offset,
        # storage_cls, dtype, device, storage_handle, storage_size_bytes, storage_offset_bytes,
        # requires_grad, ref_counter_handle, ref_counter_offset, event_handle, event_sync_required);
        # only the plain values travel, the receiver supplies the rest (its own device index).
        _, args = torch.multiprocessing.reductions.reduce_tensor(flat)
        handle = dict(zip(_HANDLE_FIELDS, (args[3], *args[7:10], *args[11:15])))
        return {"dtype": dtype, "members": [int(i) for i in members], "numel": int(flat.numel()), "handle": handle}

    def payload(self, buckets: list[dict[str, Any]]) -> dict[str, Any]:
        """The payload of `buckets` (entries of `export_bucket`), after the device has finished
        packing them (the receiver also waits on each bucket's CUDA event)."""
        torch.cuda.synchronize(self.device)
        return {"format": FORMAT, "device_uuid": self.uuid, "buckets": buckets}

    def export(
        self, named: dict[str, torch.Tensor], specs: Sequence[TensorSpec], plan: Sequence[Sequence[int]]
    ) -> dict[str, Any]:
        """Export the buckets `plan` of `named` (every member's name must be in it) as one payload."""
        return self.payload([self.export_bucket([named[specs[i].name] for i in b], b, specs[b[0]].dtype) for b in plan])

    def release(self) -> None:
        """Free the exported buffers (call once the engine has answered: it no longer maps them)."""
        self._held.clear()
        torch.cuda.ipc_collect()  # frees blocks a consumer still counted when they were dropped


# ----- engine side


def open_payload(payload: dict[str, Any], specs: Sequence[TensorSpec]) -> Iterator[tuple[str, torch.Tensor]]:
    """Map the payload's buckets and yield (name, tensor view into the learner's memory) per
    member, bucket by bucket. The caller must copy each tensor before the next bucket is mapped
    (the previous mapping is dropped then) and must synchronize its device before telling the
    learner it is done; views must not outlive the generator.

    Raises:
        ValueError: the payload disagrees with `specs` (`check_payload`).
        NotColocatedError: the payload's GPU is not visible in this process.
    """
    check_payload(payload, specs)
    index = local_device_index(payload["device_uuid"])
    rebuild = torch.multiprocessing.reductions.rebuild_cuda_tensor
    for bucket in payload["buckets"]:
        h = bucket["handle"]
        flat = rebuild(
            torch.Tensor,
            torch.Size([bucket["numel"]]),
            (1,),
            h["tensor_offset"],
            torch.storage.TypedStorage,
            getattr(torch, bucket["dtype"]),
            index,
            h["storage_handle"],
            h["storage_size_bytes"],
            h["storage_offset_bytes"],
            False,
            h["ref_counter_handle"],
            h["ref_counter_offset"],
            h["event_handle"],
            h["event_sync_required"],
        )
        for i, offset, n in bucket_layout(specs, bucket["members"]):
            yield specs[i].name, flat[offset : offset + n].view(specs[i].shape)
        torch.cuda.current_stream(index).synchronize()  # the copies out of this bucket are done
        del flat


def payload_bytes(payload: dict[str, Any], specs: Sequence[TensorSpec]) -> int:
    """Bytes of weights a payload makes visible (what a copy would have moved)."""
    return sum(specs[i].nbytes for b in payload["buckets"] for i in b["members"])
