"""The `Task` record: one KernelBench-format reference program, and how to load it.

A task file defines `class Model(torch.nn.Module)` (the reference), module-level size constants,
`get_inputs()` and `get_init_inputs()`. Builtin tasks may add `SIZE_PROFILES = {"cpu": {...},
"cuda": {...}}`: each maps module-level constant names to values that replace the file's own
before `get_inputs()` / `get_init_inputs()` are called. A file without `SIZE_PROFILES` runs at its
own sizes under every profile.

Loading a task's module executes its code, so `Task.load_module` is meant for evaluator worker
processes (see `cudal1.bench`); the driver and actors only pass `Task` records around.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import types
from typing import Any

STANDALONE = "file"
"""The suite of a standalone program: a file not named like a suite's (`load_task_file`) or a
program sent to the Serve app. Such a task has level 0 and its id is "file/<name>"."""


def standalone_name(text: str) -> str:
    """A standalone program's name from a file stem or a name it was given: runs of characters
    other than ASCII letters, digits and "_" become "_", leading and trailing "_" are dropped, at
    most 100 characters; "program" when nothing is left. "my-softmax v2" -> "my_softmax_v2"."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")[:100].strip("_") or "program"


@dataclasses.dataclass(frozen=True)
class Task:
    """One reference program.

    `task_id` is "level<L>/<id>" (e.g. "level1/12"), unique within one suite; `name` is the file
    stem after the id (e.g. "Matmul_with_diagonal_matrices_"). `suite` names where it came from
    ("builtin" or the KernelBench checkout path).

    A standalone program (suite `STANDALONE`, level 0) is named by its own name instead:
    "file/<name>", its name made by `standalone_name` (a file stem or the name sent to Serve).
    Why that form: "file" never matches `level<L>`, so the id cannot collide with a suite's, and
    its first part is what the paper table groups by (one "file" row, as "level1" is one); the name
    holds only ASCII letters, digits and "_", so the id is safe in paths (reports use it with "/"
    as "_": "file_<name>.json", solutions `file/<name>.py`), MLflow keys, JSONL and seed lookups
    (`seeds_for` never matches it: no builtin task has it).
    """

    level: int
    problem_id: int
    name: str
    source: str
    suite: str = "builtin"
    path: str = ""
    size_profiles: tuple[str, ...] = ()
    """Profile names defined in the file's SIZE_PROFILES (empty for plain KernelBench files)."""
    degenerate: str | None = None
    """Why the task is degenerate (constant output, output equal to an input, ...), or None."""

    @property
    def task_id(self) -> str:
        if self.standalone:
            return f"{STANDALONE}/{self.name}"
        return f"level{self.level}/{self.problem_id}"

    @property
    def standalone(self) -> bool:
        """A program outside any suite (see the class doc): its id is "file/<name>"."""
        return self.suite == STANDALONE and self.level == 0

    @property
    def source_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["size_profiles"] = list(self.size_profiles)
        d["task_id"] = self.task_id
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Task":
        fields = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in fields}
        d["size_profiles"] = tuple(d.get("size_profiles", ()))
        return cls(**d)

    def load_module(self, profile: str | None = None) -> types.ModuleType:
        """Execute the task source in a fresh module and apply a size profile.

        Raises whatever the source raises on import; raises KeyError if `profile` names a
        profile the file defines none of while the file has SIZE_PROFILES (a typo should
        not silently fall back to another size).
        """
        module = load_source_module(self.source, f"cudal1_task_{self.level}_{self.problem_id}", self.path)
        apply_size_profile(module, profile)
        return module


def reference_as_candidate(source: str) -> str:
    """The task file itself as a candidate: its own code with `ModelNew = Model` appended (helpers
    and constants kept). A correct solution by construction, as fast as the reference: the
    evaluator's control, and the slower variant a stage-1 contrastive example can show. (Renaming
    the class instead breaks KernelBench's `super(Model, self).__init__()`: NameError.)"""
    return source.rstrip() + "\n\n\nModelNew = Model  # the reference itself, as the candidate\n"


def load_source_module(source: str, module_name: str, filename: str = "") -> types.ModuleType:
    """Compile and execute `source` as a new module named `module_name` (not put in sys.modules
    unless the source does so itself). The source is registered in `linecache` under the module's
    file name, so that `inspect.getsource` finds it (Triton's `@triton.jit` needs that, and
    tracebacks show the lines). Raises SyntaxError or whatever the source raises."""
    import linecache
    import sys

    module = types.ModuleType(module_name)
    module.__file__ = filename or f"<{module_name}>"
    linecache.cache[module.__file__] = (len(source), None, source.splitlines(True), module.__file__)
    # Registered while executing so that decorators and pickling that look the module up work.
    sys.modules[module_name] = module
    try:
        code = compile(source, module.__file__, "exec")
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def apply_size_profile(module: types.ModuleType, profile: str | None) -> None:
    """Override module-level constants with `module.SIZE_PROFILES[profile]` (no-op without either).

    Raises KeyError when the module defines SIZE_PROFILES but not `profile`, or when a profile
    names a constant the module does not define.
    """
    profiles = getattr(module, "SIZE_PROFILES", None)
    if not profile or not profiles:
        return
    if profile not in profiles:
        raise KeyError(f"size profile {profile!r} not defined (has {sorted(profiles)})")
    for key, value in profiles[profile].items():
        if not hasattr(module, key):
            raise KeyError(f"size profile {profile!r} sets {key!r}, which the task does not define")
        setattr(module, key, value)
