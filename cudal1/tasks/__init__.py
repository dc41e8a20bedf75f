"""Tasks: KernelBench-format reference programs, the builtin suite, and how to find one.

Nothing here runs task code, and importing this package does not import torch. Running each
task's reference (the probe and the degenerate-task check) is the benchmark's part:
`cudal1.bench.probe`, `cudal1.bench.degenerate`.
"""

from .kernelbench import LoadFailure, SuiteReport, load_suite, load_task_file
from .suite import builtin_root, find_task, load_builtin, load_tasks, seed_solutions
from .task import STANDALONE, Task, standalone_name

__all__ = [
    "STANDALONE",
    "load_task_file",
    "LoadFailure",
    "SuiteReport",
    "Task",
    "builtin_root",
    "find_task",
    "load_builtin",
    "load_suite",
    "load_tasks",
    "seed_solutions",
    "standalone_name",
]
