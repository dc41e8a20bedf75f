"""What revealing a round trip's input sets one at a time would cost on a GPU (issue 21's open part).

On the CPU the judge hands over input set j + 1 (a slot of its own, written before the round)
only once it holds its copy of call j's output (`cudal1.bench.judge.Judge._revealed`). On CUDA every set of a round is still in the host's slot
from the first call. This probe measures, between two processes on one GPU (a "judge" and a
"host", no sandbox, no cudal1 code), what three ways of running K calls of one kernel cost:

- `batched`: today's GPU round trip: every set written before the go, the host launches the K
  calls back to back and synchronizes once, the judge copies the K outputs.
- `sync`: a CPU hand-over per call: the host synchronizes after each call and says so; the judge
  copies that output, writes the next set, synchronizes and says so.
- `stream`: a stream-ordered hand-over: the host records an interprocess event after each call and
  says so through a shared CPU word; the judge's stream waits on that event, copies the output,
  writes the next set and records an event of its own, and says so; the host's stream waits on
  that event before the next call. No synchronize until the judge's last copy. A CPU word goes
  with each event because waiting on an event nobody has recorded yet is no wait at all.

Each scheme: the time from the go until the judge holds every output (judge's wall clock, ms),
over K, against the kernel's own time (CUDA events in the host, back to back). Prints one line per
(kernel, scheme) and exits 0 when every scheme's outputs are right. `--one-process` runs the
control instead: the stream-ordered hand-over between two streams of one process (one CUDA
context), against the calls back to back. Figures: docs/benchmarks.md, twenty-first session.

    python3 scripts/gpu_reveal_probe.py [--calls 32] [--reps 15] [--one-process]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from multiprocessing import shared_memory

import torch
import torch.multiprocessing as mp

KERNELS = {
    # name: elements of the input and of the output (fp32); the forward is x * 2 + 1 (`forward`)
    "scale_1m": 1 << 20,
    "scale_16m": 1 << 24,
    "scale_64m": 1 << 26,
}
WORDS = struct.Struct("qqq")  # go (round number), revealed (sets written), placed (calls launched)
SPIN_LIMIT_S = 20.0


def _get(buf, i: int) -> int:
    return WORDS.unpack_from(buf)[i]


def _put(buf, i: int, value: int) -> None:
    struct.pack_into("q", buf, 8 * i, value)


def _spin(buf, i: int, at_least: int) -> None:
    t0 = time.monotonic()
    while _get(buf, i) < at_least:
        if time.monotonic() - t0 > SPIN_LIMIT_S:
            raise TimeoutError(f"word {i} stayed below {at_least}")


def forward(x: torch.Tensor, out: torch.Tensor) -> None:
    torch.mul(x, 2.0, out=out).add_(1.0)


def host_main(q_in, q_out, shm_name: str, numel: int, k: int, reps: int) -> None:
    torch.cuda.set_device(0)
    shm = shared_memory.SharedMemory(shm_name)
    buf = shm.buf
    slot = q_in.get()  # the judge's input slot: k sets of numel floats
    in_events = [torch.cuda.Event.from_ipc_handle(0, h) for h in q_in.get()]
    outs = [torch.empty(numel, device="cuda") for _ in range(k)]
    out_events = [torch.cuda.Event(interprocess=True) for _ in range(k)]
    q_out.put(outs)
    q_out.put([e.ipc_handle() for e in out_events])
    stream = torch.cuda.current_stream()
    t0 = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
    t1 = [torch.cuda.Event(enable_timing=True) for _ in range(k)]
    rnd = 0
    while True:
        scheme = q_in.get()
        if scheme is None:
            break
        own = []
        for _ in range(reps):
            rnd += 1
            _spin(buf, 0, rnd)
            for j in range(k):
                if scheme != "batched" and j:
                    _spin(buf, 1, rnd * k + j)  # set j revealed (CPU word)
                    if scheme == "stream":
                        stream.wait_event(in_events[j])
                t0[j].record()
                forward(slot[j], outs[j])
                t1[j].record()
                if scheme == "stream":
                    out_events[j].record()
                elif scheme == "sync":
                    torch.cuda.synchronize()
                if scheme != "batched":
                    _put(buf, 2, rnd * k + j + 1)
            torch.cuda.synchronize()
            if scheme == "batched":
                _put(buf, 2, rnd * k + k)
            own.append(sum(a.elapsed_time(b) for a, b in zip(t0, t1)) / k)
        q_out.put(own)
    shm.close()


def judge_round(scheme: str, buf, rnd: int, k: int, slot, sets, outs, copies, in_events, out_events) -> float:
    """One round trip; ms from the go until the judge holds every output."""
    stream = torch.cuda.current_stream()
    if scheme == "batched":
        for j in range(k):
            slot[j].copy_(sets[j])
    else:
        slot[0].copy_(sets[0])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    _put(buf, 0, rnd)
    if scheme == "batched":
        _spin(buf, 2, rnd * k + k)
        for j in range(k):
            copies[j].copy_(outs[j])
    else:
        for j in range(k):
            _spin(buf, 2, rnd * k + j + 1)  # call j placed
            if scheme == "stream":
                stream.wait_event(out_events[j])
            copies[j].copy_(outs[j])
            if j + 1 < k:
                slot[j + 1].copy_(sets[j + 1])
                if scheme == "stream":
                    in_events[j + 1].record()
                else:
                    torch.cuda.synchronize()
                _put(buf, 1, rnd * k + j + 1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def probe(name: str, numel: int, k: int, reps: int) -> bool:
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    shm = shared_memory.SharedMemory(create=True, size=WORDS.size)
    buf = shm.buf
    for i in range(3):
        _put(buf, i, 0)
    proc = ctx.Process(target=host_main, args=(q_in, q_out, shm.name, numel, k, reps), daemon=True)
    proc.start()
    slot = torch.zeros(k, numel, device="cuda")
    in_events = [torch.cuda.Event(interprocess=True) for _ in range(k)]
    q_in.put(slot)
    q_in.put([e.ipc_handle() for e in in_events])
    outs = q_out.get(timeout=120)
    out_events = [torch.cuda.Event.from_ipc_handle(0, h) for h in q_out.get(timeout=60)]
    copies = [torch.empty(numel, device="cuda") for _ in range(k)]
    ok, rnd = True, 0
    for scheme in ("batched", "sync", "stream", "batched"):
        q_in.put(scheme)
        walls = []
        for _ in range(reps):
            rnd += 1
            # Fresh values every round; for the reveals, later sets must not be in the slot yet.
            sets = torch.randn(k, numel, device="cuda")
            slot.zero_()
            walls.append(judge_round(scheme, buf, rnd, k, slot, sets, outs, copies, in_events, out_events) / k)
            right = all(torch.equal(copies[j], sets[j] * 2.0 + 1.0) for j in range(k))
            ok &= right
        own = q_out.get(timeout=120)
        kept = walls[len(walls) // 3 :]
        print(
            f"{name:10s} {scheme:8s} K={k}: judge {statistics.median(kept) * 1e3:8.1f} us/call "
            f"(p10-p90 {sorted(kept)[len(kept) // 10] * 1e3:.1f}-{sorted(kept)[-1 - len(kept) // 10] * 1e3:.1f}), "
            f"kernel {statistics.median(own[len(own) // 3 :]) * 1e3:7.1f} us/call, outputs {'right' if right else 'WRONG'}",
            flush=True,
        )
    q_in.put(None)
    proc.join(30)
    shm.close()
    shm.unlink()
    return ok


def one_process(name: str, numel: int, k: int, reps: int) -> bool:
    """The control: the same stream-ordered hand-over with "judge" and "host" as two streams of
    one process (one CUDA context, so no switch between contexts), against the K calls back to
    back on one stream."""
    host_s, judge_s = torch.cuda.Stream(), torch.cuda.Stream()
    slot = torch.zeros(k, numel, device="cuda")
    outs = [torch.empty(numel, device="cuda") for _ in range(k)]
    copies = [torch.empty(numel, device="cuda") for _ in range(k)]
    ev_in = [torch.cuda.Event() for _ in range(k)]
    ev_out = [torch.cuda.Event() for _ in range(k)]
    ok = True
    for scheme in ("batched", "stream", "batched"):
        walls = []
        for _ in range(reps):
            sets = torch.randn(k, numel, device="cuda")
            slot.zero_()
            slot[0].copy_(sets[0])
            if scheme == "batched":
                slot.copy_(sets)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for j in range(k):
                with torch.cuda.stream(host_s):
                    if scheme == "stream" and j:
                        host_s.wait_event(ev_in[j])
                    forward(slot[j], outs[j])
                    ev_out[j].record(host_s)
                if scheme == "stream":
                    with torch.cuda.stream(judge_s):
                        judge_s.wait_event(ev_out[j])
                        copies[j].copy_(outs[j])
                        if j + 1 < k:
                            slot[j + 1].copy_(sets[j + 1])
                            ev_in[j + 1].record(judge_s)
            if scheme == "batched":
                with torch.cuda.stream(judge_s):
                    judge_s.wait_event(ev_out[k - 1])
                    for j in range(k):
                        copies[j].copy_(outs[j])
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3 / k)
            ok &= all(torch.equal(copies[j], sets[j] * 2.0 + 1.0) for j in range(k))
        kept = walls[len(walls) // 3 :]
        print(f"{name:10s} {scheme:8s} K={k} one process: {statistics.median(kept) * 1e3:8.1f} us/call", flush=True)
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=32)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--kernels", nargs="*", default=list(KERNELS))
    p.add_argument("--one-process", action="store_true", help="only the one-process control")
    args = p.parse_args()
    print(torch.cuda.get_device_name(0), torch.__version__, flush=True)
    run = one_process if args.one_process else probe
    ok = all(run(name, KERNELS[name], args.calls, args.reps) for name in args.kernels)
    print("REVEAL_PROBE", "PASS" if ok else "FAIL", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
