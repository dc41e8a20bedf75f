"""A job that cannot start says why in one line, exits 2 and leaves no run directory (issue 24)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_train_with_an_unknown_task_id_prints_one_line_exits_2_and_leaves_no_run(tmp_path):
    run_dir = tmp_path / "runs" / "first"
    proc = subprocess.run(
        [sys.executable, "jobs/train.py", "tasks.ids=[level9/99]", f"run_dir={run_dir}", "tracking=none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("train: config error at tasks.ids: no task level9/99")
    assert not run_dir.exists()
