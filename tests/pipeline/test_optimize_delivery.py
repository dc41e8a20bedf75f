"""What the optimize job and the Serve runner hand back: a program only when its paid speedup
beats the reference and the starting solutions, after a second opinion. Fakes for the generator,
the pool and the tokenizer: each program's successive measurements are scripted."""

from __future__ import annotations

import json

import pytest

from cudal1.bench.result import EvalResult, Label, Status
from cudal1.pipeline.optimize import OptimizeSettings, Optimizer, task_from_source
from cudal1.pipeline.optimize_job import optimize_tasks, outcome_row, task_line
from cudal1.policy.model import chat_prompt_ids
from cudal1.policy.prompts import contrastive_prompt
from cudal1.records import Exemplar, Generation
from cudal1.serve.jobs import runner_result

PROGRAM = (
    "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n"
    "def get_inputs():\n    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n"
)


def modelnew(tag: str) -> str:
    return (
        f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        f"        return torch.relu(x)  # {tag}\n"
    )


START, MODEL = modelnew("start"), modelnew("model")


class Tokenizer:
    chat_template = "plain"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "\n".join(m["content"] for m in messages)

    def encode(self, text, add_special_tokens=False):
        return list(range(len(text) // 8))


class Generator:
    """Every response holds MODEL."""

    def generate(self, prompt_ids, n, max_tokens, temperature, top_p):
        text = (
            f"## Performance analysis\nThe relu is memory bound, one pass.\n\n## Algorithm design\n"
            f"Fuse it into one pass over the data.\n\n## Code\n```python\n{MODEL.rstrip()}\n```"
        )
        return [[Generation(list(p), [1, 2], [-0.1, -0.1], text, "stop") for _ in range(n)] for p in prompt_ids]


class Pool:
    """Measures each program from a script: `plan[code]` is a list of (status, speedup, labels),
    one per evaluation in order (the last repeats); the reference is always correct at 1.0x.
    Actors alternate, so a re-measurement comes from another actor."""

    def __init__(self, plan):
        self.plan, self.seen, self.calls = plan, {}, 0

    def evaluate_many(self, candidates, progress=False, avoid=None):
        out = []
        for c in candidates:
            self.calls += 1
            if c.origin == "reference":
                out.append(EvalResult(c.task_id, Status.OK, speedup=1.0, speedup_spread=0.01, actor=0))
                continue
            steps = self.plan[c.source]
            k = self.seen.get(c.source, 0)
            self.seen[c.source] = k + 1
            status, speedup, labels = steps[min(k, len(steps) - 1)]
            out.append(
                EvalResult(
                    c.task_id,
                    status,
                    speedup=speedup if status is Status.OK else None,
                    speedup_spread=0.01,
                    labels=list(labels),
                    actor=self.calls % 2,
                )
            )
        return out


OK, WRONG = Status.OK, Status.INCORRECT


def run(tmp_path, plan, start=(START,), mode="conversation", samples=2):
    task = task_from_source(PROGRAM, "relu")
    settings = OptimizeSettings(rounds=1, samples=samples, max_tokens=64, max_model_len=100000, feedback_mode=mode)
    optimizer = Optimizer(Generator(), Pool(plan), Tokenizer(), settings)
    (outcome,), _ = optimize_tasks(optimizer, [task], tmp_path, starts={task.task_id: list(start)}, progress=False)
    files = sorted(p.name for p in (tmp_path / "solutions").rglob("*.py"))
    report = json.loads((tmp_path / "reports" / "file_relu.json").read_text())
    return outcome, files, report


@pytest.mark.parametrize("mode", ["conversation", "block"])
def test_the_issue_case_a_start_rechecked_slower_is_not_delivered(tmp_path, mode):
    # start: 1.01x, then 0.61x on the other actor (both below the resolution); the model's code is wrong
    plan = {START: [(OK, 1.01, ["below_resolution"]), (OK, 0.61, ["below_resolution"])], MODEL: [(WRONG, None, [])]}
    o, files, report = run(tmp_path, plan, mode=mode)
    # The one start is continued by both samples (conversation), or shown as the correct-but-not-faster
    # line of one fresh prompt (block); the search and its outcome are the same.
    round1 = o.attempts[1:]
    if mode == "conversation":
        assert [a.continues for a in round1] == ["start/0", "start/0"] and round1[0].messages is round1[1].messages
        assert round1[0].messages[2]["role"] == "assistant" and START.rstrip() in round1[0].messages[2]["content"]
        assert o.prompts[0].startswith("The evaluator's report on your previous solution:\ncorrect: 1.01x")
    else:
        assert [a.continues for a in round1] == [None, None] and len(round1[0].messages) == 2
        assert "- Attempt 1: correct but not faster: 1.01x speedup" in o.prompts[0]
    assert o.status == "no_correct" and not o.delivered and o.solution is None
    assert o.message.startswith("no faster solution found") and "1.01x" in o.message
    assert files == []
    assert [a["result"]["status"] for a in report["attempts"]] == ["ok", "incorrect", "incorrect"]
    assert runner_result(o, "cpu")["code"] is None and runner_result(o, "cpu")["delivered"] is False


def test_a_verified_solution_that_does_not_beat_the_start_is_not_delivered(tmp_path):
    plan = {START: [(OK, 1.5, [])], MODEL: [(OK, 1.4, [])]}
    o, files, report = run(tmp_path, plan)
    assert o.status == "not_faster" and not o.delivered
    assert o.solution.origin == "start/0" and o.solution.paid == pytest.approx(1.5)
    assert o.message.startswith(
        "no faster solution found: best start/0 measured 1.50x, 1.50x on another actor, "
        "paid 1.50x (ok), start paid 1.50x; needs above 1.52x"
    )
    assert files == [] and report["solution"]["paid"] == pytest.approx(1.5) and report["status"] == "not_faster"
    assert task_line(o) == f"file/relu: not_faster: {o.message}"
    d = runner_result(o, "cpu")
    assert (d["delivered"], d["code"], d["paid"], d["labels"]) == (False, None, None, [])


def test_a_faster_confirmed_solution_is_delivered_at_its_paid_speedup(tmp_path):
    plan = {START: [(OK, 1.5, [])], MODEL: [(OK, 2.0, []), (OK, 1.9, [])]}
    o, files, _ = run(tmp_path, plan)
    assert o.status == "improved" and o.delivered
    assert o.solution.origin == "round1/s0" and o.solution.paid == pytest.approx(1.9)
    assert files == ["relu.py"] and (tmp_path / "solutions" / "file" / "relu.py").read_text() == MODEL
    assert task_line(o) == "file/relu: improved: 1.90x paid (spread 1%), from round1/s0"
    d = runner_result(o, "cpu")
    assert d["delivered"] is True and d["code"] == MODEL and d["paid"] == pytest.approx(1.9)
    assert (d["task_id"], d["name"]) == ("file/relu", "relu")  # Serve's answer names the program


def test_without_a_start_the_bar_is_the_reference_and_unpaid_gains_do_not_count(tmp_path):
    # 1.3x in reduced precision is paid 1.00x: not faster than the reference
    o, files, _ = run(tmp_path, {MODEL: [(OK, 1.3, ["reduced_precision"])]}, start=())
    assert o.status == "not_faster" and o.solution.paid == 1.0 and files == []
    assert "needs above 1.01x (the reference x 1.01)" in o.message
    # 1.3x that the other actor measures at 1.0x does not agree: nothing is verified
    o, files, _ = run(tmp_path, {MODEL: [(OK, 1.3, []), (OK, 1.0, [])]}, start=())
    assert o.status == "no_correct" and files == [] and o.message.startswith("no faster solution found")
    # 1.3x confirmed at 1.25x: delivered at 1.25x
    o, files, _ = run(tmp_path, {MODEL: [(OK, 1.3, []), (OK, 1.25, [])]}, start=())
    assert o.status == "improved" and o.solution.paid == pytest.approx(1.25) and files == ["relu.py"]


def test_a_conversation_over_the_token_budget_falls_back_to_the_fresh_prompt_and_is_logged_once(tmp_path, caplog):
    task = task_from_source(PROGRAM, "relu")
    tok = Tokenizer()
    fresh = contrastive_prompt(task.source, [Exemplar(task.task_id, START, 1.5)])
    # Room for the fresh prompt (showing the start) and 5 tokens more: no refinement turn fits.
    room = len(chat_prompt_ids(tok, fresh)) + 5
    settings = OptimizeSettings(rounds=2, samples=2, max_tokens=64, max_model_len=room + 64, verify=False)
    optimizer = Optimizer(Generator(), Pool({START: [(OK, 1.5, [])], MODEL: [(WRONG, None, [])]}), tok, settings)
    with caplog.at_level("WARNING", logger="cudal1.pipeline.optimize"):
        o = optimizer.optimize(task, start=[START])
    assert [a.continues for a in o.attempts] == [None] * 5 and all(a.messages == fresh for a in o.attempts[1:])
    warned = [r.getMessage() for r in caplog.records if "do not fit" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"{task.task_id}: round 1: 1 conversation(s) do not fit")


def table(tmp_path):
    """The job's results.jsonl (one row) and table.json (one row: one task of one level)."""
    (line,) = (tmp_path / "results.jsonl").read_text().splitlines()
    (row,) = json.loads((tmp_path / "table.json").read_text())
    return EvalResult.from_dict(json.loads(line)), row


def test_an_unconfirmed_correct_result_is_no_success_and_no_speedup_in_the_table(tmp_path):
    # The only evaluated attempt: ok at 1.5x, then 1.0x on the other actor (disagree by 50% > 10%).
    o, files, report = run(tmp_path, {MODEL: [(OK, 1.5, []), (OK, 1.0, [])]}, start=(), samples=1)
    assert [a.result.speedup for a in o.attempts] == [1.5] and o.solution is None and o.status == "no_correct"
    assert o.message.startswith("no faster solution found: 1 correct candidates (best measured 1.50x)")
    r, row = table(tmp_path)
    assert (r.status, r.labels, r.speedup, r.message) == (Status.COMPILE_ERROR, [Label.NOT_DELIVERED], None, o.message)
    assert (row["n"], row["success"], row["pass_rate"], row["fast_1"], row["fast_1.01"]) == (1, 0, 0.0, 0.0, 0.0)
    assert row["speedup_mean"] is None and row["status_counts"] == {"compile_error": 1}
    assert (r.task_id, row["level"]) == ("file/relu", "file")  # standalone programs: one "file" row
    # every reader says the same: nothing delivered, no speedup
    assert files == [] and (report["delivered"], report["speedup"]) == (False, None)
    assert task_line(o) == f"file/relu: no_correct: {o.message}"
    d = runner_result(o, "cpu")
    assert (d["delivered"], d["speedup"], d["paid"], d["code"]) == (False, None, None, None)
    assert (outcome_row(o)["delivered"], outcome_row(o)["speedup"], outcome_row(o)["paid"]) == (False, None, None)


def test_a_verified_solution_below_the_start_is_no_success_in_the_table_but_stays_in_the_report(tmp_path):
    # verified 1.5x (the start) and 1.4x (the model): correct and faster than the reference, but
    # nothing beats the start, so nothing is delivered
    o, files, report = run(tmp_path, {START: [(OK, 1.5, [])], MODEL: [(OK, 1.4, [])]})
    assert o.status == "not_faster" and o.solution.speedup == pytest.approx(1.5) and o.speedup is None
    r, row = table(tmp_path)
    assert (r.status, r.labels, r.speedup) == (Status.COMPILE_ERROR, [Label.NOT_DELIVERED], None)
    assert r.message.startswith("no faster solution found: best start/0 measured 1.50x")
    assert (row["success"], row["fast_1"], row["speedup_mean"]) == (0, 0.0, None)
    assert (report["delivered"], report["speedup"], report["solution"]["speedup"]) == (False, None, 1.5)
    assert runner_result(o, "cpu")["speedup"] is None
    # the issue's case: the start, 1.01x then 0.61x, is unconfirmed; the model's answers are wrong.
    # A correct result existed, so the row says "not delivered", not the model's "incorrect".
    plan = {START: [(OK, 1.01, ["below_resolution"]), (OK, 0.61, ["below_resolution"])], MODEL: [(WRONG, None, [])]}
    o, _, _ = run(tmp_path, plan)
    r, row = table(tmp_path)
    assert o.status == "no_correct" and (r.status, r.labels) == (Status.COMPILE_ERROR, [Label.NOT_DELIVERED])
    assert (row["success"], row["fast_1"]) == (0, 0.0)


def test_a_delivered_solution_is_the_tables_success_at_its_verified_speedup(tmp_path):
    o, _, report = run(tmp_path, {START: [(OK, 1.5, [])], MODEL: [(OK, 2.0, []), (OK, 1.9, [])]})
    assert o.delivered and o.speedup == pytest.approx(1.9)
    r, row = table(tmp_path)
    assert (r.status, r.speedup, r.actor, r.second_opinion) == (Status.OK, pytest.approx(1.9), None, None)
    assert (row["success"], row["fast_1"], row["fast_1.01"]) == (1, 1.0, 1.0)
    assert row["speedup_mean"] == pytest.approx(1.9)
    assert (report["delivered"], report["speedup"]) == (True, pytest.approx(1.9))
    assert runner_result(o, "cpu")["speedup"] == pytest.approx(1.9)
    assert outcome_row(o)["paid"] == pytest.approx(1.9) and outcome_row(o)["origin"] == "round1/s0"


def test_without_a_correct_result_the_row_is_the_most_informative_failure(tmp_path):
    # a wrong answer before a hack before a crash
    hacked = modelnew("hack")
    plan = {MODEL: [(WRONG, None, [])], START: [(Status.RUNTIME_ERROR, None, [])], hacked: [(Status.HACK, None, [])]}
    o, _, _ = run(tmp_path, plan, start=(START, hacked))
    r, row = table(tmp_path)
    assert o.status == "no_correct" and r.status is Status.INCORRECT and (row["success"], row["fast_1"]) == (0, 0.0)
    o, _, _ = run(tmp_path, {MODEL: [(Status.HACK, None, [])], START: [(Status.RUNTIME_ERROR, None, [])]})
    r, row = table(tmp_path)
    assert r.status is Status.HACK and row["status_counts"] == {"hack": 1}
