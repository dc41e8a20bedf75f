"""Train cudal1: supervised fine-tuning, self-training, contrastive RL (all three by default).

    python jobs/train.py                                   # the embedded default (local, CPU)
    python jobs/train.py stage=contrastive_rl run_dir=runs/a resume=true
    ray job submit --working-dir . -- "$PWD/.venv/bin/python" jobs/train.py bench=h100 model=local model.path=/models/qwen

Configuration: conf/ (Hydra); schema and validation: cudal1/config.py.
"""

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from cudal1.environment import require  # noqa: E402

require("train")  # another Python (no .venv, a cluster's system python) gets one message that names the fix

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from cudal1.config import load_config, register_schema  # noqa: E402
from cudal1.launch import infrastructure_errors, no_empty_output, output_dir, user_errors  # noqa: E402
from cudal1.pipeline.variants import rl_outcome  # noqa: E402
from cudal1.progress import records_between_bars  # noqa: E402

register_schema()


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    output_dir(cfg, "run_dir")  # the default runs/${now:...}, as Hydra resolved it
    try:
        with (
            no_empty_output(cfg.run_dir),
            infrastructure_errors("train"),
            user_errors("train"),
            records_between_bars(),  # log records on lines of their own, not on a progress bar's
        ):
            cfg = load_config(cfg)  # typed, validated: fails here, before any actor starts
            from cudal1.pipeline.driver import train

            state = train(cfg)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: the driver has closed the actors and said how to resume
        sys.exit(130)
    log = logging.getLogger("cudal1")
    log.info(
        "done: stages %s, at step %d of the charts' axis (one per learner call, one per unit without any); run in %s%s",
        state.completed,
        state.step,
        cfg.run_dir,
        "; also notebooks/review.ipynb" if cfg.tracking.enabled else "",
    )
    outcome = rl_outcome(state.history)
    if outcome is not None:  # the run's last line: what RL changed, in numbers
        log.info("%s", outcome)


if __name__ == "__main__":
    main()
