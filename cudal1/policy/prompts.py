"""Prompts the policy reads, and the response format it must write.

Every response has three sections, in this order, each under a fixed Markdown header:

    ## Performance analysis   why the faster program is faster (or, without exemplars, what
                              limits the reference)
    ## Algorithm design       the plan for the new program
    ## Code                   one ```python block: a complete KernelBench `ModelNew` module

This is the output format of CUDA-L1's contrastive prompt (Li et al., arXiv 2507.14111,
contrastive-RL section: the prompt shows the reference and earlier solutions with their speedups
and asks for a performance analysis, then an algorithm design, then code). As there, the
contrastive prompt asks five numbered questions for the analysis (which solution is fastest, what
it does differently, why that is faster, what still limits it, what to change to beat it), in
our own words, and says that the task's hyperparameters stay unchanged. Where the paper's prompt
says an answer without the analysis scores 0, ours (plain and contrastive) states what the reward
does (`cudal1.rl.rewards.price`): an analysis or design section that is missing or under 20
characters (`RewardConfig.min_section_chars`' default) is priced as a failure. Measured with the
small default's tokenizer (`cudal1.policy.small`), the questions and that sentence add 60 tokens to
a contrastive prompt, the sentence 28 to a plain one. The same format is used
for SFT targets (`sft_response`) and self-training prompts (`plain_prompt`), so the three stages
train one habit. `cudal1.policy.parsing` reads it back.

After an evaluated answer, two prompts carry what the evaluator said (`Feedback`): a refinement
episode's next turn continues the conversation with the model's answer and the evaluator's report
on it (`refinement_turn`, `cudal1.rl.turns`), shortened to a token budget; the optimize loop's
next round does the same by default (`feedback_mode` "conversation", so inference asks what
training teaches), or puts one line per earlier attempt into a fresh prompt (`with_feedback`,
"block").

Prompts are kept short: the embedded default model has a context of about 8k tokens, and most of
it should go to the reference, the exemplars and the answer. Chat messages are returned as
`[{"role": ..., "content": ...}]`; applying the model's chat template is the caller's job.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections.abc import Callable, Sequence

from cudal1.bench import kernelprofile
from cudal1.bench.result import EvalResult, Status
from cudal1.records import Exemplar

SECTIONS: dict[str, str] = {
    "analysis": "Performance analysis",
    "design": "Algorithm design",
    "code": "Code",
}
"""Section key (as in `Rollout.sections`) -> the header the model must write after "## "."""

SYSTEM_PROMPT = (
    "You optimize PyTorch programs for speed on the GPU. Given a reference `Model`, write `ModelNew`: "
    "same constructor and forward signature, same outputs, faster. You may use inline CUDA "
    "(torch.utils.cpp_extension.load_inline), Triton, or a better PyTorch formulation. "
    "Keep every hyperparameter of the task unchanged (sizes, dtypes, constants, get_inputs and "
    "get_init_inputs). Never cache results, skip work, or change the inputs."
)

_FORMAT = (
    "Answer with exactly three sections, in this order:\n"
    "## Performance analysis\n{analysis}\n"
    "## Algorithm design\nThe plan for your faster version.\n"
    "## Code\nOne ```python block holding a complete module that defines `class ModelNew(nn.Module)` "
    "with the same `__init__` and `forward` arguments as `Model`.\n"
    "An answer whose analysis or design is missing or under 20 characters is scored as a failure, "
    "like code that does not compile."
)
_ANALYSIS_CONTRASTIVE = (
    "Answer all five about the solutions above: 1. Which is fastest? 2. What does it do differently? "
    "3. Why is that faster (memory traffic, parallelism, kernel launches, arithmetic)? "
    "4. What still limits it? 5. What will you change to beat it?"
)
_EXEMPLARS_INTRO = "Earlier correct solutions, with speedup over the reference (higher is faster):"
_ANALYSIS_PLAIN = "What limits the speed of the reference (memory traffic, parallelism, kernel launches, arithmetic)?"


def fence(code: str, lang: str = "python") -> str:
    """`code` in a Markdown fence long enough that backtick runs inside it cannot close it early."""
    run, longest = 0, 0
    for ch in code:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{code.rstrip()}\n{ticks}"


def _reference_block(task_source: str) -> str:
    return "Reference program (`Model` is the reference):\n" + fence(task_source)


def contrastive_prompt(task_source: str, exemplars: Sequence[Exemplar]) -> list[dict[str, str]]:
    """The stage-3 prompt: reference, earlier solutions with their speedups, required sections.

    Args:
        task_source: the task's KernelBench file (defines `Model`, `get_inputs`, ...).
        exemplars: earlier correct solutions, shown in the given order with their measured
            speedup (×, reference time / solution time); `cudal1.rl.exemplars.sample_exemplars`
            returns them slowest first. With none this is `plain_prompt`.

    Returns:
        [system message, user message], each {"role": str, "content": str}.
    """
    if not exemplars:
        return plain_prompt(task_source)
    parts = [_reference_block(task_source), _EXEMPLARS_INTRO]
    for i, e in enumerate(exemplars):
        name = chr(ord("A") + i) if i < 26 else str(i + 1)
        parts.append(f"### Solution {name}: {e.speedup:.2f}x speedup\n{fence(e.code)}")
    parts.append("Write a solution faster than all of them. " + _FORMAT.format(analysis=_ANALYSIS_CONTRASTIVE))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def plain_prompt(task_source: str) -> list[dict[str, str]]:
    """The prompt without exemplars (SFT, self-training, and tasks with no stored solution yet).

    Returns [system message, user message], each {"role": str, "content": str}.
    """
    user = _reference_block(task_source) + "\n\nWrite a faster `ModelNew`. " + _FORMAT.format(analysis=_ANALYSIS_PLAIN)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def solution_notes(code: str) -> str:
    """The explanation a solution carries in its own docstring: the module docstring, else the
    `ModelNew` class docstring, else "" (also "" for code that does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return ""
    doc = ast.get_docstring(tree)
    if not doc:
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                doc = ast.get_docstring(node)
                break
    return " ".join((doc or "").split())


def sft_response(code: str, analysis: str = "", design: str = "") -> str:
    """A target response in the required format, e.g. from a seed solution's source.

    An empty `analysis` is taken from the solution's own docstring (`solution_notes`), or a
    one-line placeholder saying none was recorded; an empty `design` gets a one-line pointer to
    the code. Returns the response text (no trailing newline).
    """
    analysis = analysis.strip() or solution_notes(code) or "No analysis was recorded for this solution."
    design = design.strip() or "Implement the approach above as `ModelNew`."
    return "\n\n".join(
        [
            f"## {SECTIONS['analysis']}\n{analysis}",
            f"## {SECTIONS['design']}\n{design}",
            f"## {SECTIONS['code']}\n{fence(code)}",
        ]
    )


UNEVALUATED: dict[str, str] = {
    "truncated": "the answer was cut off at the token limit before it ended; nothing was evaluated",
    "parse_error:empty_response": "the answer was empty",
    "parse_error:no_code_block": "the answer had no ```python code block",
    "parse_error:truncated_code_block": "the code block was not closed",
    "parse_error:syntax_error": "the code is not valid Python",
    "parse_error:no_modelnew": "the code defines no `class ModelNew`",
    "parse_error:modelnew_not_defined": "the code defines no `class ModelNew`",
}
"""Why an answer was never evaluated (the reward's reason: "truncated", "parse_error:<label>" of
`cudal1.policy.parsing`) -> the one line a refinement turn's report says (`Feedback.unevaluated`)."""


@dataclasses.dataclass
class Feedback:
    """What the evaluator said about one earlier attempt, for the next prompt: the next round of
    the optimize loop (`cudal1.pipeline.optimize`, `feedback_block`), or the next turn of a
    refinement episode (`refinement_turn`, `report`).

    Attributes:
        status: the evaluator's status ("compile_error", "incorrect", "ok", ...) or
            "parse_error:<label>" when the response held no usable code (`cudal1.policy.parsing`).
        message: the evaluator's one-line message (or the parser's label, explained).
        speedup: measured speedup (×, reference ms / candidate ms) of a correct attempt, else None.
        reference_ms, candidate_ms: the median times (ms) of a correct attempt, else None.
        spread: the evaluator's `speedup_spread` of a correct attempt ((max - min) / median of its
            per-round speedups, unitless), else None.
        labels: the evaluator's labels ("pytorch_only", "calls_reference_ops", ...).
        profile: a short profile of one forward (text: `cudal1.bench.kernelprofile.describe`; GPU
            kernels on a GPU pool, operators on a CPU one), "" for none.

    `line` shows status, message and times only, so the optimize loop's prompts do not depend on
    the last three; `report` shows them all.
    """

    status: str
    message: str = ""
    speedup: float | None = None
    reference_ms: float | None = None
    candidate_ms: float | None = None
    spread: float | None = None
    labels: tuple[str, ...] = ()
    profile: str = ""

    @classmethod
    def of(cls, result: EvalResult, profile: str | None = None) -> "Feedback":
        """The feedback of an evaluated attempt, from its `EvalResult`; its profile is `profile`,
        or, when None, the result's own (`EvalResult.profile` in words, `kernelprofile.describe`;
        "" when it has none)."""
        if profile is None:
            profile = kernelprofile.describe(result.profile)
        return cls(
            result.status.value,
            result.message,
            result.speedup,
            result.reference.median_ms if result.reference else None,
            result.candidate.median_ms if result.candidate else None,
            result.speedup_spread,
            tuple(result.labels),
            profile,
        )

    @classmethod
    def unevaluated(cls, status: str) -> "Feedback":
        """The feedback of an answer that was never evaluated: `status` ("truncated",
        "parse_error:<label>", or another reason) with its one-line explanation from
        `UNEVALUATED` ("nothing was evaluated" for one it does not list). What a refinement
        episode's next turn (`cudal1.pipeline.episodes.feedback_of`) and the optimize loop's
        conversations (`cudal1.pipeline.optimize.Attempt.turn_feedback`) say alike."""
        return cls(status, UNEVALUATED.get(status, "nothing was evaluated"))

    def line(self, max_chars: int = 300) -> str:
        """One line: status, then the message cut to `max_chars`, or the timing of a correct attempt."""
        if self.status == Status.OK and self.speedup is not None:
            what = f"correct but not faster: {self.speedup:.2f}x speedup{self._times()}"
        else:
            what = self.status
        message = _cut(self.message, max_chars)
        return f"{what}: {message}" if message else what

    def report(self, max_chars: int = 300, profile: bool = True) -> str:
        """The evaluator's report on one attempt, a few lines: the result (for a correct attempt its
        speedup, times and the spread of its rounds; else `line`), its labels, and the profile
        (unless `profile` is False). Message and profile are cut to `max_chars` characters each."""
        if self.status == Status.OK and self.speedup is not None:
            first = f"correct: {self.speedup:.2f}x speedup over the reference{self._times()}"
            if self.spread is not None and math.isfinite(self.spread):
                first += f"; its timing rounds differ by {100 * self.spread:.0f}%"
            message = _cut(self.message, max_chars)
            lines = [f"{first}: {message}" if message else first]
        else:
            lines = [self.line(max_chars)]
        if self.labels:
            lines.append("labels: " + ", ".join(self.labels))
        if profile and self.profile.strip():
            lines.append("profile: " + _cut(self.profile, max_chars))
        return "\n".join(lines)

    def _times(self) -> str:
        if self.reference_ms is None or self.candidate_ms is None:
            return ""
        return f" (reference {self.reference_ms:.3f} ms, yours {self.candidate_ms:.3f} ms)"


def _cut(text: str, max_chars: int) -> str:
    """`text` on one line, cut to `max_chars` characters (the last three "...")."""
    text = " ".join(text.split())
    return text[: max_chars - 3] + "..." if len(text) > max_chars else text


_FEEDBACK_INTRO = (
    "Your previous attempts failed or were not faster. What the evaluator reported "
    "(fix these problems in your new solution):"
)


def feedback_block(feedback: Sequence[Feedback], max_items: int = 4, max_chars: int = 300) -> str:
    """The execution feedback of earlier attempts as one prompt paragraph ("" for none).

    Shows at most `max_items` attempts (the first ones given; identical lines once), each as
    "- Attempt N: <status>: <message>" with the message cut to `max_chars` characters.
    """
    lines: list[str] = []
    for f in feedback:
        line = f.line(max_chars)
        if line not in lines:
            lines.append(line)
        if len(lines) >= max_items:
            break
    if not lines:
        return ""
    return "\n".join([_FEEDBACK_INTRO, *(f"- Attempt {i}: {line}" for i, line in enumerate(lines, 1))])


def with_feedback(
    messages: list[dict[str, str]], feedback: Sequence[Feedback], max_items: int = 4, max_chars: int = 300
) -> list[dict[str, str]]:
    """`messages` (a `plain_prompt` or `contrastive_prompt`) with `feedback_block` placed in the user
    message just before its closing instruction (the answer-format paragraph). Returns a new list;
    `messages` is unchanged; with no feedback the same content is returned.

    Raises ValueError when the last message is not the user's.
    """
    if not messages or messages[-1]["role"] != "user":
        raise ValueError("the prompt's last message must be the user's")
    block = feedback_block(feedback, max_items, max_chars)
    out = [dict(m) for m in messages]
    if not block:
        return out
    head, sep, tail = out[-1]["content"].rpartition("\n\n")
    out[-1]["content"] = f"{head}\n\n{block}\n\n{tail}" if sep else f"{block}\n\n{tail}"
    return out


REFINEMENT_FEEDBACK = ("report", "none")
"""What the prompt of a refinement turn shows after the previous answer (`refinement_turn`'s
`report`): the evaluator's report on it, or nothing (an ablation: does a policy use the report?)."""

_REFINE_INTRO = "The evaluator's report on your previous solution:"
_ANALYSIS_REFINE = (
    "What does the report show, what limits your previous solution (memory traffic, parallelism, "
    "kernel launches, arithmetic), and what will you change?"
)


FENCE_RE = re.compile(r"^\s*(?P<ticks>`{3,})\s*(?P<lang>[\w+-]*)\s*$")
"""A Markdown code fence line: three or more backticks (`ticks`), then an optional language
(`lang`, empty for a closing fence), spaces allowed around both. The one definition of a fence
for the parser (`cudal1.policy.parsing`) and for the prompts that omit code."""


def _fence_lines(text: str) -> list[tuple[str, bool, bool]]:
    """Each line of `text` as (line, in_block, opens): in_block for a fenced code block's lines,
    its fences included (a closing fence at least as long as the opening one; an unclosed block
    runs to the end); opens for an opening fence."""
    out: list[tuple[str, bool, bool]] = []
    ticks = ""
    for line in text.split("\n"):
        if ticks:
            m = FENCE_RE.match(line)
            if m and not m.group("lang") and len(m.group("ticks")) >= len(ticks):
                ticks = ""
            out.append((line, True, False))
            continue
        m = FENCE_RE.match(line)  # the parser's fences, so what is omitted is what it would read
        if m:
            ticks = m.group("ticks")
        out.append((line, bool(m), bool(m)))
    return out


def _omit_code(text: str, note: str) -> str:
    """`text` with each fenced code block (`_fence_lines`) replaced by the line `note`."""
    return "\n".join(note if opens else line for line, in_block, opens in _fence_lines(text) if opens or not in_block)


def _code_only(text: str) -> str:
    """The fenced code blocks of `text` (with their fences), or `text` when it holds none."""
    kept = [line for line, in_block, _ in _fence_lines(text) if in_block]
    return "\n".join(kept) if kept else text


def refinement_turn(
    messages: Sequence[dict[str, str]],
    previous_response: str,
    feedback: Feedback,
    token_budget: int,
    count_tokens: Callable[[list[dict[str, str]]], int],
    max_chars: int = 300,
    report: bool = True,
) -> list[dict[str, str]]:
    """The prompt of the next turn of a refinement episode: the conversation so far, the model's
    previous answer as an assistant message, and a user message with the evaluator's report on
    it (`Feedback.report`) and the answer format, within `token_budget` tokens.

    Args:
        messages: the conversation so far, ending with the user message the previous answer
            answered: turn 1's prompt (`contrastive_prompt` / `plain_prompt`: system message,
            then the user message with the reference task), then earlier turns' assistant and
            user messages as this function made them.
        previous_response: the model's previous answer (the whole response text).
        feedback: what the evaluator said about it.
        token_budget: the most tokens the returned prompt may take (e.g. max_model_len -
            max_tokens), as `count_tokens` counts them.
        count_tokens: the token count of a message list (the caller applies the chat template,
            e.g. `len(chat_prompt_ids(tokenizer, messages))`).
        max_chars: each of the report's message and profile is cut to this many characters.
        report: False leaves the report out (the user message is the closing instruction
            alone; `feedback` is then unused): the ablation `stage.contrastive_rl.feedback=none`.

    Returns:
        A new message list (the inputs are unchanged). Over budget, it is shortened in this
        order, checking after each step: the code of earlier answers is omitted, oldest first
        (a note says so); then their remaining text; then the previous answer is cut to its
        code; then the report's profile is left out. The system message and turn 1's user
        message (the reference task and the exemplars) are never cut.

    Raises:
        ValueError: `messages` does not end with a user message, or even the shortest form does
            not fit `token_budget` (the message gives both counts).
    """
    if len(messages) < 2 or messages[-1]["role"] != "user":
        raise ValueError("the conversation must end with the user message the previous answer answered")
    if not previous_response.strip():
        raise ValueError("the previous response is empty")
    out = [dict(m) for m in messages]
    closing = "Write an improved solution. " + _FORMAT.format(analysis=_ANALYSIS_REFINE)

    def turn(response: str, profile: bool) -> list[dict[str, str]]:
        said = f"{_REFINE_INTRO}\n{feedback.report(max_chars, profile)}\n\n" if report else ""
        return [*out, {"role": "assistant", "content": response}, {"role": "user", "content": f"{said}{closing}"}]

    prompt = turn(previous_response, True)
    if count_tokens(prompt) <= token_budget:
        return prompt
    earlier = [i for i, m in enumerate(out) if m["role"] == "assistant"]
    for n, i in enumerate(earlier, 1):
        out[i]["content"] = _omit_code(out[i]["content"], f"(the code of attempt {n} is omitted for length)")
        prompt = turn(previous_response, True)
        if count_tokens(prompt) <= token_budget:
            return prompt
    for n, i in enumerate(earlier, 1):
        out[i]["content"] = f"(attempt {n} is omitted for length)"
        prompt = turn(previous_response, True)
        if count_tokens(prompt) <= token_budget:
            return prompt
    shortest = [turn(_code_only(previous_response), True), turn(_code_only(previous_response), False)]
    for prompt in shortest:
        if count_tokens(prompt) <= token_budget:
            return prompt
    raise ValueError(
        f"the refinement turn needs {count_tokens(shortest[-1])} tokens even with earlier attempts omitted, "
        f"the previous answer cut to its code and no profile; the budget is {token_budget}"
    )
