#!/usr/bin/env python3
"""memsnap's replay commands against the semantics oracle, an independent
Python implementation of DESIGN.md's replay semantics (semantics_oracle.py).

    python3 -m pytest tests/semantics_oracle/test_semantics_oracle.py --memsnap PATH [--work DIR]
                      [--part fixtures [--fixtures-dir DIR]]

Two parts: the generated files (1., and 2. on them) and `fixtures` (2. and
the comparisons on the real files of --fixtures-dir, default
<repo>/../shared/fixtures/real; skipped, exit 77, where it is absent). Each
test fails listing every check that failed.

1. Differential (generated snapshots, Python-only frames, frame depth 1):
   generates a few small files with tests/gen/make_snapshot.py (steps + marks,
   ring buffer, late start, two devices, no steps), plus a hand-written
   snapshot (handmade_snapshot(): address reuse without a free, unmatched and
   pre-existing frees inside windows, events on window edges, empty windows,
   END at time 0, internal-frame fallbacks) and one with 60 nested and
   overlapping ProfilerStep windows over random allocs and frees
   (overlapping_steps_snapshot()), and checks, key by key,
     replay-step FILE --all-steps --json --top 1000000   (every step, every key)
     replay-to-time FILE --time T --json --top 1000000   (5 times, one past the end;
                                                          4 more on the handmade file's edges)
     compare A B --json --top 1000000                    (4 pairs, see PAIRS)
   against semantics_oracle.py. Integers and strings exactly, floats within 1e-6.
   The reference's own baseline is also checked against the generator's
   manifest (the bytes live when recording started).

2. Invariants, on the generated files and on every file of --fixtures:
   (a) replay-step, per step: the live set at the window peak is the replay's
       live map at that position, so
         sum(top_sources_at_peak.bytes) == live bytes at the window start
                                           + peak_delta
                                           + unmatched free bytes in the window before the peak
                                           - bytes replaced by allocs at a live address
                                             in the window before the peak
       (the naive "live at start + peak_delta" only holds when the last two
       terms are 0: an unmatched free lowers the delta but removes nothing
       from the live map; an alloc at a live address replaces the map entry
       but the delta keeps the old bytes). The three extra terms come from
       the reference; peak_delta and the sources from memsnap.
   (b) replay-to-time: sum(sources.bytes) == live_bytes and
       sum(sources.count) == live_count (memsnap alone), and live_bytes equals
       the reference's live map at that time.
   (c) parse: baseline_at_start + replay.end_delta == segments.active_size
       + replaced bytes. From DESIGN.md, baseline = active - live_end + U and
       end_delta = live_end + R - U (U: unmatched free bytes, R: bytes dropped
       by allocs at a live address), so the sum is active + R, whatever U is.
       The plain identity (R = 0) is reported as such; on a complete trace
       (no unmatched frees) R is 0 unless an alloc reuses a live address.
   On real files the numbers of replay-step and replay-to-time are also
   compared with the reference, except the rows of the source tables, of
   which only the totals are compared: real files carry C++ frames, which
   memsnap deliberately attributes differently (DESIGN.md, difference 1).

One line per check, a summary, exit status 1 on any failure. Standard library only.
"""

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

import semantics_oracle as ref  # beside this file (pytest puts its folder on sys.path)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

GENERATOR = REPO / 'tests' / 'gen' / 'make_snapshot.py'
TOP = '1000000'
FLOAT_TOLERANCE = 1e-6
MAX_DIFFS = 12

# name -> generator arguments (the default --stacks is python)
GENERATED = [
    ('steps-marks-a', ['--events', '1600', '--steps', '4', '--marks', '--seed', '501']),
    ('steps-marks-b', ['--events', '1900', '--steps', '4', '--marks', '--protocol', '2',
                       '--seed', '502']),
    ('ring-buffer', ['--events', '3000', '--ring-buffer', '900', '--steps', '4', '--marks',
                     '--seed', '503']),
    ('late-start', ['--events', '1400', '--late-start', '--steps', '3', '--marks',
                    '--seed', '504']),
    ('two-devices', ['--events', '2200', '--devices', '2', '--steps', '3', '--marks',
                     '--seed', '505']),
    ('no-steps-a', ['--events', '1200', '--seed', '506']),
    ('no-steps-b', ['--events', '1500', '--seed', '507']),
]
# (A, B, what it exercises)
PAIRS = [
    ('steps-marks-a', 'steps-marks-b', 'matching steps'),
    ('late-start', 'ring-buffer', 'matching steps, baselines > 0, unmatched frees'),
    ('no-steps-a', 'no-steps-b', 'no steps: full trace'),
    ('handmade', 'handmade-shifted', 'baselines differ by a constant: tie on every step'),
]
# times beyond probe_times(): on window edges of the handmade file
EXTRA_TIMES = {'handmade': ['0.000100', '0.000199', '0.000200', '0.000420']}
# devices checked beyond the default one
EXTRA_DEVICES = {'two-devices': [1]}


class Failure(Exception):
    pass


class Skip(Exception):
    pass


def run(memsnap, args):
    cmd = [memsnap] + [str(a) for a in args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if proc.returncode != 0:
        err = proc.stderr.decode('utf-8', 'replace').strip().splitlines()
        raise Failure('`%s` exit status %d: %s' % (' '.join(cmd[1:]), proc.returncode,
                                                    err[-1] if err else '(no stderr)'))
    try:
        return json.loads(proc.stdout.decode('utf-8'))
    except ValueError as e:
        raise Failure('`%s` printed no JSON (%s)' % (' '.join(cmd[1:]), e))


def short(v, limit=120):
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return text if len(text) <= limit else text[:limit] + '...'


def differences(expected, got, path, out, ignore=()):
    """Appends 'path: expected X got Y' for every difference (keys of
    `expected` only; keys starting with '_' are reference extras)."""
    if len(out) >= MAX_DIFFS:
        return
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            out.append('%s: expected an object, got %s' % (path, short(got)))
            return
        for k, v in expected.items():
            if str(k).startswith('_') or k in ignore:
                continue
            if k not in got:
                out.append('%s.%s: missing (expected %s)' % (path, k, short(v)))
                continue
            differences(v, got[k], '%s.%s' % (path, k), out, ignore)
        return
    if isinstance(expected, list):
        if not isinstance(got, list):
            out.append('%s: expected an array, got %s' % (path, short(got)))
            return
        for i, (e, g) in enumerate(zip(expected, got)):
            where = ('[step %s]' % e['step'] if isinstance(e, dict) and 'step' in e
                     else '[%d]' % i)
            differences(e, g, path + where, out, ignore)
        if len(expected) != len(got):
            out.append('%s: expected %d elements, got %d (first extra: %s)'
                       % (path, len(expected), len(got),
                          short((expected if len(expected) > len(got) else got)
                                [min(len(expected), len(got))])))
        return
    if isinstance(expected, float) and not isinstance(got, bool) \
            and isinstance(got, (int, float)):
        if abs(expected - got) > FLOAT_TOLERANCE:
            out.append('%s: expected %r got %r' % (path, expected, got))
        return
    if type(expected) is not type(got) or expected != got:
        out.append('%s: expected %s got %s' % (path, short(expected), short(got)))


def assert_same(expected, got, label, ignore=()):
    diffs = []
    differences(expected, got, label, diffs, ignore)
    if diffs:
        count = ('%d+' if len(diffs) >= MAX_DIFFS else '%d') % len(diffs)
        raise Failure('%s difference(s):\n      ' % count + '\n      '.join(diffs))


def source_totals(rows):
    return {'bytes': sum(r['bytes'] for r in rows), 'count': sum(r['count'] for r in rows)}


# ---------------------------------------------------------------------------
# checks: each returns a detail string, raises Failure or Skip


# The reference scripts know ProfilerStep marks only; memsnap infers
# iterations from the optimizer where those are missing (--steps auto), which
# tests/cli/test_inferred_steps.py checks.
STEPS = ['--steps', 'profiler']


def dev_args(device):
    return [] if device is None else ['--device', device]


def check_replay_step(memsnap, path, device, real):
    expected = ref.replay_step(snapshot(path), device)
    if not expected:
        try:
            run(memsnap, ['replay-step', path, '--all-steps', '--json', '--top', TOP] + STEPS
                + dev_args(device))
        except Failure:
            return 'no ProfilerStep: reference [] and memsnap refuses (as documented)'
        raise Failure('reference finds no ProfilerStep but memsnap printed steps')
    got = run(memsnap, ['replay-step', path, '--all-steps', '--json', '--top', TOP] + STEPS
              + dev_args(device))
    if real:
        # source keys differ by design on C++ stacks (so does the grouping):
        # compare the totals of the source table instead of its rows
        expected = [dict(s, top_sources_at_peak=source_totals(s['top_sources_at_peak']))
                    for s in expected]
        got = [dict(s, top_sources_at_peak=source_totals(s.get('top_sources_at_peak') or []))
               if isinstance(s, dict) else s for s in got]
    assert_same(expected, got, 'replay-step')
    return '%d steps (%s)' % (len(expected), ', '.join(
        '#%d%s' % (s['step'], '' if s['complete'] else ' open') for s in expected))


def check_invariant_a(memsnap, path, device):
    expected = ref.replay_step(snapshot(path), device)
    if not expected:
        raise Skip('no ProfilerStep annotations')
    got = run(memsnap, ['replay-step', path, '--all-steps', '--json', '--top', TOP] + STEPS
              + dev_args(device))
    by_step = {s.get('step'): s for s in got if isinstance(s, dict)}
    problems = []
    notes = 0
    for e in expected:
        g = by_step.get(e['step'])
        if g is None:
            problems.append('step %d: missing in memsnap output' % e['step'])
            continue
        rows = g.get('top_sources_at_peak') or []
        total = sum(r['bytes'] for r in rows)
        count = sum(r['count'] for r in rows)
        identity = (e['_live_bytes_at_start'] + g['peak_delta']
                    + e['_unmatched_free_bytes_to_peak'] - e['_replaced_bytes_to_peak'])
        if total != identity:
            problems.append(
                'step %d: sum(top_sources_at_peak.bytes)=%d != live at window start %d'
                ' + peak_delta %d + unmatched free bytes before the peak %d'
                ' - replaced bytes before the peak %d = %d'
                % (e['step'], total, e['_live_bytes_at_start'], g['peak_delta'],
                   e['_unmatched_free_bytes_to_peak'], e['_replaced_bytes_to_peak'],
                   identity))
        if total != e['_live_bytes_at_peak']:
            problems.append('step %d: sum(top_sources_at_peak.bytes)=%d != reference live'
                            ' bytes at the peak %d' % (e['step'], total, e['_live_bytes_at_peak']))
        live_count = e['_live_count_at_peak']
        if count != live_count:
            problems.append('step %d: sum(top_sources_at_peak.count)=%d != reference live'
                            ' count at the peak %d' % (e['step'], count, live_count))
        if e['_unmatched_free_bytes_to_peak'] or e['_replaced_bytes_to_peak']:
            notes += 1
    if problems:
        raise Failure('\n      '.join(problems))
    return '%d steps%s' % (len(expected), ', %d with non-zero correction terms' % notes
                           if notes else ', plain identity (no corrections)')


_SNAPSHOTS = {}


def snapshot(path):
    """The loaded snapshot (cached: the reference accepts a loaded value
    wherever it takes a path)."""
    if path not in _SNAPSHOTS:
        _SNAPSHOTS.clear()   # files are visited one after the other
        _SNAPSHOTS[path] = ref.load(path)
    return _SNAPSHOTS[path]


def _device(path, device):
    return ref.choose_device(snapshot(path)) if device is None else device


def probe_times(path, device):
    """0, a few times inside (one exactly on an event's time_us, to pin the
    inclusive boundary), and one past the end; strings with 6 decimals so
    that T * 1e6 is an exact integer number of microseconds."""
    events = ref.events_of(snapshot(path), _device(path, device))
    times = ref._times(events)
    if not times:
        raise Skip('no trace events')
    t0, dur = times[0], times[-1] - times[0]
    on_event = times[len(times) // 3] - t0
    inside = [on_event, dur * 3 // 5 + 1, dur * 9 // 10]
    return ['0'] + ['%.6f' % (us / 1e6) for us in inside] + ['%.6f' % (dur / 1e6 + 5)]


def check_replay_to_time(memsnap, path, device, t, real):
    expected = ref.replay_to_time(snapshot(path), float(t), device)
    got = run(memsnap, ['replay-to-time', path, '--time', t, '--json', '--top', TOP]
              + dev_args(device))
    if real:   # as in check_replay_step
        expected['sources'] = source_totals(expected['sources'])
        got['sources'] = source_totals(got.get('sources') or [])
    assert_same(expected, got, 'replay-to-time')
    return 'events=%d delta=%d live=%d%s' % (expected['_position'], expected['delta'],
                                            expected['live_count'],
                                            ' (clamped)' if expected['clamped'] else '')


def check_invariant_b(memsnap, path, device, t):
    got = run(memsnap, ['replay-to-time', path, '--time', t, '--json', '--top', TOP]
              + dev_args(device))
    rows = got.get('sources') or []
    problems = []
    total = sum(r['bytes'] for r in rows)
    count = sum(r['count'] for r in rows)
    if total != got.get('live_bytes'):
        problems.append('sum(sources.bytes)=%d != live_bytes %s' % (total, got.get('live_bytes')))
    if count != got.get('live_count'):
        problems.append('sum(sources.count)=%d != live_count %s' % (count, got.get('live_count')))
    expected = ref.replay_to_time(snapshot(path), float(t), device)
    if got.get('live_bytes') != expected['live_bytes']:
        problems.append('live_bytes %s != reference %d' % (got.get('live_bytes'),
                                                          expected['live_bytes']))
    if problems:
        raise Failure('; '.join(problems))
    return 'live_bytes=%d live_count=%d' % (total, count)


def check_invariant_c(memsnap, path, device):
    out = run(memsnap, ['parse', path, '--json'] + dev_args(device))
    snap = snapshot(path)
    dev = out.get('device')
    if device is not None and dev != device:
        raise Failure('parse --json device %s, asked for %s' % (dev, device))
    if dev is None:
        raise Skip('no device')
    events = ref.events_of(snap, dev)
    state = ref.replay(events)['state']
    base = out['baseline']['baseline_at_start']
    end = out['replay']['end_delta']
    active = out['segments']['active_size']
    replaced = state.replaced_bytes
    unmatched = out.get('unmatched_frees', {}).get('count')
    if base + end != active + replaced:
        raise Failure('baseline.baseline_at_start %d + replay.end_delta %d = %d'
                      ' != segments.active_size %d + replaced bytes %d = %d'
                      ' (unmatched frees: %s)' % (base, end, base + end, active, replaced,
                                                  active + replaced, unmatched))
    kind = ('complete trace, ' if not unmatched else '%s unmatched frees, ' % unmatched)
    if replaced:
        return kind + 'baseline + end_delta == active + %d replaced bytes' % replaced
    return kind + 'baseline + end_delta == active == %d' % active


def check_compare(memsnap, a, b):
    expected = ref.compare(a, b)
    got = run(memsnap, ['compare', a, b, '--json', '--top', TOP] + STEPS)
    assert_same(expected, got, 'compare')
    dd = expected['drill_down']
    return 'matching steps %s, drill-down at %s, %d source rows' % (
        expected['matching_steps'], 'step %d' % dd['step'] if dd['step'] != 'full-trace'
        else 'full trace', len(dd['sources']))


# ---------------------------------------------------------------------------
# A hand-written snapshot for the corners the generator does not reach


def _frame(name, filename, line):
    return {'name': name, 'filename': filename, 'line': line}


USER_FRAMES = [_frame('forward', '/home/u/model.py', 10), _frame('main', '/home/u/train.py', 3)]
AFTER_INTERNAL = [_frame('_call_impl', '/env/lib/site-packages/torch/nn/modules/module.py', 1747),
                  _frame('forward', '/home/u/net.py', 20)]
ALL_INTERNAL = [_frame('inner', '/usr/lib/python3.11/runpy.py', 5),       # fallback: first frame
                _frame('fn', '/env/site-packages/torch/cuda/memory.py', 7)]
LAMBDA = [_frame('<lambda>', '/home/u/a.py', 3), _frame('step', '/home/u/a.py', 9)]
HYDRA = [_frame('run', '/opt/hydra/core.py', 2), _frame('<module>', '/home/u/train.py', 1),
         _frame('main', '/home/u/train.py', 5)]
INNER = [_frame('inner', '/home/u/deco.py', 12), _frame('wrapped', '/home/u/deco.py', 20)]
TORCH_PREFIX = [_frame('op', '/opt/torch_xla/ops.py', 4), _frame('loss', '/home/u/loss.py', 8)]

T0 = 1_700_000_000_000_000


def handmade_snapshot(extra_active=0):
    """Address reuse without a free (replacement), unmatched frees before,
    inside and after a window peak, frees of blocks allocated before the
    window, events exactly on window boundaries, an END with time_us 0
    (incomplete step), a step without END, a step after the trace end, a
    step whose peak is its start, empty windows inside and after the trace,
    marks of another device, internal-frame
    fallbacks, empty and missing frames."""
    events = []

    def ev(dt, action, addr, size, frames=USER_FRAMES):
        e = {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': T0 + dt}
        if frames is not None:
            e['frames'] = frames
        events.append(e)

    A, B, C, D, E, F, G, H, I, X, Y, Z = (0x7f0000000000 + 0x1000 * k for k in range(12))
    ev(0, 'alloc', A, 100)                      # live before step 0, freed in it
    ev(10, 'alloc', B, 200, AFTER_INTERNAL)
    ev(20, 'free_completed', X, 50, [])         # unmatched, before any step
    ev(30, 'segment_alloc', 0x7f0000000000, 2 << 20, [])
    ev(40, 'alloc', C, 300, LAMBDA)             # step 0 starts here (inclusive)
    ev(50, 'free_requested', A, 100)
    ev(55, 'free_completed', A, 100)            # pre-existing free
    ev(60, 'alloc', C, 400, ALL_INTERNAL)       # C still live: replaces it; peak of step 0
    ev(70, 'free_completed', Y, 70, [])         # unmatched, after the peak
    ev(80, 'alloc', D, 50, [])
    ev(100, 'free_completed', D, 50)            # on step 0's END (inclusive)
    ev(100, 'alloc', E, 10, None)               # no frames key at all
    ev(150, 'alloc', F, 1000)
    ev(200, 'free_completed', F, 1000)          # on step 1's START: pre-existing free
    ev(210, 'alloc', G, 500, HYDRA)             # step 1 never rises above its start
    ev(220, 'free_completed', G, 500)
    ev(300, 'alloc', H, 2000, TORCH_PREFIX)     # step 2's peak
    ev(350, 'free_completed', Z, 30, [])        # unmatched, after the peak
    ev(400, 'free_completed', H, 2000)
    ev(420, 'oom', None, 1 << 30, [])
    ev(500, 'alloc', I, 5, INNER)
    del events[-2]['addr']
    events[-2]['device_free'] = 123

    def mark(name, stage, dt, device=0):
        return {'name': name, 'stage': stage, 'device': device, 'time_us': dt and T0 + dt}

    annotations = [
        mark('ProfilerStep#7', 'START', 0, device=1),        # another device
        mark('ProfilerStep#0', 'START', 40),
        mark('Optimizer.step#AdamW.step', 'START', 60),
        mark('Optimizer.step#AdamW.step', 'END', 65),
        mark('ProfilerStep#0', 'END', 100),
        mark('ProfilerStep#1', 'START', 200),
        mark('ProfilerStep#1', 'END', 0),                    # time 0: does not end it
        mark('ProfilerStep#2', 'START', 300),
        mark('forward', 'START', 300),
        mark('ProfilerStep#2', 'END', 400),
        mark('ProfilerStep#3', 'START', 450),                # no END
        mark('ProfilerStep#4', 'START', 430),                # empty, inside the trace
        mark('ProfilerStep#4', 'END', 440),
        mark('ProfilerStep#5', 'START', 2000),               # empty, after the trace
        mark('ProfilerStep#5', 'END', 2100),
        mark('ProfilerStep#6', 'START', 2200),               # empty, after, no END
    ]
    segments = [
        {'device': 0, 'address': 0x7f0000000000, 'total_size': 8192,
         'allocated_size': 1500, 'active_size': 2000 + extra_active, 'blocks': []},
        {'device': 0, 'address': 0x7f0000100000, 'total_size': 4096,
         'allocated_size': 300, 'blocks': []},               # no active_size
        {'device': 1, 'address': 0x7e0000000000, 'total_size': 1 << 20,
         'allocated_size': 1 << 20, 'active_size': 1 << 20, 'blocks': []},
    ]
    return {'segments': segments, 'device_traces': [events, []],
            'external_annotations': annotations}


def overlapping_steps_snapshot(seed=7, events_count=600, steps_count=60):
    """ProfilerStep windows that nest and overlap (a window inside another,
    windows sharing a start or an end, empty ones, one without END, a few
    whose END precedes their START), over
    random allocs and frees: frees of blocks allocated before, inside and
    between windows, unmatched frees and address reuse. Every window's
    numbers must equal a replay of that window alone."""
    import random
    rng = random.Random(seed)
    events, live = [], []
    for k in range(events_count):
        t = T0 + 10 * k
        roll = rng.random()
        if live and roll < 0.4:
            addr, size = live.pop(rng.randrange(len(live)))
            events.append({'action': 'free_completed', 'addr': addr, 'size': size, 'stream': 0,
                           'time_us': t, 'frames': USER_FRAMES})
        elif roll < 0.45:
            events.append({'action': 'free_completed', 'addr': 0x7e0000000000 + k, 'size': 64,
                           'stream': 0, 'time_us': t, 'frames': []})
        else:
            addr = 0x7f0000000000 + 0x1000 * rng.randrange(events_count // 3)
            size = rng.choice([512, 4096, 1 << 20, 3 << 20])
            if all(addr != a for a, _ in live):
                live.append((addr, size))
            events.append({'action': 'alloc', 'addr': addr, 'size': size, 'stream': 0,
                           'time_us': t, 'frames': rng.choice([USER_FRAMES, LAMBDA, HYDRA])})
    annotations = []
    span = 10 * events_count
    for n in range(steps_count):
        start = rng.randrange(-50, span + 50)
        end = start + rng.choice([0, 5, 10, rng.randrange(span // 2)])
        if n % 7 == 3:
            start = annotations[-2]['time_us'] - T0      # same start as the previous window
        annotations.append({'name': 'ProfilerStep#%d' % n, 'stage': 'START', 'device': 0,
                            'time_us': T0 + start})
        if n != steps_count - 1:
            annotations.append({'name': 'ProfilerStep#%d' % n, 'stage': 'END', 'device': 0,
                                'time_us': T0 + end})
        if n % 5 == 0:
            annotations.append({'name': 'forward', 'stage': 'START', 'device': 0,
                                'time_us': T0 + start + 1})
    return {'segments': [], 'device_traces': [events], 'external_annotations': annotations}


def write_handmade(path, extra_active=0):
    with open(path, 'wb') as f:
        pickle.dump(handmade_snapshot(extra_active), f, protocol=4)


MANIFESTS = {}


def check_reference_baseline(path, device, known):
    """The reference against the generator's own bookkeeping: the bytes live
    when recording started (what the baseline formula must recover)."""
    snap = snapshot(path)
    dev = _device(path, device)
    got = ref.baseline(snap, dev, ref.events_of(snap, dev))['baseline_at_start']
    if got != known[dev]:
        raise Failure('reference baseline %d != generator manifest baseline %d'
                      ' (reference or generator bug)' % (got, known[dev]))
    return 'baseline=%d' % got


def generate(work):
    paths = {}
    for name, args in GENERATED:
        path = os.path.join(work, name + '.pickle')
        manifest = os.path.join(work, name + '.manifest.json')
        proc = subprocess.run([sys.executable, str(GENERATOR), '--out', path,
                               '--manifest', manifest] + args,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if proc.returncode != 0:
            raise Failure('generator failed for %s %s:\n%s'
                          % (name, ' '.join(args), proc.stdout.decode('utf-8', 'replace')))
        paths[name] = path
        with open(manifest) as f:
            MANIFESTS[name] = json.load(f)
    for name, extra in (('handmade', 0), ('handmade-shifted', 4096)):
        paths[name] = os.path.join(work, name + '.pickle')
        write_handmade(paths[name], extra)
    paths['overlapping-steps'] = os.path.join(work, 'overlapping-steps.pickle')
    with open(paths['overlapping-steps'], 'wb') as f:
        pickle.dump(overlapping_steps_snapshot(), f, protocol=4)
    return paths


def check_generated(memsnap, work, attempt):
    paths = generate(work)
    for name, path in paths.items():
        for device in [None] + EXTRA_DEVICES.get(name, []):
            label = name + ('' if device is None else ' --device %d' % device)
            if name in MANIFESTS:
                attempt('ref-baseline', label, check_reference_baseline, path, device,
                        MANIFESTS[name]['baseline'])
            attempt('replay-step', label, check_replay_step, memsnap, path, device, False)
            try:
                times = probe_times(path, device)
            except Exception as e:
                attempt('replay-to-time', label, lambda: (_ for _ in ()).throw(
                    Failure('cannot pick times: %s' % e)))
                times = []
            times += EXTRA_TIMES.get(name, []) if device is None else []
            for t in times:
                attempt('replay-to-time', '%s --time %s' % (label, t),
                        check_replay_to_time, memsnap, path, device, t, False)
            attempt('invariant-a', label, check_invariant_a, memsnap, path, device)
            for t in times:
                attempt('invariant-b', '%s --time %s' % (label, t),
                        check_invariant_b, memsnap, path, device, t)
            attempt('invariant-c', label, check_invariant_c, memsnap, path, device)
    for a, b, what in PAIRS:
        attempt('compare', '%s vs %s (%s)' % (a, b, what), check_compare, memsnap,
                paths[a], paths[b])


def check_user_frames(memsnap, path, device):
    """Every event whose stack holds a Python frame outside library code is
    keyed by that frame (`events --json` source, frame depth 1), as the
    oracle's own reading of DESIGN.md's v2 rule finds it from the pickle; a
    free by its allocation's frames."""
    got = run(memsnap, ['events', path, '--json', '--stride', '1'] + dev_args(device))
    events = ref.events_of(snapshot(path), _device(path, device))
    rows = got.get('events') or []
    if len(rows) != len(events):
        raise Failure('%d events listed, the pickle has %d' % (len(rows), len(events)))
    checked, problems = 0, []
    # A free is keyed by the allocation it frees (the live alloc at its
    # address); a free without one by its own frames, as "freed at ...
    # (allocated before the trace)" unless the file's frees carry their
    # allocation's frames (parse's free_frames.kind).
    kind = run(memsnap, ['parse', path, '--json'] + dev_args(device))['free_frames']['kind']
    live = {}
    for row, event in zip(rows, events):
        action, frames, unmatched = event.get('action'), event.get('frames'), False
        if action == 'alloc':
            live[event.get('addr')] = frames
        elif action in ('free_requested', 'free_completed'):
            found = live.get(event.get('addr'))
            if action == 'free_completed':
                live.pop(event.get('addr'), None)
            unmatched = found is None
            frames = frames if unmatched else found
        user = ref.user_frame(frames)
        if user is None:
            continue
        checked += 1
        want = ref.render_frame(user)
        source = row.get('source') or ''
        if unmatched and kind != 'allocation':
            ok = (source.startswith('freed at ') and
                  source.endswith(want + ' (allocated before the trace)'))
        else:
            ok = source == want
        if not ok and len(problems) < 5:
            problems.append('event %d: source %r, want %r' % (row.get('index'), source, want))
    if problems:
        raise Failure('; '.join(problems))
    return '%d of %d events have a frame of user code, each keyed by it' % (checked, len(rows))


def check_fixtures(memsnap, folder, attempt, skip):
    real = Path(folder)
    files = [p for p in sorted(real.rglob('*'))
             if p.is_file() and p.suffix.lower() not in ('.md', '.txt', '.json')]
    if not files:  # a folder without snapshots would pass while checking nothing
        raise Failure('no snapshot in %s' % real)
    for p in files:
        label = 'real/' + str(p.relative_to(real))
        path = str(p)
        try:
            snapshot(path)
            parsed, error = testlib.parse_json(memsnap, path)  # shared with the other drivers
            if parsed is None:
                raise Failure('parse --json: %s' % (error.strip().splitlines() or ['(no stderr)'])[-1])
        except Exception as e:
            skip('real', '%s: not a readable snapshot (%s)' % (label, str(e).splitlines()[0][:160]))
            continue
        device = parsed.get('device')
        attempt('invariant-c', label, check_invariant_c, memsnap, path, device)
        if not parsed.get('device_traces', {}).get('event_count'):
            skip('real', '%s: no trace events' % label)
            continue
        attempt('user-frames', label, check_user_frames, memsnap, path, device)
        try:
            times = probe_times(path, device)
        except Exception as e:
            skip('real-time', '%s: %s' % (label, e))
            times = []
        for t in times:
            attempt('invariant-b', '%s --time %s' % (label, t),
                    check_invariant_b, memsnap, path, device, t)
            attempt('replay-to-time', '%s --time %s' % (label, t),
                    check_replay_to_time, memsnap, path, device, t, True)
        if parsed.get('profiler_steps'):
            attempt('invariant-a', label, check_invariant_a, memsnap, path, device)
            attempt('replay-step', label, check_replay_step, memsnap, path, device, True)


class Attempts:
    """Runs each check of the oracle comparison: one PASS/FAIL/SKIP line each,
    the failed lines kept."""

    def __init__(self):
        self.counts = {'PASS': 0, 'FAIL': 0, 'SKIP': 0}
        self.failures = []

    def __call__(self, check, label, fn, *fargs):
        try:
            status, detail = 'PASS', fn(*fargs)
        except Failure as e:
            status, detail = 'FAIL', str(e)
        except Skip as e:
            status, detail = 'SKIP', str(e)
        except Exception as e:  # a bug in the test or the oracle must show
            status, detail = 'FAIL', 'test error: %s: %s' % (type(e).__name__, e)
        line = '%s %-16s %s%s' % (status, check, label, (': ' + detail) if detail else '')
        print(line, flush=True)
        self.counts[status] += 1
        if status == 'FAIL':
            self.failures.append(line)

    def skip(self, check, detail):
        print('SKIP %-16s %s' % (check, detail))
        self.counts['SKIP'] += 1

    def verify(self):
        print('\n%d passed, %d failed, %d skipped'
              % (self.counts['PASS'], self.counts['FAIL'], self.counts['SKIP']))
        assert not self.failures, '\n'.join(self.failures)


def test_replays_agree_with_the_oracle_on_generated_files(memsnap, work):
    os.makedirs(work, exist_ok=True)
    attempts = Attempts()
    check_generated(memsnap, work, attempts)
    attempts.verify()


@pytest.mark.fixtures
def test_replays_agree_with_the_oracle_on_every_fixture(memsnap, fixtures_dir):
    attempts = Attempts()
    check_fixtures(memsnap, fixtures_dir, attempts, attempts.skip)
    attempts.verify()
