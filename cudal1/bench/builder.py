"""A candidate's builds, made by the evaluating process: the only records `custom_kernel` rests on.

`custom_kernel` pays a candidate for a shared object of its own (`cudal1.bench.labels`). What
counts as its own is what this module built for it: the candidate's processes (the prebuild's
child, the candidate host) never record anything. Their `load_inline` / `load` (through
`cudal1.bench.buildcache`'s wrapper) and Triton's launcher builds (`cudal1.bench.tritoncache`)
send the call's arguments, sources as text, over a socket to a `BuildService` of the parent
(the process of `evaluate` / `prebuild`, which never runs candidate code). The service checks the
request (`check_request`: every field's type and size), runs the real build in a fresh sandboxed
child (`build_in_child`: harness code only, the candidate's limits and sandbox, no device), then
hashes the product itself and keeps {"path", "sha256"} in its memory (`BuildService.records`; the
prebuild's go to the parent-only file of `buildcache.remember_built`). It answers the wrapper,
which loads the product from where the build left it. A candidate that writes a file of its own
(a copy of a system library) and maps it has no record of its content, whatever it calls in its
own process.

The socket's only capability is "build these sources": the service answers build requests and
nothing else, holds no result pipe, nonce, judge channel or lock, and a request it cannot read
(not a frame, over `MAX_FRAME`, a field of the wrong type or size) is answered as refused (or the
socket closed, for bytes that are not a frame), which the wrapper raises in the candidate's own
process (`BuildRefused`): the candidate's failure, never the harness's.

Where the product lives, and why a swap gains nothing: builds go to the candidate's build
directory as before (so equal sources reuse them), which the candidate can write. The record is
the product's content, hashed by this process after the build child ended, reached from the build
directory without following links; `labels.built_objects` grants the label only to a mapped file
with a recorded content. A file swapped in after the hash has another content and counts for
nothing. Before a build, a product at its place whose content the service has no record of (one
the candidate put there, or an old build) is removed, so the build links it anew.

Limits, stated: the build runs the candidate's sources with its flags (-fplugin, -B and the like
steer the compiler), and a candidate process running beside the build can rewrite the product
between the link and the hash. Either way the candidate gets a record for a build it asked for,
which is what building a trivial library honestly gets it: `custom_kernel` is evidence of a build,
not proof of a kernel. A `load` source that includes a file beside it by a relative path finds it
only when the source lies in the build directory (the build child reads the candidate's build
directory, not its scratch). The build child has the candidate's memory and time limits of its
own, outside the candidate host's control group.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import socket
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

from .wire import Bool, Channel, List, Map, Obj, OneOf, Opt, PeerGone, ProtocolError, Str, Timeout

ENV_FD = "CUDAL1_BUILDER_FD"
"""The environment variable that names the builder socket's descriptor in a candidate's process."""
MAX_FRAME = 16 * 2**20
SOURCE_CHARS = 4 * 2**20
"""Longest source text (characters) one request may carry per source."""
LOG_CHARS = 64 * 1024
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")

_TEXT = Str(SOURCE_CHARS)
_TEXTS = OneOf(_TEXT, List(_TEXT, 64))
_PATHS = Opt(List(Str(4096), 256))
_FLAGS = Opt(List(Str(4096), 1024))
_FILE = Obj({"path": Str(4096), "text": _TEXT})
_COMMON = {
    "extra_cflags": _FLAGS,
    "extra_cuda_cflags": _FLAGS,
    "extra_sycl_cflags": _FLAGS,
    "extra_ldflags": _FLAGS,
    "extra_include_paths": _PATHS,
    "build_directory": Opt(Str(4096)),
    "verbose": Bool(),
    "with_cuda": Opt(Bool()),
    "with_sycl": Opt(Bool()),
    "is_python_module": Bool(),
    "keep_intermediates": Bool(),
}
REQUESTS: dict[str, Obj] = {
    "load_inline": Obj(
        {"name": Str(128), "cpp_sources": _TEXTS},
        {
            **_COMMON,
            "cuda_sources": Opt(_TEXTS),
            "sycl_sources": Opt(_TEXTS),
            "functions": Opt(OneOf(Str(256), List(Str(256), 4096), Map(Str(4096), 4096, key_chars=256))),
            "with_pytorch_error_handling": Bool(),
            "use_pch": Bool(),
            "no_implicit_headers": Bool(),
        },
    ),
    "load": Obj({"name": Str(128), "sources": List(_FILE, 64)}, {**_COMMON, "is_standalone": Bool()}),
    "triton": Obj(
        {
            "name": Str(128),
            "source": _FILE,
            "include_dirs": List(Str(4096), 256),
            "library_dirs": List(Str(4096), 256),
            "libraries": List(Str(256), 256),
        }
    ),
}
"""What each kind of build request may carry, field by field: torch's `load_inline` and `load`
arguments (a `load` source as its path and its text), Triton's launcher build (`_build`'s)."""


class BuildRefused(ValueError):
    """A build request the builder does not take (raised in the candidate's process)."""


class BuildEnded(RuntimeError):
    """A build ended by a limit or by the end of its evaluation: not a compiler failure, so not
    remembered as one (`buildcache.is_build_failure` is False for it)."""


def check_request(kind: Any, arguments: Any) -> dict[str, Any]:
    """`arguments` if they are a request of `kind` this module serves (`REQUESTS`; a name of
    letters, digits, "_", "." and "-", at most 128). Raises BuildRefused naming the first problem."""
    shape = REQUESTS.get(kind) if isinstance(kind, str) else None
    if shape is None:
        raise BuildRefused(f"invalid build request: unknown kind {str(kind)[:40]!r}")
    try:
        shape.check(arguments, kind)
    except ProtocolError as exc:
        raise BuildRefused(f"invalid build request: {exc}") from None
    if not NAME.match(arguments["name"]) or ".." in arguments["name"]:
        raise BuildRefused(f"invalid build request: the extension name {arguments['name'][:130]!r}")
    return arguments


# -- the candidate's side ------------------------------------------------------------------------

_client_lock = threading.Lock()
_client: Channel | None = None


def available() -> bool:
    """Whether this process was handed a builder socket (a candidate's process in an evaluation)."""
    return ENV_FD in os.environ


def request(kind: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Ask the parent to build (`arguments` as `check_request` takes them) and wait for it; prints
    the build's log to this process's stderr. Returns the answer ({"path", "directory"}). Raises
    BuildRefused (the request was refused, or no builder answers), BuildEnded (a limit ended the
    build), RuntimeError (the build failed: torch's error text, "Error building extension ...")."""
    global _client
    check_request(kind, arguments)
    body = json.dumps({"op": "build", "kind": kind, "arguments": arguments}).encode()
    if len(body) > MAX_FRAME - 64:
        raise BuildRefused(f"invalid build request: {len(body)} bytes (limit {MAX_FRAME - 64})")
    with _client_lock:
        try:
            if _client is None:
                _client = Channel(socket.socket(fileno=int(os.environ[ENV_FD])), max_frame=MAX_FRAME)
            _client.send("build", kind=kind, arguments=arguments)
            answer = _client.recv()
        except (KeyError, ValueError, OSError, PeerGone, ProtocolError, Timeout) as exc:
            raise BuildRefused(f"no builder answers in this process ({type(exc).__name__}: {exc})"[:500]) from None
    log = answer.get("log")
    if isinstance(log, str) and log:
        print(log, file=sys.stderr, flush=True)
    if answer.get("ok") is True:
        return answer
    error = str(answer.get("error") or "the build failed")
    if answer.get("refused") is True:
        raise BuildRefused(error)
    if answer.get("ended") is True:
        raise BuildEnded(error)
    raise RuntimeError(error)


# -- the parent's side -----------------------------------------------------------------------------


class BuildService:
    """Serves the build requests of one candidate process (a thread of the parent): `child_end`
    goes to that process (`worker.run_isolated(builder=...)`, `worker.run_judged(builder=...)`);
    each request is built by `build_in_child` in a fresh sandboxed child under `limits` (the
    candidate's, with no device), and each product's record lands in `records`. `known`: records
    kept from earlier builds of this build directory (`buildcache.remembered_built`), whose
    products are left in place. `close` ends a build under way and returns the records."""

    def __init__(self, limits: Any, ext_dir: str | os.PathLike, known: list[dict[str, str]] | None = None) -> None:
        self.limits = limits
        self.ext = os.path.realpath(ext_dir)
        self.records: list[dict[str, str]] = []
        self.known = list(known or [])
        self._cancel = threading.Event()
        parent_end, self.child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._chan = Channel(parent_end, max_frame=MAX_FRAME)
        self._thread = threading.Thread(target=self._serve, name="cudal1-builder", daemon=True)
        self._thread.start()

    def close(self) -> list[dict[str, str]]:
        """End the service (and a build under way); returns `records`."""
        self._cancel.set()
        try:
            self._chan.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(30.0)
        self._chan.close()
        try:
            self.child_end.close()
        except OSError:
            pass
        return list(self.records)

    def _serve(self) -> None:
        try:
            self._serve_requests()
        finally:  # a client waiting for an answer that will not come hears the end at once
            try:
                self._chan.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _serve_requests(self) -> None:
        while not self._cancel.is_set():
            try:
                msg = self._chan.recv()
            except ProtocolError as exc:  # not a frame: the stream cannot be read on
                self._answer(ok=False, refused=True, error=f"invalid build request: {exc}")
                return
            except (PeerGone, OSError):
                return
            try:
                if msg.get("op") != "build":
                    raise BuildRefused(f"invalid build request: op {str(msg.get('op'))[:40]!r}")
                answer = self._build(str(msg.get("kind")), check_request(msg.get("kind"), msg.get("arguments")))
            except BuildRefused as exc:
                answer = {"ok": False, "refused": True, "error": str(exc)}
            if not self._answer(**answer):
                return

    def _answer(self, **fields: Any) -> bool:
        try:
            self._chan.send("built", **fields)
            return True
        except (PeerGone, OSError, ValueError):
            return False

    def _build(self, kind: str, arguments: dict[str, Any]) -> dict[str, Any]:
        from .worker import run_isolated

        directory, product = self._product(kind, arguments)
        env = {k: v for k, v in self.limits.env.items() if k != "TRITON_CACHE_MANAGER"}
        limits = dataclasses.replace(self.limits, env={**env, "CUDA_VISIBLE_DEVICES": ""})
        payload = {
            "kind": kind,
            "arguments": arguments,
            "ext": self.ext,
            "directory": directory,
            "product": product,
            "keep": sorted({r["sha256"] for r in self.known + self.records}),
        }
        out = run_isolated("cudal1.bench.builder:build_in_child", payload, limits, cancel=self._cancel)
        answer: dict[str, Any] = {"ok": False, "log": out.log[-LOG_CHARS:]}
        value = out.value if out.kind == "returned" and isinstance(out.value, dict) else {}
        if value.get("ok") is True:
            record = product_record(self.ext, product) if product.endswith(".so") else None
            if product.endswith(".so") and record is None:
                return {**answer, "error": f"Error building extension '{arguments['name']}': no product at {product}"}
            if record is not None and record not in self.records:
                self.records.append(record)
            return {**answer, "ok": True, "path": product, "directory": directory}
        if value.get("ok") is False and not value.get("ended"):
            return {**answer, "error": str(value.get("error"))[-16000:]}
        why = str(value.get("error") or out.error or out.kind)[-2000:]
        return {**answer, "ended": True, "error": f"the build of '{arguments['name']}' was ended: {why}"}

    def _product(self, kind: str, arguments: dict[str, Any]) -> tuple[str, str]:
        """(build directory, product path) of a request: where torch (or Triton's `_build`) puts
        it. Raises BuildRefused for a build directory outside this service's."""
        name = arguments["name"]
        if kind == "triton":
            key = hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()[:16]
            directory = os.path.join(self.ext, "triton-builds", key)
            return directory, os.path.join(directory, name + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
        directory = os.path.normpath(os.path.join(self.ext, arguments.get("build_directory") or name))
        if not directory.startswith(self.ext + "/"):
            raise BuildRefused(f"invalid build request: build_directory outside {self.ext}")
        return directory, os.path.join(directory, name if arguments.get("is_standalone") else name + ".so")


def product_record(ext: str, product: str) -> dict[str, str] | None:
    """{"path", "sha256"} of the regular file `product` inside the directory `ext` (a real path),
    reached from `ext` without following any link; None when it is not one (or is over
    `buildcache.file_sha256`'s size limit). Never raises."""
    from .buildcache import file_sha256

    relative = os.path.relpath(product, ext)
    parts = relative.split("/")
    if relative.startswith("..") or any(p in ("", ".", "..") for p in parts):
        return None
    fds: list[int] = []
    try:
        fds.append(os.open(ext, os.O_RDONLY | os.O_DIRECTORY))
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        digest = file_sha256(parts[-1], dir_fd=fds[-1])
        return {"path": os.path.join(ext, relative), "sha256": digest} if digest is not None else None
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


# -- the build child -------------------------------------------------------------------------------


def build_in_child(payload: dict[str, Any]) -> dict[str, Any]:
    """Target of the service's build child (`run_isolated`): build one checked request without
    loading its product. A product at its place whose content is not in payload["keep"] is removed
    first, so the build makes it anew. Returns {"ok": True}, or {"ok": False, "error": the build's
    error text, "ended": a signal ended the compiler (a limit)}."""
    from .buildcache import FAILURE_TEXT, is_build_failure

    kind, arguments, product = payload["kind"], dict(payload["arguments"]), payload["product"]
    try:
        digest = _sha256(product)
        if digest is not None and digest not in payload["keep"]:
            os.unlink(product)
        if kind == "triton":
            _build_triton(arguments, payload["directory"])
        else:
            _build_torch(kind, arguments, payload["ext"], payload["directory"])
    except Exception as exc:  # noqa: BLE001 - the build's failure, for the candidate to see
        text = str(exc) if FAILURE_TEXT in str(exc) else f"{type(exc).__name__}: {exc}"
        return {"ok": False, "error": text[-16000:], "ended": FAILURE_TEXT in text and not is_build_failure(exc)}
    return {"ok": True}


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def _build_torch(kind: str, arguments: dict[str, Any], ext: str, directory: str) -> None:
    import torch.utils.cpp_extension as cpp_extension

    arguments["build_directory"] = directory
    os.makedirs(directory, exist_ok=True)
    if kind == "load":
        arguments["sources"] = _source_files(arguments["sources"], ext, os.path.join(directory, "_sources"))
    # The product is the candidate's to load: its module code never runs here.
    cpp_extension._import_module_from_library = lambda *args: None
    getattr(cpp_extension, kind)(**arguments)


def _source_files(sources: list[dict[str, str]], ext: str, folder: str) -> list[str]:
    """Paths of `load` sources to compile: a source inside the build directory as it lies there
    (a header beside it is found), any other written into `folder` from the text sent (kept when
    unchanged, so the build stays up to date)."""
    paths = []
    for i, source in enumerate(sources):
        real = os.path.realpath(source["path"])
        if real.startswith(ext + "/") and os.path.isfile(real):
            paths.append(real)
            continue
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(source["path"])) or "source.cpp"
        path = os.path.join(folder, f"{i}-{base}")
        data = source["text"].encode("utf-8", "surrogateescape")
        os.makedirs(folder, exist_ok=True)
        if not (os.path.isfile(path) and Path(path).read_bytes() == data):
            Path(path).write_bytes(data)
        paths.append(path)
    return paths


def _build_triton(arguments: dict[str, Any], directory: str) -> None:
    import inspect

    from triton.runtime import build as triton_build

    os.makedirs(directory, exist_ok=True)
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(arguments["source"]["path"])) or "main.c"
    src = os.path.join(directory, base)
    Path(src).write_bytes(arguments["source"]["text"].encode("utf-8", "surrogateescape"))
    extra: dict[str, Any] = {}
    params = inspect.signature(triton_build._build).parameters
    if "ccflags" in params:
        extra["ccflags"] = []
    if "language" in params:
        extra["language"] = "c++" if Path(base).suffix in (".cc", ".cpp", ".cxx") else "c"
    triton_build._build(
        arguments["name"],
        src,
        directory,
        arguments["library_dirs"],
        arguments["include_dirs"],
        arguments["libraries"],
        **extra,
    )
