#!/usr/bin/env python3
"""The static executable of `make dist` (--memsnap) needs nothing of the
machine it runs on: no program interpreter and no shared library, and it
reads a snapshot, writes the plot page and serves the page from an empty
root (only itself and the input in it) with an empty environment, giving
the same report as the build's own binary (--reference-memsnap)."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.parse

import pytest

import isolation
import testlib

EXAMPLE = os.path.join(testlib.REPO, "examples", "training_steps.pickle.gz")


@pytest.fixture(scope="module")
def memsnap(request):
    """--memsnap: the static executable; skipped (77) until `make dist` wrote it."""
    path = os.path.abspath(request.config.getoption("--memsnap") or "")
    if not os.path.isfile(path):
        testlib.skip_absent(f"the static executable {path} (make dist writes it)")
    return path


@pytest.fixture(scope="module")
def root(memsnap):
    with tempfile.TemporaryDirectory(prefix="memsnap_root_") as folder:
        shutil.copy2(memsnap, os.path.join(folder, "memsnap"))
        shutil.copy2(EXAMPLE, os.path.join(folder, "example.pickle.gz"))
        yield folder


def readelf(memsnap, flag):
    return subprocess.run(["readelf", flag, "-W", memsnap], capture_output=True, text=True,
                          check=True).stdout


def test_it_has_no_interpreter_and_no_dynamic_section(memsnap):
    assert "INTERP" not in readelf(memsnap, "-l"), "a program interpreter: dynamically linked"
    assert "NEEDED" not in readelf(memsnap, "-d"), readelf(memsnap, "-d")


def test_it_reads_a_snapshot_in_an_empty_root(root, request):
    process = isolation.in_empty_root(root, ["/memsnap", "example.pickle.gz"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    reference = request.config.getoption("--reference-memsnap")
    if reference:
        expected = subprocess.run([os.path.abspath(reference), "example.pickle.gz"], cwd=root,
                                  capture_output=True, text=True, check=True).stdout
        assert out == expected
    else:
        assert "example.pickle.gz" in out and "peak" in out.lower()


def test_it_writes_the_plot_page_in_an_empty_root(root):
    process = isolation.in_empty_root(root, ["/memsnap", "plot", "/example.pickle.gz", "-o", "/page.html"],
                                      stderr=subprocess.PIPE, text=True)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    with open(os.path.join(root, "page.html"), encoding="utf-8") as page:
        html = page.read()
    assert "uPlot" in html and "<script" in html and "http://" not in html.split("<script", 1)[0]


def test_it_serves_from_an_empty_root(root):
    process = isolation.in_empty_root(root, ["/memsnap", "serve", "/example.pickle.gz", "--port", "0"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:"), process.stderr.read() if not line else line
        url = urllib.parse.urlsplit(line)
        token = urllib.parse.parse_qs(url.query)["token"][0]
        connection = http.client.HTTPConnection("127.0.0.1", url.port, timeout=30)
        connection.request("GET", "/api/files?token=" + token)
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200, body
        assert "example.pickle.gz" in json.dumps(json.loads(body))
        connection.request("GET", "/api/files")
        refused = connection.getresponse()
        refused.read()
        assert refused.status in (401, 403), "a request without the token was answered"
        connection.close()
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0, process.stderr.read()
