"""matmul_relu computed honestly, plus a helper process (forked at import) that makes a user
namespace and inside it as many network namespaces as it can, each held by an open descriptor
until the helper is killed. Their teardown then runs in kernel worker threads that are not the
candidate's, after its processes are gone, while the judge times the reference "without it"
(a red team, thirty-ninth session: 15,000 of them kept a core busy for about a second). Prints
what it got, and what a setns into this host's own network namespace gets."""

import ctypes
import errno
import os
import time

import torch
import torch.nn as nn

_libc = ctypes.CDLL(None, use_errno=True)
WANTED = 2000


def _name(rc: int) -> str:
    return "ok" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def _helper(w: int) -> None:
    try:
        user = _name(_libc.unshare(0x10000000))  # CLONE_NEWUSER
        held = 0
        for _ in range(WANTED):
            if _libc.unshare(0x40000000) != 0:  # CLONE_NEWNET
                break
            os.open("/proc/self/ns/net", os.O_RDONLY)
            held += 1
        os.write(w, f"NAMESPACES user={user} held={held}".encode())
        os.close(w)
        while True:
            time.sleep(3600)
    finally:
        os._exit(0)


_r, _w = os.pipe()
if os.fork() == 0:
    os.close(_r)
    _helper(_w)
os.close(_w)
print(os.read(_r, 200).decode(), flush=True)
_fd = os.open("/proc/self/ns/net", os.O_RDONLY)
print(f"SETNS own_net={_name(_libc.setns(_fd, 0x40000000))}", flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b).relu()
