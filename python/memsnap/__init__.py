"""memsnap: read PyTorch CUDA memory snapshots safely and fast, from Python.

    import memsnap
    snap = memsnap.load("rank0.pickle")       # never executes the pickle
    snap.explain()                            # the CLI's `memsnap explain --json`, as a dict
    snap.events().to_pandas()                 # every trace entry, with its source and category

Reports are the command line's ``--json`` documents (the same C++ core makes
both); tables are numpy columns over the core's memory. ``memsnap`` on the
PATH and ``python -m memsnap`` are the full command line.
"""

from ._api import (
    CheckResult,
    Plot,
    Server,
    Snapshot,
    check,
    compare,
    from_dict,
    load,
    plot,
    ranks,
    serve,
)
from ._core import __version__
from ._errors import MemsnapWarning, SnapshotError, error_codes
from ._table import Table

__all__ = [
    "CheckResult",
    "MemsnapWarning",
    "Plot",
    "Server",
    "Snapshot",
    "SnapshotError",
    "Table",
    "__version__",
    "check",
    "compare",
    "error_codes",
    "from_dict",
    "load",
    "plot",
    "ranks",
    "serve",
]
