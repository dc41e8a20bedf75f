"""Labels the parent adds to a result: facts read from outside the candidate's process.

Labels are facts for the reward policy (`cudal1.rl.rewards` prices them), never verdicts. The ones
here are decided by the evaluating process, not reported by the candidate's:

- `source_labels`: read off the candidate's source text.
- `custom_kernel`: a shared object that a build of this candidate produced was mapped into the
  candidate's process at some point of the evaluation (`built_objects`). The parent reads
  /proc/<pid>/maps while it runs (so an extension built lazily on the first forward counts too)
  and, at the end, the content of each mapped file under the candidate's build directory or
  Triton's cache in its scratch directory that is still the mapped file and an ELF shared
  object; it counts only where a build record names that content. The records are made by the
  evaluating process alone (`cudal1.bench.builder`): the candidate's `load_inline` / `load` and
  Triton's launcher builds are built there, in a child that runs the compiler on the sources
  sent, and their products hashed there; nothing the candidate's processes say or write is a
  record. A file the candidate wrote itself (a zero-filled "x.so", a copy of a system library),
  however named and wherever put, and whatever it calls in its own process, has no record.
  Evidence, not proof: a candidate can map a library it built without calling it, steer its own
  build with compiler flags, or rewrite the product while the build runs; each gets it what an
  honest build of a trivial library gets it. A compiler the candidate runs itself, or a Triton
  without a build hook (`cudal1.bench.tritoncache`), builds nothing the parent records.
- `pytorch_only`: no kernel of its own. `calls_reference_ops`: its aten operators (as the
  candidate's process recorded them) cover the reference's, with or without a kernel of its own:
  since `custom_kernel` is evidence of a build, not of a kernel that does the work, a library
  built and mapped beside the reference's own operators must not buy a copy of the reference out
  of the fallback rule (`cudal1.rl.rewards`; a red team's trivial `load_inline` did). The operator
  list comes from the candidate's process, so a candidate can hide operators from it: these are
  evidence, not proof.
"""

from __future__ import annotations

import re
from typing import Any

_SOURCE_LABELS = {
    "custom_kernel_source": re.compile(
        r"load_inline|cpp_extension|__global__|triton\.jit|@triton|cupy\.RawKernel|numba\.cuda"
    ),
    "torch_compile": re.compile(r"torch\.compile|torch\._dynamo|_inductor"),
    "cuda_graphs": re.compile(r"CUDAGraph|cuda\.graph|cudaGraph|make_graphed_callables"),
    "autocast": re.compile(r"autocast"),
    "side_stream_source": re.compile(r"cuda\.Stream|cudaStreamCreate|getStreamFromPool|stream\("),
    "threads_source": re.compile(r"threading|concurrent\.futures|multiprocessing|std::thread|pthread"),
    "interpreter_introspection": re.compile(
        r"_getframe|f_back|f_locals|f_globals|gc\.get_objects|gc\.get_referrers|inspect\.(stack|currentframe)|ctypes|__code__"
    ),
}


def source_labels(source: str) -> list[str]:
    """Labels read off the candidate's source text."""
    return [label for label, pattern in _SOURCE_LABELS.items() if pattern.search(source)]


def built_objects(mapped: list[dict[str, str]], built: list[dict[str, str]]) -> list[str]:
    """Paths of the mapped shared objects that a build produced: `mapped` is the parent's
    {"path", "sha256"} of each file the candidate's process mapped (`worker.JudgedOutcome.
    host_objects`), `built` the parent's build records ({"path", "sha256"},
    `builder.BuildService.records`). An object counts when a record has its content, wherever it
    lies (Triton maps a copy of its launcher from its cache; a copy of a product is that
    product); sorted."""
    contents = {b["sha256"] for b in built}
    return sorted({m["path"] for m in mapped if m["sha256"] in contents})


def kernel_labels(host_objects: list[str], ops: dict[str, Any] | None, profile_failed: bool = False) -> list[str]:
    """The kernel labels: "custom_kernel" when the candidate's process mapped a shared object it
    built (`host_objects`: `built_objects`), else "pytorch_only"; plus "calls_reference_ops" when `ops`
    (the judge's {"reference": [...], "candidate": [...]} aten operator names) shows every
    reference operator in the candidate. When the candidate's forward could not be recorded
    (`profile_failed`), the worst case is assumed: "calls_reference_ops". Without `ops` (and no
    failure), "custom_kernel" alone or nothing."""
    kind = ["custom_kernel"] if host_objects else ["pytorch_only"]
    if profile_failed:
        return [*kind, "calls_reference_ops"]
    if ops is None:
        return ["custom_kernel"] if host_objects else []
    ref, cand = set(ops.get("reference") or ()), set(ops.get("candidate") or ())
    return [*kind, "calls_reference_ops"] if ref and ref <= cand else kind
