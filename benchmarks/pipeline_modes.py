"""Wall time of the contrastive RL stage in `pipeline.mode=sync` vs `async`, on one Ray cluster.

Each run starts the job's actors (`RunContext.start`, not timed), then times
`cudal1.pipeline.stages.run_contrastive_rl` alone, in a fresh run directory; modes alternate
(sync, async, async, sync, sync, async, ...) so that a change in the machine's load hits both. Prints one JSON
line per run (mode, wall seconds, per-step means of the step's phases) and a summary.

    PYTHONPATH=. python benchmarks/pipeline_modes.py --repeats 2 --steps 4 --out /tmp/modes.json
    PYTHONPATH=. python benchmarks/pipeline_modes.py --config-name config --steps 3 -- tasks.ids=[level1/13]

Extra arguments after `--` are Hydra overrides of the config (default: conf/smoke.yaml).

`--synthetic` times the schedule alone instead, in one process and without Ray: the transformers
generator and GRPOLearner (DeepSpeed, CPU) on the small model, a synthetic reward (the share of
response tokens in the upper half of the vocabulary) so that every step updates, and
`cudal1.pipeline.overlap.OneStepAhead` in each mode:

    PYTHONPATH=. python benchmarks/pipeline_modes.py --synthetic --steps 6 --repeats 2

One torch thread per process (OMP_NUM_THREADS=1 unless set), as in the job's actors (Ray sets it
to an actor's num_cpus): on a loaded 2-core machine two OpenMP threads in the main thread made the
transformers generator 20-40x slower than in a second Python thread (16 s against 0.4 s for one
call, load average 15-20), which would credit async mode with a speedup that is not the overlap's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: see the module docstring


def one_run(config_name: str, run_dir: Path, mode: str, steps: int, overrides: list[str]) -> dict:
    from hydra import compose, initialize_config_dir

    from cudal1.config import load_config, register_schema
    from cudal1.pipeline.context import RunContext
    from cudal1.pipeline.stages import run_contrastive_rl

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = load_config(
            compose(
                config_name=config_name,
                overrides=[
                    f"run_dir={run_dir}",
                    "stage=contrastive_rl",
                    f"stage.contrastive_rl.steps={steps}",
                    f"pipeline.mode={mode}",
                    "tracking=none",
                    *overrides,
                ],
            )
        )
    ctx = RunContext.start(cfg)
    try:
        ctx.state.stage, ctx.state.unit = "contrastive_rl", 0
        ctx.learner.set_lr(cfg.stage.contrastive_rl.lr or cfg.learner.lr)
        t0 = time.perf_counter()
        run_contrastive_rl(ctx)
        wall = time.perf_counter() - t0
    finally:
        ctx.close("FINISHED")
    rows = [h for h in ctx.state.history if h["stage"] == "contrastive_rl"]
    return {
        "mode": mode,
        "steps": steps,
        "wall_s": round(wall, 2),
        "per_step_s": round(wall / steps, 2),
        "rollout_versions": [h["rollout_version"] for h in rows],
        "learner_versions": [h["learner_version"] for h in rows],
    }


def synthetic_run(model_dir: str, mode: str, steps: int, max_tokens: int) -> dict:
    """`steps` GRPO steps of the real generator and learner on the synthetic reward, scheduled by
    OneStepAhead in `mode`; returns the wall time and the versions per step."""
    from cudal1.pipeline.overlap import OneStepAhead
    from cudal1.policy.model import chat_prompt_ids, load_tokenizer
    from cudal1.records import PolicyExample
    from cudal1.rl.advantages import group_advantages
    from cudal1.rollout import RolloutGenerator
    from cudal1.training import GRPOLearner

    tok = load_tokenizer(model_dir)
    prompts = [chat_prompt_ids(tok, [{"role": "user", "content": f"Write kernel number {i}."}]) for i in range(4)]
    gen = RolloutGenerator(model_dir, backend="hf", dtype="float32", max_model_len=4096, seed=0)
    learner = GRPOLearner(model_dir, lr=1e-2, micro_batch=8, seed=0, tis_cap=2.0)
    vocab = learner.vocab_size
    pipe = OneStepAhead(
        mode,
        lambda step: [g for grp in gen.generate(prompts, n=4, max_tokens=max_tokens) for g in grp],
        lambda: gen.update_weights(learner.named_weights(), version=learner.version),
    )
    rows, t0 = [], time.perf_counter()
    try:
        for step in range(steps):
            samples = pipe.take(step)
            if step + 1 < steps:
                pipe.ahead(step + 1)
            rewards = [sum(t >= vocab // 2 for t in g.response_ids) / len(g.response_ids) for g in samples]
            adv = group_advantages(rewards, [i // 4 for i in range(len(samples))])
            before = learner.version
            m = learner.grpo_step(
                [PolicyExample(g.prompt_ids, g.response_ids, a, g.logprobs) for g, a in zip(samples, adv)]
            )
            rows.append(
                {
                    "rollout_version": min(g.model_version for g in samples),
                    "learner_version": before,
                    "tis_weight_mean": round(m.get("tis_weight_mean", 0.0), 4),
                    "tis_clip_frac": round(m.get("tis_clip_frac", 0.0), 4),
                    "waited_s": round(pipe.waited_s, 2),
                    "reward_mean": round(sum(rewards) / len(rewards), 3),
                }
            )
            if mode == "sync" or step + 1 == steps:
                gen.update_weights(learner.named_weights(), version=learner.version)
        wall = time.perf_counter() - t0
    finally:
        pipe.drop()
        gen.close()
    return {
        "mode": mode,
        "synthetic": True,
        "steps": steps,
        "wall_s": round(wall, 2),
        "per_step_s": round(wall / steps, 2),
        "per_step": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config-name", default="smoke")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model-path", default=None, help="a checkpoint directory (default: build the small model once)")
    ap.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of the local Ray cluster")
    ap.add_argument("--out", default=None)
    ap.add_argument("--synthetic", action="store_true", help="the schedule alone: real generator and learner, no Ray")
    ap.add_argument("--max-tokens", type=int, default=32, help="--synthetic: tokens per response")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args(argv)

    from cudal1.actors.cluster import code_runtime_env, init_ray, shutdown_ray
    from cudal1.policy.small import init_small

    work = Path(tempfile.mkdtemp(prefix="cudal1-modes-"))
    model = args.model_path or str(init_small(work / "small", seed=0))
    if args.synthetic:
        runs = [
            synthetic_run(model, mode, args.steps, args.max_tokens) for i in range(args.repeats) for mode in _order(i)
        ]
        for run in runs:
            print(json.dumps(run), flush=True)
        return _summary(runs, args.out)
    init_ray(
        address="local",
        num_cpus=args.num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=code_runtime_env(ROOT),
    )
    runs = []
    try:
        for i in range(args.repeats):
            for mode in _order(i):
                run = one_run(
                    args.config_name, work / f"{mode}{i}", mode, args.steps, [f"model.path={model}", *args.overrides]
                )
                print(json.dumps(run), flush=True)
                runs.append(run)
    finally:
        shutdown_ray()
    return _summary(runs, args.out)


def _order(repeat: int) -> tuple[str, str]:
    """sync first in even repeats, async first in odd ones: a load that drifts during the
    benchmark does not favour the mode that always runs second."""
    return ("sync", "async") if repeat % 2 == 0 else ("async", "sync")


def _summary(runs: list[dict], out: str | None) -> int:
    summary = {mode: statistics.median(r["wall_s"] for r in runs if r["mode"] == mode) for mode in ("sync", "async")}
    print(json.dumps({"median_wall_s": summary, "async_over_sync": round(summary["async"] / summary["sync"], 3)}))
    if out:
        Path(out).write_text(json.dumps({"runs": runs, "median_wall_s": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
