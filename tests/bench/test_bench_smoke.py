#!/usr/bin/env python3
"""A small run of the benchmark (bench/run_bench.py) in the test suite: every
table is printed, no command fails, and the numbers it prints are the ones it
measured (the parse check reads memsnap's JSON back). Timings are not checked
here: speed and memory targets live in `make bench`, whose MISSED lines this
test ignores.

    python3 -m pytest tests/bench/test_bench_smoke.py --memsnap build/memsnap --work DIR
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_bench_prints_every_table_and_no_command_fails(memsnap, work):
    argv = [sys.executable, os.path.join(ROOT, 'bench', 'run_bench.py'), '--memsnap', memsnap,
            '--sizes', '20k', '--ranks', '3', '--rank-events', '2k', '--many-steps', '300',
            '--no-browser', '--python-runs', '1', '--hostile-scales', '1,2', '--work', work]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    out = done.stdout
    failures = []
    if done.returncode != 0:
        failures.append(f'exit {done.returncode}: {done.stderr[-2000:]}')
    for title in ('parse:', 'compressed input:', 'compare / replay-step:', 'events:', 'plot:',
                  'hostile shapes:'):
        if title not in out:
            failures.append(f'no "{title}" table')
    if 'FAILED' in out:
        failures.append('a command FAILED: ' + ' | '.join(l for l in out.splitlines() if 'FAILED' in l))
    if not re.search(r'^\s*20k\s+\.gz\s', out, re.M) or not re.search(r'^\s*20k\s+\.zst\s', out, re.M):
        if 'no zstd on PATH' not in out and 'no gzip on PATH' not in out:
            failures.append('no .gz / .zst rows in the compressed table')
    if not re.search(r'20k: memsnap parse reports 20000 events', out):
        failures.append('the parse check did not read back 20000 events')
    if not re.search(r'^\s*shared_entry\s.*\(refused\)', out, re.M):
        failures.append('the hostile table has no refused shared_entry row')
    if not re.search(r'^\s*20k\s.*\blifetimes\b', out, re.M):
        failures.append('the plot row does not say how the page drills down')
    assert not failures, '\n'.join(failures) + '\n' + out[-4000:]


def test_the_whatif_bench_prints_a_row_per_file(memsnap, work):
    """bench/whatif_bench.py on the bundled example: one row, the model's
    share a number."""
    example = os.path.join(ROOT, 'examples', 'training_steps.pickle.gz')
    argv = [sys.executable, os.path.join(ROOT, 'bench', 'whatif_bench.py'), '--memsnap', memsnap,
            example]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if 'training_steps.pickle.gz' in line]
    assert len(rows) == 1 and len(rows[0].split()) == 9, done.stdout
