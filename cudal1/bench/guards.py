"""Guards against reward hacks that live in process state, and the labels a candidate earns.

The runner keeps reference and candidate in one process (interleaved timing is the least noisy),
so everything a candidate could change for both is captured before its code is imported and
checked or reset afterwards:

- `GlobalFlags`: precision, cuDNN, determinism, default dtype, grad mode, threads, the current
  CUDA stream. Reset to the pristine values before every reference call and to the candidate's
  values before every candidate call, then verified (`GLOBAL_STATE` hack if a reset does not stick).
- `FunctionSnapshot`: the identity of every callable in torch, torch.nn.functional, torch.Tensor,
  torch.cuda, time, builtins and cudal1.bench's own modules. Any replacement is a `MONKEY_PATCH`
  (`TIMER_TAMPERING` when it is a clock, an event or a synchronize).
- `python_threads`: threads a candidate leaves running (a way to finish work after forward returns).
- `OpRecorder`: the aten operators and dtypes one forward runs (for the labels "calls_reference_ops"
  and "reduced_precision").

Limits: code in the same process can still tamper at the C level (ctypes, patched shared
libraries). The outputs of every timed call are checked against the reference, and the clocks the
runner uses were bound before the candidate was imported, which bounds what such tampering buys.
"""

from __future__ import annotations

import builtins
import inspect
import re
import sys
import threading
import time
import types
from typing import Any, Callable

import torch
import torch._dynamo  # noqa: F401 - imported lazily it rebinds torch functions (e.g. torch.manual_seed),
# which the first dispatch mode or torch.compile in the child would trigger and the guard would
# read as a monkey patch; importing it here, before any snapshot, keeps the snapshot stable.
from torch.utils._python_dispatch import TorchDispatchMode

from .result import HackKind

# ---------------------------------------------------------------------------------------------
# global flags


def _flag_accessors() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """name -> (get, set) for every global flag a candidate could flip to change results or speed."""
    b = torch.backends
    acc: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
        "cuda.matmul.allow_tf32": (lambda: b.cuda.matmul.allow_tf32, lambda v: setattr(b.cuda.matmul, "allow_tf32", v)),
        "cuda.matmul.allow_fp16_reduced_precision_reduction": (
            lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction,
            lambda v: setattr(b.cuda.matmul, "allow_fp16_reduced_precision_reduction", v),
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": (
            lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction,
            lambda v: setattr(b.cuda.matmul, "allow_bf16_reduced_precision_reduction", v),
        ),
        "cudnn.allow_tf32": (lambda: b.cudnn.allow_tf32, lambda v: setattr(b.cudnn, "allow_tf32", v)),
        "cudnn.benchmark": (lambda: b.cudnn.benchmark, lambda v: setattr(b.cudnn, "benchmark", v)),
        "cudnn.deterministic": (lambda: b.cudnn.deterministic, lambda v: setattr(b.cudnn, "deterministic", v)),
        "cudnn.enabled": (lambda: b.cudnn.enabled, lambda v: setattr(b.cudnn, "enabled", v)),
        "float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        "deterministic_algorithms": (
            torch.are_deterministic_algorithms_enabled,
            lambda v: torch.use_deterministic_algorithms(v),
        ),
        "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
        "num_threads": (torch.get_num_threads, torch.set_num_threads),
        "mkldnn.enabled": (lambda: b.mkldnn.enabled, lambda v: setattr(b.mkldnn, "enabled", v)),
    }
    # Python modes stay on the stack across calls and run inside the reference's ops: they can
    # only be removed by whoever pushed them, so a non-empty stack cannot be reset (global_state).
    acc["torch_function_modes"] = (torch._C._len_torch_function_stack, lambda v: None)
    acc["torch_dispatch_modes"] = (torch._C._len_torch_dispatch_stack, lambda v: None)
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        acc["cuda.current_stream"] = (torch.cuda.current_stream, torch.cuda.set_stream)
    return acc


NOT_APPLIED = {"grad_enabled"}
"""Flags reported but never re-applied: every timed and checked call runs under torch.no_grad()."""

REDUCED_PRECISION_FLAGS = {
    "cuda.matmul.allow_tf32": True,
    "cudnn.allow_tf32": True,
    "cuda.matmul.allow_fp16_reduced_precision_reduction": True,
    "cuda.matmul.allow_bf16_reduced_precision_reduction": True,
    "float32_matmul_precision": ("high", "medium"),
}


class GlobalFlags:
    """A snapshot of the global flags, which can be re-applied and verified."""

    def __init__(self) -> None:
        self._acc = _flag_accessors()
        self.values = {name: self._read(get) for name, (get, _) in self._acc.items()}

    @staticmethod
    def _read(get: Callable[[], Any]) -> Any:
        try:
            return get()
        except Exception:  # noqa: BLE001 - a flag this build lacks reads as unknown
            return None

    def diff(self, other: "GlobalFlags") -> dict[str, tuple[Any, Any]]:
        """name -> (self's value, other's value) for flags that differ."""
        return {k: (v, other.values.get(k)) for k, v in self.values.items() if other.values.get(k) != v}

    def apply(self) -> list[str]:
        """Set every flag to the snapshot's value; return the names whose value did not stick."""
        stuck = []
        for name, (get, set_) in self._acc.items():
            want = self.values[name]
            if want is None or name in NOT_APPLIED:
                continue
            try:
                if self._read(get) != want:
                    set_(want)
                if self._read(get) != want:
                    stuck.append(name)
            except Exception:  # noqa: BLE001
                stuck.append(name)
        return stuck


def reduced_precision_flags(pristine: GlobalFlags, flags: GlobalFlags) -> list[str]:
    """Names of flags that `flags` switched, relative to `pristine`, into a reduced-precision mode."""
    out = []
    changed = pristine.diff(flags)
    for name, bad in REDUCED_PRECISION_FLAGS.items():
        if name not in changed:
            continue
        value = flags.values.get(name)
        if (isinstance(bad, tuple) and value in bad) or value is bad:
            out.append(name)
    return out


# ---------------------------------------------------------------------------------------------
# monkey patches

_TIMER_NAMES = re.compile(r"(^time\.)|(synchronize)|(Event)|(elapsed_time)|(perf_counter)|(monotonic)|(record)|(DeviceClock)|(time_call)")


def _watched_namespaces() -> dict[str, Any]:
    spaces: dict[str, Any] = {
        "torch": torch,
        "torch.nn.functional": torch.nn.functional,
        "torch.Tensor": torch.Tensor,
        "torch._C.TensorBase": torch._C.TensorBase,
        "torch.nn.Module": torch.nn.Module,
        "torch.testing": torch.testing,
        "torch.cuda": torch.cuda,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Stream": torch.cuda.Stream,
        "torch._C": torch._C,
        "time": time,
        "builtins": builtins,
        "threading": threading,
    }
    # The evaluator's own modules and the task's module, with the classes they define (a method
    # of DeviceClock or of the task's Model is as much a target as a module function).
    for name, mod in list(sys.modules.items()):
        if (name.startswith("cudal1.bench") or name.startswith("cudal1_task_")) and isinstance(mod, types.ModuleType):
            spaces[name] = mod
            for attr, value in list(vars(mod).items()):
                if isinstance(value, type) and value.__module__ == name:
                    spaces[f"{name}.{attr}"] = value
    return spaces


IGNORED = {"torch.Storage"}
"""Names torch itself rebinds: torch.Storage follows torch.set_default_dtype (a flag, reported as such)."""


class FunctionSnapshot:
    """The callables in the watched namespaces at one moment (held, so identities stay unique)."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}
        self.class_names: set[str] = set()
        for prefix, space in _watched_namespaces().items():
            if isinstance(space, type):
                # Classes: every attribute the class resolves, inherited ones included (a method
                # added to torch.Tensor shadows TensorBase's), as stored, without binding.
                for name in dir(space):
                    try:
                        self.objects[f"{prefix}.{name}"] = inspect.getattr_static(space, name)
                    except AttributeError:
                        continue
                    self.class_names.add(f"{prefix}.{name}")
                continue
            try:
                members = dict(vars(space))
            except TypeError:
                continue
            for name, value in members.items():
                if callable(value) and not isinstance(value, type(sys)):
                    self.objects[f"{prefix}.{name}"] = value

    def changed(self) -> list[str]:
        """Watched names whose object is no longer the one captured, and attributes added to a
        watched class (module-level additions are not reported: torch adds submodules lazily)."""
        now = FunctionSnapshot()
        replaced = {k for k, v in self.objects.items() if k in now.objects and now.objects[k] is not v} - IGNORED
        added = now.class_names - self.class_names
        return sorted(replaced | added)


def patch_hack_kind(names: list[str]) -> HackKind:
    """TIMER_TAMPERING when any replaced name is a clock/event/synchronize, else MONKEY_PATCH."""
    return HackKind.TIMER_TAMPERING if any(_TIMER_NAMES.search(n) for n in names) else HackKind.MONKEY_PATCH


# ---------------------------------------------------------------------------------------------
# threads


def python_threads() -> set[int]:
    """Idents of live Python threads other than the current one."""
    me = threading.get_ident()
    return {t.ident for t in threading.enumerate() if t.ident is not None and t.ident != me and t.is_alive()}


# ---------------------------------------------------------------------------------------------
# operator recording


class OpRecorder(TorchDispatchMode):
    """Records the aten overloads a forward dispatches, and the floating dtypes they see."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: A002 - torch's signature
        kwargs = kwargs or {}
        self.ops.append(str(func.overloadpacket.__name__))
        for a in [*args, *kwargs.values()]:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                self.dtypes.add(a.dtype)
        return func(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# source labels

_SOURCE_LABELS = {
    "custom_kernel_source": re.compile(r"load_inline|cpp_extension|__global__|triton\.jit|@triton|cupy\.RawKernel|numba\.cuda"),
    "torch_compile": re.compile(r"torch\.compile|torch\._dynamo|_inductor"),
    "cuda_graphs": re.compile(r"CUDAGraph|cuda\.graph|cudaGraph|make_graphed_callables"),
    "autocast": re.compile(r"autocast"),
    "side_stream_source": re.compile(r"cuda\.Stream|cudaStreamCreate|getStreamFromPool|stream\("),
    "threads_source": re.compile(r"threading|concurrent\.futures|multiprocessing|std::thread|pthread"),
    # Reading the evaluator's frames or heap is how an in-process candidate finds reference data.
    "interpreter_introspection": re.compile(r"_getframe|f_back|f_locals|f_globals|gc\.get_objects|gc\.get_referrers|inspect\.(stack|currentframe)|ctypes|__code__"),
}


def source_labels(source: str) -> list[str]:
    """Labels read off the candidate's source text (facts for the reward policy, not verdicts)."""
    labels = []
    for label, pattern in _SOURCE_LABELS.items():
        if pattern.search(source):
            labels.append(label)
    return labels


LOW_PRECISION = {torch.float16, torch.bfloat16}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        LOW_PRECISION.add(getattr(torch, _name))
