#!/usr/bin/env python3
"""memsnap benchmark: `memsnap parse/compare/replay-step/plot` against CPython's pickle.load.

Generates synthetic snapshots with tests/gen/make_snapshot.py (deep C++
stacks, profiler steps): for each size N a file A (--seed 1) and a file B of
the same size (--seed 2). Then, for each size and in the same run, measures

  * `memsnap parse A --json > /dev/null`: wall time (median of 3 runs) and
    peak RSS;
  * `python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" FILE`
    for A and for B: wall time (min of 1-2 runs) and peak RSS;
  * `memsnap compare A B --json > /dev/null` and
    `memsnap replay-step --all-steps A --json > /dev/null`: wall time (median
    of 3) and peak RSS;
  * `memsnap events A --json`: wall time (median of 3), peak RSS, JSON size
    (and the size with --inline-frames, each stack repeated per entry);
  * `memsnap plot A -o A.html`: wall time (median of 3), peak RSS, HTML size,
    and the time until the page is ready in headless Chromium (median of 3
    page loads; needs node, /usr/bin/chromium and playwright-core);
  * a second shape from 100k events: a real snapshot (--replicate-from,
    default a C++-stack training step from ../shared/fixtures/real/)
    repeated to N entries by make_snapshot.py --replicate; its parse row
    beside the generated one, each with `cat A > /dev/null` as the read limit;
  * from 1M events, the commands table: every command (parse, explain,
    compare, replay-to-time, replay-step, plot, oom, segments, summarize) on
    each shape, wall, peak RSS and seconds per million entries;

and checks the targets: parse >= 30x faster than the Python load of A,
memsnap parse peak RSS <= 1.5x the file size (DESIGN.md, Performance);
compare faster than the Python loads of A and B together; events --json's
peak RSS <= 1.5x parse's; at 1M events the
HTML under 15 MB and ready in Chromium in under 5 s. A benchmark, not a test:
it exits 0 when a target is missed, but says MISSED.

    python3 bench/run_bench.py --memsnap build/memsnap
        [--sizes 100k,1m,5m] [--work DIR] [--keep] [--markdown] [--no-browser]
        [--replicate-from PATH | --no-replicated] [--commands-min 1m]

Standard library only (plus node for the Chromium step). See bench/README.md.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = os.path.join(ROOT, 'tests', 'gen', 'make_snapshot.py')

EVENTS_PER_STEP = 660           # 1M events -> ~1,500 profiler steps
SEED = 1                        # file A
SEED_B = 2                      # file B (compare A B): same options, other seed
PROTOCOL = 4
BYTES_PER_EVENT_GUESS = 120     # --stacks all, protocol 4 (measured ~104)
DISK_FACTOR = 3                 # need 3x the expected file size free
PY_RSS_FACTOR = 20              # pickle.load needs up to ~20x the file size
PY_MEM_FRACTION = 0.8           # ... and may use 80% of MemAvailable
MEMSNAP_RUNS = 3
PY_SECOND_RUN_UNDER_S = 60.0    # run the Python load a second time if fast
SPEED_TARGET = 30.0
RSS_TARGET = 1.5
SITES = 4000                    # forward call sites: ~1,200 frames, ~1,750 stacks at 1M events
# The second shape: a real snapshot (C++ + Python stacks, one full training
# step) repeated to N entries by make_snapshot.py --replicate. The fixtures
# live beside the repository; without them the replicated rows are skipped.
FIXTURES = os.path.join(os.path.dirname(ROOT), 'shared', 'fixtures', 'real')
REPLICATE_FIXTURE = os.path.join(
    FIXTURES, 'kkaitlyn111_cs336-a2-systems__memory_files_memory_ctx512_fullstep_.pickle')
REPLICATE_MIN_EVENTS = 100_000  # replicated files for the sizes from here (~0.5 s at 100k)
COMMANDS_MIN_EVENTS = 1_000_000  # the commands table for the sizes from here
REPLICATED_BYTES_PER_EVENT_GUESS = 160  # measured ~140 on the default fixture
HTML_TARGET_BYTES = 32 << 20     # plot HTML <= 32 MiB whatever the number of events
READY_TARGET_S = 3.0            # page ready in Chromium < 3 s, at every size
PLOT_RSS_TARGET = 1.5           # plot's peak RSS <= 1.5x parse's on the same file
EVENTS_RSS_TARGET = 1.5         # events --json's peak RSS <= 1.5x parse's on the same file
BROWSER_RUNS = 3
BROWSER_SECOND_RUN_UNDER_S = 20.0   # one page load only if the first is slower
BROWSER_WAIT_S = 60             # waitForFunction timeout per page load
CHROMIUM = '/usr/bin/chromium'
CHROMIUM_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic',
                 '--no-first-run', '--disable-background-networking',
                 '--disable-component-update', '--disable-sync']

MiB = 1 << 20
GiB = 1 << 30
HOSTILE_SCALES = (1, 8)         # make_hostile.py's shapes at these scales (--hostile-scales)
HOSTILE_COMMANDS = (['parse'], ['events', '--json'])


def log(msg=''):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Machine


def meminfo_kib(key):
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith(key + ':'):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_model():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.lower().startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loadavg():
    try:
        with open('/proc/loadavg') as f:
            return ' '.join(f.read().split()[:3])
    except OSError:
        return '?'


def machine_line():
    total = meminfo_kib('MemTotal')
    mem = f'{total / (1 << 20):.1f} GiB RAM' if total else 'RAM unknown'
    return f'{cpu_model()}, {os.cpu_count()} cores, {mem}, {platform.system()} {platform.release()}'


# ---------------------------------------------------------------------------
# Child processes: wall time and peak RSS


def self_rss_kib():
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Runner:
    """Runs a command and returns (exit code, wall seconds, peak RSS KiB, stderr).

    Peak RSS comes from GNU time's %M when /usr/bin/time exists, else from
    os.wait4's ru_maxrss (KiB on Linux). On Linux a child's ru_maxrss is at
    least the RSS of the process that spawned it (the high-water mark carries
    over the fork/vfork and exec), so under the wait4 method a result near
    this Python process's own RSS only says "at most that much"; GNU time
    spawns from a ~1 MiB process, so it has no such floor.
    """

    def __init__(self, method):
        tool = shutil.which('time', path='/usr/bin:/bin')
        if method == 'auto':
            method = 'time' if tool else 'wait4'
        if method == 'time' and not tool:
            sys.exit('run_bench: --rss time needs /usr/bin/time (Debian package "time")')
        self.method = method
        self.time_tool = tool

    def describe(self):
        if self.method == 'time':
            return f"peak RSS from {self.time_tool} -f %M (GNU time, spawns from a ~1 MiB process)"
        return ("peak RSS from os.wait4 ru_maxrss; values up to this benchmark's own RSS "
                f"(~{self.floor_kib() / 1024:.0f} MiB) are an upper bound (marked <=)")

    def floor_kib(self):
        return self_rss_kib() if self.method == 'wait4' else 0

    def run(self, argv):
        with tempfile.TemporaryFile() as err:
            if self.method == 'time':
                full = [self.time_tool, '-f', '@@memsnap-bench %M', '--'] + argv
            else:
                full = argv
            floor = self.floor_kib()
            t0 = time.perf_counter()
            p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err)
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            p.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            text = err.read().decode('utf-8', 'replace')
        rss = ru.ru_maxrss
        at_floor = False
        if self.method == 'time':
            lines = text.splitlines()
            for i in range(len(lines) - 1, -1, -1):
                if lines[i].startswith('@@memsnap-bench '):
                    rss = int(lines[i].split()[1])
                    del lines[i]
                    break
            # GNU time reports "Command exited with non-zero status N" too.
            lines = [l for l in lines if not l.startswith('Command exited with non-zero status')
                     and not l.startswith('Command terminated by signal')]
            text = '\n'.join(lines)
        else:
            at_floor = rss <= floor * 1.05
        return p.returncode, wall, rss, at_floor, text


# ---------------------------------------------------------------------------
# Generation


def parse_size(text):
    t = text.strip().lower().replace('_', '')
    mult = 1
    if t.endswith('k'):
        mult, t = 1000, t[:-1]
    elif t.endswith('m'):
        mult, t = 1000 * 1000, t[:-1]
    try:
        n = int(float(t) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f'bad size {text!r} (examples: 100k, 1m, 5m, 250000)')
    if n <= 0:
        raise argparse.ArgumentTypeError(f'size must be positive: {text!r}')
    return n


def size_label(n):
    if n % 1000000 == 0:
        return f'{n // 1000000}M'
    if n % 1000 == 0:
        return f'{n // 1000}k'
    return str(n)


def wait_for_generator(max_wait_s=30 * 60, every_s=30):
    waited = 0
    while not os.path.exists(GENERATOR):
        if waited >= max_wait_s:
            sys.exit(f'run_bench: {GENERATOR} still missing after {max_wait_s // 60} min; giving up')
        log(f'waiting for {os.path.relpath(GENERATOR, ROOT)} to appear '
            f'({waited // 60} of {max_wait_s // 60} min)...')
        time.sleep(every_s)
        waited += every_s


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def steps_for(events):
    return max(1, round(events / EVENTS_PER_STEP))


def gen_args(events, seed):
    return ['--events', str(events), '--protocol', str(PROTOCOL), '--stacks', 'all',
            '--sites', str(SITES), '--steps', str(steps_for(events)), '--devices', '1',
            '--seed', str(seed)]


def snapshot_path(work, events, seed):
    # File A keeps the name it always had, so caches from older runs stay valid.
    suffix = '' if seed == SEED else f'-seed{seed}'
    return os.path.join(work, f'snapshot-{size_label(events)}{suffix}.pickle')


def generate(events, work, runner, gen_hash, seed):
    """Returns (path, generated: bool, seconds, gen RSS KiB)."""
    path = snapshot_path(work, events, seed)
    args = gen_args(events, seed)
    params = {'generator_args': args, 'generator_sha256': gen_hash}
    return generate_file(path, args, params, runner)[:4]


def replicated_path(work, events):
    return os.path.join(work, f'replicated-{size_label(events)}.pickle')


def generate_replicated(events, work, runner, gen_hash, fixture, fixture_hash):
    """make_snapshot.py --replicate FIXTURE --events N, cached like the
    generated files (the sidecar also holds the fixture's SHA-256 and the
    generator's manifest). Returns (path, generated, seconds, gen RSS KiB, manifest)."""
    path = replicated_path(work, events)
    args = ['--replicate', fixture, '--events', str(events)]
    params = {'generator_args': ['--replicate', os.path.basename(fixture), '--events', str(events)],
              'fixture_sha256': fixture_hash, 'generator_sha256': gen_hash}
    return generate_file(path, args, params, runner, manifest=True)


def generate_file(path, args, params, runner, manifest=False):
    """Runs the generator with `args` unless `path` and its .params sidecar
    (equal to `params`) are there. Returns (path, generated, seconds, gen RSS
    KiB, the generator's manifest or None)."""
    sidecar = path + '.params'
    if os.path.exists(path) and os.path.exists(sidecar):
        try:
            with open(sidecar) as f:
                cached = json.load(f)
            kept = cached.pop('manifest', None)
            if cached == params:
                return path, False, 0.0, 0, kept
        except (OSError, ValueError, AttributeError):
            pass
    for stale in (path, sidecar):
        if os.path.exists(stale):
            os.remove(stale)
    tmp = path + '.tmp'
    argv = [sys.executable, GENERATOR, '--out', tmp] + args
    if manifest:
        argv += ['--manifest', tmp + '.manifest']
    log(f'generating {path}: make_snapshot.py {" ".join(args)}')
    rc, wall, rss, _, err = runner.run(argv)
    if rc != 0:
        for t in (tmp, tmp + '.manifest'):
            if os.path.exists(t):
                os.remove(t)
        sys.exit(f'run_bench: generator failed (exit {rc}): {" ".join(argv)}\n{err}')
    got = None
    if manifest:
        with open(tmp + '.manifest') as f:
            got = json.load(f)
        os.remove(tmp + '.manifest')
    os.replace(tmp, path)
    with open(sidecar, 'w') as f:
        json.dump(dict(params, manifest=got) if manifest else params, f, indent=1)
        f.write('\n')
    return path, True, wall, rss, got


# ---------------------------------------------------------------------------
# Measurement


def check_output(memsnap, path, events, history_exact=None):
    """One untimed `parse --json` whose JSON is read by a child (to keep this
    process small). Returns (text for the report, info): info has the trace
    duration in seconds, the profiler steps and whether the allocator history
    reproduces the dump (fragmentation.exact), or is {} when parse failed.

    history_exact: None for a generated file (any warning is ODD); for a
    replicated one the fixture's exactness, which the file must keep (its
    warnings are the fixture's, a cut first repetition's and the close-outs')."""
    code = r'''
import json, subprocess, sys
p = subprocess.run([sys.argv[1], 'parse', sys.argv[2], '--json'], capture_output=True)
if p.returncode != 0:
    print(json.dumps({'text': 'exit %d: %s' % (
        p.returncode, p.stderr.decode('utf-8', 'replace').strip()[-400:])}))
    sys.exit(0)
try:
    d = json.loads(p.stdout)
except ValueError as e:
    print(json.dumps({'text': 'stdout is not JSON: %s' % e}))
    sys.exit(0)
dt = d.get('device_traces') or {}
n = dt.get('event_count')
steps = d.get('profiler_steps') or {}
inter = d.get('interned') or {}
exact = (d.get('fragmentation') or {}).get('exact')
expect_exact = json.loads(sys.argv[4])
problems = []
if n != int(sys.argv[3]):
    problems.append('event_count %r, expected %s' % (n, sys.argv[3]))
if expect_exact is None and d.get('warnings'):
    problems.append('warnings: %s' % str(d['warnings'])[:200])
if expect_exact is not None and exact != expect_exact:
    problems.append('allocator history exact %r, the fixture %r' % (exact, expect_exact))
anom = {k: v for k, v in (d.get('anomalies') or {}).items() if v}
if anom:
    problems.append('anomalies: %s' % anom)
text = '%s events, %d profiler steps, %s frames / %s stacks interned' % (
    n, len(steps), inter.get('frames'), inter.get('stacks'))
if expect_exact is not None:
    text += ', allocator history %s' % ('exact' if exact else 'not exact')
if problems:
    text += '; ODD: ' + '; '.join(problems)
print(json.dumps({'text': text, 'info': {'duration_s': d.get('trace_duration_s'),
                                         'steps': len(steps), 'exact': exact}}))
'''
    p = subprocess.run([sys.executable, '-c', code, memsnap, path, str(events),
                        json.dumps(history_exact)], capture_output=True, text=True)
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return (p.stdout.strip() or p.stderr.strip()[-400:]), {}
    return got['text'], got.get('info', {})


def run_timed(runner, argv, what, runs=MEMSNAP_RUNS, before_each=None, accept_exit=False):
    """Runs argv `runs` times. Returns {walls, wall (median), rss (max), rss_floor} or {error}.

    accept_exit: a non-zero exit status is a result too (a command that
    refuses the file, timed all the same): {..., rc, message}."""
    walls, rsss, floors = [], [], []
    refused = None
    for i in range(runs):
        if before_each:
            before_each()
        rc, wall, rss, at_floor, err = runner.run(argv)
        if rc != 0 and not accept_exit:
            error = f'exit {rc}: {err.strip()[-600:]}'
            log(f'  {what} run {i + 1}: FAILED, {error}')
            return {'error': error}
        if rc != 0:
            lines = err.strip().splitlines()
            refused = {'rc': rc, 'message': lines[-1][:200] if lines else ''}
        walls.append(wall)
        rsss.append(rss)
        floors.append(at_floor)
        log(f'  {what} run {i + 1}/{runs}: {wall:.3f} s, {rss / 1024:.1f} MiB'
            + (f' (exit {rc})' if rc != 0 else '')
            + (' (first run: warms the page cache)' if i == 0 else ''))
    out = {'walls': walls, 'wall': statistics.median(walls), 'rss': max(rsss),
           'rss_floor': all(floors)}
    if refused:
        out.update(refused)
    return out


PICKLE_LOAD = "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))"
GZIP_PICKLE_LOAD = "import gzip,pickle,sys; pickle.load(gzip.open(sys.argv[1]))"


def python_load(path, runner, py_runs_max, what='python load', code=PICKLE_LOAD):
    """`code` (a pickle load of argv[1]) in a fresh interpreter, min of up to
    py_runs_max runs.

    Returns {wall, rss, rss_floor} or {skip} or {error}."""
    size = os.path.getsize(path)
    avail = meminfo_kib('MemAvailable')
    need = PY_RSS_FACTOR * size
    if avail is not None and need > PY_MEM_FRACTION * avail * 1024:
        skip = (f'skipped: est. {need / GiB:.1f} GiB (20x file) > 80% of '
                f'MemAvailable {avail / (1 << 20):.1f} GiB')
        log(f'  {what} {skip}')
        return {'skip': skip}
    pw, pr = [], []
    out = {}
    for i in range(py_runs_max):
        rc, wall, rss, at_floor, err = runner.run([sys.executable, '-c', code, path])
        if rc != 0:
            out['error'] = f'exit {rc}: {err.strip()[-400:]}'
            log(f'  {what}: FAILED, {out["error"]}')
            break
        pw.append(wall)
        pr.append(rss)
        out['rss_floor'] = at_floor
        log(f'  {what} run {i + 1}: {wall:.2f} s, {rss / 1024:.1f} MiB')
        if wall > PY_SECOND_RUN_UNDER_S:
            break
    if pw:
        out['wall'] = min(pw)
        out['rss'] = min(pr)
    return out


def measure(path, events, memsnap, runner, py_runs_max, history_exact=None):
    size = os.path.getsize(path)
    r = {'events': events, 'path': path, 'size': size}

    got = run_timed(runner, [memsnap, 'parse', path, '--json'], 'memsnap parse')
    if 'error' in got:
        r['memsnap_error'] = got['error']
    else:
        r['memsnap_walls'] = got['walls']
        r['memsnap_wall'] = got['wall']
        r['memsnap_rss'] = got['rss']
        r['memsnap_rss_floor'] = got['rss_floor']
        r['check'], r['parse_info'] = check_output(memsnap, path, events, history_exact)
        log(f'  memsnap output: {r["check"]}')

    # The read limit: the same bytes through `cat` to /dev/null (page cache warm).
    got = run_timed(runner, ['cat', path], 'cat')
    if 'error' not in got:
        r['cat_wall'] = got['wall']

    for k, v in python_load(path, runner, py_runs_max, 'python load A').items():
        r['py_' + k] = v
    return r


def compress_copies(path):
    """A.gz (gzip -6, as the gzip CLI and Python's gzip module write) and
    A.zst (zstd -3, the CLI's default) beside A; a missing tool is a skip."""
    out = {}
    for ext, argv in (('gz', ['gzip', '-6', '-c']), ('zst', ['zstd', '-3', '-q', '-c'])):
        target = f'{path}.{ext}'
        if shutil.which(argv[0]) is None:
            out[ext] = {'skip': f'no {argv[0]} on PATH'}
            continue
        if not os.path.exists(target) or os.path.getmtime(target) < os.path.getmtime(path):
            with open(path, 'rb') as src, open(target + '.tmp', 'wb') as dst:
                subprocess.run(argv, stdin=src, stdout=dst, check=True)
            os.replace(target + '.tmp', target)
        out[ext] = {'path': target}
    return out


def measure_compressed(path, memsnap, runner, py_runs_max):
    """memsnap parse of A.gz and A.zst beside Python's gzip + pickle load of A.gz
    (Python's standard library has no zstd reader: the .gz load is its baseline)."""
    out = compress_copies(path)
    for ext, c in out.items():
        if 'path' not in c:
            log(f'  .{ext}: {c["skip"]}')
            continue
        c['size'] = os.path.getsize(c['path'])
        got = run_timed(runner, [memsnap, 'parse', c['path'], '--json'], f'memsnap parse .{ext}')
        if 'error' in got:
            c['error'] = got['error']
        else:
            c.update(wall=got['wall'], rss=got['rss'], rss_floor=got['rss_floor'])
    gz = out.get('gz', {})
    if 'path' in gz:
        loaded = python_load(gz['path'], runner, py_runs_max, 'python gzip load', GZIP_PICKLE_LOAD)
        for k, v in loaded.items():
            gz['py_' + k] = v
    return out


def compressed_rows(results):
    header = ['events', 'input', 'on disk', 'memsnap wall (s)', 'memsnap peak RSS',
              'python gzip load (s)', 'speedup', 'plain parse (s)']
    rows = []
    for r in results:
        comp = r.get('compressed')
        if not comp:
            continue
        for ext in ('gz', 'zst'):
            c = comp.get(ext, {})
            label = size_label(r['events'])
            if 'path' not in c:
                rows.append([label, f'.{ext}', '-', c.get('skip', 'skipped'), '-', '-', '-', '-'])
                continue
            wall = c.get('wall')
            py = comp.get('gz', {}).get('py_wall')
            rows.append([label, f'.{ext}', fmt_size(c['size']),
                         f'{wall:.3f}' if wall else 'FAILED',
                         fmt_rss(c) if wall else '-',
                         f'{py:.2f}' if py else '-',
                         f'{py / wall:.1f}x' if py and wall else '-',
                         f'{r["memsnap_wall"]:.3f}' if 'memsnap_wall' in r else '-'])
    return header, rows


def steps_parsed(check_text):
    """The profiler steps `memsnap parse` found (its check line), or None."""
    m = re.search(r'(\d+) profiler steps', check_text or '')
    return int(m.group(1)) if m else None


def check_json(kind, argv, steps_expected):
    """One untimed run of compare / replay-step whose JSON a child reads back.

    steps_expected: the steps `parse` found in A (replay-step must list them
    all; compare matches at most that many); -1 when unknown. The generator's
    --steps is a target, not a promise: with --sites, iterations that need new
    segments are longer and the budget ends a few hundred steps early."""
    code = r'''
import json, subprocess, sys
kind, steps_expected, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
p = subprocess.run(argv, capture_output=True)
if p.returncode != 0:
    print('exit %d: %s' % (p.returncode, p.stderr.decode('utf-8', 'replace').strip()[-400:]))
    sys.exit(0)
try:
    d = json.loads(p.stdout)
except ValueError as e:
    print('stdout is not JSON: %s' % e)
    sys.exit(0)
problems = []
if kind == 'compare':
    n = len(d.get('matching_steps') or [])
    ft = d.get('full_trace') or {}
    text = '%d matching steps, full-trace peak diff %.2f GiB' % (
        n, (ft.get('absolute_peak_diff') or 0) / 2.0**30)
else:
    steps = d if isinstance(d, list) else (d.get('steps') or [])
    n = len(steps)
    text = '%d steps (%d complete)' % (n, sum(1 for s in steps if isinstance(s, dict) and s.get('complete')))
if steps_expected >= 0 and (n != steps_expected if kind != 'compare' else n > steps_expected):
    problems.append('%d steps, parse found %d in A' % (n, steps_expected))
print(text + (('; ODD: ' + '; '.join(problems)) if problems else ''))
'''
    p = subprocess.run([sys.executable, '-c', code, kind, str(steps_expected)] + argv,
                       capture_output=True, text=True)
    return (p.stdout.strip() or p.stderr.strip()[-400:])


# Time to interactive of the plot page. Node and playwright-core are only needed
# for this step; the script is written to a temporary file at run time.
PAGE_READY_JS = r'''
const [, , htmlPath, runsArg, root, chromiumPath, argsJson, waitS, secondUnderS] = process.argv;
const { chromium } = require(require.resolve('playwright-core', { paths: [root] }));
(async () => {
  const out = { times: [] };
  let browser;
  try {
    browser = await chromium.launch({ executablePath: chromiumPath, args: JSON.parse(argsJson),
                                      timeout: 60000 });
    for (let i = 0; i < Number(runsArg); i++) {
      const context = await browser.newContext();   // fresh page, nothing cached
      const page = await context.newPage();
      const t0 = Date.now();
      await page.goto('file://' + htmlPath, { timeout: Number(waitS) * 1000 });
      await page.waitForFunction(
        () => document.body.dataset.ready === 'true'
          || (document.getElementById('error') && !document.getElementById('error').hidden),
        null, { timeout: Number(waitS) * 1000 });
      const t1 = Date.now();
      const error = await page.evaluate(() => {
        const e = document.getElementById('error');
        return e && !e.hidden ? e.textContent : '';
      });
      await context.close();
      if (error) throw new Error('page shows an error: ' + error.slice(0, 300));
      out.times.push((t1 - t0) / 1000);
      if ((t1 - t0) / 1000 > Number(secondUnderS)) break;
    }
  } catch (err) {
    out.error = String(err && err.message || err).split('\n')[0].slice(0, 400);
  }
  if (browser) await browser.close().catch(() => {});
  console.log(JSON.stringify(out));
})();
'''


def browser_missing():
    """Why the Chromium step cannot run, or None."""
    if not shutil.which('node'):
        return 'node not found'
    if not os.access(CHROMIUM, os.X_OK):
        return f'{CHROMIUM} not found'
    if not os.path.isfile(os.path.join(ROOT, 'node_modules', 'playwright-core', 'package.json')):
        return f'playwright-core not installed in {os.path.join(ROOT, "node_modules")} (npm ci)'
    return None


def page_ready(html):
    """Seconds until document.body.dataset.ready, per page load: {times} or {error}."""
    with tempfile.TemporaryDirectory(prefix='memsnap-bench-') as tmp:
        script = os.path.join(tmp, 'page_ready.cjs')
        with open(script, 'w') as f:
            f.write(PAGE_READY_JS)
        argv = ['node', script, os.path.abspath(html), str(BROWSER_RUNS), ROOT, CHROMIUM,
                json.dumps(CHROMIUM_ARGS), str(BROWSER_WAIT_S), str(BROWSER_SECOND_RUN_UNDER_S)]
        limit = 60 + BROWSER_RUNS * (2 * BROWSER_WAIT_S + 10)
        try:
            p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=limit,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {'error': f'node did not finish in {limit} s'}
    lines = p.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        return {'error': f'node exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}'}
    if out.get('error'):
        return {'error': out['error']}
    return {'times': out['times']}


def output_bytes(argv):
    """Bytes a command writes on stdout (read in blocks, never held)."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    total = 0
    for block in iter(lambda: p.stdout.read(1 << 20), b''):
        total += len(block)
    p.wait()
    return total


def measure_more(r, path_b, memsnap, runner, py_runs_max, work, browser):
    """compare / replay-step / plot rows for one size; adds keys to r (the parse row of A)."""
    events = r['events']
    path_a = r['path']
    label = size_label(events)

    if path_b:
        r['size_b'] = os.path.getsize(path_b)
        log(f'  file B: {path_b} ({fmt_size(r["size_b"])})')
        r['py_b'] = python_load(path_b, runner, py_runs_max, 'python load B')
        r['compare'] = run_timed(runner, [memsnap, 'compare', path_a, path_b, '--json'],
                                 'memsnap compare A B')
        if 'error' not in r['compare']:
            r['compare_check'] = check_json('compare',
                                            [memsnap, 'compare', path_a, path_b, '--json'],
                                            steps_parsed(r.get('check')) or -1)
            log(f'  compare output: {r["compare_check"]}')

    r['replay'] = run_timed(runner, [memsnap, 'replay-step', '--all-steps', path_a, '--json'],
                            'memsnap replay-step --all-steps A')
    if 'error' not in r['replay']:
        r['replay_check'] = check_json('replay',
                                       [memsnap, 'replay-step', '--all-steps', path_a, '--json'],
                                       steps_parsed(r.get('check')) or -1)
        log(f'  replay-step output: {r["replay_check"]}')

    r['events_json'] = run_timed(runner, [memsnap, 'events', path_a, '--json'],
                                 'memsnap events --json A')
    if 'error' not in r['events_json']:
        r['events_json_bytes'] = output_bytes([memsnap, 'events', path_a, '--json'])
        r['events_inline_bytes'] = output_bytes([memsnap, 'events', path_a, '--json',
                                                 '--inline-frames'])
        log(f'  events --json: {fmt_size(r["events_json_bytes"])} '
            f'({fmt_size(r["events_inline_bytes"])} with --inline-frames)')

    html = os.path.join(work, f'plot-{label}.html')

    def remove_html():
        if os.path.exists(html):
            os.remove(html)

    r['html_path'] = html
    r['plot'] = run_timed(runner, [memsnap, 'plot', path_a, '-o', html], 'memsnap plot A',
                          before_each=remove_html)
    if 'error' in r['plot']:
        return r
    if not os.path.exists(html):
        r['plot'] = {'error': f'exit 0 but {html} was not written'}
        return r
    r['html_size'] = os.path.getsize(html)
    # How the page answers a click: every allocation, or moments (plot --max-lifetimes).
    with open(html, 'rb') as f:
        page = f.read()
    r['drill_mode'] = 'moments' if b'"replaced_by_moments"' in page else 'lifetimes'
    del page
    log(f'  plot HTML: {fmt_size(r["html_size"])}, drill-down by {r["drill_mode"]}')
    if browser:
        r['ready_skip'] = browser
        log(f'  Chromium step skipped: {browser}')
    else:
        r['ready'] = page_ready(html)
        if 'times' in r['ready']:
            r['ready']['median'] = statistics.median(r['ready']['times'])
            log('  page ready in Chromium: '
                + ', '.join(f'{t:.2f} s' for t in r['ready']['times']))
        else:
            log(f'  page ready in Chromium: FAILED, {r["ready"]["error"]}')
    return r


def oom_note(argv):
    """What `memsnap oom --json` said, from one untimed run (its JSON is small)."""
    p = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        lines = p.stderr.decode('utf-8', 'replace').strip().splitlines()
        return f'refused (exit {p.returncode}): {lines[-1][:120] if lines else ""}'
    try:
        d = json.loads(p.stdout)
    except ValueError:
        return 'stdout is not JSON'
    n = d.get('oom_count')
    if d.get('moment') == 'peak':
        return f'at the absolute peak ({n or 0} oom entries in the file)'
    if not n:
        return 'no oom entry in the file: report says "oom": null (exit 0)'
    return f'{n} oom entries, the first reported'


def measure_commands(r, shape, memsnap, runner, work, path_b=None):
    """The commands table's rows for one file (r: its parse-table result).

    For the generated shape, the commands the other tables already ran on the
    same file (parse, compare A B, replay-step, plot) are taken from them;
    every other command runs MEMSNAP_RUNS times here. Each row: {shape,
    events, size, command, got (run_timed's result, or None), entries read,
    bytes read, note}."""
    path, events, size = r['path'], r['events'], r['size']
    label = size_label(events)
    info = r.get('parse_info') or {}
    rows = []

    def add(command, got, files=1, note=''):
        rows.append({'shape': shape, 'events': events, 'size': size, 'command': command,
                     'got': got, 'entries': events * files, 'bytes': size * files,
                     'note': note})

    def timed(command, argv, **kw):
        return run_timed(runner, argv, f'{shape} {label} {command}', **kw)

    if 'memsnap_wall' in r:
        add('parse --json', {'wall': r['memsnap_wall'], 'rss': r['memsnap_rss'],
                             'rss_floor': r.get('memsnap_rss_floor')}, note='the parse table')
    else:
        add('parse --json', {'error': r.get('memsnap_error', '?')})
    add('explain --json', timed('explain', [memsnap, 'explain', path, '--json']))

    if shape == 'generated' and 'compare' in r:
        add('compare A B --json', r['compare'], 2, 'B: same options, --seed 2 (compare table)')
    elif shape == 'generated':
        add('compare A B --json', None, 2, r.get('b_skip', 'B skipped'))
    else:
        add('compare A A --json', timed('compare A A', [memsnap, 'compare', path, path, '--json']),
            2, 'the file against itself (both read and analysed)')

    duration = info.get('duration_s')
    if duration:
        t = round(duration / 2, 6)
        add('replay-to-time --json', timed('replay-to-time',
                                           [memsnap, 'replay-to-time', path, '--time', str(t),
                                            '--json']), note=f'--time {t:g} (mid-trace)')
    else:
        add('replay-to-time --json', None, note='no trace duration from parse')

    if not info.get('steps'):
        add('replay-step --all-steps --json', None, note='no steps')
    elif shape == 'generated' and 'replay' in r:
        add('replay-step --all-steps --json', r['replay'],
            note=f'{info["steps"]} steps (compare table)')
    else:
        add('replay-step --all-steps --json',
            timed('replay-step', [memsnap, 'replay-step', '--all-steps', path, '--json']),
            note=f'{info["steps"]} steps')

    if shape == 'generated' and 'plot' in r:
        note = (f'{fmt_size(r["html_size"])} HTML, drill-down by {r.get("drill_mode", "?")} '
                '(plot table)') if 'html_size' in r else 'plot table'
        add('plot -o X.html', r['plot'], note=note)
    else:
        html = os.path.join(work, f'plot-{shape}-{label}.html')

        def remove_html():
            if os.path.exists(html):
                os.remove(html)

        got = timed('plot', [memsnap, 'plot', path, '-o', html], before_each=remove_html)
        note = ''
        if 'error' not in got and os.path.exists(html):
            with open(html, 'rb') as f:
                page = f.read()
            mode = 'moments' if b'"replaced_by_moments"' in page else 'lifetimes'
            note = f'{fmt_size(len(page))} HTML, drill-down by {mode}'
            del page
        r.setdefault('extra_paths', []).append(html)
        add('plot -o X.html', got, note=note)

    for command, extra in (('oom --json', []), ('oom --at peak --json', ['--at', 'peak'])):
        argv = [memsnap, 'oom', path] + extra + ['--json']
        got = timed(command, argv, accept_exit=True)
        note = oom_note(argv) if 'error' not in got and 'rc' not in got else ''
        add(command, got, note=note)

    add('segments --json', timed('segments', [memsnap, 'segments', path, '--json']))

    out_dir = os.path.join(work, f'summary-{shape}-{label}')

    def remove_summary():
        shutil.rmtree(out_dir, ignore_errors=True)

    got = timed('summarize', [memsnap, 'summarize', path, '-o', out_dir],
                before_each=remove_summary)
    note = ''
    if 'error' not in got and os.path.isdir(out_dir):
        total = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
        note = f'summary {total / 1024:.1f} KiB'
    remove_summary()
    add('summarize -o DIR', got, note=note)
    return rows


def commands_rows(rows):
    header = ['shape', 'command', 'events', 'file(s) read', 'wall (s)', 'peak RSS (x files)',
              's / 1M entries', 'note']
    out, missed = [], []
    order = {}
    for row in rows:
        order.setdefault((row['shape'], row['command']), len(order))
    for row in sorted(rows, key=lambda x: (x['shape'] != 'generated', x['shape'],
                                           order[(x['shape'], x['command'])], x['events'])):
        label = size_label(row['events'])
        if row.get('skip'):
            out.append([row['shape'], '-', label, row['skip'], '-', '-', '-', '-'])
            continue
        cells = [row['shape'], row['command'], label, fmt_size(row['bytes'])]
        got = row['got']
        note = row['note']
        if got is None:
            cells += ['-', '-', '-']
        elif 'error' in got:
            cells += ['FAILED', '-', '-']
            missed.append(f'{label} {row["shape"]}: {row["command"]} failed: {got["error"]}')
        else:
            cells += [f'{got["wall"]:.3f}', fmt_rss(got, row['bytes']),
                      f'{got["wall"] / row["entries"] * 1e6:.3f}']
            if 'rc' in got:
                note = (f'refused (exit {got["rc"]}): {got.get("message", "")}; ' + note).strip('; ')
        cells.append(note or '-')
        out.append(cells)
    return header, out, missed


# ---------------------------------------------------------------------------
# Report


def fmt_size(n):
    if n >= GiB:
        return f'{n / GiB:.2f} GiB'
    return f'{n / MiB:.1f} MiB'


def table_rows(results):
    """The parse table; `results` holds both shapes (r['shape'], generated when absent)."""
    header = ['events', 'shape', 'file', 'memsnap wall (s)', 'memsnap peak RSS', 'python load (s)',
              'python peak RSS', 'speedup', 'cat (s)', 'memsnap / cat',
              f'>= {SPEED_TARGET:g}x faster', f'RSS <= {RSS_TARGET:g}x file']
    rows = []
    missed = []
    for r in results:
        shape = r.get('shape', 'generated')
        label = size_label(r['events'])
        row = [label, shape]
        if shape != 'generated':
            label = f'{label} {shape}'
        if 'skip' in r:
            rows.append(row + [r.get('skip_cell', 'skipped (disk)')] + ['-'] * (len(header) - 3))
            continue
        size = r['size']
        row.append(fmt_size(size))
        if 'memsnap_wall' in r:
            ratio = r['memsnap_rss'] * 1024 / size
            le = '<= ' if r.get('memsnap_rss_floor') else ''
            row += [f'{r["memsnap_wall"]:.3f}',
                    f'{le}{r["memsnap_rss"] / 1024:.1f} MiB ({le}{ratio:.2f}x)']
        else:
            row += ['FAILED', '-']
        if 'py_wall' in r:
            le = '<= ' if r.get('py_rss_floor') else ''
            row += [f'{r["py_wall"]:.2f}', f'{le}{r["py_rss"] / 1024:.0f} MiB']
        elif 'py_skip' in r:
            row += ['skipped (memory)', '-']
        else:
            row += ['FAILED', '-']
        cat = r.get('cat_wall')
        speed_cells = [f'{cat:.3f}' if cat else '-',
                       f'{r["memsnap_wall"] / cat:.1f}x' if cat and 'memsnap_wall' in r else '-']
        if 'memsnap_wall' in r and 'py_wall' in r:
            speed = r['py_wall'] / r['memsnap_wall']
            row.append(f'{speed:.1f}x')
            row += speed_cells
            ok = speed >= SPEED_TARGET
            row.append('ok' if ok else 'MISSED')
            if not ok:
                missed.append(f'{label}: speedup {speed:.1f}x < {SPEED_TARGET:g}x')
        else:
            row += ['-'] + speed_cells
            row.append('n/a' if 'memsnap_wall' in r else 'MISSED (memsnap failed)')
            if 'memsnap_wall' not in r:
                missed.append(f'{label}: memsnap failed: {r.get("memsnap_error", "?")}')
        if 'memsnap_wall' in r:
            ratio = r['memsnap_rss'] * 1024 / size
            ok = ratio <= RSS_TARGET
            if not ok and r.get('memsnap_rss_floor'):
                row.append('unknown (wait4 floor)')
            else:
                row.append('ok' if ok else 'MISSED')
            if not ok and not r.get('memsnap_rss_floor'):
                missed.append(f'{label}: peak RSS {ratio:.2f}x file size > {RSS_TARGET:g}x')
        else:
            row.append('MISSED (memsnap failed)')
        rows.append(row)
    return header, rows, missed


def fmt_rss(got, size=None):
    le = '<= ' if got.get('rss_floor') else ''
    text = f'{le}{got["rss"] / 1024:.1f} MiB'
    if size:
        text += f' ({le}{got["rss"] * 1024 / size:.2f}x)'
    return text


def compare_rows(results):
    header = ['events', 'files A + B', 'python load A + B (s)', 'compare wall (s)',
              'compare peak RSS (x A+B)', 'compare s / 1M events', 'replay-step wall (s)',
              'replay-step peak RSS (x A)', 'replay-step s / 1M events', 'compare speedup',
              'compare < python A + B']
    rows, missed = [], []
    for r in results:
        label = size_label(r['events'])
        if 'skip' in r:
            rows.append([label, 'skipped (disk)'] + ['-'] * (len(header) - 2))
            continue
        events = r['events']
        row = [label]
        verdict = ['-', 'n/a']
        if 'size_b' in r:
            both = r['size'] + r['size_b']
            row.append(fmt_size(both))
            pb = r.get('py_b', {})
            py_sum = None
            if 'py_wall' in r and 'wall' in pb:
                py_sum = r['py_wall'] + pb['wall']
                row.append(f'{r["py_wall"]:.2f} + {pb["wall"]:.2f} = {py_sum:.2f}')
            elif 'py_skip' in r or 'skip' in pb:
                row.append('skipped (memory)')
            else:
                row.append('FAILED')
            cmp_ = r.get('compare', {})
            if 'wall' in cmp_:
                row += [f'{cmp_["wall"]:.3f}', fmt_rss(cmp_, both),
                        f'{cmp_["wall"] / (2 * events) * 1e6:.3f}']
                if py_sum is not None:
                    ok = cmp_['wall'] < py_sum
                    verdict = [f'{py_sum / cmp_["wall"]:.1f}x', 'ok' if ok else 'MISSED']
                    if not ok:
                        missed.append(f'{label}: compare {cmp_["wall"]:.2f} s >= python load '
                                      f'of A + B {py_sum:.2f} s')
            else:
                row += ['FAILED', '-', '-']
                verdict = ['-', 'MISSED (compare failed)']
                missed.append(f'{label}: compare failed: {cmp_.get("error", "?")}')
        else:
            row += ['B skipped', '-', '-', '-', '-']
        rep = r.get('replay', {})
        if 'wall' in rep:
            row += [f'{rep["wall"]:.3f}', fmt_rss(rep, r['size']),
                    f'{rep["wall"] / events * 1e6:.3f}']
        else:
            row += ['FAILED', '-', '-']
            missed.append(f'{label}: replay-step failed: {rep.get("error", "?")}')
        row += verdict
        rows.append(row)
    return header, rows, missed


def plot_rows(results):
    header = ['events', 'file', 'plot wall (s)', 'plot peak RSS (x file)', 'x parse RSS', 'HTML',
              'drill-down', 'Chromium ready (s)', f'HTML <= {HTML_TARGET_BYTES / MiB:g} MiB',
              f'ready < {READY_TARGET_S:g} s', f'RSS <= {PLOT_RSS_TARGET:g}x parse']
    rows, missed = [], []
    for r in results:
        label = size_label(r['events'])
        if 'skip' in r:
            rows.append([label, 'skipped (disk)'] + ['-'] * (len(header) - 2))
            continue
        row = [label, fmt_size(r['size'])]
        plot = r.get('plot', {})
        if 'wall' not in plot:
            rows.append(row + ['FAILED'] + ['-'] * 5 + ['MISSED (plot failed)'] * 3)
            missed.append(f'{label}: plot failed: {plot.get("error", "?")}')
            continue
        size = r['html_size']
        parse_rss = r.get('memsnap_rss')
        vs_parse = plot['rss'] / parse_rss if parse_rss else None
        row += [f'{plot["wall"]:.3f}', fmt_rss(plot, r['size']),
                f'{vs_parse:.2f}x' if vs_parse else '-', f'{size / MiB:.2f} MiB',
                r.get('drill_mode', '?')]
        ready = r.get('ready', {})
        if 'median' in ready:
            n = len(ready['times'])
            row.append(f'{ready["median"]:.2f}' + ('' if n == BROWSER_RUNS else f' ({n} run)'))
        elif 'error' in ready:
            row.append('FAILED')
        else:
            row.append('skipped')
        ok = size <= HTML_TARGET_BYTES
        row.append('ok' if ok else 'MISSED')
        if not ok:
            missed.append(f'{label}: plot HTML {size / MiB:.1f} MiB > {HTML_TARGET_BYTES / MiB:g} MiB')
        if 'median' in ready:
            ok = ready['median'] < READY_TARGET_S
            row.append('ok' if ok else 'MISSED')
            if not ok:
                missed.append(f'{label}: page ready in {ready["median"]:.2f} s >= '
                              f'{READY_TARGET_S:g} s')
        elif 'error' in ready:
            row.append('MISSED (failed)')
            missed.append(f'{label}: page in Chromium: {ready["error"]}')
        else:
            row.append('not measured')
        if vs_parse is None:
            row.append('-')
        else:
            ok = vs_parse <= PLOT_RSS_TARGET
            row.append('ok' if ok else 'MISSED')
            if not ok:
                missed.append(f'{label}: plot peak RSS {vs_parse:.2f}x parse > {PLOT_RSS_TARGET:g}x')
        rows.append(row)
    return header, rows, missed


def events_rows(results):
    header = ['events', 'file', 'events --json wall (s)', 'peak RSS (x file)', 'x parse RSS',
              'JSON', 'JSON --inline-frames', f'RSS <= {EVENTS_RSS_TARGET:g}x parse']
    rows, missed = [], []
    for r in results:
        label = size_label(r['events'])
        if 'skip' in r:
            rows.append([label, 'skipped (disk)'] + ['-'] * (len(header) - 2))
            continue
        row = [label, fmt_size(r['size'])]
        ev = r.get('events_json', {})
        if 'wall' not in ev:
            rows.append(row + ['FAILED'] + ['-'] * 4 + ['MISSED (events failed)'])
            missed.append(f'{label}: events --json failed: {ev.get("error", "?")}')
            continue
        parse_rss = r.get('memsnap_rss')
        vs_parse = ev['rss'] / parse_rss if parse_rss else None
        row += [f'{ev["wall"]:.3f}', fmt_rss(ev, r['size']),
                f'{vs_parse:.2f}x' if vs_parse else '-',
                fmt_size(r.get('events_json_bytes', 0)), fmt_size(r.get('events_inline_bytes', 0))]
        if vs_parse is None:
            row.append('-')
        else:
            ok = vs_parse <= EVENTS_RSS_TARGET
            row.append('ok' if ok else 'MISSED')
            if not ok:
                missed.append(f'{label}: events --json peak RSS {vs_parse:.2f}x parse > '
                              f'{EVENTS_RSS_TARGET:g}x')
        rows.append(row)
    return header, rows, missed


def many_steps_snapshot(path, steps, overlapping, seed=3):
    """`steps` ProfilerStep windows over 2 x `steps` events (allocs, then frees
    of random live blocks): sequential windows of two events each, or
    windows of random length up to half the trace that all overlap. Written
    with the standard library's pickle (protocol 4): nothing else is needed."""
    import pickle
    import random
    rng = random.Random(seed)
    t0 = 1_700_000_000_000_000
    events_count = 2 * steps
    frames = [{'name': 'step', 'filename': '/home/u/train.py', 'line': 7}]
    events, live = [], []
    for k in range(events_count):
        if live and k % 2 == 1:
            addr, size = live.pop(rng.randrange(len(live)))
            action = 'free_completed'
        else:
            addr, size = 0x7f0000000000 + 0x1000 * k, rng.choice([512, 4096, 1 << 20])
            live.append((addr, size))
            action = 'alloc'
        events.append({'action': action, 'addr': addr, 'size': size, 'stream': 0,
                       'time_us': t0 + 10 * k, 'frames': frames})
    annotations = []
    for n in range(steps):
        if overlapping:
            start = rng.randrange(events_count // 2) * 10
            end = start + rng.randrange(events_count // 2) * 10
        else:
            start, end = 20 * n, 20 * n + 15
        annotations.append({'name': f'ProfilerStep#{n}', 'stage': 'START', 'device': 0,
                            'time_us': t0 + start})
        annotations.append({'name': f'ProfilerStep#{n}', 'stage': 'END', 'device': 0,
                            'time_us': t0 + end})
    with open(path, 'wb') as f:
        pickle.dump({'segments': [], 'device_traces': [events],
                     'external_annotations': annotations}, f, protocol=4)


def measure_many_steps(memsnap, runner, work, steps):
    """replay-step --all-steps, compare and plot on files with `steps` windows:
    time must stay linear in events + steps however the windows overlap."""
    rows = []
    for overlapping in (False, True):
        kind = 'overlapping' if overlapping else 'sequential'
        path = os.path.join(work, f'steps-{kind}-{steps}.pickle')
        if not os.path.exists(path):
            many_steps_snapshot(path, steps, overlapping)
        log(f'many steps: {steps:,} {kind} windows over {2 * steps:,} events ({fmt_size(os.path.getsize(path))})')
        row = {'kind': kind, 'steps': steps, 'events': 2 * steps, 'size': os.path.getsize(path),
               'path': path}
        html = os.path.join(work, f'steps-{kind}.html')
        for key, argv in (('replay', [memsnap, 'replay-step', path, '--all-steps', '--json']),
                          ('compare', [memsnap, 'compare', path, path, '--json']),
                          ('plot', [memsnap, 'plot', path, '-o', html])):
            row[key] = run_timed(runner, argv, f'{kind} {key}')
        if os.path.exists(html):
            os.remove(html)
        rows.append(row)
    return rows


def many_steps_rows(rows):
    out = []
    for r in rows:
        cells = [f'{r["steps"]:,} {r["kind"]}', f'{r["events"]:,}', fmt_size(r['size'])]
        for key in ('replay', 'compare', 'plot'):
            m = r[key]
            cells.append('FAILED' if 'error' in m else f'{m["wall"]:.2f} s')
        out.append(cells)
    return out


def measure_ranks(memsnap, runner, work, ranks, events):
    """`memsnap ranks` over `ranks` generated rank files of about `events`
    entries each (tests/gen/make_ranks.py): -j 1 and -j 2 over the pickles,
    then the map step (summarize -o) and the reduce over the summaries alone."""
    folder = os.path.join(work, f'ranks-{ranks}x{size_label(events)}')
    summaries = folder + '-summaries'
    t0 = time.perf_counter()
    if not os.path.isdir(folder) or len(os.listdir(folder)) != ranks:
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(ROOT, 'tests', 'gen', 'make_ranks.py'), '--out', folder,
                        '--ranks', str(ranks), '--stages', '4', '--outlier', str(ranks // 2 + 5),
                        '--events', str(events)], check=True)
        log(f'ranks: generated {ranks} files of ~{size_label(events)} entries in {time.perf_counter() - t0:.1f} s')
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder))
    total = sum(os.path.getsize(f) for f in files)
    largest = max(files, key=os.path.getsize)
    out = {'ranks': ranks, 'events': events, 'bytes': total, 'largest': os.path.getsize(largest), 'path': folder}
    code, wall, rss, _, err = runner.run([memsnap, 'parse', largest])
    out['parse_rss'] = rss
    for jobs in (1, 2):
        runs = []
        for _ in range(3):
            code, wall, rss, _, err = runner.run([memsnap, 'ranks', '-j', str(jobs), folder])
            if code != 0:
                out[f'j{jobs}'] = {'error': err.strip()[:200]}
                break
            runs.append((wall, rss))
        else:
            out[f'j{jobs}'] = {'wall': statistics.median(w for w, _ in runs), 'rss': max(r for _, r in runs)}
    shutil.rmtree(summaries, ignore_errors=True)
    code, wall, rss, _, err = runner.run([memsnap, 'summarize', '-j', '2', '-o', summaries, folder])
    out['summarize'] = {'wall': wall, 'rss': rss} if code == 0 else {'error': err.strip()[:200]}
    if code == 0:
        sizes = [os.path.getsize(os.path.join(summaries, n)) for n in os.listdir(summaries)]
        out['summary_bytes'] = (min(sizes), max(sizes), sum(sizes))
        walls = [runner.run([memsnap, 'ranks', summaries])[1] for _ in range(3)]
        out['reduce_wall'] = statistics.median(walls)
    shutil.rmtree(summaries, ignore_errors=True)
    log(f'ranks: measured {ranks} files ({fmt_size(total)})')
    return out


def ranks_rows(r):
    def cell(key):
        m = r.get(key, {})
        if 'error' in m:
            return 'FAILED'
        return f'{m["wall"]:.2f} s, {fmt_size(m["rss"] * 1024)}'
    rows = [[f'{r["ranks"]} x {size_label(r["events"])}', fmt_size(r['bytes']),
             f'{fmt_size(r["parse_rss"] * 1024)}', cell('j1'), cell('j2'),
             f'{r["j2"]["rss"] / r["parse_rss"]:.2f}x' if 'rss' in r.get('j2', {}) else '-',
             cell('summarize'),
             (f'{r["summary_bytes"][0] / 1024:.0f}-{r["summary_bytes"][1] / 1024:.0f} KiB'
              if 'summary_bytes' in r else '-'),
             f'{r["reduce_wall"]:.2f} s' if 'reduce_wall' in r else '-']]
    return rows


def measure_hostile(memsnap, runner, work, scales=HOSTILE_SCALES):
    """Each shape of tests/gen/make_hostile.py (issue 40's structures that
    once multiplied time or memory) at two scales, gzipped as the
    regression tests write them: `parse` and `events --json`, refusals timed
    as answers. Linear means the time grows by the scale, not its square."""
    sys.path.insert(0, os.path.join(ROOT, 'tests', 'gen'))
    import make_hostile  # noqa: E402 (the generator lives with the tests)
    rows = []
    for shape in sorted(make_hostile.SHAPES):
        row = {'shape': shape, 'scales': {}}
        for scale in scales:
            path = make_hostile.write(shape, os.path.join(work, f'hostile-{shape}-{scale}.pickle.gz'),
                                      scale)
            got = {'bytes': os.path.getsize(path)}
            for command in HOSTILE_COMMANDS:
                got[command[0]] = run_timed(runner, [memsnap, command[0], path] + command[1:],
                                            f'{shape} x{scale} {command[0]}', accept_exit=True)
            os.remove(path)
            row['scales'][scale] = got
        rows.append(row)
        log(f'hostile: {shape} measured')
    return rows


def hostile_rows(rows):
    low, high = sorted(rows[0]['scales'])
    header = ['shape', f'x{low}: file', f'x{high}: file']
    for command in HOSTILE_COMMANDS:
        header += [f'{command[0]} x{low}', f'{command[0]} x{high}', f'x{high} / x{low}']
    out = []
    for r in rows:
        a, b = r['scales'][low], r['scales'][high]
        cells = [r['shape'], f"{a['bytes'] / 1024:.1f} KB", f"{b['bytes'] / 1024:.1f} KB"]
        for command in HOSTILE_COMMANDS:
            ma, mb = a[command[0]], b[command[0]]
            if 'error' in ma or 'error' in mb:
                cells += ['FAILED', 'FAILED', '-']
                continue

            def cell(m):
                return (f'{m["wall"]:.2f} s, {fmt_size(m["rss"] * 1024)}'
                        + (' (refused)' if m.get('rc') else ''))
            cells += [cell(ma), cell(mb), f'{mb["wall"] / ma["wall"]:.1f}']
        out.append(cells)
    return header, out


def print_table(header, rows, markdown, n_right):
    """n_right: the first n_right columns are numbers (right-aligned), the rest verdicts."""
    if markdown:
        print('| ' + ' | '.join(header) + ' |')
        print('|' + '|'.join('---:' if i < n_right else ':---:' for i in range(len(header))) + '|')
        for row in rows:
            print('| ' + ' | '.join(row) + ' |')
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print('  '.join(h.rjust(w) for h, w in zip(header, widths)))
    print('  '.join('-' * w for w in widths))
    for row in rows:
        print('  '.join(c.rjust(w) for c, w in zip(row, widths)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--memsnap', required=True, help='path to the memsnap binary')
    ap.add_argument('--sizes', default='100k,1m,10m',
                    help='comma-separated event counts (default 100k,1m,5m)')
    ap.add_argument('--work', default=os.path.join(ROOT, 'build', 'bench'),
                    help='where snapshots are generated and cached (default build/bench)')
    ap.add_argument('--keep', action='store_true',
                    help='keep the generated snapshots and plot HTML (later runs reuse the '
                         'snapshots); default: delete them at the end')
    ap.add_argument('--markdown', action='store_true', help='print GitHub markdown tables')
    ap.add_argument('--python-runs', type=int, default=2, choices=(1, 2),
                    help='Python loads per file, min taken (default 2; 1 if the first takes '
                         f'over {PY_SECOND_RUN_UNDER_S:g} s)')
    ap.add_argument('--rss', choices=('auto', 'time', 'wait4'), default='auto',
                    help='peak RSS method: GNU /usr/bin/time if present (auto), or os.wait4')
    ap.add_argument('--many-steps', type=int, default=100_000,
                    help='ProfilerStep windows in the many-steps case (sequential and '
                         'overlapping; default 100000; 0 skips it)')
    ap.add_argument('--ranks', type=int, default=64,
                    help='rank files for the ranks case (default 64; 0 skips it)')
    ap.add_argument('--rank-events', type=parse_size, default=100_000,
                    help='trace entries per rank file (default 100k)')
    ap.add_argument('--no-hostile', action='store_true',
                    help='leave out the hostile shapes (tests/gen/make_hostile.py)')
    ap.add_argument('--hostile-scales', default='1,8',
                    help='the two scales of the hostile shapes (default 1,8)')
    ap.add_argument('--no-compressed', action='store_true',
                    help='leave out the .gz / .zst parse of each size')
    ap.add_argument('--no-browser', action='store_true',
                    help='skip the time-to-ready of the plot page in headless Chromium')
    ap.add_argument('--replicate-from', metavar='PATH', default=None,
                    help='the real snapshot the replicated shape repeats (make_snapshot.py '
                         '--replicate; default: ../shared/fixtures/real/'
                         f'{os.path.basename(REPLICATE_FIXTURE)}, rows skipped when absent)')
    ap.add_argument('--no-replicated', action='store_true',
                    help='leave out the replicated shape (its parse rows and commands rows)')
    ap.add_argument('--replicate-min', type=parse_size, default=REPLICATE_MIN_EVENTS,
                    help='replicated files for the sizes of at least this many events '
                         f'(default {size_label(REPLICATE_MIN_EVENTS)})')
    ap.add_argument('--commands-min', type=parse_size, default=COMMANDS_MIN_EVENTS,
                    help='the commands table for the sizes of at least this many events '
                         f'(default {size_label(COMMANDS_MIN_EVENTS)})')
    args = ap.parse_args(argv)

    sizes = [parse_size(s) for s in args.sizes.split(',') if s.strip()]
    memsnap = os.path.abspath(args.memsnap)
    if not (os.path.isfile(memsnap) and os.access(memsnap, os.X_OK)):
        sys.exit(f'run_bench: {args.memsnap} is not an executable (run `make build` first)')
    runner = Runner(args.rss)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    browser_skip = 'disabled by --no-browser' if args.no_browser else browser_missing()

    wait_for_generator()
    gen_hash = file_sha256(GENERATOR)
    fixture = None          # the replicated shape's source, when there is one
    fixture_skip = None     # why its rows are skipped
    if args.no_replicated:
        pass
    elif args.replicate_from:
        fixture = os.path.abspath(args.replicate_from)
        if not os.path.isfile(fixture):
            sys.exit(f'run_bench: --replicate-from {args.replicate_from}: no such file')
    elif os.path.isfile(REPLICATE_FIXTURE):
        fixture = REPLICATE_FIXTURE
    else:
        fixture_skip = f'no fixture: {REPLICATE_FIXTURE} is absent'

    log(f'machine: {machine_line()}')
    log(f'memsnap: {memsnap}; python: {sys.executable} {platform.python_version()}')
    log(f'work dir: {work}')
    log(runner.describe())
    if browser_skip:
        log(f'Chromium step: {browser_skip}')
    load_start = loadavg()
    log(f'load average: {load_start} (other work on the machine skews the timings)')
    log()

    # Generation first (not measured), then measurement of each size.
    results = []
    files = []
    bytes_per_event = BYTES_PER_EVENT_GUESS
    for events in sorted(sizes):
        label = size_label(events)
        got_paths = {}
        for seed in (SEED, SEED_B):
            which = 'A' if seed == SEED else 'B'
            cached = snapshot_path(work, events, seed)
            expected = events * bytes_per_event
            free = shutil.disk_usage(work).free
            if not os.path.exists(cached) and free < DISK_FACTOR * expected:
                msg = (f'skipped: {fmt_size(free)} free in {work}, need {DISK_FACTOR}x the '
                       f'expected {fmt_size(expected)}')
                log(f'{label} {which}: {msg}')
                got_paths[seed] = msg
                break   # without A nothing is measured; without B, no compare
            path, fresh, secs, rss = generate(events, work, runner, gen_hash, seed)
            size = os.path.getsize(path)
            bytes_per_event = size / events * 1.1   # calibrate for the next file
            files.append(path)
            if fresh:
                log(f'{label} {which}: generated {fmt_size(size)} in {secs:.1f} s '
                    f'(generator peak RSS {rss / 1024:.0f} MiB; not part of the measurement)')
            else:
                log(f'{label} {which}: reusing {path} ({fmt_size(size)}, same parameters)')
            got_paths[seed] = path
        a, b = got_paths.get(SEED), got_paths.get(SEED_B)
        if a is None or not os.path.exists(a):
            results.append({'events': events, 'skip': a or 'skipped'})
            continue
        pending = {'events': events, 'pending': a, 'pending_b': None}
        if b is not None and os.path.exists(b):
            pending['pending_b'] = b
        else:
            pending['b_skip'] = f'file B {b}' if b else 'file B skipped'
        results.append(pending)
    log()

    # The replicated shape: a real snapshot repeated to N entries.
    rep_results = []
    rep_sizes = [] if args.no_replicated else [n for n in sorted(sizes) if n >= args.replicate_min]
    fixture_exact = None
    if rep_sizes and fixture:
        fixture_hash = file_sha256(fixture)
        # The replicated files must keep the fixture's allocator-history exactness.
        fixture_exact = check_output(memsnap, fixture, -1, False)[1].get('exact')
        log(f'replicated shape: {fixture} (allocator history '
            f'{"exact" if fixture_exact else "not exact"} on the fixture itself)')
        rep_bytes_per_event = REPLICATED_BYTES_PER_EVENT_GUESS
        for events in rep_sizes:
            label = size_label(events)
            expected = events * rep_bytes_per_event
            free = shutil.disk_usage(work).free
            if not os.path.exists(replicated_path(work, events)) and free < DISK_FACTOR * expected:
                log(f'{label} replicated: skipped: {fmt_size(free)} free in {work}, need '
                    f'{DISK_FACTOR}x the expected {fmt_size(expected)}')
                rep_results.append({'events': events, 'shape': 'replicated', 'skip': 'disk',
                                    'skip_cell': 'skipped (disk)'})
                continue
            path, fresh, secs, rss, manifest = generate_replicated(events, work, runner, gen_hash,
                                                                   fixture, fixture_hash)
            size = os.path.getsize(path)
            rep_bytes_per_event = size / events * 1.1
            files.append(path)
            if fresh:
                log(f'{label} replicated: generated {fmt_size(size)} in {secs:.1f} s '
                    f'(generator peak RSS {rss / 1024:.0f} MiB; not part of the measurement)')
            else:
                log(f'{label} replicated: reusing {path} ({fmt_size(size)}, same parameters)')
            rep_results.append({'events': events, 'shape': 'replicated', 'pending': path,
                                'manifest': manifest or {}, 'gen_wall': secs if fresh else None,
                                'gen_rss': rss if fresh else None})
    elif rep_sizes:
        log(f'replicated shape skipped: {fixture_skip}')
        rep_results = [{'events': n, 'shape': 'replicated', 'skip': fixture_skip,
                        'skip_cell': 'skipped (no fixture)'} for n in rep_sizes]
    log()

    for i, r in enumerate(results):
        if 'pending' not in r:
            continue
        log(f'measuring {size_label(r["events"])} ({fmt_size(os.path.getsize(r["pending"]))})')
        m = measure(r['pending'], r['events'], memsnap, runner, args.python_runs)
        if not args.no_compressed:
            m['compressed'] = measure_compressed(r['pending'], memsnap, runner, args.python_runs)
            files += [c['path'] for c in m['compressed'].values() if 'path' in c]
        if 'b_skip' in r:
            m['b_skip'] = r['b_skip']
        results[i] = measure_more(m, r['pending_b'], memsnap, runner, args.python_runs, work,
                                  browser_skip)
    log()
    for i, r in enumerate(rep_results):
        if 'pending' not in r:
            continue
        log(f'measuring {size_label(r["events"])} replicated ({fmt_size(os.path.getsize(r["pending"]))})')
        m = measure(r['pending'], r['events'], memsnap, runner, args.python_runs, fixture_exact)
        m.update(shape='replicated', manifest=r['manifest'], gen_wall=r['gen_wall'],
                 gen_rss=r['gen_rss'])
        rep_results[i] = m
    log()

    # The commands table: every command on both shapes, from --commands-min up.
    command_rows = []
    for r in results + rep_results:
        if r['events'] < args.commands_min:
            continue
        shape = r.get('shape', 'generated')
        if 'skip' in r:
            command_rows.append({'shape': shape, 'events': r['events'], 'command': '',
                                 'skip': r.get('skip_cell', 'skipped')})
            continue
        log(f'commands on {size_label(r["events"])} {shape}')
        command_rows += measure_commands(r, shape, memsnap, runner, work)
    log()
    many_steps = measure_many_steps(memsnap, runner, work, args.many_steps) if args.many_steps else []
    log()
    ranks = measure_ranks(memsnap, runner, work, args.ranks, args.rank_events) if args.ranks else None
    log()
    hostile_scales = sorted({parse_size(n) for n in args.hostile_scales.split(',') if n.strip()})
    if len(hostile_scales) != 2:
        sys.exit(f'run_bench: --hostile-scales {args.hostile_scales}: two scales, as 1,8')
    hostile = [] if args.no_hostile else measure_hostile(memsnap, runner, work, hostile_scales)
    log()

    if not args.keep:
        leftovers = [p for path in files for p in (path, path + '.params')]
        leftovers += [r['path'] for r in many_steps]
        leftovers += [r['html_path'] for r in results if 'html_path' in r]
        leftovers += [p for r in results + rep_results for p in r.get('extra_paths', [])]
        if ranks:
            shutil.rmtree(ranks['path'], ignore_errors=True)
        for p in leftovers:
            if os.path.exists(p):
                os.remove(p)

    # Fixed costs inside both wall times, for reading the small sizes.
    startup = []
    for name, argv in (('python3 -c pass', [sys.executable, '-c', 'pass']),
                       ('memsnap --version', [memsnap, '--version'])):
        ws = [runner.run(argv)[1] for _ in range(3)]
        startup.append(f'{name} {min(ws) * 1000:.0f} ms')

    print(f'memsnap benchmark, {datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")}')
    print(f'machine: {machine_line()}')
    print(f'python: {platform.python_version()}; snapshots: make_snapshot.py --stacks all '
          f'--steps events/{EVENTS_PER_STEP} --protocol {PROTOCOL}, A --seed {SEED}, '
          f'B --seed {SEED_B}')
    if fixture and rep_sizes:
        print(f'replicated shape: make_snapshot.py --replicate {os.path.basename(fixture)} '
              f'--events N (a real snapshot\'s trace repeated to N entries, each repetition in '
              f'its own address range and closed out but the last, whose dump the file has; '
              f'allocator history on the fixture: '
              f'{"exact" if fixture_exact else "not exact"})')
    elif rep_sizes:
        print(f'replicated shape: skipped ({fixture_skip})')
    print(f'memsnap: median of {MEMSNAP_RUNS} runs of each command, output to /dev/null '
          f'(page cache warm); python: min of up to {args.python_runs} pickle.load runs; '
          f'{runner.describe()}')
    print(f'load average (1/5/15 min) at start: {load_start}, at end: {loadavg()} '
          f'({os.cpu_count()} cores; a busy machine skews the timings)')
    print(f'process start-up, included in the wall times: {", ".join(startup)}')
    print()

    all_missed = []
    both = sorted(results + rep_results,
                  key=lambda r: (r['events'], r.get('shape', 'generated') != 'generated'))
    header, rows, missed = table_rows(both)
    all_missed += missed
    print('parse: `memsnap parse A --json` vs `pickle.load(A)`; shapes: generated (make_snapshot.py '
          '--sites) and replicated (a real snapshot repeated); cat = `cat A > /dev/null`, the '
          'read limit (page cache warm), memsnap / cat = how far parse is from it')
    print()
    print_table(header, rows, args.markdown, 10)
    print()
    header, rows = compressed_rows(results)
    if rows:
        print('compressed input: `memsnap parse A.gz --json` and `A.zst` (inflated on a second '
              'thread while the VM reads) vs `pickle.load(gzip.open(A.gz))`; plain parse = the '
              'parse table\'s memsnap wall for A')
        print()
        print_table(header, rows, args.markdown, len(header) - 2)
        print()
    header, rows, missed = compare_rows(results)
    all_missed += missed
    print('compare / replay-step: `memsnap compare A B --json`, '
          '`memsnap replay-step --all-steps A --json`; python load A + B = the two single-file '
          'pickle.load times (A from the parse table, B measured the same way), summed; '
          's / 1M events = wall / (events of the files read) * 1e6')
    print()
    print_table(header, rows, args.markdown, len(header) - 1)
    print()
    header, rows, missed = events_rows(results)
    all_missed += missed
    print('events: `memsnap events A --json` (each stack and frame written once, in tables); '
          'x parse RSS = its peak RSS / parse\'s on the same file')
    print()
    print_table(header, rows, args.markdown, len(header) - 2)
    print()
    header, rows, missed = plot_rows(results)
    all_missed += missed
    print(f'plot: `memsnap plot A -o A.html`; Chromium ready = page.goto(file://...) until '
          f'document.body.dataset.ready, headless Chromium, median of {BROWSER_RUNS} page loads '
          f'(fresh context each, browser start not counted); drill-down: what a click reads '
          f'(every allocation\'s lifetime, or live by source at moments past plot '
          f'--max-lifetimes); x parse RSS = plot\'s peak RSS / parse\'s on the same file')
    print()
    print_table(header, rows, args.markdown, len(header) - 3)
    print()
    for r in results:
        label = size_label(r['events'])
        if r.get('skip'):
            print(f'{label}: {r["skip"]}')
        if r.get('b_skip'):
            print(f'{label}: {r["b_skip"]}; no compare')
        if r.get('py_skip'):
            print(f'{label}: python load of A {r["py_skip"]}')
        if r.get('py_b', {}).get('skip'):
            print(f'{label}: python load of B {r["py_b"]["skip"]}')
        if r.get('check'):
            print(f'{label}: memsnap parse reports {r["check"]}')
        if r.get('compare_check'):
            print(f'{label}: memsnap compare reports {r["compare_check"]}')
        if r.get('replay_check'):
            print(f'{label}: memsnap replay-step --all-steps reports {r["replay_check"]}')
        if r.get('memsnap_error'):
            print(f'{label}: memsnap parse FAILED: {r["memsnap_error"]}')
        if r.get('py_error'):
            print(f'{label}: python load of A FAILED: {r["py_error"]}')
        if r.get('py_b', {}).get('error'):
            print(f'{label}: python load of B FAILED: {r["py_b"]["error"]}')
        for key, name in (('compare', 'compare'), ('replay', 'replay-step'), ('plot', 'plot')):
            if r.get(key, {}).get('error'):
                print(f'{label}: memsnap {name} FAILED: {r[key]["error"]}')
        if r.get('ready', {}).get('error'):
            print(f'{label}: page in Chromium FAILED: {r["ready"]["error"]}')
    for r in rep_results:
        label = f'{size_label(r["events"])} replicated'
        m = r.get('manifest') or {}
        if m:
            first = m.get('first_repetition_entries')
            several = (m.get('repetitions') or 0) > 1
            closeout = m.get('closeout_entries', 0) if several else 0
            opening = m.get('opening_entries', 0) if several else 0
            whole = opening + m.get('fixture_entries', 0) + closeout
            cut = f', the first cut to its last {first:,}' if first and first != whole else ''
            closed = (f', each but the last closed out by {closeout:,} more' if closeout else '')
            closed += (f', each but the first opened by {opening:,} more' if opening else '')
            gen = (f'; generated in {r["gen_wall"]:.1f} s (peak RSS {r["gen_rss"] / 1024:.0f} MiB)'
                   if r.get('gen_wall') is not None else '; cached')
            print(f'{label}: {m.get("repetitions")} repetitions of {m.get("fixture_entries", 0):,} '
                  f'entries{closed}{cut}, {m.get("segments", 0):,} segments in the dump{gen}')
        if r.get('py_skip'):
            print(f'{label}: python load {r["py_skip"]}')
        if r.get('check'):
            print(f'{label}: memsnap parse reports {r["check"]}')
        if r.get('memsnap_error'):
            print(f'{label}: memsnap parse FAILED: {r["memsnap_error"]}')
        if r.get('py_error'):
            print(f'{label}: python load FAILED: {r["py_error"]}')
    if browser_skip:
        print(f'Chromium ready column not measured: {browser_skip}')
    if command_rows:
        header, rows, missed = commands_rows(command_rows)
        all_missed += missed
        print()
        print(f'commands: every command on each shape, from {size_label(args.commands_min)} events; '
              f'wall = median of {MEMSNAP_RUNS}, peak RSS x the bytes read (compare reads two '
              'files); s / 1M entries = wall / entries read * 1e6, to read the growth from one size '
              'to the next; rows taken from the tables above say so')
        print()
        print_table(header, rows, args.markdown, len(header) - 1)
    if many_steps:
        print()
        print('many profiler steps (time linear in events + steps, however the windows overlap):')
        print_table(['windows', 'events', 'file', 'replay-step --all-steps', 'compare A A', 'plot'],
                    many_steps_rows(many_steps), args.markdown, 6)
        for r in many_steps:
            for key in ('replay', 'compare', 'plot'):
                if 'error' in r[key]:
                    print(f'{r["kind"]} {key} FAILED: {r[key]["error"]}')
    if ranks:
        print()
        print('many ranks: `memsnap ranks -j N DIR` over generated rank files (make_ranks.py, 4 stages, one '
              'outlier); wall = median of 3, RSS = peak; map = `summarize -j 2 -o`, reduce = `ranks` over '
              'the summaries alone')
        print_table(['files', 'on disk', 'parse RSS (largest)', 'ranks -j 1', 'ranks -j 2', '-j 2 RSS / parse',
                     'map (summarize)', 'summary size', 'reduce'], ranks_rows(ranks), args.markdown, 9)
    if hostile:
        print()
        print(f'hostile shapes: tests/gen/make_hostile.py at scales {hostile_scales[0]} and '
              f'{hostile_scales[1]} (gzipped), median of {MEMSNAP_RUNS}; the last column of each '
              f'command is the time\'s growth, {hostile_scales[1] // hostile_scales[0]} or less '
              f'where time is linear (start-up and the fixed costs weigh most at the small scale)')
        header, rows = hostile_rows(hostile)
        print_table(header, rows, args.markdown, len(header))
    if all_missed:
        print('MISSED targets:')
        for m in all_missed:
            print(f'  MISSED {m}')
    else:
        print('all measured targets hold')
    return 0


if __name__ == '__main__':
    sys.exit(main())
