"""Small `run_isolated` targets: build a candidate's extensions, describe a device."""

from __future__ import annotations

import os
import time
import traceback
from typing import Any

import torch

from . import buildcache
from .host import CANDIDATE_MODULE
from .verdicts import device_name


def build_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """Import the candidate only: its inline extensions build into the cache (no device work).

    Returns {"ok": bool, "build_error": bool, "message": str, "build_seconds": float}; build_error is
    True only for a syntax error or a failed extension build (other import failures are left for
    the full evaluation to judge, which has the device). A failed extension build is remembered in
    the build directory (`cudal1.bench.buildcache`), so the evaluation does not compile it again.
    """
    from ..tasks.task import load_source_module

    buildcache.install(os.environ.get("TORCH_EXTENSIONS_DIR", ""))
    t0 = time.perf_counter()
    try:
        load_source_module(payload["source"], CANDIDATE_MODULE, "<candidate>")
        return {"ok": True, "build_error": False, "message": "", "build_seconds": round(time.perf_counter() - t0, 3)}
    except BaseException as exc:  # noqa: BLE001
        traceback.print_exc()
        text = f"{type(exc).__name__}: {str(exc)[:500]}"
        build_error = isinstance(exc, SyntaxError) or buildcache.FAILURE_TEXT in str(exc) or "ninja" in str(exc).lower()
        return {"ok": False, "build_error": build_error, "message": text, "build_seconds": round(time.perf_counter() - t0, 3)}


def device_info(payload: dict[str, Any]) -> dict[str, Any]:
    """Name, architecture key, versions and, for a GPU, the UUID of `payload["device"]` (the key
    of its `cudal1.bench.devicelock.DeviceLock`)."""
    device = payload["device"]
    name, arch = device_name(device)
    uuid = None
    if device.startswith("cuda"):
        uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "") or "") or None
    return {"name": name, "arch": arch, "torch": torch.__version__, "cuda": torch.version.cuda, "uuid": uuid}
