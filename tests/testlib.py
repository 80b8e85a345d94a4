"""What the Python test drivers under tests/ share: memsnap runs, one cached
`parse --json` per fixture (tests/conftest.py holds the pytest fixtures and
options; the drivers check with pytest-check)."""
import hashlib
import json
import os
import subprocess
import tempfile


# Exit status of a run whose tests were all skipped for want of an input
# (tests/conftest.py): CTest reports the test as skipped, not passed, when its
# SKIP_RETURN_CODE property is this value.
SKIPPED = 77

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FIXTURES = os.path.join(REPO, '..', 'shared', 'fixtures', 'real')


# The reason of a pytest skip for want of an input this machine lacks (the
# fixtures, a reference file, a cluster): a run that skipped only such tests
# exits SKIPPED (tests/conftest.py).
ABSENT = 'absent input'


def skip_absent(what):
    """Skips the running pytest test for want of `what`."""
    import pytest
    pytest.skip('%s: %s' % (ABSENT, what))


def run_memsnap(memsnap, args, timeout=300):
    """memsnap with these arguments, output captured as text."""
    return subprocess.run([memsnap] + args, capture_output=True, text=True, timeout=timeout)


def memsnap_json(memsnap, args):
    """The JSON document `memsnap ARGS` prints; an assertion error naming the
    command and its stderr when it fails."""
    done = run_memsnap(memsnap, list(args))
    assert done.returncode == 0, "memsnap %s: %s" % (" ".join(args), done.stderr)
    return json.loads(done.stdout)


class Commands:
    """memsnap commands, each in a process of its own, or with `batch`
    (memsnap_cli_batch, tests/corpus/cli_batch.cc) all in one process that
    answers each as it is asked. Use as a context manager."""

    def __init__(self, memsnap, batch=None, timeout=300):
        self.memsnap, self.batch, self.timeout = memsnap, batch, timeout
        self.process = None
        self.errors = None

    def __enter__(self):
        if self.batch:
            # Its stderr names each command as it begins: a file, never a pipe
            # nobody reads while it fills.
            self.errors = tempfile.TemporaryFile()
            self.process = subprocess.Popen([self.batch, '-'], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=self.errors,
                                            text=True, encoding='utf-8')
        return self

    def __exit__(self, *exc):
        if self.process:
            self.process.stdin.close()
            self.process.wait(timeout=self.timeout)
            self.errors.close()
        return False

    def run(self, args):
        """(exit status, stdout, stderr) of `memsnap ARGS`."""
        if not self.process:
            done = run_memsnap(self.memsnap, list(args), timeout=self.timeout)
            return done.returncode, done.stdout, done.stderr
        self.process.stdin.write(json.dumps(list(args)) + '\n')
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            self.errors.seek(0)
            last = self.errors.read().decode('utf-8', 'replace').strip().splitlines()[-1:]
            raise RuntimeError('memsnap_cli_batch ended (exit %s) at: %s'
                               % (self.process.wait(timeout=self.timeout), last))
        result = json.loads(answer)
        return result['status'], result['out'], result['err']

    def json(self, *args):
        """The JSON document `memsnap ARGS --json` prints; RuntimeError when it fails."""
        status, out, err = self.run(list(args) + ['--json'])
        if status != 0:
            raise RuntimeError('memsnap %s: exit %d: %s' % (' '.join(args), status, err.strip()))
        return json.loads(out)


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
