"""One timed evaluation per device at a time, however many evaluations run on it.

Several evaluations may share a GPU (a benchmark actor taking two candidates at once, two pools on
one host): everything before the reference is timed (starting three processes, loading the task,
setting up the input slots) overlaps with another evaluation's timing, and everything from the
calibration to the last reference call runs alone on the device. The evaluator's parent process
holds the lock on the judge's behalf (the judge is sandboxed), so a judge that dies releases it
with its parent's socket.

The lock is a Unix socket bound to an abstract address named after the device's UUID
(`\\0cudal1-device-lock/<uuid>`): the kernel lets one socket of a network namespace hold a name, and
releases it when the socket is closed or its process dies. Every evaluator of one host in the
same network namespace, in any process and of any user, sees the same lock for the same GPU
whatever its `CUDA_VISIBLE_DEVICES` numbering.

Why not a file: a lock file that evaluators of every user can open can be opened and `flock`ed by
a candidate too (it keeps CAP_DAC_READ_SEARCH, `cudal1.bench.sandbox`), stalling every evaluation
on that GPU. An abstract address belongs to a network namespace and is no file: a sandboxed
process lives in a network namespace of its own (and, where Landlock scoping exists, cannot reach
abstract sockets outside its sandbox), so nothing it binds or connects to is this lock. Where the
sandbox could not give it a network namespace (the report's `network` measure), a candidate that
binds the address first stalls the evaluations of that GPU (README, limits).
"""

from __future__ import annotations

import errno
import re
import socket
import time

PREFIX = "cudal1-device-lock/"
"""The abstract socket name of a device's lock is PREFIX + its key (the UUID, made safe)."""
_POLL_S = (0.001, 0.02)
"""The wait between two attempts to take a held lock: doubling from the first to the second (s)."""


class DeviceLock:
    """An exclusive, blocking, host-wide lock on one device, keyed by its UUID (a string such as
    "GPU-5c1e..."). `hold()` blocks until the lock is free and returns the seconds it waited;
    `release()` is idempotent. Raises OSError when no socket can be made or bound for a reason
    other than the lock being held."""

    def __init__(self, key: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:80] or "device"
        self.name = PREFIX + safe
        self.address = "\0" + self.name
        self._sock: socket.socket | None = None

    def hold(self) -> float:
        """Take the lock, waiting as long as another holder keeps it. Returns the seconds waited."""
        if self._sock is not None:
            return 0.0
        started = time.monotonic()
        pause = _POLL_S[0]
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                sock.bind(self.address)
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EADDRINUSE:
                    raise
            else:
                self._sock = sock
                return time.monotonic() - started
            time.sleep(pause)
            pause = min(2 * pause, _POLL_S[1])

    def release(self) -> None:
        """Let the next holder take it (a no-op when not held)."""
        if self._sock is not None:
            sock, self._sock = self._sock, None
            sock.close()

    @property
    def held(self) -> bool:
        return self._sock is not None
