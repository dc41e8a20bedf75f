"""Triton's cache, recording what Triton compiles into it (set in the candidate host's
environment as TRITON_CACHE_MANAGER="cudal1.bench.tritoncache:RecordingCacheManager").

Triton compiles a small C launcher (and its driver utilities) into a shared object the first time
a kernel runs, and puts it into its file cache (`FileCacheManager.put`, under TRITON_CACHE_DIR,
the host's scratch directory). This manager is Triton's own file cache, except that every shared
object Triton puts there is also recorded as a build product (`buildcache.note_built`): the
records `custom_kernel` rests on. Imported only by Triton, when it first needs its cache.
"""

from __future__ import annotations

from typing import Any

from triton.runtime.cache import FileCacheManager

from . import buildcache


class RecordingCacheManager(FileCacheManager):
    """Triton's FileCacheManager; `put` of a "*.so" file also records it as built."""

    def put(self, data: Any, filename: str, binary: bool = True) -> str:
        path = super().put(data, filename, binary)
        if isinstance(filename, str) and filename.endswith(".so"):
            buildcache.note_built(path)
        return path
