#!/usr/bin/env python3
"""`memsnap segments` against a reference written here from the file's own
values (`memsnap dump`, which the differential test holds equal to CPython's
pickle): totals, every segment, pools and streams, the largest free block and
the fill map, on generated files of every shape (part `generated`) and on every
real fixture (part `fixtures`)."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(REPO, "tests", "gen", "make_snapshot.py")

import pytest
from pytest_check import check

import testlib

run = testlib.run_memsnap


FILL_CELLS = 40


def reference_fill(segment, blocks):
    total = float(segment["total_size"])
    if segment["total_size"] == 0:
        return ""
    cell = total / FILL_CELLS
    allocated = [0.0] * FILL_CELLS
    pending = [0.0] * FILL_CELLS
    covered = [0.0] * FILL_CELLS
    for address, block in blocks:
        if address < segment["address"]:
            continue
        start = float(address - segment["address"])
        end = min(total, start + float(block["size"]))
        c = int(start / cell)
        while c < FILL_CELLS:
            lo = max(start, c * cell)
            hi = min(end, (c + 1) * cell)
            if hi <= lo:
                break
            covered[c] += hi - lo
            if block["state"] == "active_allocated":
                allocated[c] += hi - lo
            if block["state"] == "active_pending_free":
                pending[c] += hi - lo
            c += 1
    out = ""
    for c in range(FILL_CELLS):
        share = allocated[c] / cell
        if covered[c] < cell * 1e-9:
            out += " "
        elif share >= 1 - 1e-9:
            out += "#"
        elif pending[c] >= cell / 2:
            out += "~"
        elif allocated[c] <= 0:
            out += "."
        else:
            out += str(min(9, max(1, int(share * 10))))
    return out


def untag(value):
    return value["__tuple__"] if isinstance(value, dict) and "__tuple__" in value else value


def reference_segments(segments, device):
    keys = ("reserved", "allocated", "awaiting_free", "free", "requested", "rounding", "largest_free_block", "blocks")
    rows, totals, pools = [], dict.fromkeys(keys, 0), {}
    for segment in segments:
        if segment.get("device", 0) != device:
            continue
        pool = list(untag(segment.get("segment_pool_id")) or [0, 0])
        row = dict.fromkeys(keys, 0)
        row.update(address=segment["address"], pool=pool, stream=segment.get("stream", 0), reserved=segment["total_size"])
        blocks = segment.get("blocks") or []
        if not blocks:
            allocated = segment.get("allocated_size", 0)
            active = max(segment.get("active_size", allocated), allocated)
            row.update(allocated=allocated, awaiting_free=active - allocated,
                       free=max(0, segment["total_size"] - active))
        placed, at = [], segment["address"]
        for block in blocks:
            address = block.get("address", at)  # PyTorch 2.0 blocks: consecutive from the base
            at = address + block["size"]
            placed.append((address, block))
            row["blocks"] += 1
            if block["state"] == "active_allocated":
                row["allocated"] += block["size"]
                if 0 < block.get("requested_size", 0) <= block["size"]:
                    row["requested"] += block["requested_size"]
                    row["rounding"] += block["size"] - block["requested_size"]
            elif block["state"] == "active_pending_free":
                row["awaiting_free"] += block["size"]
            elif block["state"] == "inactive":
                row["free"] += block["size"]
                row["largest_free_block"] = max(row["largest_free_block"], block["size"])
        row["fill"] = reference_fill(segment, placed)
        rows.append(row)
        group = pools.setdefault((pool[0], pool[1], row["stream"]), dict.fromkeys(keys, 0) | {"segments": 0})
        group["segments"] += 1
        for part in (group, totals):
            for key in keys:
                part[key] = max(part[key], row[key]) if key == "largest_free_block" else part[key] + row[key]
    return rows, totals, pools


def input_files(work, parts, fixtures):
    files = []
    if "generated" in parts:
        for name, extra in {"plain": [], "expandable": ["--expandable"], "graph-pool": ["--graph-pool"],
                            "legacy": ["--legacy"], "two-devices": ["--devices", "2", "--oom"],
                            "late-start": ["--late-start", "--ring-buffer", "500"]}.items():
            path = os.path.join(work, f"segments-{name}.pickle")
            subprocess.run([sys.executable, GENERATOR, "--out", path, "--events", "1500", "--seed", "17"] + extra,
                           check=True)
            files.append(path)
    if "fixtures" in parts:
        files += sorted(os.path.join(fixtures, f) for f in os.listdir(fixtures) if f.endswith((".pickle", ".pkl")))
    return files


def segments_against_reference(memsnap, path, document):
    """Devices compared."""
    compared = 0
    segments = document if isinstance(document, list) else document.get("segments") or []
    for device in sorted({s.get("device", 0) for s in segments}):
        rows, totals, pools = reference_segments(segments, device)
        got = run(memsnap, ["segments", "--json", "--top", "1000000", "--device", str(device), path])
        name = f"segments {os.path.basename(path)} device {device}"
        if not check.is_true(got.returncode == 0, f"{name}: exit 0: {got.stderr[-300:]}"):
            continue
        report = json.loads(got.stdout)
        keys = list(totals)
        problems = []
        if {k: report["totals"][k] for k in keys} != totals:
            problems.append(f"totals {report['totals']} vs {totals}")
        by_address = {row["address"]: row for row in report["segments"]}
        for row in rows:
            mine = by_address.get(row["address"])
            want = {k: row[k] for k in keys + ["pool", "stream", "fill"]}
            if mine is None or {k: mine[k] for k in want} != want:
                problems.append(f"segment {row['address']:#x}: {mine} vs {want}")
                break
        order = [(-r["reserved"], r["address"]) for r in report["segments"]]
        if order != sorted(order) or len(report["segments"]) != len(rows):
            problems.append("segments not largest first, then by address, or not all listed")
        groups = {(g["pool"][0], g["pool"][1], g["stream"]): {k: g[k] for k in keys + ["segments"]} for g in report["pools"]}
        if groups != pools:
            problems.append(f"pools {groups} vs {pools}")
        largest = report["largest_free_block"]
        if (largest["bytes"] if largest else 0) != totals["largest_free_block"]:
            problems.append(f"largest free block {largest} vs {totals['largest_free_block']}")
        with check(f"{name}: segments, pools and totals equal the reference"):
            assert not problems, "; ".join(problems)[:600]
        compared += 1
    return compared


def reserved_against_reference(memsnap, path, document):
    """parse's reserved bytes over the trace: the dump's reserved walked back
    through the device's segment entries, then forward to the peak. Devices
    compared."""
    sign = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
    if not isinstance(document, dict) or not document.get("device_traces"):
        return 0
    compared = 0
    segments = document.get("segments") or []
    for device, entries in enumerate(document["device_traces"]):
        if not isinstance(entries, list) or not entries:
            continue
        at_dump = sum(s["total_size"] for s in segments if s.get("device", 0) == device)
        changes = [sign[e["action"]] * e.get("size", 0) for e in entries
                   if isinstance(e, dict) and e.get("action") in sign]
        start = at_dump - sum(changes)
        peak = level = start
        for change in changes:
            level += change
            peak = max(peak, level)
        expected = {"at_start": max(start, 0), "peak": max(peak, 0), "at_dump": at_dump, "segment_events": len(changes)}
        got = run(memsnap, ["parse", "--json", "--device", str(device), path])
        if got.returncode != 0:
            continue
        reserved = json.loads(got.stdout)["reserved"]
        with check(f"reserved over time {os.path.basename(path)} device {device}"):
            assert {k: reserved[k] for k in expected} == expected, f"{reserved} vs {expected}"
        compared += 1
    return compared


def against_reference(memsnap, files):
    """Each file's values read once (`dump` is the slow part under
    sanitizers) and dropped before the next file."""
    segment_devices = reserved_devices = 0
    for path in files:
        dumped = run(memsnap, ["dump", path])
        if dumped.returncode != 0:
            continue
        document = json.loads(dumped.stdout)
        segment_devices += segments_against_reference(memsnap, path, document)
        reserved_devices += reserved_against_reference(memsnap, path, document)
    with check("segments compared on every file with segments"):
        assert segment_devices >= 6, segment_devices
    with check("reserved over time compared on every file with a trace"):
        assert reserved_devices >= 3, reserved_devices



def test_segments_and_reserved_match_the_reference_on_generated_files(memsnap, work):
    against_reference(memsnap, input_files(work, ["generated"], None))


@pytest.mark.fixtures
def test_segments_and_reserved_match_the_reference_on_every_fixture(memsnap, fixtures_dir):
    against_reference(memsnap, input_files(None, ["fixtures"], fixtures_dir))
