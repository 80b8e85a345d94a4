#!/usr/bin/env python3
"""Hostile input, round five (issue 56): files whose shape made a report say
something false, or made output promised to be a few lines grow with the
file. Each is written by tests/gen/make_hostile.py (or copied under a name of
its own) and read in well under a second; every check names the finding."""
import json
import os
import shutil
import subprocess
import sys

from pytest_check import check

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gen"))
import make_hostile  # noqa: E402

TIMEOUT = 60
CHECK_FORMATS = ("text", "json", "markdown", "junit", "github")


def run(memsnap, args):
    """(exit status or 'timeout', stdout text, stderr text)."""
    try:
        got = subprocess.run([memsnap] + args, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "timeout", "", ""
    return (got.returncode, got.stdout.decode("utf-8", "replace"),
            got.stderr.decode("utf-8", "replace"))


def shape(work, name):
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, name + ".pickle")
    if not os.path.exists(path):
        make_hostile.write(name, path)
    return path


def test_file_names_reach_the_plot_title_escaped(memsnap, work):
    """Finding 4: a file named with U+202E, ESC and BEL went raw into the
    page's <title> (which the page copies into its heading: the name read
    reversed). It is shown as the text reports show it: \\u202e, \\x1b, \\x07."""
    source = shape(work, "profiler_steps")
    named = os.path.join(work, "lmth.\u202eexe\x1b[31m\x07.pickle")
    shutil.copyfile(source, named)
    page = os.path.join(work, "named.html")
    rc, _, err = run(memsnap, ["plot", named, "-o", page])
    if rc != 0 and "without the HTML plot" in err:
        return
    with check("plot answers"):
        assert rc == 0, err[-300:]
    with open(page, encoding="utf-8") as f:
        html = f.read()
    title = html[html.index("<title>") + 7:html.index("</title>")]
    with check("the <title> holds no U+202E, ESC or BEL"):
        assert not any(c in title for c in "\u202e\x1b\x07"), ascii(title)
    with check("the <title> shows them escaped"):
        assert "lmth.\\u202eexe\\x1b[31m\\x07.pickle" in title, ascii(title)


def test_no_steps_says_which_marks_there_are(memsnap, work):
    """Finding 6: `--steps optimizer` on a file with 100 ProfilerStep marks
    said "no ProfilerStep annotations, and no Optimizer.step marks"; 100
    Optimizer.step START marks with no END said "no Optimizer.step marks".
    replay-step's error, parse's hint and check's note say what is there."""
    profiler = shape(work, "profiler_steps")
    rc, _, err = run(memsnap, ["replay-step", profiler, "--steps", "optimizer", "--all-steps"])
    with check("--steps optimizer on ProfilerStep marks: refused"):
        assert rc == 1, (rc, err)
    with check("... naming the 100 ProfilerStep annotations and the source that reads them"):
        assert ("100 ProfilerStep annotations" in err and "--steps profiler or auto" in err
                and "no ProfilerStep annotations" not in err), err
    with check("... without the advice to run the profiler it ran"):
        assert "torch.profiler" not in err, err
    rc, out, err = run(memsnap, ["parse", profiler, "--steps", "optimizer", "--json"])
    hint = json.loads(out).get("steps_hint", "") if rc == 0 else err
    with check("parse's steps_hint names them too"):
        assert ("100 ProfilerStep annotations" in hint
                and "no ProfilerStep annotations" not in hint), hint
    rc, out, err = run(memsnap, ["check", profiler, "--steps", "optimizer", "--step-max-peak",
                                 "1GiB", "--format", "json"])
    notes = [r.get("note") for r in json.loads(out).get("limits", [])] if rc == 0 else [err]
    with check("check's step_max_peak note names them"):
        assert (any(
                n and "100 ProfilerStep annotations" in n for n in notes)), notes

    open_marks = shape(work, "open_optimizer_marks")
    for steps in ("auto", "optimizer"):
        rc, _, err = run(memsnap, ["replay-step", open_marks, "--steps", steps, "--all-steps"])
        with check("%s: 100 Optimizer.step marks without END are named, not denied" % steps):
            assert (rc == 1 and "100 Optimizer.step marks have a START and no END" in err
                    and "no Optimizer.step marks" not in err), (rc, err)


def test_bounds_are_named(memsnap, work):
    """Finding 7: `whatif --set max_split_size_mb:18446744073709551615` said
    "must be more than 20", `--capacity 1EiB` "at least 1 byte": each value
    past a bound names that bound (and 1 EiB is a size)."""
    path = shape(work, "profiler_steps")
    cases = [
        (["--set", "max_split_size_mb:18446744073709551615"], "at most 1099511627776"),
        (["--set", "max_split_size_mb:99999999999999999999999"], "at most 1099511627776"),
        (["--set", "max_split_size_mb:18"], "more than 20, not 18"),
        (["--set", "roundup_power2_divisions:99999999999999999999"], "at most 9223372036854775808"),
        (["--set", "garbage_collection_threshold:2"], "less than 1"),
        (["--set", "garbage_collection_threshold:0"], "more than 0"),
        (["--capacity", "16EiB"], "at most 4 EiB"),
        (["--capacity", "99999999999999999999999"], "at most 4 EiB"),
        (["--capacity", "0"], "at least 1 byte"),
        (["--capacity", "12 parsecs"], "such as 80GiB"),
        (["--top", "99999999999999999999"], "at most 9223372036854775807"),
    ]
    for args, said in cases:
        rc, _, err = run(memsnap, ["whatif", path] + args)
        with check("whatif %s: refused naming %r" % (" ".join(args), said)):
            assert (rc == 2 and said in err and "must be more than 20" not in err.replace(
                    "more than 20, not 18", "")), (rc, err[-300:])
    rc, _, err = run(memsnap, ["whatif", path, "--capacity", "1EiB", "--json"])
    with check("whatif --capacity 1EiB: a size, answered"):
        assert rc == 0, (rc, err[-300:])


def test_many_ooms_give_the_first_few_and_a_count(memsnap, work):
    """Finding 8: 10,000 oom entries made `check --max-peak 1KiB` write a
    line each (about 1 MB in every format) and `summarize --json` 1.2 MB
    where its help says a few KB. Every format gives the first few and a
    count; the summary keeps the first few and the count, and a summary
    written before the count still reads."""
    path = shape(work, "many_ooms")
    for fmt in CHECK_FORMATS:
        rc, out, err = run(memsnap, ["check", path, "--max-peak", "1KiB", "--format", fmt])
        with check("check --format %s: a few KB (%d bytes), exit 3" % (fmt, len(out))):
            assert rc == 3 and len(out) < 16 << 10, (rc, err[-300:])
        with check("check --format %s: counts the rest" % fmt):
            assert "9,997 more oom entries" in out, out[:2000]
    rc, out, err = run(memsnap, ["summarize", path, "--json"])
    with check("summarize --json: a few KB (%d bytes)" % len(out)):
        assert rc == 0 and len(out) < 16 << 10, (rc, err[-300:])
    summary = json.loads(out) if rc == 0 else {}
    with check("the summary counts every oom entry and lists the first 8"):
        assert (summary.get("oom_count") == 10000 and len(summary.get("ooms", [])) == 8
                and [o["event"] for o in summary.get("ooms", [])] == list(range(1, 9))), (
            (summary.get("oom_count"), summary.get("ooms")))
    written = os.path.join(work, "many_ooms.summary.json")
    with open(written, "w") as f:
        f.write(out)
    rc, out, err = run(memsnap, ["check", written, "--no-oom", "--format", "json"])
    measured = [r["measured"] for r in json.loads(out).get("limits", [])] if rc == 3 else err
    with check("check --no-oom on the summary measures all 10,000"):
        assert measured == [10000], measured
    # A summary written before oom_count: every entry listed, none counted.
    old = dict(summary)
    old.pop("oom_count", None)
    old["ooms"] = [dict(summary["ooms"][0], event=k + 1) for k in range(12)]
    older = os.path.join(work, "older.summary.json")
    with open(older, "w") as f:
        json.dump(old, f)
    rc, out, err = run(memsnap, ["check", older, "--no-oom", "--format", "json"])
    measured = [r["measured"] for r in json.loads(out).get("limits", [])] if rc == 3 else err
    with check("a summary without oom_count counts the entries it lists"):
        assert measured == [12], measured
    bad = dict(summary, oom_count=3)
    wrong = os.path.join(work, "wrong.summary.json")
    with open(wrong, "w") as f:
        json.dump(bad, f)
    rc, _, err = run(memsnap, ["check", wrong, "--no-oom"])
    with check("an oom_count below the entries listed is refused"):
        assert rc == 1 and "oom_count" in err, (rc, err)


def test_odd_allocator_settings(memsnap, work):
    """Finding 9: garbage_collection_threshold inf came out as null in
    `parse --json` (it is the string "inf"); expandable_segments 'yes' was
    read as off without a word (a warning names the value)."""
    path = shape(work, "odd_settings")
    rc, out, err = run(memsnap, ["parse", path, "--json"])
    parsed = json.loads(out) if rc == 0 else {}
    settings = parsed.get("allocator_settings", {})
    with check("inf is the string \"inf\""):
        assert settings.get("garbage_collection_threshold") == "inf", settings
    warned = [w for w in parsed.get("warnings", []) if "expandable_segments" in w]
    with check("a warning names expandable_segments' value and how it is read"):
        assert len(warned) == 1 and '"yes"' in warned[0] and "read as off" in warned[0], warned
    with check("no warning for the threshold memsnap reads"):
        assert not any("garbage_collection_threshold" in w for w in parsed.get("warnings", [])), parsed.get("warnings")
    rc, out, _ = run(memsnap, ["parse", path])
    with check("parse's text warns too"):
        assert rc == 0 and "expandable_segments is \"yes\"" in out, out[-1500:]
