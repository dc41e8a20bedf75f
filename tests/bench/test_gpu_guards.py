"""Guards that need a CUDA device: side streams (Python and C++), partial writes, CUDA faults, a
candidate host that answers before its GPU work is done, and global flags that slowed the
reference when it shared the candidate's process (fused attention backends switched off).

Skipped without a GPU. Run on the GPU machine with `python -m pytest -m gpu tests/bench/test_gpu_guards.py`.
The inline-CUDA candidates here build once each (about a minute on an H200's host) into the build cache.
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import textwrap

import pytest
import torch

from cudal1.bench.evaluator import evaluate
from cudal1.bench.result import Status
from cudal1.bench.settings import EvalSettings, parse_overrides
from cudal1.bench.timing import jitter
from cudal1.tasks.task import Task

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

MATMUL_TASK = Task(
    level=1,
    problem_id=901,
    name="GpuGuardMatmul",
    source=textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, A, B):
                return torch.relu(A @ B)

        N = 4096

        def get_inputs():
            return [torch.randn(N, N), torch.randn(N, N)]

        def get_init_inputs():
            return []
        """
    ),
)

SCALE_TASK = Task(
    level=1,
    problem_id=902,
    name="GpuGuardScale",
    source=textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return x * 2.0 + 1.0

        N = 1 << 24

        def get_inputs():
            return [torch.randn(N)]

        def get_init_inputs():
            return []
        """
    ),
)


def _settings(**kw):
    """The guard tests' settings; GUARDS_SET (FIELD=VALUE words, `parse_overrides`) changes them
    for a GPU run that compares settings (scripts/gpu_acceptance.sh passes it on)."""
    extra = parse_overrides(os.environ.get("GUARDS_SET", "").split())
    return EvalSettings.for_backend("cuda", **{"rounds": 3, "calls_per_round": 10, **extra, **kw})


HONEST_MATMUL = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.relu(A @ B)
"""

PY_SIDE_STREAM = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()
    def forward(self, A, B):
        # The classic exploit: the work runs on a stream the caller's timer does not watch.
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            out = torch.relu(A @ B)
        return out
"""

CUDA_COMMON = r"""
import torch, torch.nn as nn
from torch.utils.cpp_extension import load_inline
cpp = "torch::Tensor run(torch::Tensor x);"
"""

CPP_SIDE_STREAM = (
    CUDA_COMMON
    + r'''
cuda = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
__global__ void scale_slow(const float* x, float* y, long n, int reps) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = x[i]; float acc = 0.f;
        for (int r = 0; r < reps; ++r) acc = acc * 0.5f + v;   // busy work, result stays 2v-ish
        y[i] = v * 2.0f + 1.0f + 0.0f * acc; }
}
static cudaStream_t side = nullptr;
torch::Tensor run(torch::Tensor x) {
    if (!side) cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    auto y = torch::empty_like(x);
    long n = x.numel();
    scale_slow<<<(n + 255) / 256, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, 2000);
    return y;   // no synchronisation: the caller's stream knows nothing of this work
}
"""
mod = load_inline("cudal1_test_cpp_side_stream", cpp_sources=cpp, cuda_sources=cuda, functions=["run"], verbose=False)
class ModelNew(nn.Module):
    def forward(self, x):
        return mod.run(x.contiguous())
'''
)

PARTIAL_WRITE = (
    CUDA_COMMON
    + r'''
cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void half_scale(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n / 2) y[i] = x[i] * 2.0f + 1.0f;   // the second half is never written
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    half_scale<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
mod = load_inline("cudal1_test_partial_write", cpp_sources=cpp, cuda_sources=cuda, functions=["run"], verbose=False)
class ModelNew(nn.Module):
    def forward(self, x):
        return mod.run(x.contiguous())
'''
)

ILLEGAL_ADDRESS = (
    CUDA_COMMON
    + r'''
cuda = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void wild(float* y) { float* p = (float*)0x10; *p = 1.0f; y[0] = 0.f; }
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    wild<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
    return y;
}
"""
mod = load_inline("cudal1_test_illegal_address", cpp_sources=cpp, cuda_sources=cuda, functions=["run"], verbose=False)
class ModelNew(nn.Module):
    def forward(self, x):
        return mod.run(x.contiguous())
'''
)

# Stops the candidate host from synchronizing (on its own object, so no patched function shows) and
# computes on a side stream: the host answers while the GPU still works. The judge's copy of the
# outputs runs only after that work (its clock is still running) or reads it unfinished.
NO_HOST_SYNC = """
import gc, torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()
        host = next(o for o in gc.get_objects() if type(o).__name__ == "Host" and hasattr(o, "chan"))
        host._sync = lambda: None
    def forward(self, A, B):
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            return torch.relu(A @ B)
"""

SDPA_TASK = Task(
    level=1,
    problem_id=903,
    name="GpuGuardSdpa",
    source=textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Model(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v)

        def get_inputs():
            return [torch.randn(16, 16, 2048, 64, dtype=torch.float16) for _ in range(3)]

        def get_init_inputs():
            return []
        """
    ),
)

SDPA_HONEST = """
import torch.nn as nn, torch.nn.functional as F
class ModelNew(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
"""

SDPA_FLAGS_TOGGLE = """
import torch, torch.nn as nn, torch.nn.functional as F
_b = torch.backends.cuda
def _fused(on):
    _b.enable_flash_sdp(on); _b.enable_mem_efficient_sdp(on); _b.enable_cudnn_sdp(on)
_fused(False)
class ModelNew(nn.Module):
    def forward(self, q, k, v):
        _fused(True)
        try:
            return F.scaled_dot_product_attention(q, k, v)
        finally:
            _fused(False)
"""

HONEST_SCALE = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.addcmul(torch.ones_like(x), x, torch.full_like(x, 2.0))
"""


def test_python_side_stream_is_timed_and_labelled():
    honest = evaluate(MATMUL_TASK, HONEST_MATMUL, "cuda", settings=_settings())
    side = evaluate(MATMUL_TASK, PY_SIDE_STREAM, "cuda", settings=_settings())
    assert honest.status is Status.OK, honest.message
    assert side.status is Status.OK, side.message
    assert "side_streams" in side.labels
    # The same work on another stream must not look faster: the timer waits for the whole device.
    assert side.speedup < 1.3, side.speedup
    assert side.candidate.median_ms > 0.7 * honest.candidate.median_ms


def test_cpp_side_stream_is_timed_and_labelled():
    result = evaluate(SCALE_TASK, CPP_SIDE_STREAM, "cuda", settings=_settings())
    # Work on a C++-created stream either finishes inside the timer or the output check sees it unfinished.
    if result.status is Status.OK:
        assert "side_streams" in result.labels
        assert "custom_kernel" in result.labels
        assert result.speedup < 1.0, result.speedup  # the busy loop makes it slower than x*2+1
    else:
        assert result.status in (Status.INCORRECT, Status.HACK), result.message


def test_partial_write_kernel_fails():
    result = evaluate(SCALE_TASK, PARTIAL_WRITE, "cuda", settings=_settings())
    assert result.status in (Status.INCORRECT, Status.HACK), result.message


def test_illegal_address_is_contained_and_next_evaluation_is_clean():
    bad = evaluate(SCALE_TASK, ILLEGAL_ADDRESS, "cuda", settings=_settings())
    assert bad.status is Status.RUNTIME_ERROR, bad.message
    assert "cuda_fault" in bad.labels or "worker_crashed" in bad.labels, bad.labels
    good = evaluate(SCALE_TASK, HONEST_SCALE, "cuda", settings=_settings())
    assert good.status is Status.OK, good.message


def test_an_answer_before_the_gpu_work_is_done_earns_nothing():
    honest = evaluate(MATMUL_TASK, HONEST_MATMUL, "cuda", settings=_settings())
    early = evaluate(MATMUL_TASK, NO_HOST_SYNC, "cuda", settings=_settings())
    assert honest.status is Status.OK, honest.message
    if early.status is Status.OK:
        assert early.speedup < 1.3 and early.candidate.median_ms > 0.7 * honest.candidate.median_ms, early
    else:
        assert early.status in (Status.INCORRECT, Status.HACK), early.message


def test_fused_attention_switched_off_does_not_slow_the_reference():
    """The in-process evaluator paid this 15.9× on an H200: the reference's attention fell back to
    the math path. The reference now runs in the judge's process, untouched."""
    honest = evaluate(SDPA_TASK, SDPA_HONEST, "cuda", settings=_settings())
    cheat = evaluate(SDPA_TASK, SDPA_FLAGS_TOGGLE, "cuda", settings=_settings())
    assert honest.status is Status.OK and cheat.status is Status.OK, (honest.message, cheat.message)
    assert any(label.startswith("global_flags:") and "flash_sdp" in label for label in cheat.labels), cheat.labels
    assert cheat.reference.median_ms < 1.5 * honest.reference.median_ms, (cheat.reference, honest.reference)
    assert cheat.speedup < 1.5, cheat.speedup


def test_a_cuda_slots_views_reach_only_their_own_bytes():
    """Each input tensor a CUDA slot gives (the judge's and both hosts' views of a round trip's
    input sets, `Slot.view`) is the slot's own memory, no copy, with a storage of its own bytes
    only: through the tensor API a call reaches nothing of the neighbouring input sets (the
    batching of tests/bench/candidates/batches_the_round.py). The CPU test is in test_wire.py."""
    from cudal1.bench.slots import Slot, plan

    x = torch.randn(3, 5, device="cuda")
    y = torch.arange(7, device="cuda")
    specs, set_bytes = plan([x, y])
    sets = 4
    slot = Slot(set_bytes * sets, "cuda")
    for j in range(sets):
        for spec, t in zip(specs, (x, y)):
            slot.view(spec.moved(j * set_bytes)).copy_(t + j)
    for j in range(sets):
        for spec, t in zip(specs, (x, y)):
            here = spec.moved(j * set_bytes)
            view = slot.view(here)
            storage = view.untyped_storage()
            assert view.is_cuda and torch.equal(view, t + j)
            assert view.data_ptr() == storage.data_ptr() == slot._ptr + here.offset  # the slot itself
            assert storage.nbytes() == here.nbytes and view.storage_offset() == 0
            with pytest.raises(RuntimeError):  # past the storage's end
                view.as_strided((2, view.numel()), (view.numel(), 1))
            with pytest.raises(RuntimeError):  # set_ would have to grow a storage that is not resizable
                torch.empty(0, dtype=view.dtype, device="cuda").set_(storage, 0, (2, view.numel()), (view.numel(), 1))
    slot.view(specs[0].moved(set_bytes)).fill_(-1)  # two views of one range are one memory
    assert torch.equal(slot.view(specs[0].moved(set_bytes)), torch.full((3, 5), -1.0, device="cuda"))


def test_the_control_computes_every_call_of_a_cuda_round_on_its_own():
    from evalkit import SIN_CHAIN, candidate

    r = evaluate(SIN_CHAIN, candidate("honest_sin_chain"), "cuda", settings=_settings())
    assert r.status is Status.OK and "BATCHED" not in r.log, r.message


@pytest.mark.parametrize(
    "name",
    [
        "batches_via_frames",
        "batches_via_referrers",
        "defers_to_the_last_call",
        "lean_host_batches",
    ],
)
def test_work_batched_across_a_cuda_round_pays_no_more_than_its_one_call_rounds(name):
    """Three ways to do a CUDA round's calls at once: the first call finds the others' inputs
    (frames, the garbage collector: on CUDA a round's input sets are all in the host before its
    first call, a limit, since a per-set hand-over between processes costs 240-450 us a call;
    the CPU's guard, tests/bench/test_redteam5.py, holds each call to its own set) or every call
    but the last hands in an output the last one writes (the judge reads a CUDA round after its
    last call); or a host the candidate rebuilt runs the round stacked and answers with a
    busy-polling, bookkeeping-free loop, which also takes its lean fixed cost off the one-call
    comparison. One-call round trips
    (`EvalSettings.one_call_rounds`) floor what batched rounds pay (`timing.one_call_floor_ms`):
    the right value is that each, batching, is paid no more than 1.25x (the reference's own
    computation, stacked), where without the floor it is paid more than that. sin_chain is
    launch-bound and one evaluation is noisy (hosts that compute each call on their own were paid
    0.86-1.16x in 11 evaluations on an H200; one referrers evaluation 1.334x on an H100, with the
    reference host's batched rounds swinging 0.44-0.78 ms a call, and 1.044x on its rerun;
    docs/benchmarks.md, forty-second session): where the first evaluation pays more than 1.25x,
    the honest control and the candidate run alternately until each has three, and the
    candidate's median is held to 1.25x the control's."""
    from evalkit import SIN_CHAIN, candidate

    source = candidate(name)
    free = evaluate(SIN_CHAIN, source, "cuda", settings=_settings(one_call_rounds=0))
    print(f"{name}: without one-call rounds {free.status.value} {free.speedup} {free.message[:300]!r}")
    assert free.status is Status.OK, (free.status, free.message, free.log[-1000:])
    # CUDA's defaults: as many one-call rounds as a tenth of the call asks (16 left an allowance
    # of half sin_chain's 0.36 ms call on an H100), the calibration's bias taken signed, both
    # hosts on one core (unpinned, their one-call difference reached 0.39 ms and wandered).
    floored = evaluate(SIN_CHAIN, source, "cuda", settings=_settings())
    walls = {k: [t["wall_ms"] for t in v] for k, v in floored.round_trips.items() if "one-call" in k}
    trips = {k: round(statistics.median(v), 4) for k, v in walls.items()}
    cal = [c - r for c, r in zip(*(walls.get(f"calibration one-call {w}", []) for w in ("candidate", "reference")))]
    print(
        f"{name}: without one-call rounds {free.speedup:.3f}x, with {floored.speedup or float('nan'):.3f}x "
        f"{floored.status.value} {floored.labels}; K {floored.calls_per_round}, one-call medians {trips}, "
        f"calibration difference jitter {jitter(cal[:16]) if len(cal) > 1 else float('nan'):.4f} ms over the first 16 "
        f"of {len(cal)}"
    )
    if os.environ.get("GUARDS_DUMP"):
        # The whole record, one line: its round trips in order (`go_s`) for the drift's diagnosis,
        # and what benchmarks/one_call_replay.py needs to give the floor under each cap.
        dump = pathlib.Path(os.environ["GUARDS_DUMP"]) / f"{name}.jsonl"
        dump.parent.mkdir(parents=True, exist_ok=True)
        dump.write_text(json.dumps({"kind": name, "result": floored.to_dict()}) + "\n")
    assert free.speedup > 1.25, (free.speedup, free.message)
    assert "BATCHED" in floored.log or "DEFERRED" in floored.log, floored.log[-500:]
    if floored.status is not Status.OK or floored.speedup <= 1.25:
        return
    paid = {"candidate": [floored.speedup], "control": []}
    control = candidate("honest_sin_chain")
    while len(paid["control"]) < 3:
        for who, src in (("control", control), ("candidate", source)):
            if len(paid[who]) < 3:
                r = evaluate(SIN_CHAIN, src, "cuda", settings=_settings())
                assert r.status is Status.OK, (who, r.status, r.message, r.log[-500:])
                paid[who].append(r.speedup)
    mine, theirs = (statistics.median(paid[k]) for k in ("candidate", "control"))
    print(f"{name}: first evaluation above 1.25x; paid {paid}, medians {mine:.3f}x against the control's {theirs:.3f}x")
    assert mine <= 1.25 * theirs, paid


def test_a_host_polling_for_its_go_cannot_compute_the_round_before_the_clock():
    """`EvalSettings.warm_go`: the judge asks a host to poll for its go and waits for its answer
    before it stages the round trip's inputs. A host that computes what its slot holds while it
    keeps the judge waiting (tests/bench/candidates/precomputes_while_polling.py) then computes
    the last round trip's inputs: the right value is that it is caught (wrong outputs) or paid no
    more than the honest copy it is, about 1x. (Asked after the staging, it would be paid for none
    of its work.)"""
    from evalkit import candidate

    r = evaluate(MATMUL_TASK, candidate("precomputes_while_polling"), "cuda", settings=_settings(warm_go=True))
    print(f"precomputes_while_polling: {r.status.value} {r.speedup} {r.labels} {r.message[:200]!r}")
    assert r.status in (Status.OK, Status.INCORRECT, Status.HACK), (r.status, r.message)
    assert r.status is not Status.OK or r.speedup < 1.1, (r.speedup, r.labels)


def test_a_host_that_warms_the_device_before_its_go_gains_nothing():
    """The poll tells a host that a timed round trip comes next (`EvalSettings.warm_go`), and
    what it does before answering is off the clock. A host that first keeps the device busy for
    about 5 ms with matrix products of its own (tests/bench/candidates/bursts_before_the_go.py)
    starts each timed round trip on whatever clocks that raised; the reference host does not.
    The right value: over three evaluations each, alternated, the bursting copy of the reference
    is paid within 3% of the honest copy's median (the self check's band is 2%)."""
    from evalkit import candidate

    sources = {"honest": HONEST_MATMUL, "burst": candidate("bursts_before_the_go", burst_ms=5)}
    paid = {name: [] for name in sources}
    for _ in range(3):
        for name, source in sources.items():
            r = evaluate(MATMUL_TASK, source, "cuda", settings=_settings())
            print(f"{name}: {r.status.value} {r.speedup} {r.labels} {r.message[:200]!r}")
            assert r.status is Status.OK, (name, r.status, r.message, r.log[-500:])
            assert name == "honest" or "BURST" in r.log, r.log[-500:]
            paid[name].append(r.speedup)
    honest, burst = (statistics.median(paid[k]) for k in ("honest", "burst"))
    print(f"bursts_before_the_go: paid {paid}; medians honest {honest:.4f}x, burst {burst:.4f}x")
    assert burst <= honest * 1.03, paid


REPEAT_TASK = Task(
    level=1,
    problem_id=919,
    name="GpuGuardRepeat",
    source=textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def forward(self, x):
                return torch.sin(x).repeat(4, 1)

        def get_inputs():
            return [torch.randn(2048, 2048)]

        def get_init_inputs():
            return []
        """
    ),
)


def test_an_output_on_device_pages_mapped_four_times_is_copied_before_the_judge_reads_it():
    """The CUDA form of memory repeated through the page tables: one physical allocation mapped
    4 times (cuMemCreate, cuMemMap) holds a contiguous output of which 3/4 was never written.
    The judge reads only memory the host can export with cuIpcGetMemHandle, which refuses such a
    mapping, so the host copies the output into memory of its own inside the round trip: the
    candidate pays a copy of the whole output, more than writing it (the reference's sin and
    repeat move about 112 MiB a call, this 160 MiB)."""
    import runpy

    from cudal1.bench.readers import describe

    path = pathlib.Path(__file__).parent / "candidates" / "aliased_device_pages.py"
    tile = 2 << 20
    view = runpy.run_path(str(path))["aliased"](tile, 4)
    view[: tile // 4].fill_(3.0)
    torch.cuda.synchronize()
    assert view[3 * tile // 4 : 3 * tile // 4 + 4].tolist() == [3.0] * 4  # the fourth block is the first
    with pytest.raises(RuntimeError):
        describe(view)
    result = evaluate(REPEAT_TASK, path.read_text(), "cuda", settings=_settings())
    print(f"aliased device pages: {result.status.value} {result.speedup} {result.message!r}")
    assert result.status is Status.OK, result.message
    assert result.speedup < 1.0, result.speedup


@pytest.mark.parametrize("reserve_mib", [64, 1024])
def test_a_candidate_holding_the_device_memory_cannot_make_its_failure_the_harness(reserve_mib):
    """A candidate that takes all but `reserve_mib` of the device's free memory in ModelNew() and
    keeps it: the judge's or the reference host's next allocation may fail (device memory is not
    limited per process). The right value: never `harness_error` (which the reward masks); a
    failure is `resource_exceeded`, the candidate's."""
    from evalkit import candidate

    r = evaluate(SCALE_TASK, candidate("holds_device_memory", reserve_mib=reserve_mib), "cuda", settings=_settings())
    print(f"reserve {reserve_mib} MiB: {r.status.value} {r.labels} {r.message[:300]!r}; {r.log.strip()[-200:]!r}")
    assert "HOLDING" in r.log, r.log[-500:]
    assert "harness_error" not in r.labels, (r.status, r.message)
    assert r.status in (Status.OK, Status.RESOURCE_EXCEEDED), (r.status, r.message)
