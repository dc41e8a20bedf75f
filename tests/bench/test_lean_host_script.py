"""scripts/gpu_lean_host.py builds its lean-host variants from tests/bench/candidates/busy_poll_lean_host.py
by text substitution: each variant must be the one it is named for, and a change to the candidate
file that a substitution no longer finds must stop the script rather than run the wrong variant."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_lean_host.py"


@pytest.fixture(scope="module")
def lean():
    spec = importlib.util.spec_from_file_location("gpu_lean_host", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("task", ["matmul4096", "scale16m"])
@pytest.mark.parametrize("variant", ["lean", "lean-nospin", "lean-percall", "lean-nospin-percall"])
def test_each_variant_is_the_host_it_is_named_for(lean, task, variant):
    spin, per_call = lean.VARIANTS[variant]
    src = lean.lean_source(task, spin, per_call)
    compile(src, f"{task}-{variant}", "exec")
    assert "host._locate(o, host.out_specs[0])" in src and '"addr"' not in src
    assert f"if {spin}:" in src and "__SPIN__" not in src
    assert ("host._sync())[0] for args in host.sets]" in src) is per_call
    assert ("x * 2.0 + 1.0" in src) is (task == "scale16m")


def test_a_substitution_that_no_longer_matches_stops_the_script(lean):
    with pytest.raises(ValueError, match="no longer holds"):
        lean._swap("class ModelNew: pass", "outs = [host.model(*args) for args in host.sets]", "x")


@pytest.mark.parametrize("task", ["matmul4096", "scale16m"])
def test_the_underclaiming_host_scales_its_figures_by_the_factor(lean, task):
    src = lean.underclaim_source(task, 0.85)
    compile(src, f"{task}-underclaim", "exec")
    assert "t * 0.85" in src and "__FACTOR__" not in src
    assert ("x * 2.0 + 1.0" in src) is (task == "scale16m")
    with pytest.raises(ValueError):
        lean.underclaim_source(task, 1.5)
