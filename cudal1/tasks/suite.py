"""Which suites exist and how a task is named: the builtin suite, its seed solutions, `find_task`.

The builtin suite is packaged data in KernelBench format: `cudal1/tasks/builtin/level{1,2,3}/`
holds the problems, `builtin/solutions/` the faster PyTorch/CPU seed solutions and
`builtin/solutions_cuda/` the inline-CUDA ones, each as `level<L>/<id>_<Name>.py`.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .kernelbench import FILE_RE, LEVEL_RE, SuiteReport, file_order, load_suite
from .task import Task

log = logging.getLogger(__name__)

BUILTIN = "builtin"
SOLUTION_DIRS = {"cpu": "solutions", "cuda": "solutions_cuda"}


def builtin_root() -> Path:
    """The packaged directory holding the builtin suite's `level1/`, `level2/`, `level3/`."""
    return Path(__file__).resolve().parent / "builtin"


def load_builtin(levels: Iterable[int] | None = None, profile: str | None = "cpu", **kwargs: Any) -> SuiteReport:
    """Load the builtin suite (see `load_suite` for the arguments; tasks get suite "builtin").

    `profile` defaults to "cpu": every builtin task must define it.
    """
    return load_suite(builtin_root(), levels=levels, profile=profile, name=BUILTIN, **kwargs)


def seeds_for(tasks: Iterable[Task], kind: str = "cpu") -> dict[str, str]:
    """The builtin seed solutions that belong to `tasks`: {task_id: solution source}.

    A seed belongs to a task only when the task *is* the builtin task it was written for (same
    source, by hash), never by `level/id` alone: KernelBench's level1/1 is another problem than
    the builtin level1/1. Raises ValueError as `seed_solutions` does.
    """
    seeds = seed_solutions(kind)
    if not seeds:
        return {}
    builtin = {t.task_id: t.source_hash for t in load_builtin(profile=None).tasks}
    return {
        t.task_id: seeds[t.task_id].read_text()
        for t in tasks
        if t.task_id in seeds and builtin.get(t.task_id) == t.source_hash
    }


def seed_solutions(kind: str = "cpu") -> dict[str, Path]:
    """The builtin seed solutions: {"level1/12": path}. kind: "cpu" (PyTorch-level solutions
    checked on the CPU) or "cuda" (inline-CUDA solutions).

    Raises ValueError for an unknown kind, a file not named `<id>_<Name>.py`, or two solutions
    for the same task.
    """
    if kind not in SOLUTION_DIRS:
        raise ValueError(f"unknown solution kind {kind!r}: expected one of {sorted(SOLUTION_DIRS)}")
    root = builtin_root() / SOLUTION_DIRS[kind]
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for level_dir in sorted(p for p in root.iterdir() if p.is_dir() and LEVEL_RE.match(p.name)):
        for path in sorted(level_dir.glob("*.py"), key=file_order):
            if path.name == "__init__.py":
                continue
            m = FILE_RE.match(path.name)
            if not m:
                raise ValueError(f"{path}: expected <id>_<Name>.py")
            task_id = f"{level_dir.name}/{int(m.group(1))}"
            if task_id in found:
                raise ValueError(f"two {kind} seed solutions for {task_id}: {found[task_id].name}, {path.name}")
            found[task_id] = path
    return found


def load_tasks(spec: str | Path = BUILTIN, **kwargs: Any) -> list[Task]:
    """Tasks of a suite: spec "builtin" or a KernelBench checkout path (keyword arguments go to
    `load_suite`). Files that fail to load are logged as warnings and left out; call `load_suite`
    for the full report. Raises FileNotFoundError for a path without level directories."""
    report = load_builtin(**kwargs) if str(spec) == BUILTIN else load_suite(spec, **kwargs)
    for failure in report.failures:
        log.warning("task not loaded: %s: %s", failure.path, failure.reason)
    return report.tasks


def _norm(name: str) -> str:
    return name.strip().strip("_").lower()


def find_task(tasks: Sequence[Task], ref: str | Path) -> Task:
    """The task `ref` names.

    `ref` is "level1/12", "level1/12_Name" (the name must then match), a name ("Softmax";
    case-insensitive, ignoring leading/trailing underscores, so "gelu" finds "GELU_"), or the path
    of a loaded task file (an existing file is matched by resolved path; a path that does not
    exist is read as its `level<L>/<id>_...` tail).
    Raises LookupError when nothing or more than one task matches; the message lists close names.
    """
    text = str(ref).strip()
    parts = Path(text).parts
    if len(parts) >= 2 and LEVEL_RE.match(parts[-2]):
        level = int(LEVEL_RE.match(parts[-2]).group(1))
        stem = parts[-1].removesuffix(".py")
        if text.endswith(".py") and Path(text).is_file():
            resolved = str(Path(text).resolve())
            by_path = [t for t in tasks if t.path == resolved]
            if not by_path:
                raise LookupError(f"{text} is not one of the {len(tasks)} loaded tasks' files")
            return by_path[0]
        head, _, name = stem.partition("_")
        if head.isdigit():
            matches = [t for t in tasks if t.level == level and t.problem_id == int(head)]
            if not matches:
                raise LookupError(f"no task level{level}/{int(head)} among {len(tasks)} tasks")
            task = matches[0]
            if name and _norm(name) != _norm(task.name):
                raise LookupError(f"{task.task_id} is {task.name!r}, not {name!r}")
            return task
    matches = [t for t in tasks if _norm(t.name) == _norm(text)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = ", ".join(f"{t.task_id} ({t.name})" for t in matches)
        raise LookupError(f"{text!r} is ambiguous: {listed}; use level<L>/<id>")
    by_name: dict[str, list[Task]] = {}
    for t in tasks:
        by_name.setdefault(_norm(t.name), []).append(t)
    close = difflib.get_close_matches(_norm(text), list(by_name), n=5, cutoff=0.5)
    close += [n for n in by_name if _norm(text) in n and n not in close][: 5 - len(close)]
    hint = ", ".join(f"{t.task_id} ({t.name})" for c in close for t in by_name[c]) or "none"
    raise LookupError(f"no task named {text!r}; close matches: {hint}")
