"""Tasks: KernelBench-format reference programs, the builtin suite, and how to find one.

Importing this package does not import torch; probing and the degenerate check
(`cudal1.tasks.degenerate`) run task code in worker processes.
"""

from .kernelbench import LoadFailure, SuiteReport, load_suite, load_task_file
from .suite import builtin_root, find_task, load_builtin, load_tasks, seed_solutions
from .task import Task

__all__ = [
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
]
