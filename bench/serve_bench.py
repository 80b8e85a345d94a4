#!/usr/bin/env python3
"""memsnap serve benchmark: how long until it answers, and how long each
query of a scripted session takes on the server.

Starts `memsnap serve FILE`, measures the time from start to the first
answered request (the files read and analysed, the URL printed) beside
`memsnap parse FILE --json` on the same file, then runs a scripted session
of interactions a page would make (zooms and pans of the memory line at
1,600 columns, by time and by entry; hovers on allocations; searches; the
replay-to-time drill-down at a click) and reports the median and 99th
percentile of each kind, as seen by a client on the same machine (loopback,
one connection per request), and the server's peak RSS. The first line
request builds the level index; it is reported on its own.

    python3 bench/serve_bench.py --memsnap build/memsnap FILE [--interactions 200]

Standard library only. A benchmark, not a test: it prints numbers and exits 0.
"""
import argparse
import http.client
import json
import random
import statistics
import subprocess
import sys
import time
import urllib.parse


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Client:
    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.port = parts.port
        self.token = urllib.parse.parse_qs(parts.query)["token"][0]

    def get(self, path):
        """(seconds, status, document) of one request."""
        path += ("&" if "?" in path else "?") + "token=" + self.token
        start = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        seconds = time.perf_counter() - start
        return seconds, response.status, json.loads(body) if body[:1] in (b"{", b"[") else None


def session(client, interactions, seed):
    """The scripted interactions: (kind, seconds) per request."""
    rng = random.Random(seed)
    _, _, files = client.get("/api/files")
    entries = files[0]["event_count"]
    _, _, whole = client.get("/api/line?file=0&axis=event&width=1600")
    timed = client.get("/api/line?file=0&width=1600")[1] == 200
    parse = client.get("/api/report/parse?file=0")[2]["report"]
    duration = parse["trace_duration_s"] or 0
    _, _, found = client.get("/api/search?file=0&q=forward")
    allocs = [row["entry"] for row in found["rows"]] or [0]
    times = []
    for _ in range(interactions):
        kind = rng.choice(["zoom", "pan", "hover", "hover", "click", "search"])
        if kind in ("zoom", "pan"):
            span = rng.choice([1.0, 0.1, 0.01, 0.001])
            if timed:
                start = rng.uniform(0, duration * (1 - span))
                path = "/api/line?file=0&width=1600&from=%r&to=%r" % (start, start + duration * span)
            else:
                start = rng.uniform(0, entries * (1 - span))
                path = "/api/line?file=0&axis=event&width=1600&from=%r&to=%r" % (
                    start, start + entries * span)
        elif kind == "hover":
            path = "/api/allocation?file=0&entry=%d" % rng.choice(allocs)
        elif kind == "click":
            path = "/api/report/replay-to-time?file=0&time=%r&top=25" % rng.uniform(0, duration)
        else:
            path = "/api/search?file=0&q=%s" % rng.choice(["attention", "0x7f", "optim", "module.py"])
        seconds, status, _ = client.get(path)
        if status == 200:
            times.append((kind, seconds))
    return times, whole


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("file")
    parser.add_argument("--interactions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    start = time.perf_counter()
    subprocess.run([args.memsnap, "parse", "--json", args.file], stdout=subprocess.DEVNULL,
                   check=True)
    parse_s = time.perf_counter() - start

    start = time.perf_counter()
    server = subprocess.Popen([args.memsnap, "serve", args.file], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        client = Client(server.stdout.readline().strip())
        client.get("/api/files")
        ready_s = time.perf_counter() - start
        first_line_s = client.get("/api/line?file=0&axis=event&width=1600")[0]
        times, _ = session(client, args.interactions, args.seed)
        with open("/proc/%d/status" % server.pid) as status:
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    finally:
        server.terminate()
        server.wait(timeout=60)
    print("file: %s" % args.file)
    print("parse --json: %.3f s; serve answering after %.3f s; first line (builds the level "
          "index): %.1f ms; server peak RSS %.0f MiB" % (parse_s, ready_s, first_line_s * 1e3,
                                                        rss / 1024))
    print("%-8s %6s %10s %10s" % ("kind", "count", "median ms", "p99 ms"))
    for kind in ("zoom", "pan", "hover", "click", "search"):
        seconds = [s for k, s in times if k == kind]
        if seconds:
            print("%-8s %6d %10.2f %10.2f" % (kind, len(seconds), statistics.median(seconds) * 1e3,
                                              percentile(seconds, 0.99) * 1e3))
    every = [s for _, s in times]
    print("%-8s %6d %10.2f %10.2f" % ("all", len(every), statistics.median(every) * 1e3,
                                      percentile(every, 0.99) * 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
