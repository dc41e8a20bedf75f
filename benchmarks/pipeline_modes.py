"""Wall time of the contrastive RL stage in `pipeline.mode=sync` vs `async`, on one Ray cluster.

Each run starts the job's actors (`RunContext.start`, not timed), then times
`cudal1.pipeline.stages.run_contrastive_rl` alone, in a fresh run directory; modes alternate
(sync, async, sync, async, ...) so that a change in the machine's load hits both. Prints one JSON
line per run (mode, wall seconds, per-step means of the step's phases) and a summary.

    PYTHONPATH=. python benchmarks/pipeline_modes.py --repeats 2 --steps 4 --out /tmp/modes.json
    PYTHONPATH=. python benchmarks/pipeline_modes.py --config-name config --steps 3 -- tasks.ids=[level1/13]

Extra arguments after `--` are Hydra overrides of the config (default: conf/smoke.yaml).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(config_name: str, run_dir: Path, mode: str, steps: int, overrides: list[str]) -> dict:
    from hydra import compose, initialize_config_dir

    from cudal1.config import load_config, register_schema
    from cudal1.pipeline.context import RunContext
    from cudal1.pipeline.stages import run_contrastive_rl

    register_schema()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = load_config(compose(config_name=config_name, overrides=[
            f"run_dir={run_dir}", "stage=contrastive_rl", f"stage.contrastive_rl.steps={steps}",
            f"pipeline.mode={mode}", "tracking=none", *overrides]))
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
    return {"mode": mode, "steps": steps, "wall_s": round(wall, 2), "per_step_s": round(wall / steps, 2),
            "rollout_versions": [h["rollout_version"] for h in rows],
            "learner_versions": [h["learner_version"] for h in rows]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config-name", default="smoke")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--model-path", default=None, help="a checkpoint directory (default: build the small model once)")
    ap.add_argument("--num-cpus", type=int, default=4, help="logical CPUs of the local Ray cluster")
    ap.add_argument("--out", default=None)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args(argv)

    from cudal1.actors.cluster import code_runtime_env, init_ray, shutdown_ray
    from cudal1.policy.small import init_small

    work = Path(tempfile.mkdtemp(prefix="cudal1-modes-"))
    model = args.model_path or str(init_small(work / "small", seed=0))
    init_ray(address="local", num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False,
             runtime_env=code_runtime_env(ROOT))
    runs = []
    try:
        for i in range(args.repeats):
            for mode in ("sync", "async"):
                run = one_run(args.config_name, work / f"{mode}{i}", mode, args.steps,
                              [f"model.path={model}", *args.overrides])
                print(json.dumps(run), flush=True)
                runs.append(run)
    finally:
        shutdown_ray()
    summary = {mode: statistics.median(r["wall_s"] for r in runs if r["mode"] == mode) for mode in ("sync", "async")}
    print(json.dumps({"median_wall_s": summary, "async_over_sync": round(summary["async"] / summary["sync"], 3)}))
    if args.out:
        Path(args.out).write_text(json.dumps({"runs": runs, "median_wall_s": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
