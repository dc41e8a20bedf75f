"""A learning check that multi-turn RL teaches the second turn to read the evaluator's report, not
only the previous code: the report carries what the prompt does not (the size the task ran at).

Set-up (issue 26; the machinery is `benchmarks/multiturn_learning.py`'s, which this script
subclasses):

- Task: level1/17's reference program (MSE loss) with two size profiles, "wide" (2048 x 4096,
  2**23 elements) and "narrow" (1025 x 2048). The prompt shows that source, both profiles in it,
  and never which one an episode runs at. Each step's group is split in two: half the episodes
  are evaluated at "wide", half at "narrow" (two standalone tasks of one source, each evaluated by
  a CPU worker at its profile: `ProfilePool`).
- Variants (`code`): "slow" (`real_reward_learning`'s chunked loop, chunks of 1024: correct at
  both profiles, 0.05-0.1x); "wide" (`F.mse_loss` over rows of 4096: correct and fast at "wide",
  a runtime error at "narrow", whose 1025 * 2048 elements are no multiple of 4096); "narrow" (the
  same over rows of 1025: correct and fast at "narrow", a runtime error at "wide", 2**23 being no
  multiple of 1025). A kernel specialised to one shape, as real ones are.
- SFT (`GRPOLearner.sft_step`): turn 1 (the plain prompt) -> "slow"; turn 2 after the slow
  answer and the evaluator's report on it, at either profile, and after the slow answer without
  a report (the no-report control's prompt) -> "wide" or "narrow", about half each. The two
  reports differ only in figures (the reference and the loop run about 4x longer at "wide"). A
  turn-2 target's analysis first says what it read of the reference time, "long" or "short" of
  the two profiles' (or "unknown" without a report: `analysis`), then names its choice: SFT
  teaches the reading, and either choice after every reading, so which code goes with which
  reading is left to RL. After SFT the last turn is right half the time at either profile, with
  or without the report.
- RL: `multiturn_learning.Experiment.run_rl` unchanged (two turns, per-turn returns `best_later`,
  leave-one-out baseline per turn, the real evaluator, weights back to vLLM). An episode's goal is
  its profile's variant.
- Criterion (`multiturn_learning.learned`): over the last two steps, turn 2 is the goal in at
  least 0.8 of the episodes, reached after a turn 1 that was not (turn 1 is the loop).
- Controls from the same SFT checkpoint: learning rate 0; advantages negated; and the report
  removed from turn 2's prompt (`feedback="none"`). Without the report the turn-2 prompt is the
  same text at both profiles, so no policy is right in more than half the episodes in
  expectation: this control fails for want of the report, which is what the check is for. None
  may meet the criterion over any two consecutive steps (`ever_learned`).

Each (variant, profile) is measured once per experiment and reused (`MeasuredPool`, measures=1).

Recorded (docs/training.md, "Does the second turn read the report?"): with `SETTINGS` the real run
met the criterion (0.84 over its last two steps) and the three controls did not.

    python benchmarks/report_learning.py --work-dir W --out W/runs.jsonl
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import multiturn_learning as mtl  # noqa: E402
import real_reward_learning as rrl  # noqa: E402

PROFILES: dict[str, dict[str, int]] = {
    "wide": {"BATCH": 2048, "DIM": 4096},
    "narrow": {"BATCH": 1025, "DIM": 2048},
}
KINDS = ("slow", "wide", "narrow")
BODIES = {
    "wide": "return F.mse_loss(p.view(-1, 4096), t.view(-1, 4096))",
    "narrow": "return F.mse_loss(p.view(-1, 1025), t.view(-1, 1025))",
}
DESIGN = "Return the result tensor."
"""Every SFT target's design line (at least the reward's `min_section_chars`, 20, long)."""
SECOND = ("wide", "narrow")
"""Turn 2's SFT targets after the slow answer, at either profile."""
SETTINGS = mtl.Settings(group=32, steps=30, min_clean=0.97, sft_rounds=40)
"""This experiment's defaults: 32 episodes a step (16 at each profile) and an SFT that leaves
less to chance (each context's targets at 0.97 of the probability, so fewer garbled answers):
at 16 episodes and 0.93 the real run stayed near half right over 30 steps."""


def profiled_source(source: str) -> str:
    """`source` (level1/17's file) with its SIZE_PROFILES replaced by `PROFILES` (and its comment
    on the CUDA sizes dropped). Raises ValueError when the file has no SIZE_PROFILES block."""
    block = "SIZE_PROFILES = " + json.dumps(PROFILES, indent=4).replace("\n}", ",\n}") + "\n"
    out, n = re.subn(r"(# cuda:[^\n]*\n)?SIZE_PROFILES = \{.*?\n\}\n", lambda _: block, source, flags=re.S)
    if n != 1:
        raise ValueError("no SIZE_PROFILES block to replace")
    return out


def code(kind: str) -> str:
    """The `ModelNew` module of variant `kind` (one of `KINDS`)."""
    if kind == "slow":
        return mtl.code("level1/17", "slow")
    return rrl.HEADER.format(args="p, t") + "        " + BODIES[kind] + "\n"


READINGS = ("long", "short", "unknown")
"""What a turn-2 analysis says of the reference time in the report it answers: "long" (the longer
of the two profiles' measured times), "short" (the shorter), "unknown" (no report shown)."""


def analysis(kind: str, reading: str = "unknown") -> str:
    """The analysis line of an SFT answer of variant `kind`: turn 1's loop says what it is; a shaped
    variant says what it read of the reference time (`READINGS`), then names its choice."""
    if kind == "slow":
        return mtl.TEXT["slow"][0]
    return f"Reference time {reading} {kind} rows in one call."


def answer(kind: str, reading: str = "unknown") -> str:
    """The whole SFT answer (`sft_response`) of variant `kind` (`analysis`, `DESIGN`, `code`)."""
    from cudal1.policy.prompts import sft_response

    return sft_response(code(kind), analysis(kind, reading), DESIGN)


def classify(source: str | None) -> str:
    """Which of `KINDS` a response's code is (after `normalized_code`), else "other"."""
    from cudal1.rl.similarity import normalized_code

    if source is None:
        return "other"
    mine = normalized_code(source)
    return next((k for k in KINDS if mine == normalized_code(code(k))), "other")


class ProfilePool:
    """The `evaluate_many` / `stream` of a benchmark pool over several size profiles: a candidate of
    task `tasks[i]` goes to a `MeasuredPool` whose CPU worker runs at that task's profile, carrying
    the task (a standalone task no suite holds). `tasks`: {task_id: (Task, profile)}."""

    def __init__(self, tasks: dict[str, tuple[Any, str]]) -> None:
        self.tasks = tasks
        self.pools = {tid: rrl.MeasuredPool(False, 1, {"size_profile": p}) for tid, (_, p) in tasks.items()}

    def _route(self, candidate: Any) -> Any:
        import dataclasses

        task, _ = self.tasks[candidate.task_id]
        return dataclasses.replace(candidate, task=task.to_dict())

    def first(self, candidate: Any) -> Any:
        return self.pools[candidate.task_id].first(self._route(candidate))

    def evaluate_many(self, candidates: Sequence[Any], progress: bool = False, avoid: Any = None) -> list[Any]:
        return [self.pools[c.task_id].evaluate_many([self._route(c)], avoid=avoid)[0] for c in candidates]

    def stream(self, progress: bool = False) -> "rrl.BatchStream":
        return rrl.BatchStream(self)  # type: ignore[arg-type]

    def new_step(self) -> None:
        for pool in self.pools.values():
            pool.new_step()

    @property
    def evaluations(self) -> int:
        return sum(p.evaluations for p in self.pools.values())

    @property
    def reused(self) -> int:
        return sum(p.reused for p in self.pools.values())

    def save(self, path: Path) -> None:
        """`MeasuredPool.save` of every profile's pool, into one file."""
        path.write_text("".join(json.dumps(row) + "\n" for pool in self.pools.values() for row in pool.rows()))

    def load(self, path: Path) -> int:
        """`MeasuredPool.load`, each line into its task's pool (lines of other tasks are skipped).
        Returns how many were taken."""
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return sum(pool.take([r for r in rows if r["task_id"] == tid]) for tid, pool in self.pools.items())


class Experiment(mtl.Experiment):
    """`multiturn_learning.Experiment` on the two-profile task (module docstring)."""

    def __init__(self, model_dir: Path, generator: Any, settings: mtl.Settings, work_dir: Path) -> None:
        from cudal1.policy.prompts import plain_prompt
        from cudal1.tasks.task import STANDALONE, Task

        super().__init__(model_dir, generator, settings, work_dir)
        self.source = profiled_source(self.task.source)
        self.profile_of: dict[str, str] = {}
        self.tasks = []
        for profile in PROFILES:
            task = Task(0, 0, f"mse_{profile}", self.source, suite=STANDALONE, size_profiles=tuple(PROFILES))
            self.tasks.append(task)
            self.profile_of[task.task_id] = profile
        self.task = self.tasks[0]
        self.prompt = plain_prompt(self.source)
        self.kinds = KINDS
        self.results: dict[str, Any] = {}  # "<kind>@<profile>" -> EvalResult

    @functools.cached_property
    def pool(self) -> Any:
        """Each task's evaluations at its own profile (`ProfilePool`), made on first use."""
        return ProfilePool({t.task_id: (t, self.profile_of[t.task_id]) for t in self.tasks})

    def answer(self, kind: str) -> str:
        return answer(kind)

    def target(self, context: str, kind: str) -> str:
        """After the report at a profile, the shaped variants' analysis reads that report's
        reference time ("long" or "short" of the two, `reading`), without a report "unknown"; SFT
        teaches either choice after every reading, so which code goes with which reading is left
        to RL."""
        profile = context.removeprefix("after_slow_")
        return answer(kind, self.reading(profile) if profile in PROFILES else "unknown")

    def reading(self, profile: str) -> str:
        """ "long" or "short": the slow loop's measured reference time at `profile` against the
        other profile's."""
        ms = {p: self.results[f"slow@{p}"].reference.median_ms for p in PROFILES}
        return "long" if ms[profile] >= max(ms.values()) else "short"

    def kind_of(self, source: str | None, task_id: str) -> str:
        return classify(source)

    def goal(self, task_id: str) -> str:
        return self.profile_of[task_id]

    def measure(self, attempts: int = 1) -> dict[str, dict[str, Any]]:
        """Evaluate every variant at both profiles (the results every later use gets). Raises
        RuntimeError unless "slow" is correct at both, each shaped variant is correct at its own
        profile and a runtime error at the other, and the slow loop's two reports differ.
        Returns {"<kind>@<profile>": {"status", "speedup", "report"}}."""
        from cudal1.bench.result import Status
        from cudal1.records import Candidate

        for task in self.tasks:
            profile = self.profile_of[task.task_id]
            for kind in KINDS:
                r = self.pool.first(Candidate(task.task_id, code(kind), kind))
                self.results[f"{kind}@{profile}"] = r
                want = Status.OK if kind in ("slow", profile) else Status.RUNTIME_ERROR
                if r.status is not want:
                    raise RuntimeError(f"{kind} at {profile}: {r.status.value} ({r.message}), expected {want.value}")
        out = {
            k: {"status": r.status.value, "speedup": r.speedup, "report": report_text(r)}
            for k, r in self.results.items()
        }
        if out["slow@wide"]["report"] == out["slow@narrow"]["report"]:
            raise RuntimeError("the slow loop's reports are the same text at both profiles")
        return out

    def second_prompt(self, first: str, report: bool = True, profile: str = "wide") -> list[dict[str, str]]:
        """Turn 2's prompt after turn-1 answer `first` evaluated at `profile`."""
        return super().second_prompt(first, report, result=f"{first}@{profile}")

    def sft_contexts(self) -> dict[str, tuple[list[dict[str, str]], tuple[str, ...]]]:
        """`contexts` with the report, and "no_report_after_slow" (the turn-2 prompt without it,
        one text at both profiles): the no-report control starts where the real run does."""
        return {**self.contexts(True), "no_report_after_slow": (self.second_prompt("slow", False), SECOND)}

    def contexts(self, report: bool = True) -> dict[str, tuple[list[dict[str, str]], tuple[str, ...]]]:
        """{context: (prompt, its SFT targets)}: "turn1" and "after_slow_<profile>" per profile."""
        out = {"turn1": (self.prompt, ("slow",))}
        for profile in PROFILES:
            out[f"after_slow_{profile}"] = (self.second_prompt("slow", report, profile), SECOND)
        return out


def report_text(result: Any) -> str:
    """The evaluator's report on `result`, as turn 2 shows it."""
    from cudal1.policy.prompts import Feedback

    return Feedback.of(result).report()


if __name__ == "__main__":
    raise SystemExit(mtl.main(make=Experiment, description=__doc__.splitlines()[0], defaults=SETTINGS))
