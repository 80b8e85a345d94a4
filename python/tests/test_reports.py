"""Every report dict equals the CLI's --json document (same file, same options), or,
where the CLI refuses, the API raises with the CLI's message."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, List

import pytest

import memsnap
from conftest import EXAMPLE_A, EXAMPLE_B, cli_json, loaded, raises_code


def same_as_cli(call: Callable[[], Any], args: List[str]) -> None:
    expected, message = cli_json(*args)
    if expected is None:
        with pytest.raises(ValueError) as raised:  # SnapshotError is a ValueError
            call()
        # The words are the point here: one message, whichever front end.
        assert str(raised.value) == message
        assert raised.value.code in memsnap.error_codes()
    else:
        assert call() == expected


REPORTS = {
    "explain": (lambda s: s.explain(), ["explain"]),
    "explain_top": (lambda s: s.explain(top=2), ["explain", "--top", "2"]),
    "parse": (lambda s: s.parse(), ["parse"]),
    "parse_category": (
        lambda s: s.with_keys(group_by="category").parse(top=4),
        ["parse", "--group-by", "category", "--top", "4"],
    ),
    "parse_reference_depth2": (
        lambda s: s.with_keys(keys="reference", frame_depth=2).parse(),
        ["parse", "--keys", "reference", "--frame-depth", "2"],
    ),
    "oom": (lambda s: s.oom(), ["oom"]),
    "oom_peak": (lambda s: s.oom("peak", window=0.5), ["oom", "--at", "peak", "--window", "0.5"]),
    "segments": (lambda s: s.segments(), ["segments"]),
    "segments_time": (lambda s: s.segments(time=0.01, top=3), ["segments", "--time", "0.01", "--top", "3"]),
    "replay_to_time": (lambda s: s.replay_to_time(0.05), ["replay-to-time", "--time", "0.05"]),
    "all_steps": (lambda s: s.all_steps(), ["replay-step", "--all-steps"]),
    "replay_step": (lambda s: s.replay_step(1, top=3), ["replay-step", "--step", "1", "--top", "3"]),
    "streams": (lambda s: s.streams(), ["streams"]),
    "streams_top": (lambda s: s.streams(top=1), ["streams", "--top", "1"]),
}


@pytest.mark.parametrize("report", sorted(REPORTS))
def test_report_equals_cli(any_file: Path, report: str) -> None:
    call, args = REPORTS[report]
    path = str(any_file)
    snapshot = loaded(path)
    command, *flags = args
    json_flag = [] if command == "summarize" else ["--json"]
    if report == "all_steps" and snapshot._core.step_count(snapshot._device) == 0:
        # The CLI refuses (no steps to list); the API says so and lists none.
        expected, message = cli_json(command, path, *flags, *json_flag)
        assert expected is None and "no ProfilerStep annotations" in message
        with pytest.warns(memsnap.MemsnapWarning, match="no ProfilerStep annotations"):
            assert snapshot.all_steps() == []
        return
    same_as_cli(lambda: call(snapshot), [command, path, *flags, *json_flag])


def test_summarize_equals_cli(any_file: Path) -> None:
    path = str(any_file)
    same_as_cli(lambda: loaded(path).summarize(), ["summarize", path, "--json"])


def test_device_option_equals_cli() -> None:
    snapshot = memsnap.load(str(EXAMPLE_A), device=0)
    assert snapshot.device == 0
    same_as_cli(snapshot.explain, ["explain", str(EXAMPLE_A), "--device", "0", "--json"])
    with raises_code("unknown_device", memsnap.SnapshotError) as raised:
        memsnap.load(str(EXAMPLE_A), device=7)
    _, message = cli_json("explain", str(EXAMPLE_A), "--device", "7", "--json")
    assert str(raised.value) == message  # the CLI's words


def test_compare_equals_cli() -> None:
    a, b = str(EXAMPLE_A), str(EXAMPLE_B)
    expected, _ = cli_json("compare", a, b, "--json")
    assert memsnap.compare(a, b) == expected
    assert memsnap.compare(memsnap.load(a), memsnap.load(b)) == expected
    expected_step, _ = cli_json("compare", a, b, "--step", "2", "--top", "4", "--json")
    assert memsnap.compare(a, b, step=2, top=4) == expected_step


def test_compare_folders_equals_cli(tmp_path: Path) -> None:
    for side, source in (("a", EXAMPLE_A), ("b", EXAMPLE_B)):
        (tmp_path / side).mkdir()
        for rank in (0, 1):
            (tmp_path / side / f"rank{rank}.pickle.gz").symlink_to(source)
    expected, _ = cli_json("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    assert memsnap.compare(tmp_path / "a", tmp_path / "b") == expected


def test_ranks_equals_cli(tmp_path: Path) -> None:
    for rank, source in enumerate((EXAMPLE_A, EXAMPLE_B, EXAMPLE_A)):
        (tmp_path / f"rank{rank}.pickle.gz").symlink_to(source)
    expected, _ = cli_json("ranks", str(tmp_path), "--json")
    assert memsnap.ranks(tmp_path) == expected
    expected_one, _ = cli_json("ranks", str(tmp_path), "--jobs", "1", "--json")
    assert memsnap.ranks([tmp_path], jobs=1) == expected_one


def test_ranks_and_run_folders_run_in_the_package_not_the_command_line(tmp_path: Path) -> None:
    # Two files with one rank: a warning, the report still given.
    (tmp_path / "rank3.pickle.gz").symlink_to(EXAMPLE_A)
    (tmp_path / "snapshot_3.pickle.gz").symlink_to(EXAMPLE_B)
    with pytest.warns(memsnap.MemsnapWarning, match="both have rank 3"):
        report = memsnap.ranks(tmp_path)
    assert len(report["ranks"]) == 2
    # A file that cannot be read: SnapshotError after the others, with its kind.
    (tmp_path / "rank9.pickle").write_bytes(b"not a pickle")
    with raises_code("files_unread", memsnap.SnapshotError) as raised:
        with pytest.warns(memsnap.MemsnapWarning):
            memsnap.ranks(tmp_path)
    assert raised.value.kind == "input"
    # Threads at once (the pool of each call is its own): every answer the same.
    import concurrent.futures
    (tmp_path / "rank9.pickle").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", memsnap.MemsnapWarning)
        alone = memsnap.ranks(tmp_path, jobs=1)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: memsnap.ranks(tmp_path, jobs=2), range(8)))
    assert all(answer == alone for answer in answers)
    # The package's own code path: no command line inside.
    source = Path(memsnap.__file__).with_name("_api.py").read_text()
    assert "run_captured" not in source and not hasattr(memsnap._core, "run_captured")


def test_check_equals_cli_and_says_whether_it_passed() -> None:
    a, b = str(EXAMPLE_A), str(EXAMPLE_B)
    failed = memsnap.check(b, max_peak="1GiB", no_oom=True)
    expected, _ = cli_json("check", b, "--max-peak", "1GiB", "--no-oom", "--format", "json")
    assert failed.passed is False and failed.report == expected
    passed = memsnap.check(b, baseline=a, max_growth="20%")
    expected, _ = cli_json("check", b, "--baseline", a, "--max-growth", "20%", "--format", "json")
    assert passed.passed is True and passed.report == expected
    category = memsnap.check(a, max_category={"activation": "100GiB"})
    assert category.passed is True


def test_check_of_folders_and_budgets_equals_cli(tmp_path: Path) -> None:
    for side, source in (("base", EXAMPLE_A), ("run", EXAMPLE_B)):
        (tmp_path / side).mkdir()
        for rank in (0, 1):
            (tmp_path / side / f"rank{rank}.pickle.gz").symlink_to(source)
    run, base = str(tmp_path / "run"), str(tmp_path / "base")
    expected, _ = cli_json("check", run, "--baseline", base, "--max-growth", "1%", "--format", "json")
    got = memsnap.check(run, baseline=base, max_growth="1%")
    assert got.report == expected and got.passed is False
    budget = tmp_path / "budget.toml"
    budget.write_text('max_peak = "100GiB"\nmax_growth = "1%"\n')
    # A keyword wins over the budget's key, as a flag does.
    expected, _ = cli_json("check", run, "--baseline", base, "--budget", str(budget),
                           "--max-growth", "90%", "--format", "json")
    got = memsnap.check(run, baseline=base, budget=budget, max_growth="90%")
    assert got.report == expected and got.passed is True
    with pytest.raises(TypeError, match="max_peak must be a size"):
        memsnap.check(run, max_peak=True)
    with raises_code("bad_parameter"):  # 'activaton' is not a category
        memsnap.check(run, max_category={"activaton": "1GiB"})


def test_check_fails_what_a_file_cannot_measure_unless_allowed(tmp_path) -> None:
    # 26 segments no reader can use: the reserved peak would read 0 B.
    import pickle
    with open(EXAMPLE_A, "rb") as f:
        data = pickle.loads(__import__("gzip").decompress(f.read()))
    data["segments"] = [{"device": 0, "address": "x", "total_size": -5}] * 26
    path = tmp_path / "bad_segments.pickle"
    path.write_bytes(pickle.dumps(data))
    failed = memsnap.check(str(path), max_reserved="1TiB")
    reserved = failed.report["limits"][0]
    assert failed.passed is False and reserved["measurable"] is False and reserved["status"] == "fail"
    assert any("malformed segments" in w for w in failed.report["warnings"])
    allowed = memsnap.check(str(path), max_reserved="1TiB", allow_unmeasured=True)
    assert allowed.passed is True and allowed.report["limits"][0]["status"] == "not_applicable"


def test_usage_errors_carry_the_cli_message() -> None:
    with pytest.raises(ValueError) as raised:
        memsnap.check(str(EXAMPLE_A), max_peak="lots")
    _, message = cli_json("check", str(EXAMPLE_A), "--max-peak", "lots", "--format", "json")
    # One message, each front end spelling the parameter its own way.
    assert str(raised.value) == message.replace("--max-peak", "max_peak")
    assert type(raised.value) is ValueError  # usage, not SnapshotError
    assert raised.value.code == "bad_parameter"
    with pytest.raises(TypeError, match="unexpected keyword arguments: no_such"):
        memsnap.ranks(str(EXAMPLE_A), no_such=1)
    with raises_code("bad_parameter"):  # steps must be auto, profiler, ...
        memsnap.ranks(str(EXAMPLE_A), steps="sometimes")


def test_report_methods_come_from_the_report_table() -> None:
    """Each entry of the table is a method; its docstring is the table's description
    and parameters (what `memsnap NAME --help` says), so the two cannot drift."""
    table = memsnap._core.report_table()
    assert {entry["name"] for entry in table} >= {"explain", "parse", "oom", "segments",
                                                  "streams", "replay-to-time", "replay-step"}
    for entry in table:
        method = getattr(memsnap.Snapshot, entry["name"].replace("-", "_"))
        doc = " ".join(method.__doc__.split())  # wrapped to 88 columns
        assert entry["description"] in doc, entry["name"]
        for parameter in entry["parameters"]:
            assert f"{parameter['id']}: {parameter['help']}" in doc, parameter["id"]
        assert f"tests/schema/{entry['schema']}.schema.json" in doc
        assert all(len(line) <= 88 for line in method.__doc__.splitlines()[:6])


def test_whatif_takes_settings_as_a_dict_or_a_text() -> None:
    snapshot = memsnap.load(EXAMPLE_A)
    as_dict = snapshot.whatif(settings={"expandable_segments": True, "max_split_size_mb": 64})
    as_text = snapshot.whatif("expandable_segments:True,max_split_size_mb:64")
    assert as_dict == as_text
    assert [run["setting"] for run in as_dict["runs"]] == [
        "the file's own", "expandable_segments:True,max_split_size_mb:64"]
    assert len(as_dict["timeline"]["runs"]) == 2
    assert snapshot.whatif(check=True)["segments_reserved"]["recorded"] > 0
    table = snapshot.whatif(capacity="64GiB")
    assert table["capacity"] == 64 << 30 and table["capacity_from"] == "given"
    with raises_code("bad_parameter"):  # a setting the model does not know
        snapshot.whatif(settings={"backend": "cudaMallocAsync"})


def test_report_parameters_are_checked_by_the_table() -> None:
    snapshot = memsnap.load(EXAMPLE_A)
    with pytest.raises(TypeError, match="time must be a number of seconds, not str"):
        snapshot.replay_to_time("soon")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="top must be a whole number, not float"):
        snapshot.streams(top=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="step must be a whole number, not bool"):
        snapshot.replay_step(True)
    with raises_code("bad_parameter"):
        snapshot.oom(window=0)
    with raises_code("bad_parameter"):
        snapshot.oom(capacity="lots")
    with pytest.raises(TypeError, match="capacity must be a number of bytes"):
        snapshot.oom(capacity=True)
    with raises_code("bad_parameter"):
        snapshot.oom(at="top")
    with raises_code("bad_parameter"):
        snapshot.replay_step(1 << 70)
    # Past the end of the trace: clamped, and warned as the CLI notes it.
    with pytest.warns(memsnap.MemsnapWarning, match="time 1000 is past the end of the trace"):
        report = snapshot.replay_to_time(1000.0)
    assert report["clamped"] is True
    assert snapshot.oom(capacity="80GiB") == snapshot.oom(capacity=80 << 30)
