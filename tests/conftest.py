"""The harness of the Python test drivers under tests/ (pytest).

Options (CTest passes them; tests/CMakeLists.txt):
  --memsnap PATH     the binary under test (required by the tests that run it)
  --part PART        which tests: generated (default: the unmarked ones, on
                     generated and bundled inputs), fixtures (those marked
                     `fixtures`, which read --fixtures-dir), or a driver's own
                     part (those marked `part("NAME")`, e.g. reference, cluster)
  --fixtures-dir DIR the real snapshots (default ../shared/fixtures/real)
  --work DIR         where generated inputs go (default: a temporary folder)

A driver checks with pytest-check (`from pytest_check import check`; pinned in
python/requirements-test.txt, installed by scripts/setup): `with check(name):
assert condition, detail` records a failure and goes on, and the test fails
after it naming every failed check; `check.is_true(condition, message)` does
the same and returns the condition, to guard what follows it. A precondition
the rest of a test cannot do without is a plain `assert`. A run whose tests
were all skipped for want of an input (the fixtures, a reference file, a
cluster: skip_absent) exits 77, which CTest reports as skipped.
"""
import os
import tempfile

import pytest

import testlib

ABSENT = testlib.ABSENT
skip_absent = testlib.skip_absent


def pytest_addoption(parser):
    group = parser.getgroup("memsnap")
    group.addoption("--memsnap", help="the memsnap binary under test")
    group.addoption("--part", default="generated",
                    help="generated (default), fixtures, or a part a driver marks")
    group.addoption("--fixtures-dir", default=testlib.DEFAULT_FIXTURES,
                    help="folder of real snapshots (default: ../shared/fixtures/real)")
    group.addoption("--work", help="folder for generated inputs (default: a temporary one)")
    group.addoption("--batch", help="memsnap_cli_batch (tests/corpus/cli_batch.cc): commands in-process")
    group.addoption("--build-dir", help="memsnap's build directory (tests/consumer)")
    group.addoption("--reference-memsnap", help="a second binary whose output the first must equal (tests/dist)")
    group.addoption("--wheel-dir", help="the folder of the wheels under test (tests/dist)")
    group.addoption("--self-contained", action="store_true",
                    help="the wheels must carry no shared library of their own (tests/dist)")
    group.addoption("--cmake", default="cmake", help="the cmake to install and build with (tests/consumer)")
    group.addoption("--reference-keys", default=os.path.join(testlib.REPO, "..", "shared", "reference",
                                                             "json-keys.json"),
                    help="the key paths the reference scripts write (tests/schema, part reference)")


def pytest_configure(config):
    if not config.pluginmanager.hasplugin("check"):
        raise pytest.UsageError("the pytest plugin pytest-check is missing (the drivers check with it): "
                                "run scripts/setup, or pip install the pytest-check that "
                                "python/requirements-test.txt pins")
    config.addinivalue_line("markers", "fixtures: reads the real snapshots of --fixtures-dir: run with "
                            "--part=fixtures, skipped where the folder is absent")
    config.addinivalue_line("markers", "part(name): belongs to a part of its own, run with --part=NAME "
                            "(e.g. reference, cluster)")


def part_of(item):
    marker = item.get_closest_marker("part")
    if marker is not None:
        return marker.args[0]
    return "fixtures" if item.get_closest_marker("fixtures") is not None else "generated"


def pytest_collection_modifyitems(config, items):
    """--part picks the tests of one part."""
    wanted = config.getoption("--part")
    selected, deselected = [], []
    for item in items:
        (selected if part_of(item) == wanted else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


@pytest.fixture(scope="session")
def memsnap(request):
    path = request.config.getoption("--memsnap")
    if not path:
        pytest.fail("--memsnap PATH is required")
    path = os.path.abspath(path)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not an executable")
    return path


@pytest.fixture(scope="session")
def work(request):
    """--work, or a temporary folder with a short path (messages cut long
    paths, and some tests compare them whole), removed after the session."""
    given = request.config.getoption("--work")
    if given:
        os.makedirs(given, exist_ok=True)
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="memsnap_") as folder:
        yield folder


@pytest.fixture(scope="session")
def fixtures_dir(request):
    folder = request.config.getoption("--fixtures-dir")
    if not os.path.isdir(folder):
        skip_absent(f"the fixtures folder {folder}")
    return folder


class _Outcomes:
    ran = 0
    skipped_absent = 0


def pytest_runtest_logreport(report):
    if report.when == "call" and report.outcome != "skipped":
        _Outcomes.ran += 1
    elif report.skipped and ABSENT in str(report.longrepr):
        _Outcomes.skipped_absent += 1


def pytest_sessionfinish(session, exitstatus):
    # Nothing ran, and a missing input was why: skipped, not passed (CTest
    # SKIP_RETURN_CODE 77).
    if exitstatus == 0 and _Outcomes.ran == 0 and _Outcomes.skipped_absent > 0:
        session.exitstatus = testlib.SKIPPED
