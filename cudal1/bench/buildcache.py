"""Remember inline-extension builds that failed, so the same source is not compiled again.

Builds go to a directory per candidate source hash (`evaluator.extensions_dir`), so a successful
build is reused by PyTorch itself. A failed one is not: a candidate that catches the compiler
error and falls back to PyTorch would pay the whole compile (16-63 s seen on an H200 host) in
every evaluation. `install` wraps `torch.utils.cpp_extension.load_inline` and `load` in the
current process so that a compiler failure leaves `<name>.build_failed` in that directory and a
later call with the same name there raises the recorded error at once.

Only compiler failures ("Error building extension") are recorded: a build killed by a time or
memory limit is not, and is tried again next time. The marker lives in the candidate's own
writable build directory; a candidate can delete or forge it, which changes only its own builds.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable

MARKER_SUFFIX = ".build_failed"
FAILURE_TEXT = "Error building extension"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def marker_path(ext_dir: str | Path, name: str) -> Path:
    """Where the failure of extension `name` built under `ext_dir` is recorded."""
    return Path(ext_dir) / (_SAFE.sub("_", name)[:100] + MARKER_SUFFIX)


def install(ext_dir: str | Path) -> None:
    """Wrap cpp_extension.load_inline and load (this process only). No-op if `ext_dir` is empty."""
    if not ext_dir:
        return
    import torch.utils.cpp_extension as cpp_extension

    for attr in ("load_inline", "load"):
        original = getattr(cpp_extension, attr)
        if getattr(original, "_cudal1_failure_cache", False):
            continue
        wrapped = _remembering(original, Path(ext_dir))
        setattr(cpp_extension, attr, wrapped)


def _remembering(build: Callable[..., Any], ext_dir: Path) -> Callable[..., Any]:
    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        name = str(kwargs.get("name") or (args[0] if args else "extension"))
        marker = marker_path(ext_dir, name)
        if marker.exists():
            raise RuntimeError(f"{FAILURE_TEXT} '{name}' (failed before for this source; not rebuilt):\n"
                               + marker.read_text(errors="replace")[-4000:])
        try:
            return build(*args, **kwargs)
        except Exception as exc:
            if FAILURE_TEXT in str(exc):
                try:
                    marker.write_text(str(exc)[-8000:])
                except OSError:
                    pass
            raise

    wrapper._cudal1_failure_cache = True  # type: ignore[attr-defined]
    return wrapper
