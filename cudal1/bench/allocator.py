"""The memory allocator of the evaluation processes (the fork server, so the judge and both hosts).

Why: a forward's large temporaries must land in memory the process already holds, the same in
every host, or the timer counts the kernel zeroing fresh pages. With glibc's malloc (even with
`worker.SERVER_ENV`'s settings: no mmap'd chunks, no trimming) small allocations that a host keeps
between calls (messages, views, the last outputs) split the freed large chunks, the next 32 MiB
temporary no longer fits in them, and the heap grows into untouched pages: on level1/17 (CPU) a
round trip then faulted in 8192 pages per temporary and took 20-150% longer a call, in either
host, by the allocator's state rather than by the code (docs/benchmarks.md, twenty-third
session). jemalloc with its decay switched off keeps freed pages resident and reuses them: the
same loop faults only on its first call.

Opt-in: `CUDAL1_HOST_ALLOCATOR=jemalloc` (default "glibc", unchanged). On the CPU it removed the
faults from every timed round trip and moved the judge's readings toward one process's
(level1/17's fast variant 1.30x against 1.10x with glibc, one process 1.37-1.40x; its reference
as the candidate 0.91x against 0.85x, one process 0.98-1.00x; level1/3 equal or better), but the
honest candidate still reads below 1.0x, so the faults are not that bias's cause; and it has not
been through the GPU acceptance (docs/benchmarks.md, twenty-third session).

`server_env()` gives the environment that makes the fork server load jemalloc (`LD_PRELOAD`, read
when the server's interpreter starts) where it is asked for and a library is found; importing
this module in the server (it is the first of `worker._PRELOAD`) takes `LD_PRELOAD` out of the
server's environment again, so that nothing the evaluations start (compilers, ninja) inherits it.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import os
from pathlib import Path

JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
"""jemalloc options: freed pages are never purged (they stay resident for the next allocation)."""
_MARK = "CUDAL1_SERVER_PRELOAD"
"""Set beside `LD_PRELOAD` in the server's environment: the preload this module removes again."""


def jemalloc_path() -> str | None:
    """A jemalloc shared library to preload: the system's (`libjemalloc.so.2`), else the one the
    installed Ray wheel ships (`ray/core/libjemalloc.so`); None when there is neither."""
    found = ctypes.util.find_library("jemalloc")
    if found:
        for root in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
            if Path(root, found).is_file():
                return str(Path(root, found))
    spec = importlib.util.find_spec("ray")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "core" / "libjemalloc.so"
        if bundled.is_file():
            return str(bundled)
    return None


def server_env() -> dict[str, str]:
    """Environment entries for the fork server's start: with `CUDAL1_HOST_ALLOCATOR=jemalloc`,
    jemalloc preloaded with `JEMALLOC_CONF`; else {} (glibc's malloc). Also {} when no library is
    found or when something is preloaded already (that choice is left alone)."""
    if os.environ.get("CUDAL1_HOST_ALLOCATOR", "glibc") != "jemalloc" or os.environ.get("LD_PRELOAD"):
        return {}
    path = jemalloc_path()
    if path is None:
        return {}
    return {"LD_PRELOAD": path, "MALLOC_CONF": JEMALLOC_CONF, _MARK: path}


def in_use() -> bool:
    """Whether this process runs on a preloaded jemalloc (`mallctl` is jemalloc's own entry point)."""
    try:
        return hasattr(ctypes.CDLL(None), "mallctl")
    except OSError:
        return False


def _drop_server_preload() -> None:
    mark = os.environ.pop(_MARK, None)
    if mark is not None and os.environ.get("LD_PRELOAD") == mark:
        del os.environ["LD_PRELOAD"]


_drop_server_preload()
