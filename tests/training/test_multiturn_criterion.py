"""The multi-turn learning test's pieces that need no engine (fast; the experiment itself is
`test_multiturn_learning.py`, gated): SFT trains on exactly the turn-2 prompts the RL episodes
build (`continue_episodes` on a turn whose answer is the SFT target and whose result is the
measured one), with and without the report; `classify` recognizes each variant as the parser
extracts it; and `learned` gives the right verdicts on hand-made traces."""

from __future__ import annotations

import pytest

from cudal1.bench.result import EvalResult, Status, Timing
from cudal1.policy.parsing import parse_response

from .benchmark_scripts import load_benchmark


def load_script():
    """benchmarks/multiturn_learning.py as a module."""
    return load_benchmark("multiturn_learning")


def _timing(ms: float) -> Timing:
    return Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, round_medians_ms=[ms], spread=0.0, calls=10)


TASK = "level1/17"
RESULTS = {
    "slow": EvalResult(
        TASK, Status.OK, speedup=0.08, speedup_spread=0.1, reference=_timing(0.2), candidate=_timing(2.5)
    ),
    "fast": EvalResult(
        TASK, Status.OK, speedup=0.9, speedup_spread=0.1, reference=_timing(0.2), candidate=_timing(0.22)
    ),
    "failing": EvalResult(TASK, Status.INCORRECT, message="max abs error 1e+03 > atol on trial 1"),
}


@pytest.fixture(scope="module")
def experiment(small_model_dir, tmp_path_factory):
    """An `Experiment` on the embedded small model (its tokenizer; no generator), with `RESULTS`
    as the variants' measurements."""
    mtl = load_script()
    exp = mtl.Experiment(small_model_dir, None, mtl.Settings(), tmp_path_factory.mktemp("work"))
    exp.results = dict(RESULTS)
    return mtl, exp


@pytest.mark.parametrize("report", [True, False])
def test_sft_trains_on_the_prompts_the_episodes_build(experiment, report):
    from cudal1.pipeline.episodes import Episode, continue_episodes
    from cudal1.records import Generation, Rollout
    from cudal1.rl.rewards import Priced

    mtl, exp = experiment
    budget = exp.s.max_model_len - exp.s.max_tokens
    for first in mtl.FIRST:
        rollout = Rollout(TASK, 0, 0, 0, "prompt", Generation([1], [2], [-0.1], mtl.answer(TASK, first), "stop"))
        rollout.result, rollout.priced = RESULTS[first], Priced(-1.0, RESULTS[first].status.value)
        ep = Episode(exp.task, 0, 0, exp.prompt, turns=[rollout])
        assert continue_episodes([ep], 2, None, budget, exp.count, report=report) == [ep]
        assert ep.messages == exp.second_prompt(first, report)
        assert ("report on your previous solution" in ep.messages[-1]["content"]) is report
    contexts = exp.contexts(report)
    assert {k: v[1] for k, v in contexts.items()} == {
        "turn1": ("slow", "failing"),
        "after_slow": ("fast", "failing"),
        "after_failing": ("fast", "slow"),
    }
    shown = contexts["after_slow"][0][-1]["content"]
    assert ("correct: 0.08x speedup over the reference" in shown) is report


def test_classify_recognizes_each_variant_as_parsed():
    mtl = load_script()
    for kind in mtl.KINDS:
        parsed = parse_response(mtl.answer(TASK, kind))
        assert parsed.error is None and mtl.classify(parsed.sections["code"], TASK) == kind
    assert mtl.classify(None, TASK) == mtl.classify("import torch\n", TASK) == "other"
    renamed = mtl.code(TASK, "fast").replace("p, t", "a, b").replace("(p, t)", "(a, b)")
    assert mtl.classify(renamed, TASK) == "fast"  # one program up to renaming (`normalized_code`)


def _trace(turn2_fast, refined, turn1_fast=None):
    n = len(turn2_fast)
    return {
        "turn1": {"goal": turn1_fast or [0.0] * n},
        "turn2": {"goal": turn2_fast},
        "refined": refined,
    }


def test_learned_needs_the_last_turn_fast_and_reached_after_a_first_turn_that_was_not():
    mtl = load_script()
    assert mtl.learned(_trace([0.5, 0.7, 0.8, 0.85], [0.5, 0.7, 0.8, 0.85]))
    assert not mtl.learned(_trace([0.5, 0.9, 0.85, 0.7], [0.5, 0.9, 0.85, 0.7]))  # last two: 0.775
    # Turn 2 fast because turn 1 was (a policy that is fast at once): not refined.
    assert not mtl.learned(_trace([0.9, 0.9], [0.3, 0.3], turn1_fast=[0.6, 0.6]))
    assert mtl.learned(_trace([0.8, 0.8], [0.6, 0.6]))


def test_a_control_must_never_meet_the_criterion_over_two_consecutive_steps():
    mtl = load_script()
    # The no-report control of 2026-12-04 (docs/training.md): 0.72 over the last two steps, but
    # 0.81-0.94 over steps 3-9.
    no_report = [0.38, 0.25, 0.75, 0.81, 0.88, 0.81, 0.94, 0.88, 0.88, 0.88, 0.69, 0.75]
    trace = _trace(no_report, no_report)
    assert not mtl.learned(trace) and mtl.ever_learned(trace)
    lr0 = [0.62, 0.62, 0.56, 0.31, 0.44, 0.44, 0.25, 0.56, 0.31, 0.38, 0.62, 0.44]
    assert not mtl.ever_learned(_trace(lr0, lr0))
    assert mtl.learned(_trace([0.9, 0.9, 0.5], [0.9, 0.9, 0.5]), end=2)
    assert not mtl.ever_learned(_trace([0.9], [0.9]))  # one step is not two
