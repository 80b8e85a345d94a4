#!/usr/bin/env python3
"""What a fresh clone's configure does without the developer's set-up.

- With memsnap's C++ libraries out of reach, configure fails at once with one
  message naming each missing library and the packages that provide it on
  Debian/Ubuntu, Fedora/RHEL and Homebrew.
- Without node_modules (no npm), configure takes uPlot from the registry at
  the version and SHA-512 that package-lock.json pins (a file:// registry
  here, filled from npm's own cache: no network), and refuses a tarball
  whose digest differs."""
import base64
import glob
import json
import os
import shutil
import subprocess
import tempfile

import pytest

import testlib

REPO = testlib.REPO


def configure(cmake, source, build, *defines):
    return subprocess.run([cmake, "-S", source, "-B", build, "-DBUILD_TESTING=OFF",
                           "-DMEMSNAP_BUILD_TESTS=OFF", *defines],
                          capture_output=True, text=True, timeout=300)


def checkout_without_node_modules(destination):
    """The repository's tracked files (and untracked ones git does not ignore),
    as a fresh clone has them: no node_modules, no build folders."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (item.decode() for item in listed)):
        source = os.path.join(REPO, name)
        if name.startswith("node_modules/") or not os.path.isfile(source):
            continue
        target = os.path.join(destination, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)


def locked_uplot():
    with open(os.path.join(REPO, "package-lock.json"), encoding="utf-8") as lock:
        entry = json.load(lock)["packages"]["node_modules/uplot"]
    return entry["version"], entry["integrity"]


def npm_cached_tarball(integrity):
    """The tarball npm ci fetched, from npm's content-addressed cache, or None."""
    digest = base64.b64decode(integrity.split("-", 1)[1]).hex()
    cache = os.environ.get("npm_config_cache", os.path.expanduser("~/.npm"))
    path = os.path.join(cache, "_cacache", "content-v2", "sha512", digest[:2], digest[2:4], digest[4:])
    return path if os.path.isfile(path) else None


@pytest.fixture(scope="module")
def cmake(request):
    return request.config.getoption("--cmake")


def test_missing_libraries_are_named_for_three_package_managers(cmake):
    with tempfile.TemporaryDirectory(prefix="memsnap_configure_") as build:
        # Every package out of reach, and the prefixes RE2's library is looked for in.
        disabled = [f"-DCMAKE_DISABLE_FIND_PACKAGE_{name}=ON" for name in
                    ("CLI11", "fmt", "nlohmann_json", "absl", "ZLIB", "zstd", "re2", "PkgConfig", "GTest")]
        ran = configure(cmake, REPO, build, "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/usr/local", *disabled,
                        "-DMEMSNAP_HTML_PLOT=OFF")
    assert ran.returncode != 0
    message = ran.stderr
    for line in ("Debian/Ubuntu:  sudo apt-get install", "Fedora/RHEL:    sudo dnf install",
                 "Homebrew:       brew install"):
        assert line in message, message
    for package in ("libfmt-dev", "fmt-devel", "abseil-cpp-devel", "libre2-dev", "re2-devel",
                    "pkgconf-pkg-config"):
        assert package in message, f"{package} not named: {message}"
    assert "CMake Error at CMakeLists.txt" not in message.replace("cmake/memsnapDependencies.cmake", ""), \
        "the first missing library stopped configure before the others were looked for"


def test_uplot_comes_from_the_lock_file_without_npm(cmake):
    version, integrity = locked_uplot()
    cached = npm_cached_tarball(integrity)
    if cached is None:
        testlib.skip_absent(f"uplot {version} in npm's cache (scripts/setup's npm ci puts it there)")
    with tempfile.TemporaryDirectory(prefix="memsnap_fresh_") as work:
        source, registry = os.path.join(work, "src"), os.path.join(work, "registry")
        checkout_without_node_modules(source)
        os.makedirs(os.path.join(registry, "uplot", "-"))
        tarball = os.path.join(registry, "uplot", "-", f"uplot-{version}.tgz")
        shutil.copy2(cached, tarball)
        ran = configure(cmake, source, os.path.join(work, "build"),
                        f"-DMEMSNAP_NPM_REGISTRY=file://{registry}")
        assert ran.returncode == 0, ran.stderr
        fetched = glob.glob(os.path.join(work, "build", "_deps", f"uplot-{version}", "package", "dist",
                                         "uPlot.iife.min.js"))
        assert fetched, ran.stdout
        installed = os.path.join(REPO, "node_modules", "uplot", "dist", "uPlot.iife.min.js")
        if os.path.isfile(installed):
            with open(fetched[0], "rb") as got, open(installed, "rb") as want:
                assert got.read() == want.read(), "not the bytes npm ci installs"

        # The same tarball, one byte changed: refused, and nothing unpacked.
        with open(tarball, "r+b") as handle:
            handle.seek(100)
            byte = handle.read(1)
            handle.seek(100)
            handle.write(bytes([byte[0] ^ 1]))
        refused = configure(cmake, source, os.path.join(work, "build-tampered"),
                            f"-DMEMSNAP_NPM_REGISTRY=file://{registry}")
        assert refused.returncode != 0
        assert "SHA-512 is not package-lock.json's" in refused.stderr, refused.stderr
        assert not os.path.exists(os.path.join(work, "build-tampered", "_deps", f"uplot-{version}", "package"))
