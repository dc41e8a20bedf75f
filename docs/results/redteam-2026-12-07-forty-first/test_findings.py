"""Red-team findings against the CPU backend's CPU-time count (`EvalSettings.count_cpu_time`).
Each test shows the hole (asserts the cheat is paid well above its honest twin while charged
nothing beyond one core); once fixed, invert the final assertion.

Run one at a time (2-core machine):
  cd /work/main && PYTHONPATH=/work/main .venv/bin/python -m pytest -x -q .scratch/judgeredteam/test_findings.py -k NAME
"""
import os
import pathlib
import statistics
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, "/work/main/tests/bench")
sys.path.insert(0, str(HERE))
import evalkit  # noqa: E402
import tasks  # noqa: E402
from cudal1.bench.evaluator import evaluate  # noqa: E402
from cudal1.bench.result import Status  # noqa: E402


def _series(task, names, reps=3, **over):
    s = evalkit.settings("/tmp/jrt-cache", rounds=5, wall_timeout_s=120.0, **evalkit.TIMING_ONLY, **over)
    runs = {n: [] for n in names}
    for _ in range(reps):
        for n in names:
            r = evaluate(task, (HERE / n).read_text(), "cpu", settings=s)
            assert r.status is Status.OK, (n, r.status, r.message, r.log[-800:])
            runs[n].append(r)
    return runs


def _charged(r):
    return [t["parallel_cpu_ms"] for t in r.round_trips["candidate"]]


def test_sleeping_before_audited_lends_the_audit_wait_to_other_cores():
    """Finding 1 (Judge._call: the CPU interval ends after `audited`, wall_ms before it)."""
    runs = _series(tasks.MATMUL_1024, ["honest_matmul_relu.py", "sleeps_before_audited_matmul.py", "threads_toggled_matmul.py"])
    med = {n: statistics.median(r.speedup for r in rs) for n, rs in runs.items()}
    assert all(max(_charged(r)) < 1.0 for r in runs["sleeps_before_audited_matmul.py"])
    assert min(sum(_charged(r)) for r in runs["threads_toggled_matmul.py"]) > 20.0
    assert med["sleeps_before_audited_matmul.py"] > 1.35 * med["honest_matmul_relu.py"], med  # right: <= ~1.0x


def test_a_helper_pool_reaped_by_init_is_never_counted():
    """Finding 2 (_HostKeeper.cpu_interval without cgroup v2: per process, alive at the end)."""
    runs = _series(tasks.MATMUL_1024, ["honest_matmul_relu.py", "helper_pool_escapes_count_1024.py"])
    med = {n: statistics.median(r.speedup for r in rs) for n, rs in runs.items()}
    assert all(max(_charged(r)) < 1.0 for r in runs["helper_pool_escapes_count_1024.py"])
    assert med["helper_pool_escapes_count_1024.py"] > 1.25 * med["honest_matmul_relu.py"], med  # right: <= ~1.0x


def test_blocking_waits_lend_the_hand_over_to_other_cores():
    """Finding 3 (the host's spin in `_await_reveal` is what the count relies on)."""
    runs = _series(tasks.SIN_16M, ["honest_sin.py", "blocks_while_judge_reads.py", "threads_only_sin.py"], reps=5)
    med = {n: statistics.median(r.speedup for r in rs) for n, rs in runs.items()}
    charged = [c for r in runs["blocks_while_judge_reads.py"] for c in _charged(r)]
    assert sum(c == 0.0 for c in charged) >= 0.75 * len(charged), charged
    assert med["blocks_while_judge_reads.py"] > 1.1 * med["honest_sin.py"], med  # right: <= ~1.0x


@pytest.mark.skipif(os.geteuid() != 0 or not pathlib.Path("/sys/fs/cgroup/cpuacct/cgroup.procs").exists(), reason="v1 cpuacct, root")
def test_cgroup_v1_cpuacct_counts_an_orphan_reaped_by_init():
    """The fix for finding 2 exists on v1: cpuacct.usage keeps ended tasks' time (the README says
    'v1 has no count of ended processes')."""
    own = [l.split(":", 2)[2].strip() for l in open("/proc/self/cgroup") if "cpuacct" in l.split(":")[1].split(",")][0]
    d = f"/sys/fs/cgroup/cpuacct{own}/jrt-{os.getpid()}"
    os.mkdir(d)
    try:
        pid = os.fork()
        if pid == 0:
            open(f"{d}/cgroup.procs", "w").write(str(os.getpid()))
            if os.fork() == 0:
                t = time.process_time()
                while time.process_time() - t < 0.2:
                    pass
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.5)
        assert open(f"{d}/cgroup.procs").read().split() == []
        assert int(open(f"{d}/cpuacct.usage").read()) / 1e9 >= 0.19
    finally:
        time.sleep(0.1)
        os.rmdir(d)
