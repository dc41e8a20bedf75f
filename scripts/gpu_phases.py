"""Where one evaluation's time goes on a CUDA machine: a few builtin CUDA seeds, built in
parallel, then each evaluated twice; prints the judge's phase and per-call part times (s).

    python scripts/gpu_phases.py [TASK_ID ...]
"""

import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudal1.bench.evaluator import evaluate, prebuild  # noqa: E402
from cudal1.bench.settings import EvalSettings  # noqa: E402
from cudal1.tasks import find_task, load_tasks, seed_solutions  # noqa: E402

ids = sys.argv[1:] or ["level1/1", "level1/7", "level1/18", "level2/5", "level2/2"]
settings = EvalSettings.for_backend("cuda", cache_dir=tempfile.mkdtemp(prefix="cudal1-phases-"))
tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
jobs = [(find_task(tasks, t), seeds[t].read_text()) for t in ids]
with ThreadPoolExecutor(len(jobs)) as pool:
    print(
        "builds:",
        [r if r is None else r.status.value for r in pool.map(lambda j: prebuild(*j, "cuda", settings), jobs)],
    )
for task, source in jobs:
    for _ in range(2):
        r = evaluate(task, source, "cuda", settings=settings)
        print(
            json.dumps(
                {
                    "task": task.task_id,
                    "status": r.status.value,
                    "speedup": r.speedup,
                    "remeasured": r.remeasured,
                    "calls": r.candidate.calls if r.candidate else None,
                    "eval_s": r.eval_seconds,
                    "phases_s": r.phases_s,
                }
            )
        )
