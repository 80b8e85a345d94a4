#!/usr/bin/env python3
"""memsnap hostile-input benchmark: each shape of tests/gen/make_hostile.py
(issue 40's structures that once multiplied time or memory, issue 56's
output that grew with the file) written at a scale, then read by a few
commands; prints per shape and command the file's size, the exit status,
wall time, peak RSS and output size.

    python3 bench/hostile_bench.py --memsnap build/memsnap [--scale 8] [SHAPE...]

Standard library only. A benchmark, not a test: it prints numbers and exits 0
(the tests that hold the bounds are tests/cli/test_hostile_structures.py).
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gen"))
import make_hostile  # noqa: E402

COMMANDS = (["parse"], ["events", "--json"], ["plot", "--text"], ["dump"])
# Shapes read by commands of their own too: many_ooms by the reports that
# promise a few lines whatever the file (check in every format, summarize).
EXTRA_COMMANDS = {
    "many_ooms": tuple(["check", "--max-peak", "1KiB", "--format", fmt]
                       for fmt in ("text", "json", "markdown", "junit", "github"))
    + (["summarize", "--json"],),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("--scale", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("shapes", nargs="*", default=sorted(make_hostile.SHAPES))
    args = parser.parse_args()
    print("%-24s %-40s %10s %6s %9s %9s %12s" % ("shape", "command", "file KB", "exit", "time s",
                                                 "RSS MiB", "output MB"))
    with tempfile.TemporaryDirectory() as work:
        for shape in args.shapes:
            path = make_hostile.write(shape, os.path.join(work, shape + ".pickle.gz"), args.scale)
            size = os.path.getsize(path) / 1024
            for command in COMMANDS + EXTRA_COMMANDS.get(shape, ()):
                # Each run in a fresh child of a fresh process, so that the
                # peak RSS is this command's own.
                probe = [sys.executable, "-c", RUN_ONE, args.memsnap, str(args.timeout)] + \
                    command[:1] + [path] + command[1:]
                done = subprocess.run(probe, capture_output=True, text=True)
                print("%-24s %-40s %10.1f %s" % (shape, " ".join(command), size,
                                                  done.stdout.strip()))


# One command, its exit status, time, peak RSS and output size, measured in a
# process of its own (RUSAGE_CHILDREN then counts that command alone).
RUN_ONE = r"""
import resource, subprocess, sys, threading, time
memsnap, timeout, rest = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
start = time.perf_counter()
written = [0]
child = subprocess.Popen([memsnap] + rest, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

def drain():
    # Counted on a thread of its own, so that the timeout holds for a command
    # that writes nothing until it ends.
    while True:
        chunk = child.stdout.read(1 << 20)
        if not chunk:
            return
        written[0] += len(chunk)

reader = threading.Thread(target=drain)
reader.start()
try:
    status = str(child.wait(timeout=timeout))
except subprocess.TimeoutExpired:
    child.kill()
    child.wait()
    status = "timeout"
reader.join()
seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("%6s %9.2f %9.0f %12.1f" % (status, seconds, rss, written[0] / 1e6))
"""


if __name__ == "__main__":
    main()
