"""Tables: numpy columns over the core's memory, pandas frames that reproduce the reports."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np

import memsnap
from conftest import EXAMPLE_A, loaded


def test_pandas_groupby_reproduces_parse_top_sources(any_file: Path) -> None:
    snapshot = loaded(str(any_file))
    report = snapshot.parse(top=1000)
    frame = snapshot.events().to_pandas()
    allocs = frame[frame.action == "alloc"]
    by_source = allocs.groupby("source", observed=True)["size"].agg(["sum", "count"])
    expected = {row["source"]: (row["throughput_bytes"], row["alloc_count"]) for row in report["top_sources"]}
    got = {name: (int(row["sum"]), int(row["count"])) for name, row in by_source.iterrows()}
    assert got == expected


def test_columns_are_read_only_views_that_keep_the_snapshot_alive() -> None:
    snapshot = memsnap.load(str(EXAMPLE_A))
    events = snapshot.events()
    sizes = events["size"]
    copy = np.array(sizes)
    assert sizes.dtype == np.int64 and not sizes.flags.writeable and not sizes.flags.owndata
    del snapshot, events
    gc.collect()
    assert np.array_equal(sizes, copy)  # the model is still there


def test_event_columns_match_the_report_counts() -> None:
    snapshot = memsnap.load(str(EXAMPLE_A))
    report = snapshot.parse()
    events = snapshot.events()
    assert len(events) == report["device_traces"]["event_count"]
    actions = events.decoded("action")
    for action, count in report["device_traces"]["actions"].items():
        assert (actions == action).sum() == count
    assert set(events.columns) == {
        "action", "address", "size", "stream", "time_us", "time_s", "stack", "source", "category"
    }
    assert events.labels("category")[0] == "parameter"


def test_segment_and_block_tables_add_up(any_file: Path) -> None:
    snapshot = loaded(str(any_file))
    segments = snapshot.segment_table
    blocks = snapshot.block_table
    assert int(segments["block_count"].sum()) == len(blocks)
    for column in ("segment", "address", "size", "requested_size", "state", "stack"):
        assert column in blocks
    if len(blocks):
        # every block lies inside its segment
        seg = blocks["segment"]
        start = segments["address"][seg]
        end = start + segments["total_size"][seg]
        assert np.all((blocks["address"] >= start) & (blocks["address"] + blocks["size"] <= end))


def test_stacks_point_into_frames(any_file: Path) -> None:
    snapshot = loaded(str(any_file))
    offsets, frames = snapshot.stacks
    table = snapshot.frames
    assert offsets[0] == 0 and offsets[-1] == len(frames)
    assert np.all(np.diff(offsets.astype(np.int64)) >= 0)
    assert len(frames) == 0 or int(frames.max()) < len(table)
    stack_ids = snapshot.events()["stack"]
    assert len(stack_ids) == 0 or int(stack_ids.max()) < len(offsets) - 1


def test_stack_helper_names_frames() -> None:
    snapshot = memsnap.load(str(EXAMPLE_A))
    stack_id = int(snapshot.events()["stack"][1])
    frames = snapshot.stack(stack_id)
    assert frames and {"name", "filename", "line"} <= set(frames[0])


def test_with_keys_changes_the_source_column() -> None:
    snapshot = memsnap.load(str(EXAMPLE_A)).with_keys(group_by="file")
    labels = snapshot.events().labels("source")
    assert "train.py" in labels
    assert snapshot.parse()["top_sources"][0]["source"] in labels


def _entry(action: str, addr: int, size: int, time_us: int, frames: list) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time_us,
            "frames": frames}


FORWARD = [{"name": "forward", "filename": "/home/me/model.py", "line": 12}]
FREED_BY = [{"name": "step", "filename": "/home/me/train.py", "line": 40}]


def test_sizes_and_addresses_are_signed_and_time_s_is_seconds_from_the_first_entry() -> None:
    snapshot = memsnap.from_dict({
        "segments": [],
        "device_traces": [[
            _entry("alloc", 0x7F0000000000, 4096, 1_000_000, FORWARD),
            _entry("free_requested", 0x7F0000000000, 4096, 1_500_000, FREED_BY),
            _entry("free_completed", 0x7F0000000000, 4096, 3_250_000, FREED_BY),
        ]],
    })
    frame = snapshot.events().to_pandas()
    assert frame["size"].dtype == np.int64 and frame["address"].dtype == np.int64
    assert list(-frame["size"]) == [-4096] * 3
    assert list(frame["time_s"]) == [0.0, 0.5, 2.25]
    # A free is named by the allocation it frees, never by the freeing code's line.
    assert list(frame["source"].astype(str)) == ["forward@model.py:12"] * 3


def test_a_file_may_name_more_actions_than_a_byte_holds() -> None:
    """Issue 40, finding 2: 300 actions of the file's own (an allocator this
    memsnap does not know) each keep their name, as `events --json` does."""
    own = ["custom_action_%03d" % k for k in range(300)]
    entries = [_entry("alloc", 0x1000, 512, 1, FORWARD)]
    entries += [_entry(name, 0x1000 + 512 * k, 512, 2 + k, FORWARD) for k, name in enumerate(own)]
    snapshot = memsnap.from_dict({"segments": [], "device_traces": [entries]})
    assert list(snapshot.events().decoded("action")) == ["alloc"] + own


def test_time_s_is_nan_without_a_time() -> None:
    snapshot = memsnap.from_dict({"segments": [], "device_traces": [[
        _entry("alloc", 0x1000, 512, 0, FORWARD)]]})
    assert np.isnan(snapshot.events()["time_s"][0])


def test_stack_starts_at_the_code_that_asked_for_the_memory() -> None:
    cpp = [
        {"name": "torch::unwind::unwind()", "filename": "??", "line": 0},
        {"name": "torch::CapturedTraceback::gather(bool, bool, bool)", "filename": "??", "line": 0},
        {"name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)",
         "filename": "??", "line": 0},
        {"name": "at::native::mm_out(...)", "filename": "??", "line": 0},
    ] + FORWARD
    snapshot = memsnap.from_dict({"segments": [], "device_traces": [[
        _entry("alloc", 0x1000, 512, 10, cpp)]]})
    stack_id = int(snapshot.events()["stack"][0])
    assert [f["name"] for f in snapshot.stack(stack_id)] == ["at::native::mm_out(...)", "forward"]
    assert len(snapshot.stack(stack_id, machinery=True)) == 5
