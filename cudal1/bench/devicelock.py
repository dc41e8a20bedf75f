"""One timed evaluation per device at a time, however many evaluations run on it.

Several evaluations may share a GPU (a benchmark actor taking two candidates at once, two pools on
one host): everything before the reference is timed (starting three processes, loading the task,
setting up the input slots) overlaps with another evaluation's timing, and everything from the
calibration to the last reference call runs alone on the device. The evaluator's parent process
holds the lock on the judge's behalf (the judge is sandboxed and cannot create files outside its
scratch directory), so a judge that dies releases it with its parent's file descriptor.

The lock is an advisory `flock` on a file named after the device's UUID under
`$CUDAL1_LOCK_DIR` (default `<tmp>/cudal1-device-locks`): every evaluator of one host, in any
process, sees the same lock for the same GPU whatever its `CUDA_VISIBLE_DEVICES` numbering.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from pathlib import Path


def lock_dir() -> Path:
    """$CUDAL1_LOCK_DIR, else `<tmp>/cudal1-device-locks` (created with mode 0o1777)."""
    path = Path(os.environ.get("CUDAL1_LOCK_DIR") or Path(tempfile.gettempdir()) / "cudal1-device-locks")
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(path, 0o1777)  # evaluators of other users share it
        except OSError:
            pass
    return path


class DeviceLock:
    """An exclusive, blocking, process-wide lock on one device, keyed by its UUID (a string such
    as "GPU-5c1e..."). `hold()` blocks until the lock is free and returns the seconds it waited;
    `release()` is idempotent. Raises OSError when the lock file cannot be opened."""

    def __init__(self, key: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:120] or "device"
        self.path = lock_dir() / f"{safe}.lock"
        self._fd: int | None = None

    def hold(self) -> float:
        if self._fd is not None:
            return 0.0
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        started = time.monotonic()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return time.monotonic() - started

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None
