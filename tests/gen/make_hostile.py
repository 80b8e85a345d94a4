#!/usr/bin/env python3
"""Hostile shapes of issue 40 (round four), each a small file whose structure
once multiplied memsnap's time or memory, and of issue 56 (round five), whose
structure once made a report false or its output grow with the file: the
regression tests (tests/cli/test_hostile_structures.py,
tests/cli/test_hostile_reports.py) and the hostile-input bench
(bench/hostile_bench.py) write them from here.

    python3 tests/gen/make_hostile.py SHAPE --out FILE [--scale K]

`--scale` multiplies the shape's size (1: the size the tests use, seconds at
most on this machine; the bench takes larger ones). Standard library only:
pickles written by CPython's pickler, gzipped where the point is a small file
that decodes to much (the memo shares one object however often it is named).
"""
import argparse
import gzip
import pickle

T0 = 1_700_000_000_000_000  # µs


def entry(k, frames, **extra):
    return dict({"action": "alloc", "addr": 0x7F00_0000_0000 + 512 * k, "size": 512, "stream": 0,
                 "time_us": T0 + k, "frames": frames}, **extra)


def backward_names(scale):
    """Finding 6: a C++ frame name of "xBackward" repeated (every occurrence
    of "Backward" once scanned back over the whole word), in 8 stacks."""
    name = "xBackward" * (16384 * scale)
    return {"segments": [], "device_traces": [[
        entry(k, [{"name": name, "filename": "??", "line": 0},
                  {"name": "f%d" % k, "filename": "/home/me/train.py", "line": k}])
        for k in range(8)]]}


def shared_strings(scale, field="user_metadata"):
    """Finding 7: one 1 MiB string (the memo shares it) as the `field` of
    every one of 12,500 x scale entries: once hashed, matched and written
    per entry."""
    text = "m" * (1 << 20)
    frames = [{"name": "step", "filename": "/home/me/train.py", "line": 7}]
    entries = []
    for k in range(12_500 * scale):
        e = entry(k, frames)
        e[field] = text
        entries.append(e)
    return {"segments": [], "device_traces": [entries]}


def empty_devices(scale):
    """Finding 8: 25,000 x scale entries on device 0 and as many empty device
    lists after it: every per-device loop must cost by entries."""
    frames = [{"name": "step", "filename": "/home/me/train.py", "line": 7}]
    count = 25_000 * scale
    entries = [entry(k, frames) for k in range(count)]
    return {"segments": [], "device_traces": [entries] + [[] for _ in range(count)]}


def wide_ints(scale):
    """Finding 11: 1,000 x scale integers of 8,000 bytes in the allocator
    settings, each turned into decimal text in time quadratic in its width."""
    return {"segments": [], "device_traces": [[]],
            "allocator_settings": {"wide": [(1 << (8 * 8000)) + k for k in range(1000 * scale)]}}


def shared_entry(scale):
    """Finding 9: one trace entry (the memo shares it) named 1,000,000 x
    scale times in device 0's trace: two bytes of pickle per reference, a
    row of the model per reference."""
    one = entry(0, [{"name": "step", "filename": "/home/me/train.py", "line": 7}])
    return {"segments": [], "device_traces": [[one] * (1_000_000 * scale)]}


def shared_block(scale):
    """Finding 9: one block dict named 1,000,000 x scale times in a segment."""
    block = {"address": 0x7F00_0000_0000, "size": 512, "requested_size": 512,
             "state": "active_allocated", "frames": []}
    segment = {"device": 0, "address": 0x7F00_0000_0000, "total_size": 2 << 20, "stream": 0,
               "segment_type": "small", "allocated_size": 512, "active_size": 512,
               "requested_size": 512, "blocks": [block] * (1_000_000 * scale)}
    return {"segments": [segment], "device_traces": [[]]}


def many_ooms(scale):
    """Issue 56, finding 8: 10,000 x scale oom entries (370 KB) after one
    allocation, each a failed request of its own size: a report that
    promises a few lines must give the first few and a count, not a line
    per entry."""
    frames = [{"name": "forward", "filename": "/home/me/model.py", "line": 42}]
    entries = [entry(0, frames, size=1 << 20)]
    for k in range(10_000 * scale):
        entries.append({"action": "oom", "size": (1 << 30) + 512 * k, "stream": 0,
                        "time_us": T0 + 1 + k, "device_free": 1 << 20, "frames": frames})
    block = {"address": entries[0]["addr"], "size": 1 << 20, "requested_size": 1 << 20,
             "state": "active_allocated", "frames": frames}
    segment = {"device": 0, "address": entries[0]["addr"], "total_size": 2 << 20, "stream": 0,
               "segment_type": "large", "allocated_size": 1 << 20, "active_size": 1 << 20,
               "requested_size": 1 << 20, "blocks": [block]}
    return {"segments": [segment], "device_traces": [entries]}


def step_marks(scale, name, ends=True):
    """Issue 56, finding 6: 100 x scale record_function marks named
    `name` (with k for a %d in it) around one allocation each: START and END,
    or START alone."""
    frames = [{"name": "step", "filename": "/home/me/train.py", "line": 7}]
    entries = []
    marks = []
    for k in range(100 * scale):
        mark = name % k if "%d" in name else name
        entries.append(entry(2 * k, frames, time_us=T0 + 10 * k + 1))
        entries.append(dict(entry(2 * k, frames, time_us=T0 + 10 * k + 2),
                            action="free_completed"))
        marks.append({"name": mark, "stage": "START", "device": 0, "time_us": T0 + 10 * k})
        if ends:
            marks.append({"name": mark, "stage": "END", "device": 0,
                          "time_us": T0 + 10 * k + 5})
    return {"segments": [], "device_traces": [entries], "external_annotations": marks}


def odd_settings(scale):
    """Issue 56, finding 9: allocator settings a file may hold that JSON and
    a boolean do not: garbage_collection_threshold inf, expandable_segments
    as the string 'yes'."""
    del scale
    frames = [{"name": "step", "filename": "/home/me/train.py", "line": 7}]
    alloc = entry(0, frames)
    trace = [alloc, dict(alloc, action="free_requested"), dict(alloc, action="free_completed")]
    return {"segments": [], "device_traces": [trace],
            "allocator_settings": {"garbage_collection_threshold": float("inf"),
                                   "expandable_segments": "yes", "max_split_size": -1}}


class RawPickle(bytes):
    """Bytes written as they are: a shape no Python object pickles to."""


def empty_lists(scale):
    """Finding 10: 2,500,000 x scale EMPTY_LIST opcodes and no STOP (20 MB at
    scale 8 peaked at 18x the input: the container table's copy as it grew
    was not counted)."""
    return RawPickle(b"\x80\x04" + b"]" * (2_500_000 * scale))


def long_name(scale):
    """Finding 10: one frame name of 32 MiB x scale (256 MiB at scale 8): cut
    to 1 MiB in the model; from a .gz it costs the name twice while read."""
    frames = [{"name": "x" * ((32 << 20) * scale), "filename": "/home/me/train.py", "line": 7}]
    return {"segments": [], "device_traces": [[entry(0, frames)]]}


def many_streams(count, expandable=False):
    """Not a reader's shape (so not in SHAPES): the allocator model's. One
    request of 1 MiB + 1 byte on each of `count` streams, each in a segment
    of its own that stays partly used, so that every retried request meets
    `count` cached blocks no release can take. tests/cli/test_whatif.py runs
    `whatif` on it; bench/whatif_bench.py --streams times it."""
    mib = 1 << 20
    frames = [{"name": "forward", "filename": "/home/me/model.py", "line": 42}]
    entries = [{"action": "alloc", "addr": 0x7F00_0000_0000 + n * 32 * mib, "size": mib + 1,
                "stream": n + 1, "time_us": T0 + n, "frames": frames} for n in range(count)]
    return {"segments": [], "device_traces": [entries],
            "allocator_settings": {"max_split_size": -1, "expandable_segments": expandable,
                                   "garbage_collection_threshold": 0.0}}


def expandable_ranges(count):
    """Not a reader's shape (so not in SHAPES): the allocator model's (issue
    56). One expandable segment of `count` mapped ranges of 20 MiB, each a
    free 2 MiB block, a 14 MiB block held throughout and a free 4 MiB block
    before unmapped pages, fewer of them after each range; then `count`
    requests of 3 MiB. A request meets every free 4 MiB block in turn (the
    same size, by address), and PyTorch's best fit goes on to each next one
    while the size it could grow to shrinks: it takes the last but one (the
    last can grow into the rest of the reservation), and the next request
    walks them all again but one. A last request of 20 MiB maps a page (a
    segment entry, so that every what-if run starts from these ranges). The
    free 2 MiB and the 1 MiB left of each 4 MiB are reserved but never
    requested, so that each setting's least capacity is bisected (a run of
    the model per step). tests/cli/test_whatif_scaling.py runs `whatif` on
    it; bench/whatif_bench.py --expandable-ranges times it."""
    mib = 1 << 20
    frames = [{"name": "forward", "filename": "/home/me/model.py", "line": 42}]
    settings = {"max_split_size": -1, "expandable_segments": True,
                "garbage_collection_threshold": 0.0}
    # Range k at `starts[k]`; the unmapped pages after it: (count - k) x 20 MiB.
    starts, at = [], 0x7F00_0000_0000
    for k in range(count):
        starts.append(at)
        at += 20 * mib + (count - k) * 20 * mib

    def block(address, size, state="active_allocated"):
        return {"address": address, "size": size,
                "requested_size": size if state == "active_allocated" else 0, "state": state,
                "frames": frames if state == "active_allocated" else []}

    segments = []
    for k, start in enumerate(starts):
        blocks = [block(start, 2 * mib, "inactive"), block(start + 2 * mib, 14 * mib),
                  block(start + 16 * mib, 3 * mib)]
        if k == 0:  # the page the last request maps after it, from the 1 MiB before it
            blocks.append(block(start + 19 * mib, 20 * mib))
            blocks.append(block(start + 39 * mib, 1 * mib, "inactive"))
        else:
            blocks.append(block(start + 19 * mib, 1 * mib, "inactive"))
        size = sum(b["size"] for b in blocks)
        held = size - 3 * mib
        segments.append({"device": 0, "address": start, "total_size": size, "stream": 0,
                         "segment_type": "large", "allocated_size": held, "active_size": held,
                         "requested_size": held, "is_expandable": True, "blocks": blocks})
    # The requests take the free blocks from the last range but one back to
    # the first, then the last (the rest of the reservation after it is
    # unmapped too: it could grow the most).
    order = list(reversed(range(count - 1))) + [count - 1]
    entries = [{"action": "alloc", "addr": starts[k] + 16 * mib, "size": 3 * mib, "stream": 0,
                "time_us": T0 + n, "frames": frames} for n, k in enumerate(order)]
    entries.append({"action": "segment_map", "addr": starts[0] + 20 * mib, "size": 20 * mib,
                    "stream": 0, "time_us": T0 + count, "frames": frames})
    entries.append({"action": "alloc", "addr": starts[0] + 19 * mib, "size": 20 * mib,
                    "stream": 0, "time_us": T0 + count + 1, "frames": frames})
    return {"segments": segments, "device_traces": [entries], "allocator_settings": settings}


SHAPES = {
    "empty_lists": empty_lists,
    "long_name": long_name,
    "shared_entry": shared_entry,
    "shared_block": shared_block,
    "wide_ints": wide_ints,
    "empty_devices": empty_devices,
    "backward_names": backward_names,
    "shared_user_metadata": lambda scale: shared_strings(scale, "user_metadata"),
    "shared_compile_context": lambda scale: shared_strings(scale, "compile_context"),
    "shared_category": lambda scale: shared_strings(scale, "category"),
    "shared_action": lambda scale: shared_strings(scale, "action"),
    "many_ooms": many_ooms,
}
# Shapes whose point is what a report says, not what it costs: the tests
# write them, the bench does not time them.
REPORT_SHAPES = {
    "profiler_steps": lambda scale: step_marks(scale, "ProfilerStep#%d"),
    "open_optimizer_marks": lambda scale: step_marks(scale, "Optimizer.step#Adam.step", False),
    "odd_settings": odd_settings,
}


def write(shape, path, scale=1):
    document = (SHAPES.get(shape) or REPORT_SHAPES[shape])(scale)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as out:
        if isinstance(document, RawPickle):
            out.write(document)
        else:
            pickle.dump(document, out, protocol=4)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", choices=sorted(SHAPES) + sorted(REPORT_SHAPES))
    parser.add_argument("--out", required=True, help="the file to write (.gz: gzipped)")
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    write(args.shape, args.out, args.scale)


if __name__ == "__main__":
    main()
