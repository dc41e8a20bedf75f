"""`sample_rollouts` with generation and evaluation overlapped: each finished group's candidates go
to the benchmark pool while the next groups are still being generated.

The pool is real (Ray actors, the CPU evaluator, the builtin task level1/4, the cheapest to evaluate, and its seed solution).
The generator is not the policy: the embedded model writes no code, so nothing would reach the
pool. `ReplayGenerator` hands out fixed responses (real `Generation` records, the small model's
tokenizer) group by group in a chosen order, through the same `generate_stream` / `generate`
interface as the rollout engines; the engines' own streaming is tested in
tests/rollout/test_streaming.py and tests/actors/test_generator_group.py.
"""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace

import pytest

from cudal1.actors.bench_pool import BenchmarkPool, PoolSpec
from cudal1.bench.result import Status
from cudal1.rl.rewards import RewardConfig
from cudal1.pipeline.rollouts import sample_rollouts
from cudal1.policy.model import load_policy
from cudal1.policy.prompts import plain_prompt
from cudal1.records import Candidate, Exemplar, Generation
from cudal1.tasks import load_tasks, seed_solutions

TASK = "level1/4"
SEED = seed_solutions("cpu")[TASK].read_text()
BROKEN = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n\n"
    "    def forward(self, *inputs):\n        return inputs[0].no_such_method()\n"
)


def response(code: str) -> str:
    return (
        f"## Performance analysis\nThe reduction reads the input once.\n\n## Algorithm design\n"
        f"Keep the reduction in one kernel.\n\n## Code\n```python\n{code.rstrip()}\n```\n"
    )


TEXTS = {0: [response(SEED), "no code here"], 1: [response(BROKEN), response(SEED)]}
"""Group 0: a correct candidate and a parse failure; group 1: a failing and a correct candidate."""


class ReplayGenerator:
    """Fixed responses handed out like a rollout engine's: `generate_stream` yields group g of
    `order` after calling `before(g)`, `generate` returns them all in prompt order."""

    def __init__(self, tokenizer, order, before=lambda g: None, fail_after: int | None = None, texts=None) -> None:
        self.tokenizer, self.order, self.before, self.fail_after = tokenizer, order, before, fail_after
        self.texts = TEXTS if texts is None else texts

    def _group(self, prompt, g):
        out = []
        for text in self.texts[g]:
            ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
            out.append(Generation(list(prompt), ids, [-1.0] * len(ids), text, "stop", 0))
        return out

    def generate_stream(self, prompts, n, max_tokens, temperature, top_p):
        assert n == 2
        for k, g in enumerate(self.order):
            if self.fail_after is not None and k == self.fail_after:
                raise RuntimeError("rollout engine 0 died after 1 of its 2 groups")
            self.before(g)
            yield g, self._group(prompts[g], g)

    def generate(self, prompts, n, max_tokens, temperature, top_p):
        return [self._group(p, g) for g, p in enumerate(prompts)]


@pytest.fixture(scope="module")
def pool(ray_cluster, tmp_path_factory):
    spec = PoolSpec(
        name="stream",
        num_actors=1,
        num_cpus=1,
        resources={"bench_test": 1},
        start_timeout_s=180,
        settings={
            "rounds": 1,
            "calls_per_round": 1,
            "warmup_calls": 1,
            "wall_timeout_s": 120.0,
            "max_calls_per_round": 1,
            "calibration_calls": 3,
            "calibration_rounds": 2,
            "cache_dir": str(tmp_path_factory.getbasetemp() / "stream-cache"),
        },
    )
    p = BenchmarkPool(spec)
    yield p
    p.shutdown()


@pytest.fixture(scope="module")
def tokenizer(small_model_dir):
    return load_policy(small_model_dir, dtype="float32", device="cpu")[1]


def context(tokenizer, generator, primary):
    rollout = SimpleNamespace(max_model_len=8192, max_tokens=1024, temperature=1.0, top_p=1.0)
    cfg = SimpleNamespace(rollout=rollout, reward=RewardConfig())
    return SimpleNamespace(
        cfg=cfg, tokenizer=tokenizer, generator=generator, pools=SimpleNamespace(primary=primary), buffer=None
    )


def content(r):
    """What must not depend on the path a rollout took (measured times and speedups may)."""
    res = r.result
    # A correct candidate's reason depends on its measured speedup (noisy, or re-measured above 3x).
    reason = "correct" if res is not None and res.status is Status.OK else r.reward_reason
    return (
        r.task_id,
        r.step,
        r.group,
        r.sample,
        r.prompt,
        r.generation,
        r.sections,
        r.parse_error,
        r.candidate,
        *((res.status, res.task_id, res.candidate_hash) if res is not None else (None, None, None)),
        reason,
        r.trainable,
    )


@pytest.fixture(scope="module")
def task():
    return next(t for t in load_tasks("builtin", levels=[1]) if t.task_id == TASK)


def test_groups_are_evaluated_while_later_groups_generate_and_rollouts_match_the_batch_path(tokenizer, pool, task):
    prompts = [plain_prompt(task.source)] * 2
    seen = {}

    def before(g):  # group 1 arrives first; group 0 only once the pool is timing group 1's candidates
        if g == 0:
            t = time.monotonic()
            while not pool.busy and time.monotonic() - t < 300:
                time.sleep(0.05)
            seen["busy"] = pool.busy

    timings: dict[str, float] = {}
    streamed = sample_rollouts(
        context(tokenizer, ReplayGenerator(tokenizer, [1, 0], before), pool),
        [task, task],
        prompts,
        2,
        step=7,
        timings=timings,
    )
    assert seen["busy"], "no candidate reached the pool before generation ended"
    assert timings["overlap_s"] > 0 and timings["generate_s"] >= timings["overlap_s"]
    assert timings["evaluate_s"] > timings["overlap_s"] and timings["evaluations"] == 2  # SEED in both groups: once
    assert [(r.group, r.sample) for r in streamed] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [r.result.status if r.result else None for r in streamed] == ["ok", None, "runtime_error", "ok"], [
        r.result.message if r.result else None for r in streamed
    ]
    assert [r.candidate.origin if r.candidate else None for r in streamed] == [
        "step7/g0/s0",
        None,
        "step7/g1/s0",
        "step7/g1/s1",
    ]
    assert streamed[1].parse_error == "no_code_block"

    # All groups at once (a generator without generate_stream): the same rollouts, and the
    # candidates reach the pool only once generation has ended.
    replay = ReplayGenerator(tokenizer, [0, 1])
    batch_timings: dict[str, float] = {}
    batch = sample_rollouts(
        context(tokenizer, SimpleNamespace(generate=replay.generate), pool),
        [task, task],
        prompts,
        2,
        step=7,
        timings=batch_timings,
    )
    assert [content(r) for r in streamed] == [content(r) for r in batch]
    assert batch_timings["overlap_s"] < 0.5 < batch_timings["evaluate_s"] and batch_timings["evaluations"] == 2


def test_a_generator_failing_mid_stream_raises_and_frees_the_pool(tokenizer, pool, task):
    generator = ReplayGenerator(tokenizer, [1, 0], fail_after=1)
    with pytest.raises(RuntimeError, match="engine 0 died"):
        sample_rollouts(context(tokenizer, generator, pool), [task, task], [plain_prompt(task.source)] * 2, 2, step=0)
    assert not pool._lock.locked() and pool.busy == {}
    assert pool.evaluate_many([Candidate(TASK, "not python (")], progress=False)[0].status is Status.COMPILE_ERROR


RENAMED = "# the same program: a comment, renamed locals\n" + SEED.replace("X", "Y").replace("n = ", "size = ").replace(
    "(n, ", "(size, "
)
"""SEED up to a comment and renamed locals: one program (`normalized_code`), not one text."""


def test_each_distinct_program_of_a_step_is_evaluated_once_and_its_copies_share_the_result(tokenizer, pool, task):
    assert RENAMED != SEED
    texts = {0: [response(SEED), response(RENAMED)], 1: [response(SEED), response(BROKEN)]}
    measured = []
    evaluate_many = pool.evaluate_many

    def counting(candidates, **kw):  # the second opinions
        measured.extend(candidates)
        return evaluate_many(candidates, **kw)

    ctx = context(tokenizer, ReplayGenerator(tokenizer, [0, 1], texts=texts), pool)
    # Any correct result is an outlier against a best of 1e-6x: each distinct correct program is re-measured.
    ctx.buffer = SimpleNamespace(best=lambda task_id: Exemplar(task_id, "", 1e-6))
    ctx.cfg.reward = dataclasses.replace(ctx.cfg.reward, verify_over_best=1.0)
    timings: dict[str, float] = {}
    pool.evaluate_many = counting
    try:
        rollouts = sample_rollouts(ctx, [task, task], [plain_prompt(task.source)] * 2, 2, step=3, timings=timings)
    finally:
        del pool.evaluate_many
    assert timings["evaluations"] == 2 and timings["evaluations_saved"] == 2
    assert [r.result.status for r in rollouts] == ["ok", "ok", "ok", "runtime_error"]
    assert rollouts[0].result is rollouts[1].result is rollouts[2].result
    assert [c.origin for c in measured] == ["step3/g0/s0"]  # one second opinion for the three copies
    assert rollouts[2].result.second_opinion is not None
