import re

import pytest

from cudal1.bench.result import EvalResult, Status, Timing
from cudal1.policy.parsing import parse_response
from cudal1.policy.prompts import (
    SECTIONS,
    SYSTEM_PROMPT,
    Feedback,
    contrastive_prompt,
    feedback_block,
    fence,
    plain_prompt,
    refinement_turn,
    sft_response,
    solution_notes,
    with_feedback,
)
from cudal1.records import Exemplar
from cudal1.rl.rewards import RewardConfig, price
from cudal1.tasks import load_builtin, seed_solutions

REFERENCE = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""

SLOW = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clamp(min=0)\n"
FAST = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu_(x.clone())\n"


def ex(code, speedup):
    return Exemplar(task_id="level1/1", code=code, speedup=speedup)


def test_contrastive_prompt_shows_reference_exemplars_speedups_and_sections():
    messages = contrastive_prompt(REFERENCE, [ex(SLOW, 1.08), ex(FAST, 2.5)])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == SYSTEM_PROMPT
    user = messages[1]["content"]
    assert REFERENCE.strip() in user and SLOW.strip() in user and FAST.strip() in user
    assert "1.08x" in user and "2.50x" in user
    assert user.index("1.08x") < user.index(SLOW.strip()) < user.index("2.50x") < user.index(FAST.strip())
    headers = [f"## {SECTIONS[k]}" for k in ("analysis", "design", "code")]
    positions = [user.index(h) for h in headers]
    assert positions == sorted(positions)  # required in this order
    assert "Which is fastest" in user and "What still limits" in user and "ModelNew" in user
    assert "load_inline" in messages[0]["content"] and "hyperparameter" in messages[0]["content"]


def test_contrastive_prompt_asks_five_questions_and_says_what_an_analysis_short_of_the_bar_earns():
    user = contrastive_prompt(REFERENCE, [ex(SLOW, 1.08), ex(FAST, 2.5)])[1]["content"]
    analysis = user[user.index("## Performance analysis") : user.index("## Algorithm design")]
    questions = re.findall(r"\b([1-9])\. [^?]*\?", analysis)
    assert questions == ["1", "2", "3", "4", "5"]
    # The sentence on what is priced names the reward's own bar and sections (a changed default must change it).
    cfg = RewardConfig()
    assert cfg.required_sections == ("analysis", "design")
    said = re.search(r"analysis or design is missing or under (\d+) characters is scored as a failure", user)
    assert said is not None and int(said.group(1)) == cfg.min_section_chars
    assert said.group(0) in plain_prompt(REFERENCE)[1]["content"]  # stage 2's prompt is priced the same way

    def priced(analysis_text):
        text = sft_response(FAST, analysis=analysis_text, design="Call relu_ on one copy of x.")
        parsed = parse_response(text)
        assert parsed.error is None
        return price(None, None, cfg, sections={**parsed.sections, "code": parsed.code}, code=parsed.code)

    short = priced("B is fastest.")  # 13 characters: under the bar the prompt states
    assert (short.reason, short.reward) == ("format:missing_analysis", cfg.failure_value)
    assert priced("B is fastest: relu_ writes in place.").reason == "not_evaluated"  # passes the format check


def test_without_exemplars_the_prompt_is_plain():
    assert contrastive_prompt(REFERENCE, []) == plain_prompt(REFERENCE)
    user = plain_prompt(REFERENCE)[1]["content"]
    assert REFERENCE.strip() in user and "Solution A" not in user and "## Code" in user


def test_prompts_stay_short():
    # The instructions (everything but the programs) must leave the small model's context to the code.
    overhead = len(SYSTEM_PROMPT) + len(contrastive_prompt("", [ex("", 1.0), ex("", 2.0)])[1]["content"])
    assert overhead < 1400


def test_fence_survives_backticks_in_code():
    code = 'doc = """```python\\nexample\\n```"""\nclass ModelNew: pass\n'
    block = fence(code)
    assert block.startswith("````python\n") and block.endswith("\n````")


def test_sft_response_round_trips_through_the_parser():
    text = sft_response(FAST, analysis="relu_ on a copy avoids an extra allocation.", design="One in-place op.")
    parsed = parse_response(text)
    assert parsed.error is None
    assert parsed.code == FAST
    assert parsed.sections["analysis"] == "relu_ on a copy avoids an extra allocation."
    assert parsed.sections["design"] == "One in-place op."


def test_sft_response_takes_notes_from_the_solution_docstring():
    code = '"""Fused: one pass instead of three."""\nclass ModelNew:\n    pass\n'
    assert solution_notes(code) == "Fused: one pass instead of three."
    assert "one pass instead of three" in parse_response(sft_response(code)).sections["analysis"]
    assert solution_notes("class ModelNew:\n    '''Doc.'''\n") == "Doc."
    assert solution_notes("def (") == ""
    assert parse_response(sft_response("class ModelNew:\n    pass\n")).sections["analysis"]


def test_every_builtin_seed_solution_makes_a_parseable_sft_example():
    tasks = {t.task_id: t for t in load_builtin().tasks}
    for kind in ("cpu", "cuda"):
        for task_id, path in seed_solutions(kind).items():
            code = path.read_text()
            parsed = parse_response(sft_response(code))
            assert parsed.error is None, (kind, task_id, parsed.error)
            assert parsed.code.strip() == code.strip()
            assert task_id in tasks
            assert tasks[task_id].source.strip() in plain_prompt(tasks[task_id].source)[1]["content"]


def test_feedback_goes_before_the_closing_instruction_with_each_message_cut():
    failures = [
        Feedback("compile_error", "error: 'foo' was not declared in this scope " + "x" * 500),
        Feedback("incorrect", "max abs error 3.2 > atol 1e-05 on trial 1"),
        Feedback("incorrect", "max abs error 3.2 > atol 1e-05 on trial 1"),  # the same line once
        Feedback("ok", "", speedup=0.8, reference_ms=1.0, candidate_ms=1.25),
        Feedback("parse_error:no_code_block", "the response had no ```python code block"),
    ]
    block = feedback_block(failures, max_items=3, max_chars=60)
    lines = block.splitlines()
    assert lines[1].startswith("- Attempt 1: compile_error: error: 'foo' was not declared") and lines[1].endswith("...")
    assert len(lines[1]) == len("- Attempt 1: compile_error: ") + 60
    assert lines[2] == "- Attempt 2: incorrect: max abs error 3.2 > atol 1e-05 on trial 1"
    assert lines[3] == "- Attempt 3: correct but not faster: 0.80x speedup (reference 1.000 ms, yours 1.250 ms)"
    assert len(lines) == 4  # max_items=3: the parse error is left out
    assert feedback_block([]) == ""

    for base in (plain_prompt(REFERENCE), contrastive_prompt(REFERENCE, [ex(SLOW, 1.1), ex(FAST, 2.0)])):
        messages = with_feedback(base, failures[:2])
        user, before = messages[1]["content"], base[1]["content"]
        assert base[1]["content"] == before and messages[0] == base[0]  # the input is not changed
        head, _, tail = before.rpartition("\n\n")
        assert user == f"{head}\n\n{feedback_block(failures[:2])}\n\n{tail}"
        assert user.index("max abs error") < user.index("## Performance analysis") and REFERENCE.strip() in user
        assert with_feedback(base, []) == base


def timing(ms):
    return Timing(median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, round_medians_ms=[ms], spread=0.0, calls=1)


def test_feedback_of_a_result_gives_the_optimize_loop_the_same_lines_as_before():
    results = [
        EvalResult("t", Status.COMPILE_ERROR, message="error: 'foo' was not declared " + "y" * 400),
        EvalResult(
            "t",
            Status.OK,
            message="",
            speedup=0.8,
            speedup_spread=0.07,
            labels=["pytorch_only"],
            reference=timing(1.0),
            candidate=timing(1.25),
        ),
        EvalResult("t", Status.OK, speedup=0.9, speedup_spread=0.02),
    ]
    for r in results:
        # What Attempt.feedback built before Feedback.of (the five fields by hand).
        before = Feedback(
            r.status.value,
            r.message,
            r.speedup,
            r.reference.median_ms if r.reference else None,
            r.candidate.median_ms if r.candidate else None,
        )
        assert Feedback.of(r).line() == before.line() and Feedback.of(r).line(40) == before.line(40)
    assert feedback_block([Feedback.of(r) for r in results]) == feedback_block(
        [Feedback(r.status.value, r.message, r.speedup) for r in results[:1]]
        + [Feedback("ok", "", 0.8, 1.0, 1.25), Feedback("ok", "", 0.9)]
    )
    fb = Feedback.of(results[1], profile="dram 91% of peak")
    assert (fb.spread, fb.labels, fb.profile) == (0.07, ("pytorch_only",), "dram 91% of peak")


def test_the_report_shows_speedup_spread_labels_and_profile():
    fb = Feedback("ok", "", 1.5, 3.0, 2.0, spread=0.04, labels=("pytorch_only",), profile="  dram\n 91%  ")
    assert fb.report() == (
        "correct: 1.50x speedup over the reference (reference 3.000 ms, yours 2.000 ms); "
        "its timing rounds differ by 4%\nlabels: pytorch_only\nprofile: dram 91%"
    )
    assert fb.report(profile=False).count("\n") == 1
    assert Feedback("ok", "", 1.5).report() == "correct: 1.50x speedup over the reference"
    assert Feedback("ok", "", 1.5, spread=float("inf")).report() == "correct: 1.50x speedup over the reference"
    failed = Feedback("incorrect", "max abs error " + "9" * 50)
    assert failed.report(max_chars=20) == failed.line(20) == "incorrect: max abs error 999..."


LONG = FAST + "".join(f"# line {i} of a longer program\n" for i in range(20))
RESPONSE = sft_response(LONG, "The relu reads and writes x once.", "One elementwise pass.")


def words(messages):
    """A stand-in token count: whitespace-separated words of all contents."""
    return sum(len(m["content"].split()) for m in messages)


def test_a_refinement_turn_is_the_conversation_the_answer_and_the_report():
    base = contrastive_prompt(REFERENCE, [ex(SLOW, 1.1)])
    fb = Feedback("incorrect", "max abs error 3.2 > atol 1e-05 on trial 1")
    turn2 = refinement_turn(base, RESPONSE, fb, 10_000, words)
    assert turn2[:2] == base and [m["role"] for m in turn2] == ["system", "user", "assistant", "user"]
    assert turn2[2]["content"] == RESPONSE
    user = turn2[3]["content"]
    assert user.startswith("The evaluator's report on your previous solution:\nincorrect: max abs error 3.2")
    assert user.index("max abs error") < user.index("## Performance analysis")
    turn3 = refinement_turn(turn2, RESPONSE, Feedback("ok", "", 1.3), 10_000, words)
    assert turn3[:4] == turn2 and len(turn3) == 6 and "correct: 1.30x" in turn3[5]["content"]
    with pytest.raises(ValueError, match="user message"):
        refinement_turn(turn3[:-1], RESPONSE, fb, 10_000, words)
    with pytest.raises(ValueError, match="empty"):
        refinement_turn(base, "  ", fb, 10_000, words)


def test_a_refinement_turn_without_the_report_shows_the_answer_and_the_closing_only():
    base = plain_prompt(REFERENCE)
    fb = Feedback("incorrect", "max abs error 3.2 > atol 1e-05 on trial 1")
    with_report = refinement_turn(base, RESPONSE, fb, 10_000, words)
    without = refinement_turn(base, RESPONSE, fb, 10_000, words, report=False)
    assert without[:3] == with_report[:3] and without[2]["content"] == RESPONSE
    assert without[3]["content"].startswith("Write an improved solution.")
    assert with_report[3]["content"].endswith(without[3]["content"])
    assert "report on your previous solution" not in without[3]["content"] and "max abs" not in without[3]["content"]
    # The budget holds the same way (here, the previous answer cut to its code).
    short = refinement_turn(base, RESPONSE, fb, words(without) - 1, words, report=False)
    assert short[2]["content"] == fence(LONG) and words(short) < words(without)


def test_over_budget_the_oldest_code_goes_first_and_the_task_never():
    base = plain_prompt(REFERENCE)
    fb = Feedback("ok", "", 1.3, profile="dram 91% of peak " * 5)
    turn3 = refinement_turn(refinement_turn(base, RESPONSE, fb, 10_000, words), RESPONSE, fb, 10_000, words)

    def kind(text):
        if text == RESPONSE:
            return "whole"
        if text == fence(LONG):
            return "code only"
        if text.startswith("(attempt"):
            return "omitted"
        return "no code" if "is omitted for length)" in text and "```" not in text else "?"

    # Each budget one token under the last prompt's size: the next shortening step.
    budget, steps = 10_000, []
    while True:
        try:
            prompt = refinement_turn(turn3, RESPONSE, fb, budget, words)
        except ValueError as e:
            assert f"the budget is {budget}" in str(e) and f"needs {budget + 1} tokens" in str(e)
            break
        assert words(prompt) <= budget and prompt[:2] == base  # the system message and the task are never cut
        steps.append((kind(prompt[2]["content"]), kind(prompt[4]["content"]), kind(prompt[6]["content"])))
        steps[-1] += ("profile: dram" in prompt[7]["content"],)
        budget = words(prompt) - 1
    assert steps == [
        ("whole", "whole", "whole", True),
        ("no code", "whole", "whole", True),  # attempt 1's code first
        ("no code", "no code", "whole", True),
        ("omitted", "no code", "whole", True),  # then their text, oldest first
        ("omitted", "omitted", "whole", True),
        ("omitted", "omitted", "code only", True),  # then the previous answer's sections
        ("omitted", "omitted", "code only", False),  # then the profile
    ]


def test_the_prompts_omit_exactly_the_code_the_parser_reads():
    """One fence definition (`prompts.FENCE_RE`) for the parser and for the code a long
    refinement prompt omits: a fence with spaces before its language, or a longer closing fence,
    is code to both; a line of backticks inside a longer fence is not a closing one."""
    from cudal1.policy.prompts import _code_only, _omit_code

    code = "class ModelNew:\n    pass"
    for opening, closing in (("```python", "```"), ("``` python", "```"), ("````py", "`````"), ("```", "```")):
        text = f"Analysis first.\n{opening}\n{code}\n{closing}\nAfter."
        assert code in parse_response(text).code, opening
        assert _omit_code(text, "(omitted)") == "Analysis first.\n(omitted)\nAfter.", opening
        assert _code_only(text) == f"{opening}\n{code}\n{closing}", opening
    nested = "````python\nx = '''\n```\n'''\n````\nAfter."
    assert _omit_code(nested, "(omitted)") == "(omitted)\nAfter."
    assert _code_only("no code at all") == "no code at all"
