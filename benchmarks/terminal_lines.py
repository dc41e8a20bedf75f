"""How much of the training job's terminal output is the product's own: run it, count its lines.

    python benchmarks/terminal_lines.py -- .venv/bin/python jobs/train.py --config-name smoke run_dir=/tmp/s
    python benchmarks/terminal_lines.py --file captured.txt      # classify output captured earlier

stdout and stderr are read together, as a terminal shows them, and split at newlines (a progress
bar that redraws itself with carriage returns is one line). A line is the product's (`classify`)
when it is a cudal1 log record (Hydra's `[time][cudal1...]` format, or a forwarded actor's
`... cudal1.x [pid]:`), one of cudal1's progress bars (`bench[...]`, a stage, `optimize`), a line
of the final run summary (indented under "run summary"), a job's one-line error or status
(`train: ...`, `serve: ...`), a line of `scripts/install.sh` (`install.sh: ...`), or the optimize
job's printed outcome (a task's line, `<task id>: <outcome>: ...`, and its table, from the
`pool  level ...` header to the next blank line); every other line (Ray, vLLM, DeepSpeed, MLflow,
transformers, torch warnings, blank lines) counts as engine output. Prints the counts and the
share, and with --show the engine lines. Exits with the command's exit code.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter

_RECORD = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\]\[cudal1[.\]]")
_ACTOR_RECORD = re.compile(r"\b(WARNING|ERROR|CRITICAL) cudal1\.[\w.]+ \[\d+\]:")
_BARS = ("bench[", "sft:", "self_train:", "contrastive_rl:", "optimize:", "probe[", "eval-suite")
_JOB_ERROR = re.compile(r"^(train|optimize|evaluate|augment|serve|install\.sh): ")
_TASK_LINE = re.compile(r"^\S+/\S+( \S+)?: (improved|not_faster|no_correct|invalid_task|prompt_too_long): ")
_TABLE_HEAD = re.compile(r"^pool\s+level\s+n\s+success\b")


def classify(lines: list[str]) -> list[str]:
    """ "product" or "engine" for each line (see the module docstring)."""
    kinds, in_summary, in_table = [], False, False
    for line in lines:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
        in_table = bool(_TABLE_HEAD.match(plain)) or (in_table and bool(plain.strip()))
        if in_table:
            kinds.append("product")
        elif _RECORD.match(plain):
            in_summary = plain.rstrip().endswith("- run summary")
            kinds.append("product")
        elif in_summary and plain.startswith("  ") and plain.strip():
            kinds.append("product")
        else:
            in_summary = False
            product = (
                plain.lstrip("\r").startswith(_BARS)
                or bool(_JOB_ERROR.match(plain))
                or bool(_TASK_LINE.match(plain))
                or bool(_ACTOR_RECORD.search(plain))
            )
            kinds.append("product" if product else "engine")
    return kinds


def count(text: str) -> Counter:
    """Counter of "product" and "engine" lines of `text` (a trailing newline adds no line)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return Counter(classify(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", help="classify this captured output instead of running a command")
    parser.add_argument("--show", action="store_true", help="print the engine lines too")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    rc = 0
    if args.file:
        with open(args.file, "rb") as f:  # bytes: keep the carriage returns of progress bars
            text = f.read().decode(errors="replace")
    else:
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("give a command after --, or --file")
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        text, rc = proc.stdout.decode(errors="replace"), proc.returncode
    counts = count(text)
    total = counts["product"] + counts["engine"]
    print(
        f"lines: {total}, product: {counts['product']} ({counts['product'] / max(total, 1):.0%}), "
        f"engine: {counts['engine']} ({counts['engine'] / max(total, 1):.0%})"
    )
    if args.show:
        lines = text.rstrip("\n").split("\n")
        for line, kind in zip(lines, classify(lines)):
            if kind == "engine":
                print("  engine |", line[:200])
    return rc


if __name__ == "__main__":
    sys.exit(main())
