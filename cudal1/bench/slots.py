"""The judge's input slots: the inputs of each call, in memory the judge owns and a host maps.

The judge writes a call's inputs into a slot before it tells the host to go; the host's forward
runs on tensors that are views of it; after the call the judge compares the slot with its own copy
of the inputs (an input changed in place is a hack). The outputs go the other way: the judge reads
them from the host's own memory (`cudal1.bench.readers`).

- CPU: a fresh `memfd` per input set, sealed against shrinking and growing (so the host cannot
  truncate it under the judge), written by the judge before the go and sent over the channel by
  SCM_RIGHTS when its call is due (set 0 with the call, each later set with its `reveal`), then
  mapped by the host. Fresh, and sent only then, because a slot the host already maps would let
  a thread of the candidate watch the judge write the inputs and start on them off the clock, or
  reach a later call's inputs during an earlier call.
- CUDA: a dedicated driver allocation (`cuMemAlloc`, not PyTorch's caching allocator, so nothing
  else of the judge's ever lives in the same allocation), exported with `cuIpcGetMemHandle` and
  opened by the host with `cuIpcOpenMemHandle` (legacy CUDA IPC; seen working between two
  sandboxed processes with different uids on an H200, 0.3 ms to open). Both processes view the
  memory as PyTorch tensors through `__cuda_array_interface__`.

Layout: tensors sit at 256-byte aligned offsets, in order; `TensorSpec` records dtype, shape,
offset and size, and travels as JSON. `_Driver` holds the few CUDA driver calls the slots and the
readers need.

Each tensor `Slot.view` gives has a storage of its own that spans exactly its own bytes (CPU:
`torch.frombuffer` over that byte range of the mapping; CUDA: `__cuda_array_interface__` over that
range of the allocation), never the whole slot. A CUDA slot holds a round trip's K input sets one
after another, so a call's arguments (`untyped_storage()`, `storage_offset()`, `set_`,
`as_strided`, all bounded by the storage) give access to that call's inputs only, not the next
calls' (which a candidate could otherwise compute in its first call, stacked, and hand out one
per call). Reads through raw pointers (ctypes, PyTorch's private constructors from an address)
still reach the rest of a CUDA slot: the README's limits. A CPU slot holds one set, and the later
sets are in no mapping of the host's until revealed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import mmap
import os
from typing import Any

import torch

ALIGN = 256
_CUDA_ROUND = 2 << 20


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Where one tensor lives in a slot: dtype name ("float32"), shape, byte offset and size."""

    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int

    @property
    def torch_dtype(self) -> torch.dtype:
        return dtype_from_name(self.dtype)

    def moved(self, by: int) -> "TensorSpec":
        """The same tensor `by` bytes further into its slot (in a later input set)."""
        return TensorSpec(self.dtype, self.shape, self.offset + by, self.nbytes)

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "offset": self.offset, "nbytes": self.nbytes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TensorSpec":
        return cls(str(d["dtype"]), tuple(int(s) for s in d["shape"]), int(d["offset"]), int(d["nbytes"]))


def dtype_name(dtype: torch.dtype) -> str:
    """ "float32" for torch.float32."""
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    """torch.float32 for "float32". Raises ValueError for a name that is not a torch dtype."""
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return value


def plan(tensors: list[torch.Tensor]) -> tuple[list[TensorSpec], int]:
    """Layout for `tensors` (shape and dtype only): their specs and the slot size in bytes."""
    specs, offset = [], 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        specs.append(TensorSpec(dtype_name(t.dtype), tuple(t.shape), offset, nbytes))
        offset += -(-nbytes // ALIGN) * ALIGN
    return specs, max(offset, ALIGN)


class Slot:
    """A shared buffer of `nbytes` on `device` ("cpu" or "cuda[:i]"), made by the judge.

    `view(spec)` gives a tensor over part of it (with a storage of that part only). `export()` gives what the host needs to map it
    (JSON metadata, and on the CPU one file descriptor to send). Raises OSError (CPU) or
    RuntimeError (CUDA driver error) when the buffer cannot be made.
    """

    def __init__(
        self, nbytes: int, device: str, *, _attach: dict[str, Any] | None = None, _fd: int | None = None
    ) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self._fd: int | None = None
        self._mm: mmap.mmap | None = None
        self._ptr: int | None = None
        self._ipc = b""
        if _attach is None:
            self.nbytes = max(int(nbytes), ALIGN)
            self._create()
        else:
            self.nbytes = int(_attach["nbytes"])
            self._open(_attach, _fd)

    # -- judge side ----------------------------------------------------------------------------

    def _create(self) -> None:
        if self.cuda:
            size = -(-self.nbytes // _CUDA_ROUND) * _CUDA_ROUND
            self._ptr = driver().alloc(size)
            self._ipc = driver().ipc_handle(self._ptr)
            return
        fd = os.memfd_create("cudal1-slot", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, self.nbytes)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self._fd = fd
        self._map()

    def export(self) -> tuple[dict[str, Any], list[int]]:
        """(metadata for `Slot.attach`, file descriptors to send along: one on the CPU, none on CUDA)."""
        if self.cuda:
            return {"kind": "cuda_ipc", "nbytes": self.nbytes, "handle": self._ipc.hex()}, []
        assert self._fd is not None
        return {"kind": "memfd", "nbytes": self.nbytes}, [self._fd]

    def close_fd(self) -> None:
        """Close the judge's descriptor once it was sent (the mapping stays)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- host side -----------------------------------------------------------------------------

    @classmethod
    def attach(cls, meta: dict[str, Any], device: str, fd: int | None = None) -> "Slot":
        """Map a slot the judge exported (the host calls this). Raises ValueError for metadata of
        the wrong kind, RuntimeError when the CUDA driver refuses the handle."""
        return cls(0, device, _attach=meta, _fd=fd)

    def _open(self, meta: dict[str, Any], fd: int | None) -> None:
        if meta.get("kind") == "cuda_ipc" and self.cuda:
            self._ptr = driver().ipc_open(bytes.fromhex(meta["handle"]))
        elif meta.get("kind") == "memfd" and not self.cuda and fd is not None:
            self._fd = fd
            # Page tables filled now, at the map, not by the forward's first touches: the same
            # cost in every host, outside the forward.
            self._map(getattr(mmap, "MAP_POPULATE", 0))
            os.close(fd)  # the mapping keeps the memory; one descriptor less per call
            self._fd = None
        else:
            raise ValueError(f"cannot attach a {meta.get('kind')!r} slot on {self.device}")

    def _map(self, flags: int = 0) -> None:
        assert self._fd is not None
        self._mm = mmap.mmap(self._fd, self.nbytes, mmap.MAP_SHARED | flags, mmap.PROT_READ | mmap.PROT_WRITE)

    # -- both ------------------------------------------------------------------------------------

    def view(self, spec: TensorSpec) -> torch.Tensor:
        """The tensor `spec` describes, over this slot's memory (no copy), with a storage of its
        own that spans exactly its `spec.nbytes` bytes: nothing reached through the tensor's
        storage lies outside them (the module's docstring says why). An empty tensor gets empty
        memory of its own. Raises ValueError for a spec that does not lie inside the slot."""
        if spec.offset < 0 or spec.offset + spec.nbytes > self.nbytes:
            raise ValueError(f"{spec} does not lie inside a slot of {self.nbytes} bytes")
        if spec.nbytes == 0:  # nothing to share; frombuffer and a null interface pointer refuse it
            return torch.empty(spec.shape, dtype=spec.torch_dtype, device=self.device)
        if self.cuda:
            assert self._ptr is not None
            raw = cuda_bytes(self._ptr + spec.offset, spec.nbytes, self.device, owner=self)
        else:
            assert self._mm is not None
            # The storage starts at the offset and holds `count` bytes (and keeps the mapping alive).
            raw = torch.frombuffer(self._mm, dtype=torch.uint8, count=spec.nbytes, offset=spec.offset)
        return raw.view(spec.torch_dtype).view(spec.shape)


def cuda_bytes(ptr: int, nbytes: int, device: str, owner: Any = None) -> torch.Tensor:
    """A uint8 tensor over `nbytes` of device memory at `ptr` (no copy, not owned), whose storage
    spans exactly those bytes: PyTorch wraps the interface's pointer and shape (`at::from_blob`),
    whatever allocation they lie in. The tensor holds the interface object until its storage is
    freed, and the object holds `owner` (the slot the memory belongs to)."""

    class _Array:
        __cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}

        def __init__(self) -> None:
            self.owner = owner

    return torch.as_tensor(_Array(), device=device)


# -- the CUDA driver API, through ctypes -----------------------------------------------------------


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _Driver:
    """The few CUDA driver calls the slots need (libcuda.so.1 ships with every NVIDIA driver).

    Every call needs a current context: the caller has run CUDA work through PyTorch on the device
    first. Raises RuntimeError with the CUresult on failure.
    """

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self._open = getattr(self.lib, "cuIpcOpenMemHandle_v2", None) or self.lib.cuIpcOpenMemHandle

    @staticmethod
    def _check(result: int, what: str) -> None:
        if result != 0:
            raise RuntimeError(f"{what} failed (CUresult {result})")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc")
        return ptr.value

    def ipc_handle(self, ptr: int) -> bytes:
        handle = _IpcHandle()
        self._check(self.lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(ptr)), "cuIpcGetMemHandle")
        return ctypes.string_at(ctypes.byref(handle), 64)

    def address_range(self, ptr: int) -> tuple[int, int]:
        """(base, size) of the allocation that contains `ptr`."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        fn = getattr(self.lib, "cuMemGetAddressRange_v2", None) or self.lib.cuMemGetAddressRange
        self._check(fn(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)), "cuMemGetAddressRange")
        return base.value, size.value

    def ipc_open(self, raw: bytes) -> int:
        if len(raw) != 64:
            raise ValueError("a CUDA IPC handle has 64 bytes")
        handle = _IpcHandle.from_buffer_copy(raw)
        ptr = ctypes.c_uint64()
        self._check(self._open(ctypes.byref(ptr), handle, ctypes.c_uint(1)), "cuIpcOpenMemHandle")
        return ptr.value


_driver: _Driver | None = None


def driver() -> _Driver:
    """The process's `_Driver` (loaded on first use)."""
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver
