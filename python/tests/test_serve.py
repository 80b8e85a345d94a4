"""memsnap.serve: the server of `memsnap serve` on a thread of this process.

It answers what the command's server answers (the files, a report equal to
the Snapshot's own), needs its token, and stops: after stop() (or a with
block) the port no longer answers. Loopback traffic only; skips where the
wheel was built without the server."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

import memsnap
from memsnap import _core

from conftest import EXAMPLE_A, EXAMPLE_B, raises_code

pytestmark = pytest.mark.skipif(
    not _core.server_available(), reason="this wheel was built without the server"
)


def get(url: str, path: str, token: bool = True):
    parts = urllib.parse.urlsplit(url)
    query = "token=" + urllib.parse.parse_qs(parts.query)["token"][0] if token else ""
    sep = "&" if "?" in path else "?"
    address = f"{parts.scheme}://{parts.netloc}{path}{sep if query else ''}{query}"
    with urllib.request.urlopen(address, timeout=30) as response:
        return json.loads(response.read())


def test_serve_answers_the_files_and_the_reports():
    a = memsnap.load(EXAMPLE_A)
    b = memsnap.load(EXAMPLE_B)
    with memsnap.serve([a, b], labels=["1x", "1.5x"]) as server:
        assert server.running
        assert server.url.startswith("http://127.0.0.1:") and "token=" in server.url
        files = get(server.url, "/api/files")
        assert [f["label"] for f in files] == ["1x", "1.5x"]
        answer = get(server.url, "/api/report/segments?file=1")
        assert answer["report"] == b.segments()
        line = get(server.url, "/api/line?file=0&axis=event&width=50")
        assert max(line["high"]) == a.parse()["replay"]["absolute_peak"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(server.url, "/api/files", token=False)
        assert refused.value.code == 401
        assert "<iframe" in server._repr_html_() and server.url in server._repr_html_().replace("&amp;", "&")
    assert not server.running
    with pytest.raises(urllib.error.URLError):
        get(server.url, "/api/files")


def test_snapshot_serve_and_its_refusals():
    snap = memsnap.load(EXAMPLE_A)
    server = snap.serve(label="run")
    try:
        assert get(server.url, "/api/files")[0]["label"] == "run"
    finally:
        server.stop()
    server.stop()  # a second stop is nothing
    with raises_code("bad_parameter"):  # another host needs a token
        memsnap.serve(snap, host="0.0.0.0")
    with raises_code("bad_parameter"):
        memsnap.serve(snap, port=70000)
    with raises_code("bad_parameter"):  # one label per snapshot
        memsnap.serve(snap, labels=["a", "b"])
