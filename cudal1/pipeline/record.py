"""The other architectures, for the record: `PoolRecorder`.

Rewards come from the primary pool. With several pools configured (`conf/bench/a100_h100_l40.yaml`:
rewards from H100, A100 and L40S measured beside it), every candidate the primary pool found
correct (the validated seeds, and every rollout it found correct) is evaluated again on each other pool, in a background thread per pool so the training
step does not wait, and appended to `<run_dir>/rollouts/record_<pool>.jsonl`: the step, task,
origin, the primary's speedup, the pool's whole `EvalResult` and the node that measured it. The
reward never reads these figures.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cudal1.bench.result import EvalResult, Status
from cudal1.records import Candidate

if TYPE_CHECKING:
    from cudal1.actors.bench_pool import BenchmarkPools

log = logging.getLogger(__name__)


class PoolRecorder:
    """Evaluates the primary pool's correct candidates on `pools`' other pools in the background.

    `submit` returns at once; `close(timeout_s)` waits for what was submitted (up to the timeout,
    then leaves the rest) and stops the threads. One thread and one queue per other pool; a pool's
    harness failures are recorded as its labelled results, never raised.
    """

    def __init__(self, pools: BenchmarkPools, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.names = [n for n in pools.names if n != pools.primary.name]
        self._pools = pools
        self._queues: dict[str, queue.Queue] = {n: queue.Queue() for n in self.names}
        self._threads = [
            threading.Thread(target=self._run, args=(n,), name=f"record-{n}", daemon=True) for n in self.names
        ]
        self.recorded = {n: 0 for n in self.names}
        """Results written per pool so far."""
        for t in self._threads:
            t.start()

    def path(self, name: str) -> Path:
        """The JSONL file of pool `name`."""
        return self.out_dir / f"record_{name}.jsonl"

    def submit(self, step: int, candidates: Sequence[Candidate], results: Sequence[EvalResult]) -> int:
        """Queue the candidates whose primary result is ok for every other pool. Returns how many."""
        picked = [(c, r) for c, r in zip(candidates, results) if r.status is Status.OK]
        if picked:
            for q in self._queues.values():
                q.put((step, picked))
        return len(picked) if self.names else 0

    def _run(self, name: str) -> None:
        q = self._queues[name]
        while True:
            item = q.get()
            if item is None:
                return
            step, picked = item
            try:
                pool = self._pools.pool(name)
                results = pool.evaluate_many([c for c, _ in picked], progress=False)
                workers = getattr(pool, "workers", None) or []
                with open(self.path(name), "a", encoding="utf-8") as f:
                    for (c, primary), res in zip(picked, results):
                        actor = res.actor
                        node = workers[actor].get("node_id") if actor is not None and actor < len(workers) else None
                        f.write(
                            json.dumps(
                                {
                                    "step": step,
                                    "task_id": c.task_id,
                                    "origin": c.origin,
                                    "primary_speedup": primary.speedup,
                                    "pool": name,
                                    "node_id": node,
                                    "result": res.to_dict(),
                                }
                            )
                            + "\n"
                        )
                    f.flush()
                    os.fsync(f.fileno())
                self.recorded[name] += len(results)
            except Exception as e:  # a pool shut down under us, or a dead cluster: the record is best effort
                log.warning("pool %s: recording %d candidates of step %d failed: %s", name, len(picked), step, e)

    def close(self, timeout_s: float = 600.0, poll_s: float = 5.0) -> None:
        """Let the queued work finish (at most `timeout_s` in all), then stop the threads. A pool
        that no alive node can hold any more (its nodes were lost) is not waited for: what it
        still had queued is left unrecorded, with a warning."""
        for q in self._queues.values():
            q.put(None)
        deadline = time.monotonic() + timeout_s
        waiting = {n: t for n, t in zip(self.names, self._threads)}
        while waiting and time.monotonic() < deadline:
            for name, t in list(waiting.items()):
                t.join(timeout=min(poll_s, max(0.0, deadline - time.monotonic())))
                if not t.is_alive():
                    del waiting[name]
                elif not self.placeable(name):
                    log.warning(
                        "pool %s: no alive node can hold its actors any more; its queued candidates are "
                        "left unrecorded",
                        name,
                    )
                    del waiting[name]
        if waiting:
            log.warning(
                "recording on other pools still running after %.0f s: %s (left unfinished)", timeout_s, sorted(waiting)
            )

    def placeable(self, name: str) -> bool:
        """Whether some alive node offers the resources of one actor of pool `name` (True when
        that cannot be checked)."""
        try:
            from cudal1.actors.cluster import alive_nodes
            from cudal1.actors.preflight import ActorNeed, unplaced

            spec = self._pools.pool(name).spec
            need = ActorNeed.of(name, 1, spec.num_cpus, spec.num_gpus, spec.accelerator_type, dict(spec.resources))
            return not unplaced([need], [n["resources"] for n in alive_nodes()])
        except Exception as e:  # no Ray connection, or a pool object without a spec: keep waiting
            log.debug("pool %s: placement check failed: %s", name, e)
            return True
