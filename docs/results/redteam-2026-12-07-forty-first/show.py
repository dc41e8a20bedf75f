import sys, json
for l in sys.stdin:
    try:
        d = json.loads(l)
    except Exception:
        print(l.rstrip()[:300]); continue
    print(d['rep'], d['cand'][:34], d['status'], d['hack'], round(d['speedup'] or 0, 3), 'K', d['K'], 'ref', round(d['ref_ms'] or 0, 2), 'cand', round(d['cand_ms'] or 0, 2), 'par', d['parallel_cpu_ms'][:5], d['cpu_ms'][:2], d['cpu_interval_ms'][:2], d['msg'][:60])
