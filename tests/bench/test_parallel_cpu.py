"""Work spread over several cores buys nothing on the CPU backend: both hosts run their forwards
on one thread (`EvalSettings.host_threads`), and a candidate round trip counts as at least the
CPU time every process of the candidate spent in it beyond one core
(`cudal1.bench.timing.parallel_cpu_ms`, `EvalSettings.count_cpu_time`). Without that count, a
candidate that switched to two intra-op threads inside forward (and back before returning, so no
flag check saw it) was paid 1.63x and 1.66x against an honest 1.01x and 1.04x on matmul_512
(2-core machine, docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import evalkit
from cudal1.bench import worker
from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import HackKind, Status
from cudal1.bench.timing import parallel_cpu_ms


def test_only_cpu_time_beyond_the_interval_counts() -> None:
    assert parallel_cpu_ms(30.0, 12.5) == 17.5
    assert parallel_cpu_ms(12.5, 12.5) == 0.0
    assert parallel_cpu_ms(3.0, 12.5) == 0.0  # a host that slept part of the round trip
    assert parallel_cpu_ms(float("nan"), 1.0) == 0.0
    assert parallel_cpu_ms(float("inf"), 1.0) == 0.0


def test_every_thread_but_the_busiest_is_charged() -> None:
    """With per-thread readings, the time of every thread but the busiest is charged, also where
    the total stays within the interval: a host that blocks half the round trip while a second
    thread works beside it (12.5 ms interval; main 6 ms, second thread 6 ms)."""
    assert parallel_cpu_ms(12.0, 12.5, busiest_ms=6.0) == 6.0
    assert parallel_cpu_ms(12.0, 12.5) == 0.0  # the interval alone let that second thread go free
    assert parallel_cpu_ms(12.5, 12.5, busiest_ms=12.4) == pytest.approx(0.1)  # an honest host's spin
    assert parallel_cpu_ms(30.0, 12.5, busiest_ms=14.0) == 17.5  # the interval still bounds the busiest
    assert parallel_cpu_ms(float("nan"), 12.5, busiest_ms=1.0) == 0.0


def test_a_processs_cpu_time_includes_its_ended_threads_and_reaped_children() -> None:
    """The parent's reading of another process: the process's own count of its CPU time (threads
    that have ended included) plus a reaped child's, at the kernel's tick."""
    code = (
        "import os, sys, threading, time\n"
        "def spin(s):\n"
        "    t = time.thread_time()\n"  # this thread's CPU time: a loaded machine only slows it
        "    while time.thread_time() - t < s: pass\n"
        "th = threading.Thread(target=spin, args=(0.2,)); th.start(); th.join()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    spin(0.3); os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "t = os.times()\n"
        "print(time.process_time(), t.children_user + t.children_system, flush=True)\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        own_s, children_s = map(float, proc.stdout.readline().split())
        measured_s = worker._process_cpu_ns(proc.pid) / 1e9
    finally:
        proc.kill()
        proc.wait()
    assert own_s >= 0.2 and children_s >= 0.25
    # The process's clock is read a moment after it printed its own (it sleeps meanwhile).
    assert abs(measured_s - (own_s + children_s)) < 0.03, (measured_s, own_s, children_s)
    assert worker._process_cpu_ns(proc.pid) == 0  # gone


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


def _series(cache_dir) -> list:
    task = evalkit.MATMUL_512
    settings = evalkit.settings(cache_dir, rounds=5, **evalkit.TIMING_ONLY)
    return [
        evaluate(task, evalkit.candidate(name), "cpu", settings=settings)
        for name in ("honest_matmul_relu", "threads_toggled_matmul", "threads_split_matmul")
    ]


def test_threads_beyond_the_hosts_one_are_paid_for(cache_dir) -> None:
    """Two intra-op threads switched on inside forward, and matmul rows split between two Python
    threads, against the honest rewrite: neither gains beyond the honest spread, and the honest
    host's round trips are counted no CPU time beyond one core. (Whether a cheat's round trips
    carry any depends on an idle core: in the suite's two workers the other one keeps a core
    busy, the cheat's threads take turns, and there is neither a gain nor anything to count;
    alone on an idle 2-core machine they carried 0.8-2.9 ms a round trip, docs/benchmarks.md.)"""
    held, series = evalkit.held_to_honest(
        lambda: _series(cache_dir), lambda cheat_x, honest_x: cheat_x < 1.15 * honest_x + 0.05
    )
    table = "\n".join(" ".join(f"{r.status.value}:{r.speedup or 0:.2f}" for r in s) for s in series)
    assert all(r.status is Status.OK for s in series for r in s), table + "\n" + evalkit.describe(series[0][1])
    assert held, "honest, toggled threads, split rows:\n" + table
    honest_extra = [t["parallel_cpu_ms"] for s in series for t in s[0].round_trips["candidate"]]
    assert honest_extra and max(honest_extra) == 0.0, honest_extra
    for cheat in (1, 2):
        assert all("parallel_cpu_ms" in t for s in series for t in s[cheat].round_trips["candidate"])


def test_a_host_polling_for_its_go_is_not_counted_its_spin_before_the_go(cache_dir) -> None:
    """With `EvalSettings.warm_go` the host spins on its socket from its `polling` answer while the
    judge stages the inputs and flushes the cache: that spin is no work of the round trip, and the
    honest host's round trips are counted no CPU time beyond one core (counted from before the
    staging, they carried the spin: an honest copy was paid 0.14x on the 2-core machine). The
    spin would be in every round trip; one round of five charged 0.5-1.2 ms is noise of the
    count (on the 2-core VM, 2026-12-07: one round in each of two suite runs; the test alone
    failed 4 times in 42 runs)."""
    r = evaluate(
        evalkit.MATMUL_512,
        evalkit.candidate("honest_matmul_relu"),
        "cpu",
        settings=evalkit.settings(cache_dir, rounds=5, warm_go=True),
    )
    assert r.status is Status.OK, evalkit.describe(r)
    extra = [t["parallel_cpu_ms"] for t in r.round_trips["candidate"]]
    assert len(extra) >= 5 and sum(e > 0.0 for e in extra) <= 1, extra


def test_the_parents_reading_time_is_not_in_the_counted_interval(cache_dir, monkeypatch) -> None:
    """The interval whose CPU time beyond one core is charged runs from the go to the host's
    audit: the parent's own reading time, here made 50 ms, is not in it. Counted from before the
    parent was asked, that time went to threads on other cores uncharged (a red team's helper
    thread: 4.0 ms beyond one core a round trip counted 0.0 with a parent 5 ms slow). (With
    warm_go the interval starts as the parent begins to read, the host spinning from then on: a
    limit noted in `Judge._go`.)"""
    keep = worker._HostKeeper.cpu_interval  # the parent's side runs in this process

    def slow(self, start):
        if start:
            time.sleep(0.05)
        return keep(self, start)

    monkeypatch.setattr(worker._HostKeeper, "cpu_interval", slow)
    r = evaluate(
        evalkit.MATMUL_512,
        evalkit.candidate("honest_matmul_relu"),
        "cpu",
        settings=evalkit.settings(cache_dir, rounds=3),
    )
    assert r.status is Status.OK, evalkit.describe(r)
    trips = r.round_trips["candidate"]
    assert trips and all(t["cpu_interval_ms"] - t["wall_ms"] < 25.0 for t in trips), trips


def test_cpu_time_is_not_counted_on_request(cache_dir) -> None:
    r = evaluate(
        evalkit.MATMUL_512,
        evalkit.candidate("honest_matmul_relu"),
        "cpu",
        settings=evalkit.settings(cache_dir, count_cpu_time=False),
    )
    assert r.status is Status.OK, evalkit.describe(r)
    assert all("parallel_cpu_ms" not in t for t in r.round_trips["candidate"])


def test_a_process_that_ends_in_the_interval_cannot_cancel_another_ones_time() -> None:
    """Without a control group the interval is summed per process: a helper that burned CPU
    before the interval and ends inside it takes only its own time with it, so the time a second
    helper spends in the interval is counted in full (a plain difference of two sums would have
    subtracted the first helper's whole past from it)."""
    import threading

    # Each helper burns `s` seconds of its own CPU time (not of the clock: on a loaded machine it
    # gets a share of a core), says so, then sleeps.
    spin = "import time\nwhile time.process_time() < {s}: pass\nprint('spun', flush=True)\ntime.sleep(30)\n"

    def helper(s: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", spin.format(s=s)], stdout=subprocess.PIPE, text=True)

    old = helper(0.6)
    assert old.stdout.readline().strip() == "spun"  # the old helper's 0.6 s are spent before the interval
    keeper = object.__new__(worker._HostKeeper)
    keeper._lock, keeper.ended, keeper.group = threading.Lock(), False, None
    keeper._cpu_start, keeper._thread_start, keeper.host = {}, {}, old
    new = None
    pids = [old.pid]
    keeper._candidate_pids = lambda: list(pids)
    try:
        assert keeper.cpu_interval(start=True) == (0, 0)
        old.kill()
        old.wait()
        new = helper(0.3)
        pids[:] = [new.pid]
        assert new.stdout.readline().strip() == "spun"
        spent_s = keeper.cpu_interval(start=False)[0] / 1e9
    finally:
        for p in (old, new):
            if p is not None:
                p.kill()
                p.wait()
    assert 0.25 <= spent_s <= 0.6, spent_s


MATMUL_1024 = evalkit.matmul_relu(953, "matmul_1024", 1024)


def _counts_ended_processes(r) -> bool:
    """The candidate's control group counts the CPU time of processes that have ended (cgroup v2,
    or v1 with its cpuacct hierarchy)."""
    m = r.sandbox.get("measures", {}).get("cgroup", {})
    return bool(m.get("active")) and ("cgroup v2" in m.get("detail", "") or "cpuacct" in m.get("detail", ""))


@pytest.mark.parametrize("name", ["sleeps_before_its_audit", "helper_pool_escapes_the_count"])
def test_idle_time_after_the_outputs_and_helpers_that_end_buy_no_cores(name, cache_dir) -> None:
    """Two ways a red team (2026-12-07) had the CPU-time count miss a second core's work on
    matmul_1024: a host that slept 40 ms before answering `audited`, inside the interval then
    counted (its idle time was lent to a second thread: 1.54-2.00x, charged nothing), and a pool
    of helper processes, each computing half of a round's rows and ending before the end reading
    (1.31-1.49x, charged nothing: the count summed the processes alive when it read). The count
    now ends as the judge holds the outputs, and reads the control group's own count of ended
    processes where there is one (v1's cpuacct included). The right value: neither gains beyond
    the honest spread (the bound of test_threads_beyond_the_hosts_one_are_paid_for). Measured
    after the change, one at a time on the idle VM: 0.99-1.06x and 0.83-0.85x, charged about 100
    ms an evaluation each."""
    settings = evalkit.settings(cache_dir, rounds=5, wall_timeout_s=120.0, **evalkit.TIMING_ONLY)

    def series() -> list:
        return [
            evaluate(MATMUL_1024, evalkit.candidate(n), "cpu", settings=settings) for n in ("honest_matmul_relu", name)
        ]

    first = series()
    assert all(r.status is Status.OK for r in first), evalkit.describe(first[1])
    if name == "helper_pool_escapes_the_count" and not _counts_ended_processes(first[1]):
        pytest.skip(
            f"no control group that counts ended processes: {first[1].sandbox.get('measures', {}).get('cgroup')}"
        )
    pending = [first]
    held, runs = evalkit.held_to_honest(
        lambda: pending.pop() if pending else series(), lambda cheat_x, honest_x: cheat_x < 1.15 * honest_x + 0.05
    )
    table = " ".join(f"{s[0].speedup or 0:.2f}/{s[1].speedup or 0:.2f}" for s in runs)
    assert all(r.status is Status.OK for s in runs for r in s), table
    assert held, f"honest/{name}: {table}"


SIN_16M = evalkit.inline_task(
    952,
    "sin_16mib",
    """
class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x)

def get_inputs():
    return [torch.randn(2048, 2048)]

def get_init_inputs():
    return []
""",
)
"""sin over 4 Mi floats (16 MiB in and out): two threads halve the forward, and the judge's
hand-over of each call (reading 16 MiB, sending the next set) is longer than half of it."""


@pytest.mark.parametrize("name", ["blocks_where_the_host_spins", "exec_once_per_round_trip"])
def test_a_second_thread_is_charged_while_the_host_blocks(name, cache_dir) -> None:
    """A host that blocks where the stock one spins, with sin on two threads: its CPU time stays
    within the interval (its own thread idles through the judge's hand-over), so a count of the
    time beyond the interval charged 0 in 33 of 40 round trips and paid a median 1.19x against an
    honest 1.00x (a red team, 2026-12-07). Every thread's time but the busiest one's is charged
    now: the second thread runs about half of each sin, so about a third of the host's CPU time or
    more is charged in every round trip (2026-12-07, four series on the idle VM: 5.7-12.2 ms in
    each of 20 round trips, paid a median 0.69x against an honest 1.00x charged nothing). The
    same host with helper processes whose spun thread execs once a round trip, taking over its
    leader's tid with 150 ms of past run time (a second red team: every round trip's busiest
    thread 138-141 ms, charged 0, paid a median 1.12x against an honest 0.99x): the busiest
    thread is now the host process's own (a median 0.68x against an honest 0.99x, 37-45% charged)."""
    settings = evalkit.settings(cache_dir, rounds=5, wall_timeout_s=120.0, **evalkit.TIMING_ONLY)
    for _ in range(3):
        r = evaluate(SIN_16M, evalkit.candidate(name), "cpu", settings=settings)
        # The exec'ing helper may be inside execve when the candidate is stopped for the
        # reference's timing, and a thread running while stopped is the candidate's hack
        # (`unfinished_work`, once in a loaded CI run, 2026-12-07): a verdict of its own, which
        # leaves the charging this test is about unmeasured. Evaluated again then.
        if r.hack_kind is not HackKind.UNFINISHED_WORK:
            break
    assert r.status is Status.OK, evalkit.describe(r)
    trips = r.round_trips["candidate"]
    if any(t.get("busiest_thread_ms") is None for t in trips):
        pytest.skip("this kernel gives no per-thread run time (/proc/<pid>/task/<tid>/schedstat)")
    shares = sorted(t["parallel_cpu_ms"] / t["cpu_ms"] for t in trips)
    assert len(shares) >= 5 and shares[len(shares) // 2] >= 0.25, trips
