"""What a job's entry point does with errors that are the user's to fix: `user_errors`.

A wrong config value, a cluster too small for the job or a run directory the nodes do not share
is not a bug in cudal1: the user gets one
message naming the key and the value (or each role's needs and each node's resources) and exit
code 2, not a traceback. Every other exception keeps its traceback.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def user_errors(job: str) -> Iterator[None]:
    """Turn ConfigError, OmegaConf's validation and key errors, InsufficientResources and
    SharedStorageError raised inside the block into `<job>: <message>` on stderr and SystemExit(2)."""
    from omegaconf.errors import ConfigKeyError, ValidationError

    from cudal1.actors.preflight import InsufficientResources
    from cudal1.actors.storage import SharedStorageError
    from cudal1.config import ConfigError

    try:
        yield
    except (ConfigError, ValidationError, ConfigKeyError, InsufficientResources, SharedStorageError) as e:
        message = str(e).strip()
        if isinstance(e, (ValidationError, ConfigKeyError)):
            # OmegaConf appends "full_key: ..., object_type=..." lines; the first line and the key suffice.
            key = getattr(e, "full_key", None)
            message = f"config error at {key}: {message.splitlines()[0]}" if key else message.splitlines()[0]
        print(f"{job}: {message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
