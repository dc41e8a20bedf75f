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
