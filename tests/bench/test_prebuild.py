"""The prebuild (`cudal1.bench.evaluator.prebuild`): builds made at import, in __init__ and in the
first forward happen before the evaluation, failures are remembered by source, and
`build_seconds` is the real build time.

The fast tests build a tiny plain-C++ library with `cpp_extension.load` (no torch headers: about
a second here) or fail at once on a compiler flag that does not exist, through the real
build path. The tests marked slow build real `load_inline` extensions against the torch headers
(30-60 s each on 2 cores) and run only with CUDAL1_SLOW_TESTS=1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import evalkit
import pytest

from cudal1.bench import buildcache
from cudal1.bench.evaluator import extensions_dir, prebuild
from cudal1.bench.result import HackKind, Status
from cudal1.bench.sandbox import landlock_abi

MM = "matmul_relu"
SLOW = os.environ.get("CUDAL1_SLOW_TESTS") == "1"
slow = pytest.mark.skipif(
    not SLOW, reason="builds C++ against the torch headers (30-60 s each): set CUDAL1_SLOW_TESTS=1"
)


def ext_dir(tmp_path: Path, source: str) -> Path:
    return extensions_dir(evalkit.settings(tmp_path), "cpu-" + os.uname().machine, source)


def mtimes(folder: Path, suffixes: tuple[str, ...] = (".o", ".so")) -> dict[str, int]:
    """Modification times (ns) of the build's objects and libraries under `folder`."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.suffix in suffixes}


def run_prebuild(tmp_path: Path, source: str, **overrides: object):
    return prebuild(evalkit.task(MM), source, "cpu", evalkit.settings(tmp_path, **overrides))


@pytest.mark.parametrize(
    "name,library", [("tiny_build_in_init", "cudal1_tiny_init"), ("tiny_build_in_forward", "cudal1_tiny_forward")]
)
def test_a_build_in_init_or_forward_is_prebuilt_and_not_compiled_again(tmp_path, name: str, library: str) -> None:
    """The prebuild constructs the model and runs a forward, so a build made in __init__ or in the
    first forward is in the cache before the evaluation; the evaluation then compiles nothing
    (the library and its object are untouched, ninja says so) and reports the prebuild's build
    seconds and wall time."""
    source = evalkit.candidate(name)
    assert run_prebuild(tmp_path, source) is None
    folder = ext_dir(tmp_path, source)
    built = mtimes(folder / library)
    assert {f"{library}.so", f"{library}.o"} <= set(built), sorted(built)
    record = json.loads((folder / buildcache.RECORD_NAME).read_text())
    assert 0.0 < record["build_seconds"] <= record["prebuild_s"], record
    # What the build produced is kept by this process, beside the build directory.
    so = str((folder / library / f"{library}.so").resolve())
    assert buildcache.remembered_built(folder) == [{"path": so, "sha256": buildcache.file_sha256(so)}]
    assert buildcache.built_record_path(folder).parent == folder.parent

    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.OK, evalkit.describe(r)
    assert "custom_kernel" in r.labels and "pytorch_only" not in r.labels, evalkit.describe(r)
    assert mtimes(folder / library) == built  # nothing was compiled again
    assert "no work to do" in r.log, r.log[-1500:]  # the evaluation's own build call found the build
    assert r.phases_s["prebuild"] == pytest.approx(record["prebuild_s"])
    assert r.build_seconds >= record["build_seconds"]
    assert not (folder / buildcache.RECORD_NAME).exists()  # taken by this evaluation, not the next


def test_without_a_prebuild_the_evaluation_builds_and_says_how_long(tmp_path) -> None:
    """`evaluate` still works on its own: a build in __init__ happens in its import phase, and
    build_seconds is the time inside the build call (not the import's time alone)."""
    source = evalkit.candidate("tiny_build_in_init")
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.OK, evalkit.describe(r)
    assert (ext_dir(tmp_path, source) / "cudal1_tiny_init" / "cudal1_tiny_init.so").exists()
    assert 0.0 < r.build_seconds <= r.phases_s["import"], (r.build_seconds, r.phases_s)
    assert "prebuild" not in r.phases_s
    # The build the evaluation made for the candidate host, recorded by the parent, grants custom_kernel.
    assert "custom_kernel" in r.labels and "pytorch_only" not in r.labels, evalkit.describe(r)
    # The evaluation's build is kept for the next evaluation of the source, as a prebuild's is.
    assert len(buildcache.remembered_built(ext_dir(tmp_path, source))) == 1


def test_a_build_failure_in_init_is_compiled_once_then_fails_at_once(tmp_path) -> None:
    """A build that fails in __init__ (under a new random name each run) is a compile_error; the
    failure is recorded by what was built, so the next evaluation of the same source fails at
    once, without running the compiler, and so does a prebuild."""
    source = evalkit.candidate("build_fails_in_init")
    first = evalkit.run(MM, source, tmp_path)
    assert first.status is Status.COMPILE_ERROR, evalkit.describe(first)
    assert "failed to build in ModelNew()" in first.message and "unrecognized command-line option" in first.log
    # The message carries the compiler's diagnostic (what the next prompt shows), not the commands.
    assert "error: unrecognized command-line option" in first.message, first.message
    markers = list(ext_dir(tmp_path, source).glob("*" + buildcache.MARKER_SUFFIX))
    assert len(markers) == 1, markers

    again = evalkit.run(MM, source, tmp_path)
    assert again.status is Status.COMPILE_ERROR, evalkit.describe(again)
    assert "not rebuilt" in again.message
    built = prebuild(evalkit.task(MM), source, "cpu", evalkit.settings(tmp_path))
    assert built is not None and built.status is Status.COMPILE_ERROR and "not rebuilt" in built.message, built
    # Only the first run's name ever got a build directory: the others never reached the compiler.
    assert len([p for p in ext_dir(tmp_path, source).iterdir() if p.name.startswith("broken_")]) == 1


def test_a_prebuild_finds_a_build_failure_in_init_and_the_evaluation_is_not_needed(tmp_path) -> None:
    """The prebuild meets the failure itself: compile_error with the compiler's time as
    build_seconds; the marker it leaves makes the evaluation fail at once too."""
    source = evalkit.candidate("build_fails_in_init")
    failed = run_prebuild(tmp_path, source)
    assert failed is not None and failed.status is Status.COMPILE_ERROR, failed
    assert "Error building extension" in failed.message and failed.build_seconds > 0.0
    assert failed.candidate_hash and failed.arch.startswith("cpu-")
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.COMPILE_ERROR and "not rebuilt" in r.message, evalkit.describe(r)


def test_a_caught_build_failure_is_timed_with_its_fallback(tmp_path) -> None:
    """A candidate that catches its build error and falls back to PyTorch is not a compile error:
    the prebuild lets it through, and its evaluation finds the failure recorded (no compile)."""
    source = (
        evalkit.candidate("build_fails_in_init")
        .replace("        self.ext = load_inline(", "        try:\n            self.ext = load_inline(")
        .replace(
            "verbose=False)\n",
            'verbose=False)\n        except RuntimeError:\n            print("FALLING BACK", flush=True)\n',
        )
    )
    assert run_prebuild(tmp_path, source) is None
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.OK, evalkit.describe(r)
    assert "FALLING BACK" in r.log, r.log[-1500:]
    assert len([p for p in ext_dir(tmp_path, source).iterdir() if p.name.startswith("broken_")]) == 1  # compiled once


def test_a_forward_that_never_ends_is_cut_after_the_grace(tmp_path) -> None:
    """The forward only has to reach the builds: one that spins forever is ended once the
    candidate's own code has had build_grace_s, and the build it made in __init__ is kept."""
    source = evalkit.candidate("forward_spins_after_build")
    t0 = time.monotonic()
    assert run_prebuild(tmp_path, source, build_grace_s=2.0) is None
    assert time.monotonic() - t0 < 60.0  # not the build_timeout_s (600 s)
    assert (ext_dir(tmp_path, source) / "cudal1_tiny_spin" / "cudal1_tiny_spin.so").exists()
    record = json.loads((ext_dir(tmp_path, source) / buildcache.RECORD_NAME).read_text())
    assert record["build_seconds"] > 0.0 and record["prebuild_s"] >= 2.0, record


def test_code_written_for_the_gpu_still_reaches_its_build(tmp_path) -> None:
    """The prebuild sees no GPU, yet device="cuda" in __init__ and .cuda() / .to("cuda") in
    forward before a lazy build do not stop it short of the build."""
    source = evalkit.candidate("tiny_build_after_cuda")
    assert run_prebuild(tmp_path, source) is None
    assert (ext_dir(tmp_path, source) / "cudal1_tiny_after_cuda" / "cudal1_tiny_after_cuda.so").exists()


def test_a_build_cut_by_the_time_limit_is_a_timeout_and_not_remembered(tmp_path) -> None:
    """A child ended inside a build (here a real compile against the torch headers, which takes
    far longer than the 5 s allowed) is the build's timeout; no failure is recorded, so the next
    try compiles again."""
    source = evalkit.candidate("cpp_extension")
    r = run_prebuild(tmp_path, source, build_timeout_s=5.0)
    assert r is not None and r.status is Status.TIMEOUT, r
    assert "build did not finish within 5 s" in r.message
    assert not list(ext_dir(tmp_path, source).glob("*" + buildcache.MARKER_SUFFIX))


def test_import_only_for_a_task_without_source(tmp_path) -> None:
    """A task without source (a build actor that does not know the task): the candidate is only
    imported; its build in __init__ is left to the evaluation."""
    from cudal1.tasks.task import Task

    source = evalkit.candidate("tiny_build_in_init")
    assert (
        prebuild(Task(level=0, problem_id=0, name="build", source=""), source, "cpu", evalkit.settings(tmp_path))
        is None
    )
    assert not (ext_dir(tmp_path, source) / "cudal1_tiny_init").exists()


# -- the pieces, without a child ------------------------------------------------------------------


def test_build_key_ignores_the_name_and_reads_source_files(tmp_path) -> None:
    base = {"cpp_sources": "int f();", "functions": None, "extra_cflags": ["-O2"]}
    assert buildcache.build_key("load_inline", {**base, "name": "a"}) == buildcache.build_key(
        "load_inline", {**base, "name": "b"}
    )
    assert buildcache.build_key("load_inline", base) != buildcache.build_key(
        "load_inline", {**base, "extra_cflags": ["-O3"]}
    )
    src = tmp_path / "x.cpp"
    src.write_text("int f() { return 1; }")
    one = buildcache.build_key("load", {"name": "x", "sources": [str(src)]})
    src.write_text("int f() { return 2; }")
    assert buildcache.build_key("load", {"name": "x", "sources": [str(src)]}) != one


def test_build_failures_are_recognised_through_the_exception_chain() -> None:
    try:
        try:
            raise RuntimeError(f"{buildcache.FAILURE_TEXT} 'x': c++ failed")
        except RuntimeError:
            raise ValueError("kernel unavailable")  # raised while handling: still the build's fault
    except ValueError as exc:
        assert buildcache.is_build_failure(exc)
    assert not buildcache.is_build_failure(RuntimeError("shape mismatch"))
    assert not buildcache.is_build_failure(None)
    # torch's error for a compiler that a signal ended (a time or memory limit) is no compile error.
    import subprocess

    try:
        try:
            raise subprocess.CalledProcessError(-9, ["ninja", "-v"])
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"{buildcache.FAILURE_TEXT} 'x'") from e
    except RuntimeError as exc:
        assert not buildcache.is_build_failure(exc)


def test_a_build_failures_summary_keeps_the_compilers_diagnostics_not_its_commands() -> None:
    log = (
        "[1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=ext -Werror -O3 "
        + "-I/very/long/include " * 40
        + "-c /tmp/ext/main.cpp -o main.o\nFAILED: main.o\n/tmp/ext/main.cpp: In function 'void f()':\n"
        "/tmp/ext/main.cpp:7:5: error: 'undefined_thing' was not declared in this scope\n"
        "    7 |     undefined_thing();\n/tmp/ext/main.cpp:9:1: error: expected ';' before '}' token\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    text = f"{buildcache.FAILURE_TEXT} 'ext': {log}"
    summary = buildcache.failure_summary(text)
    assert summary == (
        "Error building extension 'ext': /tmp/ext/main.cpp:7:5: error: 'undefined_thing' was not declared in "
        "this scope | /tmp/ext/main.cpp:9:1: error: expected ';' before '}' token"
    )
    nvcc = f"{buildcache.FAILURE_TEXT} 'k': [1/3] nvcc ...\nk.cu(12): error: identifier \"y\" is undefined\n"
    assert (
        buildcache.failure_summary(nvcc)
        == "Error building extension 'k': k.cu(12): error: identifier \"y\" is undefined"
    )
    # No diagnostic line: the log's first lines; long output cut; anything else as it was, cut.
    plain = buildcache.failure_summary(f"{buildcache.FAILURE_TEXT} 'x': linker said no\nninja: stopped\n")
    assert plain == "Error building extension 'x': linker said no | ninja: stopped"
    assert len(buildcache.failure_summary(text, limit=80)) == 80
    assert (
        buildcache.failure_summary("ImportError: no module named foo" * 40)
        == ("ImportError: no module named foo" * 40)[:500]
    )


def test_the_prebuild_record_is_taken_once_and_never_trusted(tmp_path) -> None:
    buildcache.write_record(tmp_path, {"build_seconds": 12.5, "prebuild_s": 14.0})
    assert buildcache.take_record(tmp_path) == {"build_seconds": 12.5, "prebuild_s": 14.0}
    assert buildcache.take_record(tmp_path) is None  # taken
    for junk in ("[1, 2]", '{"build_seconds": "NaN", "prebuild_s": 1}', '{"build_seconds": -1, "prebuild_s": 1}', "{"):
        (tmp_path / buildcache.RECORD_NAME).write_text(junk)
        assert buildcache.take_record(tmp_path) is None, junk
    # A link planted where the record goes is replaced, not written through.
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    (tmp_path / buildcache.RECORD_NAME).symlink_to(target)
    assert buildcache.take_record(tmp_path) is None
    (tmp_path / buildcache.RECORD_NAME).symlink_to(target)
    buildcache.write_record(tmp_path, {"build_seconds": 1.0, "prebuild_s": 2.0})
    assert target.read_text() == "keep"
    assert buildcache.take_record(tmp_path) == {"build_seconds": 1.0, "prebuild_s": 2.0}


# -- real extensions against the torch headers (CUDAL1_SLOW_TESTS=1) ------------------------------

_LOAD_INLINE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = """
#include <torch/extension.h>
torch::Tensor relu_mm(torch::Tensor a, torch::Tensor b) { return torch::relu(torch::mm(a, b)); }
"""


def build():
    return load_inline(name="cudal1_relu_mm___WHERE__", cpp_sources=_SRC, functions=["relu_mm"], verbose=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = build() if "__WHERE__" == "init" else None

    def forward(self, a, b):
        if self.ext is None:
            self.ext = build()
        return self.ext.relu_mm(a, b)
'''


@slow
@pytest.mark.parametrize("where", ["init", "forward"])
def test_a_load_inline_extension_in_init_or_forward_is_prebuilt(tmp_path, where: str) -> None:
    """A real C++ extension (torch headers) built in __init__ or in the first forward: the
    prebuild compiles it (its build_seconds is the compile, several seconds), the evaluation then
    imports it without compiling (a short import phase, the objects untouched) and reports the
    prebuild's build seconds."""
    source = _LOAD_INLINE.replace("__WHERE__", where)
    assert run_prebuild(tmp_path, source) is None
    folder = ext_dir(tmp_path, source)
    record = json.loads((folder / buildcache.RECORD_NAME).read_text())
    assert record["build_seconds"] > 5.0, record
    built = mtimes(folder)
    assert any(k.endswith(".so") for k in built), built

    r = evalkit.run(MM, source, tmp_path, wall_timeout_s=300.0)
    assert r.status is Status.OK, evalkit.describe(r)
    assert "custom_kernel" in r.labels, r.labels
    assert mtimes(folder) == built
    assert r.build_seconds >= record["build_seconds"]
    assert r.build_seconds - record["build_seconds"] < 5.0, (r.build_seconds, record)  # no compile in the evaluation
    assert r.phases_s["import"] < 5.0, r.phases_s


# -- custom_kernel: only what a build recorded -----------------------------------------------------


def test_build_records_are_kept_by_the_parent_and_never_trusted(tmp_path) -> None:
    ext = tmp_path / "ext" / "abc"
    ext.mkdir(parents=True)
    so = ext / "m" / "m.so"
    so.parent.mkdir()
    so.write_bytes(b"\x7fELF" + bytes(60))
    digest = buildcache.file_sha256(so)
    good = {"path": str(so), "sha256": digest}
    junk = [
        {"path": "relative.so", "sha256": digest},
        {"path": str(so), "sha256": "00"},
        {"path": str(so)},
        "x",
        {"path": str(so), "sha256": digest.upper()},
        {"path": "/etc/x.so", "sha256": digest},
    ]
    buildcache.remember_built(ext, [*junk, good, good])
    assert buildcache.remembered_built(ext) == [good]  # malformed and outside-the-directory records dropped
    assert buildcache.built_record_path(ext) == tmp_path / "ext" / "abc.built.json"
    buildcache.built_record_path(ext).write_text("{not json")
    assert buildcache.remembered_built(ext) == []
    assert buildcache.built_claims([good] * 3 + [{"path": f"/{i}.so", "sha256": digest} for i in range(100)]) == [
        good
    ] + [{"path": f"/{i}.so", "sha256": digest} for i in range(buildcache.MAX_BUILT - 1)]
    link = ext / "link.so"
    link.symlink_to(so)
    assert buildcache.file_sha256(link) is None  # a link is not followed


def test_a_mapped_object_counts_only_with_a_build_record_of_its_content(tmp_path) -> None:
    """The parent's side: which files a process maps (any name, under the watched folders), which
    of them are still that file and an ELF shared object (their content hashed), and which of
    those a build record names with that content."""
    import _bisect
    import mmap
    import shutil

    from cudal1.bench.labels import built_objects
    from cudal1.bench.worker import _mapped_fingerprints, _mapped_objects

    zero, elf, other = tmp_path / "x.so", tmp_path / "copy.so", tmp_path / "notes.txt"
    zero.write_bytes(bytes(4096))
    shutil.copy(_bisect.__file__, elf)
    other.write_bytes(b"\x7fELF" + bytes(4092))  # an ELF header, but not a shared object's
    handles = []
    for path in (zero, elf, other):
        with open(path, "rb") as f:
            handles.append(mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ))
    mapped = _mapped_objects(os.getpid(), [str(tmp_path)])
    assert {p for p, _, _ in mapped} == {str(zero), str(elf), str(other)}
    prints = _mapped_fingerprints(mapped)
    assert prints == [{"path": str(elf), "sha256": buildcache.file_sha256(elf)}]  # the zero file is no ELF object
    assert built_objects(prints, []) == []
    assert built_objects(prints, [{"path": str(elf), "sha256": "0" * 64}]) == []  # recorded with other content
    assert built_objects(prints, [{"path": str(elf), "sha256": buildcache.file_sha256(elf)}]) == [str(elf)]
    # Replaced after it was mapped: the file at the path is not the one the process mapped.
    elf.unlink()
    shutil.copy(_bisect.__file__, elf)
    assert _mapped_fingerprints({m for m in mapped if m[0] == str(elf)}) == []
    for h in handles:
        h.close()


def test_a_forged_build_record_gets_no_custom_kernel(tmp_path) -> None:
    """Issue 21, kind 6: a candidate that copies a system library into its build directory, calls
    the recorder the harness once ran in its own process (`buildcache.note_built`) and maps the
    copy is the plain PyTorch it is: no custom_kernel, through the prebuild and in the evaluation
    (records are made by the parent, for builds the parent made). Before, both the prebuild's
    child and the candidate host recorded the copy and it was paid as a kernel."""
    source = evalkit.candidate("forges_a_build_record")
    assert run_prebuild(tmp_path, source) is None
    assert buildcache.remembered_built(ext_dir(tmp_path, source)) == []
    r = evalkit.run(MM, source, tmp_path)
    assert "FORGED BUILT" in r.log, r.log[-1500:]
    assert r.status is Status.OK and "harness_error" not in r.labels, evalkit.describe(r)
    assert "custom_kernel" not in r.labels and "pytorch_only" in r.labels, evalkit.describe(r)


_LAZY_C_ABI = (
    evalkit.candidate("cpp_extension_c_abi")
    .replace("_lib = ctypes.CDLL(\n    load_inline(", "def _build():\n  return ctypes.CDLL(\n    load_inline(")
    .replace("_lib.cudal1_matmul_relu.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3\n", "_lib = None\n")
    .replace(
        "    def forward(self, a, b):\n",
        "    def forward(self, a, b):\n        global _lib\n        if _lib is None:\n            _lib = _build()\n"
        "            _lib.cudal1_matmul_relu.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3\n",
    )
)


@pytest.mark.parametrize("when", ["prebuild", "lazily"])
def test_a_load_inline_library_is_a_custom_kernel(tmp_path, when: str) -> None:
    """An honest load_inline library (plain C, no torch headers: about a second) is built by the
    parent's builder and paid as a kernel: built at import by the prebuild (then found up to date
    by the evaluation, its record kept beside the build directory), or built only in the first
    forward of an evaluation without a prebuild."""
    source = evalkit.candidate("cpp_extension_c_abi") if when == "prebuild" else _LAZY_C_ABI
    assert source.count("_build()") == (0 if when == "prebuild" else 2)
    if when == "prebuild":
        assert run_prebuild(tmp_path, source) is None
        assert len(buildcache.remembered_built(ext_dir(tmp_path, source))) == 1
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.OK, evalkit.describe(r)
    assert "custom_kernel" in r.labels and "pytorch_only" not in r.labels, evalkit.describe(r)
    library = ext_dir(tmp_path, source) / "cudal1_test_matmul_relu_c" / "cudal1_test_matmul_relu_c.so"
    assert library.is_file()


def test_malformed_build_requests_are_the_candidates_failure(tmp_path) -> None:
    """Build requests are untrusted data: a wrong type, a source over the limit, a name that
    leaves the build directory, a well-framed request of the wrong shape and a frame that is not
    JSON written straight to the builder's socket are each refused in the candidate's process (an
    exception it can catch), never a harness error; after the garbage the builder has closed the
    socket, and a later build is refused too. The candidate, plain PyTorch, is evaluated as such."""
    source = evalkit.candidate("malformed_build_requests")
    assert run_prebuild(tmp_path, source) is None
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.OK and "harness_error" not in r.labels, evalkit.describe(r)
    assert "custom_kernel" not in r.labels, evalkit.describe(r)
    for label in ("wrong type", "huge", "bad name"):
        assert f"REQUEST {label} REFUSED BuildRefused" in r.log, r.log[-3000:]
    answers = [line for line in r.log.splitlines() if line.startswith("RAW ANSWER")]
    assert len(answers) == 2 and all("refused" in line for line in answers), answers
    assert "AFTER GARBAGE BuildRefused" in r.log, r.log[-3000:]


def test_build_requests_are_checked_whole(tmp_path) -> None:
    """`builder.check_request` takes a request of a known kind whose every field has its type
    and size, and refuses anything else naming the problem; `product_record` hashes a product
    reached from its build directory without a link, and nothing else."""
    from cudal1.bench.builder import SOURCE_CHARS, BuildRefused, check_request, product_record

    good = {"name": "ext", "cpp_sources": "int f();", "extra_cflags": ["-O2"], "functions": {"f": "doc"}}
    assert check_request("load_inline", good) == good
    for kind, bad in (
        ("load_inline", {**good, "name": 1}),
        ("load_inline", {**good, "name": "../x"}),
        ("load_inline", {**good, "cpp_sources": "x" * (SOURCE_CHARS + 1)}),
        ("load_inline", {**good, "extra_cflags": "-O2"}),
        ("load_inline", {**good, "extra_cflags": [1]}),
        ("load_inline", {**good, "unknown": 1}),
        ("load_inline", {"cpp_sources": "int f();"}),
        ("load", {"name": "ext", "sources": ["a.cpp"]}),
        ("shell", {"name": "ext"}),
        (None, good),
        ("load_inline", [1]),
    ):
        with pytest.raises(BuildRefused, match="invalid build request"):
            check_request(kind, bad)
    ext = tmp_path / "ext"
    (ext / "m").mkdir(parents=True)
    (ext / "m" / "m.so").write_bytes(b"\x7fELF")
    (ext / "link").symlink_to(ext / "m")
    (tmp_path / "outside.so").write_bytes(b"x")
    record = product_record(str(ext), str(ext / "m" / "m.so"))
    assert record == {"path": str(ext / "m" / "m.so"), "sha256": buildcache.file_sha256(ext / "m" / "m.so")}
    for path in (ext / "link" / "m.so", tmp_path / "outside.so", ext / "m", ext / "m" / "missing.so"):
        assert product_record(str(ext), str(path)) is None, path


def test_triton_launcher_builds_go_to_the_builder(tmp_path) -> None:
    """Triton's build path on the CPU (`compile_module_from_src`, as its launchers are built): the
    candidate host's Triton builds through the parent's builder (`cudal1.bench.tritoncache`), puts
    the product into its cache and maps the copy there, whose content the parent recorded:
    custom_kernel."""
    pytest.importorskip("triton")
    r = evalkit.run(MM, evalkit.candidate("triton_launcher_build"), tmp_path)
    assert r.status is Status.OK, evalkit.describe(r)
    assert "LAUNCHER AT" in r.log and "/triton/" in r.log, r.log[-1500:]
    assert "custom_kernel" in r.labels, evalkit.describe(r)


def test_a_candidate_cannot_forge_the_prebuilds_result_and_the_suite_records_every_result(tmp_path) -> None:
    """Issue 21, kind 7: the process that imports the candidate in the prebuild holds no result
    pipe and no nonce (`run_isolated(reply=False)`): a candidate that looks for them in its frames
    and sends a forged build failure gets nothing, is built and timed as the honest code it is,
    and `run_suite` records its result and its neighbour's. Before, it found both and its prebuild
    came back compile_error with the message it chose."""
    from cudal1.bench.suite import SuiteJob, run_suite

    forger = evalkit.candidate("forge_prebuild_result")
    honest = evalkit.candidate("honest_matmul_relu")
    jobs = [
        SuiteJob(evalkit.task(MM), forger, tmp_path / "forger.py"),
        SuiteJob(evalkit.task(MM), honest, tmp_path / "honest.py"),
    ]
    results: dict[str, object] = {}
    run_suite(jobs, "cpu", evalkit.settings(tmp_path), lambda job, r: results.__setitem__(job.source, r), overlap=False)
    assert set(results) == {forger, honest}, results
    for source, r in results.items():
        assert r.status is Status.OK and "FORGED" not in r.message, evalkit.describe(r)


def test_the_prebuilds_record_is_checked_whole(tmp_path) -> None:
    """The record the prebuild's child leaves is all the parent hears from it, and the candidate's
    code runs in that child: a record of the right shape is taken, none is None (ended before it
    wrote one), anything else is "malformed" (prebuild() then returns a harness_tampering hack),
    never an exception in the parent."""
    from cudal1.bench.evaluator import _child_record

    good = {
        "stage": "done",
        "building": 0,
        "builds": 1,
        "build_seconds": 0.5,
        "failures": [],
        "wall_s": 1.0,
        "ok": True,
        "build_error": False,
        "message": "",
        "stopped": "forward on meta",
    }
    path = tmp_path / "record.json"
    assert _child_record(str(path)) is None
    path.write_text(json.dumps(good))
    assert _child_record(str(path)) == good
    for bad in (
        "[1]",
        "{",
        "[" * 100_000,
        json.dumps({**good, "build_seconds": 10**400}),
        json.dumps({**good, "building": "no"}),
        json.dumps({**good, "built": {"a": 1}}),
        json.dumps({**good, "extra": 1}),
        '{"build_seconds": 1e999}',
    ):
        path.write_text(bad)
        assert _child_record(str(path)) == "malformed", bad[:40]
    path.unlink()
    os.mkfifo(path)  # not a file: not read, not waited on
    assert _child_record(str(path)) == "malformed"
    path.unlink()
    import random

    rng = random.Random(21)
    atoms = [None, True, 0, -1, 1.5, 10**400, "x", "nan", [], {}, [{"path": "/x", "sha256": "0" * 64}], {"a": 1}]
    for _ in range(500):  # random records: taken whole or "malformed", never an exception
        record = {k: rng.choice(atoms + [v]) for k, v in good.items() if rng.random() < 0.9}
        path.write_text(json.dumps(record))
        assert _child_record(str(path)) in (record, "malformed")


def test_a_candidate_that_garbles_its_build_record_gets_a_hack(tmp_path) -> None:
    """End to end: the candidate overwrites the prebuild's record with a 401-digit build time and
    ends the child; the parent's check of the record makes that the candidate's hack, not an
    exception in the parent (which a suite would stop on) nor a harness failure."""
    r = run_prebuild(tmp_path, evalkit.candidate("garbles_the_build_record"))
    assert r is not None and r.status is Status.HACK and r.hack_kind is HackKind.HARNESS_TAMPERING, r
    assert "GARBLED THE RECORD" in r.log and "harness_error" not in r.labels, r.log[-500:]


def test_a_candidate_cannot_borrow_another_candidates_build(tmp_path) -> None:
    """Issue 21, kind 2: an honest candidate builds a library into the cache; another, with no
    kernel of its own, globs the cache for shared objects and loads the honest one's by its exact
    path, and reads a file in another evaluation's scratch directory (where Triton's cache lives).
    Its process reads nothing of the cache but its own build directory and nothing of the
    temporary directory but its own scratch (Landlock, whatever the files' modes and its
    CAP_DAC_READ_SEARCH), so it loads nothing and maps nothing of another's: no custom_kernel, the
    result of the plain PyTorch it is. Before, it found the library (build directories 0777,
    libraries world-readable) and loaded it."""
    if landlock_abi() < 1:
        pytest.skip(
            "Landlock is not available on this kernel: the read rules that close the cache whatever the modes are "
            "not in force (test_another_sources_build_is_closed_by_mode checks the modes alone)"
        )
    builder = evalkit.candidate("tiny_build_in_init")
    assert run_prebuild(tmp_path, builder) is None
    library = ext_dir(tmp_path, builder) / "cudal1_tiny_init" / "cudal1_tiny_init.so"
    assert library.exists()
    foreign = Path(tempfile.mkdtemp(prefix="cudal1-eval-")) / ".triton" / "kernel.cubin"  # a concurrent scratch
    foreign.parent.mkdir()
    foreign.write_text("another evaluation's kernel")
    try:
        r = evalkit.run(MM, evalkit.candidate("borrows_a_build", target=library, foreign=foreign), tmp_path)
    finally:
        shutil.rmtree(foreign.parents[1])
    assert "BORROWED: nothing" in r.log and str(library) in r.log and str(foreign) in r.log, evalkit.describe(r)
    assert r.status is Status.OK and "custom_kernel" not in r.labels, evalkit.describe(r)
    assert r.sandbox["measures"]["landlock_read"]["active"], r.sandbox
    # Its own build directory stays readable: the builder's evaluation loads its library.
    again = evalkit.run(MM, builder, tmp_path)
    assert again.status is Status.OK and "custom_kernel" in again.labels, evalkit.describe(again)


def _as_group(gid: int, paths: dict[str, Path]) -> dict[str, str]:
    """What a process of uid 54321 and group `gid`, with no capability, gets from each path: its
    listing for a directory, "read" for a file it can open, else the error's name."""
    import ctypes

    recv, send = os.pipe()
    pid = os.fork()
    if pid == 0:  # in the forked child: no threads, plain syscalls, then _exit
        out: dict[str, str] = {}
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(54321, 54321, 54321)  # without PR_SET_KEEPCAPS: every capability goes
            for name, path in paths.items():
                try:
                    out[name] = (
                        ",".join(sorted(os.listdir(path))) if path.is_dir() else (open(path, "rb").close() or "read")
                    )
                except OSError as e:
                    out[name] = type(e).__name__
            try:
                ctypes.CDLL(str(paths["library"]))
                out["dlopen"] = "loaded"
            except OSError:
                out["dlopen"] = "refused"
        finally:
            os.write(send, json.dumps(out).encode())
            os._exit(0)
    os.close(send)
    with os.fdopen(recv, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.mark.skipif(
    os.geteuid() != 0, reason="the evaluator gives build directories to a group only when it runs as root"
)
def test_another_sources_build_is_closed_by_mode(tmp_path) -> None:
    """Issue 21, kind 2, by file modes alone (what stands where Landlock is missing; the sandbox
    then keeps no CAP_DAC_READ_SEARCH): a build directory is root:<its source's group>, mode
    0o2770, and the cache above it cannot be listed. A process of another source's group can
    neither list the cache nor open or load the honest candidate's library by its exact path; a
    process of the builder's group (its next evaluation) can. Before, build directories were 0777
    and libraries world-readable: any process could list, open and load them."""
    from cudal1.bench.evaluator import build_group

    cache = Path(tempfile.mkdtemp(prefix="cudal1-cache-test-"))  # /tmp/<it>: every user may pass through
    os.chmod(cache, 0o755)
    try:
        _closed_by_mode(cache, build_group)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _closed_by_mode(cache: Path, build_group) -> None:
    builder = evalkit.candidate("tiny_build_in_init")
    assert run_prebuild(cache, builder) is None
    ext = ext_dir(cache, builder)
    library = ext / "cudal1_tiny_init" / "cudal1_tiny_init.so"
    assert library.exists()
    info = ext.stat()
    assert (info.st_uid, info.st_gid, oct(info.st_mode & 0o7777)) == (0, build_group(builder), "0o2770")
    assert library.stat().st_gid == build_group(builder)
    paths = {"arch": ext.parent, "build": ext, "library": library}
    other = build_group(evalkit.candidate("borrows_a_build", target=library, foreign="/nonexistent"))
    assert other != build_group(builder)
    assert _as_group(other, paths) == {
        "arch": "PermissionError",
        "build": "PermissionError",
        "library": "PermissionError",
        "dlopen": "refused",
    }
    own = _as_group(build_group(builder), {"library": library})
    assert own == {"library": "read", "dlopen": "loaded"}, own


def test_no_harness_handle_is_in_reach_of_the_candidates_processes(tmp_path) -> None:
    """Issue 21, kind 7: a candidate that, at import (so in the prebuild's child and in its host),
    writes a forged result into every descriptor it inherited, flocks every file where device
    locks lived and binds the device lock's name. The prebuild's child holds nothing of the
    harness's but its builder socket (no pipe, no nonce: `cudal1.bench.builder`, whose only
    answer is a build, refuses the frames), so the prebuild comes back as the success it is; its
    host holds only its own channel to the judge and its builder socket, so the garbage it
    writes there is its protocol hack, labelled as such, never a harness_error or an exception in
    the caller; and no lock of the harness was reachable. Before, the prebuild's child held the
    result pipe: the forged frame made its prebuild a hack of the evaluator's result channel."""
    lock_dir = tmp_path / "cudal1-device-locks"
    lock_dir.mkdir()
    (lock_dir / "GPU-kind7").write_text("")
    os.chmod(lock_dir, 0o777)
    os.chmod(lock_dir / "GPU-kind7", 0o666)
    source = evalkit.candidate("scavenges_handles", lock_dir=lock_dir, key="GPU-kind7")
    assert run_prebuild(tmp_path, source) is None
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.HACK and r.hack_kind is HackKind.HARNESS_TAMPERING, evalkit.describe(r)
    assert "harness_error" not in r.labels and "FORGED" not in r.message, evalkit.describe(r)
    handles = next(line for line in r.log.splitlines() if line.startswith("HANDLES:"))
    # The host's channel to the judge and its builder socket, nothing else.
    assert handles.count("socket:") <= 2 and "pipe:" not in handles, handles
    locked = next(line for line in r.log.splitlines() if line.startswith("LOCKED:"))
    assert "flocked" not in locked, locked


@pytest.mark.parametrize("hop", [False, True])
def test_a_build_child_is_ended_before_anything_is_timed(tmp_path, hop) -> None:
    """A build runs in a child of the parent, not among the candidate's processes that are stopped
    while the reference is timed, and the compiler runs what the candidate's flags say: gcc's
    -wrapper ran a program of the candidate's there for as long as the evaluation lasted (a red
    team's spinner slowed the reference 1.2-1.3x on two cores, paying a copy of the reference
    about 1.25x). The judge has the parent end the builds before it times anything, so the
    wrapper's last beat comes before the candidate's last (timed) forward, also where the beat
    forks anew and lets its parent exit at every beat (`hop`: never at a pid a scan listed)."""
    source = evalkit.candidate("outlives_its_build", hop=hop)
    r = evalkit.run(MM, source, tmp_path)
    assert r.status is Status.OK and "harness_error" not in r.labels, evalkit.describe(r)
    assert "BEATING" in r.log, r.log[-3000:]
    ext = ext_dir(tmp_path, source)
    last_beat, last_forward = float((ext / "beat").read_text()), float((ext / "forward").read_text())
    assert last_beat < last_forward, (last_beat, last_forward)


def test_a_library_beside_the_references_operators_is_still_a_fallback(tmp_path) -> None:
    """A copy of the reference with a trivial library built and mapped: `custom_kernel` (a build
    of its own) and `calls_reference_ops` (every reference operator), so the reward's fallback
    rule prices it as a failure at 1.0x instead of paying it as a kernel of its own (a red team's
    trivial build turned -2.30 into about +0.04)."""
    from cudal1.rl.rewards import RewardConfig, price

    r = evalkit.run(MM, evalkit.candidate("reference_beside_a_trivial_build"), tmp_path)
    assert r.status is Status.OK, evalkit.describe(r)
    assert {"custom_kernel", "calls_reference_ops"} <= set(r.labels), r.labels
    at_par = dataclasses.replace(r, speedup=1.0, speedup_spread=0.0)
    assert price(at_par, cfg=RewardConfig()).reason == "fallback"
