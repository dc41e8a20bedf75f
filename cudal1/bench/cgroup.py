"""One control group per candidate process tree: every process it ever forks stays countable and
killable, and its memory is limited by the kernel, page cache and shared memory included.

Without it the parent could only watch the resident memory of the candidate's process tree (a
double-forked daemon leaves the tree; memory held in an unmapped memfd is resident in no
process: both were seen holding 2-3 GiB past a 1 GiB limit) and kill what it could still find
(a process that keeps forking and letting its parent exit was never at a pid the parent listed).
In a control group:

- `memory`: the limit covers anonymous memory, page cache and shmem/memfd pages the group's
  processes allocate; past it the kernel's OOM killer ends a process of the group, and the parent
  reads the group's OOM count to report resource_exceeded.
- `pids`: at most `max_processes` tasks (processes and threads) in the group.
- `kill()`: cgroup v2's cgroup.kill, or on v1 freeze the group, SIGKILL every task in it until
  none is left, thaw. A process cannot leave its group without write access to another one.

`CandidateCgroup.create` builds the group beneath the evaluating process's own groups (so the
candidate stays inside whatever limits the evaluator itself runs under), on cgroup v2 (a unified
hierarchy with the memory and pids controllers) or v1 (memory, pids, freezer hierarchies, and
cpuacct where mounted). It
needs write access there (root, or a delegated subtree) and returns None, with the reason in
`unavailable_reason`, where it has none: the evaluator then falls back to its resident-memory
watch and its kill of the candidate's uid, and the result's sandbox report says which was used.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "freezer")
V1_OPTIONAL = ("cpuacct",)
"""v1 hierarchies used where mounted and writable: cpuacct counts the CPU time of every process that has been
in the group, ended ones included (without it the count sums the processes alive when it reads,
and a helper that ends between two readings takes its time with it)."""


def _own_path(controller: str | None) -> str:
    """This process's group path in `controller`'s v1 hierarchy, or in the v2 one (None)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if controller is None and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if controller is not None and controller in parts[1].split(","):
            return parts[2]
    return "/"


class CandidateCgroup:
    """A control group for one candidate host's process tree (see the module docstring)."""

    unavailable_reason = ""

    def __init__(self, dirs: dict[str, Path], version: int) -> None:
        self.dirs = dirs
        self.version = version

    @classmethod
    def create(cls, memory_mib: int, max_processes: int) -> "CandidateCgroup | None":
        """A new group with these limits, or None (reason in `CandidateCgroup.unavailable_reason`)."""
        name = f"cudal1-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            group = cls._create_v2(name) or cls._create_v1(name)
        except OSError as exc:
            cls.unavailable_reason = f"cannot create a control group: {exc}"
            return None
        if group is None:
            return None
        try:
            group._limit(memory_mib, max_processes)
        except OSError as exc:
            cls.unavailable_reason = f"cannot set the control group's limits: {exc}"
            group.remove()
            return None
        return group

    @classmethod
    def _create_v2(cls, name: str) -> "CandidateCgroup | None":
        controllers = ROOT / "cgroup.controllers"
        if not controllers.exists() or not {"memory", "pids"} <= set(controllers.read_text().split()):
            return None
        parent = ROOT / _own_path(None).lstrip("/")
        if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
            # A group with processes cannot enable controllers for children (no internal processes).
            cls.unavailable_reason = f"cgroup v2: memory and pids are not enabled beneath {parent}"
            return None
        path = parent / name
        path.mkdir()
        return cls({"memory": path, "pids": path, "kill": path}, 2)

    @classmethod
    def _create_v1(cls, name: str) -> "CandidateCgroup | None":
        dirs: dict[str, Path] = {}
        for controller in V1_CONTROLLERS:
            mount = ROOT / controller
            if not (mount / "cgroup.procs").exists():
                cls.unavailable_reason = f"cgroup v1: no {controller} hierarchy at {mount}"
                for made in dirs.values():
                    made.rmdir()
                return None
            path = mount / _own_path(controller).lstrip("/") / name
            path.mkdir()
            dirs[controller] = path
        for controller in V1_OPTIONAL:
            mount = ROOT / controller
            path = mount / _own_path(controller).lstrip("/") / name
            if not (mount / "cgroup.procs").exists() or path in dirs.values():
                continue
            try:
                path.mkdir()
            except OSError:  # optional: without it the group still limits and kills
                continue
            dirs[controller] = path
        return cls(dirs, 1)

    def _limit(self, memory_mib: int, max_processes: int) -> None:
        limit = str(int(memory_mib) * 2**20)
        if self.version == 2:
            (self.dirs["memory"] / "memory.max").write_text(limit)
            swap = self.dirs["memory"] / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            (self.dirs["pids"] / "pids.max").write_text(str(max_processes))
        else:
            (self.dirs["memory"] / "memory.limit_in_bytes").write_text(limit)
            (self.dirs["pids"] / "pids.max").write_text(str(max_processes))

    def add(self, pid: int) -> None:
        """Move process `pid` (and so everything it forks later) into the group."""
        for path in set(self.dirs.values()):
            (path / "cgroup.procs").write_text(str(pid))

    def pids(self, live: bool = False) -> list[int]:
        """The processes now in the group (with `live`, not those already dead and waiting to be
        reaped by their parent)."""
        try:
            text = (self.dirs["pids"] / "cgroup.procs").read_text()
        except OSError:
            return []
        pids = [int(p) for p in text.split()]
        return [p for p in pids if _alive(p)] if live else pids

    def cpu_ns(self) -> int | None:
        """CPU time (ns) spent by every process that has been in the group, ended ones included
        (cgroup v2 `cpu.stat` usage_usec, microseconds; v1 `cpuacct.usage`, nanoseconds); None
        under v1 without a cpuacct hierarchy or where it cannot be read."""
        if self.version == 1:
            if "cpuacct" not in self.dirs:
                return None
            try:
                return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return None
        usec = _field(self.dirs["memory"] / "cpu.stat", "usage_usec", default=None)
        return None if usec is None else usec * 1000

    def oom_kills(self) -> int:
        """How many times the kernel's OOM killer ended a process of the group."""
        if self.version == 2:
            return _field(self.dirs["memory"] / "memory.events", "oom_kill")
        return _field(self.dirs["memory"] / "memory.oom_control", "oom_kill")

    def peak_mib(self) -> float:
        """The group's peak memory charge (MiB; 0 where the kernel does not report it)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs["memory"] / name).read_text().split()[0]) / 2**20
        except (OSError, ValueError, IndexError):
            return 0.0

    def kill(self, timeout_s: float = 5.0) -> bool:
        """Kill every process of the group; True when none is left alive. On v1, each pass freezes
        the group (nothing forks while it is listed), sends SIGKILL to all, and thaws it (a
        frozen process dies only once thawed)."""
        if self.version == 2 and (self.dirs["kill"] / "cgroup.kill").exists():
            try:
                (self.dirs["kill"] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.pids(live=True)
            if not pids:
                return True
            if self.version == 1:
                self._freeze(True)
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self.version == 1:
                self._freeze(False)
            time.sleep(0.01)
        return not self.pids(live=True)

    def _freeze(self, frozen: bool) -> None:
        try:
            (self.dirs["freezer"] / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
        except (OSError, KeyError):
            pass

    def describe(self) -> str:
        return f"cgroup v{self.version}: " + ", ".join(sorted({str(p) for p in self.dirs.values()}))

    def remove(self) -> None:
        """Delete the (empty) group; quietly leaves it if processes are still in it."""
        for path in set(self.dirs.values()):
            try:
                path.rmdir()
            except OSError:
                pass


def _alive(pid: int) -> bool:
    """Not a zombie (nor gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _field(path: Path, name: str, default: int | None = 0) -> int | None:
    """The integer after `name` in a "key value" file (memory.events, cpu.stat); `default` when
    the file cannot be read or has no such line."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        pass
    return default
