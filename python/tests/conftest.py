"""Shared pieces of the Python tests: the installed CLI, the bundled examples, the real fixtures.

The tests run against the installed wheel (scripts/python_test runs pytest in
a fresh venv, outside the source tree); MEMSNAP_ROOT names the checkout for
its examples, MEMSNAP_FIXTURES_DIR the real snapshots (tests over them skip
when it is empty).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple, Type

import pytest

ROOT = Path(os.environ.get("MEMSNAP_ROOT", Path(__file__).resolve().parents[2]))
EXAMPLES = sorted((ROOT / "examples").glob("*.pickle*"))
EXAMPLE_A = ROOT / "examples" / "training_steps.pickle.gz"
EXAMPLE_B = ROOT / "examples" / "training_steps_larger_batch.pickle.gz"
# The `memsnap` the wheel installed beside this Python (test_cli_and_plot runs it).
CLI = str(Path(sys.executable).parent / "memsnap")
# What the report dicts are compared with: the C++ binary of the same checkout
# when scripts/python_test names it (it starts in milliseconds, where the
# console script starts an interpreter), else the installed command.
REFERENCE_CLI = os.environ.get("MEMSNAP_CLI") or CLI


def fixture_files() -> List[Path]:
    folder = os.environ.get("MEMSNAP_FIXTURES_DIR", "")
    if not folder or not os.path.isdir(folder):
        return []
    return sorted(
        p for p in Path(folder).iterdir() if p.suffix in (".pickle", ".pkl") and p.is_file()
    )


FIXTURES = fixture_files()
ALL_FILES = EXAMPLES + FIXTURES


def file_id(path: Path) -> str:
    return path.name


@contextlib.contextmanager
def raises_code(code: str, kind: Type[Exception] = ValueError) -> Iterator[Any]:
    """The block raises one of memsnap's errors (a SnapshotError, or the ValueError of an
    argument, both ValueErrors) with the stable ``code``: what went wrong, not its words."""
    import memsnap

    assert code in memsnap.error_codes(), code
    with pytest.raises(kind) as raised:
        yield raised
    got = getattr(raised.value, "code", None)
    assert got == code, f"{got} ({raised.value}), not {code}"


def run_cli(*args: str, cli: str = CLI) -> Tuple[int, str, str]:
    done = subprocess.run([cli, *args], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def cli_json(*args: str) -> Tuple[Optional[Any], str]:
    """The CLI's JSON document, or (None, its error message without 'memsnap: ')."""
    status, out, err = run_cli(*args, cli=REFERENCE_CLI)
    if status in (0, 3):
        return json.loads(out), ""
    lines = [line for line in err.splitlines() if line.startswith("memsnap: ")]
    return None, lines[-1][len("memsnap: "):] if lines else err


@functools.lru_cache(maxsize=None)
def loaded(path: str) -> Any:
    """One Snapshot per file for the whole run (reports do not change it)."""
    import memsnap

    return memsnap.load(path)


@pytest.fixture(params=ALL_FILES, ids=file_id)
def any_file(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture(params=FIXTURES or [pytest.param(None, marks=pytest.mark.skip("no fixtures"))],
                ids=lambda p: p.name if p else "none")
def real_file(request: pytest.FixtureRequest) -> Path:
    return request.param
