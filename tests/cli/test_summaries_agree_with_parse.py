#!/usr/bin/env python3
"""A summary (`memsnap summarize --json`, what `ranks` and `check` read back)
says what `parse --json` says about the same file, field by field: the file,
the device, the segments, the reserved and absolute peaks and when, the
trace's counts and duration, the steps, the throughput rows, the OOMs and the
warnings. run_summary() maps parse's report onto the summary's schema in one
place; this is what keeps that mapping true. Generated files, then every real
fixture (part `fixtures`)."""
import os
import subprocess
import sys

import pytest

import testlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GEN = os.path.join(REPO, "tests", "gen", "make_snapshot.py")
# A summary keeps this many throughput rows (analysis/reports/run_summary.h).
SUMMARY_SOURCES = 200
ALL_ROWS = "1000000"


def disagreements(memsnap, path):
    """What the summary says differently from parse; [] when they agree."""
    summary = testlib.memsnap_json(memsnap, ["summarize", "--json", path])
    parse = testlib.memsnap_json(memsnap, ["parse", "--json", "--top", ALL_ROWS, path])
    replay = parse["replay"]
    pairs = {
        "file.size_bytes": (summary["file"]["size_bytes"], parse["file_size_bytes"]),
        "file.compression": (summary["file"]["compression"], parse["compression"]),
        "device": (summary["device"], parse["device"]),
        "devices": (summary["devices"], parse["devices"]),
        # null in a summary, {} in parse (both schemas say so) where the file has none
        "allocator_settings": (summary["allocator_settings"] or {}, parse["allocator_settings"]),
        "segments": (summary["segments"], parse["segments"]),
        "reserved_peak": (summary["reserved_peak"], parse["reserved"]["peak"]),
        "reserved_peak_time_s": (summary["reserved_peak_time_s"], parse["reserved"].get("peak_time_s")),
        "baseline": (summary["baseline"], parse["baseline"]["baseline_at_start"]),
        "peak_delta": (summary["peak_delta"], replay["peak_delta"]),
        "absolute_peak": (summary["absolute_peak"], replay["absolute_peak"]),
        "peak_time_s": (summary["peak_time_s"], replay["peak_time_s"]),
        "peak_event": (summary["peak_event"], replay["peak_event"]),
        "event_count": (summary["event_count"], parse["device_traces"]["event_count"]),
        "alloc_count": (summary["alloc_count"], replay["alloc_count"]),
        "unmatched_frees": (summary["unmatched_frees"], parse["unmatched_frees"]),
        "has_time": (summary["has_time"], parse["trace_duration_s"] is not None),
        "trace_duration_s": (summary["trace_duration_s"], parse["trace_duration_s"] or 0),
        "steps_source": (summary["steps_source"], parse["steps_source"]),
        "step_count": (summary["step_count"], len(parse["profiler_steps"])),
        "throughput.sources": (summary["throughput"]["sources"], len(parse["top_sources"])),
        "throughput rows": ([(r["throughput_bytes"], r["alloc_count"]) for r in summary["throughput"]["by_source"]],
                            [(r["throughput_bytes"], r["alloc_count"]) for r in parse["top_sources"][:SUMMARY_SOURCES]]),
        "ooms (event, requested, device_free)":
            ([(o["event"], o["requested"], o["device_free"]) for o in summary["ooms"]],
             [(o["event"], o["requested"], o["device_free"]) for o in parse["oom"]]),
        "warnings": (summary["warnings"], parse["warnings"]),
    }
    wrong = ["%s: summary %r, parse %r" % (name, mine, theirs)
             for name, (mine, theirs) in pairs.items() if mine != theirs]
    # An OOM's time is seconds from the trace's first timed entry, inside the trace.
    for oom in summary["ooms"]:
        if oom["time_s"] is not None and not 0 <= oom["time_s"] <= summary["trace_duration_s"]:
            wrong.append("oom at entry %d: time_s %r outside the trace (0 to %r s)"
                         % (oom["event"], oom["time_s"], summary["trace_duration_s"]))
    return wrong


def make(work, name, *args):
    path = os.path.join(work, name)
    subprocess.run([sys.executable, GEN, "--out", path, *args], check=True, capture_output=True)
    return path


def test_generated_files(memsnap, work):
    paths = [os.path.join(REPO, "examples", "training_steps.pickle.gz"),
             # an OOM on device 1: its entry counts within device 1's trace
             make(work, "oom_device1.pickle", "--oom", "--devices", "2", "--oom-device", "1"),
             make(work, "bridge.pickle", "--bridge")]
    wrong = {os.path.basename(p): disagreements(memsnap, p) for p in paths}
    assert not any(wrong.values()), wrong


@pytest.mark.fixtures
def test_every_fixture(memsnap, fixtures_dir):
    names = sorted(n for n in os.listdir(fixtures_dir) if n.endswith((".pickle", ".pkl")))
    wrong = {}
    for name in names:
        found = disagreements(memsnap, os.path.join(fixtures_dir, name))
        if found:
            wrong[name] = found
    assert not wrong, "\n".join("%s:\n  %s" % (n, "\n  ".join(w)) for n, w in wrong.items())
