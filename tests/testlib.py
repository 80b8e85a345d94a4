"""Set-up shared by the Python test drivers (standard library only)."""
import hashlib
import json
import os
import subprocess
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


# Exit status of a driver whose selected part could not run (the fixtures
# folder is absent): CTest reports the test as skipped, not passed, when its
# SKIP_RETURN_CODE property is this value.
SKIPPED = 77

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FIXTURES = os.path.join(REPO, '..', 'shared', 'fixtures', 'real')


def add_part_arguments(parser, parts):
    """--fixtures DIR and --only PART...: CTest registers the part that reads
    the real fixtures as its own test, so that its skip shows as a skip."""
    parser.add_argument('--fixtures', default=DEFAULT_FIXTURES,
                        help='folder of real snapshots (default: ../shared/fixtures/real)')
    parser.add_argument('--only', nargs='+', choices=parts, default=list(parts),
                        help='run only these parts (default: all)')


def fixtures_missing(args):
    """True, after a SKIP line, when the fixtures part is selected but its
    folder is absent."""
    if 'fixtures' not in args.only or os.path.isdir(args.fixtures):
        return False
    print('SKIP fixtures: %s is absent' % args.fixtures)
    return True


def exit_status(failed, fixtures_skipped):
    """1 on any failure, else SKIPPED when the fixtures could not be read,
    else 0: a run that skipped its fixtures never reads as a plain pass."""
    if failed:
        return 1
    return SKIPPED if fixtures_skipped else 0


class Checks:
    """One `ok`/`FAIL` line per check; the failures kept for the summary.
    A call returns the condition, so a check can guard what follows it."""

    def __init__(self):
        self.count = 0
        self.failures = []

    def __call__(self, name, condition, detail=''):
        self.count += 1
        print(('ok   ' if condition else 'FAIL ') + name + ('' if condition else ': %s' % (detail,)))
        if not condition:
            self.failures.append(name)
        return condition

    def summary(self):
        return '%d checks, %d failed' % (self.count, len(self.failures))


def run_memsnap(memsnap, args, timeout=300):
    """memsnap with these arguments, output captured as text."""
    return subprocess.run([memsnap] + args, capture_output=True, text=True, timeout=timeout)


def run_parts(description, prefix, check, generated, fixtures):
    """The main() of a driver with parts `generated` and `fixtures`:
    generated(memsnap, work) and fixtures(memsnap, folder) run as selected;
    returns the exit status (see exit_status)."""
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--memsnap', required=True)
    parser.add_argument('--work', help='folder for the generated snapshots (default: a temporary one)')
    add_part_arguments(parser, ('generated', 'fixtures'))
    args = parser.parse_args()
    skipped = fixtures_missing(args)
    memsnap, work, scratch = memsnap_and_workdir(args.memsnap, args.work, prefix)
    if memsnap is None:
        return 1
    try:
        if 'generated' in args.only:
            generated(memsnap, work)
        if 'fixtures' in args.only and not skipped:
            fixtures(memsnap, args.fixtures)
    finally:
        if scratch:
            scratch.cleanup()
    print(check.summary())
    return exit_status(check.failures, skipped)


# One `memsnap parse --json` per fixture, shared by the drivers: CTest sets
# MEMSNAP_TEST_CACHE to a folder of the build tree (tests/CMakeLists.txt).
CACHE_ENV = 'MEMSNAP_TEST_CACHE'


def _stamp(path):
    """What tells one version of a file from another: its resolved path,
    size and modification time (nanoseconds)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return [real, st.st_size, st.st_mtime_ns]


def cached_json(memsnap, args, path, timeout=600):
    """The JSON document `memsnap ARGS PATH` prints, or (None, stderr) when it
    fails: returns (document, error). With MEMSNAP_TEST_CACHE set, a success is
    kept there under a key of the binary's and the file's path, size and
    mtime and the arguments, so a rebuilt binary or a changed file is never
    answered from the cache; failures are not kept. Written atomically, so
    drivers running in parallel may share the folder."""
    folder = os.environ.get(CACHE_ENV)
    key = None
    if folder:
        try:
            key = hashlib.sha256(json.dumps([_stamp(memsnap), _stamp(path), list(args)]).encode()).hexdigest()
        except OSError:
            key = None
    if key:
        entry = os.path.join(folder, key[:2], key + '.json')
        try:
            with open(entry) as f:
                return json.load(f), ''
        except (OSError, ValueError):
            pass
    got = subprocess.run([memsnap] + list(args) + [path], capture_output=True, text=True, timeout=timeout)
    if got.returncode != 0:
        return None, got.stderr
    try:
        document = json.loads(got.stdout)
    except ValueError as e:
        return None, 'not JSON: %s' % e
    if key:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(entry), suffix='.tmp')
        with os.fdopen(fd, 'w') as f:
            f.write(got.stdout)
        os.replace(tmp, entry)
    return document, ''


def parse_json(memsnap, path, *args, timeout=600):
    """`memsnap parse --json [ARGS] PATH`, cached (see cached_json)."""
    return cached_json(memsnap, ['parse', '--json'] + list(args), path, timeout=timeout)
