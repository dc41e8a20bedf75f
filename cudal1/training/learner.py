"""GRPOLearner: the policy on DeepSpeed, with SFT and GRPO updates, full-weight export and resumable checkpoints.

A plain class (the Ray actor in `cudal1.actors` is a thin shell around it). It owns the policy
engine, the optimizer, a frozen reference copy for the KL penalty, and the optimizer-step counter
`version` that rollouts record as `model_version`.

Batches. One update call takes a list of `PolicyExample`s and splits it into mini-batches of
`micro_batch * grad_accum` examples; each mini-batch is one optimizer step, its gradients
accumulated over micro-batches of `micro_batch` examples. So `grpo_step` on 16 examples with
micro_batch=4, grad_accum=2 makes 2 optimizer steps (PPO-style epochs over one rollout batch);
old log-probabilities are fixed before the first of them, which is what gives the ratio clip
something to clip.

Layout of a micro-batch: prompts are left-padded and responses right-padded to one column, so
response token t of every row sits at column P + t (P = longest prompt); position ids count real
tokens only (0 at each row's first real token), and only the logits that predict response tokens
are computed (`logits_to_keep`), which spares a [B, P, vocab] tensor on long prompts.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from cudal1.engines import deepspeed_engine as dse
from cudal1.records import PolicyExample
from cudal1.rl.losses import AGGREGATIONS, aggregate, grpo_loss, token_logprobs, truncated_importance_weights

# Files copied next to an exported checkpoint when the source model directory has them.
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "generation_config.json",
)


class Batch:
    """A collated micro-batch.

    Attributes:
        input_ids, attention_mask, position_ids: [B, P + R] int64 (P longest prompt, R longest
            response).
        targets: [B, R] response token ids (pad where masked).
        mask: [B, R] bool, true on real response tokens.
        keep: [R] int64, the sequence positions whose logits predict targets (P - 1 .. P + R - 2).
        lengths: response length of each row.
    """

    def __init__(self, examples: Sequence[PolicyExample], device: torch.device, pad_id: int, vocab_size: int):
        for ex in examples:
            if not ex.prompt_ids:
                raise ValueError("a PolicyExample needs at least one prompt token")
            if not ex.response_ids:
                raise ValueError("a PolicyExample needs at least one response token")
            if not all(0 <= t < vocab_size for t in (*ex.prompt_ids, *ex.response_ids)):
                raise ValueError(f"token id outside the model's vocabulary [0, {vocab_size})")
        prompt_len = max(len(ex.prompt_ids) for ex in examples)
        resp_len = max(len(ex.response_ids) for ex in examples)
        n = len(examples)
        ids = torch.full((n, prompt_len + resp_len), pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, ex in enumerate(examples):
            p, r = len(ex.prompt_ids), len(ex.response_ids)
            ids[i, prompt_len - p : prompt_len] = torch.tensor(ex.prompt_ids)
            ids[i, prompt_len : prompt_len + r] = torch.tensor(ex.response_ids)
            attn[i, prompt_len - p : prompt_len + r] = 1
        self.lengths = [len(ex.response_ids) for ex in examples]
        self.input_ids = ids.to(device)
        self.attention_mask = attn.to(device)
        self.position_ids = (attn.cumsum(-1) - 1).clamp(min=0).to(device)
        self.targets = ids[:, prompt_len:].to(device)
        self.mask = attn[:, prompt_len:].bool().to(device)
        self.keep = torch.arange(prompt_len - 1, prompt_len + resp_len - 1, device=device)

    def pad_rows(self, rows: Sequence[Sequence[float]]) -> torch.Tensor:
        """Per-token values (one list per example, its response length) as a [B, R] float32 tensor."""
        out = torch.zeros(self.mask.shape, dtype=torch.float32)
        for i, row in enumerate(rows):
            out[i, : len(row)] = torch.as_tensor(row, dtype=torch.float32)
        return out.to(self.mask.device)


def _chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class GRPOLearner:
    """The policy being trained, its optimizer, and its KL reference.

    Args:
        model_path: local Hugging Face directory of a causal LM (config + weights).
        zero_stage: DeepSpeed ZeRO stage 0..3.
        precision: "fp32" | "bf16" | "fp16" (GPU only). The optimizer keeps fp32 master weights.
        lr, weight_decay, grad_clip: AdamW learning rate, weight decay, max gradient norm.
        kl_beta: weight of the k3 KL penalty to the reference; 0 (the default, as in DAPO and
            Dr. GRPO) loads no reference model.
        clip_eps, clip_eps_high: PPO ratio clip range [1 - clip_eps, 1 + clip_eps_high]
            (clip_eps_high None = clip_eps; DAPO uses 0.28).
        loss_agg: "grpo" | "dr_grpo" | "dapo" (see `cudal1.rl.losses.aggregate`).
        max_response_len: dr_grpo's constant normalizer in tokens (the generation budget);
            None uses the longest response of each mini-batch.
        grad_accum, micro_batch: an optimizer step sees micro_batch * grad_accum examples, in
            grad_accum forward/backward passes of micro_batch examples.
        recompute_old_logprobs: the PPO ratio's old log-probabilities come from one no-grad
            forward of this learner before the update (True), not from the sampling engine; the
            engine's are then compared with them (metrics "engine_log_ratio*").
        tis_cap: with recompute_old_logprobs, weight each token's surrogate by
            min(exp(learner - engine), tis_cap) (truncated importance sampling; None: off).
        dual_clip, log_ratio_clamp: see `cudal1.rl.losses.ppo_clip_objective`.
        device: "cpu" or "cuda" (picks DeepSpeed's accelerator and the gloo / nccl backend).
        seed: seeds python, numpy and torch.

    Raises:
        ValueError: bad loss_agg, precision or stage, tis_cap <= 0, dual_clip <= 1,
            log_ratio_clamp <= 0.
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        *,
        zero_stage: int = 2,
        precision: str = "fp32",
        lr: float = 1e-6,
        weight_decay: float = 0.0,
        grad_clip: float = 1.0,
        kl_beta: float = 0.0,
        clip_eps: float = 0.2,
        clip_eps_high: float | None = None,
        loss_agg: str = "grpo",
        max_response_len: int | None = None,
        grad_accum: int = 1,
        micro_batch: int = 4,
        device: str = "cpu",
        seed: int = 0,
        recompute_old_logprobs: bool = True,
        tis_cap: float | None = None,
        dual_clip: float | None = 3.0,
        log_ratio_clamp: float = 20.0,
    ):
        if tis_cap is not None and not tis_cap > 0:
            raise ValueError(f"tis_cap must be > 0, got {tis_cap}")
        if dual_clip is not None and not dual_clip > 1:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        if not log_ratio_clamp > 0:
            raise ValueError(f"log_ratio_clamp must be > 0, got {log_ratio_clamp}")
        self.recompute_old_logprobs = recompute_old_logprobs
        self.tis_cap, self.dual_clip, self.log_ratio_clamp = tis_cap, dual_clip, log_ratio_clamp
        if loss_agg not in AGGREGATIONS:
            raise ValueError(f"loss_agg {loss_agg!r} not in {AGGREGATIONS}")
        if micro_batch < 1 or grad_accum < 1:
            raise ValueError("micro_batch and grad_accum must be >= 1")
        self.model_path = Path(model_path)
        self.kl_beta = kl_beta
        self.clip_eps = clip_eps
        self.clip_eps_high = clip_eps_high
        self.loss_agg = loss_agg
        self.max_response_len = max_response_len
        self.micro_batch = micro_batch
        self.grad_accum = grad_accum
        self.precision = precision
        self.version = 0
        _seed_everything(seed)
        dse.init_distributed_if_needed(device=device)

        from transformers import AutoModelForCausalLM  # heavy import, only where a model is loaded

        policy = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)
        self.pad_id = _pad_id(policy.config)
        self.vocab_size = policy.get_input_embeddings().num_embeddings  # before ZeRO-3 partitions it
        self.engine = dse.make_engine(
            policy,
            zero_stage=zero_stage,
            precision=precision,
            lr=lr,
            weight_decay=weight_decay,
            grad_accum=grad_accum,
            micro_batch=micro_batch,
            grad_clip=grad_clip,
        )
        self.device = self.engine.device
        self.reference = None
        if kl_beta > 0:
            ref_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
            self.reference = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=ref_dtype)
            self.reference.to(self.device).eval().requires_grad_(False)

    # ----- forward passes

    def _batch(self, examples: Sequence[PolicyExample]) -> Batch:
        return Batch(examples, self.device, self.pad_id, self.vocab_size)

    def _logprobs(self, model, batch: Batch, with_logits: bool = False):
        out = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            logits_to_keep=batch.keep,
            use_cache=False,
        )
        logp = token_logprobs(out.logits, batch.targets)
        return (logp, out.logits) if with_logits else logp

    @torch.no_grad()
    def _score(self, model, examples: Sequence[PolicyExample]) -> list[list[float]]:
        rows: list[list[float]] = []
        for micro in _chunks(examples, self.micro_batch):
            batch = self._batch(micro)
            logp = self._logprobs(model, batch).cpu()
            rows += [logp[i, :n].tolist() for i, n in enumerate(batch.lengths)]
        return rows

    def logprobs(self, prompt_ids: Sequence[int], response_ids: Sequence[int]) -> list[float]:
        """Natural-log probability of each response token given the prompt and the earlier
        response tokens, under the current weights (length len(response_ids))."""
        return self._score(self.engine, [PolicyExample(list(prompt_ids), list(response_ids))])[0]

    def score(self, examples: Sequence[PolicyExample]) -> list[list[float]]:
        """`logprobs` for many examples, batched by micro_batch."""
        return self._score(self.engine, examples)

    # ----- updates

    def sft_step(self, examples: Sequence[PolicyExample]) -> dict[str, float]:
        """Supervised steps: mean negative log-likelihood of the response tokens (prompt tokens
        carry no loss), token-averaged over each mini-batch.

        Returns:
            metrics: "loss" (mean NLL per token, nats, before the update, averaged over
            mini-batches), "grad_norm" (mean pre-clip norm), "tokens" (response tokens),
            "optimizer_steps", "version", "seconds", "tokens_per_s".
        """
        start = time.perf_counter()
        losses, norms, tokens = [], [], 0
        for mini in _chunks(list(examples), self.micro_batch * self.grad_accum):
            mini_tokens = sum(len(ex.response_ids) for ex in mini)
            total = 0.0
            for micro in _chunks(mini, self.micro_batch):
                batch = self._batch(micro)
                logp = self._logprobs(self.engine, batch)
                loss = aggregate(-logp, batch.mask, "dapo", num_tokens=mini_tokens)
                dse.backward(self.engine, loss)
                total += loss.item()
            norms.append(dse.step(self.engine))
            losses.append(total)
            tokens += mini_tokens
            self.version += 1
        return self._finish(start, tokens, {"loss": _mean(losses), "grad_norm": _mean(norms)}, len(losses))

    def grpo_step(self, examples: Sequence[PolicyExample]) -> dict[str, float]:
        """GRPO/PPO steps on scored responses (`example.advantage` broadcast to its tokens).

        Old log-probabilities are computed with the current weights before any update (one
        no-grad forward) when `recompute_old_logprobs`, or for examples without `old_logprobs`;
        otherwise they are the examples' own (from the sampling engine). The loss is
        `cudal1.rl.losses.grpo_loss` with this learner's clip range, kl_beta, aggregation, dual
        clip, log-ratio clamp and (with `tis_cap`) truncated importance weights.

        Returns:
            metrics: "loss", "kl", "entropy" (nats), "clip_frac", "ratio_mean" (token-weighted
            means), "grad_norm", "tokens", "optimizer_steps", "version", "seconds", "tokens_per_s";
            with recomputed old log-probabilities and the engine's at hand, "engine_log_ratio"
            (token mean of learner - engine, nats), "engine_abs_log_ratio" (mean |.|),
            "engine_max_abs_log_ratio", and with `tis_cap` "tis_weight_mean".

        Raises:
            ValueError: an example without prompt or response tokens, or whose old_logprobs
            length differs from its response length.
        """
        start = time.perf_counter()
        examples = list(examples)
        for ex in examples:
            if ex.old_logprobs is not None and len(ex.old_logprobs) != len(ex.response_ids):
                raise ValueError(
                    f"old_logprobs has {len(ex.old_logprobs)} values for {len(ex.response_ids)} response tokens"
                )
        engine_rows = [ex.old_logprobs for ex in examples]
        weights: list[list[float]] | None = None
        extra: dict[str, float] = {}
        if self.recompute_old_logprobs:
            old = self._score(self.engine, examples)
            extra, weights = self._engine_mismatch(old, engine_rows)
        else:
            missing = [ex for ex in examples if ex.old_logprobs is None]
            computed = iter(self._score(self.engine, missing)) if missing else iter(())
            old = [ex.old_logprobs if ex.old_logprobs is not None else next(computed) for ex in examples]

        sums = {"kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "ratio_mean": 0.0}
        losses, norms, tokens = [], [], 0
        indices = list(range(len(examples)))
        for mini in _chunks(indices, self.micro_batch * self.grad_accum):
            mini_tokens = sum(len(examples[i].response_ids) for i in mini)
            max_len = self.max_response_len or max(len(examples[i].response_ids) for i in mini)
            total = 0.0
            for micro in _chunks(mini, self.micro_batch):
                micro_ex = [examples[i] for i in micro]
                batch = self._batch(micro_ex)
                logp, logits = self._logprobs(self.engine, batch, with_logits=True)
                ref_logp = None
                if self.reference is not None:
                    with torch.no_grad():
                        ref_logp = self._logprobs(self.reference, batch)
                advantages = torch.tensor([ex.advantage for ex in micro_ex], dtype=torch.float32, device=self.device)
                loss, m = grpo_loss(
                    logp,
                    batch.pad_rows([old[i] for i in micro]),
                    ref_logp,
                    advantages,
                    batch.mask,
                    clip_eps=self.clip_eps,
                    clip_eps_high=self.clip_eps_high,
                    kl_beta=self.kl_beta,
                    agg=self.loss_agg,
                    logits=logits,
                    max_len=max_len,
                    num_sequences=len(mini),
                    num_tokens=mini_tokens,
                    token_weights=batch.pad_rows([weights[i] for i in micro]) if weights is not None else None,
                    log_ratio_clamp=self.log_ratio_clamp,
                    dual_clip=self.dual_clip,
                )
                dse.backward(self.engine, loss)
                total += loss.item()
                n_tok = sum(batch.lengths)
                for key in sums:
                    sums[key] += m.get(key, 0.0) * n_tok
            norms.append(dse.step(self.engine))
            losses.append(total)
            tokens += mini_tokens
            self.version += 1
        metrics = {key: value / max(tokens, 1) for key, value in sums.items()}
        metrics.update(loss=_mean(losses), grad_norm=_mean(norms), **extra)
        return self._finish(start, tokens, metrics, len(losses))

    def _engine_mismatch(
        self, learner_rows: list[list[float]], engine_rows: list[list[float] | None]
    ) -> tuple[dict[str, float], list[list[float]] | None]:
        """How far the sampling engine's log-probabilities are from this learner's (metrics), and
        the truncated importance weights when `tis_cap` is set (1 where the engine gave none)."""
        gaps = [lr - en for l_row, e_row in zip(learner_rows, engine_rows) if e_row is not None
                for lr, en in zip(l_row, e_row)]
        metrics: dict[str, float] = {}
        if gaps:
            metrics = {"engine_log_ratio": _mean(gaps), "engine_abs_log_ratio": _mean([abs(g) for g in gaps]),
                       "engine_max_abs_log_ratio": max(abs(g) for g in gaps)}
        if self.tis_cap is None:
            return metrics, None
        weights = []
        for l_row, e_row in zip(learner_rows, engine_rows):
            if e_row is None:
                weights.append([1.0] * len(l_row))
            else:
                w = truncated_importance_weights(torch.tensor(l_row), torch.tensor(e_row), self.tis_cap)
                weights.append(w.tolist())
        flat = [w for row in weights for w in row]
        metrics["tis_weight_mean"] = _mean(flat)
        return metrics, weights

    def _finish(self, start: float, tokens: int, metrics: dict, steps: int) -> dict[str, float]:
        seconds = time.perf_counter() - start
        metrics.update(
            tokens=float(tokens),
            optimizer_steps=float(steps),
            version=float(self.version),
            seconds=seconds,
            tokens_per_s=tokens / seconds if seconds > 0 else 0.0,
        )
        return metrics

    # ----- weights

    def named_weights(self) -> list[tuple[str, torch.Tensor]]:
        """Full parameters as (Hugging Face name, CPU tensor), gathered under ZeRO-3; the names
        vLLM's `load_weights` expects. Dtype: the compute dtype (bf16 under precision="bf16").

        A list rather than a generator so it pickles across a Ray actor boundary; it holds one
        full CPU copy of the weights. In-process callers that want one tensor at a time use
        `cudal1.engines.deepspeed_engine.gathered_state(learner.engine)`.
        """
        return list(dse.gathered_state(self.engine))

    def weight_manifest(self) -> list:
        """(name, shape, dtype) of every weight `named_weights` returns, in order: what a
        broadcast carries (`cudal1.engines.weight_sync.TensorSpec` list)."""
        from cudal1.engines.weight_sync import manifest

        return manifest(dse.gathered_state(self.engine))

    def init_weight_group(self, host: str, port: int, world_size: int, backend: str | None = None,
                          timeout_s: float = 600.0) -> None:
        """Open the weight-broadcast group as its rank 0 (the sender; engines join as 1..world_size-1).
        Backend: nccl on CUDA, gloo on CPU. Blocks until every member has joined. Only the
        learner's own rank 0 joins; its other ranks (ZeRO across GPUs) only help gather."""
        from cudal1.engines.weight_sync import WeightChannel

        backend = backend or ("nccl" if self.device.type == "cuda" else "gloo")
        self.channel = WeightChannel(host, port, 0, world_size, backend, str(self.device), timeout_s) if _is_rank0() else None

    def broadcast_weights(self, bucket_mb: float = 256) -> dict[str, float]:
        """Send the current full weights through the group opened by `init_weight_group`.
        Every learner rank must call it (gathering ZeRO-3 partitions is collective).
        Returns {"bytes", "seconds", "bytes_per_s", "buckets"} on rank 0, {} elsewhere."""
        named = dse.gathered_state(self.engine)
        if getattr(self, "channel", None) is None:
            for _ in named:  # take part in the gathers
                pass
            return {}
        from cudal1.engines.weight_sync import manifest

        tensors = list(named)
        return self.channel.send(tensors, manifest(tensors), bucket_mb)

    def reset_reference(self) -> None:
        """Make the current weights the KL reference (at each stage's start). No-op without KL."""
        if self.reference is None:
            return
        ref_params = dict(self.reference.named_parameters())
        with torch.no_grad():
            for name, tensor in dse.gathered_state(self.engine):
                ref_params[name].copy_(tensor)

    # ----- persistence

    def set_lr(self, lr: float) -> None:
        """Set the optimizer's learning rate (e.g. per training stage)."""
        for group in self.engine.optimizer.param_groups:
            group["lr"] = lr

    def save(self, directory: str | os.PathLike, keep: int = 2) -> str:
        """Resumable checkpoint under a new tag: DeepSpeed model + optimizer state, `version`, RNG
        states, and the KL reference weights (which differ from the policy after
        `reset_reference`). Keeps the newest `keep` tags and deletes older ones. Returns the tag:
        record it and pass it to `load`, so a resumed run loads the checkpoint its own state
        belongs to, not a later one it never recorded."""
        directory = Path(directory)
        self._saves = getattr(self, "_saves", 0) + 1
        tag = f"step{self.version}-save{self._saves}"
        client = {"version": self.version, "saves": self._saves, "rng": _rng_state()}
        dse.save_checkpoint(self.engine, directory, tag=tag, client_state=client)
        if _is_rank0():
            if self.reference is not None:
                tmp = directory / tag / "reference.pt.tmp"
                torch.save(self.reference.state_dict(), tmp)
                os.replace(tmp, directory / tag / "reference.pt")
            tags = sorted((p for p in directory.iterdir() if p.is_dir() and p.name.startswith("step")),
                          key=lambda p: int(p.name.rpartition("save")[2] or 0))
            for old in tags[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
        return tag

    def load(self, directory: str | os.PathLike, tag: str | None = None) -> None:
        """Restore what `save` wrote: the checkpoint `tag`, or the latest one in directory.

        Raises:
            FileNotFoundError: no such checkpoint in directory.
        """
        directory = Path(directory)
        client = dse.load_checkpoint(self.engine, directory, tag)
        self.version = int(client.get("version", 0))
        self._saves = int(client.get("saves", 0))
        if "rng" in client:
            _set_rng_state(client["rng"])
        tag = tag or (directory / "latest").read_text().strip()
        ref_file = directory / tag / "reference.pt"
        if self.reference is not None and ref_file.exists():
            self.reference.load_state_dict(torch.load(ref_file, map_location=self.device))

    def export(self, directory: str | os.PathLike) -> Path:
        """Write a Hugging Face checkpoint directory (config, safetensors weights, and the
        tokenizer files of model_path when present) that transformers and vLLM load."""
        out = dse.export_hf(self.engine, directory)
        if _is_rank0():
            for name in _TOKENIZER_FILES:
                src = self.model_path / name
                if src.exists() and not (out / name).exists():
                    shutil.copy2(src, out / name)
        return out


def _pad_id(config) -> int:
    # Any valid id works (padded positions are masked); prefer the model's own pad token.
    for value in (getattr(config, "pad_token_id", None), getattr(config, "eos_token_id", None)):
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return int(value)
    return 0


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def _is_rank0() -> bool:
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
