"""Unit tests of the judge <-> host channel and the shared slots (in one process, socket pairs)."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import struct
import time
import warnings

import pytest
import torch

from cudal1.bench.slots import Slot, TensorSpec, plan
from cudal1.bench.wire import (
    MAX_FRAME,
    Channel,
    PeerGone,
    ProtocolError,
    Timeout,
    blob,
    expect,
    expect_host,
    str_list,
    unblob,
)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield Channel(a), Channel(b)
    a.close()
    b.close()


def test_messages_round_trip_in_order(pair):
    judge, host = pair
    judge.send("call", k=1, keep=True)
    judge.send("call", k=2, keep=False)
    assert host.recv(time.monotonic() + 5) == {"op": "call", "k": 1, "keep": True}
    assert host.recv(time.monotonic() + 5)["k"] == 2
    assert not host.pending()


def test_a_frame_that_is_not_json_or_has_no_op_is_a_protocol_error(pair):
    judge, host = pair
    raw = b"\x80\x04forged pickle"
    host.sock.sendall(struct.pack("!I", len(raw)) + raw)
    with pytest.raises(ProtocolError, match="not JSON"):
        judge.recv(time.monotonic() + 5)
    body = json.dumps({"nonce": "x", "kind": "returned", "value": {"status": "ok"}}).encode()
    host.sock.sendall(struct.pack("!I", len(body)) + body)
    with pytest.raises(ProtocolError, match="without an op"):
        judge.recv(time.monotonic() + 5)


def test_an_oversized_frame_is_refused_before_it_is_read(pair):
    judge, host = pair
    host.sock.sendall(struct.pack("!I", MAX_FRAME + 1))
    with pytest.raises(ProtocolError, match="limit"):
        judge.recv(time.monotonic() + 5)


def test_non_finite_numbers_are_refused(pair):
    judge, host = pair
    body = b'{"op": "done", "inner_ms": NaN}'
    host.sock.sendall(struct.pack("!I", len(body)) + body)
    with pytest.raises(ProtocolError):
        judge.recv(time.monotonic() + 5)


def test_timeout_and_a_closed_peer(pair):
    judge, host = pair
    with pytest.raises(Timeout):
        judge.recv(time.monotonic() + 0.05)
    host.close()
    with pytest.raises(PeerGone):
        judge.recv(time.monotonic() + 5)


def test_expect_checks_the_op_and_field_types():
    msg = {"op": "done", "k": 3, "inner_ms": 2, "labels": []}
    assert expect(msg, "done", k=int, inner_ms=float, labels=list) is msg
    with pytest.raises(ProtocolError, match="expected loaded"):
        expect(msg, "loaded")
    with pytest.raises(ProtocolError, match="wrong type"):
        expect({"op": "done", "k": "3"}, "done", k=int)
    with pytest.raises(ProtocolError, match="wrong type"):
        expect({"op": "done", "k": True}, "done", k=int)  # a bool is not a count
    with pytest.raises(ProtocolError):
        str_list(["a"] * 100)
    assert str_list(["x" * 500]) == ["x" * 300]


def test_blobs_carry_tensors_judge_to_host():
    value = unblob(blob([torch.arange(3), 2.5, {"slot": 0}]))
    assert torch.equal(value[0], torch.arange(3)) and value[1:] == [2.5, {"slot": 0}]


def test_file_descriptors_travel_with_a_message(pair, tmp_path):
    judge, host = pair
    path = tmp_path / "f"
    path.write_text("slot")
    fd = os.open(path, os.O_RDONLY)
    try:
        judge.send("setup", fds=[fd], device="cpu")
        msg = host.recv(time.monotonic() + 5, max_fds=2)
        assert msg == {"op": "setup", "device": "cpu"} and len(host.received_fds) == 1
        assert os.read(host.received_fds[0], 4) == b"slot"
    finally:
        os.close(fd)
        for got in host.received_fds:
            os.close(got)


def test_a_cpu_slot_is_shared_and_cannot_be_resized_by_the_host(pair):
    x = torch.randn(3, 5)
    y = torch.arange(7, dtype=torch.int64)
    z = torch.randn(4, dtype=torch.complex64)
    specs, nbytes = plan([x, y, z])
    assert [s.offset % 256 for s in specs] == [0, 0, 0] and nbytes >= x.nbytes + y.nbytes + z.nbytes
    slot = Slot(nbytes, "cpu")
    meta, fds = slot.export()
    judge, host = pair
    judge.send("setup", fds=fds, slot=meta)
    msg = host.recv(time.monotonic() + 5, max_fds=1)
    fd = host.received_fds[0]
    spare = os.dup(fd)  # attach closes the descriptor it maps; the test tries to resize through a copy
    mapped = Slot.attach(msg["slot"], "cpu", fd)
    for spec, t in zip(specs, (x, y, z)):
        slot.view(TensorSpec.from_dict(spec.to_dict())).copy_(t)
    assert all(torch.equal(mapped.view(s), t) for s, t in zip(specs, (x, y, z)))
    mapped.view(specs[1]).fill_(-1)  # the host's writes are the judge's to see
    assert torch.equal(slot.view(specs[1]), torch.full((7,), -1))
    for resize in (0, nbytes * 2):  # sealed: the host cannot shrink it under the judge (SIGBUS) or grow it
        with pytest.raises(OSError) as info:
            os.ftruncate(spare, resize)
        assert info.value.errno == errno.EPERM
    os.close(spare)
    with pytest.raises(ValueError):
        Slot.attach({"kind": "cuda_ipc", "nbytes": 16, "handle": "00"}, "cpu")


def _reaches_only_its_own_bytes(t: torch.Tensor, spec: TensorSpec) -> None:
    """Every way to the memory behind `t` through PyTorch's tensor API ends at its own bytes."""
    storage = t.untyped_storage()
    assert storage.nbytes() == spec.nbytes and storage.data_ptr() == t.data_ptr() and t.storage_offset() == 0
    with warnings.catch_warnings():  # TypedStorage is deprecated, and still reachable
        warnings.simplefilter("ignore", UserWarning)
        assert t.storage().nbytes() == spec.nbytes
    if t._base is not None:
        assert t._base.untyped_storage().nbytes() == spec.nbytes
    with pytest.raises(RuntimeError):  # a view past the storage's end is refused
        t.as_strided((2, t.numel()), (t.numel(), 1))
    with pytest.raises(RuntimeError):
        t.as_strided((t.numel(),), (1,), 1)
    with pytest.raises(RuntimeError):  # set_ would have to grow the storage, which is not resizable
        torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, 0, (2, t.numel()), (t.numel(), 1))
    with pytest.raises(RuntimeError):
        storage.resize_(spec.nbytes * 2)


def test_a_calls_tensors_reach_only_their_own_bytes_of_the_slot(pair):
    """A round trip's input sets lie one after another in one slot; the tensors of each set, on
    the judge's side and on the host's, have storages that span their own bytes only, so a call
    cannot reach the next calls' inputs through its arguments (the batching of
    `tests/bench/candidates/batches_the_round.py`)."""
    x = torch.randn(3, 5)
    y = torch.arange(7, dtype=torch.int64)
    specs, set_bytes = plan([x, y])
    sets = 4
    slot = Slot(set_bytes * sets, "cpu")
    meta, fds = slot.export()
    judge, host = pair
    judge.send("setup", fds=fds, slot=meta)
    msg = host.recv(time.monotonic() + 5, max_fds=1)
    mapped = Slot.attach(msg["slot"], "cpu", host.received_fds[0])
    for j in range(sets):
        for spec, t in zip(specs, (x, y)):
            slot.view(spec.moved(j * set_bytes)).copy_(t + j)
    for j in range(sets):
        for spec, t in zip(specs, (x, y)):
            here = spec.moved(j * set_bytes)
            for side in (slot, mapped):
                view = side.view(here)
                assert torch.equal(view, t + j)  # the slot's memory itself: no copy
                _reaches_only_its_own_bytes(view, here)
    mapped.view(specs[0].moved(set_bytes)).fill_(-1)  # writes through such a view are the judge's to see
    assert torch.equal(slot.view(specs[0].moved(set_bytes)), torch.full((3, 5), -1.0))
    empty = TensorSpec("float32", (0, 4), set_bytes, 0)
    assert slot.view(empty).shape == (0, 4)
    with pytest.raises(ValueError):
        slot.view(specs[0].moved(sets * set_bytes))


def test_a_cuda_slots_views_are_windows_of_its_allocation(monkeypatch):
    """The CUDA side of `Slot.view`, without a GPU: each tensor is asked of `cuda_bytes` for
    exactly its own range of the allocation (and holds the slot alive), never the whole slot.
    A host buffer stands in for the device allocation. The GPU test of the same is
    `tests/bench/test_gpu_guards.py::test_a_cuda_slots_views_reach_only_their_own_bytes`."""
    from cudal1.bench import slots

    x = torch.randn(3, 5)
    specs, set_bytes = plan([x, x])
    memory = bytearray(set_bytes * 3)
    base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    asked = []

    def fake_cuda_bytes(ptr: int, nbytes: int, device: str, owner=None) -> torch.Tensor:
        asked.append((ptr - base, nbytes, device, owner))
        return torch.frombuffer(memory, dtype=torch.uint8, count=nbytes, offset=ptr - base)

    monkeypatch.setattr(slots, "cuda_bytes", fake_cuda_bytes)
    slot = Slot.__new__(Slot)
    slot.device, slot.cuda, slot.nbytes, slot._ptr, slot._mm = "cuda:0", True, len(memory), base, None
    for j in range(3):
        for spec in specs:
            slot.view(spec.moved(j * set_bytes)).copy_(x * j)
    assert asked[-1] == (2 * set_bytes + specs[1].offset, specs[1].nbytes, "cuda:0", slot)
    assert [(a[0], a[1]) for a in asked] == [
        (j * set_bytes + spec.offset, spec.nbytes) for j in range(3) for spec in specs
    ]
    view = slot.view(specs[1].moved(set_bytes))
    assert torch.equal(view, x) and view.untyped_storage().nbytes() == specs[1].nbytes
    with pytest.raises(ValueError):
        slot.view(specs[0].moved(3 * set_bytes))


def test_an_integer_beyond_any_float_is_a_protocol_error():
    """A peer's 400-digit integer where a float belongs is the peer's fault (ProtocolError), not an
    OverflowError inside the judge."""
    with pytest.raises(ProtocolError):
        expect({"op": "loaded", "build_seconds": 10**400}, "loaded", build_seconds=float)


def test_a_literal_no_float_holds_is_refused(pair):
    """1e999 decodes to inf without passing through parse_constant: refused as NaN is."""
    judge, host = pair
    body = b'{"op": "done", "values": [[1e999]]}'
    host.sock.sendall(struct.pack("!I", len(body)) + body)
    with pytest.raises(ProtocolError):
        judge.recv(time.monotonic() + 5)


def _done(**changes):
    msg = {
        "op": "done",
        "k": 3,
        "inner_ms": [0.5],
        "leaves": [[{"addr": 4096, "strides": [64, 1]}]],
        "values": [[1.5, 64, "relu", None, True]],
        "mismatch": None,
        "hack": None,
        "error": None,
        "parts_ms": {"inputs": 0.1, "forwards": 0.5, "describe": 0.1},
    }
    msg.update(changes)
    return {k: v for k, v in msg.items() if v is not _DROP}


_DROP = object()


def test_a_host_message_is_checked_whole():
    """`expect_host` takes what the host sends and nothing else: every field typed, every number
    finite and in range (so that no float() or comparison of it raises later), no field missing or
    unknown."""
    assert expect_host(_done(), "done")["k"] == 3
    assert expect_host(_done(inner_ms=_DROP, parts_ms=_DROP, mismatch=_DROP), "done")  # optional
    bad = [
        dict(k=10**400),
        dict(k=-1),
        dict(k=True),
        dict(inner_ms=1),
        dict(inner_ms=[10**400]),
        dict(inner_ms=[-1.0]),
        dict(leaves=[[{"addr": 2**70, "strides": [64, 1]}]]),
        dict(leaves=[[{"addr": 0, "strides": [10**30]}]]),
        dict(leaves=[[{"addr": 0, "strides": [1], "x": 1}]]),
        dict(values=[[10**400]]),
        dict(values=[[{"a": 1}]]),
        dict(values=[["x" * 70_000]]),
        dict(error={"status": [], "message": 1}),
        dict(error="x"),
        dict(hack={"kind": [], "message": "x"}),
        dict(parts_ms={"forwards": 10**400}),
        dict(parts_ms=[]),
        dict(mismatch={"a": 1}),
        dict(leaves=_DROP),
        dict(zzz=1),
    ]
    for change in bad:
        with pytest.raises(ProtocolError):
            expect_host(_done(**change), "done")
    with pytest.raises(ProtocolError, match="expected checked"):
        expect_host(_done(), "checked")
    with pytest.raises(ProtocolError, match="out of range"):
        expect_host(
            {
                "op": "loaded",
                "ok": True,
                "status": None,
                "hack": None,
                "message": "",
                "build_seconds": 10**400,
                "labels": [],
                "patches": [],
                "canary": None,
            },
            "loaded",
        )


def test_random_host_messages_pass_or_are_a_protocol_error():
    """Thousands of random messages (random ops, fields, values of any JSON shape): `expect_host`
    either returns or raises ProtocolError, never anything else."""
    import random

    from cudal1.bench.wire import HOST_MESSAGES

    rng = random.Random(21)
    atoms = [None, True, False, 0, -1, 1.5, 2**64, 10**400, -(10**400), "", "x", "nan", [], {}, [1], {"a": 1}]

    def value(depth: int = 0):
        pick = rng.random()
        if depth > 4 or pick < 0.6:
            return rng.choice(atoms)
        if pick < 0.8:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {
            rng.choice(["addr", "strides", "handle", "offset", "status", "message", "x"]): value(depth + 1)
            for _ in range(rng.randrange(4))
        }

    passed = 0
    for _ in range(3000):
        op = rng.choice(list(HOST_MESSAGES))
        msg = {"op": op}
        base = {**HOST_MESSAGES[op].required, **HOST_MESSAGES[op].optional}
        for name in base:
            if rng.random() < 0.9:
                msg[name] = value()
        try:
            expect_host(msg, op)
            passed += 1
        except ProtocolError:
            pass
    assert passed < 3000
