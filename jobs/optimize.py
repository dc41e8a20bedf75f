"""Optimize programs with a policy: the inference-time contrastive loop with execution feedback.

    python jobs/optimize.py task_files=[my_program.py]            # one KernelBench-format file
    python jobs/optimize.py tasks.ids=[level1/13,level1/5] rounds=3 samples=8
    python jobs/optimize.py model=local model.path=/models/qwen tasks=kernelbench tasks.source=/data/KernelBench
    python jobs/optimize.py model.path=models:/cudal1-policy/3 rounds=1 feedback=false   # score a checkpoint
    python jobs/optimize.py task_files=[my_program.py] feedback_mode=block   # one fresh prompt per round

Writes `out_dir`: solutions/ (the best verified solution per task), reports/ (every attempt, each
round's prompt), results.jsonl and the table (mean / median / geomean speedup, fast_1, fast_1.01);
logs them to MLflow. Configuration: conf/optimize.yaml; docs/optimize.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from cudal1.environment import require  # noqa: E402

require("optimize")  # another Python (no .venv, a cluster's system python) gets one message that names the fix

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from cudal1.config import load_optimize_config, register_schema  # noqa: E402
from cudal1.launch import infrastructure_errors, no_empty_output, output_dir, user_errors  # noqa: E402
from cudal1.progress import records_between_bars  # noqa: E402

register_schema()


@hydra.main(config_path="../conf", config_name="optimize", version_base=None)
def main(cfg: DictConfig) -> None:
    output_dir(cfg, "out_dir")
    try:
        with (
            no_empty_output(cfg.out_dir),
            infrastructure_errors("optimize"),
            user_errors("optimize"),
            records_between_bars(),  # log records on lines of their own, not on a progress bar's
        ):
            cfg = load_optimize_config(cfg)  # typed, validated, task files parsed: fails before anything starts
            from cudal1.pipeline.optimize_job import run_optimize_job

            run_optimize_job(cfg)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
