"""Benchmark pools on the local test cluster, with the real evaluator on the CPU backend.

The task is builtin level1/4 (Kronecker matvec), the cheapest builtin task to evaluate on the CPU
(small inputs): its seed solution evaluates in a few seconds with the short test settings below. Each actor starts its own fork server on its first
candidate (~10 s here), so the pools are created once per module where they can be.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import ray

from cudal1.actors import bench_pool
from cudal1.actors.bench_pool import BenchmarkPool, BenchmarkPools, BenchWorker, PoolSpec, RewardSourceLost
from cudal1.actors.cluster import alive_nodes
from cudal1.bench.result import HARNESS_LABELS, EvalResult, Label, Status
from cudal1.pipeline.verify import verify_outliers
from cudal1.records import Candidate
from cudal1.rl.rewards import RewardConfig, price
from cudal1.tasks import seed_solutions

TASK = "level1/4"
SEED = seed_solutions("cpu")[TASK].read_text()
BROKEN = (
    "import torch\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self, *args):\n        super().__init__()\n\n"
    "    def forward(self, *inputs):\n        return inputs[0].no_such_method()\n"
)
NOT_PYTHON = "this is not python ("
SLOW = SEED.replace("import torch\n", "import time\n\nimport torch\n", 1).replace(
    "        super().__init__()\n", "        super().__init__()\n        time.sleep(2.0)\n", 1
)
"""The seed, correct, with 2 s of sleep in ModelNew(): its evaluation takes two seconds more than
the seed's on any machine, so an actor killed one second into it is killed inside it."""


def settings(tmp_path_factory) -> dict:
    """Short timing (one round of one call, the shortest calibration) and a throwaway build cache."""
    return {
        "rounds": 1,
        "calls_per_round": 1,
        "max_calls_per_round": 1,
        "calibration_calls": 3,
        "calibration_rounds": 2,
        "warmup_calls": 1,
        "wall_timeout_s": 120.0,
        "cache_dir": str(tmp_path_factory.getbasetemp() / "bench-cache"),
    }


@contextlib.contextmanager
def pool_for_test(tmp_path_factory, name: str, **fields):
    """A `BenchmarkPool` for a test or a module (one logical CPU per actor, the short test
    settings, 180 s to start; `fields` override `PoolSpec`'s), shut down when the block ends."""
    spec = PoolSpec(
        **{"name": name, "num_cpus": 1, "settings": settings(tmp_path_factory), "start_timeout_s": 180, **fields}
    )
    pool = BenchmarkPool(spec)
    try:
        yield pool
    finally:
        pool.shutdown()


def evaluate_in_background(pool, candidates):
    """`pool.evaluate_many(candidates)` in a thread, so the test can kill an actor meanwhile:
    (the started thread, a dict whose "results" the thread fills)."""
    out: dict = {}
    runner = threading.Thread(target=lambda: out.setdefault("results", pool.evaluate_many(candidates, progress=False)))
    runner.start()
    return runner, out


@pytest.fixture(scope="module")
def pool(ray_cluster, tmp_path_factory):
    with pool_for_test(tmp_path_factory, "test", num_actors=2, resources={"bench_test": 1}) as p:
        yield p


def test_bench_worker_without_ray(tmp_path_factory):
    worker = BenchWorker("plain", "cpu", settings(tmp_path_factory))
    unknown = worker.evaluate(Candidate("level9/99", SEED))
    assert unknown.status is Status.INVALID_TASK and unknown.labels == ["unknown_task"]


def test_results_in_input_order_with_correct_statuses(pool):
    candidates = [
        Candidate(TASK, SEED, origin="seed"),
        Candidate(TASK, NOT_PYTHON, origin="syntax"),
        Candidate(TASK, BROKEN, origin="broken"),
        Candidate(TASK, SEED, origin="seed-again"),
    ]
    results = pool.evaluate_many(candidates, progress=False)
    statuses = [r.status for r in results]
    assert statuses[0] == "ok" and statuses[3] == "ok", [r.message for r in results]
    assert statuses[1] == "compile_error"
    assert statuses[2] == "runtime_error", results[2].message
    assert all(r.task_id == TASK for r in results)
    assert results[0].speedup > 0 and results[0].correctness_trials >= 5


def wait_for(condition, timeout_s: float = 300.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_stream_evaluates_candidates_submitted_while_it_runs(pool):
    """`BenchmarkPool.stream`: the first candidate is on an actor before the next ones are
    submitted; results come back in submission order, as `evaluate_many` would give them."""
    with pool.stream(progress=False) as stream:
        assert stream.submit([Candidate(TASK, SEED, origin="first")]) == range(0, 1)
        assert wait_for(lambda: pool.busy), "the first candidate never reached an actor"
        assert stream.started is not None
        assert stream.submit([]) == range(1, 1)
        assert stream.submit([Candidate(TASK, NOT_PYTHON), Candidate(TASK, SEED)]) == range(1, 3)
        results = stream.results(timeout_s=600)
        with pytest.raises(RuntimeError, match="closed stream"):
            stream.submit([Candidate(TASK, SEED)])
    assert [r.status for r in results] == ["ok", "compile_error", "ok"], [r.message for r in results]
    assert not pool._lock.locked() and pool.busy == {}
    assert pool.evaluate_many([Candidate(TASK, NOT_PYTHON)], progress=False)[0].status == "compile_error"


def test_a_cancelled_stream_releases_the_pool(pool):
    """Leaving the `with` block on an error cancels the calls in flight and frees the pool at once."""

    class Stop(Exception):
        pass

    with pytest.raises(Stop):
        with pool.stream(progress=False) as stream:
            stream.submit([Candidate(TASK, SEED), Candidate(TASK, SEED)])
            assert wait_for(lambda: pool.busy)
            raise Stop
    assert not pool._lock.locked() and pool.busy == {}
    with pytest.raises(RuntimeError, match="closed stream"):
        stream.submit([Candidate(TASK, SEED)])
    assert pool.evaluate_many([Candidate(TASK, SEED)], progress=False)[0].status == "ok"


def test_a_second_opinion_comes_from_another_actor(pool):
    """Issue 9, item 9: `avoid` sends each candidate to an actor other than the one named."""
    firsts = pool.evaluate_many([Candidate(TASK, SEED, origin=f"first{i}") for i in range(2)], progress=False)
    avoid = [r.actor for r in firsts]
    assert all(a in (0, 1) for a in avoid)
    seconds = pool.evaluate_many(
        [Candidate(TASK, SEED, origin=f"second{i}") for i in range(2)], progress=False, avoid=avoid
    )
    assert [r.status for r in seconds] == ["ok", "ok"], [r.message for r in seconds]
    assert all(s.actor != a for s, a in zip(seconds, avoid)), (avoid, [s.actor for s in seconds])
    with pytest.raises(ValueError, match="avoid"):
        pool.evaluate_many([Candidate(TASK, SEED)], avoid=[0, 1])


def test_outliers_are_measured_again_on_another_actor_before_they_are_paid(pool):
    """The pipeline's `verify_outliers` on a real pool: a result above 2x its task's best known
    speedup (here a best of 1e-6x, so any) is evaluated again elsewhere, and paid the slower."""
    cfg = RewardConfig(verify_tolerance=100.0)  # agreement is not what this test is about
    candidates = [Candidate(TASK, SEED, origin="outlier")]
    results = pool.evaluate_many(candidates, progress=False)
    assert verify_outliers(pool, candidates, results, {TASK: 1e-6}, cfg) == 1
    opinion = results[0].second_opinion
    assert opinion.status == "ok" and opinion.actor != results[0].actor and opinion.agrees
    paid = price(results[0], None, cfg)
    slower = min(results[0].speedup, opinion.speedup)
    assert paid.speedup <= max(slower, 1.0) + 1e-9
    quiet = RewardConfig(verify_above=1e6)  # nothing is an outlier now: no second evaluation
    assert verify_outliers(pool, candidates, results, {TASK: 1e6}, quiet) == 0


def test_actors_hold_the_custom_resource(pool):
    assert len(pool.workers) == 2
    for info in pool.workers:
        assert info["assigned"].get("bench_test") == 1.0
        assert info["device"]["arch"].startswith("cpu-")
    assert len({info["pid"] for info in pool.workers}) == 2


def test_missing_resource_fails_fast(ray_cluster):
    start = time.monotonic()
    with pytest.raises(ValueError, match="no_such_gpu_farm"):
        BenchmarkPool(PoolSpec(name="nowhere", resources={"no_such_gpu_farm": 1}))
    with pytest.raises(ValueError, match="accelerator_type:H100"):
        BenchmarkPool(PoolSpec(name="h100", backend="cuda", num_gpus=1, accelerator_type="H100"))
    with pytest.raises(ValueError, match="bench_test"):  # exists, but no node has 5 of it
        BenchmarkPool(PoolSpec(name="too-big", resources={"bench_test": 5}))
    assert time.monotonic() - start < 5


def test_resource_held_by_others_times_out(pool):
    # The node has bench_test: 2, all held by `pool`: a third actor can only wait, so it gives up.
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="not running after 2 s"):
        BenchmarkPool(PoolSpec(name="waiting", resources={"bench_test": 1}, start_timeout_s=2))
    assert time.monotonic() - start < 30


def test_pools_by_name(ray_cluster, tmp_path_factory):
    with pytest.raises(ValueError, match="duplicate"):
        BenchmarkPools([PoolSpec(name="a"), PoolSpec(name="a")])
    with pytest.raises(ValueError, match="cuda pool needs num_gpus"):
        PoolSpec(name="gpu", backend="cuda")


def test_killed_actor_loses_no_result(pool):
    """ray.kill one actor while it evaluates: every candidate still gets a result."""
    candidates = [Candidate(TASK, SEED, origin=f"seed{i}") for i in range(4)]
    runner, out = evaluate_in_background(pool, candidates)
    deadline = time.monotonic() + 60
    while not pool.busy and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # inside the evaluation (each takes seconds)
    victim = next(iter(pool.busy))
    tree = psutil.Process(pool.workers[victim]["pid"]).children(recursive=True)  # fork server, candidate
    assert tree
    ray.kill(pool.actors[victim], no_restart=False)
    runner.join(timeout=400)
    assert not runner.is_alive()
    results = out["results"]
    assert len(results) == 4 and all(r is not None for r in results)
    for r in results:
        assert r.status == "ok" or (r.status == "runtime_error" and r.message.startswith("benchmark actor died")), r
    print("after kill:", [(r.status, r.message[:80]) for r in results])
    gone, alive = psutil.wait_procs(tree, timeout=30)  # the killed actor's evaluator dies with it
    assert not alive
    # The pool goes on: the restarted actor evaluates again.
    again = pool.evaluate_many([Candidate(TASK, SEED), Candidate(TASK, SEED)], progress=False)
    assert [r.status for r in again] == ["ok", "ok"]


def test_a_pool_of_one_gives_the_second_opinion_itself_and_a_killed_call_without_retries_is_labelled(
    ray_cluster, tmp_path_factory
):
    """A pool of one actor gives a second opinion itself (asked to avoid its only actor); with
    max_task_retries=0 a killed call is not rerun: its candidate is labelled, not lost. One pool
    for both: a pool's start is most of either check's time."""
    assert "time.sleep(2.0)" in SLOW
    with pool_for_test(tmp_path_factory, "single", num_actors=1, max_task_retries=0) as pool:
        [result] = pool.evaluate_many([Candidate(TASK, SEED)], progress=False, avoid=[0])
        assert result.status == "ok" and result.actor == 0, result.message

        candidates = [Candidate(TASK, SLOW, origin="killed"), Candidate(TASK, SEED, origin="after")]
        runner, out = evaluate_in_background(pool, candidates)
        while not pool.busy:
            time.sleep(0.05)
        time.sleep(1.0)
        ray.kill(pool.actors[0], no_restart=False)
        runner.join(timeout=400)
        first, second = out["results"]
        print("killed, no retry:", first.message)
        # Which error the driver sees depends on timing: the actor's death itself (actor_died), or
        # the evaluator inside it failing first as its fork server is killed under it (harness_error,
        # e.g. an EOFError on the server's socket). Either way the candidate is labelled as a harness
        # failure, not lost, and not blamed on the candidate.
        assert first.status == "runtime_error" and first.labels in (["actor_died"], ["harness_error"]), first
        assert first.message.startswith(("benchmark actor died", "benchmark actor failed")), first.message
        assert second.status == "ok", second.message  # the restarted actor took the next one


def test_a_candidate_whose_actor_is_lost_is_measured_on_another_actor(ray_cluster, tmp_path_factory):
    """An actor that cannot come back (killed for good, as on a lost node) under a call with no
    retries: the candidate is measured again on the pool's other actor, not masked as actor_died."""
    with pool_for_test(tmp_path_factory, "moves", num_actors=2, max_task_retries=0) as pool:
        candidates = [Candidate(TASK, SLOW, origin="c0"), Candidate(TASK, SLOW, origin="c1"), Candidate(TASK, SEED)]
        runner, out = evaluate_in_background(pool, candidates)
        deadline = time.monotonic() + 120
        while len(pool.busy) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # inside both evaluations
        victim, lost = next(iter(pool.busy.items()))
        ray.kill(pool.actors[victim], no_restart=True)
        runner.join(timeout=400)
        assert not runner.is_alive()
        results = out["results"]
        assert [r.status for r in results] == [Status.OK] * 3, [(r.status, r.message[:80]) for r in results]
        assert results[lost].actor == 1 - victim and not set(results[lost].labels) & HARNESS_LABELS, results[lost]
        assert all(r.actor == 1 - victim for r in results[2:])  # the third waited for the live actor


def test_calls_past_their_timeout_are_labelled_and_a_reward_pool_of_only_those_is_lost(ray_cluster, tmp_path_factory):
    """A call with no answer within call_timeout_s (1 s) is given up: labelled timeout, actor
    restarted. With every call past it, a pool that computes rewards stops the run after
    `lost_after` such results in a row (issue 25: a run whose reward source is gone must not train
    on nothing and exit 0); the same pool recording only labels each candidate and goes on. One
    pool for both: its start is most of the first check's time."""
    with pool_for_test(tmp_path_factory, "impatient", num_actors=1, call_timeout_s=1.0, lost_after=2) as pool:
        start = time.monotonic()
        [result] = pool.evaluate_many([Candidate(TASK, SEED)], progress=False)
        assert result.status == "timeout" and result.labels == ["actor_timeout"], result
        assert time.monotonic() - start < 30
        assert pool.busy == {}

        recorded = pool.evaluate_many([Candidate(TASK, SEED)] * 3, progress=False)
        assert [r.labels for r in recorded] == [["actor_timeout"]] * 3
        pool.computes_rewards = True
        pool.harness_streak = 0
        with pytest.raises(RewardSourceLost, match="its last 2 results were all the harness's failures"):
            pool.evaluate_many([Candidate(TASK, SEED)] * 3, progress=False)
        assert pool.busy == {}

        def result(*labels: str) -> EvalResult:
            return EvalResult(TASK, Status.OK, labels=list(labels))

        pool.harness_streak = 0
        pool.count(result(Label.ACTOR_DIED))
        pool.count(result("custom_kernel"))  # a measured result in between: the streak starts again
        pool.count(result(Label.HARNESS_ERROR))
        assert pool.harness_streak == 1
        with pytest.raises(RewardSourceLost):
            pool.count(result(Label.ACTOR_DIED))


def test_a_reward_pool_that_no_alive_node_can_hold_is_lost(pool):
    """As when the node holding a pool's custom resource is gone: `check_alive` (run every
    LOST_CHECK_S while calls or restarts are outstanding) names what one actor needs."""
    pool.check_alive()  # a recording pool: never raises
    original = dict(pool.spec.resources)
    pool.computes_rewards = True
    try:
        pool.check_alive()  # its node is alive
        pool.spec.resources = {"bench_test_node_gone": 1}
        with pytest.raises(RewardSourceLost, match=r"no node of the cluster can host one benchmark actor.*rewards"):
            pool.check_alive()
    finally:
        pool.spec.resources = original
        pool.computes_rewards = False


def test_a_worker_probes_task_references_on_its_device(tmp_path):
    """Without Ray: the plain worker runs each reference in a sandboxed child (cached per task)."""
    from cudal1.actors.bench_pool import BenchWorker

    worker = BenchWorker("cpu", "cpu", {"cache_dir": str(tmp_path)}, tasks="builtin", task_options={"levels": [1]})
    probes = worker.probe(["level1/13", "level9/9"])
    assert probes["level1/13"] == {"degenerate": None, "failure": None}
    assert probes["level9/9"]["failure"] == "unknown task"
    assert list((tmp_path / "tasks").glob("probe2-*-cpu-cpu.json"))


def test_a_build_pool_builds_each_source_once_ahead_of_timing(ray_cluster, tmp_path_factory):
    """With build actors, each distinct source is built once on them; a build failure is the
    candidate's result without a timing actor ever seeing it; built candidates are timed."""
    with pool_for_test(tmp_path_factory, "built", num_actors=1, build_actors=2, build_cpus=0.5) as p:
        assert len(p.builders) == 2
        results = p.evaluate_many(
            [Candidate(TASK, SEED), Candidate(TASK, NOT_PYTHON), Candidate(TASK, SEED)], progress=False
        )
        with p.stream(progress=False) as stream:
            stream.submit([Candidate(TASK, NOT_PYTHON), Candidate(TASK, SEED)])
            assert wait_for(lambda: stream.submitted == 2 and p.busy)
            stream.submit([Candidate("level1/13", NOT_PYTHON)])
            streamed = stream.results(timeout_s=600)
    assert [r.status for r in results] == ["ok", "compile_error", "ok"], [r.message for r in results]
    # The build actor's verdict (the timing actor would say "candidate failed to import/build").
    assert results[1].message.startswith("SyntaxError"), results[1].message
    assert results[1].task_id == TASK and results[1].candidate_hash
    # A stream builds as it goes; a source submitted again later takes its first build's verdict.
    assert [r.status for r in streamed] == ["compile_error", "ok", "compile_error"], [r.message for r in streamed]
    assert streamed[2].message == streamed[0].message and streamed[2].message.startswith("SyntaxError")
    assert streamed[2].task_id == "level1/13"


def test_a_build_worker_runs_the_candidate_up_to_its_builds(tmp_path_factory):
    """Without Ray: the build worker constructs the candidate with its task's arguments and runs a
    forward, so a build in __init__ is in the cache before any timing actor sees the candidate;
    a candidate of a task it does not know is only imported."""
    from pathlib import Path

    from cudal1.actors.bench_pool import BuildWorker
    from cudal1.bench.evaluator import extensions_dir
    from cudal1.bench.settings import EvalSettings

    source = (Path(__file__).parents[1] / "bench" / "candidates" / "tiny_build_in_init.py").read_text()
    overrides = {**settings(tmp_path_factory), "cache_dir": str(tmp_path_factory.mktemp("build-worker"))}
    worker = BuildWorker(
        "cpu", EvalSettings.for_backend("cpu", **overrides), "cpu-test", tasks="builtin", task_options={"levels": [1]}
    )
    assert worker.cpus is None  # no GPU on this node: builds may use every core
    folder = extensions_dir(worker.settings, "cpu-test", source)
    assert worker.build(Candidate("level9/99", source)) is None
    assert not (folder / "cudal1_tiny_init").exists()  # imported only
    assert worker.build(Candidate(TASK, source)) is None
    assert (folder / "cudal1_tiny_init" / "cudal1_tiny_init.so").exists()
    failed = worker.build(Candidate(TASK, NOT_PYTHON))
    assert failed.status == "compile_error" and failed.task_id == TASK


def test_timing_and_build_actors_split_a_gpu_node(monkeypatch):
    """On a GPU node, the timing actor of GPU i times on slot i and build actors keep off every
    slot; on a node without GPUs (this one), nothing is pinned."""
    from cudal1.actors.bench_pool import build_cores, timing_cores
    from cudal1.bench import cores

    assert timing_cores("cpu") is None
    if cores.gpu_count() == 0:
        assert timing_cores("cuda") is None and build_cores() is None
    monkeypatch.setattr(cores, "gpu_count", lambda: 2)
    monkeypatch.setattr(cores, "usable_cores", lambda: tuple(range(16)))
    monkeypatch.setattr(cores, "thread_siblings", lambda core: (core,))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert timing_cores("cuda") == (12, 13)
    assert build_cores() == tuple(range(12))
    assert timing_cores("cpu") is None


SPLIT_BUILD = SEED.replace(
    "        super().__init__()\n",
    "        super().__init__()\n        self.lib = build('cudal1_tiny_split')\n",
).replace(
    "class ModelNew",
    # A plain C++ library built in __init__ (no torch headers: about a second to compile), with
    # its source at a stable path in the build directory, so that ninja finds it up to date.
    "import os\nfrom torch.utils.cpp_extension import load\n\n\n"
    "def build(name):\n"
    "    folder = os.path.join(os.environ['TORCH_EXTENSIONS_DIR'], 'src')\n"
    "    os.makedirs(folder, exist_ok=True)\n"
    "    path = os.path.join(folder, name + '.cpp')\n"
    "    if not os.path.exists(path):\n"
    "        with open(path, 'w') as f:\n"
    "            f.write('extern \"C\" int cudal1_tiny() { return 42; }\\n')\n"
    "    return load(name=name, sources=[path], is_python_module=False, verbose=True)\n\n\n"
    "class ModelNew",
)


@contextlib.contextmanager
def builder_node(address: str, cache: Path):
    """A second Ray node on this machine, with one CPU and the resource "builder", whose processes
    see a tmpfs of their own at `cache` (a mount namespace of its own): a build node with its own
    disk at the same cache path as the timing node's. Stopped (SIGTERM to its process group, which
    drains it) when the block ends. Skips the test where mount namespaces are not allowed."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -m is not allowed here (no CAP_SYS_ADMIN): no second filesystem view")
    # This interpreter by its path, not the `ray` script's: torch's build files name torch's headers
    # by the interpreter's path, and a node whose workers reach them by another would build anew.
    ray_cli = f"{shlex.quote(sys.executable)} -m ray.scripts.scripts"
    start = (
        f"mount -t tmpfs tmpfs {shlex.quote(str(cache))} && exec {ray_cli} start "
        f"--address={shlex.quote(address)} --num-cpus=1 --resources='{{\"builder\": 1}}' --block "
        "--disable-usage-stats"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    node = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", start],
        start_new_session=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(
            lambda: node.poll() is None and any("builder" in n["resources"] for n in alive_nodes()), timeout_s=120
        ), f"the builder node did not join (exit code {node.poll()})"
        yield
    finally:
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(timeout=60)


def test_builds_on_a_node_of_their_own_travel_to_the_timing_actor(ray_cluster, tmp_path_factory):
    """The build actor runs on a CPU node of its own (resource "builder"), whose cache directory is
    a filesystem only it sees; the timing actor (on the head node) receives the build packed and
    hashed, puts it into its own cache at the same path, and times the candidate without
    compiling (ninja finds the library up to date) and with a correct result."""
    from cudal1.actors.artifacts import marker_path
    from cudal1.bench.evaluator import extensions_dir

    cache = tmp_path_factory.mktemp("split-cache")
    fields = {
        "num_actors": 1,
        "resources": {"node:__internal_head__": 0.001},
        "build_actors": 1,
        "build_cpus": 1,
        "build_resources": {"builder": 1},
        "settings": {**settings(tmp_path_factory), "cache_dir": str(cache)},
    }
    with builder_node(ray_cluster["address"], cache), pool_for_test(tmp_path_factory, "split", **fields) as p:
        where = ray.get(p.builders[0].__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))
        assert where != p.workers[0]["node_id"]
        result = p.evaluate(Candidate(TASK, SPLIT_BUILD))
    assert result.status == "ok", result.message + result.log[-2000:]
    assert result.speedup > 0
    ext = extensions_dir(p.settings, p.workers[0]["device"]["arch"], SPLIT_BUILD)
    assert (ext / "cudal1_tiny_split" / "cudal1_tiny_split.so").is_file()  # arrived on the head's disk
    assert marker_path(ext).is_file()
    # Built on the builder node (the prebuild's record travelled with it), not compiled here.
    assert result.phases_s.get("prebuild", 0) > 0 and result.build_seconds > 0
    assert "ninja: no work to do" in result.log, result.log[-2000:]
    assert "c++" not in result.log, result.log[-2000:]


def test_an_artifact_that_fails_its_check_is_the_harness_failure(tmp_path_factory):
    """Without Ray: a build whose bytes changed on the way is refused before anything is written,
    and the result is labelled the harness's failure (measured again elsewhere, never paid)."""
    from cudal1.actors.artifacts import Artifact, ArtifactInfo
    from cudal1.bench.evaluator import extensions_dir

    worker = BenchWorker("plain", "cpu", {**settings(tmp_path_factory), "cache_dir": str(tmp_path_factory.mktemp("c"))})
    arch = worker.device_info["arch"]
    key = extensions_dir(worker.settings, arch, SEED).relative_to(worker.settings.cache_dir).as_posix()
    bad = Artifact(ArtifactInfo(key, "0" * 64, 3, "/elsewhere"), b"abc")
    result = worker.evaluate(Candidate(TASK, SEED), bad)
    assert result.status == "runtime_error" and set(result.labels) == {"harness_error", "artifact_refused"}
    assert HARNESS_LABELS.intersection(result.labels) and "SHA-256" in result.message
    assert not extensions_dir(worker.settings, arch, SEED).exists()


def test_a_pool_whose_build_nodes_are_gone_builds_on_its_timing_actors(ray_cluster, tmp_path_factory, monkeypatch):
    """Build actors that no alive node can hold (their nodes lost; here a resource no node has)
    would keep their builds waiting forever: the pool gives them up within `LOST_CHECK_S` (1 s
    here instead of 10) and its timing actor evaluates the candidates itself."""
    monkeypatch.setattr(bench_pool, "LOST_CHECK_S", 1.0)
    fields = {"num_actors": 1, "build_actors": 1, "build_resources": {"no_such_node": 1}, "check_nodes": False}
    with pool_for_test(tmp_path_factory, "no-builders", **fields) as p:
        result = p.evaluate(Candidate(TASK, SEED))
        assert p.builders == []
    assert result.status == "ok", result.message
