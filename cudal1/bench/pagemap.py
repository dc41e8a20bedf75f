"""Whether a host's output pages were written for it: `page_problems`.

A page of private anonymous memory that no one has written reads as zeros: the kernel maps its
one shared zero page there (or the huge zero page, 2 MiB, where transparent huge pages are on).
An output whose zero rows a candidate never touches (fresh `mmap` memory, the rows it must hold
zeros left alone) reads right, and was paid 1.2-3.0x against an honest 1.0-1.2x (the forty-third
session's red team): the kernel showed values nobody wrote. After the parent's read (which
faults such pages in as the zero page), `/proc/<pid>/pagemap` (the kernel's
Documentation/admin-guide/mm/pagemap.rst: one 64-bit entry a page; bit 63 present, bit 62
swapped, bits 0-54 the page frame number, shown to root only) says which pages are the zero
page, or not there at all.

Only pages that hold some byte of the output's elements count: a strided view of a padded
buffer (the host copies views more than twice as sparse as their values) may span whole pages no
element lies in, which an honest kernel never writes. A dense view holds bytes on every page of
its span; for another view the pages its elements touch are computed from its shape and strides
(`element_pages`, kept per layout).

The same frame numbers show a physical page mapped at two virtual pages of the outputs (a file
or shared page mapped twice: values written once for two places), which `cudal1.bench.backing`
otherwise finds from the whole table of mappings, at a cost that grows with their number.

Without root the frame numbers read as 0, and only pages not there at all are found: the zero
page is not seen (a limit, written in the README), and repeated pages are left to the table.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
from functools import lru_cache
from typing import Any

import numpy as np
import torch

PAGE = mmap.PAGESIZE
HUGE = 2 << 20
_PFN_BITS = (1 << 55) - 1
_PRESENT, _SWAPPED, _FILE = 1 << 63, 1 << 62, 1 << 61
MADV_HUGEPAGE = 14


def _read_entries(pid: int | str, addr: int, n: int) -> bytes:
    """The pagemap entries (8 bytes each) of the pages of [addr, addr + n) in process `pid`. Raises OSError."""
    first, last = addr // PAGE, (addr + n - 1) // PAGE
    fd = os.open(f"/proc/{pid}/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, 8 * (last - first + 1), 8 * first)
    finally:
        os.close(fd)


def _entries(pid: int | str, addr: int, n: int) -> torch.Tensor:
    """`_read_entries` as int64."""
    return torch.frombuffer(bytearray(_read_entries(pid, addr, n)), dtype=torch.int64)


@lru_cache(maxsize=1)
def zero_frames() -> tuple[int, int, int] | None:
    """(the zero page's frame, the huge zero page's first frame, one past its last; both 0 where
    it is not in use), found by reading never-written pages of this process; None where frame
    numbers are hidden (not root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    small = mmap.mmap(-1, PAGE, mmap.MAP_PRIVATE)
    _ = small[0]  # a read fault maps the zero page
    frame = int(_entries("self", ctypes.addressof(ctypes.c_char.from_buffer(small)), 1)[0]) & _PFN_BITS
    small.close()
    if frame == 0:
        return None
    region = mmap.mmap(-1, 2 * HUGE, mmap.MAP_PRIVATE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    aligned = -(-base // HUGE) * HUGE
    huge = (0, 0)
    if libc.madvise(ctypes.c_void_p(aligned), ctypes.c_size_t(HUGE), MADV_HUGEPAGE) == 0:
        _ = region[aligned - base]
        got = _entries("self", aligned, HUGE) & _PFN_BITS
        first = int(got[0])
        if first not in (0, frame) and torch.equal(got, torch.arange(first, first + HUGE // PAGE)):
            huge = (first, first + HUGE // PAGE)
    region.close()
    return frame, *huge


def view_span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Bytes from a view's first element to the end of its last one (0 for an empty view)."""
    if any(s == 0 for s in shape):
        return 0
    return (sum((n - 1) * st for n, st in zip(shape, strides)) + 1) * itemsize


def element_pages(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, start: int) -> torch.Tensor:
    """For a view of `shape`, `strides` (elements) and `itemsize` (bytes) whose first element is
    `start` bytes into its page: a bool per page of its span, True where some byte of an element
    lies. Elements along the dimension of smallest stride are at most a page apart when that
    stride is at most a page, so a row along it touches every page from its first byte to its
    last; rows are combined by their first bytes."""
    span = view_span(shape, strides, itemsize)
    pages = (start + span - 1) // PAGE + 1 if span else 0
    mask = torch.zeros(pages, dtype=torch.bool)
    if not span:
        return mask
    dims = [(st, n) for n, st in zip(shape, strides) if n > 1]
    if not dims:
        mask[start // PAGE] = True
        return mask
    k = min(range(len(dims)), key=lambda d: dims[d][0])
    inner_stride, inner_n = dims[k]
    if inner_stride * itemsize <= PAGE:
        row_bytes, outer = ((inner_n - 1) * inner_stride + 1) * itemsize, dims[:k] + dims[k + 1 :]
    else:  # elements more than a page apart: each is a row of its own
        row_bytes, outer = itemsize, dims
    firsts = torch.zeros(1, dtype=torch.int64)
    for st, n in outer:
        firsts = (firsts[:, None] + torch.arange(n, dtype=torch.int64) * st * itemsize).reshape(-1)
    lo = (firsts + start) // PAGE
    hi = (firsts + start + row_bytes - 1) // PAGE
    # Every page from lo to hi of each row: mark by a difference array.
    marks = torch.zeros(pages + 1, dtype=torch.int64)
    marks.index_add_(0, lo, torch.ones_like(lo))
    marks.index_add_(0, hi + 1, -torch.ones_like(hi))
    return marks.cumsum(0)[:pages] > 0


@lru_cache(maxsize=256)
def _layout_pages(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, start: int) -> torch.Tensor:
    return element_pages(shape, strides, itemsize, start)


def page_problems(pid: int, ranges: list[Any], private_files: list[tuple[int, int]] = ()) -> dict[int, str]:
    """{index: why} for the [address, nbytes, ..., layout] ranges of process `pid` holding an
    element on a page that is not there (neither present nor swapped out), is the zero page, or,
    inside one of the [start, end) spans of `private_files` (private mappings of a file,
    `cudal1.bench.backing.Backing.private_files`), is still the file's page, never written
    through the mapping ("unwritten": its values were written to the file before, or the process
    dropped its own copy with MADV_DONTNEED to show them again), or on a page frame that another
    virtual page of these ranges shows too
    ("repeat": one physical page mapped at two addresses, found by frame number where root
    reads them). `layout` (optional 4th item): {"shape", "strides", "itemsize"} of a view that
    does not fill its span; without it every page of the range counts. Raises OSError when the
    pagemap cannot be read, ValueError for a layout that does not fit its range."""
    frames = zero_frames()
    found: dict[int, str] = {}
    seen_frames, seen_pages, seen_range = [], [], []  # per range: its present element pages
    for i, item in enumerate(ranges):
        addr, n = int(item[0]), int(item[1])
        if n <= 0:
            continue
        entries = np.frombuffer(_read_entries(pid, addr, n), dtype=np.uint64)
        present = (entries & np.uint64(_PRESENT)) != 0
        missing = ~present & ((entries & np.uint64(_SWAPPED)) == 0)
        if private_files:
            pages = np.arange(addr // PAGE, addr // PAGE + entries.size, dtype=np.int64) * PAGE
            in_file = np.zeros(entries.size, dtype=bool)
            for start, end in private_files:
                in_file |= (pages + PAGE > start) & (pages < end)
            missing |= present & in_file & ((entries & np.uint64(_FILE)) != 0)
        mask = None
        if len(item) > 3 and isinstance(item[3], dict):
            layout = item[3]
            pages = _layout_pages(
                tuple(layout["shape"]), tuple(layout["strides"]), int(layout["itemsize"]), addr % PAGE
            )
            if pages.numel() != entries.size:
                raise ValueError(f"a layout of {pages.numel()} pages for a range of {entries.size}")
            mask = pages.numpy()
        if frames is not None:
            frame = (entries & np.uint64(_PFN_BITS)).astype(np.int64)
            zero = (frame == frames[0]) | ((frame >= frames[1]) & (frame < frames[2]))
            missing |= present & zero
            keep = present & ~zero if mask is None else mask & present & ~zero
            seen_frames.append(frame[keep])
            seen_pages.append(np.arange(addr // PAGE, addr // PAGE + entries.size, dtype=np.int64)[keep])
            seen_range.append(np.full(int(keep.sum()), i, dtype=np.int64))
        if (missing if mask is None else missing & mask).any():
            found[i] = "unwritten"
    if seen_frames:
        frames_all, range_of = np.concatenate(seen_frames), np.concatenate(seen_range)
        per_page = frames_all
        spans = sorted((int(r[0]) // PAGE, (int(r[0]) + int(r[1]) - 1) // PAGE) for r in ranges if int(r[1]) > 0)
        if any(b[0] <= a[1] for a, b in zip(spans, spans[1:])):
            # Two ranges on one virtual page (small outputs side by side) see one frame there.
            _, first = np.unique(np.concatenate(seen_pages), return_index=True)
            per_page = frames_all[first]
        ordered = np.sort(per_page)
        twice = ordered[1:][ordered[1:] == ordered[:-1]]
        if twice.size:  # a frame that two virtual pages of these outputs show
            for i in np.unique(range_of[np.isin(frames_all, twice)]).tolist():
                found.setdefault(int(i), "repeat")
    return found


def element_runs(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[np.ndarray, int]:
    """Where a view's elements lie, as runs of bytes: (starts, run_bytes), `starts` (int64,
    sorted, no two alike) the byte offsets of each run from the view's first element and
    `run_bytes` each run's length. A dense view (`dense`) is one run of its span; otherwise a
    dimension of stride 1 (size > 1) makes runs of its length, and without one each element is a
    run of `itemsize` bytes. An empty view: (no starts, 0). `shape`, `strides` in elements."""
    run = run_bytes(shape, strides, itemsize)
    if run == 0:
        return np.zeros(0, dtype=np.int64), 0
    if dense(shape, strides):
        return np.zeros(1, dtype=np.int64), run
    dims = [(st, n) for n, st in zip(shape, strides) if n > 1]
    unit = next((d for d in dims if d[0] == 1), None)
    if unit is not None:
        dims.remove(unit)
    starts = np.zeros(1, dtype=np.int64)
    for st, n in dims:
        starts = (starts[:, None] + np.arange(n, dtype=np.int64) * st).reshape(-1)
    return np.unique(starts) * itemsize, run


def run_bytes(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """The length of `element_runs`' runs (bytes) without the runs themselves."""
    if any(n == 0 for n in shape):
        return 0
    if dense(shape, strides):
        return view_span(shape, strides, itemsize)
    unit = next((n for n, st in zip(shape, strides) if n > 1 and st == 1), 1)
    return unit * itemsize


def dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a view's elements fill its span (every byte from its first to its last belongs
    to an element): then every page of the span holds one."""
    n = math.prod(shape)
    if n == 0:
        return True
    span = sum((k - 1) * st for k, st in zip(shape, strides)) + 1
    return span == n and all(st >= 0 for st in strides)
