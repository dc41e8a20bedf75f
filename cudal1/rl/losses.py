"""The GRPO policy loss: per-token log-probabilities, PPO ratio clipping, k3 KL, and loss aggregation.

Shapes: every per-token tensor is [B, T] (B sequences, T response positions), float32, aligned so
that column t is the t-th response token; `mask` is [B, T] (bool or 0/1), true on real response
tokens and false on padding. Log-probabilities are natural logs.

The objective, per token (Shao et al. 2024, "DeepSeekMath", eq. 3, with the PPO clipped surrogate of
Schulman et al. 2017):

    ratio  = exp(logp - old_logp)
    surr   = min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)
    loss_t = -surr + beta * k3(logp, ref_logp)

then `aggregate` reduces loss_t over tokens and sequences. `eps_high > eps_low` is DAPO's
"clip-higher" (Yu et al. 2025, "DAPO", section 3.1): low-probability tokens with positive advantage
may grow further before clipping, which keeps entropy from collapsing.

Two guards keep one token from dominating: the log-ratio is clamped before `exp` (a token whose
probability moved by e^20 cannot make the loss infinite), and for negative advantages the dual clip
(Ye et al. 2020, "Mastering Complex Control in MOBA Games with Deep RL", eq. 5) bounds the surrogate
below at dual_clip * A. When the sampling engine's numbers differ from the learner's (another
kernel, another precision) or the sampler is a step behind the learner (`pipeline.mode=async`),
`truncated_importance` gives the per-token correction of Yao et al. 2025 ("Your Efficient RL
Framework Secretly Brings You Off-Policy RL Training"): min(exp(learner_old - engine), cap),
multiplied into the per-token loss.

Pure torch: no I/O, no DeepSpeed; `cudal1.rl`'s package init does not import this module (it
keeps torch out of the plain-Python RL code), so import `cudal1.rl.losses` directly.
"""

from __future__ import annotations

import math

import torch

AGGREGATIONS = ("grpo", "dr_grpo", "dapo")


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target | prefix) for each position.

    Args:
        logits: [B, T, V] (any float dtype), logits[b, t] is the distribution of targets[b, t].
        targets: [B, T] int64 token ids.

    Returns:
        [B, T] float32 log-probabilities (computed in float32 whatever the logits' dtype, since
        bf16 log-softmax loses the small differences the ratio depends on).
    """
    logits = logits.float()
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


class _ChunkedTokenLogprobs(torch.autograd.Function):
    """log p(target) in float32, computed `chunk` positions at a time; backward recomputes each
    chunk's softmax from the logits instead of keeping a float32 copy of them."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
        out = torch.empty(targets.shape, dtype=torch.float32, device=logits.device)
        lse = torch.empty_like(out)
        for s in range(0, logits.shape[1], chunk):
            z = logits[:, s : s + chunk].float()
            lse[:, s : s + chunk] = torch.logsumexp(z, dim=-1)
            out[:, s : s + chunk] = (
                z.gather(-1, targets[:, s : s + chunk].unsqueeze(-1)).squeeze(-1) - lse[:, s : s + chunk]
            )
        ctx.save_for_backward(logits, targets, lse)
        ctx.chunk = chunk
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        logits, targets, lse = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for s in range(0, logits.shape[1], ctx.chunk):
            sl = slice(s, s + ctx.chunk)
            g = grad_out[:, sl].float().unsqueeze(-1)
            # d/dz [z_y - logsumexp(z)] = onehot(y) - softmax(z)
            part = -torch.exp(logits[:, sl].float() - lse[:, sl].unsqueeze(-1)) * g
            part.scatter_add_(-1, targets[:, sl].unsqueeze(-1), g)
            grad[:, sl] = part.to(grad.dtype)
        return grad, None, None


def chunked_token_logprobs(logits: torch.Tensor, targets: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """`token_logprobs` without a float32 copy of the whole [B, T, V] logits.

    The log-softmax is taken in float32 over `chunk` positions at a time, so at most a
    [B, chunk, V] float32 block exists at once; what autograd keeps for the backward pass is the
    logits themselves (already alive, in their own dtype: bf16 under bf16 training) and the [B, T]
    float32 logsumexp, and the backward recomputes each chunk's softmax. Same values as
    `token_logprobs` (the same float32 arithmetic per position); the gradient wrt the logits is
    returned in the logits' dtype.

    Args:
        logits: [B, T, V] any float dtype; targets: [B, T] int64; chunk: positions per block (> 0).

    Returns:
        [B, T] float32 log-probabilities.

    Raises:
        ValueError: chunk < 1.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    return _ChunkedTokenLogprobs.apply(logits, targets, chunk)


@torch.no_grad()
def chunked_token_entropy(logits: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """`token_entropy` (nats, [B, T] float32) computed `chunk` positions at a time, without a
    float32 copy of the whole logits; no gradient (a diagnostic)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    return torch.cat([token_entropy(logits[:, s : s + chunk]) for s in range(0, logits.shape[1], chunk)], dim=1)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of the next-token distribution at each position.

    Args:
        logits: [B, T, V].

    Returns:
        [B, T] float32, H = logsumexp(z) - sum softmax(z) * z.
    """
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - (logits.softmax(-1) * logits).sum(-1)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor, clamp: float = 20.0) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference).

    Schulman 2020, "Approximating KL Divergence" (the estimator GRPO uses, DeepSeekMath eq. 4):
    with r = ref_logp - logp on tokens sampled from the policy, k3 = exp(r) - r - 1. It is
    unbiased, and never negative (exp(x) >= 1 + x), and zero where the two agree.

    Args:
        logp, ref_logp: [B, T] log-probabilities of the same tokens under policy and reference.
        clamp: r is clamped to [-clamp, clamp] first so one wildly improbable token cannot
            overflow exp() (e^20 ≈ 5e8 is already far outside any useful range).

    Returns:
        [B, T], >= 0. Gradients flow into `logp` (and `ref_logp` if it requires grad).
    """
    r = (ref_logp - logp).clamp(-clamp, clamp)
    return torch.exp(r) - r - 1.0


def ppo_clip_objective(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float | None = None,
    *,
    log_ratio_clamp: float = 20.0,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate objective per token (to maximize).

    Args:
        logp: [B, T] current policy log-probs (requires grad in training).
        old_logp: [B, T] behaviour-policy log-probs (no grad needed; detached here).
        advantages: [B] (one per sequence, broadcast to its tokens) or [B, T].
        eps_low: lower clip range: the ratio is clipped below at 1 - eps_low.
        eps_high: upper clip range (1 + eps_high); None means eps_low (symmetric PPO). DAPO uses
            eps_low = 0.2, eps_high = 0.28.
        log_ratio_clamp: logp - old_logp is clamped to [-c, c] before exp (nats).
        dual_clip: where A < 0, the objective is at least dual_clip * A (> 1; None: off).

    Returns:
        (objective, ratio, clipped): each [B, T]. `objective` = min(r A, clip(r) A), then the
        dual clip; `ratio` = exp(clamped logp - old_logp); `clipped` is a bool tensor, true where
        a clip branch decides, i.e. where the token's gradient is zeroed by clipping.

    Raises:
        ValueError: log_ratio_clamp <= 0 or dual_clip <= 1.
    """
    if not log_ratio_clamp > 0:
        raise ValueError(f"log_ratio_clamp must be > 0, got {log_ratio_clamp}")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
    eps_high = eps_low if eps_high is None else eps_high
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    advantages = advantages.to(logp.dtype)
    ratio = torch.exp((logp - old_logp.detach()).clamp(-log_ratio_clamp, log_ratio_clamp))
    unclipped = ratio * advantages
    clipped_obj = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * advantages
    objective = torch.minimum(unclipped, clipped_obj)
    clipped = clipped_obj < unclipped
    if dual_clip is not None:
        floor = dual_clip * advantages
        dual = (advantages < 0) & (objective < floor)
        objective = torch.where(dual, floor.expand_as(objective), objective)
        clipped = clipped | dual
    return objective, ratio, clipped


def truncated_importance(
    old_logp: torch.Tensor, behaviour_logp: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """The off-policy correction of one batch: per-token truncated importance weights and their diagnostics.

    The tokens were sampled by the behaviour policy (the generator's weights, with its sampled-token
    log-probabilities `behaviour_logp`); the PPO ratio of the loss is taken against `old_logp`,
    the learner's own log-probabilities before its update. When the two differ (in
    `pipeline.mode=async` the generator is one update behind the learner; in either mode the
    engine may compute in another precision) the policy-gradient term of each token is
    multiplied by

        w_t = min(exp(old_logp_t - behaviour_logp_t), cap)

    the truncated importance sampling of Yao et al. 2025 ("Your Efficient RL Framework Secretly
    Brings You Off-Policy RL Training"), as used for the one-step off-policy pipelines of AReaL
    and veRL: the cap bounds the variance a rare token with a large ratio would add, at the cost
    of a bias on those tokens.

    Args:
        old_logp, behaviour_logp: [B, T] natural-log probabilities of the same tokens.
        mask: [B, T] bool or 0/1, true on real response tokens (padding, and tokens without a
            behaviour log-probability, are false).
        cap: C > 0 (the training config requires > 1, so on-policy tokens, w = 1, are never cut).

    Returns:
        (weights, stats): weights [B, T] float32 without gradient, w_t on masked tokens and 0 on
        the others (NaN or inf on a masked-out position does not leak); stats: "weight_mean"
        (mean w over masked tokens), "clip_frac" (fraction of masked tokens whose untruncated
        ratio exceeds cap), "tokens" (their count). With no masked tokens both means are 0.0.

    Raises:
        ValueError: cap <= 0, or shapes that differ.
    """
    if not cap > 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    if old_logp.shape != behaviour_logp.shape or old_logp.shape != mask.shape:
        raise ValueError(
            f"shapes differ: old {tuple(old_logp.shape)}, behaviour {tuple(behaviour_logp.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    keep = mask.bool()
    log_ratio = torch.where(
        keep,
        (old_logp.detach() - behaviour_logp.detach()).float(),
        torch.zeros(old_logp.shape, dtype=torch.float32, device=old_logp.device),
    )
    log_cap = math.log(cap)
    weights = torch.where(keep, torch.exp(log_ratio.clamp(max=log_cap)), torch.zeros_like(log_ratio))
    tokens = int(keep.sum())
    if tokens == 0:
        return weights, {"weight_mean": 0.0, "clip_frac": 0.0, "tokens": 0.0}
    clipped = keep & (log_ratio > log_cap)
    return weights, {
        "weight_mean": float(weights.sum()) / tokens,
        "clip_frac": float(clipped.sum()) / tokens,
        "tokens": float(tokens),
    }


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    mode: str,
    *,
    max_len: int | None = None,
    num_sequences: int | None = None,
    num_tokens: int | None = None,
) -> torch.Tensor:
    """Reduce a [B, T] per-token loss to a scalar.

    Modes:
        "grpo": mean over each sequence's tokens, then mean over sequences (Shao et al. 2024,
            DeepSeekMath eq. 3). Each sequence weighs the same, so a long response's tokens
            weigh less each; Liu et al. show this favours long wrong answers.
        "dr_grpo": sum over each sequence's tokens divided by one constant `max_len`, then mean
            over sequences (Liu et al. 2025, "Understanding R1-Zero-Like Training", Dr. GRPO):
            every token weighs the same whatever its sequence's length.
        "dapo": sum over all tokens of the batch divided by the batch's token count (Yu et al.
            2025, DAPO, "token-level policy gradient loss").

    Gradient accumulation: when a batch is split into micro-batches, pass the whole batch's
    `num_sequences` (grpo, dr_grpo) and `num_tokens` (dapo); each micro-batch's result is then
    its share, and the sum over micro-batches equals the whole batch's value.

    Args:
        per_token: [B, T] float.
        mask: [B, T] bool or 0/1; padded positions contribute nothing.
        mode: one of AGGREGATIONS.
        max_len: dr_grpo's constant (the generation budget, in tokens); default T.
        num_sequences: denominator over sequences; default B. A sequence with no tokens counts
            as a sequence contributing 0.
        num_tokens: dapo's denominator; default mask.sum() (at least 1).

    Returns:
        0-dim tensor.

    Raises:
        ValueError: unknown mode.
    """
    m = mask.to(per_token.dtype)
    # where(), not a product: a NaN or inf on a padded position must not leak (0 * inf is NaN).
    masked = torch.where(mask.bool(), per_token, torch.zeros_like(per_token))
    seqs = per_token.shape[0] if num_sequences is None else num_sequences
    if mode == "grpo":
        per_seq = masked.sum(-1) / m.sum(-1).clamp(min=1.0)
        return per_seq.sum() / max(seqs, 1)
    if mode == "dr_grpo":
        length = per_token.shape[-1] if max_len is None else max_len
        return masked.sum() / (max(length, 1) * max(seqs, 1))
    if mode == "dapo":
        tokens = m.sum().clamp(min=1.0) if num_tokens is None else max(num_tokens, 1)
        return masked.sum() / tokens
    raise ValueError(f"unknown loss aggregation {mode!r}; expected one of {AGGREGATIONS}")


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over the true entries of mask ([B, T] both); 0 when the mask is empty."""
    m = mask.to(x.dtype)
    return torch.where(mask.bool(), x, torch.zeros_like(x)).sum() / m.sum().clamp(min=1.0)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    kl_beta: float = 0.0,
    agg: str = "grpo",
    logits: torch.Tensor | None = None,
    max_len: int | None = None,
    num_sequences: int | None = None,
    num_tokens: int | None = None,
    token_weights: torch.Tensor | None = None,
    log_ratio_clamp: float = 20.0,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss of a (micro-)batch and its diagnostics.

    loss = aggregate(-w * min(r A, clip(r) A) + kl_beta * k3(logp, ref_logp), mask, agg)

    Args:
        logp: [B, T] policy log-probs (with grad).
        old_logp: [B, T] behaviour-policy log-probs.
        ref_logp: [B, T] reference-model log-probs, or None (required when kl_beta > 0).
        advantages: [B] or [B, T].
        mask: [B, T] response-token mask.
        clip_eps, clip_eps_high: PPO clip range (see `ppo_clip_objective`).
        kl_beta: weight of the k3 KL penalty (0 disables it).
        agg: aggregation mode (see `aggregate`); max_len, num_sequences, num_tokens pass through.
        logits: [B, T, V], optional; only used for the entropy diagnostic.
        token_weights: [B, T] per-token weights w of the surrogate (no gradient), e.g.
            `truncated_importance`'s weights; None: 1.
        log_ratio_clamp, dual_clip: see `ppo_clip_objective`.

    Returns:
        (loss, metrics): loss is a 0-dim tensor to backpropagate. metrics are floats, token means
        over this batch's mask: "kl" (k3; 0.0 without a reference), "clip_frac" (fraction of
        tokens whose gradient clipping zeroed), "ratio_mean", and "entropy" (nats) when logits
        are given.

    Raises:
        ValueError: kl_beta > 0 without ref_logp, or an unknown `agg`.
    """
    if kl_beta > 0 and ref_logp is None:
        raise ValueError("kl_beta > 0 needs ref_logp")
    objective, ratio, clipped = ppo_clip_objective(
        logp, old_logp, advantages, clip_eps, clip_eps_high, log_ratio_clamp=log_ratio_clamp, dual_clip=dual_clip
    )
    per_token = -objective if token_weights is None else -objective * token_weights.detach()
    kl = None
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp.detach())
        if kl_beta > 0:
            per_token = per_token + kl_beta * kl
    loss = aggregate(per_token, mask, agg, max_len=max_len, num_sequences=num_sequences, num_tokens=num_tokens)
    with torch.no_grad():
        metrics = {
            "kl": float(masked_mean(kl, mask)) if kl is not None else 0.0,
            "clip_frac": float(masked_mean(clipped.float(), mask)),
            "ratio_mean": float(masked_mean(ratio, mask)),
        }
        if logits is not None:
            metrics["entropy"] = float(masked_mean(token_entropy(logits), mask))
    return loss, metrics
