"""No candidate gets a namespace of its own making (`cudal1.bench.seccomp`, applied by
`cudal1.bench.sandbox`): a red team (thirty-ninth session) made a user namespace and thousands of
network namespaces inside it, held them until its kill, and their teardown by kernel threads
kept a core busy while the judge timed the reference after the candidate; their kernel memory
(about 77 KiB each) is counted by no limit here."""

from __future__ import annotations

import ctypes
import os

import evalkit
import isolated_targets
import pytest

from cudal1.bench import seccomp
from cudal1.bench.result import HARNESS_LABELS, Status
from cudal1.bench.worker import WorkerLimits, run_isolated


def _unsandboxed_user_namespace() -> bool:
    """Whether a plain child of this process may make a user namespace (the attack's first step)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pid = os.fork()
    if pid == 0:  # only a ctypes call, then _exit
        os._exit(0 if libc.unshare(ctypes.c_int(seccomp.CLONE_NEWUSER)) == 0 else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_the_filter_checks_the_native_abi_first_and_knows_two_machines():
    for machine, (arch, clone, unshare, setns, clone3) in seccomp.ARCHES.items():
        prog = seccomp.namespace_filter(machine)
        assert prog[0] == (0x20, 0, 0, 4) and prog[1][3] == arch  # load arch, compare
        compared = {k for code, _, _, k in prog if code == 0x15}
        assert {clone, unshare, setns, clone3} <= compared
        # Every jump lands inside the program (offsets count forward), and it ends in a return.
        jumps = [(i, jt, jf) for i, (code, jt, jf, _) in enumerate(prog) if code & 0x07 == 0x05]
        assert jumps and all(i + 1 + max(jt, jf) < len(prog) for i, jt, jf in jumps)
        assert prog[-1][0] == 0x06
    with pytest.raises(ValueError, match="riscv64"):
        seccomp.namespace_filter("riscv64")


def test_a_sandboxed_child_makes_no_namespace_and_still_runs_threads_forks_and_programs():
    if not _unsandboxed_user_namespace():
        pytest.skip("this machine lets no unprivileged process make a user namespace: nothing to refuse")
    r = run_isolated(f"{isolated_targets.__name__}:namespaces_try", {}, WorkerLimits(wall_timeout_s=60))
    assert r.kind == "returned", (r.kind, r.error)
    v = r.value
    assert v["unshare_user"] == v["unshare_user_net"] == v["setns_own_net"] == "EPERM", v
    if "clone_user" in v:
        assert v["clone_user"] == "EPERM", v
    assert v["thread"] == v["fork"] == v["subprocess"] == "ok", v
    assert v["sandbox"]["measures"]["namespace_filter"]["active"], v["sandbox"]["measures"]


def test_a_candidate_that_hoards_network_namespaces_gets_none_and_is_judged_as_usual(tmp_path):
    if not _unsandboxed_user_namespace():
        pytest.skip("this machine lets no unprivileged process make a user namespace: nothing to refuse")
    r = evalkit.run("matmul_relu", evalkit.candidate("holds_network_namespaces"), tmp_path)
    assert "NAMESPACES user=EPERM held=0" in r.log and "SETNS own_net=EPERM" in r.log, evalkit.describe(r)
    assert r.status is Status.OK and not HARNESS_LABELS.intersection(r.labels), evalkit.describe(r)
