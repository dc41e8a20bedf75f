"""Job start-up without Ray: the tasks kept after the probe of each reference."""

import logging

import pytest

from cudal1.config import ConfigError
from cudal1.launch import usable_tasks
from cudal1.tasks.task import Task


def _task(i: int) -> Task:
    return Task(level=1, problem_id=i, name=f"t{i}", source="")


def test_degenerate_and_failed_tasks_are_left_out_with_a_log_line(caplog):
    tasks = [_task(1), _task(2), _task(3), _task(4)]
    probes = {
        "level1/1": {"degenerate": None, "failure": None},
        "level1/2": {"degenerate": "output all zero on seeds [0, 1, 2]", "failure": None},
        "level1/3": {"degenerate": None, "failure": "import failed: ImportError: x"},
        # level1/4: not probed at all (an actor that did not answer for it): kept
    }
    with caplog.at_level(logging.WARNING, logger="cudal1.launch"):
        kept = usable_tasks(tasks, probes)
    assert [t.task_id for t in kept] == ["level1/1", "level1/4"]
    assert "level1/2 (t2) left out: degenerate: output all zero" in caplog.text
    assert "level1/3 (t3) left out: import failed" in caplog.text
    with pytest.raises(ConfigError, match="config error at tasks: none of the 2 selected tasks"):
        usable_tasks(tasks[1:3], probes)


def test_compose_then_engine_kwargs_follow_the_rollout_backend():
    from cudal1.config import load_config
    from cudal1.launch import compose, engine_kwargs

    vllm = load_config(compose("config", ["rollout=vllm", "rollout.kv_cache_gib=0.75"]))
    assert engine_kwargs(vllm) == {"kv_cache_gib": 0.75}
    named = load_config(compose("config", ["rollout=vllm", "+rollout.engine_kwargs.kv_cache_gib=0.25"]))
    assert engine_kwargs(named) == {"kv_cache_gib": 0.25}  # what engine_kwargs names wins
    assert "kv_cache_gib" not in engine_kwargs(load_config(compose("config", ["rollout=hf"])))


def test_user_errors_turn_a_config_error_into_one_line_and_exit_code_2(capsys):
    from cudal1.config import ConfigError
    from cudal1.launch import user_errors

    with pytest.raises(SystemExit) as exit_info, user_errors("train"):
        raise ConfigError("learner.lr", "must be > 0, got -1")
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "train: config error at learner.lr: must be > 0, got -1\n"
    with pytest.raises(RuntimeError), user_errors("train"):  # a bug keeps its traceback
        raise RuntimeError("x")
    from cudal1.actors.preflight import RayStartError

    said = "Ray did not start (starting a local Ray cluster): Timed out waiting for file x"
    with pytest.raises(SystemExit) as exit_info, user_errors("optimize"):
        raise RayStartError(said)
    assert exit_info.value.code == 2 and capsys.readouterr().err == f"optimize: {said}\n"


def test_an_unknown_task_id_or_source_is_a_config_error_with_the_key():
    from cudal1.config import ConfigError
    from cudal1.launch import compose, select_tasks

    with pytest.raises(ConfigError, match=r"config error at tasks.ids: no task level9/99 among \d+ tasks"):
        select_tasks(compose("config", ["tasks.ids=[level9/99]"]))
    with pytest.raises(ConfigError, match="config error at tasks.source: "):
        select_tasks(compose("config", ["tasks.source=/nonexistent/kernelbench"]))
    assert [t.task_id for t in select_tasks(compose("config", ["tasks.ids=[level1/3]"]))] == ["level1/3"]


@pytest.mark.parametrize(
    "exit_with, contents, kept",
    [
        (SystemExit(2), ["hydra", "logs"], False),  # a start that failed: nothing that looks like a run is left
        (RuntimeError("boom"), ["hydra"], False),
        (KeyboardInterrupt(), [], False),
        (SystemExit(2), ["hydra", "state.json"], True),  # a run with results (a failed resume) is kept
        (SystemExit(2), ["hydra", "checkpoints"], True),
        (SystemExit(0), ["hydra"], True),
        (None, ["hydra"], True),  # success
    ],
)
def test_no_empty_output_removes_only_a_failed_start_without_results(tmp_path, exit_with, contents, kept):
    from cudal1.launch import no_empty_output

    run = tmp_path / "run"
    run.mkdir()
    for name in contents:
        (run / name).mkdir() if "." not in name else (run / name).write_text("{}")
    raised = type(exit_with) if exit_with is not None else None
    try:
        with no_empty_output(run):
            if exit_with is not None:
                raise exit_with
    except BaseException as e:  # noqa: BLE001 - re-raised unchanged is what is checked
        assert type(e) is raised
    else:
        assert raised is None
    assert run.exists() is kept


def test_a_lost_reward_pool_is_one_message_and_exit_code_1(capsys):
    from cudal1.actors.health import RewardSourceLost
    from cudal1.launch import infrastructure_errors

    with pytest.raises(SystemExit) as exit_info:
        with infrastructure_errors("train"):
            raise RewardSourceLost("pool 'cpu' computes the run's rewards, and its last 4 results were ...")
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "train: stopped: pool 'cpu' computes the run's rewards, and its last 4 results were ..."
    assert "resume=true" in err[1]
    with pytest.raises(ValueError):  # anything else passes through unchanged
        with infrastructure_errors("train"):
            raise ValueError("a bug keeps its traceback")


def test_a_lost_learner_rank_or_a_stalled_actor_is_one_message_naming_it_and_exit_code_1(capsys):
    from cudal1.actors.health import ActorStalled, LearnerRankLost
    from cudal1.launch import infrastructure_errors

    with pytest.raises(SystemExit) as exit_info:
        with infrastructure_errors("train"):
            raise LearnerRankLost("learner rank 1 (actor 3f2a9c01)", "grpo_step", "the actor died unexpectedly")
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        "train: stopped: learner rank 1 (actor 3f2a9c01) died during grpo_step: the actor died unexpectedly"
    )
    assert "once the rank's node is back" in err[1] and "resume=true continues from the last checkpoint" in err[1]
    with pytest.raises(SystemExit) as exit_info:
        with infrastructure_errors("train"):
            raise ActorStalled(["learner rank 0 (actor aa)", "learner rank 1 (actor bb)"], "save", 1800)
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        "train: stopped: learner rank 0 (actor aa), learner rank 1 (actor bb): no answer to save within 1800 s"
    )
