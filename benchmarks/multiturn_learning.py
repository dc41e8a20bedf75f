"""A learning check of multi-turn refinement on the real reward: does RL with episodes of two turns
teach a policy to answer the evaluator's report on its first attempt with the faster correct
program?

Set-up (issue 26, "a learning test on the real reward"; the machinery is
`benchmarks/real_reward_learning.py`'s, which this script imports):

- Task: the builtin level1/17 (MSE loss), with three `ModelNew` variants of
  `real_reward_learning.FIVE`: "slow" (a Python loop over chunks, correct, 0.05-0.1x the
  reference), "fast" (`F.mse_loss`, correct, 3-20x the loop) and "failing" (a sum instead of a
  mean: the evaluator says "incorrect").
- Policy: the embedded small model (`cudal1.policy.small.init_small`). SFT (`GRPOLearner.sft_step`)
  teaches, in the required three-section format:
  turn 1 (the plain prompt, `plain_prompt`) -> the slow or the failing variant, about half each,
  never the fast one; turn 2 (`refinement_turn`: the plain prompt, that answer, and the evaluator's
  report on it, as the episodes build it) -> after the slow answer the fast or the failing variant,
  after the failing answer the fast or the slow variant, about half each. So after SFT the
  last turn writes the fast variant about half the time, and only after a report.
  SFT stops once, in each of the three contexts, the two targets' sequence probabilities add up
  to at least `min_clean` and each holds 0.3-0.7 of their sum (`sft_balanced`).
- RL: the project's pieces, unchanged. Per step `cudal1.pipeline.episodes.sample_episodes`
  (turns 2, no early stop) samples `group` episodes: turn 1 from the plain prompt, turn 2 from
  the conversation with the report (`feedback`), the real evaluator (`cudal1.bench`, CPU backend)
  judging both, `cudal1.rl.rewards` pricing them (a turn-2 copy of turn 1 earns the copy price);
  `assign_episode_advantages` (per-turn returns, `best_later`, gamma 0.4; leave-one-out baseline
  per turn; std scale), `update_examples` (each turn its own example, prompt masked),
  `GRPOLearner.grpo_step`, weights back to vLLM. Every run starts from the same SFT checkpoint.
- Measured per step: each variant's share of turn 1's and of turn 2's responses, and "refined",
  the share of episodes whose turn 1 is not the fast variant and whose turn 2 is.
- Criterion (`learned`): over the last two steps, turn 2's fast share is at least 0.8 and the
  refined share at least 0.6 (so the fast answers at the last turn come after a first answer that
  was not fast: turn 1 alone does not explain them).
- Controls, from the same SFT checkpoint: learning rate 0; every advantage negated; and the report
  removed from turn 2's prompt (`feedback="none"`: the previous answer and the closing
  instruction only, `stage.contrastive_rl.feedback=none`). None may meet the criterion over any
  two consecutive steps (`ever_learned`).

The evaluator is slow here, so each distinct program is measured once per experiment and reused
(`real_reward_learning.MeasuredPool`, `measures=1`): the reports the policy sees for the slow and
the failing variant are the same text at every step, the ones SFT trained on.

    python benchmarks/multiturn_learning.py --work-dir W --out W/runs.jsonl
    python benchmarks/multiturn_learning.py --work-dir W --reuse-sft --runs real --seed 1

Prints the shares per step, one JSON line per run, and writes them all with --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import real_reward_learning as rrl  # noqa: E402  (the single-turn experiment's machinery)

log = logging.getLogger("multiturn_learning")

KINDS = ("slow", "fast", "failing")
TEXT: dict[str, tuple[str, str]] = {
    # (analysis, design) of each SFT target; the first analysis word carries the choice, every
    # line is at least the reward's `min_section_chars` (20) long.
    "slow": ("A Python loop over chunks.", "Return the result tensor."),
    "fast": ("One vectorized torch call.", "Return the result tensor."),
    "failing": ("Drop a step to save time.", "Return the result tensor."),
}
FIRST = ("slow", "failing")
"""Turn 1's SFT targets."""
SECOND = {"slow": ("fast", "failing"), "failing": ("fast", "slow")}
"""Turn 2's SFT targets after each turn-1 answer."""


def code(task_id: str, kind: str) -> str:
    """The `ModelNew` module of `task_id`'s variant `kind` (one of `KINDS`)."""
    return rrl.variant_code(task_id, "five:" + {"slow": "copy"}.get(kind, kind))


def answer(task_id: str, kind: str) -> str:
    """The whole SFT answer (`sft_response`) of variant `kind`."""
    from cudal1.policy.prompts import sft_response

    return sft_response(code(task_id, kind), *TEXT[kind])


def classify(source: str | None, task_id: str) -> str:
    """Which of `KINDS` a response's code is (after `normalized_code`), else "other"."""
    from cudal1.rl.similarity import normalized_code

    if source is None:
        return "other"
    mine = normalized_code(source)
    for kind in KINDS:
        if mine == normalized_code(code(task_id, kind)):
            return kind
    return "other"


@dataclasses.dataclass
class Settings:
    """One experiment's knobs (learning rates are AdamW's; a step is one batch of episodes, one
    `grpo_step` over all their turns, one weight sync)."""

    task: str = "level1/17"
    group: int = 16  # episodes per step (one prompt: the group)
    steps: int = 12
    turns: int = 2
    lr: float = 1e-4
    gamma: float = 0.4
    turn_return: str = "best_later"
    baseline: str = "loo"
    sft_lr: float = 5e-3
    sft_warmup: int = 10
    sft_rounds: int = 25
    sft_chunk: int = 20
    min_clean: float = 0.93
    micro_batch: int = 8
    max_tokens: int = 160
    max_model_len: int = 4096
    min_ratio: float = 1.5  # fast / slow at least (3-20x on an idle machine; 2.1x once at load 30)
    loss_agg: str = "grpo"
    seed: int = 0


class Experiment:
    """SFT once (the three contexts of `FIRST` and `SECOND`), then RL runs of episodes that each
    start from the SFT weights. `generator`: a vLLM `RolloutGenerator` on `model_dir` (its weights
    are replaced by each run; `restore_generator` puts the initial ones back)."""

    def __init__(self, model_dir: Path, generator: Any, settings: Settings, work_dir: Path) -> None:
        from cudal1.policy.model import chat_token_counter, load_tokenizer
        from cudal1.policy.prompts import plain_prompt
        from cudal1.tasks import find_task, load_tasks

        self.model_dir, self.generator, self.s, self.work_dir = Path(model_dir), generator, settings, Path(work_dir)
        self.tokenizer = load_tokenizer(model_dir)
        self.count = chat_token_counter(self.tokenizer)
        self.task = find_task(load_tasks("builtin"), settings.task)
        self.prompt = plain_prompt(self.task.source)
        self.tasks = [self.task]  # one group of episodes per task per step, all on `prompt`
        self.kinds: tuple[str, ...] = KINDS
        self.results: dict[str, Any] = {}
        self.sft_dir: Path | None = None
        self.sft_report: dict[str, Any] = {}

    @functools.cached_property
    def pool(self) -> Any:
        """The evaluations of this experiment, made on first use (a subclass's tasks are set by
        then): a CPU `MeasuredPool` measuring each program once."""
        return rrl.MeasuredPool(False, 1)

    def measure(self, attempts: int = 3) -> dict[str, dict[str, Any]]:
        """Evaluate the three variants (the results every later use of them gets). slow and fast
        must be correct and told apart (fast at least `min_ratio` × slow and their log-ratio above
        both spreads, `real_reward_learning._told_apart`); a pair that is not is measured again,
        up to `attempts` times. Raises RuntimeError when a variant is not what it should be or the
        pair is never told apart. Returns {kind: {"status", "speedup", "report"}, "attempts": n}."""
        from cudal1.bench.result import Status
        from cudal1.policy.prompts import Feedback
        from cudal1.records import Candidate

        tid = self.task.task_id
        for attempt in range(1, attempts + 1):
            for kind in KINDS:
                self.results[kind] = self.pool.first(Candidate(tid, code(tid, kind), kind))
            slow, fast, failing = (self.results[k] for k in KINDS)
            if slow.status is not Status.OK or fast.status is not Status.OK:
                raise RuntimeError(
                    f"slow {slow.status.value} ({slow.message}), fast {fast.status.value} ({fast.message})"
                )
            if failing.correct:
                raise RuntimeError("the failing variant passed the evaluator")
            pair = {
                "slow": slow.speedup,
                "fast": fast.speedup,
                "slow_spread": slow.speedup_spread or 0.0,
                "fast_spread": fast.speedup_spread or 0.0,
            }
            if rrl._told_apart(pair, self.s.min_ratio):
                out: dict[str, Any] = {
                    k: {"status": r.status.value, "speedup": r.speedup, "report": Feedback.of(r).report()}
                    for k, r in self.results.items()
                }
                out["attempts"] = attempt
                return out
            log.warning("slow and fast not told apart on attempt %d: %s", attempt, pair)
            for kind in ("slow", "fast"):
                self.pool.forget(tid, code(tid, kind))
        raise RuntimeError(f"slow and fast were not told apart in {attempts} attempts: {pair}")

    def second_prompt(self, first: str, report: bool = True, result: str | None = None) -> list[dict[str, str]]:
        """Turn 2's prompt after turn-1 answer `first`, as `continue_episodes` builds it, with the
        evaluator's report on `results[result]` (None: `results[first]`)."""
        from cudal1.policy.prompts import Feedback, refinement_turn

        budget = self.s.max_model_len - self.s.max_tokens
        fb = Feedback.of(self.results[result or first])
        return refinement_turn(self.prompt, self.answer(first), fb, budget, self.count, report=report)

    def answer(self, kind: str) -> str:
        """The whole answer of variant `kind` (as turn 2's prompt shows a turn-1 answer)."""
        return answer(self.task.task_id, kind)

    def target(self, context: str, kind: str) -> str:
        """The SFT answer of variant `kind` in `context` (here: `answer`, the same in every context)."""
        return self.answer(kind)

    def kind_of(self, source: str | None, task_id: str) -> str:
        """Which of `kinds` a response's code is, else "other"."""
        return classify(source, task_id)

    def goal(self, task_id: str) -> str:
        """The variant the last turn should reach on `task_id`'s episodes."""
        return "fast"

    def contexts(self, report: bool = True) -> dict[str, tuple[list[dict[str, str]], tuple[str, ...]]]:
        """{context: (prompt, its SFT targets)}: "turn1", "after_slow", "after_failing"."""
        out = {"turn1": (self.prompt, FIRST)}
        for first, targets in SECOND.items():
            out[f"after_{first}"] = (self.second_prompt(first, report), targets)
        return out

    def sft_contexts(self) -> dict[str, tuple[list[dict[str, str]], tuple[str, ...]]]:
        """The contexts SFT trains on and checks (`contexts` with the report)."""
        return self.contexts(True)

    def _examples(
        self, report: bool = True, kinds: tuple[str, ...] | None = None, contexts: Any = None
    ) -> list[tuple[str, str, Any]]:
        """(context, kind, PolicyExample) per SFT target (or per `kinds` in every context) of
        `contexts` (None: `contexts(report)`)."""
        from cudal1.pipeline.stages import response_ids
        from cudal1.policy.model import chat_prompt_ids
        from cudal1.records import PolicyExample

        out = []
        for name, (messages, targets) in (contexts if contexts is not None else self.contexts(report)).items():
            ids = chat_prompt_ids(self.tokenizer, messages)
            for kind in kinds or targets:
                out.append((name, kind, PolicyExample(ids, response_ids(self.tokenizer, self.target(name, kind)))))
        return out

    def sequence_probs(
        self, learner: Any, report: bool = True, every: bool = False, contexts: Any = None
    ) -> dict[str, dict[str, float]]:
        """{context: {kind: P}}: each target's whole-sequence probability under the learner (`every`:
        every one of `kinds` in every context), in `contexts` (None: `contexts(report)`)."""
        rows = self._examples(report, self.kinds if every else None, contexts)
        scores = learner.score([ex for _, _, ex in rows])
        out: dict[str, dict[str, float]] = {}
        for (name, kind, _), lps in zip(rows, scores):
            out.setdefault(name, {})[kind] = math.exp(sum(lps))
        return out

    def run_sft(self) -> dict[str, Any]:
        """SFT until every context's two targets hold `min_clean`, split evenly (`sft_balanced`);
        export to `work_dir/sft`. Raises RuntimeError if it never gets there."""
        from cudal1.training import GRPOLearner

        t0 = time.perf_counter()
        examples = [ex for _, _, ex in self._examples(contexts=self.sft_contexts())]
        learner = GRPOLearner(self.model_dir, lr=self.s.sft_lr, micro_batch=len(examples), seed=self.s.seed)
        steps, probs, loss = 0, {}, float("nan")
        for _ in range(self.s.sft_rounds):
            for _ in range(self.s.sft_chunk):
                learner.set_lr(self.s.sft_lr * min(1.0, (steps + 1) / self.s.sft_warmup))
                loss = learner.sft_step(examples)["loss"]
                steps += 1
            probs = self.sequence_probs(learner, contexts=self.sft_contexts())
            log.info("sft step %d: loss %.4f, %s", steps, loss, _fmt(probs))
            self.sft_dir = learner.export(self.work_dir / "sft")
            if all(rrl.sft_balanced(p, self.s.min_clean) for p in probs.values()):
                break
        else:
            raise RuntimeError(f"SFT did not reach {self.s.min_clean} balanced in {steps} steps: {_fmt(probs)}")
        self.sft_report = self._report(learner, steps, loss, t0)
        del learner
        return self.sft_report

    def use_sft(self, sft_dir: Path) -> dict[str, Any]:
        """Take an SFT checkpoint exported by an earlier `run_sft`; its report is recomputed."""
        t0 = time.perf_counter()
        learner = rrl.learner_at(sft_dir, 0.0, self.s)
        self.sft_dir = Path(sft_dir)
        self.sft_report = self._report(learner, None, None, t0)
        del learner
        return self.sft_report

    def _report(self, learner: Any, steps: Any, loss: Any, t0: float) -> dict[str, Any]:
        """The SFT checkpoint's probabilities: of each context's targets, and of all three variants
        with and without the report in turn 2's prompt."""
        return {
            "steps": steps,
            "loss": loss,
            "probs": self.sequence_probs(learner, contexts=self.sft_contexts()),
            "every": self.sequence_probs(learner, every=True),
            "every_no_report": self.sequence_probs(learner, report=False, every=True),
            "seconds": time.perf_counter() - t0,
        }

    def _ctx(self) -> Any:
        return rrl.run_context(self.s, self.tokenizer, self.generator, self.pool)

    def run_rl(self, name: str, lr: float, negate: bool = False, feedback: str = "report") -> dict[str, Any]:
        """One RL run of `steps` steps from the SFT weights (`group` episodes a step, split evenly
        over `tasks`). Returns {"name", "lr", "negate", "feedback", "turn<t>": {kind: share per
        step, "goal": the share of that turn's responses that are their episode's `goal`} for
        t = 1, 2, "refined" (per step: the share of episodes whose first turn is not the goal and
        whose last turn is), "reward" (mean per step, all turns), "reasons" (counts per turn over
        the run), "seconds", "evaluations" (the pool's, cumulative)}."""
        from cudal1.pipeline.episodes import assign_episode_advantages, sample_episodes
        from cudal1.pipeline.rollouts import reward_config, update_examples
        from cudal1.policy.model import load_policy

        if self.sft_dir is None:
            raise RuntimeError("run_sft first")
        t0 = time.perf_counter()
        ctx = self._ctx()
        rcfg = reward_config(ctx.cfg)
        model, _ = load_policy(self.sft_dir)
        self.generator.update_weights(list(model.named_parameters()), version=0)
        del model
        learner = rrl.learner_at(self.sft_dir, lr, self.s)
        turns = [f"turn{t}" for t in range(1, self.s.turns + 1)]
        trace: dict[str, Any] = {"name": name, "lr": lr, "negate": negate, "feedback": feedback}
        trace.update({t: {k: [] for k in (*self.kinds, "other", "goal")} for t in turns})
        trace.update(refined=[], reward=[], reasons={t: {} for t in turns})
        for step in range(self.s.steps):
            self.pool.new_step()
            rollouts = sample_episodes(
                ctx,
                self.tasks,
                [self.prompt] * len(self.tasks),
                self.s.group // len(self.tasks),
                step,
                turns=self.s.turns,
                feedback=feedback,
            )
            assign_episode_advantages(
                rollouts, rcfg, "std", gamma=self.s.gamma, form=self.s.turn_return, baseline=self.s.baseline
            )
            if negate:
                for r in rollouts:
                    r.advantage = -r.advantage
            episodes: dict[str, dict[int, str]] = {}
            goals: dict[str, str] = {}
            for r in rollouts:
                kind = self.kind_of(r.sections.get("code") if r.parse_error is None else None, r.task_id)
                episodes.setdefault(r.episode, {})[r.turn] = kind
                goals[r.episode] = self.goal(r.task_id)
                reasons = trace["reasons"][f"turn{r.turn}"]
                reasons[r.reward_reason] = reasons.get(r.reward_reason, 0) + 1
            for t, key in enumerate(turns, 1):
                kinds = [ep[t] for ep in episodes.values() if t in ep]
                for k in (*self.kinds, "other"):
                    trace[key][k].append(kinds.count(k) / len(kinds) if kinds else 0.0)
                hits = [ep[t] == goals[e] for e, ep in episodes.items() if t in ep]
                trace[key]["goal"].append(sum(hits) / len(hits) if hits else 0.0)
            last = self.s.turns
            trace["refined"].append(
                sum(1 for e, ep in episodes.items() if ep.get(1) != goals[e] and ep.get(last) == goals[e])
                / len(episodes)
            )
            trace["reward"].append(statistics.fmean(r.reward for r in rollouts))
            examples = update_examples(rollouts)
            if examples:
                learner.grpo_step(examples)
                self.generator.update_weights(learner.named_weights(), version=learner.version)
            log.info(
                "%s step %d: %s; refined %.2f; reward %.3f (%d examples; %d evaluations, %d reused)",
                name,
                step,
                "; ".join(
                    f"{key} " + " ".join(f"{k} {trace[key][k][-1]:.2f}" for k in (*self.kinds, "other", "goal"))
                    for key in turns
                ),
                trace["refined"][-1],
                trace["reward"][-1],
                len(examples),
                self.pool.evaluations,
                self.pool.reused,
            )
        trace["seconds"] = time.perf_counter() - t0
        trace["evaluations"] = self.pool.evaluations
        del learner
        return trace

    def restore_generator(self) -> None:
        """Give the generator the initial checkpoint's weights back (version 0)."""
        from cudal1.policy.model import load_policy

        model, _ = load_policy(self.model_dir)
        self.generator.update_weights(list(model.named_parameters()), version=0)


def _fmt(probs: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{c}: " + " ".join(f"{k} {v:.3f}" for k, v in p.items()) for c, p in probs.items())


def last_mean(values: list[float], last: int = 2) -> float:
    """The mean of the last `last` values."""
    return statistics.fmean(values[-last:])


def learned(
    trace: dict[str, Any], target: float = 0.8, refined: float = 0.6, turns: int = 2, end: int | None = None
) -> bool:
    """The criterion, over the two steps before `end` (None: the last two): the last turn's goal
    share (here: the fast variant's) is at least `target` of that turn's responses, and at least
    `refined` of the episodes reached the goal at the last turn after a first turn that was not it
    (turn 1 alone does not explain the last turn)."""
    fast, done = trace[f"turn{turns}"]["goal"][:end], trace["refined"][:end]
    return len(fast) >= 2 and last_mean(fast) >= target and last_mean(done) >= refined


def ever_learned(trace: dict[str, Any], turns: int = 2, **criterion: Any) -> bool:
    """Whether `learned` holds over any two consecutive steps of the run, not only the last two: a
    control must never get there (one that did and fell back by the end was not kept from
    learning)."""
    return any(learned(trace, turns=turns, end=end, **criterion) for end in range(2, len(trace["refined"]) + 1))


RUNS: dict[str, dict[str, Any]] = {
    # name -> run_rl's arguments (lr None: Settings.lr)
    "real": {"lr": None, "negate": False, "feedback": "report"},
    "lr0": {"lr": 0.0, "negate": False, "feedback": "report"},
    "negated": {"lr": None, "negate": True, "feedback": "report"},
    "no_report": {"lr": None, "negate": False, "feedback": "none"},
}


def run_named(exp: Experiment, name: str) -> dict[str, Any]:
    """`exp.run_rl` for the run `name` of `RUNS`, its trace completed with "learned" and the last
    two steps' means ("final": turn{T}'s goal share, "final_turn1": turn 1's, "final_refined")."""
    spec = RUNS[name]
    trace = exp.run_rl(name, exp.s.lr if spec["lr"] is None else spec["lr"], spec["negate"], spec["feedback"])
    t = exp.s.turns
    trace.update(
        final=last_mean(trace[f"turn{t}"]["goal"]),
        final_turn1=last_mean(trace["turn1"]["goal"]),
        final_refined=last_mean(trace["refined"]),
        learned=learned(trace, turns=t),
        ever_learned=ever_learned(trace, turns=t),
    )
    return trace


def shares_line(trace: dict[str, Any]) -> str:
    """The per-step goal shares of each turn and the refined share, for the log and the docs."""
    keys = sorted(k for k in trace if k.startswith("turn") and isinstance(trace[k], dict))
    parts = [f"{k} goal: " + " ".join(f"{x:.2f}" for x in trace[k]["goal"]) for k in keys]
    return "; ".join([*parts, "refined: " + " ".join(f"{x:.2f}" for x in trace["refined"])])


def main(
    argv: list[str] | None = None, make: Any = None, description: str | None = None, defaults: Settings | None = None
) -> int:
    """The command line (module docstring); `make`: the experiment's class (default `Experiment`),
    called as `Experiment` is; `defaults`: the settings the options default to (`Settings()`)."""
    make = make or Experiment
    d = defaults or Settings()
    ap = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--steps", type=int, default=d.steps)
    ap.add_argument("--group", type=int, default=d.group)
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sft-rounds", type=int, default=d.sft_rounds)
    ap.add_argument("--min-clean", type=float, default=d.min_clean)
    ap.add_argument("--out", type=Path, default=None, help="write the JSON lines here too")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep the small model and the SFT checkpoint here")
    ap.add_argument("--reuse-sft", action="store_true", help="start from WORK_DIR/sft when it exists")
    ap.add_argument("--measured", type=Path, default=None, help="JSONL of measurements to read and rewrite")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from cudal1.policy.small import init_small
    from cudal1.rollout import RolloutGenerator

    s = dataclasses.replace(
        d,
        group=args.group,
        steps=args.steps,
        lr=args.lr,
        seed=args.seed,
        sft_rounds=args.sft_rounds,
        min_clean=args.min_clean,
    )
    lines: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        model_dir = work / "small"
        if not (model_dir / "config.json").exists():
            init_small(model_dir, seed=0)
        with RolloutGenerator(
            model_dir, backend="vllm", dtype="float32", max_model_len=s.max_model_len, seed=s.seed, kv_cache_gib=0.25
        ) as gen:
            exp = make(model_dir, gen, s, work)
            if args.measured and args.measured.exists():
                log.info("%d measurements read from %s", exp.pool.load(args.measured), args.measured)
            print(json.dumps({"variants": exp.measure()}), flush=True)
            if args.measured:
                exp.pool.save(args.measured)
            reuse = args.reuse_sft and (work / "sft" / "config.json").exists()
            sft = exp.use_sft(work / "sft") if reuse else exp.run_sft()
            print(json.dumps({"sft": sft}), flush=True)
            for name in args.runs:
                trace = run_named(exp, name)
                lines.append(trace)
                if args.measured:
                    exp.pool.save(args.measured)
                print(
                    f"{name}: {shares_line(trace)}; learned {trace['learned']}, ever {trace['ever_learned']}",
                    flush=True,
                )
                print(json.dumps(trace), flush=True)
                if args.out:
                    args.out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
