#!/usr/bin/env python3
"""`memsnap serve`: every report it answers equals `memsnap NAME --json` on the
same file, and every way past it fails cleanly while it keeps answering: no
token or a wrong one, another Host, path traversal, a file that is not one of
those it was started with, other methods, oversized and malformed requests,
and many requests at once. Loopback traffic only; every loop is bounded.
Skips (exit 77) where the build has no server (MEMSNAP_SERVE=OFF)."""
import concurrent.futures
import http.client
import json
import os
import signal
import subprocess
import urllib.parse

import pytest

import testlib

REPO = testlib.REPO
A = os.path.join(REPO, "examples", "training_steps.pickle.gz")
B = os.path.join(REPO, "examples", "training_steps_larger_batch.pickle.gz")
# Parameters each report needs to answer at all.
REQUIRED = {"replay-to-time": {"time": "0.1"}, "replay-step": {"all_steps": "true"}, "whatif": {"check": "true"}}


def refusal_code(body):
    """The stable code of an error answer (docs/safety.md), which holds the
    message, the code and the status, in that order."""
    answer = json.loads(body)
    assert list(answer) == ["error", "code", "status"], answer
    return answer["code"]


class Served:
    """A running `memsnap serve A B`: its address, token and process."""

    def __init__(self, memsnap, *extra, files=(A, B)):
        self.process = subprocess.Popen([memsnap, "serve", *files, *extra], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline().strip()
        if not line:
            err = self.process.stderr.read()
            self.process.wait(timeout=10)
            if "built without the server" in err:
                testlib.skip_absent("a memsnap built with the server")
            raise AssertionError("memsnap serve printed no URL: " + err)
        self.url = urllib.parse.urlsplit(line)
        self.port = self.url.port
        self.token = urllib.parse.parse_qs(self.url.query)["token"][0]

    def get(self, path, headers=None, method="GET", token=True):
        """(status, headers, body bytes) of one request, sent as given."""
        if token:
            path += ("&" if "?" in path else "?") + "token=" + self.token
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            sent = {"Host": "127.0.0.1:%d" % self.port}
            sent.update(headers or {})
            for name, value in sent.items():
                if value is not None:
                    connection.putheader(name, value)
            connection.endheaders()
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def report(self, name, **parameters):
        status, _, body = self.get("/api/report/%s?%s" % (name, urllib.parse.urlencode(parameters)))
        assert status == 200, body
        return json.loads(body)

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def served(memsnap):
    server = Served(memsnap)
    yield server
    assert server.stop() == 0, "memsnap serve did not stop cleanly on SIGINT"


def cli_json(memsnap, *args):
    return testlib.memsnap_json(memsnap, [*args, "--json"])


def test_every_report_equals_the_command_line(memsnap, served):
    status, _, body = served.get("/api/reports")
    assert status == 200
    entries = json.loads(body)
    assert {e["name"] for e in entries} >= {"explain", "parse", "replay-to-time", "segments", "streams"}
    for entry in entries:
        name = entry["name"]
        needed = REQUIRED.get(name, {})
        flags = [x for key, value in needed.items()
                 for x in (["--" + key.replace("_", "-")] if value == "true" else ["--" + key, value])]
        for index, path in enumerate((A, B)):
            got = served.report(name, file=index, **needed)
            assert got["report"] == cli_json(memsnap, name, path, *flags), (name, path)
        if entry["two_files"]:
            got = served.report(name, file=0, vs=1, **needed)
            assert got["report"] == cli_json(memsnap, name, A, B, *flags), name
    # A parameter in the server's spelling, and the note the command line prints.
    late = served.report("replay-to-time", file=0, time="1e6", top="3")
    assert late["report"] == cli_json(memsnap, "replay-to-time", A, "--time", "1e6", "--top", "3")
    assert any("clamped" in note for note in late["notes"]), late["notes"]
    check_replay_to_time(served, 0, A, memsnap, (0.0, 0.01, 0.05, 0.1, 0.16, 1e6))
    check_replay_to_time(served, 1, B, memsnap, (0.02, 0.1))


def test_ranks_of_the_served_files_equal_the_command_line(memsnap, served):
    status, _, body = served.get("/api/ranks")
    assert status == 200, body
    assert json.loads(body) == cli_json(memsnap, "ranks", A, B)


def test_the_page_and_the_file_list(served):
    status, headers, body = served.get("/")
    assert status == 200 and b'id="memsnap-data"' in body
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer" and headers["Cache-Control"] == "no-store"
    status, _, body = served.get("/api/files")
    files = json.loads(body)
    assert [f["path"] for f in files] == [A, B] and [f["file"] for f in files] == [0, 1]
    status, _, body = served.get("/", method="HEAD")
    assert status == 200 and body == b""


def test_every_request_needs_the_token(served):
    wrong = "0" * len(served.token)
    for path, headers in [("/api/files", None), ("/", None), ("/api/report/parse?file=0", None),
                          ("/api/files?token=" + wrong, None),
                          ("/api/files?token=" + served.token[:-1], None),
                          ("/api/files?token=" + served.token.upper(), None),
                          ("/api/files?token=", None),
                          ("/api/files", {"Authorization": "Bearer " + wrong}),
                          ("/api/files", {"Authorization": served.token})]:
        status, _, body = served.get(path, headers, token=False)
        assert status == 401, (path, headers, status)
        assert json.loads(body)["status"] == 401
        assert refusal_code(body) == "unauthorized"
        assert b"training_steps" not in body
    status, _, _ = served.get("/api/files", {"Authorization": "Bearer " + served.token}, token=False)
    assert status == 200


def test_another_host_name_is_refused(served):
    for host in ("evil.example:%d" % served.port, "127.0.0.1", "127.0.0.1:1", "", None):
        status, _, body = served.get("/api/files", {"Host": host})
        assert status == 403, (host, status)
        assert refusal_code(body) == "forbidden_host"
    for host in ("localhost:%d" % served.port, "[::1]:%d" % served.port):
        assert served.get("/api/files", {"Host": host})[0] == 200


def test_no_path_reaches_a_file(served):
    attempts = ["/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                "/api/report/..%2f..%2f..%2fetc%2fpasswd", "/api/report/parse/../../../etc/passwd",
                "/examples/training_steps.pickle.gz", "/api/files/../../../etc/passwd",
                "/api/report/parse?file=/etc/passwd", "/api/report/parse?file=../../etc/passwd",
                "/api/report/parse?file=" + urllib.parse.quote(A), "/api/report/parse?file=-1",
                "/api/report/parse?file=2", "/api/report/parse?file=1e0", "/api/report/parse?file=0x0",
                "/api/report/parse?file=%00", "/api/report/parse?file=0&vs=/etc/passwd",
                "/api/report/parse?file=0&vs=1", "/api/report/nothing?file=0", "/etc/passwd",
                "//etc/passwd", "/api/report/PARSE?file=0", "/api/report/parse"]
    for path in attempts:
        status, _, body = served.get(path)
        assert 400 <= status < 500, (path, status)
        assert refusal_code(body) == ("not_found" if status == 404 else "bad_parameter"), path
        assert b"root:" not in body and b"\x80\x04" not in body, path
    # Nothing but the served files was opened: the process holds no other file.
    opened = set()
    fd_dir = "/proc/%d/fd" % served.process.pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if target.startswith("/") and not target.startswith("/dev/"):
            opened.add(target)
    assert opened <= {os.path.realpath(A), os.path.realpath(B)}, opened
    assert served.get("/api/files")[0] == 200


def test_methods_and_oversized_or_malformed_requests(served):
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"):
        status, headers, body = served.get("/api/files", method=method)
        assert status == 405 and headers.get("Allow") == "GET, HEAD", method
        assert refusal_code(body) == "bad_request", method
    bad = ["/api/report/parse?file=0&" + "&".join("x%d=1" % i for i in range(20)),
           "/api/report/parse?file=0&top=" + "9" * 300,
           "/api/report/parse?file=0&" + "k" * 300 + "=1",
           "/api/report/parse?file=0&top=99999999999999999999999",
           "/api/report/parse?file=0&top=-1", "/api/report/parse?file=0&top=1.5",
           "/api/report/replay-to-time?file=0&time=nan", "/api/report/replay-to-time?file=0&time=1e999",
           "/api/report/replay-to-time?file=0&time=-1", "/api/report/replay-to-time?file=0&time=%zz",
           "/api/report/replay-to-time?file=0", "/api/report/parse?file=0&nothing=1",
           "/api/report/replay-step?file=0&step=1&all_steps=true",
           "/api/report/parse?file=0&vs=1", "/api/report/parse?file=0&token2=%00%ff",
           "/api/report/replay-to-time?file=0&time=1&time=2", "/api/report/parse?file=0&file=1"]
    for path in bad:
        status, _, body = served.get(path)
        assert 400 <= status < 500, (path, status, body[:200])
        if status == 400 and body:
            # bad_request: the request's shape (a parameter given twice, too
            # many, too long); bad_parameter: a value the route cannot use
            assert refusal_code(body) in ("bad_request", "bad_parameter"), path
    status, _, _ = served.get("/api/files?pad=" + "x" * 20000)
    assert status in (400, 414)
    # Raw garbage on the socket, then a request line far too long.
    for garbage in (b"\x00\xff\r\n\r\n", b"GET " + b"/" * 100000 + b" HTTP/1.1\r\n\r\n",
                    b"GET /api/files HTTP/1.1\r\n" + b"X: y\r\n" * 2000 + b"\r\n"):
        import socket
        with socket.create_connection(("127.0.0.1", served.port), timeout=30) as raw:
            try:
                raw.sendall(garbage)
                raw.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                pass
    assert served.get("/api/files")[0] == 200


def test_many_requests_at_once(served):
    paths = ["/api/report/parse?file=0", "/api/report/segments?file=1",
             "/api/report/replay-to-time?file=0&time=0.05", "/api/files", "/api/files?token=bad"]
    expected = {}
    for path in paths:
        status, _, body = served.get(path, token="token=" not in path)
        expected[path] = (status, body)

    def one(i):
        path = paths[i % len(paths)]
        status, _, body = served.get(path, token="token=" not in path)
        return path, status, body

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(400)))
    for path, status, body in results:
        assert (status, body) == expected[path], path
    assert served.get("/api/files")[0] == 200


def test_refusals_before_listening(memsnap):
    done = testlib.run_memsnap(memsnap, ["serve", "--host", "0.0.0.0", A])
    if "built without the server" in done.stderr:
        testlib.skip_absent("a memsnap built with the server")
    assert done.returncode == 2 and "--token" in done.stderr
    first = Served(memsnap)
    try:
        taken = testlib.run_memsnap(memsnap, ["serve", "--port", str(first.port), A], timeout=60)
        assert taken.returncode == 2 and "cannot listen" in taken.stderr, taken.stderr
    finally:
        assert first.stop() == 0


def test_the_memory_line_holds_replay_to_time_and_the_peak(memsnap, served):
    parse = cli_json(memsnap, "parse", A)
    peak = parse["replay"]["absolute_peak"]
    duration = parse["trace_duration_s"]
    for width in (1, 13, 1600):
        status, _, body = served.get("/api/line?file=0&width=%d" % width)
        assert status == 200, body
        line = json.loads(body)
        assert len(line["low"]) == len(line["high"]) == width
        assert max(line["high"]) == peak, width
        assert all(lo <= hi for lo, hi in zip(line["low"], line["high"]))
    # Zoomed in: the memory at each column's start (replay-to-time at that
    # time) lies between the column's low and high.
    start, end, width = duration * 0.3, duration * 0.4, 20
    line = json.loads(served.get("/api/line?file=0&from=%r&to=%r&width=%d" % (start, end, width))[2])
    for c in range(0, width, 4):
        t = start + c * (end - start) / width
        at = served.report("replay-to-time", file=0, time=repr(t))["report"]["absolute"]
        assert line["low"][c] <= at <= line["high"][c], (c, t, at, line["low"][c], line["high"][c])
    by_event = json.loads(served.get("/api/line?file=1&axis=event&width=200")[2])
    assert max(by_event["high"]) == cli_json(memsnap, "parse", B)["replay"]["absolute_peak"]
    for bad in ("width=0", "width=8193", "width=1.5", "from=2&to=1", "axis=wall", "from=nan",
                "file=9", "to=1&extra=1"):
        status, _, body = served.get("/api/line?file=0&" + bad if "file=" not in bad else "/api/line?" + bad)
        assert status == 400, (bad, status, body)


def events_of(memsnap, path):
    return cli_json(memsnap, "events", path)


def stack_frames(events, stack):
    if stack is None:
        return []
    return [(f["name"], f["filename"], f["line"])
            for f in (events["frames"][i] for i in events["stacks"][stack])]


def ends_by_replay(rows):
    """alloc entry index -> the entry that ends it (free_completed or an alloc
    at its address while live), as docs/semantics.md's replay matches them."""
    live, ends = {}, {}
    for row in rows:
        if row["action"] not in ("alloc", "free_completed") or row.get("addr") is None:
            continue
        if row["addr"] in live:
            ends[live.pop(row["addr"])] = row["index"]
        if row["action"] == "alloc":
            live[row["addr"]] = row["index"]
    return ends


def check_allocations_and_search(server, file_index, events, samples, texts):
    rows = events["events"]
    allocs = [r for r in rows if r["action"] == "alloc"]
    ends = ends_by_replay(rows)
    step = max(1, len(allocs) // samples)
    for row in allocs[::step][:samples]:
        status, _, body = server.get("/api/allocation?file=%d&entry=%d" % (file_index, row["index"]))
        assert status == 200, body
        got = json.loads(body)
        assert (got["address"], got["size"], got["stream"]) == (row["addr"], row["size"], row["stream"])
        assert (got["source"], got["category"]) == (row["source"], row["category"]), row["index"]
        assert [(f["name"], f["filename"], f["line"]) for f in got["frames"]] == \
            stack_frames(events, row.get("stack")), row["index"]
        end = ends.get(row["index"])
        assert (got["end"] or {}).get("entry") == end, (row["index"], got["end"], end)
        if end is not None:
            assert got["end"]["replaced"] == (rows[end]["action"] == "alloc")
            assert [(f["name"], f["filename"], f["line"]) for f in got["end"]["frames"]] == \
                stack_frames(events, rows[end].get("stack"))
    for text in texts:
        status, _, body = server.get("/api/search?file=%d&q=%s" % (file_index, urllib.parse.quote(text)))
        assert status == 200, body
        got = json.loads(body)
        if text.startswith("0x"):
            where = int(text, 16)
            found = [r for r in allocs if r["addr"] <= where < r["addr"] + r["size"]]
        else:
            found = [r for r in allocs if any(text in name or text in filename for name, filename, _
                                              in stack_frames(events, r.get("stack")))]
        assert got["count"] == len(found), text
        assert got["bytes"] == sum(r["size"] for r in found), text
        assert [r["entry"] for r in got["rows"]] == [r["index"] for r in found][:500], text
        assert [(r["size"], r["source"]) for r in got["rows"]] == \
            [(r["size"], r["source"]) for r in found][:500], text


def check_layout(server, file_index, events, axis, duration, columns=50):
    """At three zooms: the drawn allocations are the trace's (size, entry,
    end), live exactly in the columns they claim, the largest of those live
    at a column's position; the band plus them equals the line's high at
    every one of `columns` sampled columns; a search marks what it finds."""
    rows = events["events"]
    sizes = {r["index"]: r["size"] for r in rows if r["action"] == "alloc"}
    ends = ends_by_replay(rows)
    end_position = len(rows) + 1
    spans = {entry: (entry + 1, ends[entry] + 1 if entry in ends else end_position) for entry in sizes}
    for lo, hi in ((0.0, 1.0), (0.4, 0.6), (0.5, 0.51)):
        window = "axis=%s&from=%r&to=%r&width=800" % (axis, duration * lo, duration * hi)
        status, _, body = server.get("/api/layout?file=%d&%s&budget=300" % (file_index, window))
        assert status == 200, body
        layout = json.loads(body)
        line = json.loads(server.get("/api/line?file=%d&%s" % (file_index, window))[2])
        assert layout["high"] == line["high"] and layout["peak_at"] == line["peak_at"]
        sample = layout["peak_at"]
        drawn = layout["allocations"]
        assert len(drawn) <= 300
        assert [a["entry"] for a in drawn] == sorted(a["entry"] for a in drawn)
        for a in drawn:
            begin, end = spans[a["entry"]]
            assert a["size"] == sizes[a["entry"]]
            assert a["end_entry"] == ends.get(a["entry"])
            live = [c for c, p in enumerate(sample) if begin <= p < end]
            assert live == list(range(a["first_column"], a["last_column"] + 1)), a["entry"]
        visible = [e for e, (begin, end) in spans.items()
                   if any(begin <= p < end for p in sample)]
        assert layout["complete"] == (len(visible) == len(drawn))
        chosen = {a["entry"] for a in drawn}
        left = [sizes[e] for e in visible if e not in chosen]
        if drawn and left:
            assert max(left) <= min(a["size"] for a in drawn)
        for c in range(0, 800, 800 // columns):
            total = layout["band"][c] + sum(a["size"] for a in drawn
                                            if a["first_column"] <= c <= a["last_column"])
            assert total == layout["high"][c], (lo, hi, c)
    return layout


def test_the_allocation_layout_makes_up_the_line(memsnap, served):
    for index, path in enumerate((A, B)):
        events = events_of(memsnap, path)
        duration = cli_json(memsnap, "parse", path)["trace_duration_s"]
        check_layout(served, index, events, "time", duration)
        layout = check_layout(served, index, events, "event", len(events["events"]))
        assert min(layout["band"]) >= 0
    marked = json.loads(served.get("/api/layout?file=0&axis=event&width=100&q=attention")[2])
    found = json.loads(served.get("/api/search?file=0&q=attention")[2])
    found_entries = {r["entry"] for r in found["rows"]}
    assert marked["matched"] == sum(a["matches"] for a in marked["allocations"]) > 0
    assert all(a["matches"] == (a["entry"] in found_entries) for a in marked["allocations"]
               if found["count"] == len(found["rows"]))
    for bad in ("budget=0", "budget=15001", "budget=2.5", "q=" + "x" * 201, "width=0", "colour=1"):
        status, _, body = served.get("/api/layout?file=0&" + bad)
        assert status == 400, (bad, status, body)


def check_segment_map(server, file_index, path, memsnap, times):
    """The segment map at a time is `segments --time T --json --top N`, its
    blocks tile each segment and add up to the segment's bytes by state, and
    every allocated block names the trace's allocation live at its address."""
    for t in times:
        status, _, body = server.get("/api/segments?file=%d&time=%r&limit=20" % (file_index, t))
        assert status == 200, body
        got = json.loads(body)
        assert got["report"] == cli_json(memsnap, "segments", path, "--time", repr(t), "--top", "20")
        position = got["report"]["position"]
        rows = got["report"]["segments"]
        assert len(got["map"]) == len(rows)
        blocks_asked = 0
        for row, drawn in zip(rows, got["map"]):
            assert drawn["address"] == row["address"] and drawn["reserved"] == row["reserved"]
            offsets = [b[0] for b in drawn["blocks"]]
            assert offsets == sorted(offsets) and (not offsets or offsets[0] == 0)
            assert sum(b[1] for b in drawn["blocks"]) == row["reserved"]
            assert sum(b[1] for b in drawn["blocks"] if b[2] == 0) == row["allocated"]
            assert sum(b[1] for b in drawn["blocks"] if b[2] == 2) == row["free"]
            for offset, _, state, _ in drawn["blocks"]:
                if state != 0 or blocks_asked >= 10:
                    continue
                blocks_asked += 1
                at = "/api/block?file=%d&address=%d&position=%d" % (file_index, drawn["address"] + offset, position)
                found = json.loads(server.get(at)[2])["allocation"]
                if found is None:
                    continue  # allocated before the trace
                assert found["address"] == drawn["address"] + offset
                assert found["entry"] < position and (found["end"] is None or found["end"]["entry"] >= position)


def test_the_segment_map_equals_segments_at_a_time(memsnap, served):
    check_segment_map(served, 0, A, memsnap, (0.0, 0.05, 0.1, 10.0))
    by_position = json.loads(served.get("/api/segments?file=0&position=3000&limit=3")[2])
    assert by_position["report"]["position"] == 3000 and len(by_position["map"]) == 3
    at_dump = json.loads(served.get("/api/segments?file=1")[2])
    assert at_dump["report"] == cli_json(memsnap, "segments", B, "--top", "48")
    for bad in ("time=1&position=2", "time=-1", "position=1.5", "position=99999999", "limit=1001",
                "limit=-1", "depth=1"):
        status, _, body = served.get("/api/segments?file=0&" + bad)
        assert status == 400, (bad, status, body)
    for bad in ("address=0xzz&position=1", "address=&position=1", "address=1&position=-1", "address=1&x=2"):
        status, _, body = served.get("/api/block?file=0&" + bad)
        assert status == 400, (bad, status, body)
    assert json.loads(served.get("/api/block?file=0&address=1&position=10")[2]) == {"allocation": None}


def reserved_by_hand(rows, reserved_at_dump):
    """position -> reserved bytes, from the trace's segment entries walked back
    from the dump (docs/semantics.md), as a list indexed by position."""
    change = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
    steps = [change.get(r["action"], 0) * (r["size"] or 0) for r in rows]
    level = reserved_at_dump - sum(steps)
    out = [level]
    for step in steps:
        level += step
        out.append(level)
    return out


def check_segment_timeline(server, file_index, events, reserved_at_dump, axis, duration):
    """At three zooms: each column's reserved bytes are the highest the
    trace's segment entries reach in it, taken where they are; the drawn
    segments are segment entries of the trace (or the dump's), live exactly in
    the columns they claim; the band plus them makes up the reserved line."""
    rows = events["events"]
    by_hand = reserved_by_hand(rows, reserved_at_dump)
    for lo, hi in ((0.0, 1.0), (0.3, 0.7), (0.5, 0.52)):
        window = "axis=%s&from=%r&to=%r&width=400" % (axis, duration * lo, duration * hi)
        status, _, body = server.get("/api/segment-timeline?file=%d&%s" % (file_index, window))
        assert status == 200, body
        got = json.loads(body)
        for c in range(0, 400, 8):
            assert got["reserved"][c] == max(by_hand[got["peak_at"][c]], 0) or \
                got["reserved"][c] == by_hand[got["peak_at"][c]], (lo, c)
            total = got["band"][c] + sum(s["size"] for s in got["segments"]
                                         if s["first_column"] <= c <= s["last_column"])
            assert total == got["reserved"][c], (lo, hi, c)
        for seg in got["segments"]:
            begin = 0 if seg["begin_entry"] is None else seg["begin_entry"] + 1
            end = len(rows) + 1 if seg["end_entry"] is None else seg["end_entry"] + 1
            live = [c for c, p in enumerate(got["peak_at"]) if begin <= p < end]
            assert live == list(range(seg["first_column"], seg["last_column"] + 1))
            if seg["begin_entry"] is not None:
                # Made by its alloc or map, or (the rest of a mapping) by an unmap of its first bytes.
                made = rows[seg["begin_entry"]]
                assert made["action"] in ("segment_alloc", "segment_map", "segment_unmap")
            if seg["end_entry"] is not None:
                # Ended by its free or unmap, or by a new segment at its address.
                assert rows[seg["end_entry"]]["action"].startswith("segment_")
    return got


def test_the_segment_timeline_makes_up_reserved_memory(memsnap, served):
    for index, path in enumerate((A, B)):
        events = events_of(memsnap, path)
        reserved = cli_json(memsnap, "segments", path)["totals"]["reserved"]
        duration = cli_json(memsnap, "parse", path)["trace_duration_s"]
        whole = check_segment_timeline(served, index, events, reserved, "time", duration)
        assert whole["segments"] and min(whole["band"]) >= 0
        check_segment_timeline(served, index, events, reserved, "event", len(events["events"]))
    for bad in ("budget=0", "budget=15001", "width=0", "from=3&to=1", "q=x"):
        status, _, body = served.get("/api/segment-timeline?file=0&" + bad)
        assert status == 400, (bad, status, body)


def check_replay_to_time(server, file_index, path, memsnap, times):
    """Once the line was drawn, the server answers replay-to-time from its
    levels and spans instead of a replay: the same document as the command
    line's, which replays."""
    status, _, body = server.get("/api/line?file=%d&axis=event&width=100" % file_index)
    assert status == 200, body
    for t in times:
        got = server.report("replay-to-time", file=file_index, time=repr(t), top="100000")
        assert got["report"] == cli_json(memsnap, "replay-to-time", path, "--time", repr(t), "--top", "100000"), t


def check_live_of_sources(server, file_index, path, memsnap, times):
    """A drill-down row opened: the allocations of a source live at T are
    as many, and as many bytes, as replay-to-time --time T says for it,
    largest first, each live then by the trace's own alloc and free."""
    for t in times:
        replay = cli_json(memsnap, "replay-to-time", path, "--time", repr(t), "--top", "6")
        for row in replay["sources"]:
            query = urllib.parse.urlencode({"file": file_index, "time": repr(t), "source": row["source"]})
            status, _, body = server.get("/api/live?" + query)
            assert status == 200, body
            got = json.loads(body)
            assert (got["count"], got["bytes"]) == (row["count"], row["bytes"]), (t, row["source"])
            sizes = [r["size"] for r in got["rows"]]
            assert sizes == sorted(sizes, reverse=True) and len(sizes) == min(500, row["count"])


def test_a_drill_down_row_lists_its_allocations(memsnap, served):
    check_live_of_sources(served, 0, A, memsnap, (0.05, 0.1, 0.16))
    check_live_of_sources(served, 1, B, memsnap, (0.1,))
    at_position = json.loads(served.get("/api/live?file=0&position=3000&source=%3Cno%20frames%3E")[2])
    assert at_position["position"] == 3000 and at_position["count"] > 0
    for bad in ("time=1&position=2&source=x", "source=x", "time=-1&source=x", "position=1.5&source=x",
                "time=1&source=x&y=1"):
        status, _, body = served.get("/api/live?file=0&" + bad)
        assert status == 400, (bad, status, body)


def test_allocations_and_search_equal_the_events(memsnap, served):
    for index, path in enumerate((A, B)):
        events = events_of(memsnap, path)
        allocs = [r for r in events["events"] if r["action"] == "alloc"]
        middle = allocs[len(allocs) // 2]
        check_allocations_and_search(served, index, events, 60,
                                     ["attention", "train.py", "zzz-nothing", "module.py",
                                      "0x%x" % (middle["addr"] + middle["size"] // 2)])
    for bad in ("entry=5", "entry=-1", "entry=1.5", "entry=99999999", "entry=x", "q=", "entry=7&q=1"):
        status, _, body = served.get("/api/allocation?file=0&" + bad)
        assert status == 400, (bad, status, body)
    assert served.get("/api/search?file=0&q=" + "x" * 201)[0] == 400


@pytest.mark.fixtures
def test_every_fixture_with_a_trace(memsnap, fixtures_dir):
    """Each real file with a trace, served alone: allocations, search and the line."""
    names = sorted(n for n in os.listdir(fixtures_dir) if n.endswith((".pickle", ".pkl")))
    checked = mapped = 0
    for name in names:
        path = os.path.join(fixtures_dir, name)
        events = cli_json(memsnap, "events", path)
        allocs = [r for r in events["events"] if r["action"] == "alloc"]
        if not allocs:
            continue
        server = Served(memsnap, files=[path])
        try:
            frames = [f["name"] for f in events["frames"]]
            check_allocations_and_search(server, 0, events, 12,
                                         [frames[len(frames) // 2][:40]] if frames else ["x"])
            check_layout(server, 0, events, "event", len(events["events"]))
            reserved = cli_json(memsnap, "segments", path)["totals"]["reserved"]
            check_segment_timeline(server, 0, events, reserved, "event", len(events["events"]))
            parse = cli_json(memsnap, "parse", path)
            if parse.get("trace_duration_s") and "cannot replay" not in json.dumps(parse):
                status, _, body = server.get("/api/segments?file=0&time=%r" % (parse["trace_duration_s"] / 2))
                check_live_of_sources(server, 0, path, memsnap, (parse["trace_duration_s"] / 3,))
                check_replay_to_time(server, 0, path, memsnap,
                                     [parse["trace_duration_s"] * k for k in (0, 0.3, 0.7, 1, 2)])
                if status == 200:
                    check_segment_map(server, 0, path, memsnap, (parse["trace_duration_s"] / 2,))
                    mapped += 1
                else:
                    assert status == 422 and refusal_code(body) == "cannot_replay", body
            line = json.loads(server.get("/api/line?file=0&axis=event&width=800")[2])
            assert max(line["high"]) == cli_json(memsnap, "parse", path)["replay"]["absolute_peak"], name
        finally:
            assert server.stop() == 0
        checked += 1
    assert checked > 0 and mapped > 0, (checked, mapped)
    print("%d fixtures served, %d with a segment map" % (checked, mapped))
