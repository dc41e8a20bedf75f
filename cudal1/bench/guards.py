"""What the candidate host watches in its own process, and the labels a candidate earns.

These run in the candidate host (`cudal1.bench.host`), beside candidate code, so they are
reports, not defences: the judge's measurement and comparison live in another process and need
none of them. A candidate that switches one off only loses a label or a hack verdict it would have
earned; nothing it does here changes the reference, the inputs, the clock or the checker.

- `GlobalFlags`: precision, cuDNN, determinism, default dtype, grad mode, threads, Python modes,
  the current CUDA stream; a flag changed from the pristine value becomes a `global_flags:` label
  (and `reduced_precision` where it lowers precision).
- `FunctionSnapshot`: the identity of every callable in torch, torch.nn.functional, torch.Tensor,
  torch.cuda, time, builtins and cudal1.bench's own modules. A replacement is reported as a
  `MONKEY_PATCH` hack (`TIMER_TAMPERING` when it is a clock, an event or a synchronize).
- `operator_canary`: comparisons on known answers, which a `torch.library` override or a Python
  mode left on would break.
- `python_threads`: threads a candidate leaves running.
- `OpRecorder`: the aten operators and dtypes one forward runs (for "pytorch_only",
  "calls_reference_ops" and "reduced_precision").
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
from torch._dynamo.mutation_guard import install_generation_tagging_init
from torch.utils._python_dispatch import TorchDispatchMode

from . import correctness
from .result import HackKind

# Entering any torch.compile'd function patches torch.nn.Module.__init__ and __setstate__ (dynamo's
# generation tagging: torch/_dynamo/mutation_guard.py) and adds a marker attribute to Module, once
# per process; the guard would read an honest torch.compile as a monkey patch. Installing it here,
# before any snapshot (in the reference's host too), keeps the snapshot stable; it is idempotent.
install_generation_tagging_init()

# ---------------------------------------------------------------------------------------------
# global flags


def _flag_getters() -> dict[str, Callable[[], Any]]:
    """name -> getter for the global flags a candidate could flip to change results or speed
    (those a torch build lacks read as None)."""
    b = torch.backends
    getters: dict[str, Callable[[], Any]] = {
        "cuda.matmul.allow_tf32": lambda: b.cuda.matmul.allow_tf32,
        "cuda.matmul.allow_fp16_reduced_precision_reduction": lambda: (
            b.cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "cuda.matmul.allow_bf16_reduced_precision_reduction": lambda: (
            b.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cuda.matmul.allow_fp16_accumulation": lambda: b.cuda.matmul.allow_fp16_accumulation,
        "cuda.flash_sdp": lambda: b.cuda.flash_sdp_enabled(),
        "cuda.mem_efficient_sdp": lambda: b.cuda.mem_efficient_sdp_enabled(),
        "cuda.math_sdp": lambda: b.cuda.math_sdp_enabled(),
        "cuda.cudnn_sdp": lambda: b.cuda.cudnn_sdp_enabled(),
        "cuda.fp16_bf16_reduction_math_sdp": lambda: b.cuda.fp16_bf16_reduction_math_sdp_allowed(),
        "cudnn.allow_tf32": lambda: b.cudnn.allow_tf32,
        "cudnn.benchmark": lambda: b.cudnn.benchmark,
        "cudnn.deterministic": lambda: b.cudnn.deterministic,
        "cudnn.enabled": lambda: b.cudnn.enabled,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "default_dtype": torch.get_default_dtype,
        "grad_enabled": torch.is_grad_enabled,
        "num_threads": torch.get_num_threads,
        "mkldnn.enabled": lambda: b.mkldnn.enabled,
        # Python modes stay on the stack across calls and run inside every later op.
        "torch_function_modes": torch._C._len_torch_function_stack,
        "torch_dispatch_modes": torch._C._len_torch_dispatch_stack,
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        getters["cuda.current_stream"] = torch.cuda.current_stream
    return getters


REDUCED_PRECISION_FLAGS = {
    "cuda.matmul.allow_tf32": True,
    "cudnn.allow_tf32": True,
    "cuda.matmul.allow_fp16_reduced_precision_reduction": True,
    "cuda.matmul.allow_bf16_reduced_precision_reduction": True,
    "float32_matmul_precision": ("high", "medium"),
    "cuda.matmul.allow_fp16_accumulation": True,
    "cuda.fp16_bf16_reduction_math_sdp": True,
}


class GlobalFlags:
    """A snapshot of the global flags (name -> value in `values`)."""

    def __init__(self) -> None:
        self.values = {name: self._read(get) for name, get in _flag_getters().items()}

    @staticmethod
    def _read(get: Callable[[], Any]) -> Any:
        try:
            return get()
        except Exception:  # noqa: BLE001 - a flag this build lacks reads as unknown
            return None

    def diff(self, other: "GlobalFlags") -> dict[str, tuple[Any, Any]]:
        """name -> (self's value, other's value) for flags that differ."""
        return {k: (v, other.values.get(k)) for k, v in self.values.items() if other.values.get(k) != v}


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

_TIMER_NAMES = re.compile(
    r"(^time\.)|(synchronize)|(Event)|(elapsed_time)|(perf_counter)|(monotonic)|(record)|(DeviceClock)|(time_call)"
)


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
        self.classes: set[str] = set()
        for prefix, space in _watched_namespaces().items():
            if isinstance(space, type):
                self.classes.add(prefix)
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
        class watched when the snapshot was taken (module-level additions are not reported: torch
        adds submodules lazily; nor are the classes of an evaluator module first imported since,
        as Triton imports `cudal1.bench.tritoncache` the first time it needs its cache)."""
        now = FunctionSnapshot()
        replaced = {k for k, v in self.objects.items() if k in now.objects and now.objects[k] is not v} - IGNORED
        added = {n for n in now.class_names - self.class_names if n.rsplit(".", 1)[0] in self.classes}
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


LOW_PRECISION = {torch.float16, torch.bfloat16}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        LOW_PRECISION.add(getattr(torch, _name))


def operator_canary(device: str) -> str | None:
    """Do comparisons still tell right from wrong on `device`? None if they do, else what broke.

    Code can change what an operator does (a `torch.library` kernel override, a Python mode left
    on) without replacing any Python function; this canary runs the checker's comparison on known
    answers. It runs in the candidate host, where such overrides only touch the candidate's own
    process: a failure is reported as tampering, and the judge's checks are not affected.
    """
    ref = torch.tensor([1.0, -2.0, 3.0, 0.5], device=device)
    cases = [
        ("equal values pass", correctness.compare_values(ref.clone(), ref)[0], True),
        ("wrong values fail", correctness.compare_values(ref + 1.0, ref)[0], False),
        ("zeros fail", correctness.compare_values(torch.zeros_like(ref), ref)[0], False),
        ("NaN fails", correctness.compare_values(torch.full_like(ref, float("nan")), ref)[0], False),
        ("a change is seen", correctness.tree_equal([ref], [ref + 1.0]), False),
        ("ordering works", bool((ref <= ref + 1.0).all()) and not bool((ref + 1.0 <= ref).any()), True),
    ]
    for what, got, want in cases:
        if got is not want:
            return f"checker self-test failed: {what}"
    return None
