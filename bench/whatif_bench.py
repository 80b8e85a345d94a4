#!/usr/bin/env python3
"""memsnap whatif benchmark: the allocator model's runs against the
allocator-history replay on one file.

Runs `memsnap segments --timings FILE` (the read, and the allocator history:
the replay back from the dump and forward again that every allocator report
starts from), then `memsnap whatif --check` (the history, then one model run
per rounding tried) and `memsnap whatif` (the history, the check, one run per
setting on threads, and the bisection of the capacity the run needs), and
`memsnap plot` without and with `--whatif expandable_segments:True` (the
page's simulated reserved line), and prints wall time and peak RSS of each,
with the model's share: the command's time less the read and the history.

    python3 bench/whatif_bench.py --memsnap build/memsnap FILE [FILE...]
    python3 bench/whatif_bench.py --memsnap build/memsnap --streams 50000,200000
    python3 bench/whatif_bench.py --memsnap build/memsnap --expandable-ranges 2500,5000,10000

`--streams` times the `whatif` table on the hostile shape of
tests/cli/test_whatif.py instead: one request of 1 MiB + 1 byte on each of
N streams, so that every request after the first few retries on a device
holding N cached blocks no release can take (with and without expandable
segments). The time should grow with N, not with its square.

`--expandable-ranges` times `whatif` (the table) on issue 56's shape: one
expandable segment of K mapped ranges, each a free block of the same size
before unmapped pages, and K requests, each of which PyTorch's best fit
walks from the first of those blocks to the last but one; the file's size,
wall time and peak RSS. This too should grow with K, not with its square.

Standard library only. A benchmark, not a test: it prints numbers and exits 0.
"""
import argparse
import os
import pickle
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gen"))
import make_hostile  # noqa: E402 (the hostile shapes live with the tests)


def timed(command):
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0:
        raise SystemExit("%s: exit %d: %s" % (" ".join(command), done.returncode, done.stderr[-300:]))
    return seconds, max(rss, before) / 1024, done.stderr


def measure_streams(memsnap, counts):
    print("%10s %14s %22s" % ("streams", "whatif s", "expandable whatif s"))
    with tempfile.TemporaryDirectory() as work:
        for count in counts:
            seconds = []
            for expandable in (False, True):
                path = os.path.join(work, "streams.pickle")
                with open(path, "wb") as f:
                    pickle.dump(make_hostile.many_streams(count, expandable), f, protocol=4)
                seconds.append(timed([memsnap, "whatif", "--json", path])[0])
            print("%10d %14.2f %22.2f" % (count, seconds[0], seconds[1]))


def measure_expandable_ranges(memsnap, counts):
    print("%10s %10s %10s %10s" % ("ranges", "file KB", "whatif s", "RSS MiB"))
    with tempfile.TemporaryDirectory() as work:
        for count in counts:
            path = os.path.join(work, "ranges.pickle")
            with open(path, "wb") as f:
                pickle.dump(make_hostile.expandable_ranges(count), f, protocol=4)
            # A process of its own, so that the peak RSS is this run's alone.
            probe = [sys.executable, "-c", RUN_ONE, memsnap, "whatif", "--json", path]
            seconds, rss = subprocess.run(probe, capture_output=True, text=True,
                                          check=True).stdout.split()
            print("%10d %10.0f %10s %10s" % (count, os.path.getsize(path) / 1024, seconds, rss))


# One command's wall time and peak RSS, measured in a process of its own
# (RUSAGE_CHILDREN then counts that command alone).
RUN_ONE = r"""
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
seconds = time.perf_counter() - start
print("%.2f %.0f" % (seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("--streams", help="stream counts of the hostile shape, comma-separated")
    parser.add_argument("--expandable-ranges",
                        help="range counts of issue 56's hostile shape, comma-separated")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    if args.streams:
        measure_streams(args.memsnap, [int(n) for n in args.streams.split(",") if n.strip()])
    if args.expandable_ranges:
        measure_expandable_ranges(args.memsnap, [int(n) for n in args.expandable_ranges.split(",")
                                                 if n.strip()])
    if not args.files:
        if not args.streams and not args.expandable_ranges:
            parser.error("give FILEs, --streams, --expandable-ranges, or a mix")
        return
    print("%-40s %9s %9s %12s %12s %12s %9s %9s %9s" % (
        "file", "read s", "history s", "check s", "table s", "model/hist", "plot s", "+whatif s",
        "RSS MiB"))
    for path in args.files:
        seconds, rss, stderr = timed([args.memsnap, "segments", "--timings", path])
        read = float(re.search(r"read and decode ([0-9.]+) s", stderr).group(1))
        history = float(re.search(r"allocator history ([0-9.]+) s", stderr).group(1))
        check, rss_check, _ = timed([args.memsnap, "whatif", "--check", path])
        table, rss_table, _ = timed([args.memsnap, "whatif", path])
        with tempfile.TemporaryDirectory() as work:
            page = os.path.join(work, "page.html")
            plot, rss_plot, _ = timed([args.memsnap, "plot", path, "-o", page])
            line, rss_line, _ = timed([args.memsnap, "plot", path, "-o", page,
                                       "--whatif", "expandable_segments:True"])
        # The check's model time: its wall time less the read and the history.
        model = max(0.0, check - read - history)
        print("%-40s %9.2f %9.2f %12.2f %12.2f %12.2f %9.2f %9.2f %9.0f" % (
            path[-40:], read, history, check, table, model / max(history, 1e-9), plot, line,
            max(rss, rss_check, rss_table, rss_plot, rss_line)))


if __name__ == "__main__":
    main()
