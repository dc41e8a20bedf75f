"""Progress bars and log records on one terminal, and in a captured log (`cudal1.progress`).

A child process draws a bar on stderr and logs a record on stdout after each update, as a job does;
its output is read from a pseudo-terminal (a terminal) or a pipe (a captured log).
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import contextlib, logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="[record] %(message)s")
from cudal1.progress import bar, records_between_bars
with records_between_bars() if sys.argv[1] == "between" else contextlib.nullcontext():
    b = bar(total=4, desc="stage", unit="unit")
    for i in range(4):
        b.update(1)
        b.refresh()
        logging.getLogger("cudal1.test").info("unit %d done", i)
    b.close()
"""


def run_child(mode: str, tty: bool) -> str:
    """The child's stdout and stderr together, as a terminal (`tty`) or a pipe received them."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not tty:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, mode], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert out.returncode == 0, out.stdout
        return out.stdout.decode()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], cwd=ROOT, env=env, stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=60) == 0, b"".join(chunks)
    return b"".join(chunks).decode()


def glued(text: str) -> list[str]:
    """Records that start on a line that already holds other text (a bar's)."""
    return [m.group(0) for m in re.finditer(r"[^\r\n]+\[record\][^\r\n]*", text)]


def test_on_a_terminal_each_record_gets_a_line_of_its_own():
    text = run_child("between", tty=True)
    assert text.count("[record] unit ") == 4 and "stage: " in text and "4/4" in text  # the bar is drawn
    assert glued(text) == [], repr(text)
    # Without `records_between_bars` the records land on the bar's line.
    assert len(glued(run_child("plain", tty=True))) >= 1


def test_a_captured_log_holds_the_records_and_no_bar():
    text = run_child("between", tty=False)
    assert text.splitlines() == [f"[record] unit {i} done" for i in range(4)], repr(text)


def test_terminal_lines_tells_the_products_lines_from_the_engines():
    """`benchmarks/terminal_lines.classify` on the lines of the install, the optimize job and
    Serve as they print them: each of the product's own lines is counted as the product's (the
    install script's, a task's outcome line, the printed table up to its blank line, `serve:`
    lines), and Ray's and blank lines as the engines'."""
    from benchmarks.terminal_lines import classify

    lines = {
        "install.sh: torch 2.13.0+cpu: done (19 s)": "product",
        "[2026-12-04 20:08:41,017][cudal1.pipeline.optimize_job][INFO] - 1 tasks: file/my_gelu": "product",
        "file/my_gelu: no_correct: no faster solution found: no correct candidate in 24 attempts": "product",
        "level1/13 HardSigmoid: improved: 1.90x paid (spread 1%), from round1/s0": "product",
        "": "engine",
        "pool  level  n  success  mean  median  geomean  fast_1  fast_1.01": "product",
        "cpu   file   1        0     -       -        -    0.00       0.00": "product",
        "  cpu/file: no program (no_candidate) 1": "product",
        " ": "engine",
        "serve: ready after 17 s: cudal1-policy at http://127.0.0.1:8123/v1": "product",
        "2026-12-04 20:24:37,171\tINFO worker.py:2038 -- Started a local Ray instance.": "engine",
        "cpu   file   1        0     -       -        -    0.00       0.00 ": "engine",  # no table header above
    }
    assert classify(list(lines)) == list(lines.values())
