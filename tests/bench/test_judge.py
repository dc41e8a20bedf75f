"""The two-process evaluation against the kinds of exploit that broke the in-process one.

Each test is one or two real evaluations on the CPU backend. Kinds (see issue 8 in the project's
tracker): 1, a forged verdict; 2, process-global state that reaches the reference; 3, outputs
compared wrongly (complex values); then work done outside the timed interval, the output slot
written at the wrong time, the reference slowed from outside, flags set in the constructor, and
degenerate tasks.
"""

from __future__ import annotations

import json

import pytest

import evalkit
from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import HackKind, Status
from cudal1.rl.rewards import price
from cudal1.tasks.task import Task

_HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

SDPA_TASK = Task(
    level=1,
    problem_id=801,
    name="sdpa",
    source=_HEADER
    + """
class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

def get_inputs():
    return [torch.randn(4, 8, 512, 64) for _ in range(3)]

def get_init_inputs():
    return []
""",
)

FFT_TASK = Task(
    level=1,
    problem_id=802,
    name="fft",
    source=_HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.fft.fft(x)

def get_inputs():
    return [torch.randn(64, 1024)]

def get_init_inputs():
    return []
""",
)

# Memory-bound with a large output: where a skipped copy would pay most.
RELU_TASK = Task(
    level=1,
    problem_id=804,
    name="relu_big",
    source=_HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)

# Long enough (a few ms) for a loaded machine to show in the reference's time.
MATMUL_512 = evalkit.MATMUL_512

# A max over a dimension minus the same max: zero whatever the inputs (the constant-output
# shortcut of CUDA-L1's released kernels).
CONSTANT_TASK = Task(
    level=1,
    problem_id=803,
    name="max_minus_max",
    source=_HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        m = x.max(dim=1, keepdim=True).values
        return m - m

def get_inputs():
    return [torch.randn(256, 512)]

def get_init_inputs():
    return []
""",
)

# The same constant output, but get_inputs refuses the degenerate-task check's own seeds (0, 1, 2):
# the check cannot run, while the judge's trials (large secret seeds) run as usual.
UNCHECKABLE_TASK = Task(
    level=1,
    problem_id=805,
    name="max_minus_max_unchecked",
    source=_HEADER
    + """
class Model(nn.Module):
    def forward(self, x):
        m = x.max(dim=1, keepdim=True).values
        return m - m

def get_inputs():
    if torch.initial_seed() < 3:
        raise RuntimeError("no inputs for seeds below 3")
    return [torch.randn(256, 512)]

def get_init_inputs():
    return []
""",
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


def run_task(task: Task, name: str, cache_dir, tokens: dict | None = None, **overrides):
    """`name`'s candidate (its `__KEY__` tokens replaced from `tokens`) on `task`, CPU settings
    `evalkit.settings` with `overrides`."""
    source = evalkit.candidate(name, **(tokens or {}))
    return evaluate(task, source, "cpu", settings=evalkit.settings(cache_dir, **overrides))


# -- kind 1: the verdict cannot be written by the candidate ------------------------------------


def test_kind1_a_verdict_forged_through_the_process_arguments_is_a_hack(cache_dir) -> None:
    r = evalkit.run("matmul_relu", evalkit.candidate("forge_via_process_args"), cache_dir)
    assert r.status is Status.HACK and r.hack_kind is HackKind.HARNESS_TAMPERING, evalkit.describe(r)
    assert r.speedup is None


# -- kind 2: nothing the candidate sets reaches the reference ----------------------------------


def test_kind2_sdpa_backends_switched_off_do_not_slow_the_reference(cache_dir) -> None:
    """Switching the fused attention backends off at import made the in-process reference 3.4×
    slower here (17 -> 59 ms) and paid 2.85×; the reference now runs in the judge, untouched."""
    # Up to three pairs: a loaded CI machine once doubled the reference of one evaluation of the
    # pair (30 -> 55 ms, both candidates idle at 28 ms); the flags would slow every pair 3.4×.
    pairs = []
    for _ in range(3):
        honest = run_task(SDPA_TASK, "honest_sdpa", cache_dir, rounds=3, calls_per_round=2)
        cheat = run_task(SDPA_TASK, "sdpa_flags_toggle", cache_dir, rounds=3, calls_per_round=2)
        assert honest.status is Status.OK and cheat.status is Status.OK, evalkit.describe(cheat)
        assert any(label.startswith("global_flags:") and "cuda.flash_sdp" in label for label in cheat.labels), (
            cheat.labels
        )
        pairs.append((cheat.reference.median_ms / honest.reference.median_ms, cheat.speedup))
        # The reference the cheat is compared with ran on the fast path: about as fast as for the
        # honest candidate, nowhere near 3.4× slower, and the cheat is not paid for it.
        if pairs[-1][0] < 1.8 and pairs[-1][1] < 1.8:
            break
    assert pairs[-1][0] < 1.8 and pairs[-1][1] < 1.8, pairs


# -- kind 3: complex outputs are compared as complex numbers -----------------------------------


def test_kind3_a_zeroed_imaginary_part_is_incorrect(cache_dir) -> None:
    r = run_task(FFT_TASK, "fft_real_part_only", cache_dir)
    assert r.status is Status.INCORRECT, evalkit.describe(r)


def test_kind3_a_butterfly_fft_that_differs_only_by_rounding_is_correct(cache_dir) -> None:
    r = run_task(FFT_TASK, "fft_butterfly", cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
    assert 0 < r.max_abs_error < 1e-2, evalkit.describe(r)


def test_kind3_the_reference_fft_itself_is_correct_with_zero_error(cache_dir) -> None:
    r = run_task(FFT_TASK, "honest_fft", cache_dir)
    assert r.status is Status.OK and r.max_abs_error == 0.0, evalkit.describe(r)


# -- work outside the timed interval, and the output slot written at the wrong time -------------


def test_answering_before_the_work_is_done_is_caught(cache_dir) -> None:
    """The host answers at once and a thread fills the output later: the judge's copy (read in an
    order the host cannot know) is wrong; a moment later the same memory holds the right answer."""
    r = evalkit.run("matmul_relu", evalkit.candidate("answer_before_work"), cache_dir)
    assert "TOOK OVER THE CALL HANDLER" in r.log, evalkit.describe(r)
    assert r.status is Status.HACK and r.hack_kind in (HackKind.UNFINISHED_WORK, HackKind.OUTPUT_CHANGED_LATER), (
        evalkit.describe(r)
    )


def test_an_output_changed_after_the_answer_is_caught(cache_dir) -> None:
    """The judge reads the outputs again from the candidate's memory before the next call."""
    r = evalkit.run("matmul_relu", evalkit.candidate("thread_scribbles_later"), cache_dir)
    assert r.status is Status.HACK and r.hack_kind in (HackKind.UNFINISHED_WORK, HackKind.OUTPUT_CHANGED_LATER), (
        evalkit.describe(r)
    )


def test_an_old_answer_offered_for_new_inputs_is_wrong(cache_dir) -> None:
    r = evalkit.run("matmul_relu", evalkit.candidate("skip_output_copy"), cache_dir)
    assert "REPORTING A STALE OUTPUT" in r.log, evalkit.describe(r)
    assert r.status is Status.INCORRECT, evalkit.describe(r)


def test_nothing_timed_or_checked_comes_after_the_label_recording(cache_dir) -> None:
    """The labels' recording of a forward (a TorchDispatchMode) changes the candidate's process for
    good; the candidate here turns wrong once recorded, and is still correct on every timed and
    checked call because the recording comes last."""
    r = run_task(RELU_TASK, "changes_once_recorded", cache_dir, rounds=2, calls_per_round=2)
    assert r.status is Status.OK, evalkit.describe(r)
    assert {"pytorch_only", "calls_reference_ops"} <= set(r.labels), evalkit.describe(r)  # it was recorded
    phases = list(r.phases_s)
    assert phases.index("labels") > max(phases.index("timing"), phases.index("late check")), phases


def test_the_judge_never_writes_into_memory_the_candidate_already_sees(cache_dir) -> None:
    """Each call brings a fresh input slot: a thread that watches every earlier call's inputs
    never sees them change, so it never sees a next call's inputs before that call starts (the red
    team's follower computed most of level1/17 this way, before the clock, on a reused slot)."""
    r = run_task(RELU_TASK, "watch_input_slot", cache_dir, rounds=2, calls_per_round=2)
    assert r.status is Status.OK, evalkit.describe(r)
    lines = [line for line in r.log.splitlines() if line.startswith("WATCHED")]
    assert len(lines) >= 8 and lines[-1].endswith("CHANGED AFTER THEIR CALL: False"), evalkit.describe(r)


def test_the_hosts_recycle_freed_memory_so_keeping_buffers_saves_nothing(cache_dir) -> None:
    """Every evaluation process recycles freed memory without returning it to the system (glibc
    with mmap off): a block the forward frees serves the next call, in the reference's host as in
    the candidate's, so a candidate that keeps its output buffers (the red team's ring and
    pre-faulted pool: up to 2x unearned on level1/13) saves nothing the reference pays. glibc's
    default maps blocks of 32 MiB and more straight from the system and unmaps them when freed."""
    r = run_task(RELU_TASK, "report_mmapped_blocks", cache_dir, rounds=1, calls_per_round=2)
    assert r.status is Status.OK, evalkit.describe(r)
    mapped = [int(line.split()[-1]) for line in r.log.splitlines() if line.startswith("MMAPPED BYTES")]
    assert mapped and set(mapped) == {0}, mapped


HOST_SHORTCUTS = [
    # A leaner call handler saves only the host's own bookkeeping (the red team's 2.3× came from
    # skipping a copy the judge subtracted; there is no such copy now).
    ("lean_handler_matmul", "LEAN HANDLER", {}),
    # A host that reports a microsecond per call: its clock counts only as far as the judge's
    # allows, so it is counted at the judge's time less the typical fixed cost (on this busy CPU
    # within the round trip's jitter of the truth; no call counts below that jitter).
    ("claims_no_time_matmul", "CLAIMS NO TIME", {}),
    # The busy-polling, no-bookkeeping host that sends no times, spinning between its round trips
    # too: while the reference host ran, its spin took a core of two, slowed the reference 1.5-2x
    # (`reference_slowed`) and was paid up to the clean baseline's high quantile (median 2.09x
    # against an honest 0.83x in one series, 1.24x against 0.94x in another). The candidate is
    # stopped while the reference is timed (test_redteam.py), which leaves what its
    # under-claiming buys (its real forward time over the time counted: 1.01 lean, 0.91-1.04
    # spinning, honest 0.95-0.99), below what this shared machine resolves.
    ("busy_poll_lean_host", "BUSY POLL LEAN HOST True", {"spin": True}),
]


def test_a_host_that_cuts_corners_buys_next_to_nothing(cache_dir) -> None:
    """Each shortcut is held to the same three honest evaluations: one honest evaluation, then one
    of each shortcut, three times over.

    The task is a 512x512 matmul (about 5-7 ms a call here, 1 MB in and out), so what a round
    trip costs besides the forwards is small against the work and the comparison shows what the
    shortcut itself buys. A memory-bound task on the CPU backend is an open limit (README): for a
    2048x2048 relu, mapping the fresh inputs and reading the outputs of a round trip cost 3-5
    times its forwards, and a host that sends no times, counted at the judge's clock less that
    cost's typical value, scored 0.2-3.3x against an honest 0.15-1.3x; the host bookkeeping it
    skips measured 0.3 ms of a 40-80 ms round trip, so where the rest comes from is not known
    (docs/benchmarks.md)."""
    # 12 rounds: under a loaded CI machine 4 rounds spread honest evaluations of the same code over
    # 0.71-1.40x (one CI run failed on it); 16 rounds held them to 0.90-1.10x under the same load.
    settings = dict(rounds=12, calls_per_round=4, **evalkit.TIMING_ONLY)
    # Interleaved, so that the machine's load drifting during the test weighs on all sides alike
    # (three honest evaluations, then three cut ones, once failed for a load that fell in between).
    candidates = [("honest_matmul_relu", {}), *((name, tokens) for name, _, tokens in HOST_SHORTCUTS)]

    def series():
        return [run_task(MATMUL_512, name, cache_dir, tokens, **settings) for name, tokens in candidates]

    held, runs = evalkit.held_to_honest(series, lambda cut_x, honest_x: cut_x < 1.25 * honest_x + 0.05)
    honest = [s[0] for s in runs]
    assert all(r.status is Status.OK for r in honest), [evalkit.describe(r) for r in honest]
    for i, (name, marker, _) in enumerate(HOST_SHORTCUTS, start=1):
        cut = [s[i] for s in runs]
        assert all(marker in r.log for r in cut), (name, evalkit.describe(cut[0]))
        assert all(r.status is Status.OK for r in cut), (name, [evalkit.describe(r) for r in cut])
    assert held, {name: [s[i].speedup for s in runs] for i, (name, _) in enumerate(candidates)}


def test_figures_a_host_garbles_are_a_protocol_hack_not_a_harness_failure(cache_dir) -> None:
    """A per-call list sent as a number and a part too large for a float: a message the protocol
    does not allow (`wire.expect_host`), so the candidate's fault (a hack), never the judge's."""
    r = run_task(RELU_TASK, "malformed_figures_relu", cache_dir, rounds=2, calls_per_round=2)
    assert "GARBLED FIGURES" in r.log, evalkit.describe(r)
    assert r.status is Status.HACK and r.hack_kind is HackKind.HARNESS_TAMPERING, evalkit.describe(r)
    assert "harness_error" not in r.labels and "done.inner_ms" in r.message, evalkit.describe(r)


# -- a caught hack cannot escape its verdict ---------------------------------------------------


ESCAPES = [
    # A label the pipeline reads as "the harness failed, drop this rollout": not the host's to say.
    ("escape_label", (HackKind.RESULT_CACHE, HackKind.HARNESS_TAMPERING)),
    # A frame nested too deep for the JSON decoder: a protocol violation, not a harness failure.
    ("escape_deep_json", (HackKind.HARNESS_TAMPERING,)),
    # Dying once caught: the wrong timed answer the judge already holds stands.
    ("escape_exit_when_caught", (HackKind.RESULT_CACHE,)),
]


@pytest.mark.parametrize("name,kinds", ESCAPES, ids=[e[0] for e in ESCAPES])
def test_a_caught_hack_cannot_become_a_harness_failure(name, kinds, cache_dir) -> None:
    r = evalkit.run("matmul_relu", evalkit.candidate(name), cache_dir)
    assert r.status is Status.HACK and r.hack_kind in kinds, evalkit.describe(r)
    assert "harness_error" not in r.labels and "worker_crashed" not in r.labels, evalkit.describe(r)


# -- the reference slowed from outside ----------------------------------------------------------


def test_loading_the_machine_while_the_reference_runs_earns_nothing(cache_dir) -> None:
    """Two forked processes burn both cores except during the candidate's own calls, which slows
    the reference (timed between them) about twofold here. The reference time that counts is
    capped by calls timed with no candidate code alive (before its import, after its processes
    were killed), so the cheat scores about what the same code scores honestly (1×), not 2×."""
    settings = dict(rounds=3, calls_per_round=3)
    honest = run_task(MATMUL_512, "honest_matmul_relu", cache_dir, **settings)
    cheats = [run_task(MATMUL_512, "slows_reference", cache_dir, **settings) for _ in range(2)]
    assert honest.status is Status.OK and all(c.status is Status.OK for c in cheats), [
        evalkit.describe(c) for c in cheats
    ]
    for cheat in cheats:
        # speedup = max(min(R, baseline), floor) / max(C, floor): the reference side is at most the
        # clean baseline, or the floor when the load raised the resolution above it (then 1.0x).
        reference_used = cheat.speedup * max(cheat.candidate.median_ms, cheat.resolution_ms)
        bound = max(cheat.baseline_ms, cheat.resolution_ms)
        assert reference_used <= bound * (1 + 1e-5), evalkit.describe(cheat)  # (rounded to 6 digits)
    assert min(c.speedup for c in cheats) < 1.5 * max(honest.speedup, 1.0), (
        [c.speedup for c in cheats],
        honest.speedup,
    )


# -- labels that need the candidate's constructor, and degenerate tasks -------------------------


def test_flags_set_in_the_constructor_are_labelled(cache_dir) -> None:
    r = evalkit.run("matmul_relu", evalkit.candidate("flags_in_init"), cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
    assert any(label.startswith("global_flags:") and "cudnn.benchmark" in label for label in r.labels), r.labels


def test_a_result_on_a_degenerate_task_is_labelled_and_the_check_is_cached(cache_dir) -> None:
    r = run_task(CONSTANT_TASK, "constant_answer", cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
    assert "degenerate_task" in r.labels and "all zero" in (r.task_degenerate or ""), evalkit.describe(r)
    cached = list((cache_dir / "tasks").glob(f"{CONSTANT_TASK.source_hash}-*.json"))
    assert len(cached) == 1 and json.loads(cached[0].read_text())["reason"] == r.task_degenerate
    # The next evaluation takes the cached answer (here: edited, to see that it is read).
    cached[0].write_text(json.dumps({"reason": "cached verdict", "notes": []}))
    from cudal1.bench import evaluator

    evaluator._degenerate_memory.clear()
    again = run_task(CONSTANT_TASK, "constant_answer", cache_dir)
    assert again.task_degenerate == "cached verdict", evalkit.describe(again)


def test_a_failed_degenerate_task_check_fails_closed(cache_dir) -> None:
    # A constant-output shortcut on a degenerate task whose check failed: labelled, not paid.
    r = run_task(UNCHECKABLE_TASK, "constant_answer", cache_dir)
    assert r.status is Status.OK and r.task_degenerate is None, evalkit.describe(r)
    assert "degenerate_check_failed" in r.labels and "degenerate_task" not in r.labels, evalkit.describe(r)
    priced = price(r, None)
    assert (priced.reason, priced.speedup, priced.trainable) == ("degenerate_check_failed", None, False)
    # A failed check is not cached as the task's verdict: the next evaluation runs it again.
    assert not list((cache_dir / "tasks").glob(f"{UNCHECKABLE_TASK.source_hash}-*.json"))


def test_a_resolution_from_the_timing_pass_is_at_most_the_calibrations(cache_dir) -> None:
    r = evalkit.run(
        "matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir, resolution_source="timing_pass", rounds=4
    )
    assert r.status is Status.OK, evalkit.describe(r)
    assert 0 < r.resolution_ms <= r.calibration_resolution_ms, (r.resolution_ms, r.calibration_resolution_ms)


def test_rounds_shorter_than_the_jitter_asks_for_are_made_up_by_more_rounds(cache_dir) -> None:
    # K held at 2 while the jitter factor asks for rounds a thousand jitters long: every round is
    # short, so the pass takes max_rounds rounds (timing.timed_rounds), never more.
    common = dict(rounds=2, calls_per_round=2, max_calls_per_round=2, jitter_factor=1000.0)
    r = evalkit.run("matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir, max_rounds=6, **common)
    assert r.status is Status.OK, evalkit.describe(r)
    assert len(r.round_trips["candidate"]) == len(r.round_trips["reference"]) == 6, r.round_trips.keys()
    # The CPU backend's default (max_rounds 0): the rounds asked for, however short.
    r = evalkit.run("matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir, **common)
    assert r.status is Status.OK and len(r.round_trips["candidate"]) == 2, evalkit.describe(r)


def test_an_ordinary_task_is_not_degenerate(cache_dir) -> None:
    r = evalkit.run("matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir)
    assert r.status is Status.OK and r.task_degenerate is None and "degenerate_task" not in r.labels, evalkit.describe(
        r
    )
    assert r.overhead_ms is not None and r.overhead_ms > 0 and r.resolution_ms > 0 and r.baseline_ms > 0
    assert r.resolution_ms == r.calibration_resolution_ms  # the default source
    # Where the time went: every phase the judge ran, in seconds, adding up to no more than the whole.
    top = {k: v for k, v in r.phases_s.items() if not k.startswith("calls: ")}
    assert {"reference", "setup", "calibration", "import", "correctness", "timing", "baseline", "processes"} <= set(top)
    assert all(v >= 0 for v in r.phases_s.values()) and r.phases_s["timing"] > 0
    assert sum(top.values()) <= r.eval_seconds + 0.05 + r.phases_s["processes"], r.phases_s
    assert r.phases_s["calls: candidate call"] > 0 and r.phases_s["calls: reference call"] > 0


def test_each_round_trip_records_where_the_hosts_time_went(cache_dir) -> None:
    """`EvalResult.round_trips`: each stock host's parts (inputs, forwards, locate: before its
    answer; audit: after it) come with its audit, after the interval the judge times (the judge
    parses `done` on its clock, so `done` carries nothing it does not need)."""
    r = evalkit.run("matmul_relu", evalkit.candidate("honest_matmul_relu"), cache_dir, rounds=2)
    assert r.status is Status.OK, evalkit.describe(r)
    for who in ("candidate", "reference"):
        for trip in r.round_trips[who]:
            assert set(trip["host_parts_ms"]) == {"inputs", "forwards", "locate", "audit"}, trip
            assert all(v >= 0.0 for v in trip["host_parts_ms"].values()) and trip["own_ms"] is not None, trip
