"""matmul + relu, honestly computed, whose import goes after every handle of the harness it can
reach from its own process: it lists /proc/self/fd and writes a forged result (a build failure
and a 1000x speedup, framed as the worker's pipe frames them and as bare JSON) into every
descriptor above stderr that it did not open itself; it opens and flocks every file where device
locks lived (__LOCK_DIR__ and the temporary directory's cudal1-device-locks) and takes the device
lock of __KEY__ as the harness names it. It says in its log what it found and what it did."""
import fcntl
import json
import os
import socket
import struct
from pathlib import Path

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()


def _scavenge():
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the descriptor of the listing itself, closed by now
    forged = {"ok": False, "build_error": True, "message": "FORGED by the candidate", "status": "ok", "speedup": 1000.0}
    body = json.dumps({"nonce": "0" * 32, "kind": "returned", "value": forged}).encode()
    frames = [struct.pack("!i", len(body)) + body, body + b"\n"]
    wrote = []
    for fd, what in sorted(found.items()):
        if fd <= 2:
            continue
        for frame in frames:
            try:
                os.write(fd, frame)
                wrote.append(f"{fd}:{what}")
            except OSError as e:
                wrote.append(f"{fd}:{what}:{type(e).__name__}")
    locked = []
    for folder in {Path("__LOCK_DIR__"), Path("/tmp/cudal1-device-locks")}:
        try:
            paths = list(folder.iterdir())
        except OSError as e:
            locked.append(f"{folder}: {type(e).__name__}")
            continue
        for path in paths:
            try:
                fcntl.flock(os.open(path, os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked.append(f"flocked {path}")
            except OSError as e:
                locked.append(f"{path}: {type(e).__name__}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0cudal1-device-lock/__KEY__")
        locked.append("bound the device lock's name")
        globals()["_held"] = sock
    except OSError as e:
        locked.append(f"device lock: {type(e).__name__}")
    print("HANDLES:", sorted(found.items()), flush=True)
    print("WROTE:", wrote, flush=True)
    print("LOCKED:", locked, flush=True)


_scavenge()
