#!/usr/bin/env python3
"""The words a user reads first (issue "trust at first sight"): categories
from evidence, compare's drill-down into a traced peak when only the trace
can show it. Inputs that showed a defect are read from ../shared/repro
(skipped where that folder is absent); categories on every real fixture
under part `fixtures`."""
import json
import os

import pytest
from pytest_check import check

import testlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REPRO = os.path.join(REPO, "..", "shared", "repro")

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
    with check("the live sets are the traces' (not the dumps' blocks)"):
        assert drill["live_from"] == "trace", drill["live_from"]
    rows = {row["source"]: row for row in drill["sources"]}
    for source, peak_a, peak_b in (("mlp_forward@mlp.py:301", 402680320, 402676224),
                                   ("router_forward@router.py:145", 83906560, 83904512),
                                   ("attention_forward@attention.py:88", 201347584, 201349120)):
        row = rows.get(source)
        with check(f"{source}: the reference's bytes at each peak"):
            assert row is not None and (row["peak_a"], row["peak_b"]) == (peak_a, peak_b), row
    # By category: everything live at each peak, the dump's memory included.
    for side in ("a", "b"):
        total = sum(row[f"peak_{side}"] for row in drill["categories"])
        with check(f"side {side.upper()}: the categories add up to its absolute peak"):
            assert total == drill[f"absolute_peak_{side}"], (total, drill[f"absolute_peak_{side}"])
    text = run(memsnap, ["compare", "--steps", "profiler", a, b]).stdout
    with check("the text drills into the peak over the full trace"):
        assert "live at each side's peak over the full trace" in text and "neither trace" not in text, text[:1200]


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
            with check(f"{row['source']}: has evidence"):
                assert bool(evidence), row
            with check(f"{row['source']}: its evidence adds up to the row"):
                assert (sum(e["bytes"] for e in evidence) == row["bytes"]
                        and sum(e["count"] for e in evidence) == row["count"]), row
    text = run(memsnap, ["explain", os.path.join(REPO, "examples", "training_steps.pickle.gz")]).stdout
    with check("the text table has an evidence column and a legend"):
        assert "evidence" in text and "  evidence:\n" in text and "outlives-its-step: " in text, text[:2000]
    with check("memsnap's own row names are explained where they appear"):
        assert "<no frames>: allocations whose entries carry no stack" in text, text[-1500:]


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
        with check(f"{name}: the category table adds up to the peak"):
            assert total == expect, (total, expect)
        for row in rows:
            if row["source"].startswith("<"):
                continue
            with check(f"{name}: {row['source']} has evidence"):
                assert bool(row.get("evidence")), row
            rules = {e["rule"] for e in row.get("evidence", [])}
            if row["source"] == "unknown":
                with check(f"{name}: unknown only where nothing says more"):
                    assert rules <= {"no-rule", "no-frames"}, rules
        baseline = page["baseline"]["by_category"]["rows"]
        persistent_files += any(r["source"] == "persistent" for r in baseline)
        temporary_files += any(e["rule"] == "freed-in-its-step"
                               for r in rows for e in r.get("evidence", []))
    print(f"{persistent_files} files with persistent memory, {temporary_files} with a step's "
          "temporaries live at the peak")
    with check("some fixture holds frameless memory from before the trace (named persistent)"):
        assert persistent_files > 0, persistent_files
    with check("some fixture peaks with an optimizer step's temporaries live"):
        assert temporary_files > 0, temporary_files


# ---------------------------------------------------------------- the first screen, smaller things

import pickle  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

GEN = os.path.join(REPO, "tests", "gen", "make_snapshot.py")
T0 = 1_700_000_000_000_000
FORWARD = [{"name": "forward", "filename": "/home/me/model.py", "line": 42}]


def make(work, name, *args):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name)
    subprocess.run([sys.executable, GEN, "--out", path, *args], check=True, capture_output=True)
    return path


def write(work, name, document):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        pickle.dump(document, f, protocol=4)
    return path


def entry(action, addr, size, k, frames=None):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": T0 + k,
            "frames": frames if frames is not None else []}


def segment(address, blocks):
    """A dump segment of (size, state, frames) blocks, in order."""
    out, cursor = [], address
    for size, state, frames in blocks:
        out.append({"address": cursor, "size": size, "requested_size": size if state != "inactive" else 0,
                    "state": state, "frames": frames})
        cursor += size
    total = cursor - address
    used = sum(b["size"] for b in out if b["state"] != "inactive")
    return {"device": 0, "address": address, "total_size": total, "stream": 0, "segment_type": "large",
            "allocated_size": used, "active_size": used, "requested_size": used, "blocks": out}


def explain(memsnap, path, *extra):
    got = run(memsnap, ["explain", path, *extra])
    assert got.returncode == 0, got.stderr[-400:]
    return got.stdout


def test_a_dump_whose_blocks_name_what_its_frameless_trace_cannot(memsnap, work):
    # A PyTorch 2.0-style file: the dump's blocks carry frames, the trace's
    # entries none. explain names the peak from the blocks; what the file
    # lacks must not then say that sources are unknown.
    base = 0x7F00_0000_0000
    mib = 1 << 20
    seg = segment(base, [(64 * mib, "active_allocated", FORWARD), (32 * mib, "inactive", [])])
    trace = [entry("alloc", base + 64 * mib, 2 * mib, 1), entry("free_requested", base + 64 * mib, 2 * mib, 2),
             entry("free_completed", base + 64 * mib, 2 * mib, 3)]
    path = write(work, "blocks_named.pickle", {"segments": [seg], "device_traces": [trace]})
    text = explain(memsnap, path)
    with check("the peak is named by the dump's blocks"):
        assert "forward@model.py:42" in text, text
    with check("what the file lacks does not call the sources unknown"):
        assert "sources are unknown" not in text and "the names above come from the dump's blocks" in text, text
    # Memory from before the trace: parse's warning, which check repeats,
    # points at no table that check does not print.
    got = run(memsnap, ["check", path, "--max-peak", "1TiB"])
    said = got.stdout + got.stderr
    with check("check warns of the memory from before the trace"):
        assert "already allocated" in said, said
    with check("check's warning points at no table it does not print"):
        assert "(below)" not in said and "model weights?" not in said, said


def test_one_live_set_at_the_peak_for_explain_and_check(memsnap, work):
    # Frameless memory from before the trace: explain counts it at the peak,
    # and so does the budget check writes (persistent), so that a category
    # budget means what explain's table says.
    base = 0x7F00_0000_0000
    mib = 1 << 20
    seg = segment(base, [(256 * mib, "active_allocated", []), (64 * mib, "inactive", [])])
    trace = [entry("alloc", base + 256 * mib, 16 * mib, 1, FORWARD),
             entry("free_requested", base + 256 * mib, 16 * mib, 2),
             entry("free_completed", base + 256 * mib, 16 * mib, 3)]
    path = write(work, "held_frameless.pickle", {"segments": [seg], "device_traces": [trace]})
    page = json.loads(run(memsnap, ["explain", "--json", path]).stdout)
    rows = {r["source"]: r["bytes"] for r in page["peak"]["by_category"]["rows"]}
    with check("explain: the frameless memory from before the trace is persistent, not unknown"):
        assert rows.get("persistent") == 256 * mib and "unknown" not in rows, rows
    budget = run(memsnap, ["check", "--write-budget", path]).stdout
    with check("check --write-budget limits the same category explain shows"):
        assert "persistent = " in budget and "activation = " in budget, budget


def test_a_cut_trace_says_which_cut_it_is(memsnap, work):
    wrapped = make(work, "wrapped.pickle", "--events", "3000", "--steps", "4", "--ring-buffer", "2000",
                   "--seed", "3")
    late = make(work, "late.pickle", "--events", "3000", "--steps", "4", "--ring-buffer", "1937",
                "--seed", "3")
    for path, cut, advice, not_advice in (
            (wrapped, "ring_buffer", "raise max_entries", "start _record_memory_history earlier"),
            (late, "late_start", "start _record_memory_history earlier", "raise max_entries in")):
        page = json.loads(run(memsnap, ["explain", "--json", path]).stdout)
        with check(f"{cut}: explain --json says which cut"):
            assert (page["trace_cut"] == cut
                    and "trace_truncated" in page["lacks"]), (page["trace_cut"], page["lacks"])
        text = explain(memsnap, path)
        with check(f"{cut}: the advice fits the cut"):
            assert advice in text and not_advice not in text, text[-1200:]
        parse = run(memsnap, ["parse", path]).stdout
        with check(f"{cut}: parse's warning gives the same advice"):
            assert advice in parse, parse[-1500:]


def optimizer_marks_then_frees(steps):
    """Iterations marked by Optimizer.step#SGD.step, then a tail of frees
    only (the last step's leftovers let go): no iteration."""
    annotations, trace, k = [], [], 0
    for step in range(steps):
        addr = 0x1000 * (step + 1)
        trace.append(entry("alloc", addr, 4096, k, FORWARD)); k += 1
        annotations.append({"name": "Optimizer.step#SGD.step", "stage": "START", "device": 0,
                            "time_us": T0 + k}); k += 1
        annotations.append({"name": "Optimizer.step#SGD.step", "stage": "END", "device": 0,
                            "time_us": T0 + k}); k += 1
    for step in range(steps):
        addr = 0x1000 * (step + 1)
        trace.append(entry("free_requested", addr, 4096, k)); k += 1
        trace.append(entry("free_completed", addr, 4096, k)); k += 1
    return {"segments": [], "device_traces": [trace], "external_annotations": annotations}


def test_inferred_steps_have_no_tail_of_frees_and_read_as_steps(memsnap, work):
    path = write(work, "marks_then_frees.pickle", optimizer_marks_then_frees(2))
    steps = json.loads(run(memsnap, ["replay-step", "--all-steps", "--json", path]).stdout)
    numbers = [(s["step"], s["complete"]) for s in steps]
    with check("a tail of frees after the last optimizer step is no iteration"):
        assert all(complete for _, complete in numbers) and len(numbers) == 2, numbers
    one = write(work, "one_step.pickle", optimizer_marks_then_frees(1))
    text = explain(memsnap, one)
    with check("one inferred step reads as which it is, not as the highest of one"):
        assert "Steps: 1 complete (step 0)" in text and "peaks highest" not in text, text[-1500:]
    open_last = make(work, "open_last.pickle", "--events", "1500", "--steps", "4", "--marks",
                     "--open-last-step", "--seed", "3")
    compared = run(memsnap, ["compare", open_last, open_last]).stdout
    with check("compare names incomplete steps as steps, not as a count"):
        assert "incomplete in A: step 3" in compared, compared[:2500]


def test_grouped_tables_say_what_their_rows_are(memsnap, work):
    path = make(work, "steps.pickle", "--events", "1500", "--steps", "4", "--marks", "--seed", "5")
    text = run(memsnap, ["replay-to-time", path, "--time", "0.01", "--group-by", "category"]).stdout
    with check("replay-to-time --group-by category is headed by category"):
        assert "Live allocations by category" in text and "by source" not in text, text
    got = json.loads(run(memsnap, ["replay-to-time", path, "--time", "0.01", "--group-by", "category",
                                   "--json"]).stdout)
    rows = got["sources"]
    with check("category rows carry their category under its own key (source kept for a release)"):
        assert rows and all(r.get("category") == r["source"] for r in rows if not r["source"].startswith("<")), rows[:3]


def test_the_skill_knows_bridges_profiling_config():
    with open(os.path.join(REPO, "skills", "memsnap", "SKILL.md"), encoding="utf-8") as f:
        skill = f.read()
    for fact in ("use_pytorch_profiler=True", "use_nsys_profiler", "external_annotations",
                 "profile_ranks", "snapshot_{rank}.pickle"):
        with check(f"the skill says {fact}"):
            assert fact in skill
