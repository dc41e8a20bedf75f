"""A syscall filter that keeps a process and its descendants out of new namespaces:
`namespace_filter`, `packed` for the kernel.

Why: an unprivileged process may create user namespaces, and inside one network, mount and other
namespaces, on most kernels. Each costs kernel memory no cgroup limit or resident-memory watch of
the parent sees (about 77 KiB a network namespace), and each is torn down by kernel worker threads
after its last holder is gone, threads that are not the candidate's and so are neither stopped
while the reference is timed nor killed with it: thousands of them, held until the evaluation
ends, kept a core busy for about a second after the candidate's processes were killed, while
the judge timed the reference "with nothing of the candidate alive" (a red team, thirty-ninth
session). No candidate needs a namespace of its own, so none gets one.

The filter is a classic BPF program (`seccomp(2)`, `SECCOMP_MODE_FILTER` through prctl) over
`struct seccomp_data` (nr at byte 0, arch at 4, args[0] at 16, low 32 bits on little-endian):

- `unshare(flags)` with any CLONE_NEW* flag, and `clone(flags, ...)` with any but CLONE_NEWTIME
  (whose bit is clone's exit signal there), fail with EPERM;
- `setns` fails with EPERM (entering a namespace another process holds);
- `clone3` fails with ENOSYS: its flags lie in memory the filter cannot read; glibc (2.34 and
  later) then falls back to `clone`, which the filter can check, for threads, fork and
  posix_spawn alike (container runtimes' default profiles do the same);
- a syscall of another ABI than the native one (i386 through `int 0x80` on x86-64, x32) fails
  with EPERM: its numbers differ, and no Python, CUDA or compiler process here makes one.

Everything else is allowed. The filter is inherited by every child and kept across execve, and
cannot be removed. Installing it needs no_new_privs (or CAP_SYS_ADMIN): `cudal1.bench.sandbox`
does, through prctl as its other measures. x86-64 and AArch64 only.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NEW_NAMESPACES = (
    CLONE_NEWTIME
    | CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)
"""Every CLONE_NEW* flag (linux/sched.h)."""

# (audit arch, clone, unshare, setns, clone3): linux/audit.h; arch/x86/entry/syscalls/
# syscall_64.tbl and include/uapi/asm-generic/unistd.h.
ARCHES = {
    "x86_64": (0xC000003E, 56, 272, 308, 435),
    "aarch64": (0xC00000B7, 220, 97, 268, 435),
}
_X32_BIT = 0x40000000  # x32 syscalls: the native arch with this bit set in nr

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def namespace_filter(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter program for `machine` (default: this one's, `platform.machine()`), as BPF
    instructions (code, jt, jf, k). Raises ValueError for a machine not in `ARCHES`."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise ValueError(f"no namespace filter for {machine!r} (known: {', '.join(ARCHES)})")
    arch, clone, unshare, setns, clone3 = ARCHES[machine]
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    # Each jump names the label it goes to; resolved to relative offsets below.
    prog: list[tuple[int, object, object, int] | str] = [
        (_LD_W_ABS, 0, 0, 4),
        (_JEQ, "native", "eperm", arch),
        "native",
        (_LD_W_ABS, 0, 0, 0),
        *([(_JGE, "eperm", "number", _X32_BIT), "number"] if machine == "x86_64" else []),
        (_JEQ, "enosys", "not_clone3", clone3),
        "not_clone3",
        (_JEQ, "eperm", "not_setns", setns),
        "not_setns",
        (_JEQ, "unshare", "not_unshare", unshare),
        "not_unshare",
        (_JEQ, "clone", "allow", clone),
        "unshare",
        (_LD_W_ABS, 0, 0, 16),
        (_JSET, "eperm", "allow", NEW_NAMESPACES),
        "clone",
        (_LD_W_ABS, 0, 0, 16),
        (_JSET, "eperm", "allow", NEW_NAMESPACES & ~CLONE_NEWTIME),
        "allow",
        (_RET, 0, 0, RET_ALLOW),
        "eperm",
        (_RET, 0, 0, eperm),
        "enosys",
        (_RET, 0, 0, enosys),
    ]
    labels, at = {}, 0
    for item in prog:
        if isinstance(item, str):
            labels[item] = at
        else:
            at += 1
    out: list[tuple[int, int, int, int]] = []
    for item in prog:
        if isinstance(item, str):
            continue
        code, jt, jf, k = item
        here = len(out)
        out.append(
            (
                code,
                labels[jt] - here - 1 if isinstance(jt, str) else jt,
                labels[jf] - here - 1 if isinstance(jf, str) else jf,
                k,
            )
        )
    return out


class _SockFprog(ctypes.Structure):
    """struct sock_fprog (linux/filter.h): the program's length and its instructions."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def packed(instructions: list[tuple[int, int, int, int]]) -> tuple[ctypes.Array, _SockFprog]:
    """`instructions` as the kernel reads them: (the packed `struct sock_filter` array, the
    `struct sock_fprog` pointing at it). Keep the array alive while the kernel may read it (the
    prctl call that installs the filter copies it)."""
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in instructions)
    buf = ctypes.create_string_buffer(raw, len(raw))
    return buf, _SockFprog(len(instructions), ctypes.addressof(buf))
