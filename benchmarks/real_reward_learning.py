"""A learning check on the real reward: does the contrastive-RL stage's update teach a policy to pick
the faster of two correct programs, with the evaluator's measured speedups as the only signal?

Set-up (issue 9, "a learning test on the real reward"):

- Tasks: two builtin tasks with small outputs, level1/17 (MSE loss) and level1/3 (diagonal of a
  matmul). Each has two tiny, correct `ModelNew` variants written here: a slow one (a Python loop
  over small chunks of the inputs) and a fast one (one or two vectorized calls). On the CPU they
  measured 3-20x apart, beyond the evaluator's spread even on a loaded 2-core machine (small
  outputs keep the judge's fixed cost per call small; see docs/training.md for why elementwise
  tasks with large outputs did not work).
- Policy: the embedded small model (`cudal1.policy.small.init_small`, ~1M parameters). SFT
  (`GRPOLearner.sft_step`) teaches both variants, in the required three-section format, as the
  answer to the task's prompt (`task_prompt`; plain by default), so after SFT the policy writes
  each about half the time. SFT stops once, for every task, the learner's own sequence
  probabilities of the two targets add up to at least `min_clean` (few garbled samples) and the
  fast one's part of them lies in [0.3, 0.7]. The two targets differ from their first analysis
  token on ("A Python loop ..." / "One vectorized call ..."), so that token carries the choice.
- RL: the project's pieces, unchanged. Per step `cudal1.pipeline.rollouts.sample_rollouts`
  samples `group` responses per task from the vLLM generator, parses them, evaluates the
  candidates with the real evaluator (`cudal1.bench`, CPU backend, in sandboxed worker
  processes) and prices them (`cudal1.rl.rewards`); `learn_noise` (the pool's between-evaluation
  noise learned from repeated measurements, as the RL stage does: a fallback within it is a
  fallback; with `--measures K` the same K measurements recur, so their pairs recur too),
  `assign_advantages` (ties within that noise or the measured spread, then GRPO's group
  normalization), `update_examples`, `GRPOLearner.grpo_step`
  (DeepSpeed on the CPU), and the weights go back to the generator (`update_weights`). Every run
  starts from the same SFT checkpoint with a fresh optimizer.
- Measured: per step, the share of all sampled responses whose code is the fast variant (the
  parser's code, compared after `normalized_code`), the slow share, and the rest; the pass rate
  and the mean paid speedup (`rollout_metrics`, as the training job logs them).
- Controls: the same run with learning rate 0, with every advantage negated before the update,
  and with equal pay (`equal_pay`: every correct result paid as a 1.00x, so the two variants earn
  alike). None may reach the criterion (`learned`).

Five variants (`--variants five`, issue 23: does RL pay progress over the exemplar the prompt
shows, not copies or fallbacks?):

- Prompt: `contrastive_prompt` showing the task's exemplar (`FIVE[task]["copy"]`: level1/17's slow
  loop, level1/3's `(A @ B.T).diagonal()`) as its one earlier solution, with the speedup
  `measure_variants` measured for it; `sample_rollouts` gets that code as the prompt's `shown`, so
  the reward's copy check (`price`, `normalized_code`) compares each response with it.
- SFT targets, five per task, trained until each holds 0.12-0.28 of their summed probability
  (`sft_balanced`): an exact copy of the exemplar, a renamed copy (arguments and loop names
  renamed, a comment added: the same `normalized_code`), the reference's own expression as
  `ModelNew` (a fallback: the evaluator labels it `calls_reference_ops` and it measures no
  gain), a strictly faster variant (level1/17 `F.mse_loss`, 3-20x the loop; level1/3
  `(A * B).sum(1)`, N*K instead of N*N*K multiply-adds, 12x the reference measured once), and a
  failing one (level1/17: a sum, not a mean, wrong output; level1/3: a method that does not
  exist, a runtime error). Priced by the project's reward, the copies, the fallback and the failure
  all earn the failure reward; only the fast variant is paid its speedup.
- Measured per step: each kind's share of all responses (`classify`); `learned` also needs the
  copies, renamed copies and fallbacks together under 0.1 of all responses over the last two
  steps. The controls are the same three.

One shortcut, said plainly: the evaluator is slow (3-90 s per candidate on a loaded 2-core
machine), so each distinct program (task and `normalized_code`) is measured a bounded number of
times per experiment and its results reused whenever the policy writes it again (`MeasuredPool`);
a new code (e.g. a garbled one) is measured when it first appears. `--measures K` (default 1)
measures a program afresh in each of the first K steps that ask for it and then cycles through
those K measurements, so with K = 2 one code is paid from two separate evaluations, and the
between-evaluation noise (larger than either evaluation's own spread, docs/benchmarks.md) acts on
the ranking, at most K times the cost of measuring once. Why not afresh at every step, as the
training job does (`--remeasure`, still there): with about eight programs a step and 3-90 s an
evaluation, 12 steps of four runs would take hours on this machine; K = 2 is the least that lets
noise act, and the five-variant runs use it. `--measured FILE` keeps the measurements for a
later invocation. The variants themselves are measured before RL, again
(up to three times) while a pair is not told apart, and the run stops if one never is
(`measure_variants`).

    python benchmarks/real_reward_learning.py                       # SFT, the run and the three controls
    python benchmarks/real_reward_learning.py --work-dir W --reuse-sft --runs real --lr 3e-4
    python benchmarks/real_reward_learning.py --variants five --measures 2 --min-clean 0.93 --sft-rounds 25

Prints the share per step, one JSON line per run, and writes them all with --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cudal1.bench.result import EvalResult, Status

log = logging.getLogger("real_reward_learning")

HEADER = "import torch\nimport torch.nn.functional as F\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, {args}):\n"
VARIANTS: dict[str, tuple[str, str, str]] = {
    # task -> (forward's arguments, slow body, fast body). The slow bodies loop in Python over
    # small chunks of the inputs (one or two tiny ops per chunk); the fast ones are one or two
    # vectorized calls. Both are correct; the outputs are small (a scalar, a vector), so the
    # judge's fixed cost per call stays small next to the call itself.
    "level1/17": (
        "p, t",
        "return torch.stack([((a - b) ** 2).sum() for a, b in zip(p.view(-1, 1024), t.view(-1, 1024))]).sum() / p.numel()",
        "return F.mse_loss(p, t)",
    ),
    "level1/3": (
        "A, B",
        "return torch.stack([a @ b for a, b in zip(A.view(-1, 16), B.view(-1, 16))]).view(len(A), -1).sum(1)",
        "return (A @ B.T).diagonal()",
    ),
}
# The analysis and design sections of the SFT targets: few tokens, because after SFT every target
# token keeps about the same small chance of going astray (measured: the target tokens other than
# the first analysis token all had p of 0.97 or more, most below 0.999), so each token removed is
# fewer garbled responses; yet each at least the reward's `min_section_chars` (20) long, or every
# response would be priced "format:missing_analysis". The first token differs ("A" / "One") and
# carries the choice; the design line is shared.
SLOW_TEXT = ("A Python loop over chunks.", "Return the result tensor.")
FAST_TEXT = ("One vectorized torch call.", "Return the result tensor.")

FIVE_KINDS = ("copy", "renamed", "fallback", "fast", "failing")
COPIES = ("copy", "renamed", "fallback")  # what the five-variant criterion holds under `max_copies`
FIVE: dict[str, dict[str, tuple[str, str]]] = {
    # task -> kind -> (forward's arguments, body). "copy" is the exemplar the prompt shows (level1/17:
    # the slow loop above, 0.05-0.1x; level1/3: the matmul's diagonal, as fast as the reference);
    # "renamed" is it with its arguments and loop names renamed and a comment; "fallback" is the
    # reference's own expression (every reference operator, no gain: the evaluator's
    # "calls_reference_ops"); "fast" is strictly faster than the exemplar (level1/17: 3-20x measured
    # for the two-variant runs; level1/3: N*K multiply-adds instead of the N*N*K of a full matmul);
    # "failing" gives a wrong output (level1/17: a sum, not a mean) or crashes (level1/3: no such
    # method).
    "level1/17": {
        "copy": ("p, t", VARIANTS["level1/17"][1]),
        "renamed": (
            "x, y",
            "# sum of squares per chunk\n        return torch.stack([((u - v) ** 2).sum() for u, v in "
            "zip(x.view(-1, 1024), y.view(-1, 1024))]).sum() / x.numel()",
        ),
        "fallback": ("p, t", "return torch.mean((p - t) ** 2)"),
        "fast": ("p, t", VARIANTS["level1/17"][2]),
        "failing": ("p, t", "return ((p - t) ** 2).sum()"),
    },
    "level1/3": {
        "copy": ("A, B", VARIANTS["level1/3"][2]),
        "renamed": ("X, Y", "# diagonal of the product\n        return (X @ Y.T).diagonal()"),
        "fallback": ("A, B", "return torch.diag(A @ B.T)"),
        "fast": ("A, B", "return (A * B).sum(1)"),
        "failing": ("A, B", "return A.diagonal_dot(B)"),
    },
}
# The five targets' analysis lines each start with their own word, which carries the choice (as
# "A" / "One" above); every line is at least the reward's `min_section_chars` (20) long.
FIVE_TEXT: dict[str, tuple[str, str]] = {
    "copy": ("Same code as Solution A.", "Return the result tensor."),
    "renamed": ("Rename Solution A's names.", "Return the result tensor."),
    "fallback": ("Call the reference ops.", "Return the result tensor."),
    "fast": ("One vectorized torch call.", "Return the result tensor."),
    "failing": ("Drop a step to save time.", "Return the result tensor."),
}


def variant_code(task_id: str, kind: str) -> str:
    """The complete `ModelNew` module of `task_id`'s variant `kind`: "slow" or "fast" of the two-variant
    experiment (`VARIANTS`), or one of `FIVE_KINDS` prefixed "five:" (`FIVE`; "five:copy" is the
    exemplar the five-variant prompt shows)."""
    if kind.startswith("five:"):
        args, body = FIVE[task_id][kind.removeprefix("five:")]
    else:
        args, slow, fast = VARIANTS[task_id]
        body = slow if kind == "slow" else fast
    return HEADER.format(args=args) + "        " + body + "\n"


def kinds_of(variants: str) -> tuple[str, ...]:
    """The SFT targets' kinds of an experiment: ("slow", "fast") or `FIVE_KINDS`."""
    if variants == "two":
        return ("slow", "fast")
    if variants == "five":
        return FIVE_KINDS
    raise ValueError(f"variants {variants!r} is not 'two' or 'five'")


def target_code(task_id: str, kind: str, variants: str) -> str:
    """The code of SFT target `kind` (a name of `kinds_of(variants)`)."""
    return variant_code(task_id, "five:" + kind if variants == "five" else kind)


def target_text(kind: str, variants: str) -> tuple[str, str]:
    """(analysis, design) of SFT target `kind`."""
    if variants == "five":
        return FIVE_TEXT[kind]
    return SLOW_TEXT if kind == "slow" else FAST_TEXT


@dataclasses.dataclass
class Settings:
    """One experiment's knobs. Learning rates are AdamW's; steps count RL steps (each: one
    rollout batch, one `grpo_step`, one weight sync)."""

    tasks: tuple[str, ...] = ("level1/17", "level1/3")
    group: int = 8  # responses per task and step (the GRPO group)
    steps: int = 12
    lr: float = 1e-4  # RL learning rate (3e-4 learned too, with more garbled responses: docs/training.md)
    sft_lr: float = 5e-3  # constant after `sft_warmup` steps (1e-2 stalled at a per-token loss of 0.2-0.4;
    # decaying it, by 0.95 per 20 steps or on a cosine, froze P(slow) + P(fast) at 0.87-0.88)
    sft_warmup: int = 10  # steps of linear warm-up to `sft_lr`
    sft_rounds: int = 40  # at most this many rounds of `sft_chunk` SFT steps
    sft_chunk: int = 20
    min_clean: float = 0.95  # SFT target: P(slow) + P(fast) per task, under the learner
    micro_batch: int = 8
    max_tokens: int = 160
    max_model_len: int = 4096  # the generator's
    min_ratio: float = 3.0  # the slow variant must measure at least this many times slower
    remeasure: bool = False  # measure every distinct code again at every step (unbounded cost)
    measures: int = 1  # else: measure each distinct code at most this many times, in its first steps
    prompt: str = "plain"  # or "contrastive" (`task_prompt`); five variants: always the exemplar's
    variants: str = "two"  # "two" (slow, fast) or "five" (`FIVE_KINDS`)
    loss_agg: str = "grpo"  # the RL learner's `LearnerConfig.loss_agg`: grpo | dr_grpo | dapo
    seed: int = 0


class MeasuredPool:
    """The `evaluate_many` and `stream` of a benchmark pool, on one in-process `BenchWorker` (the
    real evaluator, CPU backend), with a bounded number of measurements per program.

    A program is (task, `normalized_code`, second-opinion flag): a copy and a renamed copy of one
    code are one program, as `sample_rollouts` already treats them within a step. Each program is
    measured at most `measures` times over the experiment: in each of the first `measures` steps
    (`new_step()`) in which it is asked for, afresh; after that, the steps that ask for it cycle
    through those measurements in order (first, second, ..., first, ...), so separate
    measurements of one code, with their noise, keep alternating. Within one step a program always gets one result. `remeasure=True` measures every
    program afresh at every step (as the training job does), unbounded. A second opinion on an
    outlier (a call with `avoid`, `cudal1.pipeline.verify.verify_outliers`) is a program of its own,
    kept apart from the first. `settings`: the worker's evaluator settings (`EvalSettings` overrides
    of the CPU defaults, e.g. {"size_profile": ...}); None: the defaults."""

    def __init__(self, remeasure: bool = False, measures: int = 1, settings: dict[str, Any] | None = None) -> None:
        from cudal1.actors.bench_pool import BenchWorker

        if measures < 1:
            raise ValueError(f"measures must be >= 1, got {measures}")
        self.worker = BenchWorker("cpu", "cpu", settings)
        self.remeasure, self.measures = remeasure, measures
        self.memo: dict[tuple[str, str, bool], list[EvalResult]] = {}
        self.served: dict[tuple[str, str, bool], EvalResult] = {}  # this step's result per program
        self.sources: dict[tuple[str, str, bool], str] = {}  # the first source measured per program
        self.uses: dict[tuple[str, str, bool], int] = {}  # steps that asked for the program
        self.step = 0
        self.evaluations = 0
        self.reused = 0
        self.seconds = 0.0

    @staticmethod
    def key(task_id: str, source: str, second: bool = False) -> tuple[str, str, bool]:
        from cudal1.rl.similarity import normalized_code

        return task_id, normalized_code(source), second

    def forget(self, task_id: str, source: str) -> None:
        """Drop every first measurement of `source`'s program (`measure_variants` measures again)."""
        key = self.key(task_id, source)
        self.memo.pop(key, None)
        self.served.pop(key, None)

    def first(self, candidate: Any) -> EvalResult:
        """The program's first measurement, measured now when it has none (outside any step's count)."""
        key = self.key(candidate.task_id, candidate.source)
        kept = self.memo.setdefault(key, [])
        if not kept:
            t0 = time.perf_counter()
            kept.append(self.worker.evaluate(candidate))
            self.seconds += time.perf_counter() - t0
            self.evaluations += 1
            self.sources.setdefault(key, candidate.source)
        return dataclasses.replace(kept[0])

    def rows(self) -> list[dict[str, Any]]:
        """The measured results, one row per measurement: {"task_id", "source", "second", "result"}."""
        return [
            {"task_id": k[0], "source": self.sources[k], "second": k[2], "result": r.to_dict()}
            for k, results in self.memo.items()
            for r in results
        ]

    def save(self, path: Path) -> None:
        """Write `rows` as JSON lines."""
        path.write_text("".join(json.dumps(row) + "\n" for row in self.rows()))

    def load(self, path: Path) -> int:
        """Take the results `save` wrote (measured on this machine earlier) instead of measuring
        those codes again (`take`). Returns how many were read."""
        return self.take([json.loads(line) for line in path.read_text().splitlines() if line.strip()])

    def take(self, rows: list[dict[str, Any]]) -> int:
        """Keep `rows` (as `rows` gives them) as measurements, at most `measures` per program.
        Returns len(rows)."""
        for row in rows:
            key = self.key(row["task_id"], row["source"], bool(row["second"]))
            self.sources.setdefault(key, row["source"])
            kept = self.memo.setdefault(key, [])
            if len(kept) < self.measures:
                kept.append(EvalResult.from_dict(row["result"]))
        return len(rows)

    def new_step(self) -> None:
        self.step += 1
        self.served.clear()
        if self.remeasure:
            self.memo.clear()

    def evaluate_many(
        self, candidates: Sequence[Any], progress: bool = False, avoid: Sequence[Any] | None = None
    ) -> list[EvalResult]:
        out = []
        for c in candidates:
            key = self.key(c.task_id, c.source, avoid is not None)
            if key not in self.served:
                uses = self.uses[key] = self.uses.get(key, 0) + 1
                kept = self.memo.setdefault(key, [])
                if len(kept) < self.measures:
                    t0 = time.perf_counter()
                    kept.append(self.worker.evaluate(c))
                    self.seconds += time.perf_counter() - t0
                    self.evaluations += 1
                    self.sources.setdefault(key, c.source)
                    self.served[key] = kept[-1]
                else:
                    self.served[key] = kept[(uses - 1) % len(kept)]
                    self.reused += 1
            else:
                self.reused += 1
            out.append(dataclasses.replace(self.served[key]))
        return out

    def stream(self, progress: bool = False) -> "BatchStream":
        """A `PoolStream`-like evaluation that measures what was submitted when `results()` is called."""
        return BatchStream(self)


class BatchStream:
    """`cudal1.actors.bench_pool.PoolStream`'s interface over `MeasuredPool.evaluate_many`: collects
    the submitted candidates and evaluates them all in `results()` (which is then `started`)."""

    def __init__(self, pool: MeasuredPool) -> None:
        self.pool, self.candidates, self.started = pool, [], None

    def submit(self, candidates: Sequence[Any]) -> range:
        first = len(self.candidates)
        self.candidates += list(candidates)
        return range(first, len(self.candidates))

    def results(self) -> list[EvalResult]:
        self.started = time.perf_counter()
        return self.pool.evaluate_many(self.candidates)

    def __enter__(self) -> "BatchStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def task_prompt(task: Any, kind: str) -> tuple[list[dict[str, str]], list[str]]:
    """The chat prompt for `task` and the code it shows (a copy of that earns no gain).

    kind "plain": `plain_prompt` (what the RL stage sends for a task with no stored solution;
    about 550 tokens here). "contrastive": `contrastive_prompt` showing the task's reference
    (renamed ModelNew) as a 1.00x earlier solution (about 900 tokens, so every forward pass
    costs about 1.6x as much)."""
    from cudal1.policy.prompts import contrastive_prompt, plain_prompt
    from cudal1.records import Exemplar
    from cudal1.tasks.task import reference_as_candidate

    if kind == "plain":
        return plain_prompt(task.source), []
    if kind != "contrastive":
        raise ValueError(f"prompt kind {kind!r} is not 'plain' or 'contrastive'")
    shown = reference_as_candidate(task.source)
    return contrastive_prompt(task.source, [Exemplar(task.task_id, shown, 1.0, origin="reference")]), [shown]


def exemplar_prompt(task: Any, speedup: float) -> tuple[list[dict[str, str]], list[str]]:
    """The five-variant experiment's prompt for `task` and the code it shows: `contrastive_prompt`
    showing the task's exemplar (`FIVE[task]["copy"]`) as its one earlier solution, at `speedup`
    (x, as measured by `Experiment.measure_variants`)."""
    from cudal1.policy.prompts import contrastive_prompt
    from cudal1.records import Exemplar

    shown = variant_code(task.task_id, "five:copy")
    return contrastive_prompt(task.source, [Exemplar(task.task_id, shown, float(speedup), origin="rl")]), [shown]


def classify(code: str | None, task_id: str, variants: str = "two") -> str:
    """Which variant of `task_id` a response's code is: "fast", "slow" or "other" (two variants), or
    one of `FIVE_KINDS` or "other" (five). Programs are compared after `normalized_code`, except
    that the exemplar itself, AST for AST (formatting and comments aside), is "copy" and any other
    code of its program (renamed, a comment or a no-op added) is "renamed"."""
    import ast

    from cudal1.rl.rewards import normalized_code

    if code is None:
        return "other"
    mine = normalized_code(code)
    if variants == "five":
        exemplar = variant_code(task_id, "five:copy")
        if mine == normalized_code(exemplar):
            try:
                exact = ast.dump(ast.parse(code)) == ast.dump(ast.parse(exemplar))
            except (SyntaxError, ValueError):
                exact = False
            return "copy" if exact else "renamed"
        kinds: tuple[str, ...] = ("fallback", "fast", "failing")
    else:
        kinds = ("fast", "slow")
    for kind in kinds:
        if mine == normalized_code(target_code(task_id, kind, variants)):
            return kind
    return "other"


def run_context(s: Any, tokenizer: Any, generator: Any, pool: Any) -> Any:
    """The slice of a run's context that `sample_rollouts` and `sample_episodes` read: the rollout
    settings of `s` (max_model_len, max_tokens; temperature and top_p 1), the default reward, the
    tokenizer, the generator and `pool` as the primary pool, no exemplar buffer."""
    from cudal1.rl.rewards import RewardConfig

    rollout = SimpleNamespace(max_model_len=s.max_model_len, max_tokens=s.max_tokens, temperature=1.0, top_p=1.0)
    cfg = SimpleNamespace(rollout=rollout, reward=RewardConfig())
    return SimpleNamespace(
        cfg=cfg, tokenizer=tokenizer, generator=generator, pools=SimpleNamespace(primary=pool), buffer=None
    )


class Experiment:
    """SFT once, then RL runs that each start from the SFT weights.

    Args:
        model_dir: the initial policy checkpoint (the embedded small model).
        generator: a `RolloutGenerator` on that checkpoint (vLLM); its weights are replaced by
            each run and put back by `restore_generator`.
        settings: `Settings`.
        work_dir: where the SFT checkpoint is exported.
    """

    def __init__(self, model_dir: Path, generator: Any, settings: Settings, work_dir: Path) -> None:
        from cudal1.policy.model import load_tokenizer
        from cudal1.tasks import find_task, load_tasks

        self.model_dir, self.generator, self.s, self.work_dir = Path(model_dir), generator, settings, Path(work_dir)
        self.tokenizer = load_tokenizer(model_dir)
        tasks = load_tasks("builtin")
        self.tasks = [find_task(tasks, t) for t in settings.tasks]
        self.kinds = kinds_of(settings.variants)
        # Five variants: the prompts show the exemplar's measured speedup, so `measure_variants` builds them.
        self.prompts = (
            {} if settings.variants == "five" else {t.task_id: task_prompt(t, settings.prompt) for t in self.tasks}
        )
        self.pool = MeasuredPool(settings.remeasure, settings.measures)
        self.sft_dir: Path | None = None
        self.sft_report: dict[str, Any] = {}
        self.variant_results: dict[str, dict[str, Any]] = {}

    # ----- before RL

    def measure_variants(self, attempts: int = 3) -> dict[str, dict[str, Any]]:
        """Evaluate both variants of every task until the evaluator tells them apart: both
        correct, the slow one at least `min_ratio` times slower, and the log-ratio of their
        speedups above both spreads (else the reward's tie rule, `tie_clusters`, would pay them
        alike). A task whose pair does not pass is measured again, up to `attempts` times; the
        passing measurement is the one the RL runs reuse (with `Settings.measures` > 1, the first of
        them). A variant already measured (`--measured`) is not measured again here: its first
        measurement counts, so a reused SFT checkpoint sees the prompt it was trained on. Five variants: the pair is the exemplar ("slow") and the fast variant, and the prompts
        (`exemplar_prompt`) are built here, from the exemplar's speedup. Returns {task: {"slow",
        "fast": speedup (x), "slow_spread", "fast_spread", "attempts"}}. Raises RuntimeError when a
        variant is not correct, or a pair is still not told apart after `attempts`."""
        from cudal1.records import Candidate

        # Five variants: the exemplar (shown, and copied) is the pair's slow one.
        code = (
            {"slow": "five:copy", "fast": "five:fast"}
            if self.s.variants == "five"
            else {"slow": "slow", "fast": "fast"}
        )
        out: dict[str, dict[str, Any]] = {}
        pending = list(self.s.tasks)
        for attempt in range(1, attempts + 1):
            cands = [
                Candidate(t, variant_code(t, code[kind]), origin=kind) for t in pending for kind in ("slow", "fast")
            ]
            results = [self.pool.first(c) for c in cands]
            for c, r in zip(cands, results):
                if r.status is not Status.OK:
                    raise RuntimeError(f"{c.task_id} {c.origin} variant is {r.status.value}: {r.message}")
                v = out.setdefault(c.task_id, {})
                v[c.origin] = float(r.speedup)
                v[c.origin + "_spread"] = float(r.speedup_spread or 0.0)
                v["attempts"] = attempt
            apart = [t for t in pending if _told_apart(out[t], self.s.min_ratio)]
            for t in pending:
                if t not in apart:
                    log.warning("%s: variants not told apart on attempt %d: %s", t, attempt, out[t])
                    for kind in ("slow", "fast"):
                        self.pool.forget(t, variant_code(t, code[kind]))
            pending = [t for t in pending if t not in apart]
            if not pending:
                self.variant_results = out
                if self.s.variants == "five":
                    self.prompts = {t.task_id: exemplar_prompt(t, out[t.task_id]["slow"]) for t in self.tasks}
                return out
        raise RuntimeError(
            f"the evaluator did not tell the variants apart in {attempts} attempts on this machine now: "
            + "; ".join(f"{t}: {out[t]}" for t in pending)
        )

    def sft_examples(self) -> list[Any]:
        from cudal1.policy.model import chat_prompt_ids
        from cudal1.pipeline.stages import response_ids
        from cudal1.policy.prompts import sft_response
        from cudal1.records import PolicyExample

        if not self.prompts:
            raise RuntimeError("measure_variants first (the five-variant prompts show the exemplar's speedup)")
        examples = []
        for t in self.tasks:
            ids = chat_prompt_ids(self.tokenizer, self.prompts[t.task_id][0])
            for kind in self.kinds:
                text = sft_response(target_code(t.task_id, kind, self.s.variants), *target_text(kind, self.s.variants))
                examples.append(PolicyExample(ids, response_ids(self.tokenizer, text)))
        return examples

    def sequence_probs(self, learner: Any) -> dict[str, dict[str, float]]:
        """{task: {kind: P}} (kinds: "slow", "fast", or `FIVE_KINDS`): each SFT target's
        whole-sequence probability under the learner (exp of the summed token log-probabilities)."""
        examples = self.sft_examples()
        rows = iter(learner.score(examples))
        return {t: {kind: math.exp(sum(next(rows))) for kind in self.kinds} for t in self.s.tasks}

    def _hardest_tokens(self, learner: Any, examples: list[Any], k: int = 4) -> str:
        """The `k` target tokens with the lowest probability under the learner, over `examples`."""
        scored = [(lp, i, j) for i, row in enumerate(learner.score(examples)) for j, lp in enumerate(row)]
        worst = sorted(scored)[:k]
        return ", ".join(
            f"ex{i} #{j} {self.tokenizer.decode([examples[i].response_ids[j]])!r} p={math.exp(lp):.2f}"
            for lp, i, j in worst
        )

    def use_sft(self, sft_dir: Path) -> dict[str, Any]:
        """Take an SFT checkpoint exported by an earlier `run_sft` instead of training one; its
        report is recomputed ({"steps": None, "probs", "seconds"})."""

        t0 = time.perf_counter()
        learner = learner_at(sft_dir, 0.0, self.s)
        self.sft_dir = Path(sft_dir)
        self.sft_report = {
            "steps": None,
            "loss": None,
            "probs": self.sequence_probs(learner),
            "seconds": time.perf_counter() - t0,
        }
        del learner
        return self.sft_report

    def run_sft(self) -> dict[str, Any]:
        """SFT from the initial checkpoint until every task's targets hold `min_clean` of the
        probability, split about evenly (`sft_balanced`); export to `work_dir/sft`. Returns a
        report ({"steps", "loss", "probs", "seconds"}); raises RuntimeError if it never gets there."""
        from cudal1.training import GRPOLearner

        t0 = time.perf_counter()
        examples = self.sft_examples()
        learner = GRPOLearner(self.model_dir, lr=self.s.sft_lr, micro_batch=len(examples), seed=self.s.seed)
        steps, probs, loss = 0, {}, float("nan")
        for round_ in range(self.s.sft_rounds):
            for _ in range(self.s.sft_chunk):
                learner.set_lr(self.s.sft_lr * min(1.0, (steps + 1) / self.s.sft_warmup))
                loss = learner.sft_step(examples)["loss"]
                steps += 1
            probs = self.sequence_probs(learner)
            log.info(
                "sft step %d: loss %.4f, %s; least likely target tokens: %s",
                steps,
                loss,
                _fmt_probs(probs),
                self._hardest_tokens(learner, examples),
            )
            self.sft_dir = learner.export(self.work_dir / "sft")  # each round, so a long SFT is never lost
            if all(sft_balanced(p, self.s.min_clean) for p in probs.values()):
                break
        else:
            raise RuntimeError(
                f"SFT did not reach a sum of the targets' probabilities >= {self.s.min_clean} with a balanced "
                f"split in {steps} steps: {_fmt_probs(probs)}"
            )
        self.sft_report = {"steps": steps, "loss": loss, "probs": probs, "seconds": time.perf_counter() - t0}
        del learner
        return self.sft_report

    # ----- RL

    def _ctx(self) -> Any:
        return run_context(self.s, self.tokenizer, self.generator, self.pool)

    def run_rl(self, name: str, lr: float, negate: bool = False, pay: str = "measured") -> dict[str, Any]:
        """One RL run from the SFT weights: `steps` steps at `lr`, advantages negated when
        `negate`; `pay` "equal" pays every correct result alike (`equal_pay`). Returns {"name",
        "lr", "negate", "pay", each kind of `kinds_of(variants)` and "other" (share per step, of
        all responses), "reward" (mean per step), "pass_rate" and "paid" (per step: the share of
        responses paid as correct, reason "ok" or "ok:noisy", and their mean paid speedup in ×,
        None without any: `cudal1.pipeline.metrics.rollout_metrics`' "pass_rate" and
        "speedup/mean", as the training job logs them), "reasons" (counts over the run), "seconds"}."""
        from cudal1.pipeline.metrics import rollout_metrics
        from cudal1.pipeline.rollouts import (
            assign_advantages,
            learn_noise,
            reward_config,
            sample_rollouts,
            update_examples,
        )
        from cudal1.policy.model import load_policy
        from cudal1.rl.noise import tie_noise

        if self.sft_dir is None:
            raise RuntimeError("run_sft first")
        t0 = time.perf_counter()
        ctx = self._ctx()
        rcfg = reward_config(ctx.cfg)
        noise = tie_noise(rcfg)  # as the RL stage: ties and fallbacks within the pool's learned noise
        model, _ = load_policy(self.sft_dir)
        self.generator.update_weights(list(model.named_parameters()), version=0)
        del model
        learner = learner_at(self.sft_dir, lr, self.s)
        if pay not in ("measured", "equal"):
            raise ValueError(f"pay {pay!r} is not 'measured' or 'equal'")
        trace: dict[str, Any] = {"name": name, "lr": lr, "negate": negate, "pay": pay}
        trace.update({key: [] for key in (*self.kinds, "other")})
        trace.update(reward=[], pass_rate=[], paid=[], reasons={})
        for step in range(self.s.steps):
            self.pool.new_step()
            messages = [self.prompts[t.task_id][0] for t in self.tasks]
            shown = [self.prompts[t.task_id][1] for t in self.tasks]
            rollouts = sample_rollouts(ctx, self.tasks, messages, self.s.group, step, shown=shown)
            floors, _ = learn_noise(noise, rollouts, rcfg)
            if pay == "equal":
                equal_pay(rollouts)
            assign_advantages(rollouts, rcfg, "std", floors)
            if negate:
                for r in rollouts:
                    r.advantage = -r.advantage
            kinds = [
                classify(r.sections.get("code") if r.parse_error is None else None, r.task_id, self.s.variants)
                for r in rollouts
            ]
            for key in (*self.kinds, "other"):
                trace[key].append(kinds.count(key) / len(kinds))
            trace["reward"].append(statistics.fmean(r.reward for r in rollouts))
            scored = rollout_metrics(rollouts)  # as the training job logs them (rl/pass_rate, rl/speedup/mean)
            trace["pass_rate"].append(scored["pass_rate"])
            trace["paid"].append(scored.get("speedup/mean"))
            for r in rollouts:
                trace["reasons"][r.reward_reason] = trace["reasons"].get(r.reward_reason, 0) + 1
            examples = update_examples(rollouts)
            if examples:
                learner.grpo_step(examples)
                self.generator.update_weights(learner.named_weights(), version=learner.version)
            log.info(
                "%s step %d: %s reward %.3f (%d examples; %d evaluations, %d reused)",
                name,
                step,
                " ".join(f"{key} {trace[key][-1]:.2f}" for key in (*self.kinds, "other")),
                trace["reward"][-1],
                len(examples),
                self.pool.evaluations,
                self.pool.reused,
            )
        trace["seconds"] = time.perf_counter() - t0
        del learner
        return trace

    def restore_generator(self) -> None:
        """Give the generator the initial checkpoint's weights back (version 0)."""
        from cudal1.policy.model import load_policy

        model, _ = load_policy(self.model_dir)
        self.generator.update_weights(list(model.named_parameters()), version=0)


def learner_at(checkpoint: Path, lr: float, s: Settings) -> Any:
    """A `GRPOLearner` on `checkpoint` with learning rate `lr` (>= 0). The learner's config refuses
    lr 0 (`learner.lr` must be > 0), so lr 0 (the control, or a learner that only scores) is built
    at 1.0 and set to 0 before any step: AdamW's step, weight decay included, is then scaled by 0."""
    from cudal1.training import GRPOLearner

    learner = GRPOLearner(
        checkpoint, lr=lr if lr > 0 else 1.0, micro_batch=s.micro_batch, seed=s.seed, loss_agg=s.loss_agg
    )
    if lr <= 0:
        learner.set_lr(0.0)
    return learner


def equal_pay(rollouts: Sequence[Any]) -> None:
    """The equal-pay control: every trainable rollout with a correct evaluation (status ok, and not
    refused by a second opinion) is paid as a correct 1.00x (reward `credit(1.0)` = 0 under the
    default transform, reason "equal_pay"), whatever it measured and whether it is a copy or a
    fallback; failures keep their price. So the reward tells correct from failing code and nothing
    else, and a policy that learns the fast variant under the measured reward must not here."""
    from cudal1.rl.rewards import RewardConfig, credit

    paid = credit(1.0, RewardConfig())
    for r in rollouts:
        p = r.priced
        if (
            r.result is not None
            and r.result.status is Status.OK
            and p is not None
            and p.trainable
            and not p.reason.startswith("second_opinion:")
        ):
            r.priced = dataclasses.replace(p, reward=paid, reason="equal_pay", speedup=1.0, spread=0.0, bound=False)


def _told_apart(v: dict[str, float], min_ratio: float) -> bool:
    """Whether a measured pair is `min_ratio` apart and beyond both spreads (`tie_clusters`)."""
    gap = math.log(v["fast"] / v["slow"])
    return v["fast"] >= min_ratio * v["slow"] and gap > max(v["slow_spread"], v["fast_spread"])


def _fmt_probs(probs: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{t}: " + " ".join(f"{k} {v:.3f}" for k, v in p.items()) for t, p in probs.items())


def sft_balanced(p: dict[str, float], min_clean: float) -> bool:
    """Whether one task's SFT targets' sequence probabilities `p` ({kind: P}) add up to at least
    `min_clean` and each holds between 0.6/n and 1.4/n of their sum (n targets: [0.3, 0.7] for two,
    as before; [0.12, 0.28] for five)."""
    total, n = sum(p.values()), len(p)
    return total >= min_clean and all(0.6 / n <= v / total <= 1.4 / n for v in p.values())


def final_share(trace: dict[str, Any], key: str = "fast", last: int = 2) -> float:
    """The mean over the last `last` steps of `trace[key]` ("fast": the fast variant's share of
    all responses; "choice": its share of the responses that are one of the two variants)."""
    return statistics.fmean(trace[key][-last:])


def choice_shares(trace: dict[str, Any]) -> list[float]:
    """Per step, fast / (fast + slow): how often the policy picks the fast variant when it writes
    one of the two (0 for a step without either)."""
    return [f / (f + s) if f + s > 0 else 0.0 for f, s in zip(trace["fast"], trace["slow"])]


def learned(trace: dict[str, Any], target: float = 0.8, max_copies: float = 0.1) -> bool:
    """The criterion: averaged over the last two steps, the fast variant is at least `target` of
    ALL the sampled responses (so garbled responses count against it, and a policy that stops
    writing either variant cannot pass). That both variants start near half is checked on the SFT
    checkpoint itself, where it is exact (`Experiment.sft_report["probs"]`); one step's 16 samples
    put the fast share anywhere in 0.2-0.7.

    It needs a clean SFT: with P(slow) + P(fast) = 0.87 per task after SFT, 0-44% of the RL
    responses stayed garbled and only one of four real runs met it (docs/training.md), so SFT
    now trains until the two targets hold `Settings.min_clean` (0.95) of the probability.

    Five variants (a trace with `COPIES`' keys): also, over the same two steps, the copies, renamed
    copies and fallbacks together stay below `max_copies` of all responses."""
    if final_share(trace, "fast") < target:
        return False
    if all(key in trace for key in COPIES):
        return final_copies(trace) < max_copies
    return True


def final_copies(trace: dict[str, Any], last: int = 2) -> float:
    """The mean over the last `last` steps of the copies', renamed copies' and fallbacks' share
    together (a five-variant trace: each of `COPIES` per step)."""
    per_step = [sum(step) for step in zip(*(trace[key] for key in COPIES))]
    return statistics.fmean(per_step[-last:])


def learned_on_average(traces: Sequence[dict[str, Any]], target: float = 0.8, max_copies: float = 0.1) -> bool:
    """`learned`'s criterion on the mean over several runs of one case (the same SFT checkpoint,
    independent sampling): the fast variant's share over each run's last two steps, averaged over
    the runs, at least `target`; for five variants also the copies, renamed copies and fallbacks,
    averaged the same way, below `max_copies`. One 16-step run of the five-variant case ends
    anywhere in 0.72-0.97 (docs/training.md), so a single run decides by its luck; the mean of
    three tells a policy that learned from one that did not."""
    if not traces:
        raise ValueError("no runs to average")
    if statistics.fmean(final_share(t, "fast") for t in traces) < target:
        return False
    if all(all(key in t for key in COPIES) for t in traces):
        return statistics.fmean(final_copies(t) for t in traces) < max_copies
    return True


RUNS: dict[str, dict[str, Any]] = {
    # name -> run_rl's arguments (lr None: Settings.lr)
    "real": {"lr": None, "negate": False, "pay": "measured"},
    "lr0": {"lr": 0.0, "negate": False, "pay": "measured"},
    "negated": {"lr": None, "negate": True, "pay": "measured"},
    "equal": {"lr": None, "negate": False, "pay": "equal"},
}


def run_named(exp: "Experiment", name: str) -> dict[str, Any]:
    """`exp.run_rl` for the run `name` of `RUNS`, its trace completed with "choice" (two variants),
    "final", "learned" and the pool's counts so far."""
    spec = RUNS[name]
    trace = exp.run_rl(name, exp.s.lr if spec["lr"] is None else spec["lr"], spec["negate"], spec["pay"])
    if "slow" in trace:
        trace["choice"] = choice_shares(trace)
    trace.update(
        final=final_share(trace),
        learned=learned(trace),
        evaluations=exp.pool.evaluations,
        reused=exp.pool.reused,
        eval_seconds=round(exp.pool.seconds, 1),
    )
    return trace


def shares_line(trace: dict[str, Any]) -> str:
    """One line with the trace's per-step shares, for the log and the docs' tables."""
    keys = [k for k in ("fast", "slow", *FIVE_KINDS, "other") if k in trace]
    return "; ".join(f"{k}: " + " ".join(f"{x:.2f}" for x in trace[k]) for k in dict.fromkeys(keys))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--steps", type=int, default=Settings.steps)
    ap.add_argument("--group", type=int, default=Settings.group)
    ap.add_argument("--lr", type=float, default=Settings.lr)
    ap.add_argument("--tasks", nargs="+", default=list(Settings.tasks), choices=list(VARIANTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt", default=Settings.prompt, choices=["plain", "contrastive"])
    ap.add_argument("--remeasure", action="store_true", help="measure every distinct code again at every step")
    ap.add_argument(
        "--measures", type=int, default=Settings.measures, help="else measure each distinct code up to this many times"
    )
    ap.add_argument("--variants", default=Settings.variants, choices=["two", "five"])
    ap.add_argument("--sft-rounds", type=int, default=Settings.sft_rounds)
    ap.add_argument("--loss-agg", default=Settings.loss_agg, choices=["grpo", "dr_grpo", "dapo"])
    ap.add_argument("--min-clean", type=float, default=Settings.min_clean)
    ap.add_argument("--out", type=Path, default=None, help="write the JSON lines here too")
    ap.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="keep the small model and the SFT checkpoint here (default: a temporary directory)",
    )
    ap.add_argument("--reuse-sft", action="store_true", help="start from WORK_DIR/sft when it exists")
    ap.add_argument(
        "--measured",
        type=Path,
        default=None,
        help="JSONL of earlier measurements: read when it exists (those codes are not measured again), "
        "then rewritten with every measurement of this run",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from cudal1.policy.small import init_small
    from cudal1.rollout import RolloutGenerator

    s = Settings(
        tasks=tuple(args.tasks),
        group=args.group,
        steps=args.steps,
        lr=args.lr,
        seed=args.seed,
        remeasure=args.remeasure,
        measures=args.measures,
        prompt=args.prompt,
        variants=args.variants,
        sft_rounds=args.sft_rounds,
        min_clean=args.min_clean,
        loss_agg=args.loss_agg,
    )
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        model_dir = work / "small"
        if not (model_dir / "config.json").exists():
            init_small(model_dir, seed=s.seed)
        with RolloutGenerator(
            model_dir, backend="vllm", dtype="float32", max_model_len=s.max_model_len, seed=s.seed, kv_cache_gib=0.25
        ) as gen:
            exp = Experiment(model_dir, gen, s, work)
            if args.measured and args.measured.exists():
                log.info("%d measurements read from %s", exp.pool.load(args.measured), args.measured)
            print(json.dumps({"variants": exp.measure_variants()}), flush=True)
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
                print(f"{name}: shares per step, of all responses: {shares_line(trace)}", flush=True)
                print(json.dumps(trace), flush=True)
                if args.out:  # after every run, so a run cut off by a wall-clock limit keeps the ones before
                    args.out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
