"""Which memory backs an output (`cudal1.bench.backing`) and the parent's read that asks
(`cudal1.bench.readers.HostMemory`): private anonymous memory passes, pages that can be mapped at
several addresses do not, by the PROCMAP_QUERY ioctl and by the text of /proc/<pid>/maps alike."""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys

import pytest
import torch

from cudal1.bench.backing import Backing, BackingError, parse_maps
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
    """Named [address, nbytes] ranges of this process, each with whether it is private anonymous memory."""
    keep = []
    tensor = torch.randn(1 << 20)
    small = torch.randn(16)
    private = mmap.mmap(-1, 4 * PAGE, mmap.MAP_PRIVATE)
    shared = mmap.mmap(-1, 4 * PAGE)  # MAP_SHARED | MAP_ANONYMOUS: shmem, can be mapped twice
    fd = os.memfd_create("backing-test")
    os.ftruncate(fd, 4 * PAGE)
    memfd_shared = mmap.mmap(fd, 4 * PAGE, mmap.MAP_SHARED)
    memfd_private = mmap.mmap(fd, 4 * PAGE, mmap.MAP_PRIVATE)  # never written: the file's pages show
    # Two private anonymous mappings back to back with different protections (two mappings, no gap),
    # then a private one followed by a page with nothing mapped.
    two = _libc.mmap(None, 4 * PAGE, RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert _libc.mprotect(two + 2 * PAGE, 2 * PAGE, mmap.PROT_READ) == 0
    gap = _libc.mmap(None, 4 * PAGE, RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert ctypes.CDLL(None).munmap(ctypes.c_void_p(gap + 3 * PAGE), PAGE) == 0
    # One private range, then a shared file page mapped over its middle.
    mixed = _libc.mmap(None, 3 * PAGE, RW, MAP_PRIVATE | MAP_ANON, -1, 0)
    assert _libc.mmap(mixed + PAGE, PAGE, RW, MAP_SHARED | MAP_FIXED, fd, 0) == mixed + PAGE
    keep += [tensor, small, private, shared, memfd_shared, memfd_private, fd]
    yield {
        "a large tensor": ([tensor.data_ptr(), tensor.numel() * 4], True),
        "a small tensor on the heap": ([small.data_ptr(), 64], True),
        "an anonymous private mapping": ([_addr(private), 4 * PAGE], True),
        "two private mappings back to back": ([two, 4 * PAGE], True),
        "an empty range anywhere": ([8, 0], True),
        "a shared anonymous mapping": ([_addr(shared), 4 * PAGE], False),
        "a memfd mapped shared": ([_addr(memfd_shared), PAGE], False),
        "a memfd mapped private, unwritten": ([_addr(memfd_private) + PAGE, 8], False),
        "a private range running into a hole": ([gap + 2 * PAGE, 2 * PAGE], False),
        "a private range with a shared page inside": ([mixed, 3 * PAGE], False),
        "nothing mapped": ([8, 4], False),
    }
    os.close(fd)


@pytest.mark.parametrize("use_query", [True, False], ids=["procmap_query", "maps_text"])
def test_only_private_anonymous_memory_is_inside(regions, use_query) -> None:
    backing = Backing(os.getpid(), use_query=use_query)
    names = list(regions)
    outside = backing.outside_private([regions[n][0] for n in names])
    assert {names[i] for i in outside} == {n for n in names if not regions[n][1]}


def test_a_maps_line_that_does_not_parse_is_an_error() -> None:
    assert parse_maps(b"7f00-7f10 rw-p 00000000 00:00 0 \n7f10-7f20 rw-s 00000000 00:01 42 /memfd:x\n") == [
        (0x7F00, 0x7F10, True),
        (0x7F10, 0x7F20, False),
    ]
    with pytest.raises(BackingError):
        parse_maps(b"7f00-7f10 rw-p\n")


def test_a_process_that_is_gone_cannot_be_asked() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(BackingError):
        Backing(child.pid).outside_private([[8, 4]])


_CHILD = """
import mmap, os, sys, torch
t = torch.arange(4096, dtype=torch.float32)
fd = os.memfd_create("x"); os.ftruncate(fd, 1 << 14)
m = mmap.mmap(fd, 1 << 14, mmap.MAP_SHARED); m[:5] = b"hello"
import ctypes
print(t.data_ptr(), ctypes.addressof(ctypes.c_char.from_buffer(m)), flush=True)
sys.stdin.read()
"""


def test_the_parents_read_names_the_ranges_outside_private_memory() -> None:
    """HostMemory.read copies both ranges of another process and names the one in a memfd."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tensor, memfd = (int(v) for v in child.stdout.readline().split())
        memory = HostMemory(child.pid)
        fd = os.memfd_create("read-buffer")
        os.ftruncate(fd, 1 << 16)
        memory.share(fd)
        error, why, outside = memory.read([[tensor, 4096 * 4, 0], [memfd, 5, 1 << 15]])
        assert (error, why, outside) == (None, "", [1])
        assert torch.equal(torch.frombuffer(memory.buffer, dtype=torch.float32, count=4096), torch.arange(4096.0))
        assert bytes(memory.buffer[1 << 15 : (1 << 15) + 5]) == b"hello"
    finally:
        child.kill()
        child.wait()
    assert memory.read([[tensor, 16, 0]])[1] == "gone"
