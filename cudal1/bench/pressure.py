"""Resources every process of the machine shares, which a candidate can use up for the judge and
the reference host too: the system's open-file table, the disk under the scratch directories,
the device's memory. A failure of the harness's own code while one of them is exhausted, or one
that says so (`RESOURCE_ERRNOS`), is charged to the candidate (`Judge._judge_failure`): masked as
the harness's, it would be a failure a policy could learn to provoke."""

from __future__ import annotations

import errno
import os
from typing import Iterable

RESOURCE_ERRNOS = frozenset({errno.ENFILE, errno.ENOSPC, errno.EDQUOT, errno.ENOMEM})
"""errno values that name a shared resource used up (the system's file table, a filesystem's
space or quota, memory). Not EMFILE: that is the raising process's own descriptor limit."""
FILE_TABLE_MARGIN = 0.01
"""The file table counts as full when fewer than this share of `fs.file-max` handles is left."""
DISK_MARGIN_BYTES = 16 << 20
"""A filesystem counts as full when an unprivileged user may write less than this (bytes)."""
DEVICE_MARGIN_BYTES = 256 << 20
"""The device's memory counts as used up when less than this is free (bytes)."""


def resource_errno(exc: BaseException | None) -> OSError | None:
    """The first OSError with an errno of `RESOURCE_ERRNOS` in `exc`'s chain of causes, or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def exhausted(paths: Iterable[str], cuda: bool = False) -> str | None:
    """A sentence naming the first shared resource that is used up now, or None: the system's
    open-file table (`/proc/sys/fs/file-nr`), the filesystem of each of `paths` (space an
    unprivileged user may still write, `statvfs`), and with `cuda` the current device's free
    memory. Never raises: a resource that cannot be read counts as not exhausted."""
    try:
        with open("/proc/sys/fs/file-nr") as f:
            used, _, most = (int(v) for v in f.read().split()[:3])
        if most > 0 and most - used < FILE_TABLE_MARGIN * most:
            return f"the system's open-file table is full ({used} of {most})"
    except (OSError, ValueError):
        pass
    for path in paths:
        try:
            st = os.statvfs(path)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize < DISK_MARGIN_BYTES:
            return f"the filesystem of {path} is full ({st.f_bavail * st.f_frsize} bytes left)"
    if cuda:
        try:
            import torch

            free, _ = torch.cuda.mem_get_info()
            if free < DEVICE_MARGIN_BYTES:
                return f"the device's memory is used up ({free >> 20} MiB free)"
        except Exception:  # noqa: BLE001 - a device in a bad state: the caller's own checks decide
            pass
    return None
