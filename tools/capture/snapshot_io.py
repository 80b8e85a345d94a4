"""Standard-library helpers shared by the capture scripts.

Nothing here imports torch, so the protocol-5 re-pickle and these helpers run
on any Python. Snapshot pickles are loaded with an Unpickler that refuses every
global: a CUDA memory snapshot is plain data (dict, list, tuple, str, int,
float, bool, None), and a file that names a class or function is not one we
want to run, nor one memsnap would read without complaint.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

MiB = 1 << 20
GiB = 1 << 30
SIZE_BUDGET_BYTES = 5 * MiB  # each committed capture should stay below this

_PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")


class RefusingUnpickler(pickle.Unpickler):
    """Builds plain values only; any global or persistent id is an error."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"snapshot names the global {module}.{name}; refusing to load it"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError(
            "snapshot uses a persistent id; refusing to load it"
        )


def _open(path: Path):
    """Opens a pickle, gzip-compressed or not, for binary reading."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def load_snapshot(path: Path) -> Any:
    with _open(path) as f:
        return RefusingUnpickler(f).load()


def pickle_protocol(path: Path) -> int | None:
    """The protocol named by the leading PROTO opcode; None for protocols 0-1."""
    with _open(path) as f:
        head = f.read(2)
    if len(head) == 2 and head[0] == 0x80:
        return head[1]
    return None


def gzip_file(src: Path, dst: Path) -> int:
    """Compresses src into dst (mtime 0, so equal input gives equal bytes)."""
    tmp = dst.with_name(dst.name + ".tmp")
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        with gzip.GzipFile(
            filename="", mode="wb", fileobj=fout, compresslevel=9, mtime=0
        ) as gz:
            shutil.copyfileobj(fin, gz, MiB)
    os.replace(tmp, dst)
    return dst.stat().st_size


def write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, default=repr)
        f.write("\n")
    os.replace(tmp, path)


def _jsonable(value: Any) -> Any:
    """Copies a small plain-data value into something json.dump accepts."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _frame_lists(snapshot: dict, trace: list) -> list:
    lists = [e.get("frames") for e in trace if isinstance(e, dict)]
    for seg in snapshot.get("segments") or ():
        if not isinstance(seg, dict):
            continue
        lists.append(seg.get("frames"))
        for block in seg.get("blocks") or ():
            if isinstance(block, dict):
                lists.append(block.get("frames"))
    return [fl for fl in lists if isinstance(fl, list)]


def summarize(snapshot: Any, device: int = 0, max_entries: int | None = None) -> dict:
    """Facts about one loaded snapshot that a test can check against memsnap.

    Sizes are bytes. Segment and trace facts are for `device` only;
    annotations are counted over all devices.
    """
    if isinstance(snapshot, list):  # torch.cuda.memory_snapshot(): segments only
        snapshot = {"segments": snapshot}
    if not isinstance(snapshot, dict):
        raise ValueError(f"snapshot top level is {type(snapshot).__name__}, not dict")

    traces = snapshot.get("device_traces") or []
    trace = traces[device] if device < len(traces) else []
    actions = Counter(str(e.get("action")) for e in trace if isinstance(e, dict))
    times = [e["time_us"] for e in trace if isinstance(e, dict) and "time_us" in e]

    segments = [
        s for s in snapshot.get("segments") or ()
        if isinstance(s, dict) and s.get("device", device) == device
    ]
    pools = Counter(str(tuple(s.get("segment_pool_id") or ())) for s in segments)

    steps: dict[int, dict[str, bool]] = {}
    annotation_counts: dict[str, Counter] = {}
    for a in snapshot.get("external_annotations") or ():
        if not isinstance(a, dict):
            continue
        name, stage = str(a.get("name")), str(a.get("stage"))
        m = _PROFILER_STEP.fullmatch(name)
        if m:
            st = steps.setdefault(int(m.group(1)), {"start": False, "end": False})
            if stage == "START":
                st["start"] = True
            elif stage == "END" and (a.get("time_us") or 0) > 0:
                st["end"] = True
        else:
            annotation_counts.setdefault(name, Counter())[stage] += 1
    complete = sorted(n for n, st in steps.items() if st["start"] and st["end"])
    incomplete = sorted(n for n in steps if n not in complete)

    unique_frames: dict[int, dict] = {}
    for frames in _frame_lists(snapshot, trace):
        for fr in frames:
            if isinstance(fr, dict):
                unique_frames[id(fr)] = fr
    python_frames = sum(
        1 for fr in unique_frames.values() if str(fr.get("filename", "")).endswith(".py")
    )

    return {
        "top_level_keys": sorted(str(k) for k in snapshot),
        "trace_entries": {str(i): len(t) for i, t in enumerate(traces) if t},
        "actions": dict(sorted(actions.items())),
        "trace_span_us": (max(times) - min(times)) if times else None,
        "ring_buffer_full": (len(trace) >= max_entries) if max_entries else None,
        "segments": {
            "count": len(segments),
            "total_size": sum(s.get("total_size", 0) for s in segments),
            "allocated_size": sum(s.get("allocated_size", 0) for s in segments),
            "active_size": sum(s.get("active_size", 0) for s in segments),
            "requested_size": sum(s.get("requested_size", 0) for s in segments),
            "expandable": sum(1 for s in segments if s.get("is_expandable")),
            "by_pool": dict(sorted(pools.items())),
        },
        "allocator_settings": _jsonable(snapshot.get("allocator_settings")),
        "profiler_steps_complete": complete,
        "profiler_steps_incomplete": incomplete,
        "annotations": {k: dict(sorted(v.items())) for k, v in sorted(annotation_counts.items())},
        "oom_entries": [
            {"size": e.get("size"), "device_free": e.get("device_free")}
            for e in trace if isinstance(e, dict) and e.get("action") == "oom"
        ],
        "frames": {
            "unique": len(unique_frames),
            "python": python_frames,
            "other": len(unique_frames) - python_frames,
        },
    }
