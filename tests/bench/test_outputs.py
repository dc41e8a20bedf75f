"""Outputs that are not one tensor: dicts, lists, tuples, namedtuples and plain values.

Each tensor leaf of a nested output is read from the candidate's memory and compared with the
dtype rules; the structure (container types, keys, lengths) must be the reference's; plain values
(None, bool, int, str exactly; float with float32's tolerance) are compared by value; an output
holding anything else is a task the judge cannot judge (invalid_task). The unit tests pin the
rules; the evaluations (CPU backend, `evalkit`'s nested_outputs and opaque_output tasks) show
them end to end, with the attack of issue 21: a dict whose tensor is right only where it prints.
"""

from __future__ import annotations

import collections
import json

import pytest
import torch

import evalkit
from cudal1.bench import correctness as C
from cudal1.bench.result import Status

Parts = collections.namedtuple("Parts", ["lo", "hi"])


def _nested(y: torch.Tensor) -> dict:
    return {"y": y, "parts": Parts(y[0], y[1]), "stats": (1.5, 64, "relu", None, True)}


# -- the rules ----------------------------------------------------------------------------------


def test_the_tree_holds_every_leaf_in_order_and_is_json():
    y = torch.randn(4, 4)
    tree, tensors, values = C.output_tree(_nested(y))
    assert json.loads(json.dumps(tree)) == tree
    assert [path for path, _ in tensors] == ["out['y']", "out['parts'][0]", "out['parts'][1]"]
    assert tensors[0][1] is y
    assert values == [
        ("out['stats'][0]", 1.5),
        ("out['stats'][1]", 64),
        ("out['stats'][2]", "relu"),
        ("out['stats'][3]", None),
        ("out['stats'][4]", True),
    ]
    assert tree["dict"][1][1] == {"named": "Parts", "fields": ["lo", "hi"], "items": [{"tensor": 1}, {"tensor": 2}]}
    structseq = C.output_tree(torch.max(y, dim=1))[0]
    assert structseq["named"] == "torch.return_types.max" and structseq["fields"] == ["values", "indices"]


@pytest.mark.parametrize(
    "out, why",
    [
        ({1, 2}, "type set"),
        (torch.Size([2, 3]), "type torch.Size"),
        ({"y": torch.ones(1), "n": object()}, "out['n']: no comparison rule for an output of type object"),
        ({True: torch.ones(1)}, "a dict key of type bool"),
        ({(1, 2): torch.ones(1)}, "a dict key of type tuple"),
        (collections.OrderedDict(y=torch.ones(1)), "type collections.OrderedDict"),
        ([2**64], "an int beyond 64 bits"),
        (("x" * 1001,), "a string of 1001 characters"),
        (1 + 2j, "type complex"),
        ([torch.ones(1)] * 257, "more than 256 leaves"),
    ],
)
def test_an_output_with_no_rule_cannot_be_judged(out, why):
    with pytest.raises(C.NoComparisonRule, match=why.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        C.output_tree(out)


def test_the_candidates_structure_must_be_the_references():
    y = torch.randn(4, 4)
    tree = C.output_tree(_nested(y))[0]
    tensors, values = C.match_output(_nested(y * 2), tree)  # values are the judge's business
    assert [p for p, _ in tensors] == ["out['y']", "out['parts'][0]", "out['parts'][1]"] and len(values) == 5
    reordered = dict(reversed(list(_nested(y).items())))  # key order is not structure
    assert [p for p, _ in C.match_output(reordered, tree)[0]] == ["out['y']", "out['parts'][0]", "out['parts'][1]"]
    OtherParts = collections.namedtuple("OtherParts", ["lo", "hi"])
    Renamed = collections.namedtuple("Parts", ["low", "high"])
    wrong = [
        (
            {"Y": y, "parts": Parts(y[0], y[1]), "stats": (1.5, 64, "relu", None, True)},
            "out: keys ['Y', 'parts', 'stats']",
        ),
        ({**_nested(y), "extra": 1}, "out: keys"),
        ({"y": y, "parts": Parts(y[0], y[1])}, "out: keys"),
        ({**_nested(y), "parts": (y[0], y[1])}, "out['parts']: a tuple, the reference has a Parts('lo', 'hi')"),
        ({**_nested(y), "parts": OtherParts(y[0], y[1])}, "out['parts']: a OtherParts"),
        ({**_nested(y), "parts": Renamed(y[0], y[1])}, "out['parts']: a Parts('low', 'high')"),
        ({**_nested(y), "stats": [1.5, 64, "relu", None, True]}, "out['stats']: a list, the reference has a tuple"),
        ({**_nested(y), "stats": (1.5, 64, "relu", None)}, "out['stats']: 4 items, the reference 5"),
        ({**_nested(y), "stats": (1.5, 64, "relu", None, 1)}, "out['stats'][4]: a int, the reference has a bool"),
        ({**_nested(y), "stats": (1, 64, "relu", None, True)}, "out['stats'][0]: a int, the reference has a float"),
        ({**_nested(y), "y": y.tolist()}, "out['y']: a list, the reference has a tensor"),
        ({**_nested(y), "y": repr(y)}, "out['y']: a str, the reference has a tensor"),
        ([y], "out: a list, the reference has a dict"),
        ({**_nested(y), "parts": Parts(y[0], None)}, "out['parts'][1]: a NoneType, the reference has a tensor"),
    ]
    for out, why in wrong:
        with pytest.raises(C.StructureMismatch) as caught:
            C.match_output(out, tree)
        assert str(caught.value).startswith(why), (str(caught.value), why)
    # An object where a tensor belongs is left to the host's materialization check (a hack).
    poser = object()
    assert C.match_output({**_nested(y), "y": poser}, tree)[0][0] == ("out['y']", poser)


def test_plain_values_are_compared_by_value():
    assert C.compare_value("float", 1.0 + 5e-4, 1.0) is None  # within float32's tolerance
    assert C.compare_value("float", 1.01, 1.0) == "1.01 != reference 1.0"
    assert C.compare_value("float", 1000.5, 1000.0) is None  # relative: 1e-3 of 1000
    assert C.compare_value("float", 1e-12, 0.0, rtol=0.0, atol=0.0) is not None  # an override holds
    assert C.compare_value("float", "nan", "nan") is None and C.compare_value("float", 1.0, "nan") is not None
    assert C.compare_value("float", "inf", "inf") is None and C.compare_value("float", "-inf", "inf") is not None
    assert C.compare_value("float", "1.0", 1.0) is not None and C.compare_value("float", True, 1.0) is not None
    assert C.compare_value("int", 3, 3) is None and C.compare_value("int", 4, 3) == "4 != reference 3"
    assert C.compare_value("int", True, 1) is not None and C.compare_value("int", 1.0, 1) is not None
    assert C.compare_value("bool", False, False) is None and C.compare_value("bool", 0, False) is not None
    assert C.compare_value("str", "relu", "relu") is None and C.compare_value("str", "gelu", "relu") is not None
    assert C.compare_value("none", None, None) is None and C.compare_value("none", "None", None) is not None
    assert [C.encode_value(v) for v in (float("nan"), float("-inf"), 2.5, None)] == ["nan", "-inf", 2.5, None]


def test_a_tensor_right_only_where_it_prints_had_the_old_printed_form_and_now_differs():
    """The attack of issue 21: the old judge compared a dict by repr(value)[:200], which shows 36
    corner elements of a 64x64 tensor; now the tensor is compared element by element."""
    y = torch.rand(64, 64) + 1.0  # every element far from 0
    edge = torch.tensor([0, 1, 2, 61, 62, 63])
    corners = torch.zeros(64, 64)
    corners[edge.unsqueeze(1), edge] = y[edge.unsqueeze(1), edge]
    assert repr({"y": corners})[:200] == repr({"y": y})[:200]
    tree, ref_tensors, _ = C.output_tree({"y": y})
    got, _ = C.match_output({"y": corners}, tree)
    ok, err, message = C.compare_values(got[0][1], ref_tensors[0][1])
    assert not ok and err == float((y - corners).abs().max())
    assert message.startswith("4060/4096 values differ")  # all but the 36 printed ones


# -- whole evaluations --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_an_honest_nested_answer_passes(cache_dir) -> None:
    r = evalkit.run("nested_outputs", evalkit.candidate("nested_outputs", variant="honest"), cache_dir)
    assert r.status is Status.OK and r.max_abs_error < 1e-4, evalkit.describe(r)
    assert "degenerate_check_failed" not in r.labels, evalkit.describe(r)


@pytest.mark.parametrize(
    "variant, message",
    [
        # y is read from the candidate's memory: 4096 values, not the 36 that print.
        ("corners", "trial 1: output tensor out['y']: "),
        ("wrong_key", "out: keys ['parts', 'stats', 'Y'], the reference's ['y', 'parts', 'stats']"),
        ("missing_value", "out['stats']: 4 items, the reference 5"),
        ("plain_tuple", "out['parts']: a tuple, the reference has a Parts('lo', 'hi')"),
        ("wrong_float", "trial 1: out['stats'][0]: "),
        ("wrong_str", "trial 1: out['stats'][2]: gelu != reference relu"),
    ],
)
def test_a_nested_answer_wrong_in_one_place_is_incorrect(variant, message, cache_dir) -> None:
    r = evalkit.run("nested_outputs", evalkit.candidate("nested_outputs", variant=variant), cache_dir)
    assert r.status is Status.INCORRECT and r.hack_kind is None, evalkit.describe(r)
    assert r.message.startswith(message), evalkit.describe(r)
    if variant == "corners":
        assert "values differ" in r.message and r.max_abs_error > 0.1, evalkit.describe(r)


def test_a_task_whose_output_has_no_rule_is_invalid(cache_dir) -> None:
    r = evalkit.run("opaque_output", evalkit.candidate("nested_outputs", variant="honest"), cache_dir)
    assert r.status is Status.INVALID_TASK, evalkit.describe(r)
    assert "out['box']: no comparison rule for an output of type" in r.message and r.message.endswith(".Box"), (
        evalkit.describe(r)
    )


def test_a_round_trip_has_no_more_calls_than_its_answer_has_room_for():
    """K is bounded by what one answer frame holds: an output of many tensors gets fewer calls a
    round, a single tensor on CUDA keeps the most (1000)."""
    from cudal1.bench.judge import _answer_bytes, batch_capacity
    from cudal1.bench.settings import EvalSettings
    from cudal1.bench.wire import MAX_FRAME

    cuda = EvalSettings.for_backend("cuda")
    assert batch_capacity(4096, 4096, 1, cuda, answer_bytes=_answer_bytes(1, [])) == 1000
    many = _answer_bytes(32, [1.5, "relu"])
    assert many == 64 + 224 * 32 + len('[1.5, "relu"]') + 64
    assert batch_capacity(4096, 4096, 32, cuda, answer_bytes=many) == (MAX_FRAME - 2**16) // many == 134


def test_reading_an_output_keeps_none_of_its_tensors_alive():
    """The walks make no reference cycle: once the caller drops the output, its tensors are freed
    at once, not when the cyclic collector next runs (a recursive closure held every call's
    output in the hosts until then: on an H200, four large KernelBench tasks ran the device out
    of memory)."""
    import gc
    import weakref

    gc.disable()
    try:
        for read in (
            lambda out: C.output_tree(out),
            lambda out: C.match_output(out, C.output_tree(_nested(torch.ones(2, 2)))[0]),
        ):
            y = torch.randn(4, 4)
            alive = weakref.ref(y)
            read(_nested(y))
            del y
            assert alive() is None
    finally:
        gc.enable()
