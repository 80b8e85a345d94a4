#!/usr/bin/env python3
"""Self-test of `make_snapshot.py --replicate`: a 50,000-entry file made from a
real fixture must be what the option promises.

  * the bytes are the same when generated twice (deterministic);
  * CPython's pickle reads it back (data only) with exactly --events entries
    on the replicated device, the other devices' traces as in the fixture;
  * times never go backwards on any device;
  * every block lies inside its segment, and no two segments of a device
    overlap (the repetitions' address ranges are disjoint);
  * the dump holds exactly one repetition's segments: the device's segments
    and blocks are the fixture's, moved to the last repetition's range (the
    other devices' are the fixture's);
  * the trace leaves nothing live outside the dump: every block it allocates
    and every segment it creates (segment_alloc) is freed again unless the
    dump holds it (the repetitions before the last are closed out);
  * every entry has the keys of one of the fixture's entries (the close-out
    entries too);
  * the frame dicts are the fixture's, shared (as many distinct objects);
    the frame lists are new in every repetition (at least (repetitions - 1)
    x the fixture's distinct lists), and with --shared-frame-lists no more
    than the fixture's plus the close-out's;
  * `memsnap parse --json` counts the entries and finds the allocator history
    as exact as on the fixture itself (fragmentation.exact), and `memsnap
    segments --json` no more entries that do not fit (misfits) than the
    fixture's own, once per repetition;
  * the state before the trace (segments and blocks, walked back from the
    dump) is one repetition's, not one per repetition (every repetition but
    the first opens with entries that create the fixture's pre-trace state):
    memsnap counts the segments (mapped ranges) and blocks at the start that
    the walk finds; and with N chosen so that the first repetition is the
    whole fixture trace and its close-out, the state at the start is the
    fixture's (the same addresses, sizes, requested sizes and states), and
    memsnap's history of that file is as exact as the fixture's, with as
    many misfits each way and as many segments and blocks at the start;
  * a pickle that needs a global is refused with a clear message.

Skipped (exit 77: CTest's SKIP_RETURN_CODE) when the fixtures folder is absent.

    python3 -m pytest tests/gen/check_replicate.py --memsnap build/memsnap --part fixtures
                      [--fixtures-dir DIR]
"""
import argparse
import bisect
import collections
import json
import os
import pickle
import subprocess
import sys
import tempfile

import pytest
from pytest_check import check

import testlib
from make_snapshot import pre_trace_state  # beside this file: the same walk memsnap does

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(HERE, 'make_snapshot.py')
FIXTURES = os.path.join(os.path.dirname(REPO), 'shared', 'fixtures', 'real')
EVENTS = 50_000  # entries of the replicated trace
FIXTURE = 'kkaitlyn111_cs336-a2-systems__memory_files_memory_ctx512_fullstep_.pickle'


class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f'global {module}.{name}')


def load(path):
    with open(path, 'rb') as f:
        return DataOnly(f).load()


def memsnap_json(memsnap, command, path, device):
    p = subprocess.run([memsnap, command, path, '--json', '--device', str(device)],
                       capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f'memsnap {command} {path}: exit {p.returncode}: '
                           f'{p.stderr.decode("utf-8", "replace").strip()[-300:]}')
    return json.loads(p.stdout)


def generate(fixture, events, out, *extra):
    return subprocess.run([sys.executable, GENERATOR, '--replicate', fixture, '--events',
                           str(events), '--out', out] + list(extra),
                          capture_output=True, text=True, timeout=600)


def segment_key(seg, shift):
    """A segment and its blocks, addresses moved down by `shift`."""
    blocks = tuple((b['address'] - shift if 'address' in b else None, b.get('size'),
                    b.get('requested_size'), b.get('state')) for b in seg.get('blocks', []))
    return (seg['address'] - shift, seg['total_size'], seg.get('is_expandable'), blocks)


def left_live(trace, segments):
    """(blocks, segments) the trace allocates (creates) and leaves live that
    no dump segment holds. A free without its alloc (a cut first repetition)
    is ignored."""
    ranges = sorted((s['address'], s['address'] + s['total_size']) for s in segments)
    starts = [lo for lo, _ in ranges]

    def in_dump(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return i >= 0 and addr < ranges[i][1]

    blocks, segs = set(), set()
    for e in trace:
        action, addr = e.get('action'), e.get('addr')
        if action == 'alloc':
            blocks.add(addr)
        elif action == 'free_completed':
            blocks.discard(addr)
        elif action == 'segment_alloc':
            segs.add(addr)
        elif action == 'segment_free':
            segs.discard(addr)
    return (sum(1 for a in blocks if not in_dump(a)),
            sum(1 for a in segs if not in_dump(a)))


@pytest.mark.fixtures
def test_a_replicated_fixture_is_exact(memsnap, fixtures_dir):
    """The fixture replicated to EVENTS entries: deterministic, consistent with
    its dump, and as exact a replay for memsnap as the fixture's own."""
    events = EVENTS
    fixture = os.path.join(fixtures_dir, FIXTURE)
    if not os.path.isfile(fixture):
        testlib.skip_absent(f'the fixture {fixture}')

    with tempfile.TemporaryDirectory(prefix='memsnap-replicate-') as tmp:
        out = os.path.join(tmp, 'replicated.pickle')
        again = os.path.join(tmp, 'again.pickle')
        manifest_path = os.path.join(tmp, 'manifest.json')
        p = generate(fixture, events, out, '--manifest', manifest_path)
        if p.returncode != 0:
            pytest.fail(f'generator exit {p.returncode}: {p.stderr.strip()[-400:]}')
        q = generate(fixture, events, again)
        with open(out, 'rb') as a, open(again, 'rb') as b:
            with check('deterministic (same bytes twice)'):
                assert q.returncode == 0 and a.read() == b.read()

        with open(manifest_path) as f:
            manifest = json.load(f)
        src, rep = load(fixture), load(out)
        src_traces, rep_traces = src['device_traces'], rep['device_traces']
        lengths = [len(t) for t in src_traces]
        device = lengths.index(max(lengths))
        reps = manifest['repetitions']
        with check('one trace per device, as in the fixture'):
            assert len(rep_traces) == len(src_traces)
        with check(f'device {device} has exactly {events} entries'):
            assert len(rep_traces[device]) == events, str(len(rep_traces[device]))
        with check('the other devices keep their traces'):
            assert all(len(rep_traces[d]) == lengths[d] for d in range(len(src_traces)) if d != device)
        backwards = 0
        for trace in rep_traces:
            times = [e['time_us'] for e in trace if isinstance(e.get('time_us'), int)]
            backwards += sum(1 for x, y in zip(times, times[1:]) if y < x)
        with check('times non-decreasing on every device'):
            assert backwards == 0, f'{backwards} steps back'
        outside, overlaps = 0, 0
        by_device = {}
        for seg in rep['segments']:
            lo, hi = seg['address'], seg['address'] + seg['total_size']
            by_device.setdefault(seg.get('device', 0), []).append((lo, hi))
            for b in seg.get('blocks', []):
                if 'address' not in b:   # PyTorch 2.0 blocks: laid out in order, no address
                    continue
                if not (lo <= b['address'] and b['address'] + b['size'] <= hi):
                    outside += 1
        for ranges in by_device.values():
            ranges.sort()
            overlaps += sum(1 for (_, h), (l, _) in zip(ranges, ranges[1:]) if l < h)
        with check('every block inside its segment'):
            assert outside == 0, f'{outside} outside'
        with check('no two segments of a device overlap'):
            assert overlaps == 0, f'{overlaps} overlaps'

        def on(seg, d):
            return seg.get('device', 0) == d
        shift = (reps - 1) * manifest['address_stride']
        src_own = sorted(segment_key(s, 0) for s in src['segments'] if on(s, device))
        rep_own = sorted(segment_key(s, shift) for s in rep['segments'] if on(s, device))
        with check(f'the dump holds one repetition\'s segments ({len(src_own)}: the last one\'s)'):
            assert rep_own == src_own, (f'{len(rep_own)} segments, the fixture {len(src_own)}'
                                        + ('' if len(rep_own) != len(src_own) else ', not the fixture\'s shifted'))
        with check('the other devices keep their segments'):
            assert ([s for s in rep['segments'] if not on(s, device)]
                    == [s for s in src['segments'] if not on(s, device)])
        dump_own = [s for s in rep['segments'] if on(s, device)]
        blocks_left, segs_left = left_live(rep_traces[device], dump_own)
        with check('the trace leaves nothing live outside the dump (repetitions closed out)'):
            assert blocks_left == 0 and segs_left == 0, (
                f'{blocks_left} blocks and {segs_left} segments live outside the dump at the end')
        src_keys = {tuple(e) for t in src_traces for e in t}
        odd_keys = {tuple(e) for t in rep_traces for e in t} - src_keys
        with check('every entry has the keys of a fixture entry'):
            assert not odd_keys, str(odd_keys)[:300]

        src_frames = {id(f) for e in src_traces[device] for f in e.get('frames', [])}
        rep_frames = {id(f) for e in rep_traces[device] for f in e.get('frames', [])}
        with check('frame dicts shared as in the fixture (no copies)'):
            assert len(rep_frames) <= len(src_frames), f'{len(rep_frames)} vs {len(src_frames)}'
        src_lists = len({id(e['frames']) for e in src_traces[device] if 'frames' in e})
        rep_lists = len({id(e['frames']) for e in rep_traces[device] if 'frames' in e})
        with check('frame lists new in every repetition'):
            assert rep_lists >= (reps - 1) * src_lists, f'{rep_lists} distinct lists, {reps} repetitions of {src_lists}'
        del src, rep, src_traces, rep_traces

        shared = os.path.join(tmp, 'shared.pickle')
        p = generate(fixture, events, shared, '--shared-frame-lists')
        if p.returncode != 0:
            check.fail('--shared-frame-lists: %s' % p.stderr.strip()[-400:])
        else:
            trace = load(shared)['device_traces'][device]
            lists = len({id(e['frames']) for e in trace if 'frames' in e})
            extra = manifest['closeout_entries'] + manifest['opening_entries']
            with check('--shared-frame-lists: the fixture\'s lists (and the close-out\'s and '
                       'opening\'s) only'):
                assert lists <= src_lists + extra, f'{lists} distinct lists'
            smaller = os.path.getsize(shared) < os.path.getsize(out)
            with check('--shared-frame-lists: a smaller file' if src_lists else
                       '--shared-frame-lists: the same file (the fixture has no frame lists)'):
                assert smaller if src_lists else os.path.getsize(shared) == os.path.getsize(out), (
                    f'{os.path.getsize(shared)} vs {os.path.getsize(out)} bytes')
            del trace

        try:
            a, b = (memsnap_json(memsnap, 'parse', f, device) for f in (fixture, out))
            ha, hb = (memsnap_json(memsnap, 'segments', f, device)['history']
                      for f in (fixture, out))
        except (RuntimeError, ValueError, KeyError) as e:
            pytest.fail(str(e))
        with check('memsnap parse counts the entries'):
            assert b['device_traces']['event_count'] == events, str(b['device_traces'])
        fa, fb = ((d.get('fragmentation') or {}).get('exact') for d in (a, b))
        with check('allocator history as exact as on the fixture'):
            assert fa == fb, f'fixture {fa}, replicated {fb}'
        with check('no anomalies'):
            assert not any(b['anomalies'].values()), str(b['anomalies'])
        fits = [(h or {}).get('misfits_backward', 0) + (h or {}).get('misfits_forward', 0)
                for h in (ha, hb)]
        with check('no more entries that do not fit than the fixture\'s, once per repetition'):
            assert fits[1] <= reps * fits[0], f'fixture {fits[0]}, replicated {fits[1]}'

        def start_state(snap):
            trace = snap['device_traces'][device]
            own = [s for s in snap.get('segments', []) if on(s, device)]
            ranges, blocks = pre_trace_state(trace, own)
            return ({a: tuple(r) for a, r in ranges.items()},
                    {a: tuple(b) for a, b in blocks.items()})

        rep = load(out)
        ranges, blocks = start_state(rep)
        del rep
        at = (hb.get('segments_at_start'), hb.get('blocks_at_start'))
        with check('memsnap finds the state at the start that the walk back finds'):
            assert at == (len(ranges), len(blocks)), (
                f'memsnap {at}, the walk {len(ranges)} ranges, {len(blocks)} blocks')
        src = load(fixture)
        src_ranges, src_blocks = start_state(src)
        lo = min([e['addr'] for e in src['device_traces'][device]
                  if isinstance(e.get('addr'), int) and e.get('action') != 'oom']
                 + [s['address'] for s in src.get('segments', []) if on(s, device)] or [0])
        del src
        later = sum(1 for a in list(ranges) + list(blocks)
                    if a >= lo + manifest['address_stride'])
        with check('the state at the start is one repetition\'s (the first\'s), not one per repetition'):
            assert later == 0, (f'{later} of {len(ranges)} ranges and {len(blocks)} blocks at the start '
                                'lie in later repetitions\' address ranges')

        # The first repetition whole (the fixture's trace and its close-out):
        # the state before it is the fixture's.
        whole_events = (events - manifest['first_repetition_entries']
                        + manifest['fixture_entries'] + manifest['closeout_entries'])
        whole = os.path.join(tmp, 'whole.pickle')
        p = generate(fixture, whole_events, whole)
        if p.returncode != 0:
            check.fail(f'--events {whole_events} (the first repetition whole): %s' % p.stderr.strip()[-400:])
        else:
            ranges, blocks = start_state(load(whole))
            with check(f'--events {whole_events} (the first repetition whole): the state at the '
                       f'start is the fixture\'s ({len(src_ranges)} ranges, {len(src_blocks)} blocks)'):
                assert (ranges, blocks) == (src_ranges, src_blocks), f'{len(ranges)} ranges, {len(blocks)} blocks'
            try:
                hw = memsnap_json(memsnap, 'segments', whole, device)['history']
            except (RuntimeError, ValueError, KeyError) as e:
                hw = {'error': str(e)}
            keys = ('exact', 'misfits_backward', 'misfits_forward', 'segments_at_start',
                    'blocks_at_start')
            want = {k: (ha or {}).get(k) for k in keys}
            got = {k: (hw or {}).get(k) for k in keys}
            with check(f'--events {whole_events}: memsnap\'s history as the fixture\'s (exact, '
                       'misfits each way, segments and blocks at the start)'):
                assert got == want, f'fixture {want}, replicated {got}'

        bad = os.path.join(tmp, 'global.pickle')
        with open(bad, 'wb') as f:
            pickle.dump({'device_traces': [[{'action': 'alloc', 'x': collections.OrderedDict()}]]},
                        f, protocol=4)
        p = generate(bad, 10, os.path.join(tmp, 'refused.pickle'))
        with check('a pickle that needs a global is refused'):
            assert (p.returncode == 1 and 'needs the global collections.OrderedDict' in p.stderr
                    and not os.path.exists(os.path.join(tmp, 'refused.pickle'))), p.stderr.strip()


def distinct(trace, key):
    """How many distinct objects the entries hold under `key` (frame lists),
    and how many distinct dicts in those lists (frame dicts)."""
    lists = {id(e[key]): e[key] for e in trace if isinstance(e.get(key), list)}
    return len(lists), len({id(d) for frames in lists.values() for d in frames})


@pytest.mark.fixtures
def test_a_streamed_file_holds_the_same_snapshot(memsnap, fixtures_dir):
    """--stream (each repetition written as it is made, for files too large
    to hold) writes the snapshot the unstreamed writer does at the same
    protocol: equal when CPython reads both, the same objects shared (as
    many distinct frame lists and frame dicts), the same memsnap parse, and
    about the same size; protocol 4 is refused."""
    fixture = os.path.join(fixtures_dir, FIXTURE)
    if not os.path.isfile(fixture):
        testlib.skip_absent(f'the fixture {fixture}')
    with tempfile.TemporaryDirectory(prefix='memsnap-stream-') as tmp:
        held, streamed = os.path.join(tmp, 'held.pickle'), os.path.join(tmp, 'streamed.pickle')
        for out, extra in ((held, ['--protocol', '3']), (streamed, ['--stream'])):
            p = generate(fixture, EVENTS, out, *extra)
            assert p.returncode == 0, p.stderr[-400:]
        a, b = load(held), load(streamed)
        assert a == b
        device = max(range(len(a['device_traces'])), key=lambda d: len(a['device_traces'][d]))
        lists, dicts = distinct(b['device_traces'][device], 'frames')
        assert (lists, dicts) == distinct(a['device_traces'][device], 'frames')
        assert lists > 1 and dicts > 1
        size_a, size_b = os.path.getsize(held), os.path.getsize(streamed)
        assert abs(size_b - size_a) <= size_a // 100, (size_a, size_b)
        parse_a, parse_b = (memsnap_json(memsnap, 'parse', p, device) for p in (held, streamed))
        for doc in (parse_a, parse_b):
            for key in ('file', 'file_size_bytes', 'pickle_size_bytes'):
                doc.pop(key)
        assert parse_a == parse_b
        p = generate(fixture, 100, os.path.join(tmp, 'p4.pickle'), '--stream', '--protocol', '4')
        assert p.returncode == 2 and '--stream writes protocol 2 or 3' in p.stderr, p.stderr
