"""Session fixtures shared by the whole suite, so the expensive components start once:

- `small_model_dir`: the embedded default policy (built in a few seconds).
- `vllm_generator`, `hf_generator`: ONE vLLM engine (30-60 s to start on CPU, reserves its KV
  cache) and one transformers generator on that checkpoint. Tests that change their weights must
  put the original ones back.
- `ray_cluster`: ONE local Ray cluster (~10 s): four logical CPUs, two units of the custom
  resource `bench_test` (pool-placement tests ask for it), no dashboard, a 256 MiB object store.
  `address="local"` starts a new cluster even when RAY_ADDRESS points at a running one.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory):
    """The embedded default policy, built once per session."""
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


@pytest.fixture(scope="session")
def ray_cluster():
    """Facts of the running local cluster ({"address", "started_local", "resources"})."""
    pytest.importorskip("ray")
    from cudal1.actors.cluster import init_ray, shutdown_ray

    facts = init_ray(address="local", num_cpus=4, resources={"bench_test": 2}, object_store_mb=256,
                     include_dashboard=False, log_to_driver=False)
    yield facts
    shutdown_ray()
