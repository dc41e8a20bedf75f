"""The evaluation processes' allocator (`cudal1.bench.allocator`): forwards reuse resident memory,
and nothing the evaluations start inherits the preload."""

from __future__ import annotations

import pytest

from cudal1.bench import allocator


def test_the_server_env_preloads_jemalloc_only_when_asked(monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("CUDAL1_HOST_ALLOCATOR", raising=False)
    assert allocator.server_env() == {}  # the default: glibc's malloc
    monkeypatch.setenv("CUDAL1_HOST_ALLOCATOR", "jemalloc")
    path = allocator.jemalloc_path()
    if path is None:
        assert allocator.server_env() == {}
    else:
        env = allocator.server_env()
        assert env["LD_PRELOAD"] == path and env["MALLOC_CONF"] == allocator.JEMALLOC_CONF
    monkeypatch.setenv("LD_PRELOAD", "/opt/other/libtcmalloc.so")
    assert allocator.server_env() == {}  # a preload the user chose is left alone


_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import isolated_targets
from cudal1.bench.worker import WorkerLimits, run_isolated
out = run_isolated("isolated_targets:allocator", {"calls": 8}, WorkerLimits(wall_timeout_s=120))
print(json.dumps({"kind": out.kind, "value": out.value, "error": out.error[-2000:]}))
"""


def _child_allocator(choice: str) -> dict:
    """`isolated_targets.allocator` in a child of a fork server started afresh (in a new Python
    process) with `CUDAL1_HOST_ALLOCATOR=choice`."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "CUDAL1_HOST_ALLOCATOR": choice}
    env.pop("LD_PRELOAD", None)
    here = str(Path(__file__).resolve().parent)
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, here], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["kind"] == "returned", out
    return out["value"]


@pytest.mark.slow
@pytest.mark.skipif(allocator.jemalloc_path() is None, reason="no jemalloc library on this machine")
def test_an_evaluation_child_on_jemalloc_faults_no_fresh_pages_and_the_default_is_glibc():
    """In a child of the fork server (as the judge and the hosts are), with jemalloc asked for: it
    is in use, the preload is gone from the environment (a compiler the child starts runs on its
    own malloc), and after the first call the forward's two 32 MiB temporaries come from resident
    memory (fewer faults than one temporary's 8192 pages). Asked for glibc (the default), the child
    runs on glibc's malloc. How often glibc's heap faults in that loop depends on the machine (8192
    or more on the development machine, docs/benchmarks.md twenty-third session; 246 on the CI
    machine), so it is not asserted."""
    jemalloc = _child_allocator("jemalloc")
    assert jemalloc["jemalloc"] is True and jemalloc["ld_preload"] is None, jemalloc
    assert jemalloc["faults"] < 8192, jemalloc
    glibc = _child_allocator("glibc")
    assert glibc["jemalloc"] is False and glibc["ld_preload"] is None, glibc
