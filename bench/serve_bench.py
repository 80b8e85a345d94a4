#!/usr/bin/env python3
"""memsnap serve benchmark: how long until it answers, and how long each
query of a scripted session takes on the server.

Starts `memsnap serve FILE`, measures the time from start to the first
answered request (the files read and analysed, the URL printed) beside
`memsnap parse FILE --json` on the same file, then runs a scripted session
of interactions, each the requests the page makes for it (a zoom or pan:
the memory line, the allocation layout and the segment timeline at 1,600
columns; a hover: an allocation's stack, a block's allocation; a click: the
replay-to-time drill-down and the allocator's segments then; a search: the
search and the layout that marks it), and reports the median, 99th
percentile and maximum of each request, as seen by a client on the same
machine (loopback, one connection per request), and the server's peak RSS.
The server builds the level index, the allocation spans and the segment
spans on a thread of their own once it answers; the first line request waits
for the first two, and is reported on its own.

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
    """The scripted interactions, each the requests the page makes for it:
    (interaction, route, seconds) per request."""
    rng = random.Random(seed)
    _, _, files = client.get("/api/files")
    entries = files[0]["event_count"]
    _, _, whole = client.get("/api/line?file=0&axis=event&width=1600")
    timed = client.get("/api/line?file=0&width=1600")[1] == 200
    parse = client.get("/api/report/parse?file=0")[2]["report"]
    duration = parse["trace_duration_s"] or 0
    _, _, found = client.get("/api/search?file=0&q=forward")
    allocs = [row["entry"] for row in found["rows"]] or [0]
    _, _, segments = client.get("/api/segments?file=0" + ("&time=%r" % (duration / 2) if timed else ""))
    blocks = [(g["address"] + b[0]) for g in (segments or {}).get("map", []) for b in g["blocks"]
              if b[2] == 0][:200] or [0]
    position = (segments or {}).get("report", {}).get("position", entries)
    out = []
    for _ in range(interactions):
        kind = rng.choice(["zoom", "pan", "hover", "hover", "click", "search"])
        if kind in ("zoom", "pan"):
            span = rng.choice([1.0, 0.1, 0.01, 0.001])
            end = duration if timed else entries
            start = rng.uniform(0, end * (1 - span))
            window = "%sfrom=%r&to=%r&width=1600" % ("" if timed else "axis=event&", start,
                                                     start + end * span)
            paths = [("line", "/api/line?file=0&" + window),
                     ("layout", "/api/layout?file=0&" + window),
                     ("segment-timeline", "/api/segment-timeline?file=0&" + window)]
        elif kind == "hover":
            paths = [("allocation", "/api/allocation?file=0&entry=%d" % rng.choice(allocs)),
                     ("block", "/api/block?file=0&address=%d&position=%d" % (rng.choice(blocks),
                                                                            position))]
        elif kind == "click":
            if timed:
                t = rng.uniform(0, duration)
                paths = [("replay-to-time", "/api/report/replay-to-time?file=0&time=%r&top=25" % t),
                         ("segments", "/api/segments?file=0&time=%r" % t)]
            else:
                paths = [("segments", "/api/segments?file=0&position=%d" % rng.randrange(entries))]
        else:
            q = rng.choice(["attention", "0x7f", "optim", "module.py"])
            paths = [("search", "/api/search?file=0&q=%s" % q),
                     ("layout+q", "/api/layout?file=0&width=1600&q=%s%s" % (
                         q, "" if timed else "&axis=event"))]
        for route, path in paths:
            seconds, status, _ = client.get(path)
            if status == 200:
                out.append((kind, route, seconds))
    return out, whole


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
    print("parse --json: %.3f s; serve answering after %.3f s; first line (waits for the level "
          "index and the spans): %.1f ms; server peak RSS %.0f MiB" % (
              parse_s, ready_s, first_line_s * 1e3, rss / 1024))
    print("%-18s %6s %10s %10s %10s" % ("request", "count", "median ms", "p99 ms", "max ms"))
    routes = []
    for _, route, _ in times:
        if route not in routes:
            routes.append(route)
    for route in routes:
        seconds = [s for _, r, s in times if r == route]
        print("%-18s %6d %10.2f %10.2f %10.2f" % (route, len(seconds), statistics.median(seconds) * 1e3,
                                                 percentile(seconds, 0.99) * 1e3, max(seconds) * 1e3))
    every = [s for _, _, s in times]
    print("%-18s %6d %10.2f %10.2f %10.2f" % ("every request", len(every),
                                             statistics.median(every) * 1e3,
                                             percentile(every, 0.99) * 1e3, max(every) * 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
