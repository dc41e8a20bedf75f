"""The inference-time contrastive loop: `Optimizer` makes one program faster with a policy and a
benchmark pool, round after round, and says what it found.

One task, `rounds` rounds (CUDA-L1's contrastive prompt used at inference time, plus execution
feedback):

1. (optional) the task's reference, as a candidate (`ModelNew = Model` appended), is evaluated first: a task whose
   reference does not run is reported as `invalid_task` before any sampling;
2. (optional) starting solutions (`start`: the user's own attempts, seed solutions) are evaluated
   as round 0;
3. each round builds a fresh prompt: the reference and up to `exemplars` correct solutions found
   so far with their measured speedups (`cudal1.rl.exemplars.sample_exemplars`, slowest first, in
   `cudal1.policy.prompts.contrastive_prompt`). With `feedback`, the next round also shows what
   the evaluator said about the previous round's attempts, in one of two forms
   (`feedback_mode`):
   - "conversation" (the default): the round's `samples` prompts continue conversations, the
     prompt training's refinement episodes use (`cudal1.pipeline.episodes`): turn-1 prompt, the
     model's answer, the evaluator's report on it (`cudal1.policy.prompts.refinement_turn` with
     `Attempt.turn_feedback`, the `Feedback` a training turn shows), the next answer, ... Which
     are continued (`continued_attempts`): the previous round's attempts with a non-empty
     response, one conversation each (identical responses once), the correct ones fastest first,
     then the failed ones in their order, at most `samples`. With k < `samples` conversations
     sample i continues conversation i mod k (`conversation_prompts`). So a round of `samples`
     answers is continued one to one, as training's `group_size` episodes are, and the rounds of
     the loop are the turns of an episode. Round 1 continues the starting solutions (their code as
     the answer, `sft_response`, after round 1's fresh prompt); without a start, or when no
     response has text, a round samples the fresh prompt. A conversation that does not fit even
     in `refinement_turn`'s shortest form gets the fresh prompt for its samples (logged once per
     task). A conversation keeps the exemplars its first prompt showed (as a training episode
     does): a correct solution found in round r is shown to its own conversation as its report,
     and to other samples only when they get a fresh prompt.
   - "block": one fresh prompt per round holding one line per failure and correct-but-not-faster
     attempt of the previous round (status, message, times: `cudal1.policy.prompts.with_feedback`;
     at most `feedback_items`).
   The generator samples the responses (block mode and fresh prompts: one prompt, n = `samples`;
   conversations: one prompt per sample, n = 1), the parser reads them, the pool evaluates the
   parsed candidates; correct ones join the exemplars;
4. the fastest correct candidate is measured again on another actor of the pool (`verify`;
   `cudal1.rl.rewards.second_opinion` decides whether two measurements agree); one that does not
   hold up is dropped and the next is tried. The verified one is the task's solution, with the
   slower of its two speedups, the larger spread, its labels and the model's analysis;
5. the solution is delivered (status "improved") only when its paid speedup (`Solution.paid`:
   `cudal1.rl.rewards.price` of the first measurement with its second opinion, so reduced
   precision, a fallback, a noisy or unconfirmed figure earn no gain) is above `min_gain` × and
   above `min_gain` × the best paid speedup of the starting solutions. Otherwise the outcome is
   "not_faster" (or "no_correct") and its message says "no faster solution found" with the best
   figures measured; the solution stays in the outcome for the record.

`Optimizer.optimize(task, start=(), on_progress=None) -> TaskOutcome` is the stable entry point
(the optimize job calls it per task; a Ray Serve application may call it per request). The
generator and the pool are duck-typed: a `cudal1.rollout.RolloutGenerator`, a `ShellHandle` of
one, or a `cudal1.actors.generator_group.GeneratorGroup` (what the job passes; `generate`), a `cudal1.actors.bench_pool.BenchmarkPool` (`evaluate_many`). Candidate code
runs only in the pool's evaluator workers, never here. With `rounds=1, feedback=False` (and no
`start`) it scores a checkpoint on a task: one round of `samples` plain-prompt samples.

Limits: the prompt must fit `max_model_len - max_tokens`; when the fresh one does not, block
feedback, then exemplars, are dropped, and a task whose bare prompt does not fit is reported
(`prompt_too_long`); a conversation is shortened by `refinement_turn` (earlier answers' code, then
their text, then the last answer cut to its code, then the profile) and otherwise replaced by the
fresh prompt. Each conversation is sent as a fresh prompt of token ids (earlier answers
re-tokenized from their text), as training's turns are; that vLLM's prefix cache reuses the shared
prefix was not measured. `TaskOutcome.prompts` keeps one user message per round (in conversation
mode, sample 0's latest); every attempt's whole prompt is `Attempt.messages`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from cudal1.errors import ConfigError
from cudal1.bench.result import EvalResult, Label, SecondOpinion, Status
from cudal1.policy.parsing import parse_response
from cudal1.policy.model import chat_prompt_ids, chat_token_counter, continued_prompt_ids
from cudal1.policy.prompts import Feedback, contrastive_prompt, refinement_turn, sft_response, with_feedback
from cudal1.records import Candidate, Exemplar
from cudal1.rl.exemplars import SCALES as EXEMPLAR_SCALES, sample_exemplars
from cudal1.rl.rewards import MIN_GAIN, VERIFY_TOLERANCE
from cudal1.tasks.task import Task, reference_as_candidate

log = logging.getLogger(__name__)

ProgressCallback = Callable[[dict[str, Any]], None]
"""Called with one event dict per step of `Optimizer.optimize` (see `Optimizer.optimize`)."""

OUTCOMES = ("improved", "not_faster", "no_correct", "invalid_task", "prompt_too_long")
"""`TaskOutcome.status`: a verified solution whose paid speedup beats the reference and the
starting solutions (delivered) / a verified solution that does not (not delivered) / no verified
solution / the reference itself does not run / the prompt does not fit."""


FEEDBACK_MODES = ("conversation", "block")
"""`SearchSettings.feedback_mode`: continue each continued attempt's conversation with the
evaluator's report (`refinement_turn`, as training's refinement episodes) / one fresh prompt with a
paragraph of the previous round's failures (`with_feedback`)."""


@dataclasses.dataclass
class SearchSettings:
    """How `Optimizer` searches: the top-level keys of the optimize and serve job configs
    (`cudal1.config.OptimizeJobConfig` and `ServeJobConfig` inherit these fields, so each knob is
    spelled once). Speedups in × (reference ms / candidate ms). Validated on construction: raises
    `cudal1.errors.ConfigError` naming the key."""

    rounds: int = 2
    """Generate-evaluate rounds per task."""
    samples: int = 4
    """Responses sampled per round."""
    exemplars: int = 2
    """Correct solutions shown per prompt with their speedups (0: plain prompts)."""
    feedback: bool = True
    """Show what the evaluator said about the previous round's attempts in the next round's
    prompts (in the form `feedback_mode` says); False: every round samples the fresh prompt."""
    feedback_mode: str = "conversation"
    """How the next round shows the feedback (`FEEDBACK_MODES`): "conversation" continues the
    previous round's attempts' conversations with `cudal1.policy.prompts.refinement_turn`, the
    prompt training's refinement episodes use; "block" puts one line per attempt into a fresh
    prompt (`cudal1.policy.prompts.with_feedback`). See the module doc."""
    feedback_items: int = 4
    """At most this many attempts in the feedback paragraph (block mode)."""
    feedback_chars: int = 300
    """Each evaluator message (and profile) is cut to this many characters."""
    tau: float = 1.0
    """Exemplar bucket temperature (`cudal1.rl.exemplars.sample_exemplars`)."""
    n_buckets: int = 4
    bucket_scale: str = "log"
    """log | linear (`cudal1.rl.exemplars.SCALES`)."""
    check_reference: bool = True
    """Evaluate each task's reference (with `ModelNew = Model` appended) first; a task whose reference
    fails is reported and skipped."""
    verify: bool = True
    """Measure the best correct candidate again on another actor before it counts."""
    verify_tolerance: float = VERIFY_TOLERANCE
    """Two measurements s1, s2 (×) with |s1 - s2| / min(s1, s2) above this disagree."""
    verify_tries: int = 3
    """Correct candidates tried, fastest first, until one is confirmed on another actor."""
    min_gain: float = MIN_GAIN
    """A verified speedup above this (×) makes the outcome "improved"."""
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("rounds", "samples", "feedback_items", "feedback_chars", "verify_tries", "n_buckets"):
            if getattr(self, name) < 1:
                raise ConfigError(name, f"must be >= 1; got {getattr(self, name)}")
        if self.exemplars < 0:
            raise ConfigError("exemplars", f"must be >= 0; got {self.exemplars}")
        if not self.tau > 0:
            raise ConfigError("tau", f"must be > 0; got {self.tau}")
        if self.feedback_mode not in FEEDBACK_MODES:
            raise ConfigError(
                "feedback_mode", f"must be one of {', '.join(FEEDBACK_MODES)}; got {self.feedback_mode!r}"
            )
        if self.bucket_scale not in EXEMPLAR_SCALES:
            raise ConfigError("bucket_scale", f"must be one of {', '.join(EXEMPLAR_SCALES)}; got {self.bucket_scale!r}")
        if not 0 < self.verify_tolerance < math.inf:
            raise ConfigError("verify_tolerance", f"must be > 0; got {self.verify_tolerance}")
        if not self.min_gain >= 1:
            raise ConfigError("min_gain", f"must be >= 1 (×); got {self.min_gain}")


@dataclasses.dataclass
class OptimizeSettings(SearchSettings):
    """Everything `Optimizer` takes: the search, and the sampling a job config sets in its `rollout`
    group (`from_config`)."""

    max_tokens: int = 512
    """Tokens sampled per response (`rollout.max_tokens`)."""
    max_model_len: int = 8192
    """Prompt + response tokens the engine holds (`rollout.max_model_len`)."""
    temperature: float = 1.0
    """`rollout.temperature`."""
    top_p: float = 1.0
    """`rollout.top_p`."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_tokens", "max_model_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"rollout.{name}", f"must be >= 1; got {getattr(self, name)}")
        if self.max_tokens >= self.max_model_len:
            raise ConfigError(
                "rollout.max_tokens",
                f"{self.max_tokens} leaves no room for the prompt in rollout.max_model_len={self.max_model_len}",
            )
        if not 0 < self.top_p <= 1:
            raise ConfigError("rollout.top_p", f"must be in (0, 1]; got {self.top_p}")
        if self.temperature < 0:
            raise ConfigError("rollout.temperature", f"must be >= 0; got {self.temperature}")

    @classmethod
    def from_config(cls, cfg: Any) -> "OptimizeSettings":
        """The settings of a job config (`OptimizeJobConfig` or `ServeJobConfig`, or its DictConfig):
        its `SearchSettings` keys and the sampling of its `rollout` group. One builder, so the
        optimize job and the Serve app search alike. Raises ConfigError."""
        search = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(SearchSettings)}
        return cls(**search, **{k: getattr(cfg.rollout, k) for k in _ROLLOUT_KEYS})


_ROLLOUT_KEYS = ("max_tokens", "max_model_len", "temperature", "top_p")


@dataclasses.dataclass
class Attempt:
    """One candidate of one round (round 0: a starting solution).

    `result` is the evaluation, None when the response held no usable code (`parse_error` says
    why) or was cut at `max_tokens` (`finish_reason` "length"). `response` is the model's whole
    answer (a starting solution's: its code as `cudal1.policy.prompts.sft_response` writes it);
    `messages` the chat it answered ([] for a starting solution); `continues` the origin of the
    attempt whose conversation its prompt continued (conversation mode), None for a fresh prompt.
    `prompt_ids` and `response_ids` are the engine's ids of the prompt it answered and of the
    answer as sampled ([] for a starting solution), from which the next round continues its
    conversation (`cudal1.policy.model.continued_prompt_ids`: the engine then finds the whole
    earlier turn in its prefix cache). `response`, `messages` and the ids are not in `to_dict`
    (the report's and Serve's shape is unchanged; each conversation repeats the task).
    """

    round: int
    sample: int
    origin: str
    code: str | None
    sections: dict[str, str]
    parse_error: str | None
    finish_reason: str
    result: EvalResult | None
    response: str = ""
    messages: list[dict[str, str]] = dataclasses.field(default_factory=list)
    continues: str | None = None
    prompt_ids: list[int] = dataclasses.field(default_factory=list)
    response_ids: list[int] = dataclasses.field(default_factory=list)

    @property
    def correct(self) -> bool:
        """A correct result (status ok) with a speedup > 0."""
        r = self.result
        return r is not None and r.status is Status.OK and isinstance(r.speedup, (int, float)) and r.speedup > 0

    @property
    def speedup(self) -> float:
        """The measured speedup (×) of a correct attempt (0.0 otherwise)."""
        return float(self.result.speedup) if self.correct else 0.0  # type: ignore[union-attr,arg-type]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (the result as `EvalResult.to_dict()`)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _NOT_IN_DICT}
        d["result"] = self.result.to_dict() if self.result is not None else None
        return d

    def feedback(self) -> Feedback:
        """What the next round's prompt says about this attempt in block mode (`with_feedback`)."""
        if self.result is None:
            why = (
                "the response was cut off before its code block closed"
                if self.finish_reason == "length"
                else _PARSE_WHY.get(self.parse_error or "", "no usable code")
            )
            return Feedback(f"parse_error:{self.parse_error or 'truncated'}", why)
        return Feedback.of(self.result)

    def turn_feedback(self) -> Feedback:
        """What the evaluator's report says about this attempt when its conversation is continued
        (conversation mode): the `Feedback` training's refinement turns show
        (`cudal1.pipeline.episodes.feedback_of`): `Feedback.of(result)` for an evaluated attempt,
        else `Feedback.unevaluated` of "truncated" (cut at `max_tokens`) or "parse_error:<label>"."""
        if self.result is not None:
            return Feedback.of(self.result)
        if self.finish_reason == "length":
            return Feedback.unevaluated("truncated")
        return Feedback.unevaluated(f"parse_error:{self.parse_error or 'no_code_block'}")


_NOT_IN_DICT = ("result", "response", "messages", "prompt_ids", "response_ids")

_PARSE_WHY = {
    "empty_response": "the response was empty",
    "no_code_block": "the response had no ```python code block",
    "truncated_code_block": "the code block was never closed",
    "no_modelnew": "no code block mentions class ModelNew",
    "syntax_error": "the code block defining ModelNew is not valid Python",
    "modelnew_not_defined": "ModelNew is not defined at module level",
}


@dataclasses.dataclass
class Solution:
    """A task's verified solution.

    `speedup` is the slower of the two agreeing measurements (×), `spread` the larger of their
    `speedup_spread`s; `result` is the first measurement and `second_opinion` the comparison with
    the second (None with `verify` off). `paid` is the speedup (×) `cudal1.rl.rewards.price` pays
    for the first measurement with that second opinion (rounded toward 1.00, no gain for a noisy,
    unconfirmed or reduced-precision figure), None when it pays it as no correct result (a
    fallback, ...); `paid_reason` is the price's reason.
    """

    code: str
    speedup: float
    spread: float | None
    labels: list[str]
    analysis: str
    design: str
    origin: str
    result: EvalResult
    second_opinion: SecondOpinion | None = None
    paid: float | None = None
    paid_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (`result` and `second_opinion` as their `to_dict()`)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["labels"] = list(self.labels)
        d["result"] = self.result.to_dict()
        d["second_opinion"] = self.second_opinion.to_dict() if self.second_opinion is not None else None
        return d


@dataclasses.dataclass
class TaskOutcome:
    """What `Optimizer.optimize` found for one task.

    Attributes:
        task_id, name: the task.
        status: one of `OUTCOMES`.
        message: one line for the user.
        solution: the verified solution, or None.
        reference: the reference check's result, or None when skipped.
        attempts: every candidate of every round, in order.
        prompts: each round's user message (round 1 first); in conversation mode the latest user
            message of sample 0's prompt (the others: `Attempt.messages`).
        seconds: wall time of the whole task.
    """

    task_id: str
    name: str
    status: str
    message: str
    solution: Solution | None = None
    reference: EvalResult | None = None
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    prompts: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def speedup(self) -> float | None:
        """The delivered solution's verified speedup (×, the slower of its two measurements); None
        when nothing is delivered (the solution that was not delivered keeps its figures in
        `solution`, for the record)."""
        return self.solution.speedup if self.delivered else None

    @property
    def delivered(self) -> bool:
        """The solution is handed back (written to `solutions/`, returned as code): status "improved"."""
        return self.status == "improved" and self.solution is not None

    def table_result(self) -> EvalResult:
        """The task's row for `cudal1.pipeline.evaluate.paper_table`, which counts a row with status
        ok as a success and its speedup toward fast_p.

        - A delivered solution (`delivered`): its first measurement's result with the verified
          speedup (×, the slower of the two measurements, as `speedup`), the larger spread and the
          solution's labels.
        - Nothing delivered, the reference itself failed (`invalid_task`): the reference's result.
        - Nothing delivered, but some attempt was correct (a correct result whose second opinion
          did not agree, or whose paid speedup did not beat the reference and the starting
          solutions: "not_faster", or "no_correct" with unconfirmed results): a placeholder with
          status compile_error, labelled `Label.NOT_DELIVERED`, the outcome's message and no speedup.
        - Nothing delivered and no attempt correct: the most informative failure (a wrong answer
          before a hack before a timeout or out-of-memory before a crash before a build error),
          or a compile_error labelled "no_candidate" when no response held usable code.

        Why: the table reports what the job hands back (the files under `solutions/`, Serve's
        `code`), so it must agree with the task's line ("no faster solution found"). An
        unconfirmed 1.5x, or a verified 1.3x that does not beat a 1.5x start, is a measurement,
        not a delivered program: counted as a success it would raise the pass rate and fast_1 for
        a task where the user got nothing. The placeholder's status is that of a task with no
        program (compile_error, as "no_candidate"), since the table has no status for "correct
        but not delivered"; its label and message say which it was."""
        # A copy without the measuring actor: the table holds the evaluator's columns.
        if self.solution is not None and self.delivered:
            return dataclasses.replace(
                self.solution.result,
                speedup=self.solution.speedup,
                speedup_spread=self.solution.spread,
                labels=list(self.solution.labels),
                actor=None,
                second_opinion=None,
            )
        if self.status == "invalid_task" and self.reference is not None:
            return dataclasses.replace(self.reference, actor=None, second_opinion=None)
        if self.solution is not None or any(a.result is not None and a.result.correct for a in self.attempts):
            return EvalResult(
                self.task_id,
                Status.COMPILE_ERROR,
                labels=[Label.NOT_DELIVERED],
                message=self.message or "no faster solution found",
            )
        failed = [a.result for a in self.attempts if a.result is not None and a.result.status is not Status.OK]
        if failed:
            worst = max(failed, key=lambda r: _FAILURE_RANK[r.status])
            return dataclasses.replace(worst, actor=None, second_opinion=None)
        return EvalResult(
            self.task_id,
            Status.COMPILE_ERROR,
            labels=[Label.NO_CANDIDATE],
            message=self.message or "no response held usable code",
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (the job's report.json): the fields, each result as `EvalResult.to_dict()`,
        "delivered" and "speedup" (`delivered`, `speedup`: None when nothing is delivered, though
        "solution" keeps the undelivered solution's figures for the record)."""
        return {
            "task_id": self.task_id,
            "name": self.name,
            "status": self.status,
            "message": self.message,
            "delivered": self.delivered,
            "solution": self.solution.to_dict() if self.solution is not None else None,
            "reference": self.reference.to_dict() if self.reference is not None else None,
            "attempts": [a.to_dict() for a in self.attempts],
            "prompts": list(self.prompts),
            "seconds": self.seconds,
            "speedup": self.speedup,
        }


_FAILURE_RANK = {
    Status.INCORRECT: 5,
    Status.HACK: 4,
    Status.TIMEOUT: 3,
    Status.RESOURCE_EXCEEDED: 3,
    Status.RUNTIME_ERROR: 2,
    Status.COMPILE_ERROR: 1,
    Status.INVALID_TASK: 0,
}
"""Which failure `TaskOutcome.table_result` reports when no attempt was correct: the most
informative (a wrong answer before a hack before a timeout or out-of-memory before a crash before a
build error)."""


class Optimizer:
    """The contrastive optimize loop over one policy and one benchmark pool (see the module doc).

    Args:
        generator: has `generate(prompt_ids: list[list[int]], n, max_tokens, temperature, top_p)
            -> list[list[Generation]]` (`cudal1.rollout.RolloutGenerator`, or its actor's `ShellHandle`):
            called once per round, with the fresh prompt and n = `samples`, or, when the round
            continues conversations, with one prompt per sample and n = 1.
        pool: has `evaluate_many(candidates, progress=bool, avoid=None) -> list[EvalResult]`
            (`cudal1.actors.bench_pool.BenchmarkPool`); candidates carry their task (`Candidate.task`),
            so the pool need not hold the task in its suite.
        tokenizer: the policy's tokenizer (its chat template is applied).
        settings: `OptimizeSettings` (defaults when None).
        progress_bars: show the pool's progress bar while it evaluates.

    The object holds no per-task state: one `Optimizer` may serve many calls, from several threads
    as far as its parts allow (a `BenchmarkPool` runs one `evaluate_many` at a time and makes a
    second caller wait).
    """

    def __init__(
        self,
        generator: Any,
        pool: Any,
        tokenizer: Any,
        settings: OptimizeSettings | None = None,
        progress_bars: bool = False,
    ) -> None:
        self.generator, self.pool, self.tokenizer = generator, pool, tokenizer
        self.settings = settings or OptimizeSettings()
        self.progress_bars = progress_bars

    def optimize(
        self, task: Task, start: Sequence[str] = (), on_progress: ProgressCallback | None = None
    ) -> TaskOutcome:
        """Optimize one task; never raises for anything the model or a candidate does.

        Args:
            task: the reference program (`cudal1.tasks.Task`; `load_task_file` for a standalone file).
            start: solution sources evaluated first as round 0 (origin "start/<i>"): correct ones
                become exemplars (and may be the answer), failed ones the first round's feedback.
            on_progress: called with events, each a dict with "event", "task_id" and:
                "reference" {"status", "message"} after the reference check;
                "round_start" {"round", "rounds"}; "generated" {"round", "responses", "parsed"};
                "round_done" {"round", "rounds", "evaluated", "correct", "best_speedup" (× or None),
                "statuses" {status: count}}; "verified" {"speedup" or None, "agrees"};
                "done" {"status", "speedup" (`TaskOutcome.speedup`: None when nothing is
                delivered), "message"}. An exception it raises is logged and ignored.

        Returns:
            A `TaskOutcome`. Raises only for errors of the generator or the pool themselves
            (an engine or a cluster failure), which the caller should see.
        """
        s = self.settings
        t0 = time.perf_counter()
        rng = random.Random(f"{s.seed}:{task.task_id}:{task.source_hash}")
        emit = _emitter(on_progress, task.task_id)
        out = TaskOutcome(task.task_id, task.name, "no_correct", "")
        task_record = task.to_dict()

        if s.check_reference:
            ref = self._evaluate(
                [Candidate(task.task_id, reference_as_candidate(task.source), "reference", task=task_record)]
            )[0]
            out.reference = ref
            emit("reference", status=ref.status.value, message=ref.message)
            if ref.status is not Status.OK:
                out.status = "invalid_task"
                out.message = f"the reference does not run as ModelNew: {ref.status.value}: {ref.message}"[:500]
                return self._finish(out, t0, emit)

        pool_of_exemplars: list[Exemplar] = []
        feedback: list[Feedback] = []  # block mode: the next prompt's lines
        previous: list[Attempt] = []  # conversation mode: the attempts the next round may continue
        warned = False  # a conversation that does not fit is logged once per task
        count = chat_token_counter(self.tokenizer)
        if start:
            attempts = [
                Attempt(0, i, f"start/{i}", code, {}, None, "stop", None, response=sft_response(code))
                for i, code in enumerate(start)
            ]
            self._evaluate_attempts(task, task_record, attempts)
            out.attempts += attempts
            feedback = self._absorb(task, attempts, pool_of_exemplars)
            previous = attempts

        for rnd in range(1, s.rounds + 1):
            emit("round_start", round=rnd, rounds=s.rounds)
            shown = (
                sample_exemplars(
                    pool_of_exemplars, s.exemplars, s.tau, rng, n_buckets=s.n_buckets, scale=s.bucket_scale
                )
                if s.exemplars
                else []
            )
            block = s.feedback and s.feedback_mode == "block"
            prompt_ids, fresh = self._prompt(task, shown, feedback if block else [])
            if prompt_ids is None:
                out.status = "prompt_too_long"
                out.message = (
                    f"the prompt without exemplars or feedback is {fresh} tokens; "
                    f"max_model_len - max_tokens = {s.max_model_len - s.max_tokens}"
                )
                return self._finish(out, t0, emit)
            plan: list[Prompt] = [(fresh, None)] * s.samples
            if s.feedback and not block:
                plan, over = conversation_prompts(
                    previous, fresh, s.samples, s.max_model_len - s.max_tokens, count, s.feedback_chars
                )
                if over and not warned:
                    warned = True
                    log.warning(
                        "%s: round %d: %d conversation(s) do not fit max_model_len - max_tokens = %d even "
                        "shortened; their samples get a fresh prompt (logged once per task)",
                        task.task_id,
                        rnd,
                        over,
                        s.max_model_len - s.max_tokens,
                    )
            out.prompts.append(plan[0][0][-1]["content"])
            gens = self._generate(prompt_ids, fresh, plan)
            attempts = []
            for i, (gen, (messages, continued)) in enumerate(zip(gens, plan)):
                parsed = parse_response(gen.text)
                usable = parsed.error is None and gen.finish_reason != "length"
                attempts.append(
                    Attempt(
                        rnd,
                        i,
                        f"round{rnd}/s{i}",
                        parsed.code if usable else None,
                        dict(parsed.sections),
                        parsed.error,
                        gen.finish_reason,
                        None,
                        response=gen.text,
                        messages=messages,
                        continues=continued.origin if continued is not None else None,
                        prompt_ids=list(gen.prompt_ids),
                        response_ids=list(gen.response_ids),
                    )
                )
            emit("generated", round=rnd, responses=len(gens), parsed=sum(a.code is not None for a in attempts))
            self._evaluate_attempts(task, task_record, attempts)
            out.attempts += attempts
            feedback = self._absorb(task, attempts, pool_of_exemplars)
            previous = attempts
            statuses: dict[str, int] = {}
            for a in attempts:
                key = a.result.status.value if a.result else f"parse_error:{a.parse_error or 'truncated'}"
                statuses[key] = statuses.get(key, 0) + 1
            best = max((e.speedup for e in pool_of_exemplars), default=None)
            emit(
                "round_done",
                round=rnd,
                rounds=s.rounds,
                evaluated=sum(a.result is not None for a in attempts),
                correct=sum(a.correct for a in attempts),
                best_speedup=best,
                statuses=statuses,
            )

        out.solution = self._verified_best(task, task_record, out.attempts, emit)
        start_paid = [
            p
            for p in (self._paid(a.result).speedup for a in out.attempts if a.round == 0 and a.correct)
            if p is not None
        ]
        start_best = max(start_paid, default=None)
        best_measured = max((a.speedup for a in out.attempts if a.correct), default=None)
        start_text = f", start paid {start_best:.2f}x" if start_best is not None else ""
        if out.solution is None:
            n_correct = sum(a.correct for a in out.attempts)
            out.status = "no_correct"
            out.message = (
                f"no faster solution found: {n_correct} correct candidates (best measured "
                f"{best_measured:.2f}x), none confirmed by a second measurement{start_text}"
                if n_correct
                else f"no faster solution found: no correct candidate in {len(out.attempts)} attempts"
            )
        else:
            sol = out.solution
            bar = max(s.min_gain, s.min_gain * start_best if start_best is not None else 0.0)
            paid = "not paid" if sol.paid is None else f"{sol.paid:.2f}x"
            if sol.paid is not None and sol.paid > bar:
                out.status = "improved"
                out.message = f"{sol.paid:.2f}x speedup (paid, verified), from {sol.origin}"
            else:
                out.status = "not_faster"
                again = (
                    f", {sol.second_opinion.speedup:.2f}x on another actor"
                    if (sol.second_opinion is not None and sol.second_opinion.speedup is not None)
                    else ""
                )
                out.message = (
                    f"no faster solution found: best {sol.origin} measured {sol.result.speedup:.2f}x"
                    f"{again}, paid {paid} ({sol.paid_reason}){start_text}; needs above {bar:.2f}x "
                    f"(the reference x {s.min_gain}" + (" and the start" if start_best is not None else "") + ")"
                )
        return self._finish(out, t0, emit)

    def _paid(self, result: EvalResult | None) -> Any:
        """`cudal1.rl.rewards.price` of a result (no format or copy check), with this search's
        gain bar and verify tolerance."""
        from cudal1.rl.rewards import RewardConfig, price

        return price(
            result, cfg=RewardConfig(min_gain=self.settings.min_gain, verify_tolerance=self.settings.verify_tolerance)
        )

    # -- steps ---------------------------------------------------------------------------------------

    def _evaluate(self, candidates: list[Candidate]) -> list[EvalResult]:
        return self.pool.evaluate_many(candidates, progress=self.progress_bars)

    def _evaluate_attempts(self, task: Task, task_record: dict[str, Any], attempts: list[Attempt]) -> None:
        todo = [a for a in attempts if a.code is not None]
        if not todo:
            return
        results = self._evaluate([Candidate(task.task_id, a.code, a.origin, task=task_record) for a in todo])
        for a, r in zip(todo, results):
            a.result = r

    def _absorb(self, task: Task, attempts: list[Attempt], exemplars: list[Exemplar]) -> list[Feedback]:
        """Add the correct attempts to `exemplars` (distinct code); return the feedback for the next
        round: the failures, then the correct attempts that were not faster than `min_gain`."""
        known = {e.code for e in exemplars}
        for a in attempts:
            if a.correct and a.code not in known:
                known.add(a.code)
                exemplars.append(
                    Exemplar(
                        task.task_id,
                        a.code,
                        a.speedup,
                        analysis=a.sections.get("analysis", ""),
                        step=a.round,
                        origin=a.origin,
                    )
                )
        failed = [a.feedback() for a in attempts if not a.correct]
        slow = [a.feedback() for a in attempts if a.correct and a.speedup <= self.settings.min_gain]
        return failed + slow

    def _prompt(self, task: Task, shown: list[Exemplar], feedback: list[Feedback]) -> tuple[list[int] | None, Any]:
        """(prompt ids, messages) of the round's fresh prompt that fit: `contrastive_prompt` with
        `shown`, and `with_feedback` of `feedback` (block mode; [] otherwise); the feedback, then
        the exemplars, are dropped when too long. (None, the bare prompt's token count) when even
        the bare prompt does not fit."""
        s = self.settings
        limit = s.max_model_len - s.max_tokens
        tries = [(shown, feedback), *([(shown, [])] if feedback else []), *([([], [])] if shown else [])]
        n = 0
        for ex, fb in tries:
            messages = contrastive_prompt(task.source, ex)
            if fb:
                messages = with_feedback(messages, fb, s.feedback_items, s.feedback_chars)
            ids = chat_prompt_ids(self.tokenizer, messages)
            n = len(ids)
            if n <= limit:
                if (ex, fb) != tries[0]:
                    log.warning(
                        "%s: prompt too long for max_model_len - max_tokens = %d: %s dropped",
                        task.task_id,
                        limit,
                        "feedback" if ex else ("feedback and exemplars" if feedback else "exemplars"),
                    )
                return ids, messages
        return None, n

    def _generate(self, fresh_ids: list[int], fresh: list[dict[str, str]], plan: list[Prompt]) -> list[Any]:
        """One `Generation` per sample of `plan`: all `samples` from one call on the fresh prompt
        (n = samples) when no sample continues a conversation (block mode, round 1 without a start,
        `feedback` off), else one call with each sample's prompt (n = 1; a conversation's ids
        made once: the continued attempt's prompt ids, its answer's ids as sampled and the rest
        of the turn, `continued_prompt_ids`, or where that cannot be, the messages rendered)."""
        s = self.settings
        kw = {"max_tokens": s.max_tokens, "temperature": s.temperature, "top_p": s.top_p}
        if all(continued is None for _, continued in plan):
            return self.generator.generate([fresh_ids], n=len(plan), **kw)[0]
        rendered: dict[int, list[int]] = {id(fresh): fresh_ids}
        for m, continued in plan:
            if id(m) in rendered:
                continue
            ids = None
            if continued is not None and continued.prompt_ids and continued.response_ids:
                previous = continued.messages or fresh
                ids = continued_prompt_ids(self.tokenizer, continued.prompt_ids, continued.response_ids, previous, m)
            rendered[id(m)] = ids if ids is not None else chat_prompt_ids(self.tokenizer, m)
        ids = [rendered[id(m)] for m, _ in plan]
        return [g[0] for g in self.generator.generate(ids, n=1, **kw)]

    def _verified_best(
        self, task: Task, task_record: dict[str, Any], attempts: list[Attempt], emit: Callable[..., None]
    ) -> Solution | None:
        """The fastest correct attempt that a second measurement confirms (`verify`), else None."""
        from cudal1.pipeline.verify import second_opinions
        from cudal1.rl.rewards import RewardConfig

        s = self.settings
        ranked, seen = [], set()
        for a in sorted((a for a in attempts if a.correct), key=lambda a: -a.speedup):
            if a.code not in seen:
                seen.add(a.code)
                ranked.append(a)
        cfg = RewardConfig(verify_tolerance=s.verify_tolerance)
        for a in ranked[: s.verify_tries]:
            first = a.result
            if not s.verify:
                return _solution(a, a.speedup, first.speedup_spread, None, self._paid(first))
            again = Candidate(task.task_id, a.code, a.origin + "/verify", task=task_record)
            opinion, second = second_opinions(self.pool, [again], [first], cfg)[0]
            emit("verified", origin=a.origin, speedup=opinion.speedup, agrees=opinion.agrees)
            if opinion.agrees:
                priced = self._paid(dataclasses.replace(first, second_opinion=opinion))
                return _solution(a, min(a.speedup, opinion.speedup), _larger_spread(first, second), opinion, priced)
        return None

    def _finish(self, out: TaskOutcome, t0: float, emit: Callable[..., None]) -> TaskOutcome:
        out.seconds = time.perf_counter() - t0
        emit("done", status=out.status, speedup=out.speedup, message=out.message)
        return out


def task_from_source(source: str, name: str = "program") -> Task:
    """A submitted KernelBench-format program (its text) as a standalone `Task`: suite "file", id
    "file/<name>" with `name` made safe by `cudal1.tasks.standalone_name` ("my relu" ->
    "file/my_relu"), parsed without being executed, exactly as `cudal1.tasks.load_task_file`
    parses a file. Raises ValueError naming what is wrong (syntax error, no `Model`, `get_inputs`
    or `get_init_inputs`, pretrained weights, ...)."""
    import tempfile
    from pathlib import Path

    from cudal1.tasks import load_task_file, standalone_name

    with tempfile.TemporaryDirectory(prefix="cudal1-task-") as tmp:
        path = Path(tmp) / f"{standalone_name(name)}.py"  # a directory not named level<L>: standalone
        path.write_text(source, encoding="utf-8")
        try:
            task = load_task_file(path)
        except ValueError as e:
            raise ValueError(str(e).replace(f"task file {path}", f"program {name!r}")) from None
    return dataclasses.replace(task, path="")


Prompt = tuple[list[dict[str, str]], "Attempt | None"]
"""One sample's prompt in a round: its chat messages and the attempt whose conversation it
continues (None: the round's fresh prompt)."""


def continued_attempts(previous: Sequence[Attempt], samples: int) -> list[Attempt]:
    """The attempts of the previous round (or the starting solutions) whose conversations the next
    round continues, at most `samples`: those with a non-empty `response` (of identical responses
    the first), the correct ones fastest first (refining what works is how a faster program is
    found), then the others (failed, or cut off) in their order. Pure."""
    seen: set[str] = set()
    kept = []
    for a in previous:
        if a.response.strip() and a.response not in seen:
            seen.add(a.response)
            kept.append(a)
    ranked = sorted((a for a in kept if a.correct), key=lambda a: -a.speedup) + [a for a in kept if not a.correct]
    return ranked[:samples]


def conversation_prompts(
    previous: Sequence[Attempt],
    fresh: list[dict[str, str]],
    samples: int,
    token_budget: int,
    count_tokens: Callable[[list[dict[str, str]]], int],
    max_chars: int = 300,
) -> tuple[list[Prompt], int]:
    """The next round's `samples` prompts in conversation mode (`feedback_mode`).

    Each of the k `continued_attempts(previous, samples)` opens one conversation:
    `refinement_turn(a.messages or fresh, a.response, a.turn_feedback(), token_budget,
    count_tokens, max_chars)` (training's refinement turn: the chat so far, the answer as the
    assistant's message, the evaluator's report, shortened to `token_budget` tokens). Sample i
    gets conversation i mod k, so with k < `samples` the samples are spread evenly (the first ones
    get one more). A conversation whose shortest form does not fit `token_budget`
    (`refinement_turn` raises ValueError), and every sample when there is none to continue, gets
    `fresh` (the round's turn-1 prompt, which fits).

    Args:
        previous: the previous round's attempts (round 1: the starting solutions, which answered
            no prompt of their own: their conversation starts from `fresh`).
        fresh: this round's turn-1 prompt (`contrastive_prompt`, fitting the budget).
        samples: prompts to return (`SearchSettings.samples`).
        token_budget: tokens a prompt may take (max_model_len - max_tokens), as `count_tokens`
            counts (`cudal1.policy.model.chat_token_counter`).
        max_chars: the report's message and profile are cut to this many characters.

    Returns:
        ([(messages, continued attempt or None)] in sample order, the number of conversations that
        did not fit and fell back to `fresh`). Pure: no I/O.
    """
    chats: list[Prompt] = []
    over = 0
    for a in continued_attempts(previous, samples):
        try:
            messages = refinement_turn(
                a.messages or fresh, a.response, a.turn_feedback(), token_budget, count_tokens, max_chars
            )
        except ValueError:
            over += 1
            chats.append((fresh, None))
            continue
        chats.append((messages, a))
    if not chats:
        return [(fresh, None)] * samples, 0
    return [chats[i % len(chats)] for i in range(samples)], over


def _larger_spread(first: EvalResult, second: EvalResult) -> float | None:
    """The larger of the two measurements' `speedup_spread`s (None when neither has one)."""
    spreads = [x for x in (first.speedup_spread, second.speedup_spread) if x is not None]
    return max(spreads) if spreads else None


def _solution(a: Attempt, speedup: float, spread: float | None, opinion: SecondOpinion | None, priced: Any) -> Solution:
    return Solution(
        a.code or "",
        float(speedup),
        spread,
        list(a.result.labels),
        a.sections.get("analysis", ""),
        a.sections.get("design", ""),
        a.origin,
        a.result,
        opinion,
        priced.speedup,
        priced.reason,
    )


def _emitter(callback: ProgressCallback | None, task_id: str) -> Callable[..., None]:
    def emit(event: str, **fields: Any) -> None:
        if callback is None:
            return
        try:
            callback({"event": event, "task_id": task_id, **fields})
        except Exception:  # noqa: BLE001 - a progress sink must not stop the work
            log.exception("progress callback failed on %s", event)

    return emit
