#!/usr/bin/env python3
"""The Python package against CPython's pickle.load and against the CLI, on the same files.

For each size (default 1M and 10M trace entries, the realistic shape that
run_bench.py generates, cached in its work folder), in fresh interpreters:

  * `memsnap parse FILE --json` (the CLI): wall time (median of 3), peak RSS;
  * `pickle.load(open(FILE, 'rb'))`: wall time, peak RSS;
  * `memsnap.load(FILE).parse()` from Python: wall time of the load and of the
    report (median of 3), peak RSS (the issue's bound: <= 1.2x the CLI's);
  * `memsnap.load(FILE)` + `.events().to_pandas()`: the frame's time, peak RSS;
  * `import memsnap`: wall time.

The package comes from the wheel of `make wheel`, installed into a venv of its
own (build/bench/python-venv) with the pinned numpy and pandas.

    python3 bench/python_bench.py --memsnap build/memsnap --wheelhouse build/wheelhouse
        [--sizes 1m,10m] [--work build/bench]
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402  (the generator, the runner and the pickle.load measure)

ROOT = run_bench.ROOT
RUNS = 3
MEMORY_TARGET = 1.2  # a Snapshot from Python: peak RSS <= 1.2x the CLI's parse

LOAD_AND_PARSE = """
import json, sys, time
t0 = time.perf_counter()
import memsnap
t1 = time.perf_counter()
snapshot = memsnap.load(sys.argv[1])
t2 = time.perf_counter()
snapshot.parse()
t3 = time.perf_counter()
json.dump({"import": t1 - t0, "load": t2 - t1, "parse": t3 - t2}, open(sys.argv[2], "w"))
"""

LOAD_AND_PANDAS = """
import json, sys, time
import memsnap
t0 = time.perf_counter()
snapshot = memsnap.load(sys.argv[1])
t1 = time.perf_counter()
frame = snapshot.events().to_pandas()
t2 = time.perf_counter()
json.dump({"load": t1 - t0, "to_pandas": t2 - t1, "rows": len(frame)}, open(sys.argv[2], "w"))
"""


def venv_python(work, wheelhouse):
    """A venv with the wheel and the pinned numpy/pandas; rebuilt when the wheel changes."""
    venv = os.path.join(work, "python-venv")
    wheels = glob.glob(os.path.join(wheelhouse, "memsnap-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"python_bench: expected one wheel in {wheelhouse} (run `make wheel`)")
    stamp = os.path.join(venv, ".wheel")
    wanted = f"{wheels[0]} {os.path.getmtime(wheels[0])}"
    python = os.path.join(venv, "bin", "python")
    if not (os.path.exists(stamp) and open(stamp).read() == wanted):
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
        requirements = os.path.join(ROOT, "python", "constraints-test.txt")
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        wheels[0], "pandas", "-c", requirements], check=True)
        with open(stamp, "w") as f:
            f.write(wanted)
    return python


def child(runner, python, code, path):
    """Runs `code` RUNS times; returns the median of each timing and the max peak RSS (KiB)."""
    timings, rss = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.json")
        for _ in range(RUNS):
            rc, _, peak, _, err = runner.run([python, "-c", code, path, out])
            if rc != 0:
                return {"error": f"exit {rc}: {err.strip()[-400:]}"}
            with open(out) as f:
                timings.append(json.load(f))
            rss.append(peak)
    merged = {key: statistics.median(t[key] for t in timings) for key in timings[0]}
    merged["rss"] = max(rss)
    return merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memsnap", required=True, help="the CLI binary (build/memsnap)")
    ap.add_argument("--wheelhouse", required=True, help="folder with the wheel of `make wheel`")
    ap.add_argument("--sizes", default="1m,10m", help="trace entries per file (default 1m,10m)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "bench"))
    args = ap.parse_args(argv)

    runner = run_bench.Runner("auto")
    os.makedirs(args.work, exist_ok=True)
    python = venv_python(args.work, args.wheelhouse)
    gen_hash = run_bench.file_sha256(run_bench.GENERATOR)
    print(f"machine: {run_bench.machine_line()}")
    print(runner.describe())
    rows = []
    for events in [run_bench.parse_size(s) for s in args.sizes.split(",") if s.strip()]:
        path, *_ = run_bench.generate(events, args.work, runner, gen_hash, run_bench.SEED)
        size = os.path.getsize(path)
        cli = run_bench.run_timed(runner, [args.memsnap, "parse", path, "--json"], "cli parse")
        py = run_bench.python_load(path, runner, 1)
        api = child(runner, python, LOAD_AND_PARSE, path)
        frame = child(runner, python, LOAD_AND_PANDAS, path)
        rows.append((events, size, cli, py, api, frame))

    print()
    print("| entries | file | CLI parse | pickle.load | memsnap.load + parse() | vs pickle.load "
          "| RSS: CLI / Python / pickle.load | Python RSS vs CLI | load + to_pandas() "
          "| to_pandas() | import |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for events, size, cli, py, api, frame in rows:
        if "error" in cli or "error" in api or "error" in frame:
            print(f"| {run_bench.size_label(events)} | error: "
                  f"{cli.get('error') or api.get('error') or frame.get('error')} |")
            continue
        api_wall = api["load"] + api["parse"]
        py_wall = py.get("wall")
        ratio = f"{py_wall / api_wall:.1f}x" if py_wall else py.get("skip", py.get("error", "-"))
        memory = api["rss"] / cli["rss"]
        verdict = "ok" if memory <= MEMORY_TARGET else "MISSED"
        py_text = f"{py_wall:.2f} s" if py_wall else "skipped"
        print(f"| {run_bench.size_label(events)} | {size / 2**20:.0f} MiB | {cli['wall']:.3f} s "
              f"| {py_text} | {api['load']:.3f} + {api['parse']:.3f} s | {ratio} "
              f"| {cli['rss'] / 1024:.0f} / {api['rss'] / 1024:.0f} / "
              f"{py.get('rss', 0) / 1024:.0f} MiB | {memory:.2f}x ({verdict}, target <= "
              f"{MEMORY_TARGET}x) | {frame['load'] + frame['to_pandas']:.3f} s ({frame['rss'] / 1024:.0f} MiB) "
              f"| {frame['to_pandas']:.3f} s | {api['import'] * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
