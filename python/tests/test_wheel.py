"""The installed wheel carries its C++ libraries: nothing it loads comes from a Debian -dev
package, only the manylinux allowlist (glibc, libstdc++, libgcc_s, zlib) and its own copies."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

import memsnap
from conftest import ROOT

# The libraries every manylinux policy lets a wheel take from the system.
ALLOWLIST = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libgcc_s.so.1",
    "libstdc++.so.6", "libz.so.1", "libutil.so.1", "libresolv.so.2", "linux-vdso.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}


def test_extension_loads_only_the_allowlist_and_its_own_libraries() -> None:
    package = Path(memsnap.__file__).parent
    (extension,) = package.glob("_core*.so")
    own = os.path.realpath(package.parent / "memsnap.libs")
    listing = subprocess.run(["ldd", str(extension)], capture_output=True, text=True, check=True)
    outside = []
    for line in listing.stdout.splitlines():
        name, _, where = line.strip().partition(" => ")
        name = name.split()[0]
        path = os.path.realpath(where.split(" (")[0].strip()) if where else ""
        if name in ALLOWLIST or os.path.basename(name) in ALLOWLIST:
            continue
        if path.startswith(own + os.sep):
            continue
        outside.append(line.strip())
    assert not outside, f"the extension loads libraries from outside the wheel: {outside}"
    assert "not found" not in listing.stdout


def test_wheel_is_tagged_manylinux() -> None:
    dist_info = next(Path(memsnap.__file__).parent.parent.glob("memsnap-*.dist-info"))
    tags = [line for line in (dist_info / "WHEEL").read_text().splitlines() if line.startswith("Tag:")]
    assert tags and all("manylinux_" in tag for tag in tags), tags


def test_sdist_carries_what_the_build_needs() -> None:
    sdists = sorted(Path(os.environ.get("MEMSNAP_SDIST_DIR", ROOT / "build" / "sdist")).glob("memsnap-*.tar.gz"))
    if not sdists:
        pytest.skip("no sdist (make wheel writes build/sdist)")
    with tarfile.open(sdists[-1]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for needed in ("pyproject.toml", "CMakeLists.txt", "python/CMakeLists.txt",
                   "python/src/core_module.cc", "python/memsnap/__init__.py", "src/cli/run.cc",
                   "web/app.js", "node_modules/uplot/dist/uPlot.iife.min.js", "README.md"):
        assert needed in names, needed
    assert not any(name.startswith(("build/", "build-asan/", "fuzz/corpus/")) for name in names)
