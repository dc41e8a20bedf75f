"""A wrong answer (zeros) whose import first fills the system's table of open files (fs.file-max):
helper processes raise their RLIMIT_NOFILE to its hard limit and open eventfds until the kernel
refuses (ENFILE), then sleep holding them. The judge and the reference host run as unprivileged
users (no CAP_SYS_ADMIN), so their next new file (the judge's memfd input slot of trial 1) fails.
"""
import os
import resource
import time

import torch
import torch.nn as nn


def _hoard(ready_w: int) -> None:
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    held = []
    why = b"M"  # this process's own limit (EMFILE)
    while True:
        try:
            held.append(os.eventfd(0))
        except OSError as exc:
            if exc.errno == 23:  # ENFILE: the system's table is full
                why = b"N"
            break
    os.write(ready_w, why)
    time.sleep(120)  # long enough for the evaluation; a helper a broken harness missed ends anyway


def _fill_file_table() -> str:
    with open("/proc/sys/fs/file-nr") as f:
        used, _, most = (int(v) for v in f.read().split())
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    helpers = min(1500, (most - used) // max(hard - 16, 1) + 4)
    r, w = os.pipe()
    for _ in range(helpers):
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                _hoard(w)
            finally:
                os._exit(0)
    os.close(w)
    got = b""
    deadline = time.monotonic() + 40
    while len(got) < helpers and b"N" not in got and time.monotonic() < deadline:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        got += chunk
    os.close(r)
    return f"HOARDED helpers={helpers} full={b'N' in got}"


print(_fill_file_table(), flush=True)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.zeros(a.shape[0], b.shape[1])
