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
sys.path.insert(0, os.path.dirname(HERE))  # tests/
import testlib  # noqa: E402

check = testlib.Checks()
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
    return check(name, ok, "want exit %s%s; got exit %s, stderr %r" %
                 (status, "" if said is None else " saying %r" % said, rc, [e[:300] for e in err]))


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
    check("item 1: the trace's last user line names the source",
          rc == 0 and json.loads(out)["top_sources"][0]["source"] == "forward@model.py:999", out[:300])

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


def main():
    parser = __import__("argparse").ArgumentParser(description=__doc__)
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("--work")
    args = parser.parse_args()
    memsnap, work, scratch = testlib.memsnap_and_workdir(args.memsnap, args.work, "memsnap_hostile_")
    if memsnap is None:
        return 1
    try:
        regexes(memsnap, work)
    finally:
        if scratch:
            scratch.cleanup()
    print(check.summary())
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
