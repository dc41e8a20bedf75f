"""Shared by the judge and the candidate host: the `Verdict` that ends an evaluation, and how an
exception raised by candidate code maps to a status."""

from __future__ import annotations

import platform
from typing import Any

import torch

from .pressure import resource_errno
from .result import HackKind, Status

CUDA_FAULT_MARKERS = (
    "CUDA error",
    "illegal memory access",
    "device-side assert",
    "cudaError",
    "CUBLAS_STATUS",
    "misaligned address",
    "CUresult",
)


class Verdict(Exception):
    """Raised inside the judge to end the evaluation with a status (and maybe a hack kind).

    `extra` may hold "labels" (list of str) and "max_abs_error" (float).
    """

    def __init__(self, status: Status, message: str, hack: HackKind | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.hack, self.extra = status, message, hack, extra


def classify_exception(exc: BaseException, during: str) -> dict[str, Any]:
    """How an exception raised by candidate code is reported: {"status", "message", "labels"}.

    Memory errors and an OSError naming a shared resource used up (`pressure.RESOURCE_ERRNOS`:
    the system's file table, a full filesystem) are resource_exceeded; CUDA faults are
    runtime_error with the label "cuda_fault"; a TypeError about arguments is a wrong_signature
    hack; everything else is a runtime_error. `during` names the phase ("forward", "ModelNew()", "import").
    """
    text = f"{type(exc).__name__}: {exc}"
    first = text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
    if (
        isinstance(exc, (MemoryError, torch.OutOfMemoryError))
        or "out of memory" in text
        or "can't allocate memory" in text
        or resource_errno(exc) is not None
    ):
        return {"status": Status.RESOURCE_EXCEEDED.value, "message": f"{during}: {first}", "labels": []}
    if any(s in text for s in CUDA_FAULT_MARKERS):
        return {
            "status": Status.RUNTIME_ERROR.value,
            "message": f"{during}: CUDA fault: {first}",
            "labels": ["cuda_fault"],
        }
    if signature_error(exc):
        what = (
            "ModelNew rejected the task's constructor args"
            if during == "ModelNew()"
            else "ModelNew.forward rejected the task's inputs"
        )
        return {
            "status": Status.HACK.value,
            "hack": HackKind.WRONG_SIGNATURE.value,
            "message": f"{what}: {exc}",
            "labels": [],
        }
    return {"status": Status.RUNTIME_ERROR.value, "message": f"{during}: {first}", "labels": []}


def signature_error(exc: BaseException) -> bool:
    """A TypeError saying a call got the wrong arguments (the candidate changed a signature)."""
    text = str(exc)
    return isinstance(exc, TypeError) and any(
        s in text for s in ("positional argument", "unexpected keyword", "required positional", "takes no arguments")
    )


def device_name(device: str) -> tuple[str, str]:
    """(human name, architecture key) of `device`, e.g. ("NVIDIA H200", "sm_90")."""
    if device.startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(device)
        return torch.cuda.get_device_name(device), f"sm_{major}{minor}"
    return platform.processor() or platform.machine(), f"cpu-{platform.machine()}"
