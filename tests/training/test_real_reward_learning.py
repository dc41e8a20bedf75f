"""A learning test on the real reward (issue 9, evidence): after SFT the small policy writes a slow
and a fast correct variant of two builtin tasks about equally often, and little else (the two
targets hold at least `Settings.min_clean` = 0.95 of the probability per task); contrastive RL's
update, with the evaluator's measured speedups as the reward, must raise the fast variant's share
from about half to at least 0.8 of ALL responses (averaged over the last two of `Settings.steps`
steps); with learning rate 0, with the advantages negated, and with equal pay for both correct
variants (`equal_pay`), it must not (`learned`). The equal-pay case is known to fail: in two of
four recorded seeds the equal-pay control reached the criterion too (docs/training.md, "Equal pay,
the third control"), so the two-variant experiment does not yet show that the speed signal, rather
than correctness alone, teaches the choice.

The five-variant test (issue 23): behind the contrastive prompt that shows each task's exemplar
with its measured speedup, the SFT policy writes a copy of the exemplar, a renamed copy, the
reference's own expression (a fallback), a strictly faster variant and a failing one about equally
often; RL must raise the fast variant to at least 0.8 of all responses with copies plus fallbacks
under 0.1, on the mean of three runs from one SFT checkpoint (`learned_on_average`), and the three
controls must not. Each program is measured up to twice
(`Settings.measures`), so the noise between evaluations acts on the reward.

Everything is the project's own code path: vLLM sampling (the session's engine), the parser, the
real evaluator in its sandboxed worker processes (CPU backend), `cudal1.rl.rewards` and
`cudal1.rl.advantages` through `cudal1.pipeline.rollouts`, `GRPOLearner` on DeepSpeed, and the
weight sync into vLLM. The experiment itself is `benchmarks/real_reward_learning.py` (read its
docstring: each distinct code is measured once per experiment and reused).

Runs only with CUDAL1_SLOW_TESTS=1 (`-rA` prints the five-variant runs' shares of a passing case).
All ten cases, each half with its own SFT, took 690 s on the idle 2-core machine (2026-12-04, one
run per five-variant case); the five-variant half with three runs per case is longer. The runs of
both halves are in docs/training.md, and `test_real_reward_criterion.py` checks the criterion on
the recorded traces.
"""

from __future__ import annotations

import os

import pytest

from .benchmark_scripts import load_benchmark

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(
        os.environ.get("CUDAL1_SLOW_TESTS") != "1",
        reason="runs about 20 minutes on a loaded 2-core machine: set CUDAL1_SLOW_TESTS=1",
    ),
]


def load_script():
    """benchmarks/real_reward_learning.py as a module."""
    return load_benchmark("real_reward_learning")


FIVE = {"variants": "five", "measures": 2, "min_clean": 0.93, "sft_rounds": 25, "steps": 16}
"""The five-variant experiment's settings (as run for docs/training.md: `--variants five --measures 2
--min-clean 0.93 --sft-rounds 25 --steps 16`; at 12 steps three of five seeds met the bar, at 16
four of five)."""


def _experiment(vllm_generator, small_model_dir, tmp_path_factory, **settings):
    pytest.importorskip("deepspeed")
    rrl = load_script()
    exp = rrl.Experiment(
        small_model_dir, vllm_generator, rrl.Settings(**settings), tmp_path_factory.mktemp("real_reward")
    )
    try:
        variants = exp.measure_variants()
        for task, v in variants.items():
            assert v["fast"] >= exp.s.min_ratio * v["slow"], (task, v)
        exp.run_sft()
        yield rrl, exp
    finally:
        exp.restore_generator()  # the engine is shared by the session


@pytest.fixture(scope="module")
def experiment(vllm_generator, small_model_dir, tmp_path_factory):
    yield from _experiment(vllm_generator, small_model_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def experiment_five(vllm_generator, small_model_dir, tmp_path_factory):
    yield from _experiment(vllm_generator, small_model_dir, tmp_path_factory, **FIVE)


def test_after_sft_both_variants_are_written_about_equally_often(experiment):
    _, exp = experiment
    for task, p in exp.sft_report["probs"].items():
        assert p["slow"] + p["fast"] >= exp.s.min_clean, (task, p)
        assert 0.3 <= p["fast"] / (p["slow"] + p["fast"]) <= 0.7, (task, p)


@pytest.mark.parametrize("run", ["real", "lr0", "negated", "equal"])
def test_rl_on_measured_speedups_learns_the_fast_variant_and_the_controls_do_not(experiment, run):
    rrl, exp = experiment
    trace = rrl.run_named(exp, run)
    shares = (
        " ".join(f"{x:.2f}" for x in trace["fast"])
        + " of all; "
        + " ".join(f"{x:.2f}" for x in rrl.choice_shares(trace))
        + " of the two variants"
    )
    if run == "real":
        assert rrl.learned(trace), (
            f"the fast variant's share did not rise to the criterion: {shares} ({trace['reasons']})"
        )
    else:
        assert not rrl.learned(trace), f"{run} control reached the criterion: {shares}"


def test_after_sft_the_five_variants_are_written_about_equally_often(experiment_five):
    rrl, exp = experiment_five
    for task, p in exp.sft_report["probs"].items():
        assert set(p) == set(rrl.FIVE_KINDS) and rrl.sft_balanced(p, exp.s.min_clean), (task, p)


FIVE_RUNS = 3
"""Runs per case of the five-variant test, from the one SFT checkpoint: the criterion is taken on
their mean (`learned_on_average`). One run's final fast share varied over 0.72-0.94 across seeds
(docs/training.md), so a single run decided by its luck about one time in four."""


@pytest.mark.parametrize("run", ["real", "lr0", "negated", "equal"])
def test_rl_behind_the_exemplar_learns_the_faster_variant_not_copies_and_the_controls_do_not(experiment_five, run):
    rrl, exp = experiment_five
    traces = [rrl.run_named(exp, run) for _ in range(FIVE_RUNS)]
    lines = "\n".join(f"run {i}: {rrl.shares_line(t)} ({t['reasons']})" for i, t in enumerate(traces))
    print(f"five variants, {run}:\n{lines}")  # shown with pytest -rA (the docs' tables come from it)
    if run == "real":
        assert rrl.learned_on_average(traces), f"not learned on average:\n{lines}"
    else:
        assert not rrl.learned_on_average(traces), f"{run} control reached the criterion on average:\n{lines}"
