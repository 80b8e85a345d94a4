#!/usr/bin/env python3
"""End-to-end behaviour of the command line: inputs, exit codes, messages.

Each check runs the real binary. Usage errors exit 2, bad input exits 1 with a
single "memsnap: ..." line on stderr, reports go to stdout only. Error checks
assert the exit status and the phrase the user reads, not only a failure.
A test reports every failed check (pytest-check), not only the first.
"""
import argparse
import base64
import gzip
import json
import os
import pickle
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

import pytest
from pytest_check import check

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(REPO, "tests", "gen", "make_snapshot.py")
EXAMPLE = os.path.join(REPO, "examples", "training_steps.pickle.gz")
CLI11_TEXTS = ("Run with --help", "A subcommand is required", "required but received", "was not expected",
               "not in {")


def skip(name, why):
    """A check that cannot run here (a missing tool): said, not failed."""
    print(f"SKIP {name}: {why}")


def run(memsnap, args, stdin=None, cwd=None):
    return subprocess.run([memsnap] + args, input=stdin, capture_output=True, cwd=cwd, timeout=300)


def stderr_lines(result):
    return result.stderr.decode(errors="replace").strip().splitlines()


def check_error(name, result, text, status=1):
    """`result` exited with `status`, printed nothing on stdout, and said `text`
    in one "memsnap: " line (usage errors too: never CLI11's own words)."""
    lines = stderr_lines(result)
    ours = len(lines) == 1 and lines[0].startswith("memsnap: ")
    with check(name):
        assert result.returncode == status and ours and text in lines[0] and not result.stdout, (
            f"want exit {status} and {text!r}; got exit {result.returncode}, stderr {lines!r}, stdout {result.stdout[:80]!r}")


def check_said(name, result, line, status):
    """`result` exited with `status`, printed nothing on stdout, and its stderr
    is exactly `line`."""
    lines = stderr_lines(result)
    with check(name):
        assert result.returncode == status and lines == [line] and not result.stdout, (
            f"want exit {status} and {line!r}; got exit {result.returncode}, stderr {lines!r}, stdout {result.stdout[:80]!r}")


@pytest.fixture(scope="module")
def inputs(work):
    """Generated snapshots the tests share: steps with marks, no steps, two devices."""
    plain = os.path.join(work, "steps.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", plain, "--events", "3000", "--steps", "5", "--marks", "--seed", "5"], check=True)
    no_steps = os.path.join(work, "no_steps.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", no_steps, "--events", "1000", "--seed", "6"], check=True)
    two_devices = os.path.join(work, "two_devices.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", two_devices, "--events", "2000", "--devices", "2", "--seed", "7"], check=True)
    return plain, no_steps, two_devices


def test_inputs_errors_and_each_command(memsnap, work, inputs):
    """stdin, gzip and zstd; errors in one line; every command on generated files."""
    plain, no_steps, two_devices = inputs
    base = json.loads(run(memsnap, ["parse", "--json", plain]).stdout)
    ignore = {"file", "file_size_bytes", "compression"}
    strip = lambda report: {k: v for k, v in report.items() if k not in ignore}

    # Inputs: stdin, gzip and zstd by magic bytes (names say nothing).
    with open(plain, "rb") as f:
        data = f.read()
    piped = run(memsnap, ["parse", "--json", "-"], stdin=data)
    with check("stdin '-' parses like the file"):
        assert piped.returncode == 0 and strip(json.loads(piped.stdout)) == strip(base), piped.stderr
    gz = os.path.join(work, "steps.bin")
    with open(gz, "wb") as f:
        f.write(gzip.compress(data))
    got = run(memsnap, ["parse", "--json", gz])
    with check("gzip detected by magic bytes"):
        assert (got.returncode == 0 and json.loads(got.stdout)["compression"] == "gzip"
                and strip(json.loads(got.stdout)) == strip(base)), got.stderr
    if shutil.which("zstd"):
        zst = os.path.join(work, "steps.data")
        subprocess.run(["zstd", "-q", "-f", plain, "-o", zst], check=True)
        got = run(memsnap, ["parse", "--json", zst])
        with check("zstd detected by magic bytes"):
            assert (got.returncode == 0 and json.loads(got.stdout)["compression"] == "zstd"
                    and strip(json.loads(got.stdout)) == strip(base)), got.stderr
    else:
        skip("zstd detected by magic bytes", "the zstd command is not installed")

    # Errors: one line, exit 1; usage errors: exit 2.
    missing = os.path.join(work, "nope.pickle")
    check_error("missing file", run(memsnap, ["parse", missing]), f"memsnap: {missing}: No such file or directory")
    check_error("a directory is refused", run(memsnap, ["parse", work]), f"memsnap: {work}: is a directory")
    empty = os.path.join(work, "empty.pickle")
    open(empty, "wb").close()
    check_error("empty file", run(memsnap, ["parse", empty]), f"memsnap: {empty}: empty file: the dump was probably interrupted")
    check_error("unknown device lists devices", run(memsnap, ["parse", "--device", "7", two_devices]),
                "memsnap: device 7 is not in this snapshot (devices with data: 0, 1)")
    got = run(memsnap, [])
    with check("memsnap alone prints the help and exits 0"):
        assert got.returncode == 0 and b"Usage: memsnap" in got.stdout, got.stderr
    check_error("unknown flag is a usage error", run(memsnap, ["parse", "--bogus", plain]),
                "memsnap: parse: unknown flag --bogus", status=2)
    check_error("replay-step needs --step or --all-steps", run(memsnap, ["replay-step", plain]),
                "memsnap: replay-step needs --step N or --all-steps", status=2)
    check_error("--labels count mismatch is a usage error", run(memsnap, ["plot", plain, no_steps, "--labels", "a"]),
                "memsnap: --labels has 1 labels for 2 files; give one label per file", status=2)
    # Without ProfilerStep marks the default (--steps auto) infers iterations from the
    # optimizer's frames; --steps profiler asks for the profiler's marks alone.
    got = run(memsnap, ["replay-step", "--all-steps", "--steps", "profiler", no_steps])
    check_error("replay-step without steps explains", got,
                f"memsnap: {no_steps} has no steps: no ProfilerStep annotations (--steps profiler). The file is fine")
    with check("replay-step without steps says what still works"):
        assert b"compare, plot and replay-to-time still work on this file" in got.stderr, got.stderr
    got = run(memsnap, ["replay-step", "--all-steps", "--steps", "none", no_steps])
    check_error("replay-step with --steps none says the flag turned steps off", got,
                f"memsnap: {no_steps} has no steps: --steps none turns step detection off")
    got = run(memsnap, ["replay-step", "--all-steps", no_steps])
    with check("replay-step infers iterations where the profiler marked none"):
        assert got.returncode == 0 and b"Steps are inferred" in got.stdout, got.stdout[-400:] + got.stderr[-400:]
    check_error("unknown step lists the steps", run(memsnap, ["replay-step", "--step", "999", plain]),
                f"memsnap: step 999 is not in {plain}; available steps: 0-4")
    check_error("compare --step not in both", run(memsnap, ["compare", "--step", "999", plain, plain]),
                "memsnap: step 999 is not complete in both files; steps complete in both: 0-4")

    # Reports: JSON on stdout only; notes on stderr.
    got = run(memsnap, ["replay-to-time", "--time", "1e9", "--json", plain])
    report = json.loads(got.stdout)
    with check("time past the end is clamped with a note"):
        assert (got.returncode == 0 and report["clamped"]
                and b"clamped" in got.stderr and report["time_s"] == report["trace_duration_precise_s"]
                and report["trace_duration_s"] == round(report["trace_duration_precise_s"], 2)), got.stderr
    got = run(memsnap, ["compare", "--json", plain, plain])
    report = json.loads(got.stdout)
    with check("a file compared with itself differs nowhere"):
        assert (all(row["delta"] == 0 for row in report["drill_down"]["sources"]) and report["config_diffs"] == []
                and all(s["absolute_peak_a"] == s["absolute_peak_b"] for s in report["step_results"]))
    renamed_a = os.path.join(work, "run_rank_0.pickle")
    renamed_b = os.path.join(work, "run_rank_3.pickle")
    shutil.copy(plain, renamed_a)
    shutil.copy(plain, renamed_b)
    report = json.loads(run(memsnap, ["compare", "--json", renamed_a, renamed_b]).stdout)
    with check("different ranks are noted"):
        assert any("different ranks" in o for o in report["observations"]), report["observations"]
    events = json.loads(run(memsnap, ["events", "--json", "--stride", "1000", plain]).stdout)
    with check("events --stride samples and keeps the last"):
        assert [e["index"] for e in events["events"]][-1] == events["event_count"] - 1

    # plot: one self-contained file.
    html = os.path.join(work, "timeline.html")
    got = run(memsnap, ["plot", plain, no_steps, "--labels", "A", "B", "-o", html])
    page = open(html, encoding="utf-8").read() if got.returncode == 0 else ""
    with check("plot writes one HTML file"):
        assert got.returncode == 0 and page.startswith("<!DOCTYPE html>") and b"wrote" in got.stderr, got.stderr
    with check("plot inlines everything"):
        assert 'src="http' not in page and "href=\"http" not in page and "{{" not in page
    got = run(memsnap, ["plot", "--text", plain, no_steps])
    with check("plot --text draws a chart with peaks"):
        assert got.returncode == 0 and b"absolute peak" in got.stdout and "┤".encode() in got.stdout

    # The bundled example parses (make demo).
    got = run(memsnap, ["parse", EXAMPLE])
    with check("bundled example parses"):
        assert got.returncode == 0 and b"Profiler steps" in got.stdout, got.stderr

    house_v2_output_and_usage(memsnap, work, plain)


def test_page_title_escaped(memsnap, work, inputs):
    plain, no_steps, two_devices = inputs
    page_title_escaped(memsnap, work, plain)


def test_drop_in_defects(memsnap, work, inputs):
    plain, no_steps, two_devices = inputs
    drop_in_defects(memsnap, work, plain, no_steps, two_devices)


def test_hostile_round_two(memsnap, work, inputs):
    plain, no_steps, two_devices = inputs
    hostile_round_two(memsnap, work, plain)


def test_source_keys(memsnap, work):
    source_keys(memsnap, work)


def test_stacked_views(memsnap, work):
    stacked_views(memsnap, work)


def test_group_by_annotation_and_pool(memsnap, work):
    group_by_annotation_and_pool(memsnap, work)


def test_usage_in_memsnaps_words(memsnap, work, inputs):
    plain, no_steps, two_devices = inputs
    usage_in_memsnaps_words(memsnap, work, plain)


def test_many_files_few_threads(memsnap, work, inputs):
    plain, no_steps, two_devices = inputs
    many_files_few_threads(memsnap, work, plain)

# ---------------------------------------------------------------------------
# Issue "House v2", items 7 and 8: output errors, broken pipes, usage errors
# and byte offsets. The behaviour is being implemented with these checks, so
# they fail against a memsnap built before it (which exits 0 when its output
# cannot be written, and exits 1 on the option values below).

def page_title_escaped(memsnap, work, plain):
    """The page's <title> is the labels HTML-escaped, the single quote too."""
    page = os.path.join(work, "title.html")
    got = run(memsnap, ["plot", plain, "--labels", "a'b <c> & \"d\"", "-o", page])
    assert got.returncode == 0, "plot with a label of HTML characters exits 0: %s" % got.stderr
    with open(page, encoding="utf-8") as f:
        title = re.search(r"<title>(.*?)</title>", f.read()).group(1)
    with check("the title escapes & < > \" and '"):
        assert title == "memsnap timeline: a&#39;b &lt;c&gt; &amp; &quot;d&quot;", title


def house_v2_output_and_usage(memsnap, work, plain):
    # A full disk or a closed stdout is an error the user must see: a report
    # that silently went nowhere would otherwise look like success.
    full_message = "memsnap: cannot write output: No space left on device"
    for command in (["parse"], ["parse", "--json"], ["dump"], ["events"], ["plot", "--text"]):
        name = " ".join(command) + " > /dev/full"
        if not os.path.exists("/dev/full"):
            skip(name, "/dev/full is absent")
            continue
        with open("/dev/full", "wb") as full:
            got = subprocess.run([memsnap] + command + [plain], stdout=full, stderr=subprocess.PIPE, timeout=300)
        lines = stderr_lines(got)
        with check(name + " exits 1 with one line"):
            assert got.returncode == 1 and lines == [full_message], f"exit {got.returncode}, stderr {lines!r}"
    # exec in sh: memsnap itself starts with file descriptor 1 closed.
    got = subprocess.run(["sh", "-c", 'exec "$0" parse "$1" >&-', memsnap, plain], capture_output=True, timeout=300)
    lines = stderr_lines(got)
    with check("parse with stdout closed exits 1 with one line"):
        assert (got.returncode == 1 and len(lines) == 1
                and lines[0].startswith("memsnap: cannot write output:")), f"exit {got.returncode}, stderr {lines!r}"

    # `memsnap events BIG | head -c 10`: a reader that stops early is normal,
    # so memsnap ends quietly, with status 0 or killed by SIGPIPE (-13 here;
    # a shell reports it as 141). The output (one line per event) must
    # overflow the pipe buffer for the write after the close to fail.
    big = os.path.join(work, "many_events.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", big, "--events", "20000", "--seed", "8"], check=True)
    reader = subprocess.Popen([memsnap, "events", big], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = reader.stdout.read(10)
    reader.stdout.close()
    try:
        _, err = reader.communicate(timeout=300)
    except subprocess.TimeoutExpired:  # a memsnap stuck on the closed pipe
        reader.kill()
        _, err = reader.communicate()
    status = reader.returncode
    with check("events | head -c 10 ends quietly"):
        assert len(head) == 10 and err == b"" and status in (0, -signal.SIGPIPE), f"exit {status}, stderr {err[:300]!r}"

    # Invalid option values are usage errors (exit 2) naming the option.
    html = os.path.join(work, "usage.html")
    check_error("plot --precision 0 is a usage error", run(memsnap, ["plot", "--precision", "0", plain, "-o", html]),
                "--precision", status=2)
    check_error("plot --text --precision -1 is a usage error", run(memsnap, ["plot", "--text", "--precision", "-1", plain]),
                "--precision", status=2)
    check_error("replay-to-time --time -1 is a usage error", run(memsnap, ["replay-to-time", plain, "--time", "-1"]),
                "--time", status=2)
    check_error("replay-step without --step or --all-steps names them", run(memsnap, ["replay-step", plain]),
                "--step", status=2)

    # A truncated pickle: the refusal names the file and where it stops.
    cut = os.path.join(work, "cut.pickle")
    with open(plain, "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    got = run(memsnap, ["dump", cut])
    lines = stderr_lines(got)
    with check("dump of a truncated pickle names the file and the byte offset"):
        assert (got.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"memsnap: {cut}: ")
                and re.search(r"\(at byte offset \d+\)", lines[0]) is not None), (
            f"exit {got.returncode}, stderr {lines!r}")


# ---------------------------------------------------------------------------
# Issue "Drop-in for the reference scripts", part 2: the defects found on real
# snapshots, each with the words the user sees.

EXAMPLE_B = os.path.join(REPO, "examples", "training_steps_larger_batch.pickle.gz")


def drop_in_defects(memsnap, work, plain, no_steps, two_devices):
    gen = lambda name, *args: (subprocess.run([sys.executable, GENERATOR, "--out", os.path.join(work, name), *args],
                                              check=True), os.path.join(work, name))[1]
    no_time = gen("no_time.pickle", "--events", "800", "--no-time", "--seed", "21")
    list_a = gen("list_a.pickle", "--top-level-list", "--events", "300", "--seed", "22")
    list_b = gen("list_b.pickle", "--top-level-list", "--events", "300", "--seed", "23")

    # Refusals name only what works on that file.
    check_error("replay-step on a file without time_us does not offer replay-to-time",
                run(memsnap, ["replay-step", "--all-steps", no_time]), "replay-to-time needs time_us, which it lacks")
    check_error("replay-step on a file with time_us offers replay-to-time",
                run(memsnap, ["replay-step", "--all-steps", "--steps", "profiler", no_steps]),
                "parse, compare, plot and replay-to-time still work on this file")

    # compare of two files without a trace says so, not "started after model construction".
    got = run(memsnap, ["compare", list_a, list_b])
    text = got.stdout.decode()
    with check("compare without traces says neither file has one"):
        assert (got.returncode == 0 and "neither file has an allocation trace" in text
                and "started after model construction" not in text), text[-600:]

    # Other devices are named, with the way to pick one.
    got = run(memsnap, ["parse", two_devices])
    note = (b"this report is device 0 (no OOM; it has the most trace entries); the file also has "
            b"data on device 1 (choose one with --device N)")
    with check("parse names the other devices, the one chosen and why"):
        assert (got.returncode == 0 and
                note in got.stdout and got.stderr.count(note) == 1), got.stdout[-400:] + got.stderr
    for command in (["replay-to-time", "--time", "1e9"], ["segments"], ["oom"], ["events"],
                    ["summarize"], ["plot", "-o", os.devnull]):
        got = run(memsnap, [command[0], two_devices] + command[1:])
        with check(f"{command[0]} names the device chosen on stderr, once"):
            assert got.returncode == 0 and got.stderr.count(b"memsnap: " + two_devices.encode() + b": " + note) == 1, (
                got.stderr[-600:])
    got = run(memsnap, ["parse", "--device", "1", two_devices])
    with check("no devices note when --device is given"):
        assert (got.returncode == 0 and b"also has data" not in got.stdout
                and b"also has data" not in got.stderr)

    # The peak's time, with a command line that shows exactly the peak.
    got = run(memsnap, ["parse", plain])
    line = [l for l in got.stdout.decode().splitlines() if "live at the peak, by source: memsnap " in l]
    peak = json.loads(run(memsnap, ["parse", "--json", plain]).stdout)["replay"]
    ok = len(line) == 1
    if ok:
        argv = line[0].split("memsnap ", 1)[1].split() + ["--json"]
        at = json.loads(run(memsnap, argv).stdout)
        ok = at["absolute"] == peak["absolute_peak"] and argv[argv.index("--time") + 1] == f"{peak['peak_time_s']:.6f}"
    with check("parse prints the peak time and a replay-to-time line that lands on the peak"):
        assert ok, line

    # The demo's pair: the same run with a larger batch peaks higher, by source.
    got = run(memsnap, ["compare", "--top", "3", EXAMPLE, EXAMPLE_B])
    with check("make demo's compare runs and drills down"):
        assert (got.returncode == 0 and b"Drill-down" in got.stdout
                and b"peaks at A" in got.stdout), got.stderr

    # Command line: clear refusals, readable help.
    check_error("--top -1 says what it expects", run(memsnap, ["parse", "--top", "-1", plain]),
                "--top: expects a whole number >= 0, not '-1'", status=2)
    for flag, value in (("--time", "nan"), ("--time", "inf")):
        check_error(f"replay-to-time {flag} {value} is refused", run(memsnap, ["replay-to-time", plain, flag, value]),
                    f"{flag}: expects a finite number, not '{value}'", status=2)
    check_error("plot --precision nan is refused", run(memsnap, ["plot", "--precision", "nan", plain]),
                "--precision: expects a finite number, not 'nan'", status=2)
    check_error("an unknown command is named", run(memsnap, ["frobnicate"]),
                "memsnap: unknown command 'frobnicate' (commands: explain, parse, dump", status=2)
    check_error("a name that looks like a path is a file, with the file's own error",
                run(memsnap, ["rank0.pickel"]), "memsnap: rank0.pickel: No such file", status=1)
    check_error("two files to a bare memsnap: compare is suggested", run(memsnap, [plain, plain]),
                f"is a second: to see why one run peaks higher than the other, memsnap compare {plain} {plain}",
                status=2)
    got = run(memsnap, ["replay-to-time", plain, "--time", "1e300"])
    with check("a huge --time is printed short"):
        assert got.returncode == 0 and b"--time 1e+300 is past the end" in got.stderr, got.stderr[-300:]
    helps = {cmd: run(memsnap, [cmd, "--help"]).stdout.decode() for cmd in ("compare", "replay-to-time", "plot")}
    with check("help: compare A B, replay-to-time FILE [B], plot --delta"):
        assert ("memsnap compare [OPTIONS] A B" in helps["compare"] and "replay-to-time [OPTIONS] FILE [B]" in helps["replay-to-time"]
                and "--delta{false}" not in helps["plot"] and "(2x)" not in helps["compare"]), (
            helps)
    obj = os.path.join(work, "object.pickle")
    with open(obj, "wb") as f:
        f.write(b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x06object\x94\x93\x94.")
    check_error("an object root reads 'an object'", run(memsnap, ["parse", "--allow-objects", obj]),
                "the pickle holds an object, not a dict")


# ---------------------------------------------------------------------------
# Issue "Hostile and broken input, round two": the items fixed so far, each
# with the exact message and exit status.

EVIL = "\x1b]0;pwned\x07\x1b[2J\r\n! fake warning: all good\x9b"


def control_bytes(data):
    """Raw terminal controls in text output (LF ends lines; everything else is an attack)."""
    return [b for b in data if (b < 0x20 and b != 0x0A) or b == 0x7F] + ([0x9B] if b"\xc2\x9b" in data else [])


def hostile_round_two(memsnap, work, plain):
    import pickle
    # 1. Invalid UTF-8 in allocator_settings: replaced, never an abort.
    bad_utf8 = os.path.join(work, "bad_utf8.pickle")
    with open(bad_utf8, "wb") as f:
        f.write(pickle.dumps({"segments": [], "allocator_settings": {("QQQ",): 1, "lst": ["QQQ"], "s": "QQQ"}})
                .replace(b"QQQ", b"\xff\xff\xff"))
    other = os.path.join(work, "other_settings.pickle")
    with open(other, "wb") as f:
        pickle.dump({"segments": [], "allocator_settings": {"s": "RRR"}}, f)
    for args in (["parse", bad_utf8], ["parse", "--json", bad_utf8], ["compare", bad_utf8, other],
                 ["compare", "--json", bad_utf8, other], ["dump", bad_utf8]):
        got = run(memsnap, args)
        with check(f"invalid UTF-8 in settings: {args[0]} {' '.join(a for a in args[1:] if a.startswith('-'))} replaces it"):
            assert got.returncode == 0 and "\ufffd" in got.stdout.decode("utf-8"), got.stderr[-300:]

    # 14. A pickle split across two gzip members reads like gunzip reads it.
    import gzip
    entries = [{"action": "alloc", "addr": i, "size": 5, "stream": 0, "time_us": i + 1, "frames": []} for i in range(3)]
    data = pickle.dumps({"segments": [], "device_traces": [entries]})
    members = os.path.join(work, "members.pickle.gz")
    with open(members, "wb") as f:
        f.write(gzip.compress(data[:len(data) // 2]) + gzip.compress(data[len(data) // 2:]))
    got = run(memsnap, ["parse", "--json", members])
    with check("two gzip members decode as one stream"):
        assert (got.returncode == 0
                and json.loads(got.stdout)["device_traces"]["event_count"] == 3), got.stderr

    # 15. Control characters from the file are escaped in text, exact in JSON.
    evil = os.path.join(work, "evil.pickle")
    frames = [{"name": EVIL, "filename": "/home/u/" + EVIL + ".py", "line": 3}]
    with open(evil, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[dict(e, frames=frames) for e in entries]],
                     "external_annotations": [{"name": EVIL, "stage": "START", "device": 0, "time_us": 1}],
                     "allocator_settings": {EVIL: EVIL}}, f)
    for args in (["parse", evil], ["events", evil], ["replay-to-time", evil, "--time", "0"], ["compare", evil, evil],
                 ["plot", "--text", evil, "--labels", "a" + EVIL]):
        got = run(memsnap, args)
        with check(f"no raw terminal controls in {args[0]} text"):
            assert (got.returncode == 0 and not control_bytes(got.stdout)
                    and b"\\x1b]0;pwned" in got.stdout), got.stdout[:200]
    got = run(memsnap, ["parse", "--json", evil])
    with check("JSON keeps the names exact"):
        assert got.returncode == 0 and EVIL in json.loads(got.stdout)["allocator_settings"]

    # 2, 12, 13 (part). Sizes that are negative or beyond 16 TiB, devices that are no CUDA
    # ordinal, and times that are no timestamp are malformed: counted, left out, warned.
    hostile = os.path.join(work, "hostile_sizes.pickle")
    e = lambda addr, size, t: {"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": []}
    segment = lambda device, total, blocks=(): {"device": device, "address": 0, "total_size": total,
                                                "allocated_size": 0, "active_size": 0, "blocks": list(blocks)}
    with open(hostile, "wb") as f:
        pickle.dump({"segments": [segment(0, 2**63), segment(0, 2**63), segment(2**40, 4096),
                                  segment(0, 4096, [{"size": -1, "state": "active_allocated"}])],
                     "device_traces": [[e(1, 100, 10), e(2, -5, 11), e(3, 2**64 - 1, 12), e(4, 7, 2**63 - 1),
                                        e(5, 7, -2**63), e(6, 9, 1.5)]],
                     "external_annotations": [{"name": "x", "stage": "START", "device": 2**40, "time_us": 5}]}, f)
    got = run(memsnap, ["parse", "--json", hostile])
    report = json.loads(got.stdout) if got.returncode == 0 else {}
    with check("implausible sizes, devices and times are counted, not summed"):
        assert (report.get("segments", {}).get("total_size") == 4096 and report.get("device_traces", {}).get("event_count") == 4
                and report.get("replay", {}).get("peak_delta") == 123
                and report.get("anomalies") == {"malformed_fields": [], "flat_device_traces": False, "times_backwards": 0,
                                                "steps_ending_before_start": [], "malformed_entries": 2, "malformed_segments": 3, "malformed_annotations": 1,
                                                "malformed_blocks": 1, "unusable_times": 3, "bytes_after_stop": 0,
                                                "bytes_after_compressed": 0}), (
            report.get("anomalies"))
    text = run(memsnap, ["parse", hostile]).stdout.decode()
    with check("and warned"):
        assert ("2 malformed trace entries were skipped" in text
                and "3 malformed segments and 1 malformed blocks were skipped" in text
                and "3 trace entries have a time_us that is no timestamp" in text and "EiB" not in text), text[-800:]
    for args in (["plot", "--text", hostile], ["events", hostile], ["replay-to-time", hostile, "--time", "0"]):
        got = run(memsnap, args)
        with check(f"{args[0]} on implausible values exits 0"):
            assert got.returncode == 0, got.stderr[-300:]

    # 2. Sums of plausible sizes stay within 2^60 (entries, segments and blocks past it are
    # malformed), so no delta, peak, baseline or B - A difference can overflow; extreme --time
    # values clamp. Under UBSan (make test-asan) any signed overflow here aborts the run.
    huge = os.path.join(work, "huge_totals.pickle")
    count = (1 << 16) + 40
    with open(huge, "wb") as f:
        pickle.dump({"segments": [segment(0, 2**44, [{"size": 2**44, "state": "active_allocated", "address": 0}])
                                  for _ in range(1 << 14 | 8)],
                     "device_traces": [[e(0x1000 * i, 2**44, 10 + i) for i in range(count)]],
                     "external_annotations": [{"name": "ProfilerStep#0", "stage": "START", "device": 0, "time_us": 10},
                                              {"name": "ProfilerStep#0", "stage": "END", "device": 0, "time_us": 2**52}]},
                    f, protocol=4)
    got = run(memsnap, ["parse", "--json", huge])
    report = json.loads(got.stdout) if got.returncode == 0 else {}
    with check("totals past 2^60 make the rest malformed, not wrapped"):
        assert (report.get("anomalies", {}).get("malformed_entries") == count - (1 << 16)
                and report.get("replay", {}).get("peak_delta") == 2**60), (got.stderr[-300:], report.get("anomalies"))
    for args in (["compare", huge, plain], ["compare", "--json", plain, huge], ["events", huge, "--stride", "997"],
                 ["plot", "--text", huge, plain], ["replay-to-time", huge, plain, "--time", "1e300"],
                 ["replay-to-time", huge, "--time", "1e-300"], ["replay-step", huge, "--all-steps"],
                 ["plot", huge, plain, "-o", os.path.join(work, "huge.html")]):
        got = run(memsnap, args)
        with check(f"{args[0]} {' '.join(a for a in args[1:] if not a.startswith('/'))} on 2^60 totals exits 0"):
            assert got.returncode == 0, got.stderr[-400:]

    # 10, 11, 13. Parts of the wrong shape are left out with a warning that names them; entries
    # right in device_traces are read as device 0's; times going backwards and steps ending
    # before they start are warned about and handled (positive span, step incomplete).
    shapes = os.path.join(work, "shapes.pickle")
    notes = [{"name": "ProfilerStep#1", "stage": "START", "device": 0, "time_us": 50},
             {"name": "ProfilerStep#1", "stage": "END", "device": 0, "time_us": 20}]
    with open(shapes, "wb") as f:
        pickle.dump({"segments": "not a list", "device_traces": [e(1, 100, 30), e(2, 50, 10), e(3, 10, 40)],
                     "external_annotations": notes}, f)
    got = run(memsnap, ["parse", "--json", shapes])
    report = json.loads(got.stdout) if got.returncode == 0 else {}
    anomalies = report.get("anomalies", {})
    with check("fields of the wrong shape are named, flat traces read as device 0, backwards times counted"):
        assert (anomalies.get("malformed_fields") == [{"field": "segments", "found": "a str"}]
                and anomalies.get("flat_device_traces") is True and anomalies.get("times_backwards") == 1
                and anomalies.get("steps_ending_before_start") == [1]
                and report.get("device_traces", {}).get("event_count") == 3
                and abs(report.get("trace_duration_s", 0) - 30e-6) < 1e-12
                and report.get("profiler_steps", {}).get("1", {}).get("complete") is False), (
            (got.stderr[-300:], anomalies, report.get("profiler_steps")))
    text = run(memsnap, ["parse", shapes]).stdout.decode()
    with check("and each is warned in words"):
        assert ("'segments' is a str, not a list: left out" in text
                and "they were read as device 0's trace" in text
                and "1 trace entries have a time_us earlier than the entry before them" in text
                and "1 ProfilerStep windows end before they start (step 1)" in text
                and "over 0.000 s" in text and "-0.0" not in text), text[-1200:]
    dict_traces = os.path.join(work, "dict_traces.pickle")
    with open(dict_traces, "wb") as f:
        pickle.dump({"segments": [segment(0, 4096)], "device_traces": {0: [e(1, 100, 30)]}}, f)
    text = run(memsnap, ["parse", dict_traces]).stdout.decode()
    with check("device_traces as a dict is named, not advice to record history"):
        assert "'device_traces' is a dict, not a list: left out" in text, text[-800:]

    # 9. stdin once.
    with open(plain, "rb") as f:
        data = f.read()
    check_error("compare - - is a usage error", run(memsnap, ["compare", "-", "-"], stdin=data),
                "memsnap: stdin ('-') can be read once; give the other inputs as files", status=2)

    # 8 (part). The terminal chart's size is bounded.
    check_error("plot --text --width 30000000 is refused", run(memsnap, ["plot", "--text", "--width", "30000000", plain]),
                "memsnap: --width must be 20 to 1000 columns and --height 5 to 500 rows", status=2)

    # 6, 8. The first bytes are checked as soon as they are read or inflated: /dev/zero and a
    # gzip of 512 MiB of zeros stop at byte 0; a stream or a decompressed pickle beyond
    # --max-input is refused, not truncated.
    not_a_pickle = "not a pickle: the first byte is 0x00, which is not a pickle opcode (at byte offset 0)"
    check_error("parse /dev/zero stops at the first byte", run(memsnap, ["parse", "/dev/zero"]),
                "memsnap: /dev/zero: " + not_a_pickle)
    zeros_gz = os.path.join(work, "zeros.gz")
    with open(zeros_gz, "wb") as f:
        f.write(gzip.compress(bytes(512 << 20), compresslevel=1))
    check_error("a gzip of zeros stops at the first inflated byte", run(memsnap, ["parse", zeros_gz]),
                f"memsnap: {zeros_gz}: " + not_a_pickle)
    check_error("so does stdin", run(memsnap, ["parse", "-"], stdin=bytes(4 << 20)), "memsnap: <stdin>: " + not_a_pickle)
    big = pickle.dumps({"segments": [], "device_traces": [[dict(e(i, 512, i + 1), frames=[]) for i in range(40000)]]})
    limit = len(big) // 2
    big_gz = os.path.join(work, "big.pickle.gz")
    with open(big_gz, "wb") as f:
        f.write(gzip.compress(big))
    too_big = f"exceeds the input limit of {limit} bytes; refusing to read further"
    check_error("--max-input refuses a larger decompressed pickle",
                run(memsnap, ["parse", big_gz, "--max-input", str(limit)]), "decompressed data " + too_big)
    check_error("and a larger stream", run(memsnap, ["parse", "-", "--max-input", str(limit)], stdin=big),
                "memsnap: <stdin>: the input " + too_big)
    got = run(memsnap, ["parse", "--json", big_gz, "--max-input", "1GiB"])
    with check("--max-input 1GiB reads it"):
        assert (got.returncode == 0
                and json.loads(got.stdout)["device_traces"]["event_count"] == 40000), got.stderr[-300:]
    check_error("--max-input 0 is a usage error", run(memsnap, ["parse", plain, "--max-input", "0"]),
                "--max-input: expects a whole number >= 1, not '0'", status=2)

    # 16. plot -o never overwrites an input and always names path and reason.
    check_error("plot -o an input file is refused", run(memsnap, ["plot", plain, "-o", plain]),
                f"memsnap: -o {plain} is one of the input files; refusing to overwrite it", status=2)
    check_error("plot -o '' is refused", run(memsnap, ["plot", plain, "-o", ""]), "memsnap: -o needs a file name", status=2)
    missing_dir = os.path.join(work, "no", "such", "dir", "t.html")
    check_error("plot -o into a missing folder names path and reason", run(memsnap, ["plot", plain, "-o", missing_dir]),
                f"memsnap: cannot write output: {missing_dir}: No such file or directory")


def source_keys(memsnap, work):
    """Source keys v2 end to end: a script's <module>, the autograd node, --skip, --keep,
    --root, --keys reference, and the flags' usage errors."""
    import pickle
    torch_conv = {"name": "_conv_forward", "filename": "/x/site-packages/torch/nn/modules/conv.py", "line": 549}
    wrapper = {"name": "checkpoint", "filename": "/home/u/utils/wrap.py", "line": 12}
    script = {"name": "<module>", "filename": "/home/u/inference2.py", "line": 198}
    model = {"name": "forward", "filename": "/usr/lib/python3.10/site-packages/transformers/modeling_llama.py",
             "line": 300}
    compiled = {"name": "call", "filename": "/tmp/torchinductor_u/4i/c4iffabc.py", "line": 3929,
                "fx_node_name": "addmm", "fx_original_trace":
                '  File "/home/u/model.py", line 42, in forward\n    h = self.proj(x)\n'}
    node = {"name": "torch::autograd::generated::BmmBackward0_apply_functional(std::vector<at::Tensor>&&)",
            "filename": "Functions.cpp", "line": 0}
    entry = lambda addr, frames: {"action": "alloc", "addr": addr, "size": 4096, "stream": 0, "time_us": addr,
                                  "frames": frames}
    path = os.path.join(work, "keys.pickle")
    with open(path, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[entry(1, [torch_conv, wrapper, script]),
                                                        entry(2, [{"name": "torch::unwind::unwind()", "filename": "??",
                                                                   "line": 0}, node]),
                                                        entry(3, [model, wrapper]),
                                                        entry(4, [compiled, torch_conv])]]}, f)

    def sources(*flags):
        got = run(memsnap, ["events", path, "--json"] + list(flags))
        return [e["source"] for e in json.loads(got.stdout)["events"]] if got.returncode == 0 else got.stderr

    with check("v2 names the user's frame, the autograd node and the line FX provenance names"):
        assert (sources() == ["checkpoint@wrap.py:12", "BmmBackward0 (backward)", "forward@modeling_llama.py:300",
                "forward@model.py:42"]), sources()
    with check("--skip passes a wrapper to the script's top level"):
        assert sources("--skip", r"utils/wrap\.py")[:2] == ["<module>@inference2.py:198", "BmmBackward0 (backward)"], (
            sources("--skip", r"utils/wrap\.py"))
    with check("--keep wins over library code"):
        assert sources("--keep", "nn/modules/conv")[0] == "_conv_forward@conv.py:549", (
            sources("--keep", "nn/modules/conv"))
    with check("--root names the innermost frame under the folder, before a package's"):
        assert (sources("--root", "/home/u")[:3] == ["checkpoint@wrap.py:12", "BmmBackward0 (backward)",
                                                     "checkpoint@wrap.py:12"]
                and sources("--root", "u/utils")[2] == "checkpoint@wrap.py:12"), (
            (sources("--root", "/home/u"), sources("--root", "u/utils")))
    with check("--root matching nothing leaves the user's code as it was"):
        assert sources("--root", "/home/someone_else") == sources(), sources("--root", "/home/someone_else")
    with check("--keys reference is the reference rule"):
        assert (sources("--keys", "reference") == ["checkpoint@wrap.py:12", "torch::unwind::unwind()@??:0",
                "checkpoint@wrap.py:12", "call@c4iffabc.py:3929"]), sources("--keys", "reference")
    with check("--group-by file, function, stack"):
        assert (sources("--group-by", "file") == ["wrap.py", "BmmBackward0 (backward)", "modeling_llama.py", "model.py"]
                and sources("--group-by", "function")[0] == "checkpoint@wrap.py"
                and sources("--group-by", "stack")[0] == "checkpoint@wrap.py:12 -> <module>@inference2.py:198"), (
            (sources("--group-by", "file"), sources("--group-by", "function"), sources("--group-by", "stack")))
    got = run(memsnap, ["compare", "--json", path, path, "--group-by", "file"])
    with check("compare groups its drill-down the same way"):
        assert (got.returncode == 0
                and "wrap.py" in {row["source"] for row in json.loads(got.stdout)["drill_down"]["sources"]}), (
            got.stdout[:400])
    got = run(memsnap, ["events", path, "--json", "--group-by", "category"])
    rows = json.loads(got.stdout)["events"] if got.returncode == 0 else []
    with check("--group-by category names the kind of memory; events carry it either way"):
        assert ([r["source"] for r in rows] == ["unknown", "autograd_detail", "activation", "unknown"]
                and [r["category"] for r in rows] == [r["source"] for r in rows]
                and [r["category"] for r in json.loads(run(memsnap, ["events", path, "--json"]).stdout)["events"]]
                == [r["source"] for r in rows]), rows
    # User rules and the entries' own metadata.
    tagged = os.path.join(work, "tagged.pickle")
    with open(tagged, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[
            dict(entry(1, [wrapper]), user_metadata="bucket 3", compile_context="graph 0"),
            dict(entry(2, [model]), user_metadata=""),
            dict(entry(3, [model]), category="PARAMETER")]],
            "external_annotations": [{"name": "dataload", "stage": "START", "device": 0, "time_us": 2},
                                     {"name": "dataload", "stage": "END", "device": 0, "time_us": 3}]}, f)
    rules = os.path.join(work, "rules.txt")
    with open(rules, "w") as f:
        f.write("# mine\ncommunication metadata ^bucket   # DDP buckets\n\ninput annotation ^dataload\n")

    def categories(*flags):
        got = run(memsnap, ["events", tagged, "--json"] + list(flags))
        return [e["category"] for e in json.loads(got.stdout)["events"]] if got.returncode == 0 else got.stderr

    with check("an entry's own category wins; rules files come before the built-in table"):
        assert (categories() == ["unknown", "activation", "parameter"]
                and categories("--category-rules", rules) == ["communication", "input", "parameter"]), (
            (categories(), categories("--category-rules", rules)))
    got = run(memsnap, ["events", tagged, "--json", "--group-by", "user_metadata"])
    with check("--group-by user_metadata and compile_context"):
        assert ([e["source"] for e in json.loads(got.stdout)["events"]] == ["bucket 3", "<no user_metadata>",
                                                                             "<no user_metadata>"]
                and [e["source"] for e in json.loads(run(memsnap, ["events", tagged, "--json", "--group-by",
                                                                   "compile_context"]).stdout)["events"]][0] == "graph 0"), (
            got.stdout[:300])
    with open(rules, "w") as f:
        f.write("input frame ok\nweights frame x\n")
    check_error("a rule naming no category is a usage error naming the line",
                run(memsnap, ["parse", tagged, "--category-rules", rules]),
                f"{rules}:2: 'weights' is no category", status=2)
    none = os.path.join(work, "none.txt")
    check_said("an unreadable rules file is bad input (exit 1), as every file that cannot be read",
               run(memsnap, ["parse", tagged, "--category-rules", none]),
               f"memsnap: --category-rules {none}: No such file or directory", 1)
    check_said("a folder as the rules file is bad input too", run(memsnap, ["parse", tagged, "--category-rules", work]),
               f"memsnap: --category-rules {work}: Is a directory", 1)
    text = run(memsnap, ["compare", tagged, tagged, "--group-by", "category"]).stdout.decode()
    with check("text tables name the group in their header"):
        assert "count B  category" in text, text[-600:]
    check_error("--group-by with --keys reference is a usage error",
                run(memsnap, ["parse", path, "--keys", "reference", "--group-by", "file"]),
                "memsnap: --group-by other than source needs memsnap's keys (--keys user)", status=2)
    check_error("--skip with no regex is a usage error", run(memsnap, ["parse", path, "--skip", "(unclosed"]),
                "memsnap: --skip '(unclosed' is no regular expression", status=2)
    check_said("--keys takes user or reference", run(memsnap, ["parse", path, "--keys", "mine"]),
               "memsnap: parse: --keys: 'mine' is not one of user, reference", 2)



# ---------------------------------------------------------------------------
# Issue 11, section 4: the plot's stacked views. The page draws what memsnap
# writes, so the properties are checked on the data: every stack bucket's
# layers sum to baseline + the largest max of the run buckets it spans, and at
# the run's peak the layers are what compare's drill-down lists at the peak
# (live_by_source, another code path than the timeline's replay).

def plot_data(html):
    page = open(html, encoding="utf-8").read()
    start = page.index('<script id="memsnap-data" type="application/json">')
    start = page.index(">", start) + 1
    return json.loads(page[start:page.index("</script>", start)])


def f64_column(text):
    raw = base64.b64decode(text)
    return struct.unpack(f"<{len(raw) // 8}d", raw)


def stacked_views(memsnap, work):
    before, other, reused = "before the trace", "other sources", "address reused without a free"
    cases = {"plain": [], "late-start": ["--late-start"], "ring-buffer": ["--ring-buffer", "700"],
             "graph-pool": ["--graph-pool"], "no-time": ["--no-time"], "odd-actions": ["--odd-actions"]}
    for name, extra in cases.items():
        path = os.path.join(work, f"stacked-{name}.pickle")
        subprocess.run([sys.executable, GENERATOR, "--out", path, "--events", "3000", "--seed", "13"] + extra, check=True)
        html = os.path.join(work, f"stacked-{name}.html")
        got = run(memsnap, ["plot", path, "-o", html])
        if not check.is_true(got.returncode == 0, f"stacked ({name}): plot writes the page: {got.stderr}"):
            continue
        data = plot_data(html)["runs"][0]
        baseline = data["stats"]["baseline"]
        for mode in ("category", "source"):
            stack = data["stacks"][mode]
            names = stack["layers"]
            with check(f"stacked ({name}, {mode}): the bottom layer is memory from before the trace"):
                assert names[0] == before, names
            if mode == "source":
                with check(f"stacked ({name}): at most 8 sources have a layer of their own"):
                    assert len([n for n in names if n not in (before, other, reused)]) <= 8, names
            for view, key in (("time", "time_buckets"), ("index", "index_buckets")):
                buckets = data[key]
                if buckets["count"] == 0:
                    with check(f"stacked ({name}, {mode}, {view}): no buckets, no stack"):
                        assert stack[view]["count"] == 0
                    continue
                peak_max = f64_column(buckets["max"])
                per = stack[view]["per_bucket"]
                layers = [f64_column(b) for b in stack[view]["layers"]]
                count = stack[view]["count"]
                with check(f"stacked ({name}, {mode}, {view}): one stack bucket per {per} buckets"):
                    assert (count == -(-buckets["count"] // per) and all(len(layer) == count for layer in layers)
                            and len(layers) == len(names))
                bad = [k for k in range(count)
                       if sum(layer[k] for layer in layers) != baseline + max(peak_max[k * per:(k + 1) * per])]
                with check(f"stacked ({name}, {mode}, {view}): layers sum to baseline + max in every bucket"):
                    assert not bad, f"{len(bad)} of {count} buckets differ, first {bad[:1]}"
            # At the peak: the first stack bucket with the largest total holds
            # the state right after the peak event.
            layers = [f64_column(b) for b in stack["index"]["layers"]]
            totals = [sum(layer[k] for layer in layers) for k in range(len(layers[0]))]
            at_peak = {n: layers[i][totals.index(max(totals))] for i, n in enumerate(names)}
            # explain's tables at the peak: the trace's allocations and memory
            # from before the trace under its own source (another code path:
            # live_at with the baseline's rows, not the timeline's layers).
            page = json.loads(run(memsnap, ["explain", "--json", "--top", "100000", path]).stdout)
            table = page["peak"]["by_category" if mode == "category" else "by_source"]
            live = {row["source"]: row["bytes"] for row in table["rows"] if row["bytes"]}
            own = {n: v for n, v in at_peak.items() if n not in (before, other, reused) and v}
            if mode == "category":
                with check(f"stacked ({name}): categories at the peak = explain's, memory before the trace included"):
                    assert own == live, f"page {own} vs explain {live}"
            else:
                rest = sum(v for n, v in live.items() if n not in own)
                with check(f"stacked ({name}): top sources at the peak = explain's rows, the rest = other sources"):
                    assert all(live.get(n) == v for n, v in own.items()) and at_peak.get(other, 0) == rest, (
                        f"page {own}, other {at_peak.get(other, 0)} vs compare {live}")



# ---------------------------------------------------------------------------
# Issue 11, section 3: --group-by annotation and pool, each against an
# independent computation from the generator's own pickle (trusted: we wrote it).

def group_by_annotation_and_pool(memsnap, work):
    path = os.path.join(work, "groups.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", path, "--events", "3000", "--graph-pool", "--marks",
                    "--steps", "3", "--seed", "3"], check=True)
    with open(path, "rb") as f:
        snapshot = pickle.load(f)

    # annotation: the innermost START still open at the entry's time (an END
    # closes the latest open START of its name; at equal times, file order).
    notes = sorted((n for n in snapshot["external_annotations"] if n["device"] == 0), key=lambda n: n["time_us"])

    def innermost(t):
        open_names = []
        for note in notes:
            if note["time_us"] > t:
                break
            if note["stage"] == "START":
                open_names.append(note["name"])
            elif note["stage"] == "END" and note["name"] in open_names:
                del open_names[len(open_names) - 1 - open_names[::-1].index(note["name"])]
        return open_names[-1] if open_names else "<no annotation>"

    listing = json.loads(run(memsnap, ["events", "--json", "--group-by", "annotation", path]).stdout)
    allocs = [e for e in listing["events"] if e["action"] == "alloc"]
    wrong = [(e["index"], e["source"], innermost(e["time_us"])) for e in allocs if e["source"] != innermost(e["time_us"])]
    with check("--group-by annotation: every alloc is grouped by the innermost open annotation"):
        assert allocs and not wrong, f"{len(wrong)} of {len(allocs)} differ, e.g. {wrong[:3]}"
    named = {e["source"] for e in allocs}
    with check("--group-by annotation: the file's annotations and steps show up as groups"):
        assert "<no annotation>" in named and any(n.startswith("ProfilerStep#") for n in named) and len(named) >= 4, (
            named)

    # pool: what is live at the end of a complete trace, by pool, is what the
    # dump's blocks hold in each pool; without the trace, the blocks say it.
    def pool_name(pool):
        return "default pool" if tuple(pool) == (0, 0) else f"pool ({pool[0]}, {pool[1]})"

    held = {}
    for segment in snapshot["segments"]:
        if segment["device"] != 0:
            continue
        for block in segment["blocks"]:
            if block["state"] != "inactive":
                name = pool_name(segment["segment_pool_id"])
                held[name] = held.get(name, 0) + block["size"]
    report = json.loads(run(memsnap, ["replay-to-time", "--time", "1e9", "--json", "--top", "100000",
                                      "--group-by", "pool", path]).stdout)
    got = {row["source"]: row["bytes"] for row in report["sources"]}
    with check("--group-by pool: live at the end of the trace by pool = the dump's blocks by pool"):
        assert got == held and len(got) >= 2, f"memsnap {got} vs blocks {held}"
    traceless = os.path.join(work, "groups-no-trace.pickle")
    with open(traceless, "wb") as f:
        pickle.dump({**snapshot, "device_traces": [[] for _ in snapshot["device_traces"]]}, f)
    report = json.loads(run(memsnap, ["parse", "--json", "--group-by", "pool", traceless]).stdout)
    active = {}
    for segment in snapshot["segments"]:
        for block in segment["blocks"]:
            if segment["device"] == 0 and block["state"] == "active_allocated":
                name = pool_name(segment["segment_pool_id"])
                active[name] = active.get(name, 0) + block["size"]
    got = {row["source"]: row["bytes"] for row in report["live_at_dump"]}
    with check("--group-by pool without a trace: the dump's active blocks by pool"):
        assert got == active, f"memsnap {got} vs {active}"
    check_error("--group-by pool is not a frame group: allowed with --keys reference",
                run(memsnap, ["parse", "--keys", "reference", "--group-by", "file", path]),
                "memsnap: --group-by other than source needs memsnap's keys (--keys user)", status=2)
    got = run(memsnap, ["parse", "--keys", "reference", "--group-by", "pool", path])
    with check("--keys reference --group-by pool runs"):
        assert got.returncode == 0, got.stderr

    # compare says when only one run has private pools.
    plain = os.path.join(work, "groups-plain.pickle")
    subprocess.run([sys.executable, GENERATOR, "--out", plain, "--events", "1000", "--seed", "4"], check=True)
    notes = json.loads(run(memsnap, ["compare", "--json", plain, path]).stdout)["observations"]
    with check("compare notes private pools on one side only"):
        assert any(n.startswith("private pools (CUDA graphs or MemPools) only in B: ") for n in notes), notes
    notes = json.loads(run(memsnap, ["compare", "--json", path, path]).stdout)["observations"]
    with check("compare with pools on both sides says nothing about them"):
        assert not any("private pools" in n for n in notes), notes

    # Entries that carry their own pool_id (recent PyTorch) are grouped by it,
    # whatever segment the address falls in; (0, 0) is the default pool.
    tagged = os.path.join(work, "groups-pool-id.pickle")
    entries = snapshot["device_traces"][0]
    expected = {}
    for k, entry in enumerate(entries):
        pool = (7, k % 3) if k % 2 else (0, 0)
        entry["pool_id"] = pool
        if entry["action"] == "alloc":
            expected[pool_name(pool)] = expected.get(pool_name(pool), 0) + entry["size"]
    with open(tagged, "wb") as f:
        pickle.dump(snapshot, f)
    report = json.loads(run(memsnap, ["parse", "--json", "--top", "100000", "--group-by", "pool", tagged]).stdout)
    got = {row["source"]: row["throughput_bytes"] for row in report["top_sources"]}
    with check("--group-by pool: an entry's own pool_id wins"):
        assert got == expected, f"memsnap {got} vs entries {expected}"




# ---------------------------------------------------------------------------
# Issue 25, section 6: usage errors in memsnap's words with the nearest
# command or flag, and one exit status for a file that cannot be read.

def usage_in_memsnaps_words(memsnap, work, plain):
    commands = ("explain, parse, dump, events, compare, replay-to-time, replay-step, plot, oom, segments, streams, whatif, summarize, "
                "ranks, check, serve")
    said = [
        ("--versio", ["--versio"], "memsnap: unknown flag --versio; did you mean --version?"),
        ("--jsn", ["parse", "--jsn", plain], "memsnap: parse: unknown flag --jsn; did you mean --json?"),
        ("--jsn=1", ["parse", "--jsn=1", plain], "memsnap: parse: unknown flag --jsn; did you mean --json?"),
        ("a swapped pair of letters", ["parse", plain, "--jsno"], "memsnap: parse: unknown flag --jsno; did you mean --json?"),
        ("a flag before the command", ["--json", "parse", plain], "memsnap: --json goes after the command: memsnap parse --json ..."),
        ("another command's flag", ["parse", plain, "--baseline", plain],
         "memsnap: parse: unknown flag --baseline (a flag of check; see memsnap parse --help)"),
        ("a flag near none", ["parse", plain, "--zzzzzz"], "memsnap: parse: unknown flag --zzzzzz (see memsnap parse --help)"),
        ("a one-letter flag gets no guess", ["parse", plain, "-x"], "memsnap: parse: unknown flag -x (see memsnap parse --help)"),
        ("a mistyped command", ["pars", plain],
         f"memsnap: unknown command 'pars'; did you mean parse? (commands: {commands}; see memsnap --help)"),
        ("a command's beginning", ["replay", plain],
         f"memsnap: unknown command 'replay'; did you mean replay-to-time or replay-step? (commands: {commands}; see memsnap --help)"),
        ("--time twice", ["replay-to-time", plain, "--time", "1", "--time", "2"],
         "memsnap: replay-to-time: --time given 2 times; give it once"),
        ("--time without its value", ["replay-to-time", plain, "--time"],
         "memsnap: replay-to-time: --time needs a value: --time SECONDS (see memsnap replay-to-time --help)"),
        ("a missing argument", ["check", "--max-peak", "1GiB"], "memsnap: check: CURRENT is missing (see memsnap check --help)"),
        ("a mistyped flag explains a missing argument", ["check", "--jsn"],
         "memsnap: check: unknown flag --jsn (see memsnap check --help)"),
        ("one argument too many", ["parse", plain, plain], f"memsnap: parse: unexpected argument '{plain}' (see memsnap parse --help)"),
        ("a value not in the list, with the nearest", ["check", plain, "--max-peak", "1GiB", "--format", "jsn"],
         "memsnap: check: --format: 'jsn' is not one of text, json, junit, github, markdown; did you mean json?"),
        ("--group-by's nearest word", ["parse", plain, "--group-by", "fiel"],
         "memsnap: parse: --group-by: 'fiel' is not one of source, file, function, stack, category, annotation, pool, "
         "user_metadata, compile_context; did you mean file?"),
    ]
    for name, args, line in said:
        got = run(memsnap, args)
        check_said(f"usage in memsnap's words: {name}", got, line, 2)
        text = got.stderr.decode(errors="replace")
        with check(f"usage in memsnap's words: {name}: none of CLI11's texts"):
            assert not any(t in text for t in CLI11_TEXTS), text
    got = run(memsnap, ["parse", "-" * 3 + "x" * 500, plain])
    with check("a long mistyped flag is cut short in the message"):
        assert got.returncode == 2 and len(got.stderr) < 200, got.stderr[:300]
    with check("--help and --version still exit 0 on stdout"):
        assert run(memsnap, ["--version"]).returncode == 0 and b"Usage: memsnap parse" in run(memsnap, ["parse", "--help"]).stdout, (
            "")

    # Every command's --help ends with what it shows and one example of it.
    for command in commands.split(", "):
        got = run(memsnap, [command, "--help"])
        example = re.search(rb"\n\nExample:\n  (memsnap [^\n]+)\n$", got.stdout)
        with check(f"{command} --help: what it shows, then an example"):
            assert (got.returncode == 0 and example is not None
                    and example.group(1).startswith(b"memsnap " + command.encode() + b" ")), got.stdout[-300:]

    # A file that cannot be read is exit 1 whatever names it: an input, a
    # baseline, a budget, a rules file, a folder of ranks.
    missing = os.path.join(work, "missing.pickle")
    cases = [
        ["parse", missing], ["dump", missing], ["events", missing], ["compare", plain, missing],
        ["replay-to-time", missing, "--time", "1"], ["replay-step", missing, "--all-steps"], ["oom", missing],
        ["segments", missing], ["plot", "--text", missing], ["check", missing, "--max-peak", "1GiB"],
        ["check", plain, "--max-peak", "1GiB", "--baseline", missing],
    ]
    for args in cases:
        check_said(f"unreadable input exits 1: {args[0]} {' '.join({missing: 'MISSING', plain: 'FILE'}.get(a, a) for a in args[1:])}",
                   run(memsnap, args), f"memsnap: {missing}: No such file or directory", 1)
    check_said("an unreadable --budget exits 1", run(memsnap, ["check", plain, "--budget", missing]),
               f"memsnap: --budget {missing}: No such file or directory", 1)
    check_said("a folder as --budget exits 1", run(memsnap, ["check", plain, "--budget", work]),
               f"memsnap: --budget {work}: Is a directory", 1)
    check_said("an unreadable --category-rules exits 1", run(memsnap, ["parse", plain, "--category-rules", missing]),
               f"memsnap: --category-rules {missing}: No such file or directory", 1)
    got = run(memsnap, ["ranks", missing])
    with check("ranks of a file that cannot be read exits 1"):
        assert got.returncode == 1, got.stderr


# ---------------------------------------------------------------------------
# Hostile input, round three, item 7: `plot DIR` started one thread per file;
# with 1,500 files and an address-space limit the thread that could not be
# created aborted memsnap (exit 134). Now a few threads load them all.
def many_files_few_threads(memsnap, work, plain):
    with open(memsnap, "rb") as f:
        if b"__asan_init" in f.read():
            skip("plot of 1,500 files under ulimit -v", "ASan reserves more address space than the limit")
            return
    folder = os.path.join(work, "many")
    os.makedirs(folder)
    for i in range(1500):
        os.symlink(plain, os.path.join(folder, "rank%04d.pickle" % i))
    got = subprocess.run(["bash", "-c", 'ulimit -v 3000000 && exec "$0" plot --text --width 40 --height 5 "$1"',
                          memsnap, folder], capture_output=True)
    with check("plot of 1,500 files under a 3 GB address-space limit: exit 0, one chart"):
        assert got.returncode == 0 and got.stdout.count("absolute peak".encode()) >= 1500, (
            (got.returncode, got.stderr[-300:]))


