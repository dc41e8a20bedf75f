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
  `build_seconds`, and a listener (the prebuild's, `cudal1.bench.targets`) hears each start and end;
- where the process was handed a builder (`cudal1.bench.builder`: the prebuild's child, the
  candidate host), the build itself is made by the parent, which records what it built; the call
  then loads the product from where the build left it. Elsewhere the call builds in this process
  (and nothing is recorded).

Only compiler failures are recorded: a build whose compiler was killed (a time or memory limit) is
not, and is tried again next time. The markers live in the candidate's own writable build directory; a candidate
can delete or forge them, which changes only its own builds.

The prebuild record (`write_record`, `take_record`): what the last prebuild of a source found
(the seconds its builds took, its wall time), left in the source's build directory by the process
that ran the prebuild and taken by the next evaluation of that source, which reports it.

What the builds produced: the parent's build service records each product ({"path", "sha256"},
`cudal1.bench.builder`); nothing in this process records anything. The parent keeps them (the
prebuild's and each evaluation's) beside the build directory, where the sandboxed children cannot
write (`remember_built`, `remembered_built`), for the later evaluations of the same source.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import re
import secrets
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from . import builder

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
MAX_BUILT = 64
"""Build records kept (per build directory, per evaluation)."""
_OBJECT_LIMIT = 1 << 30


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


# A compiler's diagnostic line: gcc/clang "file:12:3: error: ...", "c++: error: ...", nvcc
# "file.cu(12): error: ...", "fatal error: ...". Not a flag such as -Werror (no word boundary).
_DIAGNOSTIC = re.compile(r"\b(fatal )?error\b\s*[:(]", re.IGNORECASE)


def failure_summary(text: str, most: int = 4, limit: int = 500) -> str:
    """What a reader of a build failure needs from torch's error text ("Error building extension
    'name': " and the build tool's whole log, compile commands first): the text before the log
    and the compiler's diagnostic lines (`error:` lines, at most `most`, in order), else the log's
    first lines; whitespace collapsed within each line, lines joined by " | ", cut to `limit`
    characters. A text without a build log is returned cut to `limit`."""
    head, sep, log = text.partition(": ")
    if not sep or FAILURE_TEXT not in head:
        return text[:limit]
    lines = [" ".join(line.split()) for line in log.splitlines()]
    lines = [line for line in lines if line]
    picked = [line for line in lines if _DIAGNOSTIC.search(line)][:most] or lines[:most]
    out = " ".join(head.split()) + ": " + " | ".join(picked)
    return out if len(out) <= limit else out[: limit - 3] + "..."


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
    """torch's build error raised from a build tool that a signal ended, or a build the builder
    ended (`cudal1.bench.builder.BuildEnded`)."""
    cause = exc.__cause__
    return isinstance(exc, builder.BuildEnded) or (
        isinstance(cause, subprocess.CalledProcessError) and cause.returncode < 0
    )


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
            bound = signature.bind(*args, **kwargs)
        except TypeError:  # the call itself is wrong: torch says how
            return build(*args, **kwargs)
        marker = marker_path(ext_dir, build_key(kind, dict(bound.arguments)))
        if marker.is_file():
            recorded = _read_marker(marker)
            _activity.failures.append({"name": name, "message": recorded[-2000:], "cached": True})
            raise RuntimeError(f"{FAILURE_TEXT} '{name}' (failed before for this source; not rebuilt):\n" + recorded)
        _activity.active += 1
        _notify("build_started")
        started = time.perf_counter()
        try:
            if not builder.available():
                return build(*args, **kwargs)
            bound.apply_defaults()
            arguments = _request_arguments(kind, bound.arguments)
            answer = builder.request(kind, arguments)
            if arguments.get("is_standalone"):
                return answer["path"]
            import torch.utils.cpp_extension as cpp_extension

            # What torch's own call does once its build is done: import the module, or load the library.
            return cpp_extension._import_module_from_library(
                arguments["name"], answer["directory"], arguments["is_python_module"]
            )
        except Exception as exc:
            if FAILURE_TEXT in str(exc) and not _killed(exc):
                _activity.failures.append({"name": name, "message": str(exc)[-2000:], "cached": False})
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


def _request_arguments(kind: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A build call's bound arguments as a builder request (`cudal1.bench.builder.REQUESTS`):
    paths as strings, tuples as lists, and a `load` call's source files as their path and text
    (read here: the build runs in another process, which need not reach them). Raises
    BuildRefused for a source file over `builder.SOURCE_CHARS` bytes, OSError for one that cannot
    be read."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, list):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        out[key] = os.fspath(value) if isinstance(value, os.PathLike) else value
    if kind == "load":
        sources = out.get("sources")
        paths = [sources] if isinstance(sources, str) else sources
        if isinstance(paths, list) and all(isinstance(p, str) for p in paths):
            out["sources"] = [{"path": os.path.abspath(p), "text": _source_text(p)} for p in paths]
    return out


def _source_text(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read(builder.SOURCE_CHARS + 1)
    if len(data) > builder.SOURCE_CHARS:
        raise builder.BuildRefused(f"invalid build request: source {path} is over {builder.SOURCE_CHARS} bytes")
    return data.decode("utf-8", "surrogateescape")


def file_sha256(path: str | os.PathLike, limit: int = _OBJECT_LIMIT, dir_fd: int | None = None) -> str | None:
    """SHA-256 (hex) of the regular file at `path` (relative to the directory `dir_fd` when given;
    not followed if a link; None when it is not a regular file, is over `limit` bytes, or cannot be
    read). Never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def built_claims(value: Any) -> list[dict[str, str]]:
    """The well-formed build records in `value` (data from a sandboxed process): at most
    `MAX_BUILT` dicts of an absolute "path" (at most 4096 characters) and a 64-digit hex
    "sha256"; anything else is dropped."""
    out: list[dict[str, str]] = []
    for item in value if isinstance(value, list) else []:
        if len(out) >= MAX_BUILT:
            break
        if not isinstance(item, dict):
            continue
        path, digest = item.get("path"), item.get("sha256")
        if (
            isinstance(path, str)
            and path.startswith("/")
            and len(path) <= 4096
            and isinstance(digest, str)
            and len(digest) == 64
            and all(c in "0123456789abcdef" for c in digest)
        ):
            entry = {"path": path, "sha256": digest}
            if entry not in out:
                out.append(entry)
    return out


def built_record_path(ext_dir: str | Path) -> Path:
    """Where the parent keeps its build records of `ext_dir`: beside it, in the
    architecture's folder, which the sandboxed children cannot write."""
    return Path(str(ext_dir).rstrip("/") + ".built.json")


def remember_built(ext_dir: str | Path, claims: Any) -> None:
    """Parent side, after a prebuild or an evaluation: add the well-formed records of `claims` (`built_claims`)
    that name a file inside `ext_dir` to those kept for it. Never raises (they only feed a label)."""
    root = os.path.realpath(ext_dir).rstrip("/") + "/"
    new = [c for c in built_claims(claims) if c["path"].startswith(root)]
    if not new:
        return
    kept = remembered_built(ext_dir)
    merged = (kept + [c for c in new if c not in kept])[-MAX_BUILT:]
    path = built_record_path(ext_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            json.dump(merged, f)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def remembered_built(ext_dir: str | Path) -> list[dict[str, str]]:
    """The build records the parent kept for `ext_dir` (`remember_built`); [] when none. Never
    raises."""
    try:
        return built_claims(json.loads(built_record_path(ext_dir).read_text()))
    except (OSError, ValueError):
        return []


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
