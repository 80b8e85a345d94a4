#!/usr/bin/env python3
"""A small, independent Python implementation of DESIGN.md's replay semantics.

Written from DESIGN.md ("Semantics") alone, without reading memsnap's C++, to
serve as an oracle for three commands (frame depth 1, Python frames):

  replay_step(path)            == `memsnap replay-step PATH --all-steps --json --top 1000000`
  replay_to_time(path, T)      == `memsnap replay-to-time PATH --time T --json --top 1000000`
  compare(path_a, path_b)      == `memsnap compare A B --json --top 1000000`
                                  (the keys listed in COMPARE_KEYS below)

Building blocks, each a direct transcription of one DESIGN.md rule:

  load(path)                   the pickled value; nothing is imported or called
  choose_device(snap)          first device with trace events, else with segments
  replay(events, stop=None)    the linear replay: running delta, live map, peak
  baseline(snap, dev, events)  segments_active - live at end + unmatched free bytes
  steps(snap, dev)             ProfilerStep#N -> {start, end, complete}
  source_key(frames)           the depth-1 source key

Clarity over speed: the live set at a position is obtained by replaying the
prefix again from the first event (files used in tests are small).

Standard library only (Python 3.11).
"""

import gzip
import io
import pickle
import re
import sys

# ---------------------------------------------------------------------------
# Loading


class _RefusingUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('refusing to import %s.%s' % (module, name))

    def persistent_load(self, pid):
        raise pickle.UnpicklingError('refusing persistent id %r' % (pid,))


def load(path):
    """The snapshot value. A top-level list is `memory_snapshot()` (segments only)."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:2] == b'\x1f\x8b':
        data = gzip.decompress(data)
    value = _RefusingUnpickler(io.BytesIO(data)).load()
    if isinstance(value, list):
        value = {'segments': value}
    return value


def device_traces(snap):
    traces = snap.get('device_traces') or []
    return [t if isinstance(t, list) else [] for t in traces]


def segments_of(snap, dev):
    return [s for s in (snap.get('segments') or [])
            if isinstance(s, dict) and s.get('device') == dev]


def choose_device(snap):
    """Default device: the first with trace events, else the first with segments."""
    for dev, trace in enumerate(device_traces(snap)):
        if trace:
            return dev
    devs = sorted({s.get('device') for s in (snap.get('segments') or [])
                   if isinstance(s, dict) and isinstance(s.get('device'), int)})
    return devs[0] if devs else 0


def events_of(snap, dev):
    traces = device_traces(snap)
    if dev < len(traces):
        return [e for e in traces[dev] if isinstance(e, dict)]
    return []


# ---------------------------------------------------------------------------
# Source keys (frame depth 1): DESIGN.md's v2 rule, memsnap's default. The
# first Python frame that is no library frame names the allocation; with none,
# (no C++ frames in the generated files) the first Python library frame.

# Library code: PyTorch, Triton, torch.compile's generated code, frozen
# modules, the reference's other internal paths, the helper packages (thin
# wrappers that hand the tensor to a torch op) and the standard library: the
# interpreter's own lib folder (lib, Lib or lib64, any case), either
# lib/python3.X/... or a standard-library module or package directly in it,
# never under site-packages or dist-packages.
LIBRARY_PARTS = ('/torch/', '/triton/', 'torchinductor_', '<eval_with_key', '<frozen ',
                 '/hydra/', '/cuda/', 'importlib', 'runpy.py')
HELPER_PARTS = ('/einops/', '/opt_einsum/', '/einx/', '/torch_npu/', '/accelerate/hooks.py')
THIRD_PARTY_PARTS = ('site-packages/', 'dist-packages/')
# C, C++, CUDA and assembly sources (glibc's clone3.S), headers, shared objects.
CPP_SUFFIXES = ('.cpp', '.cc', '.cxx', '.c++', '.c', '.h', '.hh', '.hpp', '.hxx', '.inl', '.ipp',
                '.tcc', '.cu', '.cuh', '.S', '.s', '.asm', '.so')
VERSIONED_SO = re.compile(r'\.so\.[0-9.]+$')
# This interpreter's own list, plus modules later versions dropped.
STDLIB_MODULES = {m.lower() for m in getattr(sys, 'stdlib_module_names', ())} | {
    'asynchat', 'asyncore', 'distutils', 'imp', 'smtpd', 'binhex', 'formatter', 'symbol',
    'dummy_threading', '_dummy_thread', '_bootlocale', 'macpath'}
PYTHON_FOLDER = re.compile(r'python[23](\.\d+)?t?$')


def is_standard_library(path):
    if any(p in path for p in THIRD_PARTY_PARTS):
        return False
    parts = path.lower().split('/')
    for i, part in enumerate(parts[:-1]):
        if part not in ('lib', 'lib64'):
            continue
        rest = parts[i + 1:]
        if len(rest) > 1 and PYTHON_FOLDER.match(rest[0]):
            return True
        module = rest[0][:-3] if len(rest) == 1 and rest[0].endswith('.py') else rest[0]
        if (len(rest) > 1 or rest[0].endswith('.py')) and module in STDLIB_MODULES:
            return True
    return False


def is_library_file(filename):
    path = (filename or '').replace('\\', '/')
    if path.startswith(('torch/', 'triton/')) or any(p in path for p in LIBRARY_PARTS):
        return True
    if any(p in '/' + path for p in HELPER_PARTS):
        return True
    return is_standard_library(path)


def is_python_frame(frame):
    filename = frame.get('filename') or ''
    if filename in ('', '??'):
        return False
    if filename.endswith('.py') or filename.startswith('<'):
        return True
    return (not filename.endswith(CPP_SUFFIXES) and not VERSIONED_SO.search(filename)
            and frame.get('line') != 0)


def render_frame(frame):
    filename = (frame.get('filename') or '').replace('\\', '/')
    return '%s@%s:%s' % (frame.get('name') or '', filename.rsplit('/', 1)[-1],
                         frame.get('line'))


def user_frame(frames):
    """The first Python frame that is no library frame, or None."""
    for frame in frames or []:
        if isinstance(frame, dict) and is_python_frame(frame) \
                and not is_library_file(frame.get('filename')):
            return frame
    return None


def source_key(frames):
    frames = [f for f in (frames or []) if isinstance(f, dict)]
    if not frames:
        return '<no frames>'
    user = user_frame(frames)
    if user is not None:
        return render_frame(user)
    python = [f for f in frames if is_python_frame(f)]
    return render_frame(python[0]) if python else '<no frames>'


def group_by_source(live):
    """live: {addr: (size, frames, index)} -> [{source, bytes, count}] sorted
    by bytes desc, then source name asc."""
    table = {}
    for size, frames, _index in live.values():
        key = source_key(frames)
        row = table.setdefault(key, {'source': key, 'bytes': 0, 'count': 0})
        row['bytes'] += size
        row['count'] += 1
    return sorted(table.values(), key=lambda r: (-r['bytes'], r['source']))


# ---------------------------------------------------------------------------
# Replay


class ReplayState:
    """The state of a replay after some prefix of the trace."""

    def __init__(self):
        self.position = 0          # number of events applied
        self.delta = 0
        self.live = {}             # addr -> (size, frames, index of its alloc)
        self.alloc_count = 0
        self.alloc_bytes = 0
        self.free_count = 0        # free_completed entries
        self.unmatched_frees = 0
        self.unmatched_free_bytes = 0
        self.replaced_bytes = 0    # live bytes dropped by an alloc at a live address

    def apply(self, event):
        """Applies one event; returns (kind, freed entry or None)."""
        index = self.position
        self.position += 1
        action = event.get('action')
        if action == 'alloc':
            size = event.get('size', 0)
            addr = event.get('addr')
            old = self.live.get(addr)
            if old is not None:
                self.replaced_bytes += old[0]
            self.live[addr] = (size, event.get('frames'), index)
            self.delta += size
            self.alloc_count += 1
            self.alloc_bytes += size
            return 'alloc', None
        if action == 'free_completed':
            self.free_count += 1
            entry = self.live.pop(event.get('addr'), None)
            if entry is not None:
                self.delta -= entry[0]
                return 'free', entry
            size = event.get('size', 0)
            self.delta -= size
            self.unmatched_frees += 1
            self.unmatched_free_bytes += size
            return 'unmatched', None
        return 'other', None

    def live_bytes(self):
        return sum(size for size, _, _ in self.live.values())


def state_at(events, position):
    """The replay state after the first `position` events."""
    state = ReplayState()
    for event in events[:position]:
        state.apply(event)
    return state


def replay(events):
    """The full-trace replay: the end state plus the peak. peak_position is the
    number of events applied at the peak (the peak alloc included), 0 when no
    alloc raised the delta above 0."""
    state = ReplayState()
    peak_delta = 0
    peak_position = 0
    for event in events:
        kind, _ = state.apply(event)
        if kind == 'alloc' and state.delta > peak_delta:
            peak_delta = state.delta
            peak_position = state.position
    return {'state': state, 'peak_delta': peak_delta, 'peak_position': peak_position,
            'end_delta': state.delta}


def segments_summary(snap, dev):
    count = reserved = allocated = active = 0
    for s in segments_of(snap, dev):
        count += 1
        reserved += s.get('total_size') or 0
        allocated += s.get('allocated_size') or 0
        a = s.get('active_size')
        active += (s.get('allocated_size') or 0) if a is None else a
    return {'count': count, 'total_size': reserved, 'allocated_size': allocated,
            'active_size': active, 'awaiting_free_size': active - allocated,
            'inactive_size': reserved - active}


def baseline(snap, dev, events):
    """DESIGN.md: segments_active - (bytes of allocs still live at the end of the
    replay) + (bytes of unmatched frees)."""
    end = replay(events)['state']
    active = segments_summary(snap, dev)['active_size']
    still_live = end.live_bytes()
    return {'baseline_at_start': active - still_live + end.unmatched_free_bytes,
            'segments_active': active,
            'pre_existing_freed': end.unmatched_free_bytes,
            'profiling_still_live': still_live}


# ---------------------------------------------------------------------------
# Steps

_STEP = re.compile(r'ProfilerStep#(\d+)$')


def annotations_of(snap, dev):
    return [a for a in (snap.get('external_annotations') or [])
            if isinstance(a, dict) and a.get('device') == dev]


def steps(snap, dev):
    """{N: {'start': us, 'end': us or None, 'complete': bool}} in step order.
    A step exists when it has a START; END counts only with time_us > 0 and
    not before the START (an END before its START leaves the step incomplete)."""
    out = {}
    for a in annotations_of(snap, dev):
        m = _STEP.match(str(a.get('name')))
        if not m:
            continue
        n = int(m.group(1))
        t = a.get('time_us')
        if a.get('stage') == 'START' and n not in out:
            out[n] = {'start': t, 'end': None, 'complete': False}
        elif (a.get('stage') == 'END' and n in out and not out[n]['complete']
              and isinstance(t, int) and t > 0 and t >= (out[n]['start'] or 0)):
            out[n]['end'] = t
            out[n]['complete'] = True
    return dict(sorted(out.items()))


def _times(events):
    times = [e.get('time_us') for e in events]
    if any(not isinstance(t, int) for t in times):
        raise ValueError('trace entries without time_us')
    if any(b < a for a, b in zip(times, times[1:])):
        # the window/prefix would not be contiguous; this reference only
        # handles time-ordered traces
        raise ValueError('time_us is not monotonic')
    return times


def step_window(times, start, end):
    """[w0, w1): the events with start <= time_us <= end (end None: trace end)."""
    w0 = sum(1 for t in times if t < start)
    w1 = len(times) if end is None else sum(1 for t in times if t <= end)
    return w0, max(w0, w1)


def step_annotations(snap, dev, start, end):
    """Counts of the device's START marks inside the window, ProfilerStep
    excluded, by full name (what follows '#' too, as the reference scripts
    count them: "Optimizer.step#AdamW.step")."""
    counts = {}
    for a in annotations_of(snap, dev):
        name = str(a.get('name'))
        t = a.get('time_us')
        if a.get('stage') != 'START' or _STEP.match(name) or not isinstance(t, int):
            continue
        if t >= start and (end is None or t <= end):
            counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def analyse_step(snap, dev, events, times, base, n, info):
    w0, w1 = step_window(times, info['start'], info['end'])
    state = state_at(events, w0)
    start_delta = state.delta
    peak = 0
    peak_position = w0
    alloc_count = free_count = throughput = 0
    unmatched = unmatched_bytes = pre_existing = pre_existing_bytes = 0
    replaced_to_peak = unmatched_bytes_to_peak = 0
    replaced_before = state.replaced_bytes
    for event in events[w0:w1]:
        kind, entry = state.apply(event)
        if kind == 'alloc':
            alloc_count += 1
            throughput += event.get('size', 0)
            if state.delta - start_delta > peak:
                peak = state.delta - start_delta
                peak_position = state.position
                replaced_to_peak = state.replaced_bytes - replaced_before
                unmatched_bytes_to_peak = unmatched_bytes
        elif kind == 'free':
            free_count += 1
            if entry[2] < w0:
                pre_existing += 1
                pre_existing_bytes += entry[0]
        elif kind == 'unmatched':
            free_count += 1
            unmatched += 1
            unmatched_bytes += event.get('size', 0)
    end_delta = state.delta - start_delta
    at_peak = state_at(events, peak_position)
    complete = info['complete']
    return {
        'step': n,
        'complete': complete,
        'duration_ms': (info['end'] - info['start']) / 1000.0 if complete else None,
        'alloc_count': alloc_count,
        'free_count': free_count,
        'total_throughput': throughput,
        'peak_delta': peak,
        'absolute_peak': base + start_delta + peak,
        'end_delta': end_delta,
        'start_delta': start_delta,
        'unmatched_frees': unmatched,
        'unmatched_free_bytes': unmatched_bytes,
        'pre_existing_frees': pre_existing,
        'pre_existing_free_bytes': pre_existing_bytes,
        'top_sources_at_peak': group_by_source(at_peak.live),
        'annotations': step_annotations(snap, dev, info['start'], info['end']),
        # not memsnap keys: the terms of the live-set identity (see the test)
        '_window': (w0, w1),
        '_peak_position': peak_position,
        '_live_bytes_at_start': state_at(events, w0).live_bytes(),
        '_live_bytes_at_peak': at_peak.live_bytes(),
        '_live_count_at_peak': len(at_peak.live),
        '_replaced_bytes_to_peak': replaced_to_peak,
        '_unmatched_free_bytes_to_peak': unmatched_bytes_to_peak,
    }


def _context(path_or_snap, device=None):
    snap = load(path_or_snap) if isinstance(path_or_snap, str) else path_or_snap
    dev = choose_device(snap) if device is None else device
    events = events_of(snap, dev)
    return snap, dev, events


def replay_step(path, device=None):
    """`memsnap replay-step PATH --all-steps --json --top 1000000`: one dict per
    ProfilerStep of the device, in step order (keys starting with '_' are
    extras of this reference)."""
    snap, dev, events = _context(path, device)
    table = steps(snap, dev)
    if not table:
        return []
    times = _times(events)
    base = baseline(snap, dev, events)['baseline_at_start']
    return [analyse_step(snap, dev, events, times, base, n, info)
            for n, info in table.items()]


# ---------------------------------------------------------------------------
# replay-to-time


def replay_to_time(path, seconds, device=None):
    """`memsnap replay-to-time PATH --time T --json --top 1000000`."""
    if seconds < 0:
        raise ValueError('--time must be >= 0')
    snap, dev, events = _context(path, device)
    times = _times(events)
    if not times:
        raise ValueError('no trace events')
    t0 = times[0]
    duration_us = times[-1] - t0
    clamped = round(seconds * 1e6) > duration_us
    if clamped:
        seconds = duration_us / 1e6
    cutoff = t0 + round(seconds * 1e6)
    position = 0
    while position < len(events) and times[position] <= cutoff:
        position += 1
    state = state_at(events, position)
    base = baseline(snap, dev, events)['baseline_at_start']
    return {
        'device': dev,
        'time_s': seconds,
        # the reference scripts round it to 2 decimals; memsnap keeps the full time too
        'trace_duration_s': round(duration_us / 1e6, 2),
        'trace_duration_precise_s': duration_us / 1e6,
        'clamped': clamped,
        'baseline': base,
        'delta': state.delta,
        'absolute': base + state.delta,
        'alloc_count': state.alloc_count,
        'free_count': state.free_count,
        'live_count': len(state.live),
        'live_bytes': state.live_bytes(),
        'sources': group_by_source(state.live),
        '_position': position,
    }


# ---------------------------------------------------------------------------
# compare


def _full_trace(snap, dev, events):
    r = replay(events)
    base = baseline(snap, dev, events)
    return r, base


ONLY_IN_MIN_BYTES = 1 << 20


def compare(path_a, path_b, device=None):
    """`memsnap compare A B --json --top 1000000` (deltas are B - A)."""
    sides = []
    for path in (path_a, path_b):
        snap, dev, events = _context(path, device)
        r, base = _full_trace(snap, dev, events)
        step_rows = {s['step']: s for s in replay_step(snap, dev)} if steps(snap, dev) else {}
        sides.append({'snap': snap, 'dev': dev, 'events': events, 'replay': r,
                      'baseline': base, 'steps': step_rows})
    a, b = sides
    matching = sorted(n for n in a['steps'] if n in b['steps']
                      and a['steps'][n]['complete'] and b['steps'][n]['complete'])
    step_results = []
    for n in matching:
        sa, sb = a['steps'][n], b['steps'][n]
        step_results.append({
            'step': n,
            'peak_delta_a': sa['peak_delta'], 'peak_delta_b': sb['peak_delta'],
            'peak_delta_diff': sb['peak_delta'] - sa['peak_delta'],
            'absolute_peak_a': sa['absolute_peak'], 'absolute_peak_b': sb['absolute_peak'],
            'absolute_peak_diff': sb['absolute_peak'] - sa['absolute_peak'],
            'alloc_count_a': sa['alloc_count'], 'alloc_count_b': sb['alloc_count'],
            'throughput_a': sa['total_throughput'], 'throughput_b': sb['total_throughput'],
        })
    full = {}
    for suffix, side in (('a', a), ('b', b)):
        r, base = side['replay'], side['baseline']
        st = r['state']
        side['absolute_peak'] = base['baseline_at_start'] + r['peak_delta']
        full.update({'peak_delta_' + suffix: r['peak_delta'],
                     'absolute_peak_' + suffix: side['absolute_peak'],
                     'throughput_' + suffix: st.alloc_bytes,
                     'alloc_count_' + suffix: st.alloc_count,
                     'unmatched_frees_' + suffix: st.unmatched_frees,
                     'unmatched_free_bytes_' + suffix: st.unmatched_free_bytes})
    full['peak_delta_diff'] = full['peak_delta_b'] - full['peak_delta_a']
    full['absolute_peak_diff'] = full['absolute_peak_b'] - full['absolute_peak_a']

    if step_results:
        best = None
        for row in step_results:   # first step with the largest |difference|
            if best is None or abs(row['absolute_peak_diff']) > abs(best['absolute_peak_diff']):
                best = row
        n = best['step']
        src_a = a['steps'][n]['top_sources_at_peak']
        src_b = b['steps'][n]['top_sources_at_peak']
        peak_a, peak_b = best['absolute_peak_a'], best['absolute_peak_b']
        delta_a, delta_b = best['peak_delta_a'], best['peak_delta_b']
    else:
        n = None
        src_a = group_by_source(state_at(a['events'], a['replay']['peak_position']).live)
        src_b = group_by_source(state_at(b['events'], b['replay']['peak_position']).live)
        peak_a, peak_b = a['absolute_peak'], b['absolute_peak']
        delta_a, delta_b = full['peak_delta_a'], full['peak_delta_b']
    by_a = {r['source']: r for r in src_a}
    by_b = {r['source']: r for r in src_b}
    rows = []
    for name in set(by_a) | set(by_b):
        ra = by_a.get(name, {'bytes': 0, 'count': 0})
        rb = by_b.get(name, {'bytes': 0, 'count': 0})
        rows.append({'source': name, 'peak_a': ra['bytes'], 'peak_b': rb['bytes'],
                     'delta': rb['bytes'] - ra['bytes'],
                     'count_a': ra['count'], 'count_b': rb['count']})
    rows.sort(key=lambda r: (-abs(r['delta']), r['source']))
    # not in DESIGN.md; memsnap's text report says "only in A (> 1 MiB)"
    only_a = [r for r in rows if r['count_b'] == 0 and r['peak_a'] > ONLY_IN_MIN_BYTES]
    only_b = [r for r in rows if r['count_a'] == 0 and r['peak_b'] > ONLY_IN_MIN_BYTES]
    return {
        'device_a': a['dev'], 'device_b': b['dev'],
        'segments_a': segments_summary(a['snap'], a['dev']),
        'segments_b': segments_summary(b['snap'], b['dev']),
        # The reference scripts' compare JSON: baseline_* are ints, full_trace
        # is null when steps matched; memsnap keeps the whole objects beside.
        'baseline_a': a['baseline']['baseline_at_start'],
        'baseline_b': b['baseline']['baseline_at_start'],
        'baseline_detail_a': a['baseline'], 'baseline_detail_b': b['baseline'],
        'matching_steps': matching,
        'step_results': step_results,
        'full_trace': None if step_results else full,
        'whole_trace': full,
        'drill_down': {
            'step': n if n is not None else 'full-trace',
            'absolute_peak_a': peak_a, 'absolute_peak_b': peak_b,
            'absolute_peak_diff': peak_b - peak_a,
            'peak_delta_a': delta_a, 'peak_delta_b': delta_b,
            'peak_diff': delta_b - delta_a,  # of peak deltas, as the reference
            'sources': rows,
            'only_in_a': {'sources': len(only_a), 'bytes': sum(r['peak_a'] for r in only_a)},
            'only_in_b': {'sources': len(only_b), 'bytes': sum(r['peak_b'] for r in only_b)},
        },
    }


if __name__ == '__main__':
    import json
    import sys
    cmd, *args = sys.argv[1:] or ['']
    if cmd == 'replay-step':
        out = replay_step(args[0])
    elif cmd == 'replay-to-time':
        out = replay_to_time(args[0], float(args[1]))
    elif cmd == 'compare':
        out = compare(args[0], args[1])
    else:
        sys.exit('usage: semantics_oracle.py replay-step FILE | replay-to-time FILE T'
                 ' | compare A B')

    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if not str(k).startswith('_')}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    json.dump(strip(out), sys.stdout, indent=2)
    print()
