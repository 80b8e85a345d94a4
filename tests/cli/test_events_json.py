#!/usr/bin/env python3
"""`events --json` and `dump`: each shared stack, frame or object written once.

    test_events_json.py --memsnap PATH [--work DIR] [--only generated fixtures] [--fixtures DIR]

`events --json` writes a `frames` table, a `stacks` table of frame numbers
and a stack number per entry; `--inline-frames` writes the earlier shape,
each entry with its whole stack. `dump` writes an object the pickle shares
once, as {"__shared__": N, "__value__": V}, then {"__ref__": N};
`--inline-shared` writes it in full each time. For each file this checks:

  - the tables rebuilt into inline stacks equal `--inline-frames`, entry by
    entry (and the entries' other keys are the same);
  - the tables hold what the entries use and nothing else, numbered in
    order of first use, every stack distinct;
  - `dump` with its references resolved equals `dump --inline-shared`; every
    reference follows its definition; the numbers run 0, 1, 2, ... in the
    order the definitions appear; and the objects marked shared are exactly
    the containers the pickle shares (counted on CPython's own unpickling);
  - generated only, on a file of 100k entries whose stacks repeat: the
    interned output is under a tenth of the inline one and the dump under a
    fifth, and `events` (JSON both ways, and text) peaks within 1.5x the
    memory of `parse --json` on the same file (`parse` runs every analysis;
    `events` must not hold its output); a pickle whose shared lists nest 64
    deep dumps in a few KiB (inline it would be 2^64 values); a cycle is
    still refused; `--inline-frames` without `--json` is a usage error; a
    reader that stops early ends the writer quietly.

Fixtures part: every real snapshot up to 4 MB (all of them, today).
Standard library only.
"""
import json
import os
import pickle
import re
import signal
import subprocess
import sys

import pytest
from pytest_check import check

from pickle_oracle import pickle_oracle  # tests/pickle_oracle/pickle_oracle.py

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(os.path.dirname(HERE), "gen", "make_snapshot.py")
FIXTURE_LIMIT = 4 << 20


def run(memsnap, args):
    return subprocess.run([memsnap] + args, capture_output=True, timeout=600)


def json_of(memsnap, args, object_hook=None, keep=None):
    got = run(memsnap, args)
    if got.returncode != 0:
        return None, got.stderr.decode("utf-8", "replace")[-400:], 0
    if keep is not None:
        keep.append(got.stdout)
    return json.loads(got.stdout.decode("utf-8"), object_hook=object_hook), "", len(got.stdout)


def gen(work, name, *args):
    path = os.path.join(work, name)
    if not os.path.exists(path):
        subprocess.run([sys.executable, GEN, "--out", path, *args], check=True, stdout=subprocess.DEVNULL)
    return path


# Spawns the command from a fresh, small interpreter and prints its exit status
# and peak RSS: a child's ru_maxrss starts at its parent's RSS (the high-water
# mark carries over fork and exec), and this driver's own grows with the JSON
# it reads.
RSS_PROBE = ("import os, subprocess, sys\n"
             "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
             "_, status, usage = os.wait4(p.pid, 0)\n"
             "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")


def peak_rss_kib(memsnap, args):
    """Peak resident memory of one memsnap run (KiB) and its exit status."""
    out = subprocess.run([sys.executable, "-S", "-c", RSS_PROBE, memsnap] + args, capture_output=True,
                         text=True, timeout=600, check=True).stdout.split()
    return int(out[1]), int(out[0])


def output_bytes(memsnap, args):
    """Bytes memsnap writes on stdout (counted as they come, never held)."""
    p = subprocess.Popen([memsnap] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    total = 0
    for block in iter(lambda: p.stdout.read(1 << 20), b""):
        total += len(block)
    return total if p.wait() == 0 else None


# ---------------------------------------------------------------- events


def table_problems(doc):
    """What is wrong with the frames and stacks tables of one document."""
    problems = []
    frames, stacks, events = doc.get("frames"), doc.get("stacks"), doc.get("events")
    if not isinstance(frames, list) or not isinstance(stacks, list) or not isinstance(events, list):
        return ["frames, stacks and events must be lists"]
    used_stacks = []  # in order of first use
    seen = set()
    for event in events:
        k = event.get("stack")
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(stacks):
            problems.append("event %s: stack %r is not a number into the %d stacks" % (event.get("index"), k, len(stacks)))
            return problems
        if "frames" in event:
            problems.append("event %s carries frames as well as a stack number" % event.get("index"))
        if k not in seen:
            seen.add(k)
            used_stacks.append(k)
    if used_stacks != list(range(len(stacks))):
        problems.append("stacks are not numbered in order of first use, or some are unused: %s" % used_stacks[:10])
    if len({tuple(s) for s in stacks}) != len(stacks):
        problems.append("a stack is listed twice")
    used_frames = []
    seen = set()
    for s in stacks:
        for f in s:
            if not isinstance(f, int) or isinstance(f, bool) or not 0 <= f < len(frames):
                problems.append("stack frame %r is not a number into the %d frames" % (f, len(frames)))
                return problems
            if f not in seen:
                seen.add(f)
                used_frames.append(f)
    if used_frames != list(range(len(frames))):
        problems.append("frames are not numbered in order of first use, or some are unused")
    for f in frames:
        if set(f) != {"name", "filename", "line"}:
            problems.append("a frame has keys %s" % sorted(f))
            break
    return problems


def rebuilt(doc):
    """The document in the --inline-frames shape, from its tables."""
    frames, stacks = doc["frames"], doc["stacks"]
    out = {k: v for k, v in doc.items() if k not in ("frames", "stacks", "events")}
    out["events"] = []
    for event in doc["events"]:
        row = {k: v for k, v in event.items() if k != "stack"}
        row["frames"] = [frames[f] for f in stacks[event["stack"]]]
        out["events"].append(row)
    return out


def first_difference(a, b):
    if a.keys() != b.keys():
        return "keys %s vs %s" % (sorted(a), sorted(b))
    for k in a:
        if k != "events" and a[k] != b[k]:
            return "%s: %r vs %r" % (k, a[k], b[k])
    if len(a["events"]) != len(b["events"]):
        return "%d vs %d events" % (len(a["events"]), len(b["events"]))
    for x, y in zip(a["events"], b["events"]):
        if x != y:
            return "event %s: %s vs %s" % (x.get("index"), str(x)[:300], str(y)[:300])
    return None


def check_events(memsnap, label, path, extra=()):
    args = ["events", "--json", path] + list(extra)
    label = " ".join([label] + list(extra))
    doc, err, size = json_of(memsnap, args)
    flat, err_flat, flat_size = json_of(memsnap, args + ["--inline-frames"])
    if not check.is_true(doc is not None and flat is not None,
                         "%s: events --json, with and without --inline-frames: %s" % (label, err or err_flat)):
        return None
    problems = table_problems(doc)
    with check("%s: the tables hold what the entries use, once, in order of first use" % label):
        assert not problems, problems[:3]
    if not problems:
        difference = first_difference(rebuilt(doc), flat)
        with check("%s: the tables rebuilt into inline stacks equal --inline-frames (%d entries)"
                   % (label, len(doc["events"]))):
            assert difference is None, difference
    return size, flat_size, doc


# ---------------------------------------------------------------- dump


class Resolver:
    """object_hook for `dump`: {"__shared__": N, "__value__": V} defines N,
    {"__ref__": N} is the value defined earlier (the same Python object).
    Records what would make the document malformed."""

    def __init__(self):
        self.table = {}  # number -> value; json calls the hook as each object ends (inner first)
        self.problems = []

    def __call__(self, obj):
        if len(obj) == 2 and "__shared__" in obj and "__value__" in obj:
            n = obj["__shared__"]
            if n in self.table:
                self.problems.append("shared object %r defined twice" % (n,))
            self.table[n] = obj["__value__"]
            return obj["__value__"]
        if len(obj) == 1 and "__ref__" in obj:
            n = obj["__ref__"]
            if n not in self.table:
                self.problems.append("reference %r before its definition" % (n,))
                return None
            return self.table[n]
        return obj

    def numbering_problems(self, text):
        """The numbers run 0, 1, 2, ... in the order the definitions start."""
        problems = list(self.problems)
        if sorted(self.table) != list(range(len(self.table))):
            problems.append("numbers %s are not 0..%d" % (sorted(self.table)[:10], len(self.table) - 1))
        starts = [int(m) for m in re.findall(rb'\{"__shared__": (\d+), "__value__": ', text)]
        if starts != list(range(len(starts))):
            problems.append("definitions start in the order %s" % starts[:10])
        return problems


def containers_shared(value):
    """Containers, and strings and bytes of 256 bytes or more, reached more
    than once from the root of CPython's unpickled value, by identity (the
    memo's sharing). Empty tuples and frozensets are left out: CPython makes
    them singletons (one object for unrelated ones)."""
    reached = {}
    pending = [value]
    while pending:
        v = pending.pop()
        if isinstance(v, (str, bytes, bytearray)):
            if len(v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v) >= 256:
                reached[id(v)] = reached.get(id(v), 0) + 1
            continue
        if not isinstance(v, (list, dict, tuple, set, frozenset)):
            continue
        if isinstance(v, (tuple, frozenset)) and not v:
            continue
        count = reached.get(id(v), 0) + 1
        reached[id(v)] = count
        if count > 1:
            continue
        if isinstance(v, dict):
            pending.extend(v.keys())
            pending.extend(v.values())
        else:
            pending.extend(v)
    return sum(1 for c in reached.values() if c > 1)


def empty_marker(value):
    return value == {"__tuple__": []} or value == {"__frozenset__": []}


def check_dump(memsnap, label, path):
    resolver = Resolver()
    text = []
    doc, err, size = json_of(memsnap, ["dump", path], object_hook=resolver, keep=text)
    flat, err_flat, flat_size = json_of(memsnap, ["dump", "--inline-shared", path])
    if not check.is_true(doc is not None and flat is not None,
                         "%s: dump and dump --inline-shared run: %s" % (label, err or err_flat)):
        return None
    problems = resolver.numbering_problems(text[0])
    with check("%s: dump's references follow their definitions, numbered 0, 1, 2, ... in order" % label):
        assert not problems, problems[:3]
    with check("%s: dump with its references resolved equals dump --inline-shared" % label):
        assert doc == flat
    expected = containers_shared(pickle_oracle.load(path))  # CPython's unpickler, nothing imported
    marked = sum(1 for v in resolver.table.values() if not empty_marker(v))
    with check("%s: the objects written once are the containers the pickle shares (%d)" % (label, expected)):
        assert marked == expected, "%d marked shared" % marked
    return size, flat_size


# ---------------------------------------------------------------- parts


def events_and_dump_of_generated_files(memsnap, work):
    os.makedirs(work, exist_ok=True)
    files = {
        "python stacks": gen(work, "steps.pickle", "--events", "3000", "--steps", "5", "--marks", "--seed", "41"),
        "C++ stacks": gen(work, "all.pickle", "--events", "3000", "--stacks", "all", "--steps", "3", "--seed", "42"),
        "two devices, OOM": gen(work, "two.pickle", "--events", "2000", "--devices", "2", "--oom", "--seed", "43"),
        "no time, odd actions": gen(work, "odd.pickle", "--events", "1500", "--no-time", "--odd-actions", "--seed", "44"),
        "legacy": gen(work, "legacy.pickle", "--events", "800", "--legacy", "--seed", "45"),
        "empty": gen(work, "empty.pickle", "--empty", "--seed", "46"),
    }
    for label, path in files.items():
        check_events(memsnap, label, path)
        check_dump(memsnap, label, path)
    check_events(memsnap, "two devices, OOM", files["two devices, OOM"], ["--device", "1", "--stride", "7"])
    check_events(memsnap, "python stacks", files["python stacks"], ["--group-by", "category", "--stride", "100"])
    empty = check_events(memsnap, "empty", files["empty"])
    if empty:
        doc = empty[2]
        with check("empty: no entries, empty tables"):
            assert doc["events"] == [] and doc["frames"] == [] and doc["stacks"] == [], str(doc)[:200]

    # Size and memory on a larger file whose stacks repeat (C++ frames, as
    # `stacks="all"` records them); its outputs are counted, not read. Under
    # sanitizers a fifth of it: the ratios hold the same, and writing its
    # 400 MB of inlined stacks took 64 s there.
    events = "20000" if os.environ.get("MEMSNAP_SANITIZED") else "100000"
    big = gen(work, "big.pickle", "--events", events, "--stacks", "all", "--sites", "400", "--steps", "50", "--seed", "47")
    if os.environ.get("MEMSNAP_SANITIZED"):
        print("note events memory bound: not measured under sanitizers")
    else:
        parse_rss, _ = peak_rss_kib(memsnap, ["parse", "--json", big])
        for args in (["events", "--json"], ["events", "--json", "--inline-frames"], ["events"]):
            rss, status = peak_rss_kib(memsnap, args + [big])
            with check("100k entries, %s: peak RSS %d KiB, within 1.5x parse --json's (%d KiB)"
                       % (" ".join(args), rss, parse_rss)):
                assert status == 0 and rss <= 1.5 * parse_rss
    sizes = [output_bytes(memsnap, args + [big]) for args in
             (["events", "--json"], ["events", "--json", "--inline-frames"], ["dump"], ["dump", "--inline-shared"])]
    if check.is_true(None not in sizes, "%s entries: events --json and dump run, both ways: %s" % (events, sizes)):
        with check("%s entries: events --json is under a tenth of --inline-frames (%d vs %d bytes)" % ((events,) + tuple(sizes[:2]))):
            assert sizes[0] * 10 < sizes[1]
        with check("%s entries: dump is under a fifth of --inline-shared (%d vs %d bytes)" % ((events,) + tuple(sizes[2:]))):
            assert sizes[2] * 5 < sizes[3]

    # Shared objects nested 64 deep: 2^64 values written inline, 64 written once.
    deep = os.path.join(work, "doubling.pickle")
    node = []
    for _ in range(64):
        node = [node, node]
    with open(deep, "wb") as f:
        pickle.dump({"segments": [], "x": node}, f, protocol=4)
    got = run(memsnap, ["dump", deep])
    with check("a list holding one list twice, 64 deep: dump writes it in %d bytes" % len(got.stdout)):
        assert got.returncode == 0 and len(got.stdout) < 8192, got.stderr[-300:]
    cyclic = os.path.join(work, "cycle.pickle")
    loop = []
    loop.append(loop)
    with open(cyclic, "wb") as f:
        pickle.dump({"segments": [], "x": loop}, f, protocol=4)
    got = run(memsnap, ["dump", cyclic])
    with check("a list that holds itself is still refused"):
        assert got.returncode == 1 and b"reference cycle" in got.stderr and got.stdout == b"", got.stderr[-300:]

    got = run(memsnap, ["events", "--inline-frames", files["python stacks"]])
    with check("--inline-frames without --json is a usage error"):
        assert got.returncode == 2 and b"needs --json" in got.stderr, (got.returncode, got.stderr[-300:])
    for args in (["events", "--json", big], ["dump", big]):
        reader = subprocess.Popen([memsnap] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        head = reader.stdout.read(10)
        reader.stdout.close()
        err = reader.stderr.read()
        status = reader.wait(timeout=60)
        with check("%s | head -c 10 ends quietly" % args[0]):
            assert (len(head) == 10 and err == b""
                    and status in (0, -signal.SIGPIPE)), (status, err[-300:])

def fixtures(memsnap, folder):
    files = sorted(os.path.join(folder, name) for name in os.listdir(folder)
                   if name.endswith((".pickle", ".pkl")) and os.path.getsize(os.path.join(folder, name)) <= FIXTURE_LIMIT)
    with check("fixtures: snapshots to read"):
        assert len(files) > 0, folder
    for path in files:
        label = os.path.basename(path)
        check_events(memsnap, label, path)
        check_dump(memsnap, label, path)



def test_events_and_dump_of_generated_files(memsnap, work):
    events_and_dump_of_generated_files(memsnap, work)


@pytest.mark.fixtures
def test_every_fixture(memsnap, fixtures_dir):
    fixtures(memsnap, fixtures_dir)
