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
    # A memfd named as the judge's input slots (`cudal1.bench.slots`), mapped once.
    slot_fd = os.memfd_create("cudal1-slot")
    os.ftruncate(slot_fd, PAGE)
    slot = mmap.mmap(slot_fd, PAGE, mmap.MAP_SHARED)
    os.close(slot_fd)
    keep = [tensor, small, private, shared, once, twice, private_view, slot]
    yield {
        "a large tensor": ([tensor.data_ptr(), tensor.numel() * 4], None),
        "a small tensor on the heap": ([small.data_ptr(), 64], None),
        "an anonymous private mapping": ([_addr(private), 4 * PAGE], None),
        "two private mappings back to back": ([two, 4 * PAGE], None),
        "an empty range anywhere": ([8, 0], None),
        "a shared anonymous mapping, mapped once": ([_addr(shared), 4 * PAGE], None),
        "file pages mapped once": ([_addr(once), 2 * PAGE], None),
        "file pages mapped nowhere else": ([_addr(twice), 2 * PAGE], None),
        "file pages that a private mapping shows too": ([_addr(twice) + PAGE, 2 * PAGE], "repeat"),
        "a private mapping of file pages mapped shared too": ([_addr(private_view) + 8, 8], "repeat"),
        "one file page at two addresses": ([tile, 2 * PAGE], "repeat"),
        "a private range running into a hole": ([gap + 2 * PAGE, 2 * PAGE], "repeat"),
        "nothing mapped": ([8, 4], "repeat"),
        "an input slot's page, mapped once": ([_addr(slot), 16], "input"),
    }
    del keep
    os.close(fd)


@pytest.mark.parametrize("use_query", [True, False], ids=["procmap_query", "maps_text"])
def test_only_pages_mapped_at_two_addresses_or_none_are_aliased(regions, use_query) -> None:
    names = list(regions)
    aliased = Backing(os.getpid(), use_query=use_query).aliased([regions[n][0] for n in names])
    assert {names[i]: why for i, why in aliased} == {n: why for n, (_, why) in regions.items() if why}


def test_a_maps_line_that_does_not_parse_is_an_error() -> None:
    maps = (
        b"7f00-7f10 rw-p 00000000 00:00 0 \n"
        b"7f10-7f20 rw-s 00002000 00:01 42 /memfd:x (deleted)\n"
        b"7f20-7f30 rw-s 00000000 00:01 43 /memfd:cudal1-slot (deleted)\n"
    )
    assert parse_maps(maps) == [
        Vma(0x7F00, 0x7F10, None, 0),
        Vma(0x7F10, 0x7F20, (1, 42), 0x2000),
        Vma(0x7F20, 0x7F30, (1, 43), 0, input_slot=True),
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
print(*[t.data_ptr()] + [ctypes.addressof(ctypes.c_char.from_buffer(v)) for v in (m, once, again)], flush=True)
sys.stdin.read()
"""


def test_the_parents_read_names_the_ranges_that_repeat_memory() -> None:
    """HostMemory.read copies all four ranges of another process and names the two that show one
    file page at two addresses (by page frame as root, else by the table of mappings)."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        tensor, twice, once, again = (int(v) for v in child.stdout.readline().split())
        memory = HostMemory(child.pid)
        fd = os.memfd_create("read-buffer")
        os.ftruncate(fd, 1 << 16)
        memory.share(fd)
        error, why, aliased = memory.read(
            [[tensor, 4096 * 4, 0], [twice, 5, 1 << 15], [once, 4, 1 << 14], [again, 5, (1 << 15) + 64]]
        )
        assert (
            (error, why) == (None, "") and [i for i, _ in aliased] == [1, 3] and {w for _, w in aliased} == {"repeat"}
        )
        assert torch.equal(torch.frombuffer(memory.buffer, dtype=torch.float32, count=4096), torch.arange(4096.0))
        assert bytes(memory.buffer[1 << 15 : (1 << 15) + 5]) == b"hello"
        assert bytes(memory.buffer[1 << 14 : (1 << 14) + 4]) == b"once"
    finally:
        child.kill()
        child.wait()
    assert memory.read([[tensor, 16, 0]])[1] == "gone"


def test_a_range_of_many_one_page_mappings_is_settled_without_a_scan_per_page() -> None:
    """One range made of 512 one-page mappings of 512 files (each mapped once) passes, and the
    same range with one file's page mapped twice does not; the table is indexed by file
    (a scan of every mapping per mapping of the range took 1.3 s a question at 4096)."""
    n = 512
    base = _libc.mmap(None, (n + 1) * PAGE, 0, MAP_PRIVATE | MAP_ANON, -1, 0)
    fds = [os.memfd_create(f"page{i}") for i in range(n)]
    try:
        for i, fd in enumerate(fds):
            os.ftruncate(fd, PAGE)
            assert _libc.mmap(base + i * PAGE, PAGE, RW, MAP_SHARED | MAP_FIXED, fd, 0) == base + i * PAGE
        backing = Backing(os.getpid())
        assert backing.aliased([[base, n * PAGE, 0]]) == []
        assert _libc.mmap(base + n * PAGE, PAGE, RW, MAP_SHARED | MAP_FIXED, fds[7], 0) == base + n * PAGE
        assert backing.aliased([[base, n * PAGE, 0], [base + PAGE, PAGE, 0]]) == [[0, "repeat"]]
    finally:
        ctypes.CDLL(None).munmap(ctypes.c_void_p(base), (n + 1) * PAGE)
        for fd in fds:
            os.close(fd)


def test_the_pages_a_views_elements_touch() -> None:
    """`pagemap.element_pages` against every element's first and last byte, for dense, padded,
    transposed and sparse layouts at several starting offsets."""
    from cudal1.bench.pagemap import element_pages

    layouts = [
        ((8, 1024), (1024, 1), 4),  # dense
        ((8, 1024), (2048, 1), 4),  # each row's second page never holds an element
        ((1024, 8), (1, 1024), 4),  # transposed
        ((3, 5, 7), (4096, 700, 3), 2),
        ((40,), (1500,), 8),  # elements more than a page apart
        ((1,), (1,), 4),
    ]
    for shape, strides, itemsize in layouts:
        for start in (0, 8, PAGE - itemsize):
            offsets = torch.zeros(1, dtype=torch.int64)
            for n, st in zip(shape, strides):
                offsets = (offsets[:, None] + torch.arange(n) * st).reshape(-1)
            first = (start + offsets * itemsize) // PAGE
            last = (start + offsets * itemsize + itemsize - 1) // PAGE
            want = set(first.tolist()) | set(last.tolist())
            got = element_pages(shape, strides, itemsize, start)
            assert set(torch.nonzero(got).reshape(-1).tolist()) == want, (shape, strides, itemsize, start)


def test_pages_never_written_are_found_where_elements_lie() -> None:
    """After a read, a never-written page of private memory is the zero page (or not there):
    found when an element lies on it, not when it is only inside a padded view's span."""
    from cudal1.bench.pagemap import page_problems, zero_frames

    if zero_frames() is None:
        pytest.skip("page frame numbers are shown to root only")
    region = mmap.mmap(-1, 4 * PAGE, mmap.MAP_PRIVATE)
    base = _addr(region)
    region[:PAGE] = b"x" * PAGE  # page 0 written
    region[2 * PAGE : 3 * PAGE] = b"y" * PAGE  # page 2 written; pages 1 and 3 never
    _ = bytes(region[:])  # the read faults pages 1 and 3 in as the zero page
    one_page_rows = {"shape": [2, PAGE // 4], "strides": [PAGE // 2, 1], "itemsize": 4}  # pages 0 and 2
    ranges = [[base, PAGE, 0], [base, 2 * PAGE, 0], [base, 3 * PAGE, 0, one_page_rows], [base + 3 * PAGE, PAGE, 0]]
    assert page_problems(os.getpid(), ranges) == {1: "unwritten", 3: "unwritten"}
    del region


def test_unwritten_pages_of_a_private_file_mapping_are_found() -> None:
    """A private mapping of a file (memfd) shows the file's pages until the process writes them:
    `Backing.aliased` names its span (PROCMAP_QUERY, root), and `page_problems` finds the page
    still the file's, not the one written through the mapping (the process's own copy)."""
    from cudal1.bench.pagemap import page_problems, zero_frames

    if zero_frames() is None:
        pytest.skip("the private-file question is asked only where page frames are compared (root)")
    fd = os.memfd_create("backing-private")
    os.write(fd, b"z" * (2 * PAGE))
    view = mmap.mmap(fd, 2 * PAGE, mmap.MAP_PRIVATE)
    os.close(fd)
    view[:PAGE] = b"w" * PAGE  # page 0 written through the mapping; page 1 still the file's
    _ = bytes(view[:])
    base = _addr(view)
    backing = Backing(os.getpid())
    ranges = [[base, PAGE, 0], [base + PAGE, PAGE, 0]]
    assert backing.aliased(ranges, files_settled_elsewhere=True) == []
    assert backing.private_files == [(base, base + PAGE), (base + PAGE, base + 2 * PAGE)]
    assert page_problems(os.getpid(), ranges, backing.private_files) == {1: "unwritten"}
    assert page_problems(os.getpid(), ranges) == {}  # without the spans the file page passes
    del view


def test_one_page_frame_at_two_addresses_of_the_outputs_is_a_repeat() -> None:
    """By page frame (root): a file page mapped at two addresses, both read, is a repeat in both
    ranges; two small ranges on one virtual page are not; a file page mapped once is not."""
    from cudal1.bench.pagemap import page_problems, zero_frames

    if zero_frames() is None:
        pytest.skip("page frame numbers are shown to root only")
    fd = os.memfd_create("frames")
    os.ftruncate(fd, 2 * PAGE)
    first = mmap.mmap(fd, PAGE, mmap.MAP_SHARED)
    second = mmap.mmap(fd, PAGE, mmap.MAP_SHARED)  # file page 0 again
    alone = mmap.mmap(fd, PAGE, mmap.MAP_SHARED, offset=PAGE)
    os.close(fd)
    first[:4], alone[:4] = b"abcd", b"efgh"
    heap = torch.randn(64)
    _ = bytes(second[:4])
    ranges = [
        [_addr(first), 16, 0],
        [_addr(second) + 64, 16, 0],
        [_addr(alone), 16, 0],
        [heap.data_ptr(), 64, 0],
        [heap.data_ptr() + 64, 64, 0],
    ]
    assert page_problems(os.getpid(), ranges) == {0: "repeat", 1: "repeat"}


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(6, 10),  # dense
        lambda: torch.zeros(10, 6).t(),  # dense, transposed
        lambda: torch.zeros(8, 12)[::2, 3:9],  # rows apart, part of each row
        lambda: torch.zeros(40)[::3],  # no dimension of stride 1
        lambda: torch.zeros(4, 1, 5).expand(4, 3, 5),  # a stride 0: elements repeat
        lambda: torch.zeros(3, 8, 5).permute(2, 0, 1)[:, :, 1:7],  # stride 1 not innermost
    ],
    ids=["dense", "transposed", "row_slices", "stride_3", "expanded", "permuted"],
)
def test_the_runs_of_a_views_elements_cover_its_element_bytes_and_no_other(make) -> None:
    from cudal1.bench.pagemap import element_runs, view_span

    view = make()
    shape, strides, itemsize = tuple(view.shape), tuple(view.stride()), view.element_size()
    span = view_span(shape, strides, itemsize)
    want = torch.zeros(span, dtype=torch.bool)
    offsets = torch.zeros(1, dtype=torch.int64)
    for n, st in zip(shape, strides):
        offsets = (offsets[:, None] + torch.arange(n) * st).reshape(-1)
    for o in offsets.tolist():
        want[o * itemsize : (o + 1) * itemsize] = True
    starts, run = element_runs(shape, strides, itemsize)
    got = torch.zeros(span, dtype=torch.bool)
    for s in starts.tolist():
        got[s : s + run] = True
    assert torch.equal(got, want) and len(set(starts.tolist())) == len(starts)


def test_the_parents_overwrite_writes_every_element_byte_and_nothing_between() -> None:
    """HostMemory.overwrite (here on this process) writes its byte over a dense range and over
    each element of a sparse view given its layout, and leaves the bytes between the elements,
    which may be the candidate's other data, as they were."""
    from cudal1.bench.pagemap import view_span

    base = torch.zeros(64, 96)
    view = base[::2, 8:72]
    dense = torch.zeros(100_000)  # more than one piece of the pattern
    layout = {"shape": list(view.shape), "strides": list(view.stride()), "itemsize": 4}
    span = view_span(tuple(view.shape), tuple(view.stride()), 4)
    memory = HostMemory(os.getpid())
    ranges = [[view.data_ptr(), span, 0, layout], [dense.data_ptr(), dense.numel() * 4, 0]]
    assert memory.overwrite(ranges, 0xA5) == (None, "")
    written = (base.view(torch.uint8).view(64, 96, 4) == 0xA5).all(-1)
    expect = torch.zeros(64, 96, dtype=torch.bool)
    expect[::2, 8:72] = True
    assert torch.equal(written, expect) and bool((base[~expect] == 0).all())
    assert bool((dense.view(torch.uint8) == 0xA5).all())
    for dtype in (torch.float16, torch.complex128):  # short runs: read, set, written back whole
        pairs = torch.zeros(300, 2, dtype=dtype)
        column = pairs[:, 0]
        shape, strides, itemsize = list(column.shape), list(column.stride()), column.element_size()
        layout = {"shape": shape, "strides": strides, "itemsize": itemsize}
        span = view_span(tuple(shape), tuple(strides), itemsize)
        assert memory.overwrite([[column.data_ptr(), span, 0, layout]], 0xA5) == (None, "")
        assert bool((column.contiguous().view(torch.uint8) == 0xA5).all()) and bool((pairs[:, 1] == 0).all())
    assert memory.overwrite([[8, 4, 0]], 0xA5)[1] == "unreadable"  # nothing mapped there
    assert memory.overwrite([[dense.data_ptr(), 4, 0]], 256)[1] == "harness"
    assert memory.overwrite([[dense.data_ptr(), -4, 0]], 1)[1] == "harness"
