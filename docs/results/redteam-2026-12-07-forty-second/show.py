"""Medians per (task, candidate) over results.jsonl: speedup, charged ms per round trip."""
import json, statistics, collections, pathlib
rows = [json.loads(l) for l in open(pathlib.Path(__file__).parent / "results.jsonl")]
g = collections.defaultdict(list)
for r in rows:
    g[(r["task"], r["cand"])].append(r)
for (t, c), rs in g.items():
    sp = [r["speedup"] or 0 for r in rs]
    ch = [x for r in rs for x in r["parallel_cpu_ms"] if x is not None]
    bu = [x for r in rs for x in (r.get("busiest_ms") or []) if x is not None]
    st = collections.Counter(r["status"] for r in rs)
    print(f"{t:16} {c:36} n={len(rs)} {dict(st)} speedup median {statistics.median(sp):.3f} "
          f"[{', '.join(f'{x:.2f}' for x in sp)}] charged/rt median {statistics.median(ch) if ch else float('nan'):.2f} max {max(ch) if ch else float('nan'):.1f}"
          + (f" busiest median {statistics.median(bu):.1f}" if bu else "")
          + f" cand_ms median {statistics.median([r['cand_ms'] or 0 for r in rs]):.2f}")
