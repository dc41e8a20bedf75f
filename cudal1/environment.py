"""Is this Python the project's environment? Checked by every job before it imports anything else.

A job started with another interpreter (a new shell without `.venv` activated, or `ray job submit
-- python jobs/train.py` on a head node whose `python` is the system's) would otherwise die on its
first import with a bare `ModuleNotFoundError`. `require` names what is missing, the interpreter
that lacks it, and the command that runs the job with the project's own interpreter.

This module imports only the standard library and keeps to syntax that old interpreters parse,
so the check itself runs under any Python 3.
"""

import importlib.util
import os
import sys

JOB_MODULES = ("hydra", "omegaconf", "ray", "torch")
"""What every job imports before its own code runs (the rest is checked by the job's own start)."""


def missing(modules=JOB_MODULES):
    """The names in `modules` (top-level module names) that this interpreter cannot import,
    in the given order. Looks them up without importing them."""
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken or half-installed package counts as missing
            found = False
        if not found:
            out.append(name)
    return out


def advice(job, absent, executable=None, root=None, submitted=None):
    """The message for a job started by an interpreter that lacks `absent` (a non-empty list):
    which modules, which interpreter, and the commands that fix it (one line each). `root`: the
    checkout (default: the one holding this module); `submitted`: whether `ray job submit` started
    this process (default: Ray's job config is in the environment, as
    `cudal1.actors.cluster.in_submitted_job` reads it)."""
    executable = executable or sys.executable
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if submitted is None:
        submitted = "RAY_JOB_CONFIG_JSON_ENV_VAR" in os.environ
    script = "jobs/%s.py" % job
    lines = [
        "%s: this Python (%s) cannot import %s: it is not the project's environment."
        % (job, executable, ", ".join(absent))
    ]
    if submitted:
        # The entrypoint runs in Ray's copy of the working directory, which has no .venv: only the
        # user knows where the checkout's environment is on the head node.
        lines += [
            "  `ray job submit` ran the entrypoint with that interpreter; name the project's by its absolute path,",
            '  from the checkout:  ray job submit --working-dir . -- "$PWD/.venv/bin/python" %s' % script,
            "  and start each node's Ray from that environment:  .venv/bin/ray start ...",
        ]
        return "\n".join(lines)
    venv_python = os.path.join(root, ".venv", "bin", "python")
    lines += [
        "  run the job with the project's interpreter:  %s %s" % (venv_python, script),
        "  on a Ray cluster:  ray job submit --working-dir . -- %s %s" % (venv_python, script),
    ]
    if not os.path.exists(venv_python):
        lines.append("  no environment at %s yet: bash scripts/install.sh cpu   (or gpu)" % venv_python)
    return "\n".join(lines)


def require(job, modules=JOB_MODULES):
    """Return when this interpreter can import every module in `modules`; otherwise print `advice`
    to stderr and exit with status 2 (SystemExit), as a job does for a wrong config value."""
    absent = missing(modules)
    if absent:
        sys.stderr.write(advice(job, absent) + "\n")
        raise SystemExit(2)
