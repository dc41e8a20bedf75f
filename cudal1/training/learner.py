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
are computed (`logits_to_keep`), which spares a [B, P, vocab] tensor on long prompts, and their
log-softmax is taken `logprob_chunk` positions at a time (`cudal1.rl.losses.chunked_token_logprobs`),
so no float32 copy of the [B, R, vocab] logits is ever held.

Data parallelism. One learner is one rank. In a group of N ranks (`cudal1.actors.learner_group`,
each rank a process of one torch.distributed world) every call reaches every rank with that
rank's shard of the examples: the i-th global mini-batch of `micro_batch * grad_accum * N`
examples is split round-robin, so each rank's i-th local mini-batch is its part of the i-th
global one. Before normalising, the ranks all-reduce each mini-batch's sequence count, token
count, longest response and micro-batch count, so the `grpo` / `dr_grpo` / `dapo` denominators
are those of the whole global mini-batch; each rank backpropagates N times its share (DeepSpeed
averages gradients over the ranks), so the update equals one rank's on the whole mini-batch. A
rank with fewer micro-batches (an uneven tail) runs zero-weight ones, since every forward under
ZeRO-3 and every optimizer step is a collective. Metrics are reduced over the ranks the same way,
so every rank returns the group's figures.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cudal1.engines import deepspeed_engine as dse
from cudal1.records import PolicyExample
from cudal1.training.config import LearnerConfig
from cudal1.rl.losses import (
    aggregate,
    chunked_token_entropy,
    chunked_token_logprobs,
    grpo_loss,
    masked_mean,
    truncated_importance,
)

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


_IDLE = PolicyExample([0], [0])
"""The example a rank forwards (with zero weight) to keep in step with the group's collectives."""


class _Mini:
    """One local mini-batch and the group-wide figures its loss is normalised by."""

    def __init__(self, examples: list, sequences: int, tokens: int, micros: int, longest: int):
        self.examples, self.sequences, self.tokens, self.micros, self.longest = (
            examples,
            sequences,
            tokens,
            micros,
            longest,
        )


class GRPOLearner:
    """The policy being trained, its optimizer, and its KL reference.

    Args:
        model_path: local Hugging Face directory of a causal LM (config + weights).
        config: the `learner` config group (`cudal1.training.config.LearnerConfig`, whose fields
            say what each does); `LearnerConfig()` when None. Its placement fields (num_cpus,
            num_gpus, num_ranks) are `cudal1.actors.learner_group.LearnerGroup`'s.
        max_response_len: dr_grpo's constant normalizer in tokens (the generation budget,
            `rollout.max_tokens`); None uses the longest response of each mini-batch.
        device: "cpu" or "cuda" (picks DeepSpeed's accelerator and the gloo / nccl backend).
        seed: seeds python, numpy and torch.
        rendezvous: this rank's place in a learner group (`cudal1.engines.deepspeed_engine.Rendezvous`);
            None: a one-process world (or the launcher's environment).
        overrides: `LearnerConfig` fields replacing `config`'s (e.g. `lr=1e-2, micro_batch=2`).

    The PPO ratio's old log-probabilities come from one no-grad forward of this learner before
    the update when `config.recompute_old_logprobs` (the engine's are then compared with them,
    metrics "engine_log_ratio*"), and with `config.tis_cap` each token's surrogate is weighted by
    min(exp(learner - engine), tis_cap): the engine's tokens may come from older weights
    (`pipeline.mode=async`), which the weight then corrects too.

    Under ZeRO-3 the policy (and the KL reference) is loaded partitioned
    (`cudal1.engines.deepspeed_engine.load_partitioned`): no rank ever holds a full copy. The KL
    reference is its own forward-only DeepSpeed engine, partitioned like the policy under ZeRO-3.

    Raises:
        ValueError: a bad config (`cudal1.errors.ConfigError`, naming the key), ZeRO stage 0 in a
            world of several ranks.
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        config: LearnerConfig | None = None,
        *,
        max_response_len: int | None = None,
        device: str = "cpu",
        seed: int = 0,
        rendezvous: dse.Rendezvous | None = None,
        **overrides: Any,
    ):
        config = dataclasses.replace(config or LearnerConfig(), **overrides)
        self.config = config
        self.recompute_old_logprobs = config.recompute_old_logprobs
        self.tis_cap, self.dual_clip, self.log_ratio_clamp = config.tis_cap, config.dual_clip, config.log_ratio_clamp
        self.logprob_chunk = config.logprob_chunk
        self.model_path = Path(model_path)
        self.kl_beta = config.kl_beta
        self.clip_eps = config.clip_eps
        self.clip_eps_high = config.clip_eps_high
        self.loss_agg = config.loss_agg
        self.max_response_len = max_response_len
        self.micro_batch = config.micro_batch
        self.grad_accum = config.grad_accum
        self.precision = config.precision
        self.version = 0
        zero_stage, precision = config.zero_stage, config.precision
        _seed_everything(seed)
        dse.init_distributed_if_needed(device=device, rendezvous=rendezvous, timeout_s=config.timeout_s)
        self.rank, self.world_size = dse.world()
        if self.world_size > 1 and zero_stage == 0:
            raise ValueError(
                "a learner group of several ranks needs zero_stage 1, 2 or 3 (stage 0 does not "
                "report the gradient norm of the averaged gradient)"
            )
        engine_config = dse.engine_config(
            zero_stage=zero_stage,
            precision=precision,
            grad_accum=config.grad_accum,
            micro_batch=config.micro_batch,
            grad_clip=config.grad_clip,
            offload_optimizer=config.offload_optimizer,
            offload_param=config.offload_param,
        )

        from transformers import AutoModelForCausalLM  # heavy import, only where a model is loaded

        def load():
            if zero_stage == 3:
                return dse.load_partitioned(self.model_path, engine_config)
            return AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch.float32)

        policy = load()
        if config.gradient_checkpointing:
            policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.pad_id = _pad_id(policy.config)
        self.vocab_size = policy.get_input_embeddings().num_embeddings  # a module attribute: the full size under ZeRO-3
        self.engine = dse.make_engine(
            policy,
            zero_stage=zero_stage,
            precision=precision,
            lr=config.lr,
            weight_decay=config.weight_decay,
            grad_accum=config.grad_accum,
            micro_batch=config.micro_batch,
            grad_clip=config.grad_clip,
            offload_optimizer=config.offload_optimizer,
            offload_param=config.offload_param,
        )
        self.device = self.engine.device
        self.reference = None
        if config.kl_beta > 0:
            self.reference = dse.make_eval_engine(
                load(), zero_stage=zero_stage, precision=precision, offload_param=config.offload_param
            )

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
        logp = chunked_token_logprobs(out.logits, batch.targets, self.logprob_chunk)
        return (logp, out.logits) if with_logits else logp

    def _reduce(self, values: list[float], op: str = "sum") -> list[float]:
        """`values` reduced over the group's ranks (as is with one rank)."""
        return dse.all_reduce(values, op, self.device)

    @torch.no_grad()
    def _score(self, model, examples: Sequence[PolicyExample]) -> list[list[float]]:
        rows: list[list[float]] = []
        micros = list(_chunks(examples, self.micro_batch))
        # As many forwards as the busiest rank (under ZeRO-3 each forward is a collective), agreed
        # before the first one.
        forwards = int(self._reduce([len(micros)], "max")[0]) if self.world_size > 1 else len(micros)
        for micro in micros:
            batch = self._batch(micro)
            logp = self._logprobs(model, batch).cpu()
            rows += [logp[i, :n].tolist() for i, n in enumerate(batch.lengths)]
        for _ in range(forwards - len(micros)):
            self._logprobs(model, self._batch([_IDLE]))
        return rows

    def _plan(self, items: list, lengths: list[int]) -> list[_Mini]:
        """This rank's mini-batches of `items` (examples or their indices; `lengths[i]` the
        response length of items[i]), padded to the group's count, with the group-wide sequence
        and token counts, micro-batch count and longest response of each (all-reduced)."""
        size = self.micro_batch * self.grad_accum
        local = [list(m) for m in _chunks(items, size)]
        lens = [list(m) for m in _chunks(lengths, size)]
        if self.world_size > 1:
            missing = int(self._reduce([len(local)], "max")[0]) - len(local)
            local += [[] for _ in range(missing)]
            lens += [[] for _ in range(missing)]
        sums = self._reduce([v for n in lens for v in (len(n), sum(n))])
        maxes = self._reduce(
            [v for n in lens for v in (math.ceil(len(n) / self.micro_batch), max(n, default=0))], "max"
        )
        return [
            _Mini(m, int(sums[2 * i]), int(sums[2 * i + 1]), int(maxes[2 * i]), int(maxes[2 * i + 1]))
            for i, m in enumerate(local)
        ]

    def _idle_micro(self, with_reference: bool) -> None:
        """A zero-weight forward and backward (and, `with_reference`, the reference's forward, as
        `grpo_step` runs it): what a rank without examples left in a mini-batch runs while the
        others train, in the same order of collectives as theirs."""
        batch = self._batch([_IDLE])
        logp = self._logprobs(self.engine, batch)  # grpo_step's order: policy, reference, backward
        if with_reference and self.reference is not None:
            with torch.no_grad():
                self._logprobs(self.reference, batch)
        dse.backward(self.engine, logp.sum() * 0.0)

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
        examples = list(examples)
        for mini in self._plan(examples, [len(ex.response_ids) for ex in examples]):
            total = 0.0
            micros = list(_chunks(mini.examples, self.micro_batch))
            for micro in micros:
                batch = self._batch(micro)
                logp = self._logprobs(self.engine, batch)
                loss = aggregate(-logp, batch.mask, "dapo", num_tokens=mini.tokens)
                dse.backward(self.engine, loss * self.world_size)
                total += loss.item()
            for _ in range(mini.micros - len(micros)):
                self._idle_micro(with_reference=False)
            norms.append(dse.step(self.engine))
            losses.append(total)
            tokens += mini.tokens
            self.version += 1
        losses = self._reduce(losses)
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
            "engine_max_abs_log_ratio", and with `tis_cap` "tis_weight_mean" and "tis_clip_frac"
            (the mean truncated importance weight and the share of tokens cut at the cap,
            `cudal1.rl.losses.truncated_importance`).

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
            # _score is collective in a group: every rank calls it, with or without examples.
            computed = iter(self._score(self.engine, missing)) if missing or self.world_size > 1 else iter(())
            old = [ex.old_logprobs if ex.old_logprobs is not None else next(computed) for ex in examples]

        sums = {"kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "ratio_mean": 0.0}
        losses, norms, tokens = [], [], 0
        for mini in self._plan(list(range(len(examples))), [len(ex.response_ids) for ex in examples]):
            max_len = self.max_response_len or mini.longest
            total = 0.0
            micros = list(_chunks(mini.examples, self.micro_batch))
            for micro in micros:
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
                    max_len=max_len,
                    num_sequences=mini.sequences,
                    num_tokens=mini.tokens,
                    token_weights=batch.pad_rows([weights[i] for i in micro]) if weights is not None else None,
                    log_ratio_clamp=self.log_ratio_clamp,
                    dual_clip=self.dual_clip,
                )
                m["entropy"] = float(
                    masked_mean(chunked_token_entropy(logits.detach(), self.logprob_chunk), batch.mask)
                )
                dse.backward(self.engine, loss * self.world_size)
                total += loss.item()
                n_tok = sum(batch.lengths)
                for key in sums:
                    sums[key] += m.get(key, 0.0) * n_tok
            for _ in range(mini.micros - len(micros)):
                self._idle_micro(with_reference=True)
            norms.append(dse.step(self.engine))
            losses.append(total)
            tokens += mini.tokens
            self.version += 1
        reduced = self._reduce([*sums.values(), *losses])
        metrics = {key: value / max(tokens, 1) for key, value in zip(sums, reduced)}
        metrics.update(loss=_mean(reduced[len(sums) :]), grad_norm=_mean(norms), **extra)
        return self._finish(start, tokens, metrics, len(losses))

    def _engine_mismatch(
        self, learner_rows: list[list[float]], engine_rows: list[list[float] | None]
    ) -> tuple[dict[str, float], list[list[float]] | None]:
        """How far the sampling engine's log-probabilities are from this learner's (metrics), and
        the truncated importance weights when `tis_cap` is set (1 where the engine gave none)."""
        gaps = [
            lr - en
            for l_row, e_row in zip(learner_rows, engine_rows)
            if e_row is not None
            for lr, en in zip(l_row, e_row)
        ]
        total, total_abs, count = self._reduce([sum(gaps), sum(abs(g) for g in gaps), len(gaps)])
        (largest,) = self._reduce([max((abs(g) for g in gaps), default=0.0)], "max")
        metrics: dict[str, float] = {}
        if count:
            metrics = {
                "engine_log_ratio": total / count,
                "engine_abs_log_ratio": total_abs / count,
                "engine_max_abs_log_ratio": largest,
            }
        if self.tis_cap is None:
            return metrics, None
        # One padded [N, R] batch through the pure function (cudal1.rl.losses.truncated_importance);
        # a row without the engine's log-probabilities is masked out and weighs 1.
        width = max((len(row) for row in learner_rows), default=0)
        old = torch.zeros(len(learner_rows), width)
        behaviour, mask = torch.zeros_like(old), torch.zeros(old.shape, dtype=torch.bool)
        for i, (l_row, e_row) in enumerate(zip(learner_rows, engine_rows)):
            if e_row is not None and l_row:
                old[i, : len(l_row)], behaviour[i, : len(e_row)] = torch.tensor(l_row), torch.tensor(e_row)
                mask[i, : len(l_row)] = True
        w, stats = truncated_importance(old, behaviour, mask, self.tis_cap)
        weights = [
            w[i, : len(row)].tolist() if e_row is not None else [1.0] * len(row)
            for i, (row, e_row) in enumerate(zip(learner_rows, engine_rows))
        ]
        w_sum, clipped, count = self._reduce(
            [stats["weight_mean"] * stats["tokens"], stats["clip_frac"] * stats["tokens"], stats["tokens"]]
        )
        metrics["tis_weight_mean"] = w_sum / count if count else 0.0
        metrics["tis_clip_frac"] = clipped / count if count else 0.0
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
        `cudal1.engines.deepspeed_engine.gathered_state(learner.engine)`. In a group every rank
        must call it (the gathers are collective); ranks other than 0 return [].
        """
        named = dse.gathered_state(self.engine)
        if self.rank != 0:
            for _ in named:  # take part in the gathers
                pass
            return []
        return list(named)

    def weight_manifest(self) -> list:
        """(name, shape, dtype) of every weight `named_weights` returns, in order: what a
        broadcast carries (`cudal1.engines.weight_sync.TensorSpec` list)."""
        from cudal1.engines.weight_sync import TensorSpec

        return [TensorSpec(name, shape, dtype) for name, shape, dtype in dse.weight_shapes(self.engine)]

    def init_weight_group(
        self, host: str, port: int, world_size: int, backend: str | None = None, timeout_s: float = 600.0
    ) -> None:
        """Open the weight-broadcast group as its rank 0 (the sender; engines join as 1..world_size-1).
        Backend: nccl on CUDA, gloo on CPU. Blocks until every member has joined. Only the
        learner's own rank 0 joins; its other ranks (ZeRO across GPUs) only help gather. An
        earlier group (of engines since replaced) is dropped first."""
        from cudal1.engines.weight_sync import WeightChannel

        if getattr(self, "channel", None) is not None:
            self.channel.close()

        backend = backend or ("nccl" if self.device.type == "cuda" else "gloo")
        self.channel = (
            WeightChannel(host, port, 0, world_size, backend, str(self.device), timeout_s) if _is_rank0() else None
        )

    def broadcast_weights(self, bucket_mb: float = 256) -> dict[str, float]:
        """Send the current full weights through the group opened by `init_weight_group`.

        Bucket by bucket (`cudal1.engines.weight_sync.plan_buckets` on `weight_manifest`): the
        parameters of one bucket are gathered (under ZeRO-3, one collective for the bucket),
        packed and broadcast, then released, so rank 0 never holds more than one bucket of full
        weights beyond its shards. Every learner rank must call it (the gathers are collective);
        only rank 0 sends. Returns {"bytes", "seconds", "bytes_per_s", "buckets"} on rank 0, {}
        elsewhere."""
        from cudal1.engines.weight_sync import plan_buckets

        specs = self.weight_manifest()
        channel = getattr(self, "channel", None)
        start, total, plan = time.perf_counter(), 0, plan_buckets(specs, bucket_mb)
        for bucket in plan:
            names = [specs[i].name for i in bucket]
            with dse.gathered(self.engine, names) as tensors:
                if channel is not None:
                    total += channel.send_bucket([tensors[n] for n in names], specs[bucket[0]].dtype)
        if channel is None:
            return {}
        channel.synchronize()
        seconds = time.perf_counter() - start
        return {
            "bytes": float(total),
            "seconds": seconds,
            "bytes_per_s": total / seconds if seconds else 0.0,
            "buckets": float(len(plan)),
        }

    def gpu_uuid(self) -> str:
        """UUID of this rank's GPU (what `rollout.weight_sync=ipc` compares with the engine's).
        Raises ValueError on the CPU."""
        from cudal1.engines.cuda_ipc import device_uuid

        return device_uuid(self.device)

    def export_ipc(self, buckets: list[int], bucket_mb: float = 256) -> dict | None:
        """Export buckets `buckets` (indices into `plan_buckets(weight_manifest(), bucket_mb)`) of
        the current full weights by CUDA IPC (`cudal1.engines.cuda_ipc`) for an engine on this GPU.

        Each bucket is gathered (ZeRO-3: one collective per bucket), packed into a buffer of its
        own and released, so the extra device memory is the exported buckets, held until
        `release_ipc`. Every learner rank must call it (the gathers are collective); rank 0
        returns the payload (handles, not bytes), the others None.

        Raises:
            ValueError: the learner is not on a CUDA device.
        """
        from cudal1.engines.cuda_ipc import IpcExporter
        from cudal1.engines.weight_sync import plan_buckets

        if self.device.type != "cuda":
            raise ValueError("rollout.weight_sync=ipc needs the learner on a GPU (learner.num_gpus > 0)")
        specs = self.weight_manifest()
        plan = plan_buckets(specs, bucket_mb)
        exporter = getattr(self, "_ipc", None)
        if exporter is None and _is_rank0():
            exporter = self._ipc = IpcExporter(self.device)
        entries = []
        for b in buckets:
            names = [specs[i].name for i in plan[b]]
            with dse.gathered(self.engine, names) as tensors:
                if exporter is not None:
                    entries.append(
                        exporter.export_bucket([tensors[n] for n in names], plan[b], specs[plan[b][0]].dtype)
                    )
        return exporter.payload(entries) if exporter is not None else None

    def release_ipc(self) -> float:
        """Free what `export_ipc` exported (after the engine has loaded it). Returns the bytes freed."""
        exporter = getattr(self, "_ipc", None)
        if exporter is None:
            return 0.0
        held = exporter.held_bytes
        exporter.release()
        return float(held)

    def reset_reference(self) -> None:
        """Make the current weights the KL reference (at each stage's start). No-op without KL."""
        if self.reference is not None:
            dse.copy_weights(self.engine.module, self.reference.module)

    def shard_stats(self) -> dict[str, float]:
        """How much of the model this rank holds: "params" (the policy's parameter count),
        "params_held" (elements of it in this rank's memory: its ZeRO-3 partitions, or every
        parameter below stage 3), "reference_params_held" (the same for the KL reference; 0
        without one), "rank", "world_size"."""

        def held(module) -> int:
            return sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in module.parameters())

        return {
            "params": float(sum(getattr(p, "ds_numel", p.numel()) for p in self.engine.module.parameters())),
            "params_held": float(held(self.engine.module)),
            "reference_params_held": float(held(self.reference.module)) if self.reference is not None else 0.0,
            "rank": float(self.rank),
            "world_size": float(self.world_size),
        }

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
        reference = None
        if self.reference is not None:  # every rank gathers (collective); only rank 0 keeps the copy
            kept = {n: t for n, t in dse.gathered_module_state(self.reference.module) if _is_rank0()}
            reference = kept if _is_rank0() else None
        if _is_rank0():
            if reference is not None:
                tmp = directory / tag / "reference.pt.tmp"
                torch.save(reference, tmp)
                os.replace(tmp, directory / tag / "reference.pt")
            tags = sorted(
                (p for p in directory.iterdir() if p.is_dir() and p.name.startswith("step")),
                key=lambda p: int(p.name.rpartition("save")[2] or 0),
            )
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
            state = (
                torch.load(ref_file, map_location="cpu")
                if _is_rank0() or self.engine.zero_optimization_stage() != 3
                else {}
            )
            dse.load_module_state(self.reference.module, state)

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
