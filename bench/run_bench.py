#!/usr/bin/env python3
"""memsnap benchmark: `memsnap parse --json` against CPython's pickle.load.

Generates synthetic snapshots with tests/gen/make_snapshot.py (deep C++
stacks, profiler steps), then, for each file and in the same run, measures

  * `memsnap parse FILE --json > /dev/null`: wall time (median of 3 runs) and
    peak RSS;
  * `python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" FILE`:
    wall time (min of 1-2 runs) and peak RSS;

and checks the targets of DESIGN.md (Performance): parse >= 30x faster than the
Python load, memsnap peak RSS <= 1.5x the file size. A benchmark, not a test:
it exits 0 when a target is missed, but says MISSED.

    python3 bench/run_bench.py --memsnap build/memsnap
        [--sizes 100k,1m,5m] [--work DIR] [--keep] [--markdown]

Standard library only. See bench/README.md.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = os.path.join(ROOT, 'tests', 'gen', 'make_snapshot.py')

EVENTS_PER_STEP = 660           # 1M events -> ~1,500 profiler steps
SEED = 1
PROTOCOL = 4
BYTES_PER_EVENT_GUESS = 120     # --stacks all, protocol 4 (measured ~104)
DISK_FACTOR = 3                 # need 3x the expected file size free
PY_RSS_FACTOR = 20              # pickle.load needs up to ~20x the file size
PY_MEM_FRACTION = 0.8           # ... and may use 80% of MemAvailable
MEMSNAP_RUNS = 3
PY_SECOND_RUN_UNDER_S = 60.0    # run the Python load a second time if fast
SPEED_TARGET = 30.0
RSS_TARGET = 1.5

MiB = 1 << 20
GiB = 1 << 30


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


def gen_args(events):
    steps = max(1, round(events / EVENTS_PER_STEP))
    return ['--events', str(events), '--protocol', str(PROTOCOL), '--stacks', 'all',
            '--steps', str(steps), '--devices', '1', '--seed', str(SEED)]


def generate(events, work, runner, gen_hash):
    """Returns (path, generated: bool, seconds, gen RSS KiB) or None if skipped."""
    path = os.path.join(work, f'snapshot-{size_label(events)}.pickle')
    sidecar = path + '.params'
    args = gen_args(events)
    params = {'generator_args': args, 'generator_sha256': gen_hash}
    if os.path.exists(path) and os.path.exists(sidecar):
        try:
            with open(sidecar) as f:
                if json.load(f) == params:
                    return path, False, 0.0, 0
        except (OSError, ValueError):
            pass
    for stale in (path, sidecar):
        if os.path.exists(stale):
            os.remove(stale)
    tmp = path + '.tmp'
    argv = [sys.executable, GENERATOR, '--out', tmp] + args
    log(f'generating {path}: make_snapshot.py {" ".join(args)}')
    rc, wall, rss, _, err = runner.run(argv)
    if rc != 0:
        if os.path.exists(tmp):
            os.remove(tmp)
        sys.exit(f'run_bench: generator failed (exit {rc}): {" ".join(argv)}\n{err}')
    os.replace(tmp, path)
    with open(sidecar, 'w') as f:
        json.dump(params, f, indent=1)
        f.write('\n')
    return path, True, wall, rss


# ---------------------------------------------------------------------------
# Measurement


def check_output(memsnap, path, events):
    """One untimed run whose JSON is read by a child (to keep this process small)."""
    code = r'''
import json, subprocess, sys
p = subprocess.run([sys.argv[1], 'parse', sys.argv[2], '--json'], capture_output=True)
if p.returncode != 0:
    print('exit %d: %s' % (p.returncode, p.stderr.decode('utf-8', 'replace').strip()[-400:]))
    sys.exit(0)
try:
    d = json.loads(p.stdout)
except ValueError as e:
    print('stdout is not JSON: %s' % e)
    sys.exit(0)
dt = d.get('device_traces') or {}
n = dt.get('event_count')
steps = d.get('profiler_steps') or {}
inter = d.get('interned') or {}
problems = []
if n != int(sys.argv[3]):
    problems.append('event_count %r, expected %s' % (n, sys.argv[3]))
if d.get('warnings'):
    problems.append('warnings: %s' % str(d['warnings'])[:200])
anom = {k: v for k, v in (d.get('anomalies') or {}).items() if v}
if anom:
    problems.append('anomalies: %s' % anom)
print('%s events, %d profiler steps, %s frames / %s stacks interned%s' % (
    n, len(steps), inter.get('frames'), inter.get('stacks'),
    ('; ODD: ' + '; '.join(problems)) if problems else ''))
'''
    p = subprocess.run([sys.executable, '-c', code, memsnap, path, str(events)],
                       capture_output=True, text=True)
    return (p.stdout.strip() or p.stderr.strip()[-400:])


def measure(path, events, memsnap, runner, py_runs_max):
    size = os.path.getsize(path)
    r = {'events': events, 'path': path, 'size': size}

    walls, rsss, floors = [], [], []
    for i in range(MEMSNAP_RUNS):
        rc, wall, rss, at_floor, err = runner.run([memsnap, 'parse', path, '--json'])
        if rc != 0:
            r['memsnap_error'] = f'exit {rc}: {err.strip()[-600:]}'
            log(f'  memsnap run {i + 1}: FAILED, {r["memsnap_error"]}')
            break
        walls.append(wall)
        rsss.append(rss)
        floors.append(at_floor)
        log(f'  memsnap run {i + 1}/{MEMSNAP_RUNS}: {wall:.3f} s, {rss / 1024:.1f} MiB'
            + (' (first run: warms the page cache)' if i == 0 else ''))
    if walls:
        r['memsnap_walls'] = walls
        r['memsnap_wall'] = statistics.median(walls)
        r['memsnap_rss'] = max(rsss)
        r['memsnap_rss_floor'] = all(floors)
    if 'memsnap_error' not in r:
        r['check'] = check_output(memsnap, path, events)
        log(f'  memsnap output: {r["check"]}')

    avail = meminfo_kib('MemAvailable')
    need = PY_RSS_FACTOR * size
    if avail is not None and need > PY_MEM_FRACTION * avail * 1024:
        r['py_skip'] = (f'skipped: est. {need / GiB:.1f} GiB (20x file) > 80% of '
                        f'MemAvailable {avail / (1 << 20):.1f} GiB')
        log(f'  python load {r["py_skip"]}')
        return r
    code = "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))"
    pw, pr = [], []
    for i in range(py_runs_max):
        rc, wall, rss, at_floor, err = runner.run([sys.executable, '-c', code, path])
        if rc != 0:
            r['py_error'] = f'exit {rc}: {err.strip()[-400:]}'
            log(f'  python load: FAILED, {r["py_error"]}')
            break
        pw.append(wall)
        pr.append(rss)
        r['py_rss_floor'] = at_floor
        log(f'  python load run {i + 1}: {wall:.2f} s, {rss / 1024:.1f} MiB')
        if wall > PY_SECOND_RUN_UNDER_S:
            break
    if pw:
        r['py_wall'] = min(pw)
        r['py_rss'] = min(pr)
    return r


# ---------------------------------------------------------------------------
# Report


def fmt_size(n):
    if n >= GiB:
        return f'{n / GiB:.2f} GiB'
    return f'{n / MiB:.1f} MiB'


def table_rows(results):
    header = ['events', 'file', 'memsnap wall (s)', 'memsnap peak RSS', 'python load (s)',
              'python peak RSS', 'speedup', f'>= {SPEED_TARGET:g}x faster',
              f'RSS <= {RSS_TARGET:g}x file']
    rows = []
    missed = []
    for r in results:
        label = size_label(r['events'])
        if 'skip' in r:
            rows.append([label, 'skipped (disk)', '-', '-', '-', '-', '-', '-', '-'])
            continue
        size = r['size']
        row = [label, fmt_size(size)]
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
        if 'memsnap_wall' in r and 'py_wall' in r:
            speed = r['py_wall'] / r['memsnap_wall']
            row.append(f'{speed:.1f}x')
            ok = speed >= SPEED_TARGET
            row.append('ok' if ok else 'MISSED')
            if not ok:
                missed.append(f'{label}: speedup {speed:.1f}x < {SPEED_TARGET:g}x')
        else:
            row += ['-', 'n/a' if 'memsnap_wall' in r else 'MISSED (memsnap failed)']
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


def print_table(header, rows, markdown):
    if markdown:
        print('| ' + ' | '.join(header) + ' |')
        print('|' + '|'.join('---:' if i < 7 else ':---:' for i in range(len(header))) + '|')
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
    ap.add_argument('--sizes', default='100k,1m,5m',
                    help='comma-separated event counts (default 100k,1m,5m)')
    ap.add_argument('--work', default=os.path.join(ROOT, 'build', 'bench'),
                    help='where snapshots are generated and cached (default build/bench)')
    ap.add_argument('--keep', action='store_true',
                    help='keep the generated snapshots (later runs reuse them); '
                         'default: delete them at the end')
    ap.add_argument('--markdown', action='store_true', help='print a GitHub markdown table')
    ap.add_argument('--python-runs', type=int, default=2, choices=(1, 2),
                    help='Python loads per file, min taken (default 2; 1 if the first takes '
                         f'over {PY_SECOND_RUN_UNDER_S:g} s)')
    ap.add_argument('--rss', choices=('auto', 'time', 'wait4'), default='auto',
                    help='peak RSS method: GNU /usr/bin/time if present (auto), or os.wait4')
    args = ap.parse_args(argv)

    sizes = [parse_size(s) for s in args.sizes.split(',') if s.strip()]
    memsnap = os.path.abspath(args.memsnap)
    if not (os.path.isfile(memsnap) and os.access(memsnap, os.X_OK)):
        sys.exit(f'run_bench: {args.memsnap} is not an executable (run `make build` first)')
    runner = Runner(args.rss)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)

    wait_for_generator()
    gen_hash = file_sha256(GENERATOR)

    log(f'machine: {machine_line()}')
    log(f'memsnap: {memsnap}; python: {sys.executable} {platform.python_version()}')
    log(f'work dir: {work}')
    log(runner.describe())
    load_start = loadavg()
    log(f'load average: {load_start} (other work on the machine skews the timings)')
    log()

    # Generation first (not measured), then measurement of each file.
    results = []
    files = []
    bytes_per_event = BYTES_PER_EVENT_GUESS
    generated_paths = []
    for events in sorted(sizes):
        label = size_label(events)
        cached = os.path.join(work, f'snapshot-{label}.pickle')
        expected = events * bytes_per_event
        free = shutil.disk_usage(work).free
        if not os.path.exists(cached) and free < DISK_FACTOR * expected:
            msg = (f'skipped: {fmt_size(free)} free in {work}, need {DISK_FACTOR}x the '
                   f'expected {fmt_size(expected)}')
            log(f'{label}: {msg}')
            results.append({'events': events, 'skip': msg})
            continue
        got = generate(events, work, runner, gen_hash)
        path, fresh, secs, rss = got
        size = os.path.getsize(path)
        bytes_per_event = size / events * 1.1   # calibrate for the next size
        if fresh:
            generated_paths.append(path)
            log(f'{label}: generated {fmt_size(size)} in {secs:.1f} s '
                f'(generator peak RSS {rss / 1024:.0f} MiB; not part of the measurement)')
        else:
            log(f'{label}: reusing {path} ({fmt_size(size)}, same parameters)')
        files.append((events, path))
        results.append({'events': events, 'pending': path})
    log()

    for i, r in enumerate(results):
        if 'pending' not in r:
            continue
        log(f'measuring {size_label(r["events"])} ({fmt_size(os.path.getsize(r["pending"]))})')
        results[i] = measure(r['pending'], r['events'], memsnap, runner, args.python_runs)
    log()

    if not args.keep:
        for _, path in files:
            for p in (path, path + '.params'):
                if os.path.exists(p):
                    os.remove(p)

    # Fixed costs inside both wall times, for reading the small sizes.
    startup = []
    for name, argv in (('python3 -c pass', [sys.executable, '-c', 'pass']),
                       ('memsnap --version', [memsnap, '--version'])):
        ws = [runner.run(argv)[1] for _ in range(3)]
        startup.append(f'{name} {min(ws) * 1000:.0f} ms')

    header, rows, missed = table_rows(results)
    print(f'memsnap benchmark, {datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")}')
    print(f'machine: {machine_line()}')
    print(f'python: {platform.python_version()}; snapshots: make_snapshot.py --stacks all '
          f'--steps events/{EVENTS_PER_STEP} --protocol {PROTOCOL} --seed {SEED}')
    print(f'memsnap: median of {MEMSNAP_RUNS} runs of `parse FILE --json > /dev/null` '
          f'(page cache warm); python: min of up to {args.python_runs} pickle.load runs; '
          f'{runner.describe()}')
    print(f'load average (1/5/15 min) at start: {load_start}, at end: {loadavg()} '
          f'({os.cpu_count()} cores; a busy machine skews the timings)')
    print(f'process start-up, included in the wall times: {", ".join(startup)}')
    print()
    print_table(header, rows, args.markdown)
    print()
    for r in results:
        if r.get('skip'):
            print(f'{size_label(r["events"])}: {r["skip"]}')
        if r.get('py_skip'):
            print(f'{size_label(r["events"])}: python load {r["py_skip"]}')
        if r.get('check'):
            print(f'{size_label(r["events"])}: memsnap reports {r["check"]}')
        if r.get('memsnap_error'):
            print(f'{size_label(r["events"])}: memsnap FAILED: {r["memsnap_error"]}')
        if r.get('py_error'):
            print(f'{size_label(r["events"])}: python load FAILED: {r["py_error"]}')
    if missed:
        print('MISSED targets:')
        for m in missed:
            print(f'  MISSED {m}')
    else:
        print('all measured targets hold')
    return 0


if __name__ == '__main__':
    sys.exit(main())
