"""Set-up shared by the Python test drivers (standard library only)."""
import os
import tempfile


def memsnap_and_workdir(memsnap_arg, work_arg, prefix):
    """Resolves the memsnap binary and the work folder of a test run.

    Returns (memsnap, work, scratch): scratch is the TemporaryDirectory to
    clean up when no --work was given, else None. memsnap is None (after a
    FAIL line) when the binary is not executable.
    """
    memsnap = os.path.abspath(memsnap_arg)
    if not os.access(memsnap, os.X_OK):
        print('FAIL setup: %s is not an executable' % memsnap)
        return None, None, None
    if work_arg:
        return memsnap, work_arg, None
    scratch = tempfile.TemporaryDirectory(prefix=prefix)
    return memsnap, scratch.name, scratch
