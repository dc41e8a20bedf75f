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
  time on a 2-core machine, cached afterwards in ~/.cache/torch_extensions). `init_distributed_if_needed`
  skips that build on the CPU whatever the world size: collectives between CPU ranks then go
  through gloo (slower on one host, but nothing is compiled and the same code crosses hosts).
- Several ranks on the CPU (gloo), checked here with 2 Ray actors: ZeRO stages 2 and 3 train
  (stage 1 was not run), and ZeRO-3 gathers parameters for weight sync
  (tests/training/test_learner_group.py).
- Partitioned loading under ZeRO-3 (`load_partitioned`): the model is built inside
  `deepspeed.zero.Init`, so each rank only ever holds its shard of every parameter, and rank 0
  copies the checkpoint in one tensor at a time (safetensors, memory-mapped) while the others
  receive their shards. Transformers' own route (`HfDeepSpeedConfig`) needs `accelerate`, which
  this stack does not install.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from cudal1.engines.weight_sync import free_port

PRECISIONS = ("fp32", "bf16", "fp16")
_ds = None  # the deepspeed module, once imported


@dataclasses.dataclass(frozen=True)
class Rendezvous:
    """Where the ranks of one learner group meet: rank 0 serves the store at master_addr:master_port.

    local_rank is the rank's device index as the process sees it (0 under Ray, which gives each
    rank actor its own CUDA_VISIBLE_DEVICES).
    """

    rank: int
    world_size: int
    master_addr: str
    master_port: int
    local_rank: int = 0


def world() -> tuple[int, int]:
    """(rank, world size) of the default process group; (0, 1) when none is initialized."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def all_reduce(values: list[float], op: str = "sum", device: torch.device | str = "cpu") -> list[float]:
    """`values` reduced elementwise over every rank of the default group ("sum" or "max"), as
    float64 (exact for counts below 2**53). One collective; every rank must call it with the same
    number of values. Returned unchanged in a one-process world. `device`: where the tensor
    travels (the engine's device: nccl needs CUDA tensors)."""
    if world()[1] == 1 or not values:
        return [float(v) for v in values]
    t = torch.tensor(values, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(
        t, op={"sum": torch.distributed.ReduceOp.SUM, "max": torch.distributed.ReduceOp.MAX}[op]
    )
    return t.cpu().tolist()


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
    """ "cpu" or "cuda": the accelerator DeepSpeed runs on in this process."""
    return _deepspeed().get_accelerator().device_name()


def init_distributed_if_needed(
    backend: str | None = None,
    device: str | None = None,
    rendezvous: "Rendezvous | None" = None,
    timeout_s: float = 1800.0,
) -> None:
    """Join (or create) the process group DeepSpeed needs; a no-op when one exists.

    Outside a launcher (a plain process, a Ray actor, a test) and without `rendezvous` this makes a
    one-process world: MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK=0, LOCAL_RANK=0,
    WORLD_SIZE=1 are set when absent. Under `deepspeed`/`torchrun` those variables are already
    there and are used as is. A `rendezvous` (a rank of a learner group started by
    `cudal1.actors.learner_group`) sets them to its values, overriding the environment.

    Args:
        backend: "gloo" or "nccl"; default gloo on CPU, nccl on CUDA.
        device: "cpu" or "cuda[:i]", used to pick the accelerator if deepspeed is not imported yet.
        rendezvous: this process's rank, the world size and rank 0's address and port.
        timeout_s: how long a collective waits for the other ranks before it fails (the default
            group's timeout; a rank whose peer died then raises instead of hanging).
    """
    ds = _deepspeed(device)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        if not ds.comm.is_initialized():
            ds.init_distributed(dist_backend=torch.distributed.get_backend(), auto_mpi_discovery=False)
        return
    if rendezvous is not None:
        os.environ.update(
            MASTER_ADDR=rendezvous.master_addr,
            MASTER_PORT=str(rendezvous.master_port),
            RANK=str(rendezvous.rank),
            WORLD_SIZE=str(rendezvous.world_size),
            LOCAL_RANK=str(rendezvous.local_rank),
        )
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    on_cpu = accelerator_name() == "cpu"
    backend = backend or ("gloo" if on_cpu else "nccl")
    if on_cpu:
        # The shm all-reduce op only speeds up collectives between processes of one host; building
        # it costs minutes on a small machine, so CPU ranks use gloo for every collective.
        # importlib, not `import deepspeed.comm.torch as m`: the package re-exports the name
        # `torch` (the torch module), which that attribute lookup would return instead.
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    ds.init_distributed(dist_backend=backend, auto_mpi_discovery=False, timeout=timedelta(seconds=timeout_s))


def engine_config(
    *,
    zero_stage: int = 2,
    precision: str = "fp32",
    grad_accum: int = 1,
    micro_batch: int = 1,
    grad_clip: float = 1.0,
    offload_optimizer: bool = False,
    offload_param: bool = False,
) -> dict[str, Any]:
    """The DeepSpeed config dict `make_engine` uses (also what `load_partitioned` needs to
    partition a model the same way before the engine exists).

    offload_optimizer: ZeRO-Offload, optimizer states and fp32 master weights in host memory
        (stages 1-3; the torch AdamW step then runs on the CPU). offload_param: ZeRO-Infinity's
        parameter offload to host memory (stage 3 only). Both are accepted on a CPU-only machine,
        where they change nothing but the code path.

    Raises:
        ValueError: unknown precision or stage, offload_param below stage 3, offload_optimizer at
        stage 0.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} not in {PRECISIONS}")
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0..3, got {zero_stage}")
    if offload_param and zero_stage != 3:
        raise ValueError("offload_param needs zero_stage 3")
    if offload_optimizer and zero_stage == 0:
        raise ValueError("offload_optimizer needs zero_stage 1, 2 or 3")
    zero: dict[str, Any] = {"stage": zero_stage}
    if offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": False}
    if offload_param:
        zero["offload_param"] = {"device": "cpu", "pin_memory": False}
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": grad_accum,
        "managed_gradient_accumulation": False,
        "gradient_clipping": grad_clip,
        "zero_optimization": zero,
        "steps_per_print": 2**31 - 1,  # progress goes to MLflow, not DeepSpeed's log
        "wall_clock_breakdown": False,
    }
    if offload_optimizer:
        # The client optimizer is torch's AdamW: DeepSpeedCPUAdam would compile a C++ op first.
        config["zero_force_ds_cpu_optimizer"] = False
    if precision == "bf16":
        config["bf16"] = {"enabled": True}
    elif precision == "fp16":
        config["fp16"] = {"enabled": True, "initial_scale_power": 16}
    return config


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
    offload_optimizer: bool = False,
    offload_param: bool = False,
):
    """Wrap a model in a DeepSpeed engine with a torch AdamW optimizer.

    Args:
        model: a torch module with fp32 parameters (DeepSpeed casts to bf16 and keeps fp32
            master weights in the optimizer when precision="bf16"), or one built partitioned by
            `load_partitioned` (ZeRO-3).
        zero_stage: 0 (plain data parallel), 1 (optimizer state sharded), 2 (+ gradients),
            3 (+ parameters).
        precision: "fp32", "bf16", or "fp16" (GPU only).
        lr, weight_decay, betas: AdamW's.
        grad_accum, micro_batch: recorded in the config (DeepSpeed derives train_batch_size from
            them); accumulation itself is caller-owned (see the module docstring).
        grad_clip: max global gradient norm (0 disables clipping).
        offload_optimizer, offload_param: see `engine_config`.

    Returns:
        the `deepspeed.DeepSpeedEngine`; call it like the model, then `backward`, `step`.

    Raises:
        ValueError: unknown precision or stage, fp16 on CPU, an offload the stage cannot do.
    """
    config = engine_config(
        zero_stage=zero_stage,
        precision=precision,
        grad_accum=grad_accum,
        micro_batch=micro_batch,
        grad_clip=grad_clip,
        offload_optimizer=offload_optimizer,
        offload_param=offload_param,
    )
    ds = _deepspeed()
    init_distributed_if_needed()
    if precision == "fp16" and accelerator_name() == "cpu":
        raise ValueError("fp16 needs a GPU; use precision='bf16' or 'fp32' on CPU")
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    engine, *_ = ds.initialize(model=model, optimizer=optimizer, config=config)
    return engine


def make_eval_engine(
    model: torch.nn.Module, *, zero_stage: int = 0, precision: str = "fp32", offload_param: bool = False
):
    """A forward-only DeepSpeed engine (no optimizer, no gradients): the frozen KL reference.

    With zero_stage=3 its parameters are partitioned across the ranks like the policy's and
    gathered layer by layer in each forward; with 0 every rank holds a full copy in the compute
    dtype. Any other stage is taken as 0 (stages 1 and 2 only shard optimizer state and
    gradients, which a frozen model has none of).
    """
    stage = 3 if zero_stage == 3 else 0
    config = engine_config(zero_stage=stage, precision=precision, offload_param=offload_param and stage == 3)
    ds = _deepspeed()
    init_distributed_if_needed()
    model.requires_grad_(False)
    engine, *_ = ds.initialize(model=model, config=config)
    engine.eval()
    return engine


def load_partitioned(model_path: str | os.PathLike, config: dict[str, Any]) -> torch.nn.Module:
    """A Hugging Face causal LM built under `deepspeed.zero.Init(config)`: each rank holds only its
    partition of every parameter from the start, then the checkpoint's tensors are copied in one
    at a time (rank 0 reads them, memory-mapped from safetensors, and DeepSpeed scatters the
    shards), so no process ever holds the full model. Every rank must call it.

    Args:
        model_path: a directory with config.json and *.safetensors weights.
        config: a ZeRO-3 `engine_config` (its precision decides the partitions' dtype).

    Raises:
        FileNotFoundError: no safetensors file in model_path.
        KeyError: a parameter of the model that no checkpoint file holds (tied weights excepted).
    """
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    ds = _deepspeed()
    init_distributed_if_needed()
    files = sorted(Path(model_path).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {model_path} (partitioned loading reads safetensors)")
    from transformers.initialization import no_init_weights

    # No random initialisation: the checkpoint overwrites every parameter, and transformers' init
    # functions index into parameters that zero.Init has already emptied.
    with no_init_weights(), ds.zero.Init(config_dict_or_path=config):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_path), dtype=torch.float32)
        model.tie_weights()  # tied output embeddings become the input embeddings' parameter again
    rank0 = world()[0] == 0
    where: dict[str, Any] = {}
    with contextlib.ExitStack() as open_files:  # the memory maps close here, not whenever GC runs
        for f in files:  # every rank reads the headers, so a missing name fails on all ranks alike
            handle = open_files.enter_context(safe_open(str(f), framework="pt"))
            where.update({name: handle for name in handle.keys()})
        missing = [name for name, _ in model.named_parameters() if name not in where]
        if missing:
            raise KeyError(f"{', '.join(missing[:5])} in the model but in no checkpoint file of {model_path}")
        for name, param in model.named_parameters():
            with ds.zero.GatheredParameters([param], modifier_rank=0):
                if rank0:
                    param.data.copy_(where[name].get_tensor(name))
    return model


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
    yield from gathered_module_state(engine.module)


def gathered_module_state(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """`gathered_state` of any module (partitioned under ZeRO-3 or not): (name, CPU copy) per
    parameter, gathered one at a time. Every rank must iterate it."""
    ds = _deepspeed()
    for name, param in module.named_parameters():
        if hasattr(param, "ds_id"):
            with ds.zero.GatheredParameters([param], modifier_rank=None):
                tensor = param.data.detach().to("cpu", copy=True)
        else:
            tensor = param.data.detach().to("cpu", copy=True)
        yield name, tensor


def load_module_state(module: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy `state` (name → full tensor) into the module's parameters. Under ZeRO-3 only rank 0's
    `state` is read (the others may pass {}) and DeepSpeed scatters the shards; otherwise every
    rank copies its own. Every rank must call it. Raises KeyError for a parameter not in state
    (on the ranks that read it)."""
    ds = _deepspeed()
    rank0 = world()[0] == 0
    with torch.no_grad():
        for name, param in module.named_parameters():
            if hasattr(param, "ds_id"):
                with ds.zero.GatheredParameters([param], modifier_rank=0):
                    if rank0:
                        param.data.copy_(state[name])
            else:
                param.data.copy_(state[name])


def copy_weights(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """target's parameters := source's (same architecture; e.g. the policy into the KL reference).

    Two ZeRO-3 modules of one group are partitioned alike (each parameter's shard depends only on
    its size and the world size), so each rank copies its own shards, with no communication;
    otherwise full tensors are copied (a source gathered one parameter at a time). Every rank
    must call it."""
    ds = _deepspeed()
    src = dict(source.named_parameters())
    with torch.no_grad():
        for name, dst in target.named_parameters():
            s = src[name]
            if hasattr(dst, "ds_tensor") and hasattr(s, "ds_tensor") and dst.ds_tensor.numel() == s.ds_tensor.numel():
                dst.ds_tensor.data.copy_(s.ds_tensor.data)
            elif hasattr(s, "ds_id") or hasattr(dst, "ds_id"):
                with (
                    ds.zero.GatheredParameters([s], modifier_rank=None),
                    ds.zero.GatheredParameters([dst], modifier_rank=0),
                ):
                    dst.data.copy_(s.data)
            else:
                dst.data.copy_(s.data)


def weight_shapes(engine) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, full shape, dtype name) of each parameter `gathered_state` yields, in its order,
    without gathering anything (under ZeRO-3 the full shape is the parameter's `ds_shape`)."""
    return [
        (name, tuple(getattr(p, "ds_shape", p.shape)), str(p.dtype).removeprefix("torch."))
        for name, p in engine.module.named_parameters()
    ]


@contextlib.contextmanager
def gathered(engine, names: list[str]) -> Iterator[dict[str, torch.Tensor]]:
    """The full parameters `names` of the engine's module, as {name: tensor on the engine's
    device} for the duration of the block: under ZeRO-3 gathered together (one collective for the
    lot) and released on exit. Every rank must enter it with the same names. The tensors are the
    parameters' own storage: read them, do not keep them."""
    ds = _deepspeed()
    params = dict(engine.module.named_parameters())
    chosen = [params[n] for n in names]
    partitioned = [p for p in chosen if hasattr(p, "ds_id")]
    with ds.zero.GatheredParameters(partitioned, modifier_rank=None) if partitioned else contextlib.nullcontext():
        yield {n: p.data for n, p in zip(names, chosen)}


def export_hf(engine, out_dir: str | os.PathLike, tokenizer: Any | None = None) -> Path:
    """Write a Hugging Face checkpoint directory (config + safetensors [+ tokenizer]).

    The module must be a transformers `PreTrainedModel`. Weights are the full parameters (gathered
    under ZeRO-3), in the engine's compute dtype.

    Returns:
        the output directory.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rank0 = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
    state = {n: t for n, t in gathered_state(engine) if rank0}  # every rank gathers; only rank 0 keeps a copy
    if not rank0:
        return out
    engine.module.save_pretrained(out, state_dict=state)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    return out
