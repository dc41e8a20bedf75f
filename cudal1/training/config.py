"""`LearnerConfig`: the `learner` config group, consumed whole by the GRPO learner
(`cudal1.training.learner.GRPOLearner`) and its group of ranks (`cudal1.actors.learner_group`).

Torch-free (the driver validates it before any actor starts): the choices of `precision` and
`loss_agg` are spelled here, and tests/test_config.py checks them against the DeepSpeed adapter's
`PRECISIONS` and `cudal1.rl.losses.AGGREGATIONS`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from cudal1.errors import ConfigError

PRECISIONS = ("fp32", "bf16", "fp16")
"""`cudal1.engines.deepspeed_engine.PRECISIONS` (which imports DeepSpeed)."""

LOSS_AGGREGATIONS = ("grpo", "dr_grpo", "dapo")
"""`cudal1.rl.losses.AGGREGATIONS` (which imports torch)."""


@dataclasses.dataclass
class LearnerConfig:
    """The GRPO learner on DeepSpeed. Validated on construction: raises `cudal1.errors.ConfigError`
    (a ValueError) naming the key (`learner.<field>`). The run's other parts add what the learner
    is started with (`max_response_len`, `device`, `seed`; `tis_cap` made effective,
    `cudal1.config.effective_tis_cap`)."""

    zero_stage: int = 2
    """DeepSpeed ZeRO stage 0..3."""
    precision: str = "fp32"
    """fp32 | bf16 | fp16 (GPU only). The optimizer keeps fp32 master weights."""
    lr: float = 1e-4
    """AdamW learning rate (a stage's own `lr` replaces it while the stage runs)."""
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    """Max gradient norm."""
    micro_batch: int = 4
    grad_accum: int = 1
    """An optimizer step sees micro_batch * grad_accum examples (per rank), in grad_accum
    forward/backward passes of micro_batch examples."""
    kl_beta: float = 0.0
    """Weight of the k3 KL to the frozen reference model (0, as in DAPO and Dr. GRPO: no reference
    model kept)."""
    clip_eps: float = 0.2
    clip_eps_high: float | None = None
    """Upper PPO clip (DAPO's clip-higher, 0.28 there); None = clip_eps. The ratio is clipped to
    [1 - clip_eps, 1 + clip_eps_high]."""
    loss_agg: str = "grpo"
    """grpo | dr_grpo | dapo (`cudal1.rl.losses.aggregate`)."""
    recompute_old_logprobs: bool = True
    """PPO's old log-probabilities from one no-grad forward of the learner (exact ratios); the
    engine's are compared with them and logged (learner/engine_log_ratio*)."""
    tis_cap: float | None = None
    """Truncated importance weight min(exp(learner - engine), tis_cap) per token (> 1;
    `cudal1.rl.losses.truncated_importance`); None: off in sync mode, `ASYNC_TIS_CAP` (2.0) in
    `pipeline.mode=async`, where the engine's tokens come from the policy one step behind the
    learner's (`cudal1.config.effective_tis_cap`)."""
    dual_clip: float | None = 3.0
    """For negative advantages the surrogate is at least dual_clip * A (> 1); None: off
    (`cudal1.rl.losses.ppo_clip_objective`)."""
    log_ratio_clamp: float = 20.0
    """The log-ratio is clamped to [-c, c] nats before exp."""
    num_cpus: float = 1.0
    """CPUs per rank."""
    num_gpus: float = 0.0
    """GPUs per rank (0 or 1 with several ranks: a rank drives one device)."""
    num_ranks: int = 1
    """DeepSpeed data-parallel ranks, each a Ray actor in one placement group (PACK: one bundle of
    num_cpus + num_gpus per rank; `cudal1.actors.learner_group`). 1: one learner actor, no group.
    Each optimizer step then sees micro_batch * grad_accum * num_ranks examples."""
    offload_optimizer: bool = False
    """ZeRO-Offload: optimizer state and fp32 master weights in host memory (zero_stage >= 1)."""
    offload_param: bool = False
    """Parameters in host memory between uses (ZeRO-Infinity; zero_stage 3)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (transformers'
    non-reentrant checkpointing) instead of keeping them."""
    logprob_chunk: int = 1024
    """Response positions per block of the float32 log-softmax (no full-vocabulary float32 logits)."""
    timeout_s: float = 1800.0
    """Seconds a collective of the learner's ranks waits for the others (the process group's
    timeout, so a rank whose peer died fails instead of hanging), and the longest the driver waits
    for one learner call (an update, a save, a weight sync) before it names the ranks still
    silent and stops the run."""

    def __post_init__(self) -> None:
        for name, choices in (("precision", PRECISIONS), ("loss_agg", LOSS_AGGREGATIONS)):
            if getattr(self, name) not in choices:
                raise ConfigError(
                    f"learner.{name}", f"must be one of {', '.join(choices)}; got {getattr(self, name)!r}"
                )
        if self.zero_stage not in (0, 1, 2, 3):
            raise ConfigError("learner.zero_stage", f"must be 0, 1, 2 or 3; got {self.zero_stage}")
        for name in (
            "lr",
            "micro_batch",
            "grad_accum",
            "clip_eps",
            "log_ratio_clamp",
            "logprob_chunk",
            "num_ranks",
            "timeout_s",
        ):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"learner.{name}", f"must be > 0; got {value!r}")
        for name in ("kl_beta", "weight_decay", "grad_clip", "num_cpus", "num_gpus"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ConfigError(f"learner.{name}", f"must be >= 0; got {value!r}")
        if self.tis_cap is not None and not self.tis_cap > 1:
            # A cap at or below 1 would cut the weights of on-policy tokens too (their weight is 1):
            # it would no longer truncate the rare large weights only.
            raise ConfigError("learner.tis_cap", f"must be > 1 or null; got {self.tis_cap}")
        if self.dual_clip is not None and not self.dual_clip > 1:
            raise ConfigError("learner.dual_clip", f"must be > 1 or null; got {self.dual_clip}")
        if self.num_ranks > 1 and self.zero_stage == 0:
            # stage 0 does not report the gradient norm of the averaged gradient
            raise ConfigError(
                "learner.zero_stage", "a learner group (learner.num_ranks > 1) needs zero_stage 1, 2 or 3"
            )
        if self.num_ranks > 1 and self.num_gpus not in (0, 1):
            raise ConfigError(
                "learner.num_gpus", f"with learner.num_ranks > 1 each rank drives one GPU: 0 or 1; got {self.num_gpus}"
            )
        if self.offload_param and self.zero_stage != 3:
            raise ConfigError("learner.offload_param", f"parameter offload needs zero_stage 3; got {self.zero_stage}")
        if self.offload_optimizer and self.zero_stage == 0:
            raise ConfigError("learner.offload_optimizer", "optimizer offload needs zero_stage 1, 2 or 3")

    @classmethod
    def from_config(cls, node: Any) -> "LearnerConfig":
        """The `learner` config group as a `LearnerConfig`: one already built, its DictConfig node,
        or a mapping of its fields. Raises ConfigError as the constructor does."""
        return node if isinstance(node, cls) else cls(**dict(node.items()))
