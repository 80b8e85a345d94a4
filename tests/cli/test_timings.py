#!/usr/bin/env python3
"""One analysis per file, each part once: every command run with --timings.

--timings prints a line on stderr for each file read and for each part of a
file's analysis when it is computed ("memsnap: timings: FILE device D: PART
S s"). Each command must compute each part at most once per (file, device),
and read each file once; and a command computes only what it shows (the
allocator replay, the costly part, only where its report has fragmentation,
block facts or the allocator panel).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

REPO = os.path.dirname(os.path.dirname(HERE))
A = os.path.join(REPO, "examples", "training_steps.pickle.gz")
B = os.path.join(REPO, "examples", "training_steps_larger_batch.pickle.gz")
PART = re.compile(r"^memsnap: timings: (.+) device (-?\d+): ([a-z ]+) (\d+\.\d+) s$")
READ = re.compile(r"^memsnap: timings: (.+): read and decode (\d+\.\d+) s$")


def timed(memsnap, args):
    got = subprocess.run([memsnap, *args, "--timings"], capture_output=True, text=True, timeout=300)
    parts = collections.Counter()
    reads = collections.Counter()
    for line in got.stderr.splitlines():
        if m := PART.match(line):
            parts[(m.group(1), int(m.group(2)), m.group(3))] += 1
        elif m := READ.match(line):
            reads[m.group(1)] += 1
    return got, parts, reads



def test_each_part_is_computed_once_and_only_where_needed(memsnap, work):
    html = os.path.join(work, "plot.html")
    # command line, files it reads, parts it must compute, parts it must not.
    cases = [
        (["parse", A], [A], {"trace", "reserved", "allocator history", "fragmentation"}, set()),
        (["parse", "--json", A], [A], {"trace", "allocator history"}, set()),
        (["compare", A, B], [A, B], {"trace", "allocator history", "fragmentation"}, set()),
        (["replay-to-time", A, "--time", "0.5"], [A], {"trace"}, {"allocator history"}),
        (["replay-to-time", A, B, "--time", "0.5"], [A, B], {"trace"}, {"allocator history"}),
        (["replay-step", A, "--all-steps"], [A], {"trace", "steps"}, {"allocator history"}),
        (["oom", A, "--at", "peak"], [A], {"trace", "allocator history"}, set()),
        (["plot", A, B, "-o", html], [A, B], {"trace", "allocator history"}, set()),
        (["plot", "--text", A], [A], {"trace"}, {"allocator history"}),
        (["summarize", A], [], {"trace", "allocator history"}, set()),
    ]
    for command, files, needed, unwanted in cases:
        name = " ".join(os.path.basename(a) if os.sep in a else a for a in command)
        got, parts, reads = timed(memsnap, command)
        if not check.is_true(got.returncode == 0, "%s: exits 0: %s" % (name, got.stderr[-2000:])):
            continue
        repeated = {k: n for k, n in parts.items() if n > 1}
        with check("%s: each part computed once per file and device" % name):
            assert not repeated, repeated
        for path in files:
            with check("%s: %s read once" % (name, os.path.basename(path))):
                assert reads[path] == 1, dict(reads)
        computed = {part for (_, _, part) in parts}
        with check("%s: computes %s" % (name, ", ".join(sorted(needed)))):
            assert needed <= computed, sorted(computed)
        if unwanted:
            with check("%s: does not compute %s" % (name, ", ".join(sorted(unwanted)))):
                assert not (unwanted & computed), sorted(computed)
    got = subprocess.run([memsnap, "parse", A], capture_output=True, text=True, timeout=300)
    with check("without --timings nothing is timed"):
        assert got.returncode == 0 and "timings" not in got.stderr, got.stderr
