import statistics, sys, pathlib
sys.path.insert(0, "/work/main/.scratch/judgeredteam")
from test_findings import _series, _charged, HERE
import tasks
which = sys.argv[1]
names = {"sleep": ["honest_matmul_relu.py", "sleeps_before_audited_matmul.py"], "pool": ["honest_matmul_relu.py", "helper_pool_escapes_count_1024.py"]}[which]
runs = _series(tasks.MATMUL_1024, names, reps=3)
for n, rs in runs.items():
    print(n, [round(r.speedup, 3) for r in rs], "charged/round-trip sums", [round(sum(_charged(r)), 1) for r in rs], rs[0].sandbox.get("measures", {}).get("cgroup") if isinstance(rs[0].sandbox, dict) else "")
