"""Make `isolated_targets` importable by name, here and in worker children.

With --import-mode=importlib pytest does not put test folders on sys.path; the worker's fork
server copies sys.path once, when it starts, so this must happen before any test runs.
"""

import sys
from pathlib import Path

_here = str(Path(__file__).resolve().parent)
if _here not in sys.path:
    sys.path.insert(0, _here)
