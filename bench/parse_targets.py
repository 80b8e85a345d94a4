#!/usr/bin/env python3
"""The parse targets of issue 41, measured as pairs: `memsnap parse` and what it is held to, run
one after the other, N times, medians.

On the replicated real shape (`make_snapshot.py --replicate`, the fixture run_bench.py uses):

  * 1M entries: `memsnap parse FILE --json` against `pickle.load` of FILE in a
    fresh interpreter (target: at least 30x), against `cat FILE` into a pipe
    (target: within 10x), and memsnap's peak RSS against the file's size
    (target: at most 1.0x);
  * the same 1M file gzipped (`gzip -1`): `memsnap parse FILE.gz` against
    `gzip -dc FILE.gz` into a pipe plus the plain parse (target: within 1.2x);
  * 10M entries: `memsnap parse` against ten times the 1M parse (target:
    within 1.1x, i.e. linear).

Each pair is interleaved (run a, run b, run a, ...) so that a machine's
changing load falls on both sides alike; the ratios are the numbers to read
on a shared machine. A benchmark, not a test: it exits 0 and says MISSED when
a target is missed.

    python3 bench/parse_targets.py --memsnap build/memsnap [--runs 5] [--work build/bench]
        [--replicate-from PATH] [--events 1m] [--no-10m] [--keep]

(--events sets the small file's entries, the large one has ten times as many;
the targets are the issue's at 1M.)

Files are generated into --work (cached by run_bench.py's rules: a .params
sidecar, regenerated when the generator or the fixture changes) and deleted at
the end unless --keep. Standard library only.
"""

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402  (the generator, the runner and its RSS rules)

CAT_TO_PIPE = 'cat "$1" | cat > /dev/null'
GUNZIP_TO_PIPE = 'gzip -dc "$1" | cat > /dev/null'
TARGETS = {'pickle': 30.0, 'cat': 10.0, 'rss': 1.0, 'gz': 1.2, 'linear': 1.1}


def interleaved(runner, commands, runs):
    """Runs each argv of `commands` in turn, `runs` rounds (after one warm-up
    round that is not counted). Returns, per command, the median wall time and
    the largest peak RSS (KiB)."""
    walls = [[] for _ in commands]
    rss = [0 for _ in commands]
    for round_ in range(runs + 1):
        for i, argv in enumerate(commands):
            rc, wall, peak, _, err = runner.run(argv)
            if rc != 0:
                sys.exit(f'parse_targets: {argv[0]} exited {rc}: {err.strip()[-400:]}')
            if round_ > 0:
                walls[i].append(wall)
                rss[i] = max(rss[i], peak)
    return [(statistics.median(w), r) for w, r in zip(walls, rss)]


def verdict(value, target, at_most):
    ok = value <= target if at_most else value >= target
    return 'met' if ok else 'MISSED'


def replicated(events, work, runner, fixture):
    gen_hash = run_bench.file_sha256(run_bench.GENERATOR)
    return run_bench.generate_replicated(events, work, runner, gen_hash, fixture,
                                         run_bench.file_sha256(fixture))[0]


def gzipped(path):
    out = path + '.gz1'
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(path):
        with open(out + '.tmp', 'wb') as f:
            subprocess.run(['gzip', '-1', '-c', path], stdout=f, check=True)
        os.replace(out + '.tmp', out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--memsnap', required=True)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--work', default=os.path.join(run_bench.ROOT, 'build', 'bench'))
    ap.add_argument('--replicate-from', default=run_bench.REPLICATE_FIXTURE)
    ap.add_argument('--events', type=run_bench.parse_size, default=1_000_000,
                    help='entries of the small file (default 1m); the large one has 10x')
    ap.add_argument('--no-10m', action='store_true', help='leave out the large file')
    ap.add_argument('--keep', action='store_true', help='keep the generated files')
    args = ap.parse_args()
    if not os.path.exists(args.replicate_from):
        sys.exit(f'parse_targets: no fixture at {args.replicate_from} (--replicate-from)')
    os.makedirs(args.work, exist_ok=True)
    runner = run_bench.Runner('auto')
    memsnap = os.path.abspath(args.memsnap)
    parse = lambda path: [memsnap, 'parse', path, '--json']  # noqa: E731
    print(run_bench.machine_line())
    made = []

    small = run_bench.size_label(args.events)
    large = run_bench.size_label(10 * args.events)
    one = replicated(args.events, args.work, runner, args.replicate_from)
    made.append(one)
    size = os.path.getsize(one)
    (ms, ms_rss), (py, _), (cat, _) = interleaved(runner, [
        parse(one),
        [sys.executable, '-c', run_bench.PICKLE_LOAD, one],
        ['sh', '-c', CAT_TO_PIPE, 'sh', one],
    ], args.runs)
    gz = gzipped(one)
    made.append(gz)
    (ms_gz, gz_rss), (gunzip, _), (ms_plain, _) = interleaved(runner, [
        parse(gz), ['sh', '-c', GUNZIP_TO_PIPE, 'sh', gz], parse(one)], args.runs)

    rows = [
        (f'{small} replicated: parse / pickle.load', f'{ms:.3f} s / {py:.3f} s', py / ms,
         f'>= {TARGETS["pickle"]:.0f}x', verdict(py / ms, TARGETS['pickle'], False)),
        (f'{small} replicated: parse / cat into a pipe', f'{ms:.3f} s / {cat:.3f} s', ms / cat,
         f'<= {TARGETS["cat"]:.0f}x', verdict(ms / cat, TARGETS['cat'], True)),
        (f'{small} replicated: peak RSS / file', f'{ms_rss / 1024:.0f} MiB / {size / 2**20:.0f} MiB',
         ms_rss * 1024 / size, f'<= {TARGETS["rss"]:.1f}x',
         verdict(ms_rss * 1024 / size, TARGETS['rss'], True)),
        (f'{small} replicated .gz (-1): parse / (gzip -dc + plain parse)',
         f'{ms_gz:.3f} s / ({gunzip:.3f} + {ms_plain:.3f}) s', ms_gz / (gunzip + ms_plain),
         f'<= {TARGETS["gz"]:.1f}x', verdict(ms_gz / (gunzip + ms_plain), TARGETS['gz'], True)),
    ]
    if not args.no_10m:
        ten = replicated(10 * args.events, args.work, runner, args.replicate_from)
        made.append(ten)
        (ms10, rss10), (ms1, _) = interleaved(runner, [parse(ten), parse(one)],
                                              max(3, args.runs // 2))
        rows.append((f'{large} replicated: parse / (10 x {small} parse)', f'{ms10:.3f} s / {10 * ms1:.3f} s',
                     ms10 / (10 * ms1), f'<= {TARGETS["linear"]:.1f}x',
                     verdict(ms10 / (10 * ms1), TARGETS['linear'], True)))
        rows.append((f'{large} replicated: peak RSS / file',
                     f'{rss10 / 1024:.0f} MiB / {os.path.getsize(ten) / 2**20:.0f} MiB',
                     rss10 * 1024 / os.path.getsize(ten), f'<= {TARGETS["rss"]:.1f}x',
                     verdict(rss10 * 1024 / os.path.getsize(ten), TARGETS['rss'], True)))

    print(f'\nparse targets, {args.runs} interleaved runs per pair, medians; {runner.describe()}\n')
    print('| pair | times | ratio | target | |')
    print('|---|---:|---:|---|---|')
    for what, times, ratio, target, met in rows:
        print(f'| {what} | {times} | {ratio:.2f}x | {target} | {met} |')
    if not args.keep:
        for path in made:
            for p in (path, path + '.params'):
                if os.path.exists(p):
                    os.remove(p)
    return 0


if __name__ == '__main__':
    sys.exit(main())
