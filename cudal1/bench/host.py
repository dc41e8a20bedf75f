"""A host: the process that runs a forward for the judge. Two per evaluation, the same code:

- the **candidate host**, the only process of an evaluation that runs candidate code;
- the **reference host**, which runs only the task's reference (`role: reference` in the setup),
  so that the reference is timed exactly as the candidate is: in a process of its own, on views
  of the judge's input slot, through the same round trip, its outputs read by the judge from its
  memory. Its own clock (`inner_ms`, CUDA events or the CPU clock around the forward) is trusted,
  since it runs no candidate code: it gives the reference's time, and the difference with the
  judge's clock gives the fixed cost of a round trip. The candidate host reports the same figure;
  the judge counts it only as far as its own clock and that fixed cost allow
  (`cudal1.bench.timing.candidate_rounds_ms`).

The parent (`cudal1.bench.worker.run_judged`) starts each in a fresh sandboxed child whose only
connection is a socket to the judge (`cudal1.bench.judge`). Neither has a way to the parent: no
result pipe, no nonce. Whatever a host says is data the judge checks; it never states a verdict.

The protocol, judge -> host (each answered by one message unless noted):

- (host first) `hello` {sandbox}: sent before any candidate code exists.
- `setup` {role, device, task, profile, in_slot (CUDA: the host's slot; CPU: none), in_specs,
  out_specs, out_tree, args, init, init_seed, ref_aliases_inputs, set_bytes, batch_cap, stand_in,
  threads} -> `ready`: run `threads` intra-op threads (when given), map the input slot (room for
  `batch_cap` input sets, set j at `set_bytes` × j),
  take the pristine snapshots of global flags, function identities and threads; the reference
  host builds the task's reference model, and so does the candidate host with `stand_in` (it
  runs the reference in the judge's calibration, before any candidate code exists, and drops it
  when told to load the candidate).
- `poll` -> `polling`: wait for the next message polling the socket (the judge's go follows).
- `call` {k, n, in_slot (CPU: a fresh slot of set 0, its descriptor sent along), args (when
  they changed), args_each (when the sets' non-tensor arguments differ), own_times (False: time
  nothing, CUDA)} -> `done` {k, inner_ms: [n] ([] without own_times), leaves: [n][outputs],
  values: [n][...], mismatch, hack, error}, then, after a `done` with no problem, `audited`
  {hack, parts_ms}: map the call's slot and build views of each set's inputs, run forward on
  each set in turn (each timed on this process's clock unless own_times is False, one
  device-wide synchronize after the last), check the structure, dtype, shape and device of what each
  forward returned and say where each output tensor lives (`cudal1.bench.readers.describe`),
  answer; then check that no output shares memory with an input or an earlier output and say so.
  Nothing is copied: the judge reads the outputs from this process's memory itself, and times
  the round trip from its go until it holds them, before it takes `audited`. On the CPU only
  set 0 is in the host at the go, and each forward is followed by `placed` {j, leaves: [outputs],
  values} and a wait for the judge's `reveal` {j + 1, in_slot (set j + 1's own slot, written
  before the go, its descriptor sent along), args (when the set's non-tensor arguments differ
  from the last set's)}, sent once the judge holds its copy of output j; `done` then has empty
  `leaves` and `values`. Every output of a
  round trip stays alive (each in memory of its own) until the next round trip, so the judge
  can look at them again.
- `load` {source} -> `loaded` (candidate host): import the candidate (this builds its
  extensions) and construct `ModelNew` with the task's constructor arguments and the judge's
  parameter seed.
- `check` -> `checked`: replaced functions, the operator canary, flags (labels). (What this
  process's builds produced is recorded by the parent, which builds them:
  `cudal1.bench.builder`.)
- `profile` {in_slot, args, as for `call`} -> `profiled`: the aten operators and dtypes of one
  forward; on CUDA, whether the device stays busy after the default stream is done (side
  streams).
- `kernels` {in_slot, args, as for `call`; top} -> `kernels`: the last request; a summary of one
  more forward under `torch.profiler` (`kernelprofile.record`: feedback for the policy), none when
  it failed.

The host's own checks (materialization, aliasing, buffer reuse, flags, patches) are reports a
candidate can switch off, since it runs in this process. That is by design: such reports can
only make a result worse, and nothing the host skips changes what the judge reads. The judge
holds the host's claims to its round trip less the fixed cost it measured on this same host
before any candidate code existed, so that fixed cost holds only what a host cannot skip: the
memory checks run after the answer, and the forwards of a round trip are synchronized once,
not one by one (the README's limits say what is left).
"""

from __future__ import annotations

import bisect
import os
import sys
import time
import traceback
from typing import Any

import torch

from . import buildcache, guards, kernelprofile
from ..tasks.task import Task
from .correctness import StructureMismatch, flatten, match_output, materialization_problem
from .pagemap import view_span
from .readers import MAX_SPAN_FACTOR, describe
from .result import HackKind, Status
from .slots import Slot, TensorSpec
from .timing import gc_paused
from .verdicts import classify_exception
from .wire import Channel, PeerGone, unblob

# Bound before any candidate code exists: a candidate that rebinds torch.cuda.synchronize or the
# clocks later does not change the host's (and the patch is reported).
_cuda_sync = torch._C._cuda_synchronize if hasattr(torch._C, "_cuda_synchronize") else None
_Event = torch.cuda.Event
_now = time.perf_counter_ns
CANDIDATE_MODULE = "cudal1_candidate"
SIDE_STREAM_BUSY_S = 50e-6


class Host:
    """One candidate host, serving the judge over `chan` until the judge is gone (module doc)."""

    def __init__(self, chan: Channel, payload: dict[str, Any]) -> None:
        self.chan = chan
        self.payload = payload
        self.device = "cpu"
        self.cuda = False
        self.model: Any = None
        self.previous: Any = None
        self.exports: dict[int, tuple[int, int, str]] = {}
        self._keep_alive: list[torch.Tensor] = []
        self._event_pool: list[Any] = []
        self.candidate_loaded = False
        """True once the candidate is loaded: only its outputs' memory problems are reported (the
        reference's, or the calibration's stand-in's, are the task's own business)."""

    # -- the loop ------------------------------------------------------------------------------

    def serve(self) -> None:
        self.chan.send("hello", sandbox=self.payload.get("sandbox") or {})
        setup = self.chan.recv(max_fds=1)
        if setup["op"] != "setup":
            raise RuntimeError(f"the judge sent {setup['op']!r} before setup")
        self.setup(setup)
        handlers = {
            "call": self.call,
            "load": self.load,
            "check": self.check,
            "profile": self.profile,
            "kernels": self.kernels,
        }
        spin = False
        while True:
            msg = self.chan.recv(max_fds=1, spin=spin)
            op, spin = msg["op"], False
            if op == "poll":  # the judge's go comes next: wait for it awake, polling the socket
                self.chan.send("polling")
                spin = True
                continue
            handler = handlers.get(op)
            if handler is None:
                raise RuntimeError(f"the judge sent an unknown op {op!r}")
            if op == "call":
                with gc_paused():  # as in the judge: no collection inside a round trip
                    handler(msg)
            else:
                handler(msg)

    def _sync(self) -> None:
        if self.cuda and _cuda_sync is not None:
            _cuda_sync()

    # -- setup ---------------------------------------------------------------------------------

    def setup(self, msg: dict[str, Any]) -> None:
        self.device = msg["device"]
        self.cuda = self.device.startswith("cuda")
        self.torch_device = torch.device(self.device)
        threads = msg.get("threads")
        if isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1:
            torch.set_num_threads(threads)  # before the pristine flags: the judge's choice, not a change
        if self.cuda:
            torch.cuda.set_device(self.device)
            torch.empty(1, device=self.device)  # a current context, for the slot's driver calls
            self.torch_device = torch.device("cuda", torch.cuda.current_device())
        self.in_specs = [TensorSpec.from_dict(d) for d in msg["in_specs"]]
        self.out_specs = [TensorSpec.from_dict(d) for d in msg["out_specs"]]
        self.set_bytes = int(msg["set_bytes"])
        self.batch_cap = int(msg["batch_cap"])
        self.template = unblob(msg["args"])
        self.in_views: list[list[torch.Tensor]] = []
        self.sets: list[list[Any]] = []
        self.args: list[Any] = []
        self._map_inputs(msg)
        self.out_tree = msg["out_tree"]
        self.init = unblob(msg["init"])
        self.init_seed = int(msg["init_seed"])
        self.ref_aliases_inputs = bool(msg["ref_aliases_inputs"])
        self.role = msg.get("role", "candidate")
        if self.role == "reference" or msg.get("stand_in"):
            # The candidate host runs the reference too until the candidate is loaded: the judge's
            # calibration times both hosts' round trips, interleaved, on the same work.
            self.model = self._reference_model(Task.from_dict(msg["task"]), msg["profile"])
            if self.role != "reference":  # the stand-in's module: neither in sys.modules nor watched
                for name in [n for n in sys.modules if n.startswith("cudal1_task_")]:
                    del sys.modules[name]
        self.pristine_flags = guards.GlobalFlags()
        self.functions = guards.FunctionSnapshot()
        self.threads_before = guards.python_threads()
        self.chan.send("ready")

    def _reference_model(self, task: Task, profile: str | None) -> torch.nn.Module:
        """The task's reference, built as the judge builds it (same constructor arguments, same
        parameter seed)."""
        module = task.load_module(profile)
        torch.manual_seed(self.init_seed)
        return module.Model(*_clone_tree(self.init)).to(self.device)

    def _map_inputs(self, msg: dict[str, Any]) -> None:
        """Map the input slot a message carries (`in_slot`, and on the CPU its descriptor), if
        any, and rebuild the forward arguments of its input sets (`self.sets`). CUDA: one slot
        for the evaluation, set j starts `set_bytes` × j into it; each tensor's storage spans its
        own bytes only, so a call's arguments do not reach the other sets (`Slot.view`). CPU:
        each input set comes in a fresh slot of its own, set 0's with the message and each later
        one with its `reveal` (`_await_reveal`), so the inputs of a call exist nowhere this
        process can see before they are its to run; `call` drops a round's slots before it
        sends `audited`, and each is unmapped once nothing views it."""
        fds = list(self.chan.received_fds)
        self.chan.received_fds.clear()
        n = int(msg.get("n", 1)) if msg["op"] != "setup" else 0
        if not 0 <= n <= self.batch_cap:
            raise RuntimeError(f"the judge asked for {n} calls, more than the {self.batch_cap} agreed")
        if msg.get("in_slot") is not None:
            if len(fds) != (0 if self.cuda else 1):
                raise RuntimeError(f"the judge sent {len(fds)} slot descriptors with {msg['op']!r}")
            self.in_slot = Slot.attach(msg["in_slot"], self.device, fds[0] if fds else None)
            self.in_views = self._set_views(self.in_slot, self.batch_cap if self.cuda else 1)
        if "args" in msg and msg["op"] != "setup":
            self.template = unblob(msg["args"])
        templates = unblob(msg["args_each"]) if "args_each" in msg else [self.template] * n
        # On the CPU only set 0 is here yet: the judge reveals each later set in turn.
        self.sets = [self._args(t, j) for j, t in enumerate(templates[: n if self.cuda else 1])]
        self.args = self.sets[0] if self.sets else self._args(self.template, 0)

    def _set_views(self, slot: Slot, sets: int) -> list[list[torch.Tensor]]:
        """Views of the input tensors of each of the first `sets` input sets of `slot` (set j
        starts `set_bytes` × j into it)."""
        return [[slot.view(s.moved(j * self.set_bytes)) for s in self.in_specs] for j in range(sets)]

    def _args(self, template: list[Any], j: int) -> list[Any]:
        """The forward arguments of input set `j`: tensor positions ({"slot": i}) are views of
        the input slot."""
        views = self.in_views[j] if j < len(self.in_views) else []
        return [views[a["slot"]] if isinstance(a, dict) and "slot" in a and views else a for a in template]

    # -- one round trip ------------------------------------------------------------------------

    def call(self, msg: dict[str, Any]) -> None:
        """Run forward on each of the message's input sets, back to back; answer (`done`) with
        each call's time on this process's clock and where each call's outputs live, then
        (`audited`, only after a clean `done`) whether any output shares memory it must not.

        Only what no host can skip happens between the judge's go and the answer: the forwards,
        one device synchronize, and locating the outputs (their structure, dtype, shape and
        device, which the judge needs to read them); on CUDA also the events that time each
        forward, except where the judge asks for no times (`own_times` False: its one-call
        rounds, timed on its clock alone). On CUDA the outputs are located while the
        device still runs the forwards (it needs only their metadata), so on a device-bound
        round trip what follows the last kernel is the synchronize's return and the answer. On
        the CPU the sets come one at a time (`_revealed_forwards`), and `done` closes the round
        (its leaves and values went with each `placed`). The memory checks come after the
        answer, while the judge reads the outputs, outside the interval the judge times. A host
        that skips any of this (a candidate can, it runs in this process) answers no sooner
        than this one. Every call's outputs stay alive (each in its own memory) until the next
        round trip."""
        t0 = _now()
        self._keep_alive = []  # the last call's copies: the judge is done with them by now
        self._map_inputs(msg)
        reply: dict[str, Any] = {
            "k": msg["k"],
            "inner_ms": [],
            "leaves": [],
            "values": [],
            "mismatch": None,
            "hack": None,
            "error": None,
        }
        parts: dict[str, float] = {}
        outs: list[Any] = []
        placing = [0, 0]

        def place(outs: list[Any]) -> None:
            placing[0] = _now()
            for out in outs:
                leaves, values = self._place(out, reply)
                if reply["mismatch"] is not None or reply["hack"] is not None:
                    break
                reply["leaves"].append(leaves)
                reply["values"].append(values)
            placing[1] = _now()

        try:
            t1 = _now()
            with torch.no_grad():
                if self.cuda:
                    own = msg.get("own_times", True) is not False
                    reply["inner_ms"], outs = self._timed_forwards(self.sets, place, own)
                else:
                    reply["inner_ms"], outs = self._revealed_forwards(int(msg.get("n", 1)), reply, placing)
            # Where this host's side of the round trip went (ms; data for the judge's record, sent
            # with `audited`: the judge parses `done` on its clock).
            parts = {
                "inputs": (t1 - t0) / 1e6,
                "forwards": (_now() - t1) / 1e6,
                "locate": (placing[1] - placing[0]) / 1e6,
            }
        except BaseException as exc:  # noqa: BLE001 - anything the candidate raises is its result
            traceback.print_exc()
            reply["error"] = classify_exception(exc, "forward")
        earlier_round, self.previous = self.previous, outs  # alive until the next call: the judge may read them again
        self.chan.send("done", **reply)
        if reply["error"] is None and reply["mismatch"] is None and reply["hack"] is None:
            t3 = _now()
            hack = self._memory_problem(outs, self.sets, earlier_round)
            if not self.cuda:
                # Unmapped now, while the judge waits for `audited` (outside its clock), not when
                # the next call replaces them: 20 ms for five 64 MiB sets on a 2-core CPU. (An
                # output that is a view of an input keeps that set's mapping alive.)
                self.in_slot, self.in_views, self.sets, self.args = None, [], [], []
            self.chan.send("audited", hack=hack, parts_ms={**parts, "audit": (_now() - t3) / 1e6})

    def _timed_forwards(self, sets: list[list[Any]], place: Any, own: bool = True) -> tuple[list[float], list[Any]]:
        """CUDA: ([ms of each forward], [its output]) on this process's own clock, one set after
        the other, with `place(outputs)` called once every forward is launched. `own` False (the
        judge's `own_times`, a round trip it times on its own clock alone): no events and no
        times ([]), only the forwards, so that this host does nothing a host could skip. Else
        events on the current stream around each forward, `place` while the device runs them, and
        one device-wide synchronize after it (the calls still run one after another, in stream
        order; the next call is launched while the last one runs, as a host that skipped a
        synchronize after each call would, so no host gains by skipping it). The judge trusts
        these figures from the reference host; from the candidate host they are claims held to
        the judge's clock, which also holds whatever a forward left running on other streams
        (`timing.candidate_rounds_ms`)."""
        outs: list[Any] = []
        events = self._events(len(sets)) if own else []
        for j, args in enumerate(sets):
            if own:
                events[2 * j].record()
            outs.append(self.model(*args))
            if own:
                events[2 * j + 1].record()
        place(outs)
        self._sync()
        return [events[2 * j].elapsed_time(events[2 * j + 1]) for j in range(len(sets)) if own], outs

    def _revealed_forwards(self, n: int, reply: dict[str, Any], placing: list[int]) -> tuple[list[float], list[Any]]:
        """CPU: ([ms of each forward on this process's clock], [its output]) for the `n` input
        sets of a round trip, revealed one at a time. Only set 0 is mapped when the call
        arrives; after each forward the host says where its output lives (`placed`) and waits
        for the judge, which copies that output before it sends the next set's slot (`reveal`).
        So no call can reach a later call's inputs (they are in no mapping of this process yet) or hand
        in an output it has not finished (the judge's copy is taken before the next call can
        start). The host waits for the reveal by polling its socket, so no host, whatever it
        runs, answers sooner than this one. A problem with an output (`_place`) ends the round:
        the `done` that follows carries it."""
        times: list[float] = []
        outs: list[Any] = []
        for j in range(n):
            if j:
                self._await_reveal(j)
            t0 = _now()
            out = self.model(*self.sets[j])
            times.append((_now() - t0) / 1e6)
            outs.append(out)
            t1 = _now()
            leaves, values = self._place(out, reply)
            placing[1] += _now() - t1
            if reply["mismatch"] is not None or reply["hack"] is not None:
                break
            self.chan.send("placed", j=j, leaves=leaves, values=values)
        return times, outs

    def _await_reveal(self, j: int) -> None:
        """Wait, polling, for the judge's `reveal` of input set `j`: its slot (`in_slot` and a
        descriptor) and its non-tensor arguments when they differ from the last set's. Map the
        slot and add the set's forward arguments to `self.sets`."""
        msg = self.chan.recv(spin=True, max_fds=1)
        fds = list(self.chan.received_fds)
        self.chan.received_fds.clear()
        if msg.get("op") != "reveal" or msg.get("j") != j or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise RuntimeError(f"the judge sent {str(msg.get('op'))[:40]!r} for set {j} of a round trip")
        self.in_views += self._set_views(Slot.attach(msg["in_slot"], self.device, fds[0]), 1)
        if "args" in msg:
            self.template = unblob(msg["args"])
        self.sets.append(self._args(self.template, j))

    def _events(self, n: int) -> list[Any]:
        """2n timing events, made once and reused."""
        while len(self._event_pool) < 2 * n:
            self._event_pool.append(_Event(enable_timing=True))
        return self._event_pool[: 2 * n]

    def _place(self, out: Any, reply: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
        """Check one call's output `out` against the expected layout (`out_tree`: the reference's
        structure, `correctness.match_output`) and say where each of its tensors lives:
        (descriptions of its tensor leaves, its non-tensor leaves encoded by
        `correctness.encode_value`), both in the tree's order. A problem is put in `reply`
        ("mismatch": a structure, device, dtype or shape unlike the reference's; or "hack": a
        leaf that is no plain, materialized tensor). This is what the judge needs to read the
        output; the memory checks are `_memory_problem`'s."""
        described: list[dict[str, Any]] = []
        try:
            tensors, encoded = match_output(out, self.out_tree)
        except StructureMismatch as exc:
            reply["mismatch"] = str(exc)[:600]
            return described, []
        values = [v for _, v in encoded]
        for (path, leaf), spec in zip(tensors, self.out_specs):
            problem = materialization_problem(leaf, torch.Tensor)
            if problem:
                reply["hack"] = {"kind": HackKind.NOT_MATERIALIZED.value, "message": f"{path}: {problem}"}
                return described, values
            if leaf.device != self.torch_device:
                reply["mismatch"] = f"{path}: on {leaf.device}, reference on {self.device}"
                return described, values
            if leaf.dtype != spec.torch_dtype:
                reply["mismatch"] = f"{path}: dtype {leaf.dtype}, reference {spec.torch_dtype}"
                return described, values
            if tuple(leaf.shape) != spec.shape:
                reply["mismatch"] = f"{path}: shape {tuple(leaf.shape)}, reference {spec.shape}"
                return described, values
            described.append(self._locate(leaf, spec))
        return described, values

    def _memory_problem(self, outs: list[Any], sets: list[list[Any]], earlier_round: Any) -> dict[str, str] | None:
        """The first output of `outs` (one per input set of `sets`, already placed) that shares
        memory with an input of the round trip (unless the reference's outputs alias its
        inputs) or with an output of an earlier call, this round trip's or the last one's
        (`earlier_round`), as a "hack" report; None when there is none, or while the host runs
        the reference (the reference's memory is the task's own business)."""
        inputs = _Spans(a for args in sets for a in args if isinstance(a, torch.Tensor))
        earlier = _Spans(t for _, t in flatten(earlier_round) if isinstance(t, torch.Tensor))
        found: dict[str, str] | None = None
        for out in outs:
            for path, leaf in flatten(out):
                if not isinstance(leaf, torch.Tensor) or found is not None:
                    continue
                if not self.ref_aliases_inputs and inputs.overlaps(leaf):
                    found = {
                        "kind": HackKind.OUTPUT_ALIASES_INPUT.value,
                        "message": f"{path}: output shares memory with an input",
                    }
                elif earlier.overlaps(leaf):
                    found = {
                        "kind": HackKind.OUTPUT_CHANGED_LATER.value,
                        "message": f"{path}: returned the storage of an earlier call's output (that output is overwritten)",
                    }
            for _, t in flatten(out):
                earlier.add(t)
        return found if self.candidate_loaded else None

    def _locate(self, leaf: torch.Tensor, spec: TensorSpec) -> dict[str, Any]:
        """Where the judge can read `leaf`. A view much sparser than its values, or memory that
        cannot be exported (another allocator, the judge's own input slot), is first copied into a
        fresh contiguous tensor of this process (kept alive with the call's outputs)."""
        span = view_span(tuple(leaf.shape), tuple(leaf.stride()), leaf.element_size())
        if span <= MAX_SPAN_FACTOR * max(spec.nbytes, 1):
            try:
                return describe(leaf, self.exports)
            except RuntimeError:
                pass
        copy = leaf.contiguous().clone()
        self._sync()
        self._keep_alive.append(copy)
        return describe(copy, self.exports)

    def _flag_labels(self) -> list[str]:
        now = guards.GlobalFlags()
        changed = sorted(self.pristine_flags.diff(now))
        labels = ["global_flags:" + ",".join(changed)] if changed else []
        if guards.reduced_precision_flags(self.pristine_flags, now):
            labels.append("reduced_precision")
        return labels

    # -- the candidate -------------------------------------------------------------------------

    def load(self, msg: dict[str, Any]) -> None:
        from ..tasks.task import load_source_module

        if self.role != "candidate":
            raise RuntimeError("only the candidate host loads a candidate")
        self._drop_stand_in()
        self.candidate_loaded = True
        buildcache.install(os.environ.get("TORCH_EXTENSIONS_DIR", ""))
        reply: dict[str, Any] = {
            "ok": False,
            "status": None,
            "hack": None,
            "message": "",
            "build_seconds": 0.0,
            "labels": [],
            "patches": [],
            "canary": None,
        }
        builds = buildcache.activity()  # build_seconds: time inside the extension builds of import and ModelNew()
        before = builds.seconds
        try:
            module = load_source_module(msg["source"], CANDIDATE_MODULE, "<candidate>")
        except BaseException as exc:  # noqa: BLE001
            traceback.print_exc()
            reply["build_seconds"] = round(builds.seconds - before, 3)
            if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
                reply.update(
                    status=Status.RESOURCE_EXCEEDED.value, message=f"import: {type(exc).__name__}: {exc}"[:500]
                )
            else:
                reply.update(
                    status=Status.COMPILE_ERROR.value,
                    message=f"candidate failed to import/build: {type(exc).__name__}: "
                    + buildcache.failure_summary(str(exc)),
                )
            self.chan.send("loaded", **reply)
            return
        reply["build_seconds"] = round(builds.seconds - before, 3)
        self._report_state(reply, "at import")
        if guards.python_threads() - self.threads_before:
            reply["labels"].append("background_threads")
        if not hasattr(module, "ModelNew"):
            reply.update(status=Status.COMPILE_ERROR.value, message="candidate defines no ModelNew")
            self.chan.send("loaded", **reply)
            return
        torch.manual_seed(self.init_seed)
        try:
            self.model = module.ModelNew(*_clone_tree(self.init)).to(self.device)
        except BaseException as exc:  # noqa: BLE001
            traceback.print_exc()
            reply["build_seconds"] = round(builds.seconds - before, 3)
            failure = classify_exception(exc, "ModelNew()")
            if buildcache.is_build_failure(exc):
                failure.update(
                    status=Status.COMPILE_ERROR.value,
                    hack=None,
                    labels=[],
                    message=f"candidate failed to build in ModelNew(): {type(exc).__name__}: "
                    + buildcache.failure_summary(str(exc)),
                )
            reply.update(status=failure["status"], message=failure["message"], hack=failure.get("hack"))
            reply["labels"] += failure["labels"]
            self.chan.send("loaded", **reply)
            return
        reply["build_seconds"] = round(builds.seconds - before, 3)
        self._report_state(reply, "in ModelNew()")
        reply["ok"] = True
        self.chan.send("loaded", **reply)

    def _drop_stand_in(self) -> None:
        """Forget the reference the calibration ran here, before any candidate code runs: the
        model and its last outputs. (Its module was never in sys.modules after the setup; its
        class may linger until the next garbage collection, where patching it changes nothing:
        the reference that counts runs in the reference host.)"""
        self.model = self.previous = None
        self._keep_alive = []

    def _report_state(self, reply: dict[str, Any], when: str) -> None:
        """Replaced functions, the operator canary and flags (labels) into `reply`."""
        changed = self.functions.changed()
        if changed and not reply["patches"]:
            reply["patches"] = [f"{when}: {name}" for name in changed[:20]]
        if reply["canary"] is None:
            broken = guards.operator_canary(self.device)
            reply["canary"] = f"{when}: {broken}" if broken else None
        reply["labels"] = sorted(set(reply["labels"]) | set(self._flag_labels()))

    def check(self, msg: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"patches": [], "canary": None, "labels": []}
        self._report_state(reply, msg.get("when", "later"))
        self.chan.send("checked", **reply)

    def profile(self, msg: dict[str, Any]) -> None:
        """Record the operators and dtypes of one forward, and say where its outputs live (as
        `call` does), so that the judge can hold them against an unrecorded forward on the same
        inputs: a candidate that behaves otherwise while recorded is seen by its outputs."""
        reply: dict[str, Any] = {"ops": [], "dtypes": [], "side_streams": False, "error": None}
        self._map_inputs(msg)
        try:
            with torch.no_grad(), guards.OpRecorder() as rec:
                out = self.model(*self.args)
            reply["ops"] = sorted(set(rec.ops))[:500]
            reply["dtypes"] = sorted(str(d).removeprefix("torch.") for d in rec.dtypes)
            self._sync()
            found: dict[str, Any] = {"mismatch": None, "hack": None}
            leaves, values = self._place(out, found)
            if found["mismatch"] is None and found["hack"] is None:
                found["hack"] = self._memory_problem([out], [self.args], self.previous)
            if found["mismatch"] is None and found["hack"] is None:
                reply["leaves"], reply["values"] = leaves, values
            self.previous = [*(self.previous or []), out]  # alive until the next call, as a call's outputs
            if self.cuda:
                reply["side_streams"] = self._side_streams()
        except BaseException as exc:  # noqa: BLE001 - labels only: a failure here drops them
            reply["error"] = f"{type(exc).__name__}: {exc}"[:300]
        self.chan.send("profiled", **reply)

    def kernels(self, msg: dict[str, Any]) -> None:
        """The last request of an evaluation: one more forward on the message's inputs under
        `torch.profiler`, summarized (`kernelprofile.record`, its `top` slowest rows) for the
        policy's next prompt. The judge has read every output it needs by now, so the earlier
        ones go first and the device's cached blocks after (a 6 GiB output profiled while the
        recorded one was alive left the judge short of memory on an 80 GB card)."""
        self.previous, self._keep_alive = None, []
        self._map_inputs(msg)
        reply: dict[str, Any] = {}
        try:
            reply["kernels"] = kernelprofile.record(self._forward_and_wait, self.cuda, int(msg["top"]))
        except BaseException:  # noqa: BLE001 - feedback only: a failure here drops the profile
            pass
        if self.cuda:
            torch.cuda.empty_cache()
        self.chan.send("kernels", **reply)

    def _forward_and_wait(self) -> None:
        out = self.model(*self.args)
        self._sync()
        del out

    def _side_streams(self) -> bool:
        """True when the device stays busy after the default stream finished one forward."""
        with torch.no_grad():
            out = self.model(*self.args)
        event = torch.cuda.Event()
        event.record(torch.cuda.default_stream(self.device))
        event.synchronize()
        t0 = time.perf_counter()
        self._sync()
        del out
        return time.perf_counter() - t0 > SIDE_STREAM_BUSY_S


# -- helpers ---------------------------------------------------------------------------------------


class _Spans:
    """The memory of a set of tensors' storages, as sorted disjoint address ranges [start, end):
    whether a tensor's storage overlaps any of it in O(log n), so that checking each of a round
    trip's K outputs against every input and every earlier output costs K log K, not K²."""

    def __init__(self, tensors: Any = ()) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        for t in tensors:
            self.add(t)

    @staticmethod
    def _range(t: Any) -> tuple[int, int] | None:
        if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.device.type == "meta":
            return None
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.data_ptr() + storage.nbytes()

    def overlaps(self, t: Any) -> bool:
        """Whether `t`'s storage overlaps any range held (False for an empty or meta tensor)."""
        span = self._range(t)
        if span is None:
            return False
        i = bisect.bisect_left(self.starts, span[1]) - 1  # the last range that starts before t ends
        return i >= 0 and self.ends[i] > span[0]

    def add(self, t: Any) -> None:
        """Hold `t`'s storage too (merged with the ranges it touches)."""
        span = self._range(t)
        if span is None:
            return
        lo, hi = span
        i = bisect.bisect_left(self.ends, lo)  # the first range that ends at or after lo
        j = bisect.bisect_right(self.starts, hi)  # the ranges from i to j - 1 touch [lo, hi]
        if i < j:
            lo, hi = min(lo, self.starts[i]), max(hi, self.ends[j - 1])
        self.starts[i:j], self.ends[i:j] = [lo], [hi]


def _clone_tree(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone_tree(v) for k, v in x.items()}
    return x


def main(chan: Channel, payload: dict[str, Any]) -> None:
    """Entry point in the host child (see `cudal1.bench.worker.run_judged`)."""
    try:
        Host(chan, payload).serve()
    except PeerGone:
        # The judge is done. Stay until the parent, which reads this process's mapped objects
        # once more, kills it (at most a minute, should the parent be gone).
        sys.stdout.flush()
        time.sleep(60)
    except BaseException:  # noqa: BLE001 - the judge sees the channel close; the log says why
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


__all__ = ["Host", "main", "CANDIDATE_MODULE"]
