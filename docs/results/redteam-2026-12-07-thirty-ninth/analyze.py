import json, sys, statistics as st
def med(v): return round(st.median(v), 3) if v else None
for f in sys.argv[1:]:
    for line in open(f):
        d = json.loads(line); rt = d["rt"]
        fc = lambda k: med([t["wall_ms"] - t["own_ms"] for t in rt.get(k, []) if t.get("own_ms") is not None])
        w = lambda k: med([t["wall_ms"] for t in rt.get(k, [])])
        oc = (d.get("extra") or {}).get("one_call") or {}
        print(d["name"], "sp", d["sp"] and round(d["sp"], 3), "K", d["K"], "ref", d["ref"] and round(d["ref"], 4), "cand", d["cand"] and round(d["cand"], 4), "base", d["base"],
              "| fixed cal", fc("calibration reference"), "pass", fc("reference"), "after", fc("after the candidate reference"), "cand-pass", fc("candidate"),
              "| 1call cal", w("calibration one-call reference"), "pass", w("one-call reference"), "after", w("after the candidate one-call reference"), "cand", w("one-call candidate"),
              "| floor", oc.get("floor_ms") and round(oc["floor_ms"], 4), "batched", oc.get("batched_ms") and round(oc["batched_ms"], 4), d.get("labels"), d["status"])
