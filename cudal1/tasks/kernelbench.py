"""Load a directory of KernelBench-format problems: `load_suite` -> `SuiteReport`.

Nothing is executed: each file is parsed with `ast` and checked for the three
module-level definitions the format requires (`Model`, `get_inputs`, `get_init_inputs`) and for a
well-formed `SIZE_PROFILES`. Refused at once, with the reason and without a worker: a file that
needs the network (pretrained weights through `from_pretrained`, as in KernelBench's level 4, a
torch.hub or a download call: nothing here reaches a model hub), and one that imports at module
level a module not installed here (level 3's Mamba2 tasks import einops). Running every parsed
task (inputs, constructor, forward on several seeds, on a device) in its own sandboxed worker,
which catches files that fail at import, hang, or are degenerate, is the benchmark's probe
(`cudal1.bench.probe.probe_suite`), which updates the report this module returns.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from .task import STANDALONE, Task, standalone_name

FILE_RE = re.compile(r"^(\d+)_(\w.*)\.py$")
"""`<id>_<Name>.py`; the id is a positive integer."""
LEVEL_RE = re.compile(r"^level(\d+)$")
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
HUB_RE = re.compile(r"\bfrom_pretrained\s*\(")
"""Loading pretrained weights needs a model hub, which cudal1 never reaches."""
NETWORK_RE = re.compile(
    r"\btorch\.hub\.load\w*\s*\(|\bhf_hub_download\s*\(|\bsnapshot_download\s*\(|\bload_state_dict_from_url\s*\("
    r"|\burlopen\s*\(|\burlretrieve\s*\(|\brequests\.(get|post)\s*\(|\bpretrained\s*=\s*True\b|\bweights\s*=\s*['\"]"
)
"""Other calls that download (model hubs, URLs, torchvision's pretrained weights)."""


class LoadFailure(NamedTuple):
    """A file that did not load: its path and one line saying why."""

    path: str
    reason: str


@dataclasses.dataclass
class SuiteReport:
    """What `load_suite` found.

    `tasks` are sorted by (level, id). `failures` lists files that did not parse or (once probed,
    `cudal1.bench.probe.probe_suite`) did not import or run. `levels` maps each level scanned to its directory. `probe_notes` maps a
    task id to facts the probe found that are not failures (e.g. a task whose output equals its
    input on its own distribution and only differs on shifted inputs). `probe_seconds` is the
    wall time of probing, 0 without it.
    """

    root: str
    tasks: list[Task] = dataclasses.field(default_factory=list)
    failures: list[LoadFailure] = dataclasses.field(default_factory=list)
    levels: dict[int, str] = dataclasses.field(default_factory=dict)
    probed: bool = False
    probe_notes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    probe_seconds: float = 0.0
    probe_times: dict[str, float] = dataclasses.field(default_factory=dict)
    """Wall seconds of each file's probe worker, by "level<L>/<file stem>"."""
    probe_memory: dict[str, dict[str, float | None]] = dataclasses.field(default_factory=dict)
    """Per probed file, as `probe_times`: {"peak_mib": on a GPU the most device memory torch held
    (MiB), on the CPU the worker's peak resident memory, "estimate_mib": the worker's estimate of
    the device memory it needs (GPU only)}; None where unknown."""

    @property
    def degenerate(self) -> list[Task]:
        """Loaded tasks the probe flagged as degenerate (empty without probing)."""
        return [t for t in self.tasks if t.degenerate]

    def summary(self, max_listed: int = 30) -> str:
        """Human-readable lines: per level "levelL: N loaded[, D degenerate][, F failed]", then
        the failures and degenerate tasks with their reasons (at most `max_listed` of each)."""
        lines = []
        for level, directory in sorted(self.levels.items()):
            loaded = sum(t.level == level for t in self.tasks)
            failed = sum(Path(f.path).parent == Path(directory) for f in self.failures)
            parts = [f"level{level}: {loaded} loaded"]
            if self.probed:
                parts.append(f"{sum(t.level == level and bool(t.degenerate) for t in self.tasks)} degenerate")
            if failed:
                parts.append(f"{failed} failed")
            lines.append(", ".join(parts))
        if self.probed:
            lines.append(f"probed in {self.probe_seconds:.0f} s")
        for title, rows in (
            ("failed", [(short_path(f.path), f.reason) for f in self.failures]),
            ("degenerate", [(t.task_id + " " + t.name, t.degenerate or "") for t in self.degenerate]),
        ):
            if rows:
                lines.append(f"{title}:")
                lines += [f"  {where}: {why}" for where, why in rows[:max_listed]]
                if len(rows) > max_listed:
                    lines.append(f"  ... and {len(rows) - max_listed} more")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (tasks without their source, to keep it small; `Task.to_dict` has it)."""
        tasks = []
        for t in self.tasks:
            d = t.to_dict()
            d.pop("source")
            d["source_hash"] = t.source_hash
            tasks.append(d)
        return {
            "root": self.root,
            "levels": {str(k): v for k, v in sorted(self.levels.items())},
            "tasks": tasks,
            "failures": [f._asdict() for f in self.failures],
            "probed": self.probed,
            "probe_notes": self.probe_notes,
            "probe_seconds": self.probe_seconds,
            "probe_times": self.probe_times,
            "probe_memory": self.probe_memory,
        }


def short_path(path: str) -> str:
    """`<level dir>/<file name>` of a task file's path, as reports name it."""
    p = Path(path)
    return f"{p.parent.name}/{p.name}"


def find_levels_dir(root: str | Path) -> Path:
    """The directory that holds `level1/`, `level2/`, ...: `root` itself or `root/KernelBench`.

    Raises FileNotFoundError when neither holds a `level<N>` directory.
    """
    root = Path(root).expanduser()
    for candidate in (root, root / "KernelBench"):
        if candidate.is_dir() and any(LEVEL_RE.match(p.name) and p.is_dir() for p in candidate.iterdir()):
            return candidate.resolve()
    raise FileNotFoundError(f"{root}: no level<N>/ directories here or under {root / 'KernelBench'}")


def load_suite(
    root: str | Path,
    levels: Iterable[int] | None = None,
    ids: Iterable[int] | None = None,
    profile: str | None = None,
    *,
    name: str | None = None,
) -> SuiteReport:
    """Load the KernelBench-format tasks under `root`.

    `root` is a KernelBench checkout (the repo root, holding `KernelBench/level1`...) or the
    directory holding `level1/`... directly. `levels` (e.g. [1, 2]) and `ids` (problem ids,
    applied to every chosen level) restrict what is read; by default every `level<N>` directory.
    `profile` is the size profile ("cpu", "cuda") a file's SIZE_PROFILES must define (files
    without SIZE_PROFILES run at their own sizes). `name` is the suite name stored in each Task
    (default: the levels directory's path). To run each task's reference as well, pass the report
    to `cudal1.bench.probe.probe_suite`.

    Raises FileNotFoundError if `root` has no level directories or a requested level is missing.
    """
    levels_dir = find_levels_dir(root)
    present = {int(m.group(1)): p for p in levels_dir.iterdir() if p.is_dir() and (m := LEVEL_RE.match(p.name))}
    wanted = sorted(present) if levels is None else sorted({int(x) for x in levels})
    missing = [lv for lv in wanted if lv not in present]
    if missing:
        raise FileNotFoundError(f"{levels_dir}: no level{missing[0]}/ (has {sorted(present)})")
    id_filter = None if ids is None else {int(i) for i in ids}
    report = SuiteReport(root=str(levels_dir), levels={lv: str(present[lv]) for lv in wanted})
    suite = name or str(levels_dir)
    for level in wanted:
        seen: dict[int, str] = {}
        for path in sorted(present[level].iterdir(), key=file_order):
            if not path.is_file() or path.suffix != ".py" or path.name == "__init__.py":
                continue
            m = FILE_RE.match(path.name)
            if not m or int(m.group(1)) < 1:
                if id_filter is None:
                    report.failures.append(LoadFailure(str(path), "bad file name: expected <id>_<Name>.py, id >= 1"))
                continue
            problem_id = int(m.group(1))
            if id_filter is not None and problem_id not in id_filter:
                continue
            if problem_id in seen:
                report.failures.append(LoadFailure(str(path), f"duplicate id {problem_id} (also {seen[problem_id]})"))
                continue
            seen[problem_id] = path.name
            task_or_reason = parse_task_file(path, level, problem_id, m.group(2), suite, profile)
            if isinstance(task_or_reason, str):
                report.failures.append(LoadFailure(str(path), task_or_reason))
            else:
                report.tasks.append(task_or_reason)
    report.tasks.sort(key=lambda t: (t.level, t.problem_id))
    return report


def file_order(path: Path) -> tuple[int, str]:
    """Sort key of a level directory's files: by problem id, files without one last."""
    m = FILE_RE.match(path.name)
    return (int(m.group(1)) if m else 1 << 30, path.name)


def parse_task_file(
    path: Path, level: int, problem_id: int, name: str, suite: str, profile: str | None = None
) -> Task | str:
    """Parse one problem file without executing it: the Task, or the reason it is unusable."""
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return f"unreadable: {type(e).__name__}: {e}"
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        return f"syntax error: {e.msg} (line {e.lineno})"
    if HUB_RE.search(source):
        return "loads pretrained weights (from_pretrained): needs a model hub, and cudal1 runs offline"
    if m := NETWORK_RE.search(source):
        return f"downloads ({m.group(0).strip()}...): needs the network, and cudal1 runs offline"
    missing = _missing_modules(tree.body)
    if missing:
        names = ", ".join(missing)
        return f"imports {names}, not installed here (pip install {' '.join(missing)} to run it)"
    bound = _module_level_names(tree.body)
    absent = [n for n in REQUIRED if n not in bound]
    if absent:
        return "missing module-level " + ", ".join(absent)
    profiles = _size_profiles(tree.body, bound)
    if isinstance(profiles, str):
        return profiles
    if profile and profiles and profile not in profiles:
        return f"SIZE_PROFILES has no {profile!r} profile (has {sorted(profiles)})"
    return Task(
        level=level,
        problem_id=problem_id,
        name=name,
        source=source,
        suite=suite,
        path=str(path.resolve()),
        size_profiles=tuple(profiles),
    )


def load_task_file(path: str | Path, profile: str | None = None) -> Task:
    """One standalone KernelBench-format file as a Task, parsed without executing it.

    A file named like a suite's (`level<L>/<id>_<Name>.py`, L and id >= 1) keeps that level and id;
    any other file is a standalone program named after its stem (`standalone_name`: "my-relu.py"
    is task "file/my_relu"), in suite "file" (`Task.task_id`). Raises FileNotFoundError when the
    file does not exist and ValueError naming what is wrong with it (syntax error, no `Model`,
    `get_inputs` or `get_init_inputs` at module level, a size profile it lacks, ...).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no task file {path}")
    m, level_m = FILE_RE.match(path.name), LEVEL_RE.match(path.parent.name)
    if m and level_m and int(level_m.group(1)) >= 1 and int(m.group(1)) >= 1:
        level, problem_id, name = int(level_m.group(1)), int(m.group(1)), m.group(2)
    else:
        level, problem_id, name = 0, 0, standalone_name(path.stem)
    task = parse_task_file(path, level, problem_id, name, suite=STANDALONE, profile=profile)
    if isinstance(task, str):
        raise ValueError(f"task file {path}: {task}")
    return task


def _module_level_names(body: list[ast.stmt]) -> set[str]:
    """Names bound by module-level statements, looking into if/try/with blocks but not into
    functions or classes."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in ("body", "orelse", "finalbody"):
                names |= _module_level_names(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                names |= _module_level_names(handler.body)
    return names


def _missing_modules(body: list[ast.stmt]) -> list[str]:
    """Top-level packages that statements at the top of the module (not in try/if blocks: those
    may be optional) import and that cannot be found here. Looks them up without importing."""
    import importlib.util
    import sys

    names: list[str] = []
    for node in body:
        if isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module.split(".")[0])
    missing = []
    for name in dict.fromkeys(names):
        if name in sys.modules or name in sys.builtin_module_names:
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _size_profiles(body: list[ast.stmt], bound: set[str]) -> dict[str, list[str]] | str:
    """SIZE_PROFILES as {profile: [constant names]} when it is a dict with string keys, {} when
    absent or not a literal dict, or the reason it is malformed (a profile that sets a constant
    the module does not define would raise KeyError at load time)."""
    value = None
    for node in body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "SIZE_PROFILES" for t in targets):
            value = node.value
    if not isinstance(value, ast.Dict):
        return {}
    profiles: dict[str, list[str]] = {}
    for key, inner in zip(value.keys, value.values):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return {}
        constants: list[str] = []
        if isinstance(inner, ast.Dict):
            for ck in inner.keys:
                if isinstance(ck, ast.Constant) and isinstance(ck.value, str):
                    if ck.value not in bound:
                        return f"SIZE_PROFILES[{key.value!r}] sets {ck.value!r}, which the module does not define"
                    constants.append(ck.value)
        profiles[key.value] = constants
    return profiles
