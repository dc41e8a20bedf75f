"""The nested_outputs task's honest answer, whose host then garbles one of its answers to the
judge (the fuzz of the wire, tests/bench/test_wire_fuzz.py): the __NTH__th message with op
"__OP__" sent from the import on is replaced as KIND says (FIELD: a field, VALUE: raw JSON text)."""
import collections
import json
import socket
import struct
import sys

import torch
import torch.nn as nn

OP, NTH, KIND, NAME, VALUE = "__OP__", int("__NTH__"), "__KIND__", "__FIELD__", __VALUE__
Parts = collections.namedtuple("Parts", ["lo", "hi"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        y = (a @ b).relu()
        return {"y": y, "parts": Parts(torch.minimum(a, b), torch.maximum(a, b)),
                "stats": (y.mean().item(), 64, "relu", None, True)}


def _frame(sock, body):
    try:
        sock.sendall(struct.pack("!I", len(body)) + body)
    except OSError:
        pass


def _with(fields, name, raw):
    """`fields` as JSON text with `name` set to the raw JSON text `raw` (None: left out)."""
    rest = {k: v for k, v in fields.items() if k != name}
    text = json.dumps(rest)
    return (text if raw is None else text[:-1] + (", " if rest else "") + f'"{name}": {raw}' + "}").encode()


def _take_over():
    f = sys._getframe(1)
    while f is not None and "handlers" not in f.f_locals:
        f = f.f_back
    chan = f.f_locals["self"].chan
    send, sock, seen = chan.send, chan.sock, []

    def garbled(op, fds=None, **fields):
        if op != OP or len(seen) >= NTH:
            return send(op, fds=fds, **fields)
        seen.append(op)
        if len(seen) < NTH:
            return send(op, fds=fds, **fields)
        msg = {"op": op, **fields}
        if KIND == "set":
            _frame(sock, _with(msg, NAME, VALUE))
        elif KIND == "drop":
            _frame(sock, _with(msg, NAME, None))
        elif KIND == "extra":
            _frame(sock, _with(msg, "zzz_extra", VALUE))
        elif KIND == "wrong_op":
            _frame(sock, _with({**msg, "op": VALUE}, "zzz", None))
        elif KIND == "raw":
            _frame(sock, VALUE.encode("latin-1"))
        elif KIND == "oversized":
            sock.sendall(struct.pack("!I", 2**31) + b"{")
        elif KIND == "truncated":
            sock.sendall(struct.pack("!I", 1000) + b'{"op": "do')
            sock.shutdown(socket.SHUT_RDWR)
        elif KIND == "close":
            sock.shutdown(socket.SHUT_RDWR)
        elif KIND == "twice":
            send(op, fds=fds, **fields)
            send(op, fds=fds, **fields)
        elif KIND == "unsolicited":
            send(op, fds=fds, **fields)
            send("done", k=0, leaves=[], values=[])
        print("GARBLED", OP, NTH, KIND, NAME, flush=True)

    chan.send = garbled


_take_over()
