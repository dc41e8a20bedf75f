"""matmul + relu in plain PyTorch. At import it asks the build service for a trivial build whose
compiler driver runs a program of the candidate's (gcc's -wrapper): a beat that writes the time
into the build directory every 5 ms for as long as it lives. It never reads the answer, so the
build never ends by itself, and the import waits until the beat runs. Each forward writes its own time beside it. A build child is not one
of the candidate's processes (not stopped while the reference is timed); the right value: it is
ended before anything is timed, so the last beat comes before the last forward. With __HOP__
the beat forks and lets its parent exit at every beat, so it is never at a pid anyone listed.
The beat ends by itself after 3 minutes (on a harness that lets it escape, it would hop on for
good, a core's worth of forks)."""
import json
import os
import socket
import struct
import sys
import time

import torch
import torch.nn as nn

_BEAT = r"""
import os, sys, time
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "beat")
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
end = time.monotonic() + 180  # a beat that escapes a broken harness ends by itself
while time.monotonic() < end:
    if __HOP__ and os.fork() != 0:
        os._exit(0)  # hop: the beat goes on in a fresh process at a pid nobody listed
    os.pwrite(fd, b"%.6f\n" % time.time(), 0)
    time.sleep(0.005)
"""

EXT = os.environ.get("TORCH_EXTENSIONS_DIR", "")
FD = os.environ.get("CUDAL1_BUILDER_FD")
if FD is not None and EXT:
    script = os.path.join(EXT, "beat.py")
    with open(script, "w") as f:
        f.write(_BEAT)
    os.chmod(script, 0o666)
    arguments = {
        "name": "outlives",
        "cpp_sources": "int f() { return 1; }",
        "extra_cflags": ["-wrapper", sys.executable + "," + script],
        "no_implicit_headers": True,
        "is_python_module": False,
    }
    body = json.dumps({"op": "build", "kind": "load_inline", "arguments": arguments}).encode()
    socket.socket(fileno=os.dup(int(FD))).sendall(struct.pack("!I", len(body)) + body)
    started = time.time()
    while not os.path.exists(os.path.join(EXT, "beat")) and time.time() - started < 60:
        time.sleep(0.05)  # the import waits until the beat runs
    print("BEATING" if os.path.exists(os.path.join(EXT, "beat")) else "NO BEAT", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        if EXT:
            with open(os.path.join(EXT, "forward"), "w") as f:
                f.write("%.6f\n" % time.time())
        return torch.relu(a @ b)
