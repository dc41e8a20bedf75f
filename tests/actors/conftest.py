"""One local Ray cluster for every test under tests/actors (started once per session: ~10 s).

Three logical CPUs (benchmark actors and shells take one each), two units of the custom resource
`bench_test` (the pool-placement tests ask for it), no dashboard, a 128 MiB object store.
`address="local"` starts a new cluster even when RAY_ADDRESS points at a running one.
"""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from cudal1.actors.cluster import init_ray, shutdown_ray  # noqa: E402


@pytest.fixture(scope="session")
def ray_cluster():
    """Facts of the running local cluster ({"address", "started_local", "resources"})."""
    facts = init_ray(address="local", num_cpus=3, resources={"bench_test": 2}, object_store_mb=128,
                     include_dashboard=False, log_to_driver=False)
    yield facts
    shutdown_ray()
