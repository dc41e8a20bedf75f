"""Whether a host's output ranges repeat memory through the page tables: `Backing.aliased`.

A process can map one page at several virtual addresses: a file (a memfd, `/dev/shm`) or a
shared anonymous region mapped twice, or a file mapped privately and never written (its page-cache
pages show through every private mapping). An output laid out that way has plain strides and
disjoint virtual ranges, and every value read from it is right, yet most of it was never written:
a 4 MiB tile mapped 4 times was paid 1.37x against an honest 1.0x (the forty-second session's red
team). Strides and addresses cannot show it; the mappings can. Every byte of an output must be
mapped and lie outside the judge's input slots. Where the caller compares page frames
(`cudal1.bench.pagemap.page_problems`, root), that is all asked here; otherwise a byte in a file
or shared mapping must be at a file offset the process maps nowhere else (private anonymous
memory, malloc's and PyTorch's, always passes). Shared memory a helper process writes into,
mapped once, passes; the same pages mapped twice, for one output or for two, do not.

Two ways to ask the kernel:

- the `PROCMAP_QUERY` ioctl on `/proc/<pid>/maps` (Linux 6.11 and later, include/uapi/linux/fs.h):
  the mapping that covers one address, with its name; 11 us to ask about one range, 36 us about
  eight. It settles ranges in private anonymous memory, the honest case, and finds input slots;
- the text of `/proc/<pid>/maps` (proc(5)): every mapping with its device, inode and file offset,
  read and parsed once per question (1.3 ms for a PyTorch process of 350 mappings, about a third
  of it the kernel writing the text): for ranges in file or shared mappings where page frames
  are not compared, and on kernels without the ioctl.

(Figures: `benchmarks/backing_cost.py`, docs/benchmarks.md.) A private mapping counts as file
memory wherever it has an inode (its unwritten pages are the file's). Reading a process's maps
needs the same access as reading its memory (ptrace read access: the parent, as root or as the
host's ancestor).
"""

from __future__ import annotations

import bisect
import ctypes
import errno
import os
from typing import Any, NamedTuple


class _Query(ctypes.Structure):
    """`struct procmap_query` (include/uapi/linux/fs.h), 104 bytes."""

    _fields_ = [
        ("size", ctypes.c_uint64),
        ("query_flags", ctypes.c_uint64),
        ("query_addr", ctypes.c_uint64),
        ("vma_start", ctypes.c_uint64),
        ("vma_end", ctypes.c_uint64),
        ("vma_flags", ctypes.c_uint64),
        ("vma_page_size", ctypes.c_uint64),
        ("vma_offset", ctypes.c_uint64),
        ("inode", ctypes.c_uint64),
        ("dev_major", ctypes.c_uint32),
        ("dev_minor", ctypes.c_uint32),
        ("vma_name_size", ctypes.c_uint32),
        ("build_id_size", ctypes.c_uint32),
        ("vma_name_addr", ctypes.c_uint64),
        ("build_id_addr", ctypes.c_uint64),
    ]


PROCMAP_QUERY = (3 << 30) | (ctypes.sizeof(_Query) << 16) | (ord("f") << 8) | 17
"""_IOWR('f', 17, struct procmap_query)."""
VMA_SHARED = 0x08
"""PROCMAP_QUERY_VMA_SHARED."""


class BackingError(Exception):
    """The maps of the process could not be read (it ended, or the reader may not look)."""


INPUT_SLOT_NAME = b"/memfd:cudal1-slot"
"""How /proc/<pid>/maps names a mapping of the judge's input slots (`cudal1.bench.slots`: a
memfd's name is fixed when the judge creates it; another memfd of that name only holds the
candidate's own pages)."""


class Vma(NamedTuple):
    """One mapping of a process: [start, end) virtual bytes; `file` None for private anonymous
    memory, else (device, inode) of what backs it (a shared anonymous region has a shmem inode);
    `offset` the file offset of `start` in bytes; `input_slot` whether it maps one of the
    judge's input slots (`INPUT_SLOT_NAME`)."""

    start: int
    end: int
    file: tuple[int, int] | None
    offset: int
    input_slot: bool = False


class Backing:
    """The parent's view of one host process's mappings.

    `aliased(ranges)` -> [index, why] for each [address, nbytes, ...] range some byte of which
    is not mapped at all or lies in a page of a file or shared region that the process maps at
    another address too (why "repeat"), or lies in one of the judge's input slots (why "input":
    the judge's input pages moved under an output with mremap keep one mapping and leave the
    input's own address empty). Raises BackingError when the process's maps cannot be read (it
    ended, or the reader may not look)."""

    def __init__(self, pid: int, use_query: bool = True) -> None:
        self.pid = pid
        self._query = use_query
        self._libc = ctypes.CDLL(None, use_errno=True)
        self.private_files: list[tuple[int, int]] = []
        """After `aliased` by PROCMAP_QUERY: the [start, end) spans of the ranges that lie in a
        private mapping of a file, where a page the process has not written is still the file's
        (`cudal1.bench.pagemap.page_problems` refuses those)."""

    def aliased(self, ranges: list[Any], files_settled_elsewhere: bool = False) -> list[list[Any]]:
        """[index, why] per range that is not mapped in full or repeats file pages ("repeat") or
        lies in an input slot ("input"). With `files_settled_elsewhere` (the caller compares page
        frames: `cudal1.bench.pagemap.page_problems`), a range in a file or shared mapping that is
        not an input slot passes here, and the whole table is read only on kernels without
        PROCMAP_QUERY."""
        spans = [(int(r[0]), int(r[1])) for r in ranges]
        suspects = [i for i, (_, n) in enumerate(spans) if n]
        found: dict[int, str] = {}
        self.private_files = []
        if self._query:
            try:
                suspects, found = self._by_query(spans, suspects, files_settled_elsewhere)
            except _NoQuery:
                self._query = False
        if suspects:
            # A range in a file or shared mapping: only the whole table can say whether another
            # mapping of the process shows the same pages.
            table = Table(self._table())
            for i in suspects:
                if (why := table.aliased(*spans[i])) is not None:
                    found[i] = why
        return [[i, found[i]] for i in sorted(found)]

    def _by_query(
        self, spans: list[tuple[int, int]], which: list[int], files_settled: bool
    ) -> tuple[list[int], dict[int, str]]:
        """By PROCMAP_QUERY: (the indices of `which` left for the table, {index: why} found)."""
        try:
            fd = os.open(f"/proc/{self.pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise BackingError(f"cannot open the maps of process {self.pid}: {exc}") from exc
        left, found = [], {}
        try:
            for i in which:
                verdict = self._walk(fd, *spans[i], files_settled)
                if verdict == "table":
                    left.append(i)
                elif verdict is not None:
                    found[i] = verdict
        finally:
            os.close(fd)
        return left, found

    def _walk(self, fd: int, addr: int, n: int, files_settled: bool) -> str | None:
        """None when every byte of [addr, addr + n) lies in private anonymous memory (or, with
        `files_settled`, in any mapping but an input slot); "repeat" for a byte not mapped;
        "input" for one in an input slot; "table" when a file or shared mapping needs the table."""
        end, name = addr + n, ctypes.create_string_buffer(4096)
        while addr < end:
            q = _Query(
                size=ctypes.sizeof(_Query),
                query_flags=0,
                query_addr=addr,
                vma_name_size=ctypes.sizeof(name),
                vma_name_addr=ctypes.addressof(name),
            )
            ok = self._libc.ioctl(fd, PROCMAP_QUERY, ctypes.byref(q)) >= 0
            if not ok and ctypes.get_errno() == errno.ENAMETOOLONG:  # a long path: not an input slot
                name.value = b""
                q.vma_name_size, q.vma_name_addr = 0, 0
                ok = self._libc.ioctl(fd, PROCMAP_QUERY, ctypes.byref(q)) >= 0
            if not ok:
                err = ctypes.get_errno()
                if err == errno.ENOENT:  # nothing mapped there
                    return "repeat"
                if err in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
                    raise _NoQuery()
                raise BackingError(f"PROCMAP_QUERY on process {self.pid}: {os.strerror(err)}")
            if q.vma_end <= addr:
                return "repeat"
            if q.vma_flags & VMA_SHARED or q.inode != 0:
                if name.value.startswith(INPUT_SLOT_NAME):
                    return "input"
                if not files_settled:
                    return "table"
                if not q.vma_flags & VMA_SHARED:
                    self.private_files.append((addr, min(end, q.vma_end)))
            addr = q.vma_end
        return None

    def _table(self) -> list[Vma]:
        try:
            with open(f"/proc/{self.pid}/maps", "rb") as f:
                text = f.read()
        except OSError as exc:
            raise BackingError(f"cannot read the maps of process {self.pid}: {exc}") from exc
        return parse_maps(text)


class _NoQuery(Exception):
    """This kernel has no PROCMAP_QUERY."""


def parse_maps(text: bytes) -> list[Vma]:
    """The mappings of a /proc/<pid>/maps text (proc(5): "start-end perms offset major:minor inode
    [path]"), in address order. Raises BackingError on a line that does not parse."""
    table = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        try:
            start, end = (int(v, 16) for v in fields[0].split(b"-"))
            perms, offset, inode = fields[1], int(fields[2], 16), int(fields[4])
            major, minor = (int(v, 16) for v in fields[3].split(b":"))
        except (IndexError, ValueError) as exc:
            raise BackingError(f"a maps line that does not parse: {line[:80]!r}") from exc
        private = perms[3:4] == b"p" and inode == 0
        slot = len(fields) > 5 and fields[5].startswith(INPUT_SLOT_NAME)
        table.append(Vma(start, end, None if private else (major << 32 | minor, inode), offset, slot))
    return table


class Table:
    """A process's mappings (`parse_maps`) with the file-backed ones indexed by (device, inode),
    each list sorted by file offset, so that finding another mapping of the same file pages costs
    a bisection, not a scan (a range made of thousands of one-page mappings of distinct files
    would otherwise cost its square)."""

    def __init__(self, vmas: list[Vma]) -> None:
        self.vmas = vmas
        self.starts = [v.start for v in vmas]
        self.by_file: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        for v in vmas:
            if v.file is not None:
                self.by_file.setdefault(v.file, []).append((v.offset, v.offset + (v.end - v.start), v.start))
        self.reach: dict[tuple[int, int], list[int]] = {}
        for key, spans in self.by_file.items():
            spans.sort()
            ends, top = [], 0
            for _, hi, _ in spans:
                top = max(top, hi)
                ends.append(top)
            self.reach[key] = ends  # the furthest file offset any span up to this one reaches

    def aliased(self, addr: int, n: int) -> str | None:
        """ "repeat" where [addr, addr + n) has a gap, or a byte in a file or shared mapping whose
        file offset another mapping covers; "input" where a byte lies in an input slot; else None."""
        end = addr + n
        at = bisect.bisect_right(self.starts, addr) - 1
        while addr < end:
            if at < 0 or at >= len(self.vmas) or self.vmas[at].end <= addr:
                return "repeat"  # a gap: nothing mapped there
            vma = self.vmas[at]
            if vma.file is not None:
                if vma.input_slot:
                    return "input"
                lo = vma.offset + (addr - vma.start)
                hi = vma.offset + (min(end, vma.end) - vma.start)
                if self._shown_elsewhere(vma, lo, hi):
                    return "repeat"
            addr, at = vma.end, at + 1
            if at < len(self.vmas) and self.vmas[at].start > addr and addr < end:
                return "repeat"
        return None

    def _shown_elsewhere(self, vma: Vma, lo: int, hi: int) -> bool:
        """Whether a mapping other than `vma` covers some of file offsets [lo, hi) of its file."""
        spans, reach = self.by_file[vma.file], self.reach[vma.file]
        # Spans starting before hi, latest first; stop once none of the earlier ones reaches lo.
        k = bisect.bisect_left(spans, (hi,)) - 1
        while k >= 0 and reach[k] > lo:
            offset, stop, start = spans[k]
            if start != vma.start and stop > lo:
                return True
            k -= 1
        return False
