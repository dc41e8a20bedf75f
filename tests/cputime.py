"""Opt-in pytest plugin: wall and CPU seconds of every test phase, for ranking the suite's costs on a
shared machine, where wall times swing with the other processes' load and CPU seconds do not.

    mkdir /sys/fs/cgroup/cpuacct/suite && echo $$ > /sys/fs/cgroup/cpuacct/suite/cgroup.procs
    CUDAL1_CPU_CGROUP=/sys/fs/cgroup/cpuacct/suite CUDAL1_CPU_OUT=cpu.jsonl \\
        nice -n 10 .venv/bin/python -m pytest -q -p tests.cputime tests/<folder>

CPU seconds are the growth of the cpuacct cgroup `CUDAL1_CPU_CGROUP` (cgroup v1: every process the
run starts, Ray's daemons, fork servers and detached subprocesses included) over the phase; without
it, the growth of this process tree's own and reaped children's CPU time (psutil), which misses
processes that outlive their parent (a subprocess's fork server, say): a floor, not the cost. One
JSON line per phase goes to `CUDAL1_CPU_OUT` (default cputime.jsonl): {"id", "phase", "wall",
"cpu", "load"} (seconds; load: the 1-minute load average at its end). The terminal summary names
the files that cost the most CPU.
"""

from __future__ import annotations

import collections
import json
import os
import time

import psutil
import pytest

_CGROUP = os.environ.get("CUDAL1_CPU_CGROUP")
_rows: list[dict] = []


def _cpu_seconds() -> float:
    """CPU seconds so far: the cgroup's usage, else this process tree's (see the module docstring)."""
    if _CGROUP:
        with open(os.path.join(_CGROUP, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9
    total = 0.0
    me = psutil.Process()
    try:
        procs = [me, *me.children(recursive=True)]
    except psutil.Error:
        procs = [me]
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _measured(item, phase: str):
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    row = {
        "id": item.nodeid,
        "phase": phase,
        "wall": round(time.monotonic() - wall, 2),
        "cpu": round(_cpu_seconds() - cpu, 2),
        "load": os.getloadavg()[0],
    }
    _rows.append(row)
    with open(os.environ.get("CUDAL1_CPU_OUT", "cputime.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _measured(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _measured(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _measured(item, "teardown")


def pytest_terminal_summary(terminalreporter):
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for row in _rows:
        by_file[row["id"].split("::")[0]][0] += row["wall"]
        by_file[row["id"].split("::")[0]][1] += row["cpu"]
    if not by_file:
        return
    source = "cgroup" if _CGROUP else "process tree"
    terminalreporter.write_sep("=", f"CPU seconds by file ({source}), costliest first")
    for path, (wall, cpu) in sorted(by_file.items(), key=lambda kv: -kv[1][1])[:25]:
        terminalreporter.write_line(f"{cpu:8.1f} cpu {wall:8.1f} wall  {path}")
    cpu = sum(v[1] for v in by_file.values())
    wall = sum(v[0] for v in by_file.values())
    terminalreporter.write_line(f"{cpu:8.1f} cpu {wall:8.1f} wall  in all")
