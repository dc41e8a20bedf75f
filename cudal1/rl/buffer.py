"""The exemplar buffer: per task, the correct solutions found so far, persisted as they arrive.

A plain class (the Ray actor in `cudal1.actors` is a thin shell around it). It keeps, per task,
up to `max_per_task` correct solutions (`cudal1.records.Exemplar`, status "ok" with a finite
positive speedup), samples exemplars for the contrastive prompt the CUDA-L1 way
(`cudal1.rl.exemplars`), and builds that prompt (`cudal1.policy.prompts`).

Persistence: one append-only JSONL file, `<directory>/exemplars.jsonl`, one accepted exemplar
per line, written with flush + fsync before `add` returns, so an exemplar `add` reported is on
disk. On start the file is replayed through the same rules as `add` (dedupe, cap), which
rebuilds the same state. A crash mid-write can leave a torn last line: it is skipped and cut
off, so the next append starts on a clean line. Evicted exemplars stay in the file until
`compact()` rewrites it (atomically: temp file, fsync, rename).

Dedupe: per task, by the SHA-256 of the code's normal form (`cudal1.rl.similarity.normalized_code`:
comments, docstrings, formatting and no-op statements removed, identifiers renamed by first
occurrence), so a near-copy of a stored solution (a rename, a comment, `x = x`) is a duplicate;
the first measurement of a code is kept (a re-measurement of the same code adds nothing new to
contrast). Cap: when a task holds more than `max_per_task`, the oldest exemplar that is not the
task's best is evicted, so the pool follows the current policy but never loses its best.

Why not RLlib's replay buffers (ray.rllib.utils.replay_buffers in ray 2.60): they store
SampleBatch/episode data in one FIFO ring and evict the oldest item, while this needs per-task
pools that never evict the best solution. `PrioritizedReplayBuffer` samples single items
∝ priority^α with replacement through the global `random` module, which is neither CUDA-L1's
two-stage draw (distinct score buckets by a softmax over bucket means, then a uniform pick
inside each) nor reproducible from a passed-in seed. Their persistence is a `get_state()`
snapshot, not an append-only log that survives a crash between snapshots, and the
multi-agent variant's per-policy partitioning would have to be bent into per-task pools. Using
them would mean overriding storage, eviction, sampling and persistence, i.e. all of it, so this
module stays plain Python.

Not thread-safe, and one writer per directory: one caller at a time (a Ray actor serializes its
method calls), and never two live buffers on the same file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
from pathlib import Path
from typing import Any

from cudal1.policy.prompts import contrastive_prompt, plain_prompt
from cudal1.records import Exemplar
from cudal1.rl.exemplars import SCALES, is_sampleable, sample_exemplars
from cudal1.rl.similarity import normalized_code

log = logging.getLogger(__name__)

FILENAME = "exemplars.jsonl"


def code_hash(code: str) -> str:
    """SHA-256 hex digest of `code` with trailing whitespace removed from every line."""
    canon = "\n".join(line.rstrip() for line in code.strip("\n").split("\n"))
    return hashlib.sha256(canon.encode()).hexdigest()


def program_hash(code: str) -> str:
    """The dedupe key of a stored solution: `code_hash` of its `normalized_code`, equal for two
    codes that differ only by renaming, comments, formatting or no-op statements."""
    return code_hash(normalized_code(code))


class ExemplarBuffer:
    """Per-task exemplar pools, persisted to `directory`.

    Args:
        directory: where `exemplars.jsonl` lives (created if missing); restored from on init.
        max_per_task: cap per task (>= 1).
        tau: softmax temperature over bucket means on the bucketing scale, see `cudal1.rl.exemplars`.
        n_buckets: speedup buckets per task.
        scale: bucketing scale, "log" (ln ×) or "linear" (×).
        k: exemplars per prompt (2 in CUDA-L1).
        seed: seeds the sampler (a restarted buffer replays the same draws from the start).

    Raises:
        ValueError: bad arguments. OSError: the directory cannot be created or the file opened.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_per_task: int = 64,
        tau: float = 1.0,
        n_buckets: int = 4,
        k: int = 2,
        seed: int = 0,
        scale: str = "log",
    ) -> None:
        if max_per_task < 1:
            raise ValueError(f"max_per_task must be >= 1, got {max_per_task}")
        if not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        if n_buckets < 1 or k < 0:
            raise ValueError(f"need n_buckets >= 1 and k >= 0, got {n_buckets}, {k}")
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        self.scale = scale
        self.directory = Path(directory)
        self.path = self.directory / FILENAME
        self.max_per_task, self.tau, self.n_buckets, self.k = max_per_task, tau, n_buckets, k
        self._rng = random.Random(seed)
        self._pools: dict[str, list[Exemplar]] = {}
        self._hashes: dict[str, set[str]] = {}
        self._counts = {"duplicates": 0, "rejected": 0, "evicted": 0, "skipped_lines": 0}
        self.directory.mkdir(parents=True, exist_ok=True)
        self.restored = self._restore()
        self._file = open(self.path, "a", encoding="utf-8")

    # -- persistence --------------------------------------------------------------------

    def _restore(self) -> int:
        """Replay the log; cut a torn tail. Returns the number of exemplars accepted."""
        if not self.path.exists():
            return 0
        data = self.path.read_bytes()
        accepted, good_end, pos = 0, 0, 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            end = len(data) if nl < 0 else nl + 1
            line = data[pos:end]
            try:
                record = Exemplar.from_dict(json.loads(line))
            except (ValueError, TypeError, AttributeError):
                record = None
            if record is None or nl < 0:
                # A line without its newline was being written when the process died, even if
                # it happens to parse; a bad line in the middle is skipped and kept for forensics.
                self._counts["skipped_lines"] += 1
                log.warning("%s: skipping unreadable line at byte %d", self.path, pos)
            else:
                accepted += self._accept(record)
                good_end = end
            if nl < 0:
                break
            pos = end
        if good_end < len(data) and data.rfind(b"\n", good_end) < 0:
            with open(self.path, "r+b") as f:  # drop the torn tail so appends start clean
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        return accepted

    def _append(self, records: list[Exemplar]) -> None:
        if not records:
            return
        self._file.write("".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in records))
        self._file.flush()
        os.fsync(self._file.fileno())

    def compact(self) -> None:
        """Rewrite the file to hold exactly the exemplars in memory (drops evicted and bad lines)."""
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for pool in self._pools.values():
                for e in pool:
                    f.write(json.dumps(e.to_dict(), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._file.close()
        os.replace(tmp, self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)
        self._file = open(self.path, "a", encoding="utf-8")

    def close(self) -> None:
        """Close the file; further `add` calls raise ValueError."""
        self._file.close()

    # -- the pools ---------------------------------------------------------------------

    def _accept(self, e: Exemplar) -> int:
        """Add `e` to memory if eligible and new; returns 1 if kept, else 0."""
        if not is_sampleable(e):
            self._counts["rejected"] += 1
            return 0
        h = program_hash(e.code)
        hashes = self._hashes.setdefault(e.task_id, set())
        if h in hashes:
            self._counts["duplicates"] += 1
            return 0
        pool = self._pools.setdefault(e.task_id, [])
        pool.append(e)
        hashes.add(h)
        if len(pool) > self.max_per_task:
            best = max(pool, key=lambda x: x.speedup)
            victim = next(x for x in pool if x is not best)  # oldest that is not the best
            pool.remove(victim)
            hashes.discard(program_hash(victim.code))
            self._counts["evicted"] += 1
        return 1

    def add(self, exemplars: list[Exemplar]) -> int:
        """Store new correct solutions and persist them before returning.

        Exemplars that are not status "ok" with a finite positive speedup are rejected; a code
        already held for its task up to renaming and no-op edits (see `program_hash`) is a duplicate. Returns how many were
        stored. Raises OSError if the write fails (memory then holds them but the file may not).
        """
        kept = [e for e in exemplars if self._accept(e)]
        self._append(kept)
        return len(kept)

    def exemplars(self, task_id: str) -> list[Exemplar]:
        """The task's pool, oldest first (a copy)."""
        return list(self._pools.get(task_id, ()))

    def tasks(self) -> list[str]:
        return sorted(self._pools)

    def __len__(self) -> int:
        return sum(len(p) for p in self._pools.values())

    def sample(self, task_id: str, k: int | None = None) -> list[Exemplar]:
        """CUDA-L1 exemplars for `task_id` (`cudal1.rl.exemplars.sample_exemplars`): up to k
        (default `self.k`) distinct solutions, slowest first; [] for an unknown task."""
        pool = self._pools.get(task_id)
        if not pool:
            return []
        return sample_exemplars(
            pool, self.k if k is None else k, self.tau, self._rng, n_buckets=self.n_buckets, scale=self.scale
        )

    def best(self, task_id: str) -> Exemplar | None:
        """The task's fastest stored solution (the earliest one on ties), or None."""
        pool = self._pools.get(task_id)
        return max(pool, key=lambda e: e.speedup) if pool else None

    def stats(self) -> dict[str, Any]:
        """{"tasks": {task_id: {"count", "best_speedup", "mean_speedup"}}, "total", "duplicates",
        "rejected", "evicted", "skipped_lines"}; speedups in ×. Counts are since this process
        started (replayed lines included)."""
        tasks = {
            t: {
                "count": len(p),
                "best_speedup": max(e.speedup for e in p),
                "mean_speedup": math.fsum(e.speedup for e in p) / len(p),
            }
            for t, p in sorted(self._pools.items())
        }
        return {"tasks": tasks, "total": len(self), **self._counts}

    def build_prompt(self, task: Any, k: int | None = None) -> list[dict[str, str]]:
        """The contrastive prompt for `task` (a `cudal1.tasks.Task`, or anything with `task_id`
        and `source`) with freshly sampled exemplars, as chat messages
        [{"role": ..., "content": ...}]. Without stored solutions for the task this is
        `plain_prompt(task.source)`."""
        return self.draw(task, k)[0]

    def draw(self, task: Any, k: int | None = None) -> tuple[list[dict[str, str]], list[Exemplar]]:
        """(`build_prompt`'s messages, the exemplars they show, in the prompt's order): the reward
        gives a response that copies one of them no gain, and a refinement episode stops early
        once a turn beats the best of them (`Exemplar.speedup`, ×)."""
        shown = self.sample(task.task_id, k)
        messages = contrastive_prompt(task.source, shown) if shown else plain_prompt(task.source)
        return messages, shown
