"""The shared-storage contract: every actor that writes under run_dir proves at start that it and
the driver see the same directory; otherwise the job stops naming the actor and its node."""

from __future__ import annotations

import json

import pytest

from cudal1.actors.storage import PROBE_PREFIX, SharedStorageError, answer_probe, check_answers, write_probe


def test_a_shared_directory_passes_and_leaves_nothing_behind(tmp_path):
    probe, token = write_probe(tmp_path)
    assert probe.name.startswith(PROBE_PREFIX) and json.loads(probe.read_text())["token"] == token
    replies = [answer_probe(probe, token, "buffer"), answer_probe(probe, token, "learner rank 0")]
    assert all(r["seen"] and r["why"] is None for r in replies)
    check_answers(probe, token, replies)
    assert list(tmp_path.iterdir()) == []


def test_each_kind_of_unshared_directory_is_named(tmp_path):
    probe, token = write_probe(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    missing = answer_probe(other / probe.name, token, "buffer")  # another node: no such file
    assert not missing["seen"] and "does not exist on this node" in missing["why"]
    stale, _ = write_probe(other)  # another node's run_dir at the same path, from another run
    foreign = answer_probe(stale, token, "learner")
    assert not foreign["seen"] and "another run's token" in foreign["why"]
    with pytest.raises(SharedStorageError) as e:
        check_answers(probe, token, [missing, foreign, answer_probe(probe, token, "generator")])
    text = str(e.value)
    assert f"buffer on node {missing['node']}: " in text and "learner on node" in text
    assert "generator" not in text and "ray.storage=driver_node" in text
    assert not probe.exists()  # cleaned up even when raising


def test_an_answer_the_driver_cannot_read_back_fails(tmp_path):
    probe, token = write_probe(tmp_path)
    reply = answer_probe(probe, token, "buffer")
    next(p for p in tmp_path.iterdir() if p.name.endswith(".buffer")).unlink()  # written on the actor's node only
    with pytest.raises(SharedStorageError, match="which the driver .* cannot read back"):
        check_answers(probe, token, [reply])


def test_actors_answer_the_probe_through_their_shell(ray_cluster, tmp_path):
    from cudal1.actors.shells import remote_class
    from cudal1.pipeline.context import check_shared_run_dir

    from collections import OrderedDict

    actor = remote_class(OrderedDict, num_cpus=0).remote()
    try:
        check_shared_run_dir(tmp_path, {"buffer": actor})  # one machine: shared
        with pytest.raises(SharedStorageError, match="buffer on node .*does not exist on this node"):
            import ray

            probe, token = write_probe(tmp_path)
            reply = ray.get(actor.storage_probe(str(tmp_path / "absent" / probe.name), token, "buffer"))
            check_answers(probe, token, [reply])
    finally:
        actor.kill()


def test_driver_node_mode_pins_with_hard_affinity(ray_cluster):
    import ray

    from cudal1.actors.storage import driver_node_options

    strategy = driver_node_options()["scheduling_strategy"]
    assert strategy.node_id == ray.get_runtime_context().get_node_id() and strategy.soft is False
