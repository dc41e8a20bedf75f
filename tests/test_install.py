"""`scripts/install.sh` keeps pip's output in `.install.log` unless asked (`--verbose`), and a step
that fails still fails loudly: its exit code, the log's tail and the log's path on stderr.

The failing step is real: a virtualenv made without pip, so the script's first pip step (`python
-m pip install --upgrade pip`) fails with "No module named pip" before anything is downloaded. The
script and `pyproject.toml` are copied into a scratch repository, so the log lands there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def scratch(tmp_path):
    """(a scratch repository holding install.sh and pyproject.toml, a virtualenv without pip)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "install.sh", repo / "scripts" / "install.sh")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    return repo, venv


def install(repo: Path, venv: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CUDAL1_INSTALL_VERBOSE"}
    env["VIRTUAL_ENV"] = str(venv)
    return subprocess.run(
        ["bash", str(repo / "scripts" / "install.sh"), "cpu", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_failing_step_is_loud_and_names_the_log_that_holds_pips_output(scratch):
    repo, venv = scratch
    out = install(repo, venv)
    log = repo / ".install.log"
    assert out.returncode == 1, (out.stdout, out.stderr)
    # The terminal: the script's own lines; pip's error only inside the quoted tail.
    assert all(line.startswith("install.sh: ") for line in out.stdout.splitlines()), out.stdout
    assert f"(pip's output: {log}; --verbose shows it)" in out.stdout
    assert f"install.sh: FAILED: upgrading pip (exit code 1). The last 40 lines of {log}:" in out.stderr
    assert "  | " in out.stderr and "No module named pip" in out.stderr
    assert f"install.sh: the whole output is in {log}" in out.stderr
    assert "No module named pip" in log.read_text()
    assert not (venv / ".cudal1-install").exists()  # a failed install is never stamped as done


def test_verbose_shows_pips_output_and_writes_no_log(scratch):
    repo, venv = scratch
    out = install(repo, venv, "--verbose")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "No module named pip" in out.stderr and "  | " not in out.stderr
    assert not (repo / ".install.log").exists()
    assert install(repo, venv, "--loud").returncode == 2  # an unknown option: the usage line
