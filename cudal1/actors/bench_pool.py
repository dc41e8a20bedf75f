"""Benchmark pools: Ray actors around the plain evaluator (`cudal1.bench.evaluator.evaluate`).

One `BenchmarkPool` per architecture (a CPU pool by default; GPU pools select their nodes with
Ray's `accelerator_type`, tests with custom resources). Each pool holds N `BenchActor`s; each
actor evaluates one candidate at a time in its own evaluator worker (the evaluator forks every
candidate from a fork server the actor process starts on its first call, so candidate code never
runs in the actor itself). The driver keeps one call in flight per actor and hands the next
candidate to whichever actor finishes first.

No result is ever silently lost. An actor that dies (node lost, process killed) is restarted by
Ray (`max_restarts=-1`), and its in-flight call is retried on the restarted actor up to
`max_task_retries` times. If that also fails (a lost node: the actor cannot come back there),
the candidate is measured again on another actor of the pool, once (`MOVES`). If that fails
too, or the actor gives no answer within `call_timeout_s`, the candidate gets a labelled result (status runtime_error or timeout, label
"actor_died" / "harness_error" / "actor_timeout", message "benchmark actor ...") and the pool goes
on with the other candidates. These labels say the harness failed, not the candidate: the reward
policy can leave such candidates out instead of punishing them.

A pool that computes the run's rewards (the primary pool of `BenchmarkPools`) cannot be lost
quietly: once no alive node can hold one of its actors (checked every `LOST_CHECK_S` while a call
or a restart is outstanding), or its last `PoolSpec.lost_after` results were all the harness's
failures, it raises `RewardSourceLost`, and the job stops with a non-zero exit instead of training
on nothing and reporting success. A pool that only records (`cudal1.pipeline.record`) never raises it.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from ..bench.evaluator import default_device, device_info, evaluate, extensions_dir, source_hash
from ..bench.result import HARNESS_LABELS, EvalResult, Label, Status
from ..bench.settings import EvalSettings
from ..progress import bar as progress_bar
from ..records import Candidate
from . import artifacts
from .artifacts import Artifact, ArtifactError, ArtifactInfo
from .cluster import alive_nodes
from .health import RewardSourceLost
from .pool_spec import PoolSpec

log = logging.getLogger(__name__)

MOVES = 1
"""How often one candidate is moved to another actor of its pool after its actor died under it
(`_Run._move`); past that its result is the labelled harness failure (`Label.ACTOR_DIED`)."""

LOST_CHECK_S = 10.0
"""While a call or an actor's restart is outstanding, how often (s) a pool that computes rewards
checks that some alive node can still hold one of its actors (`check_fits`)."""


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
        self.cpus = timing_cores(backend)

    def ready(self) -> dict[str, Any]:
        """Where this worker runs: {"pool", "pid", "node_id", "assigned", "device", "tasks", "cpus"}
        (cpus: the cores its evaluations are pinned to, None for any)."""
        info: dict[str, Any] = {
            "pool": self.pool,
            "pid": os.getpid(),
            "device": self.device_info,
            "tasks": len(self.tasks),
            "cpus": list(self.cpus) if self.cpus else None,
        }
        if ray.is_initialized():
            ctx = ray.get_runtime_context()
            info.update(node_id=ctx.get_node_id(), assigned=ctx.get_assigned_resources())
        return info

    def probe(self, task_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Run each task's reference on this worker's device (import, degenerate-task check; cached
        per task under the evaluator's cache): {task_id: {"degenerate": reason | None, "failure":
        reason | None}}. A task id this worker does not know gets failure "unknown task"."""
        from ..bench.probe import probe_suite
        from ..tasks.kernelbench import SuiteReport

        known = [self._by_id[t] for t in task_ids if t in self._by_id]
        report = SuiteReport(root=self.pool, tasks=list(known))
        probe_suite(
            report,
            self.settings.size_profile or self.backend,
            device=self.device,
            memory_mib=self.settings.memory_limit_mib,
            cache_dir=self.settings.cache_dir,
            jobs=1,
        )
        by_path = {f.path: f.reason for f in report.failures}
        out: dict[str, dict[str, Any]] = {t: {"degenerate": None, "failure": "unknown task"} for t in task_ids}
        for task in known:
            out[task.task_id] = {"degenerate": None, "failure": by_path.get(task.path)}
        for task in report.tasks:
            out[task.task_id] = {"degenerate": task.degenerate, "failure": None}
        return out

    def evaluate(self, candidate: Candidate | dict[str, Any], artifact: Artifact | None = None) -> EvalResult:
        """Evaluate one candidate.

        The task is `candidate.task` when set (a task outside the suite), else the suite's task of
        `candidate.task_id`; an id this worker does not know gives status invalid_task (label
        "unknown_task").
        `artifact`: the candidate's build from a build actor (`BuildWorker.build_artifact`), put
        into this worker's cache first (`receive`), so the evaluation finds it built. One that
        fails its check on arrival gives a harness failure (labels "harness_error" and
        "artifact_refused"), never the candidate's result; one whose bytes are lost is left out
        (the evaluation builds for itself).
        Raises only for harness faults (the evaluator's RuntimeError/OSError), never for anything
        the candidate does.
        """
        if isinstance(candidate, dict):
            candidate = Candidate(**candidate)
        if artifact is not None:
            try:
                self.receive(candidate.source, artifact)
            except ArtifactError as e:
                log.error("pool %s: build artifact of %s refused: %s", self.pool, candidate.task_id, e)
                result = harness_failure(
                    candidate, self.backend, f"build artifact refused on arrival: {e}", Label.HARNESS_ERROR
                )
                result.labels.append(ARTIFACT_REFUSED)
                return result
            except ray.exceptions.RayError as e:  # its bytes are lost (the build node went): build here
                log.warning("pool %s: build artifact of %s lost (%s); building here", self.pool, candidate.task_id, e)
        if candidate.task is not None:  # a task the suite does not hold, carried by the candidate
            from ..tasks import Task

            task = Task.from_dict(candidate.task)
        else:
            task = self._by_id.get(candidate.task_id)
        if task is None:
            try:
                task = self._find_task(self.tasks, candidate.task_id)
            except LookupError as e:
                result = EvalResult(
                    task_id=candidate.task_id,
                    status=Status.INVALID_TASK,
                    backend=self.backend,
                    message=f"pool {self.pool!r}: {e}",
                    labels=[Label.UNKNOWN_TASK],
                )
                result.candidate_hash = source_hash(candidate.source)
                return result
        return evaluate(
            task, candidate.source, self.backend, device=self.device, settings=self.settings, cpus=self.cpus
        )

    def receive(self, source: str, artifact: Artifact) -> bool:
        """Put the build of `source` that a build actor sent into this worker's build cache
        (`artifacts.receive`; its bytes fetched from Ray's object store only when this worker
        does not see that build already). An artifact built for another directory than this
        worker's (another torch or architecture, or another cache root) is left out with a
        warning: the evaluation then builds for itself. Returns whether bytes were fetched.
        Raises ArtifactError for a SHA-256 mismatch or an unsafe member, OSError when the cache
        cannot be written."""
        info = artifact.info
        ext = extensions_dir(self.settings, self.device_info["arch"], source)
        if artifacts.build_key(self.settings.cache_dir, ext) != info.key:
            log.warning("pool %s: artifact %s is not for this actor's %s; building here", self.pool, info.key, ext)
            return False
        if os.path.realpath(ext) != info.built_at:
            log.warning(
                "pool %s: artifact built at %s arrives at %s: torch's build files name their path, so it "
                "builds again here (give every node the same settings.cache_dir)",
                self.pool,
                info.built_at,
                os.path.realpath(ext),
            )

        def fetch() -> bytes:
            data = artifact.data if isinstance(artifact.data, bytes) else ray.get(artifact.data)
            return data if isinstance(data, bytes) else b""

        return artifacts.receive(info, fetch, self.settings.cache_dir)


ARTIFACT_REFUSED = "artifact_refused"
"""Label (beside "harness_error") of a result whose build artifact failed its check on arrival."""


def timing_cores(backend: str) -> tuple[int, ...] | None:
    """The cores a timing actor's evaluations are pinned to: on a CUDA pool, the slot of its GPU
    in its node's split (`cudal1.bench.cores.node_split`; two actors sharing a GPU share the slot,
    and take turns on the device anyway), so that build actors on the node keep off them. None
    (any core) on a CPU pool, whose timed code computes on the cores it is given by Ray's
    `num_cpus`, or where the node cannot be split."""
    from ..bench.cores import device_slot

    return device_slot("cuda") if backend == "cuda" else None


def build_cores() -> tuple[int, ...] | None:
    """The cores a build actor's builds are pinned to: its node's cores outside every GPU's timing
    slot (`cudal1.bench.cores.node_split`); None (any core) on a node without GPUs."""
    from ..bench.cores import node_split

    split = node_split()
    return split.builds if split else None


# max_concurrency=1: one candidate at a time per actor, so timings never overlap on its device.
BenchActor = ray.remote(max_concurrency=1)(BenchWorker)


class BuildWorker:
    """Builds candidates' extensions into the build cache for a timing pool (plain Python: usable
    without Ray), with `cudal1.bench.evaluator.prebuild`: import, ModelNew() and one forward on
    no device, so builds made in __init__ or the first forward are done too. `arch` is the timing
    devices' architecture ("sm_90", "cpu-x86_64"); `tasks` and `task_options` name the suite as
    for `BenchWorker` (the task gives the constructor arguments and inputs). Builds are pinned off
    the node's timing cores (`build_cores`). Raises FileNotFoundError for a suite without tasks."""

    def __init__(
        self,
        backend: str,
        settings: EvalSettings,
        arch: str,
        tasks: str = "builtin",
        task_options: dict[str, Any] | None = None,
    ) -> None:
        from ..tasks import load_tasks

        self.backend, self.settings, self.arch = backend, settings, arch
        loaded = load_tasks(tasks, **(task_options or {}))
        if not loaded:
            raise FileNotFoundError(f"build worker: no tasks loaded from {tasks!r}")
        self._by_id = {t.task_id: t for t in loaded}
        self.cpus = build_cores()

    def build(self, candidate: Candidate | dict[str, Any]) -> EvalResult | None:
        """None when the candidate is ready to be timed, else its result (a compile error, a build
        that ran out of time or memory). A candidate whose task this worker
        does not know is only imported (its builds in __init__ and forward are left to its
        evaluation)."""
        from ..bench.evaluator import prebuild
        from ..tasks.task import Task

        if isinstance(candidate, dict):
            candidate = Candidate(**candidate)
        if candidate.task is not None:
            task = Task.from_dict(candidate.task)
        else:  # an unknown id: import only (a task without source), its id reported
            task = self._by_id.get(candidate.task_id) or Task(level=0, problem_id=0, name="build", source="")
        result = prebuild(task, candidate.source, self.backend, self.settings, arch=self.arch, cpus=self.cpus)
        if result is None:
            return None
        result.task_id = candidate.task_id
        return result

    def build_artifact(self, candidate: Candidate | dict[str, Any]) -> tuple[BuildOutcome, bytes]:
        """`build` the candidate and pack its build directory (`artifacts.pack`), marked as held
        here (`artifacts.mark`), for a timing actor on any node: (the outcome, the artifact's
        bytes; b"" when there is none). A failed build, or one whose directory cannot be packed
        (too large, unreadable: logged), has no artifact; the timing actor then builds what it
        needs itself. Raises as `build` does."""
        if isinstance(candidate, dict):
            candidate = Candidate(**candidate)
        result = self.build(candidate)
        if result is not None:
            return BuildOutcome(result), b""
        ext = extensions_dir(self.settings, self.arch, candidate.source)
        try:
            info, data = artifacts.pack(self.settings.cache_dir, ext)
        except (ArtifactError, OSError) as e:
            log.warning("build of %s not packed (%s); its timing actor builds it", candidate.task_id, e)
            return BuildOutcome(None), b""
        artifacts.mark(ext, info.sha256)
        return BuildOutcome(None, info), data


@dataclasses.dataclass
class BuildOutcome:
    """What a build actor says of one build (the artifact's bytes travel apart)."""

    result: EvalResult | None
    """None: ready to be timed; else the candidate's result (a compile error, a build that ran
    out of time or memory)."""
    artifact: ArtifactInfo | None = None
    """The packed build, when there is one."""


BuildActor = ray.remote(max_concurrency=1)(BuildWorker)
"""The Ray actor class of `BuildWorker` (created by `BenchmarkPool` with the spec's options)."""


def harness_failure(
    candidate: Candidate, backend: str, message: str, label: str, status: Status = Status.RUNTIME_ERROR
) -> EvalResult:
    """A labelled result (`label`: one of `HARNESS_LABELS`) for a candidate the harness failed to evaluate."""
    result = EvalResult(task_id=candidate.task_id, status=status, backend=backend, message=message, labels=[label])
    result.candidate_hash = source_hash(candidate.source)
    return result


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
            if spec.build_actors:
                check_fits(spec, spec.build_demand(), "build actor")
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
        self.computes_rewards = False
        """Set by `BenchmarkPools` on its primary pool: then losing the pool raises `RewardSourceLost`."""
        self.harness_streak = 0
        """Results in a row, across calls, that were all the harness's failures."""
        self.builders: list[Any] = []
        try:
            self.workers = self._wait_ready()
            if spec.build_actors:
                arch = self.workers[0]["device"]["arch"]
                self.builders = [
                    BuildActor.options(
                        num_cpus=spec.build_cpus,
                        resources=dict(spec.build_resources) or None,
                        max_restarts=-1,
                        max_task_retries=1,
                    ).remote(spec.backend, self.settings, arch, spec.tasks, spec.task_options)
                    for _ in range(spec.build_actors)
                ]
        except BaseException:
            self.shutdown()
            raise

    def _wait_ready(self) -> list[dict[str, Any]]:
        refs = [a.ready.remote() for a in self.actors]
        done, pending = ray.wait(refs, num_returns=len(refs), timeout=self.spec.start_timeout_s)
        if pending:
            raise TimeoutError(
                f"pool {self.spec.name!r}: {len(pending)} of {len(refs)} benchmark actors not running after "
                f"{self.spec.start_timeout_s:.0f} s; each needs {self.spec.demand()} (nodes busy, or slow start)"
            )
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

    def evaluate(self, candidate: Candidate) -> EvalResult:
        """Evaluate one candidate (see `evaluate_many`)."""
        return self.evaluate_many([candidate], progress=False)[0]

    def evaluate_many(
        self, candidates: Sequence[Candidate], progress: bool = True, avoid: Sequence[int | None] | None = None
    ) -> list[EvalResult]:
        """Evaluate `candidates` across the pool: one `EvalResult` per candidate, in input order.

        Each result of an actor call carries its `actor`: the index of the actor that evaluated it.
        `avoid[i]`, when given, is an actor candidate i should not go to (a second opinion on
        another device); it goes there anyway only when no other actor is left to take it.

        One call in flight per actor; the next candidate goes to the first actor that finishes.
        An actor gets work only after it answers a `ready` call (which waits through a restart).
        Every candidate gets a result: a harness failure gives a labelled one (see the module doc).
        A call that ends because its actor died (after Ray's `max_task_retries` on that actor, e.g.
        its node is gone) or because its evaluator raised is queued once more for another actor of
        the pool (`MOVES`, logged); only when that fails too, or the pool has one actor, is the
        labelled failure the result.
        An actor that is dead for good, not back within `start_timeout_s`, or whose calls die 3
        times in a row is left out for the rest of this call; with none left, the remaining
        candidates are labelled "no live benchmark actor". One call (or open `stream`) at a time
        per pool (a second caller waits). Raises `RewardSourceLost` for a pool that computes
        rewards and is lost (see the module docstring).
        """
        if avoid is not None and len(avoid) != len(candidates):
            raise ValueError(f"avoid has {len(avoid)} entries for {len(candidates)} candidates")
        with self._lock:
            run = _Run(self, progress)
            try:
                run.add(list(candidates), list(avoid) if avoid is not None else None)
                while run.busy():
                    run.step(wait_s=1.0)
            finally:
                run.close()  # cancels what is left only on an exception here (e.g. KeyboardInterrupt)
            return run.results  # type: ignore[return-value]

    def stream(self, progress: bool = True) -> "PoolStream":
        """Open an evaluation that takes candidates while it runs (`PoolStream.submit`), for a
        caller that produces them over time (the rollout pipeline hands over each group of
        responses as the generator finishes it). The same scheduling, retries and labelled
        failures as `evaluate_many`, run in a background thread; `PoolStream.results()` waits for
        all of them, in submission order. The stream holds the pool until it ends: do not call
        `evaluate_many` on this pool before `results()` (it would wait forever)."""
        return PoolStream(self, progress)

    def _build_outcome(self, ref: Any) -> BuildOutcome:
        """A build's outcome; a build actor that failed counts as a build without a failure and
        without an artifact (the timing actor then builds as usual: no reason to fail the
        candidate)."""
        try:
            return ray.get(ref)
        except (RayActorError, RayTaskError) as e:
            log.warning("pool %s: a build actor failed (%s); the timing actor builds instead", self.name, _short(e))
            return BuildOutcome(None)

    def probe_tasks(self, task_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Probe the tasks' references on the pool's devices, spread over its actors (see
        `BenchWorker.probe`). Raises RuntimeError when an actor fails."""
        ids = list(task_ids)
        shares = [ids[a :: len(self.actors)] for a in range(len(self.actors))]
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

    def _collect(self, ref: Any, candidate: Candidate) -> tuple[EvalResult, bool, bool]:
        """(result, whether the actor died, whether to ask it `ready` before more work) of one
        finished call."""
        try:
            return ray.get(ref), False, False
        except RayActorError as e:  # died, and the retries (if any) died too
            log.warning("pool %s: benchmark actor died evaluating %s: %s", self.name, candidate.task_id, _short(e))
            msg = f"benchmark actor died: {_short(e)}"
            return harness_failure(candidate, self.spec.backend, msg, Label.ACTOR_DIED), True, True
        except RayTaskError as e:  # the evaluator raised: a harness fault, not the candidate's
            log.error("pool %s: evaluator raised on %s: %s", self.name, candidate.task_id, _short(e, 2000))
            msg = f"benchmark actor failed: {_short(e)}"
            # The evaluator can fail because its actor is being killed under it: the next call
            # would reach a restarting actor, so wait for it to answer `ready` first.
            return harness_failure(candidate, self.spec.backend, msg, Label.HARNESS_ERROR), False, True

    def _abandon(self, ref: Any, a: int) -> None:
        """Stop waiting for a call that hangs: cancel it (so it is not retried) and restart its actor."""
        ray.cancel(ref)
        ray.kill(self.actors[a], no_restart=False)
        try:
            ray.get(ref, timeout=0)
        except (GetTimeoutError, RayActorError, RayTaskError, ray.exceptions.TaskCancelledError):
            pass

    def count(self, result: EvalResult) -> None:
        """Note one result in `harness_streak`; for a pool that computes rewards, raise
        `RewardSourceLost` once `spec.lost_after_results()` results in a row were the harness's failures."""
        if HARNESS_LABELS.intersection(result.labels):
            self.harness_streak += 1
        else:
            self.harness_streak = 0
        if self.computes_rewards and self.harness_streak >= self.spec.lost_after_results():
            raise RewardSourceLost(
                f"pool {self.name!r} computes the run's rewards, and its last {self.harness_streak} results were "
                f"all the harness's failures (the last: {result.message[:200]}); no reward can be measured"
            )

    def check_alive(self) -> None:
        """For a pool that computes rewards: raise `RewardSourceLost` when no alive node can hold
        one of its actors (a lost node whose actors Ray cannot place again anywhere)."""
        if not self.computes_rewards:
            return
        try:
            check_fits(self.spec)
        except ValueError as e:
            raise RewardSourceLost(f"{e} The pool computes the run's rewards: none can be measured.") from None

    def builders_placeable(self) -> bool:
        """Whether some alive node can hold one of the pool's build actors (`PoolSpec.build_demand`)."""
        try:
            check_fits(self.spec, self.spec.build_demand(), "build actor")
        except ValueError:
            return False
        return True

    def drop_builders(self) -> None:
        """Kill the build actors (no restart): from now on each timing actor builds what it times."""
        for actor in self.builders:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.builders = []

    def shutdown(self) -> None:
        """Kill the pool's actors (no restart). Idempotent."""
        for actor in [*self.actors, *self.builders]:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors, self.builders = [], []


class _Run:
    """One evaluation on a pool: candidates added at any time (`add`), moved forward one wait at
    a time (`step`). `BenchmarkPool.evaluate_many` adds everything and steps until done;
    `PoolStream` steps in a background thread while the caller keeps adding. Not thread-safe:
    one thread adds and steps.

    With build actors, a candidate becomes pending once its source is built: one build per
    distinct source for the whole run (a source seen again waits for, or reuses, the first
    build), and a build failure is its result. Each built candidate goes to its timing actor with
    its build (`Artifact`: the bytes stay in the object store until the timing actor asks).
    """

    def __init__(self, pool: BenchmarkPool, progress: bool) -> None:
        self.pool = pool
        self.candidates: list[Candidate] = []
        self.avoid: list[set[int]] = []  # per candidate, actors it should not go to
        self.moves: list[int] = []  # per candidate, how often it was moved off an actor that died
        self.results: list[EvalResult | None] = []
        self.pending: collections.deque[int] = collections.deque()
        self.idle: collections.deque[int] = collections.deque()
        self.strikes = [0] * len(pool.actors)
        self.inflight: dict[Any, tuple[int, int, float]] = {}  # ref -> (candidate index, actor index, start)
        self.builds: dict[Any, tuple[str, Any]] = {}  # build ref -> (source, ref of its artifact's bytes)
        # source -> its build, sent with each of its candidates; the bytes stay in Ray's object
        # store until the run ends, and a timing actor fetches them only when it lacks the build.
        self.artifacts: dict[str, Artifact] = {}
        self.waiting_build: dict[str, list[int]] = {}  # source -> candidates waiting for its build
        self.built: dict[str, EvalResult | None] = {}  # source -> its build's outcome (None: ready to time)
        self.build_count = 0
        self.relaxed = False  # no other actor left for an avoided one: the same one beats no answer
        # An actor gets work only once it answers `ready`: a call sent to an actor that is still
        # restarting would fail at once (ActorUnavailableError) without ever being evaluated.
        self.probes: dict[Any, tuple[int, float]] = {
            pool._probe(a): (a, time.monotonic()) for a in range(len(pool.actors))
        }
        self.timeout_s = pool.spec.timeout_per_call_s()
        self.checked = time.monotonic()  # when `BenchmarkPool.check_alive` last ran
        self.builds_checked = self.checked  # when `BenchmarkPool.builders_placeable` last ran
        self.progress = progress
        self.bar: Any = None  # made by the first `add` with candidates (a stream may never get any)

    def add(self, candidates: list[Candidate], avoid: list[int | None] | None = None) -> range:
        """Queue `candidates` (indices in `results`: the returned range)."""
        start = len(self.candidates)
        if not candidates:
            return range(start, start)
        self.candidates += candidates
        self.avoid += [set() if a is None else {a} for a in (avoid if avoid is not None else [None] * len(candidates))]
        self.moves += [0] * len(candidates)
        self.results += [None] * len(candidates)
        if self.bar is None:
            self.bar = progress_bar(
                total=0, desc=f"bench[{self.pool.name}]", unit="cand", enabled=self.progress, leave=False
            )
        self.bar.total += len(candidates)
        self.bar.refresh()
        for i in range(start, len(self.candidates)):
            source = self.candidates[i].source
            if not self.pool.builders:
                self.pending.append(i)
            elif source in self.built:
                self._after_build(i, self.built[source])
            elif source in self.waiting_build:
                self.waiting_build[source].append(i)
            else:
                self.waiting_build[source] = [i]
                builder = self.pool.builders[self.build_count % len(self.pool.builders)]  # round robin
                self.build_count += 1
                outcome, data = builder.build_artifact.options(num_returns=2).remote(self.candidates[i])
                self.builds[outcome] = (source, data)
        return range(start, len(self.candidates))

    def busy(self) -> bool:
        """Whether a candidate added so far has no result yet."""
        return bool(self.pending or self.inflight or self.builds)

    def _finish(self, i: int, result: EvalResult) -> None:
        self.results[i] = result
        self.bar.update(1)
        self.pool.count(result)

    def _move(self, i: int, a: int, failed: EvalResult) -> bool:
        """Queue candidate `i` again for another actor than `a`, whose call ended in the harness's
        failure (`failed`: the actor died, or its evaluator raised as it was killed): a result the
        candidate did not cause is measured again rather than masked. At most `MOVES` times per
        candidate (one that kills every actor it reaches is not moved on forever), and only in a
        pool with another actor. Returns whether it was queued."""
        if self.moves[i] >= MOVES or len(self.pool.actors) < 2:
            return False
        self.moves[i] += 1
        self.avoid[i].add(a)
        self.pending.appendleft(i)  # ahead of newer work: it has waited a whole call already
        log.warning(
            "pool %s: %s on actor %d (%s); measuring it again on another actor",
            self.pool.name,
            self.candidates[i].task_id,
            a,
            failed.message[:160],
        )
        return True

    def _after_build(self, i: int, failed: EvalResult | None) -> None:
        if failed is None:
            self.pending.append(i)
        else:
            c = self.candidates[i]
            self._finish(i, dataclasses.replace(failed, task_id=c.task_id, candidate_hash=source_hash(c.source)))

    def _without_builders(self) -> None:
        """No alive node can hold a build actor (the build nodes are gone, and Ray would wait for
        one forever): the builds under way are given up, their candidates and every later one are
        built by their timing actors, and the pool's build actors are let go."""
        log.warning(
            "pool %s: no alive node can hold a build actor (it needs %s); its timing actors build from now on",
            self.pool.name,
            self.pool.spec.build_demand(),
        )
        for ref, (source, _) in list(self.builds.items()):
            try:
                ray.cancel(ref)
            except Exception:  # noqa: BLE001 - its actor is killed below anyway
                pass
            del self.builds[ref]
            self.built[source] = None
            for i in self.waiting_build.pop(source):
                self._after_build(i, None)
        self.pool.drop_builders()

    def step(self, wait_s: float) -> None:
        """Hand pending candidates to idle actors, wait up to `wait_s` for one call (or probe, or
        build) to finish and take what finished, then enforce the call and restart timeouts."""
        pool = self.pool
        parked: list[int] = []  # idle actors every pending candidate should avoid
        while self.idle and self.pending:
            a = self.idle.popleft()
            i = next((j for j in self.pending if self.relaxed or a not in self.avoid[j]), None)
            if i is None:
                parked.append(a)
                continue
            self.pending.remove(i)
            ref = pool.actors[a].evaluate.remote(self.candidates[i], self.artifacts.get(self.candidates[i].source))
            self.inflight[ref] = (i, a, time.monotonic())
            pool._busy[a] = i
        if parked and self.pending and not self.inflight and not self.probes and not self.builds:
            self.relaxed = True
        self.idle.extend(parked)
        if parked and self.relaxed:
            return  # the next step hands them out
        if not self.inflight and not self.probes and not self.builds:
            for i in self.pending:  # candidates left, but no actor to take them
                self._finish(
                    i,
                    harness_failure(
                        self.candidates[i],
                        pool.spec.backend,
                        f"benchmark actor died: no live benchmark actor left in pool {pool.name!r}",
                        Label.ACTOR_DIED,
                    ),
                )
            self.pending.clear()
            return
        ready, _ = ray.wait([*self.inflight, *self.probes, *self.builds], num_returns=1, timeout=wait_s)
        for ref in ready:
            if ref in self.builds:
                source, data = self.builds.pop(ref)
                outcome = pool._build_outcome(ref)
                self.built[source] = outcome.result
                if outcome.artifact is not None:
                    self.artifacts[source] = Artifact(outcome.artifact, data)
                for i in self.waiting_build.pop(source):
                    self._after_build(i, self.built[source])
                continue
            if ref in self.probes:
                a, _ = self.probes.pop(ref)
                try:
                    ray.get(ref)
                    self.idle.append(a)
                except (RayActorError, RayTaskError) as e:
                    log.warning("pool %s: actor %d is gone (%s); left out of this batch", pool.name, a, _short(e))
                continue
            i, a, _ = self.inflight.pop(ref)
            del pool._busy[a]
            result, died, recheck = pool._collect(ref, self.candidates[i])
            result.actor = a
            moved = (died or Label.HARNESS_ERROR in result.labels) and self._move(i, a, result)
            if not moved:
                self._finish(i, result)
            self.strikes[a] = self.strikes[a] + 1 if died else 0
            if self.strikes[a] >= 3:
                log.warning("pool %s: actor %d died on 3 calls in a row; left out of this batch", pool.name, a)
            elif died or recheck:
                self.probes[pool._probe(a)] = (a, time.monotonic())
            else:
                self.idle.append(a)
        now = time.monotonic()
        for ref, (i, a, start) in list(self.inflight.items()):
            if now - start > self.timeout_s:
                self.inflight.pop(ref)
                del pool._busy[a]
                pool._abandon(ref, a)
                self._finish(
                    i,
                    harness_failure(
                        self.candidates[i],
                        pool.spec.backend,
                        f"benchmark actor gave no result within {self.timeout_s:.0f} s; actor restarted",
                        Label.ACTOR_TIMEOUT,
                        Status.TIMEOUT,
                    ),
                )
                self.probes[pool._probe(a)] = (a, now)
        if (self.inflight or self.probes) and now - self.checked >= LOST_CHECK_S:
            self.checked = now
            pool.check_alive()
        if self.builds and now - self.builds_checked >= LOST_CHECK_S:
            self.builds_checked = now
            if not pool.builders_placeable():
                self._without_builders()
        for ref, (a, start) in list(self.probes.items()):
            if now - start > pool.spec.start_timeout_s:
                self.probes.pop(ref)
                ray.cancel(ref)
                log.warning(
                    "pool %s: actor %d not back after %.0f s; left out of this batch",
                    pool.name,
                    a,
                    pool.spec.start_timeout_s,
                )

    def close(self) -> None:
        """End the run: cancel whatever is still in flight (only left after an error or a
        cancel), close the progress bar."""
        if self.bar is not None:
            self.bar.close()
        for ref in [*self.inflight, *self.probes, *self.builds]:
            ray.cancel(ref)
        self.inflight.clear()
        self.probes.clear()
        self.builds.clear()
        self.artifacts.clear()
        self.pool._busy.clear()


class PoolStream:
    """An evaluation on one pool that takes candidates while it runs (`BenchmarkPool.stream`).

        with pool.stream() as s:
            for group in groups_as_they_finish():
                s.submit(candidates_of(group))     # returns at once; evaluation starts now
            results = s.results()                  # every result, in submission order

    A background thread runs the pool's scheduling loop (`_Run`); `submit` only queues, and the
    thread hands a new candidate to an idle actor within `poll_s`. Leaving the `with` block on an
    exception cancels the calls in flight and ends the thread. The pool is held (its lock) from
    opening until the thread ends.

    Attributes:
        started: `time.perf_counter()` of the first `submit` that had candidates (None before).
        submitted: candidates submitted so far.
    """

    def __init__(self, pool: BenchmarkPool, progress: bool = True, poll_s: float = 0.2) -> None:
        self.pool, self.poll_s = pool, poll_s
        self.started: float | None = None
        self.submitted = 0
        self._closed = False
        self._queue: Any = queue.SimpleQueue()  # lists of candidates, then _CLOSED
        self._stop = threading.Event()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._results: list[EvalResult] = []
        pool._lock.acquire()
        try:
            self._thread = threading.Thread(
                target=self._serve, args=(progress,), name=f"pool-stream-{pool.name}", daemon=True
            )
            self._thread.start()
        except BaseException:
            pool._lock.release()
            raise

    def submit(self, candidates: Sequence[Candidate]) -> range:
        """Queue `candidates` for evaluation; returns their indices in `results()`. Does not wait.

        Raises:
            RuntimeError: the stream is closed, cancelled or its loop failed.
        """
        if self._closed or self._done.is_set() or self._stop.is_set():
            raise RuntimeError(f"pool {self.pool.name!r}: submit on a closed stream")
        batch = list(candidates)
        if batch and self.started is None:
            self.started = time.perf_counter()
        self._queue.put(batch)
        first = self.submitted
        self.submitted += len(batch)
        return range(first, self.submitted)

    def results(self, timeout_s: float | None = None) -> list[EvalResult]:
        """Close the stream to new candidates and wait for every result (submission order).

        Raises:
            TimeoutError: not done after `timeout_s` (the stream keeps running; call again, or cancel).
            RuntimeError: the scheduling loop itself failed (its error chained).
        """
        if not self._closed:
            self._closed = True
            self._queue.put(_CLOSED)
        if not self._done.wait(timeout_s):
            raise TimeoutError(
                f"pool {self.pool.name!r}: {self.submitted} candidates not all evaluated after {timeout_s} s"
            )
        if isinstance(self._error, RewardSourceLost):
            raise self._error
        if self._error is not None:
            raise RuntimeError(
                f"pool {self.pool.name!r}: the evaluation stream failed: {_short(self._error)}"
            ) from self._error
        return list(self._results)

    def cancel(self) -> None:
        """Stop: cancel the calls in flight, end the thread, release the pool. Idempotent."""
        self._stop.set()
        self._closed = True
        self._queue.put(_CLOSED)
        self._done.wait()

    def __enter__(self) -> "PoolStream":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            self.cancel()
        elif not self._done.is_set():
            self.results()

    def _serve(self, progress: bool) -> None:
        run = None
        try:
            run = _Run(self.pool, progress)
            closed = False

            def take(item: Any) -> bool:
                """Queue a submission on the run; True for the end of submissions."""
                if item is _CLOSED:
                    return True
                run.add(item)
                return False

            while not self._stop.is_set():
                while True:  # take everything submitted so far
                    try:
                        closed = take(self._queue.get_nowait()) or closed
                    except queue.Empty:
                        break
                if run.busy():
                    run.step(wait_s=self.poll_s)
                elif closed:
                    self._results = run.results  # type: ignore[assignment]
                    break
                else:  # nothing to do until the next submit
                    try:
                        closed = take(self._queue.get(timeout=1.0)) or closed
                    except queue.Empty:
                        continue
        except BaseException as e:  # noqa: BLE001 - handed to the caller by results()
            self._error = e
        finally:
            if run is not None:
                run.close()
            self.pool._lock.release()
            self._done.set()


_CLOSED = object()
"""End of a `PoolStream`'s submissions."""


def check_fits(spec: PoolSpec, need: dict[str, float] | None = None, what: str = "benchmark actor") -> None:
    """Raise ValueError unless some alive node has every resource one actor of `spec` needs
    (`need`, default `spec.demand()`; `what`: the actor's role, for the message)."""
    need = need or spec.demand()
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
        f"pool {spec.name!r}: no node of the cluster can host one {what}: it needs {need}; "
        f"the best node has {have} (missing: {sorted(missing) or 'no single node has all of them'}). "
        f"{len(nodes)} alive node(s). Set check_nodes=False on an autoscaling cluster."
    )


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
            self._pools[self.primary_name].computes_rewards = True
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
