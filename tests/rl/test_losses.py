"""The GRPO loss math against hand-computed values."""

import math

import pytest
import torch

from cudal1.rl.losses import (
    aggregate,
    grpo_loss,
    kl_k3,
    ppo_clip_objective,
    token_entropy,
    token_logprobs,
    truncated_importance,
)


def test_token_logprobs_matches_hand_computed_softmax():
    logits = torch.tensor([[[0.0, math.log(3.0)], [2.0, 2.0]]])  # [1, 2, 2]
    targets = torch.tensor([[1, 0]])
    out = token_logprobs(logits, targets)
    assert out.shape == (1, 2) and out.dtype == torch.float32
    torch.testing.assert_close(out, torch.tensor([[math.log(0.75), math.log(0.5)]]))


def test_token_logprobs_bf16_logits_computed_in_float32():
    logits = torch.randn(2, 3, 11)
    targets = torch.randint(0, 11, (2, 3))
    out = token_logprobs(logits.bfloat16(), targets)
    assert out.dtype == torch.float32
    ref = torch.log_softmax(logits.bfloat16().float(), -1).gather(-1, targets[..., None])[..., 0]
    torch.testing.assert_close(out, ref)


def test_entropy_of_uniform_and_peaked():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]])
    h = token_entropy(logits)
    torch.testing.assert_close(h, torch.tensor([[math.log(4.0), 0.0]]), atol=1e-5, rtol=0)


def test_kl_k3_hand_values():
    logp = torch.tensor([[math.log(0.5), math.log(0.2), math.log(0.3)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.2), math.log(0.6)]])
    # r = ref - logp: log(1/2), 0, log(2) -> exp(r) - r - 1
    expect = torch.tensor([[0.5 + math.log(2) - 1, 0.0, 2 - math.log(2) - 1]])
    torch.testing.assert_close(kl_k3(logp, ref), expect)
    assert (kl_k3(torch.randn(4, 5), torch.randn(4, 5)) >= 0).all()


def test_kl_k3_is_unbiased_for_kl():
    # Sampling tokens from p, the mean of k3 estimates KL(p || q).
    p = torch.tensor([0.6, 0.3, 0.1])
    q = torch.tensor([0.2, 0.5, 0.3])
    g = torch.Generator().manual_seed(0)
    x = torch.multinomial(p, 200_000, replacement=True, generator=g)
    est = kl_k3(p.log()[x], q.log()[x]).mean().item()
    exact = float((p * (p / q).log()).sum())
    assert est == pytest.approx(exact, rel=0.02)


def test_ppo_clip_hand_values_and_clip_higher():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.25]]))  # ratios 1.5, 0.5, 1.1, 1.25
    adv = torch.tensor([[1.0, -1.0, 1.0, 1.0]])
    obj, ratio, clipped = ppo_clip_objective(logp, old, adv, 0.2)
    torch.testing.assert_close(ratio, torch.tensor([[1.5, 0.5, 1.1, 1.25]]))
    # A>0, r=1.5 -> 1.2; A<0, r=0.5 -> min(-0.5, -0.8) = -0.8; r=1.1 inside; r=1.25 -> 1.2
    torch.testing.assert_close(obj, torch.tensor([[1.2, -0.8, 1.1, 1.2]]))
    assert clipped.tolist() == [[True, True, False, True]]
    # DAPO clip-higher: eps_high 0.28 lets r=1.25 through unclipped.
    obj_hi, _, clipped_hi = ppo_clip_objective(logp, old, adv, 0.2, 0.28)
    torch.testing.assert_close(obj_hi, torch.tensor([[1.28, -0.8, 1.1, 1.25]]))
    assert clipped_hi.tolist() == [[True, True, False, False]]


def test_ppo_clip_pessimistic_side_not_clipped():
    # A>0 with r below 1-eps, and A<0 with r above 1+eps: the unclipped term is the minimum,
    # so the gradient still flows (PPO only clips the side that would over-update).
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[0.5, 1.5]])).requires_grad_()
    obj, _, clipped = ppo_clip_objective(logp, old, torch.tensor([[1.0, -1.0]]), 0.2)
    torch.testing.assert_close(obj.detach(), torch.tensor([[0.5, -1.5]]))
    assert not clipped.any()
    obj.sum().backward()
    assert (logp.grad != 0).all()


MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
X = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 100.0, 100.0, 100.0]])


def test_aggregate_modes_hand_values():
    # grpo: mean(seq means) = mean(2, 4) = 3
    assert aggregate(X, MASK, "grpo").item() == pytest.approx(3.0)
    # dr_grpo: (6 + 4) / (max_len 4) / 2 sequences = 1.25; with max_len 10: 0.5
    assert aggregate(X, MASK, "dr_grpo").item() == pytest.approx(1.25)
    assert aggregate(X, MASK, "dr_grpo", max_len=10).item() == pytest.approx(0.5)
    # dapo: (1+2+3+4) / 4 tokens = 2.5
    assert aggregate(X, MASK, "dapo").item() == pytest.approx(2.5)
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregate(X, MASK, "mean")


def test_aggregate_token_weights_differ_by_mode():
    # Gradient w.r.t. each token: grpo weighs the short sequence's token 3x more than each
    # token of the long one; dapo and dr_grpo weigh all tokens equally.
    grads = {}
    for mode in ("grpo", "dr_grpo", "dapo"):
        x = torch.zeros(2, 4, requires_grad=True)
        aggregate(x, MASK, mode).backward()
        grads[mode] = x.grad
        assert (x.grad[~MASK] == 0).all()
    assert grads["grpo"][1, 0] / grads["grpo"][0, 0] == pytest.approx(3.0)
    assert grads["dapo"][1, 0] == pytest.approx(grads["dapo"][0, 0].item())
    assert grads["dr_grpo"][1, 0] == pytest.approx(grads["dr_grpo"][0, 0].item())


@pytest.mark.parametrize("mode", ["grpo", "dr_grpo", "dapo"])
def test_aggregate_micro_batches_sum_to_full_batch(mode):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, generator=g)
    mask = torch.rand(6, 5, generator=g) > 0.3
    full = aggregate(x, mask, mode, max_len=5)
    parts = sum(
        aggregate(x[i : i + 2], mask[i : i + 2], mode, max_len=5, num_sequences=6, num_tokens=int(mask.sum()))
        for i in (0, 2, 4)
    )
    torch.testing.assert_close(parts, full)


def test_padding_values_never_matter():
    x2 = X.clone()
    x2[0, 3] = float("nan")
    x2[1, 1] = float("inf")
    for mode in ("grpo", "dr_grpo", "dapo"):
        assert aggregate(x2, MASK, mode).item() == pytest.approx(aggregate(X, MASK, mode).item())


def test_grpo_loss_on_policy_value_and_metrics():
    # On-policy (logp == old): ratio 1, loss = -A averaged; k3 with ref == logp is 0.
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.9], [0.1, 0.2, 0.3]]))
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    adv = torch.tensor([2.0, -1.0])
    loss, m = grpo_loss(logp, logp, logp, adv, mask, kl_beta=0.1, agg="grpo")
    assert loss.item() == pytest.approx(-(2.0 - 1.0) / 2)
    assert m["kl"] == pytest.approx(0.0) and m["clip_frac"] == 0.0 and m["ratio_mean"] == pytest.approx(1.0)
    assert "entropy" not in m


def test_grpo_loss_kl_term_adds_beta_times_k3():
    logp = torch.log(torch.tensor([[0.5, 0.2]]))
    ref = torch.log(torch.tensor([[0.25, 0.4]]))
    mask = torch.ones(1, 2, dtype=torch.bool)
    zero = torch.zeros(1)
    k3 = kl_k3(logp, ref).mean().item()
    loss, m = grpo_loss(logp, logp, ref, zero, mask, kl_beta=0.5, agg="grpo")
    assert loss.item() == pytest.approx(0.5 * k3)
    assert m["kl"] == pytest.approx(k3)
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(logp, logp, None, zero, mask, kl_beta=0.5)


def test_grpo_loss_gradient_sign_follows_advantage():
    logits = torch.randn(2, 3, 7, requires_grad=True)
    targets = torch.randint(0, 7, (2, 3))
    mask = torch.ones(2, 3, dtype=torch.bool)
    logp = token_logprobs(logits, targets)
    loss, m = grpo_loss(logp, logp.detach(), None, torch.tensor([1.0, -1.0]), mask, logits=logits)
    assert m["entropy"] > 0
    loss.backward()
    # One gradient-descent step on the logits raises the positive sequence's logprobs and
    # lowers the negative one's.
    with torch.no_grad():
        after = token_logprobs(logits - 0.1 * logits.grad, targets)
    assert (after[0] > logp[0]).all()
    assert (after[1] < logp[1]).all()


def test_grpo_loss_masked_tokens_get_no_gradient():
    logp = torch.randn(2, 4, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    ref = torch.randn(2, 4)
    for agg in ("grpo", "dr_grpo", "dapo"):
        logp.grad = None
        loss, _ = grpo_loss(logp, logp.detach() + 0.05, ref, torch.tensor([1.0, -2.0]), mask, kl_beta=0.1, agg=agg)
        loss.backward()
        assert (logp.grad[~mask] == 0).all()
        assert (logp.grad[mask] != 0).all()


def test_grpo_loss_clip_frac_counts_clipped_tokens():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 1.0, 1.0, 0.5]]))
    loss, m = grpo_loss(logp, old, None, torch.tensor([1.0]), torch.ones(1, 4, dtype=torch.bool), clip_eps=0.2)
    # Only r=1.5 with A>0 is clipped (r=0.5 with A>0 is the pessimistic side).
    assert m["clip_frac"] == pytest.approx(0.25)
    assert m["ratio_mean"] == pytest.approx(1.0)
    assert loss.item() == pytest.approx(-(1.2 + 1.0 + 1.0 + 0.5) / 4)


def test_a_runaway_log_ratio_is_clamped_so_the_loss_stays_finite():
    logp = torch.tensor([[0.0, -1.0]], requires_grad=True)
    old = torch.tensor([[-200.0, -1.0]])  # the behaviour policy gave the first token e^-200
    loss, m = grpo_loss(logp, old, None, torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool))
    assert math.isfinite(loss.item()) and math.isfinite(m["ratio_mean"])
    _, ratio, _ = ppo_clip_objective(logp, old, torch.tensor([1.0]), 0.2, log_ratio_clamp=20.0)
    assert ratio[0, 0].item() == pytest.approx(math.exp(20.0), rel=1e-5)
    with pytest.raises(ValueError):
        ppo_clip_objective(logp, old, torch.tensor([1.0]), 0.2, log_ratio_clamp=0.0)


def test_the_dual_clip_bounds_a_negative_advantage_surrogate():
    # ratio e^2 = 7.39 with A = -1: PPO's min gives -7.39; the dual clip (3) gives -3, no gradient.
    logp = torch.tensor([[2.0, 0.1]], requires_grad=True)
    old = torch.zeros(1, 2)
    adv = torch.tensor([-1.0])
    plain, _, _ = ppo_clip_objective(logp, old, adv, 0.2)
    dual, _, clipped = ppo_clip_objective(logp, old, adv, 0.2, dual_clip=3.0)
    assert plain[0, 0].item() == pytest.approx(-math.exp(2.0))
    assert dual[0, 0].item() == pytest.approx(-3.0) and bool(clipped[0, 0])
    assert dual[0, 1].item() == pytest.approx(plain[0, 1].item())  # ratio 1.105: untouched
    dual.sum().backward()
    assert logp.grad[0, 0].item() == 0.0 and logp.grad[0, 1].item() != 0.0
    # positive advantages are never dual-clipped
    pos, _, _ = ppo_clip_objective(logp, old, torch.tensor([1.0]), 0.2, dual_clip=3.0)
    assert pos[0, 0].item() == pytest.approx(1.2)
    with pytest.raises(ValueError):
        ppo_clip_objective(logp, old, adv, 0.2, dual_clip=1.0)


def test_truncated_importance_weights_correct_the_engine_mismatch_up_to_the_cap():
    learner = torch.tensor([[-1.0, -1.0, -1.0]])
    engine = torch.tensor([[-1.0, -1.5, -5.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    w, _ = truncated_importance(learner, engine, mask, cap=2.0)
    assert w.tolist()[0] == pytest.approx([1.0, math.exp(0.5), 2.0])
    # the weights scale each token's surrogate and carry no gradient
    logp = torch.tensor([[-1.0, -1.0, -1.0]], requires_grad=True)
    plain, _ = grpo_loss(logp, learner, None, torch.tensor([1.0]), mask, agg="dapo")
    weighted, _ = grpo_loss(logp, learner, None, torch.tensor([1.0]), mask, agg="dapo", token_weights=w)
    assert weighted.item() == pytest.approx(plain.item() * w.mean().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_logprobs_equal_the_plain_ones_without_a_float32_copy_of_the_logits(dtype):
    from cudal1.rl.losses import chunked_token_entropy, chunked_token_logprobs, token_entropy

    torch.manual_seed(0)
    b, t, v = 2, 7, 50
    base, targets, weights = torch.randn(b, t, v) * 3, torch.randint(0, v, (b, t)), torch.randn(b, t)
    plain_in, chunked_in = base.to(dtype).requires_grad_(), base.to(dtype).requires_grad_()

    def saved_by(fn):
        seen = []
        with torch.autograd.graph.saved_tensors_hooks(lambda x: (seen.append((x.dtype, x.numel())), x)[1], lambda x: x):
            out = fn()
        return out, seen

    plain, plain_saved = saved_by(lambda: token_logprobs(plain_in, targets))
    chunked, chunked_saved = saved_by(lambda: chunked_token_logprobs(chunked_in, targets, chunk=3))
    (plain * weights).sum().backward()
    (chunked * weights).sum().backward()
    assert chunked.dtype == torch.float32
    torch.testing.assert_close(chunked, plain, rtol=0, atol=1e-6)
    tol = 1e-6 if dtype == torch.float32 else 1e-2  # bf16 gradients: one bf16 rounding
    torch.testing.assert_close(chunked_in.grad, plain_in.grad, rtol=0, atol=tol)
    full_fp32 = (torch.float32, b * t * v)
    if dtype == torch.bfloat16:
        assert full_fp32 in plain_saved  # the plain path keeps a float32 copy for its backward
        assert full_fp32 not in chunked_saved
    torch.testing.assert_close(
        chunked_token_entropy(chunked_in, chunk=4), token_entropy(chunked_in.detach()), rtol=0, atol=1e-5
    )
    with pytest.raises(ValueError, match="chunk"):
        chunked_token_logprobs(chunked_in, targets, chunk=0)


# ----- truncated importance weights of an off-policy batch (pipeline.mode=async)


def test_truncated_importance_exact_weights_cap_and_clipped_fraction():

    old = torch.tensor([[-1.0, -1.0, -1.0, -2.0]])
    behaviour = torch.tensor([[-1.0, -1.5, -5.0, -1.0]])  # ratios 1, e^0.5, e^4, e^-1
    mask = torch.ones(1, 4, dtype=torch.bool)
    w, stats = truncated_importance(old, behaviour, mask, cap=2.0)
    assert w.dtype == torch.float32 and not w.requires_grad
    assert w.tolist()[0] == pytest.approx([1.0, math.exp(0.5), 2.0, math.exp(-1.0)], rel=1e-6)
    assert stats["weight_mean"] == pytest.approx((1.0 + math.exp(0.5) + 2.0 + math.exp(-1.0)) / 4, rel=1e-6)
    assert stats["clip_frac"] == 0.25 and stats["tokens"] == 4.0  # only e^4 > 2 is cut
    # a ratio exactly at the cap is not counted as clipped
    _, at_cap = truncated_importance(
        torch.tensor([[math.log(2.0)]]), torch.tensor([[0.0]]), torch.ones(1, 1, dtype=torch.bool), cap=2.0
    )
    assert at_cap["clip_frac"] == 0.0 and at_cap["weight_mean"] == pytest.approx(2.0)


def test_truncated_importance_masked_tokens_weigh_nothing_and_do_not_leak():

    old = torch.tensor([[-1.0, float("inf")], [-1.0, float("nan")]])  # garbage on padding only
    behaviour = torch.tensor([[-2.0, 0.0], [-1.0, 0.0]])
    mask = torch.tensor([[1, 0], [1, 0]])
    w, stats = truncated_importance(old, behaviour, mask, cap=10.0)
    assert w.tolist() == [[pytest.approx(math.e), 0.0], [1.0, 0.0]]
    assert stats == {"weight_mean": pytest.approx((math.e + 1.0) / 2), "clip_frac": 0.0, "tokens": 2.0}


def test_truncated_importance_of_no_tokens():

    empty = torch.zeros(2, 0)
    w, stats = truncated_importance(empty, empty, empty.bool(), cap=2.0)
    assert w.shape == (2, 0) and stats == {"weight_mean": 0.0, "clip_frac": 0.0, "tokens": 0.0}
    w, stats = truncated_importance(torch.zeros(1, 3), torch.full((1, 3), -9.0), torch.zeros(1, 3), cap=2.0)
    assert w.tolist() == [[0.0, 0.0, 0.0]] and stats["tokens"] == 0.0 and stats["clip_frac"] == 0.0


def test_truncated_importance_scales_the_policy_gradient_term_per_token():

    old = torch.tensor([[-1.0, -1.0, -1.0]])
    behaviour = torch.tensor([[-1.0, -1.5, -5.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    w, _ = truncated_importance(old, behaviour, mask, cap=2.0)
    logp = old.clone().requires_grad_()
    loss, _ = grpo_loss(logp, old, None, torch.tensor([1.0]), mask, agg="dapo", token_weights=w)
    loss.backward()
    # ratio 1 at the old policy: d(-w r A)/d logp = -w A per token, over 3 tokens (dapo)
    assert logp.grad.tolist()[0] == pytest.approx([-1.0 / 3, -math.exp(0.5) / 3, -2.0 / 3], rel=1e-6)


def test_truncated_importance_refuses_a_bad_cap_or_shapes():

    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="cap"):
        truncated_importance(x, x, x.bool(), cap=0.0)
    with pytest.raises(ValueError, match="shapes"):
        truncated_importance(x, torch.zeros(1, 3), x.bool(), cap=2.0)
