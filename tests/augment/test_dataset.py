"""The augmented dataset without endpoints or actors: records appended and read back (a torn last
line cut off), versions, the manifest's counts, what stage 1 takes from a dataset (matched by task
source) and the SFT pairs built from it; the augment job's config validation."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from cudal1.augment.dataset import AugmentRecord, DatasetWriter, augmented_variants, load_dataset
from cudal1.config import ConfigError, load_augment_config, load_config
from cudal1.pipeline.sft_data import sft_pairs, stage1_solutions
from cudal1.policy.parsing import parse_response
from cudal1.tasks import find_task, load_tasks
from cudal1.tasks.suite import seeds_for
from cudal1.tasks.task import reference_as_candidate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def task():
    return find_task(load_tasks("builtin"), "level1/13")


def record(task, attempt, code, speedup=None, status="ok", kept=False, **kw):
    return AugmentRecord(
        task.task_id, task.source_hash, attempt, "teacher", "m", status, speedup=speedup, code=code, kept=kept, **kw
    )


def test_records_survive_a_torn_line_and_a_reopen_and_the_manifest_counts_them(tmp_path, task):
    w = DatasetWriter(tmp_path / "ds", version="2")
    w.append(
        [
            record(task, 0, "A", 1.5, kept=True),
            record(task, 1, None, status="parse_error", labels=["parse_error:no_code_block"]),
        ]
    )
    w.close()
    path = tmp_path / "ds" / "records.jsonl"
    with open(path, "a") as f:
        f.write('{"task_id": "level1/13", "attem')  # a crash mid-write
    w = DatasetWriter(tmp_path / "ds", version="2")
    assert w.done() == {(task.task_id, task.source_hash, 0), (task.task_id, task.source_hash, 1)}
    assert path.read_text().endswith("}\n")  # the torn tail was cut off
    w.append([record(task, 2, "B", 0.8, kept=True)])
    m = w.write_manifest(
        [{"name": "teacher", "base_url": "http://x/v1", "model": "m"}],
        [{"task_id": task.task_id, "name": task.name, "suite": "builtin", "source_hash": task.source_hash}],
        k=4,
    )
    w.close()
    assert m["counts"]["records"] == 3 and m["counts"]["kept"] == 2 and m["counts"]["correct"] == 2
    assert m["counts"]["by_status"] == {"ok": 2, "parse_error": 1}
    assert m["counts"]["tasks"][task.task_id] == {"attempts": 3, "correct": 2, "kept": 2, "best_speedup": 1.5}
    ds = load_dataset(tmp_path / "ds")
    assert ds.version == "2" and [r.attempt for r in ds.records] == [0, 1, 2] and ds.skipped_lines == 0
    assert json.loads((tmp_path / "ds" / "manifest.json").read_text())["records_sha256"] == m["records_sha256"]
    with pytest.raises(ValueError, match="holds version '2'"):
        DatasetWriter(tmp_path / "ds", version="3")
    with pytest.raises(FileNotFoundError, match="not an augmented dataset"):
        load_dataset(tmp_path)


def test_stage1_takes_kept_variants_of_the_same_task_source_and_builds_a_contrastive_example(tmp_path, task):
    seed = seeds_for([task], "cpu")[task.task_id]
    ref = reference_as_candidate(task.source)
    w = DatasetWriter(tmp_path / "ds", version="1")
    w.append(
        [
            record(task, 0, seed, 2.0, kept=True, analysis="One fused pass instead of three."),
            record(task, 1, "class ModelNew: wrong", status="incorrect"),
            record(task, 2, ref, 1.0, kept=False, duplicate_of=0),  # not kept: not used
            AugmentRecord(task.task_id, "0" * 16, 3, "teacher", "m", "ok", speedup=5.0, code="other source", kept=True),
        ]
    )
    w.write_manifest([], [])
    w.close()
    ds = load_dataset(tmp_path / "ds")
    found = augmented_variants(ds, [task])
    assert [(e.code, e.speedup, e.origin) for e in found[task.task_id]] == [(seed, 2.0, "augmented:teacher/0")]

    solutions = stage1_solutions([task], {task.task_id: seed}, str(tmp_path / "ds"))
    assert [e.origin for e in solutions] == ["seed", "augmented:teacher/0"] and math.isnan(solutions[0].speedup)

    # As stage 1 sees them after validation: the augmented variant at 2.0x, the reference at 1.00x.
    from cudal1.records import Exemplar

    variants = [Exemplar(task.task_id, ref, 1.0, origin="reference"), found[task.task_id][0]]
    pairs = sft_pairs(task.source, found[task.task_id], variants, k=2, min_gain=1.01)
    assert [kind for kind, _, _ in pairs] == ["plain", "contrastive"]
    (_, plain, plain_answer), (_, contrastive, target) = pairs
    assert "Solution A: 1.00x" in contrastive[1]["content"] and seed not in contrastive[1]["content"]
    for answer in (plain_answer, target):
        parsed = parse_response(answer)
        assert parsed.code.strip() == seed.strip() and parsed.sections["analysis"] == "One fused pass instead of three."
    assert "Solution" not in plain[1]["content"]
    # the seed and an augmented copy of it: one plain example
    seed_exemplar = Exemplar(task.task_id, seed + "\n", math.nan, origin="seed")
    kinds = [kind for kind, _, _ in sft_pairs(task.source, [seed_exemplar, found[task.task_id][0]], variants, 2, 1.01)]
    assert kinds == ["plain", "contrastive"]
    # one variant only, or two within min_gain: no contrastive example
    assert len(sft_pairs(task.source, found[task.task_id], variants[1:], k=2, min_gain=1.01)) == 1
    assert (
        len(sft_pairs(task.source, found[task.task_id], [variants[0], Exemplar(task.task_id, seed, 1.005)], 2, 1.01))
        == 1
    )


def test_the_augment_config_is_validated(tmp_path, monkeypatch):
    good = {
        "endpoints": [{"name": "a", "base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": None}],
        "bench": {"pools": {"cpu": {"backend": "cpu"}}},
        "out_dir": str(tmp_path / "ds"),
    }
    cfg = load_augment_config(good)
    assert cfg.endpoints[0].concurrency == 4 and cfg.k == 4

    def bad(key, change, match):
        raw = json.loads(json.dumps(good))
        change(raw)
        with pytest.raises(ConfigError, match=match) as e:
            load_augment_config(raw)
        assert e.value.key == key

    bad("endpoints", lambda r: r.update(endpoints=[]), "at least one endpoint")
    bad("endpoints[0].base_url", lambda r: r["endpoints"][0].update(base_url="127.0.0.1:8000"), "http")
    bad("endpoints[0].model", lambda r: r["endpoints"][0].update(model=""), "required")
    bad("endpoints[1].name", lambda r: r["endpoints"].append(dict(r["endpoints"][0])), "unique")
    bad("endpoints[0].concurrency", lambda r: r["endpoints"][0].update(concurrency=0), ">= 1")
    bad("endpoints[0].top_p", lambda r: r["endpoints"][0].update(top_p=0.0), r"\(0, 1\]")
    monkeypatch.delenv("CUDAL1_NO_SUCH_KEY", raising=False)
    bad(
        "endpoints[0].api_key_env",
        lambda r: r["endpoints"][0].update(api_key_env="CUDAL1_NO_SUCH_KEY"),
        "CUDAL1_NO_SUCH_KEY is not set",
    )
    bad("attempts_per_task", lambda r: r.update(attempts_per_task=0), ">= 1")
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps({"format": "cudal1-augmented", "version": "7"}))
    bad("version", lambda r: None, "holds version '7'")

    from hydra import compose, initialize_config_dir

    from cudal1.config import register_schema

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        train = compose("config", overrides=["run_dir=/tmp/x"])
    train.data.augmented = str(tmp_path)
    with pytest.raises(ConfigError, match="no manifest.json") as e:
        load_config(train)
    assert e.value.key == "data.augmented"
    train.data.augmented = str(tmp_path / "ds")
    assert load_config(train).data.augmented == str(tmp_path / "ds")


def test_the_job_without_endpoints_is_one_line_and_exit_code_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "jobs/augment.py", f"out_dir={tmp_path / 'ds'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        == "augment: config error at endpoints: at least one endpoint is needed (base_url, model, api_key_env)"
    )
