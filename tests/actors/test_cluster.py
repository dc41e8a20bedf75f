"""Where `init_ray` connects: config address, then RAY_ADDRESS (set by `ray job submit`), then local."""

from __future__ import annotations

from cudal1.actors.cluster import ClusterConfig, alive_nodes, init_ray, resolved_address


def test_address_order(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolved_address(ClusterConfig()) is None
    assert resolved_address(ClusterConfig(address="local")) is None
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert resolved_address(ClusterConfig()) == "10.0.0.5:6379"
    assert resolved_address(ClusterConfig(address="auto")) == "auto"
    assert resolved_address(ClusterConfig(address="local")) is None  # tests: never join a real cluster


def test_second_init_returns_the_running_cluster(ray_cluster):
    again = init_ray(address="local", num_cpus=64)  # already connected: nothing new is started
    assert again["started_local"] is False and again["address"] == ray_cluster["address"]
    assert again["resources"]["CPU"] == 4 and again["resources"]["bench_test"] == 2
    [node] = alive_nodes()
    assert node["resources"]["bench_test"] == 2


def test_no_ray_call_starts_a_cluster_implicitly_once_init_ray_ran(ray_cluster):
    """After `init_ray`, Ray's implicit `ray.init()` on a first API call is off in this process: a
    thread that outlives `shutdown_ray` gets an error instead of a second local cluster."""
    from ray._private import auto_init_hook

    assert auto_init_hook.enable_auto_connect is False
