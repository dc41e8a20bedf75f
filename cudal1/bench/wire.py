"""The channel between the judge and the candidate host: framed JSON over a Unix socket pair.

Each message is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object with an
"op" key). The judge may attach file descriptors to one message (the CPU backend's shared-memory
slots, by SCM_RIGHTS). Nothing is ever unpickled by the judge: what the candidate host sends is
data, checked field by field (`expect`), and anything else on the socket — bytes that are not a
frame, a frame over `MAX_FRAME` bytes, an op the protocol does not expect at that point, a field
of the wrong type — is a `ProtocolError`, which the judge turns into a hack verdict
(harness_tampering): only candidate code can make the host say something it does not say.

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

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(True)
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

    def recv(self, deadline: float | None = None, max_fds: int = 0) -> dict[str, Any]:
        """The next message (a dict with a string "op"). With `max_fds`, descriptors sent along
        are collected in `received_fds`. Raises Timeout, PeerGone, ProtocolError."""
        while True:
            if len(self._buf) >= _HEADER.size:
                (n,) = _HEADER.unpack_from(self._buf)
                if n > MAX_FRAME:
                    raise ProtocolError(f"frame of {n} bytes (limit {MAX_FRAME})")
                if len(self._buf) >= _HEADER.size + n:
                    raw = bytes(self._buf[_HEADER.size:_HEADER.size + n])
                    del self._buf[:_HEADER.size + n]
                    return _decode(raw)
            self._wait(deadline)
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

    def _wait(self, deadline: float | None) -> None:
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
        msg = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except Exception as exc:  # noqa: BLE001 - also RecursionError from "[[[[..." nested too deep
        raise ProtocolError(f"a frame that is not JSON ({type(exc).__name__})") from exc
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise ProtocolError("a message without an op")
    return msg


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


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


__all__ = ["Channel", "PeerGone", "ProtocolError", "Timeout", "blob", "expect", "str_list", "unblob", "MAX_FRAME"]
