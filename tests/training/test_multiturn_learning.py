"""A learning test of multi-turn refinement on the real reward (issue 26, evidence): after SFT the
small policy's first answer to the builtin level1/17 is the slow or the failing variant, never the
fast one, and its answer to the evaluator's report on that is the fast variant about half the
time; multi-turn RL (two turns, per-turn returns, leave-one-out baseline) must raise turn 2's fast
share to at least 0.8, with at least 0.6 of the episodes reaching it after a turn 1 that was not
fast (`learned`); with learning rate 0, with the advantages negated, and with the report removed
from turn 2's prompt (`stage.contrastive_rl.feedback=none`) it must not, over any two consecutive
steps (`ever_learned`). The no-report control is known to fail this (an expected failure): in the recorded run it rose
like the real run (turn 2 fast 0.81-0.94 over steps 3-9), because the prompt still shows the
previous code and the evaluator's verdict is a function of that code (docs/training.md, "Does the
second turn learn from the evaluator?"), so this test does not show that the policy reads the
report; `test_report_learning.py` does, with a report that carries what the code does not.

Everything is the project's own code path: vLLM sampling (the session's engine),
`cudal1.pipeline.episodes.sample_episodes` (the refinement prompts, the parser, the real evaluator
in its sandboxed worker processes on the CPU backend, `cudal1.rl.rewards` and the copy rule per
turn), `assign_episode_advantages`, `GRPOLearner` on DeepSpeed, and the weight sync into vLLM. The
experiment is `benchmarks/multiturn_learning.py` (each distinct program is measured once per
experiment and reused: read its docstring).

Runs only with CUDAL1_SLOW_TESTS=1: measuring the variants, SFT (three contexts of 550-900 prompt
tokens, 200 steps) and four RL runs of 12 steps of 16 two-turn episodes took 40 minutes on a
shared 2-core machine (2026-12-04, load average 20-57, the script's run: SFT 689 s, the runs 294-443
s each); docs/training.md records it. `test_multiturn_criterion.py` checks the criterion and the
SFT prompts in the fast tier.
"""

from __future__ import annotations

import os

import pytest

from .test_multiturn_criterion import load_script

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(7200),
    pytest.mark.skipif(
        os.environ.get("CUDAL1_SLOW_TESTS") != "1",
        reason="runs about 40 minutes on a loaded 2-core machine: set CUDAL1_SLOW_TESTS=1",
    ),
]


@pytest.fixture(scope="module")
def experiment(vllm_generator, small_model_dir, tmp_path_factory):
    pytest.importorskip("deepspeed")
    mtl = load_script()
    exp = mtl.Experiment(small_model_dir, vllm_generator, mtl.Settings(), tmp_path_factory.mktemp("multiturn"))
    try:
        exp.measure()
        exp.run_sft()
        yield mtl, exp
    finally:
        exp.restore_generator()  # the engine is shared by the session


def test_after_sft_turn_one_is_slow_or_failing_and_turn_two_can_be_fast(experiment):
    mtl, exp = experiment
    probs = exp.sft_report["probs"]
    assert set(probs) == {"turn1", "after_slow", "after_failing"}
    assert (
        set(probs["turn1"]) == {"slow", "failing"}
        and "fast" in probs["after_slow"]
        and "fast" in probs["after_failing"]
    )
    for context, p in probs.items():
        assert mtl.rrl.sft_balanced(p, exp.s.min_clean), (context, p)
    assert exp.sft_report["every"]["turn1"]["fast"] < 0.01


NO_REPORT_LEARNS = pytest.mark.xfail(
    strict=False,
    reason="open (issue 26): without the report the policy learned as with it (turn 2 fast 0.81-0.94 over "
    "steps 3-9, two seeds): the prompt still shows the previous code, and on this deterministic task the "
    "evaluator's verdict adds nothing to it (test_report_learning.py is the test of the report)",
)


@pytest.mark.parametrize("run", ["real", "lr0", "negated", pytest.param("no_report", marks=NO_REPORT_LEARNS)])
def test_multi_turn_rl_learns_to_answer_the_report_with_the_fast_variant_and_the_controls_do_not(experiment, run):
    mtl, exp = experiment
    trace = mtl.run_named(exp, run)
    if run == "real":
        assert mtl.learned(trace), f"not learned: {mtl.shares_line(trace)} ({trace['reasons']})"
    else:
        assert not mtl.ever_learned(trace), f"{run} control reached the criterion: {mtl.shares_line(trace)}"
