"""A job started by a Python that is not the project's environment says so in one message and
exits 2 (issue 24: `ray job submit -- python jobs/train.py` on a head node whose `python` is the
system's died on `ModuleNotFoundError: No module named 'hydra'`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1 import environment

ROOT = Path(__file__).resolve().parents[1]


def run_job_without_site(job: str, **env: str) -> subprocess.CompletedProcess:
    """jobs/<job>.py under this interpreter with `-S` (no site-packages: hydra, ray and torch are
    not importable, as under a system Python)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_JOB_CONFIG_JSON_ENV_VAR")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-S", f"jobs/{job}.py"], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("job", ["train", "optimize", "evaluate", "augment", "serve"])
def test_a_job_under_another_python_names_what_is_missing_and_the_fix(job):
    proc = run_job_without_site(job)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{job}: this Python ({sys.executable}) cannot import hydra, omegaconf, ray, torch")
    assert f"{ROOT / '.venv' / 'bin' / 'python'} jobs/{job}.py" in proc.stderr


def test_under_ray_job_submit_the_fix_names_the_interpreter_by_absolute_path():
    # Ray's copy of the working directory has no .venv, so the message cannot point into it.
    proc = run_job_without_site("train", RAY_JOB_CONFIG_JSON_ENV_VAR="{}")
    assert proc.returncode == 2
    assert '-- "$PWD/.venv/bin/python" jobs/train.py' in proc.stderr
    assert ".venv/bin/ray start" in proc.stderr
    fixes = proc.stderr.splitlines()[1:]  # the first line names this interpreter, which lives in .venv here
    assert not any(str(ROOT / ".venv") in line for line in fixes)


def test_missing_lists_only_what_cannot_be_imported_in_order():
    assert environment.missing(("json", "cudal1_no_such_module", "os", "another_missing_one")) == [
        "cudal1_no_such_module",
        "another_missing_one",
    ]
    assert environment.missing() == []  # the suite runs in the project's environment


def test_advice_says_how_to_install_where_there_is_no_environment(tmp_path):
    text = environment.advice("train", ["hydra"], executable="/usr/bin/python3", root=str(tmp_path), submitted=False)
    assert f"no environment at {tmp_path}/.venv/bin/python yet: bash scripts/install.sh cpu" in text
    assert "install.sh" not in environment.advice("train", ["hydra"], root=str(ROOT), submitted=False)
