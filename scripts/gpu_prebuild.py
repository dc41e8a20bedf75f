"""Build the inline extensions of the GPU guard tests (and of the builtin CUDA seeds named) in
parallel, into the evaluator's cache ($CUDAL1_CACHE, else ~/.cache/cudal1).

Run on a GPU machine before the tests so that the tests find every build in the cache:
    python scripts/gpu_prebuild.py [level1/1 level2/5 ...]
"""

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudal1.bench.evaluator import prebuild  # noqa: E402
from cudal1.bench.settings import EvalSettings  # noqa: E402
from tests.bench import test_gpu_guards as g  # noqa: E402

from cudal1.tasks import find_task, load_tasks, seed_solutions  # noqa: E402

sources = [(g.SCALE_TASK, s) for s in (g.CPP_SIDE_STREAM, g.PARTIAL_WRITE, g.ILLEGAL_ADDRESS)]
if sys.argv[1:]:
    tasks, seeds = load_tasks("builtin"), seed_solutions("cuda")
    sources += [(find_task(tasks, tid), seeds[tid].read_text()) for tid in sys.argv[1:]]
t0 = time.time()
with ThreadPoolExecutor(16) as pool:
    results = list(pool.map(lambda ts: prebuild(ts[0], ts[1], "cuda", EvalSettings.for_backend("cuda")), sources))
for r in results:
    print("prebuild:", "ok" if r is None else f"{r.status.value}: {r.message}\n{r.log[-2000:]}")
print(f"prebuilt {len(sources)} in {time.time() - t0:.1f} s")
