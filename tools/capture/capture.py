#!/usr/bin/env python3
"""Records one CUDA memory snapshot for memsnap's test data.

    python3 tools/capture/capture.py --capture NAME --out DIR
    python3 tools/capture/capture.py --list
    python3 tools/capture/capture.py --check

Writes DIR/NAME.pickle.gz (the torch.cuda.memory._dump_snapshot pickle,
gzipped) and DIR/NAME.json (the sidecar: what produced it and facts to check).
Run it with the python3 that has PyTorch; capture_all.py runs every capture,
each in its own process. Exit status: 0 ok, 1 the capture failed, 2 no PyTorch
with CUDA here.

This file imports only the standard library at the top: the allocator
environment is set before torch is imported, and capture_all.py reads the list
of captures from here without PyTorch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import platform
import sys
import time
from pathlib import Path

import snapshot_io

EXIT_FAILED = 1
EXIT_NO_TORCH_CUDA = 2

# Allocator configuration is per capture: these are cleared for every capture
# and set only where a capture names them, so a value in the caller's shell
# cannot leak into the test data.
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    doc: str
    group: str = ""
    env: tuple[tuple[str, str], ...] = ()
    needs_torch: bool = True


# In the order capture_all.py runs them (protocol5 re-pickles steps' output).
CAPTURES = [
    Spec("steps", "profiler schedule + prof.step(): ProfilerStep#N and record_function "
         "forward/backward/optimizer annotations; dumped with the last step still open"),
    Spec("graphs_off", "eager training steps (the baseline of the CUDA-graph pair)", "graphs"),
    Spec("graphs_on", "the same steps replayed from one torch.cuda.graph capture", "graphs"),
    Spec("oom", "OOM observer dumps when a free+1GiB allocation fails mid-step"),
    Spec("expandable", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
         env=(("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),)),
    Spec("wrapped", "max_entries=2000: the ring buffer wraps"),
    Spec("python_stacks", "stacks='python'", "stacks"),
    Spec("all_stacks", "stacks='all' (C++ frames too), same workload", "stacks"),
    Spec("ab_pair_a", "compare pair, side A: batch 8, profiler steps", "ab_pair"),
    Spec("ab_pair_b", "compare pair, side B: batch 16, otherwise as A", "ab_pair"),
    Spec("protocol5", "steps.pickle.gz re-pickled with protocol 5 (what Python 3.14 writes)",
         needs_torch=False),
]
BY_NAME = {spec.name: spec for spec in CAPTURES}


class Context:
    """Where one capture writes, and what its checks found."""

    def __init__(self, name: str, out_dir: Path):
        self.name = name
        self.out_dir = out_dir
        self.raw_path = out_dir / f".{name}.pickle.raw"  # the dump before gzip
        self.gz_path = out_dir / f"{name}.pickle.gz"
        self.json_path = out_dir / f"{name}.json"
        self.failures: list[str] = []
        self.warnings: list[str] = []

    def require(self, ok, message: str) -> None:
        if not ok:
            self.failures.append(message)

    def expect(self, ok, message: str) -> None:
        if not ok:
            self.warnings.append(message)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def require_torch_cuda():
    """Imports torch; exits with status 2 and one line on stderr if CUDA is unusable."""

    def needs(why: str):
        print(f"capture: needs PyTorch with CUDA: {why}", file=sys.stderr)
        sys.exit(EXIT_NO_TORCH_CUDA)

    try:
        import torch
    except Exception as e:  # ImportError, or OSError from a broken CUDA install
        needs(f"import torch failed ({_one_line(e)}) under {sys.executable}")
    try:
        available = torch.cuda.is_available()
    except Exception as e:
        needs(f"torch.cuda.is_available() raised {_one_line(e)}")
    if not available:
        needs(
            f"torch {torch.__version__} (built with CUDA {torch.version.cuda}) "
            "reports torch.cuda.is_available() == False"
        )
    return torch


def prepare_env(spec: Spec) -> None:
    """Sets the allocator environment; must run before torch is imported."""
    for var in ALLOC_CONF_VARS:
        os.environ.pop(var, None)
    os.environ.update(dict(spec.env))


def capture_protocol5(ctx: Context) -> None:
    """Re-pickles steps.pickle.gz with protocol 5; the sidecar is steps' with the protocol changed.

    Loading with the refusing Unpickler and dumping again keeps every shared
    object shared (pickle memoizes by identity), so the file has the memo
    structure of the original and differs only in the protocol.
    """
    src_gz = ctx.out_dir / "steps.pickle.gz"
    src_json = ctx.out_dir / "steps.json"
    if not (src_gz.exists() and src_json.exists()):
        ctx.require(False, f"needs {src_gz} and {src_json}: run the steps capture first")
        return
    snapshot = snapshot_io.load_snapshot(src_gz)
    with open(ctx.raw_path, "wb") as f:
        pickle.dump(snapshot, f, protocol=5)
    ctx.require(
        snapshot_io.load_snapshot(ctx.raw_path) == snapshot,
        "the protocol-5 pickle does not load back to the same value",
    )
    protocol = snapshot_io.pickle_protocol(ctx.raw_path)
    ctx.require(protocol == 5, f"re-pickled file has protocol {protocol}")
    size = snapshot_io.gzip_file(ctx.raw_path, ctx.gz_path)
    ctx.raw_path.unlink()

    with open(src_json, encoding="utf-8") as f:
        source = json.load(f)
    sidecar = dict(source)
    sidecar.update(
        capture="protocol5",
        python_version=platform.python_version(),
        pickle_protocol=protocol,
        settings={
            "source": "steps.pickle.gz",
            "source_pickle_protocol": source.get("pickle_protocol"),
            "source_python_version": source.get("python_version"),
            "how": "loaded with an Unpickler that refuses globals, then "
            f"pickle.dump(snapshot, f, protocol=5) under Python {platform.python_version()}; "
            "same content as steps.pickle.gz, so memsnap's output must match it",
            "source_settings": source.get("settings"),
        },
    )
    snapshot_io.write_json(ctx.json_path, sidecar)
    ctx.expect(size <= snapshot_io.SIZE_BUDGET_BYTES, f"{ctx.gz_path.name} is over 5 MiB")


def run_capture(spec: Spec, out_dir: Path) -> int:
    prepare_env(spec)
    if spec.needs_torch:
        require_torch_cuda()
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = Context(spec.name, out_dir.resolve())
    for stale in (ctx.gz_path, ctx.json_path, ctx.raw_path):
        stale.unlink(missing_ok=True)

    start = time.monotonic()
    try:
        if spec.needs_torch:
            import captures  # imports torch and workload

            getattr(captures, spec.name)(ctx)
        else:
            globals()[f"capture_{spec.name}"](ctx)
    finally:
        ctx.raw_path.unlink(missing_ok=True)
    seconds = time.monotonic() - start

    for message in ctx.warnings:
        print(f"capture {spec.name}: warning: {message}", file=sys.stderr)
    for message in ctx.failures:
        print(f"capture {spec.name}: FAILED: {message}", file=sys.stderr)
    if ctx.gz_path.exists():
        print(
            f"capture {spec.name}: wrote {ctx.gz_path} ({ctx.gz_path.stat().st_size} bytes)"
            f" and {ctx.json_path.name} in {seconds:.1f} s"
        )
    return EXIT_FAILED if ctx.failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Record one CUDA memory snapshot for memsnap's test data."
    )
    parser.add_argument("--capture", choices=list(BY_NAME), help="which capture to run")
    parser.add_argument("--out", type=Path, help="output directory")
    parser.add_argument("--list", action="store_true", help="list the captures and exit")
    parser.add_argument(
        "--check", action="store_true",
        help="exit 0 if PyTorch with CUDA is usable here, else 2 with one line on stderr",
    )
    args = parser.parse_args(argv)

    if args.list:
        for spec in CAPTURES:
            print(f"{spec.name:14} {spec.doc}")
        return 0
    if args.check:
        torch = require_torch_cuda()
        print(
            f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"{torch.cuda.get_device_name(0)}, Python {platform.python_version()}"
        )
        return 0
    if not args.capture or args.out is None:
        parser.error("--capture NAME and --out DIR are required (or --list / --check)")
    return run_capture(BY_NAME[args.capture], args.out)


if __name__ == "__main__":
    sys.exit(main())
