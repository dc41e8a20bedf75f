"""The RL stage's schedule (`cudal1.pipeline.overlap.OneStepAhead`) with plain callables: what is
sampled when, with which weights, and that no weight sync ever meets a sample in flight."""

from __future__ import annotations

import threading

import pytest

from cudal1.pipeline.overlap import Background, OneStepAhead


class Recorder:
    """A 'generator' whose weights are a version number, and a 'learner' that bumps it per step."""

    def __init__(self) -> None:
        self.learner_version = 0
        self.generator_version = 0
        self.sampling = threading.Event()  # set while a sample runs
        self.release = threading.Event()
        self.release.set()
        self.events: list[tuple[str, int]] = []

    def sample(self, step: int) -> tuple[int, int]:
        self.sampling.set()
        try:
            self.release.wait(10)
            self.events.append(("sampled", step))
            return step, self.generator_version
        finally:
            self.sampling.clear()

    def sync(self) -> float:
        assert not self.sampling.is_set(), "weights synced during a generate call"
        self.generator_version = self.learner_version
        self.events.append(("sync", self.learner_version))
        return 0.0

    def train(self, step: int) -> None:
        self.learner_version += 1
        self.events.append(("trained", step))


def run(mode: str, steps: int) -> tuple[Recorder, list[tuple[int, int, int]]]:
    """Drive the schedule as run_contrastive_rl does; returns (recorder, [(step, rollout version,
    learner version when it trained them)])."""
    rec = Recorder()
    pipe = OneStepAhead(mode, rec.sample, rec.sync)
    out = []
    for step in range(steps):
        sampled_step, version = pipe.take(step)
        assert sampled_step == step
        if step + 1 < steps:
            pipe.ahead(step + 1)
        out.append((step, version, rec.learner_version))
        rec.train(step)
        if mode == "sync" or step + 1 == steps:
            rec.sync()
    return rec, out


def test_async_samples_step_t_plus_1_with_the_weights_the_learner_had_while_it_trained_step_t():
    rec, out = run("async", 4)
    # step 0 on-policy; then each step's rollouts are one update behind the learner that trains them
    assert out == [(0, 0, 0), (1, 0, 1), (2, 1, 2), (3, 2, 3)]
    for (_, version_next, _), (_, _, learner_then) in zip(out[1:], out[:-1]):
        assert version_next == learner_then  # rollouts of t+1 carry version t; the learner trained t
    assert rec.generator_version == rec.learner_version == 4  # the last step synced


def test_sync_mode_is_on_policy_and_never_samples_ahead():
    rec, out = run("sync", 3)
    assert [(v, lv) for _, v, lv in out] == [(0, 0), (1, 1), (2, 2)]
    assert [e for e in rec.events if e[0] != "sync"] == [
        ("sampled", 0),
        ("trained", 0),
        ("sampled", 1),
        ("trained", 1),
        ("sampled", 2),
        ("trained", 2),
    ]


def test_async_trains_while_the_next_step_is_sampled():
    rec = Recorder()
    pipe = OneStepAhead("async", rec.sample, rec.sync)
    pipe.take(0)
    rec.release.clear()  # step 1's sample will block until released
    pipe.ahead(1)
    assert rec.sampling.wait(5) and pipe.in_flight == 1
    rec.train(0)  # the learner trains while step 1 is being sampled
    with pytest.raises(RuntimeError, match="no weight sync during a generate call"):
        pipe.ahead(2)  # a second sample (and its sync) must wait for the first
    with pytest.raises(RuntimeError, match="step 1 is being sampled"):
        pipe.take(2)
    rec.release.set()
    assert pipe.take(1) == (1, 0)
    assert rec.events == [("sampled", 0), ("sync", 0), ("trained", 0), ("sampled", 1)]


def test_a_failed_sample_raises_at_take_and_a_dropped_one_is_forgotten():
    def sample(step: int) -> int:
        if step == 1:
            raise ValueError("engine died")
        return step

    pipe = OneStepAhead("async", sample, lambda: 0.0)
    assert pipe.take(0) == 0
    pipe.ahead(1)
    with pytest.raises(ValueError, match="engine died"):
        pipe.take(1)
    pipe.ahead(2)
    pipe.drop()
    assert pipe.in_flight is None and pipe.take(5) == 5  # nothing in flight: sampled inline
    with pytest.raises(ValueError, match="mode"):
        OneStepAhead("eager", sample, lambda: 0.0)


def test_background_returns_value_or_raises():
    assert Background(lambda: 41 + 1).result(5) == 42
    with pytest.raises(ZeroDivisionError):
        Background(lambda: 1 / 0).result(5)
    gate = threading.Event()
    job = Background(lambda: gate.wait(10))
    with pytest.raises(TimeoutError):
        job.result(0.05)
    gate.set()
    assert job.result(5) is True and job.done()


def test_one_step_off_policy_with_the_real_generator_and_learner(hf_generator, small_model_dir):
    """The async schedule on the real components, in one process: the transformers generator
    samples step t+1 in the background thread while GRPOLearner (DeepSpeed, CPU) trains step t on
    a synthetic verifiable reward (the share of response tokens in the upper half of the
    vocabulary, as in tests/training/test_learning.py, so every step updates). Rollouts of step
    t+1 carry the version the learner had while it trained step t; from step 1 on the learner's
    own old log-probabilities differ from the generator's (one update apart), and the truncated
    importance weights of `learner.tis_cap` see that gap."""
    pytest.importorskip("deepspeed")
    from cudal1.policy.model import chat_prompt_ids, load_policy
    from cudal1.records import PolicyExample
    from cudal1.rl.advantages import group_advantages
    from cudal1.training import GRPOLearner

    model, tok = load_policy(small_model_dir, dtype="float32", device="cpu")
    vocab = model.get_input_embeddings().num_embeddings
    original = [(name, p.detach().clone()) for name, p in model.named_parameters()]
    prompts = [chat_prompt_ids(tok, [{"role": "user", "content": text}]) for text in ("Tile the loop.", "Fuse ops.")]
    learner = GRPOLearner(small_model_dir, lr=5e-2, micro_batch=8, seed=0, tis_cap=2.0)
    steps, trained = 4, []

    def sample(step: int):
        groups = hf_generator.generate(prompts, n=4, max_tokens=6, temperature=1.0)
        return [g for group in groups for g in group]

    def sync() -> float:
        return hf_generator.update_weights(learner.named_weights(), version=learner.version)

    pipe = OneStepAhead("async", sample, sync)
    try:
        for step in range(steps):
            samples = pipe.take(step)
            if step + 1 < steps:
                pipe.ahead(step + 1)  # step + 1 is sampled from here on, during the update below
            rewards = [sum(t >= vocab // 2 for t in g.response_ids) / len(g.response_ids) for g in samples]
            advantages = group_advantages(rewards, [i // 4 for i in range(len(samples))])
            version_before = learner.version
            metrics = learner.grpo_step(
                [PolicyExample(g.prompt_ids, g.response_ids, a, g.logprobs) for g, a in zip(samples, advantages)]
            )
            trained.append(({g.model_version for g in samples}, version_before, learner.version, metrics))
    finally:
        pipe.drop()
        hf_generator.update_weights(original, version=0)  # the session's generator gets its weights back

    print("step: rollout versions, learner version before/after, engine |log ratio|, tis weight mean, clipped")
    for k, (versions, before, after, m) in enumerate(trained):
        print(
            k,
            sorted(versions),
            before,
            after,
            f"{m['engine_abs_log_ratio']:.2e}",
            f"{m['tis_weight_mean']:.4f}",
            f"{m['tis_clip_frac']:.3f}",
        )
    assert trained[0][0] == {0} and trained[0][1] == 0  # step 0 on-policy
    for k in range(1, steps):
        versions, before, _, metrics = trained[k]
        assert versions == {trained[k - 1][1]}, k  # rollouts of step k: the version that trained step k-1
        assert before > trained[k - 1][1]  # ... one update behind the learner that trains them
        assert metrics["engine_abs_log_ratio"] > 1e-3, metrics  # the off-policy gap is real
        assert 0 < metrics["tis_weight_mean"] <= 2.0 and 0 <= metrics["tis_clip_frac"] <= 1
    # On-policy (same weights, both fp32 on the CPU), the engine and the learner agree closely.
    assert trained[0][3]["engine_abs_log_ratio"] < 1e-3 < min(t[3]["engine_abs_log_ratio"] for t in trained[1:])
