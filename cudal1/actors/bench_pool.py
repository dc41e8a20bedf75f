"""Benchmark pools: Ray actors around the plain evaluator (`cudal1.bench.evaluator.evaluate`).

One `BenchmarkPool` per architecture (a CPU pool by default; GPU pools select their nodes with
Ray's `accelerator_type`, tests with custom resources). Each pool holds N `BenchActor`s; each
actor evaluates one candidate at a time in its own evaluator worker (the evaluator forks every
candidate from a fork server the actor process starts on its first call, so candidate code never
runs in the actor itself). The driver keeps one call in flight per actor and hands the next
candidate to whichever actor finishes first.

No result is ever silently lost. An actor that dies (node lost, process killed) is restarted by
Ray (`max_restarts=-1`), and its in-flight call is retried on the restarted actor up to
`max_task_retries` times. If that also fails, or the actor gives no answer within
`call_timeout_s`, the candidate gets a labelled result (status runtime_error or timeout, label
"actor_died" / "harness_error" / "actor_timeout", message "benchmark actor ...") and the pool goes
on with the other candidates. These labels say the harness failed, not the candidate: the reward
policy can leave such candidates out instead of punishing them.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from tqdm.auto import tqdm

from ..bench.evaluator import default_device, device_info, evaluate, source_hash
from ..bench.result import EvalResult, Status
from ..bench.settings import EvalSettings
from ..records import Candidate
from .cluster import alive_nodes

log = logging.getLogger(__name__)

RESTART_SLACK_S = 180.0
"""Seconds allowed, per attempt, on top of the evaluator's wall limit: an actor restart re-imports
torch, reloads the tasks and starts a new fork server (tens of seconds on a busy 2-core machine)."""


@dataclasses.dataclass
class PoolSpec:
    """One benchmark pool: which nodes its actors may run on and how they evaluate."""

    name: str = "cpu"
    """Pool name, usually the architecture ("cpu", "h100", "a100")."""
    backend: str = "cpu"
    """"cpu" or "cuda" (passed to the evaluator)."""
    num_actors: int = 1
    """Actors (evaluator workers) in the pool. Actors on one node time at the same time: on a CPU
    pool they share cores and memory bandwidth (noisier speedups); GPU actors get a GPU each."""
    num_cpus: float = 1.0
    """Logical CPUs per actor. Ray sets OMP_NUM_THREADS from it, which the evaluator worker inherits:
    reference and candidate are timed with that many torch threads."""
    num_gpus: float = 0.0
    """GPUs per actor; the actor's evaluator uses "cuda:0", which Ray maps to the GPU it assigned.
    0.5 puts two actors on one GPU: their evaluations' setup overlaps and their timed phases take
    turns (`cudal1.bench.devicelock`), more candidates an hour for noisier sub-millisecond timings
    (docs/benchmarks.md)."""
    accelerator_type: str | None = None
    """Ray's accelerator_type option ("H100", "A100", "H200"): only nodes with that GPU model."""
    resources: dict[str, float] = dataclasses.field(default_factory=dict)
    """Custom resources per actor (e.g. {"bench_test": 1} in tests)."""
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Overrides of `EvalSettings.for_backend(backend)` (field name → value)."""
    tasks: str = "builtin"
    """Where the actors load tasks from: "builtin" or a KernelBench checkout path (on every node)."""
    task_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for `cudal1.tasks.load_tasks` (levels, ids, profile)."""
    max_task_retries: int = 1
    """How often a call in flight on an actor that died is rerun on the restarted actor."""
    call_timeout_s: float | None = None
    """Give up on one call after this long (None: (retries + 1) × (wall_timeout_s + RESTART_SLACK_S))."""
    start_timeout_s: float = 600.0
    """Fail pool creation if the actors are not all running after this long (e.g. their nodes are busy)."""
    check_nodes: bool = True
    """Fail at once when no alive node has the resources one actor needs. Turn off on an
    autoscaling cluster, where such nodes may still be added."""
    build_actors: int = 0
    """CPU actors that compile candidates' inline extensions ahead of timing, in parallel, one
    build per distinct source (0: each timing actor builds what it times). They write into the
    evaluator's build cache, which the timing actors must see: the same machine, or `settings.
    cache_dir` on storage every node shares."""
    build_cpus: float = 2.0
    """Logical CPUs per build actor (each build runs 2 compiler jobs)."""

    def __post_init__(self) -> None:
        if self.backend not in ("cpu", "cuda"):
            raise ValueError(f"pool {self.name!r}: backend must be 'cpu' or 'cuda', not {self.backend!r}")
        if self.num_actors < 1:
            raise ValueError(f"pool {self.name!r}: num_actors must be >= 1, not {self.num_actors}")
        if self.backend == "cuda" and self.num_gpus <= 0:
            raise ValueError(f"pool {self.name!r}: a cuda pool needs num_gpus > 0 per actor")
        if self.build_actors < 0:
            raise ValueError(f"pool {self.name!r}: build_actors must be >= 0, not {self.build_actors}")
        if self.max_task_retries < 0:
            raise ValueError(f"pool {self.name!r}: max_task_retries must be >= 0 (a finite number: a candidate "
                             "that kills its actor every time must not be retried forever)")

    def eval_settings(self) -> EvalSettings:
        """The evaluator settings the actors use. Raises TypeError for an unknown field name."""
        return EvalSettings.for_backend(self.backend, **self.settings)

    def demand(self) -> dict[str, float]:
        """Ray resources one actor needs, as node resource names ("CPU", "GPU", custom ones)."""
        need: dict[str, float] = {"CPU": float(self.num_cpus)}
        if self.num_gpus:
            need["GPU"] = float(self.num_gpus)
        if self.accelerator_type:
            need[f"accelerator_type:{self.accelerator_type}"] = 0.001
        need.update({k: float(v) for k, v in self.resources.items()})
        return need

    def timeout_per_call_s(self) -> float:
        if self.call_timeout_s is not None:
            return self.call_timeout_s
        return (self.max_task_retries + 1) * (self.eval_settings().wall_timeout_s + RESTART_SLACK_S)


class BenchWorker:
    """One evaluator, as the body of a benchmark actor (plain Python: usable without Ray).

    Constructed with the pool name, the backend ("cpu" | "cuda"), the evaluator settings
    (`EvalSettings` or a dict of overrides of the backend's defaults) and the task suite
    ("builtin" or a KernelBench path, plus `load_tasks` options). Raises FileNotFoundError for a
    suite path without tasks, RuntimeError when the backend's device is not usable here.
    """

    def __init__(
        self,
        pool: str,
        backend: str,
        settings: EvalSettings | dict[str, Any] | None = None,
        tasks: str = "builtin",
        task_options: dict[str, Any] | None = None,
    ) -> None:
        from ..tasks import find_task, load_tasks

        self.pool, self.backend = pool, backend
        if isinstance(settings, EvalSettings):
            self.settings = settings
        else:
            self.settings = EvalSettings.for_backend(backend, **(settings or {}))
        self._find_task = find_task
        self.tasks = load_tasks(tasks, **(task_options or {}))
        if not self.tasks:
            raise FileNotFoundError(f"pool {pool!r}: no tasks loaded from {tasks!r}")
        self._by_id = {t.task_id: t for t in self.tasks}
        self.device = default_device(backend)
        self.device_info = device_info(self.device)  # fails here, not per candidate, if the device is unusable

    def ready(self) -> dict[str, Any]:
        """Where this worker runs: {"pool", "pid", "node_id", "assigned", "device", "tasks"}."""
        info: dict[str, Any] = {"pool": self.pool, "pid": os.getpid(), "device": self.device_info, "tasks": len(self.tasks)}
        if ray.is_initialized():
            ctx = ray.get_runtime_context()
            info.update(node_id=ctx.get_node_id(), assigned=ctx.get_assigned_resources())
        return info

    def probe(self, task_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Run each task's reference on this worker's device (import, degenerate-task check; cached
        per task under the evaluator's cache): {task_id: {"degenerate": reason | None, "failure":
        reason | None}}. A task id this worker does not know gets failure "unknown task"."""
        from ..tasks.kernelbench import SuiteReport, probe_suite

        known = [self._by_id[t] for t in task_ids if t in self._by_id]
        report = SuiteReport(root=self.pool, tasks=list(known))
        probe_suite(report, self.settings.size_profile or self.backend, device=self.device,
                    memory_mib=self.settings.memory_limit_mib, cache_dir=self.settings.cache_dir, jobs=1)
        by_path = {f.path: f.reason for f in report.failures}
        out: dict[str, dict[str, Any]] = {t: {"degenerate": None, "failure": "unknown task"} for t in task_ids}
        for task in known:
            out[task.task_id] = {"degenerate": None, "failure": by_path.get(task.path)}
        for task in report.tasks:
            out[task.task_id] = {"degenerate": task.degenerate, "failure": None}
        return out

    def evaluate(self, candidate: Candidate | dict[str, Any]) -> dict[str, Any]:
        """Evaluate one candidate: `EvalResult.to_dict()`.

        The task is `candidate.task` when set (a task outside the suite), else the suite's task of
        `candidate.task_id`; an id this worker does not know gives status invalid_task (label
        "unknown_task").
        Raises only for harness faults (the evaluator's RuntimeError/OSError), never for anything
        the candidate does.
        """
        if isinstance(candidate, dict):
            candidate = Candidate(**candidate)
        if candidate.task is not None:  # a task the suite does not hold, carried by the candidate
            from ..tasks import Task

            task = Task.from_dict(candidate.task)
        else:
            task = self._by_id.get(candidate.task_id)
        if task is None:
            try:
                task = self._find_task(self.tasks, candidate.task_id)
            except LookupError as e:
                result = EvalResult(task_id=candidate.task_id, status=Status.INVALID_TASK, backend=self.backend,
                                    message=f"pool {self.pool!r}: {e}", labels=["unknown_task"])
                result.candidate_hash = source_hash(candidate.source)
                return result.to_dict()
        return evaluate(task, candidate.source, self.backend, device=self.device, settings=self.settings).to_dict()


# max_concurrency=1: one candidate at a time per actor, so timings never overlap on its device.
BenchActor = ray.remote(max_concurrency=1)(BenchWorker)


class BuildWorker:
    """Compiles candidates' inline extensions into the build cache for a timing pool (plain
    Python: usable without Ray). `arch` is the timing devices' architecture ("sm_90", "cpu-x86_64")."""

    def __init__(self, backend: str, settings: EvalSettings, arch: str) -> None:
        self.backend, self.settings, self.arch = backend, settings, arch

    def build(self, candidate: Candidate | dict[str, Any]) -> dict[str, Any] | None:
        """None when the candidate is ready to be timed, else its result (a compile error, a build
        that ran out of time or memory): `EvalResult.to_dict()`."""
        from ..bench.evaluator import prebuild
        from ..tasks.task import Task

        if isinstance(candidate, dict):
            candidate = Candidate(**candidate)
        task = Task(level=0, problem_id=0, name="build", source="")  # only its id is reported
        result = prebuild(task, candidate.source, self.backend, self.settings, arch=self.arch)
        if result is None:
            return None
        result.task_id = candidate.task_id
        return result.to_dict()


BuildActor = ray.remote(max_concurrency=1)(BuildWorker)
"""The Ray actor class of `BuildWorker` (created by `BenchmarkPool` with the spec's options)."""


def harness_failure(candidate: Candidate, backend: str, message: str, label: str,
                    status: Status = Status.RUNTIME_ERROR) -> dict[str, Any]:
    """A labelled `EvalResult.to_dict()` for a candidate the harness failed to evaluate."""
    result = EvalResult(task_id=candidate.task_id, status=status, backend=backend, message=message, labels=[label])
    result.candidate_hash = source_hash(candidate.source)
    return result.to_dict()


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:limit]}"


class BenchmarkPool:
    """Driver-side handle on one pool of benchmark actors.

    Creating it starts `spec.num_actors` actors and waits until each has loaded its tasks.
    Raises ValueError at once when no alive node has the resources one actor needs (the message
    names them), TimeoutError when the actors are not all running after `spec.start_timeout_s`,
    RuntimeError when an actor's constructor fails (its error is chained). Ray must be initialized.
    """

    def __init__(self, spec: PoolSpec) -> None:
        self.spec = spec
        self.settings = spec.eval_settings()
        if spec.check_nodes:
            check_fits(spec)
        options: dict[str, Any] = {
            "num_cpus": spec.num_cpus,
            "num_gpus": spec.num_gpus,
            "resources": dict(spec.resources) or None,
            "max_restarts": -1,
            "max_task_retries": spec.max_task_retries,
        }
        if spec.accelerator_type:
            options["accelerator_type"] = spec.accelerator_type
        self.actors = [
            BenchActor.options(**options).remote(spec.name, spec.backend, self.settings, spec.tasks, spec.task_options)
            for _ in range(spec.num_actors)
        ]
        self._lock = threading.Lock()
        self._busy: dict[int, int] = {}  # actor index -> candidate index, while a call is in flight
        self.builders: list[Any] = []
        try:
            self.workers = self._wait_ready()
            if spec.build_actors:
                arch = self.workers[0]["device"]["arch"]
                self.builders = [BuildActor.options(num_cpus=spec.build_cpus, max_restarts=-1, max_task_retries=1).remote(
                    spec.backend, self.settings, arch) for _ in range(spec.build_actors)]
        except BaseException:
            self.shutdown()
            raise

    def _wait_ready(self) -> list[dict[str, Any]]:
        refs = [a.ready.remote() for a in self.actors]
        done, pending = ray.wait(refs, num_returns=len(refs), timeout=self.spec.start_timeout_s)
        if pending:
            raise TimeoutError(
                f"pool {self.spec.name!r}: {len(pending)} of {len(refs)} benchmark actors not running after "
                f"{self.spec.start_timeout_s:.0f} s; each needs {self.spec.demand()} (nodes busy, or slow start)")
        try:
            return ray.get(refs)
        except (RayActorError, RayTaskError) as e:
            raise RuntimeError(f"pool {self.spec.name!r}: a benchmark actor failed to start: {_short(e, 2000)}") from e

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def busy(self) -> dict[int, int]:
        """{actor index: candidate index} of the calls now in flight (a snapshot)."""
        return dict(self._busy)

    def evaluate(self, candidate: Candidate) -> dict[str, Any]:
        """Evaluate one candidate (see `evaluate_many`)."""
        return self.evaluate_many([candidate], progress=False)[0]

    def evaluate_many(self, candidates: Sequence[Candidate], progress: bool = True,
                      avoid: Sequence[int | None] | None = None) -> list[dict[str, Any]]:
        """Evaluate `candidates` across the pool: one `EvalResult.to_dict()` per candidate, in input order.

        Each result of an actor call carries "actor": the index of the actor that evaluated it.
        `avoid[i]`, when given, is an actor candidate i should not go to (a second opinion on
        another device); it goes there anyway only when no other actor is left to take it.

        One call in flight per actor; the next candidate goes to the first actor that finishes.
        An actor gets work only after it answers a `ready` call (which waits through a restart).
        Every candidate gets a result: a harness failure gives a labelled one (see the module doc).
        An actor that is dead for good, not back within `start_timeout_s`, or whose calls die 3
        times in a row is left out for the rest of this call; with none left, the remaining
        candidates are labelled "no live benchmark actor". One call at a time per pool (a second
        caller waits).
        """
        if avoid is not None and len(avoid) != len(candidates):
            raise ValueError(f"avoid has {len(avoid)} entries for {len(candidates)} candidates")
        with self._lock:
            return self._evaluate_many(list(candidates), progress, list(avoid) if avoid is not None else None)

    def _evaluate_many(self, candidates: list[Candidate], progress: bool,
                       avoid: list[int | None] | None = None) -> list[dict[str, Any]]:
        results: list[dict[str, Any] | None] = [None] * len(candidates)
        # With build actors, a candidate becomes pending once its source is built (one build per
        # distinct source, all of them at once); a build failure is its result.
        builds: dict[Any, list[int]] = {}
        if self.builders:
            pending: collections.deque[int] = collections.deque()
            by_source: dict[str, list[int]] = {}
            for i, c in enumerate(candidates):
                by_source.setdefault(c.source, []).append(i)
            for n, indices in enumerate(by_source.values()):
                builds[self.builders[n % len(self.builders)].build.remote(candidates[indices[0]])] = indices
        else:
            pending = collections.deque(range(len(candidates)))
        idle: collections.deque[int] = collections.deque()
        strikes = [0] * len(self.actors)
        inflight: dict[Any, tuple[int, int, float]] = {}  # ref -> (candidate index, actor index, start)
        # An actor gets work only once it answers `ready`: a call sent to an actor that is still
        # restarting would fail at once (ActorUnavailableError) without ever being evaluated.
        probes: dict[Any, tuple[int, float]] = {}  # ready ref -> (actor index, start)
        for a in range(len(self.actors)):
            probes[self._probe(a)] = (a, time.monotonic())
        timeout_s = self.spec.timeout_per_call_s()
        bar = tqdm(total=len(candidates), desc=f"bench[{self.name}]", unit="cand", disable=not progress, leave=False)

        def finish(i: int, result: dict[str, Any]) -> None:
            results[i] = result
            bar.update(1)

        try:
            while pending or inflight or builds:
                parked: list[int] = []  # idle actors every pending candidate should avoid
                while idle and pending:
                    a = idle.popleft()
                    i = next((j for j in pending if avoid is None or avoid[j] != a), None)
                    if i is None:
                        parked.append(a)
                        continue
                    pending.remove(i)
                    ref = self.actors[a].evaluate.remote(candidates[i])
                    inflight[ref] = (i, a, time.monotonic())
                    self._busy[a] = i
                if parked and pending and not inflight and not probes and not builds:
                    avoid = None  # no other actor left to ask: the same one beats no answer
                idle.extend(parked)
                if parked and avoid is None:
                    continue
                if not inflight and not probes and not builds:  # candidates left, but no actor to take them
                    for i in pending:
                        finish(i, harness_failure(candidates[i], self.spec.backend, "benchmark actor died: no live "
                                                  f"benchmark actor left in pool {self.name!r}", "actor_died"))
                    pending.clear()
                    break
                ready, _ = ray.wait([*inflight, *probes, *builds], num_returns=1, timeout=1.0)
                for ref in ready:
                    if ref in builds:
                        indices = builds.pop(ref)
                        for i, failed in zip(indices, self._built(ref, [candidates[j] for j in indices])):
                            if failed is None:
                                pending.append(i)
                            else:
                                finish(i, failed)
                        continue
                    if ref in probes:
                        a, _ = probes.pop(ref)
                        try:
                            ray.get(ref)
                            idle.append(a)
                        except (RayActorError, RayTaskError) as e:
                            log.warning("pool %s: actor %d is gone (%s); left out of this batch", self.name, a, _short(e))
                        continue
                    i, a, _ = inflight.pop(ref)
                    del self._busy[a]
                    result, died, recheck = self._collect(ref, candidates[i])
                    result["actor"] = a
                    finish(i, result)
                    strikes[a] = strikes[a] + 1 if died else 0
                    if strikes[a] >= 3:
                        log.warning("pool %s: actor %d died on 3 calls in a row; left out of this batch", self.name, a)
                    elif died or recheck:
                        probes[self._probe(a)] = (a, time.monotonic())
                    else:
                        idle.append(a)
                now = time.monotonic()
                for ref, (i, a, start) in list(inflight.items()):
                    if now - start > timeout_s:
                        inflight.pop(ref)
                        del self._busy[a]
                        self._abandon(ref, a)
                        finish(i, harness_failure(candidates[i], self.spec.backend, f"benchmark actor gave no result "
                                                  f"within {timeout_s:.0f} s; actor restarted", "actor_timeout",
                                                  Status.TIMEOUT))
                        probes[self._probe(a)] = (a, now)
                for ref, (a, start) in list(probes.items()):
                    if now - start > self.spec.start_timeout_s:
                        probes.pop(ref)
                        ray.cancel(ref)
                        log.warning("pool %s: actor %d not back after %.0f s; left out of this batch",
                                    self.name, a, self.spec.start_timeout_s)
        finally:
            bar.close()
            for ref in [*inflight, *probes, *builds]:  # only left on an exception here (e.g. KeyboardInterrupt)
                ray.cancel(ref)
            self._busy.clear()
        return results  # type: ignore[return-value]

    def _built(self, ref: Any, candidates: list[Candidate]) -> list[dict[str, Any] | None]:
        """Per candidate of one build: None (to be timed) or its build failure's result. A build
        actor that failed is no reason to fail the candidate: it is then timed (and built) as usual."""
        try:
            failed = ray.get(ref)
        except (RayActorError, RayTaskError) as e:
            log.warning("pool %s: a build actor failed (%s); the timing actor builds instead", self.name, _short(e))
            return [None] * len(candidates)
        if failed is None:
            return [None] * len(candidates)
        return [{**failed, "task_id": c.task_id, "candidate_hash": source_hash(c.source)} for c in candidates]

    def probe_tasks(self, task_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Probe the tasks' references on the pool's devices, spread over its actors (see
        `BenchWorker.probe`). Raises RuntimeError when an actor fails."""
        ids = list(task_ids)
        shares = [ids[a::len(self.actors)] for a in range(len(self.actors))]
        refs = [actor.probe.remote(share) for actor, share in zip(self.actors, shares) if share]
        out: dict[str, dict[str, Any]] = {}
        try:
            for part in ray.get(refs):
                out.update(part)
        except (RayActorError, RayTaskError) as e:
            raise RuntimeError(f"pool {self.name!r}: probing the tasks failed: {_short(e, 2000)}") from e
        return out

    def _probe(self, a: int) -> Any:
        """A `ready` call that waits through restarts (safe to rerun: it only reports)."""
        return self.actors[a].ready.options(max_task_retries=-1).remote()

    def _collect(self, ref: Any, candidate: Candidate) -> tuple[dict[str, Any], bool, bool]:
        """(result, whether the actor died, whether to ask it `ready` before more work) of one
        finished call."""
        try:
            return ray.get(ref), False, False
        except RayActorError as e:  # died, and the retries (if any) died too
            log.warning("pool %s: benchmark actor died evaluating %s: %s", self.name, candidate.task_id, _short(e))
            msg = f"benchmark actor died: {_short(e)}"
            return harness_failure(candidate, self.spec.backend, msg, "actor_died"), True, True
        except RayTaskError as e:  # the evaluator raised: a harness fault, not the candidate's
            log.error("pool %s: evaluator raised on %s: %s", self.name, candidate.task_id, _short(e, 2000))
            msg = f"benchmark actor failed: {_short(e)}"
            # The evaluator can fail because its actor is being killed under it: the next call
            # would reach a restarting actor, so wait for it to answer `ready` first.
            return harness_failure(candidate, self.spec.backend, msg, "harness_error"), False, True

    def _abandon(self, ref: Any, a: int) -> None:
        """Stop waiting for a call that hangs: cancel it (so it is not retried) and restart its actor."""
        ray.cancel(ref)
        ray.kill(self.actors[a], no_restart=False)
        try:
            ray.get(ref, timeout=0)
        except (GetTimeoutError, RayActorError, RayTaskError, ray.exceptions.TaskCancelledError):
            pass

    def shutdown(self) -> None:
        """Kill the pool's actors (no restart). Idempotent."""
        for actor in [*self.actors, *self.builders]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors, self.builders = [], []


def check_fits(spec: PoolSpec) -> None:
    """Raise ValueError unless some alive node has every resource one actor of `spec` needs."""
    need = spec.demand()
    nodes = alive_nodes()
    if any(all(node["resources"].get(k, 0.0) >= v for k, v in need.items()) for node in nodes):
        return
    totals: dict[str, float] = {}
    for node in nodes:
        for k, v in node["resources"].items():
            totals[k] = max(totals.get(k, 0.0), v)
    missing = {k: v for k, v in need.items() if totals.get(k, 0.0) < v}
    have = {k: totals.get(k, 0.0) for k in (missing or need)}
    raise ValueError(
        f"pool {spec.name!r}: no node of the cluster can host one benchmark actor: it needs {need}; "
        f"the best node has {have} (missing: {sorted(missing) or 'no single node has all of them'}). "
        f"{len(nodes)} alive node(s). Set check_nodes=False on an autoscaling cluster.")


class BenchmarkPools:
    """One `BenchmarkPool` per architecture named in the config.

    `primary` names the pool rewards are measured on (default: the first spec). Creation fails as a
    whole: if one pool cannot start, the pools already started are shut down and the error raised.
    Raises ValueError for no specs, duplicate names, or an unknown primary.
    """

    def __init__(self, specs: Sequence[PoolSpec], primary: str | None = None) -> None:
        names = [s.name for s in specs]
        if not names:
            raise ValueError("no benchmark pool specs")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate benchmark pool names: {names}")
        self.primary_name = primary or names[0]
        if self.primary_name not in names:
            raise ValueError(f"primary pool {self.primary_name!r} is not one of {names}")
        self._pools: dict[str, BenchmarkPool] = {}
        try:
            for spec in specs:
                self._pools[spec.name] = BenchmarkPool(spec)
        except BaseException:
            self.shutdown()
            raise

    @property
    def names(self) -> list[str]:
        return list(self._pools)

    @property
    def primary(self) -> BenchmarkPool:
        return self._pools[self.primary_name]

    def pool(self, name: str) -> BenchmarkPool:
        """The pool called `name`. Raises KeyError naming the pools there are."""
        try:
            return self._pools[name]
        except KeyError:
            raise KeyError(f"no benchmark pool {name!r}; pools: {self.names}") from None

    def shutdown(self) -> None:
        """Kill every pool's actors. Idempotent."""
        for pool in self._pools.values():
            pool.shutdown()

    def __enter__(self) -> "BenchmarkPools":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
