"""A candidate's extension builds, seen from the process that runs them: timed, failures remembered.

Builds go to a directory per candidate source hash (`evaluator.extensions_dir`), so a successful
build is reused by PyTorch itself. A failed one is not: a candidate that catches the compiler
error and falls back to PyTorch would pay the whole compile (16-63 s seen on an H200 host) in
every evaluation. `install` wraps `torch.utils.cpp_extension.load_inline` and `load` in the
current process so that

- a compiler failure ("Error building extension") leaves a marker in that directory, keyed by
  what was built (the call's sources, source files and flags, not the extension's name: a
  candidate that names its extension at random each run is still recognised), and a later call
  that would build the same thing there raises the recorded error at once;
- every call is timed (`activity()`): the seconds spent inside them are a result's
  `build_seconds`, and a listener (the prebuild's, `cudal1.bench.targets`) hears each start and end.

Only compiler failures are recorded: a build whose compiler was killed (a time or memory limit) is
not, and is tried again next time. The markers live in the candidate's own writable build directory; a candidate
can delete or forge them, which changes only its own builds.

The prebuild record (`write_record`, `take_record`): what the last prebuild of a source found
(the seconds its builds took, its wall time), left in the source's build directory by the process
that ran the prebuild and taken by the next evaluation of that source, which reports it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Protocol

MARKER_SUFFIX = ".build_failed"
FAILURE_TEXT = "Error building extension"
RECORD_NAME = "prebuild.json"
_NOT_BUILD_INPUTS = frozenset({"name", "verbose", "build_directory", "keep_intermediates"})
_SOURCE_FILE_LIMIT = 4 * 2**20


class BuildListener(Protocol):
    def build_started(self, activity: "BuildActivity") -> None: ...

    def build_ended(self, activity: "BuildActivity") -> None: ...


@dataclasses.dataclass
class BuildActivity:
    """The build calls made in this process so far (one per process: `activity()`)."""

    seconds: float = 0.0
    """Wall seconds spent inside build calls, summed over calls (calls from two threads at once both count)."""
    calls: int = 0
    active: int = 0
    """Build calls under way now."""
    failures: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """{"name", "message", "cached"} of each call that failed to compile (cached: the failure was
    recorded by an earlier process and not compiled again)."""
    listener: BuildListener | None = None


_activity = BuildActivity()


def activity() -> BuildActivity:
    """This process's build calls (seconds, counts, failures) since it started."""
    return _activity


def marker_path(ext_dir: str | Path, key: str) -> Path:
    """Where the failure of the build with key `key` (`build_key`) under `ext_dir` is recorded."""
    return Path(ext_dir) / (key + MARKER_SUFFIX)


def build_key(kind: str, arguments: dict[str, Any]) -> str:
    """16 hex digits naming what a build call compiles: `kind` ("load_inline" or "load") and its
    bound arguments except the name and output options; a `load` call's source files count by
    their contents (up to 4 MiB each), not only their paths."""
    parts: list[str] = [kind]
    for key in sorted(arguments):
        if key in _NOT_BUILD_INPUTS:
            continue
        value = arguments[key]
        parts.append(f"{key}={value!r}")
        if kind == "load" and key == "sources":
            for path in [value] if isinstance(value, (str, os.PathLike)) else list(value or []):
                try:
                    with open(path, "rb") as f:
                        parts.append(hashlib.sha256(f.read(_SOURCE_FILE_LIMIT)).hexdigest())
                except OSError:
                    parts.append("unreadable")
    return hashlib.sha256("\n".join(parts).encode(errors="replace")).hexdigest()[:16]


def is_build_failure(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it was raised from or while handling, is a compiler failure
    (fresh, or recorded by an earlier process). A build whose compiler was killed by a signal (a
    time or memory limit) is not one."""
    seen = 0
    while exc is not None and seen < 20:
        if FAILURE_TEXT in str(exc):
            return not _killed(exc)
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _killed(exc: BaseException) -> bool:
    """torch's build error raised from a build tool that a signal ended."""
    cause = exc.__cause__
    return isinstance(cause, subprocess.CalledProcessError) and cause.returncode < 0


def install(ext_dir: str | Path, listener: BuildListener | None = None) -> None:
    """Wrap cpp_extension.load_inline and load (this process only), and set `listener` (which
    replaces an earlier one). No-op if `ext_dir` is empty."""
    if not ext_dir:
        return
    import torch.utils.cpp_extension as cpp_extension

    _activity.listener = listener
    for attr in ("load_inline", "load"):
        original = getattr(cpp_extension, attr)
        if getattr(original, "_cudal1_failure_cache", False):
            continue
        setattr(cpp_extension, attr, _remembering(original, attr, Path(ext_dir)))


def _notify(event: str) -> None:
    listener = _activity.listener
    if listener is not None:
        getattr(listener, event)(_activity)


def _remembering(build: Callable[..., Any], kind: str, ext_dir: Path) -> Callable[..., Any]:
    signature = inspect.signature(build)

    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        name = str(kwargs.get("name") or (args[0] if args else "extension"))
        try:
            marker: Path | None = marker_path(ext_dir, build_key(kind, dict(signature.bind(*args, **kwargs).arguments)))
        except TypeError:  # the call itself is wrong: torch says how
            marker = None
        if marker is not None and marker.is_file():
            recorded = _read_marker(marker)
            _activity.failures.append({"name": name, "message": recorded[-2000:], "cached": True})
            raise RuntimeError(f"{FAILURE_TEXT} '{name}' (failed before for this source; not rebuilt):\n" + recorded)
        _activity.active += 1
        _notify("build_started")
        started = time.perf_counter()
        try:
            return build(*args, **kwargs)
        except Exception as exc:
            if FAILURE_TEXT in str(exc) and not _killed(exc):
                _activity.failures.append({"name": name, "message": str(exc)[-2000:], "cached": False})
                if marker is not None:
                    try:
                        marker.write_text(str(exc)[-8000:])
                    except OSError:
                        pass
            raise
        finally:
            _activity.active -= 1
            _activity.calls += 1
            _activity.seconds += time.perf_counter() - started
            _notify("build_ended")

    wrapper._cudal1_failure_cache = True  # type: ignore[attr-defined]
    return wrapper


def _read_marker(marker: Path) -> str:
    from .worker import read_untrusted

    data = read_untrusted(marker, 16_000, tail=True)
    return data.decode(errors="replace") if data is not None else "(the recorded error could not be read)"


# -- the prebuild record ------------------------------------------------------------------------


def write_record(ext_dir: str | Path, record: dict[str, Any]) -> None:
    """Leave `record` (JSON-safe) as the prebuild record of the source built in `ext_dir`. The
    directory is writable by sandboxed candidates: the file is made new (never opened through a
    link they planted) and renamed into place. Never raises (the record only feeds a report)."""
    folder = Path(ext_dir)
    tmp = folder / f".{RECORD_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, folder / RECORD_NAME)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def take_record(ext_dir: str | Path) -> dict[str, float] | None:
    """The prebuild record of the source built in `ext_dir`, removed so that only the next
    evaluation reports it: {"build_seconds", "prebuild_s"} (seconds), or None when there is none
    or it is not a record (anything a candidate may have put there instead). Never raises."""
    from .worker import read_untrusted

    path = Path(ext_dir) / RECORD_NAME
    data = read_untrusted(path, 64 * 1024)
    try:
        os.unlink(path)
    except OSError:
        pass
    try:
        record = json.loads(data) if data is not None else None
        out = {k: float(record[k]) for k in ("build_seconds", "prebuild_s")} if isinstance(record, dict) else None
    except (ValueError, TypeError, KeyError, OverflowError):
        return None
    if out is None or not all(0.0 <= v < 1e6 for v in out.values()):  # NaN fails too
        return None
    return out
