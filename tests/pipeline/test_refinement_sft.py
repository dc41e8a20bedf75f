"""Stage 1's second-turn pairs (`refinement_pairs`): the prompt a multi-turn episode's turn 2
sends, answered by the task's fastest variant."""

import pytest

from cudal1.pipeline.sft_data import refinement_pairs
from cudal1.pipeline.variants import SLOW_FAST
from cudal1.policy.parsing import parse_response
from cudal1.policy.prompts import Feedback, plain_prompt, refinement_turn, sft_response
from cudal1.records import Exemplar
from cudal1.rl.buffer import code_hash
from cudal1.rl.similarity import normalized_code

pytestmark = pytest.mark.fast

SOURCE = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"


def _chars(messages):
    return sum(len(m["content"]) for m in messages)


def _variants(task_id="level1/3"):
    slow, fast = (next(v for v in SLOW_FAST if v.task_id == task_id and v.kind == k) for k in ("slow", "fast"))
    return slow, fast


def test_each_slower_program_is_a_first_answer_whose_report_leads_to_the_fastest():
    slow, fast = _variants()
    reference = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
    variants = [
        Exemplar("level1/3", reference, 1.0, origin="reference"),
        Exemplar("level1/3", slow.code, 0.05, analysis=slow.analysis, origin="variant:slow"),
        Exemplar("level1/3", fast.code, 1.3, analysis=fast.analysis, origin="variant:fast"),
    ]
    measured = Feedback("ok", "correct on 8 trials; 0.05x", 0.05, 3.0, 60.0, 0.02, ("pytorch_only",))
    pairs = refinement_pairs(SOURCE, variants, {code_hash(slow.code): measured}, 1.01, 10_000, _chars)
    assert [kind for kind, _, _ in pairs] == ["refinement", "refinement"]
    # slowest first: the slow variant (its measured report), then the reference (no report kept:
    # status ok at its recorded speedup)
    first, second = pairs[0][1], pairs[1][1]
    assert first == refinement_turn(
        plain_prompt(SOURCE), sft_response(slow.code, slow.analysis), measured, 10_000, _chars
    )
    assert "0.05x speedup" in first[-1]["content"] and "60.000 ms" in first[-1]["content"]
    assert first[-2] == {"role": "assistant", "content": sft_response(slow.code, slow.analysis)}
    assert "1.00x speedup" in second[-1]["content"]
    assert normalized_code(parse_response(second[-2]["content"]).code) == normalized_code(reference)
    for _, _, text in pairs:  # the answer is the fastest, in the format the reward checks
        parsed = parse_response(text)
        assert parsed.error is None and normalized_code(parsed.code) == normalized_code(fast.code)


def test_no_pair_without_a_strictly_faster_program_and_none_that_repeats_it():
    slow, fast = _variants()
    # equal within min_gain: no target, no pair (a "refinement" to a program no faster is noise)
    tie = [Exemplar("t", slow.code, 1.0), Exemplar("t", fast.code, 1.005)]
    assert refinement_pairs(SOURCE, tie, {}, 1.01, 10_000, _chars) == []
    # the fastest measured twice, once slower: the same program is never its own first answer
    again = [Exemplar("t", fast.code, 0.5), Exemplar("t", fast.code + "\n# again\n", 1.4)]
    assert refinement_pairs(SOURCE, again, {}, 1.01, 10_000, _chars) == []
    assert refinement_pairs(SOURCE, [], {}, 1.01, 10_000, _chars) == []
    with pytest.raises(ValueError):
        refinement_pairs(SOURCE, tie, {}, 0.5, 10_000, _chars)


def test_without_the_report_the_prompt_is_the_ablations_and_an_unfittable_prompt_is_left_out():
    slow, fast = _variants()
    variants = [Exemplar("t", slow.code, 0.05), Exemplar("t", fast.code, 1.3)]
    with_report = refinement_pairs(SOURCE, variants, {}, 1.01, 10_000, _chars)
    without = refinement_pairs(SOURCE, variants, {}, 1.01, 10_000, _chars, report=False)
    assert "speedup" in with_report[0][1][-1]["content"] and "speedup" not in without[0][1][-1]["content"]
    assert without[0][1][:-1] == with_report[0][1][:-1] and without[0][2] == with_report[0][2]
    assert refinement_pairs(SOURCE, variants, {}, 1.01, _chars(plain_prompt(SOURCE)), _chars) == []
