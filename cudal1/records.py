"""Plain records that cross actor boundaries (driver ↔ generator ↔ benchmark pool ↔ buffer ↔ learner).

Every record here is a dataclass of JSON-friendly fields (ints, floats, strings, lists, dicts), so
it pickles through Ray, appends to a JSONL file, and can be built by hand in a test. Token ids are
`list[int]`; log-probabilities are natural-log floats, one per response token.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Generation:
    """One sampled response from a rollout generator.

    Attributes:
        prompt_ids: tokenized prompt (after the chat template), length P.
        response_ids: sampled tokens, length R (without the prompt; ends with EOS if one was sampled).
        logprobs: natural-log probability of each sampled token under the sampling engine, length R.
        text: decoded response.
        finish_reason: "stop" (EOS or stop string) or "length" (hit max_tokens).
        model_version: the learner step whose weights produced it (0 = the initial weights).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str = "stop"
    model_version: int = 0


@dataclasses.dataclass
class Candidate:
    """A solution source to evaluate for one task, with where it came from."""

    task_id: str
    source: str
    origin: str = ""  # e.g. "seed", "rollout/step3/g2/s5"
    model_version: int = 0
    task: dict[str, Any] | None = None
    """The task itself (`Task.to_dict()`) for one the pool's suite does not hold (a standalone file,
    a submitted program); None: the pool looks `task_id` up in its suite."""


@dataclasses.dataclass
class PolicyExample:
    """One (prompt, response) pair for a learner update.

    `advantage` is the GRPO advantage of the whole response (broadcast to its tokens); SFT ignores it.
    `old_logprobs` (length R), when given, are the behaviour policy's; when None the learner computes
    them with its own weights before the update.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    advantage: float = 0.0
    old_logprobs: list[float] | None = None


@dataclasses.dataclass
class Rollout:
    """One response to one prompt, carried from generation to the learner.

    Attributes:
        task_id: the task (`level1/12`).
        step: the driver's step counter when it was sampled.
        group: index of its group (all samples of one prompt share a group).
        sample: index within the group.
        prompt: prompt text.
        generation: what the engine produced.
        sections: parsed response sections ("analysis", "design", "code"); empty if unparsed.
        parse_error: labelled reason when the response could not be parsed (reward 0), else None.
        result: the `EvalResult.to_dict()` of its candidate, or None if not evaluated.
        reward: scalar reward (`cudal1.rl.rewards.price`).
        advantage: group-normalized advantage.
        reward_reason: why it got that reward ("ok", "ok:noisy", "truncated", "incorrect", ...).
        paid_speedup: the speedup (×) the reward was computed from (rounded, gain rules and label
            factors applied), for a correct candidate; None otherwise.
        trainable: False when it stays out of the update (truncated, or the harness failed).
    """

    task_id: str
    step: int
    group: int
    sample: int
    prompt: str
    generation: Generation
    sections: dict[str, str] = dataclasses.field(default_factory=dict)
    parse_error: str | None = None
    result: dict[str, Any] | None = None
    reward: float = 0.0
    advantage: float = 0.0
    reward_reason: str = ""
    paid_speedup: float | None = None
    trainable: bool = True

    @property
    def origin(self) -> str:
        """Where its candidate came from: "step<k>/g<group>/s<sample>" (the `Candidate.origin` and
        `Exemplar.origin` of its code)."""
        return f"step{self.step}/g{self.group}/s{self.sample}"

    def to_example(self) -> PolicyExample:
        """The learner's view: token ids and the advantage."""
        g = self.generation
        return PolicyExample(g.prompt_ids, g.response_ids, self.advantage, g.logprobs or None)


@dataclasses.dataclass
class Exemplar:
    """A scored solution kept in the exemplar buffer.

    `speedup` is reference ms / candidate ms (×) as measured by the evaluator; `status` is the
    evaluator's status string ("ok" for correct solutions; only those are sampled as exemplars).
    """

    task_id: str
    code: str
    speedup: float
    status: str = "ok"
    analysis: str = ""
    step: int = 0
    model_version: int = 0
    origin: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Exemplar":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})
