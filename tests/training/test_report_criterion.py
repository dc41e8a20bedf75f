"""The report-reading learning test's pieces that need no engine (fast; the experiment itself is
`test_report_learning.py`, gated): the two size profiles tell the shaped variants apart in the
task's own module, the turn-2 prompts at the two profiles differ only by the report (so the
no-report control cannot tell them apart), and `classify` recognizes each variant as parsed."""

from __future__ import annotations

import pytest
import torch

from cudal1.bench.result import EvalResult, Status
from cudal1.policy.parsing import parse_response

from .benchmark_scripts import load_benchmark
from .test_multiturn_criterion import _timing


def load_script():
    """benchmarks/report_learning.py as a module."""
    return load_benchmark("report_learning")


@pytest.fixture(scope="module")
def experiment(small_model_dir, tmp_path_factory):
    """An `Experiment` on the embedded small model (its tokenizer; no generator), with the slow
    loop's results at the two profiles as hand-made measurements (wide: 8x the times)."""
    rl = load_script()
    exp = rl.Experiment(small_model_dir, None, rl.mtl.Settings(), tmp_path_factory.mktemp("work"))
    for profile, ms in (("wide", 6.0), ("narrow", 0.75)):
        exp.results[f"slow@{profile}"] = EvalResult(
            exp.tasks[0].task_id,
            Status.OK,
            speedup=0.1,
            speedup_spread=0.1,
            reference=_timing(ms),
            candidate=_timing(10 * ms),
        )
    return rl, exp


def test_each_shaped_variant_runs_at_its_own_profile_only():
    """The task module at each profile: the slow loop and the shaped variant of that profile give
    the reference's value; the other shaped variant raises (its rows do not divide the inputs)."""
    from cudal1.tasks import find_task, load_tasks
    from cudal1.tasks.task import apply_size_profile, load_source_module

    rl = load_script()
    source = rl.profiled_source(find_task(load_tasks("builtin"), "level1/17").source)
    for profile in rl.PROFILES:
        module = load_source_module(source, f"t_{profile}")
        apply_size_profile(module, profile)
        torch.manual_seed(0)
        inputs = module.get_inputs()
        want = module.Model()(*inputs)
        for kind in rl.KINDS:
            model = load_source_module(rl.code(kind), f"c_{profile}_{kind}").ModelNew()
            if kind in ("slow", profile):
                torch.testing.assert_close(model(*inputs), want, rtol=1e-4, atol=1e-6)
            else:
                with pytest.raises(RuntimeError, match="is invalid for input of size"):
                    model(*inputs)


def test_the_turn_two_prompts_differ_by_the_report_only(experiment):
    rl, exp = experiment
    with_report = {p: exp.second_prompt("slow", True, p) for p in rl.PROFILES}
    without = {p: exp.second_prompt("slow", False, p) for p in rl.PROFILES}
    assert with_report["wide"] != with_report["narrow"]
    assert "reference 6.000 ms" in with_report["wide"][-1]["content"]
    assert "reference 0.750 ms" in with_report["narrow"][-1]["content"]
    assert without["wide"] == without["narrow"]  # no policy tells the profiles apart from this
    assert with_report["wide"][:-1] == with_report["narrow"][:-1] and with_report["wide"][0] == exp.prompt[0]
    contexts = exp.contexts()
    assert {k: v[1] for k, v in contexts.items()} == {
        "turn1": ("slow",),
        "after_slow_wide": ("wide", "narrow"),
        "after_slow_narrow": ("wide", "narrow"),
    }
    assert [exp.goal(t.task_id) for t in exp.tasks] == list(rl.PROFILES)


def test_sft_answers_read_the_report_and_leave_the_choice_open(experiment):
    """Turn 2's SFT targets say "long" after the wide report (6 ms), "short" after the narrow one
    (0.75 ms), "unknown" without a report, each before either choice; turn 1's is the loop."""
    rl, exp = experiment
    contexts = exp.sft_contexts()
    assert set(contexts) == {"turn1", "after_slow_wide", "after_slow_narrow", "no_report_after_slow"}
    assert "report on your previous solution" not in contexts["no_report_after_slow"][0][-1]["content"]
    for context, reading in (
        ("after_slow_wide", "long"),
        ("after_slow_narrow", "short"),
        ("no_report_after_slow", "unknown"),
    ):
        assert contexts[context][1] == ("wide", "narrow")
        for kind in rl.SECOND:
            parsed = parse_response(exp.target(context, kind))
            assert parsed.sections["analysis"].startswith(f"Reference time {reading} {kind} rows"), parsed.sections
            assert rl.classify(parsed.sections["code"]) == kind
    assert exp.target("turn1", "slow") == rl.answer("slow")


def test_the_prompt_shows_both_profiles_and_not_which_one_runs(experiment):
    rl, exp = experiment
    shown = exp.prompt[-1]["content"]
    assert all(f'"{p}"' in shown for p in rl.PROFILES)
    assert {t.source for t in exp.tasks} == {exp.source} and len({t.task_id for t in exp.tasks}) == 2


def test_classify_recognizes_each_variant_as_parsed():
    rl = load_script()
    for kind in rl.KINDS:
        parsed = parse_response(rl.answer(kind))
        assert parsed.error is None and rl.classify(parsed.sections["code"]) == kind
    assert rl.classify(None) == rl.classify("import torch\n") == "other"
