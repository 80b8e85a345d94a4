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


def test_the_parse_targets_bench_prints_each_pair(memsnap, work):
    """bench/parse_targets.py at 40k entries (400k for the linear row), one
    run per pair: a row per target, each with its ratio and a verdict."""
    sys.path.insert(0, os.path.join(ROOT, 'bench'))
    import run_bench  # the fixture the replicated shape repeats
    if not os.path.exists(run_bench.REPLICATE_FIXTURE):
        import pytest
        pytest.skip(f'no fixture at {run_bench.REPLICATE_FIXTURE}')
    argv = [sys.executable, os.path.join(ROOT, 'bench', 'parse_targets.py'), '--memsnap', memsnap,
            '--events', '40k', '--runs', '1', '--work', work]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith('| 4')]
    assert [row.split('|')[1].strip() for row in rows] == [
        '40k replicated: parse / pickle.load', '40k replicated: parse / cat into a pipe',
        '40k replicated: peak RSS / file',
        '40k replicated .gz (-1): parse / (gzip -dc + plain parse)',
        '400k replicated: parse / (10 x 40k parse)', '400k replicated: peak RSS / file'], done.stdout
    for row in rows:
        cells = [cell.strip() for cell in row.split('|')[1:-1]]
        assert re.fullmatch(r'[0-9.]+x', cells[2]) and cells[4] in ('met', 'MISSED'), row
    assert not os.path.exists(os.path.join(work, 'replicated-40k.pickle')), 'not cleaned up'
