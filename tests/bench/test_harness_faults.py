"""Issue 21: an infrastructure failure is told apart from a candidate's, and only the first is
masked by the reward.

- A harness process killed mid-evaluation (the judge, or the reference host, which runs no
  candidate code) comes back `runtime_error` labelled `harness_error`, which `rl.rewards.price`
  leaves out of training. (The benchmark actor's own death is `actor_died`:
  `tests/actors/test_bench_pool.py`.)
- The candidate's own process killed is the candidate's failure (`worker_crashed`, not masked):
  a candidate can kill itself (`crash_sigkill_self` in test_containment.py), so a masked status
  there would be one a policy learns to reach.
- Nothing a candidate does to the memory the judge reads (unmapping it under the read, making
  its process non-dumpable) and no device error or out-of-memory in the judge once the candidate
  is loaded makes its result the harness's fault; nor does a shared resource it used up for
  every process (the system's file table, the scratch filesystem).
- A process killed outright leaves scratch directories that a later evaluation sweeps.
"""

from __future__ import annotations

import errno
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

import evalkit
from cudal1.bench.evaluator import evaluate
from cudal1.bench.judge import Judge
from cudal1.bench.result import Status
from cudal1.bench.verdicts import Verdict
from cudal1.rl.rewards import HARNESS_LABELS, price

MM = "matmul_relu"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


_SLOW = (
    evalkit.candidate("honest_matmul_relu")
    + """

import time as _time

_forward = ModelNew.forward


def _slow_forward(self, a, b):
    _time.sleep(0.02)
    return _forward(self, a, b)


ModelNew.forward = _slow_forward
"""
)


def _ours(prefix: str) -> list[psutil.Process]:
    """This test process's descendants whose working directory is a scratch dir named `prefix`
    (the judge's "cudal1-judge-", the reference host's "cudal1-ref-", the candidate's
    "cudal1-eval-"): never another run's processes on a shared machine."""
    root = os.path.join(tempfile.gettempdir(), prefix)
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.cwd().startswith(root):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _kill_once_alive(prefix: str, done: threading.Event, killed: list[int]) -> None:
    """Kill our process of `prefix` once the candidate host has been alive a second."""
    deadline = time.monotonic() + 60
    seen = None
    while not done.is_set() and time.monotonic() < deadline:
        if _ours("cudal1-eval-"):
            seen = seen or time.monotonic()
            if time.monotonic() - seen > 1.0:
                for p in _ours(prefix):
                    p.send_signal(signal.SIGKILL)
                    killed.append(p.pid)
                if killed:
                    return
        time.sleep(0.05)


@pytest.mark.parametrize("prefix", ["cudal1-judge-", "cudal1-ref-"])
def test_a_harness_process_killed_mid_evaluation_is_the_harness_fault(prefix: str, cache_dir) -> None:
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_once_alive, args=(prefix, done, killed), daemon=True)
    killer.start()
    try:
        r = evalkit.run(MM, _SLOW, cache_dir, rounds=40, calls_per_round=4)
    finally:
        done.set()
        killer.join()
    assert killed, f"no process of {prefix} was found to kill: " + evalkit.describe(r)
    assert r.status is Status.RUNTIME_ERROR and "harness_error" in r.labels, evalkit.describe(r)
    assert price(r).trainable is False, price(r)


def test_the_candidates_process_killed_is_its_own_failure(cache_dir) -> None:
    r = evalkit.run(MM, evalkit.candidate("crash_sigkill_self"), cache_dir)
    assert r.status is Status.RUNTIME_ERROR and not HARNESS_LABELS & set(r.labels), evalkit.describe(r)
    assert price(r).trainable is True, price(r)


def test_memory_taken_away_under_the_judges_read_is_the_candidates_failure(cache_dir) -> None:
    """Right answers in memory the candidate maps itself, unmapped by a thread a millisecond after
    each timed forward returns, in a process made non-dumpable: the read fails or sees a crash,
    and the result is the candidate's (a hack, a crash or a wrong answer), never masked."""
    r = evalkit.run(MM, evalkit.candidate("unmaps_its_outputs"), cache_dir)
    assert "UNMAPPED AN OUTPUT" in r.log, evalkit.describe(r)
    assert r.status in (Status.HACK, Status.RUNTIME_ERROR, Status.INCORRECT), evalkit.describe(r)
    assert not HARNESS_LABELS & set(r.labels), evalkit.describe(r)
    assert price(r).trainable is True, price(r)


class _Loaded:
    host_loaded = True
    cuda = False


@pytest.mark.parametrize(
    "exc,status,label",
    [
        (RuntimeError("CUDA error: an illegal memory access was encountered"), Status.RUNTIME_ERROR, "cuda_fault"),
        (
            __import__("torch").OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
            Status.RESOURCE_EXCEEDED,
            None,
        ),
    ],
)
def test_a_device_failure_in_the_judge_after_the_import_is_the_candidates(exc, status, label) -> None:
    """On a GPU the candidate can fault the device, free the memory the judge opened through CUDA
    IPC, or take all its memory: a CUDA error or an out-of-memory in the judge once the candidate
    is loaded is the candidate's failure, not `harness_error`. Before the import it is the
    harness's (re-raised)."""
    verdict = Judge._judge_failure(_Loaded(), exc, "timing")
    assert isinstance(verdict, Verdict) and verdict.status is status, verdict
    labels = verdict.extra.get("labels", [])
    assert "harness_error" not in labels and (label is None or label in labels), labels
    before = _Loaded()
    before.host_loaded = False
    with pytest.raises(type(exc)):
        Judge._judge_failure(before, exc, "reference")


def _caused(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    "exc,charged",
    [
        (OSError(errno.ENFILE, "Too many open files in system"), True),
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (_caused(RuntimeError("the reference host failed"), OSError(errno.EDQUOT, "Disk quota exceeded")), True),
        (OSError(errno.EMFILE, "Too many open files"), False),  # the judge's own descriptor limit
        (RuntimeError("the reference host failed (PeerGone)"), False),
    ],
)
def test_a_shared_resource_used_up_once_the_candidate_is_loaded_is_the_candidates(exc, charged) -> None:
    """The system's file table and a filesystem are shared by every process of the machine: a
    judge's failure that names one of them used up (here, or in its chain of causes) is the
    candidate's `resource_exceeded` once the candidate is loaded; one that names only the judge's
    own limits stays the harness's (this machine's file table and disk are not full)."""
    if charged:
        verdict = Judge._judge_failure(_Loaded(), exc, "timing")
        assert verdict.status is Status.RESOURCE_EXCEEDED and "shared resource" in verdict.message, verdict.message
    else:
        with pytest.raises(type(exc)):
            Judge._judge_failure(_Loaded(), exc, "timing")
    before = _Loaded()
    before.host_loaded = False
    with pytest.raises(type(exc)):
        Judge._judge_failure(before, exc, "correctness")


def test_a_candidate_that_fills_the_systems_file_table_is_charged_for_it(cache_dir) -> None:
    """The candidate (wrong: zeros) fills the system's open-file table (fs.file-max) from helper
    processes at import. The judge and the reference host run unprivileged, so the judge's next
    input slot (a memfd) fails with ENFILE: the candidate's doing, never a harness failure."""
    r = evalkit.run(MM, evalkit.candidate("hoards_open_files"), cache_dir)
    assert "HOARDED" in r.log, evalkit.describe(r)
    assert not HARNESS_LABELS & set(r.labels), evalkit.describe(r)
    assert r.status is not Status.OK and price(r).trainable is True, evalkit.describe(r)


@pytest.fixture(params=["tmpfs", "ext4"])
def small_tmp(request, tmp_path_factory, monkeypatch):
    """A 512 MiB filesystem as the temporary directory (every scratch directory of an evaluation
    lies there): a tmpfs (as a tmpfs /tmp is), or ext4 with mkfs's defaults (5% of its blocks
    reserved for root alone, as on most root filesystems). Skipped where it cannot be mounted."""
    import subprocess

    from cudal1.bench.worker import _context

    _context()  # the fork server keeps its own socket under the real temporary directory
    where = tmp_path_factory.mktemp(f"small-{request.param}")
    if request.param == "tmpfs":
        mount = ["mount", "-t", "tmpfs", "-o", "size=512m,mode=1777", "tmpfs", str(where)]
    else:
        image = tmp_path_factory.mktemp("images") / "fs.img"
        made = subprocess.run(["mkfs.ext4", "-q", str(image), "512M"], check=False, capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"no mkfs.ext4 here: {made.stderr[-200:]!r}")
        mount = ["mount", "-o", "loop", str(image), str(where)]
    if subprocess.run(mount, check=False, capture_output=True).returncode != 0:
        pytest.skip(f"cannot mount a {request.param} here")
    where.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    try:
        yield where
    finally:
        monkeypatch.undo()
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_candidate_that_fills_the_scratch_filesystem_is_charged_for_it(cache_dir, small_tmp) -> None:
    """The candidate fills the filesystem of its scratch directory (where the judge's log lies),
    then hands in an output that cannot be read: a hack verdict whose cause the judge prints to
    its log. A write that fails on the full filesystem does not turn the candidate's failure into
    the harness's."""
    r = evalkit.run(MM, evalkit.candidate("fills_the_scratch_disk"), cache_dir)
    assert not HARNESS_LABELS & set(r.labels), evalkit.describe(r)
    assert r.status is not Status.OK and price(r).trainable is True, evalkit.describe(r)


OOM_ON_WIDE = evalkit.inline_task(
    931,
    "oom_on_wide_inputs",
    """
class Model(nn.Module):
    def forward(self, x):
        # Stands in for a reference the device cannot hold on the judge's wide trial (inputs x30)
        # because the candidate's process holds the memory.
        if float(x.abs().max()) > 20:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return x * 2

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
""",
)

DOUBLE = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""


def test_the_reference_out_of_device_memory_once_the_candidate_is_loaded_is_the_candidates(cache_dir) -> None:
    """A reference that runs out of device memory on a spread trial, once the candidate's process
    exists, is not read as the edge of the reference's domain (a skipped trial): a candidate that
    fills the device would otherwise choose which trials it faces. It is the candidate's
    `resource_exceeded`, priced as a failure."""
    r = evaluate(OOM_ON_WIDE, DOUBLE, "cpu", settings=evalkit.settings(cache_dir))
    assert r.status is Status.RESOURCE_EXCEEDED, evalkit.describe(r)
    assert "out of device memory" in r.message and not HARNESS_LABELS & set(r.labels), evalkit.describe(r)
    assert price(r).trainable is True, price(r)


def test_the_scratch_of_an_evaluation_killed_outright_is_swept_once_it_is_old(tmp_path) -> None:
    """A process killed mid-evaluation (a benchmark actor lost) never reaches its own cleanup: its
    scratch directories are removed by the next process that makes one there, once the owner is
    gone and they are an hour old; a live process's and a young orphan's are kept."""
    import subprocess
    import sys

    from cudal1.bench.worker import ORPHAN_AGE_S, make_scratch, sweep_orphaned_scratch

    made = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom cudal1.bench.worker import make_scratch\n"
            "for k in ('judge', 'eval', 'ref'):\n    print(make_scratch(k, sys.argv[1]))\n"
            "import os, signal\nsys.stdout.flush()\nos.kill(os.getpid(), signal.SIGKILL)",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == -signal.SIGKILL, made.stderr
    orphans = made.stdout.split()
    assert len(orphans) == 3 and all(os.path.isdir(p) for p in orphans), made
    (Path(orphans[1]) / "worker.log").write_text("")
    own = make_scratch("eval", str(tmp_path))  # this process: alive
    foreign = tmp_path / "cudal1-eval-notes"  # not a scratch name
    foreign.mkdir()
    old = time.time() - ORPHAN_AGE_S - 60
    for p in [*orphans[:2], own, str(foreign)]:
        os.utime(p, (old, old))
    # orphans[2] stays young: its owner may be another PID namespace's live process.
    assert sorted(sweep_orphaned_scratch(str(tmp_path))) == sorted(orphans[:2])
    assert os.path.isdir(own) and os.path.isdir(orphans[2]) and foreign.is_dir()
