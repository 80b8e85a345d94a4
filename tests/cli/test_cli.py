#!/usr/bin/env python3
"""End-to-end behaviour of the command line: inputs, exit codes, messages.

Each check runs the real binary. Usage errors exit 2, bad input exits 1 with a
single "memsnap: ..." line on stderr, reports go to stdout only.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(REPO, "tests", "gen", "make_snapshot.py")
EXAMPLE = os.path.join(REPO, "examples", "training_steps.pickle.gz")

failures = []


def check(name, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else f": {detail}"))
    if not condition:
        failures.append(name)


def run(memsnap, args, stdin=None, cwd=None):
    return subprocess.run([memsnap] + args, input=stdin, capture_output=True, cwd=cwd, timeout=300)


def one_error_line(result, text):
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    return result.returncode == 1 and len(lines) == 1 and lines[0].startswith("memsnap: ") and text in lines[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("--fixtures", default=os.path.join(REPO, "..", "shared", "fixtures", "real"))
    args = parser.parse_args()
    memsnap = os.path.abspath(args.memsnap)
    work = tempfile.mkdtemp(prefix="memsnap_cli_")
    try:
        plain = os.path.join(work, "steps.pickle")
        subprocess.run([sys.executable, GENERATOR, "--out", plain, "--events", "3000", "--steps", "5", "--marks", "--seed", "5"], check=True)
        no_steps = os.path.join(work, "no_steps.pickle")
        subprocess.run([sys.executable, GENERATOR, "--out", no_steps, "--events", "1000", "--seed", "6"], check=True)
        two_devices = os.path.join(work, "two_devices.pickle")
        subprocess.run([sys.executable, GENERATOR, "--out", two_devices, "--events", "2000", "--devices", "2", "--seed", "7"], check=True)

        base = json.loads(run(memsnap, ["parse", "--json", plain]).stdout)
        ignore = {"file", "file_size_bytes", "compression"}
        strip = lambda report: {k: v for k, v in report.items() if k not in ignore}

        # Inputs: stdin, gzip and zstd by magic bytes (names say nothing).
        with open(plain, "rb") as f:
            data = f.read()
        piped = run(memsnap, ["parse", "--json", "-"], stdin=data)
        check("stdin '-' parses like the file", piped.returncode == 0 and strip(json.loads(piped.stdout)) == strip(base), piped.stderr)
        gz = os.path.join(work, "steps.bin")
        with open(gz, "wb") as f:
            f.write(gzip.compress(data))
        got = run(memsnap, ["parse", "--json", gz])
        check("gzip detected by magic bytes", got.returncode == 0 and json.loads(got.stdout)["compression"] == "gzip"
              and strip(json.loads(got.stdout)) == strip(base), got.stderr)
        if shutil.which("zstd"):
            zst = os.path.join(work, "steps.data")
            subprocess.run(["zstd", "-q", "-f", plain, "-o", zst], check=True)
            got = run(memsnap, ["parse", "--json", zst])
            check("zstd detected by magic bytes", got.returncode == 0 and json.loads(got.stdout)["compression"] == "zstd"
                  and strip(json.loads(got.stdout)) == strip(base), got.stderr)
        else:
            print("SKIP zstd: the zstd command is not installed")

        # Errors: one line, exit 1; usage errors: exit 2.
        check("missing file", one_error_line(run(memsnap, ["parse", os.path.join(work, "nope.pickle")]), "No such file"))
        empty = os.path.join(work, "empty.pickle")
        open(empty, "wb").close()
        check("empty file", one_error_line(run(memsnap, ["parse", empty]), "empty file: the dump was probably interrupted"))
        check("unknown device lists devices", one_error_line(run(memsnap, ["parse", "--device", "7", two_devices]), "devices with data: 0, 1"))
        check("no command is a usage error", run(memsnap, []).returncode == 2)
        check("unknown flag is a usage error", run(memsnap, ["parse", "--bogus", plain]).returncode == 2)
        check("replay-step needs --step or --all-steps", run(memsnap, ["replay-step", plain]).returncode == 2)
        check("--labels count mismatch is a usage error", run(memsnap, ["plot", plain, no_steps, "--labels", "a"]).returncode == 2)
        got = run(memsnap, ["replay-step", "--all-steps", no_steps])
        check("replay-step without steps explains", one_error_line(got, "has no ProfilerStep annotations. The file is fine")
              and b"replay-to-time still work" in got.stderr, got.stderr)
        got = run(memsnap, ["replay-step", "--step", "999", plain])
        check("unknown step lists the steps", one_error_line(got, "available steps: 0-4"), got.stderr)
        got = run(memsnap, ["compare", "--step", "999", plain, plain])
        check("compare --step not in both", one_error_line(got, "not complete in both files"), got.stderr)

        # Reports: JSON on stdout only; notes on stderr.
        got = run(memsnap, ["replay-to-time", "--time", "1e9", "--json", plain])
        report = json.loads(got.stdout)
        check("time past the end is clamped with a note", got.returncode == 0 and report["clamped"]
              and b"clamped" in got.stderr and report["time_s"] == report["trace_duration_s"], got.stderr)
        got = run(memsnap, ["compare", "--json", plain, plain])
        report = json.loads(got.stdout)
        check("a file compared with itself differs nowhere",
              all(row["delta"] == 0 for row in report["drill_down"]["sources"]) and report["config_diffs"] == []
              and all(s["absolute_peak_a"] == s["absolute_peak_b"] for s in report["step_results"]))
        renamed_a = os.path.join(work, "run_rank_0.pickle")
        renamed_b = os.path.join(work, "run_rank_3.pickle")
        shutil.copy(plain, renamed_a)
        shutil.copy(plain, renamed_b)
        report = json.loads(run(memsnap, ["compare", "--json", renamed_a, renamed_b]).stdout)
        check("different ranks are noted", any("different ranks" in o for o in report["observations"]), report["observations"])
        events = json.loads(run(memsnap, ["events", "--json", "--stride", "1000", plain]).stdout)
        check("events --stride samples and keeps the last", [e["index"] for e in events["events"]][-1] == events["event_count"] - 1)

        # plot: one self-contained file.
        html = os.path.join(work, "timeline.html")
        got = run(memsnap, ["plot", plain, no_steps, "--labels", "A", "B", "-o", html])
        page = open(html, encoding="utf-8").read() if got.returncode == 0 else ""
        check("plot writes one HTML file", got.returncode == 0 and page.startswith("<!DOCTYPE html>") and b"wrote" in got.stderr, got.stderr)
        check("plot inlines everything", 'src="http' not in page and "href=\"http" not in page and "{{" not in page)
        got = run(memsnap, ["plot", "--text", plain, no_steps])
        check("plot --text draws a chart with peaks", got.returncode == 0 and b"absolute peak" in got.stdout and "┤".encode() in got.stdout)

        # The bundled example parses (make demo).
        got = run(memsnap, ["parse", EXAMPLE])
        check("bundled example parses", got.returncode == 0 and b"Profiler steps" in got.stdout, got.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
