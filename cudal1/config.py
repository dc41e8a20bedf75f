"""Typed configuration of the jobs (Hydra structured configs) and its validation.

`conf/` holds the YAML groups (model, rollout, bench, learner, tasks, stage, reward, tracking, ray); this
module composes their schema. A part that consumes its config whole owns its dataclass, which
validates itself on construction and is used here as the field's type: `learner`
(`cudal1.training.config.LearnerConfig`), `reward` (`cudal1.rl.rewards.RewardConfig`), each of
`bench.pools` (`cudal1.actors.pool_spec.PoolSpec`), the optimize and serve jobs' search keys
(`cudal1.pipeline.optimize.SearchSettings`, inherited at their top level) and `serve`
(`cudal1.serve.settings.ServeSettings`). `load_config(cfg)` merges a composed Hydra config onto
the schema, so a wrong type or an unknown key fails with the key's full name (OmegaConf's
ValidationError / ConfigKeyError), then `validate(cfg)` builds those parts and checks what types
cannot say for the rest (ranges, choices) and the rules between parts, raising `ConfigError`
(`cudal1.errors`) naming the bad key. Both run in the driver before any actor or Ray cluster starts.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from cudal1.actors.pool_spec import PoolSpec
from cudal1.actors.weight_transport import KINDS as WEIGHT_TRANSPORTS
from cudal1.pipeline.optimize import OptimizeSettings, SearchSettings
from cudal1.pipeline.overlap import MODES as PIPELINE_MODES
from cudal1.policy.prompts import REFINEMENT_FEEDBACK
from cudal1.rl.advantages import SCALES as ADVANTAGE_SCALES
from cudal1.rl.exemplars import SCALES as BUCKET_SCALES
from cudal1.errors import ConfigError
from cudal1.rl.rewards import RewardConfig
from cudal1.rl.turns import BASELINE_CHOICES as TURN_BASELINES, RETURN_FORMS as TURN_RETURNS
from cudal1.rollout.generator import BACKENDS as ROLLOUT_BACKENDS
from cudal1.serve.settings import ServeSettings
from cudal1.training.config import LearnerConfig
from cudal1.training.schedule import LR_SCHEDULES


@dataclasses.dataclass
class SmallModelConfig:
    """The embedded default model built by `cudal1 model init-small` (no download)."""

    vocab_size: int = 4096
    hidden_size: int = 128
    intermediate_size: int = 384
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_position_embeddings: int = 8192
    seed: int = 0


@dataclasses.dataclass
class ModelConfig:
    """The policy: a local Hugging Face causal-LM directory, or the embedded small model."""

    path: Optional[str] = None
    """A local checkpoint directory (Qwen, DeepSeek, ...), or a registered model version
    ("models:/cudal1-policy/3", from the `tracking` store; downloaded under
    `<run_dir>/registry_model`). None: build the embedded small model under `<run_dir>/base_model`
    (or reuse it there)."""
    dtype: str = "float32"
    """Weights dtype for rollout and learner: float32 | bfloat16 | float16."""
    small: SmallModelConfig = field(default_factory=SmallModelConfig)


@dataclasses.dataclass
class RolloutConfig:
    """Rollout generators (vLLM engines, or transformers when vLLM is missing)."""

    backend: str = "auto"
    """vllm | hf | auto (vllm when importable)."""
    max_model_len: int = 8192
    max_tokens: int = 512
    """Tokens sampled per response."""
    temperature: float = 1.0
    top_p: float = 1.0
    kv_cache_gib: float = 0.5
    """vLLM KV-cache size (on CPU: host memory reserved)."""
    weight_sync: str = "object_store"
    """How learner weights reach the generator after each update: object_store (one host: a copy
    through Ray's object store) | broadcast (a dedicated process group, NCCL when both sides are
    on GPUs, gloo otherwise; see cudal1/engines/weight_sync.py) | ipc (one engine on the learner's
    GPU: CUDA IPC handles of the learner's buckets, no copy in transit; both actors go into one
    placement-group bundle with fractional num_gpus; see cudal1/engines/cuda_ipc.py)."""
    num_cpus: float = 1.0
    """Logical CPUs per engine."""
    num_gpus: float = 0.0
    """GPUs per engine worker: an engine asks for num_gpus × tensor_parallel_size."""
    num_engines: int = 1
    """Rollout engines, each a Ray actor in a placement group of its own; the prompts of a call are
    split over them (`cudal1.actors.generator_group`)."""
    tensor_parallel_size: int = 1
    """Workers per engine (vLLM tensor parallelism), on one node."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra options passed to the engine (vllm.LLM keyword arguments)."""
    timeout_s: float = 1800.0
    """The longest wait on one engine: its start (or restart), a weight sync, one group's sampling
    while no other engine delivers. An engine silent that long is named and replaced like one
    that died (`cudal1.actors.generator_group`)."""


@dataclasses.dataclass
class BenchConfig:
    """Benchmark pools by name (one per architecture); rewards come from `primary`."""

    pools: dict[str, PoolSpec] = field(default_factory=dict)
    """Each pool's `cudal1.actors.pool_spec.PoolSpec`, consumed whole by the pool (its `name` and
    `tasks` are set from the key and `tasks.source`). Set by a `bench` group file
    (conf/bench/*.yaml); empty here so that a group's pools replace, not extend, a default."""
    primary: str = "cpu"


@dataclasses.dataclass
class PipelineConfig:
    """How the contrastive RL stage schedules sampling and training (`cudal1.pipeline.overlap`)."""

    mode: str = "sync"
    """sync: each step samples, evaluates, trains, then syncs the weights (on-policy, exact).
    async: the generator samples and the pool evaluates step t+1 (with the weights of step t-1's
    update) while the learner trains step t: one step off-policy, corrected per token by truncated
    importance weights (`learner.tis_cap`, 2.0 unless set). Weights reach the engines only
    between generate calls."""
    max_staleness: int = 1
    """The oldest rollouts an RL update may train on, in learner versions behind the learner
    (async mode samples one step ahead: 1). Older ones (an engine that missed a sync) are recorded
    but left out of the update, and counted (`pipeline/stale_dropped`)."""
    max_engine_gap: Optional[float] = 0.1
    """The weight-sync check (`cudal1.pipeline.health.SyncWatch`): on an on-policy RL step, a mean
    absolute engine-vs-learner log-probability gap above this (nats per token) syncs the weights
    again, and a second one right after stops the run. null: off."""


ASYNC_TIS_CAP = 2.0
"""The truncated-importance cap of `pipeline.mode=async` when `learner.tis_cap` is not set."""


def effective_tis_cap(cfg: DictConfig) -> Optional[float]:
    """The learner's truncated-importance cap: `learner.tis_cap`, or `ASYNC_TIS_CAP` in async mode
    when it is null (None: off)."""
    if cfg.learner.tis_cap is not None:
        return float(cfg.learner.tis_cap)
    return ASYNC_TIS_CAP if cfg.pipeline.mode == "async" else None


@dataclasses.dataclass
class TasksConfig:
    """Which tasks to train on."""

    source: str = "builtin"
    """"builtin" or the path of a KernelBench checkout."""
    levels: list[int] = field(default_factory=lambda: [1, 2, 3])
    ids: list[str] = field(default_factory=list)
    """Task references ("level1/12" or names); empty = every task of `levels`."""
    limit: Optional[int] = None
    """At most this many tasks (after `levels` and `ids`)."""


@dataclasses.dataclass
class SFTConfig:
    """Stage 1: supervised fine-tuning on the validated seed solutions."""

    epochs: int = 100
    """The embedded default needs ~80-100 epochs (per-token loss below ~0.01) before its samples
    at temperature 1 reproduce valid solutions often enough for the later stages to see rewards."""
    batch_size: int = 4
    lr: Optional[float] = None
    """Learning rate for this stage (None: learner.lr): its first epoch's, under `lr_schedule`."""
    lr_schedule: str = "cosine"
    """constant | cosine: the rate per epoch (`cudal1.training.schedule.lr_at`), decayed to
    `min_lr_ratio` of `lr` by the last epoch so the stage ends settled, not on a loss spike."""
    min_lr_ratio: float = 0.05
    """The share of `lr` the cosine schedule ends at, in [0, 1]."""
    seeds: bool = True
    """Train on the builtin seed solutions of the selected tasks. The embedded default turns them
    off: it trains on `data.variants` alone (level1/17's seed is a C++ extension, slow to build
    and long to memorize)."""
    validate_seeds: bool = True
    """Evaluate every seed first and train only on the correct ones (they also seed the buffer)."""
    contrastive_prompts: bool = True
    """Also train, for each task with a correct variant strictly slower than its fastest, the
    fastest as the answer to a contrastive prompt (the stage-3 format) showing the slower ones."""
    refinement_prompts: Optional[bool] = None
    """Also train, for each task with a correct variant strictly slower than its fastest, the
    fastest as the answer to the prompt of a refinement episode's second turn: the plain prompt,
    a slower variant as the model's first answer and the evaluator's report on it
    (`cudal1.pipeline.sft_data.refinement_pairs`; no report with `stage.contrastive_rl.feedback`
    none). None: when `stage.contrastive_rl.turns` > 1 (a policy that never saw that prompt
    answers it poorly: docs/training.md, "Single-turn against multi-turn")."""
    reference_variants: bool = True
    """Validate each task's reference (with `ModelNew = Model` appended) as a correct 1.00× variant (stored as an
    exemplar with origin "reference"): the slower solution a contrastive example can show."""


@dataclasses.dataclass
class SelfTrainConfig:
    """Stage 2: sample, evaluate, keep successes, fine-tune, repeat."""

    rounds: int = 1
    tasks_per_round: int = 4
    samples_per_task: int = 4
    min_speedup: float = 1.0
    """A success is a correct candidate at least this fast (×)."""
    epochs: int = 2
    """Fine-tuning passes over a round's successes; 0: the round samples, evaluates and stores its
    successes in the buffer only."""
    batch_size: int = 4
    lr: Optional[float] = None
    """Learning rate for this stage (None: learner.lr)."""


@dataclasses.dataclass
class RLConfig:
    """Stage 3: contrastive RL with GRPO."""

    steps: int = 3
    tasks_per_step: int = 2
    group_size: int = 4
    """Responses per prompt (the GRPO group)."""
    exemplars: int = 2
    tau: float = 1.0
    """Temperature of the exemplar bucket draw, on the bucket scale (ln × for log)."""
    n_buckets: int = 4
    bucket_scale: str = "log"
    """log (buckets of ln speedup: one 120x outlier leaves the rest spread out) | linear (×)."""
    advantage_scale: str = "none"
    """none (Dr. GRPO: advantages in reward units, so noise stays noise-sized; the default, see
    `cudal1.rl.advantages`) | std (GRPO: divided by the group's std)."""
    lr: Optional[float] = None
    """Learning rate for this stage (None: learner.lr)."""
    checkpoint_every: int = 1
    turns: int = 1
    """Turns per episode of multi-turn refinement (issue 26): turn t+1 shows the model its turn-t
    answer and the evaluator's report on it (`cudal1.policy.prompts.refinement_turn`). 1: today's
    single-turn contrastive RL, exactly. More: `cudal1.pipeline.episodes` (docs/training.md, "Multi-turn
    refinement"); each turn is a rollout and an example of its own, so a step evaluates up to
    tasks_per_step × group_size × turns responses."""
    gamma: float = 0.4
    """Discount per turn of a turn's return, in [0, 1] (Kevin's 0.4; `cudal1.rl.turns.turn_returns`)."""
    turn_return: str = "best_later"
    """best_later (the turn's reward plus the discounted best later improvement; the default, see
    `cudal1.rl.turns`) | discounted (Kevin's sum of discounted later rewards)."""
    turn_baseline: str = "auto"
    """auto (the default: loo when turns > 1, group when turns is 1, so that a single-turn run
    keeps today's advantage exactly; `cudal1.rl.turns.pick_baseline`) | loo (Dr. Kernel's
    turn-level leave-one-out over the group's episodes at the same turn, free of GRPO's
    self-inclusion shrinkage, which differs per turn when episodes stop early) | group (GRPO's
    mean over the group's episodes at the same turn). Scaled per `advantage_scale`."""
    stop_margin: Optional[float] = None
    """An episode ends early after a correct turn whose paid speedup is at least this × the best
    speedup its prompt showed (the reference's 1.0× without exemplars); >= 1. None: every episode
    runs all `turns`."""
    feedback_tokens: Optional[int] = None
    """The most tokens the prompt of turns 2.. may take (earlier answers' code is omitted first,
    never the task). None: rollout.max_model_len - rollout.max_tokens, all that fits."""
    feedback: str = "report"
    """What the prompt of turns 2.. shows after the previous answer: report (the evaluator's
    report on it) | none (nothing but the closing instruction: the ablation that tells whether
    the policy learns from the report, docs/training.md)."""
    max_evaluations: Optional[int] = None
    """The most distinct programs a step sends to the evaluator over all its turns (>= 1). Turn 1
    always runs whole; a later turn runs for as many live episodes as the budget has left, one
    per group in turn (`cudal1.pipeline.episodes.within_evaluations`). None: no cap (up to
    tasks_per_step × group_size × turns)."""


@dataclasses.dataclass
class StageConfig:
    """Which stages to run, and each one's settings."""

    name: str = "all"
    """sft | self_train | contrastive_rl | all (in that order)."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    self_train: SelfTrainConfig = field(default_factory=SelfTrainConfig)
    contrastive_rl: RLConfig = field(default_factory=RLConfig)


@dataclasses.dataclass
class TrackingConfig:
    """MLflow."""

    enabled: bool = True
    uri: Optional[str] = None
    """Tracking URI (`sqlite:///path/mlflow.db`, `http://host:5000`, ...). None: $MLFLOW_TRACKING_URI
    if set, else the project's one local store, `runs/mlflow.db` under the directory the job is
    started from (`cudal1.tracking.resolve_tracking_uri`), whatever the run_dir or out_dir."""
    experiment: str = "cudal1"
    log_samples: int = 4
    """Prompts and responses logged per step as text artifacts."""
    system_metrics_s: float = 10.0
    """Seconds between MLflow system-metric samples of the driver's machine (CPU, memory, disk,
    network, GPUs where pynvml sees them; "system/..." in the UI); 0 turns them off."""


@dataclasses.dataclass
class RayConfig:
    """How the driver reaches Ray (see `cudal1.actors.cluster.ClusterConfig`)."""

    address: Optional[str] = None
    """None: RAY_ADDRESS (set by `ray job submit`) or a new local cluster."""
    num_cpus: Optional[int] = None
    """Logical CPUs of a local cluster (scheduling tokens, not cores)."""
    num_gpus: Optional[int] = None
    object_store_mb: Optional[int] = None
    storage: str = "shared"
    """"shared": run_dir is on storage every node mounts at the same path, which each actor that
    writes there proves at start (`cudal1.actors.storage`); "driver_node": the buffer and the
    learner are placed on the driver's node instead (no shared storage needed)."""
    preflight: bool = True
    """Check before any actor starts that the cluster's nodes can hold every actor the job asks for
    (`cudal1.actors.preflight`); turn off on an autoscaling cluster that adds nodes on demand."""


@dataclasses.dataclass
class DataConfig:
    """Training data beyond the builtin seed solutions."""

    augmented: Optional[str] = None
    """A dataset directory written by `jobs/augment.py` (`cudal1.augment.dataset`): its kept
    correct variants of the selected tasks (matched by task id and source hash) join the seeds in
    stage 1 and the exemplar buffer. None: the builtin seeds only."""
    variants: Optional[str] = None
    """A named set of hand-written variants (`cudal1.pipeline.variants.VARIANT_SETS`, e.g.
    "slow_fast": a slow and a fast correct program for level1/17 and level1/3): those of the
    selected tasks join the seeds in stage 1, validated like them. None: none."""


@dataclasses.dataclass
class TrainConfig:
    """The whole training job."""

    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    stage: StageConfig = field(default_factory=StageConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    data: DataConfig = field(default_factory=DataConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    run_dir: str = "runs/default"
    """Everything of the run: checkpoints, exemplar buffer, rollouts, state. Resumable from here."""
    resume: bool = False
    """Continue the run in `run_dir` from its last checkpoint (stage and step)."""
    seed: int = 0


@dataclasses.dataclass
class EvaluateJobConfig:
    """`jobs/evaluate.py`: a set of solutions evaluated on every benchmark pool (the paper's table)."""

    bench: BenchConfig = field(default_factory=BenchConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    solutions: Optional[str] = None
    """A directory of level<L>/<id>_<Name>.py files, a JSONL of records with task_id and code (or a
    solution path), or a training run directory (its buffer's best solution per task). Required."""
    pools: list[str] = field(default_factory=list)
    """Pools to evaluate on, primary first by default; empty = every pool of `bench`."""
    ps: list[float] = field(default_factory=lambda: [1.0, 1.01, 1.5, 2.0])
    """fast_p thresholds (×) of the table."""
    compile_baseline: bool = True
    """Also evaluate torch.compile of each selected task's reference on every pool (the same
    evaluator) and add speedup vs torch.compile to the table (`cudal1.pipeline.evaluate`)."""
    out_dir: str = "runs/evaluate-default"
    """Where results_<pool>.jsonl, results_<pool>_torch_compile.jsonl, table.json, table.txt and
    speedups.png are written."""


@dataclasses.dataclass
class EndpointConfig:
    """One OpenAI-compatible endpoint asked for solutions (`cudal1.augment.endpoint.EndpointSpec`)."""

    name: str = ""
    """Unique name, written into every record ("": the model name)."""
    base_url: str = ""
    """E.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1 (vLLM's server). Required."""
    model: str = ""
    """The model the endpoint serves. Required."""
    api_key_env: Optional[str] = "OPENAI_API_KEY"
    """Name of the environment variable holding the key (null: no key, for local servers)."""
    concurrency: int = 4
    """Requests in flight at once."""
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 4096
    timeout_s: float = 300.0
    """Seconds one request may take before it counts as a timeout (and is retried)."""
    max_retries: int = 5
    """Requests repeated after a timeout, 408/409/429, 5xx or a malformed answer."""
    backoff_s: float = 1.0
    """First wait between tries (seconds); doubled each time up to `backoff_max_s`."""
    backoff_max_s: float = 60.0
    send_seed: bool = True
    """Send a per-attempt seed (reproducible answers where the server honours it)."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Extra JSON fields of every request (server-specific options)."""


@dataclasses.dataclass
class AugmentJobConfig:
    """`jobs/augment.py`: teachers' solutions of every task, validated, as a versioned dataset."""

    endpoints: list[EndpointConfig] = field(default_factory=list)
    bench: BenchConfig = field(default_factory=BenchConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    out_dir: str = "data/augmented"
    """The dataset directory (records.jsonl, manifest.json); an existing one is continued."""
    version: str = "1"
    """The dataset's version label (recorded in the manifest; continuing needs the same one)."""
    k: int = 4
    """Distinct correct variants kept per task."""
    attempts_per_task: int = 8
    """Answers asked per task, shared round robin by the endpoints."""
    seed: int = 0
    """Added to every request's seed."""


@dataclasses.dataclass
class OptimizeJobConfig(SearchSettings):
    """`jobs/optimize.py`: the inference-time contrastive loop (`cudal1.pipeline.optimize.Optimizer`)
    on one task file, a list of them, a builtin suite or a KernelBench checkout. The search keys
    (rounds, samples, exemplars, feedback, verify, ...) are `SearchSettings`' own fields, at the top
    level; the sampling is `rollout`'s."""

    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    task_files: list[str] = field(default_factory=list)
    """KernelBench-format files to optimize (each parsed here, not executed); empty: the tasks `tasks` selects."""
    start: Optional[str] = None
    """Starting solutions evaluated as round 0 (a directory, JSONL or run, as jobs/evaluate.py's `solutions`)."""
    ps: list[float] = field(default_factory=lambda: [1.0, 1.01])
    """fast_p thresholds (×) of the table."""
    out_dir: str = "runs/optimize-default"
    """Where solutions/, reports/, results.jsonl and the table are written (and base_model/ is built)."""


@dataclasses.dataclass
class ServeJobConfig(SearchSettings):
    """`jobs/serve.py` / `serve run cudal1.serve.app:build_app`: the policy behind an OpenAI-compatible
    chat API and an optimize-job API. The search keys are `SearchSettings`' (as the optimize job's):
    `rounds` and `samples` are an optimize job's defaults, which a request may raise up to
    `serve.max_rounds` and `serve.max_samples`."""

    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """Only where a registered model ("models:/...") is fetched from."""
    serve: ServeSettings = field(default_factory=ServeSettings)
    model_dir: str = "runs/serve"
    """Where the embedded small model is built (`model.path` null) or a registered one fetched."""


STAGES = ("sft", "self_train", "contrastive_rl")
CHOICES = {
    "model.dtype": ("float32", "bfloat16", "float16"),
    "rollout.backend": ROLLOUT_BACKENDS,
    "rollout.weight_sync": WEIGHT_TRANSPORTS,
    "stage.name": (*STAGES, "all"),
    "stage.contrastive_rl.advantage_scale": ADVANTAGE_SCALES,
    "stage.contrastive_rl.bucket_scale": BUCKET_SCALES,
    "stage.contrastive_rl.turn_return": TURN_RETURNS,
    "stage.contrastive_rl.turn_baseline": TURN_BASELINES,
    "stage.contrastive_rl.feedback": REFINEMENT_FEEDBACK,
    "ray.storage": ("shared", "driver_node"),
    "pipeline.mode": PIPELINE_MODES,
    "stage.sft.lr_schedule": LR_SCHEDULES,
}
"""Each key's allowed values, the consumer's own tuple. The parts whose config is their own
dataclass check their choices themselves (`learner`: `LearnerConfig`, `reward`: `RewardConfig`)."""


def register_schema() -> None:
    """Register `TrainConfig` with Hydra's ConfigStore as `train_schema` (used by conf/config.yaml)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="train_schema", node=TrainConfig)
    ConfigStore.instance().store(name="evaluate_schema", node=EvaluateJobConfig)
    ConfigStore.instance().store(name="augment_schema", node=AugmentJobConfig)
    ConfigStore.instance().store(name="optimize_schema", node=OptimizeJobConfig)
    ConfigStore.instance().store(name="serve_schema", node=ServeJobConfig)


def load_config(cfg: Any = None) -> DictConfig:
    """Merge `cfg` (a DictConfig, dict, or None) onto the typed schema and validate it.

    Returns a typed DictConfig (struct mode: unknown keys are errors). Raises
    omegaconf.errors.ValidationError / ConfigKeyError (wrong type, unknown key; the message names
    `full_key`) or ConfigError.
    """
    merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), cfg if cfg is not None else {})
    validate(merged)
    return merged


def to_object(cfg: DictConfig) -> TrainConfig:
    """The validated config as dataclasses."""
    return OmegaConf.to_object(cfg)  # type: ignore[return-value]


def _positive(cfg: DictConfig, key: str, allow_zero: bool = False) -> None:
    value = OmegaConf.select(cfg, key)
    if value is None or (value < 0 if allow_zero else value <= 0) or (isinstance(value, float) and math.isnan(value)):
        raise ConfigError(key, f"must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def validate_ipc(cfg: DictConfig) -> None:
    """rollout.weight_sync=ipc: the learner (one rank) and one engine of one worker share one GPU,
    each with a fraction of it. Raises ConfigError saying what is needed."""
    lc, ro = cfg.learner, cfg.rollout
    need = (
        "rollout.weight_sync=ipc puts the learner and one rollout engine on one GPU: set learner.num_gpus and "
        "rollout.num_gpus to fractions summing to at most 1 (e.g. 0.5 and 0.5)"
    )
    if lc.num_gpus <= 0 or ro.num_gpus <= 0:
        raise ConfigError(
            "rollout.weight_sync",
            f"ipc needs CUDA GPUs (CUDA IPC has no CPU path; use object_store or broadcast on CPUs); {need}",
        )
    if lc.num_gpus + ro.num_gpus > 1 + 1e-9 or lc.num_gpus >= 1 or ro.num_gpus >= 1:
        raise ConfigError("rollout.num_gpus", f"{need}; got learner {lc.num_gpus} + rollout {ro.num_gpus}")
    for key in ("learner.num_ranks", "rollout.num_engines", "rollout.tensor_parallel_size"):
        if int(OmegaConf.select(cfg, key)) != 1:
            raise ConfigError(
                key,
                f"rollout.weight_sync=ipc serves one learner rank and one engine worker on one GPU; "
                f"got {key}={OmegaConf.select(cfg, key)} (use broadcast for several GPUs)",
            )


def validate(cfg: DictConfig) -> None:
    """Check ranges, choices and cross references. Raises ConfigError naming the first bad key."""
    for key, choices in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value not in choices:
            raise ConfigError(key, f"must be one of {', '.join(choices)}; got {value!r}")
    for key in (
        "rollout.max_model_len",
        "rollout.max_tokens",
        "stage.sft.epochs",
        "stage.sft.batch_size",
        "stage.self_train.tasks_per_round",
        "stage.self_train.samples_per_task",
        "stage.self_train.batch_size",
        "stage.contrastive_rl.tasks_per_step",
        "stage.contrastive_rl.tau",
        "stage.contrastive_rl.n_buckets",
        "stage.contrastive_rl.checkpoint_every",
        "rollout.kv_cache_gib",
    ):
        _positive(cfg, key)
    for key in (
        "rollout.temperature",
        "stage.self_train.rounds",
        "stage.self_train.epochs",
        "stage.contrastive_rl.steps",
        "stage.contrastive_rl.exemplars",
    ):
        _positive(cfg, key, allow_zero=True)
    for stage in STAGES:
        lr = cfg.stage[stage].lr
        if lr is not None and not lr > 0:
            raise ConfigError(f"stage.{stage}.lr", f"must be > 0 or null; got {lr}")
    ratio = cfg.stage.sft.min_lr_ratio
    if not (isinstance(ratio, (int, float)) and 0 <= ratio <= 1):
        raise ConfigError("stage.sft.min_lr_ratio", f"must be in [0, 1]; got {ratio!r}")
    if not 0 < cfg.rollout.top_p <= 1:
        raise ConfigError("rollout.top_p", f"must be in (0, 1]; got {cfg.rollout.top_p}")
    if not cfg.rollout.timeout_s > 0:
        raise ConfigError("rollout.timeout_s", f"must be > 0 seconds; got {cfg.rollout.timeout_s}")
    for key in ("rollout.num_engines", "rollout.tensor_parallel_size"):
        if int(OmegaConf.select(cfg, key)) < 1:
            raise ConfigError(key, f"must be at least 1; got {OmegaConf.select(cfg, key)}")
    if cfg.rollout.tensor_parallel_size > 1 and cfg.rollout.backend == "hf":
        raise ConfigError("rollout.tensor_parallel_size", "tensor parallelism needs the vllm backend, not hf")
    if cfg.rollout.weight_sync == "ipc":
        validate_ipc(cfg)
    if cfg.stage.name in ("contrastive_rl", "all") and cfg.stage.contrastive_rl.steps > 0:
        # The engines report log-probabilities of the raw logits: only plain sampling from them
        # makes those (and the learner's) the behaviour policy's, so the PPO ratio is exact.
        for key, want in (("rollout.temperature", 1.0), ("rollout.top_p", 1.0)):
            if OmegaConf.select(cfg, key) != want:
                raise ConfigError(
                    key,
                    f"contrastive RL samples at temperature 1 and top_p 1 (the ratio's "
                    f"log-probabilities are the raw logits'); got {OmegaConf.select(cfg, key)}",
                )
    LearnerConfig.from_config(cfg.learner)  # the learner's own rules: ConfigError naming the key
    if cfg.pipeline.mode == "async" and not cfg.learner.recompute_old_logprobs:
        raise ConfigError(
            "learner.recompute_old_logprobs",
            "pipeline.mode=async needs it true: the importance "
            "weight compares the learner's own old log-probabilities "
            "with the generator's (one step behind)",
        )
    least = 1 if cfg.pipeline.mode == "async" else 0  # async samples one version behind
    if cfg.pipeline.max_staleness < least:
        raise ConfigError(
            "pipeline.max_staleness",
            f"must be >= {least} in pipeline.mode={cfg.pipeline.mode} (else every rollout is left out); "
            f"got {cfg.pipeline.max_staleness}",
        )
    if cfg.pipeline.max_engine_gap is not None and not cfg.pipeline.max_engine_gap > 0:
        raise ConfigError(
            "pipeline.max_engine_gap", f"must be > 0 nats per token or null; got {cfg.pipeline.max_engine_gap}"
        )
    if cfg.stage.contrastive_rl.group_size < 2:
        raise ConfigError(
            "stage.contrastive_rl.group_size",
            f"a GRPO group needs at least 2 responses; got {cfg.stage.contrastive_rl.group_size}",
        )
    if cfg.rollout.max_tokens >= cfg.rollout.max_model_len:
        raise ConfigError(
            "rollout.max_tokens",
            f"{cfg.rollout.max_tokens} leaves no room for the prompt in "
            f"rollout.max_model_len={cfg.rollout.max_model_len}",
        )
    _validate_turns(cfg)
    validate_bench(cfg)
    validate_model(cfg)
    validate_tasks(cfg)
    _validate_reward(cfg)
    if cfg.data.augmented is not None:
        manifest = Path(os.path.expanduser(cfg.data.augmented)) / "manifest.json"
        if not manifest.is_file():
            raise ConfigError(
                "data.augmented", f"{cfg.data.augmented!r} is not a dataset of jobs/augment.py (no manifest.json)"
            )
    if cfg.data.variants is not None:
        from cudal1.pipeline.variants import VARIANT_SETS

        if cfg.data.variants not in VARIANT_SETS:
            raise ConfigError(
                "data.variants", f"unknown set {cfg.data.variants!r}: expected one of {sorted(VARIANT_SETS)}"
            )
        if not cfg.stage.sft.validate_seeds:
            # unmeasured variants would enter the buffer without a speedup
            raise ConfigError(
                "stage.sft.validate_seeds", "data.variants needs it true: the variants are measured there"
            )


def _validate_turns(cfg: DictConfig) -> None:
    """The multi-turn settings of stage.contrastive_rl (their choices are in `CHOICES`). Raises
    ConfigError."""
    rl, key = cfg.stage.contrastive_rl, "stage.contrastive_rl"
    if rl.turns < 1:
        raise ConfigError(f"{key}.turns", f"must be >= 1 (1: single-turn); got {rl.turns}")
    if not 0 <= rl.gamma <= 1:
        raise ConfigError(f"{key}.gamma", f"must be in [0, 1]; got {rl.gamma}")
    if rl.stop_margin is not None and not (math.isfinite(rl.stop_margin) and rl.stop_margin >= 1):
        raise ConfigError(
            f"{key}.stop_margin", f"must be >= 1 (× the best shown speedup) or null; got {rl.stop_margin}"
        )
    if rl.max_evaluations is not None and rl.max_evaluations < 1:
        raise ConfigError(f"{key}.max_evaluations", f"must be >= 1 or null; got {rl.max_evaluations}")
    room = cfg.rollout.max_model_len - cfg.rollout.max_tokens
    if rl.feedback_tokens is not None and not 0 < rl.feedback_tokens <= room:
        raise ConfigError(
            f"{key}.feedback_tokens",
            f"must be in [1, rollout.max_model_len - rollout.max_tokens = {room}] or null; got {rl.feedback_tokens}",
        )


def load_evaluate_config(cfg: Any = None) -> DictConfig:
    """Merge `cfg` onto the `EvaluateJobConfig` schema and validate it (bench, tasks, solutions,
    pools, ps). Raises ConfigError naming the first bad key, or OmegaConf's errors (as `load_config`)."""
    merged = OmegaConf.merge(OmegaConf.structured(EvaluateJobConfig), cfg if cfg is not None else {})
    validate_bench(merged)
    validate_tasks(merged)
    if merged.ray.storage not in CHOICES["ray.storage"]:
        raise ConfigError(
            "ray.storage", f"must be one of {', '.join(CHOICES['ray.storage'])}; got {merged.ray.storage!r}"
        )
    if not merged.solutions:
        raise ConfigError("solutions", "required: a directory of solutions, a JSONL of records, or a run directory")
    if not Path(os.path.expanduser(merged.solutions)).exists():
        raise ConfigError("solutions", f"{merged.solutions!r} does not exist")
    for name in merged.pools:
        if name not in merged.bench.pools:
            raise ConfigError("pools", f"{name!r} is not a pool; pools: {', '.join(merged.bench.pools)}")
    if not merged.ps or any(not p > 0 for p in merged.ps):
        raise ConfigError("ps", f"fast_p thresholds must be > 0; got {list(merged.ps)}")
    return merged


def load_augment_config(cfg: Any = None) -> DictConfig:
    """Merge `cfg` onto the `AugmentJobConfig` schema and validate it: endpoints (URL, model,
    unique names, ranges, the key's environment variable set), k, attempts, version, an existing
    dataset's version, bench and tasks. Raises ConfigError naming the first bad key, or
    OmegaConf's errors (as `load_config`)."""
    merged = OmegaConf.merge(OmegaConf.structured(AugmentJobConfig), cfg if cfg is not None else {})
    validate_bench(merged)
    validate_tasks(merged)
    if merged.ray.storage not in CHOICES["ray.storage"]:
        raise ConfigError(
            "ray.storage", f"must be one of {', '.join(CHOICES['ray.storage'])}; got {merged.ray.storage!r}"
        )
    if not merged.endpoints:
        raise ConfigError("endpoints", "at least one endpoint is needed (base_url, model, api_key_env)")
    names = set()
    for i, e in enumerate(merged.endpoints):
        key = f"endpoints[{i}]"
        if not e.model:
            raise ConfigError(f"{key}.model", "required: the model name the endpoint serves")
        if not e.name:
            e.name = e.model
        if e.name in names:
            raise ConfigError(f"{key}.name", f"{e.name!r} names two endpoints; give each a unique name")
        names.add(e.name)
        if not str(e.base_url).startswith(("http://", "https://")):
            raise ConfigError(f"{key}.base_url", f"must be an http(s) URL; got {e.base_url!r}")
        if e.api_key_env and not os.environ.get(e.api_key_env):
            raise ConfigError(
                f"{key}.api_key_env",
                f"environment variable {e.api_key_env} is not set (null for an endpoint without a key)",
            )
        for field_name, lo, strict in (
            ("concurrency", 1, False),
            ("max_tokens", 1, False),
            ("max_retries", 0, False),
            ("timeout_s", 0, True),
            ("backoff_s", 0, False),
            ("backoff_max_s", 0, False),
            ("temperature", 0, False),
        ):
            value = e[field_name]
            if value < lo or (strict and value == lo):
                raise ConfigError(f"{key}.{field_name}", f"must be {'>' if strict else '>='} {lo}; got {value}")
        if not 0 < e.top_p <= 1:
            raise ConfigError(f"{key}.top_p", f"must be in (0, 1]; got {e.top_p}")
    for key in ("k", "attempts_per_task"):
        if merged[key] < 1:
            raise ConfigError(key, f"must be >= 1; got {merged[key]}")
    if not str(merged.version).strip():
        raise ConfigError("version", "must not be empty")
    manifest = Path(os.path.expanduser(merged.out_dir)) / "manifest.json"
    if manifest.is_file():
        import json

        try:
            found = json.loads(manifest.read_text()).get("version")
        except ValueError as exc:
            raise ConfigError("out_dir", f"{manifest} is unreadable: {exc}") from exc
        if str(found) != str(merged.version):
            raise ConfigError(
                "version",
                f"{merged.out_dir} holds version {found!r} of the dataset, not "
                f"{merged.version!r}: pass version={found} to continue it, or another out_dir",
            )
    return merged


def validate_model(cfg: DictConfig) -> None:
    """Check `cfg.model.path`: a registered "models:/<name>/<version>" or a checkpoint directory. Raises ConfigError."""
    if cfg.model.path is not None and str(cfg.model.path).startswith("models:/"):
        parts = str(cfg.model.path)[len("models:/") :].split("/")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(
                "model.path", f"{cfg.model.path!r}: a registered model is 'models:/<name>/<version or alias>'"
            )
    elif cfg.model.path is not None:
        path = Path(os.path.expanduser(cfg.model.path))
        if not (path / "config.json").is_file():
            raise ConfigError("model.path", f"{path} is not a Hugging Face checkpoint directory (no config.json)")


def load_optimize_config(cfg: Any = None) -> DictConfig:
    """Merge `cfg` onto the `OptimizeJobConfig` schema and validate it: choices, ranges, bench,
    model, the tasks (each task file exists and parses as a KernelBench-format task, without being
    executed; else `tasks`), `start`. Raises ConfigError naming the first bad key, or OmegaConf's
    errors (as `load_config`)."""
    merged = OmegaConf.merge(OmegaConf.structured(OptimizeJobConfig), cfg if cfg is not None else {})
    for key in ("model.dtype", "rollout.backend", "ray.storage"):
        value, choices = OmegaConf.select(merged, key), CHOICES[key]
        if value not in choices:
            raise ConfigError(key, f"must be one of {', '.join(choices)}; got {value!r}")
    _positive(merged, "rollout.kv_cache_gib")
    OptimizeSettings.from_config(merged)  # the search keys and the sampling: ConfigError naming the key
    if not merged.ps or any(not p > 0 for p in merged.ps):
        raise ConfigError("ps", f"fast_p thresholds must be > 0; got {list(merged.ps)}")
    validate_bench(merged)
    validate_model(merged)
    if merged.task_files:
        from cudal1.tasks import load_task_file

        for i, name in enumerate(merged.task_files):
            try:
                load_task_file(Path(os.path.expanduser(name)))
            except (FileNotFoundError, ValueError) as e:
                raise ConfigError(f"task_files[{i}]", str(e)) from None
    else:
        validate_tasks(merged)
    if merged.start is not None and not Path(os.path.expanduser(merged.start)).exists():
        raise ConfigError("start", f"{merged.start!r} does not exist")
    return merged


def load_serve_config(cfg: Any = None) -> DictConfig:
    """Merge `cfg` onto the `ServeJobConfig` schema and validate it: choices, ranges, bench, model,
    replica and job limits, and that a bearer token is configured (`serve.token` or the
    `serve.token_env` variable). Raises ConfigError naming the first bad key, or OmegaConf's errors."""
    merged = OmegaConf.merge(OmegaConf.structured(ServeJobConfig), cfg if cfg is not None else {})
    for key in ("model.dtype", "rollout.backend", "ray.storage"):
        value, choices = OmegaConf.select(merged, key), CHOICES[key]
        if value not in choices:
            raise ConfigError(key, f"must be one of {', '.join(choices)}; got {value!r}")
    _positive(merged, "rollout.kv_cache_gib")
    OptimizeSettings.from_config(merged)  # the search keys and the sampling: ConfigError naming the key
    s = ServeSettings.from_config(merged.serve)  # replicas, HTTP and job limits: ConfigError naming the key
    if merged.rounds > s.max_rounds:
        raise ConfigError("rounds", f"{merged.rounds} > serve.max_rounds={s.max_rounds}")
    if merged.samples > s.max_samples:
        raise ConfigError("samples", f"{merged.samples} > serve.max_samples={s.max_samples}")
    if not (s.token or os.environ.get(s.token_env)):
        raise ConfigError(
            "serve.token", f"a bearer token is required: set serve.token or the {s.token_env} environment variable"
        )
    for key in ("rollout.num_engines", "rollout.tensor_parallel_size"):  # a replica holds one engine in-process
        if OmegaConf.select(merged, key) != 1:
            raise ConfigError(
                key,
                f"a serve replica holds one engine on its own GPUs: must be 1 (scale with "
                f"serve.num_replicas); got {OmegaConf.select(merged, key)}",
            )
    validate_bench(merged)
    validate_model(merged)
    return merged


def validate_bench(cfg: DictConfig) -> None:
    """Check `cfg.bench`: at least one pool, `primary` names one, and each pool is a valid
    `PoolSpec` (which checks its own fields). Raises ConfigError."""
    from cudal1.actors.pool_spec import pool_specs

    if not cfg.bench.pools:
        raise ConfigError("bench.pools", "at least one benchmark pool is needed")
    if cfg.bench.primary not in cfg.bench.pools:
        raise ConfigError("bench.primary", f"{cfg.bench.primary!r} is not a pool; pools: {', '.join(cfg.bench.pools)}")
    pool_specs(cfg.bench.pools)


def validate_tasks(cfg: DictConfig) -> None:
    """Check `cfg.tasks` (source, levels, limit). Raises ConfigError."""
    if cfg.tasks.source != "builtin" and not Path(os.path.expanduser(cfg.tasks.source)).is_dir():
        raise ConfigError("tasks.source", f"{cfg.tasks.source!r} is neither 'builtin' nor a directory")
    for level in cfg.tasks.levels:
        if level not in (1, 2, 3, 4):
            raise ConfigError("tasks.levels", f"levels are 1-4; got {level}")
    if cfg.tasks.limit is not None and cfg.tasks.limit < 1:
        raise ConfigError("tasks.limit", f"must be >= 1 or null; got {cfg.tasks.limit}")


def _validate_reward(cfg: DictConfig) -> None:
    """`reward` validates itself (`RewardConfig`, raising ConfigError); its required sections must
    be prose sections the response parser knows."""
    from cudal1.policy.prompts import SECTIONS

    for key in cfg.reward.required_sections:
        if key not in SECTIONS or key == "code":
            raise ConfigError("reward.required_sections", f"{key!r} is not a prose section; known: analysis, design")
    RewardConfig.from_config(cfg.reward)
