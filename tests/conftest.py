"""Session fixtures shared by the whole suite, so the expensive components start once:

- `small_model_dir`: the embedded default policy (built in a few seconds).
- `vllm_generator`, `hf_generator`: ONE vLLM engine (30-60 s to start on CPU, reserves its KV
  cache) and one transformers generator on that checkpoint. Tests that change their weights must
  put the original ones back.
- `ray_cluster`: ONE local Ray cluster (~10 s): four logical CPUs, two units of the custom
  resource `bench_test` (pool-placement tests ask for it), no dashboard, a 256 MiB object store.
  `address="local"` starts a new cluster even when RAY_ADDRESS points at a running one.
- `smoke_run`: ONE training run of the smoke config (conf/smoke.yaml, every stage) on that
  cluster, tracked in an MLflow store of its own (1-3 min); tests/pipeline/test_topology.py checks
  the run, tests/test_mlflow_ui.py shows it in the MLflow UI.

The whole suite runs in two pytest-xdist workers (`pytest -q tests -n 2`): one runs the judge's
evaluations and the seed solutions (`JUDGE_FOLDERS`: no Ray cluster, no engine), the other every
other test in collection order, the parts' unit tests included, and only it starts the session's
cluster, engines and smoke run (`TwoGroups`).

The fast tier, `pytest -q tests --fast -n 2` (under a minute on 2 cores): only the modules in `FAST`,
unit tests of the parts that start no Ray cluster, no vLLM engine, no DeepSpeed engine and no
judged evaluation; the others are not even collected (importing them all takes longer than the
tier). Its tests are also marked `fast`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

FAST = frozenset(
    {
        "test_config.py",
        "test_environment.py",
        "test_install.py",
        "test_launch.py",
        "test_progress.py",
        "test_memory_plan.py",
        "test_review.py",
        "actors/test_artifacts.py",
        "actors/test_weight_transport.py",
        "augment/test_dataset.py",
        "bench/test_agreement.py",
        "bench/test_backing.py",
        "bench/test_correctness.py",
        "bench/test_degenerate.py",
        "bench/test_devicelock.py",
        "bench/test_guards_unit.py",
        "bench/test_host_spans.py",
        "bench/test_lean_host_script.py",
        "bench/test_summary.py",
        "bench/test_timing.py",
        "bench/test_wire.py",
        "pipeline/test_episodes.py",
        "pipeline/test_health.py",
        "pipeline/test_metrics.py",
        "pipeline/test_optimize_delivery.py",
        "pipeline/test_report.py",
        "pipeline/test_signal.py",
        "pipeline/test_standalone.py",
        "pipeline/test_variants.py",
        "policy/test_parsing.py",
        "policy/test_prompts.py",
        "policy/test_small.py",
        "rl/test_advantages.py",
        "rl/test_buffer.py",
        "rl/test_exemplars.py",
        "rl/test_losses.py",
        "rl/test_noise.py",
        "rl/test_rewards.py",
        "rl/test_turns.py",
        "serve/test_service.py",
        "tasks/test_find_task.py",
        "tasks/test_task.py",
        "training/test_multiturn_criterion.py",
        "training/test_real_reward_criterion.py",
        "training/test_schedule.py",
    }
)
"""The fast tier's modules, relative to tests/."""


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        default=False,
        help="run only the fast Ray-free tier (the modules in tests/conftest.py's FAST)",
    )


def _fast_module(path: Path) -> bool:
    try:
        return path.resolve().relative_to(TESTS).as_posix() in FAST
    except ValueError:
        return False


def pytest_ignore_collect(collection_path, config):
    if config.getoption("--fast") and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return not _fast_module(collection_path)
    return None


JUDGE_FOLDERS = ("bench", "tasks")
"""Folders of tests/ whose tests start no Ray cluster and no engine (the judge's evaluations, the
seed solutions): with `-n 2` they run in a worker of their own. Every other test runs in the
cluster's worker, the Ray-free ones too: in a fresh-clone run on 2 cores (2026-12-07) the judge's
worker held 1,189 s of test time against the cluster's 961 s, with the fast tier and four other
Ray-free modules (83 s) beside the judge."""


def runs_beside_the_cluster(nodeid: str) -> bool:
    """Whether the test `nodeid` ("tests/<folder>/test_x.py::name[...]") runs in the judge's
    worker: it is under `JUDGE_FOLDERS`."""
    module = nodeid.split("::", 1)[0]
    relative = module[len("tests/") :] if module.startswith("tests/") else module
    return relative.split("/", 1)[0] in JUDGE_FOLDERS


if importlib.util.find_spec("xdist") is not None:

    @pytest.hookimpl(optionalhook=True)  # a run with `-p no:xdist` does not know the hook
    def pytest_xdist_make_scheduler(config, log):
        """pytest-xdist's scheduler for `-n 2`: two work units, so each worker runs one in
        collection order (module and session fixtures start once, the cluster in one worker).
        The fast tier alone (`--fast`) starts no cluster and would be one unit: xdist's own
        load scheduling spreads it over both workers instead."""
        if config.getoption("--fast"):
            return None
        from xdist.scheduler import LoadScopeScheduling

        class TwoGroups(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return "beside" if runs_beside_the_cluster(nodeid) else "cluster"

        return TwoGroups(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _fast_module(Path(item.fspath)):
            item.add_marker(pytest.mark.fast)


EXIT_WATCH_S = 30
"""Seconds this process may live on after pytest has finished before every thread's stack is printed."""


def pytest_unconfigure(config):
    """Print every thread's stack to stderr if the process is still alive `EXIT_WATCH_S` s after pytest
    has finished: a thread or native client (a Ray GCS client is one) that holds the interpreter past
    the end of the session is then named in the log, rather than only its effect (Ray's client ends
    the process with exit code 1 when its cluster has been gone for 60 s). Not in a pytest-xdist
    worker: execnet keeps a worker that has finished alive until the whole run ends, minutes later."""
    import faulthandler

    if hasattr(config, "workerinput"):
        return
    faulthandler.dump_traceback_later(EXIT_WATCH_S, exit=False)


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory):
    """The embedded default policy, built once per session."""
    from cudal1.policy.small import init_small

    return init_small(tmp_path_factory.mktemp("policy") / "small", seed=0)


@pytest.fixture(scope="session")
def vllm_generator(small_model_dir):
    """A vLLM-backed RolloutGenerator on the small model, fp32, with a 0.25 GiB KV cache."""
    pytest.importorskip("vllm")
    from cudal1.rollout import RolloutGenerator

    gen = RolloutGenerator(
        small_model_dir, backend="vllm", dtype="float32", max_model_len=4096, seed=0, kv_cache_gib=0.25
    )
    yield gen
    gen.close()


@pytest.fixture(scope="session")
def hf_generator(small_model_dir):
    """The transformers fallback generator on the same checkpoint."""
    from cudal1.rollout import RolloutGenerator

    gen = RolloutGenerator(small_model_dir, backend="hf", dtype="float32", max_model_len=4096, seed=0)
    yield gen
    gen.close()


@pytest.fixture(scope="session")
def ray_cluster():
    """Facts of the running local cluster ({"address", "started_local", "resources"})."""
    pytest.importorskip("ray")
    from cudal1.actors.cluster import init_ray, shutdown_ray

    facts = init_ray(
        address="local",
        num_cpus=4,
        resources={"bench_test": 2},
        object_store_mb=256,
        include_dashboard=False,
        log_to_driver=False,
    )
    yield facts
    shutdown_ray()


SMOKE_TASKS = "tasks.ids=[level1/4,level2/2]"
"""The smoke config's tasks in tests that train on it: the two cheapest builtin tasks to evaluate on the
CPU (small inputs; 3 s each against 11 s for the config's own level1/13 and level1/5), with
PyTorch-level seeds. What these tests check is the machinery, not the tasks."""


def compose_smoke(run_dir: Path, *overrides: str, tracking: str = "none"):
    """The validated smoke config (conf/smoke.yaml) with `run_dir`, `tracking` and `overrides` applied."""
    from hydra import compose, initialize_config_dir

    from cudal1.config import load_config, register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="smoke", overrides=[f"run_dir={run_dir}", f"tracking={tracking}", *overrides])
    return load_config(cfg)


@dataclasses.dataclass
class SmokeRun:
    cfg: Any
    state: Any
    run_dir: Path
    tracking_uri: str
    """sqlite:///<run_dir's parent>/mlflow.db: the store this run alone logged to (its project's
    default store, `default_tracking_uri(<run_dir's parent's parent>)`, given as tracking.uri)."""


@pytest.fixture(scope="session")
def smoke_run(ray_cluster, tmp_path_factory) -> SmokeRun:
    """`train(cfg)` in this process on the session's cluster, all three stages of the smoke config,
    weights synced by broadcast (the object-store sync is covered by the resume test), tracked in
    MLflow beside the run directory."""
    from cudal1.pipeline.driver import train
    from cudal1.tracking import default_tracking_uri

    project = tmp_path_factory.mktemp("smoke")
    run_dir = project / "runs" / "smoke"
    uri = default_tracking_uri(project)  # the project store a job started in `project` would use
    cfg = compose_smoke(
        run_dir,
        SMOKE_TASKS,
        "rollout.weight_sync=broadcast",
        "tracking.system_metrics_s=2",
        f"tracking.uri={uri}",
        tracking="local",
    )
    state = train(cfg)
    return SmokeRun(cfg, state, run_dir, uri)
