"""Plain records that cross actor boundaries (driver ↔ generator ↔ benchmark pool ↔ buffer ↔ learner).

Every record here is a dataclass of plain fields (ints, floats, strings, lists, dicts, and the
typed records of the evaluator and the reward policy), so it pickles through Ray, is written to a
JSONL file (`Rollout.to_dict`, `Exemplar.to_dict`), and can be built by hand in a test. Token ids
are `list[int]`; log-probabilities are natural-log floats, one per response token.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from cudal1.bench.result import EvalResult, Status

if TYPE_CHECKING:  # cudal1.rl imports this module
    from cudal1.rl.rewards import Priced


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
        parse_error: labelled reason when the response could not be parsed, else None.
        result: the evaluation of its candidate, or None if not evaluated.
        priced: what it is worth (`cudal1.rl.rewards.price`), None until priced.
        advantage: group-normalized advantage.
        candidate: the candidate made of its code, None when it was not evaluated.
        episode: the id of its multi-turn refinement episode (`cudal1.pipeline.episodes`: the
            origin of the episode's first turn, "step<k>/g<group>/s<sample>"); None for a
            single-turn rollout. The fields below are set only in an episode.
        turn: its turn in the episode, 1 first (its prompt is the conversation so far).
        feedback: the evaluator's report on the previous turn that its prompt showed; None for turn 1.
        turn_return: its turn's return (`cudal1.rl.turns.turn_returns`), None until assigned
            (and for a turn left out of the update).
    """

    task_id: str
    step: int
    group: int
    sample: int
    prompt: str
    generation: Generation
    sections: dict[str, str] = dataclasses.field(default_factory=dict)
    parse_error: str | None = None
    result: EvalResult | None = None
    priced: Priced | None = None
    advantage: float = 0.0
    candidate: Candidate | None = None
    episode: str | None = None
    turn: int = 1
    feedback: str | None = None
    turn_return: float | None = None

    @property
    def reward(self) -> float:
        """The scalar reward (0.0 before pricing)."""
        return self.priced.reward if self.priced is not None else 0.0

    @property
    def reward_reason(self) -> str:
        """Why it got that reward ("ok", "ok:noisy", "truncated", "incorrect", ...; "" before pricing)."""
        return self.priced.reason if self.priced is not None else ""

    @property
    def paid_speedup(self) -> float | None:
        """The speedup (×) the reward was computed from (rounded, gain rules and label factors
        applied), for a correct candidate; None otherwise."""
        return self.priced.speedup if self.priced is not None else None

    @property
    def trainable(self) -> bool:
        """False when it stays out of the update (truncated, or the harness failed; True before pricing)."""
        return self.priced.trainable if self.priced is not None else True

    @property
    def origin(self) -> str:
        """Where its candidate came from: "step<k>/g<group>/s<sample>", with "/t<turn>" after a
        refinement episode's first turn (the `Candidate.origin` and `Exemplar.origin` of its code)."""
        base = f"step{self.step}/g{self.group}/s{self.sample}"
        return f"{base}/t{self.turn}" if self.turn > 1 else base

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe record of a rollout (a line of rollouts/*.jsonl): its fields but the
        candidate (its code is `sections["code"]`), with `result` as `EvalResult.to_dict()` and
        the price as "reward", "reward_reason", "paid_speedup", "trainable"; a turn of a refinement
        episode adds "episode", "turn", "feedback" and "return" (a single-turn record has none of them)."""
        out = {
            "task_id": self.task_id,
            "step": self.step,
            "group": self.group,
            "sample": self.sample,
            "prompt": self.prompt,
            "generation": dataclasses.asdict(self.generation),
            "sections": dict(self.sections),
            "parse_error": self.parse_error,
            "result": self.result.to_dict() if self.result is not None else None,
            "reward": self.reward,
            "advantage": self.advantage,
            "reward_reason": self.reward_reason,
            "paid_speedup": self.paid_speedup,
            "trainable": self.trainable,
        }
        if self.episode is not None:
            out.update(episode=self.episode, turn=self.turn, feedback=self.feedback, **{"return": self.turn_return})
        return out

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
    status: str = Status.OK.value
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
