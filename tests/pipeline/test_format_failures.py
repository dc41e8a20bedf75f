"""A response that fails the format check is priced without an evaluation: `sample_rollouts` sends
only well-formed candidates to the benchmark pool.

Ray-free: the pool here is an in-process stand-in with the `stream()` interface of
`cudal1.actors.bench_pool.BenchmarkPool`, which evaluates what it is handed with the real
evaluator (`cudal1.bench.evaluator.evaluate`, CPU backend, builtin task level1/4) and records it.
The generator replays fixed responses (the embedded model writes no code).
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings
from cudal1.pipeline.rollouts import sample_rollouts
from cudal1.policy.model import load_tokenizer
from cudal1.policy.prompts import plain_prompt
from cudal1.records import Generation
from cudal1.rl.rewards import RewardConfig
from cudal1.tasks import load_tasks, seed_solutions

from .stream_pool import StreamPool

TASK = "level1/4"
SEED = seed_solutions("cpu")[TASK].read_text()
BROKEN = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n\n"
    "    def forward(self, *inputs):\n        return inputs[0].no_such_method()\n"
)
OTHER = BROKEN.replace("no_such_method()", "other_missing_method()")


def response(code: str, analysis="The reduction reads the input once.", design="Keep the reduction in one kernel."):
    parts = [f"## Performance analysis\n{analysis}"] if analysis is not None else []
    parts += [f"## Algorithm design\n{design}"] if design is not None else []
    return "\n\n".join([*parts, f"## Code\n```python\n{code.rstrip()}\n```\n"])


TEXTS = [
    response(SEED),  # well formed: evaluated
    response(BROKEN, analysis="B is faster."),  # 12 characters of analysis: under the 20 priced
    response(OTHER, design=None),  # no design section
    "no code here",  # a parse error
]


class InProcessPool(StreamPool):
    """A stream pool in this process whose results come from the real evaluator."""

    def __init__(self, tasks, settings):
        by_id = {t.task_id: t for t in tasks}
        super().__init__(lambda c: evaluate(by_id[c.task_id], c.source, "cpu", settings=settings))

    def evaluate_many(self, candidates, progress=False):
        raise AssertionError("no second opinion is asked for here")


class Replay:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, n, max_tokens, temperature, top_p):
        assert n == len(TEXTS)
        out = []
        for prompt in prompts:
            group = []
            for text in TEXTS:
                ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
                group.append(Generation(list(prompt), ids, [-1.0] * len(ids), text, "stop", 0))
            out.append(group)
        return out


def test_format_failures_are_priced_without_reaching_the_pool(small_model_dir, tmp_path):
    task = next(t for t in load_tasks("builtin", levels=[1]) if t.task_id == TASK)
    settings = dataclasses.replace(
        EvalSettings.for_backend("cpu"),
        rounds=1,
        calls_per_round=1,
        warmup_calls=1,
        max_calls_per_round=1,
        calibration_calls=3,
        calibration_rounds=2,
        wall_timeout_s=120.0,
        cache_dir=str(tmp_path / "cache"),
    )
    pool = InProcessPool([task], settings)
    tokenizer = load_tokenizer(small_model_dir)
    reward = RewardConfig(verify_above=1e9, verify_over_best=1e9)
    cfg = SimpleNamespace(
        rollout=SimpleNamespace(max_model_len=8192, max_tokens=1024, temperature=1.0, top_p=1.0), reward=reward
    )
    ctx = SimpleNamespace(
        cfg=cfg, tokenizer=tokenizer, generator=Replay(tokenizer), pools=SimpleNamespace(primary=pool), buffer=None
    )
    timings: dict[str, float] = {}
    rollouts = sample_rollouts(ctx, [task], [plain_prompt(task.source)], len(TEXTS), step=2, timings=timings)

    assert [c.origin for c in pool.submitted] == ["step2/g0/s0"] and timings["evaluations"] == 1
    assert rollouts[0].result is not None and rollouts[0].result.status is Status.OK
    failure = reward.failure_value
    got = [(r.candidate is None, r.result is None, r.reward_reason, r.reward) for r in rollouts[1:]]
    assert got == [
        (True, True, "format:missing_analysis", failure),
        (True, True, "format:missing_design", failure),
        (True, True, "parse_error:no_code_block", failure),
    ]
    assert all(r.trainable for r in rollouts)  # they stay in the update, as failures
    assert rollouts[1].sections["code"].strip() == BROKEN.strip()  # the code is kept, only not evaluated
