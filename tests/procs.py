"""For tests that start processes of their own (servers, proxies) in a new session."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_process_group(proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Stop the process group `proc` leads (started with start_new_session=True): SIGTERM, then
    SIGKILL after `timeout_s`. Nothing to do when it has already exited."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
