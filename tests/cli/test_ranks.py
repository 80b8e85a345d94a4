#!/usr/bin/env python3
"""`memsnap summarize` and `memsnap ranks`: 64 generated rank files of a
4-stage pipeline with one outlier rank (tests/gen/make_ranks.py knows every
peak in advance): the outlier is found, the groups are the stages, per-rank
numbers equal `parse` of each file, ranks over summaries equals ranks over the
pickles, memory stays bounded with -j 2; summary files are checked as hostile
input; then every real fixture (part `fixtures`)."""
import json
import os
import pickle
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

import testlib

GEN = os.path.join(os.path.dirname(HERE), "gen", "make_ranks.py")
MiB = 1 << 20

run = testlib.run_memsnap


def make_ranks(folder, *args):
    manifest = os.path.join(folder, "manifest.json")
    subprocess.run([sys.executable, GEN, "--out", folder, "--manifest", manifest, *args], check=True)
    with open(manifest) as f:
        expected = {int(k): v for k, v in json.load(f).items()}
    os.remove(manifest)
    return expected


def peak_rss_kib(memsnap, args):
    """Peak resident memory of one memsnap run (KiB), from the kernel's rusage."""
    with open(os.devnull, "wb") as sink:
        child = subprocess.Popen([memsnap] + args, stdout=sink, stderr=sink)
        _, status, usage = os.wait4(child.pid, 0)
    return usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def json_of(memsnap, args):
    got = run(memsnap, args)
    if got.returncode != 0:
        return None, got.stderr
    return json.loads(got.stdout), got.stderr


def sixty_four_ranks(memsnap, work):
    folder = os.path.join(work, "run")
    expected = make_ranks(folder, "--ranks", "64", "--stages", "4", "--outlier", "37", "--events", "16000")
    report, err = json_of(memsnap, ["ranks", "--json", "-j", "2", folder])
    assert report is not None, "ranks over 64 pickles: exit 0: %s" % err
    rows = {row["rank"]: row for row in report["ranks"]}
    with check("ranks: every rank read, its number from the file name"):
        assert (sorted(rows) == list(range(64))
                and report["files_read"] == 64 and report["unreadable"] == []), sorted(rows)
    wrong = {r: (rows[r]["absolute_peak"], e["peak"]) for r, e in expected.items()
             if rows.get(r, {}).get("absolute_peak") != e["peak"]}
    with check("ranks: each rank's absolute peak is the one the generator built"):
        assert not wrong, wrong
    with check("ranks: highest first, and the highest is the outlier rank 37"):
        assert (report["ranks"][0]["rank"] == 37
                and all(a["absolute_peak"] >= b["absolute_peak"] for a, b in zip(report["ranks"], report["ranks"][1:]))), (
            report["ranks"][:3])
    with check("ranks: the one outlier is rank 37"):
        assert [o["rank"] for o in report["outliers"]] == [37], report["outliers"]
    stages = {}
    for r, e in expected.items():
        if not e["outlier"]:
            stages.setdefault(e["stage"], []).append(r)
    want = sorted([[37]] + [sorted(v) for v in stages.values()])
    got_groups = sorted(sorted(g["ranks"]) for g in report["groups"])
    with check("ranks: the groups are the four stages, less the outlier, and the outlier alone"):
        assert got_groups == want, got_groups
    spread = report["spread"]
    peaks = sorted(e["peak"] for e in expected.values())
    with check("ranks: the spread (min, lower median, max, max/median)"):
        assert (spread["min"] == peaks[0] and spread["max"] == peaks[-1] and spread["median"] == peaks[31]
                and abs(spread["max_over_median"] - peaks[-1] / peaks[31]) < 1e-9), spread
    drill = report["highest_vs_median"]
    with check("ranks: against the median rank, the outlier's own line leads (+900 MiB at stage2.py:99)"):
        assert (drill["highest"] == 37 and drill["sources"][0]["source"] == "stage2_forward@stage2.py:99"
                and drill["sources"][0]["delta"] == 900 * MiB), drill["sources"][:2]
    # Per rank: the same numbers as parse of each file.
    mismatched = []
    for r in (0, 15, 16, 37, 63):
        parse, _ = json_of(memsnap, ["parse", "--json", expected[r]["file"]])
        row = rows[r]
        if (row["absolute_peak"], row["reserved_peak"], row["baseline"]) != (
                parse["replay"]["absolute_peak"], parse["reserved"]["peak"], parse["baseline"]["baseline_at_start"]):
            mismatched.append(r)
    with check("ranks: per-rank peak, reserved peak and baseline equal parse of the file"):
        assert not mismatched, mismatched
    text = run(memsnap, ["ranks", folder])
    with check("ranks text: the outlier, the groups and the drill-down"):
        assert (text.returncode == 0
                and "outliers: 37 (" in text.stdout and "  0-15  " in text.stdout
                and "32-36, 38-47" in text.stdout and "Rank 37 (highest) against rank" in text.stdout), (
            text.stdout[:1500])

    # The map step: summaries, then the reduce over them alone.
    summaries = os.path.join(work, "summaries")
    got = run(memsnap, ["summarize", "-o", summaries, "-j", "2", folder])
    with check("summarize -o: exit 0, one summary per file"):
        assert (got.returncode == 0
                and len(os.listdir(summaries)) == 64), got.stderr
    sizes = [os.path.getsize(os.path.join(summaries, n)) for n in os.listdir(summaries)]
    with check("summarize: each summary is a few KB to a few hundred (%d-%d bytes for %d steps)" % (min(sizes), max(sizes), 16000 // 20)):
        assert max(sizes) < 256 * 1024
    reduced, err = json_of(memsnap, ["ranks", "--json", summaries])
    with check("ranks over the summaries equals ranks over the pickles"):
        assert reduced == report, err or [k for k in report if reduced.get(k) != report[k]]
    mixed, err = json_of(memsnap, ["ranks", "--json"] + [os.path.join(summaries, "snapshot_%d.summary.json" % r)
                                                        for r in range(32)]
                         + [expected[r]["file"] for r in range(32, 64)])
    with check("ranks over summaries and pickles mixed equals either"):
        assert mixed == report, err
    one = json.loads(run(memsnap, ["summarize", "--json", expected[5]["file"]]).stdout)
    with open(os.path.join(summaries, "snapshot_5.summary.json")) as f:
        written = json.load(f)
    with check("summarize --json of one file is the document -o writes"):
        assert one == written
    with check("summarize: file identity (size, head hash) and rank 5"):
        assert (one["file"]["size_bytes"] ==
                os.path.getsize(expected[5]["file"]) and len(one["file"]["head_xxh3_128"]) == 32 and one["rank"] == 5), (
            one["file"])
    with check("summarize: per-step peaks and live at the peak by category"):
        assert (len(one["steps"]) > 0 and all(s["absolute_peak"] <= one["absolute_peak"] for s in one["steps"])
                and max(s["absolute_peak"] for s in one["steps"]) == one["absolute_peak"]
                and one["live_at_peak"]["bytes"] == one["absolute_peak"]), one["steps"][:2]

    # Memory: -j 2 holds about two snapshots, not 64. (Under ASan, freed
    # memory sits in its quarantine, so the bound is checked in the plain build.)
    if os.environ.get("MEMSNAP_SANITIZED"):
        print("note ranks -j 2 memory bound: not measured under sanitizers (quarantine holds freed memory)")
        return folder, summaries
    largest = max((e["file"] for e in expected.values()), key=os.path.getsize)
    parse_rss, _ = peak_rss_kib(memsnap, ["parse", largest])
    ranks_rss, status = peak_rss_kib(memsnap, ["ranks", "-j", "2", folder])
    with check("ranks -j 2 over 64 files: peak RSS %d KiB, under 3x one parse of the largest file (%d KiB)"
               % (ranks_rss, parse_rss)):
        assert status == 0 and ranks_rss < 3 * parse_rss
    return folder, summaries


def hostile_summaries(memsnap, work, summaries):
    with open(os.path.join(summaries, "snapshot_3.summary.json")) as f:
        good = json.load(f)
    cases = [
        ("wrong kind", dict(good, kind="something-else"), "kind is not \"memsnap-summary\""),
        ("newer version", dict(good, version=2), "version is not 1"),
        ("a missing key", {k: v for k, v in good.items() if k != "absolute_peak"}, "absolute_peak is missing"),
        ("a string for a number", dict(good, reserved_peak="lots"), "reserved_peak is not a whole number"),
        ("a huge number", dict(good, absolute_peak=2 ** 63 - 1), "absolute_peak is out of range"),
        ("a peak of 2^62", dict(good, absolute_peak=2 ** 62), "absolute_peak is out of range"),
        ("a peak of -2^62", dict(good, absolute_peak=-2 ** 62), "absolute_peak is out of range"),
        ("a peak just over 2^60", dict(good, absolute_peak=2 ** 60 + 1), "absolute_peak is out of range"),
        ("a negative count", dict(good, event_count=-4), "event_count is negative"),
        ("a bad source row", dict(good, live_at_peak=dict(good["live_at_peak"], by_source=[{"source": 3}])),
         "live_at_peak.by_source[0].source is not a string"),
        ("an unknown group", dict(good, group="planet"), "group names no grouping"),
    ]
    for name, document, message in cases:
        path = os.path.join(work, "bad.summary.json")
        with open(path, "w") as f:
            json.dump(document, f)
        got = run(memsnap, ["ranks", path])
        with check("ranks refuses a summary with %s" % name):
            assert got.returncode == 1 and message in got.stderr + got.stdout, got.stderr + got.stdout[:300]
    deep = os.path.join(work, "deep.summary.json")
    with open(deep, "w") as f:  # 300,000 levels of allocator_settings overflowed the stack
        f.write(json.dumps(good)[:-1] + ', "x": ' + "[" * 300000 + "]" * 300000 + "}")
    got = run(memsnap, ["ranks", deep])
    with check("ranks refuses a summary nested 300,000 deep, exit 1, listed as unreadable"):
        assert (got.returncode == 1 and "%s: nests deeper than 32 levels; a memsnap summary has a few" % deep
                in got.stdout), (got.returncode, got.stdout[-300:])
    path = os.path.join(work, "broken.json")
    with open(path, "w") as f:
        f.write("{\"kind\": \"memsnap-summary\", ")
    got = run(memsnap, ["ranks", path])
    with check("ranks refuses a truncated JSON file"):
        assert got.returncode == 1 and "not valid JSON" in got.stdout + got.stderr


def options_and_refusals(memsnap, work, folder):
    # One unreadable file among good ones: the rest are reported, the bad one listed, exit 1.
    mixed = os.path.join(work, "mixed")
    os.makedirs(mixed)
    for r in range(3):
        os.link(os.path.join(folder, "snapshot_%d.pickle" % r), os.path.join(mixed, "snapshot_%d.pickle" % r))
    with open(os.path.join(mixed, "snapshot_3.pickle"), "wb") as f:
        f.write(b"\x80\x04\x95")  # a pickle cut short
    got = run(memsnap, ["ranks", "--json", mixed])
    report = json.loads(got.stdout) if got.stdout else {}
    with check("ranks with one unreadable file: the others reported, it is listed, exit 1"):
        assert (got.returncode == 1 and report.get("files_read") == 3 and len(report.get("unreadable", [])) == 1
                and "snapshot_3.pickle" in report["unreadable"][0]["file"] and "could not be read" in got.stderr), (
            (got.returncode, got.stderr))
    # --rank-from: a pattern of one's own; one without a group is a usage error.
    named = os.path.join(work, "named")
    os.makedirs(named)
    for r in (4, 11):
        os.link(os.path.join(folder, "snapshot_%d.pickle" % r), os.path.join(named, "job-r%d-final.pickle" % r))
    report, err = json_of(memsnap, ["ranks", "--json", "--rank-from", r"-r(\d+)-", named])
    with check("ranks --rank-from REGEX takes the rank from its group"):
        assert (report is not None
                and sorted(row["rank"] for row in report["ranks"]) == [4, 11]), err
    report, err = json_of(memsnap, ["ranks", "--json", named])
    with check("ranks: files whose names end in no number have no rank (null), and still count"):
        assert report is not None and [row["rank"] for row in report["ranks"]] == [None, None], err
    # Files whose names hold no number are shown by the shortest part of their
    # path that tells them apart, never the whole path (issue 25).
    deep = os.path.join(work, "experiments", "2024-05-01", "llama-70b-finetune-with-a-long-folder-name", "snapshots")
    nodes = {"alpha": 4, "beta": 11, "gamma": 37}
    for node, r in nodes.items():
        os.makedirs(os.path.join(deep, "node-" + node))
        os.link(os.path.join(folder, "snapshot_%d.pickle" % r), os.path.join(deep, "node-" + node, "memory_snapshot.pickle"))
    paths = [os.path.join(deep, "node-" + node, "memory_snapshot.pickle") for node in nodes]
    got = run(memsnap, ["ranks"] + paths)
    lines = got.stdout.splitlines()
    table = lines[lines.index("Per rank, highest peak first") + 2:] if "Per rank, highest peak first" in lines else []
    shown = [line.split()[0] for line in table[:3]]
    with check("ranks without numbers: each row named by its own folder's word, not its path"):
        assert (got.returncode == 0 and sorted(shown) == sorted(nodes) and "llama-70b" not in got.stdout
                and "memory_snapshot" not in got.stdout), got.stdout[-1500:]
    with check("ranks without numbers: the outlier and the spread name the same short names"):
        assert "rank gamma" in got.stdout and "outliers: gamma" in got.stdout, got.stdout[:800]
    report, err = json_of(memsnap, ["ranks", "--json"] + paths)
    with check("ranks --json without numbers keeps each whole path"):
        assert (report is not None
                and sorted(row["file"] for row in report["ranks"]) == sorted(paths)), err
    got = run(memsnap, ["ranks", named])
    with check("ranks: job-r4-final and job-r11-final are r4 and r11"):
        assert (got.returncode == 0
                and re.search(r"\n\s*r4 ", got.stdout) and re.search(r"\n\s*r11 ", got.stdout)), got.stdout[-800:]
    for pattern, message in ((r"-r\d+-", "has no capture group"), ("(", "is no regular expression")):
        got = run(memsnap, ["ranks", "--rank-from", pattern, named])
        with check("ranks --rank-from %r is a usage error" % pattern):
            assert got.returncode == 2 and message in got.stderr, got.stderr
    # Two files claiming one rank are flagged.
    twice = os.path.join(work, "twice")
    os.makedirs(os.path.join(twice, "a"))
    os.makedirs(os.path.join(twice, "b"))
    for side in "ab":
        os.link(os.path.join(folder, "snapshot_2.pickle"), os.path.join(twice, side, "snapshot_2.pickle"))
    got = run(memsnap, ["ranks", os.path.join(twice, "a"), os.path.join(twice, "b")])
    with check("ranks: a rank claimed by two files is flagged"):
        assert (got.returncode == 0
                and "rank numbers claimed by more than one file: 2" in got.stdout), got.stdout[-400:]
    got = run(memsnap, ["summarize", "-o", os.path.join(work, "clash"), os.path.join(twice, "a"),
                        os.path.join(twice, "b")])
    with check("summarize -o: two inputs that would share a summary name are a usage error"):
        assert got.returncode == 2 and "would both be summarised to" in got.stderr, got.stderr
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    got = run(memsnap, ["ranks", empty])
    with check("ranks on a folder without snapshots is a usage error"):
        assert (got.returncode == 2
                and "no snapshot or summary in this folder" in got.stderr), got.stderr
    got = run(memsnap, ["ranks", "-j", "0", folder])
    with check("ranks -j 0 is a usage error"):
        assert got.returncode == 2 and "-j" in got.stderr, got.stderr
    got = run(memsnap, ["summarize", os.path.join(folder, "snapshot_1.pickle")])
    with check("summarize text: a row with the rank and the largest source at the peak"):
        assert got.returncode == 0 and "largest at the peak" in got.stdout and "stage0_forward@stage0.py:" in got.stdout, (
            got.stdout)


def run_folders(memsnap, work):
    """compare RUN_A_DIR RUN_B_DIR: rank N with rank N, where rank 5 grows by
    1 GiB; rank 2 only in A, rank 8 only in B."""
    a = os.path.join(work, "compare", "A")
    b = os.path.join(work, "compare", "B")
    make_ranks(a, "--ranks", "8", "--stages", "2", "--events", "800")
    make_ranks(b, "--ranks", "8", "--stages", "2", "--events", "800", "--grow-rank", "5", "--extra-mib", "1024")
    os.rename(os.path.join(b, "snapshot_2.pickle"), os.path.join(b, "snapshot_8.pickle"))
    report, err = json_of(memsnap, ["compare", "--json", a, b])
    assert report is not None, "compare of two run folders: exit 0: %s" % err
    deltas = {row["rank"]: row["absolute_peak_diff"] for row in report["ranks"]}
    with check("compare folders: 7 ranks matched, rank 5 grew by 1 GiB and no other changed"):
        assert (report["matched"] == 7 and deltas == {r: (1 << 30 if r == 5 else 0) for r in (0, 1, 3, 4, 5, 6, 7)}
                and report["ranks"][0]["rank"] == 5), deltas
    with check("compare folders: the unmatched ranks listed (2 only in A, 8 only in B)"):
        assert [x["rank"] for x in report["only_a"]] == [2] and [x["rank"] for x in report["only_b"]] == [8], (
            (report["only_a"], report["only_b"]))
    grew = report["grew_most"]
    with check("compare folders: the drill-down is the full compare of rank 5, its grown line first"):
        assert (grew["rank"] == 5 and grew["compare"] is not None
                and grew["compare"]["drill_down"]["sources"][0]["source"] == "stage1_forward@stage1.py:99"
                and grew["compare"]["drill_down"]["sources"][0]["delta"] == 1 << 30), grew["sources"][:1]
    text = run(memsnap, ["compare", a, b])
    with check("compare folders text: the per-rank table, the unmatched, the command to drill in"):
        assert (text.returncode == 0 and "7 ranks matched, rank N with rank N" in text.stdout
                and "Only in A (no rank to match in B)\n    rank 2 (" in text.stdout
                and "Rank 5 grew most (+1.00 GiB): memsnap compare " in text.stdout), text.stdout[:1200]
    sa, sb = os.path.join(work, "compare", "sA"), os.path.join(work, "compare", "sB")
    for src, dst in ((a, sa), (b, sb)):
        run(memsnap, ["summarize", "-o", dst, src])
    summarized, err = json_of(memsnap, ["compare", "--json", sa, sb])
    with check("compare of summary folders: the same ranks, the drill-down from the summaries"):
        assert (summarized is not None and summarized["ranks"] == report["ranks"]
                and summarized["grew_most"]["compare"] is None
                and summarized["grew_most"]["sources"] == grew["sources"]), err
    got = run(memsnap, ["compare", a, os.path.join(b, "snapshot_1.pickle")])
    with check("compare of a folder with a file is a usage error"):
        assert (got.returncode == 2
                and "is a folder and" in got.stderr), got.stderr


def ranks_of_generated_runs(memsnap, work):
    run_folders(memsnap, work)
    result = sixty_four_ranks(memsnap, work)
    if result:
        folder, summaries = result
        hostile_summaries(memsnap, work, summaries)
        options_and_refusals(memsnap, work, folder)

def fixtures(memsnap, folder):
    """Every real file: summarize reads it, and ranks over all of them gives
    each file's parse numbers."""
    names = sorted(n for n in os.listdir(folder) if n.endswith((".pickle", ".pkl")))
    paths = [os.path.join(folder, n) for n in names]
    report, err = json_of(memsnap, ["ranks", "--json", "-j", "2"] + paths)
    assert report is not None and report["files_read"] == len(paths), (
        "fixtures: ranks over all %d real files: %s" % (len(paths), err))
    by_file = {row["file"]: row for row in report["ranks"]}
    wrong = []
    for path in paths:
        parse, _ = testlib.parse_json(memsnap, path)
        row = by_file[path]
        if parse is None or (row["absolute_peak"], row["reserved_peak"], row["device"]) != (
                parse["replay"]["absolute_peak"], parse["reserved"]["peak"], parse["device"]):
            wrong.append(os.path.basename(path))
    with check("fixtures: each file's row equals its parse (absolute peak, reserved peak, device)"):
        assert not wrong, wrong



def test_ranks_of_generated_runs(memsnap, work):
    ranks_of_generated_runs(memsnap, work)


@pytest.mark.fixtures
def test_every_fixture(memsnap, fixtures_dir):
    fixtures(memsnap, fixtures_dir)
