"""matmul + relu in plain PyTorch, whose import sends the builder requests it cannot take: a
wrong type (a number as the sources), a source over the size limit, and raw frames written to the
builder's socket (a frame that is not JSON, then, on a fresh look, a frame of the wrong op). It
catches each failure and prints it."""
import os
import socket
import struct

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

for label, call in (
    ("wrong type", lambda: load_inline(name="bad_type", cpp_sources=12345)),
    ("huge", lambda: load_inline(name="bad_huge", cpp_sources="x" * (5 * 2**20))),
    ("bad name", lambda: load_inline(name="../escape", cpp_sources="int f() { return 1; }")),
):
    try:
        call()
        print("REQUEST", label, "ACCEPTED", flush=True)
    except Exception as exc:  # noqa: BLE001
        print("REQUEST", label, "REFUSED", type(exc).__name__, str(exc)[:200], flush=True)

fd = os.environ.get("CUDAL1_BUILDER_FD")
if fd is not None:
    sock = socket.socket(fileno=os.dup(int(fd)))
    body = b'{"op": "build", "kind": "load_inline", "arguments": {"name": 1}}'
    sock.sendall(struct.pack("!I", len(body)) + body)
    print("RAW ANSWER", sock.recv(4096)[4:300], flush=True)
    sock.sendall(struct.pack("!I", 9) + b"not json!")
    print("RAW ANSWER", sock.recv(4096)[4:300], flush=True)
try:
    load_inline(name="after_garbage", cpp_sources="int f() { return 1; }")
except Exception as exc:  # noqa: BLE001
    print("AFTER GARBAGE", type(exc).__name__, str(exc)[:200], flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)
