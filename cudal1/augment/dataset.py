"""The stage-1 augmented dataset: teachers' answers, validated on the benchmark, in a versioned directory.

`jobs/augment.py` writes it (`DatasetWriter`); stage 1 of `jobs/train.py` (`data.augmented=DIR`)
and the exemplar buffer read it (`load_dataset`, `augmented_variants`). A dataset directory holds:

    records.jsonl   one `AugmentRecord` per answered attempt, correct or not (status, speedup ×,
                    labels, the answer's code and sections), appended with flush + fsync as each
                    is validated: a record the job reported is on disk. A line torn by a crash is
                    cut off when the directory is opened again.
    manifest.json   {"format": "cudal1-augmented", "format_version", "version" (the user's label),
                    "created", "updated", "endpoints" (name, base URL, model; never a key),
                    "tasks" (task_id, name, suite, source_hash), "k", "attempts_per_task",
                    "counts" (recomputed from the records), "records_sha256", "runs" (one summary
                    per job run)}, rewritten atomically (temp file, fsync, rename).

The records are the truth; the manifest describes them. An attempt is identified by (task_id,
the task source's hash, attempt number): a re-run skips the attempts already recorded, and a
record applies to a task only when both its id and its source hash match (a builtin record never
serves the KernelBench task of the same id). `kept` marks the up-to-k distinct correct variants
per task (status ok, not on a degenerate task, code distinct by `cudal1.rl.buffer.code_hash`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cudal1.bench.result import Status
from cudal1.records import Exemplar

log = logging.getLogger(__name__)

FORMAT = "cudal1-augmented"
FORMAT_VERSION = 1
RECORDS = "records.jsonl"
MANIFEST = "manifest.json"


@dataclasses.dataclass
class AugmentRecord:
    """One answered attempt of one endpoint at one task, with its validation.

    Attributes:
        task_id: "level1/13".
        source_hash: `Task.source_hash` of the task it answered.
        attempt: 0-based attempt number within the task's budget.
        endpoint: the endpoint's name (config `endpoints[i].name`); model: the model it serves.
        status: the evaluator's status ("ok", "incorrect", "compile_error", ...), or
            "parse_error" when the answer held no usable code.
        speedup: reference ms / candidate ms (×) for a correct answer, else None.
        labels: the evaluator's labels (e.g. "pytorch_only"), or ["parse_error:<label>"].
        hack_kind: the evaluator's hack kind for status "hack", else None.
        message: the evaluator's (or the parser's) one-line explanation.
        code, code_hash: the parsed candidate and its `code_hash`; None without code.
        analysis, design: the answer's prose sections ("" when absent).
        response: the answer's full text; finish_reason: "stop" or "length".
        kept: one of the task's up-to-k distinct correct variants.
        duplicate_of: the attempt whose identical code was evaluated (this one was not), or None.
        retries: requests repeated before this answer came (429, 5xx, timeouts, malformed JSON).
        latency_s: seconds of the successful request; usage: the endpoint's token counts.
        result: the full `EvalResult.to_dict()` without its log, or None when not evaluated.
        time: when it was recorded (UTC, ISO 8601).
    """

    task_id: str
    source_hash: str
    attempt: int
    endpoint: str
    model: str
    status: str
    speedup: float | None = None
    labels: list[str] = dataclasses.field(default_factory=list)
    hack_kind: str | None = None
    message: str = ""
    code: str | None = None
    code_hash: str | None = None
    analysis: str = ""
    design: str = ""
    response: str = ""
    finish_reason: str = "stop"
    kept: bool = False
    duplicate_of: int | None = None
    retries: int = 0
    latency_s: float = 0.0
    usage: dict[str, Any] = dataclasses.field(default_factory=dict)
    result: dict[str, Any] | None = None
    time: str = ""

    @property
    def key(self) -> tuple[str, str, int]:
        """(task_id, source_hash, attempt): what a re-run skips."""
        return self.task_id, self.source_hash, self.attempt

    @property
    def correct(self) -> bool:
        return (
            self.status == Status.OK and self.speedup is not None and math.isfinite(self.speedup) and self.speedup > 0
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AugmentRecord":
        """Inverse of `to_dict` (unknown keys ignored). Raises TypeError/KeyError without the required keys."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_exemplar(self) -> Exemplar:
        """The exemplar-buffer record of a correct answer (origin "augmented:<endpoint>/<attempt>")."""
        return Exemplar(
            self.task_id,
            self.code or "",
            float(self.speedup or 0.0),
            status=self.status,
            analysis=self.analysis,
            origin=f"augmented:{self.endpoint}/{self.attempt}",
        )


def _read_records(path: Path, repair: bool) -> tuple[list[AugmentRecord], int]:
    """The records of `path` and the number of unreadable lines skipped. A last line without its
    newline was being written when a process died: with `repair` it is cut off the file."""
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    records, skipped, pos = [], 0, 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        try:
            record = AugmentRecord.from_dict(json.loads(data[pos:end])) if nl >= 0 else None
        except (ValueError, TypeError, KeyError):
            record = None
        if record is None:
            skipped += 1
            log.warning("%s: skipping an unreadable line at byte %d", path, pos)
        else:
            records.append(record)
        pos = end
    if repair and data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:  # drop the torn tail so appends start on a clean line
            f.truncate(data.rfind(b"\n") + 1)
            f.flush()
            os.fsync(f.fileno())
    return records, skipped


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def dataset_counts(records: Sequence[AugmentRecord]) -> dict[str, Any]:
    """{"records", "correct", "kept", "by_status", "by_endpoint", "tasks": {task_id: {"attempts",
    "correct", "kept", "best_speedup"}}}; speedups ×."""
    tasks: dict[str, dict[str, Any]] = {}
    for r in records:
        t = tasks.setdefault(r.task_id, {"attempts": 0, "correct": 0, "kept": 0, "best_speedup": None})
        t["attempts"] += 1
        if r.correct:
            t["correct"] += 1
            t["best_speedup"] = max(t["best_speedup"] or 0.0, r.speedup)
        t["kept"] += int(r.kept)
    return {
        "records": len(records),
        "correct": sum(r.correct for r in records),
        "kept": sum(r.kept for r in records),
        "by_status": dict(Counter(r.status for r in records)),
        "by_endpoint": dict(Counter(r.endpoint for r in records)),
        "tasks": dict(sorted(tasks.items())),
    }


class DatasetWriter:
    """The dataset directory, open for appending (one writer at a time; not thread-safe).

    Args:
        directory: created if missing; an existing dataset there is continued.
        version: the dataset's version label; must equal the existing manifest's.

    Raises:
        ValueError: the directory holds another format or another version. OSError: it cannot
            be created or written.
    """

    def __init__(self, directory: str | os.PathLike[str], version: str) -> None:
        self.directory = Path(directory)
        self.version = str(version)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.manifest: dict[str, Any] = {}
        manifest = self.directory / MANIFEST
        if manifest.exists():
            self.manifest = json.loads(manifest.read_text(encoding="utf-8"))
            if self.manifest.get("format") != FORMAT:
                raise ValueError(f"{self.directory} holds no {FORMAT} dataset (format {self.manifest.get('format')!r})")
            if str(self.manifest.get("version")) != self.version:
                raise ValueError(
                    f"{self.directory} holds version {self.manifest.get('version')!r} of the dataset, "
                    f"not {self.version!r}: pass version={self.manifest.get('version')} to continue it, "
                    "or another out_dir"
                )
        self.path = self.directory / RECORDS
        self.records, self.skipped_lines = _read_records(self.path, repair=True)
        self._file = open(self.path, "a", encoding="utf-8")

    def done(self) -> set[tuple[str, str, int]]:
        """The (task_id, source_hash, attempt) of every recorded attempt."""
        return {r.key for r in self.records}

    def append(self, records: Iterable[AugmentRecord]) -> None:
        """Append `records` and fsync before returning. Raises OSError when the write fails."""
        records = list(records)
        if not records:
            return
        self._file.write("".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in records))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.records.extend(records)

    def write_manifest(
        self,
        endpoints: Sequence[dict[str, Any]],
        tasks: Sequence[dict[str, Any]],
        run: dict[str, Any] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Rewrite manifest.json from the records: the endpoints and tasks of this and earlier
        runs (merged by name / task_id + source_hash), `fields` (k, attempts_per_task, ...),
        counts and the records' SHA-256; `run` (this run's summary) replaces the last entry of
        "runs" when it has the same "started" time, else is appended. Returns the manifest."""
        m = dict(self.manifest)
        m.setdefault("created", utc_now())
        known = {e["name"]: e for e in m.get("endpoints", [])}
        known.update({e["name"]: dict(e) for e in endpoints})
        seen = {(t["task_id"], t["source_hash"]): t for t in m.get("tasks", [])}
        seen.update({(t["task_id"], t["source_hash"]): dict(t) for t in tasks})
        runs = list(m.get("runs", []))
        if run is not None:
            if runs and runs[-1].get("started") == run.get("started"):
                runs[-1] = run
            else:
                runs.append(run)
        self._file.flush()
        m.update(fields)
        m.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "version": self.version,
                "updated": utc_now(),
                "endpoints": list(known.values()),
                "tasks": list(seen.values()),
                "runs": runs,
                "counts": dataset_counts(self.records),
                "records_sha256": hashlib.sha256(self.path.read_bytes()).hexdigest(),
            }
        )
        _write_json_atomic(self.directory / MANIFEST, m)
        self.manifest = m
        return m

    def close(self) -> None:
        self._file.close()


@dataclasses.dataclass
class AugmentedDataset:
    """A dataset as read back: its manifest, its records, and the lines that could not be read."""

    directory: Path
    manifest: dict[str, Any]
    records: list[AugmentRecord]
    skipped_lines: int = 0

    @property
    def version(self) -> str:
        return str(self.manifest.get("version"))

    def kept(self) -> list[AugmentRecord]:
        """The kept correct variants, in record order."""
        return [r for r in self.records if r.kept and r.correct and r.code]


def load_dataset(directory: str | os.PathLike[str]) -> AugmentedDataset:
    """Read a dataset directory (without changing it). Raises FileNotFoundError without a
    manifest, ValueError for another format or a newer format version."""
    directory = Path(directory).expanduser()
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{directory} is not an augmented dataset (no {MANIFEST}); jobs/augment.py writes one")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{directory}: format {manifest.get('format')!r} is not {FORMAT!r}")
    if int(manifest.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(
            f"{directory}: format version {manifest['format_version']} is newer than this cudal1 reads "
            f"({FORMAT_VERSION})"
        )
    records, skipped = _read_records(directory / RECORDS, repair=False)
    return AugmentedDataset(directory, manifest, records, skipped)


def augmented_variants(dataset: AugmentedDataset, tasks: Sequence[Any]) -> dict[str, list[Exemplar]]:
    """The dataset's kept correct variants that belong to `tasks` (objects with `task_id` and
    `source_hash`: matched by both), as Exemplars with their recorded speedups (×) and analyses,
    by task id. Tasks without any are absent."""
    wanted = {(t.task_id, t.source_hash) for t in tasks}
    out: dict[str, list[Exemplar]] = {}
    for r in dataset.kept():
        if (r.task_id, r.source_hash) in wanted:
            out.setdefault(r.task_id, []).append(r.to_exemplar())
    return out
