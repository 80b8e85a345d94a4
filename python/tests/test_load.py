"""Ways in (paths, bytes, file objects, compressed, dicts) and ways out (errors, refusals)."""

from __future__ import annotations

import gzip
import io
import os
import inspect
import pickle
import re
from pathlib import Path
from typing import Any, Dict

import pytest

import memsnap
from conftest import EXAMPLE_A, raises_code, run_cli

FILE_FIELDS = {"file", "file_size_bytes", "pickle_size_bytes", "compression", "pickle_protocol"}


def without_file_fields(report: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in report.items() if k not in FILE_FIELDS}


def test_bytes_file_objects_and_paths_agree() -> None:
    data = EXAMPLE_A.read_bytes()
    from_path = memsnap.load(EXAMPLE_A).parse()  # a pathlib.Path
    from_bytes = memsnap.load(data).parse()
    with open(EXAMPLE_A, "rb") as file:
        from_file = memsnap.load(file).parse()
    from_plain = memsnap.load(gzip.decompress(data)).parse()
    assert from_bytes["file"] == "<bytes>" and from_file["file"] == str(EXAMPLE_A)
    assert without_file_fields(from_path) == without_file_fields(from_bytes)
    assert without_file_fields(from_file) == without_file_fields(from_path)
    assert without_file_fields(from_plain) == without_file_fields(from_path)
    assert from_plain["compression"] == "none" and from_bytes["compression"] == "gzip"


def test_bytes_that_are_not_read_are_said() -> None:
    """Issue 40, finding 17: bytes after the pickle's STOP, and after the last
    gzip member, are named in one warning, from bytes as from a path."""
    data = EXAMPLE_A.read_bytes()
    clean = memsnap.load(data).parse()
    for appended, said, counts in ((gzip.compress(gzip.decompress(data) + b"tail"),
                                    "4 bytes after the pickle's STOP opcode were not read", (4, 0)),
                                   (data + b"garbage!",
                                    "8 bytes after the last gzip member start no member", (0, 8))):
        report = memsnap.load(appended).parse()
        added = [w for w in report["warnings"] if w not in clean["warnings"]]
        assert len(added) == 1 and said in added[0], report["warnings"]
        anomalies = report["anomalies"]
        assert (anomalies["bytes_after_stop"], anomalies["bytes_after_compressed"]) == counts
        assert report["replay"] == clean["replay"] and report["segments"] == clean["segments"]


def test_zstd_bytes(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("zstd") is None:
        pytest.skip("zstd is not installed")
    plain = tmp_path / "a.pickle"
    plain.write_bytes(gzip.decompress(EXAMPLE_A.read_bytes()))
    subprocess.run(["zstd", "-q", str(plain), "-o", str(tmp_path / "a.pickle.zst")], check=True)
    report = memsnap.load((tmp_path / "a.pickle.zst").read_bytes()).parse()
    assert report["compression"] == "zstd"
    assert without_file_fields(report) == without_file_fields(memsnap.load(plain).parse())


def test_from_dict_equals_load(any_file: Path) -> None:
    try:
        with open(any_file, "rb") as file:
            snapshot_dict = pickle.load(file) if any_file.suffix != ".gz" else None
    except Exception as error:  # a pickle that needs modules this venv lacks (torch)
        pytest.skip(f"CPython's pickle cannot load it here: {error}")
    if snapshot_dict is None:
        snapshot_dict = pickle.loads(gzip.decompress(any_file.read_bytes()))
    loaded = memsnap.load(str(any_file))
    rebuilt = memsnap.from_dict(snapshot_dict)
    assert rebuilt.name == "<dict>"
    assert without_file_fields(rebuilt.parse()) == without_file_fields(loaded.parse())
    # explain's "next commands" name the file; everything else is the file's content
    expected = without_file_fields(loaded.explain())
    got = without_file_fields(rebuilt.explain())
    expected.pop("next"), got.pop("next")
    assert got == expected


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


def test_code_payloads_are_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    snapshot = {"segments": [], "device_traces": [[]], "x": _Payload(str(marker))}
    data = pickle.dumps(snapshot)
    (tmp_path / "evil.pickle").write_bytes(data)
    for attempt in (
        lambda: memsnap.load(data),
        lambda: memsnap.load(tmp_path / "evil.pickle"),
        lambda: memsnap.load(io.BytesIO(data)),
        lambda: memsnap.from_dict(snapshot),
    ):
        with raises_code("refused_opcode", memsnap.SnapshotError) as raised:
            attempt()
        assert raised.value.kind == "input"
    # read as inert placeholders when asked: still nothing runs
    memsnap.load(data, allow_objects=True)
    memsnap.from_dict(snapshot, allow_objects=True)
    assert not marker.exists()


def test_snapshot_error_carries_path_offset_kind(tmp_path: Path) -> None:
    truncated = tmp_path / "cut.pickle"
    truncated.write_bytes(gzip.decompress(EXAMPLE_A.read_bytes())[:5000])
    with pytest.raises(memsnap.SnapshotError) as raised:
        memsnap.load(truncated)
    error = raised.value
    assert isinstance(error, ValueError)
    assert error.path == str(truncated) and error.kind == "input" and error.code == "truncated"
    # The message names the file, as the command line's does.
    assert error.offset is not None and str(error).startswith(f"{truncated}: ")
    with raises_code("not_a_pickle", memsnap.SnapshotError):  # JSON
        memsnap.load(b'{"segments": []}')
    with raises_code("empty_file", memsnap.SnapshotError):
        memsnap.load(b"")


def test_load_reads_a_fifo_once(tmp_path: Path) -> None:
    """Issue 40, finding 13: load() on a FIFO opened it again for its head
    after the core had read it, and waited for a writer forever."""
    import threading

    fifo = tmp_path / "snapshot.fifo"
    os.mkfifo(fifo)
    data = EXAMPLE_A.read_bytes()

    def writer() -> None:
        with open(fifo, "wb") as out:
            out.write(data)

    feeding = threading.Thread(target=writer, daemon=True)
    feeding.start()
    result: Dict[str, Any] = {}
    loading = threading.Thread(target=lambda: result.update(parse=memsnap.load(fifo).parse()),
                               daemon=True)
    loading.start()
    loading.join(timeout=60)
    assert not loading.is_alive(), "load() of a FIFO did not return"
    assert result["parse"]["replay"] == memsnap.load(EXAMPLE_A).parse()["replay"]


def test_error_codes_are_the_cores_one_table() -> None:
    """SnapshotError.code (and the ValueError's) is one of the core's stable codes: unique
    snake_case spellings, each with its meaning; those the package raises itself too."""
    codes = memsnap.error_codes()
    rows = memsnap._core.error_codes()
    assert len(codes) == len(rows) > 0
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) and meaning for code, meaning in codes.items())
    assert {kind for _, kind, _ in rows} <= {"input", "usage", "output", "limit"}
    raised_here = set()
    for module in (memsnap._api, memsnap._errors, memsnap._table):
        raised_here |= set(re.findall(r'code="(\w+)"', inspect.getsource(module)))
    assert raised_here and raised_here <= set(codes), raised_here - set(codes)
    error = memsnap.SnapshotError("f: cut short", path="f", code="truncated")
    assert error.code == "truncated" and error.kind == "input" and str(error) == "f: cut short"


def test_category_rules_are_read_as_the_cli_reads_them(tmp_path: Path) -> None:
    """Issue 40, finding 14: a rules file past 1 MiB was cut at 2^20
    characters and the rule past the cut dropped; it is refused, as the
    command line refuses it, and a missing one raises SnapshotError."""
    snapshot = memsnap.load(EXAMPLE_A)
    big = tmp_path / "rules.txt"
    big.write_text("# padding\n" * 110_000 + "activation frame train\n", encoding="utf-8")
    with raises_code("limit_exceeded", memsnap.SnapshotError):  # larger than 1 MiB
        snapshot.with_keys(category_rules=big)
    status, _, err = run_cli("parse", str(EXAMPLE_A), "--category-rules", str(big))
    assert status == 1 and "larger than 1 MiB" in err
    with raises_code("file_not_found", memsnap.SnapshotError):
        snapshot.with_keys(category_rules=tmp_path / "missing.txt")
    small = tmp_path / "small.txt"
    small.write_text("activation frame train\n", encoding="utf-8")
    assert snapshot.with_keys(category_rules=small).parse()["device"] == snapshot.parse()["device"]


def test_wrong_arguments_are_refused_in_memsnaps_words(tmp_path: Path) -> None:
    """Issue 40, finding 16: every wrong argument is a TypeError or a
    ValueError with memsnap's message (not OverflowError, IndexError,
    AttributeError, RecursionError, or the binding's "incompatible function
    arguments"); a dict that cannot be a snapshot is a SnapshotError."""
    snapshot = memsnap.load(EXAMPLE_A)
    huge = 2**31
    calls = {
        "max_input": lambda: memsnap.load(EXAMPLE_A, max_input="9" * 400),
        "max_input int": lambda: memsnap.load(EXAMPLE_A, max_input=2**70),
        "capacity": lambda: snapshot.whatif(capacity="9" * 400),
        "no snapshot": lambda: memsnap.plot([]),
        "precision_ms": lambda: memsnap.plot([snapshot], precision_ms=float("inf")),
        "max_lifetimes": lambda: memsnap.plot([snapshot], max_lifetimes=2**70),
        "device": lambda: memsnap.load(EXAMPLE_A, device=huge),
        "frame_depth": lambda: snapshot.with_keys(frame_depth=huge),
        "jobs": lambda: memsnap.ranks([str(EXAMPLE_A)], jobs=huge),
        "width": lambda: snapshot.plot().text(width=2**40),
        "time": lambda: snapshot.replay_to_time(float("inf")),
        "window": lambda: snapshot.oom(window=float("inf")),
    }
    for name, call in calls.items():
        with pytest.raises((TypeError, ValueError)) as raised:
            call()
        assert "incompatible function arguments" not in str(raised.value), name
        assert type(raised.value) in (TypeError, ValueError, memsnap.SnapshotError), name
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    for hostile in ({"segments": [lambda: 1]}, {"segments": deep}):
        with raises_code("not_a_snapshot", memsnap.SnapshotError) as raised:
            memsnap.from_dict(hostile)
        assert raised.value.path == "<dict>"


def test_paths_are_never_flags(tmp_path: Path) -> None:
    """Issue 40, finding 15: no path reaches a command line (check() once took
    ['run.pickle', '-o', 'notes.txt'] and overwrote notes.txt; ranks('--help')
    printed help)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("keep", encoding="utf-8")
    with raises_code("bad_parameter"):  # check() takes one run
        memsnap.check([str(EXAMPLE_A), "-o", str(notes)], max_peak="1GiB")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="write_budget"):
        memsnap.check(str(EXAMPLE_A), write_budget=True)  # type: ignore[call-arg]
    with pytest.raises(memsnap.SnapshotError):
        memsnap.ranks("--help")
    assert notes.read_text(encoding="utf-8") == "keep"


def test_usage_errors_are_type_and_value_errors() -> None:
    snapshot = memsnap.load(EXAMPLE_A)
    with pytest.raises(TypeError):
        memsnap.load(12345)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="binary mode"):
        memsnap.load(io.StringIO("text"))
    with pytest.raises(FileNotFoundError):
        memsnap.load("/no/such/file.pickle")
    with raises_code("bad_parameter"):
        snapshot.oom(at=0)
    with raises_code("bad_parameter"):
        snapshot.with_keys(group_by="colour")
    with raises_code("bad_parameter"):
        snapshot.parse(top=-1)
    with raises_code("bad_parameter"):
        snapshot.replay_to_time(-1)
    with raises_code("step_not_found", memsnap.SnapshotError):
        snapshot.replay_step(999)
    with pytest.raises(TypeError):
        memsnap.from_dict("not a dict")  # type: ignore[arg-type]
    with raises_code("bad_parameter"):
        memsnap.load(EXAMPLE_A, max_input="a lot")


def test_max_input_bounds_what_compressed_input_inflates_to() -> None:
    with raises_code("limit_exceeded", memsnap.SnapshotError):
        memsnap.load(EXAMPLE_A.read_bytes(), max_input=4096)


def test_allocator_settings_and_devices() -> None:
    snapshot = memsnap.load(EXAMPLE_A)
    assert snapshot.devices == [0] and snapshot.device == 0
    assert isinstance(snapshot.allocator_settings, dict)
    assert snapshot.file_size == EXAMPLE_A.stat().st_size
    assert snapshot.pickle_size > snapshot.file_size
    assert "device 0" in repr(snapshot)
    with pytest.raises(TypeError):
        memsnap.Snapshot()


def test_typing_files_are_installed() -> None:
    package = Path(memsnap.__file__).parent
    assert (package / "py.typed").exists()
    stub = (package / "_core.pyi").read_text()
    assert "def load_path(" in stub


def test_a_snapshot_that_leaves_devices_out_says_so(tmp_path: Path) -> None:
    import subprocess
    import sys
    import warnings

    from conftest import ROOT, cli_json

    path = tmp_path / "two_devices.pickle"
    subprocess.run(
        [sys.executable, str(ROOT / "tests" / "gen" / "make_snapshot.py"), "--out", str(path),
         "--events", "2000", "--devices", "2"],
        check=True,
    )
    with pytest.warns(memsnap.MemsnapWarning, match=r"also has data on device.*device=N"):
        snapshot = memsnap.load(path)
    expected, _ = cli_json("explain", str(path), "--json")
    assert snapshot.device == expected["device"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a device asked for: nothing to say
        memsnap.load(path, device=1 - snapshot.device)
