#!/usr/bin/env python3
"""`memsnap oom`: one snapshot built here for each verdict (capacity,
fragmentation, private pools, outside PyTorch, spike, unexplained), with the
allocator's state at the OOM laid out by hand, so that the verdict and every
number behind it are known in advance; then the real OOM fixtures (part
`fixtures`)."""
import json
import os
import pickle
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

import testlib

MiB = 1 << 20
GiB = 1 << 30
T0 = 1_700_000_000_000_000  # µs
FORWARD = [{"name": "forward", "filename": "/home/me/model.py", "line": 42},
           {"name": "train", "filename": "/home/me/train.py", "line": 7}]

run = testlib.run_memsnap


class Scenario:
    """Segments laid out block by block; every allocated block gets an alloc
    entry (at the time given), then the oom entry: the dump is the state at
    the OOM."""

    def __init__(self):
        self.segments = []
        self.entries = []
        self.next_address = 0x7F0000000000

    def segment(self, blocks, pool=(0, 0), stream=0, times=None):
        """blocks: [(size, state)], state 'a' allocated, 'f' free, 'p' awaiting free."""
        base = self.next_address
        self.next_address += 64 * GiB
        names = {"a": "active_allocated", "f": "inactive", "p": "active_pending_free"}
        rows, at, k = [], base, 0
        for size, state in blocks:
            rows.append({"address": at, "size": size, "requested_size": size if state != "f" else 0,
                         "state": names[state], "frames": []})
            if state in "ap":
                t = times[k] if times else 0.1 * (len(self.entries) + 1)
                self.entries.append({"action": "alloc", "addr": at, "size": size, "stream": stream,
                                     "time_us": T0 + int(t * 1e6), "frames": FORWARD})
                if state == "p":
                    self.entries.append({"action": "free_requested", "addr": at, "size": size, "stream": stream,
                                         "time_us": T0 + int(t * 1e6) + 1, "frames": FORWARD})
                k += 1
            at += size
        total = at - base
        allocated = sum(s for s, st in blocks if st == "a")
        active = sum(s for s, st in blocks if st in "ap")
        self.segments.append({"device": 0, "address": base, "total_size": total, "allocated_size": allocated,
                              "active_size": active, "requested_size": allocated, "stream": stream,
                              "segment_type": "large", "segment_pool_id": pool, "is_expandable": False,
                              "frames": [], "blocks": rows})

    def write(self, path, request, device_free, oom_at_s, legacy_free=False, steps=()):
        """steps: (number, start_s, end_s or None) ProfilerStep windows."""
        oom = {"action": "oom", "size": request, "stream": 0, "time_us": T0 + int(oom_at_s * 1e6),
               "frames": FORWARD}
        if legacy_free:
            oom["addr"] = device_free
        else:
            oom["addr"] = 0
            oom["device_free"] = device_free
        entries = sorted(self.entries, key=lambda e: e["time_us"]) + [oom]
        marks = []
        for number, start, end in steps:
            marks.append({"name": f"ProfilerStep#{number}", "stage": "START", "device": 0, "time_us": T0 + int(start * 1e6)})
            if end is not None:
                marks.append({"name": f"ProfilerStep#{number}", "stage": "END", "device": 0, "time_us": T0 + int(end * 1e6)})
        with open(path, "wb") as f:
            pickle.dump({"segments": self.segments, "device_traces": [entries], "external_annotations": marks,
                         "allocator_settings": {"expandable_segments": False}}, f, protocol=4)


def verdict_cases(memsnap, work):
    cases = []

    s = Scenario()  # capacity: 10 GiB allocated, nothing free, 100 MiB on the driver, 2 GiB asked
    s.segment([(GiB, "a")] * 10, times=[0.5 * i for i in range(10)])
    cases.append(("capacity", s, 2 * GiB, 100 * MiB, 5.0, [], {
        "verdict": "capacity", "state.reserved": 10 * GiB, "state.live": 10 * GiB, "state.free": 0,
        "available": 100 * MiB, "shortfall": 2 * GiB - 100 * MiB, "state.largest_usable_block": 0}))

    s = Scenario()  # fragmentation: 2.5 GiB free in ten 256 MiB holes, 1 GiB asked
    s.segment([(768 * MiB, "a"), (256 * MiB, "f")] * 10, times=[0.4 * i for i in range(10)])
    cases.append(("fragmentation", s, GiB, 100 * MiB, 5.0, [], {
        "verdict": "fragmentation", "state.usable_free": 2560 * MiB, "state.largest_usable_block": 256 * MiB,
        "available": 2560 * MiB + 100 * MiB, "shortfall": GiB - 256 * MiB}))

    s = Scenario()  # private pool: the default pool is full, a graph pool holds 3 GiB free
    s.segment([(GiB, "a")] * 8, times=[0.5 * i for i in range(8)])
    s.segment([(GiB, "a"), (3 * GiB, "f")], pool=(1, 0), times=[4.2])
    cases.append(("private pool", s, 2 * GiB, 100 * MiB, 5.0, [], {
        "verdict": "private_pools_or_streams", "available": 100 * MiB, "elsewhere": 3 * GiB,
        "state.private_pool_reserved": 4 * GiB, "state.elsewhere_free": 3 * GiB}))

    s = Scenario()  # outside PyTorch: 10 GiB reserved, 1 GiB free, on an 80 GiB device
    s.segment([(GiB, "a")] * 10, times=[0.5 * i for i in range(10)])
    cases.append(("outside PyTorch", s, 2 * GiB, GiB, 5.0, ["--capacity", "80GiB"], {
        "verdict": "outside_pytorch", "outside_pytorch": 69 * GiB, "capacity": 80 * GiB}))

    s = Scenario()  # spike: 6 GiB for 4 s, then 6 GiB more in the last half second
    s.segment([(GiB, "a")] * 12, times=[0.1 * i for i in range(1, 7)] + [4.45 + 0.09 * i for i in range(6)])
    cases.append(("spike", s, 2 * GiB, 100 * MiB, 5.0, [], {
        "verdict": "spike", "prior_peak": 6 * GiB, "growth_bytes": 6 * GiB, "state.live": 12 * GiB}))

    s = Scenario()  # unexplained: a 4 GiB free block for a 1 GiB request
    s.segment([(GiB, "a")] * 6 + [(4 * GiB, "f")], times=[0.5 * i for i in range(6)])
    cases.append(("unexplained", s, GiB, 0, 5.0, [], {
        "verdict": "unexplained", "state.largest_usable_block": 4 * GiB, "available": 4 * GiB}))

    s = Scenario()  # awaiting free counts where the request cannot use it; legacy free bytes in addr
    s.segment([(GiB, "a")] * 6 + [(2 * GiB, "p")], times=[0.5 * i for i in range(7)])
    cases.append(("awaiting free, legacy addr", s, GiB, 50 * MiB, 5.0, [], {
        "verdict": "private_pools_or_streams", "state.awaiting_free": 2 * GiB, "device_free": 50 * MiB,
        "elsewhere": 2 * GiB}, True))

    for case in cases:
        name, scenario, request, free, at_s, flags, expected = case[:7]
        legacy = len(case) > 7 and case[7]
        path = os.path.join(work, f"oom-{name.replace(' ', '-').replace(',', '')}.pickle")
        scenario.write(path, request, free, at_s, legacy_free=legacy)
        got = run(memsnap, ["oom", "--json", path] + flags)
        if not check.is_true(got.returncode == 0, f"oom {name}: exit 0: {got.stderr}"):
            continue
        report = json.loads(got.stdout)
        oom = report["oom"]
        values = {"capacity": report["capacity"]}
        values.update(oom)
        for key, value in oom["state"].items():
            values["state." + key] = value
        wrong = {k: (values.get(k), v) for k, v in expected.items() if values.get(k) != v}
        with check(f"oom {name}: verdict and numbers"):
            assert not wrong, wrong
        with check(f"oom {name}: the request, its source and category"):
            assert (oom["request"] == request
                    and oom["request_source"] == "forward@model.py:42" and oom["request_category"] == "activation"), oom
        text = run(memsnap, ["oom", path] + flags)
        first = next((s["sentence"] for s in oom["verdicts"]), "")
        with check(f"oom {name}: the text leads with the verdict sentence"):
            assert text.returncode == 0 and f"Verdict: {oom['verdict']}\n  {first}\n" in text.stdout, text.stdout[:800]
    return cases


def headroom_by_step(memsnap, work):
    """With profiler steps: the OOM's step and the highest complete step before it."""
    s = Scenario()  # 1 GiB at 0.25 + 0.5 k s, never freed; steps of 1 s; the OOM in step 2
    s.segment([(GiB, "a")] * 5, times=[0.25 + 0.5 * k for k in range(5)])
    path = os.path.join(work, "oom-steps.pickle")
    s.write(path, 2 * GiB, 0, 2.5, steps=[(0, 0.0, 1.0), (1, 1.0, 2.0), (2, 2.0, None)])
    oom = json.loads(run(memsnap, ["oom", "--json", path]).stdout)["oom"]
    with check("oom with steps: the OOM's step and the highest complete step before it (step 1, 4 GiB)"):
        assert oom["oom_step"] == 2 and oom["prior_step"] == 1 and oom["prior_step_peak"] == 4 * GiB, (
            {k: oom[k] for k in ("oom_step", "prior_step", "prior_step_peak")})
    text = run(memsnap, ["oom", path]).stdout
    with check("oom with steps: the text gives the step's peak and the margin"):
        assert ("peak of step 1" in text and "the highest complete step before the OOM (which came in step 2); "
                "1.00 GiB below reserved + device free at the OOM" in text), text


def options_and_refusals(memsnap, work):
    s = Scenario()
    s.segment([(GiB, "a")] * 4, times=[0.5 * i for i in range(4)])
    one = os.path.join(work, "oom-twice.pickle")
    s.write(one, 2 * GiB, 0, 3.0)
    with open(one, "rb") as f:
        snapshot = pickle.load(f)
    trace = snapshot["device_traces"][0]
    second = dict(trace[-1], size=3 * GiB, time_us=trace[-1]["time_us"] + 1000)
    snapshot["device_traces"] = [[], trace + [second]]  # the OOMs are on device 1
    for segment in snapshot["segments"]:
        segment["device"] = 1
    with open(one, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    report = json.loads(run(memsnap, ["oom", "--json", one]).stdout)
    with check("oom: the default device is the first with an oom entry"):
        assert (report["device"] == 1
                and report["devices_with_oom"] == [1] and report["oom_count"] == 2 and report["oom"]["ordinal"] == 1), (
            report)
    report = json.loads(run(memsnap, ["oom", "--json", "--at", "2", one]).stdout)
    with check("oom --at 2 picks the second entry"):
        assert report["oom"]["request"] == 3 * GiB and report["oom"]["ordinal"] == 2
    got = run(memsnap, ["oom", "--at", "3", one])
    with check("oom --at past the last entry is a usage error naming the count"):
        assert got.returncode == 2 and "memsnap: --at 3: device 1 has 2 oom entries (1-2)" in got.stderr, got.stderr
    got = run(memsnap, ["oom", "--device", "0", one])
    with check("oom on a device without one says which devices have one and how to capture one"):
        assert (got.returncode == 0 and "no oom entry on device 0 (devices with one: 1; use --device)" in got.stdout
                and "_cuda_attach_out_of_memory_observer" in got.stdout), got.stdout + got.stderr
    got = run(memsnap, ["oom", "--json", "--device", "0", one])
    with check("oom --json without an oom entry: oom is null"):
        assert got.returncode == 0 and json.loads(got.stdout)["oom"] is None
    segments_only = os.path.join(work, "oom-segments-only.pickle")
    with open(segments_only, "wb") as f:
        pickle.dump(snapshot["segments"], f, protocol=4)  # torch.cuda.memory_snapshot(): a list
    got = run(memsnap, ["oom", segments_only])
    with check("oom on a segments-only snapshot says it has no history to show an OOM"):
        assert got.returncode == 0 and "records no allocation history for the device" in got.stdout, (
            got.stdout + got.stderr)
    for flags, text in ((["--window", "0"], "--window must be > 0"), (["--at", "0"], "--at"),
                        (["--capacity", "lots"], "--capacity")):
        got = run(memsnap, ["oom", one] + flags)
        with check(f"oom {' '.join(flags)} is a usage error"):
            assert got.returncode == 2 and text in got.stderr, got.stderr


def entry(action, addr, size, t_s, stream=0):
    return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": T0 + int(t_s * 1e6),
            "frames": FORWARD}


def block(address, size, state):
    return {"address": address, "size": size, "requested_size": size if state != "inactive" else 0,
            "state": state, "frames": []}


def segment_dict(base, blocks):
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {"device": 0, "address": base, "total_size": sum(b["size"] for b in blocks),
            "allocated_size": allocated, "active_size": active, "requested_size": allocated, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": blocks}


def fragmented_then_released(path):
    """A caching allocator's own sequence: segment A (10 GiB) filled with
    alternating 768 MiB and 256 MiB tensors, the 256 MiB ones freed (ten
    holes); segment B (4 GiB) filled with four 1 GiB tensors; a 1 GiB request
    fails; then the exception frees B's tensors and empty_cache releases B.
    The dump shows A only, so the state at the OOM exists only as a replay:
    fragmentation, with the largest usable block 256 MiB."""
    a, b = 0x7F0000000000, 0x7F1000000000
    trace, t = [entry("segment_alloc", a, 10 * GiB, 0.01)], 0.02
    for k in range(10):
        base = a + k * GiB
        trace += [entry("alloc", base, 768 * MiB, t), entry("alloc", base + 768 * MiB, 256 * MiB, t + 0.01)]
        t += 0.1
    for k in range(10):
        hole = a + k * GiB + 768 * MiB
        trace += [entry("free_requested", hole, 256 * MiB, t), entry("free_completed", hole, 256 * MiB, t + 0.001)]
        t += 0.01
    trace.append(entry("segment_alloc", b, 4 * GiB, t))
    for k in range(4):
        trace.append(entry("alloc", b + k * GiB, GiB, t + 0.1 * (k + 1)))
    t += 1.0
    oom = entry("oom", 0, GiB, t)
    oom["device_free"] = 100 * MiB
    trace.append(oom)
    for k in range(4):
        trace += [entry("free_requested", b + k * GiB, GiB, t + 0.01), entry("free_completed", b + k * GiB, GiB, t + 0.02)]
    trace.append(entry("segment_free", b, 4 * GiB, t + 0.1))
    blocks = []
    for k in range(10):
        blocks += [block(a + k * GiB, 768 * MiB, "active_allocated"), block(a + k * GiB + 768 * MiB, 256 * MiB, "inactive")]
    with open(path, "wb") as f:
        pickle.dump({"segments": [segment_dict(a, blocks)], "device_traces": [trace],
                     "allocator_settings": {"expandable_segments": False}}, f, protocol=4)


def replayed_block_facts(memsnap, work):
    """Entries after the OOM changed the allocator: the block-level facts come
    from the state replayed to the OOM, and the verdict uses them."""
    path = os.path.join(work, "oom-released-after.pickle")
    fragmented_then_released(path)
    got = run(memsnap, ["oom", "--json", path])
    assert got.returncode == 0, "oom with entries after it: exit 0: %s" % got.stderr
    oom = json.loads(got.stdout)["oom"]
    state = oom["state"]
    with check("oom with entries after it: the block facts are replayed (9 entries after the OOM)"):
        assert state["block_facts"] == "replayed" and state["entries_after"] == 9 and not state["dump_is_oom_state"], (
            state)
    with check("oom with entries after it: reserved 14 GiB and live 11.5 GiB at the OOM (B still there)"):
        assert state["reserved"] == 14 * GiB and state["live"] == 7680 * MiB + 4 * GiB, state
    with check("oom with entries after it: fragmentation from the replayed blocks (2.5 GiB free, largest 256 MiB)"):
        assert (oom["verdict"] == "fragmentation" and state["usable_free"] == 2560 * MiB
                and state["largest_usable_block"] == 256 * MiB and oom["shortfall"] == GiB - 256 * MiB), (
            (oom["verdict"], state))
    segments = json.loads(run(memsnap, ["segments", "--json", "--time", str(oom["time_s"]), path]).stdout)
    with check("oom with entries after it: the same largest free block as segments --time at the OOM"):
        assert (segments["largest_free_block"]["bytes"] == state["largest_usable_block"]
                and segments["totals"]["reserved"] == state["reserved"]), segments["largest_free_block"]
    text = run(memsnap, ["oom", path]).stdout
    with check("oom with entries after it: the text says where the blocks come from"):
        assert ("replayed to the OOM from the dump (9 entries after it; the replay reproduces the dump exactly)" in text
                and "the largest free block was 256.00 MiB: the free memory is in pieces." in text), text
    # Without block addresses the replay is impossible: the facts are unknown, and the report says why.
    with open(path, "rb") as f:
        snapshot = pickle.load(f)
    for segment in snapshot["segments"]:
        segment["blocks"] = []
    bare = os.path.join(work, "oom-released-after-no-blocks.pickle")
    with open(bare, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    state = json.loads(run(memsnap, ["oom", "--json", bare]).stdout)["oom"]["state"]
    with check("oom without the dump's blocks: block facts unknown, with the reason"):
        assert (state["block_facts"] == "unknown" and state["largest_usable_block"] is None
                and state["block_facts_unknown"]), state


def at_peak(memsnap, work):
    """--at peak: the same analysis at the absolute peak of a file without an oom entry."""
    a = 0x7F0000000000
    trace = [entry("segment_alloc", a, 8 * GiB, 0.0)]
    for k in range(6):
        trace.append(entry("alloc", a + k * GiB, GiB, 0.2 * (k + 1)))  # peak 6 GiB at 1.2 s
    for k in range(3, 6):
        trace += [entry("free_requested", a + k * GiB, GiB, 2.0 + k * 0.1),
                  entry("free_completed", a + k * GiB, GiB, 2.0 + k * 0.1 + 0.01)]
    blocks = [block(a + k * GiB, GiB, "active_allocated") for k in range(3)] + [block(a + 3 * GiB, 5 * GiB, "inactive")]
    path = os.path.join(work, "peak-no-oom.pickle")
    with open(path, "wb") as f:
        pickle.dump({"segments": [segment_dict(a, blocks)], "device_traces": [trace]}, f, protocol=4)
    got = run(memsnap, ["oom", "--json", "--at", "peak", "--capacity", "10GiB", path])
    assert got.returncode == 0, "oom --at peak: exit 0: %s" % got.stderr
    report = json.loads(got.stdout)
    peak = report["peak"]
    parse = json.loads(run(memsnap, ["parse", "--json", path]).stdout)
    with check("oom --at peak: the moment is the peak, no verdict"):
        assert (report["moment"] == "peak" and report["oom"] is None and peak["verdict"] is None
                and peak["verdicts"] == [] and peak["event"] == 6 and abs(peak["time_s"] - 1.2) < 1e-6), peak
    with check("oom --at peak: live = parse's absolute peak; the replayed state then (2 GiB free in one block)"):
        assert (peak["state"]["live"] == parse["replay"]["absolute_peak"] == 6 * GiB and peak["state"]["reserved"] == 8 * GiB
                and peak["state"]["block_facts"] == "replayed" and peak["state"]["largest_usable_block"] == 2 * GiB), (
            (peak["state"], parse["replay"]["absolute_peak"]))
    with check("oom --at peak: the allocation that reached it"):
        assert (peak["request"] == GiB
                and peak["request_source"] == "forward@model.py:42"), peak
    with check("oom --at peak: the headroom sentence has the numbers"):
        assert ("At the peak 6.00 GiB were live in 8.00 GiB reserved, 2.00 GiB free in segments; the largest free "
                "block on stream 0 of the default pool was 2.00 GiB" in peak["headroom"]
                and "2.00 GiB beyond what PyTorch reserved" in peak["headroom"]), peak["headroom"]
    text = run(memsnap, ["oom", "--at", "peak", path]).stdout
    with check("oom --at peak: the text"):
        assert ("device 0, at the peak (event 6 at 1.200000 s)" in text
                and "The allocation that reached the peak" in text and "\nHeadroom\n" in text
                and "Verdict" not in text and "Live at the peak by source" in text), text
    got = run(memsnap, ["oom", path])
    with check("oom without an oom entry points to --at peak"):
        assert (got.returncode == 0
                and "memsnap oom --at peak" in got.stdout), got.stdout
    for bad in ("top", "-1", "1.5"):
        got = run(memsnap, ["oom", "--at", bad, path])
        with check(f"oom --at {bad} is a usage error naming both forms"):
            assert (got.returncode == 2
                    and "expects a whole number >= 1 or 'peak'" in got.stderr), got.stderr


def oom_folder(memsnap, work):
    """oom DIR: one row per rank, then the first OOM in time in full."""
    folder = os.path.join(work, "oom_ranks")
    os.makedirs(folder, exist_ok=True)
    gen = os.path.join(os.path.dirname(HERE), "gen", "make_snapshot.py")
    for rank, extra in ((0, []), (1, ["--oom"]), (2, ["--oom"])):
        subprocess.run([sys.executable, gen, "--out", os.path.join(folder, f"rank_{rank}.pickle"),
                        "--events", "800", "--seed", str(70 + rank)] + extra, check=True, capture_output=True)
    with open(os.path.join(folder, "rank_3.pickle"), "wb") as f:
        f.write(b"not a pickle")
    got = run(memsnap, ["oom", "--json", folder])
    report = json.loads(got.stdout) if got.returncode == 0 else None
    assert report is not None, "oom DIR: exit 0 and JSON: %s" % got.stderr
    rows = report["ranks"]
    with check("oom DIR: one row per file, ranks from the names"):
        assert [r["rank"] for r in rows] == [0, 1, 2, 3], rows
    with check("oom DIR: an unreadable file is a row that says why"):
        assert (rows[3]["error"] is not None
                and rows[3]["oom_count"] == 0), rows[3]
    times = {}
    for row in rows[:3]:
        single = json.loads(run(memsnap, ["oom", "--json", row["file"]]).stdout)
        parsed = json.loads(run(memsnap, ["parse", "--json", row["file"]]).stdout)
        if single["oom"] is None:
            with check(f"oom DIR: rank {row['rank']} without an OOM has no verdict"):
                assert (row["oom_count"] == 0
                        and row["verdict"] is None), row
            continue
        times[row["rank"]] = parsed["oom"][0]["time_us"]
        with check(f"oom DIR: rank {row['rank']}'s row is oom FILE's verdict and numbers"):
            assert (row["verdict"] == single["oom"]["verdict"] and row["request"] == single["oom"]["request"]
                    and row["live"] == single["oom"]["state"]["live"] and row["time_us"] == times[row["rank"]]), row
    first = min(times, key=times.get)
    with check("oom DIR: the first OOM in time is analysed in full"):
        assert (report["first"] == first
                and report["first_oom"]["file"] == rows[first]["file"] and report["first_oom"]["oom"] is not None), (
            (report["first"], times))
    text = run(memsnap, ["oom", folder])
    with check("oom DIR text: the table, then the first OOM"):
        assert ("2 of 4 files ran out of memory" in text.stdout
                and "<- first in time" in text.stdout and "Verdict:" in text.stdout), text.stdout[:400]
    got = run(memsnap, ["oom", "--at", "peak", folder])
    with check("oom DIR --at: a usage error"):
        assert got.returncode == 2 and "--at takes one file" in got.stderr, got.stderr


def legacy_peak_before_one_entry(memsnap, work):
    """A PyTorch 2.0 dump (blocks without address, frames in `history`)
    whose short trace has one entry after the peak: the dump is not the
    peak's state, yet what was live then is the blocks from before the trace
    plus the trace's own allocations, and the tables name all of it."""
    base = 0x7F0000000000
    model = [{"filename": "/home/me/model.py", "name": "build", "line": 7}]
    step = [{"filename": "/home/me/train.py", "name": "step", "line": 30}]
    blocks = [{"size": 1 * GiB, "state": "active_allocated",
               "history": [{"addr": base + i * GiB, "real_size": 1 * GiB, "frames": model}]} for i in range(3)]
    blocks.append({"size": 256 * MiB, "state": "active_allocated",
                   "history": [{"addr": base + 3 * GiB, "real_size": 256 * MiB, "frames": step}]})
    blocks.append({"size": 4 * GiB - 3 * GiB - 256 * MiB, "state": "inactive", "history": []})
    segment = {"device": 0, "address": base, "total_size": 4 * GiB, "allocated_size": 3 * GiB + 256 * MiB,
               "active_size": 3 * GiB + 256 * MiB, "stream": 0, "segment_type": "large", "blocks": blocks}
    trace = [{"action": "alloc", "addr": base + 3 * GiB, "size": 256 * MiB, "stream": 0, "frames": step},
             {"action": "alloc", "addr": base + 3 * GiB + 256 * MiB, "size": 128 * MiB, "stream": 0, "frames": step},
             {"action": "free_completed", "addr": base + 3 * GiB + 256 * MiB, "size": 128 * MiB, "stream": 0,
              "frames": step}]
    path = os.path.join(work, "legacy_one_after_peak.pickle")
    with open(path, "wb") as f:
        pickle.dump({"segments": [segment], "device_traces": [trace]}, f, protocol=2)
    got = run(memsnap, ["oom", "--at", "peak", "--json", path])
    report = json.loads(got.stdout) if got.returncode == 0 else None
    assert report is not None, "2.0 dump, one entry after the peak: oom --at peak exits 0: %s" % got.stderr
    peak = report["peak"]
    live = peak["state"]["live"]
    by_source = {row["source"]: row["bytes"] for row in peak["live_by_source"]}
    with check("2.0 dump, one entry after the peak: live at the peak is 3 GiB from before the trace + 384 MiB"):
        assert live == 3 * GiB + 384 * MiB, live
    with check("2.0 dump, one entry after the peak: the tables name all of it, the blocks' history included"):
        assert (sum(by_source.values()) == live and by_source.get("build@model.py:7") == 3 * GiB
                and sum(row["bytes"] for row in peak["live_by_category"]) == live), by_source
    text = run(memsnap, ["oom", "--at", "peak", path]).stdout
    with check("2.0 dump, one entry after the peak: never '(nothing live)'"):
        assert "(nothing live)" not in text, text[-600:]


def fixtures(memsnap, folder):
    path = os.path.join(folder, "Constructor-Sun_code_location__memory_snapshot.pickle")
    report = json.loads(run(memsnap, ["oom", "--json", path]).stdout)
    oom = report["oom"]
    with check("fixture Constructor-Sun: the oom on device 1, 4.94 GiB asked with 91.25 MiB free"):
        assert (report["device"] == 1 and oom["request"] == 5308694528 and oom["device_free"] == 95682560
                and oom["request_source"] == "update_nodes@models.py:181"), oom
    with check("fixture Constructor-Sun: 174 frees after the OOM; the block state at it is replayed (exact)"):
        assert (oom["state"]["entries_after"] == 174 and not oom["state"]["dump_is_oom_state"]
                and oom["state"]["block_facts"] == "replayed" and oom["state"]["largest_usable_block"] is not None), (
            oom["state"])
    segments = json.loads(run(memsnap, ["segments", "--json", "--device", "1", "--time", str(oom["time_s"]), path]).stdout)
    with check("fixture Constructor-Sun: the largest usable block is segments --time's at the OOM"):
        assert (segments["largest_free_block"]["bytes"] == oom["state"]["largest_usable_block"]
                and segments["totals"]["reserved"] == oom["state"]["reserved"]), segments["largest_free_block"]
    with check("fixture Constructor-Sun: capacity; activations would need to shrink"):
        assert (oom["verdict"] == "capacity" and oom["shortfall"] > 0
                and oom["live_by_category"][0]["source"] == "activation"), oom["verdicts"]
    timed = json.loads(run(memsnap, ["replay-to-time", "--json", "--device", "1", "--time", str(oom["time_s"]), path]).stdout)
    with check("fixture Constructor-Sun: live at the OOM = replay-to-time at its time"):
        assert oom["state"]["live"] == timed["absolute"], (oom["state"]["live"], timed["absolute"])
    legacy = os.path.join(folder, "Yiyi-philosophy_LLM-inference__oom_snapshot.pickle")
    got = run(memsnap, ["oom", legacy])
    with check("fixture Yiyi (2.0 dump at an OOM, no oom entry): says so and how to capture one"):
        assert got.returncode == 0 and "no oom entry on device 0" in got.stdout, got.stdout + got.stderr
    peak = json.loads(run(memsnap, ["oom", "--json", "--at", "peak", legacy]).stdout)["peak"]
    with check("fixture Yiyi --at peak: the dump's state, named from its blocks' history (11.03 GiB, 460 blocks)"):
        assert (peak["at_trace_start"] and peak["state"]["block_facts"] == "dump" and peak["live_from_blocks"]
                and peak["live_by_source"][0]["source"] == "allocate@pytorch_backend.py:190"
                and peak["live_by_source"][0]["count"] == 460 and peak["state"]["live"] == 11840159744 and peak["event"] is None), (
            peak)
    every_fixture_at_peak(memsnap, folder)


def every_fixture_at_peak(memsnap, folder):
    """On every real snapshot: --at peak reads it, live at the peak is parse's
    absolute peak on the same device, and the block facts are known (from the
    dump or an exact replay) wherever the dump lists block addresses."""
    names = sorted(n for n in os.listdir(folder) if n.endswith((".pickle", ".pkl")))
    unknown, wrong = [], []
    for name in names:
        path = os.path.join(folder, name)
        parse, error = testlib.parse_json(memsnap, path)
        if parse is None:
            wrong.append((name, error.strip()))
            continue
        device = str(parse["device"])
        got = run(memsnap, ["oom", "--json", "--at", "peak", "--device", device, path])
        if got.returncode != 0:
            wrong.append((name, got.stderr.strip()))
            continue
        peak = json.loads(got.stdout)["peak"]
        if peak["state"]["live"] != parse["replay"]["absolute_peak"]:
            wrong.append((name, peak["state"]["live"], parse["replay"]["absolute_peak"]))
        if peak["state"]["block_facts"] not in ("dump", "replayed"):
            unknown.append((name, peak["state"]["block_facts"], peak["state"]["block_facts_unknown"]))
    with check(f"fixtures: oom --at peak on all {len(names)} files: live at the peak = parse's absolute peak"):
        assert names and not wrong, wrong
    with check("fixtures: oom --at peak knows the blocks at the peak on every file (dump or exact replay)"):
        assert not unknown, unknown


def generated(memsnap, work):
    verdict_cases(memsnap, work)
    headroom_by_step(memsnap, work)
    options_and_refusals(memsnap, work)
    replayed_block_facts(memsnap, work)
    at_peak(memsnap, work)
    oom_folder(memsnap, work)
    legacy_peak_before_one_entry(memsnap, work)



def test_verdict_cases(memsnap, work):
    verdict_cases(memsnap, work)


def test_headroom_by_step(memsnap, work):
    headroom_by_step(memsnap, work)


def test_options_and_refusals(memsnap, work):
    options_and_refusals(memsnap, work)


def test_replayed_block_facts(memsnap, work):
    replayed_block_facts(memsnap, work)


def test_at_peak(memsnap, work):
    at_peak(memsnap, work)


def test_oom_folder(memsnap, work):
    oom_folder(memsnap, work)


def test_legacy_peak_before_one_entry(memsnap, work):
    legacy_peak_before_one_entry(memsnap, work)


@pytest.mark.fixtures
def test_every_fixture(memsnap, fixtures_dir):
    fixtures(memsnap, fixtures_dir)
