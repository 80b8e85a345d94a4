#!/usr/bin/env python3
"""The installed package works for someone else's project.

Installs the build tree into a temporary prefix (`cmake --install`), builds
tests/consumer against it with find_package(memsnap), runs the program on the
bundled example and checks its numbers against `memsnap parse --json` from the
same prefix. The consumer links memsnap::core alone and is configured with
pkg-config, toml++, pugixml and xxHash out of reach
(CMAKE_DISABLE_FIND_PACKAGE_PkgConfig), so the package must not need the
reports' dependencies for it; then a configure that asks for the `reports`
component must find them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(REPO, "examples", "training_steps.pickle.gz")


def run(cmd, **kwargs):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kwargs)


def test_a_consumer_of_the_installed_package_gets_parse_numbers(request):
    build_dir = request.config.getoption("--build-dir")
    cmake = request.config.getoption("--cmake")
    assert build_dir, "--build-dir: memsnap's build directory is required"
    work = tempfile.mkdtemp(prefix="memsnap_consumer_")
    try:
        prefix = os.path.join(work, "prefix")
        run([cmake, "--install", build_dir, "--prefix", prefix], stdout=subprocess.DEVNULL)
        headers = sorted(os.listdir(os.path.join(prefix, "include", "memsnap")))
        print("installed headers: " + " ".join(headers))
        build = os.path.join(work, "build")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        run([cmake, "-S", HERE, "-B", build, *generator, f"-DCMAKE_PREFIX_PATH={prefix}",
             "-DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=TRUE"], stdout=subprocess.DEVNULL)
        run([cmake, "--build", build], stdout=subprocess.DEVNULL)
        out = subprocess.run([os.path.join(build, "consumer"), EXAMPLE], check=True,
                             capture_output=True, text=True).stdout
        got = dict(line.split(" ", 1) for line in out.strip().splitlines())
        parsed = json.loads(subprocess.run([os.path.join(prefix, "bin", "memsnap"), "parse", "--json", EXAMPLE],
                                           check=True, capture_output=True, text=True).stdout)
        unmatched = parsed["unmatched_frees"]["count"]
        expected = {
            "events": str(parsed["device_traces"]["event_count"]),
            "allocs": str(parsed["replay"]["alloc_count"]),
            "frees": str(parsed["replay"]["free_count"] - unmatched),
            "unmatched": str(unmatched),
            "peak_delta": str(parsed["replay"]["peak_delta"]),
        }
        reports = os.path.join(work, "build-reports")
        run([cmake, "-S", HERE, "-B", reports, *generator, f"-DCMAKE_PREFIX_PATH={prefix}",
             "-DCONSUMER_WANTS_REPORTS=ON"], stdout=subprocess.DEVNULL)
        failed = [f"{k}: consumer {got.get(k)} != parse {v}" for k, v in expected.items() if got.get(k) != v]
        print(f"consumer of the installed package: {len(expected)} numbers checked, {len(failed)} wrong")
        assert not failed, "\n".join(failed)
    finally:
        shutil.rmtree(work)
