#!/usr/bin/env python3
"""Self-test of `make_snapshot.py --replicate`: a 50,000-entry file made from a
real fixture must be what the option promises.

  * the bytes are the same when generated twice (deterministic);
  * CPython's pickle reads it back (data only) with exactly --events entries
    on the replicated device, the other devices' traces as in the fixture;
  * times never go backwards on any device;
  * every block lies inside its segment, and no two segments of a device
    overlap (the repetitions' address ranges are disjoint);
  * the frame dicts are the fixture's, shared (as many distinct objects);
  * `memsnap parse --json` counts the entries and finds the allocator history
    as exact as on the fixture itself (fragmentation.exact);
  * a pickle that needs a global is refused with a clear message.

Skips (exit 77, a 'skipped' line: CTest's SKIP_RETURN_CODE) when the fixtures folder is absent.

    check_replicate.py [--memsnap build/memsnap] [--fixtures DIR] [--fixture NAME]
                       [--events 50000]
"""
import argparse
import collections
import json
import os
import pickle
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(HERE, 'make_snapshot.py')
FIXTURES = os.path.join(os.path.dirname(REPO), 'shared', 'fixtures', 'real')
FIXTURE = 'kkaitlyn111_cs336-a2-systems__memory_files_memory_ctx512_fullstep_.pickle'


class DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f'global {module}.{name}')


def load(path):
    with open(path, 'rb') as f:
        return DataOnly(f).load()


def parse_json(memsnap, path):
    p = subprocess.run([memsnap, 'parse', path, '--json'], capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f'memsnap parse {path}: exit {p.returncode}: '
                           f'{p.stderr.decode("utf-8", "replace").strip()[-300:]}')
    return json.loads(p.stdout)


def generate(fixture, events, out):
    return subprocess.run([sys.executable, GENERATOR, '--replicate', fixture, '--events',
                           str(events), '--out', out], capture_output=True, text=True, timeout=600)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--memsnap', default=os.path.join(REPO, 'build', 'memsnap'))
    ap.add_argument('--fixtures', default=FIXTURES)
    ap.add_argument('--fixture', default=FIXTURE, help='file name in --fixtures')
    ap.add_argument('--events', type=int, default=50_000)
    ap.add_argument('--only', choices=('fixtures',), help='accepted for the CTest driver; '
                    'this check only reads a fixture')
    args = ap.parse_args()
    fixture = os.path.join(args.fixtures, args.fixture)
    if not os.path.isdir(args.fixtures):
        print(f'skipped: no fixtures folder {args.fixtures}')
        return 77
    if not os.path.isfile(fixture):
        print(f'skipped: no fixture {fixture}')
        return 77

    failures = []

    def check(name, ok, detail=''):
        print(('ok   ' if ok else 'FAIL ') + name + (f': {detail}' if detail and not ok else ''))
        if not ok:
            failures.append(name)

    with tempfile.TemporaryDirectory(prefix='memsnap-replicate-') as tmp:
        out = os.path.join(tmp, 'replicated.pickle')
        again = os.path.join(tmp, 'again.pickle')
        p = generate(fixture, args.events, out)
        if p.returncode != 0:
            print(f'FAIL generator exit {p.returncode}: {p.stderr.strip()[-400:]}')
            return 1
        q = generate(fixture, args.events, again)
        with open(out, 'rb') as a, open(again, 'rb') as b:
            check('deterministic (same bytes twice)', q.returncode == 0 and a.read() == b.read())

        src, rep = load(fixture), load(out)
        src_traces, rep_traces = src['device_traces'], rep['device_traces']
        lengths = [len(t) for t in src_traces]
        device = lengths.index(max(lengths))
        check('one trace per device, as in the fixture', len(rep_traces) == len(src_traces))
        check(f'device {device} has exactly {args.events} entries',
              len(rep_traces[device]) == args.events, str(len(rep_traces[device])))
        check('the other devices keep their traces',
              all(len(rep_traces[d]) == lengths[d] for d in range(len(src_traces)) if d != device))
        backwards = 0
        for trace in rep_traces:
            times = [e['time_us'] for e in trace if isinstance(e.get('time_us'), int)]
            backwards += sum(1 for x, y in zip(times, times[1:]) if y < x)
        check('times non-decreasing on every device', backwards == 0, f'{backwards} steps back')
        outside, overlaps = 0, 0
        by_device = {}
        for seg in rep['segments']:
            lo, hi = seg['address'], seg['address'] + seg['total_size']
            by_device.setdefault(seg.get('device', 0), []).append((lo, hi))
            for b in seg.get('blocks', []):
                if not (lo <= b['address'] and b['address'] + b['size'] <= hi):
                    outside += 1
        for ranges in by_device.values():
            ranges.sort()
            overlaps += sum(1 for (_, h), (l, _) in zip(ranges, ranges[1:]) if l < h)
        check('every block inside its segment', outside == 0, f'{outside} outside')
        check('no two segments of a device overlap', overlaps == 0, f'{overlaps} overlaps')
        src_frames = {id(f) for e in src_traces[device] for f in e.get('frames', [])}
        rep_frames = {id(f) for e in rep_traces[device] for f in e.get('frames', [])}
        check('frame dicts shared as in the fixture (no copies)',
              len(rep_frames) <= len(src_frames), f'{len(rep_frames)} vs {len(src_frames)}')
        del src, rep, src_traces, rep_traces

        try:
            a, b = parse_json(args.memsnap, fixture), parse_json(args.memsnap, out)
        except (RuntimeError, ValueError) as e:
            print(f'FAIL {e}')
            return 1
        check('memsnap parse counts the entries',
              b['device_traces']['event_count'] == args.events, str(b['device_traces']))
        fa, fb = a['fragmentation'].get('exact'), b['fragmentation'].get('exact')
        check('allocator history as exact as on the fixture', fa == fb,
              f'fixture {fa}, replicated {fb}')
        check('no anomalies', not any(b['anomalies'].values()), str(b['anomalies']))

        bad = os.path.join(tmp, 'global.pickle')
        with open(bad, 'wb') as f:
            pickle.dump({'device_traces': [[{'action': 'alloc', 'x': collections.OrderedDict()}]]},
                        f, protocol=4)
        p = generate(bad, 10, os.path.join(tmp, 'refused.pickle'))
        check('a pickle that needs a global is refused',
              p.returncode == 1 and 'needs the global collections.OrderedDict' in p.stderr
              and not os.path.exists(os.path.join(tmp, 'refused.pickle')), p.stderr.strip())

    if failures:
        print(f'{len(failures)} check(s) failed')
        return 1
    print(f'ok: --replicate {args.fixture} --events {args.events}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
