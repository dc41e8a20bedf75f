"""The weight transports (`cudal1.actors.weight_transport`): one per `rollout.weight_sync` value,
chosen once, nothing opened before the first sync. A broadcast through `BroadcastTransport` between
real actors is tests/actors/test_generator_group.py's; the object store's is the smoke run's
(tests/pipeline/test_topology.py); CUDA IPC needs a GPU (tests/rollout/test_cuda_ipc.py)."""

import pytest

from cudal1.actors.weight_transport import (
    KINDS,
    BroadcastTransport,
    IpcTransport,
    ObjectStoreTransport,
    weight_transport,
)
from cudal1.config import CHOICES, RolloutConfig


def test_one_transport_per_config_value_and_nothing_opened_before_the_first_sync():
    learner, generator = object(), object()  # only held until the first sync
    assert set(KINDS) == {"object_store", "broadcast", "ipc"}
    chosen = {kind: weight_transport(kind, learner, generator) for kind in KINDS}
    assert [type(t) for t in chosen.values()] == [ObjectStoreTransport, BroadcastTransport, IpcTransport]
    assert all(t.kind == kind for kind, t in chosen.items())
    assert chosen["broadcast"].backend == "gloo" and chosen["broadcast"].specs is None
    assert weight_transport("broadcast", learner, generator, on_gpus=True).backend == "nccl"
    assert chosen["ipc"].specs is None
    assert RolloutConfig().weight_sync in KINDS and CHOICES["rollout.weight_sync"] == KINDS
    with pytest.raises(ValueError, match="unknown weight transport 'files'"):
        weight_transport("files", learner, generator)
