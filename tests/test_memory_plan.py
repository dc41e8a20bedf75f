"""benchmarks/memory_plan.py: the shapes give the published parameter counts and the plan's terms
scale as its formula says."""

import importlib.util
import sys
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "memory_plan", Path(__file__).parents[1] / "benchmarks" / "memory_plan.py"
)
memory_plan = importlib.util.module_from_spec(spec)
sys.modules["memory_plan"] = memory_plan  # dataclasses look their module up
spec.loader.exec_module(memory_plan)


def test_qwen25_shapes_have_their_published_sizes():
    sizes = {m.name: m.params / 1e9 for m in memory_plan.MODELS}
    assert sizes == pytest.approx({"1.5B": 1.54, "7B": 7.62, "32B": 32.76}, abs=0.01)


def test_sharded_states_shrink_with_ranks_and_offload_moves_them_to_the_host():
    m = memory_plan.MODELS[2]
    kw = dict(prompt=2048, response=8192)
    one, eight = memory_plan.plan(m, 1, "zero3+ckpt", **kw)[0], memory_plan.plan(m, 8, "zero3+ckpt", **kw)[0]
    # model states 16P/N and the reference 2P/N: 18P * (1 - 1/8) bytes fewer per GPU on 8 ranks
    assert one - eight == pytest.approx(18 * m.params * 7 / 8 / memory_plan.GIB, rel=1e-9)
    gpu, host = memory_plan.plan(m, 8, "+offload_opt", **kw)
    assert eight - gpu == pytest.approx(12 * m.params / 8 / memory_plan.GIB) and host == pytest.approx(
        16 * m.params / memory_plan.GIB
    )
