#!/usr/bin/env python3
"""Share of allocated bytes per category, per snapshot, for one or two builds.

    tools/category_shares.py [--before OLD_MEMSNAP] [--at-peak] MEMSNAP FILE_OR_DIR...

Runs `memsnap parse FILE --group-by category --json` on every device that has
trace entries and sums the allocated bytes (throughput) of each category over
the devices. With --before, each share is printed as `old -> new` where the
two builds differ, so a change to the category rules can be read off one
table. Files without trace entries (segments-only dumps) are listed apart, as
they have no categories to measure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CATEGORIES = [
    "parameter", "optimizer_state", "gradient", "activation", "temporary", "input",
    "autograd_detail", "communication", "workspace", "persistent", "unknown",
]
SHORT = {
    "parameter": "param", "optimizer_state": "optim", "gradient": "grad",
    "activation": "act", "temporary": "temp", "input": "input",
    "autograd_detail": "autograd", "communication": "comm", "workspace": "wksp",
    "persistent": "persist", "unknown": "unknown",
}


def parse_json(memsnap: str, path: Path, device: int | None = None) -> dict | None:
    command = [memsnap, "parse", str(path), "--group-by", "category", "--json", "--top", "20"]
    if device is not None:
        command += ["--device", str(device)]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        return None
    return json.loads(run.stdout)


def category_bytes(memsnap: str, path: Path) -> dict[str, int] | None:
    """Allocated bytes by category over every device with allocations; None
    when memsnap refuses the file, {} when it has no trace entries."""
    first = parse_json(memsnap, path)
    if first is None:
        return None
    # per_device lists every device of a multi-device file; a single-device
    # file has only its own device_traces.
    devices = [d["device"] for d in first.get("per_device", []) if d.get("alloc_count", 0) > 0]
    if not first.get("per_device"):
        own = first.get("device_traces") or {}
        if own.get("actions", {}).get("alloc", 0) > 0:
            devices = [first["device"]]
    totals: dict[str, int] = {}
    for device in devices:
        report = first if device == first["device"] else parse_json(memsnap, path, device)
        if report is None:
            continue
        for row in report.get("top_sources", []):
            totals[row["source"]] = totals.get(row["source"], 0) + row["throughput_bytes"]
    return totals


def peak_category_bytes(memsnap: str, path: Path) -> dict[str, int] | None:
    """Bytes live at the peak by category (explain --json), rows that are no
    category (`<before the trace: no block matches>`) under their own name;
    None when memsnap refuses the file, {} when it has no trace entries."""
    run = subprocess.run([memsnap, "explain", str(path), "--json", "--top", "100"],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        return None
    report = json.loads(run.stdout)
    if not report.get("trace", {}).get("event_count", report.get("event_count", 0)):
        return {}
    totals: dict[str, int] = {}
    for row in report["peak"]["by_category"]["rows"]:
        totals[row["source"]] = totals.get(row["source"], 0) + row["bytes"]
    return totals


def shares(totals: dict[str, int]) -> dict[str, float]:
    whole = sum(totals.values())
    return {c: 100.0 * totals.get(c, 0) / whole for c in CATEGORIES} if whole else {}


def cell(before: float | None, after: float) -> str:
    if before is None or round(before, 1) == round(after, 1):
        return f"{after:.1f}" if after else "."
    return f"{before:.1f} -> {after:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="the memsnap to compare with (an older build)")
    parser.add_argument("--at-peak", action="store_true",
                        help="shares of the bytes live at the peak (explain), not of all allocated")
    parser.add_argument("memsnap", help="the memsnap binary to measure")
    parser.add_argument("inputs", nargs="+", type=Path, help="snapshot files or folders of them")
    args = parser.parse_args()

    files: list[Path] = []
    for given in args.inputs:
        if given.is_dir():
            files += sorted(p for p in given.iterdir()
                            if p.is_file() and p.suffix in (".pickle", ".pkl", ".gz", ".zst"))
        else:
            files.append(given)

    header = ["file", "live at peak" if args.at_peak else "allocated"] + [SHORT[c] for c in CATEGORIES]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    untraced: list[str] = []
    unknown_after: list[float] = []
    unknown_before: list[float] = []
    for path in files:
        measure = peak_category_bytes if args.at_peak else category_bytes
        after = measure(args.memsnap, path)
        if not after:
            untraced.append(path.name + (" (refused)" if after is None else ""))
            continue
        before = measure(args.before, path) if args.before else None
        new = shares(after)
        old = shares(before) if before else {}
        if not new:
            continue
        unknown_after.append(new["unknown"])
        if old:
            unknown_before.append(old["unknown"])
        row = [path.name, f"{sum(after.values()) / 2**30:.2f} GiB"]
        row += [cell(old.get(c) if old else None, new[c]) for c in CATEGORIES]
        print("| " + " | ".join(row) + " |")
    print()
    if unknown_after:
        line = (f"unknown: median {statistics.median(unknown_after):.1f}% over "
                f"{len(unknown_after)} files with trace entries "
                f"({sum(1 for u in unknown_after if u == 0)} at 0%, "
                f"{sum(1 for u in unknown_after if u >= 99.95)} at 100%)")
        if unknown_before:
            line += f"; before: median {statistics.median(unknown_before):.1f}%"
        print(line)
    if untraced:
        print(f"no trace entries ({len(untraced)}): " + ", ".join(untraced))
    return 0


if __name__ == "__main__":
    sys.exit(main())
