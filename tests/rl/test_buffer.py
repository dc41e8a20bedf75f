import json

import pytest

from cudal1.policy.parsing import parse_response
from cudal1.records import Exemplar
from cudal1.rl.buffer import FILENAME, ExemplarBuffer, code_hash
from cudal1.tasks import load_builtin


def ex(task, speedup, tag, status="ok", step=0):
    code = f"import torch\n\nclass ModelNew(torch.nn.Module):\n    tag = {tag!r}\n"
    return Exemplar(task_id=task, code=code, speedup=speedup, status=status, step=step)


def test_add_sample_best_stats(tmp_path):
    buf = ExemplarBuffer(tmp_path, max_per_task=10, seed=1)
    added = buf.add(
        [ex("level1/1", 1.2, "a"), ex("level1/1", 2.0, "b"), ex("level1/1", 1.5, "c"), ex("level1/2", 0.9, "z")]
    )
    assert added == 4 and len(buf) == 4 and buf.tasks() == ["level1/1", "level1/2"]
    assert buf.best("level1/1").speedup == 2.0
    assert buf.best("level9/9") is None and buf.sample("level9/9") == []
    got = buf.sample("level1/1")
    assert len(got) == 2 and got[0].speedup < got[1].speedup
    assert buf.sample("level1/2") == [buf.best("level1/2")]
    stats = buf.stats()
    assert stats["total"] == 4
    assert stats["tasks"]["level1/1"] == {"count": 3, "best_speedup": 2.0, "mean_speedup": pytest.approx(1.5666666)}


def test_only_correct_solutions_are_kept_and_duplicates_are_dropped(tmp_path):
    buf = ExemplarBuffer(tmp_path)
    a = ex("level1/1", 1.5, "a")
    same_code_with_trailing_space = Exemplar(task_id="level1/1", code=a.code.replace("\n", "  \n"), speedup=3.0)
    n = buf.add(
        [
            a,
            same_code_with_trailing_space,
            ex("level1/1", 5.0, "wrong", status="incorrect"),
            ex("level1/1", 7.0, "hack", status="hack"),
            ex("level1/1", float("nan"), "nan"),
            Exemplar(task_id="level1/2", code=a.code, speedup=1.1),  # same code, other task: kept
        ]
    )
    assert n == 2
    assert [e.speedup for e in buf.exemplars("level1/1")] == [1.5]
    assert buf.stats()["duplicates"] == 1 and buf.stats()["rejected"] == 3
    assert code_hash(a.code) == code_hash(same_code_with_trailing_space.code)
    assert buf.add([a]) == 0


def test_cap_evicts_oldest_but_never_the_best(tmp_path):
    buf = ExemplarBuffer(tmp_path, max_per_task=3)
    buf.add([ex("t", 9.0, "best"), ex("t", 1.0, "b"), ex("t", 1.1, "c")])
    buf.add([ex("t", 1.2, "d")])
    assert [e.speedup for e in buf.exemplars("t")] == [9.0, 1.1, 1.2]
    buf.add([ex("t", 1.3, "e"), ex("t", 1.4, "f")])
    assert [e.speedup for e in buf.exemplars("t")] == [9.0, 1.3, 1.4]
    assert buf.stats()["evicted"] == 3
    # An evicted code may come back later (it is new to the pool again).
    assert buf.add([ex("t", 1.0, "b")]) == 1


def test_restore_rebuilds_the_same_state(tmp_path):
    buf = ExemplarBuffer(tmp_path, max_per_task=3, seed=5)
    for i in range(7):
        buf.add([ex("t", 1.0 + i / 10, f"c{i}", step=i), ex("u", 2.0, f"u{i % 2}")])
    before = {t: [e.to_dict() for e in buf.exemplars(t)] for t in buf.tasks()}
    buf.close()

    again = ExemplarBuffer(tmp_path, max_per_task=3, seed=5)
    assert {t: [e.to_dict() for e in again.exemplars(t)] for t in again.tasks()} == before
    assert again.restored == 9  # 7 for "t", 2 distinct codes for "u"
    # Compaction keeps the state and drops the evicted lines from the file.
    again.compact()
    assert len((tmp_path / FILENAME).read_text().splitlines()) == 5  # 3 for "t", 2 for "u"
    again.add([ex("t", 3.0, "new")])
    again.close()
    third = ExemplarBuffer(tmp_path, max_per_task=3)
    assert third.best("t").speedup == 3.0 and len(third) == 5


def test_torn_last_line_is_skipped_and_cut(tmp_path):
    buf = ExemplarBuffer(tmp_path)
    buf.add([ex("t", 1.5, "a"), ex("t", 2.5, "b")])
    buf.close()
    path = tmp_path / FILENAME
    whole = json.dumps(ex("t", 4.0, "torn").to_dict())
    with open(path, "a") as f:
        f.write(whole[: len(whole) // 2])  # the process died mid-write

    again = ExemplarBuffer(tmp_path)
    assert len(again) == 2 and again.stats()["skipped_lines"] == 1
    assert path.read_text().endswith("\n")  # the fragment is gone, appends start clean
    again.add([ex("t", 3.0, "c")])
    again.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["task_id"] == "t" for line in lines)
    assert len(ExemplarBuffer(tmp_path)) == 3


def test_torn_line_that_happens_to_parse_is_still_dropped(tmp_path):
    path = tmp_path / FILENAME
    good = json.dumps(ex("t", 1.5, "a").to_dict())
    path.write_text(good + "\n" + good.replace("1.5", "2.5").replace("'a'", "'b'"))  # no final newline
    buf = ExemplarBuffer(tmp_path)
    assert len(buf) == 1 and path.read_text() == good + "\n"


def test_bad_middle_line_is_skipped(tmp_path):
    path = tmp_path / FILENAME
    lines = [json.dumps(ex("t", 1.5, "a").to_dict()), "{not json", "42", json.dumps(ex("t", 2.5, "b").to_dict())]
    path.write_text("\n".join(lines) + "\n")
    buf = ExemplarBuffer(tmp_path)
    assert len(buf) == 2 and buf.stats()["skipped_lines"] == 2


def test_sampling_is_reproducible_from_the_seed(tmp_path):
    items = [ex("t", 1.0 + i / 5, f"c{i}") for i in range(10)]
    draws = []
    for sub in ("a", "b"):
        buf = ExemplarBuffer(tmp_path / sub, seed=11)
        buf.add(items)
        draws.append([[e.code for e in buf.sample("t")] for _ in range(20)])
    assert draws[0] == draws[1]


def test_build_prompt_for_a_builtin_task(tmp_path):
    task = load_builtin().tasks[0]
    buf = ExemplarBuffer(tmp_path, seed=0)
    plain = buf.build_prompt(task)
    assert task.source.strip() in plain[1]["content"] and "Solution A" not in plain[1]["content"]

    buf.add([ex(task.task_id, 1.3, "slow"), ex(task.task_id, 2.7, "fast")])
    messages = buf.build_prompt(task)
    user = messages[1]["content"]
    assert task.source.strip() in user
    assert "1.30x" in user and "2.70x" in user and "tag = 'fast'" in user
    # The prompt's own examples do not confuse the parser when echoed back.
    assert parse_response(user).error is None


def test_draw_returns_the_exemplars_its_prompt_shows(tmp_path):
    task = load_builtin().tasks[0]
    buf = ExemplarBuffer(tmp_path, seed=3)
    assert buf.draw(task)[1] == []
    buf.add([ex(task.task_id, 1.0 + i / 4, f"c{i}") for i in range(6)])
    messages, shown = buf.draw(task, k=2)
    user = messages[1]["content"]
    assert len(shown) == 2 and all(e.task_id == task.task_id for e in shown)
    # Exactly the drawn ones are in the prompt, with their speedups (the caller's early stop reads them).
    for e in buf.exemplars(task.task_id):
        drawn = e in shown
        assert (e.code.split("tag = ")[1].strip() in user) == drawn, e
        assert (f"{e.speedup:.2f}x" in user) == drawn, e


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError):
        ExemplarBuffer(tmp_path, max_per_task=0)
    with pytest.raises(ValueError):
        ExemplarBuffer(tmp_path, tau=0)
