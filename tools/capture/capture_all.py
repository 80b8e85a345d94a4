#!/usr/bin/env python3
"""Runs every capture, each in its own process, and prints a summary table.

    python3 tools/capture/capture_all.py --out tests/data/gpu
    python3 tools/capture/capture_all.py --out /tmp/snaps --only steps ab_pair

One process per capture keeps allocator settings (PYTORCH_CUDA_ALLOC_CONF is
read once, when CUDA starts), CUDA state, graph pools and OOM observers from
leaking between captures. Each child's output goes to a log file; the tail is
printed when it fails. Exit status: 0 all ok, 1 some capture failed or timed
out, 2 no PyTorch with CUDA for the python running the captures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from capture import ALLOC_CONF_VARS, CAPTURES, EXIT_NO_TORCH_CUDA, Context

CAPTURE_SCRIPT = Path(__file__).resolve().with_name("capture.py")


def select(only: list[str] | None):
    if not only:
        return list(CAPTURES)
    known = {s.name for s in CAPTURES} | {s.group for s in CAPTURES if s.group}
    unknown = [n for n in only if n not in known]
    if unknown:
        sys.exit(
            f"capture_all: unknown capture {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    return [s for s in CAPTURES if s.name in only or s.group in only]


def child_env(spec) -> dict[str, str]:
    env = dict(os.environ)
    for var in ALLOC_CONF_VARS:
        env.pop(var, None)
    env.update(dict(spec.env))
    env["PYTHONUNBUFFERED"] = "1"  # keeps stdout and stderr in order in the log
    return env


def run_logged(cmd: list[str], env: dict[str, str], timeout: float, log: Path) -> int | None:
    """Runs cmd with its output in log; None when it ran past timeout (it is killed)."""
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own process group
            proc.wait()
            return None


def tail(path: Path, lines: int = 15) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def human_size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    return f"{n / 1024:.1f} KiB"


def preflight(python: str, log_dir: Path) -> int:
    log = log_dir / "check.log"
    rc = run_logged(
        [python, str(CAPTURE_SCRIPT), "--check"], child_env(CAPTURES[0]), 300, log
    )
    lines = [l for l in tail(log, 50) if l.strip()]
    if rc == 0:
        print(f"capture_all: {lines[-1] if lines else 'PyTorch with CUDA found'}")
        return 0
    reason = lines[-1] if lines else f"exit status {rc}"
    if rc is None:
        reason = "the check ran past 300 s"
    if not reason.startswith("capture: needs PyTorch with CUDA"):
        reason = f"needs PyTorch with CUDA: {python} {CAPTURE_SCRIPT.name} --check failed: {reason}"
    else:
        reason = reason[len("capture: "):]
    print(f"capture_all: {reason}", file=sys.stderr)
    return EXIT_NO_TORCH_CUDA


def _sidecar(out: Path, name: str) -> dict | None:
    try:
        with open(out / f"{name}.json", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def print_pairs(out: Path) -> None:
    """What the pairs are for, as numbers a reader can eyeball; checks nothing."""
    off, on = _sidecar(out, "graphs_off"), _sidecar(out, "graphs_on")
    if off and on:
        def allocs(s):
            return ((s["settings"].get("observed") or {}).get("actions") or {}).get("alloc", 0)
        ratio = allocs(off) / allocs(on) if allocs(on) else float("inf")
        print(f"graphs pair: {allocs(off)} vs {allocs(on)} alloc events ({ratio:.1f}x)")
    a, b = _sidecar(out, "ab_pair_a"), _sidecar(out, "ab_pair_b")
    if a and b:
        pa, pb = a["settings"].get("peak_allocated"), b["settings"].get("peak_allocated")
        if pa and pb:
            print(f"ab pair: peak allocated A {human_size(pa)}, B {human_size(pb)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run every memsnap capture, each in its own process."
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--only", nargs="+", metavar="NAME",
        help="captures or groups (graphs, stacks, ab_pair) to run; default all",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per capture (default 300)"
    )
    parser.add_argument(
        "--python", default=sys.executable,
        help="interpreter with PyTorch that runs the captures (default: this one)",
    )
    parser.add_argument("--logs", type=Path, help="directory for the per-capture logs")
    args = parser.parse_args(argv)

    selected = select(args.only)
    log_dir = args.logs or Path(tempfile.mkdtemp(prefix="memsnap-capture-logs-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    if any(s.needs_torch for s in selected):
        rc = preflight(args.python, log_dir)
        if rc != 0:
            if args.logs is None:
                shutil.rmtree(log_dir, ignore_errors=True)
            return rc
    args.out.mkdir(parents=True, exist_ok=True)

    rows = []
    for i, spec in enumerate(selected, 1):
        log = log_dir / f"{spec.name}.log"
        ctx = Context(spec.name, args.out.resolve())
        print(f"[{i}/{len(selected)}] {spec.name}: {spec.doc}", flush=True)
        start = time.monotonic()
        rc = run_logged(
            [args.python, str(CAPTURE_SCRIPT), "--capture", spec.name, "--out", str(args.out)],
            child_env(spec), args.timeout, log,
        )
        seconds = time.monotonic() - start
        ctx.raw_path.unlink(missing_ok=True)  # left behind only by a killed child
        lines = tail(log, 200)
        warnings = [l for l in lines if l.startswith(f"capture {spec.name}: warning:")]
        if rc is None:
            result = f"TIMEOUT ({args.timeout:.0f} s)"
        elif rc == 0:
            result = f"ok, {len(warnings)} warning(s)" if warnings else "ok"
        else:
            result = f"failed (exit {rc})"
        for line in warnings:
            print(f"    {line}")
        if rc != 0:
            for line in tail(log):
                print(f"    | {line}")
        size = ctx.gz_path.stat().st_size if ctx.gz_path.exists() else None
        rows.append((spec.name, result, seconds, size, rc == 0))
        print(f"    -> {result} in {seconds:.1f} s", flush=True)

    print()
    print(f"{'capture':<15} {'result':<24} {'seconds':>8} {'size':>11}")
    for name, result, seconds, size, _ in rows:
        size_text = human_size(size) if size is not None else "-"
        print(f"{name:<15} {result:<24} {seconds:>8.1f} {size_text:>11}")
    failed = [r[0] for r in rows if not r[4]]
    print_pairs(args.out)
    print()
    print(f"output: {args.out}    logs: {log_dir}")
    if failed:
        print(f"capture_all: {len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
