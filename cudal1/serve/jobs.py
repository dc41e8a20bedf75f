"""Optimize jobs of the Serve application, without Serve: validated requests, a persisted job
store, and a worker thread that runs `cudal1.pipeline.optimize.Optimizer` one job at a time.

A job's state is one JSON file `<jobs_dir>/<id>.json`, written atomically (a temporary file in the
same directory, fsynced, then `os.replace`) on submission, on every progress event, every
`stale_after_s / 4` seconds while it runs (a heartbeat), and when it ends. Any replica reads any
job from that directory, so results survive a replica restart and are readable from every replica
that shares the directory. A queued or running job whose file has not been refreshed for
`stale_after_s` seconds belonged to a replica that died: it reads (and is rewritten) as
"interrupted". Jobs are not resumed.

Submitted programs are untrusted: `task_from_source` only parses them here (no execution); the
reference, the starting solutions and every candidate run in the benchmark pool's evaluator
workers, never in the replica.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cudal1.serve.service import ApiError

log = logging.getLogger(__name__)

STATES = ("queued", "running", "done", "failed", "interrupted")
"""done: the optimizer returned (its outcome may still be "no_correct" or "invalid_task");
failed: the generator or the pool itself raised; interrupted: the replica died before the end."""

_ID = re.compile(r"^[0-9a-f]{32}$")


def parse_request(
    payload: Any,
    *,
    default_rounds: int,
    default_samples: int,
    max_rounds: int,
    max_samples: int,
    max_program_chars: int,
    pools: Mapping[str, Any],
) -> dict[str, Any]:
    """Validate a `POST /v1/optimize` body: {"program": str (KernelBench format), "name"?: str,
    "rounds"?: int, "samples"?: int, "pool"?: pool name (its architecture), "architecture"?: same,
    "start"?: [str] (your own solutions, evaluated first)}. Returns the normalized request, with
    "task_id": "file/<name>", the program's id as a standalone task (`task_from_source`: the name
    made safe, "my relu" -> "file/my_relu"; "file/program" without a name). Raises ApiError(400)
    naming the bad field (the program is parsed, not run)."""
    from cudal1.pipeline.optimize import task_from_source

    if not isinstance(payload, Mapping):
        raise ApiError(400, "the body must be a JSON object")
    unknown = set(payload) - {"program", "name", "rounds", "samples", "pool", "architecture", "start"}
    if unknown:
        raise ApiError(400, f"unknown fields: {', '.join(sorted(unknown))}")
    program = payload.get("program")
    if not isinstance(program, str) or not program.strip():
        raise ApiError(
            400, "program must be a non-empty string: a KernelBench-format program (Model, get_inputs, get_init_inputs)"
        )
    if len(program) > max_program_chars:
        raise ApiError(400, f"program is {len(program)} characters; the limit is {max_program_chars}")
    name = payload.get("name", "program")
    if not isinstance(name, str) or len(name) > 100:
        raise ApiError(400, "name must be a string of at most 100 characters")
    out: dict[str, Any] = {"program": program, "name": name}
    for key, default, hi in (("rounds", default_rounds, max_rounds), ("samples", default_samples, max_samples)):
        v = payload.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise ApiError(400, f"{key} must be an integer in [1, {hi}]; got {v!r}")
        out[key] = v
    pool = payload.get("pool", payload.get("architecture"))
    if pool is None:
        pool = next(iter(pools))
    if pool not in pools:
        raise ApiError(400, f"pool {pool!r} is not served; pools: {', '.join(pools)}")
    out["pool"] = pool
    start = payload.get("start", [])
    if not isinstance(start, list) or not all(isinstance(s, str) and s.strip() for s in start) or len(start) > 8:
        raise ApiError(400, "start must be a list of at most 8 non-empty solution sources")
    if sum(map(len, start)) > max_program_chars:
        raise ApiError(400, f"start is longer than {max_program_chars} characters")
    out["start"] = start
    try:
        task = task_from_source(program, name)
    except ValueError as e:
        raise ApiError(400, f"program is not a KernelBench-format program: {e}") from None
    out["task_id"] = task.task_id
    return out


class JobStore:
    """Job states as JSON files under `root` (see the module doc). Thread-safe for one process;
    writes are atomic, so a reader in another replica sees the old or the new state, never half."""

    def __init__(self, root: str | Path, stale_after_s: float = 60.0) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.stale_after_s = stale_after_s
        self._lock = threading.Lock()
        self.owned: set[str] = set()
        """Jobs this process runs or queued (never marked interrupted by it)."""

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}.json"

    def write(self, state: dict[str, Any]) -> None:
        """Persist `state` (its "id") atomically, stamping "updated_at" (unix seconds)."""
        state["updated_at"] = time.time()
        data = json.dumps(state, default=str)
        with self._lock:
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path(state["id"]))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def read(self, job_id: str) -> dict[str, Any] | None:
        """The job's state, or None (unknown id). A queued or running job of another process whose
        file is older than `stale_after_s` is marked "interrupted" (and rewritten so)."""
        if not _ID.match(job_id):
            return None
        try:
            state = json.loads(self.path(job_id).read_text())
        except FileNotFoundError:
            return None
        if (
            state.get("status") in ("queued", "running")
            and job_id not in self.owned
            and time.time() - state.get("updated_at", 0) > self.stale_after_s
        ):
            state["status"] = "interrupted"
            state["message"] = (
                "the replica running this job stopped before it finished "
                f"(no update for {self.stale_after_s:.0f} s); submit it again"
            )
            self.write(state)
        return state

    def ids(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.json") if _ID.match(p.stem))


class OptimizeService:
    """Submit and poll optimize jobs: `submit(payload) -> {"id", "status"}` at once,
    `get(id) -> state`. One worker thread runs the jobs in order with `run_job`.

    Args:
        store: the `JobStore`.
        run_job: `run_job(request, on_progress) -> dict`: runs one validated request (see
            `parse_request`) and returns the result (JSON-safe); `on_progress(event)` as in
            `Optimizer.optimize`. An exception it raises makes the job "failed" with its message.
        limits: keyword arguments of `parse_request` (defaults, maxima, pools).
        max_pending: jobs queued or running here at once; more get ApiError(429).
    """

    def __init__(
        self,
        store: JobStore,
        run_job: Callable[[dict[str, Any], Callable[[dict[str, Any]], None]], Any],
        limits: Mapping[str, Any],
        max_pending: int = 8,
    ) -> None:
        self.store, self.run_job, self.limits, self.max_pending = store, run_job, dict(limits), max_pending
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._states: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        """Held while a state dict changes or is written: the worker, the heartbeat and readers share them."""
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._work, name="optimize-jobs", daemon=True)
        self._worker.start()
        self._beat = threading.Thread(target=self._heartbeat, name="optimize-heartbeat", daemon=True)
        self._beat.start()

    def submit(self, payload: Any) -> dict[str, Any]:
        """Validate and queue a job. Returns {"id", "status": "queued", "position", "task_id"} (the
        program's task id, "file/<name>": `parse_request`).
        Raises ApiError(400) for a bad payload, ApiError(429) when `max_pending` jobs wait here."""
        request = parse_request(payload, **self.limits)
        job_id = uuid.uuid4().hex
        state = {
            "id": job_id,
            "status": "queued",
            "created_at": time.time(),
            "task_id": request["task_id"],
            "request": {k: v for k, v in request.items() if k != "task_id"},
            "progress": [],
            "message": "",
            "result": None,
        }
        with self._lock:  # the count and the insertion together: concurrent submits cannot pass the limit
            if len(self._states) >= self.max_pending:
                raise ApiError(
                    429,
                    f"{len(self._states)} optimize jobs are pending on this replica; try again later",
                    "rate_limit_error",
                )
            self.store.owned.add(job_id)
            self.store.write(state)
            self._states[job_id] = state
        self._queue.put(job_id)
        return {"id": job_id, "status": "queued", "position": self._queue.qsize(), "task_id": request["task_id"]}

    def get(self, job_id: str) -> dict[str, Any]:
        """The job's state: id, status (`STATES`), progress (events so far), message, result (when
        done: `OptimizeRunner`'s answer, the `TaskOutcome` as a dict with the delivered solution's
        code, speedup, paid speedup, spread, labels and analysis, None / empty when nothing is
        delivered). Raises ApiError(404) for an unknown id."""
        with self._lock:
            state = self._states.get(job_id)
            if state is not None:
                return json.loads(json.dumps(state, default=str))
        state = self.store.read(job_id)
        if state is None:
            raise ApiError(404, f"no optimize job {job_id!r}", "not_found_error")
        return state

    def close(self) -> None:
        self._stop.set()
        self._queue.put(None)

    def _work(self) -> None:
        while not self._stop.is_set():
            job_id = self._queue.get()
            if job_id is None:
                return
            state = self._states[job_id]

            def on_progress(event: dict[str, Any], state: dict[str, Any] = state) -> None:
                with self._lock:
                    state["progress"].append({k: v for k, v in event.items() if k != "task_id"})
                    self.store.write(state)

            try:
                with self._lock:
                    state["status"] = "running"
                    state["started_at"] = time.time()
                    self.store.write(state)
                result = self.run_job(state["request"], on_progress)
                with self._lock:
                    state["result"] = result
                    state["status"] = "done"
                    state["message"] = (result or {}).get("message", "")
            except Exception as e:  # noqa: BLE001 - an engine or cluster failure fails this job, not the service
                log.exception("optimize job %s failed", job_id)
                with self._lock:
                    state["status"] = "failed"
                    state["message"] = f"{type(e).__name__}: {e}"[:1000]
            with self._lock:
                state["finished_at"] = time.time()
                try:
                    self.store.write(state)
                except Exception:  # noqa: BLE001 - the worker must outlive a full disk
                    log.exception("could not write the end of job %s", job_id)
                self._states.pop(job_id, None)
                self.store.owned.discard(job_id)

    def _heartbeat(self) -> None:
        period = max(1.0, self.store.stale_after_s / 4)
        while not self._stop.wait(period):
            with self._lock:
                for state in list(self._states.values()):
                    if state["status"] in ("queued", "running"):
                        try:
                            self.store.write(state)
                        except Exception:  # noqa: BLE001 - keep beating for the other jobs
                            log.exception("heartbeat of job %s", state["id"])


class OptimizeRunner:
    """`run_job` for `OptimizeService`: one request through `Optimizer` on the requested pool.

    Args:
        generator: the shared generator (`LockedGenerator` around a `RolloutGenerator`).
        pools: {pool name: `cudal1.actors.bench_pool.BenchmarkPool`} (candidates carry their task).
        tokenizer: the policy's tokenizer.
        settings: the base `OptimizeSettings`; a request sets rounds and samples.
    """

    def __init__(self, generator: Any, pools: Mapping[str, Any], tokenizer: Any, settings: Any) -> None:
        self.generator, self.pools, self.tokenizer, self.settings = generator, dict(pools), tokenizer, settings

    def __call__(self, request: Mapping[str, Any], on_progress: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Returns the `TaskOutcome` as a dict (its "message" says "no faster solution found" with
        the best figures when nothing is delivered, and its "speedup" is then None) plus
        "delivered", "pool", and "paid",
        "spread", "labels", "analysis", "code" of the delivered solution (None / [] / "" when
        none is delivered: `TaskOutcome.delivered`, a paid speedup above the reference's and the
        starting solutions')."""
        import dataclasses

        from cudal1.pipeline.optimize import Optimizer, task_from_source

        task = task_from_source(request["program"], request.get("name", "program"))
        settings = dataclasses.replace(self.settings, rounds=request["rounds"], samples=request["samples"])
        optimizer = Optimizer(self.generator, self.pools[request["pool"]], self.tokenizer, settings)
        outcome = optimizer.optimize(task, start=list(request.get("start") or []), on_progress=on_progress)
        return runner_result(outcome, request["pool"])


def runner_result(outcome: Any, pool: str) -> dict[str, Any]:
    """What `OptimizeRunner` returns for a `TaskOutcome` on `pool` (see `OptimizeRunner.__call__`)."""
    d = outcome.to_dict()
    sol = outcome.solution if outcome.delivered else None
    d.update(
        pool=pool,
        delivered=sol is not None,
        paid=sol.paid if sol else None,
        spread=sol.spread if sol else None,
        labels=list(sol.labels) if sol else [],
        analysis=sol.analysis if sol else "",
        code=sol.code if sol else None,
    )
    return d
