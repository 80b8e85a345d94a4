#!/usr/bin/env python3
"""Checks memsnap against the real GPU captures in tests/data/gpu/.

Each capture NAME.pickle.gz has a sidecar NAME.json written by
tools/capture/ at dump time (torch's own numbers). memsnap must parse every
capture and report what torch reported: reserved and allocated bytes of the
segments, the oom request and device_free, the number of profiler steps;
compare must explain the graphs pair and replay-step must work on the steps
capture. Exits 77 (CTest: skipped) while no capture is committed.
"""
import argparse
import glob
import json
import os
import subprocess
import sys

import pytest
from pytest_check import check

import testlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(REPO, "tests", "data", "gpu")


def memsnap_json(memsnap, args):
    run = subprocess.run([memsnap] + args + ["--json"], capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise RuntimeError(f"memsnap {' '.join(args)}: {run.stderr.strip()}")
    return json.loads(run.stdout)


def test_captures_agree_with_what_torch_said(memsnap):
    """Each capture against the facts torch.cuda reported when it was recorded."""
    sidecars = sorted(glob.glob(os.path.join(DATA, "*.json")))
    if not sidecars:
        testlib.skip_absent(f"GPU captures in {os.path.relpath(DATA, REPO)} (see its README.md)")
    captures = {}
    for sidecar in sidecars:
        name = os.path.splitext(os.path.basename(sidecar))[0]
        pickle_path = os.path.join(DATA, name + ".pickle.gz")
        with open(sidecar) as f:
            facts = json.load(f)
        captures[name] = (pickle_path, facts)
        if not os.path.exists(pickle_path):
            check.fail(f"{name}: capture file present: {pickle_path}")
            continue
        device = str(facts.get("device", 0))
        report = memsnap_json(memsnap, ["parse", "--device", device, pickle_path])
        with check(f"{name}: parses"):
            assert True
        segments = report["segments"]
        if facts.get("memory_reserved_at_dump") is not None:
            with check(f"{name}: reserved == torch.cuda.memory_reserved()"):
                assert segments["total_size"] == facts["memory_reserved_at_dump"], (
                    f"{segments['total_size']} != {facts['memory_reserved_at_dump']}")
        if facts.get("memory_allocated_at_dump") is not None:
            with check(f"{name}: allocated == torch.cuda.memory_allocated()"):
                assert segments["allocated_size"] == facts["memory_allocated_at_dump"], (
                    f"{segments['allocated_size']} != {facts['memory_allocated_at_dump']}")
        if facts.get("oom"):
            ooms = report["oom"]
            with check(f"{name}: oom entry present"):
                assert len(ooms) >= 1, ooms
            if ooms:
                with check(f"{name}: oom request"):
                    assert ooms[-1]["requested"] == facts["oom"]["requested_bytes"], (
                        f"{ooms[-1]['requested']} != {facts['oom']['requested_bytes']}")
                with check(f"{name}: oom device_free"):
                    assert ooms[-1]["device_free"] == facts["oom"]["device_free"], (
                        f"{ooms[-1]['device_free']} != {facts['oom']['device_free']}")
        if facts.get("profiler_steps") is not None:
            complete = sum(1 for s in report["profiler_steps"].values() if s["complete"])
            with check(f"{name}: complete profiler steps"):
                assert complete == facts["profiler_steps"], f"{complete} != {facts['profiler_steps']}"
            steps = memsnap_json(memsnap, ["replay-step", "--all-steps", "--device", device, pickle_path])
            with check(f"{name}: replay-step --all-steps"):
                assert len(steps) == len(report["profiler_steps"])
    if "graphs_off" in captures and "graphs_on" in captures:
        result = memsnap_json(memsnap, ["compare", captures["graphs_off"][0], captures["graphs_on"][0]])
        with check("graphs pair: compare observes CUDA graphs"):
            assert any("CUDA graphs likely" in note for note in result["observations"]), result["observations"]
    if "ab_pair_a" in captures and "ab_pair_b" in captures:
        result = memsnap_json(memsnap, ["compare", captures["ab_pair_a"][0], captures["ab_pair_b"][0]])
        with check("ab pair: B peaks higher"):
            assert result["full_trace"]["absolute_peak_b"] > result["full_trace"]["absolute_peak_a"]
