"""Serve the policy: an OpenAI-compatible chat API and an optimize-job API on Ray Serve.

    CUDAL1_SERVE_TOKEN=secret python jobs/serve.py                         # local cluster, 127.0.0.1:8000
    CUDAL1_SERVE_TOKEN=secret python jobs/serve.py model.path=models:/cudal1-policy/3 serve.autoscaling=true
    RAY_AUTH_MODE=token ray job submit --working-dir . --runtime-env-json '{"env_vars": {"CUDAL1_SERVE_TOKEN": "secret"}}' \
        -- "$PWD/.venv/bin/python" jobs/serve.py model_dir=/shared/serve serve.jobs_dir=/shared/serve/jobs

Prints what it waits for while it starts, then `serve: ready ...` once the application answers;
blocks until SIGTERM or Ctrl-C, which delete the application and exit 0 (`cudal1.serve.app.start`).
Exit 2: a config error or a cluster too small; 1: the application never answered over HTTP.
Configuration: conf/serve.yaml; docs/serve.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from cudal1.environment import require  # noqa: E402

require("serve")  # another Python (no .venv, a cluster's system python) gets one message that names the fix

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from cudal1.config import load_serve_config, register_schema  # noqa: E402
from cudal1.launch import user_errors  # noqa: E402

register_schema()


@hydra.main(config_path="../conf", config_name="serve", version_base=None)
def main(cfg: DictConfig) -> None:
    try:
        with user_errors("serve"):
            cfg = load_serve_config(cfg)  # typed, validated, token present: fails before anything starts
            from cudal1.serve.app import NotAnswering, start

            try:
                start(cfg)
            except NotAnswering as e:  # the application was deleted; the message says what to check
                print(f"serve: {e}", file=sys.stderr, flush=True)
                sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C before the application's start installed its own handlers
        sys.exit(130)


if __name__ == "__main__":
    main()
