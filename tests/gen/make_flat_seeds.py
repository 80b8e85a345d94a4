#!/usr/bin/env python3
"""Seeds for the trace-entry fast path (Vm::try_flat_dict): trace entries in
every shape the flat reader must either take exactly or hand back to the
generic VM. fuzz_pickle_vm checks on each that both ways give one model.

    python3 tests/gen/make_flat_seeds.py fuzz/corpus
"""
import io
import os
import pickle
import struct
import sys


def frame(name, line):
    return {'name': name, 'filename': '/w/train.py', 'line': line}


def entry(i, frames, **extra):
    e = {'action': 'alloc', 'addr': 0x7f0000000000 + 512 * i, 'size': 512,
         'stream': 0, 'time_us': 1000 + i, 'frames': frames}
    e.update(extra)
    return e


def snapshot(entries):
    return {'segments': [], 'device_traces': [entries],
            'allocator_settings': {'max_split_size': -1}}


def shapes():
    f1, f2 = frame('a', 1), frame('b', 2)
    shared = [f1, f2]
    base = [entry(i, shared if i % 2 else [f2, f1]) for i in range(6)]
    yield 'basic', snapshot(base)
    yield 'one_frame', snapshot([entry(i, [f1]) for i in range(4)])  # APPEND, not APPENDS
    yield 'empty_frames', snapshot([entry(i, []) for i in range(4)])
    yield 'long_frames', snapshot([entry(i, [f1, f2] * 700) for i in range(3)])  # two APPENDS
    yield 'list_elsewhere', snapshot([entry(i, shared, extra=[1, 2]) for i in range(3)])
    yield 'two_lists', snapshot([entry(i, [f1], other=[f2]) for i in range(3)])
    yield 'no_frames', snapshot([{k: v for k, v in entry(i, []).items() if k != 'frames'}
                                 for i in range(3)])
    yield 'float_and_none', snapshot([entry(i, shared, time_us=1.5, stream=None, flag=True)
                                      for i in range(3)])
    yield 'big_values', snapshot([entry(i, shared, addr=2**64 - 512, size=2**70)
                                  for i in range(3)])
    yield 'negative', snapshot([entry(i, shared, size=-5, stream=-1) for i in range(3)])
    yield 'bad_action', snapshot([entry(i, shared, action=7) for i in range(3)])
    yield 'many_keys', snapshot([dict(entry(i, shared), **{'k%d' % k: k for k in range(1200)})
                                 for i in range(2)])
    shared_entry = entry(0, shared)
    yield 'shared_entry', snapshot([shared_entry, entry(1, shared), shared_entry])
    yield 'entry_in_frames', snapshot([shared_entry, entry(1, [shared_entry, f1])])
    selfref = entry(0, [])
    selfref['frames'].append(selfref)
    yield 'self_in_frames', snapshot([selfref, entry(1, shared)])
    yield 'pool_tuple', snapshot([entry(i, shared, pool_id=(0, 1)) for i in range(3)])
    yield 'unicode', snapshot([entry(i, [frame('é' * 300, 3)], category='activation',
                                     compile_context='N/A', user_metadata='x' * 300)
                               for i in range(3)])


def write_framed(obj, protocol):
    return pickle.dumps(obj, protocol=protocol)


def main():
    out = sys.argv[1]
    for name, obj in shapes():
        for protocol in (1, 2, 4, 5):
            data = write_framed(obj, protocol)
            with open(os.path.join(out, 'seed_flat_%s_p%d.pickle' % (name, protocol)), 'wb') as f:
                f.write(data)
    # A FRAME opcode inside an entry (protocol 4 frames are placed by size,
    # anywhere between two opcodes): split the body before every 37th byte's
    # opcode boundary by re-framing it by hand.
    import pickletools
    data = pickle.dumps(snapshot([entry(i, [frame('a', 1)]) for i in range(8)]), protocol=4)
    ops = [pos for _, _, pos in pickletools.genops(data)]
    body_start = ops[1] if data[ops[1]] == 0x95 else ops[1]
    # drop the pickler's own frame and write one FRAME per 5 opcodes
    if data[2] == 0x95:
        payload = data[11:]
        op_starts = [pos - 11 for pos in ops if pos >= 11]
    else:
        payload = data[2:]
        op_starts = [pos - 2 for pos in ops if pos >= 2]
    cuts = op_starts[::5] + [len(payload)]
    framed = io.BytesIO()
    framed.write(b'\x80\x04')
    for a, b in zip(cuts, cuts[1:]):
        framed.write(b'\x95' + struct.pack('<Q', b - a) + payload[a:b])
    with open(os.path.join(out, 'seed_flat_frames_inside_p4.pickle'), 'wb') as f:
        f.write(framed.getvalue())
    with open(os.path.join(out, 'seed_flat_memo_overwrite_p4.pickle'), 'wb') as f:
        f.write(memo_overwrite_seed())


def memo_overwrite_seed():
    """Three entries with the same frames list bytes, and between the second
    and the third a BINPUT that gives one of the list's frame slots another
    value (a str): the third must not reuse the stack the list had before
    (the VM's list cache is emptied by such an overwrite)."""
    import pickletools
    f1, f2 = frame('a', 1), frame('b', 2)
    entries = [entry(i, [f1, f2]) for i in range(3)]
    data = pickle.dumps(snapshot(entries), protocol=4)
    ops = list(pickletools.genops(data))
    # the entries: dicts whose first key is 'action' (inline, or a memo ref
    # to the first entry's key string, whose memo index is counted here)
    memo = 0
    action_index = None
    entry_starts = []
    for k, (op, arg, pos) in enumerate(ops):
        if op.name == 'MEMOIZE':
            if ops[k - 1][0].name == 'SHORT_BINUNICODE' and ops[k - 1][1] == 'action':
                action_index = memo
            memo += 1
        if op.name != 'EMPTY_DICT':
            continue
        key_op, key_arg, _ = ops[k + 3]  # EMPTY_DICT MEMOIZE MARK key
        if (key_op.name == 'SHORT_BINUNICODE' and key_arg == 'action') or (
                key_op.name in ('BINGET', 'LONG_BINGET') and key_arg == action_index):
            entry_starts.append(pos)
    second, third = entry_starts[1], entry_starts[2]
    ref = None
    for op, arg, pos in ops:
        if second < pos < third and op.name in ('BINGET', 'LONG_BINGET'):
            ref = arg  # the last ref inside the second entry: a frame of its list
    put = (b'q' + bytes([ref])) if ref < 256 else (b'r' + struct.pack('<I', ref))
    patch = b'\x8c\x01x' + put + b'0'  # SHORT_BINUNICODE 'x', BINPUT ref, POP
    return data[:third] + patch + data[third:]


if __name__ == '__main__':
    main()
