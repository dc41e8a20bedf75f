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

Prompts are kept short: the embedded default model has a context of about 8k tokens, and most of
it should go to the reference, the exemplars and the answer. Chat messages are returned as
`[{"role": ..., "content": ...}]`; applying the model's chat template is the caller's job.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence

from cudal1.bench.result import Status
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


@dataclasses.dataclass
class Feedback:
    """What the evaluator said about one earlier attempt, for the next round's prompt (the optimize
    loop, `cudal1.pipeline.optimize`).

    Attributes:
        status: the evaluator's status ("compile_error", "incorrect", "ok", ...) or
            "parse_error:<label>" when the response held no usable code (`cudal1.policy.parsing`).
        message: the evaluator's one-line message (or the parser's label, explained).
        speedup: measured speedup (×, reference ms / candidate ms) of a correct attempt, else None.
        reference_ms, candidate_ms: the median times (ms) of a correct attempt, else None.
    """

    status: str
    message: str = ""
    speedup: float | None = None
    reference_ms: float | None = None
    candidate_ms: float | None = None

    def line(self, max_chars: int = 300) -> str:
        """One line: status, then the message cut to `max_chars`, or the timing of a correct attempt."""
        if self.status == Status.OK and self.speedup is not None:
            times = (
                f" (reference {self.reference_ms:.3f} ms, yours {self.candidate_ms:.3f} ms)"
                if self.reference_ms is not None and self.candidate_ms is not None
                else ""
            )
            what = f"correct but not faster: {self.speedup:.2f}x speedup{times}"
        else:
            what = self.status
        message = " ".join(self.message.split())
        if len(message) > max_chars:
            message = message[: max_chars - 3] + "..."
        return f"{what}: {message}" if message else what


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
