"""Where a candidate's inline-extension build spends its time, on a CUDA machine: one builtin seed
built from scratch two ways at once (MAX_JOBS=2 as the evaluator sets it, and MAX_JOBS=1), each
in a fresh directory, with the ninja log's time per compile step. (torch's `use_pch` is not tried:
it writes its precompiled header into torch's own include directory, and once that file exists
every sandboxed build fails trying to remove it.)

    python scripts/gpu_build_probe.py [TASK_ID]
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudal1.tasks import seed_solutions  # noqa: E402

CHILD = r"""
import sys, time, runpy
t = time.time()
runpy.run_path(sys.argv[1])
print("BUILD_S", round(time.time() - t, 2))
"""


def edges(root: Path) -> dict:
    out = {}
    for log in root.rglob(".ninja_log"):
        for line in log.read_text().splitlines()[1:]:
            p = line.split("\t")
            if len(p) >= 4:
                out[p[3]] = round((int(p[1]) - int(p[0])) / 1e3, 1)
    return out


def main() -> None:
    tid = sys.argv[1] if len(sys.argv) > 1 else "level1/10"
    path = seed_solutions("cuda")[tid]
    variants = {"as_is": {}, "max_jobs_1": {"MAX_JOBS": "1"}}
    procs = {}
    for name, env in variants.items():
        d = Path(tempfile.mkdtemp(prefix=f"probe-{name}-"))
        src = d / "cand.py"
        src.write_text(path.read_text() + f"\n# probe {name}\n")
        e = {
            **os.environ,
            "TORCH_EXTENSIONS_DIR": str(d / "ext"),
            "CUDA_VISIBLE_DEVICES": "",
            "TORCH_CUDA_ARCH_LIST": "9.0",
            "MAX_JOBS": "2",
            **env,
        }
        procs[name] = (
            d,
            time.time(),
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(src)],
                env=e,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
    for name, (d, t0, p) in procs.items():
        out = p.communicate()[0]
        print(
            json.dumps(
                {
                    "variant": name,
                    "task": tid,
                    "rc": p.returncode,
                    "wall_s": round(time.time() - t0, 1),
                    "edges_s": edges(d),
                }
            )
        )
        if p.returncode:
            print(out[-3000:])


if __name__ == "__main__":
    main()
