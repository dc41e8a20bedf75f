"""Evaluate a set of solutions on every configured benchmark pool and write the paper's table.

    python jobs/evaluate.py solutions=runs/exp1                  # a training run's best per task
    python jobs/evaluate.py solutions=sols/ tasks=kernelbench bench=a100_h100_l40 tasks.levels=[1,2]
    ray job submit --working-dir . -- "$PWD/.venv/bin/python" jobs/evaluate.py solutions=/shared/runs/exp1 bench=h100

Writes `out_dir`: results_<pool>.jsonl (one EvalResult per solution), results_<pool>_torch_compile.jsonl
(torch.compile of each reference, evaluated the same way; off with compile_baseline=false), table.json
and table.txt (per pool and level, with speedup vs torch.compile), speedups.png; logs all of it to
MLflow. Configuration: conf/evaluate.yaml.
"""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from cudal1.environment import require  # noqa: E402

require("evaluate")  # another Python (no .venv, a cluster's system python) gets one message that names the fix

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from cudal1.config import load_evaluate_config, register_schema  # noqa: E402
from cudal1.launch import infrastructure_errors, no_empty_output, output_dir, user_errors  # noqa: E402

register_schema()
log = logging.getLogger("cudal1.evaluate")


@hydra.main(config_path="../conf", config_name="evaluate", version_base=None)
def main(cfg: DictConfig) -> None:
    output_dir(cfg, "out_dir")
    with no_empty_output(cfg.out_dir), infrastructure_errors("evaluate"), user_errors("evaluate"):
        cfg = load_evaluate_config(cfg)
        from cudal1.pipeline.evaluate import run_evaluate_job

        run_evaluate_job(cfg)


if __name__ == "__main__":
    main()
