"""A job that cannot start says why in one line and exits 2; it leaves no run directory, or (past the
cluster check, when actors had started) none that the review picks (issue 24)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


def test_ray_not_starting_within_its_timeout_is_one_line_and_exit_2(tmp_path):
    """A local Ray whose GCS does not come up in time (here: a wait of 0 s, through Ray's own
    RAY_gcs_server_port_wait_time_s, so no slow cluster is needed) ends the optimize job with one
    line naming what was tried, Ray's reason and its logs, exit code 2, and no run directory."""
    import os
    import shutil
    import tempfile

    (tmp_path / "my-relu.py").write_text(RELU)
    out = tmp_path / "out"
    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_gcs_server_port_wait_time_s="0", RAY_TMPDIR=ray_tmp)
    try:
        proc = subprocess.run(
            [sys.executable, "jobs/optimize.py", f"task_files=[{tmp_path / 'my-relu.py'}]", f"out_dir={out}"]
            + ["tracking=none"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    last = proc.stderr.strip().splitlines()[-1]
    said = "optimize: Ray did not start (starting a local Ray cluster): Timed out waiting for file "
    assert last.startswith(said), last
    assert last.endswith(f"(Ray's logs: {ray_tmp}/ray/session_latest/logs)"), last
    assert "1 tasks: file/my_relu" in proc.stdout + proc.stderr  # the standalone program's own name
    assert not out.exists()


def test_no_cluster_to_join_is_a_ray_start_error_naming_the_address(tmp_path):
    """address "auto" with no cluster running (Ray's temp directory made empty with RAY_TMPDIR, so
    a cluster another job left a record of is not found): RayStartError, which `user_errors`
    prints. Ray's "auto" also finds a cluster by its running GCS process, which no environment
    hides: while one runs on this machine (the suite's shared cluster, once an earlier test started
    it) there is no "no cluster" to test, and the test skips; alone
    (`pytest tests/test_job_start.py`) it runs."""
    import os

    from ray._private.services import find_gcs_addresses  # Ray's own lookup for "auto"

    if find_gcs_addresses():
        pytest.skip("a Ray cluster runs on this machine: address 'auto' joins it")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(tmp_path)
    code = (
        "from cudal1.actors.cluster import init_ray\n"
        "from cudal1.actors.preflight import RayStartError\n"
        "try:\n    init_ray(address='auto')\nexcept RayStartError as e:\n    print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = "Ray did not start (joining the Ray cluster at auto): Could not find any running Ray instance."
    assert proc.stdout.startswith(said), proc.stdout
    assert proc.stdout.rstrip().endswith(f"(Ray's logs: {tmp_path}/ray/session_latest/logs)"), proc.stdout


def test_joining_a_host_port_where_nothing_answers_is_a_prompt_ray_start_error():
    """A host:port where nothing listens (a port just freed on this machine): RayStartError within
    seconds, naming the address and what to do, instead of `ray.init` retrying for minutes."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "from cudal1.actors.cluster import init_ray\n"
        "from cudal1.actors.preflight import RayStartError\n"
        f"try:\n    init_ray(address='127.0.0.1:{port}')\nexcept RayStartError as e:\n    print(e)\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = f"Ray did not start (joining the Ray cluster at 127.0.0.1:{port}): nothing answers there (ConnectionRefusedError"
    assert proc.stdout.startswith(said), proc.stdout
    assert "ray start --head" in proc.stdout, proc.stdout
    assert took < 60, took  # the interpreter's and Ray's imports included; ray.init alone retried > 150 s


RELU = (
    "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
    "def get_inputs():\n    return [torch.randn(8, 8)]\n\n\ndef get_init_inputs():\n    return []\n"
)
BAD_REFERENCE = (
    "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
    "        raise RuntimeError('this reference cannot run')\n\n\n"
    "def get_inputs():\n    return [torch.randn(8, 8)]\n\n\ndef get_init_inputs():\n    return []\n"
)


def test_a_start_failing_at_the_probe_is_a_config_error_and_no_run_for_the_review(ray_cluster, tmp_path, caplog):
    """Past the cluster check, every actor started, then no task is usable: a config error naming
    `tasks` (exit 2 in a job), the MLflow run FAILED, and a directory the review does not pick."""
    import logging

    from mlflow.tracking import MlflowClient

    from cudal1 import review
    from cudal1.config import ConfigError
    from cudal1.pipeline.context import RunContext
    from cudal1.tracking import default_tracking_uri
    from tests.conftest import compose_smoke

    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "1_Bad.py").write_text(BAD_REFERENCE)
    run_dir = tmp_path / "runs" / "first"
    cfg = compose_smoke(
        run_dir,
        f"tasks.source={tmp_path / 'kb'}",
        "tasks.ids=[level1/1]",
        f"tracking.uri={default_tracking_uri(tmp_path)}",  # this test's project, not the checkout's runs/
        tracking="local",
    )
    with caplog.at_level(logging.WARNING, logger="cudal1"):
        with pytest.raises(ConfigError) as e:
            RunContext.start(cfg)
    assert e.value.key == "tasks" and "none of the 1 selected tasks can be used" in str(e.value)
    assert "task level1/1 (Bad) left out: forward seed=0 failed: RuntimeError" in caplog.text
    assert f"{run_dir} holds no state.json, so the review skips it" in caplog.text
    assert not (run_dir / "state.json").exists() and review.default_run_dir(tmp_path) is None
    client = MlflowClient(cfg.tracking.uri)
    runs = client.search_runs([client.get_experiment_by_name(cfg.tracking.experiment).experiment_id])
    assert [r.info.status for r in runs] == ["FAILED"]
