"""In-process unit tests of what the candidate host watches, and of the parent's labels (the
end-to-end cheats are in test_guards.py)."""

import threading
import time

import torch

from cudal1.bench import guards
from cudal1.bench.labels import kernel_labels, source_labels
from cudal1.bench.result import HackKind


def test_global_flags_diff_and_reduced_precision():
    pristine = guards.GlobalFlags()
    threads = torch.get_num_threads()
    try:
        torch.set_float32_matmul_precision("high")
        torch.set_num_threads(1)
        changed = guards.GlobalFlags()
        diff = pristine.diff(changed)
        assert set(diff) >= {"float32_matmul_precision", "num_threads"}
        # "high" also turns on TF32 for CUDA matmuls: both are reported.
        assert set(guards.reduced_precision_flags(pristine, changed)) == {
            "float32_matmul_precision",
            "cuda.matmul.allow_tf32",
        }
        torch.set_float32_matmul_precision(pristine.values["float32_matmul_precision"])
        torch.set_num_threads(threads)
        # Defaults that are already "reduced" (fp16 reduced-precision reductions) are not the candidate's doing.
        assert guards.reduced_precision_flags(pristine, guards.GlobalFlags()) == []
    finally:
        torch.set_float32_matmul_precision("highest")
        torch.set_num_threads(threads)


def test_function_snapshot_sees_replacements_and_names_timer_tampering(monkeypatch):
    snap = guards.FunctionSnapshot()
    assert snap.changed() == []
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    changed = snap.changed()
    assert changed == ["torch.allclose"]
    assert guards.patch_hack_kind(changed) is HackKind.MONKEY_PATCH
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert guards.patch_hack_kind(snap.changed()) is HackKind.TIMER_TAMPERING


def test_function_snapshot_watches_the_evaluators_own_modules(monkeypatch):
    from cudal1.bench import correctness

    snap = guards.FunctionSnapshot()
    monkeypatch.setattr(correctness, "compare_values", lambda *a, **k: (True, 0.0, ""))
    assert "cudal1.bench.correctness.compare_values" in snap.changed()


def test_an_evaluator_module_imported_later_is_no_patch(monkeypatch):
    """Triton imports `cudal1.bench.tritoncache` (its cache manager) only when it first needs its
    cache, after the host's snapshot: its classes are new, not changed (every torch.compile
    candidate was once a monkey_patch hack on a GPU). An attribute added to a class watched
    before is still reported."""
    import sys
    import types

    snap = guards.FunctionSnapshot()
    late = types.ModuleType("cudal1.bench._imported_late")
    late.Manager = type("Manager", (), {"__module__": "cudal1.bench._imported_late", "put": lambda self: None})
    monkeypatch.setitem(sys.modules, "cudal1.bench._imported_late", late)
    assert snap.changed() == []
    monkeypatch.setattr(guards.FunctionSnapshot, "extra", lambda self: None, raising=False)
    assert snap.changed() == ["cudal1.bench.guards.FunctionSnapshot.extra"]


def test_python_threads_lists_live_threads():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    before = guards.python_threads()
    t.start()
    try:
        assert guards.python_threads() - before == {t.ident}
    finally:
        stop.set()
        t.join()


def test_op_recorder_records_ops_and_dtypes():
    x = torch.randn(4, 4)
    with guards.OpRecorder() as rec:
        (x.half() @ x.half()).float()
    assert "mm" in rec.ops
    assert torch.float16 in rec.dtypes


def test_operator_canary_sees_an_aten_override():
    assert guards.operator_canary("cpu") is None
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("le.Tensor", lambda a, b: torch.ones(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.bool), "CPU")
    try:
        assert guards.operator_canary("cpu") is not None
    finally:
        lib._destroy()
    assert guards.operator_canary("cpu") is None


def test_source_labels():
    src = "from torch.utils.cpp_extension import load_inline\ng = torch.cuda.CUDAGraph()\nm = torch.compile(m)"
    labels = source_labels(src)
    assert {"custom_kernel_source", "cuda_graphs", "torch_compile"} <= set(labels)
    assert source_labels("return torch.relu(x)") == []


def test_kernel_labels_from_mapped_objects_and_operators():
    ops = {"reference": ["mm", "relu"], "candidate": ["mm", "relu", "add"]}
    # A mapped library of its own does not hide that every reference operator is still called.
    assert kernel_labels(["/cache/ext/abc/ext.so"], ops) == ["custom_kernel", "calls_reference_ops"]
    assert kernel_labels(["/cache/ext/abc/ext.so"], {"reference": ["mm", "relu"], "candidate": ["mm"]}) == [
        "custom_kernel"
    ]
    assert kernel_labels(["/cache/ext/abc/ext.so"], None) == ["custom_kernel"]
    assert kernel_labels(["/cache/ext/abc/ext.so"], None, profile_failed=True) == [
        "custom_kernel",
        "calls_reference_ops",
    ]
    assert kernel_labels([], ops) == ["pytorch_only", "calls_reference_ops"]
    assert kernel_labels([], {"reference": ["mm", "relu"], "candidate": ["mm", "clamp_min"]}) == ["pytorch_only"]
    assert kernel_labels([], None) == []


def test_torch_compile_is_not_a_monkey_patch():
    # Dynamo patches torch.nn.Module.__init__/__setstate__ the first time a compiled function is
    # entered; the guard installs that patch before any snapshot, so an honest torch.compile
    # (the report's baseline, `cudal1.bench.baselines`) is labelled, not called a hack.
    snap = guards.FunctionSnapshot()
    compiled = torch.compile(lambda x: torch.sigmoid(x) * x, backend="eager")
    x = torch.randn(8)
    assert torch.equal(compiled(x), torch.sigmoid(x) * x)
    assert snap.changed() == []
