#!/usr/bin/env python3
"""Hostile input, round four (issue 40): files whose structure once
multiplied memsnap's time, each written by tests/gen/make_hostile.py at a size
the fixed code reads in well under a second and the old code took minutes
on. A run past TIMEOUT fails its check (a guard against the old cost, not a
speed target: those are in bench/hostile_bench.py). Every command here must
answer (exit 0) with the report a small file of the same meaning gives."""
import os
import subprocess
import sys

import testlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gen"))
import make_hostile  # noqa: E402

check = testlib.Checks()
TIMEOUT = 60
COMMANDS = (["parse", "--json"], ["explain", "--json"], ["events", "--json"],
            ["plot", "--text"])


def run(memsnap, args):
    try:
        got = subprocess.run([memsnap] + args, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "timeout", b"", b""
    return got.returncode, got.stdout, got.stderr


def test_every_occurrence_of_backward_is_scanned_once(memsnap, work):
    """Finding 6: "xBackward" repeated over 1.1 MiB in 8 stacks (about 3 KB
    gzipped) took minutes in parse; every command answers."""
    os.makedirs(work, exist_ok=True)
    path = make_hostile.write("backward_names", os.path.join(work, "backward.pickle.gz"), 8)
    for command in COMMANDS:
        rc, out, err = run(memsnap, command[:1] + [path] + command[1:])
        check("backward names: %s answers" % " ".join(command), rc == 0 and out,
              (rc, err[-300:]))
    check.verify()
