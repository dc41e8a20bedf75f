"""Which memory backs a host's output ranges: `Backing.outside_private`.

A process can map one page at several virtual addresses: a file (a memfd, `/dev/shm`) or a
shared anonymous region mapped twice, or a file mapped privately and never written (its page-cache
pages show through every private mapping). An output laid out that way has plain strides and
disjoint virtual ranges, and every value read from it is right, yet most of it was never written:
a 4 MiB tile mapped 4 times was paid 1.37x against an honest 1.0x (the forty-second session's red
team). Strides and addresses cannot show it; the mapping can. Private anonymous memory (malloc,
PyTorch's CPU allocator, an anonymous `mmap`) gives each virtual page a page of its own, so the
judge's rule is that an output's bytes lie there unless the reference's do not.

Two ways to ask the kernel, same answer:

- the `PROCMAP_QUERY` ioctl on `/proc/<pid>/maps` (Linux 6.11 and later, include/uapi/linux/fs.h):
  the mapping that covers one address; 3 us to ask about one range, 17 us about eight;
- otherwise the text of `/proc/<pid>/maps` (proc(5)), read and parsed once per question (0.8 ms
  for a PyTorch process of 350 mappings, most of it the kernel writing the text).

(Figures: `benchmarks/backing_cost.py`, docs/benchmarks.md.)

A page counts as private anonymous when its mapping is not shared (`s` in maps, the query's
`PROCMAP_QUERY_VMA_SHARED`) and has no file (inode 0). Reading a process's maps needs the same
access as reading its memory (ptrace read access: the parent, as root or as the host's ancestor).
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any


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


class Backing:
    """The parent's view of one host process's mappings.

    `outside_private(ranges)` -> the indices of the [address, nbytes, ...] ranges not wholly in
    private anonymous memory (a range that is not mapped at all counts as outside). Raises
    BackingError when the process's maps cannot be read (ESRCH-like: the process ended;
    otherwise a reader without access)."""

    def __init__(self, pid: int, use_query: bool = True) -> None:
        self.pid = pid
        self._query = use_query
        self._libc = ctypes.CDLL(None, use_errno=True)

    def outside_private(self, ranges: list[Any]) -> list[int]:
        spans = [(int(r[0]), int(r[1])) for r in ranges]
        if self._query:
            try:
                fd = os.open(f"/proc/{self.pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise BackingError(f"cannot open the maps of process {self.pid}: {exc}") from exc
            try:
                return [i for i, (addr, n) in enumerate(spans) if n and not self._private_by_query(fd, addr, n)]
            except _NoQuery:
                self._query = False
            finally:
                os.close(fd)
        table = self._table()
        return [i for i, (addr, n) in enumerate(spans) if n and not _private_in(table, addr, n)]

    def _private_by_query(self, fd: int, addr: int, n: int) -> bool:
        end = addr + n
        while addr < end:
            q = _Query(size=ctypes.sizeof(_Query), query_flags=0, query_addr=addr)
            if self._libc.ioctl(fd, PROCMAP_QUERY, ctypes.byref(q)) < 0:
                err = ctypes.get_errno()
                if err == errno.ENOENT:  # nothing mapped there
                    return False
                if err in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
                    raise _NoQuery()
                raise BackingError(f"PROCMAP_QUERY on process {self.pid}: {os.strerror(err)}")
            if q.vma_flags & VMA_SHARED or q.inode != 0 or q.vma_end <= addr:
                return False
            addr = q.vma_end
        return True

    def _table(self) -> list[tuple[int, int, bool]]:
        try:
            with open(f"/proc/{self.pid}/maps", "rb") as f:
                text = f.read()
        except OSError as exc:
            raise BackingError(f"cannot read the maps of process {self.pid}: {exc}") from exc
        return parse_maps(text)


class _NoQuery(Exception):
    """This kernel has no PROCMAP_QUERY."""


def parse_maps(text: bytes) -> list[tuple[int, int, bool]]:
    """(start, end, private anonymous) per line of a /proc/<pid>/maps text (proc(5): "start-end
    perms offset major:minor inode [path]"), in address order. Raises BackingError on a line
    that does not parse."""
    table = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        try:
            start, end = (int(v, 16) for v in fields[0].split(b"-"))
            perms, inode = fields[1], int(fields[4])
        except (IndexError, ValueError) as exc:
            raise BackingError(f"a maps line that does not parse: {line[:80]!r}") from exc
        table.append((start, end, perms[3:4] == b"p" and inode == 0))
    return table


def _private_in(table: list[tuple[int, int, bool]], addr: int, n: int) -> bool:
    """Whether [addr, addr + n) is covered, without a gap, by private anonymous mappings of `table`."""
    end = addr + n
    for start, stop, private in table:
        if stop <= addr:
            continue
        if start > addr or not private:
            return False
        addr = stop
        if addr >= end:
            return True
    return False
