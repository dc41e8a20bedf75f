"""Small `run_isolated` targets: run a candidate as far as its builds go, describe a device."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from typing import Any

import torch

from . import buildcache
from .host import CANDIDATE_MODULE
from .verdicts import device_name


class _Progress:
    """The build child's account of itself (`build_payload`): the grace timer on the candidate's
    own code, and the record of where it is, written to `record_path` at every step so that the
    parent knows it even when the child is ended (timer, memory, wall limit)."""

    def __init__(self, record_path: str | None, grace_s: float) -> None:
        self.path = record_path
        self.grace_s = max(0.001, float(grace_s))
        self.stage = "import"
        self.started = time.perf_counter()
        self.remaining = self.grace_s

    def arm(self) -> None:
        """Start the grace timer: SIGALRM, left to its default action (end the process), fires once
        the candidate's own code has run `grace_s` outside builds. A signal rather than a watcher
        thread, so that a C++ forward holding the GIL is ended too."""
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, self.grace_s)
        self.write()

    def disarm(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)

    def build_started(self, activity: buildcache.BuildActivity) -> None:
        if activity.active == 1:
            self.remaining = signal.setitimer(signal.ITIMER_REAL, 0)[0]  # builds take no grace
        self.write()

    def build_ended(self, activity: buildcache.BuildActivity) -> None:
        self.write()
        if activity.active == 0 and self.stage != "done":
            signal.setitimer(signal.ITIMER_REAL, max(0.001, self.remaining))

    def enter(self, stage: str) -> None:
        self.stage = stage
        self.write()

    def record(self, **extra: Any) -> dict[str, Any]:
        act = buildcache.activity()
        return {
            "stage": self.stage,
            "building": act.active,
            "builds": act.calls,
            "build_seconds": round(act.seconds, 3),
            "failures": act.failures[-5:],
            "wall_s": round(time.perf_counter() - self.started, 3),
            **extra,
        }

    def write(self, record: dict[str, Any] | None = None) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(record or self.record(), f)
            os.replace(tmp, self.path)
        except OSError:
            pass


def build_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Run the candidate as far as its builds go, with no device: import it, construct `ModelNew`
    with the task's constructor arguments and call forward once on the task's inputs, so that
    every extension it builds at import, in __init__ or in its first forward lands in the build
    cache (TORCH_EXTENSIONS_DIR). Runs in `cudal1.bench.evaluator.prebuild`'s sandboxed child.

    payload: {"source", "task" (a `Task.to_dict()`, or None: import only), "profile",
    "grace_s", "record" (a path for `_Progress`, or None)}.

    The model and the inputs are made on the meta device (shapes and dtypes, no data: nothing is
    computed, so a forward costs nothing however large the task), or on the CPU when the task's
    inputs or the constructor need data; code written for the GPU (`.cuda()`, `.to("cuda")`,
    `device="cuda"`) gets that device instead (`_CudaAs`). The forward is there only to reach the builds: any
    exception after them is expected and ignored (the evaluation, on the device, judges
    behaviour). torch.compile is switched off here (TORCH_COMPILE_DISABLE: inductor would compile
    for the wrong device); its compile, and Triton's, happen in the evaluation's first forward.

    Returns {"ok", "build_error", "message", "stage", "build_seconds", "builds", "building",
    "failures", "wall_s"}: build_error is True for a syntax error or a build failure that reached
    the candidate's import, constructor or forward (one it caught and survived is only listed in
    "failures"; the evaluation then finds it recorded and does not compile it again). The same
    dict is the record left at payload["record"], which is all the parent reads: this runs in a
    child without a result pipe (`run_isolated(..., reply=False)`), since it imports the candidate.
    """
    from ..tasks.task import Task, load_source_module
    from .inputs import make_init_inputs, make_inputs

    progress = _Progress(payload.get("record"), float(payload.get("grace_s") or 20.0))
    buildcache.install(os.environ.get("TORCH_EXTENSIONS_DIR", ""), listener=progress)
    torch.set_num_threads(1)  # the forward only has to reach the builds
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].config.disable = True
    progress.arm()
    try:
        try:
            module = load_source_module(payload["source"], CANDIDATE_MODULE, "<candidate>")
        except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported
            return _finished(progress, exc, syntax=isinstance(exc, SyntaxError))
        if not payload.get("task") or not hasattr(module, "ModelNew"):
            return _finished(progress, None)
        progress.enter("task")
        try:
            task_module = Task.from_dict(payload["task"]).load_module(payload.get("profile"))
            init = make_init_inputs(task_module)
        except Exception as exc:  # noqa: BLE001 - the task's own failure: the evaluation reports it
            return _finished(progress, None, note=f"the task did not load here: {type(exc).__name__}: {exc}")
        failure: BaseException | None = None
        for device in ("meta", "cpu"):
            progress.enter(f"ModelNew() on {device}")
            try:
                with torch.device(device), _CudaAs(device):
                    model = module.ModelNew(*_clone(init))
                progress.enter(f"inputs on {device}")
                inputs = make_inputs(task_module, 0, device)
                break
            except BaseException as exc:  # noqa: BLE001
                if buildcache.is_build_failure(exc):
                    return _finished(progress, exc)
                failure = exc
        else:
            return _finished(progress, None, note=f"stopped before forward: {type(failure).__name__}: {failure}"[:500])
        progress.enter(f"forward on {device}")
        try:
            with torch.no_grad(), torch.device(device), _CudaAs(device):
                model(*inputs)
        except BaseException as exc:  # noqa: BLE001
            if buildcache.is_build_failure(exc):
                return _finished(progress, exc)
        return _finished(progress, None)
    finally:
        progress.disarm()


def _finished(progress: _Progress, exc: BaseException | None, syntax: bool = False, note: str = "") -> dict[str, Any]:
    """The child's answer (also left in the record file): where it stopped and what was built."""
    progress.disarm()
    stage = progress.stage
    progress.stage = "done"
    build_error = syntax or buildcache.is_build_failure(exc)
    if exc is not None:
        traceback.print_exception(exc)
    message = f"{type(exc).__name__}: {str(exc)[:500]}" if exc is not None else note
    record = progress.record(ok=exc is None, build_error=build_error, message=message, stopped=stage)
    progress.write(record)
    return record


class _CudaAs(torch.overrides.TorchFunctionMode):
    """Inside the prebuild, which sees no GPU: a request for a CUDA device (`tensor.cuda()`,
    `.to("cuda")`, `device="cuda"` given to a factory) gets `device` (meta or the CPU) instead, so
    that code written for the GPU runs on to its builds. Other CUDA calls (`torch.cuda.*`,
    streams, events) still fail, which ends the forward there."""

    def __init__(self, device: str) -> None:
        super().__init__()
        self.device = torch.device(device)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0].to(self.device)
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = self.device
        if func is torch.Tensor.to:
            args = tuple(self.device if _is_cuda(a) else a for a in args)
        return func(*args, **kwargs)


def _is_cuda(value: Any) -> bool:
    return (isinstance(value, str) and value.startswith("cuda")) or (
        isinstance(value, torch.device) and value.type == "cuda"
    )


def _clone(values: list[Any]) -> list[Any]:
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


def device_info(payload: dict[str, Any]) -> dict[str, Any]:
    """Name, architecture key, versions and, for a GPU, the UUID of `payload["device"]` (the key
    of its `cudal1.bench.devicelock.DeviceLock`)."""
    device = payload["device"]
    name, arch = device_name(device)
    uuid = None
    if device.startswith("cuda"):
        uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "") or None
    return {"name": name, "arch": arch, "torch": torch.__version__, "cuda": torch.version.cuda, "uuid": uuid}
