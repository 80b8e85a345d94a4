#!/usr/bin/env python3
"""`memsnap explain` and a bare `memsnap FILE`: the one page agrees with the
commands it summarises (parse's peak, oom's verdict, replay-to-time at the
peak), its tables add up, its next commands run; the default device follows
the OOM in every command. Generated files first, then every real fixture
(part `fixtures`; the multi-device OOM file drives the default-device checks)."""
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

import testlib

REPO = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(REPO, "tests", "gen", "make_snapshot.py")
EXAMPLE = os.path.join(REPO, "examples", "training_steps.pickle.gz")
MULTI_DEVICE_OOM = "Constructor-Sun_code_location__memory_snapshot.pickle"

run = testlib.run_memsnap


def make(work, name, *args):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name)
    subprocess.run([sys.executable, GEN, "--out", path, *args], check=True, capture_output=True)
    return path


def table_total(table):
    return sum(row["bytes"] for row in table["rows"]) + table["rest"]["bytes"]


def explain_json(memsnap, path, *extra):
    got = run(memsnap, ["explain", "--json", path, *extra])
    return got, (json.loads(got.stdout) if got.returncode == 0 else None)


def agrees_with_the_commands(memsnap, path, label, run_next=True):
    """explain's numbers against parse, oom and replay-to-time on the same file."""
    got, page = explain_json(memsnap, path)
    if not check.is_true(page is not None, f"{label}: explain --json exits 0: {got.stderr[-400:]}"):
        return None
    parse, error = testlib.parse_json(memsnap, path, "--device", str(page["device"]))
    if not check.is_true(parse is not None, f"{label}: parse --json exits 0: {error}"):
        return None
    replay = parse["replay"]
    with check(f"{label}: the peak is parse's absolute peak, its baseline and delta"):
        assert (page["peak"]["absolute"] == replay["absolute_peak"]
                and page["peak"]["baseline"] == parse["baseline"]["baseline_at_start"]
                and page["peak"]["delta"] == replay["peak_delta"]), (page["peak"]["absolute"], replay["absolute_peak"])
    # The tables hold the trace's allocations live at the peak and memory
    # from before the trace (bytes without frames as a <no frames> row):
    # they add up to the absolute peak, frames or not.
    expect = page["peak"]["absolute"] if page["peak"]["baseline"] > 0 else page["peak"]["delta"]
    with check(f"{label}: memory from before the trace is in the tables"):
        assert page["peak"]["includes_baseline"] == (page["peak"]["baseline"] > 0), page["peak"]["baseline"]
    for table in ("by_category", "by_source"):
        total = table_total(page["peak"][table])
        with check(f"{label}: live at the peak {table} adds up"):
            assert total == expect, (total, expect)
    if page["oom"] is not None:
        oom = json.loads(run(memsnap, ["oom", "--json", "--device", str(page["device"]), path]).stdout)["oom"]
        with check(f"{label}: the OOM is oom's first, with its verdicts and numbers"):
            assert (page["oom"]["verdicts"] == [v["verdict"] for v in oom["verdicts"]] and page["oom"]["request"] == oom["request"]
                    and page["oom"]["event"] == oom["event"] and page["oom"]["live"] == oom["state"]["live"]), (
                (page["oom"], oom["verdicts"]))
    if run_next:
        for step in page["next"]:
            argv = shlex.split(step["command"])
            assert argv[0] == "memsnap"
            argv = [a if a != "timeline.html" else os.devnull for a in argv[1:]]
            got = run(memsnap, argv)
            with check(f"{label}: next command runs: {' '.join(argv[:1])}"):
                assert got.returncode == 0, got.stderr[-300:]
            if argv[0] == "replay-to-time":
                timed = json.loads(run(memsnap, argv + ["--json"]).stdout)
                with check(f"{label}: replay-to-time at the printed time lands on the peak"):
                    assert timed["absolute"] == page["peak"]["absolute"], (timed["absolute"], page["peak"]["absolute"])
    return page


def reserved_without_segment_entries(memsnap, work):
    """A trace with allocs only: reserved is the dump's segments all along,
    and plot draws it flat from the start to the end."""
    import base64
    import pickle
    import struct
    GiB = 1 << 30
    base, t, trace = 0x7F0000000000, 1_700_000_000_000_000, []
    for i in range(4):
        t += 1000
        trace.append({'action': 'alloc', 'addr': base + i * (64 << 20), 'size': 64 << 20, 'stream': 0,
                      'time_us': t, 'frames': []})
    blocks = [{'address': base + i * (64 << 20), 'size': 64 << 20, 'requested_size': 64 << 20,
               'state': 'active_allocated', 'frames': []} for i in range(4)]
    blocks.append({'address': base + 4 * (64 << 20), 'size': GiB - 4 * (64 << 20), 'requested_size': 0,
                   'state': 'inactive', 'frames': []})
    snapshot = {'segments': [{'device': 0, 'address': base, 'total_size': GiB, 'allocated_size': 4 * (64 << 20),
                              'active_size': 4 * (64 << 20), 'requested_size': 4 * (64 << 20), 'stream': 0,
                              'segment_type': 'large', 'blocks': blocks}],
                'device_traces': [trace]}
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "no_segment_entries.pickle")
    with open(path, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    html = os.path.join(work, "no_segment_entries.html")
    got = run(memsnap, ["plot", path, "-o", html])
    ok = got.returncode == 0
    if ok:
        page = open(html, encoding="utf-8").read()
        start = page.index(">", page.index('<script id="memsnap-data" type="application/json">')) + 1
        data = json.loads(page[start:page.index("</script>", start)])
        reserved = data["runs"][0]["reserved"]
        raw = base64.b64decode(reserved["bytes"]) if reserved else b""
        values = struct.unpack(f"<{len(raw) // 8}d", raw)
        times = struct.unpack(f"<{len(raw) // 8}d", base64.b64decode(reserved["t_us"])) if reserved else ()
        ok = bool(values) and set(values) == {float(GiB)} and times[0] == 0 and times[-1] >= 3000
    with check("plot draws reserved flat when the trace has no segment entries"):
        assert ok, got.stderr


def pytorch_2_0_dumps(work):
    """Two PyTorch 2.0 dumps as their writer left them: blocks with a legacy
    `history`, one trace entry, no times; and the same pair without frames."""
    import pickle  # the generator's own output: trusted
    paths = []
    for name, extra in (("legacy_a", []), ("legacy_b", ["--batch-scale", "1.5"])):
        path = make(work, name + ".pickle", "--legacy", "--events", "600", "--seed", "90", *extra)
        with open(path, "rb") as f:
            snapshot = pickle.load(f)
        snapshot["device_traces"] = [trace[-1:] for trace in snapshot["device_traces"]]
        one = os.path.join(work, name + "_one_entry.pickle")
        with open(one, "wb") as f:
            pickle.dump(snapshot, f, protocol=2)
        for segment in snapshot["segments"]:
            for block in segment["blocks"]:
                for entry in block.get("history", []):
                    entry.pop("frames", None)
        frameless = os.path.join(work, name + "_frameless.pickle")
        with open(frameless, "wb") as f:
            pickle.dump(snapshot, f, protocol=2)
        paths.append((one, frameless))
    return paths


def frameless_and_legacy(memsnap, work):
    """Tables add up without frames, 2.0 dumps compare by their blocks, and
    every suggestion and observation is true of the numbers printed."""
    (a, a_bare), (b, b_bare) = pytorch_2_0_dumps(work)
    for label, path in (("2.0 dump", a), ("2.0 dump without frames", a_bare)):
        page = agrees_with_the_commands(memsnap, path, label)
        if page:
            commands = [step["command"].split()[1] for step in page["next"]]
            with check(f"{label}: plot is not suggested for a line that never moves"):
                assert "plot" not in commands, commands
    _, page = explain_json(memsnap, a_bare)
    if page:
        with check("2.0 dump without frames: the bytes without frames are a <no frames> row"):
            assert (page["peak"]["by_source"]["rows"][0]["source"] == "<no frames>"
                    and page["peak"]["by_source"]["rows"][0]["key_kind"] == "other"
                    and page["peak"]["by_source"]["rows"][0]["bytes"] >= page["peak"]["baseline"]), (
                page["peak"]["by_source"])
    for label, (x, y) in (("2.0 dumps", (a, b)), ("2.0 dumps without frames", (a_bare, b_bare))):
        got = run(memsnap, ["compare", "--json", "--top", "100000", x, y])
        doc = json.loads(got.stdout) if got.returncode == 0 else None
        if not check.is_true(doc is not None, f"{label}: compare exits 0: {got.stderr[-300:]}"):
            continue
        drill = doc["drill_down"]
        rows = drill["sources"]
        with check(f"{label}: the drill-down compares the dumps' blocks"):
            assert (drill["live_from"] == "segment_blocks"
                    and rows), drill["live_from"]
        a_live = json.loads(run(memsnap, ["parse", "--json", x]).stdout)["segments"]["allocated_size"]
        with check(f"{label}: A's rows add up to what A's dump holds"):
            assert sum(r["peak_a"] for r in rows) == a_live, (sum(r["peak_a"] for r in rows), a_live)
        text = run(memsnap, ["compare", x, y]).stdout
        with check(f"{label}: no advice about peak deltas the traces do not have"):
            assert "compare peak deltas" not in text and "nothing live on either side" not in text, text[-600:]
        if "without frames" in label:
            with check(f"{label}: frameless blocks compare by size class"):
                assert all(r["source"].startswith("<no frames: blocks of ") for r in rows), rows[:3]
    got = run(memsnap, ["oom", "--json", "--at", "peak", a_bare])
    if check.is_true(got.returncode == 0, "2.0 dump without frames: oom --at peak exits 0: %s" % got.stderr[-300:]):
        oom = json.loads(got.stdout)["peak"]
        live = sum(r["bytes"] for r in oom["live_by_source"])
        with check("2.0 dump without frames: oom's live table adds up to the live bytes"):
            assert live == oom["state"]["live"], (live, oom["state"]["live"])


def compare_by_category(memsnap):
    """compare's by-category section holds the same live sets as its by-source
    rows, and says what each side was doing at its peak."""
    larger = os.path.join(REPO, "examples", "training_steps_larger_batch.pickle.gz")
    for extra in ([], ["--step", "2"]):
        got = run(memsnap, ["compare", "--json", "--top", "100000", EXAMPLE, larger, *extra])
        if not check.is_true(got.returncode == 0, f"compare {extra}: exits 0: {got.stderr[-300:]}"):
            continue
        drill = json.loads(got.stdout)["drill_down"]
        for side in ("a", "b"):
            by_source = sum(r[f"peak_{side}"] for r in drill["sources"])
            by_category = sum(r[f"peak_{side}"] for r in drill["categories"])
            # Categories count everything live then (memory from before the
            # trace included), as explain does: the absolute peak; the
            # example's trace made all of it, so its sources do too.
            with check(f"compare {extra}: side {side.upper()}'s categories add up to its absolute peak"):
                assert (by_category == drill[f"absolute_peak_{side}"] and by_source == by_category
                        and by_source > 0), (by_source, by_category, drill[f"absolute_peak_{side}"])
        with check(f"compare {extra}: both peaks are in the forward pass (the example's activations peak)"):
            assert drill["peak_phase_a"] == "forward" and drill["peak_phase_b"] == "forward", (
                (drill["peak_phase_a"], drill["peak_phase_b"]))
    text = run(memsnap, ["compare", EXAMPLE, larger]).stdout
    with check("compare: the text has the by-category section and the phases"):
        assert "By category, everything live at the same moments" in text and "peaked in: A the forward pass" in text, (
            text[-800:])


def explain_agrees_with_the_commands(memsnap, work):
    reserved_without_segment_entries(memsnap, work)
    compare_by_category(memsnap)
    frameless_and_legacy(memsnap, work)
    steps = make(work, "steps.pickle", "--events", "1500", "--steps", "5", "--marks", "--seed", "41")
    two = make(work, "two_devices.pickle", "--events", "1500", "--devices", "2", "--oom", "--seed", "42")
    empty = make(work, "empty.pickle", "--empty", "--seed", "43")
    no_time = make(work, "no_time.pickle", "--events", "800", "--no-time", "--seed", "44")

    # A bare `memsnap FILE` is `memsnap explain FILE`; `memsnap` alone is the help.
    bare = run(memsnap, [EXAMPLE])
    named = run(memsnap, ["explain", EXAMPLE])
    with check("memsnap FILE prints the explain page"):
        assert (bare.returncode == 0 and bare.stdout == named.stdout
                and "Peak:" in bare.stdout and "Next" in bare.stdout), bare.stderr
    bare_json = run(memsnap, [EXAMPLE, "--json", "--top", "3"])
    with check("memsnap FILE takes explain's flags"):
        assert (bare_json.returncode == 0
                and len(json.loads(bare_json.stdout)["peak"]["by_source"]["rows"]) == 3), bare_json.stderr
    alone = run(memsnap, [])
    with check("memsnap alone prints the help (exit 0)"):
        assert (alone.returncode == 0 and "explain" in alone.stdout
                and "memsnap rank0.pickle" in alone.stdout), alone.stderr
    missing = run(memsnap, ["no_such_thing"])
    with check("memsnap NAME that is neither a command nor a path: a usage error"):
        assert missing.returncode == 2, missing.stderr
    missing = run(memsnap, ["no_such_file.pickle"])
    with check("memsnap PATH that does not exist: the file's own error"):
        assert (missing.returncode == 1
                and "no_such_file.pickle: No such file" in missing.stderr), missing.stderr
    lines = named.stdout.splitlines()
    with check("the page fits one screen for a typical file"):
        assert len(lines) <= 60, len(lines)

    page = agrees_with_the_commands(memsnap, steps, "steps")
    if page:
        with check("steps: the highest step is named"):
            assert page["steps"]["count"] == 5 and page["steps"]["highest"] is not None, page["steps"]
        with check("steps: nothing lacking"):
            assert page["lacks"] == [], page["lacks"]
    page = agrees_with_the_commands(memsnap, two, "two devices")
    if page:
        with check("two devices: the page is about the device with the OOM, and says why"):
            assert (page["device"] == page["devices"][[d["oom_count"] > 0 for d in page["devices"]].index(True)]["device"]
                    and page["device_reason"] == "it ran out of memory" and page["oom"] is not None), (
                page["device_reason"])
        with check("two devices: oom is the first next command"):
            assert page["next"][0]["command"].startswith("memsnap oom "), page["next"]
    got = run(memsnap, ["explain", two])
    with check("two devices: stderr names the device chosen, why and the others"):
        assert "this report is device" in got.stderr and "it ran out of memory" in got.stderr, got.stderr
    page = agrees_with_the_commands(memsnap, no_time, "no time")
    if page:
        with check("no time: the page says entries carry no time"):
            assert "no_times" in page["lacks"], page["lacks"]
    got, page = explain_json(memsnap, empty)
    with check("empty file: no trace, said plainly"):
        assert (page is not None and "no_trace" in page["lacks"]
                and page["oom"] is None), got.stderr
    text = run(memsnap, ["explain", empty]).stdout
    with check("empty file: one line says there is nothing in it"):
        assert text.count("\n") == 1 and "no segments and no trace entries" in text, text

def fixtures(memsnap, folder):
    names = sorted(n for n in os.listdir(folder) if n.endswith((".pickle", ".pkl", ".gz", ".zst")))
    for name in names:
        # The next commands run on a few files; the numbers are checked on all.
        agrees_with_the_commands(memsnap, os.path.join(folder, name), name,
                                 run_next=name == MULTI_DEVICE_OOM or name.startswith("Yiyi"))

    # The multi-device OOM: the OOM is on device 1; every command defaults to it.
    path = os.path.join(folder, MULTI_DEVICE_OOM)
    if not os.path.exists(path):
        return
    _, page = explain_json(memsnap, path)
    with check("Constructor-Sun: explain is about device 1, where the OOM is, verdict capacity"):
        assert page["device"] == 1 and page["oom"]["verdicts"][0] == "capacity", (page["device"], page["oom"])
    parse = json.loads(run(memsnap, ["parse", "--json", path]).stdout)
    with check("Constructor-Sun: parse defaults to device 1; oom[].event is the device's own index (421)"):
        assert (parse["device"] == 1 and [o["event"] for o in parse["oom"]] == [421]
                and [d["oom_count"] for d in parse["per_device"]] == [0, 1, 0]), (parse["device"], parse["oom"])
    events = json.loads(run(memsnap, ["events", "--json", path]).stdout)
    with check("Constructor-Sun: events defaults to device 1 and its entry 421 is the oom"):
        assert events["device"] == 1 and events["events"][421]["action"] == "oom", events["device"]
    timed = run(memsnap, ["replay-to-time", "--json", "--time", "1e9", path])
    with check("Constructor-Sun: replay-to-time defaults to device 1 and names it on stderr"):
        assert json.loads(timed.stdout)["device"] == 1 and "this report is device 1 (it ran out of memory)" in timed.stderr, (
            timed.stderr)
    plot = run(memsnap, ["plot", "--text", path])
    with check("Constructor-Sun: plot defaults to device 1 and names it on stderr"):
        assert plot.returncode == 0 and "this report is device 1 (it ran out of memory)" in plot.stderr, plot.stderr
    segments = json.loads(run(memsnap, ["segments", "--json", path]).stdout)
    with check("Constructor-Sun: segments defaults to device 1"):
        assert segments["device"] == 1, segments["device"]



def test_explain_agrees_with_the_commands(memsnap, work):
    explain_agrees_with_the_commands(memsnap, work)


@pytest.mark.fixtures
def test_every_fixture(memsnap, fixtures_dir):
    fixtures(memsnap, fixtures_dir)
