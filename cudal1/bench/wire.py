"""The channel between the judge and the candidate host: framed JSON over a Unix socket pair.

Each message is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object with an
"op" key). The judge may attach file descriptors to one message (the CPU backend's shared-memory
slots, by SCM_RIGHTS). Nothing is ever unpickled by the judge: what the candidate host sends is
data, checked field by field (`expect`), and anything else on the socket — bytes that are not a
frame, a frame over `MAX_FRAME` bytes, an op the protocol does not expect at that point, a field
of the wrong type — is a `ProtocolError`, which the judge turns into a hack verdict
(harness_tampering): only candidate code can make the host say something it does not say.

Every message a host sends is checked whole, in one place, before the judge uses any of it
(`expect_host`, against `HOST_MESSAGES`): each field's type, that every number is finite and in
the range the judge's arithmetic and the parent's records can hold, every length and nesting
depth, and that no field is missing or unknown. Whatever passes is data the judge can compute
with without raising; whatever does not is the sender's fault. The decoder already refuses
frames that are not JSON, nested too deep, or hold NaN, ±Infinity or a literal (1e999) no float
holds.

The judge -> host direction may carry `blob` fields (base64 of `torch.save` bytes, e.g. the
constructor arguments): the host trusts the judge, never the other way round.
"""

from __future__ import annotations

import base64
import io
import json
import math
import select
import socket
import struct
import time
from typing import Any

MAX_FRAME = 1 << 20
"""Largest frame the judge reads (bytes). A host message is a few hundred bytes."""
_HEADER = struct.Struct("!I")


class ProtocolError(Exception):
    """The peer sent something the protocol does not allow (malformed, oversized, unexpected)."""


class PeerGone(Exception):
    """The peer closed its end (it exited or was killed)."""


class Timeout(Exception):
    """No message arrived before the deadline."""


class Channel:
    """One end of the judge <-> host socket pair.

    `deadline` arguments are absolute `time.monotonic()` values (CLOCK_MONOTONIC is system-wide,
    so the parent, the judge and the host agree on them); None waits forever.
    """

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME) -> None:
        self.sock = sock
        self.sock.setblocking(True)
        self.max_frame = max_frame
        """Largest frame `recv` takes (bytes)."""
        self._buf = bytearray()
        self.received_fds: list[int] = []
        """Descriptors that came with a message received with `max_fds` > 0."""

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, op: str, fds: list[int] | None = None, **fields: Any) -> None:
        """Send {"op": op, **fields}, with `fds` attached to its first bytes (SCM_RIGHTS) if given.
        Raises PeerGone if the other end is closed."""
        body = json.dumps({"op": op, **fields}, allow_nan=False).encode()
        frame = _HEADER.pack(len(body)) + body
        try:
            if fds:
                sent = socket.send_fds(self.sock, [frame], fds)
                self.sock.sendall(frame[sent:])
            else:
                self.sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise PeerGone(str(exc)) from exc

    def recv(self, deadline: float | None = None, max_fds: int = 0, spin: bool = False) -> dict[str, Any]:
        """The next message (a dict with a string "op"). With `max_fds`, descriptors sent along
        are collected in `received_fds`. With `spin`, wait by polling the socket on this core
        instead of sleeping in the kernel: no wake-up latency, for waits of a few microseconds
        that every host makes the same way (`cudal1.bench.host`, a revealed round trip). Raises
        Timeout, PeerGone, ProtocolError."""
        while True:
            if len(self._buf) >= _HEADER.size:
                (n,) = _HEADER.unpack_from(self._buf)
                if n > self.max_frame:
                    raise ProtocolError(f"frame of {n} bytes (limit {self.max_frame})")
                if len(self._buf) >= _HEADER.size + n:
                    raw = bytes(self._buf[_HEADER.size : _HEADER.size + n])
                    del self._buf[: _HEADER.size + n]
                    return _decode(raw)
            self._wait(deadline, spin)
            try:
                if max_fds:
                    chunk, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, max_fds)
                    self.received_fds += fds
                else:
                    chunk = self.sock.recv(1 << 16)
            except ConnectionResetError as exc:
                raise PeerGone(str(exc)) from exc
            if not chunk:
                raise PeerGone("the peer closed the channel")
            self._buf += chunk

    def pending(self) -> bool:
        """True when bytes are buffered or waiting on the socket (an unsolicited message)."""
        if self._buf:
            return True
        ready, _, _ = select.select([self.sock], [], [], 0)
        return bool(ready)

    def _wait(self, deadline: float | None, spin: bool = False) -> None:
        if spin:
            while not select.select([self.sock], [], [], 0)[0]:
                if deadline is not None and time.monotonic() > deadline:
                    raise Timeout("no message before the deadline")
            return
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            raise Timeout("no message before the deadline")

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _decode(raw: bytes) -> dict[str, Any]:
    try:
        msg = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)
    except Exception as exc:  # noqa: BLE001 - also RecursionError from "[[[[..." nested too deep
        raise ProtocolError(f"a frame that is not JSON ({type(exc).__name__})") from exc
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise ProtocolError("a message without an op")
    return msg


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # "1e999" decodes to inf without passing through parse_constant
        raise ValueError("a number beyond any float")
    return value


def expect(msg: dict[str, Any], op: str | tuple[str, ...], **types: Any) -> dict[str, Any]:
    """Check that `msg` is the op(s) expected now and that each named field has the given type.

    `types` maps field name -> a type or tuple of types (`float` accepts ints too; a field typed
    `list` may hold anything JSON-decodable, checked by the caller). Raises ProtocolError naming
    the first problem. Returns `msg`.
    """
    ops = (op,) if isinstance(op, str) else op
    if msg.get("op") not in ops:
        raise ProtocolError(f"expected {'/'.join(ops)}, got {str(msg.get('op'))[:40]!r}")
    for name, kind in types.items():
        value = msg.get(name)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:  # an integer beyond any float: the peer's fault, like any bad field
                raise ProtocolError(f"{msg['op']}.{name} is out of range") from None
        if isinstance(value, bool) and bool not in kinds:
            raise ProtocolError(f"{msg['op']}.{name} has the wrong type")
        if not isinstance(value, kinds):
            raise ProtocolError(f"{msg['op']}.{name} has the wrong type ({type(value).__name__})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ProtocolError(f"{msg['op']}.{name} is not finite")
    return msg


# -- what a host may send ----------------------------------------------------------------------------


class Shape:
    """What one value of a host's message may be. `check(value, where)` returns the value or raises
    ProtocolError naming `where` (the field's path)."""

    def check(self, value: Any, where: str) -> Any:
        raise NotImplementedError


class Int(Shape):
    """An integer (not a bool) in [lo, hi]."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected an integer)")
        if not self.lo <= value <= self.hi:
            raise ProtocolError(f"{where} is out of range")
        return value


class Num(Shape):
    """A finite number (an int or a float, not a bool) in [lo, hi]: within a float's range, so
    `float()` of it never overflows."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected a number)")
        if isinstance(value, int) and not -(2**1000) < value < 2**1000:  # compared without float(): no overflow
            raise ProtocolError(f"{where} is out of range")
        if not (math.isfinite(float(value)) and self.lo <= value <= self.hi):
            raise ProtocolError(f"{where} is out of range or not finite")
        return value


class Str(Shape):
    """A string of at most `most` characters."""

    def __init__(self, most: int = 1 << 16) -> None:
        self.most = most

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, str):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected a string)")
        if len(value) > self.most:
            raise ProtocolError(f"{where} is longer than {self.most} characters")
        return value


class Bool(Shape):
    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, bool):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected a bool)")
        return value


class Null(Shape):
    def check(self, value: Any, where: str) -> Any:
        if value is not None:
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected null)")
        return value


class OneOf(Shape):
    """The first of `shapes` that `value` fits."""

    def __init__(self, *shapes: Shape) -> None:
        self.shapes = shapes

    def check(self, value: Any, where: str) -> Any:
        problems = []
        for shape in self.shapes:
            try:
                return shape.check(value, where)
            except ProtocolError as exc:
                problems.append(str(exc))
        raise ProtocolError(" / ".join(problems)[:300])


def Opt(shape: Shape) -> Shape:  # noqa: N802 - reads like the other shapes
    """`shape` or null."""
    return OneOf(Null(), shape)


class List(Shape):
    """A list of at most `most` items, each of shape `item`."""

    def __init__(self, item: Shape, most: int) -> None:
        self.item, self.most = item, most

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, list):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected a list)")
        if len(value) > self.most:
            raise ProtocolError(f"{where} has more than {self.most} items")
        for i, item in enumerate(value):
            self.item.check(item, f"{where}[{i}]")
        return value


class Obj(Shape):
    """An object with exactly the `required` keys, and any of the `optional` ones, each of its
    shape; no other key."""

    def __init__(self, required: dict[str, Shape] | None = None, optional: dict[str, Shape] | None = None) -> None:
        self.required, self.optional = required or {}, optional or {}

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected an object)")
        for name, shape in self.required.items():
            if name not in value:
                raise ProtocolError(f"{where}.{name} is missing")
        for name, item in value.items():
            shape = self.required.get(name) or self.optional.get(name)
            if shape is None:
                raise ProtocolError(f"{where} has a field the protocol does not know ({str(name)[:40]!r})")
            shape.check(item, f"{where}.{name}")
        return value


class Map(Shape):
    """An object of at most `most` keys of at most `key_chars` characters, each value of shape `value`."""

    def __init__(self, value: Shape, most: int, key_chars: int = 64) -> None:
        self.value, self.most, self.key_chars = value, most, key_chars

    def check(self, value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where} has the wrong type ({type(value).__name__}, expected an object)")
        if len(value) > self.most or any(len(k) > self.key_chars for k in value):
            raise ProtocolError(f"{where} has too many or too long keys")
        for name, item in value.items():
            self.value.check(item, f"{where}.{name[:40]}")
        return value


MAX_MS = 1e9
"""The largest time a host may report (ms: about 11 days)."""
MAX_CALLS = 1 << 16
"""More calls than any round trip has (`EvalSettings.max_calls_per_round`), a bound on lists per call."""
_LABELS = List(Str(1 << 16), 64)
_STRIDES = List(Int(0, 2**48), 64)
_LEAF = OneOf(
    Obj({"addr": Int(0, 2**64 - 1), "strides": _STRIDES}),  # CPU: an address in the host
    Obj({"handle": Str(256), "offset": Int(0, 2**48), "strides": _STRIDES}),
)  # CUDA: an IPC handle
_VALUE = OneOf(Null(), Bool(), Int(-(2**63), 2**64 - 1), Num(-1.8e308, 1.8e308), Str(1 << 16))
"""A non-tensor output leaf as `correctness.encode_value` writes it."""
_KERNELS = Obj(
    {
        "device": Str(16),
        "total_ms": Num(0.0, MAX_MS),
        "launches": Int(0, 2**62),
        "top": List(Obj({"name": Str(1 << 16), "ms": Num(0.0, MAX_MS), "calls": Int(0, 2**62)}), 16),
    }
)
"""A profile of one forward (`cudal1.bench.kernelprofile.summarize`)."""
_FAILURE = Obj({"status": Str(64), "message": Str()}, {"hack": Opt(Str(64)), "labels": _LABELS})
_SANDBOX = Obj(
    optional={
        "enabled": Bool(),
        "uid": Int(-1, 2**32),
        "gid": Int(-1, 2**32),
        "landlock_abi": Int(0, 1000),
        "threads": Int(0, 1 << 20),
        "measures": Map(Obj({"requested": Bool(), "active": Bool(), "detail": Str()}), 64),
    }
)

HOST_MESSAGES: dict[str, Obj] = {
    "hello": Obj({"sandbox": _SANDBOX}),
    "ready": Obj(),
    "polling": Obj(),
    "loaded": Obj(
        {
            "ok": Bool(),
            "status": Opt(Str(64)),
            "hack": Opt(Str(64)),
            "message": Str(),
            "build_seconds": Num(0.0, 1e7),
            "labels": _LABELS,
            "patches": _LABELS,
            "canary": Opt(Str()),
        },
    ),
    "checked": Obj({"patches": _LABELS, "canary": Opt(Str()), "labels": _LABELS}),
    "done": Obj(
        {
            "k": Int(0, 2**62),
            "leaves": List(List(_LEAF, 4096), MAX_CALLS),
            "values": List(List(_VALUE, 4096), MAX_CALLS),
        },
        {
            "inner_ms": List(Num(0.0, MAX_MS), MAX_CALLS),
            "mismatch": Opt(Str()),
            "error": Opt(_FAILURE),
            "hack": Opt(Obj({"kind": Str(64), "message": Str()})),
            "parts_ms": Map(Num(0.0, MAX_MS), 16),
        },
    ),
    "placed": Obj({"j": Int(0, MAX_CALLS), "leaves": List(_LEAF, 4096), "values": List(_VALUE, 4096)}),
    "audited": Obj({"hack": Opt(Obj({"kind": Str(64), "message": Str()}))}, {"parts_ms": Map(Num(0.0, MAX_MS), 16)}),
    "profiled": Obj(
        {"ops": List(Str(300), 500), "dtypes": List(Str(64), 500), "side_streams": Bool()},
        {"error": Opt(Str()), "leaves": List(_LEAF, 4096), "values": List(_VALUE, 4096)},
    ),
    "kernels": Obj(optional={"kernels": _KERNELS}),
}
"""Every message a host (`cudal1.bench.host`) sends, field by field: what `expect_host` checks."""


BUILD_RECORD = Obj(
    {
        "stage": Str(300),
        "building": Int(0, 1 << 20),
        "builds": Int(0, 1 << 30),
        "build_seconds": Num(0.0, 1e7),
        "failures": List(Obj({"name": Str(4096), "message": Str(), "cached": Bool()}), 64),
        "wall_s": Num(0.0, 1e7),
    },
    {"ok": Bool(), "build_error": Bool(), "message": Str(), "stopped": Str(300)},
)
"""The prebuild's record of itself (`cudal1.bench.targets._Progress`), which the child that
imports the candidate writes to a file the parent then reads (`expect_record`)."""


def expect_record(value: Any) -> dict[str, Any]:
    """Check a prebuild record (decoded JSON from a file a sandboxed child wrote) against
    `BUILD_RECORD`. Raises ProtocolError naming the first problem; returns `value`."""
    return BUILD_RECORD.check(value, "record")


def expect_host(msg: dict[str, Any], op: str) -> dict[str, Any]:
    """Check that `msg` (a decoded frame from a host) is the op expected now and that the whole
    message has the shape `HOST_MESSAGES` gives it: every field of the right type, numbers finite
    and in range, lengths bounded, no field missing or unknown. Raises ProtocolError naming the
    first problem; returns `msg`, which the judge can then use without further checks of type."""
    if msg.get("op") != op:
        raise ProtocolError(f"expected {op}, got {str(msg.get('op'))[:40]!r}")
    HOST_MESSAGES[op].check({k: v for k, v in msg.items() if k != "op"}, op)
    return msg


def str_list(value: Any, limit: int = 64, length: int = 300) -> list[str]:
    """A list of at most `limit` strings from the peer, each cut to `length` characters."""
    if not isinstance(value, list) or len(value) > limit or not all(isinstance(v, str) for v in value):
        raise ProtocolError("expected a short list of strings")
    return [v[:length] for v in value]


def blob(obj: Any) -> str:
    """`obj` as torch.save bytes in base64 (judge -> host only)."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return base64.b64encode(buf.getvalue()).decode()


def unblob(text: str) -> Any:
    """Inverse of `blob`; the host calls it on what the judge sent (never the reverse)."""
    import torch

    return torch.load(io.BytesIO(base64.b64decode(text)), weights_only=False)


__all__ = [
    "Channel",
    "PeerGone",
    "ProtocolError",
    "Timeout",
    "blob",
    "expect",
    "expect_host",
    "expect_record",
    "str_list",
    "unblob",
    "BUILD_RECORD",
    "HOST_MESSAGES",
    "MAX_FRAME",
]
