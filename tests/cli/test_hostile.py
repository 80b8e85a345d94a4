#!/usr/bin/env python3
"""Hostile input, round three (issue 27): each finding of the attack on the
newer surfaces (regex flags and rules files, summaries, budgets, folders, the
CI formats, compressed input) as a regression check with its exact message and
exit status. Exit statuses: 0 report, 1 bad input, 2 usage, 3 a limit failed;
a signal (crash) or the timeout (hang) fails the check."""
import json
import os
import pickle
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

import pytest
from pytest_check import check

TIMEOUT = 120


def run(memsnap, args, stdin=None):
    """(exit status or 'timeout', stdout text, stderr lines)."""
    try:
        got = subprocess.run([memsnap] + args, input=stdin, capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return "timeout", "", []
    return (got.returncode, got.stdout.decode("utf-8", "replace"),
            got.stderr.decode("utf-8", "replace").splitlines())


def check_exit(name, got, status, said=None):
    """Exit `status`; with `said`, exactly one stderr line starting "memsnap: "
    that contains it."""
    rc, _, err = got
    ok = rc == status
    if said is not None:
        ok = ok and len(err) == 1 and err[0].startswith("memsnap: ") and said in err[0]
    with check(name):
        assert ok, "want exit %s%s; got exit %s, stderr %r" % (
            status, "" if said is None else " saying %r" % said, rc, [e[:300] for e in err])


def frame(name, filename="/home/me/train.py", line=10, **extra):
    return dict({"name": name, "filename": filename, "line": line}, **extra)


def snapshot(path, frames, user_metadata=None, annotations=()):
    """A one-device snapshot in _dump_snapshot's shape: a segment, an alloc and
    a free of 1 MiB whose stack is `frames`."""
    alloc = {"action": "alloc", "addr": 1 << 30, "size": 1 << 20, "stream": 0, "time_us": 100,
             "frames": frames}
    if user_metadata is not None:
        alloc["user_metadata"] = user_metadata
    trace = [{"action": "segment_alloc", "addr": 1 << 30, "size": 2 << 20, "stream": 0,
              "time_us": 50, "frames": []}, alloc,
             dict(alloc, action="free_requested", time_us=200),
             dict(alloc, action="free_completed", time_us=201)]
    data = {"segments": [{"device": 0, "address": 1 << 30, "total_size": 2 << 20, "allocated_size": 0,
                          "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                          "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                          "blocks": [{"address": 1 << 30, "size": 2 << 20, "requested_size": 0,
                                      "state": "inactive", "frames": []}]}],
            "device_traces": [trace],
            "external_annotations": list(annotations),
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""}}
    with open(path, "wb") as f:
        pickle.dump(data, f, protocol=4)
    return path


# ---------------------------------------------------------------------------
# Items 1-4: every regex is RE2 (linear in the subject, no recursion), every
# pattern at most 4096 characters; fx_origin's traceback lines are scanned by
# hand.

def regexes(memsnap, work):
    long_trace = ''.join('  File "/home/me/model.py", line %d, in forward\n    x = f(x)\n' % i
                         for i in range(1000)) + "x" * 60000
    fx = snapshot(os.path.join(work, "fx.pickle"),
                  [frame("forward", "/tmp/torchinductor_me/xy/cxyz.py", 40, fx_original_trace=long_trace)])
    for command in (["parse", "--json"], ["summarize", "--json"], ["plot", "--text"], ["explain"],
                    ["check", "--max-peak", "1GiB"], ["ranks"], ["compare", fx]):
        got = run(memsnap, command + [fx])
        check_exit("item 1: a %d KB fx_original_trace: %s exits 0" % (len(long_trace) // 1000, command[0]), got, 0)
    rc, out, err = run(memsnap, ["parse", "--json", fx])
    with check("item 1: the trace's last user line names the source"):
        assert rc == 0 and json.loads(out)["top_sources"][0]["source"] == "forward@model.py:999", out[:300]

    huge = "a" * 200000
    big = snapshot(os.path.join(work, "big_names.pickle"), [frame(huge, "/home/me/%s.py" % huge, 1)],
                   user_metadata=huge, annotations=[{"stage": "START", "name": huge, "device": 0, "time_us": 10}])
    rules = os.path.join(work, "rules.txt")
    with open(rules, "w") as f:
        f.write("activation frame a.*b\ninput metadata a.*b\nparameter annotation a.*b\ntemporary cpp a.*b\n")
    for flags in (["--keep", "a.*b"], ["--skip", "a.*b"], ["--category-rules", rules]):
        check_exit("item 2: %s over 200k-character names, metadata and annotations" % flags[0],
                   run(memsnap, ["parse", big] + flags), 0)

    forty = snapshot(os.path.join(work, "forty.pickle"), [frame("a" * 40, "/home/me/x.py", 1)])
    check_exit("item 3: --skip '^(a+)+$' over a 40-character frame name ends", run(
        memsnap, ["parse", forty, "--skip", "^(a+)+$"]), 0)
    with open(rules, "w") as f:
        f.write("activation frame ^(a+)+$\n")
    check_exit("item 3: a rules line '^(a+)+$' ends", run(memsnap, ["parse", forty, "--category-rules", rules]), 0)

    long_pattern = "a" * 100000
    for flag in ("--skip", "--keep"):
        check_exit("item 4: a 100k-character %s is a usage error" % flag,
                   run(memsnap, ["parse", forty, flag, long_pattern]), 2,
                   "%s 'aaaa" % flag)
    check_exit("item 4: the message says the limit", run(memsnap, ["parse", forty, "--skip", long_pattern]), 2,
               "...' (100000 characters) is longer than 4096 characters")
    check_exit("item 4: a 100k-character --rank-from is a usage error",
               run(memsnap, ["ranks", "--rank-from", "(" + long_pattern + ")", forty]), 2,
               "--rank-from '(aaa")
    with open(rules, "w") as f:
        f.write("activation frame %s\n" % long_pattern)
    check_exit("item 4: a 100k-character rules line is a usage error naming the line",
               run(memsnap, ["parse", forty, "--category-rules", rules]), 2,
               "%s:1: 'aaaa" % rules)
    check_exit("RE2 syntax: lookahead is refused with RE2's reason",
               run(memsnap, ["parse", forty, "--keep", "(?=x)"]), 2,
               "--keep '(?=x)' is no regular expression: invalid perl operator: (?=")


# ---------------------------------------------------------------------------
# Items 14-16: strings from the input and the file system (frame names,
# metadata, annotations, file names, a summary's path, a budget's category, a
# rules file's name) never reach a line's start raw: no forged "::error"
# workflow command, no ESC, no HTML or broken code span in Markdown, JUnit
# that XML parsers read.

EVIL = "x\n::error title=pwned::owned\x1b[31m`<img src=x>``\n```\n### PASS\n"


def strip_code_spans(text):
    """Markdown with its code spans and fenced blocks removed."""
    import re
    text = re.sub(r"(?ms)^(`{3,})sh\n.*?^\1\n", "", text)
    out, i = [], 0
    while i < len(text):
        if text[i] == "`":
            j = i
            while j < len(text) and text[j] == "`":
                j += 1
            fence = text[i:j]
            end = text.find(fence, j)
            while end != -1 and (text[end + len(fence):end + len(fence) + 1] == "`"):
                end = text.find(fence, end + len(fence) + 1)
            if end == -1:
                out.append(text[i:])
                break
            i = end + len(fence)
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def injection(memsnap, work):
    import xml.etree.ElementTree as ET
    folder = os.path.join(work, "inject")
    os.makedirs(os.path.join(folder, "dir"))
    os.makedirs(os.path.join(folder, "sums"))
    evil_file = os.path.join(folder, "dir", "rank0" + EVIL.replace("/", "_") + ".pickle")
    snapshot(evil_file, [frame("f" + EVIL, "/home/me/t" + EVIL + ".py", 3)], user_metadata=EVIL,
             annotations=[{"stage": "START", "name": EVIL, "device": 0, "time_us": 10}])
    plain = snapshot(os.path.join(folder, "plain.pickle"), [frame("f", "/home/me/t.py", 3)])
    summary = json.loads(subprocess.run([memsnap, "summarize", "--json", plain], capture_output=True).stdout)
    summary["file"]["path"] = EVIL
    with open(os.path.join(folder, "sums", "rank1.summary.json"), "w") as f:
        json.dump(summary, f)
    budget = os.path.join(folder, "budget.toml")
    with open(budget, "w") as f:
        f.write('max_peak = "1GiB"\n[max_category]\n"act\\nivation\\n::error::x" = "1MiB"\n')
    rules = os.path.join(folder, "rules" + EVIL.replace("/", "_"))
    with open(rules, "w") as f:
        f.write("bogus" + EVIL.replace("\n", "\x1b") + " frame x\n")
    commands = []
    for target in (evil_file, os.path.join(folder, "dir"), os.path.join(folder, "sums")):
        for command in (["parse"], ["explain"], ["oom"], ["segments"], ["replay-to-time", "--time", "0"],
                        ["replay-step", "--step", "3"], ["compare", plain], ["plot", "--text"], ["summarize"],
                        ["ranks"], ["events"], ["parse", "--category-rules", rules],
                        ["parse", "--group-by", "user_metadata"], ["parse", "--group-by", "annotation"],
                        ["compare", plain, "--group-by", "annotation"], ["check", "--budget", budget]) + tuple(
                ["check", "--max-peak", "1", "--format", form] for form in ("text", "markdown", "junit", "github")):
            commands.append(command + [target])
    leaks = []
    for command in commands:
        got = subprocess.run([memsnap] + command, capture_output=True, timeout=TIMEOUT)
        github = "github" in command
        for stream, data in (("stdout", got.stdout), ("stderr", got.stderr)):
            for line in data.split(b"\n"):
                ours = github and stream == "stdout" and line.split(b" ", 1)[0] in (b"::error", b"::notice")
                if line.startswith(b"::") and not ours:
                    leaks.append((command[0], stream, "a line starts with '::'", line[:60]))
            if b"\x1b" in data or b"\x00" in data:
                leaks.append((command[0], stream, "a control byte", data[:60]))
        if "markdown" in command:
            outside = strip_code_spans(got.stdout.decode())
            if "<" in outside or "\n### PASS" in outside:
                leaks.append(("markdown", "stdout", "HTML or a forged heading outside code", outside[:200]))
        if "junit" in command:
            try:
                ET.fromstring(got.stdout)
            except ET.ParseError as error:
                leaks.append(("junit", "stdout", "not well-formed XML", str(error)))
    with check("items 14-16: %d commands x formats on hostile names: nothing raw reaches a line's start" % len(commands)):
        assert not leaks, leaks[:5]
    rc, out, _ = run(memsnap, ["check", "--max-peak", "1", evil_file])
    with check("item 14: a hint's file name is one line in bash's $'...' quoting"):
        assert rc == 3 and "memsnap parse $'" in out and "\\n::error title=pwned::owned\\x1b[31m" in out, out[-600:]
    with open(rules, "w") as f:
        f.write("bogus\x00name frame x\n")
    check_exit("item 21: a NUL in a rules file does not cut the message", run(
        memsnap, ["parse", plain, "--category-rules", rules]), 2, "'bogus\\x00name' is no category (a rule is")

    # XML 1.0 cannot carry U+FFFE, lone surrogates or invalid UTF-8: the
    # JUnit report replaces them.
    odd = os.path.join(folder, "odd").encode() + b"\xff\xef\xbf\xbe\xed\xa0\x80\x1b.pickle"
    with open(plain, "rb") as src, open(odd, "wb") as dst:
        dst.write(src.read())
    got = subprocess.run([memsnap.encode(), b"check", b"--max-peak", b"1", b"--format", b"junit", odd],
                         capture_output=True, timeout=TIMEOUT)
    try:
        suites = ET.fromstring(got.stdout)
        well_formed = suites.tag == "testsuites"
    except ET.ParseError:
        well_formed = False
    with check("item 16: JUnit of a file name with invalid UTF-8, U+FFFE, a surrogate and ESC is well-formed XML"):
        assert got.returncode == 3 and well_formed, got.stdout[:300]


# ---------------------------------------------------------------------------
# Item 10: a limit the file cannot measure fails the gate (unless
# --allow-unmeasured), and the decoder's warnings reach every format.
# Item 19: a summary is read only as large as summarize writes it.

def unmeasurable(memsnap, work):
    import xml.etree.ElementTree as ET
    folder = os.path.join(work, "unmeasured")
    os.makedirs(folder)
    base = snapshot(os.path.join(folder, "base.pickle"), [frame("f", "/home/me/t.py", 3)])
    with open(base, "rb") as f:
        data = pickle.load(f)
    # segments: [] while the trace leaves 3 MiB live: the dump contradicts the trace.
    trace = [e for e in data["device_traces"][0] if e["action"] == "alloc"]
    trace = [dict(trace[0], addr=(1 << 30) + i * (1 << 20), time_us=100 + i) for i in range(3)]
    no_segments = os.path.join(folder, "no_segments.pickle")
    with open(no_segments, "wb") as f:
        pickle.dump(dict(data, segments=[], device_traces=[trace]), f)
    # 26 segments no reader can use: reserved would read 0 B.
    bad_segments = os.path.join(folder, "bad_segments.pickle")
    with open(bad_segments, "wb") as f:
        pickle.dump(dict(data, segments=[{"device": 0, "address": "x", "total_size": -5}] * 26), f)

    limits = ["--max-peak", "1GiB", "--max-reserved", "1GiB", "--max-fragmentation", "100%"]
    rc, out, err = run(memsnap, ["check", no_segments] + limits)
    with check("item 10: segments [] with live memory in the trace: max_peak is not measurable, exit 3"):
        assert (rc == 3 and "FAIL  max_peak: not measurable on this file: the dump's segments hold 3145728 bytes "
                "less than the trace leaves live" in out and "warning: baseline is negative" in out), out
    rc, out, err = run(memsnap, ["check", bad_segments] + limits)
    with check("item 10: 26 malformed segments: max_reserved is not measurable, exit 3, the warning shown"):
        assert (rc == 3 and "FAIL  max_reserved: not measurable on this file: 26 malformed segments and 0 malformed "
                "blocks were skipped (--allow-unmeasured skips it)" in out
                and "warning: 26 malformed segments and 0 malformed blocks were skipped" in out), out
    rc, out, err = run(memsnap, ["check", bad_segments, "--allow-unmeasured"] + limits)
    with check("item 10: --allow-unmeasured: not checked, exit 0"):
        assert rc == 0 and "skip  max_reserved: not measurable on this file" in out, out
    check_exit("item 10: a good file still passes", run(memsnap, ["check", base] + limits), 0)

    rc, out, _ = run(memsnap, ["check", bad_segments, "--format", "json"] + limits)
    report = json.loads(out) if out else {}
    reserved = next((l for l in report.get("limits", []) if l["name"] == "max_reserved"), {})
    with check("item 10: JSON: measurable false, measured null, status fail, the warnings listed"):
        assert (rc == 3 and reserved.get("measurable") is False and reserved.get("measured") is None
                and reserved.get("status") == "fail" and any("malformed segments" in w for w in report["warnings"])), (
            out[:400])
    rc, out, _ = run(memsnap, ["check", bad_segments, "--format", "markdown"] + limits)
    with check("item 10: Markdown shows the warning"):
        assert rc == 3 and "> :warning: 26 malformed segments" in out, out[:400]
    rc, out, _ = run(memsnap, ["check", bad_segments, "--format", "github"] + limits)
    with check("item 10: GitHub: a ::warning line for the file's warning"):
        assert (rc == 3 and any(l.startswith("::warning title=memsnap check%3A file::26 malformed segments")
                for l in out.splitlines())), out[:600]
    rc, out, _ = run(memsnap, ["check", bad_segments, "--format", "junit"] + limits)
    suite = ET.fromstring(out).find("testsuite") if rc == 3 else None
    with check("item 10: JUnit: the warning in the suite's system-err"):
        assert suite is not None and "26 malformed segments" in (suite.findtext("system-err") or ""), out[:600]

    # Through a summary: the doubt and the warnings travel with it.
    rc, out, _ = run(memsnap, ["summarize", "--json", bad_segments])
    summary = json.loads(out) if rc == 0 else {}
    with check("item 10: the summary says what it cannot measure and why"):
        assert (summary.get("unmeasurable", {}).get("reserved", "").startswith("26 malformed segments")
                and summary.get("warnings")), out[:300]
    saved = os.path.join(folder, "bad.summary.json")
    with open(saved, "w") as f:
        f.write(out)
    rc, out, _ = run(memsnap, ["check", saved] + limits)
    with check("item 10: check of the summary fails as check of the snapshot"):
        assert (rc == 3
                and "max_reserved: not measurable on this file" in out and "warning: 26 malformed" in out), out
    rc, out, _ = run(memsnap, ["check", "--write-budget", bad_segments])
    with check("item 10: --write-budget leaves out what the run cannot measure"):
        assert rc == 0 and "\nmax_reserved =" not in out and "\nmax_peak_delta =" in out, out

    # Item 19: rows beyond what summarize writes are refused, not held.
    big = dict(summary)
    big["live_at_peak"] = dict(summary["live_at_peak"],
                               by_source=[{"source": "s%d" % i, "bytes": 1, "count": 1} for i in range(201)])
    with open(saved, "w") as f:
        json.dump(big, f)
    check_exit("item 19: a summary with 201 live rows is refused", run(memsnap, ["check", saved, "--max-peak", "1GiB"]), 1,
               "not a memsnap summary: live_at_peak.by_source has 201 items; summarize writes at most 200")
    big = dict(summary, file=dict(summary["file"], path="p" * 5000))
    with open(saved, "w") as f:
        json.dump(big, f)
    check_exit("item 19: a 5,000-byte string is refused", run(memsnap, ["check", saved, "--max-peak", "1GiB"]), 1,
               "not a memsnap summary: file.path is longer than 4096 bytes")
    with open(saved, "w") as f:
        f.write("{" + " " * (8 << 20) + "}")
    check_exit("item 19: a summary over 8 MiB is refused", run(memsnap, ["check", saved, "--max-peak", "1GiB"]), 1,
               "is too large for a memsnap summary (at most 8 MiB)")
    long_name = snapshot(os.path.join(folder, "long_name.pickle"), [frame("n" * 100000, "/home/me/t.py", 3)])
    rc, out, _ = run(memsnap, ["summarize", "--json", long_name])
    rows = json.loads(out)["live_at_peak"]["by_source"] if rc == 0 else []
    with check("item 19: a 100 KB source name is cut to 1 KiB in the summary"):
        assert rc == 0 and rows and len(rows[0]["source"].encode()) <= 1024 and rows[0]["source"].endswith("..."), (
            [len(r["source"]) for r in rows])


# ---------------------------------------------------------------------------
# Item 18: memory is bounded by the inflated input: no string the model keeps
# is longer than 1 MiB (a 1 GiB frame name in a 33 KB .zst took 6 GiB).

def long_strings(memsnap, work):
    import shutil
    folder = os.path.join(work, "long")
    os.makedirs(folder)
    size = 64 << 20
    plain = snapshot(os.path.join(folder, "long.pickle"), [frame("n" * size, "/home/me/t.py", 3)],
                     user_metadata="m" * (2 << 20))
    with open(plain, "rb") as f:
        data = pickle.load(f)
    data["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "s" * (3 << 20)}
    with open(plain, "wb") as f:
        pickle.dump(data, f, protocol=4)
    if shutil.which("zstd"):
        subprocess.run(["zstd", "-q", "-f", "--rm", plain, "-o", plain + ".zst"], check=True)
        target = plain + ".zst"
    else:
        target = plain
    got = subprocess.run([memsnap, "parse", "--json", target], capture_output=True, timeout=TIMEOUT)
    report = json.loads(got.stdout) if got.returncode == 0 else {}
    sources = [row["source"] for row in report.get("top_sources", [])]
    with check("item 18: a 64 MiB frame name, 2 MiB metadata, a 3 MiB setting: parsed, each cut to 1 MiB, warned"):
        assert (got.returncode == 0 and sources and len(sources[0]) < (1 << 20) + 100
                and (1 << 20) - 100 < len(report["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"]) <= 1 << 20
                and any("longer than 1 MiB and are cut to it" in w for w in report["warnings"])), (
            (got.returncode, got.stderr[-300:], [len(s) for s in sources]))
    # Peak RSS of that one run: measured in a fresh interpreter, whose only
    # child it is (ru_maxrss of the children is the largest so far).
    if os.environ.get("MEMSNAP_SANITIZED") == "1":
        print("SKIP item 18 peak memory: ASan keeps freed memory in quarantine")
        return
    measure = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    peak_kib = int(subprocess.run([sys.executable, "-c", measure, memsnap, "parse", target],
                                  capture_output=True, text=True, timeout=TIMEOUT).stdout)
    with check("item 18: peak memory within 1.5x the inflated pickle (+ 64 MiB): %d MiB for %d MiB"
               % (peak_kib >> 10, size >> 20)):
        assert (peak_kib << 10) < size * 1.5 + (64 << 20), peak_kib


# ---------------------------------------------------------------------------
# Items 17 and 21: no output over an input; one "memsnap: ..." line naming the
# file, with the right exit status, everywhere.

def messages(memsnap, work):
    import shutil
    folder = os.path.join(work, "messages")
    os.makedirs(folder)
    good = snapshot(os.path.join(folder, "r0.pickle"), [frame("f", "/home/me/t.py", 3)])

    # Item 17: summarize -o never writes over an input, nor through a symlink.
    rc, out, _ = run(memsnap, ["summarize", "--json", good])
    summary_file = os.path.join(folder, "r0.summary.json")
    with open(summary_file, "w") as f:
        f.write(out)
    check_exit("item 17: summarize -o onto an input summary is refused",
               run(memsnap, ["summarize", good, summary_file, "-o", folder]), 2,
               "-o %s is one of the input files; refusing to overwrite it" % summary_file)
    target = os.path.join(folder, "victim.txt")
    with open(target, "w") as f:
        f.write("untouched")
    out_dir = os.path.join(folder, "out")
    os.makedirs(out_dir)
    os.symlink(target, os.path.join(out_dir, "r0.summary.json"))
    rc, _, _ = run(memsnap, ["summarize", good, "-o", out_dir])
    with check("item 17: summarize -o replaces a symlink in its way, never writes through it"):
        assert (rc == 0 and open(target).read() == "untouched"
                and not os.path.islink(os.path.join(out_dir, "r0.summary.json"))), rc

    # Item 21.
    if os.path.exists("/dev/full"):
        got = subprocess.run("'%s' check --max-peak 1 '%s' > /dev/full" % (memsnap, good), shell=True,
                             capture_output=True, timeout=TIMEOUT)
        lines = got.stderr.decode().splitlines()
        with check("item 21: a failing gate whose report cannot be written exits 1 with the write error"):
            assert got.returncode == 1 and lines == ["memsnap: cannot write output: No space left on device"], (
                (got.returncode, lines))
    bad_dir = os.path.join(folder, "ranks")
    os.makedirs(bad_dir)
    shutil.copy(good, os.path.join(bad_dir, "r0.pickle"))
    for name in ("r1.pickle", "r2.pickle"):
        with open(os.path.join(bad_dir, name), "wb") as f:
            f.write(b"junk")
    check_exit("item 21: check DIR with unreadable ranks: one line naming the first and the count",
               run(memsnap, ["check", bad_dir, "--max-peak", "1GiB"]), 1,
               "%s: 2 of 3 files could not be read: %s/r1.pickle: " % (bad_dir, bad_dir))
    check_exit("item 21: summarize with one bad file: one line naming it, with the count",
               run(memsnap, ["summarize", good, os.path.join(bad_dir, "r1.pickle")]), 1,
               "(1 of 2 files could not be summarised)")
    check_exit("item 21: a usage error in CLI11's domain is memsnap's one line",
               run(memsnap, ["parse", "--device", "x", good]), 2, "parse: --device: expects a whole number")
    with open(summary_file, "rb") as f:
        summary_bytes = f.read()
    bom = os.path.join(folder, "bom.summary.json")
    with open(bom, "wb") as f:
        f.write(b"\xef\xbb\xbf" + summary_bytes)
    check_exit("item 21: a summary with a UTF-8 byte order mark is read", run(
        memsnap, ["check", bom, "--max-peak", "1GiB"]), 0)
    check_exit("item 21: a snapshot command on it says JSON, not 'first byte 0xef'", run(
        memsnap, ["parse", bom]), 1, "this looks like JSON, not a pickle")
    with open(good, "rb") as f:
        pickled = f.read()
    check_exit("item 21: check - --baseline - is a usage error", run(
        memsnap, ["check", "-", "--baseline", "-", "--max-peak", "1GiB"], stdin=pickled), 2,
        "stdin ('-') can be read once")
    check_exit("item 21: a summary on stdin is read as a summary", run(
        memsnap, ["check", "-", "--max-peak", "1GiB"], stdin=summary_bytes), 0)
    check_exit("item 21: a snapshot on stdin still is", run(memsnap, ["check", "-", "--max-peak", "1GiB"],
                                                            stdin=pickled), 0)
    if shutil.which("zstd"):
        long_window = subprocess.run(["zstd", "-q", "--long=31", "-c"], input=pickled, capture_output=True).stdout
        with open(os.path.join(folder, "long.zst"), "wb") as f:
            f.write(long_window)
        check_exit("item 21: zstd --long=31 (a 2 GiB window) is read",
                   run(memsnap, ["parse", os.path.join(folder, "long.zst")]), 0)
    with open(good, "rb") as f:
        data = pickle.load(f)
    deep = []
    for _ in range(250):
        deep = [deep]
    nested = os.path.join(folder, "deep.pickle")
    with open(nested, "wb") as f:
        pickle.dump(dict(data, allocator_settings={"deep": deep}), f)
    check_exit("item 21: dump's nesting error names the file", run(memsnap, ["dump", nested]), 1,
               "%s: nesting deeper than 200 levels" % nested)
    data["device_traces"][0].append({"action": "oom", "addr": 0, "size": 2 ** 63, "stream": 0,
                                     "time_us": 300, "device_free": 5, "frames": []})
    oom = os.path.join(folder, "oom63.pickle")
    with open(oom, "wb") as f:
        pickle.dump(data, f)
    rc, out, _ = run(memsnap, ["oom", oom])
    with check("item 21: oom says that a malformed entry (an oom of size 2^63) was skipped"):
        assert rc == 0 and "1 malformed trace entries were skipped" in out, out[:300]



def test_regexes(memsnap, work):
    regexes(memsnap, work)


def test_injection(memsnap, work):
    injection(memsnap, work)


def test_unmeasurable(memsnap, work):
    unmeasurable(memsnap, work)


def test_long_strings(memsnap, work):
    long_strings(memsnap, work)


def test_messages(memsnap, work):
    messages(memsnap, work)
