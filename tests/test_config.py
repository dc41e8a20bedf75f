"""The Hydra configs compose, and bad values fail before any actor starts, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf.errors import ConfigKeyError, ValidationError

from cudal1.config import ConfigError, load_config, register_schema, to_object

CONF = str(Path(__file__).resolve().parents[1] / "conf")
register_schema()


def composed(name: str = "config", overrides: list[str] = ()):
    with initialize_config_dir(config_dir=CONF, version_base=None):
        return compose(name, overrides=list(overrides))


def test_default_and_smoke_configs_validate():
    cfg = load_config(composed(overrides=["run_dir=/tmp/x"]))
    assert cfg.stage.name == "all" and list(cfg.bench.pools) == ["cpu"] and cfg.bench.primary == "cpu"
    assert cfg.model.path is None  # the embedded small model
    smoke = load_config(composed("smoke", ["run_dir=/tmp/x"]))
    assert smoke.rollout.backend == "hf" and smoke.stage.contrastive_rl.steps == 1
    assert smoke.bench.pools.cpu.num_actors == 1
    assert to_object(smoke).stage.contrastive_rl.group_size == 2
    # The default learns on its slow/fast variants with the plain prompt SFT taught; the smoke run
    # keeps the seeds and contrastive prompts, so it shows every path of the machinery.
    assert cfg.data.variants == "slow_fast" and not cfg.stage.sft.seeds and cfg.stage.contrastive_rl.exemplars == 0
    assert smoke.data.variants is None and smoke.stage.sft.seeds and smoke.stage.contrastive_rl.exemplars == 2
    assert cfg.stage.self_train.epochs == 0 and smoke.stage.self_train.epochs == 2


def test_sampling_settings_are_free_when_no_rl_step_runs():
    cfg = load_config(composed(overrides=["rollout.temperature=0.7", "stage.name=sft"]))
    assert cfg.rollout.temperature == 0.7
    cfg = load_config(composed(overrides=["rollout.top_p=0.9", "stage.contrastive_rl.steps=0"]))
    assert cfg.rollout.top_p == 0.9


def test_a_bench_group_replaces_the_pools():
    cfg = load_config(composed(overrides=["bench=a100_h100_l40"]))
    assert sorted(cfg.bench.pools) == ["a100", "h100", "l40"] and cfg.bench.pools.h100.accelerator_type == "H100"


@pytest.mark.parametrize(
    "override, key",
    [
        ("learner.zero_stage=5", "learner.zero_stage"),
        ("learner.loss_agg=ppo", "learner.loss_agg"),
        ("bench.primary=a100", "bench.primary"),
        ("stage.contrastive_rl.group_size=1", "stage.contrastive_rl.group_size"),
        ("rollout.max_tokens=9000", "rollout.max_tokens"),
        ("rollout.top_p=1.5", "rollout.top_p"),
        ("stage.contrastive_rl.bucket_scale=cubic", "stage.contrastive_rl.bucket_scale"),
        ("rollout.temperature=0.7", "rollout.temperature"),  # RL needs the engines' raw logprobs exact
        ("rollout.top_p=0.9", "rollout.top_p"),
        ("learner.dual_clip=1.0", "learner.dual_clip"),
        ("learner.tis_cap=0", "learner.tis_cap"),
        ("learner.tis_cap=1.0", "learner.tis_cap"),  # a cap at 1 would cut on-policy tokens too
        ("pipeline.mode=eager", "pipeline.mode"),
        ("model.path=/nonexistent/model", "model.path"),
        ("model.path=models:/cudal1-policy", "model.path"),  # no version or alias
        ("tasks.source=/nonexistent/kb", "tasks.source"),
        ("+bench.pools.cpu.settings.roundz=3", "bench.pools.cpu.settings.roundz"),
        ("bench.pools.cpu.backend=tpu", "bench.pools.cpu.backend"),
        ("bench.pools.cpu.num_actors=0", "bench.pools.cpu.num_actors"),
        ("bench.pools.cpu.build_actors=-1", "bench.pools.cpu.build_actors"),
        ("bench.pools.cpu.backend=cuda", "bench.pools.cpu.num_gpus"),  # a cuda pool with no GPU per actor
        ("bench.pools.cpu.lost_after=0", "bench.pools.cpu.lost_after"),
        ("bench.pools.cpu.max_task_retries=-1", "bench.pools.cpu.max_task_retries"),
        ("bench.primary=h100", "bench.primary"),
        ("learner.num_ranks=0", "learner.num_ranks"),
        ("learner.offload_param=true", "learner.offload_param"),  # the cpu learner is ZeRO-2
        ("learner.logprob_chunk=0", "learner.logprob_chunk"),
        ("data.variants=no_such_set", "data.variants"),
        ("stage.sft.validate_seeds=false", "stage.sft.validate_seeds"),  # the default's variants need measuring
        ("stage.contrastive_rl.turns=0", "stage.contrastive_rl.turns"),
        ("stage.contrastive_rl.gamma=1.5", "stage.contrastive_rl.gamma"),
        ("stage.contrastive_rl.gamma=-0.1", "stage.contrastive_rl.gamma"),
        ("stage.contrastive_rl.turn_return=sum", "stage.contrastive_rl.turn_return"),
        ("stage.contrastive_rl.turn_baseline=mean", "stage.contrastive_rl.turn_baseline"),
        ("stage.contrastive_rl.stop_margin=0.9", "stage.contrastive_rl.stop_margin"),
        ("stage.contrastive_rl.feedback_tokens=0", "stage.contrastive_rl.feedback_tokens"),
        ("stage.contrastive_rl.feedback_tokens=100000", "stage.contrastive_rl.feedback_tokens"),
        ("stage.contrastive_rl.feedback=summary", "stage.contrastive_rl.feedback"),
        ("stage.contrastive_rl.max_evaluations=0", "stage.contrastive_rl.max_evaluations"),
    ],
)
def test_bad_values_name_their_key(override, key):
    with pytest.raises(ConfigError) as err:
        load_config(composed(overrides=[override]))
    assert err.value.key == key and key in str(err.value)


def test_multi_turn_settings_default_to_single_turn_and_more_turns_are_accepted():
    rl = load_config(composed(overrides=["run_dir=/tmp/x"])).stage.contrastive_rl
    assert (rl.turns, rl.gamma, rl.turn_return, rl.turn_baseline) == (1, 0.4, "best_later", "auto")
    assert rl.stop_margin is None and rl.feedback_tokens is None and rl.feedback == "report"
    assert rl.max_evaluations is None
    ok = ["stage.contrastive_rl.gamma=0", "stage.contrastive_rl.turn_baseline=loo", "stage.contrastive_rl.gamma=1"]
    ok += ["stage.contrastive_rl.feedback=none", "stage.contrastive_rl.max_evaluations=24"]
    load_config(
        composed(overrides=[*ok, "stage.contrastive_rl.stop_margin=1.2", "stage.contrastive_rl.feedback_tokens=512"])
    )
    for turns in (2, 4):
        rl = load_config(composed(overrides=[f"stage.contrastive_rl.turns={turns}"])).stage.contrastive_rl
        assert rl.turns == turns


def test_a_registered_model_version_is_a_valid_model_path():
    assert (
        load_config(composed(overrides=["model.path=models:/cudal1-policy/3"])).model.path == "models:/cudal1-policy/3"
    )


def test_wrong_types_and_unknown_keys_fail_with_the_full_key():
    cfg = composed()  # conf/config.yaml starts from the schema: composed configs are typed already
    with pytest.raises(ValidationError, match="learner.zero_stage"):
        cfg.learner.zero_stage = "two"
    with pytest.raises(ValidationError, match="learner.zero_stage"):
        load_config({"learner": {"zero_stage": "two"}})
    with pytest.raises(ConfigKeyError, match="learner.foo"):
        load_config({"learner": {"foo": 1}})


def test_learner_group_settings():
    cfg = load_config(composed())
    assert cfg.learner.num_ranks == 1  # the embedded default: one learner actor
    cfg = load_config(composed(overrides=["learner=gpu_zero3", "learner.num_ranks=8", "learner.offload_param=true"]))
    assert cfg.learner.num_ranks == 8 and cfg.learner.zero_stage == 3
    for overrides, key in (
        (["learner.num_ranks=2", "learner.zero_stage=0"], "learner.zero_stage"),
        (["learner.num_ranks=2", "learner.num_gpus=2"], "learner.num_gpus"),
        (["learner.offload_optimizer=true", "learner.zero_stage=0"], "learner.offload_optimizer"),
    ):
        with pytest.raises(ConfigError) as err:
            load_config(composed(overrides=overrides))
        assert err.value.key == key


def test_pipeline_mode_defaults_to_sync_and_async_turns_on_truncated_importance():
    from cudal1.config import ASYNC_TIS_CAP, effective_tis_cap

    cfg = load_config(composed())
    assert cfg.pipeline.mode == "sync" and cfg.learner.tis_cap is None and effective_tis_cap(cfg) is None
    cfg = load_config(composed(overrides=["pipeline.mode=async"]))
    assert effective_tis_cap(cfg) == ASYNC_TIS_CAP == 2.0
    cfg = load_config(composed(overrides=["pipeline.mode=async", "learner.tis_cap=3.5"]))
    assert effective_tis_cap(cfg) == 3.5
    with pytest.raises(ConfigError) as err:  # the weight needs the learner's own old log-probabilities
        load_config(composed(overrides=["pipeline.mode=async", "learner.recompute_old_logprobs=false"]))
    assert err.value.key == "learner.recompute_old_logprobs"


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["pipeline.mode=async", "pipeline.max_staleness=0"], "pipeline.max_staleness"),
        (["pipeline.max_staleness=-1"], "pipeline.max_staleness"),
        (["pipeline.max_engine_gap=0"], "pipeline.max_engine_gap"),
        (["rollout.timeout_s=0"], "rollout.timeout_s"),
        (["learner.timeout_s=-5"], "learner.timeout_s"),
    ],
)
def test_health_bounds_are_checked(overrides, key):
    from cudal1.config import ConfigError, load_config
    from cudal1.launch import compose

    with pytest.raises(ConfigError, match=f"config error at {key}"):
        load_config(compose("config", overrides))
    load_config(compose("config", ["pipeline.max_staleness=0", "pipeline.max_engine_gap=null"]))


def test_choices_spelled_in_the_learner_config_are_their_consumers():
    """Two choices are spelled in cudal1/training/config.py (their modules import torch); they must
    stay the consumers' own."""
    from cudal1.engines.deepspeed_engine import PRECISIONS
    from cudal1.rl.losses import AGGREGATIONS
    from cudal1.training.config import LOSS_AGGREGATIONS, PRECISIONS as LEARNER_PRECISIONS

    assert set(LEARNER_PRECISIONS) == set(PRECISIONS)
    assert set(LOSS_AGGREGATIONS) == set(AGGREGATIONS)


def test_the_sft_schedule_is_cosine_by_default_and_checked():
    cfg = load_config(composed())
    assert (cfg.stage.sft.lr_schedule, cfg.stage.sft.min_lr_ratio) == ("cosine", 0.05)
    assert load_config(composed(overrides=["stage.sft.lr_schedule=constant"])).stage.sft.lr_schedule == "constant"
    for overrides, key in (
        (["stage.sft.lr_schedule=linear"], "stage.sft.lr_schedule"),
        (["stage.sft.min_lr_ratio=1.5"], "stage.sft.min_lr_ratio"),
        (["stage.sft.min_lr_ratio=-0.1"], "stage.sft.min_lr_ratio"),
    ):
        with pytest.raises(ConfigError) as err:
            load_config(composed(overrides=overrides))
        assert err.value.key == key
