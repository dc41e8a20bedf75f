"""Stage-1 data augmentation: teachers' solutions of every task, validated, as a versioned dataset.

    OPENAI_API_KEY=... python jobs/augment.py 'endpoints=[{name: gpt, base_url: "https://api.openai.com/v1", model: M}]'
    python jobs/augment.py 'endpoints=[{name: local, base_url: "http://127.0.0.1:8000/v1", model: qwen, api_key_env: null}]' \
        tasks=builtin k=4 attempts_per_task=8 out_dir=data/augmented/v1
    python jobs/train.py data.augmented=data/augmented/v1      # stage 1 and the buffer read it

Writes `out_dir`: records.jsonl (every answered attempt with its validation) and manifest.json
(version, endpoints, tasks, counts). Run it again to continue: recorded attempts are not asked
again. Configuration: conf/augment.yaml; schema and validation: cudal1/config.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from cudal1.environment import require  # noqa: E402

require("augment")  # another Python (no .venv, a cluster's system python) gets one message that names the fix

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from cudal1.config import load_augment_config, register_schema  # noqa: E402
from cudal1.launch import user_errors  # noqa: E402

register_schema()


@hydra.main(config_path="../conf", config_name="augment", version_base=None)
def main(cfg: DictConfig) -> None:
    try:
        with user_errors("augment"):
            cfg = load_augment_config(cfg)
            from cudal1.augment.collect import run_augment_job

            summary = run_augment_job(cfg)
    except KeyboardInterrupt:  # what was recorded stays; a re-run continues
        sys.exit(130)
    if summary.failed:
        sys.exit(3)  # some attempts failed at their endpoint: a re-run asks for them


if __name__ == "__main__":
    main()
