#!/usr/bin/env python3
"""Differential test: memsnap against the pickle oracle (tests/pickle_oracle).

    python3 -m pytest tests/differential/test_differential.py --memsnap PATH [--work DIR]
                      [--part fixtures [--fixtures-dir DIR]]

Two parts: the synthetic corpus (tests/gen/make_snapshot.py --corpus), and
`fixtures`, every file under --fixtures-dir (default
<repo>/../shared/fixtures/real/). For every file it compares:

  dump      `memsnap dump FILE`, its shared objects resolved, == oracle
            dump_tree (whole tree; true is not 1, 1.0 is not 1; set members
            in any order)
  parse     `memsnap parse FILE --json --device D`: device_traces
            {device, event_count, actions} and segments {count, total_size,
            allocated_size, active_size, awaiting_free_size, inactive_size}
  baseline  the same output's baseline {baseline_at_start, segments_active,
            pre_existing_freed, profiling_still_live} == DESIGN.md's formula
            (and, for generated files, the generator's known baseline)
  events    `memsnap events FILE --device D --stride K --json` (~50 samples;
            each entry's frames from the frames and stacks tables)

for every device D that has trace events or segments. One line per check and
a summary; the test fails listing every mismatch. Without the fixtures folder
the fixtures part is skipped (exit 77, CTest: skipped).
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pickle_oracle import pickle_oracle  # tests/pickle_oracle/pickle_oracle.py

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

GENERATOR = REPO / 'tests' / 'gen' / 'make_snapshot.py'
TIMEOUT = 120
JOBS = min(4, os.cpu_count() or 1)  # files checked at once


class Failure(Exception):
    pass


def run(memsnap, args):
    cmd = [memsnap] + [str(a) for a in args]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure('timed out after %d s: %s' % (TIMEOUT, ' '.join(cmd)))
    if proc.returncode != 0:
        err = proc.stderr.decode('utf-8', 'replace').strip().splitlines()
        raise Failure('exit status %d: %s' % (proc.returncode, err[-1] if err else '(no stderr)'))
    return proc.stdout


def run_json(memsnap, args, object_hook=None):
    out = run(memsnap, args)
    try:
        return json.loads(out.decode('utf-8'), object_hook=object_hook)
    except (UnicodeDecodeError, ValueError) as e:
        raise Failure('output is not JSON (%s): %r' % (e, out[:200]))


def short(value, limit=160):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + '...'


def first_difference(expected, got, path='$'):
    """A readable description of where two JSON values differ, or None."""
    if isinstance(expected, (pickle_oracle.StrictBool, pickle_oracle.StrictFloat)):
        if expected == got:
            return None
        return '%s: expected %s got %s' % (path, short(expected), short(got))
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return '%s: expected object got %s' % (path, short(got))
        missing = [k for k in expected if k not in got]
        extra = [k for k in got if k not in expected]
        if missing or extra:
            return '%s: keys missing %s, unexpected %s' % (path, missing[:5], extra[:5])
        for k in expected:
            d = first_difference(expected[k], got[k], '%s.%s' % (path, k))
            if d:
                return d
        return None
    if isinstance(expected, list):
        if not isinstance(got, list):
            return '%s: expected array got %s' % (path, short(got))
        for i, (e, g) in enumerate(zip(expected, got)):
            d = first_difference(e, g, '%s[%d]' % (path, i))
            if d:
                return d
        if len(expected) != len(got):
            return '%s: expected %d elements got %d' % (path, len(expected), len(got))
        return None
    if type(expected) is not type(got) or expected != got:
        return '%s: expected %s got %s' % (path, short(expected), short(got))
    return None


# ---------------------------------------------------------------------------
# checks; each returns a detail string on success and raises Failure


def check_dump(memsnap, path, value):
    expected = pickle_oracle.dump_tree(value, strict=True)
    got = run_json(memsnap, ['dump', path], object_hook=pickle_oracle.dump_hook())
    if expected == got:  # fast path in C; StrictBool/StrictFloat keep it strict
        return ''
    raise Failure(first_difference(expected, got) or 'trees differ')


def parse_output(memsnap, path, device):
    args = ['parse', path, '--json']
    if device is not None:
        args += ['--device', device]
    out = run_json(memsnap, args)
    if not isinstance(out, dict):
        raise Failure('parse --json printed %s, not an object' % type(out).__name__)
    return out


def check_parse(out, value, device):
    problems = []
    trace = pickle_oracle.trace_of(value, device)
    expected_dt = {'device': device, 'event_count': len(trace),
                   'actions': pickle_oracle.actions(trace)}
    got_dt = out.get('device_traces')
    if not isinstance(got_dt, dict):
        raise Failure('no device_traces object in parse --json (got %s)' % short(got_dt))
    got_sub = {k: got_dt.get(k) for k in expected_dt}
    d = first_difference(expected_dt, got_sub, 'device_traces')
    if d:
        problems.append(d)
    seg = pickle_oracle.segment_totals(value, device)
    seg['awaiting_free_size'] = seg['active_size'] - seg['allocated_size']
    seg['inactive_size'] = seg['total_size'] - seg['active_size']
    got_seg = out.get('segments')
    if not isinstance(got_seg, dict):
        problems.append('no segments object in parse --json (got %s)' % short(got_seg))
    else:
        d = first_difference(seg, {k: got_seg.get(k) for k in seg}, 'segments')
        if d:
            problems.append(d)
    if problems:
        raise Failure('; '.join(problems))
    return 'events=%d segments=%d' % (len(trace), seg['count'])


def check_baseline(out, value, device, known):
    segments_active = pickle_oracle.segment_totals(value, device)['active_size']
    live = {}
    unmatched = 0
    for e in pickle_oracle.trace_of(value, device):
        if e['action'] == 'alloc':
            live[e['addr']] = e['size']
        elif e['action'] == 'free_completed':
            size = live.pop(e['addr'], None)
            if size is None:
                unmatched += e['size']
    still_live = sum(live.values())
    expected = {'baseline_at_start': segments_active - still_live + unmatched,
                'segments_active': segments_active,
                'pre_existing_freed': unmatched,
                'profiling_still_live': still_live}
    if known is not None and known != expected['baseline_at_start']:
        raise Failure('oracle baseline %d != generator baseline %d (generator bug)'
                      % (expected['baseline_at_start'], known))
    got = out.get('baseline')
    if not isinstance(got, dict):
        raise Failure('no baseline object in parse --json (got %s)' % short(got))
    d = first_difference(expected, {k: got.get(k) for k in expected}, 'baseline')
    if d:
        raise Failure(d)
    return 'baseline=%d' % expected['baseline_at_start']


def check_events(memsnap, path, value, device):
    n = len(pickle_oracle.trace_of(value, device))
    stride = pickle_oracle.default_stride(n)
    expected = pickle_oracle.events(value, device, stride)
    got = run_json(memsnap, ['events', path, '--device', device, '--stride', stride, '--json'])
    if not isinstance(got, dict):
        raise Failure('events --json printed %s, not an object' % type(got).__name__)
    try:  # each entry's stack from the frames and stacks tables
        got = pickle_oracle.inline_frames(got)
    except (LookupError, TypeError) as e:
        raise Failure('events --json: a stack or frame number out of its table (%r)' % (e,))
    # `source` and `category` are memsnap's attribution, not values of the pickle: the
    # semantics oracle checks it (user-frames); here only what the file holds.
    for event in got.get('events') or []:
        if isinstance(event, dict):
            event.pop('source', None)
            event.pop('category', None)
    d = first_difference(expected, {k: got.get(k) for k in expected})
    if d:
        raise Failure(d)
    return 'stride=%d samples=%d' % (stride, len(expected['events']))


def check_file(memsnap, path, label, known_baselines):
    """All checks of one file: a list of (ok, check, label, detail)."""
    results = []

    def attempt(check, tag, fn, *args):
        try:
            results.append((True, check, tag, fn(*args)))
        except Failure as e:
            results.append((False, check, tag, str(e)))
        except Exception as e:  # a bug in the test itself must be visible
            results.append((False, check, tag, 'test error: %r' % (e,)))

    try:
        value = pickle_oracle.load(path)
    except Exception as e:
        return [(False, 'load', label, 'the pickle oracle cannot load it: %r' % (e,))]
    attempt('dump', label, check_dump, memsnap, path, value)
    devices = pickle_oracle.devices_of(value)
    if not devices:
        def no_device():
            out = parse_output(memsnap, path, None)
            dt = out.get('device_traces')
            if not isinstance(dt, dict) or dt.get('event_count') != 0:
                raise Failure('expected device_traces.event_count 0, got %s' % short(dt))
            return 'no device has events or segments'
        attempt('parse', label, no_device)
    for device in devices:
        tag = '%s --device %d' % (label, device)
        try:
            out = parse_output(memsnap, path, device)
        except Failure as e:
            results.append((False, 'parse', tag, str(e)))
            continue
        known = None
        if known_baselines is not None and device < len(known_baselines):
            known = known_baselines[device]
        attempt('parse', tag, check_parse, out, value, device)
        attempt('baseline', tag, check_baseline, out, value, device, known)
        attempt('events', tag, check_events, memsnap, path, value, device)
    return results


def generated_jobs(work):
    """The generator's corpus: (path, label, known baselines) per file."""
    corpus = os.path.join(work, 'corpus')
    gen = subprocess.run([sys.executable, str(GENERATOR), '--corpus', corpus],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert gen.returncode == 0, 'generator failed:\n' + gen.stdout.decode('utf-8', 'replace')
    with open(os.path.join(corpus, 'manifest.json')) as f:
        manifest = json.load(f)
    return [(os.path.join(corpus, name), 'corpus/' + name, manifest[name]['baseline'])
            for name in sorted(manifest)]


def fixture_jobs(folder):
    real = Path(folder)
    real_files = [p for p in sorted(real.rglob('*'))
                  if p.is_file() and p.suffix.lower() not in ('.md', '.txt', '.json')]
    # A folder without snapshots would pass while checking nothing.
    assert real_files, 'no snapshot in %s' % real
    return [(str(p), 'real/' + str(p.relative_to(real)), None) for p in real_files]


def run_jobs(memsnap, jobs):
    """Every file checked in a pool of processes; one PASS/FAIL line per check.
    Returns the failed lines."""
    start = time.time()
    passed = 0
    failures = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=JOBS) as pool:
        futures = [pool.submit(check_file, memsnap, path, label, known)
                   for path, label, known in jobs]
        for fut in futures:
            for ok, check, label, detail in fut.result():
                line = '%s %-8s %s%s' % ('PASS' if ok else 'FAIL', check, label,
                                         (': ' + detail) if detail else '')
                print(line, flush=True)
                if ok:
                    passed += 1
                else:
                    failures.append(line)
    print('\n%d files, %d checks: %d passed, %d failed (%.1f s)'
          % (len(jobs), passed + len(failures), passed, len(failures), time.time() - start))
    return failures


def test_generated_corpus_agrees_with_cpython(memsnap, work):
    failures = run_jobs(memsnap, generated_jobs(work))
    assert not failures, '\n'.join(failures)


@pytest.mark.fixtures
def test_every_fixture_agrees_with_cpython(memsnap, fixtures_dir):
    failures = run_jobs(memsnap, fixture_jobs(fixtures_dir))
    assert not failures, '\n'.join(failures)
