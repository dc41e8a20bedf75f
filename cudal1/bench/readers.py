"""How the judge reads what the candidate's forward returned: from the candidate's own memory.

The candidate host does not copy its outputs anywhere. For each output tensor it reports where
the tensor lives in its process (`describe`); the judge copies those bytes out itself:

- CUDA (`IpcReader`): the host exports the allocation that holds the tensor (`cuIpcGetMemHandle`
  on the allocation's base, found with `cuMemGetAddressRange`) and the judge opens it once per
  allocation (`cuIpcOpenMemHandle`, about 0.3 ms; PyTorch's caching allocator hands the same few
  allocations out again, so opens are rare after the first calls) and copies the tensor's bytes
  on its own stream. That copy runs only once the GPU has switched back to the judge's context,
  so whatever the host left running that the outputs depend on is inside the judge's interval,
  or the bytes it reads are unfinished.
- CPU (`ParentReader`): the judge asks the evaluating parent, which runs as root (or as the
  candidate's user and its ancestor), to read the host's memory (`process_vm_readv`, about
  4 GB/s here) into a buffer the judge and the parent share and the host cannot reach; the
  parent reads in 1 MiB chunks, in an order of its own choosing, so a thread of the host still
  writing the output is read mid-way. The judge uses the buffer as its copy (two halves: one for
  the call's outputs, one for looking at them again). The parent also asks the kernel which pages
  hold each output, before and after its copy (`cudal1.bench.backing`: none may be mapped at a
  second address or belong to the judge's input slots) and after it (`cudal1.bench.pagemap`: none
  holding an element may be the zero page): values the kernel shows but nobody wrote for the call.

So the copy that puts the answer in the judge's hands is the judge's (or the parent's) work: the
candidate cannot skip it, and the fixed cost the judge allows for it covers nothing the
candidate could have avoided. The reference host's outputs are read the same way (a reader of
their own), so both round trips cost the same. The host's report is data: an address or handle that does not hold
what it claims gives a wrong or unreadable answer, never a better one.

`ReadError` means the reported location could not be read: only a tampered host reports one.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import random
from typing import Any

import numpy as np
import torch

from . import pagemap
from .pagemap import view_span
from .backing import Backing, BackingError
from .slots import TensorSpec, cuda_bytes, driver
from .wire import Channel, PeerGone, ProtocolError, Timeout

MAX_SPAN_FACTOR = 2
"""A tensor may address at most this many times its own bytes (a strided view of a larger
buffer); the host copies anything sparser into a fresh contiguous tensor before it reports it."""
MAX_ALLOCATIONS = 4096
"""Distinct CUDA allocations the judge opens from one host in one evaluation (a batched round
trip's K outputs, and the last round trip's, may each sit in an allocation of its own)."""
CHUNK = 1 << 20


class ReadError(Exception):
    """An output could not be read. `why`: "unreadable" (the candidate's report of where it lives
    does not hold), "gone" (the candidate's process ended), "harness" (the reading failed for a
    reason of the harness's)."""

    def __init__(self, message: str, why: str = "unreadable") -> None:
        super().__init__(message)
        self.why = why


def describe(t: torch.Tensor, cache: dict[int, tuple[int, int, str]] | None = None) -> dict[str, Any]:
    """Host side: where `t` lives, for the judge to read it. CPU: {"addr", "strides"}; CUDA:
    {"handle" (hex), "offset" (bytes from the allocation's base), "strides"}. `cache` maps an
    allocation base to (base, size, handle) so each allocation is exported once. Raises
    RuntimeError when a CUDA allocation cannot be exported (memory from another allocator)."""
    strides = list(t.stride())
    if t.device.type != "cuda":
        return {"addr": t.data_ptr(), "strides": strides}
    ptr = t.data_ptr()
    base, size = driver().address_range(ptr)
    cache = cache if cache is not None else {}
    if base not in cache:
        cache[base] = (base, size, driver().ipc_handle(base).hex())
    return {"handle": cache[base][2], "offset": ptr - base, "strides": strides}


def _strides(desc: dict[str, Any], spec: TensorSpec) -> tuple[int, ...]:
    strides = desc.get("strides")
    if (
        not isinstance(strides, list)
        or len(strides) != len(spec.shape)
        or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**48 for s in strides)
    ):
        raise ReadError("the output's strides are not a list of non-negative integers of its rank")
    span = view_span(spec.shape, tuple(strides), spec.torch_dtype.itemsize)
    if span > MAX_SPAN_FACTOR * max(spec.nbytes, 1):
        raise ReadError(f"the output addresses {span} bytes for {spec.nbytes} bytes of values")
    return tuple(strides)


def _typed(raw: torch.Tensor, spec: TensorSpec, strides: tuple[int, ...], copy: bool = True) -> torch.Tensor:
    """The view `spec` + `strides` over the bytes `raw`, as a contiguous copy (or as a view)."""
    if spec.nbytes == 0:
        return torch.empty(spec.shape, dtype=spec.torch_dtype, device=raw.device)
    itemsize = spec.torch_dtype.itemsize
    usable = raw[: (raw.numel() // itemsize) * itemsize]
    typed = usable.view(spec.torch_dtype)
    view = typed.as_strided(spec.shape, strides, typed.storage_offset())  # offsets count from the storage
    return view.clone() if copy else view


class IpcReader:
    """Judge side, CUDA: reads outputs from the host's allocations (opened once each)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.opened: dict[str, tuple[int, int]] = {}
        self.aliased: list[tuple[int, str]] = []
        """Always empty: `cuIpcGetMemHandle` exports only memory of `cudaMalloc`'s kind, one
        physical allocation per virtual range; memory the host cannot export (a `cuMemMap`
        region, which may map one allocation at several addresses) it first copies into a tensor
        of its own, inside the round trip (`cudal1.bench.host.Host._locate`)."""

    def _open(self, handle: str) -> tuple[int, int]:
        if handle not in self.opened:
            if len(self.opened) >= MAX_ALLOCATIONS:
                raise ReadError(f"outputs spread over more than {MAX_ALLOCATIONS} allocations")
            try:
                raw = bytes.fromhex(handle)
                ptr = driver().ipc_open(raw)
                base, size = driver().address_range(ptr)
            except (ValueError, RuntimeError) as exc:
                raise ReadError(f"an output allocation could not be opened: {exc}") from exc
            self.opened[handle] = (base, size)
        return self.opened[handle]

    def read(self, descs: list[dict[str, Any]], specs: list[TensorSpec], again: bool = False) -> list[torch.Tensor]:
        """Copies (on the judge's current stream) of the described tensors. Raises ReadError."""
        out = []
        for desc, spec in zip(descs, specs):
            strides = _strides(desc, spec)
            span = view_span(spec.shape, strides, spec.torch_dtype.itemsize)
            if span == 0:
                out.append(torch.empty(spec.shape, dtype=spec.torch_dtype, device=self.device))
                continue
            handle, offset = desc.get("handle"), desc.get("offset")
            if not isinstance(handle, str) or not isinstance(offset, int) or isinstance(offset, bool):
                raise ReadError("an output's location is malformed")
            base, size = self._open(handle)
            if offset < 0 or offset + span > size or (offset % spec.torch_dtype.itemsize):
                raise ReadError("an output lies outside its allocation, or is misaligned")
            out.append(_typed(cuda_bytes(base + offset, span, self.device), spec, strides))
        return out


class ParentReader:
    """Judge side, CPU: the parent reads the host's memory into a buffer shared with the judge."""

    def __init__(self, link: Any, capacity: int, host: str = "candidate") -> None:
        self.link, self.host = link, host
        self.capacity = -(-max(int(capacity), 1 << 16) // 4096) * 4096
        fd = os.memfd_create("cudal1-read", os.MFD_CLOEXEC)
        os.ftruncate(fd, 2 * self.capacity)
        self.mm = mmap.mmap(fd, 2 * self.capacity, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.base = torch.frombuffer(self.mm, dtype=torch.uint8, count=2 * self.capacity)
        link.share_read_buffer(fd, host)
        os.close(fd)
        self._ends = [0, 0]
        self.aliased: list[tuple[int, str]] = []
        """After a read: (index in its `descs`, why) for the tensors some bytes of which the host
        maps at another address too ("repeat"), that lie in the judge's input slots ("input")
        (`cudal1.bench.backing`), or that hold an element on a page never written ("unwritten",
        `cudal1.bench.pagemap`)."""

    def read(
        self, descs: list[dict[str, Any]], specs: list[TensorSpec], again: bool = False, append: bool = False
    ) -> list[torch.Tensor]:
        """The described tensors, read by the parent into the buffer's first half (the second with
        `again`), as views of it: the judge's copy, which only the parent writes. With `append`
        they go after what the last read put in that half (one call of a round trip at a time),
        else at its start. Sets `aliased`. Raises ReadError, ProtocolError."""
        half = 1 if again else 0
        ranges, placed, of_range, at = self._ranges(
            descs, specs, self.capacity * half, self._ends[half] if append else 0
        )
        self.aliased = []
        if ranges:
            self.aliased = [(of_range[i], why) for i, why in self.link.read_host(ranges, self.host)]
        self._ends[half] = at
        return [_typed(self.base[a : a + n], spec, st, copy=False) for (a, n, st), spec in zip(placed, specs)]

    def overwrite(self, descs: list[dict[str, Any]], specs: list[TensorSpec], byte: int) -> None:
        """Have the parent write `byte` (0-255) over every byte of the described tensors'
        elements in the host's memory (`HostMemory.overwrite`), bytes between them left alone.
        Raises ReadError (why "gone" where the host has ended, "harness" for the judge's own
        failure, else the host's), ProtocolError."""
        ranges, _, _, _ = self._ranges(descs, specs, 0, 0)
        if ranges:
            self.link.overwrite_host(ranges, byte, self.host)

    def _ranges(
        self, descs: list[dict[str, Any]], specs: list[TensorSpec], origin: int, at: int
    ) -> tuple[list[list[Any]], list[tuple[int, int, tuple[int, ...]]], list[int], int]:
        """The parent's [address, nbytes, offset in the buffer, layout?] ranges of the described
        tensors, placed from `at` bytes into the half at `origin` (64-byte aligned); (ranges,
        each tensor's (offset, span, strides), the index in `descs` of each range, the end).
        Raises ReadError."""
        ranges, placed, of_range = [], [], []
        for i, (desc, spec) in enumerate(zip(descs, specs)):
            strides = _strides(desc, spec)
            span = view_span(spec.shape, strides, spec.torch_dtype.itemsize)
            addr = desc.get("addr")
            if (
                not isinstance(addr, int)
                or isinstance(addr, bool)
                or addr < 0
                or (span and addr % spec.torch_dtype.itemsize)
            ):
                raise ReadError("an output's address is malformed or misaligned")
            at = -(-at // 64) * 64
            if at + span > self.capacity:
                raise ReadError("the outputs address more memory than their values need")
            if span:
                ranges.append([addr, span, origin + at])
                if not pagemap.dense(spec.shape, strides):  # which bytes hold elements: `pagemap`
                    ranges[-1].append(
                        {"shape": list(spec.shape), "strides": list(strides), "itemsize": spec.torch_dtype.itemsize}
                    )
                of_range.append(i)
            placed.append((origin + at, span, strides))
            at += span
        return ranges, placed, of_range, at


# -- the parent's side of the CPU reads ------------------------------------------------------------


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class HostMemory:
    """The parent's reader of the host's memory (`process_vm_readv`), into the judge's buffer."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.buffer: mmap.mmap | None = None
        self._address = 0
        self._libc = ctypes.CDLL(None, use_errno=True)
        writev = self._libc.process_vm_writev
        writev.argtypes = [
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_ulong,
            ctypes.c_void_p,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        writev.restype = ctypes.c_ssize_t
        self.backing = Backing(pid)

    def share(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        self.buffer = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._address = ctypes.addressof(ctypes.c_char.from_buffer(self.buffer))
        os.close(fd)

    def read(self, ranges: list[Any]) -> tuple[str | None, str, list[list[Any]]]:
        """Copy each [address, nbytes, offset in the buffer] range, in chunks in random order.
        Returns (None, "", aliased) when all was read, else (why not, a `ReadError.why`, []);
        `aliased`: [index, why] for the ranges that repeat memory through the page tables or lie
        in the judge's input slots, before or after the copy (`cudal1.bench.backing.Backing.aliased`),
        or hold an element on a page never written or shown at two addresses
        (`cudal1.bench.pagemap.page_problems`: why "unwritten", "repeat"). A range may carry a 4th item, the layout of a view that does not fill it."""
        if self.buffer is None:
            return "no read buffer was shared", "harness", []
        if not _ranges_ok(ranges):
            return "a malformed range", "harness", []
        chunks = []
        for item in ranges:
            addr, n, dst = item[:3]
            if dst + n > len(self.buffer):
                return "a range beyond the read buffer", "harness", []
            chunks += [(addr + o, min(CHUNK, n - o), dst + o) for o in range(0, n, CHUNK)]
        # Asked before and after the copy: pages mapped elsewhere for the copy alone must be put
        # back between the two questions, neither of which the host can see coming.
        by_frame = pagemap.zero_frames() is not None  # root: the pagemap compares page frames
        try:
            aliased = {i: why for i, why in self.backing.aliased(ranges, by_frame)}
        except BackingError as exc:
            return self._unasked(exc)
        random.SystemRandom().shuffle(chunks)
        for addr, n, dst in chunks:
            local, remote = _IoVec(self._address + dst, n), _IoVec(addr, n)
            got = self._libc.process_vm_readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
            if got != n:
                err = ctypes.get_errno() if got < 0 else 0
                if err == 3:  # ESRCH
                    return "the candidate's process has ended", "gone", []
                if err == 1 and os.geteuid() == 0:  # EPERM for root: not something a candidate can cause
                    return f"cannot read the candidate's memory ({os.strerror(err)})", "harness", []
                return (
                    f"{n} bytes at {addr:#x} cannot be read ({os.strerror(err) if err else 'short read'})",
                    "unreadable",
                    [],
                )
        try:
            aliased.update({i: why for i, why in self.backing.aliased(ranges, by_frame) if i not in aliased})
        except BackingError as exc:
            return self._unasked(exc)
        try:
            problems = pagemap.page_problems(self.pid, ranges, self.backing.private_files)
            aliased.update({i: why for i, why in problems.items() if i not in aliased})
        except (OSError, ValueError) as exc:
            return self._unasked(BackingError(f"its pagemap: {exc}"))
        if aliased and not self._alive():  # an ended process has no mappings left to ask about
            return "the candidate's process has ended", "gone", []
        return None, "", [[i, aliased[i]] for i in sorted(aliased)]

    def overwrite(self, ranges: list[Any], byte: Any) -> tuple[str | None, str]:
        """Write `byte` over every byte of the elements of each [address, nbytes, offset, layout?]
        range of the host's memory (`process_vm_writev`; `layout` as in `read`: the bytes between
        a sparse view's elements are left alone, `cudal1.bench.pagemap.element_runs`). Returns
        (None, "") when all was written, else (why not, a `ReadError.why`: "gone" for a host that
        has ended, "harness" for a malformed request or the parent's own failure, "unreadable"
        for memory the host no longer has writable where its outputs were)."""
        if type(byte) is not int or not 0 <= byte <= 255 or not _ranges_ok(ranges):
            return "a malformed request to overwrite", "harness"
        pieces = []  # [address, length] rows: an iovec array, as numpy lays out (uint64, uint64)
        for item in ranges:
            addr, n = item[0], item[1]
            if len(item) == 4:
                layout = item[3]
                view = tuple(layout["shape"]), tuple(layout["strides"]), layout["itemsize"]
                if pagemap.run_bytes(*view) < _SHORT_RUN:
                    if (failed := self._patch(addr, n, layout, byte)) is not None:
                        return failed
                    continue
                starts, run = pagemap.element_runs(*view)
            else:
                starts, run = np.zeros(1, dtype=np.int64), n
            offsets = np.arange(0, run, _PATTERN, dtype=np.int64)
            rows = np.empty((len(starts) * len(offsets), 2), dtype=np.uint64)
            rows[:, 0] = (addr + starts[:, None] + offsets[None, :]).reshape(-1)
            rows[:, 1] = np.tile(np.minimum(_PATTERN, run - offsets), len(starts))
            pieces.append(rows)
        remote_all = np.concatenate(pieces) if pieces else np.zeros((0, 2), dtype=np.uint64)
        pattern = (ctypes.c_char * _PATTERN).from_buffer_copy(bytes([byte]) * _PATTERN)
        for k in range(0, len(remote_all), _IOV_MAX):
            remote = np.ascontiguousarray(remote_all[k : k + _IOV_MAX])
            local = remote.copy()
            local[:, 0] = ctypes.addressof(pattern)
            count, want = len(remote), int(remote[:, 1].sum())
            got = self._libc.process_vm_writev(
                self.pid, local.ctypes.data_as(ctypes.c_void_p), count, remote.ctypes.data_as(ctypes.c_void_p), count, 0
            )
            if got != want:
                return self._not_written(got)
        return None, ""

    def _patch(self, addr: int, n: int, layout: dict[str, Any], byte: int) -> tuple[str, str] | None:
        """`overwrite` for a view of short runs (a piece per run costs the kernel more than the
        bytes: 1.1 s for 2 Mi runs of 4 bytes): read its span, set its elements' bytes, write the
        span back whole. Bytes between the elements are written back as they were read; a host
        that changes them meanwhile changes memory it has returned as an output. None when done,
        else (why not, a `ReadError.why`)."""
        span = (ctypes.c_char * n)()
        local, remote = _IoVec(ctypes.addressof(span), n), _IoVec(addr, n)
        got = self._libc.process_vm_readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got != n:
            return self._not_written(got)
        _set_elements(np.frombuffer(span, dtype=np.uint8), layout, byte)
        got = self._libc.process_vm_writev(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        return None if got == n else self._not_written(got)

    def _not_written(self, got: int) -> tuple[str, str]:
        """`overwrite`'s (why not, a `ReadError.why`) after a `process_vm_readv`/`_writev` that
        moved `got` bytes, not all (errno read at once)."""
        err = ctypes.get_errno() if got < 0 else 0
        if err == 3:  # ESRCH
            return "the candidate's process has ended", "gone"
        if err == 1 and os.geteuid() == 0:
            return f"cannot write the candidate's memory ({os.strerror(err)})", "harness"
        if not self._alive():
            return "the candidate's process has ended", "gone"
        return f"its outputs cannot be written over ({os.strerror(err) if err else 'short write'})", "unreadable"

    def _alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in (b"Z", b"X")

    def _unasked(self, exc: BackingError) -> tuple[str, str, list[list[Any]]]:
        if not self._alive():
            return "the candidate's process has ended", "gone", []
        return f"cannot ask which memory holds the outputs: {exc}", "harness", []


_PATTERN = 1 << 16
"""Bytes of the pattern buffer `HostMemory.overwrite` writes from: longer runs go in pieces."""
_IOV_MAX = 1024
"""Pieces per `process_vm_writev` call (Linux's UIO_MAXIOV)."""
_SHORT_RUN = 256
"""Runs of fewer bytes than this are written by `HostMemory._patch` (read, set, write back)."""


def _set_elements(span: np.ndarray, layout: dict[str, Any], byte: int) -> None:
    """Set every byte of the elements of a view (`layout`: {"shape", "strides" (elements),
    "itemsize"}) whose span is `span` (uint8) to `byte`, in place: each element as the words of
    the widest unsigned type (8, 4, 2 or 1 bytes) its size is a multiple of."""
    shape, strides, itemsize = tuple(layout["shape"]), tuple(layout["strides"]), int(layout["itemsize"])
    width = next(w for w in (8, 4, 2, 1) if itemsize % w == 0)
    words = np.lib.stride_tricks.as_strided(
        span.view(f"<u{width}"),
        shape=(*shape, itemsize // width),
        strides=(*(st * itemsize for st in strides), width),
        writeable=True,
    )
    words[...] = int.from_bytes(bytes([byte]) * width, "little")


def _ranges_ok(ranges: Any) -> bool:
    """Whether `ranges` is a list of [address, nbytes, offset, layout?] items: non-negative ints,
    and a layout that fits its range (`_layout_ok`)."""
    return isinstance(ranges, list) and all(
        isinstance(item, list)
        and len(item) in (3, 4)
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in item[:3])
        and (len(item) == 3 or _layout_ok(item[3], item[1]))
        for item in ranges
    )


def _layout_ok(layout: Any, nbytes: int) -> bool:
    """Whether a range's layout is {"shape", "strides", "itemsize"} of non-negative ints whose span is `nbytes`."""
    if not isinstance(layout, dict) or set(layout) != {"shape", "strides", "itemsize"}:
        return False
    shape, strides, itemsize = layout["shape"], layout["strides"], layout["itemsize"]
    if not (isinstance(shape, list) and isinstance(strides, list) and len(shape) == len(strides)):
        return False
    if not all(type(v) is int and v >= 0 for v in [*shape, *strides, itemsize]) or itemsize == 0:
        return False
    return view_span(tuple(shape), tuple(strides), itemsize) == nbytes


class ParentLink:
    """What the judge may ask of the parent, over a socket only they share: read the host's
    memory (CPU), hold and release the device, stop and continue the candidate, its CPU time,
    end its builds, end the host. `Channel` framing; the parent serves
    it from a thread."""

    def __init__(self, sock: Any) -> None:
        self.chan = Channel(sock)

    def share_read_buffer(self, fd: int, host: str = "candidate") -> None:
        """Hand the parent the buffer it reads `host`'s ("candidate" or "reference") memory into."""
        self.chan.send("buffer", fds=[fd], host=host)
        _expect(self.chan, "buffer")

    def read_host(self, ranges: list[list[int]], host: str = "candidate") -> list[list[Any]]:
        """Ask the parent to copy [address, nbytes, offset in the buffer] ranges of `host`'s
        memory into its buffer. Returns [index, why] for the ranges that repeat memory through
        the page tables ("repeat"), lie in the judge's input slots ("input") or hold an element on
        a page never written ("unwritten") (`HostMemory.read`).
        Raises ReadError, ProtocolError."""
        self.chan.send("read", ranges=ranges, host=host)
        reply = _expect(self.chan, "read")
        if reply.get("error"):
            raise ReadError(str(reply["error"])[:300], str(reply.get("why") or "harness"))
        aliased = reply.get("aliased")
        if type(aliased) is not list or not all(
            type(a) is list
            and len(a) == 2
            and type(a[0]) is int
            and 0 <= a[0] < len(ranges)
            and a[1] in ("repeat", "input", "unwritten")
            for a in aliased
        ):
            raise ProtocolError(f"the parent answered {str(aliased)[:80]} as the ranges that repeat memory")
        return aliased

    def overwrite_host(self, ranges: list[list[Any]], byte: int, host: str = "candidate") -> None:
        """Ask the parent to write `byte` over the elements of [address, nbytes, offset, layout?]
        ranges of `host`'s memory (`HostMemory.overwrite`). Raises ReadError, ProtocolError."""
        self.chan.send("overwrite", ranges=ranges, byte=byte, host=host)
        reply = _expect(self.chan, "overwrite")
        if reply.get("error"):
            raise ReadError(str(reply["error"])[:300], str(reply.get("why") or "harness"))

    def hold_device(self) -> float:
        """Block until this evaluation holds its device alone (`cudal1.bench.devicelock`); the
        seconds waited (0.0 when the parent has no lock to take). Raises ProtocolError, PeerGone."""
        self.chan.send("hold_device")
        return float(_expect(self.chan, "hold_device", 24 * 3600.0).get("waited_s") or 0.0)

    def release_device(self) -> None:
        """Let the next evaluation time on the device (idempotent)."""
        self.chan.send("release_device")
        _expect(self.chan, "release_device")

    def pause_host(self, stop: bool) -> tuple[bool, int]:
        """Ask the parent to stop (`stop`) or continue every process of the candidate. Returns
        (whether it did (False: the candidate is gone or ended), how many of its processes still
        had a thread running when the parent gave up waiting for them to stop). Raises
        ProtocolError, PeerGone, Timeout."""
        self.chan.send("pause_host", stop=stop)
        msg = _expect(self.chan, "pause_host")
        running = msg.get("running", 0)
        if type(running) is not int or running < 0:
            raise ProtocolError(f"the parent answered {str(running)[:40]} processes still running")
        return msg.get("paused") is True, running

    def cpu_interval(self, start: bool) -> tuple[int, int | None, int, int]:
        """With `start`, ask the parent to begin an interval of the candidate's CPU time (0);
        otherwise the CPU time (ns) every process of the candidate spent since it began, and the
        most one of its threads spent (`cudal1.bench.worker._HostKeeper.cpu_interval`; None where
        the machine does not say). Returns (those two ns, the parent's `time.perf_counter_ns` as
        it began and as it ended reading the count). Raises ProtocolError, PeerGone, Timeout."""
        self.chan.send("cpu_interval", start=start)
        msg = _expect(self.chan, "cpu_interval")
        ns, busiest, began, ended = msg.get("ns"), msg.get("busiest_ns"), msg.get("began_ns"), msg.get("ended_ns")
        if not all(type(v) is int and v >= 0 for v in (ns, began, ended)) or not (
            busiest is None or (type(busiest) is int and busiest >= 0)
        ):
            raise ProtocolError(
                f"the parent answered a CPU time of {str(ns)[:40]} (busiest thread {str(busiest)[:40]}) "
                f"read over {str(began)[:40]}-{str(ended)[:40]}"
            )
        return ns, busiest, began, ended

    def end_builds(self, timeout_s: float = 60.0) -> None:
        """Ask the parent to end the candidate's builds (the one under way killed, later requests
        refused: `cudal1.bench.builder.BuildService.close`) and wait until it has. Raises
        ProtocolError, PeerGone, Timeout."""
        self.chan.send("end_builds")
        _expect(self.chan, "end_builds", timeout_s)

    def end_host(self, timeout_s: float = 30.0) -> bool:
        """Ask the parent to kill the host's process tree and every process of its uid; True once
        that is done, False when no answer came within `timeout_s`."""
        try:
            self.chan.send("end_host")
            return _expect(self.chan, "end_host", timeout_s).get("ended") is True
        except (Timeout, PeerGone, ProtocolError):
            return False


def _expect(chan: Channel, op: str, timeout_s: float = 60.0) -> dict[str, Any]:
    import time

    msg = chan.recv(time.monotonic() + timeout_s)
    if msg.get("op") != op:
        raise ProtocolError(f"the parent answered {msg.get('op')!r} to {op!r}")
    return msg
