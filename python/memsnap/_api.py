"""memsnap's Python API: load a snapshot once, ask it for reports and tables.

Every report is the dict that the command line prints with ``--json`` (the
same C++ code makes both), so a script and a terminal agree to the byte.
"""

from __future__ import annotations

import html
import inspect
import json
import math
import os
import pickle
import re
import textwrap
import warnings
from typing import (
    TYPE_CHECKING,
    Any,
    BinaryIO,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _core
from ._errors import MemsnapWarning, SnapshotError, usage_error
from ._table import Table

if TYPE_CHECKING:  # numpy is imported where a table is made: `import memsnap` stays small
    import numpy as np

PathLike = Union[str, "os.PathLike[str]"]
Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO]

_HEAD_BYTES = 1 << 20  # what a summary's file identity hashes (summarize's head_hash)
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_BLOCK_STATES = ["active_allocated", "active_pending_free", "inactive", "unknown"]


def _size_bytes(value: Union[int, str, None], what: str) -> int:
    """A size as the command line reads it: an int of bytes, or '80GiB', '512MiB', '1.5G'."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a number of bytes or a size like '80GiB'")
    if isinstance(value, int):
        if value < 1:
            raise usage_error(f"{what} must be at least 1 byte, not {value}")
        if value > _MAX_U64:
            raise usage_error(f"{what} is out of range (at most 16 EiB)")
        return value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match:
            scale = 1024 ** " kmgtp".index((match.group(2) or " ").lower())
            number = float(match.group(1)) * scale
            if not number < _MAX_U64:  # also inf: '9' * 400
                raise usage_error(f"{what} is out of range (at most 16 EiB)")
            return int(number)
        raise usage_error(f"{what}: '{value}' is not a size (e.g. 80GiB, 512MiB, 1048576)")
    raise TypeError(f"{what} must be a number of bytes or a size like '80GiB'")


_MAX_INT = 2**31 - 1  # the core's int parameters (device, jobs, frame_depth, width, ...)
_MAX_U64 = 2**64 - 1


def _whole(value: Any, what: str, minimum: int, maximum: int = _MAX_INT) -> int:
    """A whole-number argument, refused in memsnap's words (never the binding's)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be a whole number, not {type(value).__name__}")
    if value < minimum:
        raise usage_error(f"{what} must be >= {minimum}, not {value}")
    if value > maximum:
        raise usage_error(f"{what} must be <= {maximum}, not {value}")
    return value


def _device(value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    return _whole(value, "device", 0)


def _strings(value: Union[str, Iterable[str]], what: str) -> List[str]:
    items = [value] if isinstance(value, (str, os.PathLike)) else list(value)
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"{what} takes strings, not {type(item).__name__}")
    return [os.fspath(item) for item in items]


# The report table's entries by name, read once when the package is imported.
_REPORTS = {entry["name"]: entry for entry in _core.report_table()}


def _documented(name: str) -> Any:
    """A report method's docstring: the report table's description of ``name`` (what
    the command line's --help says), its parameters, then the method's own words
    about the dict it returns."""
    entry = _REPORTS[name]

    def wrapped(text: str, indent: str = "") -> List[str]:
        """A paragraph at 88 columns; a parameter's lines hang under its name."""
        hang = indent + "    " if indent else ""
        return textwrap.wrap(text, 88, initial_indent=indent, subsequent_indent=hang)

    def document(method: Any) -> Any:
        lines = wrapped(f"``memsnap {name} --json``: {entry['summary']}.") + [""]
        lines += wrapped(entry["description"]) + ["", "Parameters:"]
        for parameter in entry["parameters"]:
            lines += wrapped(f"{parameter['id']}: {parameter['help']}", "    ")
        lines += wrapped(f"top: {entry['top_rows']} (default {entry['default_top']})", "    ")
        lines += [""]
        own = inspect.cleandoc(method.__doc__ or "")
        lines += [own, "", f"Schema: ``tests/schema/{entry['schema']}.schema.json``"
                  " (``docs/json-schema.md``)."]
        method.__doc__ = "\n".join(lines)
        return method

    return document


class Snapshot:
    """A PyTorch CUDA memory snapshot, decoded (never executed) by memsnap's C++ core.

    Get one with :func:`load` or :func:`from_dict`. Reports are methods that
    return the command line's ``--json`` document as a dict (``explain()``,
    ``parse()``, ``oom()``, ``segments()``, ``streams()``, ``replay_to_time()``,
    ``replay_step()``, ``all_steps()``, ``summarize()``); tables are numpy
    columns (``events()``, ``segment_table``, ``block_table``, ``frames``,
    ``stacks``). A snapshot is about one device (:attr:`device`); the file may
    hold others (:attr:`devices`, :meth:`on_device`).
    """

    __slots__ = ("_core", "_device", "_keys", "_key_options", "_head")

    def __init__(self) -> None:
        raise TypeError("use memsnap.load(...) or memsnap.from_dict(...)")

    @classmethod
    def _wrap(
        cls,
        core: Any,
        device: Optional[int],
        head: bytes,
        key_options: Optional[Dict[str, Any]] = None,
    ) -> "Snapshot":
        snapshot = object.__new__(cls)
        snapshot._core = core
        snapshot._device = device
        snapshot._head = head
        snapshot._key_options = dict(key_options or {})
        snapshot._keys = _make_keys(snapshot._key_options)
        if device is not None:
            core.device(device)  # an unknown device fails now, as --device does
        return snapshot

    # ---- what the file is -------------------------------------------------
    @property
    def name(self) -> str:
        """The path it was loaded from (or ``<bytes>``, ``<dict>``): reports' ``file``."""
        return str(self._core.name)

    @property
    def devices(self) -> List[int]:
        """CUDA ordinals with trace entries or segments, ascending."""
        return list(self._core.devices())

    @property
    def device(self) -> int:
        """The device reports are about: the one asked for, else the one with an OOM, else the
        one with the most trace entries, else the largest reserved (the CLI's rule)."""
        return int(self._core.device(self._device))

    def on_device(self, device: int) -> "Snapshot":
        """The same snapshot, its reports and tables about ``device`` (no reload)."""
        return Snapshot._wrap(self._core, _device(device), self._head, self._key_options)

    def with_keys(
        self,
        *,
        frame_depth: int = 1,
        keys: str = "user",
        skip: Union[str, Iterable[str]] = (),
        keep: Union[str, Iterable[str]] = (),
        root: Union[str, Iterable[str]] = (),
        group_by: str = "source",
        category_rules: Optional[PathLike] = None,
    ) -> "Snapshot":
        """The same snapshot with other attribution options (no reload): the CLI's
        ``--frame-depth``, ``--keys user|reference``, ``--skip``/``--keep`` (regexes),
        ``--root`` (folders of your code), ``--group-by`` (source, file, function, stack,
        category, annotation, pool, user_metadata, compile_context) and
        ``--category-rules`` (a file of rules)."""
        options = {
            "frame_depth": _whole(frame_depth, "frame_depth", 1),
            "keys": keys,
            "skip": _strings(skip, "skip"),
            "keep": _strings(keep, "keep"),
            "root": _strings(root, "root"),
            "group_by": group_by,
            "category_rules": None if category_rules is None else os.fspath(category_rules),
        }
        return Snapshot._wrap(self._core, self._device, self._head, options)

    @property
    def allocator_settings(self) -> Dict[str, Any]:
        """The file's ``allocator_settings`` dict ({} when it has none)."""
        text = self._core.allocator_settings()
        return json.loads(text) if text else {}

    @property
    def file_size(self) -> int:
        """Bytes on disk (compressed, for .gz/.zst)."""
        return int(self._core.info()[0])

    @property
    def pickle_size(self) -> int:
        """Bytes of the pickle (after decompression)."""
        return int(self._core.info()[1])

    # ---- tables ----------------------------------------------------------
    def events(self, device: Optional[int] = None) -> Table:
        """The device's trace entries (default: :attr:`device`) in file order.

        Columns: ``action`` (categorical: alloc, free_requested, free_completed,
        segment_alloc, ...), ``address`` and ``size`` (signed int64, so that ``-size``
        and address differences mean what they say), ``stream``, ``time_us``, ``stack``
        (an id into :attr:`stacks`) as views of the snapshot's memory, ``time_s``
        (float seconds from the device's first timed entry, as ``replay_to_time`` and
        ``--time`` take them; NaN for an entry without a time), and ``source``
        and ``category`` (categorical) as the reports name each entry under the
        snapshot's keys (:meth:`with_keys`): a free by the allocation it frees, a
        free of memory from before the trace as ``freed at ... (allocated before the
        trace)`` (``stack`` is always the entry's own).
        """
        wanted = self._device if device is None else _device(device)
        columns = self._core.events(wanted)
        other = columns.pop("other_action")
        action_labels = list(_core.action_names())
        if other:
            import numpy as np

            extra = sorted(set(other.values()) - set(action_labels))
            action_labels += extra
            # A file may name any number of actions of its own: the codes
            # widen past 256 labels.
            code_of = {label: code for code, label in enumerate(action_labels)}
            wide = len(action_labels) > 256
            codes = np.array(columns["action"], dtype=np.uint32 if wide else np.uint8)
            for index, label in other.items():
                codes[index] = code_of[label]
            columns["action"] = codes
        source, source_labels, category = self._core.entry_groups(wanted, self._keys)
        columns["source"] = source
        columns["category"] = category
        return Table(
            columns,
            {
                "action": action_labels,
                "source": source_labels,
                "category": list(_core.category_names()),
            },
        )

    @property
    def segment_table(self) -> Table:
        """The allocator's segments at the dump, every device: ``device``, ``address``,
        ``total_size``, ``allocated_size``, ``active_size``, ``requested_size``, ``stream``,
        ``segment_type`` (categorical), ``pool_id_first``/``pool_id_second``,
        ``is_expandable``, ``stack``, ``first_block``/``block_count`` (rows of
        :attr:`block_table`). (``segments()`` is the report.)"""
        import numpy as np

        columns = self._core.segments()
        types = columns["segment_type"]
        labels = sorted(set(types))
        index = {label: code for code, label in enumerate(labels)}
        columns["segment_type"] = np.array([index[t] for t in types], dtype=np.uint32)
        return Table(columns, {"segment_type": labels})

    @property
    def block_table(self) -> Table:
        """Every segment's blocks at the dump: ``segment`` (a row of :attr:`segment_table`),
        ``address``, ``size``, ``requested_size``, ``state`` (categorical), ``stack``."""
        return Table(self._core.blocks(), {"state": _BLOCK_STATES})

    @property
    def blocks(self) -> Table:
        """Alias of :attr:`block_table`."""
        return self.block_table

    @property
    def frames(self) -> Table:
        """Frames by id (row 0 is "no frame"): ``name``, ``filename``, ``line``,
        ``fx_original_trace`` (strings are Python lists), ``machinery`` (1: a C++ frame of
        stack capture, the caching allocator or the interpreter, which :meth:`stack`
        leaves out at the top of a stack)."""
        return Table(self._core.frames())

    @property
    def stacks(self) -> Tuple["np.ndarray", "np.ndarray"]:
        """Stacks by id as ``(offsets, frames)``: stack ``i`` is the frame ids
        ``frames[offsets[i]:offsets[i+1]]``, innermost first (id 0: no frames)."""
        columns = self._core.stacks()
        return columns["offsets"], columns["frames"]

    def stack(self, stack_id: int, *, machinery: bool = False) -> List[Dict[str, Any]]:
        """One stack's frames, innermost first, as dicts (name, filename, line).

        The innermost frames of stack capture and of the caching allocator itself
        (``torch::unwind``, ``CUDACachingAllocator``, ...: the ``machinery`` column of
        :attr:`frames`) are left out, so that the stack starts at the code that asked
        for the memory; ``machinery=True`` keeps every frame."""
        offsets, frames = self.stacks
        table = self._core.frames()
        if not 0 <= stack_id < len(offsets) - 1:
            raise usage_error(f"no stack {stack_id} (ids 0 to {len(offsets) - 2})")
        ids = list(frames[offsets[stack_id] : offsets[stack_id + 1]])
        if not machinery:
            first = 0
            while first < len(ids) and table["machinery"][ids[first]]:
                first += 1
            ids = ids[first:]
        return [
            {"name": table["name"][f], "filename": table["filename"][f], "line": int(table["line"][f])}
            for f in ids
        ]

    # ---- reports: the CLI's --json documents ------------------------------
    def _report(self, name: str, **arguments: Any) -> Any:
        """The report table's entry ``name`` (``_core.report_table()``): its JSON, its
        notes warned as :class:`MemsnapWarning`."""
        text, notes = self._core.report(name, self._device, arguments, self._keys)
        for note in notes:
            warnings.warn(note, MemsnapWarning, stacklevel=3)
        return json.loads(text)

    @_documented("explain")
    def explain(self, *, top: int = 5) -> Dict[str, Any]:
        """Main keys: ``device``, ``event_count``, ``duration_s``; ``peak`` (``absolute``,
        ``baseline``, ``delta``, ``time_s``, ``by_category`` and ``by_source`` tables of
        ``rows`` [``source``, ``bytes``, ``count``, ``key_kind``] and ``rest``);
        ``baseline`` (memory from before the trace, the same tables); ``oom`` (None or
        the first OOM's verdicts and numbers); ``dump``; ``steps``; ``lacks``; ``next``
        (commands worth running)."""
        return self._report("explain", top=top)

    @_documented("parse")
    def parse(self, *, top: int = 15) -> Dict[str, Any]:
        """Main keys: ``segments`` (count, total/allocated/active sizes), ``baseline``,
        ``replay`` (``absolute_peak``, ``peak_delta``, ``peak_time_s``, ...),
        ``profiler_steps``, ``device_traces`` (``actions`` counts), ``unmatched_frees``,
        ``free_frames`` (whose stack the frees carry), ``top_sources``, ``oom``,
        ``per_device``, ``warnings``."""
        return self._report("parse", top=top)

    @_documented("oom")
    def oom(
        self,
        at: Union[int, str] = 1,
        *,
        window: float = 1.0,
        capacity: Union[int, str, None] = None,
        top: int = 10,
    ) -> Dict[str, Any]:
        """Main keys: ``oom_count``, ``moment``, and ``oom`` (None without one) or, with
        ``at="peak"``, ``peak``: ``request``, ``request_source``, ``verdict`` and
        ``verdicts`` (capacity, fragmentation, pool, outside, spike), ``state``
        (``reserved``, ``live``, ``free``, ``largest_usable_block``, ``pools``),
        ``live_by_source`` and ``live_by_category`` (rows with ``key_kind``), ``growth``."""
        return self._report("oom", at=at, window=window, capacity=capacity, top=top)

    @_documented("segments")
    def segments(self, time: Optional[float] = None, *, top: int = 15) -> Dict[str, Any]:
        """The table of segments is :attr:`segment_table`.

        Main keys: ``at``, ``time_s``, ``segment_count``, ``totals`` (``reserved``,
        ``allocated``, ``awaiting_free``, ``free``, ``largest_free_block``, ...),
        ``external_fragmentation``, ``internal_fragmentation``, ``pools``, ``segments``."""
        return self._report("segments", time=time, top=top)

    @_documented("streams")
    def streams(self, *, top: int = 10) -> Dict[str, Any]:
        """Main keys: ``device``, ``trace_entries``, ``stream_count``, ``streams`` (per
        stream: ``stream``, ``dump`` with ``segments`` and the bytes by block state,
        ``trace`` with ``alloc_count``, ``alloc_bytes``, ``free_count``,
        ``segment_allocs``, ``peak_live``, ``peak_time_s``, ``end_live``),
        ``more_streams``."""
        return self._report("streams", top=top)

    @_documented("whatif")
    def whatif(self, settings: Optional[Union[str, Dict[str, Any]]] = None, *,
               capacity: Optional[Union[int, str]] = None, check: bool = False,
               top: int = 10) -> Dict[str, Any]:
        """``settings``: a configuration to try against the file's own, as a
        PYTORCH_CUDA_ALLOC_CONF text or a dict (``{"expandable_segments": True}``).

        Main keys: ``capacity`` and ``capacity_from``, ``floor``,
        ``recorded_peak_reserved``, ``capacity_to_fit``, ``model_check``, ``runs`` (per
        setting: ``setting``, ``peak_reserved``, ``reserved_at_oom``, ``cuda_mallocs``,
        ``cuda_frees``, ``oom_requests_fit``, ``model_ooms``, ``fits``), ``timeline``
        (with ``settings``). ``check=True`` returns the model's check against the file
        instead (tests/schema/whatif_check.schema.json)."""
        return self._report("whatif", set=_alloc_conf(settings), capacity=capacity, check=check,
                            top=top)

    @_documented("replay-to-time")
    def replay_to_time(self, time: float, *, top: int = 25) -> Dict[str, Any]:
        """Past the end of the trace the time is clamped, with a :class:`MemsnapWarning`.

        Main keys: ``time_s``, ``absolute`` (baseline + delta), ``delta``, ``baseline``,
        ``live_count``, ``live_bytes``, ``sources`` (rows of ``source``, ``bytes``,
        ``count``, ``key_kind``: the trace's allocations live then), ``clamped``."""
        return self._report("replay-to-time", time=time, top=top)

    @_documented("replay-step")
    def replay_step(self, step: int, *, top: int = 15) -> List[Dict[str, Any]]:
        """Step ``step``, as a list of one.

        Each item: ``step``, ``complete``, ``duration_ms``, ``absolute_peak``,
        ``peak_delta``, ``start_delta``, ``alloc_count``, ``free_count``,
        ``top_sources_at_peak`` (rows with ``key_kind``), ``annotations``."""
        return self._report("replay-step", step=step, top=top)

    @_documented("replay-step")
    def all_steps(self, *, top: int = 15) -> List[Dict[str, Any]]:
        """Every step, items as :meth:`replay_step`'s. A file without steps has none: an
        empty list, and a :class:`MemsnapWarning` that says where steps come from."""
        if self._core.step_count(self._device) == 0:
            warnings.warn(
                f"{self.name}: no ProfilerStep annotations, so no steps (they come from "
                "torch.profiler.profile(...) with prof.step() each iteration); the other "
                "reports work on this file",
                MemsnapWarning,
                stacklevel=2,
            )
            return []
        return self._report("replay-step", all_steps=True, top=top)

    def summarize(self, *, rank: Optional[int] = None) -> Dict[str, Any]:
        """``memsnap summarize --json``: the compact summary that ``ranks`` and
        ``check --baseline`` read (``rank``: default from the file name).

        Main keys: ``kind``, ``version``, ``file``, ``rank``, ``device``, ``segments``,
        ``baseline``, ``peak_delta``, ``absolute_peak``, ``steps``, ``live_at_peak``
        (``by_source`` and ``by_category`` rows), ``throughput``, ``ooms``, ``warnings``. Schema: ``tests/schema/summary.schema.json``
        (``docs/json-schema.md``)."""
        chosen = None if rank is None else _whole(rank, "rank", 0)
        return json.loads(self._core.summarize(self._device, self._keys, chosen, self._head))

    def plot(self, label: Optional[str] = None, **options: Any) -> "Plot":
        """This snapshot's timeline (see :func:`plot`)."""
        return plot([self], labels=None if label is None else [label], **options)

    def serve(self, label: Optional[str] = None, **options: Any) -> "Server":
        """This snapshot's page, served from this process (see :func:`serve`)."""
        return serve([self], labels=None if label is None else [label], **options)

    def __repr__(self) -> str:
        return f"<memsnap.Snapshot {self.name!r}: device {self.device} of {self.devices}>"


def _alloc_conf(settings: Optional[Union[str, Mapping[str, Any]]]) -> Optional[str]:
    """PYTORCH_CUDA_ALLOC_CONF's text for settings given as a text or a dict."""
    if isinstance(settings, Mapping):
        return ",".join("%s:%s" % (key, value) for key, value in settings.items())
    return settings


def _make_keys(options: Mapping[str, Any]) -> Any:
    rules_path = options.get("category_rules")
    return _core.Keys(
        frame_depth=_whole(options.get("frame_depth", 1), "frame_depth", 1),
        keys=options.get("keys", "user"),
        group_by=options.get("group_by", "source"),
        skip=options.get("skip", []),
        keep=options.get("keep", []),
        root=options.get("root", []),
        category_rules_file=None if rules_path is None else os.fspath(rules_path),
    )


def load(
    source: Source,
    *,
    device: Optional[int] = None,
    allow_objects: bool = False,
    max_input: Union[int, str, None] = None,
) -> Snapshot:
    """Reads a snapshot: a path (``.pickle``, ``.gz``, ``.zst``), ``bytes``, or a binary file.

    The pickle is decoded by memsnap's own reader and never executed; opcodes
    that would import or call code are refused (``allow_objects=True``: read as
    inert placeholders). ``max_input`` bounds what a compressed input may inflate
    to (bytes or '48GiB'; default: the machine's memory). ``device``: the device
    reports are about (default: the CLI's rule, :attr:`Snapshot.device`).
    The GIL is released while the file is read and decoded.

    Raises:
        SnapshotError: the file cannot be read or is not a snapshot.
        FileNotFoundError: the path does not exist.
    """
    limit = _size_bytes(max_input, "max_input")
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not isinstance(path, str):
            raise TypeError("paths must be str or os.PathLike[str]")
        if path != "-" and not os.path.exists(path):
            raise FileNotFoundError(2, "No such file or directory", path)
        core = _core.load_path(path, bool(allow_objects), limit)
        head = b""
        # The head again from a regular file only: a FIFO was read by the
        # core, and opening it again waits for a writer that never comes.
        if path != "-" and os.path.isfile(path):
            with open(path, "rb") as file:
                head = file.read(_HEAD_BYTES)
        return _loaded(core, device, head)
    if isinstance(source, (bytearray, memoryview)):
        source = bytes(source)
    if isinstance(source, bytes):
        return _load_bytes(source, "<bytes>", device, allow_objects, limit)
    read = getattr(source, "read", None)
    if callable(read):
        data = read()
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError("the file object must be opened in binary mode ('rb')")
        name = getattr(source, "name", None)
        return _load_bytes(
            bytes(data), name if isinstance(name, str) else "<file>", device, allow_objects, limit
        )
    raise TypeError(
        f"load() takes a path, bytes or a binary file object, not {type(source).__name__}"
    )


def _load_bytes(
    data: bytes, name: str, device: Optional[int], allow_objects: bool, limit: int
) -> Snapshot:
    core = _core.load_bytes(data, name, bool(allow_objects), limit)
    return _loaded(core, device, data[:_HEAD_BYTES])


def _loaded(core: Any, device: Optional[int], head: bytes) -> Snapshot:
    """The Snapshot; as the CLI says on stderr, a warning when its reports leave devices out."""
    snapshot = Snapshot._wrap(core, _device(device), head)
    note = core.device_note(snapshot._device)
    if note:
        warnings.warn(note, MemsnapWarning, stacklevel=3)
    return snapshot


def from_dict(
    snapshot: Mapping[str, Any], *, device: Optional[int] = None, allow_objects: bool = False
) -> Snapshot:
    """The snapshot of ``torch.cuda.memory._snapshot()`` in a running script, no file written.

    The dict is pickled as ``_dump_snapshot`` would write it and read back by the
    same safe reader as a file (torch is never imported here); an object other
    than dicts, lists, strings and numbers is refused unless ``allow_objects``.
    """
    if not isinstance(snapshot, (dict, list)):
        raise TypeError(
            "from_dict() takes the dict of torch.cuda.memory._snapshot(), not "
            f"{type(snapshot).__name__}"
        )
    try:
        data = pickle.dumps(snapshot, protocol=pickle.DEFAULT_PROTOCOL)
    except (RecursionError, pickle.PicklingError, AttributeError, TypeError) as error:
        # A function, a lambda, nesting deeper than Python recurses: no
        # snapshot holds these.
        raise SnapshotError(
            f"<dict>: not a snapshot: {error}", path="<dict>", code="not_a_snapshot"
        ) from error
    return _load_bytes(data, "<dict>", device, allow_objects, 0)


def _as_snapshot(value: Union[Snapshot, Source], device: Optional[int] = None) -> Snapshot:
    if isinstance(value, Snapshot):
        return value if device is None else value.on_device(device)
    return load(value, device=device)


# ---- several files: compare, ranks, check --------------------------------


_KEY_OPTIONS = ("frame_depth", "keys", "skip", "keep", "root", "group_by", "category_rules")
_RUN_OPTIONS = ("device", "steps", "rank_from", "jobs", "allow_objects", "max_input") + _KEY_OPTIONS


def _run_options(options: Dict[str, Any], what: str, extra: Tuple[str, ...] = ()) -> Dict[str, Any]:
    """The keyword arguments of a call over many files, checked and with defaults,
    as ``_core``'s functions over many files take them."""
    unknown = sorted(set(options) - set(_RUN_OPTIONS) - set(extra))
    if unknown:
        raise TypeError(f"{what}() got unexpected keyword arguments: {', '.join(unknown)} "
                        f"(it takes {', '.join(_RUN_OPTIONS + extra)})")
    device = options.get("device")
    max_input = options.get("max_input")
    return {
        "device": None if device is None else _whole(device, "device", 0),
        "steps": str(options.get("steps", "auto")),
        "keys": _make_keys({k: v for k, v in options.items() if k in _KEY_OPTIONS}),
        "rank_from": str(options.get("rank_from") or ""),
        "jobs": _whole(options.get("jobs", 0), "jobs", 0),
        "allow_objects": bool(options.get("allow_objects", False)),
        "max_input": 0 if max_input is None else _whole(max_input, "max_input", 0, _MAX_U64),
    }


def _answer(answer: Tuple[str, List[str], str]) -> Dict[str, Any]:
    """A report over many files: its notes as warnings; files it could not read
    raise SnapshotError after them."""
    report, notes, error = answer
    for note in notes:
        warnings.warn(note, MemsnapWarning, stacklevel=3)
    if error:
        raise SnapshotError(error, kind="input", code="files_unread")
    return json.loads(report)


def _paths(values: Union[PathLike, Iterable[PathLike]]) -> List[str]:
    if isinstance(values, (str, os.PathLike)):
        return [os.fspath(values)]
    return [os.fspath(value) for value in values]


def compare(
    a: Union[Snapshot, Source],
    b: Union[Snapshot, Source],
    *,
    step: Optional[int] = None,
    top: int = 15,
    **options: Any,
) -> Dict[str, Any]:
    """``memsnap compare A B --json``: why B peaks higher than A (every difference B - A).

    ``a``/``b``: snapshots, paths or bytes; two folders of rank files compare the
    runs rank by rank (the CLI's run comparison). ``step``: drill into that step.
    Other keyword arguments are the CLI's flags (``device=1``, ``frame_depth=2``,
    ``group_by="category"``); with snapshots, their own device and keys apply.
    """
    if (
        isinstance(a, (str, os.PathLike))
        and isinstance(b, (str, os.PathLike))
        and (os.path.isdir(a) or os.path.isdir(b))
    ):
        run = _run_options(options, "compare")
        if step is not None:
            step = _whole(step, "step", -(1 << 62))
        return _answer(_core.compare_runs(os.fspath(a), os.fspath(b), step=step,
                                          top=_whole(top, "top", 0), **run))
    device = options.pop("device", None)
    side_a = _as_snapshot(a, device)
    side_b = _as_snapshot(b, device)
    if options:
        side_a = side_a.with_keys(**options)
    if step is not None:
        step = _whole(step, "step", -(1 << 62))
    return json.loads(
        _core.compare(
            side_a._core,
            side_b._core,
            side_a._device,
            side_b._device,
            step,
            _whole(top, "top", 0),
            side_a._keys,
        )
    )


def ranks(files_or_dir: Union[PathLike, Iterable[PathLike]], **options: Any) -> Dict[str, Any]:
    """``memsnap ranks --json``: many ranks of one run (snapshots, summaries, or folders):
    the highest peak, the spread, outliers, groups (schema: docs/json-schema.md, ranks).

    Keyword arguments: ``jobs`` (files read at once; 0: the core count), ``rank_from``
    (a regex whose first group is the rank in a file's name), ``device``, ``steps``
    (``"auto"``, ``"profiler"``, ``"optimizer"``, ``"none"``), ``allow_objects``,
    ``max_input``, and the naming options of :meth:`Snapshot.with_keys`. Notes (the
    device chosen, two files with one rank) are ``MemsnapWarning``; files that could
    not be read raise ``SnapshotError`` after the others were read."""
    return _answer(_core.ranks(_paths(files_or_dir), **_run_options(options, "ranks")))


_CHECK_AMOUNTS = ("max_peak", "max_peak_delta", "max_reserved", "max_fragmentation", "max_growth",
                  "max_source_growth", "max_unmatched_frees", "step_max_peak")


class CheckResult(NamedTuple):
    """What :func:`check` found: the report (``check --format json``) and whether it passed."""

    report: Dict[str, Any]
    passed: bool


def check(
    current: Union[PathLike, Iterable[PathLike]],
    *,
    baseline: Optional[PathLike] = None,
    budget: Optional[PathLike] = None,
    **limits: Any,
) -> CheckResult:
    """``memsnap check``: the CI gate, as a value (it never exits).

    ``current``: a snapshot, a summary, or a folder of rank files; ``baseline``: the
    run to compare with; ``budget``: a TOML/JSON file of limits (keywords win over
    its keys). Limits: ``max_peak``, ``max_peak_delta``, ``max_reserved``,
    ``max_fragmentation``, ``max_growth``, ``max_source_growth``,
    ``max_unmatched_frees``, ``step_max_peak`` (sizes as ``"12GiB"`` or bytes, or
    percents as ``"5%"``), ``max_category={"activation": "4GiB"}``, ``no_oom=True``;
    ``allow_unmeasured=True`` (a limit the file cannot measure is then not checked
    instead of failed); ``top``: sources in the explanation (10). Also ``jobs``,
    ``rank_from``, ``device``, ``steps`` and the naming options, as :func:`ranks`.
    The report's schema: docs/json-schema.md (check, check_ranks). Notes are
    ``MemsnapWarning``; a malformed limit is ``ValueError`` naming the keyword.
    """
    paths = _paths(current)
    if len(paths) != 1:
        raise usage_error(f"check() takes one run (a snapshot, a summary or a folder), not {len(paths)}")
    amounts: Dict[str, str] = {}
    for name in _CHECK_AMOUNTS:
        value = limits.pop(name, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TypeError(f"{name} must be a size such as '12GiB' or 1073741824, "
                            f"or a percent such as '5%', not {type(value).__name__}")
        amounts[name] = str(value)
    categories = limits.pop("max_category", None) or {}
    if not isinstance(categories, Mapping):
        raise TypeError("max_category must be a dict such as {'activation': '20GiB'}")
    no_oom = bool(limits.pop("no_oom", False))
    allow_unmeasured = bool(limits.pop("allow_unmeasured", False))
    top = _whole(limits.pop("top", 10), "top", 0)
    run = _run_options(limits, "check", _CHECK_AMOUNTS + ("max_category", "no_oom",
                                                          "allow_unmeasured", "top"))
    report, notes, passed = _core.check(
        paths[0], "" if baseline is None else os.fspath(baseline),
        "" if budget is None else os.fspath(budget), amounts,
        [(str(name), str(size)) for name, size in categories.items()], no_oom,
        allow_unmeasured, top, **run)
    for note in notes:
        warnings.warn(note, MemsnapWarning, stacklevel=2)
    return CheckResult(json.loads(report), passed)


# ---- the timeline ----------------------------------------------------------


class Plot:
    """Memory over time for one run or several overlaid (``memsnap plot``).

    ``html`` is the offline page (one file: no network needed), ``save(path)``
    writes it, a notebook shows it inline (``_repr_html_``: an iframe), and
    ``text()`` draws the terminal chart of ``plot --text``.
    """

    def __init__(
        self,
        snapshots: Sequence[Snapshot],
        labels: Sequence[str],
        *,
        device: Optional[int],
        precision_ms: float,
        max_lifetimes: int,
        whatif: Optional[str] = None,
    ) -> None:
        self._snapshots = list(snapshots)
        self._labels = list(labels)
        self._device = device
        self._precision_ms = precision_ms
        self._max_lifetimes = max_lifetimes
        self._whatif = whatif
        self._html: Optional[str] = None

    @property
    def html(self) -> str:
        """The timeline page, as one self-contained HTML document."""
        if self._html is None:
            self._html = _core.plot_html(
                [s._core for s in self._snapshots],
                self._labels,
                self._device,
                self._precision_ms,
                self._max_lifetimes,
                self._snapshots[0]._keys,
                self._whatif,
            )
        return self._html

    def save(self, path: PathLike) -> str:
        """Writes the page to ``path`` (open it in any browser) and returns the path."""
        target = os.fspath(path)
        with open(target, "w", encoding="utf-8") as out:
            out.write(self.html)
        return target

    def text(self, *, width: int = 100, height: int = 20, delta: bool = False,
             color: bool = False) -> str:
        """The terminal chart (``plot --text``): baseline + delta, or ``delta`` only."""
        return str(
            _core.plot_text(
                [s._core for s in self._snapshots],
                self._labels,
                self._device,
                _whole(width, "width", 1),
                _whole(height, "height", 1),
                bool(delta),
                bool(color),
                self._snapshots[0]._keys,
            )
        )

    def _repr_html_(self) -> str:
        # srcdoc keeps the page self-contained: notebooks (Jupyter, VS Code)
        # render it in a sandboxed frame without writing a file.
        return (
            '<iframe style="width:100%;height:720px;border:0" '
            'sandbox="allow-scripts allow-downloads" srcdoc="'
            + html.escape(self.html, quote=True)
            + '"></iframe>'
        )

    def __repr__(self) -> str:
        return f"<memsnap.Plot: {', '.join(self._labels)}>"


def _snapshots_and_labels(
    snapshots: Union[Snapshot, Source, Sequence[Union[Snapshot, Source]]],
    labels: Optional[Sequence[str]],
) -> Tuple[List[Snapshot], List[str]]:
    """One snapshot or several (snapshots, paths, bytes), each loaded, and
    their labels (default: file names), as plot and serve take them."""
    items = (
        [snapshots]
        if isinstance(snapshots, (Snapshot, str, os.PathLike, bytes, bytearray, memoryview))
        else list(snapshots)
    )
    loaded = [_as_snapshot(item) for item in items]
    if not loaded:
        raise usage_error("give at least one snapshot")
    if labels is None:
        return loaded, [os.path.basename(s.name) for s in loaded]
    return loaded, _strings(labels, "labels")


class Server:
    """``memsnap serve`` on a thread of this process (:func:`serve`).

    ``url`` is the page's address (its token included: whoever has the URL
    can read the snapshots' reports, nothing else); ``stop()`` ends it, as
    leaving a ``with`` block does. A notebook shows the page inline in an
    iframe that loads ``url``: that works where the browser can reach this
    process's loopback address (a local notebook, or an SSH tunnel to the
    port); elsewhere open the URL through a tunnel.
    """

    def __init__(self, snapshots: Sequence[Snapshot], labels: Sequence[str], *,
                 device: Optional[int], host: str, port: int, token: Optional[str]) -> None:
        self._snapshots = list(snapshots)
        self._labels = list(labels)
        options = _core.ServeOptions(host=host, port=port, token=token or "")
        self._serving = _core.Serving(
            [s._core for s in self._snapshots], self._labels, device, options,
            self._snapshots[0]._keys,
        )

    @property
    def url(self) -> str:
        """The page's address, token included."""
        return str(self._serving.url)

    @property
    def running(self) -> bool:
        """Whether it still answers."""
        return bool(self._serving.running)

    def stop(self) -> None:
        """Stops answering (the port is closed when this returns)."""
        self._serving.stop()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _repr_html_(self) -> str:
        return (
            f'<p><a href="{html.escape(self.url, quote=True)}" target="_blank">'
            f"{html.escape(', '.join(self._labels))}: the page in a tab of its own</a></p>"
            '<iframe style="width:100%;height:900px;border:0" src="'
            + html.escape(self.url, quote=True)
            + '"></iframe>'
        )

    def __repr__(self) -> str:
        state = self.url if self.running else "stopped"
        return f"<memsnap.Server {', '.join(self._labels)}: {state}>"


def serve(
    snapshots: Union[Snapshot, Source, Sequence[Union[Snapshot, Source]]],
    labels: Optional[Sequence[str]] = None,
    *,
    device: Optional[int] = None,
    host: str = "127.0.0.1",
    port: int = 0,
    token: Optional[str] = None,
) -> Server:
    """Serves the page and the reports of these snapshots (``memsnap serve``) from a
    thread of this process, until ``stop()``; returns at once with ``url`` set.

    Every view of the page is there: allocations one by one with their stacks,
    the allocator's segments at any moment, segments over time, search, ranks.
    It listens on ``host`` (loopback by default; any other host needs a
    ``token`` of your own) and ``port`` (0: any free one); every request needs
    the token in the URL.
    """
    if not _core.server_available():
        raise SnapshotError(
            "this memsnap was built without the server (it needs Boost's headers at build time); "
            "memsnap.plot(...).save(path) writes the page as a file",
            code="unavailable",
        )
    loaded, labels = _snapshots_and_labels(snapshots, labels)
    if not isinstance(host, str) or not host:
        raise usage_error("host must be an address such as 127.0.0.1")
    port = _whole(port, "port", 0)
    if port > 65535:
        raise usage_error(f"port must be 0 to 65535, not {port}")
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        raise usage_error(
            f"host={host!r} answers other machines: give token= too (a secret of your own), "
            "or use 127.0.0.1 and an SSH tunnel"
        )
    return Server(loaded, labels, device=_device(device), host=host, port=port, token=token)


def plot(
    snapshots: Union[Snapshot, Source, Sequence[Union[Snapshot, Source]]],
    labels: Optional[Sequence[str]] = None,
    *,
    device: Optional[int] = None,
    precision_ms: float = 1.0,
    max_lifetimes: int = 500_000,
    whatif: Optional[Union[str, Mapping[str, Any]]] = None,
) -> Plot:
    """The timeline of one run or several overlaid: snapshots, paths or bytes, one line each.

    ``labels``: one per snapshot (default: file names). The attribution options
    (:meth:`Snapshot.with_keys`) of the first snapshot name the sources.
    ``whatif``: allocator settings as :meth:`Snapshot.whatif` takes them
    (``"expandable_segments:True"`` or ``{"expandable_segments": True}``): the page
    also draws reserved memory as the allocator model has it under them
    (``plot --whatif``; the HTML page only).
    """
    loaded, labels = _snapshots_and_labels(snapshots, labels)
    if not (isinstance(precision_ms, (int, float)) and 0 < precision_ms < math.inf):
        raise usage_error("precision_ms must be a positive, finite number of milliseconds")
    return Plot(
        loaded,
        labels,
        device=_device(device),
        precision_ms=float(precision_ms),
        max_lifetimes=_whole(max_lifetimes, "max_lifetimes", 1, _MAX_U64),
        whatif=_alloc_conf(whatif),
    )
