"""Progress bars that leave log records whole: `bar`, `records_between_bars`.

A tqdm bar redraws its line with carriage returns and no newline (on stderr); the jobs' log records
go to stdout (Hydra's console handler). Where both reach one place, a record written while a bar is
drawn starts on the bar's line: a terminal shows the two glued, and a captured log (`> out.txt
2>&1`, `ray job logs`) holds the bar's redraws in front of the record. Hence:

- `bar(...)` draws only when its stream is a terminal (tqdm's `disable=None`): a captured log holds
  the records alone, one per line, and the stages' own log lines say how far they are.
- `records_between_bars()`: while it is open, the root logger's console handlers write through
  `tqdm.write`, which clears the bars, writes the record on a line of its own and draws them again
  (tqdm's `logging_redirect_tqdm`; the handlers' format and stream are kept).

Limit: lines that do not go through `logging` (Ray's copies of its actors' output, a library's
print) can still land on a bar's line in a terminal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tqdm import tqdm


def bar(*, enabled: bool = True, **kwargs: Any) -> tqdm:
    """A tqdm bar (`kwargs` as tqdm takes them: total, desc, unit, initial, leave, file, ...) that
    draws only on a terminal; `enabled` False: never."""
    return tqdm(disable=None if enabled else True, dynamic_ncols=True, **kwargs)


@contextlib.contextmanager
def records_between_bars() -> Iterator[None]:
    """While open, log records of the root logger's console handlers (stdout, stderr) are written
    by `tqdm.write`: each on its own line, the bars drawn again below it."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(tqdm_class=tqdm):
        yield
