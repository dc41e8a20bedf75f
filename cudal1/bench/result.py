"""The record an evaluation returns: `EvalResult`, with its status, hack kinds and the labels
the harness itself sets.

An `EvalResult` is plain data. It leaves the evaluator's sandbox as JSON (`to_dict`, read back
with `from_dict`), travels from a benchmark pool to every reader as the object itself (Ray
pickles it), and is written to files as JSON again. The reward policy (`cudal1.rl.rewards`)
reads `status`, `hack_kind`, `labels`, `speedup` and `second_opinion`; nothing in this module
decides what a label is worth.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import Any

LOG_LIMIT = 4000
"""Characters kept of each log (the tail: the end of a traceback or compiler output matters most)."""


class Status(str, Enum):
    """Outcome of one evaluation, from worst-understood to best."""

    OK = "ok"  # correct; times and speedup are valid
    COMPILE_ERROR = "compile_error"  # the candidate did not import or build (syntax, nvcc, missing ModelNew)
    RUNTIME_ERROR = "runtime_error"  # raised, crashed, or faulted while running (incl. CUDA faults)
    TIMEOUT = "timeout"  # wall-time or CPU-time limit reached
    RESOURCE_EXCEEDED = "resource_exceeded"  # memory limit, or out of (device) memory
    INCORRECT = "incorrect"  # ran, but outputs do not match the reference
    HACK = "hack"  # a guard caught a reward hack; see `hack_kind`
    INVALID_TASK = "invalid_task"  # the reference itself failed to load or run: not the candidate's fault


FAILED_STATUSES = frozenset(
    {
        Status.COMPILE_ERROR,
        Status.RUNTIME_ERROR,
        Status.TIMEOUT,
        Status.RESOURCE_EXCEEDED,
        Status.INCORRECT,
        Status.INVALID_TASK,
    }
)
"""The statuses of a candidate that failed without being caught cheating (every status but ok and hack)."""


class HackKind(str, Enum):
    """Why a candidate was judged to cheat. Each kind has a guard in `cudal1.bench.guards`."""

    UNFINISHED_WORK = "unfinished_work"  # work still pending when forward returned (threads, deferred launches)
    OUTPUT_CHANGED_LATER = "output_changed_later"  # returned tensor kept changing after forward returned
    NOT_MATERIALIZED = "not_materialized"  # tensor subclass, zero/short storage, meta/fake tensor
    OUTPUT_ALIASES_INPUT = "output_aliases_input"  # output shares storage with an input or a previous output
    RESULT_CACHE = "result_cache"  # correct in trials, wrong on timed calls with fresh inputs
    INPUT_MUTATED = "input_mutated"  # an input tensor was changed in place
    WRONG_SIGNATURE = "wrong_signature"  # ModelNew refused the task's constructor args or inputs
    MONKEY_PATCH = "monkey_patch"  # torch, timing or checking functions replaced
    GLOBAL_STATE = "global_state"  # global flags changed in a way that could not be reset for the reference
    TIMER_TAMPERING = "timer_tampering"  # the clocks, events or synchronize were touched
    HARNESS_TAMPERING = "harness_tampering"  # the evaluator's own state or result channel was touched


class Label:
    """Result labels whose meaning a reader outside the evaluator relies on (the evaluator sets
    many more: facts about the code, `cudal1.bench.labels`). A label is a string in
    `EvalResult.labels`; a name here is only its spelling."""

    ACTOR_DIED = "actor_died"
    """The benchmark actor died (node lost, process killed) and its retries did too."""
    HARNESS_ERROR = "harness_error"
    """The evaluator itself raised: a fault of the harness, not of the candidate."""
    ACTOR_TIMEOUT = "actor_timeout"
    """The benchmark actor gave no result within its call timeout and was restarted."""
    UNKNOWN_TASK = "unknown_task"
    """The pool's suite holds no task of the candidate's task id (status invalid_task)."""
    DEGENERATE_TASK = "degenerate_task"
    """The task is degenerate (`EvalResult.task_degenerate`): wrong code passes on it."""
    DEGENERATE_CHECK_FAILED = "degenerate_check_failed"
    """The degenerate-task check itself failed, so nobody knows whether wrong code would pass."""
    BELOW_RESOLUTION = "below_resolution"
    """The candidate's time was below the measurement's resolution: its speedup is a lower bound."""
    NO_CANDIDATE = "no_candidate"
    """No response held usable code (a placeholder result, status compile_error)."""
    HOST_DIED = "host_died"
    """The judge saw the candidate's process go (internal: between the judge, the parent and the
    evaluator, which replaces it by how the process ended; never in a returned result)."""
    NOT_DELIVERED = "not_delivered"
    """The optimize job delivered none of a task's correct attempts (not confirmed by a second
    opinion, or not paid above the reference and the start): a placeholder, status compile_error."""


NO_PROGRAM_LABELS = frozenset({Label.NO_CANDIDATE, Label.NOT_DELIVERED})
"""Labels of the placeholder results that stand for no program at all (status compile_error by
convention): a table names them by what happened, not as build errors."""

HARNESS_LABELS = frozenset({Label.ACTOR_DIED, Label.HARNESS_ERROR, Label.ACTOR_TIMEOUT})
"""Labels that say the harness failed, not the candidate: such a result says nothing about it."""

UNPAID_LABELS = frozenset({Label.DEGENERATE_TASK, Label.DEGENERATE_CHECK_FAILED})
"""Labels under which "correct" says nothing about the candidate, so it is never paid nor kept as
an example: on a degenerate task wrong code passes ("degenerate_task"); where the degenerate-task
check itself failed nobody knows whether it would ("degenerate_check_failed"), and the check fails
closed."""


@dataclasses.dataclass
class Timing:
    """Run-time statistics of one program (reference or candidate) on one device.

    All times are in milliseconds per forward call, measured as described in `cudal1.bench.timing`.
    """

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    round_medians_ms: list[float]
    """Median of each round, in the order measured."""
    spread: float
    """(max - min) / median of the round medians: 0.03 means the rounds agree within 3%."""
    calls: int
    """Timed calls in total."""


@dataclasses.dataclass(frozen=True)
class SecondOpinion:
    """A correct result compared with its re-measurement on another actor of the same pool
    (`cudal1.rl.rewards.second_opinion`).

    Attributes:
        speedup: the re-measurement's speedup (×), None when it was not a correct result.
        status: the re-measurement's status.
        actor: the index of the actor that re-measured it in its pool (None: not known).
        disagreement: |s1 - s2| / min(s1, s2) of the two speedups; None when the re-measurement
            was not a correct result.
        tolerance: how far apart the two may be and still agree, in the unit of `disagreement`
            (the configured `verify_tolerance`).
        agrees: disagreement is set and disagreement <= tolerance; nothing else.
    """

    speedup: float | None
    status: Status
    actor: int | None
    disagreement: float | None
    tolerance: float
    agrees: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict: {"speedup", "status" (its string), "actor", "disagreement", "tolerance", "agrees"}."""
        return {
            "speedup": self.speedup,
            "status": self.status.value,
            "actor": self.actor,
            "disagreement": self.disagreement,
            "tolerance": self.tolerance,
            "agrees": self.agrees,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SecondOpinion":
        """Inverse of `to_dict`. Raises KeyError/ValueError on a malformed record."""
        return cls(
            d["speedup"],
            Status(d["status"]),
            d.get("actor"),
            d["disagreement"],
            float(d["tolerance"]),
            bool(d["agrees"]),
        )


@dataclasses.dataclass
class EvalResult:
    """Result of evaluating one candidate against one task's reference.

    `speedup` is reference time / candidate time (×), set only when status is ok: the reference's
    median (at most `baseline_ms`) over the candidate's median, each at least `resolution_ms`
    (`cudal1.bench.timing.speedup_stats`).
    `labels` are facts the reward policy may price (e.g. "pytorch_only", "custom_kernel",
    "reduced_precision", "calls_reference_ops", "cuda_graphs", "torch_compile",
    "side_streams"); they never change the status by themselves.
    """

    task_id: str
    status: Status
    backend: str = "cpu"
    device: str = ""
    """Device name as the worker saw it, e.g. "NVIDIA H200" or the CPU model."""
    arch: str = ""
    """Architecture key: "sm_90" on CUDA, "cpu-x86_64" on the CPU backend."""
    hack_kind: HackKind | None = None
    labels: list[str] = dataclasses.field(default_factory=list)
    label_reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    """Why the judge set a label, where the rest of the record does not say (label -> reason):
    "profile_failed" -> how the recorded forward failed or differed from an unrecorded one."""
    message: str = ""
    """One human-readable line saying why the status is what it is."""
    reference: Timing | None = None
    candidate: Timing | None = None
    speedup: float | None = None
    speedup_spread: float | None = None
    """(max - min) / median of the per-round speedups."""
    calls_per_round: int | None = None
    """K: the calls each timed round trip ran back to back, on as many fresh input sets, in each
    host (chosen from the reference's time before the candidate existed)."""
    round_trips: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    """The record of the round trips behind the times, per host ("reference", "candidate": the
    timing pass that counted; "calibration reference", "calibration candidate": the clean
    calibration, with the candidate host running the reference; the same names with "one-call "
    after any "calibration ": the one-call round trips of `EvalSettings.one_call_rounds`, timed on
    the judge's clock alone (on CUDA the stock hosts time no forward there: `own_ms` None); "after
    the candidate reference" and "after the candidate one-call reference": the reference's round
    trips once the candidate's processes were ended, the clean baseline's and those of
    `EvalSettings.one_call_cap_after_candidate`), one entry per round trip in order (ms): `go_s`
    (when its go was sent, s on the judge's clock since the first recorded round trip's: the order
    of round trips across hosts and kinds), `wall_ms` (the judge's clock, go to holding every
    output), `answered_ms` (go to the host's answer), `own_ms` (the host's own figure for its K
    forwards; None when it sent none usable), `host_parts_ms` (where the host says its side went:
    inputs, forwards, locate before its answer, audit after it; from the candidate's host, only its
    word) and, for the candidate host on the CPU, `parallel_cpu_ms` (the CPU time its processes
    spent beyond one core, added to the round trip: `cudal1.bench.timing.parallel_cpu_ms`) from
    `cpu_ms` (their CPU time in the counted interval), `cpu_interval_ms` (that interval on the
    judge's clock: from the go until the judge holds every output, before the host's audit, or
    with `EvalSettings.warm_go` the span of the parent's two readings of the count) and
    `busiest_thread_ms` (the most CPU time one of their threads spent in it; None where the kernel
    does not say)."""
    remeasured: bool = False
    """True when the speedup exceeded the re-measure bar and the value is from the second measurement."""
    overhead_ms: float | None = None
    """Typical fixed cost of one judge -> host round trip of K calls (messages, the reads of the
    outputs, GPU context switches; median on the reference host, ms): the judge's time of a
    candidate round trip minus it bounds what the candidate's host may claim for its K calls."""
    resolution_ms: float | None = None
    """Jitter of that fixed cost (`cudal1.bench.timing.jitter` of the round trips, see
    `EvalSettings.resolution_source`) over K, in ms per call: times below it cannot be told apart
    (label "below_resolution"). Both sides are taken as at least this, so two times below it give
    a speedup of 1.0×."""
    calibration_resolution_ms: float | None = None
    """The calibration's resolution (ms per call), the one `resolution_ms` takes unless the
    settings' `resolution_source` is "timing_pass"."""
    baseline_ms: float | None = None
    """A clean reference time (ms): the 90th percentile of reference calls timed before the
    candidate was imported, or of those timed after its process was killed, whichever is larger.
    The speedup uses min(this, the interleaved reference median), so that nothing the candidate
    does while the reference is timed can make the reference look slower."""
    task_degenerate: str | None = None
    """Why the task is degenerate (constant output, output equal to an input, ...), or None; a
    result on such a task carries the label "degenerate_task" and is not paid as a speedup. When
    the check itself failed, this stays None and the label is "degenerate_check_failed", paid the
    same way (fail closed)."""
    correctness_trials: int = 0
    skipped_trials: list[str] = dataclasses.field(default_factory=list)
    """The shifted and wide correctness trials not run because their inputs lie outside the
    task's domain, as the reference shows (it raises on them, its output is not finite there
    while its nominal outputs are, or it is ill-conditioned there: `judge.CONDITION_SHARE`), each
    as "trial <name>: <why>"."""
    max_abs_error: float | None = None
    build_seconds: float | None = None
    """Seconds spent inside the candidate's extension builds (`load_inline` / `load` calls): those
    of the prebuild that preceded this evaluation (`cudal1.bench.evaluator.prebuild`), plus those
    the evaluation's own import and ModelNew() made (near zero when the prebuild built everything)."""
    eval_seconds: float | None = None
    phases_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds spent in each phase the judge reached ("reference", "setup", "calibration",
    "import", "correctness", "labels", "timing", "baseline", ...), plus "processes": the parent's
    wall time minus the judge's (starting, importing into and ending the three processes), and
    "calls: <part>": the seconds all of the judge's calls spent in each part of a call (making
    inputs, staging them, the candidate's and the reference's calls, reading and comparing
    outputs, host checks; parts nest), and "prebuild": the wall time of the prebuild that came
    before this evaluation (not part of eval_seconds)."""
    profile: dict[str, Any] = dataclasses.field(default_factory=dict)
    """One candidate forward under the profiler in the candidate's own process, after the timing
    (`cudal1.bench.kernelprofile`): {"device", "total_ms", "launches", "top": [{"name", "ms",
    "calls"}]}, ms of device time on CUDA, of own CPU time on the CPU; {} when none was taken
    (`EvalSettings.profile_top` 0, a failed evaluation, a profiler failure). The candidate's
    word: shown to the policy, never priced."""
    sandbox: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Which isolation measures were in force (see `cudal1.bench.sandbox.SandboxReport`)."""
    log: str = ""
    """Tail of the worker's stdout, stderr and traceback, at most LOG_LIMIT characters."""
    candidate_hash: str = ""
    seed: int | None = None
    """Base seed of the trial and timing inputs (drawn at random per evaluation unless set)."""
    actor: int | None = None
    """The index, in its benchmark pool, of the actor that measured this result; None when no
    actor returned it (a build failure, a harness failure with no actor left, an evaluation
    outside a pool). Set by the pool, never by the evaluator."""
    second_opinion: SecondOpinion | None = None
    """The comparison with a re-measurement on another actor, for a result that needed one
    (`cudal1.pipeline.verify.verify_outliers`); None otherwise."""

    @property
    def correct(self) -> bool:
        """True when the candidate matched the reference (status ok)."""
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (enums as their string values). `actor` and `second_opinion` appear
        only when set."""
        d = dataclasses.asdict(dataclasses.replace(self, second_opinion=None))
        d["status"] = self.status.value
        d["hack_kind"] = self.hack_kind.value if self.hack_kind else None
        if self.actor is None:
            del d["actor"]
        del d["second_opinion"]
        if self.second_opinion is not None:
            d["second_opinion"] = self.second_opinion.to_dict()
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EvalResult":
        """Inverse of `to_dict`. Raises KeyError/ValueError on a malformed record."""
        d = dict(d)
        d["status"] = Status(d["status"])
        d["hack_kind"] = HackKind(d["hack_kind"]) if d.get("hack_kind") else None
        for key in ("reference", "candidate"):
            if d.get(key) is not None:
                d[key] = Timing(**d[key])
        if d.get("second_opinion") is not None:
            d["second_opinion"] = SecondOpinion.from_dict(d["second_opinion"])
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in fields})


def truncate_log(text: str, limit: int = LOG_LIMIT) -> str:
    """Keep the last `limit` characters of `text`, marking the cut."""
    if len(text) <= limit:
        return text
    return "[... truncated ...]\n" + text[-limit:]


def speedup_phrase(speedup: float) -> str:
    """A speedup (reference ms / candidate ms, ×) in words that never call a slower candidate
    faster: "1.500× faster", "2.000× slower (speedup 0.500×)", "as fast (speedup 1.000×)" (equal
    at three decimals)."""
    if round(speedup, 3) == 1.0:
        return f"as fast (speedup {speedup:.3f}×)"
    if speedup > 1.0:
        return f"{speedup:.3f}× faster"
    return f"{1.0 / speedup:.3f}× slower (speedup {speedup:.3f}×)"
