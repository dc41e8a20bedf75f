"""GRPOLearner on real DeepSpeed (CPU, gloo, one process) with a tiny Qwen2-architecture model."""

import pytest
import torch

pytest.importorskip("deepspeed")
transformers = pytest.importorskip("transformers")

from cudal1.records import PolicyExample  # noqa: E402
from cudal1.training import GRPOLearner  # noqa: E402

PROMPT_A, RESP_A = [1, 2, 3, 4], [5, 6, 7, 8, 9]
PROMPT_B, RESP_B = [10, 11], [12, 13, 14]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 2-layer, 32-wide Qwen2 with a 64-token vocabulary: token ids are enough, no tokenizer."""
    path = tmp_path_factory.mktemp("tiny_qwen2")
    config = transformers.Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def learner(model_dir):
    """One ZeRO-2 learner shared by the tests that compare before/after within themselves."""
    return GRPOLearner(model_dir, zero_stage=2, lr=1e-2, micro_batch=2, grad_accum=2, seed=0)


def total_logprob(learner, prompt, response):
    return sum(learner.logprobs(prompt, response))


def test_logprobs_do_not_depend_on_batch_padding(learner):
    # Alone vs. in a micro-batch beside a longer prompt and a longer response: the left-padded
    # prompt, right-padded response and position ids must give the same numbers.
    alone = learner.logprobs(PROMPT_B, RESP_B)
    batched = learner.score([PolicyExample(PROMPT_A, RESP_A), PolicyExample(PROMPT_B, RESP_B)])
    assert len(batched[0]) == len(RESP_A) and len(batched[1]) == len(RESP_B)
    torch.testing.assert_close(torch.tensor(batched[1]), torch.tensor(alone), rtol=0, atol=1e-5)
    assert all(lp < 0 for lp in alone)


def test_sft_lowers_response_nll(learner):
    examples = [PolicyExample(PROMPT_A, RESP_A), PolicyExample(PROMPT_B, RESP_B)]
    before = -total_logprob(learner, PROMPT_A, RESP_A) - total_logprob(learner, PROMPT_B, RESP_B)
    version = learner.version
    losses = [learner.sft_step(examples)["loss"] for _ in range(4)]
    after = -total_logprob(learner, PROMPT_A, RESP_A) - total_logprob(learner, PROMPT_B, RESP_B)
    assert after < before - 1.0
    assert losses[-1] < losses[0]
    assert learner.version == version + 4


def test_grpo_step_follows_advantage_sign(learner):
    good = PolicyExample(PROMPT_A, RESP_A, advantage=1.0)
    bad = PolicyExample(PROMPT_A, [20, 21, 22], advantage=-1.0)
    good_before = total_logprob(learner, PROMPT_A, RESP_A)
    bad_before = total_logprob(learner, PROMPT_A, bad.response_ids)
    m = learner.grpo_step([good, bad])
    assert total_logprob(learner, PROMPT_A, RESP_A) > good_before
    assert total_logprob(learner, PROMPT_A, bad.response_ids) < bad_before
    # Old logprobs were computed with the same weights: on-policy ratio 1, nothing clipped.
    assert m["ratio_mean"] == pytest.approx(1.0, abs=1e-5) and m["clip_frac"] == 0.0
    assert m["tokens"] == 8 and m["optimizer_steps"] == 1 and m["grad_norm"] > 0
    assert m["entropy"] > 0 and m["kl"] == 0.0


def test_grpo_step_minibatches_and_given_old_logprobs(learner):
    # 6 examples, micro_batch 2 x grad_accum 2 -> optimizer steps of 4 and 2 examples; the
    # second step's ratio moves away from 1 because old logprobs stay those of before step 1.
    examples = [PolicyExample(PROMPT_A, RESP_A, advantage=(-1.0) ** i) for i in range(6)]
    version = learner.version
    m = learner.grpo_step(examples)
    assert m["optimizer_steps"] == 2 and learner.version == version + 2
    assert m["ratio_mean"] != pytest.approx(1.0, abs=1e-6)
    stale = PolicyExample(PROMPT_A, RESP_A, advantage=1.0, old_logprobs=[0.0] * len(RESP_A))
    learner.recompute_old_logprobs = False
    try:
        m = learner.grpo_step([stale])
    finally:
        learner.recompute_old_logprobs = True
    assert m["ratio_mean"] < 1.0  # the given behaviour logprobs (p = 1) were used
    with pytest.raises(ValueError, match="old_logprobs"):
        learner.grpo_step([PolicyExample(PROMPT_A, RESP_A, 1.0, old_logprobs=[0.0])])


def test_old_logprobs_are_recomputed_and_the_engines_gap_is_logged(learner):
    """Issue 9, item 12: the ratio's old log-probabilities are the learner's own (ratio 1 on the
    first mini-batch even when the engine's numbers are off), the engine's gap is a metric, and
    truncated importance weights scale the update."""
    truth = learner.logprobs(PROMPT_A, RESP_A)
    engine = [lp - 0.5 for lp in truth]  # an engine that reads every token 0.5 nats less likely
    m = learner.grpo_step([PolicyExample(PROMPT_A, RESP_A, advantage=1.0, old_logprobs=engine)])
    assert m["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert m["engine_log_ratio"] == pytest.approx(0.5, abs=1e-4)
    assert m["engine_abs_log_ratio"] == pytest.approx(0.5, abs=1e-4)
    assert m["engine_max_abs_log_ratio"] == pytest.approx(0.5, abs=1e-4)
    learner.tis_cap = 1.2
    try:
        m = learner.grpo_step([PolicyExample(PROMPT_A, RESP_A, advantage=1.0, old_logprobs=engine)])
    finally:
        learner.tis_cap = None
    assert m["tis_weight_mean"] == pytest.approx(1.2)  # exp(0.5) = 1.65, capped at 1.2
    assert m["tis_clip_frac"] == 1.0  # every token's weight was cut


def test_named_weights_are_hf_names_and_export_reloads(learner, tmp_path):
    weights = dict(learner.named_weights())
    hf = transformers.AutoModelForCausalLM.from_pretrained(learner.export(tmp_path / "hf"))
    hf_state = dict(hf.named_parameters())
    assert set(weights) == set(hf_state)
    for name, tensor in weights.items():
        torch.testing.assert_close(hf_state[name].detach(), tensor, rtol=0, atol=0)


@pytest.mark.parametrize("stage", [2, 3])
def test_save_load_resumes_exactly(model_dir, tmp_path, stage):
    def examples(step):
        return [
            PolicyExample(PROMPT_A, RESP_A, advantage=1.0 if step % 2 else -0.5),
            PolicyExample(PROMPT_B, RESP_B, advantage=-1.0 if step % 2 else 0.7),
        ]

    kwargs = dict(zero_stage=stage, lr=1e-2, kl_beta=0.1, micro_batch=1, grad_accum=2, seed=3)
    first = GRPOLearner(model_dir, **kwargs)
    first.grpo_step(examples(0))
    first.reset_reference()  # the reference now differs from the initial weights: it must be saved
    first.grpo_step(examples(1))
    first.save(tmp_path / "ckpt")
    saved = {name: t.clone() for name, t in first.named_weights()}
    uninterrupted = [first.grpo_step(examples(s)) for s in (2, 3)]

    resumed = GRPOLearner(model_dir, **{**kwargs, "seed": 99})
    resumed.load(tmp_path / "ckpt")
    assert resumed.version == 2
    for name, tensor in resumed.named_weights():
        torch.testing.assert_close(tensor, saved[name], rtol=0, atol=0)
    after = [resumed.grpo_step(examples(s)) for s in (2, 3)]
    for a, b in zip(uninterrupted, after):
        # step 3's loss depends on the restored Adam moments, its KL on the restored reference
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-6, abs=1e-9)
        assert b["kl"] == pytest.approx(a["kl"], rel=1e-6, abs=1e-12)
    assert after[1]["kl"] > 0


def test_zero3_gathers_full_weights_and_trains(model_dir):
    learner = GRPOLearner(model_dir, zero_stage=3, lr=1e-2, micro_batch=2)
    initial = dict(transformers.AutoModelForCausalLM.from_pretrained(model_dir).named_parameters())
    weights = dict(learner.named_weights())
    assert set(weights) == set(initial)
    for name, tensor in weights.items():
        assert tensor.shape == initial[name].shape and tensor.device.type == "cpu"
        torch.testing.assert_close(tensor, initial[name].detach(), rtol=0, atol=0)
    before = total_logprob(learner, PROMPT_A, RESP_A)
    learner.grpo_step([PolicyExample(PROMPT_A, RESP_A, advantage=1.0)])
    assert total_logprob(learner, PROMPT_A, RESP_A) > before


def test_bad_arguments_raise(model_dir):
    with pytest.raises(ValueError, match="loss_agg"):
        GRPOLearner(model_dir, loss_agg="mean")
    with pytest.raises(ValueError, match="fp16"):
        GRPOLearner(model_dir, precision="fp16")


def test_bf16_learner_keeps_bf16_weights_and_trains(model_dir):
    learner = GRPOLearner(model_dir, zero_stage=2, precision="bf16", lr=1e-2, kl_beta=0.05, micro_batch=2)
    assert {t.dtype for _, t in learner.named_weights()} == {torch.bfloat16}
    before = total_logprob(learner, PROMPT_A, RESP_A)
    m = learner.grpo_step([PolicyExample(PROMPT_A, RESP_A, advantage=1.0), PolicyExample(PROMPT_B, RESP_B, -1.0)])
    assert total_logprob(learner, PROMPT_A, RESP_A) > before
    assert m["kl"] == pytest.approx(0.0, abs=1e-3)  # reference = initial weights, in bf16


def test_bad_examples_raise(learner):
    with pytest.raises(ValueError, match="vocabulary"):
        learner.logprobs([1, 2], [64])
    with pytest.raises(ValueError, match="prompt token"):
        learner.sft_step([PolicyExample([], [1])])
    with pytest.raises(ValueError, match="response token"):
        learner.grpo_step([PolicyExample([1], [])])


@pytest.mark.parametrize("agg", ["grpo", "dr_grpo", "dapo"])
def test_gradient_accumulation_matches_one_big_micro_batch(model_dir, agg):
    # Same 4 examples, one optimizer step: 4 micro-batches of 1 must give the loss and the
    # (pre-clip) gradient norm of one micro-batch of 4, whatever the aggregation.
    examples = [
        PolicyExample(PROMPT_A, RESP_A, 1.0),
        PolicyExample(PROMPT_B, RESP_B, -0.5),
        PolicyExample(PROMPT_A, [30, 31], 0.8),
        PolicyExample(PROMPT_B, [40, 41, 42, 43, 44, 45, 46], -1.2),
    ]
    results = []
    for micro_batch, grad_accum in ((4, 1), (1, 4)):
        learner = GRPOLearner(model_dir, zero_stage=2, loss_agg=agg, micro_batch=micro_batch, grad_accum=grad_accum)
        results.append(learner.grpo_step(examples))
    assert results[0]["optimizer_steps"] == results[1]["optimizer_steps"] == 1
    assert results[1]["loss"] == pytest.approx(results[0]["loss"], rel=1e-5, abs=1e-7)
    assert results[1]["grad_norm"] == pytest.approx(results[0]["grad_norm"], rel=1e-4)


@pytest.mark.parametrize(
    "options",
    [dict(gradient_checkpointing=True), dict(offload_optimizer=True, offload_param=True)],
    ids=["activation_checkpointing", "offload"],
)
def test_zero3_options_take_the_same_step(model_dir, options):
    """Activation checkpointing (recompute in backward) and ZeRO-Offload of optimizer state and
    parameters (host memory; on this CPU-only machine the same memory, but DeepSpeed's offload
    code path) change where things live, not the update."""
    kwargs = dict(zero_stage=3, lr=1e-2, micro_batch=2, kl_beta=0.1, seed=0, logprob_chunk=2)
    examples = [PolicyExample(PROMPT_A, RESP_A, 1.0), PolicyExample(PROMPT_B, RESP_B, -1.0)]
    plain, changed = GRPOLearner(model_dir, **kwargs), GRPOLearner(model_dir, **kwargs, **options)
    if "offload_param" in options:
        zero = changed.engine.config["zero_optimization"] if isinstance(changed.engine.config, dict) else None
        assert (
            changed.engine.zero_offload_param() is not None and changed.engine.zero_offload_optimizer() is not None
        ), zero
    else:
        assert changed.engine.module.is_gradient_checkpointing
    for _ in range(2):
        a, b = plain.grpo_step(examples), changed.grpo_step(examples)
        for key in ("loss", "grad_norm", "kl", "entropy"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), key
    assert a["kl"] > 0
    torch.testing.assert_close(
        torch.tensor(changed.logprobs(PROMPT_A, RESP_A)),
        torch.tensor(plain.logprobs(PROMPT_A, RESP_A)),
        rtol=0,
        atol=1e-5,
    )


def test_zero3_keeps_the_reference_in_its_own_engine_and_none_without_kl(model_dir):
    with_kl = GRPOLearner(model_dir, zero_stage=3, kl_beta=0.1, micro_batch=2)
    assert type(with_kl.reference).__name__ == "DeepSpeedEngine"
    assert all(hasattr(p, "ds_id") for p in with_kl.reference.module.parameters())  # partitioned like the policy
    assert not any(p.requires_grad for p in with_kl.reference.module.parameters())
    stats = with_kl.shard_stats()
    assert stats["params"] == sum(
        p.numel() for p in transformers.AutoModelForCausalLM.from_pretrained(model_dir).parameters()
    )
    assert GRPOLearner(model_dir, zero_stage=3, kl_beta=0.0, micro_batch=2).reference is None
