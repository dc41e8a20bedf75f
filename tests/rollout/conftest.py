"""Shared rollout fixtures: one small checkpoint and ONE vLLM engine for the whole session.

vLLM on CPU takes 30-60 s to start and reserves its KV cache, so every test that needs the vLLM
backend shares `vllm_generator`. Tests that change its weights must put the original ones back.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory):
    """The embedded default policy, built once per session (a few seconds)."""
    from cudal1.policy.small import init_small

    return init_small(tmp_path_factory.mktemp("policy") / "small", seed=0)


@pytest.fixture(scope="session")
def vllm_generator(small_model_dir):
    """A vLLM-backed RolloutGenerator on the small model, fp32, with a 0.25 GiB KV cache."""
    pytest.importorskip("vllm")
    from cudal1.rollout import RolloutGenerator

    gen = RolloutGenerator(small_model_dir, backend="vllm", dtype="float32", max_model_len=4096, seed=0, kv_cache_gib=0.25)
    yield gen
    gen.close()


@pytest.fixture(scope="session")
def hf_generator(small_model_dir):
    """The transformers fallback generator on the same checkpoint."""
    from cudal1.rollout import RolloutGenerator

    gen = RolloutGenerator(small_model_dir, backend="hf", dtype="float32", max_model_len=4096, seed=0)
    yield gen
    gen.close()
