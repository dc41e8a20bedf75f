"""Candidates that crash, hang, hog memory, fork, or reach outside their sandbox are contained.

Each test evaluates one misbehaving candidate (CPU backend, tiny task from `evalkit`), checks the
status it gets and that nothing escaped (files, connections, signals, processes), and then checks
that the NEXT evaluation, of an honest candidate, is correct: a bad candidate must cost only its
own worker.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

import psutil
import pytest

import evalkit
from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import HackKind, Status

MM = "matmul_relu"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cudal1-cache")


def assert_next_is_ok(cache_dir) -> None:
    """An honest candidate evaluated right after must be correct."""
    r = evalkit.run(MM, evalkit.candidate("honest_matmul_relu"), cache_dir)
    assert r.status is Status.OK, "the evaluation after the bad candidate failed:\n" + evalkit.describe(r)


def require_measure(r, name: str) -> None:
    """Skip when the sandbox measure `name` is not in force on this machine (the report says why)."""
    m = r.sandbox.get("measures", {}).get(name, {})
    if not m.get("active"):
        pytest.skip(f"sandbox measure {name} not in force here: {m.get('detail')}")


# -- crashes, hangs, memory, and candidates that never import ---------------------------------

CRASHES = [
    # (candidate, settings overrides, status, label, fragment of the message)
    ("crash_segfault", {}, Status.RUNTIME_ERROR, "worker_crashed", "SIGSEGV"),
    ("crash_os_exit", {}, Status.RUNTIME_ERROR, "worker_crashed", "exit code 0"),
    ("crash_sigkill_self", {}, Status.RUNTIME_ERROR, "worker_crashed", "SIGKILL"),
    ("hang_busy_loop", {"wall_timeout_s": 5.0}, Status.TIMEOUT, None, "no result within 5 s"),
    ("alloc_huge", {}, Status.RESOURCE_EXCEEDED, None, "forward"),
    ("alloc_gradual", {"memory_limit_mib": 1024}, Status.RESOURCE_EXCEEDED, None, "> limit 1024 MiB"),
    ("exit_at_import", {}, Status.COMPILE_ERROR, None, "SystemExit"),
    ("raise_at_import", {}, Status.COMPILE_ERROR, None, "does not import"),
    ("syntax_error", {}, Status.COMPILE_ERROR, None, "SyntaxError"),
]


@pytest.mark.parametrize("name,overrides,status,label,fragment", CRASHES, ids=[c[0] for c in CRASHES])
def test_crash_is_contained(name, overrides, status, label, fragment, cache_dir) -> None:
    t0 = time.monotonic()
    r = evalkit.run(MM, evalkit.candidate(name), cache_dir, **overrides)
    why = evalkit.describe(r)
    assert r.status is status, why
    assert r.hack_kind is None and r.speedup is None, why
    assert fragment in r.message, why
    if label:
        assert label in r.labels, why
    if name == "hang_busy_loop":
        assert time.monotonic() - t0 < 40, "the wall-time limit was not enforced promptly"
    assert_next_is_ok(cache_dir)


# -- the parent reads and deletes what the candidate could write: never blindly ------------------


@pytest.mark.parametrize("name", ["log_fifo", "log_devzero", "deep_scratch"])
def test_a_booby_trapped_scratch_directory_is_harmless(name, cache_dir) -> None:
    """A FIFO or a link to /dev/zero in place of the log, or 5,000 nested directories: the
    evaluation returns a normal result promptly (the parent hung, ran out of memory or raised
    before), and the next evaluation is fine."""
    t0 = time.monotonic()
    r = evalkit.run(MM, evalkit.candidate(name), cache_dir)
    assert r.status is Status.OK, evalkit.describe(r)
    assert time.monotonic() - t0 < 60
    assert_next_is_ok(cache_dir)


# -- processes left behind ---------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("name", ["fork_lingering_child", "fork_daemon"])
def test_forked_processes_do_not_outlive_the_evaluation(name, cache_dir) -> None:
    """A child that sleeps for 10 minutes (plain fork; double fork + setsid, which leaves the
    worker's process tree and session) is gone once evaluate() returns. The pid comes out
    through the log, the one channel a sandboxed candidate has."""
    r = evalkit.run(MM, evalkit.candidate(name), cache_dir)
    found = re.search(r"LINGERING_PID=(\d+)", r.log)
    assert found, evalkit.describe(r)
    pid = int(found.group(1))
    deadline = time.monotonic() + 5.0  # a killed orphan may stay a zombie for a moment
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)  # our own candidate's leftover: do not leave it on the machine
    assert not alive, f"process {pid} forked by the candidate outlived the evaluation"
    assert r.status is Status.OK, evalkit.describe(r)
    assert_next_is_ok(cache_dir)


def _cgroup(r) -> None:
    """Skip unless the candidate's processes were in a control group here."""
    m = r.sandbox.get("measures", {}).get("cgroup", {})
    if not m.get("active"):
        pytest.skip(f"no control group here: {m.get('detail')}")


@pytest.mark.parametrize("name", ["memfd_hoard", "daemon_hoard"])
def test_memory_held_outside_the_process_tree_counts(name, cache_dir) -> None:
    """2 GiB in an unmapped memfd, or in a double-forked daemon, against a 1 GiB limit: the
    candidate's control group counts both (a watch of resident memory saw neither)."""
    r = evalkit.run(MM, evalkit.candidate(name), cache_dir, memory_limit_mib=1024)
    _cgroup(r)
    assert r.status is Status.RESOURCE_EXCEEDED, evalkit.describe(r)
    assert_next_is_ok(cache_dir)


def test_a_process_that_keeps_hopping_pids_is_gone_after_the_evaluation(cache_dir) -> None:
    r = evalkit.run(MM, evalkit.candidate("fork_hopper"), cache_dir)
    _cgroup(r)
    found = re.search(r"HOPPER_UID=(\d+)", r.log)
    assert found and r.status is Status.OK, evalkit.describe(r)
    uid = int(found.group(1))
    time.sleep(1.0)
    left = [
        p.pid
        for p in psutil.process_iter(["uids", "status"])
        if p.info["uids"] and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE
    ]
    for pid in left:  # our own candidate's leftovers: do not leave them on the machine
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert uid != os.getuid() and not left, f"processes of uid {uid} outlived the evaluation: {left}"


# -- the filesystem, the network, signals --------------------------------------------------------


def test_writes_outside_scratch_are_refused(tmp_path, cache_dir) -> None:
    target, victim = tmp_path / "created_by_candidate.txt", tmp_path / "victim.txt"
    victim.write_text("original\n")
    os.chmod(tmp_path, 0o777)  # so only the sandbox, not file modes, stands in the way
    os.chmod(victim, 0o666)
    r = evalkit.run(MM, evalkit.candidate("write_outside", target=target, victim=victim), cache_dir)
    require_measure(r, "landlock_fs")
    assert not target.exists(), evalkit.describe(r)
    assert victim.read_text() == "original\n", evalkit.describe(r)
    assert f"REFUSED {target}" in r.log and "WROTE" not in r.log, evalkit.describe(r)
    assert r.status is Status.OK, evalkit.describe(r)
    assert_next_is_ok(cache_dir)


def test_no_network_connection_reaches_a_local_listener(cache_dir) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        r = evalkit.run(MM, evalkit.candidate("network_connect", port=port), cache_dir)
        require_measure(r, "network")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()[0].close()
    assert "REFUSED" in r.log and "CONNECTED" not in r.log, evalkit.describe(r)
    assert r.status is Status.OK, evalkit.describe(r)
    assert_next_is_ok(cache_dir)


def test_signals_cannot_reach_outside_the_sandbox(cache_dir) -> None:
    """SIGUSR1 to this test process and SIGKILL to the worker's parent (the fork server) are refused."""
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    try:
        r = evalkit.run(MM, evalkit.candidate("signal_outside", pid=os.getpid()), cache_dir)
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not received, evalkit.describe(r)
    assert "SIGNALLED" not in r.log, evalkit.describe(r)
    assert r.status is Status.OK, evalkit.describe(r)
    assert_next_is_ok(cache_dir)


# -- the result channel ------------------------------------------------------------------------


def _fork_server_pid() -> int | None:
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def test_a_forged_result_is_not_accepted(cache_dir) -> None:
    """A candidate writes a forged 'ok, 1000x' result (pickle- and JSON-framed) into every pipe it
    can write: the parent must not take it for the result, and the same writes must not reach the
    fork server's pipes (inherited by the worker) and kill it."""
    assert_next_is_ok(cache_dir)  # the fork server is up
    server = _fork_server_pid()
    r = evalkit.run(MM, evalkit.candidate("blind_pipe_writer"), cache_dir)
    assert r.status is not Status.OK and r.speedup != 1000.0, evalkit.describe(r)
    assert server is not None and _fork_server_pid() == server and psutil.pid_exists(server), "the fork server died"
    assert_next_is_ok(cache_dir)


def test_the_parent_never_unpickles_worker_data(tmp_path, cache_dir) -> None:
    """If the parent unpickled what comes through the result pipe, a candidate could run code in the
    unsandboxed evaluator process. Here that code would only create a directory under tmp_path."""
    marker = tmp_path / "created_by_the_parent"
    r = evalkit.run(MM, evalkit.candidate("pickle_into_parent", marker=marker), cache_dir)
    assert not marker.exists(), "candidate code ran in the evaluator's own process:\n" + evalkit.describe(r)
    assert r.status is not Status.OK, evalkit.describe(r)
    assert_next_is_ok(cache_dir)


def test_reads_outside_the_toolchain_find_nothing(tmp_path, cache_dir) -> None:
    """Issue 21, public kind "filesystem reads": a candidate reads only the toolchain and its own
    directories. Files it must not see, each world-readable (so only the sandbox stands in the
    way): rollouts in a run directory and the exemplar buffer where the training job keeps them
    (<checkout>/runs/), a file in the user's home, the checkout's README, and another
    evaluation's scratch directory. Each read simply fails (PermissionError, no label: an honest
    library that probes a config file must not be punished, and a read that fails gains nothing);
    the verdict is the honest one."""
    checkout = Path(__file__).resolve().parents[2]
    tag = f"i21-reads-{os.getpid()}-{time.time_ns()}"
    run_dir = checkout / "runs" / tag
    home_file = Path.home() / f".{tag}"
    foreign = Path(tempfile.mkdtemp(prefix="cudal1-eval-")) / "worker.log"
    secrets = {
        run_dir / "rollouts.jsonl": "SECRET-ROLLOUT",
        run_dir / "buffer" / "exemplars.jsonl": "SECRET-EXEMPLAR",
        home_file: "SECRET-HOME",
        foreign: "SECRET-FOREIGN",
    }
    try:
        for path, text in secrets.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            os.chmod(path, 0o644)
        paths = [str(p) for p in secrets] + [str(checkout / "README.md")]
        r = evalkit.run(MM, evalkit.candidate("reads_outside", paths=repr(paths)), cache_dir)
        require_measure(r, "landlock_read")
        assert r.status is Status.OK, evalkit.describe(r)
        assert not any(text in r.log for text in secrets.values()), evalkit.describe(r)
        assert not re.search(r"^(READ|LISTED) ", r.log, re.M), evalkit.describe(r)
        for path in paths:
            assert f"REFUSED READ {path}: PermissionError" in r.log, evalkit.describe(r)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(foreign.parent, ignore_errors=True)
        home_file.unlink(missing_ok=True)


def _task_on_disk(tmp_path: Path):
    """matmul_relu as a task file in a world-writable dir (only the sandbox stands in the way), and
    its Task record: read from the file before any candidate exists, as the suite loader does."""
    from cudal1.tasks.task import Task

    path = tmp_path / "1_matmul_relu.py"
    path.write_text(evalkit.TASKS[MM])
    os.chmod(tmp_path, 0o777)
    os.chmod(path, 0o666)
    return path, Task(level=1, problem_id=1, name="matmul_relu", source=path.read_text(), path=str(path))


def test_a_candidate_cannot_rewrite_the_task_or_its_tolerances(tmp_path, cache_dir) -> None:
    """Issue 21, public kind "the task's source on disk": a candidate that returns zeros rewrites
    the task file so that its reference returns zeros, and opens the evaluator's sources (where
    the tolerances are) for writing. Landlock refuses every write (files of the task and of the
    evaluator are outside its scratch and build directory), and the verdict is incorrect."""
    import cudal1.bench.correctness as correctness_module
    import cudal1.bench.settings as settings_module

    path, task = _task_on_disk(tmp_path)
    tolerances = [correctness_module.__file__, settings_module.__file__]
    before = [Path(p).read_bytes() for p in tolerances]
    source = evalkit.candidate("rewrites_the_task", task_file=path, tolerances=repr(tolerances))
    r = evaluate(task, source, "cpu", settings=evalkit.settings(cache_dir))
    require_measure(r, "landlock_fs")
    assert "REFUSED THE TASK: PermissionError" in r.log, evalkit.describe(r)
    assert all(f"REFUSED {p}: PermissionError" in r.log for p in tolerances), evalkit.describe(r)
    assert path.read_text() == evalkit.TASKS[MM] and [Path(p).read_bytes() for p in tolerances] == before
    assert r.status is Status.INCORRECT, evalkit.describe(r)


def test_the_reference_comes_from_the_bytes_read_before_the_candidate(tmp_path, cache_dir) -> None:
    """The same attack where nothing confines writes (the sandbox off: a machine without Landlock
    and run as the user who owns the task files): the rewrite lands on disk, and changes nothing.
    The judge and the reference host build the reference from the Task record's source, read
    before any candidate existed (`Task.load_module` never opens `Task.path`): the candidate is
    still wrong, and so is the next evaluation of the same record (which would pay zeros were
    the reference read from the file)."""
    path, task = _task_on_disk(tmp_path)
    source = evalkit.candidate("rewrites_the_task", task_file=path, tolerances="[]")
    off = evalkit.settings(cache_dir, sandbox=False)
    first = evaluate(task, source, "cpu", settings=off)
    assert "REWROTE THE TASK" in first.log and "zeros" in path.read_text(), evalkit.describe(first)
    assert first.status is Status.INCORRECT, evalkit.describe(first)
    second = evaluate(
        task, evalkit.candidate("rewrites_the_task", task_file=tmp_path / "x.py", tolerances="[]"), "cpu", settings=off
    )
    assert second.status is Status.INCORRECT, evalkit.describe(second)


_BURNER = """
import mmap, os, threading
fd = os.memfd_create("burn")
source = mmap.mmap(-1, 256 << 20)  # untouched: every page the zero page
def burn():
    while True:
        os.pwritev(fd, [source], 0)  # 256 MiB a call, interrupted by a fatal signal only
for _ in range(2):
    threading.Thread(target=burn, daemon=True).start()
print("burning", flush=True)
threading.Event().wait()
"""


def _cpu_ns(pid: int) -> int:
    """Time on a CPU of every thread of `pid` (ns, /proc/<pid>/task/*/schedstat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def test_a_pause_waits_for_threads_inside_a_long_system_call() -> None:
    """SIGSTOP stops a thread only on its way back to user space: two threads each inside a
    256 MiB pwritev run on in the kernel after the main thread shows stopped (150 ms of CPU in the
    next 0.3 s on this 2-core VM, for 1 GiB writes, where the wait was for the main thread alone).
    `wait_until_stopped` returns once every thread is stopped: after it, the process takes no more
    CPU time."""
    import subprocess
    import sys

    from cudal1.bench.worker import wait_until_stopped

    proc = subprocess.Popen([sys.executable, "-c", _BURNER], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"burning"
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGSTOP)
        assert wait_until_stopped([proc.pid], 10.0) == []
        before = _cpu_ns(proc.pid)
        time.sleep(0.3)
        assert _cpu_ns(proc.pid) - before < 2_000_000, "a thread of the stopped process still ran"
    finally:
        proc.kill()
        proc.wait()


def test_threads_left_running_through_the_pause_are_the_candidates_failure(cache_dir) -> None:
    """`burns_past_the_stop` (a red team's): the reference's own matmul and relu, reporting 0 ms
    a forward, plus four threads that from each answer to the candidate's next forward write
    1 GiB per pwritev into a memfd, so they run on in the kernel through the pause while the
    reference is timed (before: paid 1.14-2.34x against the honest control's 0.63-1.19x on this
    VM). The parent's pause waits for every thread (`worker.wait_until_stopped`) for at most
    `PAUSE_WAIT_S`: a write that outlasts it (1 GiB on this VM under load) is the candidate's
    failure; one that ends sooner (on the idle VM: every thread stopped within 0.94 s) ends before
    the reference is timed, and the candidate is paid for its own work alone (0.41x there)."""
    source = evalkit.candidate("burns_past_the_stop", burners=4, chunk_mib=1024, factor=0, debug=0)
    r = evaluate(evalkit.MATMUL_512, source, "cpu", settings=evalkit.settings(cache_dir, rounds=5, calls_per_round=1))
    assert "BURNS PAST THE STOP 4 1024 0" in r.log, evalkit.describe(r)
    caught = r.status is Status.HACK and r.hack_kind is HackKind.UNFINISHED_WORK
    assert caught or (r.status is Status.OK and r.speedup < 1.1), evalkit.describe(r)
