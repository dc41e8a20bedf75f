"""What runs inside the evaluator's child process: load, check, time, guard.

The parent (`cudal1.bench.evaluator`) calls `evaluate_payload` through `worker.run_isolated`, so
nothing here runs in the driver, an actor, or a server. Order matters and is the protocol:

1. Load the task and build the reference; run it on every correctness trial's inputs *before*
   any candidate code exists in the process, keeping only a fingerprint of each output (a
   recomputation after the candidate's call must match it), and capture the pristine global
   flags and function identities.
2. Import the candidate (this builds its inline extensions, timed as `build_seconds`). Any
   replaced torch/timing/checking function is a hack; changed flags become labels and are
   reset for every reference call.
3. Correctness trials with fresh, differently seeded inputs (and shifted ones): the candidate
   runs first, the reference after it on a copy of the same inputs, so no reference output is
   alive while candidate code runs. Checked: structure, materialization, aliasing, values, input
   mutation, outputs that change after return, threads left running, a checker self-test.
4. Labels from one recorded forward of each (operators, dtypes) and, on CUDA, a side-stream probe.
5. Timing: warm-up, then rounds of (reference, candidate) pairs in random order, each call with
   fresh inputs after an L2 flush, every candidate output (warm-up included) checked against the
   reference output of the same inputs. A speedup above the re-measure bar is measured again; the
   lower one is kept. Last, the trial outputs are looked at once more (late writes).
"""

from __future__ import annotations

import math
import os
import platform
import random
import sys
import time
import traceback
from typing import Any

import torch

from ..tasks.task import Task, load_source_module
from . import correctness, guards, inputs as inputs_mod, timing
from .result import EvalResult, HackKind, Status
from .settings import EvalSettings

SHIFTS = [(4.0, -2.0), (-3.0, 1.0), (10.0, 0.0)]
"""(scale, offset) pairs for shifted correctness trials: x*scale + offset on float inputs."""

CANDIDATE_MODULE = "cudal1_candidate"


class Verdict(Exception):
    """Raised inside the runner to end the evaluation with a status."""

    def __init__(self, status: Status, message: str, hack: HackKind | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.hack, self.extra = status, message, hack, extra


def device_name(device: str) -> tuple[str, str]:
    """(human name, architecture key) of `device`, e.g. ("NVIDIA H200", "sm_90")."""
    if device.startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(device)
        return torch.cuda.get_device_name(device), f"sm_{major}{minor}"
    return platform.processor() or platform.machine(), f"cpu-{platform.machine()}"


def classify_exception(exc: BaseException, during: str) -> Verdict:
    """Map an exception raised by candidate code to a Verdict (status + message)."""
    text = f"{type(exc).__name__}: {exc}"
    first = text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text or "can't allocate memory" in text:
        return Verdict(Status.RESOURCE_EXCEEDED, f"{during}: {first}")
    if any(s in text for s in ("CUDA error", "illegal memory access", "device-side assert", "cudaError", "CUBLAS_STATUS", "misaligned address")):
        return Verdict(Status.RUNTIME_ERROR, f"{during}: CUDA fault: {first}", labels=["cuda_fault"])
    return Verdict(Status.RUNTIME_ERROR, f"{during}: {first}")


def loaded_extensions(ext_dir: str) -> list[str]:
    """Shared objects from `ext_dir` (the candidate's build directory) mapped into this process.

    Read from /proc/self/maps: torch loads inline extensions without registering them in
    sys.modules, but whatever runs here is mapped. Empty when ext_dir is "" or /proc is missing.
    """
    if not ext_dir:
        return []
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(maxsplit=5)[-1].strip() for line in f if ".so" in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith(ext_dir))


def _signature_error(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, TypeError) and any(
        s in text for s in ("positional argument", "unexpected keyword", "required positional", "takes no arguments")
    )


class Runner:
    """One evaluation inside the child. Build with the payload, then call `run()`."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.task = Task.from_dict(payload["task"])
        self.source: str = payload["source"]
        self.backend: str = payload["backend"]
        self.device: str = payload["device"]
        self.settings = EvalSettings(**payload["settings"])
        if self.settings.seed is None:
            self.settings.seed = random.SystemRandom().randrange(2**31 - 100_000)
        self.profile = self.settings.size_profile or self.backend
        self.labels: list[str] = []
        self.result = EvalResult(task_id=self.task.task_id, status=Status.RUNTIME_ERROR, backend=self.backend)
        self.clock: timing.DeviceClock | None = None

    # -- helpers -------------------------------------------------------------------------------

    def _sync(self) -> None:
        if self.clock:
            self.clock.sync()

    def _label(self, label: str) -> None:
        if label not in self.labels:
            self.labels.append(label)

    def _inputs(self, seed: int, shift: tuple[float, float] | None = None) -> list[Any]:
        # Inputs are the task's: made under the pristine flags (a candidate's default dtype must
        # not turn float32 inputs into float64 ones).
        if getattr(self, "pristine", None) is not None:
            self._apply_flags(self.pristine, "input generation")
        return inputs_mod.make_inputs(self.task_module, seed, self.device, shift)

    def _call(self, model: torch.nn.Module, x: list[Any], who: str) -> Any:
        try:
            return model(*x)
        except Verdict:
            raise
        except BaseException as exc:  # noqa: BLE001
            if who == "reference":
                raise Verdict(Status.INVALID_TASK, f"reference forward failed: {type(exc).__name__}: {exc}") from exc
            if _signature_error(exc):
                raise Verdict(Status.HACK, f"ModelNew.forward rejected the task's inputs: {exc}", HackKind.WRONG_SIGNATURE) from exc
            raise classify_exception(exc, "forward") from exc

    def _apply_flags(self, flags: guards.GlobalFlags, who: str) -> None:
        stuck = flags.apply()
        if stuck:
            raise Verdict(Status.HACK, f"global flags could not be reset before the {who}: {stuck}", HackKind.GLOBAL_STATE)

    def _check_patches(self, when: str) -> None:
        changed = self.functions.changed()
        if changed:
            raise Verdict(Status.HACK, f"{when}: replaced {', '.join(changed[:5])}", guards.patch_hack_kind(changed))
        broken = correctness.self_test(self.device)
        if broken:
            raise Verdict(Status.HACK, f"{when}: {broken}", HackKind.HARNESS_TAMPERING)

    # -- phases --------------------------------------------------------------------------------

    def load_reference(self) -> None:
        s = self.settings
        try:
            if self.device.startswith("cuda"):
                torch.cuda.set_device(self.device)
            self.result.device, self.result.arch = device_name(self.device)
            self.clock = timing.DeviceClock(self.device, flush_l2=s.flush_l2)
            self.task_module = self.task.load_module(self.profile)
            self.init_inputs = inputs_mod.make_init_inputs(self.task_module)
            torch.manual_seed(s.seed)
            self.ref_model = self.task_module.Model(*inputs_mod.clone_tree(self.init_inputs)).to(self.device)
        except Verdict:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise Verdict(Status.INVALID_TASK, f"reference failed to load: {type(exc).__name__}: {exc}") from exc
        self.trials: list[tuple[int, tuple[float, float] | None, list[float]]] = []
        self.ref_aliases_inputs = False
        self.ref_mutates_inputs = False
        specs = [(s.seed + i, None) for i in range(s.correctness_trials)]
        specs += [(s.seed + 100 + i, SHIFTS[i % len(SHIFTS)]) for i in range(s.shifted_trials)]
        with torch.no_grad():
            for seed, shift in specs:
                x = self._inputs(seed, shift)
                kept = inputs_mod.clone_tree(x)
                out = self._call(self.ref_model, x, "reference")
                self._sync()
                leaves = [t for _, t in correctness.flatten(out) if isinstance(t, torch.Tensor)]
                if shift is not None and not all(bool(torch.isfinite(t).all()) for t in leaves if t.is_floating_point()):
                    continue  # the reference leaves its domain here: no trial
                tensors = [t for t in x if isinstance(t, torch.Tensor)]
                self.ref_aliases_inputs |= any(correctness.shares_memory(t, tensors) for t in leaves)
                self.ref_mutates_inputs |= not correctness.tree_equal(x, kept)
                # Only a fingerprint is kept: no reference output exists in this process while
                # candidate code runs in a trial (it could be found and returned).
                self.trials.append((seed, shift, correctness.fingerprint(out)))
        self.pristine = guards.GlobalFlags()
        self.functions = guards.FunctionSnapshot()
        self.threads_before = guards.python_threads()

    def load_candidate(self) -> None:
        self.labels.extend(guards.source_labels(self.source))
        t0 = time.perf_counter()
        try:
            module = load_source_module(self.source, CANDIDATE_MODULE, "<candidate>")
        except BaseException as exc:  # noqa: BLE001
            self.result.build_seconds = round(time.perf_counter() - t0, 3)
            if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
                raise classify_exception(exc, "import") from exc
            raise Verdict(Status.COMPILE_ERROR, f"candidate failed to import/build: {type(exc).__name__}: {str(exc)[:500]}") from exc
        self.result.build_seconds = round(time.perf_counter() - t0, 3)
        self._check_patches("at import")
        if loaded_extensions(os.environ.get("TORCH_EXTENSIONS_DIR", "")):
            self._label("custom_kernel")
        if "triton" in sys.modules and "custom_kernel_source" in self.labels and "triton" in self.source:
            self._label("custom_kernel")
        if not hasattr(module, "ModelNew"):
            raise Verdict(Status.COMPILE_ERROR, "candidate defines no ModelNew")
        self.cand_flags = guards.GlobalFlags()
        changed = self.pristine.diff(self.cand_flags)
        if changed:
            self._label("global_flags:" + ",".join(sorted(changed)))
        if guards.reduced_precision_flags(self.pristine, self.cand_flags):
            self._label("reduced_precision")
        if guards.python_threads() - self.threads_before:
            self._label("background_threads")
        torch.manual_seed(self.settings.seed)
        try:
            self.cand_model = module.ModelNew(*inputs_mod.clone_tree(self.init_inputs)).to(self.device)
        except BaseException as exc:  # noqa: BLE001
            if _signature_error(exc):
                raise Verdict(Status.HACK, f"ModelNew rejected the task's constructor args: {exc}", HackKind.WRONG_SIGNATURE) from exc
            raise classify_exception(exc, "ModelNew()") from exc
        self._check_patches("in ModelNew()")

    def check_correctness(self) -> None:
        s = self.settings
        previous: tuple[Any, Any] | None = None
        worst = 0.0
        self.trial_outputs: list[tuple[str, Any, Any]] = []
        with torch.no_grad():
            for seed, shift, ref_print in self.trials:
                what = f"trial seed {seed}" + (f" shifted {shift}" if shift else "")
                x = self._inputs(seed, shift)
                kept = inputs_mod.clone_tree(x)
                self._apply_flags(self.cand_flags, "candidate")
                threads = guards.python_threads()
                t0 = time.perf_counter()
                out = self._call(self.cand_model, x, "candidate")
                self._sync()
                elapsed = time.perf_counter() - t0
                leftover = guards.python_threads() - threads
                if leftover:
                    self._label("threads_outlive_forward")
                self._label_flags_changed_in_forward()
                # Reading a tensor without storage would crash the copy below: check first.
                problem = correctness.materialization_check(out)
                if problem:
                    raise Verdict(Status.HACK, f"{what}: {problem}", HackKind.NOT_MATERIALIZED)
                snap = inputs_mod.clone_tree(out)
                self._apply_flags(self.pristine, "reference")
                ref_out = self._call(self.ref_model, kept, "reference")
                self._sync()
                if not correctness.fingerprint_matches(ref_out, ref_print):
                    raise Verdict(Status.HACK, f"{what}: the reference gives another output since the candidate was loaded",
                                  HackKind.HARNESS_TAMPERING)
                mismatch, err = correctness.check_output(snap, ref_out, x, s.rtol, s.atol, self.ref_aliases_inputs)
                if mismatch is None:
                    mismatch, _ = correctness.check_aliasing(out, x, self.ref_aliases_inputs)
                if mismatch:
                    if mismatch.hack:
                        raise Verdict(Status.HACK, f"{what}: {mismatch.message}", mismatch.hack)
                    self._recheck_late_output(out, ref_out, x, what)
                    raise Verdict(Status.INCORRECT, f"{what}: {mismatch.message}", max_abs_error=mismatch.max_abs_error)
                worst = max(worst, err)
                del ref_out
                # `kept` went to the reference, which leaves its inputs alone when this check applies.
                if not self.ref_mutates_inputs and not correctness.tree_equal(x, kept):
                    raise Verdict(Status.HACK, f"{what}: an input was modified in place", HackKind.INPUT_MUTATED)
                # Deferred work: wait about two calls' time and look again (and once more at the end).
                time.sleep(min(1.0, max(0.005, 2 * elapsed)))
                self._sync()
                if not correctness.tree_equal(out, snap):
                    kind = HackKind.UNFINISHED_WORK if leftover else HackKind.OUTPUT_CHANGED_LATER
                    raise Verdict(Status.HACK, f"{what}: output changed after forward returned", kind)
                if previous is not None and not correctness.tree_equal(previous[0], previous[1]):
                    raise Verdict(Status.HACK, "an earlier call's output was overwritten by a later call", HackKind.OUTPUT_CHANGED_LATER)
                previous = (out, snap)
                self.trial_outputs.append((what, out, snap))
                self._check_patches("in forward")
        self.result.correctness_trials = len(self.trials)
        self.result.max_abs_error = worst

    def _recheck_late_output(self, out: Any, ref_out: Any, x: list[Any], what: str) -> None:
        """A wrong output that becomes right a moment later was finished after forward returned."""
        time.sleep(0.2)
        self._sync()
        late, _ = correctness.check_output(out, ref_out, x, self.settings.rtol, self.settings.atol, self.ref_aliases_inputs)
        if late is None:
            raise Verdict(Status.HACK, f"{what}: the output was completed after forward returned", HackKind.UNFINISHED_WORK)

    def _label_flags_changed_in_forward(self) -> None:
        changed = set(self.cand_flags.diff(guards.GlobalFlags())) - guards.NOT_APPLIED
        if changed:
            self._label("global_flags:" + ",".join(sorted(changed)))

    def recheck_trial_outputs(self) -> None:
        """Outputs of the trials, seconds later: a late write (a thread, a stream) shows here."""
        self._sync()
        for what, out, snap in getattr(self, "trial_outputs", []):
            if not correctness.tree_equal(out, snap):
                raise Verdict(Status.HACK, f"{what}: output changed long after forward returned", HackKind.OUTPUT_CHANGED_LATER)
        self.trial_outputs = []

    def collect_labels(self) -> None:
        """Operators and dtypes of one forward each (diagnostic: failures here only drop labels)."""
        seed, shift, _ = self.trials[0]
        x_ref = self._inputs(seed, shift)
        x_cand = inputs_mod.clone_tree(x_ref)
        try:
            with torch.no_grad():
                self._apply_flags(self.pristine, "reference")
                with guards.OpRecorder() as ref_rec:
                    self.ref_model(*x_ref)
                self._apply_flags(self.cand_flags, "candidate")
                with guards.OpRecorder() as cand_rec:
                    self.cand_model(*x_cand)
                self._sync()
        except Verdict:
            raise
        except Exception:  # noqa: BLE001
            return
        if "custom_kernel" not in self.labels:
            self._label("pytorch_only")
            if set(ref_rec.ops) and set(ref_rec.ops) <= set(cand_rec.ops):
                self._label("calls_reference_ops")
        if (cand_rec.dtypes & guards.LOW_PRECISION) and not (ref_rec.dtypes & guards.LOW_PRECISION):
            self._label("reduced_precision")
        if self.device.startswith("cuda"):
            self._probe_side_streams(seed, shift)

    def _probe_side_streams(self, seed: int, shift: Any) -> None:
        """Label "side_streams" when the device stays busy after the default stream is done."""
        x = self._inputs(seed, shift)
        self._sync()
        with torch.no_grad():
            self._apply_flags(self.cand_flags, "candidate")
            out = self.cand_model(*x)
        ev = torch.cuda.Event()
        ev.record(torch.cuda.default_stream(self.device))
        ev.synchronize()
        t0 = time.perf_counter()
        self._sync()
        if time.perf_counter() - t0 > 50e-6:
            self._label("side_streams")
        del out

    def _timing_pass(self, seed_base: int) -> tuple[list[list[float]], list[list[float]]]:
        s = self.settings
        clock = self.clock
        assert clock is not None
        rng = random.Random(seed_base)
        ref_rounds: list[list[float]] = []
        cand_rounds: list[list[float]] = []
        # Both go through the same wrapper, so neither pays a call layer the other does not.
        def ref_fn(*a: Any) -> Any:
            return self._call(self.ref_model, list(a), "reference")

        def cand_fn(*a: Any) -> Any:
            return self._call(self.cand_model, list(a), "candidate")

        fastest_ms = float("inf")
        previous: tuple[Any, Any] | None = None
        with torch.no_grad():
            for w in range(s.warmup_calls):
                x = self._inputs(seed_base - 1 - w)
                self._apply_flags(self.pristine, "reference")
                ref_warm, ref_out = clock.time_call(ref_fn, x)
                self._apply_flags(self.cand_flags, "candidate")
                x_cand = inputs_mod.clone_tree(x)
                cand_warm, out = clock.time_call(cand_fn, x_cand)
                fastest_ms = min(fastest_ms, ref_warm, cand_warm)
                # Warm-up answers are checked too: no call of the candidate goes unchecked.
                mismatch, _ = correctness.check_output(out, ref_out, x_cand, s.rtol, s.atol, self.ref_aliases_inputs)
                if mismatch:
                    self._recheck_late_output(out, ref_out, x_cand, "warm-up call")
                    raise Verdict(Status.HACK, f"warm-up call gave a wrong output after the correctness trials passed: {mismatch.message}",
                                  mismatch.hack or HackKind.RESULT_CACHE)
                del ref_out, out
            calls = s.calls_per_round
            if s.min_round_ms > 0 and fastest_ms > 0:
                calls = max(calls, min(s.max_calls_per_round, math.ceil(s.min_round_ms / fastest_ms)))
            for r in range(s.rounds):
                ref_ms: list[float] = []
                cand_ms: list[float] = []
                for c in range(calls):
                    seed = seed_base + 1000 * r + c
                    x_ref = self._inputs(seed)
                    x_cand = inputs_mod.clone_tree(x_ref)
                    ref_out = cand_snap = None
                    for who in rng.sample(["reference", "candidate"], 2):
                        if who == "reference":
                            self._apply_flags(self.pristine, who)
                            clock.flush()
                            ms, ref_out = clock.time_call(ref_fn, x_ref)
                            ref_ms.append(ms)
                        else:
                            self._apply_flags(self.cand_flags, who)
                            clock.flush()
                            ms, out = clock.time_call(cand_fn, x_cand)
                            cand_ms.append(ms)
                            if s.check_timed_outputs:
                                problem = correctness.materialization_check(out)
                                if problem:
                                    raise Verdict(Status.HACK, f"timed call (seed {seed}): {problem}", HackKind.NOT_MATERIALIZED)
                                alias, _ = correctness.check_aliasing(out, x_cand, self.ref_aliases_inputs)
                                if alias:
                                    raise Verdict(Status.HACK, f"timed call (seed {seed}): {alias.message}", alias.hack)
                                cand_snap = inputs_mod.clone_tree(out)
                                if previous is not None and not correctness.tree_equal(previous[0], previous[1]):
                                    raise Verdict(Status.HACK, f"timed call (seed {seed}) overwrote an earlier call's output",
                                                  HackKind.OUTPUT_CHANGED_LATER)
                                previous = (out, cand_snap)
                            del out
                    if s.check_timed_outputs:
                        mismatch, _ = correctness.check_output(cand_snap, ref_out, x_cand, s.rtol, s.atol, self.ref_aliases_inputs)
                        if mismatch and previous is not None:
                            self._recheck_late_output(previous[0], ref_out, x_cand, f"timed call (seed {seed})")
                        if mismatch:
                            raise Verdict(
                                Status.HACK,
                                f"timed call (seed {seed}) gave a wrong output after the correctness trials passed: {mismatch.message}",
                                mismatch.hack or HackKind.RESULT_CACHE,
                            )
                        if not self.ref_mutates_inputs and not correctness.tree_equal(x_cand, x_ref):
                            raise Verdict(Status.HACK, f"timed call (seed {seed}) modified an input in place", HackKind.INPUT_MUTATED)
                ref_rounds.append(ref_ms)
                cand_rounds.append(cand_ms)
                self._check_patches("during timing")
        self._apply_flags(self.pristine, "reference")
        return ref_rounds, cand_rounds

    def measure(self) -> None:
        s = self.settings
        ref_rounds, cand_rounds = self._timing_pass(s.seed + 10_000)
        speedup, spread = timing.speedup_stats(ref_rounds, cand_rounds)
        if speedup > s.remeasure_above:
            ref2, cand2 = self._timing_pass(s.seed + 20_000)
            speedup2, spread2 = timing.speedup_stats(ref2, cand2)
            self.result.remeasured = True
            if speedup2 < speedup:
                ref_rounds, cand_rounds, speedup, spread = ref2, cand2, speedup2, spread2
        self.result.reference = timing.summarize_rounds(ref_rounds)
        self.result.candidate = timing.summarize_rounds(cand_rounds)
        self.result.speedup = speedup
        self.result.speedup_spread = spread

    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        phase = "reference"
        try:
            try:
                self.load_reference()
                for phase, step in (("import", self.load_candidate), ("correctness", self.check_correctness),
                                    ("labels", self.collect_labels), ("timing", self.measure),
                                    ("late check", self.recheck_trial_outputs)):
                    step()
            except Verdict:
                raise
            except BaseException as exc:  # noqa: BLE001
                # Asynchronous faults (a CUDA illegal address) surface at the next synchronize,
                # wherever that is: once the candidate is loaded, they are its doing.
                if phase == "reference":
                    raise Verdict(Status.INVALID_TASK, f"reference failed: {type(exc).__name__}: {exc}") from exc
                raise classify_exception(exc, phase) from exc
            self.result.status = Status.OK
            self.result.message = f"correct on {self.result.correctness_trials} trials; {self.result.speedup:.3f}× faster"
        except Verdict as v:
            self.result.status, self.result.message, self.result.hack_kind = v.status, v.message, v.hack
            for label in v.extra.get("labels", []):
                self._label(label)
            if v.extra.get("max_abs_error") is not None:
                self.result.max_abs_error = v.extra["max_abs_error"]
            if v.__cause__ is not None:
                traceback.print_exception(v.__cause__, file=sys.stderr)
        self.result.labels = self.labels
        self.result.eval_seconds = round(time.perf_counter() - t0, 3)
        return self.result.to_dict()


def evaluate_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """run_isolated target: evaluate one candidate; returns `EvalResult.to_dict()`."""
    return Runner(payload).run()


def build_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """run_isolated target: import the candidate only (its inline extensions build into the cache).

    Returns {"ok": bool, "build_error": bool, "message": str, "build_seconds": float}; build_error is
    True only for a syntax error or a failed extension build (other import failures are left for the
    full evaluation to judge, which has the device).
    """
    t0 = time.perf_counter()
    try:
        load_source_module(payload["source"], CANDIDATE_MODULE, "<candidate>")
        return {"ok": True, "build_error": False, "message": "", "build_seconds": round(time.perf_counter() - t0, 3)}
    except BaseException as exc:  # noqa: BLE001
        traceback.print_exc()
        text = f"{type(exc).__name__}: {str(exc)[:500]}"
        build_error = isinstance(exc, SyntaxError) or "Error building extension" in str(exc) or "ninja" in str(exc).lower()
        return {"ok": False, "build_error": build_error, "message": text, "build_seconds": round(time.perf_counter() - t0, 3)}


def device_info(payload: dict[str, Any]) -> dict[str, Any]:
    """run_isolated target: name, architecture key and versions of `payload["device"]`."""
    device = payload["device"]
    name, arch = device_name(device)
    return {"name": name, "arch": arch, "torch": torch.__version__, "cuda": torch.version.cuda}
