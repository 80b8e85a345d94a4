#!/usr/bin/env python3
"""The pickle oracle: an independent loader for PyTorch CUDA memory snapshots.

The oracle of the differential test (tests/differential): CPython's own unpickler, restricted so
that nothing is ever imported or called (find_class and persistent_load
raise), and a few lines turning the loaded value into what memsnap prints:

  load(path)                 the pickled value (gzip detected by its magic)
  dump_tree(value)           the JSON value `memsnap dump FILE` prints
                             (strict=True: == also tells true from 1, 1.0 from 1)
  summary(value, stride=..)  per device: event_count, actions, segment
                             totals, sampled events as `memsnap events` prints
  replay_baseline(value, d)  segments_active - live at end + unmatched frees

Command line: pickle_oracle.py dump FILE | summary FILE [--stride K]
"""

import gzip
import io
import json
import math
import pickle
import sys

# Wide ints are exact in both directions: lift CPython's str()/int() digit
# limit (3.11+), which exists to bound the quadratic conversion memsnap avoids.
if hasattr(sys, 'set_int_max_str_digits'):
    sys.set_int_max_str_digits(0)

U64 = 1 << 64
I64_MIN = -(1 << 63)


class RefusingUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('refusing global %s.%s' % (module, name))

    def persistent_load(self, pid):
        raise pickle.UnpicklingError('refusing persistent id')


def load_bytes(data):
    if data[:2] == b'\x1f\x8b':
        data = gzip.decompress(data)
    return RefusingUnpickler(io.BytesIO(data)).load()


def load(path):
    with open(path, 'rb') as f:
        return load_bytes(f.read())


# ---------------------------------------------------------------------------
# dump


def canonical(value):
    """Deterministic text of a dumped value (orders set members)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(',', ':'))


def _sorted_members(items):
    return sorted(items, key=canonical)


class StrictBool:
    """Expected true/false that only equals a JSON true/false (plain == would
    accept 1 for True)."""
    __slots__ = ('value',)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        if type(other) is StrictBool:
            other = other.value
        return type(other) is bool and other == self.value

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def __repr__(self):
        return 'true' if self.value else 'false'


class StrictFloat:
    """Expected float that only equals a JSON number written as a float
    (an integer literal would mean memsnap lost the type)."""
    __slots__ = ('value',)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        if type(other) is StrictFloat:
            other = other.value
        return type(other) is float and other == self.value

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = None

    def __repr__(self):
        return repr(self.value)


def dump_tree(value, strict=False):
    """The JSON value of `memsnap dump`. Shared objects (memoized frame dicts
    and lists) convert once. strict=True wraps bools and floats so that ==
    against a json.loads result tells true from 1 and 1.0 from 1."""
    memo = {}

    def conv(v):
        t = type(v)
        if t is str or v is None:
            return v
        if t is bool:
            return StrictBool(v) if strict else v
        if t is int:
            return v if I64_MIN <= v < U64 else {'__int__': str(v)}
        if t is float:
            if math.isnan(v):
                return {'__float__': 'nan'}
            if math.isinf(v):
                return {'__float__': 'inf' if v > 0 else '-inf'}
            return StrictFloat(v) if strict else v
        hit = memo.get(id(v))
        if hit is not None:
            return hit
        if t is list:
            out = [conv(x) for x in v]
        elif t is dict:
            if all(type(k) is str for k in v):
                out = {k: conv(x) for k, x in v.items()}
            else:
                out = {'__dict__': [[conv(k), conv(x)] for k, x in v.items()]}
        elif t is tuple:
            out = {'__tuple__': [conv(x) for x in v]}
        elif t is set or t is frozenset:
            members = [(canonical(dump_tree(x)), conv(x)) for x in v]
            members.sort(key=lambda m: m[0])
            out = {'__set__' if t is set else '__frozenset__': [m[1] for m in members]}
        elif t is bytes:
            out = {'__bytes__': v.hex()}
        elif t is bytearray:
            out = {'__bytearray__': bytes(v).hex()}
        else:
            raise TypeError('unexpected type in a data-only pickle: %s' % t.__name__)
        memo[id(v)] = out
        return out

    return conv(value)


def normalize_json_object(obj):
    """object_hook for json.loads of memsnap's output: set members are
    unordered, so sort them the way dump_tree does."""
    if len(obj) == 1:
        for key in ('__set__', '__frozenset__'):
            members = obj.get(key)
            if isinstance(members, list):
                return {key: _sorted_members(members)}
    return obj


def dump_hook():
    """object_hook for json.loads of `memsnap dump`'s output: resolves the
    objects it writes once ({"__shared__": N, "__value__": V} defines N,
    {"__ref__": N} is V again), then normalize_json_object. A reference to
    a number not defined before it raises ValueError. (json calls the hook
    as each object ends, inner ones first: definitions arrive in that order,
    not by number.)"""
    table = {}

    def hook(obj):
        if len(obj) == 2 and '__shared__' in obj and '__value__' in obj:
            table[obj['__shared__']] = obj['__value__']
            return obj['__value__']
        if len(obj) == 1 and '__ref__' in obj:
            n = obj['__ref__']
            if not isinstance(n, int) or n not in table:
                raise ValueError('reference %r before its definition' % (n,))
            return table[n]
        return normalize_json_object(obj)

    return hook


def inline_frames(document):
    """`memsnap events --json` rebuilt in the --inline-frames shape: each
    entry's stack number replaced by its frames from the tables."""
    frames, stacks = document.get('frames'), document.get('stacks')
    if frames is None or stacks is None:
        return document
    out = {k: v for k, v in document.items() if k not in ('frames', 'stacks')}
    out['events'] = []
    for event in document.get('events') or []:
        row = {k: v for k, v in event.items() if k != 'stack'}
        row['frames'] = [frames[f] for f in stacks[event['stack']]]
        out['events'].append(row)
    return out


# ---------------------------------------------------------------------------
# summary


def parts(value):
    """(segments, device_traces) of a snapshot value."""
    if isinstance(value, list):  # torch.cuda.memory_snapshot(): segments only
        return value, []
    if isinstance(value, dict):
        return value.get('segments') or [], value.get('device_traces') or []
    raise ValueError('not a memory snapshot')


def devices_of(value):
    """Devices that have trace events or segments."""
    segments, traces = parts(value)
    devs = {i for i, trace in enumerate(traces) if trace}
    devs.update(s['device'] for s in segments)
    return sorted(devs)


def segment_totals(value, device):
    segments, _ = parts(value)
    mine = [s for s in segments if s['device'] == device]
    return {
        'count': len(mine),
        'total_size': sum(s['total_size'] for s in mine),
        'allocated_size': sum(s['allocated_size'] for s in mine),
        'active_size': sum(s.get('active_size', s['allocated_size']) for s in mine),
    }


def trace_of(value, device):
    _, traces = parts(value)
    return traces[device] if 0 <= device < len(traces) else []


def actions(trace):
    counts = {}
    for e in trace:
        counts[e['action']] = counts.get(e['action'], 0) + 1
    return counts


def event_json(index, entry):
    addr = entry.get('addr')
    return {
        'index': index,
        'action': entry['action'],
        'addr': None if addr is None else addr % U64,
        'size': entry.get('size', 0),
        'stream': entry.get('stream', 0) % U64,
        'time_us': entry.get('time_us'),
        'frames': [{'name': f['name'], 'filename': f['filename'], 'line': f['line']}
                   for f in entry.get('frames') or []],
    }


def default_stride(n):
    return max(1, n // 50)


def sample_indices(n, stride):
    indices = list(range(0, n, stride))
    if n and indices[-1] != n - 1:
        indices.append(n - 1)
    return indices


def events(value, device, stride):
    trace = trace_of(value, device)
    return {
        'device': device,
        'event_count': len(trace),
        'events': [event_json(i, trace[i]) for i in sample_indices(len(trace), stride)],
    }


def summary(value, stride=None):
    out = {}
    for device in devices_of(value):
        trace = trace_of(value, device)
        k = stride or default_stride(len(trace))
        out[device] = {
            'event_count': len(trace),
            'actions': actions(trace),
            'segments': segment_totals(value, device),
            'stride': k,
            'events': events(value, device, k),
        }
    return out


def replay_baseline(value, device):
    """DESIGN.md 'Baseline at start' for one device."""
    live = {}
    unmatched = 0
    for e in trace_of(value, device):
        action = e['action']
        if action == 'alloc':
            live[e['addr']] = e['size']
        elif action == 'free_completed':
            size = live.pop(e['addr'], None)
            if size is None:
                unmatched += e['size']
    active = segment_totals(value, device)['active_size']
    return active - sum(live.values()) + unmatched


def main(argv):
    if len(argv) < 3 or argv[1] not in ('dump', 'summary'):
        print(__doc__, file=sys.stderr)
        return 2
    value = load(argv[2])
    if argv[1] == 'dump':
        json.dump(dump_tree(value), sys.stdout, ensure_ascii=False)
    else:
        stride = int(argv[argv.index('--stride') + 1]) if '--stride' in argv else None
        json.dump({str(k): v for k, v in summary(value, stride).items()}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
