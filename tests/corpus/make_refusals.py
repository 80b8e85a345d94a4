#!/usr/bin/env python3
"""Write the files memsnap must refuse, and the few it must parse.

    make_refusals.py OUTDIR

OUTDIR/expected.json maps each file memsnap must refuse to {"code": the
refusal's stable code (docs/safety.md), "says": [the few words the error
line must contain where the words are the point: the opcode a refusal
names, what the file is instead of a snapshot], "byte_offset": true when the
refusal comes from the pickle VM, whose messages say where in the file it
stopped}. OUTDIR/must_parse.json describes files that must parse: {"file":
{"same_as": "other file"}} (identical `parse --json` apart from the file name
and size; with "warns": "phrase", apart from one more warning that holds the
phrase), and {"file": {"default_error": {"code": ..., "says": ..., "byte_offset": ...},
"allow_objects": true, "object_at": [keys...], "object_name": "mod.name"}}
(refused by default, parsed with --allow-objects, the object dumped as
{"__object__": "mod.name"}).

Every hostile pickle is assembled opcode by opcode here; nothing is ever
unpickled, so nothing can run. Standard library only.
"""

import gzip
import io
import json
import os
import pickle
import struct
import sys
import zipfile

P = pickle  # opcode constants: pickle.PROTO, pickle.GLOBAL, ...


# ---------------------------------------------------------------------------
# a tiny assembler


def proto(n):
    return P.PROTO + bytes([n])


def frame(body):
    """Protocol 4+ framing of a body that ends with STOP."""
    return P.FRAME + struct.pack('<Q', len(body)) + body


def u(s):
    """A str, with the shortest opcode protocols 1-3 have."""
    b = s.encode('utf-8')
    return P.BINUNICODE + struct.pack('<I', len(b)) + b


def su(s):
    """A str for protocol 4+ (SHORT_BINUNICODE)."""
    b = s.encode('utf-8')
    assert len(b) < 256
    return P.SHORT_BINUNICODE + bytes([len(b)]) + b


def text0(s):
    """A str in protocol 0."""
    return P.UNICODE + s.encode('raw-unicode-escape') + b'\n'


def binput(i):
    return P.BINPUT + bytes([i])


def memoize():
    return P.MEMOIZE


def skeleton(payload, protocol=2, key='allocator_settings'):
    """{'segments': [], 'device_traces': [[]], key: <payload>} where payload is
    opcodes leaving one value on the stack."""
    s = su if protocol >= 4 else u
    body = (P.EMPTY_DICT + P.MARK
            + s('segments') + P.EMPTY_LIST
            + s('device_traces') + P.EMPTY_LIST + P.EMPTY_LIST + P.APPEND
            + s(key) + payload
            + P.SETITEMS + P.STOP)
    if protocol >= 4:
        return proto(protocol) + frame(body)
    return proto(protocol) + body


# ---------------------------------------------------------------------------
# code-executing pickles, the way CPython writes `os.system('echo pwned')`
# wrapped in an object whose __reduce__ returns it


def evil_object(protocol):
    cmd = 'echo pwned'
    if protocol == 0:
        return (P.GLOBAL + b'posix\nsystem\n' + P.PUT + b'0\n' + P.MARK
                + text0(cmd) + P.PUT + b'1\n' + P.TUPLE + P.PUT + b'2\n'
                + P.REDUCE + P.PUT + b'3\n' + P.STOP)
    if protocol == 1:
        return (P.GLOBAL + b'posix\nsystem\n' + binput(0) + P.MARK + u(cmd) + binput(1)
                + P.TUPLE + binput(2) + P.REDUCE + binput(3) + P.STOP)
    if protocol in (2, 3):
        return (proto(protocol) + P.GLOBAL + b'posix\nsystem\n' + binput(0) + u(cmd)
                + binput(1) + P.TUPLE1 + binput(2) + P.REDUCE + binput(3) + P.STOP)
    body = (su('posix') + memoize() + su('system') + memoize() + P.STACK_GLOBAL + memoize()
            + su(cmd) + memoize() + P.TUPLE1 + memoize() + P.REDUCE + memoize() + P.STOP)
    return proto(protocol) + frame(body)


def evil_in_snapshot(protocol):
    """A snapshot whose allocator_settings is os.system('echo pwned')."""
    if protocol >= 4:
        payload = su('posix') + su('system') + P.STACK_GLOBAL + su('echo pwned') + P.TUPLE1 + P.REDUCE
    else:
        payload = P.GLOBAL + b'posix\nsystem\n' + u('echo pwned') + P.TUPLE1 + P.REDUCE
    return skeleton(payload, protocol)


# payloads whose first non-data opcode is the one named; each leaves one value
FIRST_REFUSED = {
    'REDUCE': P.NONE + P.EMPTY_TUPLE + P.REDUCE,
    'BUILD': P.EMPTY_DICT + P.EMPTY_DICT + P.BUILD,
    'INST': P.MARK + P.INST + b'posix\nsystem\n',
    'OBJ': P.MARK + P.NONE + P.OBJ,
    'NEWOBJ': P.NONE + P.EMPTY_TUPLE + P.NEWOBJ,
    'NEWOBJ_EX': P.NONE + P.EMPTY_TUPLE + P.EMPTY_DICT + P.NEWOBJ_EX,
    'EXT1': P.EXT1 + b'\x01',
    'EXT2': P.EXT2 + b'\x01\x00',
    'EXT4': P.EXT4 + b'\x01\x00\x00\x00',
    'PERSID': P.PERSID + b'foo\n',
    'BINPERSID': u('foo') + P.BINPERSID,
}


# memsnap's refusals (see expected.json above): (code, the words that are the point)
NOT_A_PICKLE = ('not_a_pickle', [])
ZIP = ('not_a_pickle', ['torch.save zip archive'])
JSON = ('not_a_pickle', ['looks like JSON'])
DEGENERATE = ('limit_exceeded', [])
NESTING = ('limit_exceeded', [])
OUT_OF_BAND = ('bad_pickle', [])
MALFORMED = ('bad_pickle', [])
TRUNCATED = ('truncated', [])


def refusing(op):
    """A refused opcode: the message names it."""
    return ('refused_opcode', ['refusing opcode %s:' % op])


def not_a_snapshot(holds):
    """A pickle that is no snapshot: the message says what it holds instead."""
    return ('not_a_snapshot', [holds])


# ---------------------------------------------------------------------------
# a small valid snapshot, shaped like a real one (shared frame dicts and list)


def small_snapshot():
    f1 = {'name': 'forward', 'filename': '/x/model.py', 'line': 42}
    f2 = {'name': 'train', 'filename': '/x/train.py', 'line': 7}
    stack = [f1, f2]
    base = 0x7F12_0000_0000
    trace = [
        {'action': 'alloc', 'addr': base, 'size': 4096, 'stream': 0,
         'time_us': 1730000000000002, 'frames': stack},
        {'action': 'alloc', 'addr': base + 4096, 'size': 512, 'stream': 0,
         'time_us': 1730000000000003, 'frames': [f1, f2]},
        {'action': 'free_completed', 'addr': base + 4096, 'size': 512, 'stream': 0,
         'time_us': 1730000000000005, 'frames': stack},
    ]
    segment = {'device': 0, 'address': base, 'total_size': 2097152, 'allocated_size': 4096,
               'active_size': 4096, 'stream': 0, 'segment_type': 'small',
               'segment_pool_id': (0, 0), 'blocks': [
                   {'address': base, 'size': 4096, 'state': 'active_allocated',
                    'frames': stack},
                   {'address': base + 4096, 'size': 2097152 - 4096, 'state': 'inactive',
                    'frames': []}]}
    return {'segments': [segment], 'device_traces': [trace],
            'allocator_settings': {'max_split_size': -1,
                                   'garbage_collection_threshold': 0.0}}


def nested_lists(depth, protocol=2):
    """allocator_settings = {'x': [[[...]]]} nested `depth` deep, built with
    EMPTY_LIST pushes and APPENDs (no recursion needed to write it)."""
    payload = (P.EMPTY_DICT + u('x') + P.EMPTY_LIST * depth + P.APPEND * (depth - 1)
               + P.SETITEM)
    return skeleton(payload, protocol)


def nested_dicts(depth, protocol=2):
    """allocator_settings = {'x': {'x': {...}}} nested `depth` deep."""
    key = u('x')
    payload = P.EMPTY_DICT + (key + P.EMPTY_DICT) * depth + P.SETITEM * depth
    return skeleton(payload, protocol)


def zip_archive():
    """What torch.save writes: a zip with archive/data.pkl."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w', zipfile.ZIP_STORED) as z:
        info = zipfile.ZipInfo('archive/data.pkl', date_time=(2024, 1, 1, 0, 0, 0))
        z.writestr(info, pickle.dumps({'segments': []}, protocol=2))
        info = zipfile.ZipInfo('archive/version', date_time=(2024, 1, 1, 0, 0, 0))
        z.writestr(info, b'3\n')
    return buf.getvalue()


def foreign_objects():
    """Snapshots carrying a foreign object in an optional field: refused by
    default, inert placeholders with --allow-objects."""
    out = {}
    # collections.OrderedDict() via GLOBAL + REDUCE (protocol 2)
    out['object-reduce-p2.pickle'] = (
        skeleton(P.EMPTY_DICT + u('x') + P.GLOBAL + b'collections\nOrderedDict\n'
                 + P.EMPTY_TUPLE + P.REDUCE + P.SETITEM, 2),
        refusing('GLOBAL'), 'collections.OrderedDict')
    # the same with STACK_GLOBAL (protocol 4)
    out['object-reduce-p4.pickle'] = (
        skeleton(P.EMPTY_DICT + su('x') + su('collections') + su('OrderedDict')
                 + P.STACK_GLOBAL + P.EMPTY_TUPLE + P.REDUCE + P.SETITEM, 4),
        refusing('STACK_GLOBAL'), 'collections.OrderedDict')
    # a plain class instance as pickle writes it: cls, (), NEWOBJ, state, BUILD
    out['object-newobj-build-p2.pickle'] = (
        skeleton(P.EMPTY_DICT + u('x') + P.GLOBAL + b'mylib.config\nAllocConf\n'
                 + P.EMPTY_TUPLE + P.NEWOBJ + P.EMPTY_DICT + u('knob') + P.BININT1 + b'\x07'
                 + P.SETITEM + P.BUILD + P.SETITEM, 2),
        refusing('GLOBAL'), 'mylib.config.AllocConf')
    return out


def write(outdir):
    os.makedirs(outdir, exist_ok=True)
    expected = {}
    must_parse = {}

    def put(name, data, refusal=None, vm=True):
        """Writes a file; with `refusal` ((code, phrases)), one that memsnap
        must refuse; vm=False for refusals from outside the pickle VM (input
        checks, the snapshot decoder, the JSON renderer)."""
        with open(os.path.join(outdir, name), 'wb') as f:
            f.write(data)
        if refusal is not None:
            code, says = refusal
            expected[name] = {'code': code, 'says': says, 'byte_offset': vm}

    # code-executing pickles
    for p in range(6):
        op = 'GLOBAL' if p < 4 else 'STACK_GLOBAL'
        put('evil-object-p%d.pickle' % p, evil_object(p), refusing(op))
        put('evil-in-snapshot-p%d.pickle' % p, evil_in_snapshot(p), refusing(op))
    for op, payload in FIRST_REFUSED.items():
        p = 4 if op == 'NEWOBJ_EX' else 2
        put('first-%s.pickle' % op, proto(p) + payload + P.STOP, refusing(op))
        put('first-%s-in-snapshot.pickle' % op, skeleton(payload, p), refusing(op))
    put('first-INST-p0.pickle', FIRST_REFUSED['INST'] + P.STOP, refusing('INST'))
    put('first-PERSID-p0.pickle', FIRST_REFUSED['PERSID'] + P.STOP, refusing('PERSID'))

    # every truncation of a small valid snapshot
    snap = small_snapshot()
    for p in (2, 4):
        data = pickle.dumps(snap, protocol=p)
        assert data.endswith(P.STOP)
        put('small-p%d.pickle' % p, data)
        for k in range(1, len(data)):
            put('truncated-p%d-%04d.pickle' % (p, k), data[:k], TRUNCATED)
    put('empty.pickle', b'', ('empty_file', []), vm=False)

    # not pickles at all
    put('garbage.bin', bytes([0xDE, 0xAD, 0xBE, 0xEF]) + bytes((i * 37 + 11) & 0xFF
                                                                for i in range(200)),
        NOT_A_PICKLE)
    put('elf.bin', b'\x7fELF\x02\x01\x01\x00' + b'\x00' * 56, NOT_A_PICKLE)
    put('zeros.bin', b'\x00' * 64, NOT_A_PICKLE)
    put('torch-save.zip', zip_archive(), ZIP, vm=False)
    put('zip-header-only.bin', b'PK\x03\x04' + b'\x00' * 26, ZIP, vm=False)
    put('snapshot.json', b'{"segments": []}', JSON, vm=False)
    put('snapshot-indented.json', b'\n  {\n    "segments": [],\n    "device_traces": []\n  }\n',
        JSON, vm=False)

    # pickles that are not snapshots: each says what it holds instead
    put('int-p2.pickle', pickle.dumps(12345, protocol=2), not_a_snapshot('int, not a dict'),
        vm=False)
    put('int-p4.pickle', pickle.dumps(12345, protocol=4), not_a_snapshot('int, not a dict'),
        vm=False)
    put('str-p4.pickle', pickle.dumps('segments', protocol=4), not_a_snapshot('str, not a dict'),
        vm=False)
    put('none-p2.pickle', pickle.dumps(None, protocol=2), not_a_snapshot('None, not a dict'),
        vm=False)
    put('dict-without-keys.pickle', pickle.dumps({'foo': 1, 'bar': [2]}, protocol=4),
        not_a_snapshot("a dict without 'segments' or 'device_traces'"), vm=False)

    put('list-of-scalars.pickle', pickle.dumps([1, 'a', None, 3.5], protocol=4),
        not_a_snapshot('a list of 4 items and none is a segment dict'), vm=False)
    put('fields-not-lists.pickle', pickle.dumps({'segments': 'x', 'device_traces': {0: []}},
                                                protocol=4),
        not_a_snapshot("'segments' is a str and 'device_traces' is a dict"), vm=False)
    put('segments-none.pickle', pickle.dumps({'segments': None}, protocol=2),
        not_a_snapshot("'segments' is None and 'device_traces' is absent"), vm=False)

    # malformed streams
    put('underflow-append.pickle', proto(2) + P.APPEND + P.STOP, MALFORMED)
    put('underflow-pop.pickle', proto(2) + P.POP + P.STOP, MALFORMED)
    put('underflow-setitem.pickle', proto(2) + P.EMPTY_DICT + u('k') + P.SETITEM + P.STOP,
        MALFORMED)
    put('underflow-tuple2.pickle', proto(2) + P.NONE + P.TUPLE2 + P.STOP, MALFORMED)
    put('underflow-stop.pickle', proto(2) + P.STOP, MALFORMED)
    put('memo-binget.pickle', proto(2) + P.BINGET + b'\x05' + P.STOP, MALFORMED)
    put('memo-long-binget.pickle', proto(2) + P.EMPTY_LIST + binput(0) + P.POP
        + P.LONG_BINGET + struct.pack('<I', 1000) + P.STOP, MALFORMED)
    put('memo-get-p0.pickle', P.GET + b'7\n' + P.STOP, MALFORMED)
    put('no-mark-setitems.pickle', proto(2) + P.EMPTY_DICT + P.SETITEMS + P.STOP, MALFORMED)
    put('no-mark-appends.pickle', proto(2) + P.EMPTY_LIST + P.APPENDS + P.STOP, MALFORMED)
    put('no-mark-tuple.pickle', proto(2) + P.NONE + P.TUPLE + P.STOP, MALFORMED)
    put('huge-binunicode8.pickle', proto(4) + P.BINUNICODE8 + struct.pack('<Q', 1 << 60)
        + b'abc' + P.STOP, TRUNCATED)
    put('huge-binbytes8.pickle', proto(4) + P.BINBYTES8 + struct.pack('<Q', 1 << 60)
        + b'abc' + P.STOP, TRUNCATED)
    put('huge-binunicode.pickle', proto(2) + P.BINUNICODE + struct.pack('<I', 0xFFFFFFFF)
        + b'abc' + P.STOP, TRUNCATED)
    put('huge-long4.pickle', proto(2) + P.LONG4 + struct.pack('<i', 0x7FFFFFFF) + b'\x01'
        + P.STOP, TRUNCATED)
    # present, but wider than the VM reads (kMaxLongBytes)
    put('wide-long4.pickle', proto(2) + P.LONG4 + struct.pack('<i', 8193) + b'\x01' * 8193
        + P.STOP, ('limit_exceeded', []))
    put('huge-frame.pickle', proto(4) + P.FRAME + struct.pack('<Q', 1 << 62) + P.NONE + P.STOP,
        TRUNCATED)
    put('next-buffer.pickle', proto(5) + P.NEXT_BUFFER + P.STOP, OUT_OF_BAND)
    put('next-buffer-readonly.pickle', proto(5) + P.NEXT_BUFFER + P.READONLY_BUFFER + P.STOP,
        OUT_OF_BAND)
    put('nesting-lists-100000.pickle', nested_lists(100000), NESTING, vm=False)
    put('nesting-dicts-100000.pickle', nested_dicts(100000), NESTING, vm=False)

    # degenerate pickles: more VM memory per input byte than a snapshot needs
    # (EMPTY_LIST is 72 bytes of VM state per input byte, DUP 16, EMPTY_DICT
    # + MEMOIZE 36); refused at the bound, whichever form they arrive in
    lists = proto(4) + P.EMPTY_LIST * (5 << 20) + P.STOP
    put('degenerate-empty-lists.pickle', lists, DEGENERATE)
    put('degenerate-empty-lists.pickle.gz', gzip.compress(lists, mtime=0), DEGENERATE)
    put('degenerate-dup.pickle', proto(4) + P.NONE + P.DUP * (18 << 20) + P.STOP, DEGENERATE)
    put('degenerate-memoized-dicts.pickle',
        proto(4) + (P.EMPTY_DICT + memoize()) * (5 << 20) + P.STOP, DEGENERATE)

    # must parse
    small4 = pickle.dumps(snap, protocol=4)
    put('trailing-bytes.pickle', small4 + b'\x00trailing garbage after STOP\n')
    must_parse['trailing-bytes.pickle'] = {
        'same_as': 'small-p4.pickle',
        'warns': "29 bytes after the pickle's STOP opcode were not read"}
    put('small-p4.pickle.gz', gzip.compress(small4, mtime=0))
    must_parse['small-p4.pickle.gz'] = {'same_as': 'small-p4.pickle'}
    put('small-p2-gzip.pickle', gzip.compress(pickle.dumps(snap, protocol=2), mtime=0))
    must_parse['small-p2-gzip.pickle'] = {'same_as': 'small-p2.pickle'}
    must_parse['small-p2.pickle'] = {'same_as': 'small-p4.pickle'}
    for name, (data, error, obj_name) in foreign_objects().items():
        put(name, data)
        code, says = error
        must_parse[name] = {'default_error': {'code': code, 'says': says, 'byte_offset': True},
                            'allow_objects': True,
                            'object_at': ['allocator_settings', 'x'],
                            'object_name': obj_name}

    with open(os.path.join(outdir, 'expected.json'), 'w') as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    with open(os.path.join(outdir, 'must_parse.json'), 'w') as f:
        json.dump(must_parse, f, indent=1, sort_keys=True)
    return expected, must_parse


def main(argv):
    if len(argv) != 2:
        print('usage: make_refusals.py OUTDIR', file=sys.stderr)
        return 2
    expected, must_parse = write(argv[1])
    print('%d files to refuse, %d to parse, in %s' % (len(expected), len(must_parse), argv[1]))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
