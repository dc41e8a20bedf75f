"""The learner group (`cudal1.actors.learner_group`): 2 DeepSpeed ZeRO-3 ranks as Ray actors on the
CPU (gloo), against one in-process rank on the same batch, and its weight broadcast into vLLM."""

from __future__ import annotations

import pytest
import ray

pytest.importorskip("deepspeed")

from cudal1.actors.learner_group import LearnerGroup  # noqa: E402
from cudal1.policy.model import load_policy  # noqa: E402
from cudal1.records import PolicyExample  # noqa: E402
from cudal1.training import GRPOLearner  # noqa: E402
from cudal1.training.config import LearnerConfig  # noqa: E402
from cudal1.training.shards import by_minibatch, contiguous  # noqa: E402

# One optimizer step sees 4 examples: 2 ranks x micro_batch 2, or 1 rank x micro_batch 4. grpo_step
# aggregates by dr_grpo with the mini-batch's longest response as its constant (the ranks must agree
# on the sequence count and the longest response), sft_step by token mean (dapo: on the token count).
COMMON = dict(zero_stage=3, lr=1e-2, loss_agg="dr_grpo", grad_accum=1, kl_beta=0.05)


def batch() -> list[PolicyExample]:
    """5 examples of uneven lengths: global mini-batches of 4 and 1 (rank 1 idles in the second)."""
    rows = [
        ([5, 17, 99], [42, 7, 300, 8], 1.0),
        ([3, 250], [9, 1000], -1.0),
        ([11, 12, 13, 14], [15, 16, 17, 18, 19, 20], 0.5),
        ([7], [8, 9, 10], -0.5),
        ([21, 22], [23, 24, 25, 26, 27], 1.5),
    ]
    return [PolicyExample(p, r, advantage=a) for p, r, a in rows]


@pytest.fixture(scope="module")
def group(ray_cluster, small_model_dir):
    config = LearnerConfig(num_ranks=2, num_cpus=1, micro_batch=2, **COMMON)
    g = LearnerGroup.start(str(small_model_dir), config, seed=0, max_response_len=None)
    g.ready(timeout_s=600)
    yield g
    g.kill()


def test_shards_keep_each_global_minibatch_on_its_step():
    items = list(range(11))
    parts = by_minibatch(items, num_ranks=2, per_rank=3)  # global mini-batches [0..5], [6..10]
    assert parts == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9]]
    assert sorted(sum(parts, [])) == items
    assert by_minibatch([0], 3, 2) == [[0], [], []]
    blocks = contiguous(items, 3)
    assert [len(b) for b in blocks] == [4, 4, 3] and sum(blocks, []) == items
    with pytest.raises(ValueError):
        by_minibatch(items, 0, 1)


def test_two_ranks_take_the_same_step_as_one(group, small_model_dir):
    assert group.attribute("version") == 0, "runs first: the group still holds the checkpoint's weights"
    single = GRPOLearner(small_model_dir, micro_batch=4, **COMMON)
    examples = batch()
    torch_close = dict(rel=1e-5, abs=1e-6)
    stats = group.shard_stats()  # loaded partitioned: each rank holds about half of policy and reference
    assert stats["world_size"] == 2 and stats["params_held"] <= stats["params"] / 2 + 64
    assert stats["reference_params_held"] == stats["params_held"]
    a, b = single.grpo_step(examples), group.grpo_step(examples)
    assert b["optimizer_steps"] == a["optimizer_steps"] == 2 and b["tokens"] == a["tokens"] == 20
    assert a["kl"] > 0  # step 2 is measured against the reference, which stayed where step 1 began
    for key in ("loss", "grad_norm", "kl", "entropy", "clip_frac", "ratio_mean"):
        assert b[key] == pytest.approx(a[key], **torch_close), key
    assert a["grad_norm"] > 0 and a["ratio_mean"] != pytest.approx(1.0, abs=1e-6)  # step 2 saw moved weights
    a, b = single.sft_step(examples), group.sft_step(examples)
    assert b["loss"] == pytest.approx(a["loss"], **torch_close) and b["grad_norm"] == pytest.approx(
        a["grad_norm"], **torch_close
    )
    after_single, after_group = single.score(examples), group.score(examples)
    assert [len(r) for r in after_group] == [len(ex.response_ids) for ex in examples]
    # After four updates the two ranks' fp32 sums in another order differ by up to ~2e-5 nats on a
    # log-probability of -5 (one run: 2.15e-5): relative 1e-5, as the step's own figures above.
    for x, y in zip(after_single, after_group):
        assert y == pytest.approx(x, rel=1e-5, abs=2e-5)
    assert group.logprobs(examples[2].prompt_ids, examples[2].response_ids) == pytest.approx(
        after_single[2], rel=1e-5, abs=2e-5
    )
    assert group.attribute("version") == single.version == 4


def test_group_broadcast_reaches_vllm(group, vllm_generator, small_model_dir):
    """Only rank 0 sends (ZeRO-3 shards gathered bucket by bucket); vLLM then scores as the group."""
    prompt, response = [5, 17, 99, 3, 250], [42, 7, 300, 8, 9, 1000]
    before = vllm_generator.score(prompt, response)
    group.sft_step([PolicyExample(prompt, response)] * 4)
    expected = group.logprobs(prompt, response)
    assert max(abs(x - y) for x, y in zip(before, expected)) > 1e-3
    host, port = group.endpoint()
    opened = group.init_weight_group.remote(host, port, 2, "gloo", 120)
    vllm_generator.init_weight_group(host, port, 1, 2, "gloo", 120)
    ray.get(opened)
    specs, version = group.weight_manifest(), group.attribute("version")
    sent = group.broadcast_weights.remote(1)  # 1 MiB buckets: several broadcasts
    try:
        vllm_generator.receive_weights(specs, version, bucket_mb=1)
        stats = ray.get(sent)
        assert stats["bytes"] == sum(s.nbytes for s in specs) and stats["buckets"] >= 2
        assert vllm_generator.model_version == version
        assert vllm_generator.score(prompt, response) == pytest.approx(expected, abs=1e-4)
    finally:
        model, _ = load_policy(small_model_dir, dtype="float32", device="cpu")
        vllm_generator.update_weights(model.named_parameters(), version=0)  # the checkpoint back for other tests


def test_group_checkpoint_resumes_and_exports(group, tmp_path):
    """Every rank saves its ZeRO-3 shards (rank 0 the gathered reference too), loads them back,
    and the exported checkpoint holds the group's full weights."""
    import torch
    import transformers

    examples = batch()
    tag = group.save(str(tmp_path / "ckpt"))
    version, saved = group.attribute("version"), sum(group.score(examples), [])
    group.sft_step(examples)
    assert max(abs(x - y) for x, y in zip(sum(group.score(examples), []), saved)) > 1e-3
    group.load(str(tmp_path / "ckpt"), tag)
    assert group.attribute("version") == version
    assert sum(group.score(examples), []) == pytest.approx(saved, abs=1e-6)
    weights = dict(group.named_weights())
    hf = transformers.AutoModelForCausalLM.from_pretrained(group.export(str(tmp_path / "hf")))
    for name, param in hf.named_parameters():
        torch.testing.assert_close(param.detach(), weights[name], rtol=0, atol=0)
