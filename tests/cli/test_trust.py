#!/usr/bin/env python3
"""The words a user reads first (issue "trust at first sight"): categories
from evidence, compare's drill-down into a traced peak when only the trace
can show it. Inputs that showed a defect are read from ../shared/repro
(skipped where that folder is absent); categories on every real fixture
under part `fixtures`."""
import json
import os

import pytest

import testlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REPRO = os.path.join(REPO, "..", "shared", "repro")

check = testlib.Checks()
run = testlib.run_memsnap


def repro(*parts):
    path = os.path.join(REPRO, *parts)
    if not os.path.exists(path):
        testlib.skip_absent(path)
    return path


def test_compare_of_wrapped_traces_drills_into_the_traced_peak(memsnap):
    # Both ring buffers wrapped: the dumps hold 18.00 GiB, the traced peaks
    # reach 18.68 GiB. Only the traces show what was live then; the reference
    # script drills into them (these rows are its numbers).
    a = repro("compare-wrapped", "A.pickle")
    b = repro("compare-wrapped", "B.pickle")
    got = run(memsnap, ["compare", "--json", "--steps", "profiler", "--top", "100", a, b])
    assert got.returncode == 0, got.stderr[-400:]
    drill = json.loads(got.stdout)["drill_down"]
    check("the live sets are the traces' (not the dumps' blocks)", drill["live_from"] == "trace",
          drill["live_from"])
    rows = {row["source"]: row for row in drill["sources"]}
    for source, peak_a, peak_b in (("mlp_forward@mlp.py:301", 402680320, 402676224),
                                   ("router_forward@router.py:145", 83906560, 83904512),
                                   ("attention_forward@attention.py:88", 201347584, 201349120)):
        row = rows.get(source)
        check(f"{source}: the reference's bytes at each peak",
              row is not None and (row["peak_a"], row["peak_b"]) == (peak_a, peak_b), row)
    # By category: everything live at each peak, the dump's memory included.
    for side in ("a", "b"):
        total = sum(row[f"peak_{side}"] for row in drill["categories"])
        check(f"side {side.upper()}: the categories add up to its absolute peak",
              total == drill[f"absolute_peak_{side}"], (total, drill[f"absolute_peak_{side}"]))
    text = run(memsnap, ["compare", "--steps", "profiler", a, b]).stdout
    check("the text drills into the peak over the full trace",
          "live at each side's peak over the full trace" in text and "neither trace" not in text,
          text[:1200])


def evidence_ids(memsnap):
    got = run(memsnap, ["explain", "--json", "--top", "100", os.path.join(REPO, "examples",
                                                                            "training_steps.pickle.gz")])
    assert got.returncode == 0, got.stderr[-400:]
    return json.loads(got.stdout)


def test_every_category_row_says_how_it_knows(memsnap):
    page = evidence_ids(memsnap)
    for table in ("by_category",):
        for row in page["peak"][table]["rows"]:
            if row["source"].startswith("<"):
                continue  # memsnap's own placeholder rows are no category
            evidence = row.get("evidence", [])
            check(f"{row['source']}: has evidence", bool(evidence), row)
            check(f"{row['source']}: its evidence adds up to the row",
                  sum(e["bytes"] for e in evidence) == row["bytes"]
                  and sum(e["count"] for e in evidence) == row["count"], row)
    text = run(memsnap, ["explain", os.path.join(REPO, "examples", "training_steps.pickle.gz")]).stdout
    check("the text table has an evidence column and a legend",
          "evidence" in text and "  evidence:\n" in text and "outlives-its-step: " in text, text[:2000])
    check("memsnap's own row names are explained where they appear",
          "<no frames>: allocations whose entries carry no stack" in text, text[-1500:])


@pytest.mark.fixtures
def test_categories_at_the_peak_on_real_fixtures(memsnap, fixtures_dir):
    """On every real fixture with a trace: the category table at the peak adds
    up to the peak, each row carries evidence, no frameless memory from before
    the trace is `unknown`, and the optimizer's foreach temporaries are
    `temporary`."""
    names = sorted(n for n in os.listdir(fixtures_dir) if n.endswith((".pickle", ".pkl")))
    persistent_files = temporary_files = 0
    for name in names:
        got = run(memsnap, ["explain", "--json", "--top", "100", os.path.join(fixtures_dir, name)])
        if got.returncode != 0:
            continue
        page = json.loads(got.stdout)
        if page["event_count"] == 0:
            continue
        rows = page["peak"]["by_category"]["rows"]
        total = sum(r["bytes"] for r in rows) + page["peak"]["by_category"]["rest"]["bytes"]
        expect = page["peak"]["absolute"] if page["peak"]["baseline"] > 0 else page["peak"]["delta"]
        check(f"{name}: the category table adds up to the peak", total == expect, (total, expect))
        for row in rows:
            if row["source"].startswith("<"):
                continue
            check(f"{name}: {row['source']} has evidence", bool(row.get("evidence")), row)
            rules = {e["rule"] for e in row.get("evidence", [])}
            if row["source"] == "unknown":
                check(f"{name}: unknown only where nothing says more",
                      rules <= {"no-rule", "no-frames"}, rules)
        baseline = page["baseline"]["by_category"]["rows"]
        persistent_files += any(r["source"] == "persistent" for r in baseline)
        temporary_files += any(e["rule"] == "freed-in-its-step"
                               for r in rows for e in r.get("evidence", []))
    print(f"{persistent_files} files with persistent memory, {temporary_files} with a step's "
          "temporaries live at the peak")
    check("some fixture holds frameless memory from before the trace (named persistent)",
          persistent_files > 0, persistent_files)
    check("some fixture peaks with an optimizer step's temporaries live", temporary_files > 0,
          temporary_files)
