"""The judge: the process of an evaluation that decides the verdict and the speedup.

No candidate code ever runs here. The judge loads the task, makes every input from a secret seed
(OS entropy, or the user's `EvalSettings.seed`; per call SHA-256 of it and a counter), computes
the reference outputs the candidate's are checked against, and talks to two hosts
(`cudal1.bench.host`) over sockets: the candidate host, the only process that runs candidate
code, and the reference host, which runs only the task's reference. Each host has an input slot
of its own (`cudal1.bench.slots`), written by the judge just before each call, and sees only the
inputs of that call. Their outputs stay in their own memory; the judge copies them out itself
(`cudal1.bench.readers`: CUDA IPC on the GPU, the parent's read of the process's memory on the
CPU). Nothing the candidate host sends is a verdict: its messages are checked data, and its own
reports (a replaced function, an output that aliases an input) can only make its result worse.

So, by construction:
- the reference runs under a pristine process state (flags, modes, patches, allocator settings,
  environment) in a process the candidate cannot reach, and is timed exactly as the candidate
  is: another process, the same round trip, the same reads;
- inputs are unpredictable: the candidate's process holds no seed or generator state of them;
- the checker and the clocks are out of the candidate's reach;
- timing is batched and symmetric: each timed round trip asks a host to run K forwards back to
  back, on K input sets the judge wrote for that round (fresh values for every call, never
  reused), each output left in its own memory and checked; the reference host runs the same K
  sets in its own round trip, in random order with the candidate's. K is chosen before the
  candidate exists, from the reference's time and the jitter of a one-call round trip, so that a
  round's work is large against that jitter (`timing.batch_size`), within a memory and a time
  budget (`batch_capacity`, `EvalSettings.max_round_ms`);
- a candidate's time is its host's own clock (the code that times the reference, one call at a
  time) only as far as the judge's clock allows: the judge times each round trip from the moment
  it tells the host to go until it holds its own copy of every output, and the round's K calls
  count as at least that minus a high quantile of the round trip's fixed cost, the pass as a
  whole as at least that minus its median and half its jitter, at most 2% of the candidate's
  round (`timing.candidate_rounds_ms`, `EvalSettings.unexplained_tolerance` and
  `unexplained_share`: the noise of comparing two medians of a few round trips; none for a host
  whose claims the bound replaced in half its calls or more); rounds shorter than the jitter
  asks for (K held by memory, or a much faster candidate) are made up by more of them
  (`timing.timed_rounds`). The fixed cost
  (a K-call round trip less the host's forwards on its own clock) is the reference host's in
  the same pass, never above its calibration's by more than the jitter, plus what the candidate
  host's exceeded it by in the calibration, while it ran the reference before any candidate code
  existed (`timing.allowed_fixed_cost`); all of it is messages, reads and GPU
  context switches, none of it work the candidate's process could skip (the host locates its
  outputs while the GPU runs and checks their memory after it answers: `cudal1.bench.host`). Work left running after the host answers is inside that interval, or missing from what
  the judge copies (then the output is wrong, or changes when the judge looks again);
- on the CPU both hosts run their forwards on one thread (`EvalSettings.host_threads`), and a
  candidate round trip counts as at least the CPU time every process of the candidate spent in
  it beyond one core (`timing.parallel_cpu_ms`, read by the parent before the go and once the
  judge holds the outputs, before the host's audit): threads, pools and helper processes buy
  nothing the reference did not have;
- below the resolution (the jitter of the calibration's round trips over K, per call) two times
  are not told apart: both sides are taken as at least it (`timing.speedup_stats`), and
  `below_resolution` says the ratio is a bound;
- the reference time that counts is at most a high quantile of its per-call times in batched
  rounds timed before the candidate was imported and again after its process (and every process
  of its uid) was killed (`baseline_ms`: the larger of the two), so a candidate that loads the
  machine or the GPU while the reference is timed gains nothing; every process of the candidate
  (the candidate host, from the calibration on) is also stopped while the reference host's round
  trips run (`_pause_candidate`).

What batching leaves open: on CUDA, inside one round trip the judge sees only the whole round,
not each call. The K input sets lie one after another in the host's slot, mapped whole in the
host, but each input tensor's storage spans its own bytes only (`Slot.view`), so a call's
arguments give no way to the other sets through PyTorch's tensor API. The host launches the K
calls on one stream and synchronizes the device once after them, so an honest host's calls run
one after another; a candidate that reads past its input through a raw pointer (a kernel of its
own), or finds the host's views of every set by introspection (it runs in that process), can
still compute several calls' outputs in its first call and hand them out one per call; and one
can run its calls on several streams and overlap them; and, since the judge reads a CUDA round
only after its last call, a call can hand in an output a later call of the round writes. Each
is timed by what the round really took, which for small problems is less than K separate calls.
What that pays is bounded, not the reach itself: every timing pass mixes one-call round trips
to both hosts among its batched rounds (`EvalSettings.one_call_rounds`, 16 on CUDA), in which
the judge reads the only call's output before any later input exists, and a candidate's per-call
figure counts as at least the reference's plus its one-call difference from the reference, less
the noise of that difference (`timing.one_call_floor_ms`; label `one_call_floor` where that
raised the kept pass). Only overlap on side streams is labelled otherwise (`side_streams`,
`collect_labels`). On the CPU the reach is closed: each input set has a slot of its own,
written before the go, and the judge sends set j + 1's only once it holds its copy of call j's
output (`_revealed`), so one-call rounds are off there.

Order of work: load the task and the reference; the degenerate-task check; hand each host its
input slot; warm up the reference host, calibrate the round trip and choose K (which also times
the reference baseline); let the candidate host import the candidate; correctness trials (one
call per round trip); timing rounds (reference host and candidate host interleaved, in random
order, every output of every call checked against the reference host's); re-measure a speedup
above the bar; last checks; labels (recording a forward changes the candidate's process, so it
comes after everything timed or checked); end the candidate's process and time the reference
once more.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import secrets
import statistics
import sys
import functools
import tempfile
import time
import traceback
from typing import Any, Callable

import torch

from ..tasks.task import Task
from . import correctness, guards, inputs as inputs_mod, kernelprofile, pressure, timing
from .result import EvalResult, HackKind, Label, Status, speedup_phrase
from .settings import MIN_ONE_CALL_ROUNDS, EvalSettings
from .pagemap import view_span
from .readers import IpcReader, ParentReader, ReadError
from .slots import Slot, TensorSpec, plan
from .verdicts import CUDA_FAULT_MARKERS, Verdict, device_name
from .wire import MAX_FRAME, Channel, PeerGone, ProtocolError, Timeout, blob, expect, expect_host, str_list, unblob

Expected = tuple[list[torch.Tensor], list[Any]]
"""The reference outputs a candidate's are compared with: (tensors, non-tensor values)."""
SHIFTS = [(4.0, -2.0), (-3.0, 1.0), (10.0, 0.0)]
"""(scale, offset) pairs for shifted correctness trials: x*scale + offset on float inputs."""
WIDE: list[tuple[str, tuple[float, float] | None, tuple[int, int] | None]] = [
    ("wide x*30", (30.0, 0.0), None),
    ("wide integers x*61+1000", None, (61, 1000)),
]
"""Wide correctness trials: (name, float shift, integer shift), `inputs.spread`. Floats times 30
put randn's tails beyond 88.7 (|x| up to about 130), where float32's exp overflows and a softmax
without its max subtraction turns NaN; integers times 61 plus 1000 (1000-1915 from randint(0,
16)) leave the generator's range and the 8-bit types. Each moves one kind of input only, so a
task whose integer inputs are indices (which the reference refuses moved) keeps its wide float
trial. The reference decides which of them lie in the task's domain (`Judge.check_correctness`)."""
CONDITION_SHARE = 0.1
"""A spread trial is skipped where changing the reference's float inputs at the rounding level
(a random relative change of up to 2 epsilons of their dtype) moves its output by more than this
share of the comparison's tolerance (`Judge._sensitivity`): there honest code, which rounds
otherwise than the reference, cannot be told from wrong code. Measured on the CPU tasks' wide
trial (x*30): the reference's own float32 error (against float64) was 0.97 of the tolerance on
level2/8 (a softmax between two matmuls) and 0.28 on level3/2, where this measure gave 0.83 and
0.27; every other builtin task stayed below 0.04 on both."""
CPU_PROBE_MIB = 1024
"""On CUDA, a wide integer trial is first tried on a copy of the reference on the CPU
(`Judge._outside_domain`) only where the inputs and the reference's weights take at most this
many MiB (the judge's host memory and time); beyond, the trial is skipped."""
_FLAG_LABEL = re.compile(r"^global_flags:[A-Za-z0-9_.,]{1,300}$")
HOST_LABELS = frozenset({"reduced_precision", "background_threads", "cuda_fault"})
"""The only labels the candidate's process may report (besides "global_flags:<names>"): facts
that can only lower what a result is worth. Every other label is set by the judge or the parent."""
_HOST_FAULT = Label.HOST_DIED
REFERENCE_SLOWED = 1.1
"""Interleaved reference median above this × the baseline (plus the resolution) is labelled
"reference_slowed": something slowed the reference while the candidate was alive."""
AFTER_CANDIDATE = "after the candidate one-call "
"""`EvalResult.round_trips` prefix of the reference host's one-call round trips made once the
candidate's processes were ended (`EvalSettings.one_call_cap_after_candidate`)."""
AFTER_BATCHED = "after the candidate "
"""The round-trip record's prefix (`EvalResult.round_trips`) of the reference's batched round
trips once the candidate's processes were ended (`Judge.after_the_candidate`: the clean baseline
after the candidate, and with `EvalSettings.fixed_cost_cap_after_candidate` the cap on what the
candidate host may leave unexplained)."""
AFTER_RESERVE_S = 10.0
"""The judge makes no one-call round trip after the candidate (`Judge._one_call_after_candidate`)
once the evaluation is this close to its time limit: what is left of it settles the result."""
RE_READ = 3
"""Outputs of a batched round trip read again, at random, before the next round trip."""
CALIBRATION_WARMUP = 4
"""At least this many reference calls before the candidate is imported."""
RECORDED_SLACK = 4.0
"""The recorded forward's outputs may differ from an unrecorded one's on the same inputs by at most
this many times two unrecorded forwards differ (`Judge._recorded_otherwise`)."""
SNAPSHOT_CHUNKS = 64
GRACE_S = 5.0
"""The judge waits this long past the evaluation's deadline (the parent kills at the deadline)."""
KERNEL_PROFILE_S = 60.0
"""How long the judge waits for the candidate's profiled forward (`Judge.kernel_profile`), seconds."""


def _spends(part: str) -> Callable:
    """Add the wall time of every call of the decorated method to `self.spent[part]` (seconds):
    where the calls of an evaluation spend the judge's time (parts may nest)."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        def timed(self: "Judge", *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                self.spent[part] = self.spent.get(part, 0.0) + time.perf_counter() - started

        return timed

    return wrap


def _gc_paused(method: Callable) -> Callable:
    """Run the decorated round trip with the garbage collector off (`timing.gc_paused`)."""

    @functools.wraps(method)
    def paused(self: "Judge", *args: Any, **kwargs: Any) -> Any:
        with timing.gc_paused():
            return method(self, *args, **kwargs)

    return paused


class Judge:
    """One evaluation, judge side. `Judge(payload, chan, link).run()` returns the result dict.

    payload: {"task": Task.to_dict(), "source": str, "backend": "cpu"|"cuda", "device": str,
    "settings": EvalSettings.to_dict(), "deadline": monotonic seconds, "degenerate": None or
    {"reason": str | None, "notes": [...]}} (a cached degenerate-task check).
    """

    def __init__(self, payload: dict[str, Any], chans: dict[str, Channel], link: Any = None) -> None:
        self.task = Task.from_dict(payload["task"])
        self.source: str = payload["source"]
        self.backend: str = payload["backend"]
        self.device: str = payload["device"]
        self.settings = EvalSettings(**payload["settings"])
        self.deadline: float = float(payload["deadline"])
        self.cached_degenerate = payload.get("degenerate")
        self.chan = chans["candidate"]
        self.ref_chan = chans.get("reference")
        self.link = link
        self.cuda = self.device.startswith("cuda")
        self.profile = self.settings.size_profile or self.backend
        self.base_seed = self.settings.seed if self.settings.seed is not None else secrets.randbits(62)
        self.counter = 0
        self.k = 0
        self.order = random.Random(self._seed("order"))
        self.labels: list[str] = []
        self.result = EvalResult(task_id=self.task.task_id, status=Status.RUNTIME_ERROR, backend=self.backend)
        self.extra: dict[str, Any] = {}
        # The last call's outputs (one list per call of its batch), as described and as copied.
        self.last_snapshot: list[list[torch.Tensor]] | None = None
        self.timed_errors: list[float] = []  # each checked timed call's largest absolute error
        self.last_leaves: list[list[Any]] = []
        self._last_values: list[list[Any]] = []
        self.ref_last_leaves: list[list[Any]] = []
        """The reference host's last round trip's outputs, as described (CPU)."""
        self.ref_persistent: set[int] = set()
        self.overwrite_byte = 0xF8 + secrets.randbelow(7)
        """What the parent writes over each round trip's outputs once the judge is done with them
        (`_overwrite_outputs`), drawn for each evaluation from 0xF8-0xFE: every float dtype reads
        it as NaN or as a value of magnitude 2^15 or more (float32 0xF8F8F8F8 is -4.0e34, float16
        0xF8F8 -40704), far outside any tolerance around what an output was meant to hold (a byte
        from 0x80 up read as float32 values as small as 1e-16, which passed as the zeros they
        stood for)."""
        self.pick = random.Random(self._seed("pick"))
        self.host_loaded = False
        self.pause_candidate = False
        """Stop the candidate's processes while the reference is timed (CPU, candidate alive)."""
        self.cpu_excess_ms = 0.0
        """The last candidate round trip's CPU time beyond one core (ms, `timing.parallel_cpu_ms`;
        0 unless `EvalSettings.count_cpu_time` on the CPU)."""
        self._cpu_from_ns = 0
        """The judge's clock (ns) when the parent began to read the candidate's CPU time at the start
        of the round trip's interval."""
        self.views: dict[str, list[list[torch.Tensor]]] = {}
        """Per host, per set of the host's input slot: views of the set's input tensors."""
        self.ref_template: list[Any] = []
        self.batch = 1
        self.recording: str | None = None
        """While set, round trips are recorded in `EvalResult.round_trips` under this prefix."""
        self.first_go_ns: int | None = None
        """The judge's clock (ns) at the go of the first recorded round trip: their `go_s` origin."""
        self.trips_ms: list[float] = []
        self.one_call_calibration: list[tuple[float, float]] = []
        """The calibration's one-call round trips: (candidate host's, reference host's), ms."""
        self.one_call_count = 0
        """One-call rounds the calibration made and each timing pass makes (`_one_call_count`)."""
        self.pass_one_call_trips: list[tuple[float, float]] = []
        """The last timing pass's one-call round trips: (candidate host's, reference host's), ms."""
        self.one_call_after: list[float] = []
        """The reference host's one-call round trips once the candidate's processes were ended, ms
        (`_one_call_after_candidate`)."""
        self.passes: list[dict[str, Any]] = []
        """The timing passes made (`measure`, `_pass`), one of which is paid (`after_the_candidate`)."""
        self._staged: dict[str, list[list[Slot]]] = {}
        """CPU: per host, the slots of its last two round trips, one per input set."""
        self.spent: dict[str, float] = {}
        self._cpu_reference: Any = None
        """The reference built again on the CPU, for inputs it may refuse (`_outside_domain`)."""
        self.scale_floors: list[float] | None = None
        """Per tensor output, `compare_values`'s scale floor (`_measure_noise`, on the first
        nominal trial); None until then (1.0 each)."""

    # -- seeds, inputs, labels -----------------------------------------------------------------

    def _seed(self, what: str | int) -> int:
        digest = hashlib.sha256(f"{self.base_seed}:{what}".encode()).digest()
        return int.from_bytes(digest[:8], "big") % (2**62)

    @_spends("inputs")
    def _inputs(self) -> list[Any]:
        self.counter += 1
        return inputs_mod.make_inputs(self.module, self._seed(self.counter), self.device)

    def _spread_inputs(
        self, shift: tuple[float, float] | None, int_shift: tuple[int, int] | None
    ) -> tuple[list[Any], int]:
        """Fresh inputs (`_inputs`) moved by `inputs.spread`, and how many of their tensors it moved."""
        return inputs_mod.spread(self._inputs(), shift, int_shift)

    def _label(self, label: str) -> None:
        if label not in self.labels:
            self.labels.append(label)

    def _sync(self) -> None:
        self.clock.sync()

    def _release_cached_memory(self) -> None:
        """Give the device memory this process's allocator keeps cached back to the device (CUDA),
        between phases: the judge's trials hold many outputs at once (on KernelBench level1/19,
        6 GiB each, the judge's cache grew to 110 GiB of the H200's 140), and memory the judge
        merely caches must not make the candidate's own allocations fail."""
        if self.cuda:
            self._sync()
            torch.cuda.empty_cache()

    # -- talking to the host -------------------------------------------------------------------

    def _recv(self, op: str | tuple[str, ...], **types: Any) -> dict[str, Any]:
        """The candidate host's next message, one of the op(s) `op`, checked whole
        (`wire.expect_host`: anything it holds is then safe to compute with) and against `types`.
        Raises Verdict: a timeout, the host's death, or a hack for anything malformed or
        unexpected (only candidate code makes the host send that)."""
        try:
            msg = self.chan.recv(self.deadline + GRACE_S)
            got = _one_of(msg, op)
            return expect(expect_host(msg, got), got, **types)
        except Timeout as exc:
            raise Verdict(
                Status.TIMEOUT, f"no answer from the candidate within {self.settings.wall_timeout_s:.0f} s"
            ) from exc
        except PeerGone as exc:
            raise Verdict(
                Status.RUNTIME_ERROR, "the candidate process died", labels=["worker_crashed", _HOST_FAULT]
            ) from exc
        except ProtocolError as exc:
            raise Verdict(
                Status.HACK, f"the candidate process broke the protocol: {exc}", HackKind.HARNESS_TAMPERING
            ) from exc

    def _send(self, op: str, fds: list[int] | None = None, **fields: Any) -> None:
        if self.chan.pending():
            raise Verdict(
                Status.HACK, "the candidate process sent a message nobody asked for", HackKind.HARNESS_TAMPERING
            )
        try:
            self.chan.send(op, fds=fds, **fields)
        except PeerGone as exc:
            raise Verdict(
                Status.RUNTIME_ERROR, "the candidate process died", labels=["worker_crashed", _HOST_FAULT]
            ) from exc

    def _host_labels(self, value: Any) -> None:
        try:
            labels = str_list(value)
        except ProtocolError as exc:
            raise Verdict(
                Status.HACK, f"the candidate process broke the protocol: {exc}", HackKind.HARNESS_TAMPERING
            ) from exc
        for label in labels:
            if label not in HOST_LABELS and not _FLAG_LABEL.match(label):
                raise Verdict(
                    Status.HACK,
                    f"the candidate process sent a label it may not report: {label[:60]!r}",
                    HackKind.HARNESS_TAMPERING,
                )
            self._label(label)

    def _host_failure(self, error: Any) -> Verdict:
        """The Verdict for a failure the host reports (its own: only ever a worse result)."""
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return Verdict(Status.HACK, "the candidate process sent a malformed error", HackKind.HARNESS_TAMPERING)
        try:
            status = Status(error.get("status"))
            hack = HackKind(error["hack"]) if error.get("hack") else None
        except ValueError:
            return Verdict(Status.HACK, "the candidate process sent a malformed error", HackKind.HARNESS_TAMPERING)
        if status is Status.OK or status is Status.INVALID_TASK:
            return Verdict(
                Status.HACK, "the candidate process claimed a status it cannot report", HackKind.HARNESS_TAMPERING
            )
        if status is Status.HACK and hack is None:
            hack = HackKind.HARNESS_TAMPERING
        self._host_labels(error.get("labels", []))
        return Verdict(status, error["message"][:600], hack if status is Status.HACK else None)

    # -- phase 1: the reference ----------------------------------------------------------------

    def load_reference(self) -> None:
        try:
            if self.cuda:
                torch.cuda.set_device(self.device)
                torch.empty(1, device=self.device)
            self.result.device, self.result.arch = device_name(self.device)
            self.clock = timing.DeviceClock(self.device, flush_l2=self.settings.flush_l2)
            self.module = self.task.load_module(self.profile)
            self.init = inputs_mod.make_init_inputs(self.module)
            self.init_seed = self._seed("init")
            torch.manual_seed(self.init_seed)
            self.ref_model = self.module.Model(*inputs_mod.clone_tree(self.init)).to(self.device)
            x = self._inputs()
            kept = inputs_mod.clone_tree(x)
            with torch.no_grad():
                out = self.ref_model(*x)
                # A second forward while the first's outputs live: memory the reference keeps
                # between calls shows up in both (CPU: `_overwrite_outputs` leaves it alone).
                again = None if self.cuda else self.ref_model(*inputs_mod.clone_tree(kept))
            self._sync()
        except Verdict:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise Verdict(Status.INVALID_TASK, f"reference failed: {type(exc).__name__}: {exc}") from exc
        self.ref_mutates_inputs = not correctness.tree_equal(x, kept)
        self.layout(x, kept, out)
        owned = [t for m in self.ref_model.modules() for t in vars(m).values() if isinstance(t, torch.Tensor)]
        owned += [*self.ref_model.parameters(), *self.ref_model.buffers()]
        if again is not None:
            try:
                owned += [t for _, t in correctness.output_tree(again)[1]]
            except correctness.NoComparisonRule as exc:
                raise Verdict(Status.INVALID_TASK, f"the reference output cannot be judged: {exc}") from exc
        self.ref_persistent = {
            i for i, (_, t) in enumerate(correctness.output_tree(out)[1]) if correctness.shares_memory(t, owned)
        }
        """Tensor leaves (by index) the reference returns in memory it keeps between calls (a
        parameter, a buffer, a tensor attribute, or what two forwards both return): left as they
        are after a round trip by `_overwrite_outputs`, the candidate's too."""

    def layout(self, x: list[Any], kept: list[Any], out: Any) -> None:
        """Slot layouts from one input set (`x` as the reference got it, `kept` a copy taken before)
        and its reference output; fixed for the evaluation."""
        self.in_tensors = [i for i, v in enumerate(x) if isinstance(v, torch.Tensor)]
        self.in_specs, in_bytes = plan([x[i] for i in self.in_tensors])
        try:
            self.out_tree, leaves, values = correctness.output_tree(out)
        except correctness.NoComparisonRule as exc:
            raise Verdict(Status.INVALID_TASK, f"the reference output cannot be judged: {exc}") from exc
        tensors = [t for _, t in leaves]
        self.tensor_paths = [path for path, _ in leaves]
        self.value_kinds = _value_kinds(self.out_tree, [path for path, _ in values])
        for path, t in leaves:
            if type(t) is not torch.Tensor or t.layout is not torch.strided:
                raise Verdict(
                    Status.INVALID_TASK,
                    f"the reference returns a {type(t).__name__} ({t.layout}) at {path}: not comparable",
                )
            try:
                correctness.comparison_rule(t.dtype)
            except correctness.NoComparisonRule as exc:
                raise Verdict(Status.INVALID_TASK, f"the reference output cannot be judged: {exc}") from exc
        self.out_specs, out_bytes = plan(tensors)
        self.ref_repeats = [_repeats_memory(list(t.stride()), tuple(t.shape)) for t in tensors]
        """Per tensor leaf: whether the reference's own output view repeats memory (`_repeats_memory`)."""
        self.ref_leaves_share = any(correctness.shares_memory(t, tensors[:i]) for i, t in enumerate(tensors))
        """Whether two tensor leaves of the reference's output share memory."""
        self.ref_aliased: set[int] = set()
        """Tensor leaves (by index) the reference host has returned, at least once, in pages it
        maps at another address too or in its input slots (`cudal1.bench.backing`; CPU)."""
        self.ref_aliases_inputs = any(
            correctness.shares_memory(t, [v for v in x if isinstance(v, torch.Tensor)]) for t in tensors
        )
        self.in_bytes, self.out_bytes = in_bytes, out_bytes
        self.args_template = self._template(kept)
        free = torch.cuda.mem_get_info(self.device)[0] if self.cuda else None
        self.batch_cap = batch_capacity(
            in_bytes,
            out_bytes,
            len(self.out_specs),
            self.settings,
            free,
            answer_bytes=_answer_bytes(len(self.out_specs), [v for _, v in values]),
        )

    def _template(self, x: list[Any]) -> list[Any]:
        """The forward arguments as the host gets them: {"slot": i} for the i-th input tensor."""
        return [{"slot": self.in_tensors.index(i)} if i in self.in_tensors else v for i, v in enumerate(x)]

    def _check_layout(self, x: list[Any], out: Any = None) -> None:
        specs, _ = plan([v for v in x if isinstance(v, torch.Tensor)])
        if [(s.dtype, s.shape) for s in specs] != [(s.dtype, s.shape) for s in self.in_specs]:
            raise Verdict(Status.INVALID_TASK, "get_inputs() returned tensors of other shapes or dtypes than before")
        if out is not None:
            try:
                tree, leaves, _ = correctness.output_tree(out)
            except correctness.NoComparisonRule as exc:
                raise Verdict(Status.INVALID_TASK, f"the reference output cannot be judged: {exc}") from exc
            if tree != self.out_tree:
                raise Verdict(Status.INVALID_TASK, "the reference output changed its structure between input sets")
            specs, _ = plan([t for _, t in leaves])
            if [(s.dtype, s.shape) for s in specs] != [(s.dtype, s.shape) for s in self.out_specs]:
                raise Verdict(Status.INVALID_TASK, "the reference output changed shape or dtype between input sets")

    def _reference(self, x: list[Any]) -> Any:
        """The reference's output on `x` (a clone of `x` when the reference writes its inputs).
        Raises Verdict(invalid_task) when it fails, except for running out of device memory once
        the candidate is loaded: that OutOfMemoryError goes on to `_judge_failure`, which charges
        the candidate (its process may hold the memory), so that no candidate can make a trial
        look outside the reference's domain by filling the device."""
        xr = inputs_mod.clone_tree(x) if self.ref_mutates_inputs else x
        try:
            with torch.no_grad():
                out = self.ref_model(*xr)
            self._sync()
        except BaseException as exc:  # noqa: BLE001
            if self.host_loaded and isinstance(exc, torch.OutOfMemoryError):
                raise
            raise Verdict(Status.INVALID_TASK, f"reference forward failed: {type(exc).__name__}: {exc}") from exc
        return out

    # -- phase 2: the degenerate-task check ----------------------------------------------------

    def degenerate(self) -> None:
        """Is the task degenerate (wrong code passes)? Cached by the parent per task and profile."""
        report = self.cached_degenerate
        if report is None:
            from .degenerate import check_degeneracy, error_line

            def gen() -> list[Any]:
                with torch.device(self.device):
                    return [v.to(self.device) if isinstance(v, torch.Tensor) else v for v in self.module.get_inputs()]

            try:
                found = check_degeneracy(lambda: self.ref_model, gen)
                report = {"reason": found.reason, "notes": found.notes}
            except Exception as exc:  # noqa: BLE001 - not fatal to the evaluation, but never paid (below)
                report = {"reason": None, "failed": True, "notes": [f"degenerate-task check failed: {error_line(exc)}"]}
            self._sync()
        self.extra["degenerate"] = report
        if report.get("reason"):
            self.result.task_degenerate = report["reason"]
            self._label("degenerate_task")
        elif report.get("failed"):  # fail closed: unknown whether a constant-output shortcut passes here
            self._label("degenerate_check_failed")

    # -- phase 3: the host ---------------------------------------------------------------------

    def connect(self) -> None:
        """Hand each host (the candidate's, the reference's) an input slot of its own and a reader
        of its outputs; the reference host builds the task's reference."""
        if self.ref_chan is None:
            raise RuntimeError("the judge was started without a reference host")
        hello = self._recv("hello", sandbox=dict)
        self.extra["host_sandbox"] = hello["sandbox"]
        self._ref_recv("hello", sandbox=dict)
        try:
            if self.cuda:  # one slot per host for the whole evaluation (CPU: a fresh one per call)
                cap = self.batch_cap
                self.in_slot, self.ref_slot = (
                    Slot(self.in_bytes * cap, self.device),
                    Slot(self.in_bytes * cap, self.device),
                )
                self.views = {
                    "candidate": self._set_views(self.in_slot, cap),
                    "reference": self._set_views(self.ref_slot, cap),
                }
                self.reader: Any = IpcReader(self.device)
                self.ref_reader: Any = IpcReader(self.device)
            else:
                if self.link is None:
                    raise RuntimeError("the CPU backend reads outputs through the parent, and there is no parent link")
                capacity = self.batch_cap * (2 * self.out_bytes + 256 * (len(self.out_specs) + 1))
                self.reader = ParentReader(self.link, capacity, "candidate")
                self.ref_reader = ParentReader(self.link, capacity, "reference")
        except (OSError, RuntimeError, ProtocolError, Timeout, PeerGone) as exc:
            raise RuntimeError(f"the judge could not set up its slots and readers: {exc}") from exc
        self.ref_template = self.args_template
        common = dict(
            device=self.device,
            task=self.task.to_dict(),
            profile=self.profile,
            in_specs=[s.to_dict() for s in self.in_specs],
            out_specs=[s.to_dict() for s in self.out_specs],
            out_tree=self.out_tree,
            args=blob(list(self.args_template)),
            init=blob(self.init),
            init_seed=self.init_seed,
            ref_aliases_inputs=self.ref_aliases_inputs,
            set_bytes=self.in_bytes,
            batch_cap=self.batch_cap,
            threads=self.settings.host_threads,
        )
        ref_meta = self.ref_slot.export()[0] if self.cuda else None
        try:
            self.ref_chan.send("setup", role="reference", in_slot=ref_meta, **common)
        except PeerGone as exc:
            raise RuntimeError("the reference host died before its setup") from exc
        self._send(
            "setup", role="candidate", in_slot=self.in_slot.export()[0] if self.cuda else None, stand_in=True, **common
        )
        self._ref_recv("ready")
        self._recv("ready")

    def _ref_recv(self, op: str | tuple[str, ...], **types: Any) -> dict[str, Any]:
        """The reference host's next message: it runs no candidate code, so anything wrong with
        it is the harness's failure (RuntimeError), never the candidate's result."""
        try:
            msg = self.ref_chan.recv(self.deadline + GRACE_S)
            got = _one_of(msg, op)
            return expect(expect_host(msg, got), got, **types)
        except (Timeout, PeerGone, ProtocolError) as exc:
            raise RuntimeError(f"the reference host failed ({type(exc).__name__}: {exc})") from exc

    def _set_views(self, slot: Slot, sets: int) -> list[list[torch.Tensor]]:
        """Views of the input tensors of each of the first `sets` input sets of `slot` (set j
        starts at j * in_bytes)."""
        return [[slot.view(spec.moved(j * self.in_bytes)) for spec in self.in_specs] for j in range(sets)]

    @_spends("staging")
    def _stage(self, who: str, xs: list[list[Any]], template: list[Any]) -> tuple[dict[str, Any], list[int]]:
        """Write the tensors of the input sets `xs` (one list of forward arguments per call) where
        `who`'s host ("candidate" or "reference") will read them. On the CPU each set goes into a
        fresh slot of its own, every one written now, before the go; set 0's is sent with the
        message, each later one with its `reveal` (`_revealed`). So a call's inputs exist nowhere
        the host can see until they are its to run: no thread of the candidate can watch the
        judge write them and start early, nor reach a later call's. On CUDA it is the host's own
        slot, every set written (see the README's limits). Returns (message fields, descriptors
        to send)."""
        fields: dict[str, Any] = {"n": len(xs)}
        templates = [self._template(x) for x in (xs if self.cuda else xs[:1])]
        if any(t != templates[0] for t in templates):  # non-tensor arguments that differ between sets
            fields["args_each"] = blob(templates)
        elif templates[0] != template:  # ... or that changed since the host last heard of them
            fields["args"] = blob(templates[0])
        fds: list[int] = []
        if self.cuda:
            views = self.views[who][: len(xs)]
        else:
            slots = [Slot(self.in_bytes, self.device) for _ in xs]
            views = [self._set_views(slot, 1)[0] for slot in slots]
            meta, fds = slots[0].export()
            fields["in_slot"] = meta
            # The judge holds a call's slots until two calls later: the host then only unmaps
            # them, and the memory is freed here, outside any timed interval.
            self._staged[who] = [*self._staged.get(who, [])[-1:], slots]
            self.views[who] = views
        for x, set_views in zip(xs, views):
            for view, i in zip(set_views, self.in_tensors):
                view.copy_(x[i])
        return fields, fds

    def _revealed(
        self,
        who: str,
        xs: list[list[Any]],
        template: list[Any],
        recv: Callable[[tuple[str, ...]], dict[str, Any]],
        send: Callable[..., None],
        read: Callable[[list[Any], int], list[torch.Tensor]],
        fail: Callable[[str], None],
    ) -> tuple[dict[str, Any], list[list[Any]], list[list[Any]], list[list[torch.Tensor]], list[Any]]:
        """CPU: the rest of a round trip whose input sets are revealed one at a time, after the
        go (`cudal1.bench.host.Host._revealed_forwards`). For each call j: the host's `placed`,
        the judge's copy of that call's outputs (`read(leaves, j)`), then set j + 1's slot
        (written before the go, `_stage`) sent with its `reveal`. So a call cannot reach a later
        call's inputs, which are nowhere in the host until its own outputs are copied, nor hand
        in an output it finishes later, and the judge does no work of its own inside the round.

        `recv(ops)` takes the host's next message (one of `ops`, checked whole), `send(op,
        fds=None, **fields)` sends one, `fail(why)` raises for a broken protocol; each raises what its
        host's failures raise (a Verdict for the candidate, RuntimeError for the reference).
        `template` is the non-tensor argument template the host holds after the go.

        Returns (the host's `done`, which may come early and then carries the problem that
        ended the round; the leaves and values of each call placed; the judge's copy of each;
        the template the host holds now)."""
        n = len(xs)
        leaves: list[list[Any]] = []
        values: list[list[Any]] = []
        copies: list[list[torch.Tensor]] = []
        slots = self._staged[who][-1]
        for j in range(n):
            msg = recv(("placed", "done"))
            if msg["op"] == "done":
                return msg, leaves, values, copies, template
            if msg["j"] != j:
                fail(f"placed call {msg['j']} where call {j} was due")
            copies.append(read(msg["leaves"], j))
            leaves.append(msg["leaves"])
            values.append(msg["values"])
            if j + 1 < n:
                meta, fds = slots[j + 1].export()
                fields: dict[str, Any] = {"j": j + 1, "in_slot": meta}
                if (t := self._template(xs[j + 1])) != template:
                    fields["args"], template = blob(t), t
                send("reveal", fds=fds, **fields)
                slots[j + 1].close_fd()
        return recv(("done",)), leaves, values, copies, template

    def _go(
        self,
        who: str,
        xs: list[list[Any]],
        template: list[Any],
        timed: bool,
        count_cpu: bool = False,
        own_times: bool = True,
    ) -> tuple[int, dict[str, Any], list[int]]:
        """Stage the input sets `xs` for `who`'s host, flush and synchronize, and start the clock
        (timed, with `EvalSettings.warm_go`: the host is polling for the go first, `_poll`).
        `count_cpu`: begin an interval of the candidate's CPU time just before the clock starts
        (`_cpu_from_ns`: when the parent began to read its count). `own_times` False: the round
        trip is timed on the judge's clock alone (a one-call round), so the host is asked to keep
        no clock of its own (`own_times` in the message). Returns (the clock's start in ns, the
        fields of the call message, descriptors to send)."""
        if timed and self.settings.warm_go:
            # Before the inputs are staged: on CUDA the host has its slot mapped all along, and a
            # host that answered only once this round trip's inputs were there could compute
            # them before the clock starts.
            self._poll(who)
        fields, fds = self._stage(who, xs, template)
        if timed:
            self.clock.warm(self.settings.clock_warmup_ms)
            self.clock.flush()
        self._sync()
        if count_cpu:
            # After the staging: a host polling for its go spins through it (warm_go), and that
            # spin is no part of the round trip's work. `_call` counts the interval's elapsed
            # time from the go, or with warm_go from when the parent began to read the count
            # (the host spins from then on) until it ended the end reading. Limit, with warm_go
            # and no control group: the parent reads the candidate's processes one by one, and a
            # helper process read late at the start, or early at the end, gains what it ran
            # outside its reading (3.8 ms a reading with 50 idle processes to read).
            _, _, self._cpu_from_ns, _ = self._candidate_cpu_ns(start=True)
        self.k += 1
        fields["k"] = self.k
        if not own_times:
            fields["own_times"] = False
        return self.clock.now_ns(), fields, fds

    def _poll(self, who: str) -> None:
        """Ask `who`'s host to wait for the next message by polling its socket, and wait for its
        answer (`EvalSettings.warm_go`). The reference host's failure to answer is the harness's
        (RuntimeError); the candidate host's is the candidate's (`_recv`: a timeout, or a hack
        for anything else it sends)."""
        if who == "reference":
            self._ref_send("poll")
            self._ref_recv("polling")
        else:
            self._send("poll")
            self._recv("polling")

    def _sent(self, who: str) -> None:
        """After a message went: the judge's descriptor of the slot it carried is not needed."""
        for slots in self._staged.get(who, [])[-1:]:
            slots[0].close_fd()

    @_spends("reference call")
    @_gc_paused
    def _ref_call(self, xs: list[list[Any]], own_times: bool = True) -> tuple[float, list[float], list[Expected]]:
        """One round trip to the reference host: the reference run on each input set of `xs`,
        back to back, timed exactly as a candidate round trip is. From the calibration of both
        hosts on, every process of the candidate is stopped meanwhile (`_pause_candidate`).

        Returns (ms on the judge's clock from the go until the judge holds its copy of every
        output, ms of each forward on the reference host's own clock ([] with `own_times` False,
        `_go`), the reference outputs of each call: (tensors as read, non-tensor values)). Raises
        Verdict(resource_exceeded) when the reference host runs out of memory once the candidate
        is loaded (the candidate may hold it), RuntimeError for anything else that goes wrong
        (the reference host runs no candidate code).
        """
        paused = self._pause_candidate(True)
        try:
            return self._ref_round_trip(xs, own_times)
        finally:
            if paused:
                self._pause_candidate(False)

    def _pause_candidate(self, stop: bool) -> bool:
        """Stop (`stop`) or continue every process of the candidate, through the parent, from
        the candidate's import until its processes are ended. The reference is then timed with
        no candidate code running on the cores both share: on the CPU a candidate host spinning
        between its own round trips slowed the reference 1.5-2x on two cores (the clean
        baseline's high quantile let it keep most of that); on an H200 the same spin, on the
        evaluation's two cores, raised the reference host's round trips, and with them the fixed
        cost forgiven to the candidate (up to a jitter a round trip: paid 2.1x for x*2+1,
        docs/benchmarks.md). Work it left queued on the GPU still runs (the clean baselines cap
        what that does to the reference). True when the parent did it. Raises Verdict(hack,
        unfinished_work) when a thread of the candidate still ran once the parent's wait for the
        stop ended (`worker.PAUSE_WAIT_S`: a thread inside a long system call runs on in the
        kernel after SIGSTOP; a red team's slowed the reference that way), RuntimeError when the
        parent fails to answer (the harness's failure)."""
        if not self.pause_candidate or self.link is None:
            return False
        try:
            paused, running = self.link.pause_host(stop)
        except (ProtocolError, PeerGone, Timeout) as exc:
            raise RuntimeError(f"the parent did not {'stop' if stop else 'continue'} the candidate: {exc}") from exc
        if stop and running:
            raise Verdict(
                Status.HACK,
                f"{running} process(es) of the candidate kept a thread running after they were stopped for the "
                "reference's timing (a thread inside a long system call runs on in the kernel)",
                HackKind.UNFINISHED_WORK,
            )
        return paused

    def _ref_round_trip(self, xs: list[list[Any]], own_times: bool = True) -> tuple[float, list[float], list[Expected]]:
        """`_ref_call`'s round trip itself (`own_times` False: the host's own times are neither
        asked for nor returned, `_go`)."""
        self._overwrite_outputs("reference", self.ref_last_leaves)
        self.ref_last_leaves = []
        t0, fields, fds = self._go("reference", xs, self.ref_template, timed=True, own_times=own_times)
        self.ref_template = _sent_template(fields, self.ref_template)
        try:
            self.ref_chan.send("call", fds=fds, **fields)
        except PeerGone as exc:
            raise RuntimeError("the reference host died") from exc
        self._sent("reference")
        n = len(xs)

        def read(leaves: list[Any], j: int) -> list[torch.Tensor]:
            if not _calls_described([leaves], 1, len(self.out_specs)):
                raise RuntimeError("the reference host described its calls wrongly")
            return self._ref_read([leaves], 1, append=j > 0)[0]

        def fail(why: str) -> None:
            raise RuntimeError(f"the reference host broke the protocol: {why}")

        if self.cuda:
            msg = self._ref_recv("done", k=int, inner_ms=list, leaves=list, values=list)
        else:
            msg, leaves, values, tensors, self.ref_template = self._revealed(
                "reference", xs, self.ref_template, self._ref_recv, self._ref_send, read, fail
            )
            msg["leaves"], msg["values"] = leaves, values
            self.ref_last_leaves = leaves
        answered = self.clock.now_ns()
        error = msg.get("error")
        if self.host_loaded and isinstance(error, dict) and error.get("status") == Status.RESOURCE_EXCEEDED.value:
            # Device memory is not limited per process: a candidate holding all of it (stopped,
            # but its memory stays) makes the reference host's next allocation fail. Masked as
            # the harness's, that would be a failure a policy could learn to provoke.
            raise Verdict(
                Status.RESOURCE_EXCEEDED,
                "the reference host ran out of memory while the candidate held its own: "
                f"{str(error.get('message'))[:300]}",
            )
        if (
            msg["k"] != self.k
            or msg.get("error") is not None
            or msg.get("mismatch") is not None
            or msg.get("hack") is not None
        ):
            raise RuntimeError(f"the reference failed in the reference host: {str(msg)[:600]}")
        # Not asked for (`own_times` False), the host's times are not read (the CPU's host sends them anyway).
        inner = timing.claimed_total_ms(msg["inner_ms"], n) if own_times else 0.0
        if inner is None or len(msg["values"]) != n or not _calls_described(msg["leaves"], n, len(self.out_specs)):
            raise RuntimeError("the reference host described its calls wrongly")
        if self.cuda:
            tensors = self._ref_read(msg["leaves"], n)
        self._sync()
        wall_ms = (self.clock.now_ns() - t0) / 1e6
        audit = self._ref_recv("audited")
        if audit["hack"] is not None:
            raise RuntimeError(f"the reference host reported its own outputs: {str(audit)[:300]}")
        self._note_trip("reference", t0, wall_ms, (answered - t0) / 1e6, msg, audit)
        own = [float(v) for v in msg["inner_ms"]] if own_times else []
        return wall_ms, own, list(zip(tensors, msg["values"]))

    def _ref_read(self, leaves: list[list[Any]], n: int, append: bool = False) -> list[list[torch.Tensor]]:
        """The judge's copy of `n` reference calls' outputs (`leaves`: one list of descriptions
        per call); with `append` (CPU), placed after the last read's. Raises RuntimeError when
        they cannot be read (the reference host runs no candidate code)."""
        try:
            more = {"append": True} if append else {}  # the CPU's reader only
            read = _regroup(self.ref_reader.read(_flat(leaves), self.out_specs * n, **more), n)
            self.ref_aliased.update(i % len(self.out_specs) for i, _ in self.ref_reader.aliased)
            return read
        except ReadError as exc:
            raise RuntimeError(f"the judge could not read the reference's outputs: {exc}") from exc

    def _note_trip(
        self,
        who: str,
        go_ns: int,
        wall_ms: float,
        answered_ms: float,
        msg: dict[str, Any],
        audit: dict[str, Any],
        cpu: tuple[float, float, float | None] | None = None,
    ) -> None:
        """Keep the record of a round trip of the timing pass (see `EvalResult.round_trips`) whose
        go was sent at `go_ns` on the judge's clock; the host's parts come from its answer (`msg`)
        and its audit after it (`audit`); `cpu`, where the candidate's CPU time was counted: (its
        processes' CPU ms in the interval, the interval's ms on the judge's clock, the most ms one
        of its threads ran in it or None)."""
        if self.recording is None:
            return
        if self.first_go_ns is None:
            self.first_go_ns = go_ns
        # Everything here may come from the candidate's process: kept only where it is sane data.
        parts = {**(msg.get("parts_ms") or {}), **(audit.get("parts_ms") or {})}
        parts = (
            {k: round(v, 4) for k, v in parts.items() if isinstance(k, str) and type(v) is float and math.isfinite(v)}
            if len(parts) <= 8
            else {}
        )
        inner = msg.get("inner_ms")
        own = timing.claimed_total_ms(inner, len(inner)) if isinstance(inner, list) and inner else None
        record = {
            "go_s": round((go_ns - self.first_go_ns) / 1e9, 6),
            "wall_ms": round(wall_ms, 4),
            "answered_ms": round(answered_ms, 4),
            "own_ms": None if own is None else round(own, 4),
            "host_parts_ms": parts,
        }
        if cpu is not None:
            record["parallel_cpu_ms"] = round(timing.parallel_cpu_ms(*cpu), 4)
            record["cpu_ms"], record["cpu_interval_ms"] = round(cpu[0], 4), round(cpu[1], 4)
            record["busiest_thread_ms"] = None if cpu[2] is None else round(cpu[2], 4)
        self.result.round_trips.setdefault(self.recording + who, []).append(record)

    @_spends("candidate call")
    @_gc_paused
    def _call(
        self, xs: list[list[Any]], *, timed: bool, own_times: bool = True
    ) -> tuple[float, dict[str, Any], list[list[torch.Tensor]]]:
        """One round trip to the candidate host: `ModelNew` run on each input set of `xs`, back
        to back (`own_times` False: a round trip timed on the judge's clock alone, `_go`).

        Returns (ms on the judge's clock from the go until the judge holds its copy of every
        output, the host's answer, that copy: one list of output tensors per call). Raises Verdict
        for a failure the host reports, an output that cannot be read, or a broken protocol.
        """
        self._last_output_unchanged()
        if self.last_snapshot is not None:
            self._overwrite_outputs("candidate", self.last_leaves)
        if self.chan.pending():
            raise Verdict(
                Status.HACK, "the candidate process sent a message nobody asked for", HackKind.HARNESS_TAMPERING
            )
        counting = timed and self.settings.count_cpu_time and not self.cuda and self.link is not None
        t0, fields, fds = self._go("candidate", xs, self.args_template, timed, count_cpu=counting, own_times=own_times)
        self.args_template = _sent_template(fields, self.args_template)
        try:
            self.chan.send("call", fds=fds, **fields)
        except PeerGone as exc:
            raise Verdict(
                Status.RUNTIME_ERROR, "the candidate process died", labels=["worker_crashed", _HOST_FAULT]
            ) from exc
        self._sent("candidate")
        n = len(xs)
        self.last_snapshot = None  # the last round trip's copies are freed before this one's are made
        if self.cuda:
            msg = self._recv("done", k=int, leaves=list, values=list)
        else:
            msg, leaves, values, snapshot, self.args_template = self._revealed(
                "candidate", xs, self.args_template, self._recv, self._send, self._read_call, self._tampered
            )
        answered = self.clock.now_ns()
        if msg["k"] != self.k:
            raise Verdict(Status.HACK, "the candidate process answered another call", HackKind.HARNESS_TAMPERING)
        self._host_verdicts(msg)  # on the CPU also a round the host ended early: its problem
        if not self.cuda:
            if len(leaves) != n or msg["leaves"] or msg["values"]:
                self._tampered("done came before every call was placed, or restated the outputs")
            msg["leaves"], msg["values"] = leaves, values
        if len(msg["values"]) != n or not all(isinstance(v, list) for v in msg["values"]):
            raise Verdict(Status.HACK, "the candidate process described its calls wrongly", HackKind.HARNESS_TAMPERING)
        if self.cuda:
            snapshot = self._read(msg["leaves"], n)
        self._sync()
        wall_ms = (self.clock.now_ns() - t0) / 1e6
        self.cpu_excess_ms = 0.0
        cpu: tuple[float, float, float | None] | None = None
        if counting:
            # Read as soon as the judge holds the outputs, before the host's audit: a host that
            # idled before answering `audited` would otherwise lengthen the interval with time
            # it spent on nothing, which the count lends to other cores (a red team's host slept
            # 40 ms there and ran two threads uncharged: 1.54-2.00x against an honest 1.0x).
            # Without warm_go from the go to before the end reading (nothing of the parent's
            # reading time is left to other cores); with it, the span of the two readings (the
            # host spins through the start; through the end it audits).
            now = self.clock.now_ns()
            ns, busiest, _, read_to = self._candidate_cpu_ns(start=False)
            since, until = (self._cpu_from_ns, read_to) if self.settings.warm_go else (t0, now)
            cpu = (ns / 1e6, (until - since) / 1e6, None if busiest is None else busiest / 1e6)
            self.cpu_excess_ms = timing.parallel_cpu_ms(*cpu)
        # The host's memory checks, made after it answered: outside the interval just timed.
        audit = self._recv("audited")
        self._host_verdicts(audit)
        self._note_trip("candidate", t0, wall_ms, (answered - t0) / 1e6, msg, audit, cpu)
        self.last_leaves, self.last_snapshot = msg["leaves"], snapshot
        return wall_ms, msg, snapshot

    def _candidate_cpu_ns(self, start: bool) -> tuple[int, int | None, int, int]:
        """Begin (`start`) or end an interval of the candidate's CPU time. Returns (the ns it
        spent since the interval began, the most ns one of its threads spent (None where the
        machine does not say), the judge's clock in ns as the parent began and as it ended reading
        the count: `ParentLink.cpu_interval`'s, kept within this request's own span). Raises
        RuntimeError when the parent does not answer (the harness's failure)."""
        asked = self.clock.now_ns()
        try:
            ns, busiest, began, ended = self.link.cpu_interval(start)
        except (ProtocolError, PeerGone, Timeout) as exc:
            raise RuntimeError(f"the parent did not say the candidate's CPU time: {exc}") from exc
        answered = self.clock.now_ns()
        return ns, busiest, min(max(began, asked), answered), min(max(ended, asked), answered)

    def _ref_send(self, op: str, fds: list[int] | None = None, **fields: Any) -> None:
        try:
            self.ref_chan.send(op, fds=fds, **fields)
        except PeerGone as exc:
            raise RuntimeError("the reference host died") from exc

    def _tampered(self, why: str) -> None:
        raise Verdict(Status.HACK, f"the candidate process broke the protocol: {why}", HackKind.HARNESS_TAMPERING)

    def _read_call(self, leaves: Any, j: int) -> list[torch.Tensor]:
        """The judge's copy of call `j`'s outputs in a revealed round trip (CPU), after the
        copies of the calls before it (`_read`)."""
        return self._read([leaves], 1, append=j > 0)[0]

    @_spends("reading")
    def _read(self, leaves: Any, n: int, again: bool = False, append: bool = False) -> list[list[torch.Tensor]]:
        """The judge's copy of the outputs of `n` calls as the candidate host described them
        (`leaves`: one list of descriptions per call; `cudal1.bench.readers`); with `append`
        (CPU), placed after the last read's."""
        if not _calls_described(leaves, n, len(self.out_specs)):
            raise Verdict(
                Status.HACK, "the candidate process described its outputs wrongly", HackKind.HARNESS_TAMPERING
            )
        for call in leaves:
            for desc, spec, path, allowed in zip(call, self.out_specs, self.tensor_paths, self.ref_repeats):
                if not allowed and _repeats_memory(desc.get("strides"), spec.shape):
                    # A view that maps several indices to one element: the values the judge reads
                    # are right, most of the output was never written (a row mean expanded to its
                    # rows, a stride 0: paid 2-3x, floored; sliding windows of one row, strides (1, 1)).
                    raise Verdict(
                        Status.HACK,
                        f"{path}: the output repeats memory (strides {desc.get('strides')}: a stride 0, "
                        f"or dimensions that overlap) where the reference's holds every value once",
                        HackKind.NOT_MATERIALIZED,
                    )
            if not self.ref_leaves_share and (pair := _overlapping(call, self.out_specs)) is not None:
                # One tensor for two outputs: each value read is right, one output never written.
                raise Verdict(
                    Status.HACK,
                    f"{self.tensor_paths[pair[0]]} and {self.tensor_paths[pair[1]]} share memory, where the "
                    "reference's outputs are separate",
                    HackKind.NOT_MATERIALIZED,
                )
        try:
            more = {"append": True} if append else {}
            read = _regroup(self.reader.read(_flat(leaves), self.out_specs * n, again=again, **more), n)
            self._materialized(self.reader.aliased)
            return read
        except ReadError as exc:
            raise _memory_failure(
                exc,
                "the judge could not read the outputs",
                "the candidate process reported outputs that cannot be read",
            ) from exc

    def _materialized(self, aliased: list[tuple[int, str]]) -> None:
        """Refuse outputs that repeat memory through the page tables, lie in the judge's input
        slots or hold values on pages never written (`aliased`: (index into the read's flat list
        of tensors, "repeat", "input" or "unwritten"); `cudal1.bench.pagemap`;
        `cudal1.bench.backing`), where the reference's do not: a page of a file or shared region
        mapped at several addresses holds values written once for several places (a tile mapped
        4 times: paid 1.37x against 1.0x), and input pages moved under an output were never
        copied there."""
        for i, why in aliased:
            leaf = i % len(self.out_specs)
            if leaf in self.ref_aliased:
                continue
            if why == "unwritten":
                raise Verdict(
                    Status.HACK,
                    f"{self.tensor_paths[leaf]}: the output holds values on pages never written (the "
                    "kernel's zero page, or none at all), where the reference's does not",
                    HackKind.NOT_MATERIALIZED,
                )
            if why == "input":
                raise Verdict(
                    Status.HACK,
                    f"{self.tensor_paths[leaf]}: the output lies in the pages of the judge's inputs",
                    HackKind.OUTPUT_ALIASES_INPUT,
                )
            raise Verdict(
                Status.HACK,
                f"{self.tensor_paths[leaf]}: the output repeats memory through the page tables (pages of a "
                "file or shared region that the candidate's process maps at another address too), where "
                "the reference's does not",
                HackKind.NOT_MATERIALIZED,
            )

    def _host_verdicts(self, msg: dict[str, Any]) -> None:
        if msg.get("error") is not None:
            raise self._host_failure(msg["error"])
        hack = msg.get("hack")
        if hack is not None:
            if not isinstance(hack, dict) or not isinstance(hack.get("message"), str):
                raise Verdict(Status.HACK, "the candidate process sent a malformed report", HackKind.HARNESS_TAMPERING)
            try:
                kind = HackKind(hack.get("kind"))
            except ValueError:
                kind = HackKind.HARNESS_TAMPERING
            raise Verdict(Status.HACK, hack["message"][:600], kind)
        if msg.get("mismatch") is not None:
            raise Verdict(Status.INCORRECT, str(msg["mismatch"])[:600])

    @_spends("overwriting")
    def _overwrite_outputs(self, who: str, leaves: list[list[Any]]) -> None:
        """CPU: have the parent write `overwrite_byte` over every element byte of the outputs of
        `who`'s last round trip (`leaves`, as described), once the judge has read them (and, the
        candidate's, read them again: `_last_output_unchanged`), before the host's next round
        trip: an output byte that a later call does not write again then reads as that pattern,
        not as what an earlier call left there. Without it, a candidate returning one of a ring
        of buffers whose constant part (pad_rows' zero rows) it wrote once at init was paid for
        outputs it did not make (the forty-fourth session's red team: the judge's time a call
        fell 2x, 40x at 256 MiB). Both hosts' outputs, so both time their calls after the same
        writes. Left alone: the tensor leaves the reference returns in memory its model keeps
        (`ref_persistent`), repeats through the page tables or in its input slots
        (`ref_aliased`), and all of them where its outputs alias its inputs or cannot be written
        (then for the rest of the evaluation). CUDA: not done (a limit, README). Raises
        RuntimeError for the judge's failure or the reference host's, Verdict for a candidate
        whose outputs cannot be written over."""
        if self.cuda or not leaves or self.ref_aliases_inputs:
            return
        keep = [i for i in range(len(self.out_specs)) if i not in self.ref_persistent and i not in self.ref_aliased]
        if not keep:
            return
        reader = self.reader if who == "candidate" else self.ref_reader
        try:
            reader.overwrite(
                [call[i] for call in leaves for i in keep],
                [self.out_specs[i] for _ in leaves for i in keep],
                self.overwrite_byte,
            )
        except (ReadError, ProtocolError) as exc:
            why = exc.why if isinstance(exc, ReadError) else "harness"
            if who == "reference" and why == "unreadable":
                # The task's own outputs are not writable memory (read-only pages): nothing is
                # written over in this evaluation, on either side.
                self.ref_persistent = set(range(len(self.out_specs)))
                return
            if who == "reference" or why == "harness":
                raise RuntimeError(f"the judge could not write over the {who}'s last outputs: {exc}") from exc
            raise _memory_failure(
                exc,
                "the judge could not write over the candidate's last outputs",
                "the candidate's last outputs cannot be written over after the judge read them",
            ) from exc

    @_spends("output re-read")
    def _last_output_unchanged(self) -> None:
        """The last round trip's outputs, read again from the candidate's process, must still be
        what the judge copied when it was answered (the host keeps them alive until the next
        round trip). Of a batch, a secret sample of `RE_READ` calls is read again (all, when it
        has no more): an output rewritten later is rewritten for some share of the calls, and
        every round trip draws a new sample."""
        if self.last_snapshot is None:
            return
        n = len(self.last_snapshot)
        picked = list(range(n)) if n <= RE_READ else sorted(self.pick.sample(range(n), RE_READ))
        now = self._read([self.last_leaves[i] for i in picked], len(picked), again=True)
        self._sync()
        if not all(correctness.tree_equal(a, self.last_snapshot[i]) for a, i in zip(now, picked)):
            raise Verdict(
                Status.HACK, "an output changed after the candidate answered the call", HackKind.OUTPUT_CHANGED_LATER
            )

    @_spends("comparing")
    def _compare(self, snapshot: list[torch.Tensor], values: list[Any], expected: Expected) -> tuple[str | None, float]:
        """Why the candidate's outputs (its tensors as the judge read them, plus non-tensor values)
        differ from the reference's (`expected`), or None; and the largest absolute error."""
        ref_tensors, ref_values = expected
        if len(values) != len(ref_values):
            return f"output has {len(values)} non-tensor values, the reference {len(ref_values)}", float("nan")
        for (path, kind), got, want in zip(self.value_kinds, values, ref_values):
            why = correctness.compare_value(kind, got, want, self.settings.rtol, self.settings.atol)
            if why is not None:
                return f"{path}: {why}", float("nan")
        worst = 0.0
        floors = self.scale_floors or [1.0] * len(ref_tensors)
        for path, got, want, floor in zip(self.tensor_paths, snapshot, ref_tensors, floors):
            ok, err, message = correctness.compare_values(
                got, want, self.settings.rtol, self.settings.atol, scale_floor=floor
            )
            if not ok:
                return f"output tensor {path}: {message}", err
            worst = max(worst, err)
        return None, worst

    def _explain_mismatch(
        self, ref_out: Expected, what: str, message: str, timed: bool, max_abs_error: float, at: int = 0
    ) -> Verdict:
        """A wrong answer: finished late (a hack), reported tampering (a hack), or just wrong. The
        judge already holds the wrong answer: whatever the candidate's process does while this is
        looked into (dies, stalls, says nothing) cannot make the verdict better than that."""
        if timed:
            base = Verdict(
                Status.HACK,
                f"{what} gave a wrong output after the correctness trials passed: {message}",
                HackKind.RESULT_CACHE,
            )
        else:
            base = Verdict(Status.INCORRECT, f"{what}: {message}", max_abs_error=max_abs_error)
        try:
            return self._late_or_patched(ref_out, what, at) or base
        except Verdict as later:
            return later if later.status is Status.HACK else base

    def _late_or_patched(self, ref_out: Expected, what: str, at: int) -> Verdict | None:
        """Call `at` of the last round trip answered wrongly: is its output right a moment later?"""
        time.sleep(0.2)
        late = self._read([self.last_leaves[at]], 1, again=True)[0]
        self._sync()
        self.last_snapshot = None  # the verdict is settled here
        if self._compare(late, self._last_values[at], ref_out)[0] is None:
            return Verdict(
                Status.HACK, f"{what}: the output was completed after the call was answered", HackKind.UNFINISHED_WORK
            )
        self._host_check(f"after a wrong answer ({what})")
        return None

    @_spends("host check")
    def _host_check(self, when: str) -> None:
        """Ask the host for replaced functions, the operator canary and flags."""
        self._send("check", when=when)
        msg = self._recv("checked", labels=list, patches=list)
        patches = str_list_or_tamper(msg["patches"])
        if patches:
            names = [p.split(": ", 1)[-1] for p in patches]
            raise Verdict(Status.HACK, f"replaced {', '.join(patches[:5])}", guards.patch_hack_kind(names))
        if msg.get("canary") is not None:
            raise Verdict(Status.HACK, f"operators were overridden: {str(msg['canary'])[:300]}", HackKind.MONKEY_PATCH)
        self._host_labels(msg["labels"])

    def _ref_check(self) -> None:
        """The reference host runs the same check as the candidate host after a timing round:
        that work (a walk of the watched functions, the operator canary on the device, the flags)
        slows the next forward (seen on the H200: 0.3 ms, an eighth of a 2.4 ms call), and both
        hosts must pay it alike. Anything the reference host reports is the harness's failure."""
        try:
            self.ref_chan.send("check", when="reference")
        except PeerGone as exc:
            raise RuntimeError("the reference host died") from exc
        msg = self._ref_recv("checked", labels=list, patches=list)
        if msg["patches"] or msg.get("canary") is not None:
            raise RuntimeError(f"the reference host reports changes: {str(msg)[:300]}")

    @_spends("input check")
    def _inputs_unchanged(self, xs: list[list[Any]], what: str) -> None:
        """Every input set of the last round trip is still what the judge wrote into the
        candidate's slot."""
        if self.ref_mutates_inputs:
            return
        for x, views in zip(xs, self.views["candidate"]):
            if not correctness.tree_equal([x[i] for i in self.in_tensors], list(views)):
                raise Verdict(Status.HACK, f"{what}: an input was modified in place", HackKind.INPUT_MUTATED)

    # -- phase 4: warm-up, calibration, reference baseline --------------------------------------

    def calibrate(self) -> None:
        """Before the candidate exists: run the reference through the whole round trip, first one
        call at a time in the reference host, then in batches in both hosts (`_calibrate_both`).

        The one-call round trips give the reference's time and their jitter, and from these the
        calls per timed round trip, K (`timing.batch_size`): chosen from the task alone, so the
        candidate has no say in how it is timed. The batched round trips give each host's fixed
        cost (the judge's clock minus the host's own time of its K forwards; the candidate
        host's is `overhead_ms`, which bounds what that host may claim later), its jitter over K
        (`resolution_ms`, ms per call: two times closer than that are not told apart) and a high
        quantile of the reference's per-call times (`baseline_ms`, which bounds the reference
        time later)."""
        s = self.settings
        x = self._inputs()
        self._check_layout(x)
        # Long enough for the host's allocator to settle (the first calls of a process fault in
        # fresh pages for their outputs: on the CPU that alone can double a call).
        for _ in range(max(CALIBRATION_WARMUP, s.warmup_calls)):
            self._ref_call([x])
        walls, inner = [], []
        for _ in range(max(3, s.calibration_calls)):
            wall_ms, ref_ms, _ = self._ref_call([x])
            walls.append(wall_ms)
            inner.append(ref_ms[0])
        _, one_call_jitter = timing.calibration(walls, inner)
        self.batch = timing.batch_size(
            statistics.median(inner[len(inner) // 3 :]),
            one_call_jitter,
            factor=s.jitter_factor,
            min_round_ms=s.min_round_ms,
            max_round_ms=s.max_round_ms,
            least=min(s.calls_per_round, self.batch_cap),
            most=self.batch_cap,
        )
        self.result.calls_per_round = self.batch
        self._calibrate_both(max(2, s.calibration_rounds))
        self.result.overhead_ms = round(self.overhead_ms, 6)
        self.result.resolution_ms = round(self.resolution_ms, 6)
        self.result.calibration_resolution_ms = round(self.resolution_ms, 6)
        self.calibration_resolution_ms = self.resolution_ms
        self.result.baseline_ms = round(self.baseline_ms, 6)
        self.extra["calibration"] = {
            "one_call_ms": statistics.median(inner),
            "one_call_jitter_ms": one_call_jitter,
            "batch": self.batch,
            "reference_trips_ms": self.ref_calibration_trips,
            "candidate_host_trips_ms": self.calibration_trips,
        }

    def _calibrate_both(self, rounds: int) -> None:
        """Round trips of K calls to both hosts, interleaved in random order as timing does, with
        both running the reference (the candidate host's stand-in, before any candidate code
        exists): each host's fixed cost under the conditions of a timing pass. The candidate
        host's bounds what its claims may leave out later (`_timing_pass`); the reference host's
        per-call times give the clean baseline. The candidate host is stopped while the reference
        host's round trips run, as it will be once it holds the candidate (`_pause_candidate`), so
        that both fixed costs are measured as the timing pass will see them. Then as many one-call
        round trips to both hosts as the timing pass will make (`EvalSettings.one_call_rounds`):
        the bias of their difference (`timing.one_call_floor_ms`); with
        `EvalSettings.one_call_calibration_as_pass` the first of them lie at random places among
        the batched rounds and every round is checked as in the pass (`_stand_in_checked`)."""
        self.pause_candidate = True
        ref_trips: list[float] = []
        cand_trips: list[float] = []
        per_call: list[float] = []
        as_pass = self.settings.one_call_calibration_as_pass
        ones = self.settings.one_call_rounds if self.batch > 1 else 0  # K = 1: nothing to batch across
        # The first round lets both hosts' allocators settle at K outputs; the one-call rounds
        # (None) follow the batched ones, or lie among them as in a timing pass.
        schedule: list[int | None] = list(range(1, rounds + 1))
        if as_pass:
            schedule += [None] * ones
            self.order.shuffle(schedule)
        self.one_call_calibration = []
        try:
            for r in [0, *schedule]:
                xs = expected = msg = snapshot = None  # the last round's go before this one's are made
                if r is None:
                    self.recording = "calibration one-call "
                    self.one_call_calibration.append(self._one_call_round(None))
                    continue
                self.recording = "calibration "
                xs = self._input_sets()
                for who in self.order.sample(["reference", "candidate"], 2):
                    if who == "reference":
                        wall_ms, inner, expected = self._ref_call(xs)
                        if r:
                            ref_trips.append(wall_ms - sum(inner))
                            per_call.append(sum(inner) / len(inner))
                    else:
                        wall_ms, msg, snapshot = self._call(xs, timed=True)
                        own = timing.claimed_total_ms(msg.get("inner_ms"), len(xs))
                        if own is None:
                            raise RuntimeError("the candidate host sent no times while running the reference")
                        if r:
                            cand_trips.append(wall_ms - own)
                if as_pass:
                    self._stand_in_checked(xs, expected, msg, snapshot)
            self.recording = "calibration one-call "
            while len(self.one_call_calibration) < ones:
                self.one_call_calibration.append(self._one_call_round(None))
            self.one_call_count = self._one_call_count(statistics.median(per_call))
            while len(self.one_call_calibration) < self.one_call_count:
                self.one_call_calibration.append(self._one_call_round(None))
        except Verdict as v:  # no candidate code exists yet: whatever failed is the harness's
            raise RuntimeError(f"the candidate host failed while running the reference: {v.message}") from v
        finally:
            self.recording = None
        self.last_snapshot = None  # the stand-in's outputs are gone once the candidate is loaded
        self.ref_calibration_trips, self.calibration_trips = ref_trips, cand_trips
        self.overhead_ms = max(statistics.median(cand_trips), 0.0)
        self.trip_jitter_ms = timing.jitter(ref_trips + cand_trips)
        self.resolution_ms = self.trip_jitter_ms / self.batch
        # A high quantile of the clean rounds: the interleaved median exceeds it only when
        # something slowed the reference, and honest noise rarely does.
        self.baseline_ms = timing.percentile(per_call, 0.9)

    def _one_call_count(self, reference_ms: float) -> int:
        """How many one-call rounds the calibration and each pass make, from the calibration's
        first ones (`timing.one_call_round_count`; `reference_ms`: the reference's per-call
        figure, ms): `EvalSettings.one_call_rounds` unless `one_call_share` asks for more."""
        s, first = self.settings, self.one_call_calibration
        if s.one_call_share <= 0.0 or len(first) < 2:
            return len(first)
        pair_ms = statistics.median([c + r for c, r in first])
        most = max(len(first), min(s.max_one_call_rounds, int(s.one_call_budget_s * 1e3 / max(pair_ms, 1e-3))))
        jitter = timing.jitter([c - r for c, r in first])
        return timing.one_call_round_count(len(first), most, jitter, reference_ms, s.one_call_margin, s.one_call_share)

    @_spends("inputs")
    def _input_sets(self, n: int | None = None) -> list[list[Any]]:
        """`n` (default K) fresh input sets, each checked against the task's layout."""
        self.counter += 1
        xs = inputs_mod.make_input_sets(
            self.module, self._seed(self.counter), self.device, self.batch if n is None else n
        )
        for x in xs:
            self._check_layout(x)
        return xs

    def _ref_rounds(self, rounds: int) -> tuple[list[float], list[float]]:
        """`rounds` round trips of K reference calls on fresh inputs: (each round trip's fixed
        cost: the judge's time less the host's time of its forwards, ms; each round's ms per
        call on the reference host's clock)."""
        trips, per_call = [], []
        for _ in range(rounds):
            wall_ms, inner, _ = self._ref_call(self._input_sets())
            trips.append(wall_ms - sum(inner))
            per_call.append(sum(inner) / len(inner))
        return trips, per_call

    def _one_call_round(self, what: str | None) -> tuple[float, float]:
        """One one-call round: a fresh input set to both hosts, in random order. Returns (the
        candidate host's round trip, the reference host's), ms on the judge's clock (on the
        CPU the candidate's CPU time beyond one core counts, as in a batched round). With
        `what`, the candidate's output is checked as every timed output is, named `what` in a
        failure (None: the calibration's, where the candidate host runs the reference; with
        `EvalSettings.one_call_calibration_as_pass` checked as well, `_stand_in_checked`)."""
        xs = self._input_sets(1)
        walls: dict[str, float] = {}
        expected: Any = None
        for who in self.order.sample(["reference", "candidate"], 2):
            # Timed on the judge's clock alone: neither host times its own forward (on an H100 a
            # host without its events gained 0.07-0.09 ms of sin_chain's one-call round trips
            # against the calibration, the stock host 0.02 ms, and the floor credited that;
            # docs/benchmarks.md, fortieth session).
            if who == "reference":
                walls[who], _, expected = self._ref_call(xs, own_times=False)
            else:
                wall_ms, msg, snapshot = self._call(xs, timed=True, own_times=False)
                walls[who] = wall_ms + self.cpu_excess_ms
        if what is not None:
            self._check_timed(xs, expected, msg, snapshot, what)
        elif self.settings.one_call_calibration_as_pass:
            self._stand_in_checked(xs, expected, msg, snapshot)
        return walls["candidate"], walls["reference"]

    def _stand_in_checked(self, xs: list[list[Any]], expected: list[Expected], msg: Any, snapshot: Any) -> None:
        """A calibration round's checks, made as the timing pass makes them (`_check_timed`) for
        the hosts to wait between round trips as long as they will then
        (`EvalSettings.one_call_calibration_as_pass`); what they find is dropped (the stand-in
        runs the reference)."""
        for i, want in enumerate(expected):
            self._compare(snapshot[i], msg["values"][i], want)
        try:
            self._inputs_unchanged(xs, "a calibration round")
        except Verdict:
            pass

    # -- phase 5: the candidate ----------------------------------------------------------------

    def load_candidate(self) -> None:
        self.pause_candidate = True
        t0 = time.perf_counter()
        self._send("load", source=self.source)
        msg = self._recv("loaded", ok=bool, build_seconds=float, labels=list, patches=list)
        # The host's figure, no longer than the load took on the judge's clock (the candidate's
        # process can send any number; a forged million seconds went straight into the metrics).
        self.result.build_seconds = round(min(msg["build_seconds"], time.perf_counter() - t0), 3)
        self._host_labels(msg["labels"])
        patches = str_list_or_tamper(msg["patches"])
        if patches:
            names = [p.split(": ", 1)[-1] for p in patches]
            raise Verdict(Status.HACK, f"replaced {', '.join(patches[:5])}", guards.patch_hack_kind(names))
        if msg.get("canary") is not None:
            raise Verdict(Status.HACK, f"operators were overridden: {str(msg['canary'])[:300]}", HackKind.MONKEY_PATCH)
        if not msg["ok"]:
            raise self._host_failure(
                {"status": msg.get("status"), "hack": msg.get("hack"), "message": str(msg.get("message"))}
            )
        self.host_loaded = True

    def check_correctness(self) -> None:
        """`correctness_trials` nominal trials, then `shifted_trials` (`SHIFTS`) and `wide_trials`
        (`WIDE`) on spread inputs. The reference decides whether a spread trial lies in the task's
        domain: where it raises, its output is not finite while its nominal outputs were, or it is
        ill-conditioned (`CONDITION_SHARE`), the trial is skipped (listed in
        `EvalResult.skipped_trials`), never held against the candidate; a spread trial that moves
        no input (no integer input to widen) is not run.
        Raises Verdict: the first wrong answer (incorrect, naming the trial), a hack, or a
        reference that fails on its nominal inputs (invalid task)."""
        s = self.settings
        specs: list[tuple[str | None, tuple[float, float] | None, tuple[int, int] | None]]
        specs = [(None, None, None)] * s.correctness_trials
        specs += [
            (f"shifted {SHIFTS[i % len(SHIFTS)]}", SHIFTS[i % len(SHIFTS)], None) for i in range(s.shifted_trials)
        ]
        specs += [WIDE[i % len(WIDE)] for i in range(s.wide_trials)]
        worst, trials, nominal_finite = 0.0, 0, True
        skipped: list[str] = []
        for name, shift, int_shift in specs:
            # The last trial's tensors go before this one's are made: on KernelBench's largest
            # tasks each input and output is 6 GiB, and two trials' at once did not fit 80 GB.
            x = ref_out = snapshot = expected = msg = None
            what = f"trial {name}" if name else f"trial {trials + 1}"
            if name is None:
                x = self._inputs()
            else:
                x, moved = self._spread_inputs(shift, int_shift)
                if not moved:
                    continue  # a nominal trial again: nothing of its kind to move
            self._check_layout(x)
            why = self._outside_domain(x) if int_shift is not None else None
            if why is None:
                try:
                    ref_out = self._reference(x)
                except Verdict as v:
                    if name is None or any(m in v.message for m in CUDA_FAULT_MARKERS):
                        raise
                    why = f"the reference raises there ({v.message.removeprefix('reference forward failed: ')[:200]})"
            if why is None:
                self._check_layout(x, ref_out)
                finite = _finite(ref_out)
                if name is None:
                    nominal_finite = nominal_finite and finite
                elif nominal_finite and not finite:
                    why = "the reference's output is not finite there"
            if why is None and name is not None and (share := self._sensitivity(x, ref_out)) > CONDITION_SHARE:
                why = (
                    f"the reference is ill-conditioned there (inputs changed at the rounding level move its "
                    f"output by {share:.2g} of the tolerance)"
                )
            if why is not None:
                skipped.append(f"{what}: {why}")  # the reference leaves its domain here: no trial
                continue
            if self.scale_floors is None:
                self._measure_noise(x, ref_out)
            wall_ms, msg, snapshot = self._call([x], timed=False)
            self._last_values = msg["values"]
            expected = _expected(ref_out)
            mismatch, err = self._compare(snapshot[0], msg["values"][0], expected)
            if mismatch:
                raise self._explain_mismatch(expected, what, mismatch, timed=False, max_abs_error=err)
            self._inputs_unchanged([x], what)
            worst = max(worst, err)
            trials += 1
            # Deferred work: give it about two calls' time, then look at the outputs again.
            time.sleep(min(0.5, max(0.005, 2 * wall_ms / 1e3)))
            self._last_output_unchanged()
        self._host_check("after the correctness trials")
        self.result.correctness_trials = trials
        self.result.skipped_trials = skipped
        self.result.max_abs_error = worst

    def _sensitivity(self, x: list[Any], ref_out: Any) -> float:
        """How far the reference's output moves, as a share of the comparison's tolerance
        (`correctness.share_of_tolerance` with the judge's scale floors, the largest over its
        tensors), when the float inputs of `x` change at the rounding level (`inputs.rounding_perturbed`): 0.0
        when `x` has no such input, inf when the reference raises on the changed inputs or its
        output is not the same tree of tensors of the same shapes and dtypes (`_tensor_pairs`).
        Raises Verdict only for a CUDA fault of the reference."""
        moved = self._moved_reference(x)
        if moved is None:
            return 0.0
        pairs = None if moved is math.inf else _tensor_pairs(moved, ref_out)
        if pairs is None:
            return math.inf
        share = 0.0
        for leaf, (got, want) in enumerate(pairs):
            if got.shape != want.shape or got.dtype != want.dtype:
                return math.inf
            floor = self.scale_floors[leaf] if self.scale_floors else 1.0
            share = max(
                share,
                correctness.share_of_tolerance(got, want, self.settings.rtol, self.settings.atol, scale_floor=floor),
            )
        return share

    def _moved_reference(self, x: list[Any]) -> Any:
        """The reference's output on `_perturbed(x)`; None when nothing can be perturbed, math.inf
        when the reference raises there. Raises Verdict only for a CUDA fault of the reference."""
        xp = inputs_mod.rounding_perturbed(x)
        if xp is None:
            return None
        try:
            return self._reference(xp)
        except Verdict as v:
            if any(m in v.message for m in CUDA_FAULT_MARKERS):
                raise
            return math.inf

    def _measure_noise(self, x: list[Any], ref_out: Any) -> None:
        """Set each tensor output's scale floor (`correctness.noise_scale_floor`, in the order of
        `tensor_paths`) from how far the reference moves when the nominal inputs `x` change at
        the rounding level: an output far below 1 in magnitude is then held to its own magnitude,
        unless its magnitude is its own rounding noise. Every floor stays 1.0 (atol absolute below
        magnitude 1) where nothing can be perturbed, the reference raises on the changed inputs,
        or their output is not the same tree. Raises Verdict only for a CUDA fault."""
        self.scale_floors = [1.0] * len(self.tensor_paths)
        moved = self._moved_reference(x)
        pairs = None if moved is None or moved is math.inf else _tensor_pairs(moved, ref_out)
        if pairs is None:
            return
        self.scale_floors = [
            correctness.noise_scale_floor(m, r, self.settings.atol) if m.dtype == r.dtype else 1.0 for m, r in pairs
        ]
        self.extra["scale_floors"] = dict(zip(self.tensor_paths, self.scale_floors))

    def _outside_domain(self, x: list[Any]) -> str | None:
        """Why the reference refuses inputs `x` whose integers were moved, on a copy built on the
        CPU (the same constructor arguments and seed), or None. Integer inputs are often indices
        (an embedding, a gather, a loss's targets): out of range on CUDA they are a device-side
        assert, which ends the judge's CUDA context, where the CPU raises an error. Inputs and
        weights over `CPU_PROBE_MIB` are not tried: the trial is skipped. On the CPU backend the
        reference itself is tried (`_reference`). Never raises."""
        if not self.cuda:
            return None
        try:
            tensors = [t for t in x if isinstance(t, torch.Tensor)]
            tensors += [*self.ref_model.parameters(), *self.ref_model.buffers()]
            mib = sum(t.numel() * t.element_size() for t in tensors) / 2**20
            if mib > CPU_PROBE_MIB:
                return f"its inputs and weights ({mib:.0f} MiB) are too large to try on the CPU first"
            if self._cpu_reference is None:
                torch.manual_seed(self.init_seed)
                with torch.device("cpu"):
                    self._cpu_reference = self.module.Model(*inputs_mod.clone_tree(self.init))
            with torch.no_grad():
                self._cpu_reference(*inputs_mod.to_device_tree(x, "cpu"))
        except Exception as exc:  # noqa: BLE001 - any failure only drops the trial
            return f"the reference raises there, on the CPU ({type(exc).__name__}: {str(exc)[:200]})"
        return None

    def collect_labels(self) -> None:
        """Operators and dtypes of one forward each (facts for the reward policy). A candidate
        whose recorded forward fails, or computes otherwise than an unrecorded one on the same
        inputs (`_recorded_otherwise`), gets the worst labels; a failure of the reference's
        recording only drops labels. Whether the candidate runs a kernel of its own is decided by
        the parent, from the shared objects mapped into the candidate's process.

        Runs after the timing and the late checks: recording a forward (a TorchDispatchMode)
        changes the candidate's process for good (torch.compile's dynamo then skips the compiled
        frame, so the compiled candidate ran eagerly for the rest of the evaluation: 4.4 ms
        against 1.9 ms on KernelBench level2/1 on an H200), and nothing a candidate does once it
        knows it is being recorded may reach a timed or checked call."""
        x = self._inputs()
        xr = inputs_mod.clone_tree(x)
        try:
            with torch.no_grad(), guards.OpRecorder() as ref_rec:
                ref_out = self.ref_model(*xr)
            self._sync()
        except Exception:  # noqa: BLE001
            return
        # The reference's output is held only until `_accuracy_gap` has used it (`_recorded_otherwise`):
        # beside the recorded and unrecorded outputs it was one 6 GiB copy too many on an 80 GB card.
        expected, ref_out, xr = [_expected(ref_out)], None, None
        fields, fds = self._stage("candidate", [x], self.args_template)
        self.args_template = _sent_template(fields, self.args_template)
        self._sync()
        self._send("profile", fds=fds, **fields)
        self._sent("candidate")
        msg = self._recv("profiled", ops=list, dtypes=list, side_streams=bool)
        otherwise = f"recording failed: {str(msg['error'])[:300]}" if msg.get("error") is not None else None
        otherwise = otherwise or self._recorded_otherwise(x, msg, expected)
        expected.clear()
        if otherwise is not None:
            # Fail closed: a candidate whose forward refuses to be recorded, or computes otherwise
            # while recorded, gets the worst labels, reduced precision included (one that computes
            # in bf16 and raises under a dispatch mode would otherwise lose only labels it has a
            # kernel of its own to shed). The reason goes into the record.
            self.result.label_reasons["profile_failed"] = otherwise
            self._label("profile_failed")
            self._label("reduced_precision")
            return
        cand_ops = str_list_or_tamper(msg["ops"], limit=500)
        cand_dtypes = set(str_list_or_tamper(msg["dtypes"]))
        self.extra["ops"] = {"reference": sorted(set(ref_rec.ops)), "candidate": cand_ops}
        low = {str(d).removeprefix("torch.") for d in guards.LOW_PRECISION}
        ref_dtypes = {str(d).removeprefix("torch.") for d in ref_rec.dtypes}
        if (cand_dtypes & low) and not (ref_dtypes & low):
            self._label("reduced_precision")
        if msg["side_streams"]:
            self._label("side_streams")

    def kernel_profile(self) -> None:
        """The candidate's last request: one more forward, on fresh inputs, under `torch.profiler`
        in its own process (`Host.kernels`), whose summary goes into `EvalResult.profile` for the
        policy's next prompt (`kernelprofile.clean`; `EvalSettings.profile_top` rows, 0: none). It comes
        after every check, so nothing here can change a verdict in the candidate's favour, and
        the judge holds no output of its own meanwhile (a 6 GiB output profiled beside the
        recorded one ran the judge out of memory on an 80 GB card). A host that dies or does not
        answer within `KERNEL_PROFILE_S` only loses its profile (the profiler is not the
        candidate's code: a fault of its own must not fail an honest candidate); a message of
        the wrong shape is the protocol hack any other would be."""
        top = self.settings.profile_top
        if top < 1 or not self.host_loaded:
            return
        self.last_snapshot = None
        self._release_cached_memory()
        fields, fds = self._stage("candidate", [self._inputs()], self.args_template)
        self.args_template = _sent_template(fields, self.args_template)
        self._sync()
        if self.chan.pending():  # the host's end (no profile), or a message nobody asked for
            try:
                self.chan.recv(time.monotonic())
            except PeerGone:
                return
            except (Timeout, ProtocolError):
                pass
            raise Verdict(
                Status.HACK, "the candidate process sent a message nobody asked for", HackKind.HARNESS_TAMPERING
            )
        try:
            self.chan.send("kernels", fds=fds, top=top, **fields)
            self._sent("candidate")
            msg = self.chan.recv(min(self.deadline, time.monotonic() + KERNEL_PROFILE_S))
        except (Timeout, PeerGone):
            return
        try:
            expect_host(msg, _one_of(msg, "kernels"))
        except ProtocolError as exc:
            raise Verdict(
                Status.HACK, f"the candidate process broke the protocol: {exc}", HackKind.HARNESS_TAMPERING
            ) from exc
        if "kernels" in msg:
            self.result.profile = kernelprofile.clean(msg["kernels"], top)

    def _recorded_otherwise(self, x: list[Any], msg: dict[str, Any], expected: list[Expected]) -> str | None:
        """How the recorded forward differs from the candidate's unrecorded ones, or None.

        Two comparisons. (1) Its outputs against what an unrecorded forward computes on the same
        inputs `x`, run twice after it (`_recorded_difference`: the same bits, or a difference at
        the rounding level of the output's dtype, or no larger than `RECORDED_SLACK` times the
        difference between the two unrecorded runs, for a candidate whose own runs differ).
        (2) Its error against the reference's output on `x` (`expected`: a one-item list, emptied
        once used, so that the reference's output is not held through the unrecorded runs)
        against the errors of the timed calls, which ran before any recording (`_accuracy_gap`,
        computed first, its reason given second): a candidate that computes in lower precision
        until it sees the recording's dispatch mode and in float32 from then on agrees with the
        unrecorded runs that follow, but not with its own timed calls. A candidate can tell the
        recorded forward apart (a dispatch mode is on); one that computes in float32 there and in
        lower precision everywhere else is seen by one of the two. Also a reason when the recorded
        outputs were not described. Raises Verdict as any call does (the candidate's process died,
        say)."""
        if not isinstance(msg.get("leaves"), list) or not isinstance(msg.get("values"), list):
            return "the recorded outputs were not described"
        recorded = [t.clone() for t in self._read([msg["leaves"]], 1, again=True)[0]]
        self._sync()
        self.last_snapshot = None  # the late checks are done; these calls only compare
        gap = self._accuracy_gap(recorded, msg["values"], expected.pop())
        self._release_cached_memory()  # the reference's output (`expected`, taken from the list) is gone
        return self._unrecorded_difference(x, recorded, msg["values"]) or gap

    def _unrecorded_difference(self, x: list[Any], recorded: list[torch.Tensor], values: list[Any]) -> str | None:
        """The recorded outputs (`recorded`, `values`) against one unrecorded forward on `x`, and
        a second one where they differ (`_recorded_difference`); None where they agree."""
        runs = []
        for _ in range(2):
            _, answer, snapshot = self._call([x], timed=False)
            runs.append(([t.clone() for t in snapshot[0]], answer["values"][0]))
            if len(runs) == 1 and correctness.tree_equal(recorded, runs[0][0]) and values == runs[0][1]:
                return None
        (first, first_values), (second, second_values) = runs
        if first_values == second_values and values != first_values:
            return "non-tensor outputs: the same in two unrecorded runs, other while recorded"
        return _recorded_difference(recorded, first, second)

    def _accuracy_gap(self, recorded: list[torch.Tensor], values: list[Any], expected: Expected) -> str | None:
        """Why the recorded forward is far more accurate than the timed calls, or None: the
        `ACCURACY_QUANTILE` quantile of the timed calls' largest absolute errors (against the
        reference on their own inputs) above `ACCURACY_GAP` times the recorded forward's largest
        error, itself taken as at least `RECORDED_ULPS` epsilons of the coarsest float output
        dtype at the reference output's largest magnitude (the reordering of float additions,
        which an honest compiled candidate shows against an eager reference). The bound is then
        2^-13 of the largest magnitude for a float32 output (16 x 64 x 2^-23): a candidate that
        ran the timed calls in float16 or TF32 (rounding to 2^-11) is about 4 times past it, in
        bfloat16 (2^-9) about 16 times, while an honest float32 one would need errors of a
        thousand ulps; to stay under it, a candidate must run nine in ten timed calls in the
        recorded forward's precision."""
        mismatch, err = self._compare(recorded, values, expected)
        tensors = [t for t in expected[0] if t.is_floating_point() or t.is_complex()]
        if mismatch or not self.timed_errors or not tensors or not math.isfinite(err):
            return None  # a wrong recorded forward: the unrecorded comparison names it
        eps = max(torch.finfo(t.real.dtype if t.is_complex() else t.dtype).eps for t in tensors)
        scale = max(correctness.max_abs(t) for t in tensors)
        floor = max(err, RECORDED_ULPS * eps * scale)
        timed = timing.percentile(self.timed_errors, ACCURACY_QUANTILE)
        if timed <= ACCURACY_GAP * floor:
            return None
        return (
            f"the recorded forward is more accurate than the timed calls: its largest error "
            f"{err:.3g} (taken as at least {floor:.3g}) against {timed:.3g} at the "
            f"{ACCURACY_QUANTILE:.0%} quantile of {len(self.timed_errors)} timed calls"
        )

    # -- phase 6: timing -----------------------------------------------------------------------

    def _timing_pass(self) -> tuple[list[list[float]], list[list[float]]]:
        """Warm-up, then timed rounds. A round is one round trip to each host, in random order,
        that runs the same K fresh input sets back to back (K from the calibration); the
        outputs of every call of every round are checked against the reference's.

        Why every call and not a sample: a secret sample would need about 90 checked calls to
        catch a candidate wrong on 1 call in 20 with probability 0.99 (1 - 0.95^90), which is
        most of a pass anyway; comparing is the judge's own work outside every timed interval.

        Returns (reference ms per call, one figure per round: the reference host's own clock
        over its K forwards, over K; candidate ms per call, one per round: the candidate host's
        own figure for its K forwards where the judge's clock allows it (see
        `timing.candidate_rounds_ms`, applied to each round trip), over K; before the one-call
        floor, `_one_call_floored`, which takes the pass's one-call round trips from
        `pass_one_call_trips`)."""
        s = self.settings
        k = self.batch
        for _ in range(s.warmup_calls):
            x = self._inputs()
            _, _, expected = self._ref_call([x])
            wall_ms, msg, snapshot = self._call([x], timed=True)
            self._check_timed([x], expected, msg, snapshot, "warm-up call")
        x = expected = msg = snapshot = None
        started = time.perf_counter()
        xs = self._input_sets()
        ref_wall, ref_inner, expected = self._ref_call(xs)
        wall_ms, msg, snapshot = self._call(xs, timed=True)
        self._check_timed(xs, expected, msg, snapshot, "warm-up round")
        # Rounds shorter than the jitter asks for are made up by more of them
        # (`timing.timed_rounds`): the reference's when K was held by the memory budget, the
        # candidate's when it is much faster (its warm-up round on the judge's clock, less the
        # fixed cost: a figure no claim moves). A pass takes about `timing_budget_s`: a slow
        # candidate is timed over fewer rounds (never fewer than three, unless the settings ask
        # for fewer). The warm-up round, inputs and checks included, is what a round costs.
        round_ms = min(self.batch * self.baseline_ms, max(wall_ms - self.overhead_ms, 1e-3))
        want = timing.timed_rounds(s.rounds, s.max_rounds, round_ms, self.trip_jitter_ms, s.jitter_factor)
        per_round_s = max(time.perf_counter() - started, (ref_wall + wall_ms) / 1e3, 1e-3)
        rounds = max(min(3, want), min(want, int(s.timing_budget_s / per_round_s)))
        ref_rounds: list[list[float]] = []
        cand_walls: list[list[tuple[float, object]]] = []
        parallel: list[float] = []  # each candidate round trip's CPU time beyond one core (ms)
        trips: list[float] = []
        # The hosts are checked after a secret third of the rounds (and once more at the end):
        # a check slows the next forward in both hosts alike, so most rounds are unchecked ones.
        checked = set(self.pick.sample(range(rounds), max(1, rounds // 3)))
        self.result.round_trips = {k: v for k, v in self.result.round_trips.items() if k.startswith("calibration ")}
        # One-call rounds (`None`) at random places among the batched ones: the floor on what
        # work batched across a round's calls can gain (`timing.one_call_floor_ms`).
        schedule: list[int | None] = list(range(rounds))
        if self.one_call_count and k > 1:
            schedule += [None] * self.one_call_count
            self.order.shuffle(schedule)
        one_call: list[tuple[float, float]] = []
        for r in schedule:
            xs = expected = msg = snapshot = None  # the last round's go before this one's are made
            if r is None:
                self.recording = "one-call "
                one_call.append(self._one_call_round(f"one-call round {len(one_call) + 1}"))
                continue
            self.recording = ""
            xs = self._input_sets()
            for who in self.order.sample(["reference", "candidate"], 2):
                if who == "reference":
                    ref_wall, ref_inner, expected = self._ref_call(xs)
                    ref_rounds.append([sum(ref_inner) / k])
                    trips.append(ref_wall - sum(ref_inner))
                else:
                    wall_ms, msg, snapshot = self._call(xs, timed=True)
                    cand_walls.append([(wall_ms, timing.claimed_total_ms(msg.get("inner_ms"), k))])
                    parallel.append(self.cpu_excess_ms)
            self._check_timed(xs, expected, msg, snapshot, f"timed round {r + 1}")
            if r in checked:
                self._host_check(f"during timing round {r + 1}")
                self._ref_check()
        self.recording = None
        # What the candidate host's round trips may leave unexplained: the reference host's fixed
        # cost in this same pass, never above its calibration's by more than the jitter (a
        # candidate that slows the reference host's round trips cannot widen what it may claim),
        # plus the candidate host's excess over it in the calibration (`timing.allowed_fixed_cost`;
        # with `fixed_cost_cap_after_candidate` settled again in `after_the_candidate`).
        tolerance = s.unexplained_tolerance * self.trip_jitter_ms
        self.trips_ms.append(statistics.median(trips) if trips else float("nan"))
        self.pass_timed = {"walls": cand_walls, "trips": trips, "parallel": parallel}
        cand_rounds, self.pass_overhead_ms = self._candidate_rounds(self.pass_timed)
        self.pass_resolution_ms = timing.pass_resolution(
            self.calibration_resolution_ms, trips, k, s.resolution_source, least_ms=tolerance / k
        )
        self.pass_one_call_trips = one_call
        return ref_rounds, cand_rounds

    def _candidate_rounds(
        self, timed: dict[str, Any], after_reference_ms: list[float] | None = None
    ) -> tuple[list[list[float]], float]:
        """A pass's candidate figures (ms per call, one per round) from its round trips `timed`
        ("walls": the candidate's (judge's ms, claim) per round trip; "trips": the reference
        host's fixed costs in the pass, ms; "parallel": the candidate's CPU ms beyond one core per
        round trip) and the fixed cost its host may leave unexplained (`timing.allowed_fixed_cost`,
        capped by the calibration's reference fixed costs or, with `after_reference_ms`, by the
        larger of theirs and those of the reference's round trips after the candidate). Returns
        (the figures, that typical fixed cost in ms)."""
        s, k = self.settings, self.batch
        q, jit = s.overhead_quantile, self.trip_jitter_ms
        ref_cal, cand_cal, trips = self.ref_calibration_trips, self.calibration_trips, timed["trips"]
        high = timing.allowed_fixed_cost(trips, ref_cal, cand_cal, jit, q, after_reference_ms)
        typical = timing.allowed_fixed_cost(trips, ref_cal, cand_cal, jit, after_reference_ms=after_reference_ms)
        totals = timing.candidate_rounds_ms(
            timed["walls"],
            high,
            typical,
            tolerance_ms=s.unexplained_tolerance * jit,
            tolerance_share=s.unexplained_share,
        )
        # Work run on other cores at the same time counts in full (0 unless count_cpu_time).
        return [[(t + extra) / k for t in rnd] for rnd, extra in zip(totals, timed["parallel"])], typical

    def _one_call_floored(
        self, stats: tuple[list[list[float]], list[list[float]]], trips: list[tuple[float, float]]
    ) -> tuple[tuple[list[list[float]], list[list[float]]], dict[str, Any] | None]:
        """`stats` (a timing pass's per-call figures, ms: reference rounds, candidate rounds) with
        every candidate figure raised to the floor of the pass's one-call round trips `trips`
        (`timing.one_call_floor_ms`): work batched across a round's calls gains at most what its
        one-call rounds show. The floor starts from the reference figure the speedup divides by,
        the pass's median capped by the clean baseline (`baseline_ms`: `measure` floors at the
        calibration's to decide on a second pass, `after_the_candidate` at the final one, raised
        by the baseline after the candidate, to pay). Returns (the floored figures, the floor's
        record) or (`stats`, None) without one-call round trips."""
        if not trips:
            return stats, None
        s = self.settings
        ref_rounds, cand_rounds = stats
        ref_ms = min(statistics.median([t for rnd in ref_rounds for t in rnd]), self.baseline_ms)
        floor, allowance = timing.one_call_floor_ms(
            trips,
            self.one_call_calibration,
            ref_ms,
            s.one_call_margin,
            s.one_call_signed_bias,
            after_reference_ms=self.one_call_after,
        )
        batched = statistics.median([t for rnd in cand_rounds for t in rnd])
        record = {
            "difference_ms": statistics.median([c - r for c, r in trips]),
            "calibration_ms": statistics.median([c - r for c, r in self.one_call_calibration]),
            "allowance_ms": allowance,
            "reference_ms": ref_ms,
            "floor_ms": floor,
            "batched_ms": batched,
            "raised": floor > batched,
        }
        return (ref_rounds, [[max(t, floor) for t in rnd] for rnd in cand_rounds]), record

    def _end_builds(self) -> None:
        """Before anything of the candidate's is timed, the parent ends its builds: a build runs in
        a child of the parent's (`cudal1.bench.builder`) that is not among the candidate's
        processes stopped while the reference is timed, and compilers run what the candidate's
        flags say (gcc's -wrapper ran a spinner there that slowed the reference 1.2-1.3x on two
        cores). Builds are over by then (the import and the correctness calls made them); a later
        request is refused in the candidate's process. Raises RuntimeError when the parent does
        not answer (the harness's failure)."""
        if self.link is None:
            return
        try:
            self.link.end_builds()
        except (ProtocolError, PeerGone, Timeout) as exc:
            raise RuntimeError(f"the parent did not end the candidate's builds: {exc}") from exc

    def _check_timed(self, xs: list[list[Any]], expected: list[Expected], msg: Any, snapshot: Any, what: str) -> None:
        """Every call of a timed round trip: its outputs against the reference's on the same
        inputs, and its inputs unchanged."""
        self._last_values = msg["values"]
        for i, (ref_out, got) in enumerate(zip(expected, snapshot)):
            mismatch, err = self._compare(got, msg["values"][i], ref_out)
            if mismatch:
                call = f"{what}, call {i + 1} of {len(xs)}" if len(xs) > 1 else what
                raise self._explain_mismatch(ref_out, call, mismatch, timed=True, max_abs_error=err, at=i)
            self.timed_errors.append(err)
        self._inputs_unchanged(xs, what)

    def measure(self) -> None:
        """One timing pass, and a second when the first pays above `EvalSettings.remeasure_above`
        (floored at the baseline known so far). Both are kept unfloored: which one is paid is
        settled once the baseline after the candidate is known (`after_the_candidate`)."""
        self._end_builds()
        self.passes = [self._pass()]
        if self._pass_speedup(self.passes[0])[0] > self.settings.remeasure_above:
            self.passes.append(self._pass())
            self.result.remeasured = True
        self.extra["overhead"] = {"calibration_ms": self.overhead_ms, "interleaved_ms": self.trips_ms}

    def _pass(self) -> dict[str, Any]:
        """A timing pass and what settling it needs: "stats" (`_timing_pass`), the candidate's
        round trips they came from ("timed", `_candidate_rounds`), its one-call round trips
        ("trips"), "overhead_ms", "resolution_ms" and its round-trip record ("record")."""
        stats = self._timing_pass()
        return {
            "stats": stats,
            "timed": self.pass_timed,
            "trips": self.pass_one_call_trips,
            "overhead_ms": self.pass_overhead_ms,
            "resolution_ms": self.pass_resolution_ms,
            "record": self.result.round_trips,
        }

    def _pass_speedup(
        self, p: dict[str, Any]
    ) -> tuple[float, tuple[list[list[float]], list[list[float]]], dict[str, Any] | None]:
        """A kept pass `p` (`_pass`) as it would be paid at the baseline known now: (its speedup
        (×), its floored figures, the floor's record: `_one_call_floored`)."""
        floored, one_call = self._one_call_floored(p["stats"], p["trips"])
        return self._speedup(floored, p["resolution_ms"])[0], floored, one_call

    def after_the_candidate(self) -> None:
        """End the candidate's process (the parent kills it and every process of its uid), time
        the reference once more with nothing of the candidate alive, and settle the speedup. The
        reference time is capped by the larger of the two clean baselines: a machine that got
        busier for everyone raises both, a candidate that slowed only the reference neither. Each
        pass's one-call floor then starts from the reference figure so capped
        (`_one_call_floored`), and of two passes the one that pays less is paid."""
        self.pause_candidate = False
        after: list[dict[str, Any]] = []
        batched_after: list[dict[str, Any]] = []
        if self.link is not None and self.link.end_host():
            self.recording = AFTER_BATCHED
            try:
                post_trips, post = self._ref_rounds(max(2, self.settings.calibration_rounds // 2))
            finally:
                self.recording = None
            batched_after = self.result.round_trips.pop(AFTER_BATCHED + "reference", [])
            self.baseline_ms = max(self.baseline_ms, timing.percentile(post, 0.9))
            self.result.baseline_ms = round(self.baseline_ms, 6)
            after = self._one_call_after_candidate()
            if self.settings.fixed_cost_cap_after_candidate and len(post_trips) >= 2:
                # What each pass's candidate host may leave unexplained, capped by the larger of
                # the calibration's and these clean fixed costs (`timing.allowed_fixed_cost`).
                for p in self.passes:
                    cand_rounds, p["overhead_ms"] = self._candidate_rounds(p["timed"], post_trips)
                    p["stats"] = (p["stats"][0], cand_rounds)
        # The floor from the reference figure the speedup divides by, this baseline's; of two
        # passes, the one that pays less at it.
        _, self.stats, one_call, kept = min(
            ((*self._pass_speedup(p), p) for p in self.passes), key=lambda paid: paid[0]
        )
        self.result.round_trips = kept["record"]
        if batched_after:
            self.result.round_trips[AFTER_BATCHED + "reference"] = batched_after
        if after:
            self.result.round_trips[AFTER_CANDIDATE + "reference"] = after
        self.resolution_ms = kept["resolution_ms"]  # its floor and its below_resolution label
        self.result.resolution_ms = round(self.resolution_ms, 6)
        self.result.overhead_ms = round(kept["overhead_ms"], 6)
        if one_call is not None:
            self.extra["one_call"] = one_call
            if one_call["raised"]:
                self._label("one_call_floor")
        ref_rounds, cand_rounds = self.stats
        k = self.batch
        self.result.reference = timing.summarize_rounds(ref_rounds, calls_per_figure=k)
        self.result.candidate = timing.summarize_rounds(cand_rounds, calls_per_figure=k)
        if self.result.reference.median_ms > self.baseline_ms * REFERENCE_SLOWED + self.resolution_ms:
            self._label("reference_slowed")
        if (
            min(self.result.candidate.median_ms, min(self.result.reference.median_ms, self.baseline_ms))
            < self.resolution_ms
        ):
            self._label("below_resolution")
        self.result.speedup, self.result.speedup_spread = self._speedup(self.stats)

    def _one_call_after_candidate(self) -> list[dict[str, Any]]:
        """With `EvalSettings.one_call_cap_after_candidate` and a pass that made one-call rounds,
        once the candidate's processes are ended: one-call round trips to the reference host, as
        many as the last pass made (past 16 only within `one_call_budget_s`, and none within
        `AFTER_RESERVE_S` of the time limit), each after an idle gap drawn from the calibration's
        before its reference one-call trips (`timing.idle_gaps_ms`). The calibration's gaps, not
        the pass's: before a reference trip of the pass a candidate can lengthen the gap (answer
        its audit late, slow its own pause), and on an H100 trips after longer gaps ran slower.
        Keeps their times (ms, judge's clock) in `one_call_after` for the floor's cap where there
        are at least `MIN_ONE_CALL_ROUNDS`; returns their records ([] without them)."""
        s = self.settings
        if not s.one_call_cap_after_candidate or not self.pass_one_call_trips:
            return []
        clean = {k: v for k, v in self.result.round_trips.items() if k.startswith("calibration ")}
        gaps = timing.idle_gaps_ms(clean, "calibration one-call reference")
        if not gaps:
            return []
        self.recording = AFTER_CANDIDATE
        ends_by = time.perf_counter() + s.one_call_budget_s
        last_end = time.perf_counter()
        walls: list[float] = []
        try:
            for n, gap_ms in enumerate(self.order.choices(gaps, k=len(self.pass_one_call_trips)), start=1):
                if time.monotonic() > self.deadline - AFTER_RESERVE_S:
                    break
                xs = self._input_sets(1)
                wait = last_end + gap_ms / 1e3 - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
                wall_ms, _, _ = self._ref_call(xs, own_times=False)  # as the pass's one-call rounds
                last_end = time.perf_counter()
                walls.append(wall_ms)
                if n >= 16 and last_end > ends_by:
                    break
        finally:
            self.recording = None
        if len(walls) >= MIN_ONE_CALL_ROUNDS:
            self.one_call_after = walls
        return self.result.round_trips.pop(AFTER_CANDIDATE + "reference", [])

    def _speedup(
        self, stats: tuple[list[list[float]], list[list[float]]], floor_ms: float | None = None
    ) -> tuple[float, float]:
        ref_rounds, cand_rounds = stats
        floor = self.resolution_ms if floor_ms is None else floor_ms
        return timing.speedup_stats(ref_rounds, cand_rounds, ref_cap_ms=self.baseline_ms, floor_ms=floor)

    def final_checks(self) -> None:
        time.sleep(0.05)
        self._last_output_unchanged()
        self._host_check("at the end")

    # -- the whole evaluation ------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        phase = "reference"
        phases = self.extra.setdefault("phases_s", {})  # where an evaluation's time goes (seconds)
        try:
            try:
                # Only the first two overlap with other evaluations on the same device: from the
                # degenerate check to the last reference call, this one holds the device alone.
                for phase, step in (
                    ("reference", self.load_reference),
                    ("setup", self.connect),
                    ("waiting for the device", self.hold_device),
                    ("degenerate", self.degenerate),
                    ("calibration", self.calibrate),
                    ("import", self.load_candidate),
                    ("correctness", self.check_correctness),
                    ("timing", self.measure),
                    ("late check", self.final_checks),
                    ("labels", self.collect_labels),
                    ("profile", self.kernel_profile),
                    ("baseline", self.after_the_candidate),
                    ("release", self.release_device),
                ):
                    started = time.perf_counter()
                    step()
                    self._release_cached_memory()
                    phases[phase] = round(time.perf_counter() - started, 3)
                    phases.update({f"calls: {k}": round(v, 3) for k, v in self.spent.items()})
            except Verdict:
                raise
            except BaseException as exc:  # noqa: BLE001
                raise self._judge_failure(exc, phase) from exc
            self.result.status = Status.OK
            self.result.message = (
                f"correct on {self.result.correctness_trials} trials; {speedup_phrase(self.result.speedup)}"
            )
        except Verdict as v:
            self.result.status, self.result.message, self.result.hack_kind = v.status, v.message, v.hack
            for label in v.extra.get("labels", []):
                self._label(label)
            if v.extra.get("max_abs_error") is not None:
                self.result.max_abs_error = v.extra["max_abs_error"]
            if v.__cause__ is not None and not isinstance(v.__cause__, (PeerGone, Timeout, ProtocolError)):
                try:  # the log may lie on a filesystem the candidate filled: the verdict stands
                    traceback.print_exception(v.__cause__, file=sys.stderr)
                except OSError:
                    pass
        if self.cuda and self.link is not None:
            try:  # a verdict before the end: the next evaluation need not wait for the teardown
                self.link.release_device()
            except (OSError, PeerGone, ProtocolError, Timeout):
                pass  # the parent releases it when the evaluation ends
        # The parent ends the host (if it still runs), after reading its mapped objects once more.
        self.result.labels = self.labels
        self.result.seed = self.base_seed
        self.result.eval_seconds = round(time.perf_counter() - t0, 3)
        out = self.result.to_dict()
        out["judge"] = self.extra
        return out

    def hold_device(self) -> None:
        """Wait until no other evaluation times on this device (CUDA; the parent holds the lock,
        `cudal1.bench.devicelock`); the wait does not count against this evaluation's time limit."""
        if self.cuda and self.link is not None:
            waited = self.link.hold_device()
            self.deadline += waited
            self.extra["device_wait_s"] = round(waited, 3)

    def release_device(self) -> None:
        if self.cuda and self.link is not None:
            self.link.release_device()

    def _judge_failure(self, exc: BaseException, phase: str) -> Verdict:
        """An exception in the judge's own code: a harness failure (re-raised: the parent labels
        it `harness_error`, which the reward leaves out of training), except a CUDA error once the
        candidate exists. That one is the candidate's failure (`runtime_error`, `cuda_fault`, not
        masked): the judge's device work ran clean up to the candidate's import, and a candidate
        can fault the device or free the memory the judge reads from it (CUDA IPC), so a masked
        status here would be one a policy could learn to provoke. A genuine device fault in that
        window is charged to the candidate: rare, and the lesser harm. So is running out of
        device memory then (GPU memory is not limited per candidate: one that takes it all makes
        the judge's next allocation fail): `resource_exceeded`. And so is any failure once the
        candidate exists that names a shared resource used up (ENFILE, ENOSPC, ...), or that comes
        while one is (the system's file table, the scratch filesystem, the device's memory:
        `pressure.exhausted`): a candidate can fill those for every process of the machine, the
        reference host's and the judge's included."""
        text = f"{type(exc).__name__}: {exc}"
        if self.host_loaded and isinstance(exc, torch.OutOfMemoryError):
            return Verdict(
                Status.RESOURCE_EXCEEDED,
                f"{phase}: the judge ran out of device memory while the candidate held its own: {text[:300]}",
            )
        if self.host_loaded and any(m in text for m in CUDA_FAULT_MARKERS):
            return Verdict(
                Status.RUNTIME_ERROR, f"{phase}: CUDA error in the judge: {text[:300]}", labels=["cuda_fault"]
            )
        if self.host_loaded:
            named = pressure.resource_errno(exc)
            why = (
                f"a shared resource ran out ({named.strerror})"
                if named is not None
                else pressure.exhausted([os.getcwd(), tempfile.gettempdir()], self.cuda)
            )
            if why is not None:
                return Verdict(
                    Status.RESOURCE_EXCEEDED, f"{phase}: {why} while the candidate ran; the judge failed: {text[:300]}"
                )
        raise exc


def batch_capacity(
    in_bytes: int,
    out_bytes: int,
    outputs: int,
    settings: EvalSettings,
    free_bytes: int | None = None,
    answer_bytes: int = 0,
) -> int:
    """The most calls one round trip may run (K's upper bound): `settings.max_calls_per_round`,
    and no more than the memory budget over the bytes one call of a round takes on the device,
    all processes together: both hosts' inputs and the judge's (3 × `in_bytes`), both hosts'
    outputs of this round trip and the last one (which stay alive until the next) and the
    judge's copies of this round's (6 × `out_bytes`, plus alignment per output tensor). The
    budget is `settings.batch_memory_mib`, and with `settings.batch_memory_share` > 0 at most
    that share of `free_bytes` (the device's free memory; None: not known, the MiB alone). And
    no more calls than a host's answer has room for: `answer_bytes` (a bound on one call's part
    of the answer, `_answer_bytes`; 0: not bounded) into `wire.MAX_FRAME` less 64 KiB (the
    answer's other fields). At least 1."""
    budget = settings.batch_memory_mib * 2**20
    if settings.batch_memory_share > 0 and free_bytes is not None:
        budget = min(budget, int(settings.batch_memory_share * free_bytes))
    per_call = 3 * in_bytes + 6 * (out_bytes + 256 * outputs) + 1
    most = settings.max_calls_per_round
    if answer_bytes > 0:  # an answer over the frame limit would be a broken protocol, not a result
        most = min(most, (MAX_FRAME - 2**16) // answer_bytes)
    return max(1, min(most, budget // per_call))


def _answer_bytes(outputs: int, values: list[Any]) -> int:
    """A bound on the bytes one call adds to a host's answer: its time, one description per output
    tensor (on CUDA about 190 bytes: a 128-digit IPC handle, an offset, the strides) and its
    non-tensor values (a float may print longer than the reference's)."""
    return 64 + 224 * outputs + len(json.dumps(values)) + 32 * len(values)


def _value_kinds(tree: dict[str, Any], paths: list[str]) -> list[tuple[str, str]]:
    """[(path, kind)] of the non-tensor leaves of an output tree (`correctness.output_tree`), in
    order."""
    kinds: dict[int, str] = {}

    def walk(node: Any) -> None:
        if "value" in node:
            kinds[node["value"]] = node["kind"]
        elif "dict" in node:
            for _, child in node["dict"]:
                walk(child)
        elif "tensor" not in node:
            for child in node.get("items", node.get("list", node.get("tuple", []))):
                walk(child)

    walk(tree)
    return [(path, kinds[j]) for j, path in enumerate(paths)]


def _one_of(msg: dict[str, Any], op: str | tuple[str, ...]) -> str:
    """The op `msg` is checked as: its own when it is one of `op`, else the first expected (and
    the check then names the mismatch)."""
    ops = (op,) if isinstance(op, str) else op
    return msg.get("op") if msg.get("op") in ops else ops[0]  # type: ignore[return-value]


def _sent_template(fields: dict[str, Any], current: list[Any]) -> list[Any]:
    """The argument template a host holds after a message with `fields` (`args` replaces it;
    `args_each` applies to that message only)."""
    return unblob(fields["args"]) if "args" in fields else current


def _repeats_memory(strides: Any, shape: tuple[int, ...]) -> bool:
    """Whether a view of `shape` with `strides` (as a host described them: anything) may map two
    indices to one element: some dimension of more than one element has a stride no larger than
    the reach of the smaller-strided ones before it, sum(stride x (size - 1)) (a stride 0 among
    them). That test is sufficient for no overlap, not necessary: a layout that interleaves its
    dimensions without overlapping fails it too (the reference's own output may, and the
    candidate's may then too: `Judge.ref_repeats`). False for anything but a list of integers of
    `shape`'s rank (the reader refuses those itself) and for an empty tensor."""
    if not isinstance(strides, list) or len(strides) != len(shape) or 0 in shape:
        return False
    if not all(type(s) is int for s in strides):
        return False
    reach = 0
    for stride, n in sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1):
        if stride <= reach:
            return True
        reach += stride * (n - 1)
    return False


def _overlapping(descs: list[Any], specs: list[TensorSpec]) -> tuple[int, int] | None:
    """Two of one call's output descriptions (`readers.describe`: an address on the
    CPU, an allocation's handle and an offset on CUDA, and strides) whose memory overlaps, as
    their indices; None when none do (descriptions the reader would refuse are left to it)."""
    ranges: list[tuple[str, int, int, int]] = []
    for i, (desc, spec) in enumerate(zip(descs, specs)):
        strides = desc.get("strides") if isinstance(desc, dict) else None
        start = desc.get("addr", desc.get("offset")) if isinstance(desc, dict) else None
        if (
            type(start) is not int
            or not isinstance(strides, list)
            or len(strides) != len(spec.shape)
            or not all(type(st) is int and st >= 0 for st in strides)
        ):
            continue
        span = view_span(spec.shape, tuple(strides), spec.torch_dtype.itemsize)
        if span:
            ranges.append((str(desc.get("handle", "")), start, start + span, i))
    ranges.sort()
    for (key_a, _, end_a, i), (key_b, start_b, _, j) in zip(ranges, ranges[1:]):
        if key_a == key_b and start_b < end_a:
            return min(i, j), max(i, j)
    return None


def _memory_failure(exc: ReadError, harness: str, hack: str) -> BaseException:
    """What a failed read or write of the candidate host's memory (`exc`) is: the judge's own
    failure (RuntimeError, `harness`) where its why is "harness", the candidate's process gone
    where it ended, else the candidate's protocol hack (`hack`: its outputs are not where it said,
    or not readable or writable there)."""
    if exc.why == "harness":
        return RuntimeError(f"{harness}: {exc}")
    if exc.why == "gone":
        return Verdict(Status.RUNTIME_ERROR, "the candidate process died", labels=["worker_crashed", _HOST_FAULT])
    return Verdict(Status.HACK, f"{hack}: {exc}", HackKind.HARNESS_TAMPERING)


def _calls_described(leaves: Any, n: int, outputs: int) -> bool:
    """Whether `leaves` is one list of `outputs` descriptions (dicts) for each of `n` calls."""
    return (
        isinstance(leaves, list)
        and len(leaves) == n
        and all(isinstance(c, list) and len(c) == outputs and all(isinstance(d, dict) for d in c) for c in leaves)
    )


ACCURACY_GAP = 16.0
"""`Judge._accuracy_gap`: the timed calls' errors may be at most this many times the recorded
forward's (at least its rounding floor) before the recording counts as computing otherwise."""
ACCURACY_QUANTILE = 0.9
"""`Judge._accuracy_gap`: the quantile of the timed calls' errors held against the recorded one."""
RECORDED_ULPS = 64
"""A recorded forward's output may differ from an unrecorded one's by this many times its dtype's
epsilon, relative to the output's largest magnitude (float32: about 8e-6; float16's rounding is
2^-11, about 5e-4): the reordering of float additions (atomics), never a lower precision."""


def _recorded_difference(
    recorded: list[torch.Tensor], first: list[torch.Tensor], second: list[torch.Tensor]
) -> str | None:
    """None when each recorded output tensor is the first unrecorded run's bit for bit, or a
    float tensor within `RECORDED_ULPS` of its dtype's epsilon (relative to its largest magnitude)
    or within `RECORDED_SLACK` times the first and second unrecorded runs' own difference; else
    what differs (output index, largest difference, the runs' own, the scale). Differences are
    taken in float64 (complex128) a chunk at a time (`correctness.max_abs_diff`), so an output of
    several GB needs no more than `correctness.SHARE_CHUNK` elements of scratch per operand."""
    for i, (r, a, b) in enumerate(zip(recorded, first, second)):
        if correctness.tree_equal([r], [a]):
            continue
        if not (a.is_floating_point() or a.is_complex()) or a.numel() == 0:
            return f"output {i} ({a.dtype}): other values while recorded"
        apart, own = correctness.max_abs_diff(r, a), correctness.max_abs_diff(b, a)
        scale = correctness.max_abs(a)
        eps = torch.finfo(a.real.dtype if a.is_complex() else a.dtype).eps
        if not (apart <= RECORDED_ULPS * eps * scale or apart <= RECORDED_SLACK * own):
            return (
                f"output {i} ({a.dtype}): recorded differs by {apart:.3g} from an unrecorded run; "
                f"two unrecorded runs differ by {own:.3g}; largest magnitude {scale:.3g}"
            )
    return None


def _flat(calls: list[list[Any]]) -> list[Any]:
    return [item for call in calls for item in call]


def _regroup(items: list[Any], n: int) -> list[list[Any]]:
    """`items` (n calls' worth, in order) cut back into one list per call."""
    per = len(items) // n if n else 0
    return [items[i * per : (i + 1) * per] for i in range(n)]


def str_list_or_tamper(value: Any, limit: int = 64) -> list[str]:
    try:
        return str_list(value, limit=limit)
    except ProtocolError as exc:
        raise Verdict(
            Status.HACK, f"the candidate process broke the protocol: {exc}", HackKind.HARNESS_TAMPERING
        ) from exc


def _finite(out: Any) -> bool:
    """Whether every floating-point and complex tensor of an output is finite everywhere."""
    return all(
        bool(torch.isfinite(t).all())
        for _, t in correctness.flatten(out)
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    )


def _expected(ref_out: Any) -> Expected:
    """The reference's output as the candidate's is compared with it: (its tensor leaves, its
    non-tensor leaves as `correctness.encode_value` gives them), in the order of its tree (the
    caller checked that the tree is the task's)."""
    _, tensors, values = correctness.output_tree(ref_out)
    return [t for _, t in tensors], [v for _, v in values]


def _tensor_pairs(moved: Any, ref_out: Any) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """The reference's output on moved inputs (`moved`) against its nominal output (`ref_out`),
    leaf by leaf: (the moved tensor, the nominal tensor) for each tensor leaf of `ref_out`, in the
    order of `correctness.flatten` (the scale floors' order, `_expected`'s); their shapes and
    dtypes may differ. None when the two trees differ in their paths or in which leaves are
    tensors (a list and a tuple are one kind of sequence; a non-tensor leaf's value may move with
    the inputs)."""
    a, b = correctness.flatten(moved), correctness.flatten(ref_out)
    kinds = [[(path, isinstance(leaf, torch.Tensor)) for path, leaf in tree] for tree in (a, b)]
    if kinds[0] != kinds[1]:
        return None
    return [(got, want) for (_, got), (_, want) in zip(a, b) if isinstance(want, torch.Tensor)]


def main(payload: dict[str, Any], chans: dict[str, Channel], link: Any = None) -> dict[str, Any]:
    """Entry point in the judge child (see `cudal1.bench.worker.run_judged`): `chans` holds the
    channels to the "candidate" and "reference" hosts, `link` is its `ParentLink`."""
    return Judge(payload, chans, link).run()


__all__ = ["Judge", "main", "SHIFTS", "WIDE", "TensorSpec"]
