"""Confine the current process before it runs untrusted candidate code: `apply_sandbox`.

Called once in every child of `cudal1.bench.worker` (the candidate host, the judge, build and
probe workers), after its log and its channels are open and before any candidate or task code is
imported. Every measure is irreversible for the process
and best-effort: when the OS refuses one, the others still apply, and the returned
`SandboxReport` says per measure whether it is in force and why not. Linux only; elsewhere only
the resource limits apply.

What it does (in this order):

1. Resource limits (`resource.setrlimit`): CPU time (SIGXCPU at the soft limit, SIGKILL one
   second later; all threads add up), no core files, a file-size cap, a process/thread cap
   (RLIMIT_NPROC), and an address-space cap only when asked (CUDA reserves huge virtual ranges,
   so the CUDA backend must leave it unset; memory is limited by the parent's watch of the
   resident memory of the whole process tree).
2. No network: a new, empty network namespace (`unshare(CLONE_NEWNET)`; its loopback is down,
   so every connect fails, 127.0.0.1 included). Without permission it tries a new user namespace
   with it, but only when no privilege drop follows (a user namespace would leave the target user
   unmapped). Also, where Landlock knows networks (ABI >= 4), TCP bind and connect are denied.
   IPC: new IPC and UTS namespaces (`unshare(CLONE_NEWIPC | CLONE_NEWUTS)`, after the network
   one, so also inside its user namespace when one was made): SysV shared memory, semaphores and
   message queues and POSIX message queues the process creates are its own and are destroyed with
   its last process, so nothing it leaves there outlives its evaluation or reaches a later one.
   Where that is refused, the parent removes the SysV objects the child's uid owns once it has
   killed its processes (`remove_ipc_objects`). The report's `namespaces` measure names the
   namespaces the process has of its own, as /proc/self/ns shows them. No PID namespace: after unshare(CLONE_NEWPID) the
   process's first child becomes the namespace's init, and once that child exits (a compiler
   ninja started, say) no later fork succeeds. No mount namespace either: writes are confined by
   Landlock, and /dev/shm is not writable.
3. Writes confined (Landlock, ABI 1-7 handled): writing, truncating, creating, removing,
   renaming, linking and mknod are allowed only beneath `scratch` and the `writable` dirs.
   Reads (`confine_reads`, set for every process that runs candidate code): an allow-list. The
   process reads and lists only the toolchain and its own dirs (scratch, `writable`), whatever
   the files' modes and its CAP_DAC_READ_SEARCH. The toolchain (`toolchain_reads`) is derived
   from the process itself when the sandbox is applied: the interpreter's prefixes, the
   `sys.path` entries of the standard library and site-packages, the package directory of each
   module already imported from anywhere else (the `cudal1` package of a checkout, not the
   checkout), CUDA's home, the directories of the compilers and ninja on $PATH, /usr, /lib*,
   /bin, /sbin, /proc, /sys, a few files of /etc (`ETC_READS`: the dynamic linker's, users,
   hosts, time zone) and the world-readable and GPU character devices of /dev (no block device,
   no /dev/shm). A file outside it (a run directory, the exemplar buffer, other rollouts, the
   user's home, the checkout's other files) cannot be opened (EACCES). Executing needs reading
   (Landlock checks READ_FILE for execve), so only programs of the toolchain and the process's
   own dirs run. Without `confine_reads`, reading stays allowed everywhere but beneath the
   `hidden` dirs. Either way, beneath the `hidden` dirs (the build cache and the temporary
   directory, for the candidate's processes) the process reads and lists only its own dirs,
   even where a toolchain path holds them (`readable_paths`: every entry of each directory on
   the way to a hidden dir is allowed one by one, as it exists when the sandbox is applied;
   those directories themselves cannot be listed). Seen on the H200, with the hidden dirs and
   with the read allow-list (eighth session, `docs/benchmarks.md`): CUDA, cuBLAS, nvcc, Triton and
   torch.compile work under such rules (Triton's cache renames need LANDLOCK_ACCESS_FS_REFER in scratch, which the write
   rules give). Opening a file for writing is a
   Landlock write even for a character device, so write access is granted, file by file, to the
   character devices under /dev that everyone may write (null, zero, full, random, urandom, tty,
   ptmx) and to GPU devices (/dev/nvidia*, /dev/dri/*, /dev/kfd) - CUDA opens /dev/nvidia* with
   O_RDWR. Writes beneath /proc are allowed too: CUDA writes under /proc/self/task (probably
   thread names; seen on the H200: without it cuInit fails with error 304 "OS call failed"). After
   the privilege drop, file modes limit that to the candidate's own processes; a process that
   stays root gets only its own /proc/<pid> (a rule Landlock can lose if the kernel evicts that
   procfs inode). ioctl on device files is left unrestricted (CUDA's driver is ioctl-based). /dev/shm is
   not writable (a candidate could leave data there for a later one); pass it in `writable` if a
   candidate must use POSIX shared memory or `multiprocessing` locks. Where Landlock scoping
   exists (ABI >= 6) the process also cannot signal processes outside its sandbox (the evaluator,
   other candidates) nor connect to abstract unix sockets outside it. Landlock also forbids
   mount(2) and ptrace of processes outside the sandbox.
4. Unprivileged user: when running as root, after `no_new_privs`, switch to an unprivileged uid
   and gid with no supplementary groups. By default the uid is unique per child (UID_BASE + pid
   modulo UID_SPAN) so that RLIMIT_NPROC counts only this candidate's processes and threads (it
   counts all tasks of a real uid, and the kernel ignores it for root) and concurrent candidates
   cannot signal each other. The gid is `policy.gid` (default nogroup, 65534; the evaluator gives
   each candidate source a group of its own, `cudal1.bench.evaluator.build_group`) and the umask
   is 0o002, so build products one candidate leaves in its `writable` build dir stay writable for
   the next evaluation of the same source. The `writable` dirs are created if missing and made
   world-writable (mode | 0o777) when the unprivileged user could not write them, unless `gid`
   owns one with group rights (a build dir the parent gave that group alone); the parent makes
   `scratch` mode 0o777, or root:gid 0o2770 (`cudal1.bench.worker.open_to_child`).
   With `keep_read_access` (default) the process keeps exactly one capability,
   CAP_DAC_READ_SEARCH, also across exec (ambient), so it can still read every file root could
   where Landlock lets it read (with `confine_reads`, the toolchain and its own dirs): Python's
   standard library or the venv may sit in a directory only root can enter (here /root is
   0700). Where read rules were asked for (`confine_reads` or `hidden`) but Landlock could not
   apply them, the capability is not kept (it would read what they hide, whatever the modes):
   file modes alone then decide, and the report's drop_privileges says so. GPU device files must be usable by that user (usually mode 0666; if yours are 0660
   with a group such as `video`, pass that gid in `groups`).
5. No namespaces of its own making: a syscall filter (`cudal1.bench.seccomp`) refuses unshare,
   clone and setns into new or other namespaces (EPERM), and clone3 (ENOSYS; glibc falls back to
   clone). Namespaces cost kernel memory that no limit here counts, and their teardown runs in
   kernel threads that are not the candidate's, after its processes are killed, while the judge
   times the reference without it (a red team held thousands of network namespaces and kept a
   core busy for about a second after its kill).

What it does NOT protect against (be honest about these when trusting a reward):

- The syscall filter covers namespaces only: every other syscall the kernel lets an
  unprivileged process make is allowed, including CUDA driver ioctls; a kernel bug is a way out.
- Reads: where Landlock is missing (the report's `landlock_read` says why), the process reads
  whatever its uid and group may read by mode (without the read rules it keeps no
  CAP_DAC_READ_SEARCH). With
  Landlock, what the toolchain holds stays readable: the whole of /proc (other processes'
  command lines; their memory, environment and descriptors only as ptrace rules allow), /sys,
  /usr and site-packages, and the `cudal1` package with its builtin seed solutions. Without
  `confine_reads`, everything but the `hidden` dirs is readable. With the network cut, what
  a candidate reads can only leak through the result and logs the evaluator returns.
- Unix sockets bound to a path are not covered by the network namespace nor (ABI <= 7) by
  Landlock: a candidate can connect to any socket file its user may write. In particular a
  candidate running as the *same* user as the evaluator can reach the multiprocessing fork
  server's socket and start an unconfined process: run the evaluator as root (so the drop
  happens) or as a user other than the one candidates run as.
- As root without the privilege drop (`drop_privileges=False`, or the drop refused), the
  candidate can raise its own resource limits and RLIMIT_NPROC is not enforced.
- GPU memory is not limited here, and host memory only by the parent's resident-memory watch
  (which samples; a fast allocation can overshoot before the kill).
- Disk use is bounded per file (RLIMIT_FSIZE), not in total: many files can still fill the
  scratch or cache filesystem.
- A candidate can waste its own CPU and wall time within its limits, and can slow concurrent
  evaluations on the same machine (shared cores, caches, memory bandwidth, GPU).
- The writable dirs are shared with later candidates that get the same dirs (a build directory
  is one per source: only the same source, evaluated again, finds what the last one left).
- Processes a candidate detaches (double fork plus setsid) survive the worker's kill of its
  process group. They stay confined and count against RLIMIT_NPROC; the parent can find them by
  their uid (`default_uid`). Per-child uids repeat after UID_SPAN pids.
- RLIMIT_NPROC counts threads too (torch starts one intra-op thread per core), and RLIMIT_CPU is
  per process: every child process gets its own CPU budget.
- Threads that already exist when `apply_sandbox` runs are not confined by Landlock or
  `no_new_privs` (both are per thread); the report says so. The worker calls it in a freshly
  forked, single-threaded child.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import resource
import stat
import sys
from pathlib import Path
from typing import Any

NOBODY_GID = 65534
UID_BASE = 20000
UID_SPAN = 40000
"""Per-child uids are UID_BASE + pid % UID_SPAN: inside 0..65535, so they exist in user
namespaces that map only the first 65536 ids (rootless containers)."""

# Linux constants (uapi headers). Landlock syscall numbers are the same on every architecture.
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
_LANDLOCK_RULE_PATH_BENEATH = 1
_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_LANDLOCK_SCOPE_SIGNAL = 1 << 1
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1

_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_CHAR = 1 << 6
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_MAKE_SOCK = 1 << 9
_FS_MAKE_FIFO = 1 << 10
_FS_MAKE_BLOCK = 1 << 11
_FS_MAKE_SYM = 1 << 12
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
# Not handled on purpose: EXECUTE, IOCTL_DEV (ABI 5; CUDA). READ_FILE and READ_DIR only where reads
# are confined or something is hidden (`apply_sandbox`'s `reads` and `hidden`).

_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUTS = 0x04000000
_IPC_RMID = 0
_CLONE_NEWUSER = 0x10000000
_PR_SET_DUMPABLE = 4
_PR_SET_KEEPCAPS = 8
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_RAISE = 2
_CAP_DAC_READ_SEARCH = 2
_CAP_VERSION_3 = 0x20080522
_O_PATH = getattr(os, "O_PATH", 0o10000000)


@dataclasses.dataclass
class SandboxPolicy:
    """What to confine. Seconds, MiB.

    `enabled=False` applies only the resource limits (for debugging a candidate by hand).
    """

    enabled: bool = True
    cpu_time_s: float | None = None
    """RLIMIT_CPU in seconds of CPU time (rounded up); all threads count. None: unlimited."""
    memory_mib: int | None = None
    """Not enforced here: the parent kills the tree above this resident memory (named in the report)."""
    max_processes: int | None = 64
    """RLIMIT_NPROC: processes *and threads* of the (unprivileged) user, this one included."""
    address_space_mib: int | None = None
    """RLIMIT_AS; leave None for CUDA (its driver reserves far more virtual memory than it uses)."""
    file_size_mib: int = 4096
    """RLIMIT_FSIZE: largest file the process may write (a write past it fails with EFBIG)."""
    block_network: bool = True
    isolate_ipc: bool = True
    """A new IPC namespace (SysV shared memory, semaphores, message queues; POSIX message queues)
    and UTS namespace: what the process creates there dies with its last process."""
    confine_writes: bool = True
    drop_privileges: bool = True
    """When root: switch to `uid`/`gid` after the other measures."""
    uid: int | None = None
    """None: UID_BASE + pid % UID_SPAN, unique among concurrent children."""
    gid: int = NOBODY_GID
    groups: tuple[int, ...] = ()
    """Supplementary groups after the drop (e.g. the group of GPU device files that are not 0666)."""
    keep_read_access: bool = True
    """Keep CAP_DAC_READ_SEARCH after the drop, so every file the read rules allow stays readable
    whatever its mode (see module doc)."""
    block_namespaces: bool = True
    """The syscall filter of `cudal1.bench.seccomp`: no new namespaces, no setns (module doc, 5)."""
    confine_reads: bool = False
    """Landlock read rules as an allow-list: the process reads only the toolchain
    (`toolchain_reads`) and its own dirs (scratch, `writable`). False: everything but the
    `hidden` dirs stays readable."""


@dataclasses.dataclass
class Measure:
    """One isolation measure: whether it was asked for, whether it is in force, and why (not)."""

    requested: bool
    active: bool
    detail: str = ""


@dataclasses.dataclass
class SandboxReport:
    """Per measure (names: rlimit_cpu, rlimit_core, rlimit_fsize, rlimit_nproc, rlimit_as,
    network, ipc_namespace, namespaces, no_new_privs, landlock_fs, landlock_net, landlock_scope, drop_privileges,
    namespace_filter), whether
    it is in force; plus the identity the process ended with."""

    enabled: bool
    measures: dict[str, Measure] = dataclasses.field(default_factory=dict)
    uid: int = -1
    gid: int = -1
    landlock_abi: int = 0
    threads: int = 1
    """Threads the process had when the sandbox was applied (1 is what Landlock needs)."""

    def active(self, name: str) -> bool:
        """True when measure `name` is in force (False for unknown names)."""
        m = self.measures.get(name)
        return bool(m and m.active)

    def inactive_requested(self) -> list[str]:
        """Names of measures that were asked for but are not in force."""
        return [n for n, m in self.measures.items() if m.requested and not m.active]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: {"enabled", "uid", "gid", "landlock_abi", "threads", "measures":
        {name: {"requested", "active", "detail"}}}."""
        return dataclasses.asdict(self)

    def _set(self, name: str, requested: bool, active: bool, detail: str = "") -> None:
        self.measures[name] = Measure(requested, active, detail)


def apply_sandbox(
    policy: SandboxPolicy, scratch: Path, writable: list[Path] | None = None, hidden: list[Path] | None = None
) -> SandboxReport:
    """Apply `policy` to the calling process, irreversibly; never raises for a refused measure.

    scratch: the candidate's own directory (must exist; the parent makes it mode 0o777).
    writable: further directories the candidate may write (e.g. its build directory); created if
    missing and made world-writable when a privilege drop needs it.
    hidden: directories nothing beneath which the process may read or list (Landlock), except
    `scratch` and the `writable` dirs that lie beneath them (e.g. the build cache, of which a
    candidate reads only its own build directory). Everything else stays readable, or with
    `policy.confine_reads` only the toolchain (`toolchain_reads`) and the process's own dirs;
    "/" and a dir that holds the interpreter or a `sys.path` entry are never hidden (`_hideable`).
    Returns what is in force. Call it while the process has a single thread.
    """
    writable = [Path(p) for p in (writable or [])]
    hidden = _hideable([Path(p) for p in (hidden or [])])
    report = SandboxReport(enabled=policy.enabled, threads=_thread_count())
    _apply_rlimits(policy, report)
    if not policy.enabled:
        for name in (
            "network",
            "ipc_namespace",
            "namespaces",
            "no_new_privs",
            "landlock_fs",
            "landlock_net",
            "landlock_scope",
            "landlock_read",
            "drop_privileges",
            "namespace_filter",
        ):
            report._set(name, False, False, "sandbox disabled")
        _finish(report)
        return report
    if not sys.platform.startswith("linux"):
        for name in (
            "network",
            "ipc_namespace",
            "namespaces",
            "no_new_privs",
            "landlock_fs",
            "landlock_net",
            "landlock_scope",
            "landlock_read",
            "drop_privileges",
            "namespace_filter",
        ):
            report._set(name, True, False, f"not available on {sys.platform}")
        _finish(report)
        return report

    root = os.geteuid() == 0
    will_drop = policy.drop_privileges and root
    uid = policy.uid if policy.uid is not None else default_uid(os.getpid())
    before = _namespaces()
    _guarded(report, ["network"], _isolate_network, policy, report, not will_drop)
    _guarded(report, ["ipc_namespace"], _isolate_ipc, policy, report)
    _report_namespaces(report, before)
    prepared = _prepare_writable(writable, policy.gid) if will_drop else []
    _guarded(report, ["no_new_privs"], _no_new_privs, report)
    # CUDA writes under /proc/self/task and fails to initialise without it. An unprivileged
    # process may only write its own processes' entries there; root keeps to its own.
    proc = Path("/proc") if will_drop or not root else Path(f"/proc/{os.getpid()}")
    reads = toolchain_reads() if policy.confine_reads and policy.enabled else None
    _guarded(
        report,
        ["landlock_fs", "landlock_net", "landlock_scope", "landlock_read"],
        _landlock,
        policy,
        report,
        [Path(scratch), *writable],
        proc,
        hidden,
        reads,
    )
    if will_drop:
        _guarded(report, ["drop_privileges"], _drop_privileges, policy, report, uid, policy.uid is None, prepared)
    else:
        why = "drop_privileges=False" if root else "not root: nothing to drop"
        report._set("drop_privileges", policy.drop_privileges and root, False, why)
    _guarded(report, ["namespace_filter"], _namespace_filter, policy, report)
    _finish(report)
    return report


def _guarded(report: SandboxReport, names: list[str], fn: Any, *args: Any) -> None:
    """Run one measure; an error nobody foresaw marks its measures as not in force."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - apply_sandbox must not raise for a refused measure
        for name in names:
            if name not in report.measures:
                report._set(name, True, False, f"unexpected error: {type(e).__name__}: {e}")


def default_uid(pid: int) -> int:
    """The uid a root child with this pid switches to under the default policy (`uid=None`).

    The parent can use it to find processes a candidate left behind outside its process group
    (e.g. `psutil` processes whose real uid is this one) and kill them.
    """
    return UID_BASE + pid % UID_SPAN


# -- resource limits ---------------------------------------------------------------------------


def _setrlimit(report: SandboxReport, name: str, which: int, soft: int, hard: int, note: str = "") -> None:
    """Lower one limit; never raise it above the current hard limit (that needs privileges)."""
    try:
        _, cur_hard = resource.getrlimit(which)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard) if hard != resource.RLIM_INFINITY else cur_hard
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))
        report._set(name, True, True, note or f"soft={soft} hard={hard}")
    except (OSError, ValueError) as e:
        report._set(name, True, False, f"setrlimit refused: {e}")


def _apply_rlimits(policy: SandboxPolicy, report: SandboxReport) -> None:
    if policy.cpu_time_s is not None:
        soft = max(1, math.ceil(policy.cpu_time_s))
        _setrlimit(
            report,
            "rlimit_cpu",
            resource.RLIMIT_CPU,
            soft,
            soft + 1,
            f"{soft} s CPU (SIGXCPU), SIGKILL at {soft + 1} s",
        )
    else:
        report._set("rlimit_cpu", False, False, "cpu_time_s=None")
    _setrlimit(report, "rlimit_core", resource.RLIMIT_CORE, 0, 0, "no core files")
    fsize = policy.file_size_mib * 2**20
    _setrlimit(report, "rlimit_fsize", resource.RLIMIT_FSIZE, fsize, fsize, f"{policy.file_size_mib} MiB per file")
    if policy.max_processes is not None:
        n = policy.max_processes
        _setrlimit(report, "rlimit_nproc", resource.RLIMIT_NPROC, n, n, f"{n} processes+threads of the user")
    else:
        report._set("rlimit_nproc", False, False, "max_processes=None")
    if policy.address_space_mib is not None:
        size = policy.address_space_mib * 2**20
        _setrlimit(report, "rlimit_as", resource.RLIMIT_AS, size, size, f"{policy.address_space_mib} MiB address space")
    else:
        watch = f"{policy.memory_mib} MiB" if policy.memory_mib is not None else "its limit"
        report._set(
            "rlimit_as", False, False, f"address_space_mib=None; memory is the parent's resident-memory watch ({watch})"
        )


def _finish(report: SandboxReport) -> None:
    """Record the final identity; RLIMIT_NPROC is not enforced for root."""
    report.uid, report.gid = os.geteuid(), os.getegid()
    m = report.measures.get("rlimit_nproc")
    if m and m.active and report.uid == 0:
        m.active = False
        m.detail += "; set but not enforced: the process is root"


# -- syscalls through ctypes ---------------------------------------------------------------------

_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def _prctl(option: int, arg2: int = 0, arg3: int = 0, what: str = "prctl") -> None:
    ul = ctypes.c_ulong
    _check(_lib().prctl(ctypes.c_int(option), ul(arg2), ul(arg3), ul(0), ul(0)), what)


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


# -- network -------------------------------------------------------------------------------------


def _isolate_network(policy: SandboxPolicy, report: SandboxReport, allow_userns: bool) -> None:
    if not policy.block_network:
        report._set("network", False, False, "block_network=False")
        return
    libc = _lib()
    try:
        _check(libc.unshare(ctypes.c_int(_CLONE_NEWNET)), "unshare(CLONE_NEWNET)")
        report._set("network", True, True, "new network namespace (loopback down)")
        return
    except (OSError, AttributeError) as e:
        first = str(e)
    if not allow_userns:
        report._set("network", True, False, f"{first}; no user-namespace fallback when dropping privileges")
        return
    uid, gid = os.geteuid(), os.getegid()
    try:
        _check(libc.unshare(ctypes.c_int(_CLONE_NEWUSER | _CLONE_NEWNET)), "unshare(CLONE_NEWUSER|CLONE_NEWNET)")
    except (OSError, AttributeError) as e:
        report._set("network", True, False, f"{first}; {e}")
        return
    # Map our own ids so the process keeps its identity inside the new user namespace. A process
    # that changed its uid earlier is not dumpable, and then /proc/self/*_map belong to root.
    try:
        _prctl(_PR_SET_DUMPABLE, 1, what="prctl(PR_SET_DUMPABLE)")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        mapped = "ids mapped"
    except OSError as e:
        mapped = f"id map not written ({e})"
    report._set("network", True, True, f"new user+network namespace (loopback down; {mapped})")


# -- IPC and UTS namespaces ----------------------------------------------------------------------


def _isolate_ipc(policy: SandboxPolicy, report: SandboxReport) -> None:
    """unshare(CLONE_NEWIPC | CLONE_NEWUTS): needs CAP_SYS_ADMIN, which root has, and so does an
    unprivileged process inside the user namespace `_isolate_network` may have made."""
    if not policy.isolate_ipc:
        report._set("ipc_namespace", False, False, "isolate_ipc=False")
        return
    try:
        _check(_lib().unshare(ctypes.c_int(_CLONE_NEWIPC | _CLONE_NEWUTS)), "unshare(CLONE_NEWIPC|CLONE_NEWUTS)")
    except (OSError, AttributeError) as e:
        report._set("ipc_namespace", True, False, f"{e}; the parent removes the SysV objects of the uid afterwards")
        return
    report._set(
        "ipc_namespace", True, True, "new IPC and UTS namespaces: SysV and POSIX queue objects die with the process"
    )


_NAMESPACES = ("net", "ipc", "uts", "user", "pid", "mnt", "cgroup", "time")


def _namespaces() -> dict[str, int]:
    """The inode of each namespace this process is in (those /proc/self/ns shows here)."""
    out = {}
    for name in _NAMESPACES:
        try:
            out[name] = os.stat(f"/proc/self/ns/{name}").st_ino
        except OSError:
            pass
    return out


def _report_namespaces(report: SandboxReport, before: dict[str, int]) -> None:
    """The `namespaces` measure: which namespaces the process now has of its own (its inode in
    /proc/self/ns changed), read from the kernel rather than from what was asked."""
    after = _namespaces()
    own = [n for n in _NAMESPACES if n in before and after.get(n) != before[n]]
    shared = [n for n in _NAMESPACES if n in before and n not in own]
    report._set(
        "namespaces",
        True,
        bool(own),
        f"own: {', '.join(own) or 'none'}; shared with the parent: "
        f"{', '.join(shared) or 'none'} (pid and mnt are never made: see the module doc)",
    )


_IPC_KINDS = {"shm": "shmctl", "sem": "semctl", "msg": "msgctl"}


def remove_ipc_objects(uid: int) -> int:
    """Remove every SysV shared-memory segment, semaphore set and message queue of this IPC
    namespace that `uid` owns or created (/proc/sysvipc/*; `IPC_RMID`): what a sandboxed process
    that could not get an IPC namespace of its own leaves behind. Needs to run as root (or as
    `uid`). Returns how many were removed; never raises."""
    removed = 0
    libc = _lib()
    for kind, call in _IPC_KINDS.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                header = f.readline().split()
                rows = [line.split() for line in f]
        except OSError:
            continue
        try:
            at_id, at_uid, at_cuid = header.index(f"{kind}id"), header.index("uid"), header.index("cuid")
        except ValueError:
            continue
        for row in rows:
            try:
                ident, owner, creator = int(row[at_id]), int(row[at_uid]), int(row[at_cuid])
            except (IndexError, ValueError):
                continue
            if uid not in (owner, creator):
                continue
            fn = getattr(libc, call)
            # shmctl(id, IPC_RMID, NULL), msgctl(id, IPC_RMID, NULL), semctl(id, 0, IPC_RMID)
            args = (
                (ctypes.c_int(ident), ctypes.c_int(0), ctypes.c_int(_IPC_RMID))
                if kind == "sem"
                else (ctypes.c_int(ident), ctypes.c_int(_IPC_RMID), ctypes.c_void_p(None))
            )
            if fn(*args) == 0:
                removed += 1
    return removed


# -- namespace filter ------------------------------------------------------------------------------


def _namespace_filter(policy: SandboxPolicy, report: SandboxReport) -> None:
    """Install `seccomp.namespace_filter()` on the calling thread (and so on every thread and
    process it starts later) last, once no_new_privs is set (after the privilege drop the process
    could not install it otherwise); per thread, so only a process that had a single thread has
    it everywhere."""
    from cudal1.bench import seccomp

    if not policy.block_namespaces:
        report._set("namespace_filter", False, False, "block_namespaces=False")
        return
    try:
        _buf, prog = seccomp.packed(seccomp.namespace_filter())
        _prctl(seccomp.PR_SET_SECCOMP, seccomp.SECCOMP_MODE_FILTER, ctypes.addressof(prog), "prctl(PR_SET_SECCOMP)")
    except (OSError, ValueError) as e:
        report._set("namespace_filter", True, False, str(e))
        return
    ok = report.threads == 1
    detail = "unshare/clone into new namespaces and setns: EPERM; clone3: ENOSYS"
    report._set("namespace_filter", True, ok, detail if ok else f"this thread only: {report.threads} threads existed")


# -- no_new_privs and Landlock -------------------------------------------------------------------


def _no_new_privs(report: SandboxReport) -> None:
    try:
        _prctl(_PR_SET_NO_NEW_PRIVS, 1, what="prctl(PR_SET_NO_NEW_PRIVS)")
        ok = report.threads == 1
        report._set(
            "no_new_privs", True, ok, "set" if ok else f"set for this thread only: {report.threads} threads existed"
        )
    except (OSError, AttributeError) as e:
        report._set("no_new_privs", True, False, str(e))


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel; 0 when unavailable (not Linux, disabled, ENOSYS)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = _lib()
        v = libc.syscall(
            ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
        )
        return max(0, int(v))
    except (OSError, AttributeError):
        return 0


def _write_rights(abi: int) -> int:
    rights = (
        _FS_WRITE_FILE
        | _FS_REMOVE_DIR
        | _FS_REMOVE_FILE
        | _FS_MAKE_CHAR
        | _FS_MAKE_DIR
        | _FS_MAKE_REG
        | _FS_MAKE_SOCK
        | _FS_MAKE_FIFO
        | _FS_MAKE_BLOCK
        | _FS_MAKE_SYM
    )
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    return rights


def _writable_devices() -> list[Path]:
    """Character devices under /dev that everyone may write, and GPU devices (any mode)."""
    found: list[Path] = []

    def walk(d: str) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            try:
                if e.is_symlink():
                    continue
                if e.is_dir(follow_symlinks=False):
                    if e.name not in ("shm", "mqueue", "hugepages"):
                        walk(e.path)
                    continue
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISCHR(st.st_mode):
                continue
            gpu = e.name.startswith("nvidia") or e.name == "kfd" or "/dev/dri/" in e.path or "/nvidia-caps/" in e.path
            if gpu or st.st_mode & 0o002:
                found.append(Path(e.path))

    walk("/dev")
    return found


def _hideable(hidden: list[Path]) -> list[Path]:
    """`hidden` less "/" and any dir that holds this interpreter, its libraries or a `sys.path`
    entry (a temporary directory set to the project's root, say): hiding those would leave the
    process unable to import anything."""
    needed = [
        Path(os.path.realpath(p))
        for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path}
        if p and os.path.isabs(p)
    ]  # "" is the working directory: the scratch, the process's own
    out = []
    for h in hidden:
        real = Path(os.path.realpath(h))
        if real != Path("/") and not any(n == real or real in n.parents for n in needed):
            out.append(h)
    return out


SYSTEM_READS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/proc", "/sys")
"""System trees a candidate's process reads whole: programs, libraries, headers (compilers, the CUDA
driver under /usr/lib), and the kernel's views of processes and devices (/proc: CUDA, torch and
psutil read /proc/self/* and /proc/cpuinfo, and a process's /proc/self is another pid in each
child a build starts; /sys: CPU topology, PCI and NUMA data the CUDA driver reads)."""
ETC_READS = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "alternatives",
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "gai.conf",
    "localtime",
    "timezone",
    "os-release",
    "lsb-release",
    "debian_version",
    "locale.alias",
    "mime.types",
    "magic",
    "magic.mime",
)
"""Entries of /etc a candidate's process reads: the dynamic linker's cache and configuration,
`alternatives` (where /usr/bin/cc and friends point), user and host lookups, time zone and
release files. Nothing else of /etc (keys, shadow, ssh, pip or git configuration)."""
TOOLS = ("cc", "c++", "gcc", "g++", "ld", "ninja", "nvcc")
"""Programs an inline-extension build runs: the directory each is found in on $PATH is readable."""
COMPILER_ENV = ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN")
"""Variables that name the compiler a build runs instead of the one on $PATH (torch's
cpp_extension reads CXX, Triton CC, nvcc NVCC_CCBIN): a compiler outside /usr (a GCC under
/opt/gcc) is readable with its install tree."""
INSTALL_DIRS = ("lib", "lib32", "lib64", "libexec", "include")
"""Beside a compiler's bin/: what it reads of its own install."""
_GPU_DEVICE_DIRS = ("/dev/dri", "/dev/nvidia-caps", "/dev/nvidia-caps-imex-channels")


def _readable_devices() -> list[Path]:
    """Of /dev: the character devices everyone may read (null, zero, random, tty, ...), the GPU
    devices (/dev/nvidia*, /dev/kfd and the GPU dirs, any mode) and /dev/pts. Never a block
    device (with CAP_DAC_READ_SEARCH a raw disk would give every file), /dev/shm or /dev/mqueue
    (other processes' data), nor a symbolic link (/dev/stdout and /dev/fd point into /proc)."""
    found = [Path(d) for d in (*_GPU_DEVICE_DIRS, "/dev/pts") if os.path.isdir(d)]
    try:
        entries = list(os.scandir("/dev"))
    except OSError:
        return found
    for e in entries:
        try:
            if e.is_symlink() or e.is_dir(follow_symlinks=False):
                continue
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        gpu = e.name.startswith("nvidia") or e.name == "kfd"
        if stat.S_ISCHR(st.st_mode) and (gpu or st.st_mode & 0o004):
            found.append(Path(e.path))
    return found


def _linker_dirs() -> list[str]:
    """The library directories /etc/ld.so.conf and /etc/ld.so.conf.d/*.conf name (a GPU driver's
    libraries installed outside /usr, say): the dynamic linker's cache points into them."""
    dirs: list[str] = []
    confs = [Path("/etc/ld.so.conf")]
    try:
        confs += sorted(Path("/etc/ld.so.conf.d").glob("*.conf"))
    except OSError:
        pass
    for conf in confs:
        try:
            lines = conf.read_text(errors="replace").splitlines()
        except OSError:
            continue
        dirs += [line.strip() for line in lines if line.strip().startswith("/")]
    return dirs


def toolchain_reads() -> list[Path]:
    """Where a candidate's process may read (besides its own dirs), derived from this process:
    `SYSTEM_READS`; `ETC_READS` of /etc; the devices of `_readable_devices`; the interpreter's
    prefixes and its directory; every `sys.path` entry under a prefix or named
    site-packages/dist-packages (the standard library, the virtualenv); of any other `sys.path`
    entry (a project checkout on PYTHONPATH, a test directory) nothing
    but the top-level package of each module this process has already imported from it, and the
    same for modules an editable install maps from outside `sys.path` (the `cudal1` package, not
    the checkout's runs/, conf/ or tests/); CUDA's home ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda
    and the install nvcc on $PATH belongs to); the $LD_LIBRARY_PATH entries, the dynamic
    linker's configured library dirs (`_linker_dirs`) and Python's include dirs; the directory
    each of `TOOLS` is found in on $PATH and the compilers
    `COMPILER_ENV` names, with their install trees (`_compiler_dirs`); torch's and Triton's
    install directories. Real paths, existing only, deduplicated (a path beneath another is left out)."""
    import shutil

    found: list[str] = [*SYSTEM_READS, *(os.path.join("/etc", e) for e in ETC_READS), *map(str, _readable_devices())]
    interpreter = os.path.dirname(os.path.realpath(sys.executable))
    prefixes = [p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, interpreter} if p]
    found += prefixes
    real_prefixes = [os.path.realpath(p) for p in prefixes]

    def beneath(path: str, tops: list[str]) -> bool:
        return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)

    for entry in sys.path:
        if not entry or not os.path.isabs(entry):
            continue  # "" is the working directory: the scratch, the process's own
        real = os.path.realpath(entry)
        if beneath(real, real_prefixes) or {"site-packages", "dist-packages"} & set(Path(real).parts):
            found.append(real)
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue  # a submodule lies in its top-level package's directory
        paths = list(getattr(module, "__path__", None) or [])
        file = getattr(module, "__file__", None)
        if not paths and isinstance(file, str):
            paths = [file]
        found += [p for p in paths if isinstance(p, str) and os.path.isabs(p)]
    cuda = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cuda.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    found += [c for c in cuda if c]
    # Libraries the dynamic linker is told to look for elsewhere (the CUDA driver's, in some
    # containers), and Python's headers (Triton compiles a stub against them).
    found += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d and os.path.isabs(d)]
    found += _linker_dirs()
    try:
        import sysconfig

        found += [p for key in ("include", "platinclude") if (p := sysconfig.get_paths().get(key))]
    except (ImportError, KeyError):
        pass
    found += _compiler_dirs()
    for package in ("torch", "triton"):
        module = sys.modules.get(package)
        if module is not None and getattr(module, "__file__", None):
            found.append(os.path.dirname(module.__file__))
    real_found = sorted({os.path.realpath(p) for p in found if os.path.exists(p)})
    out: list[Path] = []
    for path in real_found:
        if path == "/":
            continue  # never the whole filesystem (a module file at "/" would say so)
        if not any(path.startswith(kept.rstrip("/") + "/") for kept in map(str, out)):
            out.append(Path(path))
    return out


def _compiler_dirs() -> list[str]:
    """The install trees of the compilers and build tools a build may run: each of `TOOLS` on
    $PATH and each program `COMPILER_ENV` names (a path, or a name looked up on $PATH), as found
    and with links resolved: the program's directory and, for one in a "bin" directory, that
    directory's siblings `INSTALL_DIRS` (a compiler reads its own lib/ and libexec/: cc1plus,
    crtbegin.o, libstdc++), never the whole parent (for ~/bin that is the home)."""
    import shutil

    programs = [*TOOLS, *(v.split()[0] for e in COMPILER_ENV if (v := os.environ.get(e, "").strip()))]
    dirs: list[str] = []
    for program in programs:
        path = shutil.which(program)
        if not path:
            continue
        for where in (os.path.dirname(os.path.abspath(path)), os.path.dirname(os.path.realpath(path))):
            dirs.append(where)
            if os.path.basename(where) == "bin":
                dirs += [os.path.join(os.path.dirname(where), d) for d in INSTALL_DIRS]
    return dirs


def allowed_reads(roots: list[Path], hidden: list[Path], own: list[Path]) -> tuple[list[Path], list[Path]]:
    """Read rules for an allow-list: each of `roots` (`toolchain_reads`) and `own`, except what
    lies beneath `hidden` but `own`: a root that holds a hidden dir is replaced by the entries on
    the way to it (`readable_paths` from that root). Returns (directories, files)."""
    hidden = [Path(os.path.realpath(h)) for h in hidden]
    own = [Path(os.path.realpath(o)) for o in own]
    dirs: list[Path] = []
    files: list[Path] = []
    for root in roots:
        root = Path(os.path.realpath(root))
        inside = [h for h in hidden if root in h.parents]
        if any(root == h for h in hidden):
            continue
        if inside:
            more_dirs, more_files = readable_paths(
                inside, [o for o in own if any(h == o or h in o.parents for h in inside)], top=root
            )
            dirs += more_dirs
            files += more_files
        elif root.is_dir():
            dirs.append(root)
        else:
            files.append(root)
    dirs += [o for o in own if o not in dirs]
    return dirs, files


def readable_paths(hidden: list[Path], own: list[Path], top: Path = Path("/")) -> tuple[list[Path], list[Path]]:
    """Where a process may read beneath `top` when nothing beneath `hidden` is readable but `own`
    (dirs beneath them): every entry of each directory on the way from `top` to a hidden dir that
    is not itself on that way, and `own`. Returns (directories, files) to allow reading beneath
    (real paths; symbolic links are left out: their targets are entries of their own, or hidden). Only what
    exists now: an entry made later in a directory on the way (/, say) is not readable."""
    hidden = [Path(os.path.realpath(h)) for h in hidden]
    own = [Path(os.path.realpath(o)) for o in own]
    top = Path(os.path.realpath(top))

    def below_top(p: Path) -> bool:
        return p == top or top in p.parents

    way: set[Path] = set()
    for h in hidden:
        way.update(p for p in [h, *h.parents] if below_top(p))
    for o in own:
        if any(o == h or h in o.parents for h in hidden):
            way.update(p for p in [o, *o.parents] if p not in own and below_top(p))
    dirs: list[Path] = []
    files: list[Path] = []
    for node in sorted(way):
        if any(node == h or h in node.parents for h in hidden):
            continue  # inside a hidden dir: only `own` (and the way to it) is let through
        try:
            entries = list(os.scandir(node))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if path in way or entry.is_symlink():
                continue
            try:
                (dirs if entry.is_dir(follow_symlinks=False) else files).append(path)
            except OSError:
                continue
    return dirs + [o for o in own if o not in dirs], files


def _landlock(
    policy: SandboxPolicy,
    report: SandboxReport,
    allowed: list[Path],
    proc: Path,
    hidden: list[Path] | None = None,
    reads: list[Path] | None = None,
) -> None:
    abi = landlock_abi()
    report.landlock_abi = abi
    want_fs, want_net = policy.confine_writes, policy.block_network
    hidden = hidden or []
    want_read = bool(hidden) or reads is not None
    if abi < 1:
        why = "Landlock not available (kernel too old, disabled, or syscall blocked)"
        report._set("landlock_fs", want_fs, False, why)
        report._set("landlock_net", want_net, False, "Landlock not available")
        report._set("landlock_scope", True, False, "Landlock not available")
        report._set(
            "landlock_read", want_read, False, why + ": the process reads whatever its uid and capabilities allow"
        )
        return
    libc = _lib()
    attr = _RulesetAttr()
    fs_rights = _write_rights(abi) if want_fs else 0
    read_rights = _FS_READ_FILE | _FS_READ_DIR if want_read else 0
    attr.handled_access_fs = fs_rights | read_rights | (_FS_REFER if read_rights and abi >= 2 else 0)
    if want_net and abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP  # no rule grants any port
    if abi >= 6:
        attr.scoped = _LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | _LANDLOCK_SCOPE_SIGNAL
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    notes: list[str] = []
    try:
        if not (attr.handled_access_fs or attr.handled_access_net or attr.scoped):
            raise OSError(0, "nothing to restrict")
        rs = _check(
            libc.syscall(
                ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
                ctypes.byref(attr),
                ctypes.c_size_t(size),
                ctypes.c_uint32(0),
            ),
            "landlock_create_ruleset",
        )
        try:
            if read_rights:
                dirs, files = (
                    allowed_reads(reads, hidden, allowed) if reads is not None else readable_paths(hidden, allowed)
                )
                # Any ruleset denies moving files between directories unless a rule allows REFER:
                # without write rules (which allow it in scratch), allow it wherever reading is.
                refer = _FS_REFER if abi >= 2 and not fs_rights else 0
                for d in dirs:
                    _add_path_rule(libc, rs, d, read_rights | refer)
                for f in files:
                    _add_path_rule(libc, rs, f, _FS_READ_FILE)
            if fs_rights:
                dir_rights = fs_rights & ~(_FS_MAKE_CHAR | _FS_MAKE_BLOCK) | read_rights
                dev_rights = fs_rights & (_FS_WRITE_FILE | _FS_TRUNCATE)
                for d in allowed:
                    if not _add_path_rule(libc, rs, d, dir_rights):
                        notes.append(f"cannot allow {d}")
                for dev in _writable_devices():
                    _add_path_rule(libc, rs, dev, dev_rights)
                if not _add_path_rule(libc, rs, proc, dev_rights):
                    notes.append(f"cannot allow writes beneath {proc} (CUDA needs them)")
            _check(
                libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(rs), ctypes.c_uint32(0)),
                "landlock_restrict_self",
            )
        finally:
            os.close(rs)
    except (OSError, AttributeError) as e:
        report._set("landlock_fs", want_fs, False, str(e))
        report._set("landlock_net", want_net, False, str(e))
        report._set("landlock_scope", True, False, str(e))
        report._set("landlock_read", want_read, False, str(e))
        return
    threads = "" if report.threads == 1 else f"; only this thread is confined ({report.threads} threads existed)"
    single = report.threads == 1
    if reads is not None:
        report._set(
            "landlock_read",
            True,
            single,
            f"reads only the toolchain ({len(reads)} paths: "
            f"{', '.join(str(r) for r in reads)[:1500]}) and the process's own dirs"
            + (f", nothing beneath {', '.join(str(h) for h in hidden)} but its own" if hidden else "")
            + threads,
        )
    elif hidden:
        report._set(
            "landlock_read",
            True,
            single,
            f"nothing beneath {', '.join(str(h) for h in hidden)} readable but "
            f"the process's own dirs; everything else readable as it was at the start" + threads,
        )
    else:
        report._set("landlock_read", False, False, "nothing hidden")
    if want_fs:
        dirs = ", ".join(str(d) for d in allowed)
        report._set(
            "landlock_fs",
            True,
            single,
            f"ABI {abi}: writes only beneath {dirs}, to device files and beneath {proc}"
            + "".join(f"; {n}" for n in notes)
            + threads,
        )
    else:
        report._set("landlock_fs", False, False, "confine_writes=False")
    if want_net:
        ok = abi >= 4
        report._set(
            "landlock_net",
            True,
            ok and single,
            "TCP bind/connect denied" + threads if ok else f"ABI {abi} < 4: no network rules",
        )
    else:
        report._set("landlock_net", False, False, "block_network=False")
    ok = abi >= 6
    report._set(
        "landlock_scope",
        True,
        ok and single,
        "no signals or abstract unix sockets outside the sandbox" + threads if ok else f"ABI {abi} < 6: no scoping",
    )


def _add_path_rule(libc: Any, ruleset_fd: int, path: Path, rights: int) -> bool:
    try:
        fd = os.open(path, _O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        ret = libc.syscall(
            ctypes.c_long(_SYS_LANDLOCK_ADD_RULE),
            ctypes.c_int(ruleset_fd),
            ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        return ret == 0
    finally:
        os.close(fd)


# -- privilege drop ------------------------------------------------------------------------------


_NEVER_CHMOD = ("/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/lib", "/boot")


def _prepare_writable(writable: list[Path], gid: int) -> list[str]:
    """Create the writable dirs and, unless the dropped user's group `gid` owns one with group
    rights (a build directory the parent gave that group alone), make them world-writable (mode |
    0o777), so the dropped user can write them; never touches "/", a top-level dir, or system
    trees. Returns notes."""
    notes = []
    for d in writable:
        try:
            d = d.resolve()
            d.mkdir(parents=True, exist_ok=True)
            info = d.stat()
            mode = info.st_mode
            if mode & 0o777 == 0o777 or (info.st_gid == gid and mode & 0o070 == 0o070):
                continue
            if len(d.parts) <= 2 or str(d).startswith(_NEVER_CHMOD):
                notes.append(f"{d} left at mode {oct(stat.S_IMODE(mode))} (system dir)")
                continue
            os.chmod(d, stat.S_IMODE(mode) | 0o777)
        except (OSError, RuntimeError) as e:
            notes.append(f"{d}: {e}")
    return notes


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _keep_only_read_search() -> None:
    """Reduce capabilities to CAP_DAC_READ_SEARCH (effective, permitted, inheritable, ambient)."""
    libc = _lib()
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    bit = 1 << _CAP_DAC_READ_SEARCH
    data[0].effective = data[0].permitted = data[0].inheritable = bit
    _check(libc.capset(ctypes.byref(header), data), "capset")
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH, what="prctl(PR_CAP_AMBIENT_RAISE)")


def _drop_privileges(
    policy: SandboxPolicy, report: SandboxReport, uid: int, unique_uid: bool, notes: list[str]
) -> None:
    gid = policy.gid
    # CAP_DAC_READ_SEARCH reads every file whatever its mode: kept only where the read rules asked
    # for are in force, else it would reach what they hide (another candidate's build directory).
    read = report.measures.get("landlock_read")
    keep = policy.keep_read_access and not (read is not None and read.requested and not read.active)
    if policy.keep_read_access and not keep:
        notes.append(
            "CAP_DAC_READ_SEARCH not kept: the read rules asked for are not in force, so file modes alone "
            "decide what it reads"
        )
    try:
        if keep:
            _prctl(_PR_SET_KEEPCAPS, 1, what="prctl(PR_SET_KEEPCAPS)")
        os.setgroups(list(policy.groups))
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except (OSError, AttributeError) as e:
        report._set(
            "drop_privileges",
            True,
            False,
            f"could not switch to uid {uid}: {e}; still root, and Landlock allows writes beneath /proc",
        )
        return
    if keep:
        try:
            _keep_only_read_search()
            notes.append("keeps CAP_DAC_READ_SEARCH (reads where the read rules allow)")
        except (OSError, AttributeError) as e:
            notes.append(f"could not keep CAP_DAC_READ_SEARCH ({e}): files only root may read are unreadable")
        try:
            _prctl(_PR_SET_KEEPCAPS, 0, what="prctl(PR_SET_KEEPCAPS)")
        except OSError:
            pass
    if unique_uid:
        # The uid change made the process non-dumpable, so /proc/self/* became root-owned and
        # unreadable to it; with a uid of its own, no other process can ptrace it.
        try:
            _prctl(_PR_SET_DUMPABLE, 1, what="prctl(PR_SET_DUMPABLE)")
        except OSError:
            pass
    os.umask(0o002)  # the shared gid keeps build products writable for the next candidate
    name = f"cudal1-{uid}"
    os.environ["USER"] = os.environ["LOGNAME"] = name  # getpass.getuser() has no passwd entry to read
    report._set(
        "drop_privileges", True, True, f"uid {uid}, gid {gid}, groups {list(policy.groups)}; " + "; ".join(notes)
    )
