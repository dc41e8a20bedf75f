"""Build artifacts: one source's build directory packed into bytes, so that a build actor on one
node can hand what it built to a timing actor on another (plain functions, no Ray).

The build cache keeps one directory per candidate source (`cudal1.bench.evaluator.extensions_dir`,
`<cache_dir>/ext/<torch tag>/<arch>/<source hash>`) and, beside it, the build records the parent
kept of it (`cudal1.bench.buildcache.built_record_path`, `<dir>.built.json`). `pack` puts both into
an uncompressed tar with its SHA-256; `unpack` checks the SHA-256 and every member, and puts them
in place under the receiving node's cache root; `mark` / `is_marked` leave and read a marker beside
the directory (`<dir>.artifact`: the SHA-256 of the artifact it holds), so that a timing actor that
already sees the same directory (one host, or storage every node shares) skips the transfer.

What it protects against: a corrupted or swapped transfer (SHA-256 checked before anything is
written), and members that would land outside the directory (absolute names, `..`, links, devices:
only regular files and directories are packed and accepted). What it does not: the contents of the
build directory are the candidate's (its sandboxed build wrote them), as they are on the node that
built them; the receiving evaluation treats them exactly as it treats its own cache.

A limit to know: torch's build files (`build.ninja`, ninja's logs) name the directory by its
absolute path, so an artifact saves the compile only where the receiving cache root has the same
path as the builder's (the pool hands both the same `settings.cache_dir`); under another root the
files arrive, and torch builds again there (correct, not faster).
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import json
import os
import secrets
import shutil
import stat
import tarfile
from pathlib import Path
from typing import Any, Callable

from ..bench import buildcache

MAX_BYTES = 1 << 30
"""Largest artifact packed (bytes); a larger build is left to the timing actor to build itself."""
MARKER_SUFFIX = ".artifact"
_DIR = "build"  # the build directory's members are under this name in the tar
_RECORDS = "built.json"  # the parent's build records of it
_MTIME_NS = "CUDAL1.mtime_ns"  # exact mtimes: ninja compares them to decide what to rebuild


class ArtifactError(ValueError):
    """An artifact that cannot be used: too large to pack, its SHA-256 differs from the one sent
    with it, or a member is unsafe (an absolute name, `..`, a link, a device)."""


@dataclasses.dataclass(frozen=True)
class ArtifactInfo:
    """What travels with an artifact's bytes (small: through the driver)."""

    key: str
    """The build directory relative to the cache root ("ext/<torch tag>/<arch>/<source hash>")."""
    sha256: str
    """SHA-256 (hex) of the artifact's bytes."""
    size: int
    """Bytes."""
    built_at: str
    """The build directory's real path on the node that built it (its build records name files
    under it; `unpack` moves them to the receiving directory)."""


@dataclasses.dataclass(frozen=True)
class Artifact:
    """An artifact on its way to a timing actor: its info, and its bytes or a handle on them that
    the receiver resolves only when it needs them (a Ray ObjectRef: `cudal1.actors.bench_pool`)."""

    info: ArtifactInfo
    data: Any


def build_key(cache_root: str | os.PathLike, ext_dir: str | os.PathLike) -> str:
    """`ext_dir` relative to `cache_root`, with "/" separators. Raises ArtifactError when it is not
    under it."""
    try:
        rel = Path(ext_dir).relative_to(Path(cache_root))
    except ValueError:
        raise ArtifactError(f"{ext_dir} is not under the cache root {cache_root}") from None
    return rel.as_posix()


def pack(cache_root: str | os.PathLike, ext_dir: str | os.PathLike) -> tuple[ArtifactInfo, bytes]:
    """The build directory `ext_dir` (under `cache_root`) and its build records, as a tar.

    Only regular files and directories are packed (a symbolic link or anything else a build left
    there is skipped; a hard link is packed as a file of its own); mtimes are kept to the
    nanosecond. Raises ArtifactError when `ext_dir` is not under
    `cache_root` or the tar would exceed `MAX_BYTES`, OSError when the directory cannot be read.
    """
    ext = Path(ext_dir)
    key = build_key(cache_root, ext)
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, str(ext), _DIR, os.lstat(ext))
        for top, dirs, files in os.walk(ext):
            dirs.sort()
            for name in [*dirs, *sorted(files)]:
                path = os.path.join(top, name)
                info = os.lstat(path)
                if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    continue
                total += info.st_size
                if total > MAX_BYTES:
                    raise ArtifactError(f"{ext}: more than {MAX_BYTES} bytes to pack")
                _add(tar, path, f"{_DIR}/{os.path.relpath(path, ext)}", info)
        records = buildcache.built_record_path(ext)
        if records.is_file() and not records.is_symlink():
            _add(tar, str(records), _RECORDS, os.lstat(records))
    data = buffer.getvalue()
    if len(data) > MAX_BYTES:
        raise ArtifactError(f"{ext}: artifact of {len(data)} bytes is over {MAX_BYTES}")
    info = ArtifactInfo(key, hashlib.sha256(data).hexdigest(), len(data), os.path.realpath(ext))
    return info, data


def _add(tar: tarfile.TarFile, path: str, arcname: str, info: os.stat_result) -> None:
    member = tar.gettarinfo(path, arcname)
    if member.islnk():
        # A second name of a file already packed (a hard link the build, i.e. the candidate,
        # made): stored as a file of its own, since `unpack` accepts only files and directories
        # and a refused artifact is the harness's failure, which no candidate may cause.
        member.type, member.linkname, member.size = tarfile.REGTYPE, "", info.st_size
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    member.pax_headers = {_MTIME_NS: str(info.st_mtime_ns)}
    if member.isreg():
        with open(path, "rb") as f:
            tar.addfile(member, f)
    else:
        tar.addfile(member)


def unpack(info: ArtifactInfo, data: bytes, cache_root: str | os.PathLike) -> Path:
    """Put the artifact `data` in place under `cache_root` (at `info.key`) and return the build
    directory.

    The SHA-256 of `data` is checked first, then every member (only regular files and directories,
    names relative and inside); nothing is written before both pass. The directory is assembled
    beside its place and renamed into it, replacing what was there (a build of the same source this
    node made itself); the build records' paths are moved from `info.built_at` to the new place
    (`buildcache.remember_built`), and the marker is left (`mark`). File modes keep their
    permission bits (the sandbox's group needs its write bits), ownership is this process's.

    Raises ArtifactError for a SHA-256 mismatch, an unsafe member or key, OSError when the cache
    cannot be written.
    """
    digest = hashlib.sha256(data).hexdigest()
    if digest != info.sha256:
        raise ArtifactError(f"artifact {info.key}: SHA-256 {digest[:16]} on arrival, {info.sha256[:16]} sent")
    dest = destination(info, cache_root)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = tar.getmembers()
        for m in members:
            _check(m)
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = dest.parent / f".{dest.name}.unpack-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            records = None
            dirs: list[tuple[Path, tarfile.TarInfo]] = []
            for m in members:
                if m.name == _RECORDS:
                    records = tar.extractfile(m).read()  # type: ignore[union-attr]
                    continue
                rel = m.name[len(_DIR) + 1 :] if m.name != _DIR else ""
                target = staging / rel if rel else staging
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    dirs.append((target, m))
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(tar.extractfile(m), out)  # type: ignore[arg-type]
                _finish(target, m)
            for target, m in reversed(dirs):  # deepest first: writing a file would change a dir's mtime
                _finish(target, m)
            _replace(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    if records is not None:
        _move_records(records, info.built_at, dest)
    mark(dest, info.sha256)
    return dest


def destination(info: ArtifactInfo, cache_root: str | os.PathLike) -> Path:
    """Where the artifact's build directory goes under `cache_root`. Raises ArtifactError when its
    key is not a relative path inside it."""
    parts = info.key.split("/")
    if info.key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ArtifactError(f"artifact key {info.key!r} is not a relative path inside the cache")
    return Path(cache_root).joinpath(*parts)


def _check(m: tarfile.TarInfo) -> None:
    name = m.name
    parts = name.split("/")
    if not (m.isreg() or m.isdir()):
        raise ArtifactError(f"artifact member {name!r}: not a regular file or directory")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ArtifactError(f"artifact member {name!r}: not a relative path inside the artifact")
    if not (name == _RECORDS and m.isreg()) and parts[0] != _DIR:
        raise ArtifactError(f"artifact member {name!r}: outside the build directory")


def _finish(target: Path, m: tarfile.TarInfo) -> None:
    os.chmod(target, m.mode & 0o777)
    try:
        mtime_ns = int(m.pax_headers.get(_MTIME_NS, ""))
    except ValueError:
        mtime_ns = int(m.mtime * 1e9)
    os.utime(target, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


def _replace(staging: Path, dest: Path) -> None:
    """Rename `staging` to `dest`; what was at `dest` is moved aside first and removed. Tried
    three times: another actor of this node may put the same source there meanwhile."""
    for attempt in range(3):
        try:
            if dest.exists() or dest.is_symlink():
                old = dest.parent / f".{dest.name}.old-{secrets.token_hex(4)}"
                os.rename(dest, old)
                shutil.rmtree(old, ignore_errors=True)
            os.rename(staging, dest)
            return
        except OSError:
            if attempt == 2:
                raise


def _move_records(records: bytes, built_at: str, dest: Path) -> None:
    """Keep the builder's build records for `dest`, their paths moved from `built_at` to it."""
    try:
        claims = json.loads(records)
    except ValueError:
        return
    old, new = built_at.rstrip("/") + "/", os.path.realpath(dest).rstrip("/") + "/"
    moved = []
    for claim in buildcache.built_claims(claims):
        if claim["path"].startswith(old):
            moved.append({**claim, "path": new + claim["path"][len(old) :]})
    buildcache.remember_built(dest, moved)


def marker_path(ext_dir: str | os.PathLike) -> Path:
    """Where the marker of `ext_dir` is kept: beside it, where the sandboxed builds cannot write."""
    return Path(str(ext_dir).rstrip("/") + MARKER_SUFFIX)


def mark(ext_dir: str | os.PathLike, sha256: str) -> None:
    """Record that `ext_dir` holds the artifact with SHA-256 `sha256`. Never raises (a missing
    marker only costs a transfer)."""
    path = marker_path(ext_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        tmp.write_text(sha256)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def is_marked(ext_dir: str | os.PathLike, sha256: str) -> bool:
    """Whether `ext_dir` exists and its marker names the artifact `sha256`: this process already
    sees that build (the same storage as the builder's, or unpacked here before)."""
    try:
        return Path(ext_dir).is_dir() and marker_path(ext_dir).read_text() == sha256
    except OSError:
        return False


def receive(info: ArtifactInfo, fetch: Callable[[], bytes], cache_root: str | os.PathLike) -> bool:
    """Make the artifact `info` present under `cache_root`: nothing to do when its directory there
    already holds it (`is_marked`: the builder's own storage, or an earlier arrival); else its
    bytes are fetched (`fetch()`) and unpacked (`unpack`). One receiver per directory at a time
    (a lock file beside it), so two timing actors of a node never unpack the same source over
    each other. Returns whether it fetched.

    Raises ArtifactError (a SHA-256 mismatch, an unsafe member or key), OSError, and whatever
    `fetch` raises.
    """
    dest = destination(info, cache_root)
    if is_marked(dest, info.sha256):
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(marker_path(dest).with_name(f".{dest.name}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_marked(dest, info.sha256):  # another actor of this node put it there meanwhile
            return False
        unpack(info, fetch(), cache_root)
        return True
