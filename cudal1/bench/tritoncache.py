"""Triton's launcher builds, made by the parent's builder (set in the candidate host's environment
as TRITON_CACHE_MANAGER="cudal1.bench.tritoncache:BuilderCacheManager").

Triton compiles a small C launcher (and its driver utilities) into a shared object the first time
a kernel runs (`triton.runtime.build._build`), and puts its bytes into its file cache under
TRITON_CACHE_DIR. Triton imports this module the first time it needs its cache, which is before
any such build; importing it points Triton's build hook (`triton.knobs.build.impl`) at
`cudal1.bench.builder`, so the launcher is compiled by the parent's build service, which records
its content: the record `custom_kernel` rests on (the copy Triton puts into its cache has that
content). The cache itself is Triton's own `FileCacheManager`. A Triton without that hook (before
3.4) builds in the candidate's process, and nothing it builds is recorded; so does a candidate
that resets the hook, which only loses it the label.
"""

from __future__ import annotations

import os
from typing import Any

from triton.runtime.cache import FileCacheManager

from . import builder


class BuilderCacheManager(FileCacheManager):
    """Triton's FileCacheManager (its module routes Triton's builds to the builder)."""


def build_launcher(
    name: str, src: str, srcdir: str, library_dirs: list[str], include_dirs: list[str], libraries: list[str]
) -> str:
    """Triton's build hook: build `src` (a C file) as the shared object `name` through the parent's
    builder; returns the product's path (Triton reads it into its cache). Raises as
    `builder.request` does."""
    with open(src, "rb") as f:
        text = f.read(builder.SOURCE_CHARS + 1).decode("utf-8", "surrogateescape")
    arguments: dict[str, Any] = {
        "name": name,
        "source": {"path": os.path.abspath(src), "text": text},
        "include_dirs": [str(d) for d in include_dirs if d is not None],
        "library_dirs": [str(d) for d in library_dirs],
        "libraries": [str(lib) for lib in libraries],
    }
    return builder.request("triton", arguments)["path"]


def _route_builds() -> None:
    try:
        from triton import knobs
    except ImportError:
        return
    if builder.available() and hasattr(getattr(knobs, "build", None), "impl"):
        knobs.build.impl = build_launcher


_route_builds()
