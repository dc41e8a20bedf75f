"""The shared-storage contract of a run: `write_probe`, `answer_probe`, `check_answers`.

The buffer writes its exemplars under `run_dir`, the learner its checkpoints and exports, and the
driver reads both (MLflow registration, resume). On a multi-node cluster without storage shared by
every node, an actor placed on another node writes into *its* node's `run_dir`: a restarted
buffer starts empty, an export the driver cannot find kills the job at the end of a stage. So at
start the driver writes a probe file with a secret token under `run_dir`, every actor that writes
there reads it back and writes an answer beside it, and the driver reads the answers; any actor
that cannot see the probe, or whose answer the driver cannot see, stops the job at once with its
node named. `ray.storage=driver_node` instead pins those actors to the driver's node (no shared
storage needed, and no probe).

Limits: the probe proves that one file written by the driver is visible to the actor's process
and one written there is visible to the driver, at start; it cannot see storage that comes and
goes later, nor a path that is shared but too slow.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROBE_PREFIX = ".storage-probe-"


class SharedStorageError(RuntimeError):
    """An actor and the driver do not see the same `run_dir` (message: which actor, which node)."""


def _node() -> str:
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except Exception:  # outside Ray (tests of the plain functions): the host name says enough
        pass
    return socket.gethostname()


def write_probe(run_dir: str | os.PathLike) -> tuple[Path, str]:
    """Write `<run_dir>/.storage-probe-<id>` holding a fresh secret token and this node's name.

    Returns (probe path, token). Raises OSError when `run_dir` cannot be written."""
    token = secrets.token_hex(16)
    path = Path(run_dir) / f"{PROBE_PREFIX}{token[:12]}"
    path.write_text(json.dumps({"token": token, "node": _node()}))
    return path, token


def _answer_path(probe: Path, role: str) -> Path:
    return probe.with_name(f"{probe.name}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', role)}")


def answer_probe(probe: str | os.PathLike, token: str, role: str) -> dict[str, Any]:
    """Run inside the actor: read the probe, and when its token matches write the answer file
    `<probe>.<role>` holding the token. Returns {"role", "node", "seen", "why"}: `seen` False with
    `why` when the probe is missing, unreadable or holds another token (another node's
    `run_dir` at the same path), or the answer cannot be written."""
    probe = Path(probe)
    reply: dict[str, Any] = {"role": role, "node": _node(), "seen": False, "why": None}
    try:
        found = json.loads(probe.read_text()).get("token")
    except FileNotFoundError:
        reply["why"] = f"{probe} does not exist on this node"
        return reply
    except (OSError, ValueError) as e:
        reply["why"] = f"cannot read {probe}: {e}"
        return reply
    if found != token:
        reply["why"] = f"{probe} on this node holds another run's token (a different directory at the same path)"
        return reply
    try:
        _answer_path(probe, role).write_text(json.dumps({"token": token, "node": reply["node"]}))
    except OSError as e:
        reply["why"] = f"cannot write beside {probe}: {e}"
        return reply
    reply["seen"] = True
    return reply


def check_answers(probe: Path, token: str, replies: list[Mapping[str, Any]]) -> None:
    """Run in the driver after `answer_probe` ran in each actor: raise SharedStorageError naming
    every actor that did not see the probe, or whose answer file the driver cannot read back;
    remove the probe and the answers otherwise (and also when raising)."""
    failures = []
    for reply in replies:
        if not reply.get("seen"):
            failures.append(f"{reply['role']} on node {reply['node']}: {reply['why']}")
            continue
        answer = _answer_path(probe, str(reply["role"]))
        try:
            ok = json.loads(answer.read_text()).get("token") == token
        except (OSError, ValueError):
            ok = False
        if not ok:
            failures.append(
                f"{reply['role']} on node {reply['node']}: wrote {answer.name}, which the driver "
                f"on node {_node()} cannot read back"
            )
    for path in [probe, *(_answer_path(probe, str(r["role"])) for r in replies)]:
        path.unlink(missing_ok=True)
    if failures:
        raise SharedStorageError(
            f"the run directory {probe.parent} is not shared between the driver (node {_node()}) and "
            "these actors:\n  " + "\n  ".join(failures) + "\nPut run_dir on storage every node mounts at the "
            "same path, or set ray.storage=driver_node to keep the buffer and the learner on the driver's node."
        )


def driver_node_options() -> dict[str, Any]:
    """Ray actor options that place an actor on the driver's node (hard affinity)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)}
