"""The ``memsnap`` command installed by pip: the C++ command line, run inside the extension."""

from __future__ import annotations

import signal
import sys
from typing import List, Optional

from . import _core


def main(argv: Optional[List[str]] = None) -> int:
    """Runs ``memsnap ARGS...`` (every command of the CLI) and returns its exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    # A command-line process: Ctrl-C ends it (the work runs without the GIL,
    # where Python's handler would only be seen at the end), and a reader
    # that goes away (`| head`) is handled by the core (exit 141, quietly).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    return _core.run_cli(["memsnap", *args])
