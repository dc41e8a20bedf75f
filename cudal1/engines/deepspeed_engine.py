"""The one adapter to DeepSpeed: process group, engine construction, steps, checkpoints, full weights.

This is the only module of cudal1 that imports deepspeed (lazily, on first use, after choosing the
accelerator), so a DeepSpeed upgrade touches this file only.

What DeepSpeed 0.19.8 accepts on a CPU-only machine (checked here, gloo backend, one process):
- ZeRO stages 0, 1, 2 and 3, fp32 and bf16, with a client optimizer (`torch.optim.AdamW` built
  here and passed in). DeepSpeed's own optimizers (FusedAdam, DeepSpeedCPUAdam) would compile C++
  ops on first use; the plain torch optimizer needs none.
- fp16 on CPU: DeepSpeed refuses it ("Type fp16 is not supported on your device"); `make_engine`
  says so before building anything.
- Gradient accumulation is caller-owned ("managed_gradient_accumulation": false): any number of
  `backward` calls, then one `step`, which is the accumulation boundary. The loss is not divided
  by the accumulation count here: callers scale their micro-batch losses themselves (see
  `cudal1.rl.losses.aggregate`), because micro-batches differ in token counts.
- `deepspeed.init_distributed` builds a shared-memory collective op on CPU (about 140 s the first
  time on a 2-core machine, cached afterwards in ~/.cache/torch_extensions). A one-process world
  never uses it, so `init_distributed_if_needed` skips that build when WORLD_SIZE is 1.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from cudal1.engines.weight_sync import free_port

PRECISIONS = ("fp32", "bf16", "fp16")
_ds = None  # the deepspeed module, once imported


def _deepspeed(device: str | None = None):
    """Import deepspeed, first pinning its accelerator (it reads DS_ACCELERATOR at import)."""
    global _ds
    if _ds is None:
        if "DS_ACCELERATOR" not in os.environ:
            want_cuda = torch.cuda.is_available() if device is None else str(device).startswith("cuda")
            os.environ["DS_ACCELERATOR"] = "cuda" if want_cuda else "cpu"
        import deepspeed

        _ds = deepspeed
    return _ds


def accelerator_name() -> str:
    """"cpu" or "cuda": the accelerator DeepSpeed runs on in this process."""
    return _deepspeed().get_accelerator().device_name()


def init_distributed_if_needed(backend: str | None = None, device: str | None = None) -> None:
    """Join (or create) the process group DeepSpeed needs; a no-op when one exists.

    Outside a launcher (a plain process, a Ray actor, a test) this makes a one-process world:
    MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK=0, LOCAL_RANK=0, WORLD_SIZE=1 are set when
    absent. Under `deepspeed`/`torchrun` those variables are already there and are used as is.

    Args:
        backend: "gloo" or "nccl"; default gloo on CPU, nccl on CUDA.
        device: "cpu" or "cuda[:i]", used to pick the accelerator if deepspeed is not imported yet.
    """
    ds = _deepspeed(device)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        if not ds.comm.is_initialized():
            ds.init_distributed(dist_backend=torch.distributed.get_backend(), auto_mpi_discovery=False)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    on_cpu = accelerator_name() == "cpu"
    backend = backend or ("gloo" if on_cpu else "nccl")
    if on_cpu and os.environ["WORLD_SIZE"] == "1":
        # The shm all-reduce op only speeds up collectives between processes of one host.
        # importlib, not `import deepspeed.comm.torch as m`: the package re-exports the name
        # `torch` (the torch module), which that attribute lookup would return instead.
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    ds.init_distributed(dist_backend=backend, auto_mpi_discovery=False)


def make_engine(
    model: torch.nn.Module,
    *,
    zero_stage: int = 2,
    precision: str = "fp32",
    lr: float = 1e-6,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    grad_accum: int = 1,
    micro_batch: int = 1,
    grad_clip: float = 1.0,
):
    """Wrap a model in a DeepSpeed engine with a torch AdamW optimizer.

    Args:
        model: a torch module with fp32 parameters (DeepSpeed casts to bf16 and keeps fp32
            master weights in the optimizer when precision="bf16").
        zero_stage: 0 (plain data parallel), 1 (optimizer state sharded), 2 (+ gradients),
            3 (+ parameters).
        precision: "fp32", "bf16", or "fp16" (GPU only).
        lr, weight_decay, betas: AdamW's.
        grad_accum, micro_batch: recorded in the config (DeepSpeed derives train_batch_size from
            them); accumulation itself is caller-owned (see the module docstring).
        grad_clip: max global gradient norm (0 disables clipping).

    Returns:
        the `deepspeed.DeepSpeedEngine`; call it like the model, then `backward`, `step`.

    Raises:
        ValueError: unknown precision or stage, or fp16 on CPU.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} not in {PRECISIONS}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0..3, got {zero_stage}")
    ds = _deepspeed()
    init_distributed_if_needed()
    if precision == "fp16" and accelerator_name() == "cpu":
        raise ValueError("fp16 needs a GPU; use precision='bf16' or 'fp32' on CPU")
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "managed_gradient_accumulation": False,
        "gradient_clipping": grad_clip,
        "zero_optimization": {"stage": zero_stage},
        "steps_per_print": 2**31 - 1,  # progress goes to MLflow, not DeepSpeed's log
        "wall_clock_breakdown": False,
    }
    if precision == "bf16":
        config["bf16"] = {"enabled": True}
    elif precision == "fp16":
        config["fp16"] = {"enabled": True, "initial_scale_power": 16}
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    engine, *_ = ds.initialize(model=model, optimizer=optimizer, config=config)
    return engine


def zero_stage(engine) -> int:
    """The engine's ZeRO stage (0..3)."""
    return int(engine.zero_optimization_stage())


def backward(engine, loss: torch.Tensor) -> None:
    """Accumulate the gradients of one micro-batch's loss (already scaled by the caller)."""
    engine.backward(loss, scale_wrt_gas=False)


def step(engine) -> float:
    """Apply the accumulated gradients (clip, optimizer step, zero grads).

    Returns:
        the global gradient norm before clipping (float; NaN if DeepSpeed did not report one).
    """
    norm = None
    if zero_stage(engine) == 0:
        # Stage 0 in fp32 clips with torch and does not record the norm: take it here.
        norms = [torch.linalg.vector_norm(p.grad.float()) for p in engine.module.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.stack(norms))) if norms else 0.0
    engine.step()
    reported = engine.get_global_grad_norm()
    if reported is not None:
        norm = float(reported)
    return float("nan") if norm is None else norm


def save_checkpoint(engine, directory: str | os.PathLike, tag: str, client_state: dict | None = None) -> None:
    """Save model, optimizer and `client_state` (any picklable dict) under directory/tag.

    Every rank must call it (ZeRO shards are saved by their owners); "latest" is updated.
    """
    engine.save_checkpoint(str(directory), tag=tag, client_state=client_state or {})


def load_checkpoint(engine, directory: str | os.PathLike, tag: str | None = None) -> dict:
    """Restore model and optimizer from directory (the "latest" tag by default).

    Returns:
        the client_state saved with it.

    Raises:
        FileNotFoundError: no checkpoint there.
    """
    path, client_state = engine.load_checkpoint(
        str(directory), tag=tag, load_optimizer_states=True, load_lr_scheduler_states=True
    )
    if path is None:
        raise FileNotFoundError(f"no DeepSpeed checkpoint in {directory} (tag {tag or 'latest'})")
    return client_state or {}


def gathered_state(engine) -> Iterator[tuple[str, torch.Tensor]]:
    """Full parameters, one at a time, as (name, CPU tensor copy) in the module's names.

    Under ZeRO-3 each parameter is gathered from its shards (`GatheredParameters`) while it is
    copied, so peak memory is one full parameter beyond the shards. The dtype is the engine's
    compute dtype (bf16 under precision="bf16"). Every rank must iterate it (gathering is a
    collective). Tied parameters appear once, under their first name.
    """
    ds = _deepspeed()
    for name, param in engine.module.named_parameters():
        if hasattr(param, "ds_id"):
            with ds.zero.GatheredParameters([param], modifier_rank=None):
                tensor = param.data.detach().to("cpu", copy=True)
        else:
            tensor = param.data.detach().to("cpu", copy=True)
        yield name, tensor


def export_hf(engine, out_dir: str | os.PathLike, tokenizer: Any | None = None) -> Path:
    """Write a Hugging Face checkpoint directory (config + safetensors [+ tokenizer]).

    The module must be a transformers `PreTrainedModel`. Weights are the full parameters (gathered
    under ZeRO-3), in the engine's compute dtype.

    Returns:
        the output directory.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = dict(gathered_state(engine))  # every rank gathers; rank 0 writes
    if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
        return out
    engine.module.save_pretrained(out, state_dict=state)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    return out
