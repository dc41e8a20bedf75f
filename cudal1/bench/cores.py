"""Keep compilers off the cores that time: one host's cores, split between timing and builds.

A cold suite run compiles candidates on the same host that times others (on CUDA the two overlap,
which is what makes throughput). Compilers left free to run on every core took the cores of the
timed processes: a 2x kernel scored 0.31x in a cold run because the judge's resolution rose to
5.2 ms while other candidates compiled beside it. Two ways out: timing waits while builds run,
or builds and timing use different cores. Waiting throws away the overlap (a cold run of the 24
CUDA seeds is mostly compiling), so this module splits the cores instead (`CoreSplit`):

- each evaluation that may run at once gets `PER_EVALUATION` cores of its own (a "slot"), on
  which its three processes (the judge, the candidate host, the reference host) and whatever they
  start are pinned (`cudal1.bench.worker.WorkerLimits.cpus`, applied with sched_setaffinity in
  the child before any untrusted code). Two cores: the judge and a host take turns (one waits on
  its socket while the other runs a call), the reference host idles while the candidate is
  called, so two runnable threads at a time is the most an evaluation has; the second core keeps
  the parent's watcher and a host's synchronize spin from queueing behind the active one. On CUDA
  both hosts run on one core of the slot and the judge on the other (`judge_and_hosts`): a host's
  forward is mostly launching kernels, so two hosts on different or wandering cores differ in
  speed by more than a small kernel's time;
- builds (`cudal1.bench.evaluator.prebuild`, the compilers they start) are pinned to the rest.

Timing takes the highest cores, and whole physical cores where the host has SMT (a compiler on
the sibling hardware thread would share the timed thread's execution units).

Where the split is decided: `cudal1.bench.suite.run_suite` reserves one slot per evaluation it
runs at once; a benchmark pool (`cudal1.actors.bench_pool`) reserves one slot per GPU of the node
(`node_split`), its timing actor takes the slot of its GPU and its build actors the rest; an
evaluation given no cores on CUDA takes its device's slot (`device_slot`).

What this does not do: sched_setaffinity is no privilege, so candidate code can widen its own
process's cores (a hostile build can still reach the timing cores; a cpuset control group would
close that). Processes this package did not start (Ray's workers, the driver, other users) are not
pinned. On a host with too few cores (`CoreSplit.reserve` returns None) there is no split, and
the suite makes timing wait for the builds instead. Where sched_setaffinity does not exist
(not Linux) everything here is a no-op.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

PER_EVALUATION = 2
"""Cores reserved for each evaluation that runs at once (see the module doc)."""


def usable_cores() -> tuple[int, ...]:
    """The cores this process may run on (its affinity), sorted; all of `os.cpu_count()` where
    affinity is not available."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return tuple(range(os.cpu_count() or 1))


def pin(cpus: Sequence[int] | None) -> bool:
    """Restrict the calling thread (and so every thread and process it starts later) to `cpus`.

    Returns False, and changes nothing, when `cpus` is empty or None, when affinity is not
    available, or when none of `cpus` exists here. Never raises.
    """
    if not cpus:
        return False
    try:
        os.sched_setaffinity(0, set(cpus))
    except (AttributeError, OSError, ValueError):
        return False
    return True


def thread_siblings(core: int) -> tuple[int, ...]:
    """The hardware threads of `core`'s physical core (itself included), from sysfs; (core,) where
    the topology is not known."""
    try:
        text = Path(f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list").read_text().strip()
        found: set[int] = set()
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            found.update(range(int(lo), int(hi or lo) + 1))
    except (OSError, ValueError):
        return (core,)
    return tuple(sorted(found | {core}))


def gpu_count() -> int:
    """NVIDIA GPUs on this host, from the driver's /proc entries (no CUDA context is made); 0 without."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


@dataclasses.dataclass(frozen=True)
class CoreSplit:
    """Cores of one host: a slot of timing cores per evaluation at a time, and the build cores."""

    slots: tuple[tuple[int, ...], ...]
    """Timing cores of each slot (disjoint when the host has enough cores)."""
    builds: tuple[int, ...]
    """Cores builds may use: every usable core in no slot."""

    @classmethod
    def reserve(
        cls,
        slots: int,
        per_evaluation: int = PER_EVALUATION,
        cores: Sequence[int] | None = None,
        siblings: Callable[[int], tuple[int, ...]] | None = None,
    ) -> "CoreSplit | None":
        """Reserve `per_evaluation` cores for each of `slots` evaluations from `cores` (default:
        `usable_cores()`), the highest first (core 0 takes more of the kernel's own work), and leave
        the rest to builds.

        Whole physical cores are reserved where the host has SMT (`siblings`, default
        `thread_siblings`): a compiler on the other hardware thread of a timing core would share
        its execution units. Where whole cores do not fit (too few, or one physical core), single
        hardware threads are taken. With fewer than slots × per_evaluation + 1 cores, all but one
        are reserved and the slots share them round robin; with fewer than 2 cores (nothing to
        split), or where affinity is not available, returns None. Raises ValueError for slots or
        per_evaluation < 1.
        """
        if slots < 1 or per_evaluation < 1:
            raise ValueError(f"slots and per_evaluation must be at least 1, got {slots} and {per_evaluation}")
        if not hasattr(os, "sched_setaffinity"):
            return None
        have = tuple(sorted(cores)) if cores is not None else usable_cores()
        if len(have) < 2:
            return None
        need, siblings = slots * per_evaluation, siblings or thread_siblings
        reserved: list[int] = []
        for core in reversed(have):  # whole physical cores, from the top
            if len(reserved) >= need:
                break
            if core in reserved:
                continue
            group = [c for c in sorted(set(siblings(core)) | {core}) if c in have and c not in reserved]
            if len(have) - len(reserved) - len(group) < 1:
                break
            reserved += group
        for core in reversed(have):  # single threads, where whole cores did not fit
            if len(reserved) >= need or len(have) - len(reserved) <= 1:
                break
            if core not in reserved:
                reserved.append(core)
        if len(reserved) >= need:  # in reservation order, so a slot keeps a physical core's threads together
            groups = [reserved[i * per_evaluation : (i + 1) * per_evaluation] for i in range(slots)]
        else:  # not enough for disjoint slots: deal the reserved cores out round robin
            groups = [
                [reserved[(i * per_evaluation + j) % len(reserved)] for j in range(per_evaluation)]
                for i in range(slots)
            ]
        return cls(
            slots=tuple(tuple(sorted(set(g))) for g in groups), builds=tuple(c for c in have if c not in reserved)
        )

    def slot(self, i: int) -> tuple[int, ...]:
        """Timing cores of slot `i` (taken modulo the number of slots)."""
        return self.slots[i % len(self.slots)]

    @property
    def timing(self) -> tuple[int, ...]:
        """Every core of every slot."""
        return tuple(sorted({c for s in self.slots for c in s}))


def host_index(device: str) -> int:
    """The host index of a CUDA device name ("cuda", "cuda:<i>"): the i-th entry of
    CUDA_VISIBLE_DEVICES (Ray sets it to the GPUs it gave an actor) where that entry is a number,
    else i (unset, too short, or a UUID)."""
    i = int(device.split(":", 1)[1]) if ":" in device else 0
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return int(visible[i]) if i < len(visible) and visible[i].isdigit() else i


def device_slot(device: str) -> tuple[int, ...] | None:
    """The timing cores of a CUDA device's slot in this node's split (`node_split`): what an
    evaluation given no cores runs on, as a benchmark pool's timing actor of that GPU would. None
    where there is no split (no GPU found, too few cores, no affinity)."""
    split = node_split()
    return split.slot(host_index(device)) if split else None


def judge_and_hosts(cpus: Sequence[int] | None, backend: str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(the judge's cores, both hosts' cores) within an evaluation's `cpus`.

    On CUDA a host's forward is mostly the CPU launching kernels, so the core a host runs on sets
    its one-call round trips: unpinned on an H100, the two hosts running the same reference
    differed by up to 0.39 ms a call (median; the round trips took 1.2-1.9 ms) and the difference wandered
    between calibration and pass (docs/benchmarks.md, 2026-12-06). Both hosts take turns (the
    candidate host is stopped while the reference host runs, the reference host waits on its
    socket while the candidate's runs), so they share one core, the slot's last, and the judge
    takes the rest. On the CPU backend, or with fewer than 2 cores, every process gets all of
    `cpus`. (None, None) for no `cpus`."""
    if not cpus:
        return None, None
    have = tuple(sorted(set(cpus)))
    if backend != "cuda" or len(have) < 2:
        return have, have
    return have[:-1], have[-1:]


def node_split(per_evaluation: int = PER_EVALUATION) -> CoreSplit | None:
    """The split of a benchmark pool's node: one slot per GPU on it (`gpu_count`), so the timing
    actor of GPU i times on slot i and build actors on the same node keep off every slot. None
    on a node without GPUs (a CPU build node: builds may use every core) or too few cores."""
    gpus = gpu_count()
    return CoreSplit.reserve(gpus, per_evaluation) if gpus else None
