"""Whether an output repeats memory through the page tables (`cudal1.bench.backing`) and the
parent's read that asks (`cudal1.bench.readers.HostMemory`): private anonymous memory and file
or shared pages mapped once pass; pages the process maps at two addresses, and unmapped bytes,
do not, by the PROCMAP_QUERY ioctl and by the text of /proc/<pid>/maps alike."""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys

import pytest
import torch

from cudal1.bench.backing import Backing, BackingError, Vma, parse_maps
from cudal1.bench.readers import HostMemory

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE = mmap.PAGESIZE
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANON = 0x01, 0x02, 0x10, 0x20
RW = mmap.PROT_READ | mmap.PROT_WRITE


def _addr(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


@pytest.fixture(scope="module")
def regions():
    """Named [address, nbytes] ranges of this process, each with whether it repeats memory."""
    tensor = torch.randn(1 << 20)
    small = torch.randn(16)
    private = mmap.mmap(-1, 4 * PAGE, mmap.MAP_PRIVATE)
    shared = mmap.mmap(-1, 4 * PAGE)  # MAP_SHARED | MAP_ANONYMOUS, mapped once
    fd = os.memfd_create("backing-test")
    os.ftruncate(fd, 8 * PAGE)
    once = mmap.mmap(fd, 2 * PAGE, mmap.MAP_SHARED, offset=6 * PAGE)  # file pages 6-7, mapped once
    # File pages 0-3 mapped shared, pages 2-3 privately too (unwritten: the same pages show).
    twice = mmap.mmap(fd, 4 * PAGE, mmap.MAP_SHARED)
    private_view = mmap.mmap(fd, 2 * PAGE, mmap.MAP_PRIVATE, offset=2 * PAGE)
    # One file page mapped at two adjacent addresses: a contiguous range that repeats a page.
    tile = _libc.mmap(None, 2 * PAGE, 0, MAP_PRIVATE | MAP_ANON, -1, 0)
    for i in range(2):
        assert _libc.mmap(tile + i * PAGE, PAGE, RW, MAP_SHARED | MAP_FIXED, fd, 5 * PAGE) == tile + i * PAGE
    # Two private anonymous mappings back to back with different protections (no gap), and a
    # private one followed by a page with nothing mapped.
    two = _libc.mmap(None, 4 * PAGE, RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert _libc.mprotect(two + 2 * PAGE, 2 * PAGE, mmap.PROT_READ) == 0
    gap = _libc.mmap(None, 4 * PAGE, RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert ctypes.CDLL(None).munmap(ctypes.c_void_p(gap + 3 * PAGE), PAGE) == 0
    keep = [tensor, small, private, shared, once, twice, private_view]
    yield {
        "a large tensor": ([tensor.data_ptr(), tensor.numel() * 4], False),
        "a small tensor on the heap": ([small.data_ptr(), 64], False),
        "an anonymous private mapping": ([_addr(private), 4 * PAGE], False),
        "two private mappings back to back": ([two, 4 * PAGE], False),
        "an empty range anywhere": ([8, 0], False),
        "a shared anonymous mapping, mapped once": ([_addr(shared), 4 * PAGE], False),
        "file pages mapped once": ([_addr(once), 2 * PAGE], False),
        "file pages mapped nowhere else": ([_addr(twice), 2 * PAGE], False),
        "file pages that a private mapping shows too": ([_addr(twice) + PAGE, 2 * PAGE], True),
        "a private mapping of file pages mapped shared too": ([_addr(private_view) + 8, 8], True),
        "one file page at two addresses": ([tile, 2 * PAGE], True),
        "a private range running into a hole": ([gap + 2 * PAGE, 2 * PAGE], True),
        "nothing mapped": ([8, 4], True),
    }
    del keep
    os.close(fd)


@pytest.mark.parametrize("use_query", [True, False], ids=["procmap_query", "maps_text"])
def test_only_pages_mapped_at_two_addresses_or_none_are_aliased(regions, use_query) -> None:
    names = list(regions)
    aliased = Backing(os.getpid(), use_query=use_query).aliased([regions[n][0] for n in names])
    assert {names[i] for i in aliased} == {n for n in names if regions[n][1]}


def test_a_maps_line_that_does_not_parse_is_an_error() -> None:
    assert parse_maps(b"7f00-7f10 rw-p 00000000 00:00 0 \n7f10-7f20 rw-s 00002000 00:01 42 /memfd:x\n") == [
        Vma(0x7F00, 0x7F10, None, 0),
        Vma(0x7F10, 0x7F20, (1, 42), 0x2000),
    ]
    with pytest.raises(BackingError):
        parse_maps(b"7f00-7f10 rw-p\n")


def test_a_process_that_is_gone_cannot_be_asked() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(BackingError):
        Backing(child.pid).aliased([[8, 4]])


_CHILD = """
import ctypes, mmap, os, sys, torch
t = torch.arange(4096, dtype=torch.float32)
fd = os.memfd_create("x"); os.ftruncate(fd, 3 * mmap.PAGESIZE)
m = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED); m[:5] = b"hello"
again = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED)  # the same file page, a second address
once = mmap.mmap(fd, mmap.PAGESIZE, mmap.MAP_SHARED, offset=2 * mmap.PAGESIZE); once[:4] = b"once"
print(*[t.data_ptr()] + [ctypes.addressof(ctypes.c_char.from_buffer(v)) for v in (m, once)], flush=True)
sys.stdin.read()
"""


def test_the_parents_read_names_the_ranges_that_repeat_memory() -> None:
    """HostMemory.read copies all three ranges of another process and names the one whose page
    that process maps at a second address."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tensor, twice, once = (int(v) for v in child.stdout.readline().split())
        memory = HostMemory(child.pid)
        fd = os.memfd_create("read-buffer")
        os.ftruncate(fd, 1 << 16)
        memory.share(fd)
        error, why, aliased = memory.read([[tensor, 4096 * 4, 0], [twice, 5, 1 << 15], [once, 4, 1 << 14]])
        assert (error, why, aliased) == (None, "", [1])
        assert torch.equal(torch.frombuffer(memory.buffer, dtype=torch.float32, count=4096), torch.arange(4096.0))
        assert bytes(memory.buffer[1 << 15 : (1 << 15) + 5]) == b"hello"
        assert bytes(memory.buffer[1 << 14 : (1 << 14) + 4]) == b"once"
    finally:
        child.kill()
        child.wait()
    assert memory.read([[tensor, 16, 0]])[1] == "gone"
