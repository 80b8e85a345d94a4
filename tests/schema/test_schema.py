#!/usr/bin/env python3
"""The JSON output of every command against its schema (tests/schema/*.schema.json).

    python3 -m pytest tests/schema/test_schema.py --memsnap PATH [--work DIR]
    python3 -m pytest tests/schema/test_schema.py --memsnap PATH --part reference [--reference-keys FILE]

The schema part (CTest: json_schema), never skips:
  - the schema files themselves: valid draft 2020-12, every key has a type, a
    description, a unit where it is a number, an x-reference flag, and every
    object says whether other keys may appear;
  - every tests/golden/*.json against the schema of its command;
  - memsnap --json on generated snapshots (steps in both files, no steps, two
    devices with an OOM, no timestamps, C++ frames, an incomplete step, an
    empty file) against the schemas, plus the values compare and
    replay-to-time write twice, under a reference key in the reference's
    meaning and under memsnap's own (same rows, the other sign, unrounded);
  - a self-check: renamed keys and a retyped value in real output must fail;
  - docs/json-schema.md equals what tests/schema/make_docs.py writes.

Part `reference` (CTest: json_schema_reference) reads the key paths the
reference scripts write (--reference-keys, ../shared/reference/json-keys.json by
default; exit 77, skipped, when it is absent) and checks each against
memsnap's output on generated snapshots, with the exact JSON type (an int is
not a float, a bool is not an int), and that the schemas flag exactly those
keys with "x-reference": true. It self-checks too.

Types are strict in both parts: "integer" accepts only JSON numbers written
without a fraction, "number" only those written with one (memsnap writes
doubles as 7.0), so a count that turns into a double fails.
"""
import argparse
import copy
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(REPO, "tests", "gen", "make_snapshot.py")
EXAMPLE = os.path.join(REPO, "examples", "training_steps.pickle.gz")
DEFAULT_REFERENCE = os.path.join(REPO, "..", "shared", "reference", "json-keys.json")
import pytest
from pytest_check import check

import make_docs
import testlib

PARTS = ("schema", "reference")

SCHEMA_FILES = {
    "explain": "explain.schema.json",
    "parse": "parse.schema.json",
    "compare": "compare.schema.json",
    "replay_to_time": "replay_to_time.schema.json",
    "replay_to_time_pair": "replay_to_time_pair.schema.json",
    "replay_step": "replay_step.schema.json",
    "events": "events.schema.json",
    "segments": "segments.schema.json",
    "streams": "streams.schema.json",
    "oom": "oom.schema.json",
    "oom_ranks": "oom_ranks.schema.json",
    "summary": "summary.schema.json",
    "ranks": "ranks.schema.json",
    "compare_runs": "compare_runs.schema.json",
    "check": "check.schema.json",
    "check_ranks": "check_ranks.schema.json",
    "whatif": "whatif.schema.json",
    "whatif_check": "whatif_check.schema.json",
}

# Units a number may carry (x-unit), and a word its description must then use.
UNIT_WORDS = {
    "bytes": "bytes",
    "µs": "µs",
    "s": "seconds",
    "ms": "milliseconds",
    "count": "count",
    "fraction": "fraction",
    "—": "",
}

# Generated inputs: name -> make_snapshot.py arguments.
GENERATED = {
    "steps_a.pickle": ["--events", "1500", "--steps", "5", "--marks", "--seed", "21"],
    "steps_b.pickle": ["--events", "2000", "--steps", "5", "--marks", "--seed", "22"],
    "plain_a.pickle": ["--events", "1500", "--seed", "23"],
    "plain_b.pickle": ["--events", "1800", "--seed", "24"],
    "two_devices.pickle": ["--events", "1500", "--devices", "2", "--oom", "--seed", "25"],
    "no_time.pickle": ["--events", "1000", "--no-time", "--seed", "26"],
    "all_stacks.pickle": ["--events", "1000", "--steps", "3", "--stacks", "all", "--seed", "27"],
    "open_step.pickle": ["--events", "1200", "--steps", "4", "--marks", "--open-last-step", "--seed", "28"],
    "expandable.pickle": ["--events", "1000", "--steps", "3", "--expandable", "--seed", "29"],
    "empty.pickle": ["--empty", "--seed", "30"],
    "runA/rank_0.pickle": ["--events", "1500", "--steps", "5", "--marks", "--seed", "31"],
    "runA/rank_1.pickle": ["--events", "1500", "--steps", "5", "--oom", "--seed", "32"],
    "runB/rank_0.pickle": ["--events", "2000", "--steps", "5", "--marks", "--seed", "33"],
    "runB/rank_2.pickle": ["--events", "1500", "--seed", "34"],
}

# (case name, schema, memsnap arguments); file names are relative to the
# folder of the generated files, "@example" is examples/training_steps.pickle.gz.
RUNS = [
    ("explain steps", "explain", ["explain", "--json", "steps_a.pickle"]),
    ("oom of a run folder", "oom_ranks", ["oom", "--json", "runA"]),
    ("oom of files without an OOM", "oom_ranks", ["oom", "--json", "plain_a.pickle", "plain_b.pickle"]),
    ("explain two devices with an OOM", "explain", ["explain", "--json", "two_devices.pickle"]),
    ("explain no time", "explain", ["explain", "--json", "no_time.pickle"]),
    ("explain empty", "explain", ["explain", "--json", "empty.pickle"]),
    ("explain example", "explain", ["explain", "--json", "@example"]),
    ("parse steps", "parse", ["parse", "--json", "steps_a.pickle"]),
    ("parse no steps", "parse", ["parse", "--json", "plain_a.pickle"]),
    ("parse two devices", "parse", ["parse", "--json", "two_devices.pickle"]),
    ("parse device 1", "parse", ["parse", "--json", "--device", "1", "two_devices.pickle"]),
    ("parse no time", "parse", ["parse", "--json", "no_time.pickle"]),
    ("parse C++ frames", "parse", ["parse", "--json", "all_stacks.pickle"]),
    ("parse open step", "parse", ["parse", "--json", "open_step.pickle"]),
    ("parse expandable", "parse", ["parse", "--json", "expandable.pickle"]),
    ("parse empty", "parse", ["parse", "--json", "empty.pickle"]),
    ("parse example", "parse", ["parse", "--json", "@example"]),
    ("events", "events", ["events", "--json", "steps_a.pickle"]),
    ("events stride", "events", ["events", "--json", "--stride", "50", "two_devices.pickle"]),
    ("events no time", "events", ["events", "--json", "no_time.pickle"]),
    ("events empty", "events", ["events", "--json", "empty.pickle"]),
    ("events inline frames", "events", ["events", "--json", "--inline-frames", "all_stacks.pickle"]),
    ("events inline frames, stride", "events", ["events", "--json", "--inline-frames", "--stride", "50", "two_devices.pickle"]),
    ("compare steps in both", "compare", ["compare", "--json", "steps_a.pickle", "steps_b.pickle"]),
    ("compare --step", "compare", ["compare", "--json", "--step", "2", "--top", "3", "steps_a.pickle", "steps_b.pickle"]),
    ("compare no steps", "compare", ["compare", "--json", "--steps", "profiler", "plain_a.pickle", "plain_b.pickle"]),
    ("compare inferred steps", "compare", ["compare", "--json", "plain_a.pickle", "plain_b.pickle"]),
    ("compare steps in A only", "compare", ["compare", "--json", "steps_a.pickle", "plain_b.pickle"]),
    ("compare open step", "compare", ["compare", "--json", "open_step.pickle", "steps_b.pickle"]),
    ("compare two devices", "compare", ["compare", "--json", "--device", "1", "two_devices.pickle", "two_devices.pickle"]),
    ("compare no time", "compare", ["compare", "--json", "no_time.pickle", "plain_a.pickle"]),
    ("compare empty", "compare", ["compare", "--json", "empty.pickle", "empty.pickle"]),
    ("replay-to-time", "replay_to_time", ["replay-to-time", "--json", "--time", "0.01", "steps_a.pickle"]),
    ("replay-to-time clamped", "replay_to_time", ["replay-to-time", "--json", "--time", "1000", "plain_a.pickle"]),
    ("replay-to-time empty", "replay_to_time", ["replay-to-time", "--json", "--time", "0", "empty.pickle"]),
    ("replay-to-time pair", "replay_to_time_pair", ["replay-to-time", "--json", "--time", "0.01", "steps_a.pickle", "steps_b.pickle"]),
    ("replay-to-time pair no steps", "replay_to_time_pair", ["replay-to-time", "--json", "--time", "0.005", "plain_a.pickle", "plain_b.pickle"]),
    ("replay-step all", "replay_step", ["replay-step", "--json", "--all-steps", "steps_a.pickle"]),
    ("replay-step inferred", "replay_step", ["replay-step", "--json", "--all-steps", "plain_a.pickle"]),
    ("streams", "streams", ["streams", "--json", "steps_a.pickle"]),
    ("streams two devices", "streams", ["streams", "--json", "--device", "1", "two_devices.pickle"]),
    ("streams no time", "streams", ["streams", "--json", "no_time.pickle"]),
    ("streams empty", "streams", ["streams", "--json", "empty.pickle"]),
    ("streams --top 0", "streams", ["streams", "--json", "--top", "0", "@example"]),
    ("whatif", "whatif", ["whatif", "--json", "steps_a.pickle"]),
    ("whatif two devices oom", "whatif", ["whatif", "--json", "--device", "1", "two_devices.pickle"]),
    ("whatif --capacity", "whatif", ["whatif", "--json", "--capacity", "1GiB", "@example"]),
    ("whatif empty", "whatif", ["whatif", "--json", "empty.pickle"]),
    ("whatif --set", "whatif", ["whatif", "--json", "--set", "expandable_segments:True,max_split_size_mb:64", "steps_a.pickle"]),
    ("whatif --check", "whatif_check", ["whatif", "--json", "--check", "steps_a.pickle"]),
    ("whatif --check two devices", "whatif_check", ["whatif", "--json", "--check", "--device", "1", "two_devices.pickle"]),
    ("whatif --check empty", "whatif_check", ["whatif", "--json", "--check", "empty.pickle"]),
    ("whatif --check example", "whatif_check", ["whatif", "--json", "--check", "@example"]),
    ("replay-step one", "replay_step", ["replay-step", "--json", "--step", "2", "steps_a.pickle"]),
    ("replay-step open step", "replay_step", ["replay-step", "--json", "--all-steps", "open_step.pickle"]),
    ("replay-step C++ frames", "replay_step", ["replay-step", "--json", "--all-steps", "all_stacks.pickle"]),
    ("replay-step example", "replay_step", ["replay-step", "--json", "--all-steps", "@example"]),
    ("segments", "segments", ["segments", "--json", "steps_a.pickle"]),
    ("segments expandable", "segments", ["segments", "--json", "--top", "3", "expandable.pickle"]),
    ("segments device 1", "segments", ["segments", "--json", "--device", "1", "two_devices.pickle"]),
    ("segments empty", "segments", ["segments", "--json", "empty.pickle"]),
    ("segments example", "segments", ["segments", "--json", "@example"]),
    ("segments at a time", "segments", ["segments", "--json", "--time", "0.001", "steps_a.pickle"]),
    ("oom", "oom", ["oom", "--json", "two_devices.pickle"]),
    ("oom device without one", "oom", ["oom", "--json", "--device", "0", "steps_a.pickle"]),
    ("oom capacity", "oom", ["oom", "--json", "--capacity", "80GiB", "--top", "2", "two_devices.pickle"]),
    ("oom at peak", "oom", ["oom", "--json", "--at", "peak", "steps_a.pickle"]),
    ("oom at peak, empty", "oom", ["oom", "--json", "--at", "peak", "empty.pickle"]),
    ("summarize", "summary", ["summarize", "--json", "steps_a.pickle"]),
    ("summarize two devices", "summary", ["summarize", "--json", "two_devices.pickle"]),
    ("summarize empty", "summary", ["summarize", "--json", "empty.pickle"]),
    ("summarize no time", "summary", ["summarize", "--json", "no_time.pickle"]),
    ("ranks", "ranks", ["ranks", "--json", "runA", "runB"]),
    ("ranks one file", "ranks", ["ranks", "--json", "plain_a.pickle"]),
    ("compare run folders", "compare_runs", ["compare", "--json", "runA", "runB"]),
    ("check pass", "check", ["check", "--format", "json", "--max-peak", "100GiB", "--no-oom", "steps_a.pickle"]),
    ("check fail with a baseline", "check", ["check", "--format", "json", "--baseline", "steps_a.pickle",
                                             "--max-growth", "0", "--max-source-growth", "0%", "--max-fragmentation", "0",
                                             "--step-max-peak", "1", "--max-category", "activation=0", "steps_b.pickle"]),
    ("check not applicable", "check", ["check", "--format", "json", "--step-max-peak", "1GiB", "plain_a.pickle"]),
    ("check run folders", "check_ranks", ["check", "--format", "json", "runB", "--baseline", "runA", "--max-growth", "0"]),
    ("check a run folder alone", "check_ranks", ["check", "--format", "json", "runA", "--max-peak", "100GiB"]),
]

# json-keys.json's command variants: (schema, memsnap arguments).
REFERENCE_RUNS = {
    "parse --json FILE (with profiler steps)":
        ("parse", ["parse", "--json", "steps_a.pickle"]),
    "compare --json A B (steps in both)":
        ("compare", ["compare", "--json", "steps_a.pickle", "steps_b.pickle"]),
    "compare --json A B (no steps: full trace)":
        ("compare", ["compare", "--json", "--steps", "profiler", "plain_a.pickle", "plain_b.pickle"]),
    "replay-to-time --json FILE --time T":
        ("replay_to_time", ["replay-to-time", "--json", "--time", "0.01", "steps_a.pickle"]),
    "replay-to-time --json A B --time T":
        ("replay_to_time_pair", ["replay-to-time", "--json", "--time", "0.01", "steps_a.pickle", "steps_b.pickle"]),
    "replay-step --json --all-steps FILE":
        ("replay_step", ["replay-step", "--json", "--all-steps", "steps_a.pickle"]),
}
# Keys under these paths are examples (annotation names), not fixed keys.
EXAMPLE_KEYS_UNDER = {"replay_step": "[].annotations"}


def strict_validator_class():
    """Draft 2020-12 with JSON types as memsnap writes them: integer = no
    fraction, number = with one; a bool is neither."""
    from jsonschema import Draft202012Validator, validators

    def is_integer(_checker, instance):
        return isinstance(instance, int) and not isinstance(instance, bool)

    def is_number(_checker, instance):
        return isinstance(instance, float)

    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", is_integer).redefine("number", is_number)
    return validators.extend(Draft202012Validator, type_checker=checker)


def load_schemas():
    schemas = {}
    for name, file in SCHEMA_FILES.items():
        with open(os.path.join(HERE, file), encoding="utf-8") as f:
            schemas[name] = json.load(f)
    return schemas


def errors_of(validator, document):
    """Readable validation errors: 'at .path: message'."""
    out = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = "".join("[%d]" % p if isinstance(p, int) else "." + p for p in error.absolute_path) or "."
        out.append("at %s: %s" % (where, error.message))
    return out


def compare_aliases(document):
    """compare writes some values twice (the reference's key and memsnap's):
    they must agree."""
    problems = []

    def same(where, obj, pairs):
        if not isinstance(obj, dict):
            return
        for ref_key, own_key in pairs:
            if ref_key in obj and own_key in obj and obj[ref_key] != obj[own_key]:
                problems.append("%s: %s = %r but %s = %r" % (where, ref_key, obj[ref_key], own_key, obj[own_key]))

    segment_pairs = [("total", "total_size"), ("allocated", "allocated_size"), ("active", "active_size"),
                     ("awaiting_free", "awaiting_free_size"), ("inactive", "inactive_size")]
    delta_pairs = [("peak_a", "peak_delta_a"), ("peak_b", "peak_delta_b"), ("peak_diff", "peak_delta_diff"),
                   ("abs_peak_a", "absolute_peak_a"), ("abs_peak_b", "absolute_peak_b"),
                   ("abs_peak_diff", "absolute_peak_diff"), ("allocs_a", "alloc_count_a"),
                   ("allocs_b", "alloc_count_b")]
    for side in ("a", "b"):
        same(".segments_" + side, document.get("segments_" + side), segment_pairs)
        detail = document.get("baseline_detail_" + side)
        if isinstance(detail, dict) and document.get("baseline_" + side) != detail.get("baseline_at_start"):
            problems.append(".baseline_%s differs from .baseline_detail_%s.baseline_at_start" % (side, side))
    for i, row in enumerate(document.get("step_results") or []):
        same(".step_results[%d]" % i, row, delta_pairs)
    whole = document.get("whole_trace")
    same(".whole_trace", whole, delta_pairs + [("unmatched_a", "unmatched_frees_a"), ("unmatched_b", "unmatched_frees_b")])
    full = document.get("full_trace")
    if full is not None and full != whole:
        problems.append(".full_trace is not null and differs from .whole_trace")
    drill = document.get("drill_down")
    if isinstance(drill, dict) and all(k in drill for k in ("peak_diff", "peak_delta_a", "peak_delta_b")):
        if drill["peak_diff"] != drill["peak_delta_b"] - drill["peak_delta_a"]:
            problems.append(".drill_down.peak_diff is not peak_delta_b - peak_delta_a")
    if isinstance(drill, dict) and all(k in drill for k in ("absolute_peak_diff", "absolute_peak_a", "absolute_peak_b")):
        if drill["absolute_peak_diff"] != drill["absolute_peak_b"] - drill["absolute_peak_a"]:
            problems.append(".drill_down.absolute_peak_diff is not absolute_peak_b - absolute_peak_a")
    return problems


def written_twice(schema, document):
    """Figures written under a reference key and again under memsnap's own,
    in the reference's meaning and in memsnap's: they must say the same."""
    problems = []
    if schema == "compare":
        problems += compare_aliases(document)
        triples = document.get("config_diffs")
        objects = document.get("allocator_settings_diffs")
        if isinstance(triples, list) and isinstance(objects, list):
            if triples != [[o.get("key"), o.get("a"), o.get("b")] for o in objects if isinstance(o, dict)]:
                problems.append(".config_diffs is not allocator_settings_diffs as [key, a, b] triples")
    elif schema == "replay_to_time":
        precise = document.get("trace_duration_precise_s")
        if isinstance(precise, float) and document.get("trace_duration_s") != round(precise, 2):
            problems.append(".trace_duration_s is not trace_duration_precise_s rounded to 2 decimals")
    elif schema == "replay_to_time_pair":
        for i, row in enumerate(document.get("sources") or []):
            if not isinstance(row, dict):
                continue
            if row.get("delta") != row.get("bytes_a", 0) - row.get("bytes_b", 0):
                problems.append(".sources[%d].delta is not bytes_a - bytes_b (the reference's A - B)" % i)
            if row.get("bytes_diff") != row.get("bytes_b", 0) - row.get("bytes_a", 0):
                problems.append(".sources[%d].bytes_diff is not bytes_b - bytes_a" % i)
    return problems


# ---------------------------------------------------------------- the schema files

def lint_schema(name, schema):
    """What the schema files promise beyond being valid JSON Schema."""
    problems = []

    def resolve(node):
        ref = node.get("$ref")
        if ref and ref.startswith("#/$defs/"):
            return schema.get("$defs", {}).get(ref[len("#/$defs/"):])
        return node

    def check_key(path, node):
        for field in ("type", "description"):
            if field not in node:
                problems.append("%s has no %r" % (path, field))
        if not isinstance(node.get("x-reference"), bool):
            problems.append("%s has no boolean x-reference" % path)
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        if "$ref" in node and resolve(node) is None:
            problems.append("%s: unresolved %s" % (path, node["$ref"]))
        if {"integer", "number"} & set(types) and not {"string", "object"} & set(types):
            unit = node.get("x-unit")
            if unit not in UNIT_WORDS:
                problems.append("%s: a number needs x-unit, one of %s" % (path, ", ".join(UNIT_WORDS)))
            elif UNIT_WORDS[unit] and UNIT_WORDS[unit] not in node.get("description", ""):
                problems.append("%s: its description does not say its unit (%r)" % (path, UNIT_WORDS[unit]))

    def visit(path, node, seen_defs):
        target = resolve(node)
        if target is None:
            return
        if node.get("$ref"):
            if node["$ref"] in seen_defs:
                return
            seen_defs = seen_defs | {node["$ref"]}
        for branch in node.get("anyOf", []):
            if "$ref" in branch:
                visit(path, branch, seen_defs)
        types = target.get("type", [])
        types = [types] if isinstance(types, str) else types
        if "object" in types and ("properties" in target or "patternProperties" in target):
            if "additionalProperties" not in target:
                problems.append("%s: an object must say additionalProperties (false, or a schema for open keys)" % (path or "."))
            for key in target.get("required", []):
                if key not in target.get("properties", {}):
                    problems.append("%s: required key %r is not a property" % (path or ".", key))
        for key, prop in target.get("properties", {}).items():
            check_key(path + "." + key, prop)
            visit(path + "." + key, prop, seen_defs)
        for pattern, prop in target.get("patternProperties", {}).items():
            check_key(path + ".<%s>" % pattern, prop)
            visit(path + ".<N>", prop, seen_defs)
        extra = target.get("additionalProperties")
        if isinstance(extra, dict):
            check_key(path + ".*", extra)
            visit(path + ".*", extra, seen_defs)
        if "items" in target:
            check_key(path + "[]", target["items"])
            visit(path + "[]", target["items"], seen_defs)

    for field in ("$schema", "title", "description", "x-command", "type"):
        if field not in schema:
            problems.append("the schema has no %r" % field)
    if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
        problems.append("$schema is not draft 2020-12")
    visit("", schema, frozenset())
    return problems


def without_reference_flags(node):
    if isinstance(node, dict):
        return {k: without_reference_flags(v) for k, v in node.items() if k != "x-reference"}
    if isinstance(node, list):
        return [without_reference_flags(v) for v in node]
    return node


def shared_definitions(schemas):
    """A definition of the same name in two files must be the same (up to
    which keys count as the reference's in that command)."""
    problems = []
    first = {}
    for name, schema in schemas.items():
        for def_name, definition in schema.get("$defs", {}).items():
            bare = without_reference_flags(definition)
            if def_name in first and first[def_name][1] != bare:
                problems.append("$defs/%s differs between %s and %s" % (def_name, first[def_name][0], SCHEMA_FILES[name]))
            first.setdefault(def_name, (SCHEMA_FILES[name], bare))
    return problems


# ---------------------------------------------------------------- running memsnap

def generate(work):
    for name, arguments in GENERATED.items():
        os.makedirs(os.path.dirname(os.path.join(work, name)), exist_ok=True)
        subprocess.run([sys.executable, GENERATOR, "--out", os.path.join(work, name)] + arguments,
                       check=True, stdout=subprocess.DEVNULL)


def run_memsnap(memsnap, work, arguments):
    """(document, None) or (None, why)."""
    arguments = [EXAMPLE if a == "@example" else a for a in arguments]
    env = dict(os.environ, NO_COLOR="1")
    try:
        run = subprocess.run([memsnap] + arguments, cwd=work, capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    # check's report comes with exit 3 when a limit is violated.
    if run.returncode != 0 and not (arguments[0] == "check" and run.returncode == 3):
        return None, "exit %d: %s" % (run.returncode, run.stderr.strip()[:500])
    try:
        return json.loads(run.stdout), None
    except ValueError as e:
        return None, "not JSON: %s" % e


def golden_schema(name, document):
    """The schema of a golden file, by its name's prefix (None: unknown)."""
    if name.startswith("replay_to_time_"):
        return "replay_to_time_pair" if isinstance(document, dict) and "file_a" in document else "replay_to_time"
    for prefix, schema in (("parse_", "parse"), ("compare_", "compare"), ("replay_step_", "replay_step"),
                           ("events_", "events"), ("segments_", "segments"), ("streams_", "streams"),
                           ("oom_", "oom"), ("explain_", "explain")):
        if name.startswith(prefix):
            return schema
    return None


# ---------------------------------------------------------------- part: schema

def expect(name, problems):
    """A check that `problems` (a list of strings) is empty; its failure shows the first few."""
    more = '' if len(problems) <= 8 else '\n    ... %d more' % (len(problems) - 8)
    with check(name):
        assert not problems, '\n    ' + '\n    '.join(problems[:8]) + more


def part_schema(memsnap, work, validator_class):
    schemas = load_schemas()
    validators = {}
    for name, schema in schemas.items():
        problems = []
        try:
            validator_class.check_schema(schema)
        except Exception as e:  # jsonschema.SchemaError, with its message
            problems.append("not a valid draft 2020-12 schema: %s" % str(e).splitlines()[0])
        problems += lint_schema(name, schema)
        expect("schema %s" % SCHEMA_FILES[name], problems)
        validators[name] = validator_class(schema)
    expect("schemas: shared definitions agree", shared_definitions(schemas))

    # The documentation is generated from the schemas.
    docs = make_docs.DOCS
    try:
        with open(docs, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        current = None
    with check("docs/json-schema.md matches the schemas"):
        assert current == make_docs.generate(), "out of date: run tests/schema/make_docs.py"

    # (a) golden files.
    for path in sorted(glob.glob(os.path.join(REPO, "tests", "golden", "*.json"))):
        name = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        schema = golden_schema(name, document)
        if schema is None:
            check.fail("golden %s: no schema for this name (map its prefix in golden_schema())" % name)
            continue
        problems = errors_of(validators[schema], document) + written_twice(schema, document)
        expect("golden %s (%s)" % (name, SCHEMA_FILES[schema]), problems)

    # (b) memsnap on generated snapshots.
    outputs = {}
    for case, schema, arguments in RUNS:
        document, why = run_memsnap(memsnap, work, arguments)
        if document is None:
            check.fail("run %s: %s" % (case, why))
            continue
        outputs[case] = document
        problems = errors_of(validators[schema], document) + written_twice(schema, document)
        expect("run %s (%s)" % (case, SCHEMA_FILES[schema]), problems)

    # Variants the cases are there to reach.
    def expect_variant(case, what, test):
        document = outputs.get(case)
        if document is None:
            return  # its run already failed
        expect("variant %s: %s" % (case, what), [] if test(document) else ["not so in memsnap's output"])

    expect_variant("compare steps in both", "step_results non-empty and full_trace null",
                   lambda d: bool(d.get("step_results")) and d.get("full_trace", 0) is None)
    expect_variant("compare no steps", "step_results empty, full_trace an object, drill_down.step \"full-trace\"",
                   lambda d: d.get("step_results") == [] and isinstance(d.get("full_trace"), dict)
                   and (d.get("drill_down") or {}).get("step") == "full-trace")
    expect_variant("parse open step", "an incomplete step with null end_us and duration_ms",
                   lambda d: any(not s.get("complete") and s.get("end_us") is None and s.get("duration_ms") is None
                                 for s in (d.get("profiler_steps") or {}).values()))
    expect_variant("parse no time", "trace_duration_s null",
                   lambda d: "trace_duration_s" in d and d["trace_duration_s"] is None)
    expect_variant("parse two devices", "per_device has two rows and oom an entry",
                   lambda d: len(d.get("per_device") or []) == 2 and len(d.get("oom") or []) >= 1)
    expect_variant("replay-to-time clamped", "clamped", lambda d: d.get("clamped") is True)
    expect_variant("events", "frames and stacks tables, a stack number per entry, no inline frames",
                   lambda d: bool(d.get("frames")) and bool(d.get("stacks")) and bool(d.get("events"))
                   and all("stack" in e and "frames" not in e for e in d["events"]))
    expect_variant("events inline frames", "no tables, each entry with its frames",
                   lambda d: "frames" not in d and "stacks" not in d and bool(d.get("events"))
                   and all("frames" in e and "stack" not in e for e in d["events"]))

    # (d) the validator can fail: renamed keys and a retyped value.
    mutations = []
    if "parse steps" in outputs:
        mutations.append(("parse", "parse: top-level segments renamed to segment",
                          outputs["parse steps"], lambda d: d.__setitem__("segment", d.pop("segments"))))
        mutations.append(("parse", "parse: file_size_bytes written as a double",
                          outputs["parse steps"], lambda d: d.__setitem__("file_size_bytes", float(d["file_size_bytes"]))))
    if "compare steps in both" in outputs:
        def rename_in_row(d):
            row = d["step_results"][0]
            row["peak_A"] = row.pop("peak_a")
        mutations.append(("compare", "compare: step_results[0].peak_a renamed to peak_A",
                          outputs["compare steps in both"], rename_in_row))
    if "replay-step all" in outputs:
        mutations.append(("replay_step", "replay-step: [0].complete written as 1",
                          outputs["replay-step all"], lambda d: d[0].__setitem__("complete", 1)))
    for schema, what, document, mutate in mutations:
        document = copy.deepcopy(document)
        mutate(document)
        with check("self-check %s fails validation" % what):
            assert errors_of(validators[schema], document), "the schema accepted it"


# ---------------------------------------------------------------- part: reference

def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "dict"


def split_path(path):
    """'.a.b[].<N>.c' -> ['a', 'b', '[]', '<N>', 'c']; '[].x' -> ['[]', 'x'].
    Keys may hold dots only as the last, example part (annotation names), so
    the caller cuts those off before."""
    tokens = []
    for match in re.finditer(r"\[\]|\.([^.\[]+)", path):
        tokens.append("[]" if match.group(0) == "[]" else match.group(1))
    if "".join("[]" if t == "[]" else "." + t for t in tokens) != path:
        raise ValueError("cannot read the path %r" % path)
    return tokens


def values_at(document, tokens):
    """Every value a path reaches ('[]': each item, '<N>': each integer-like key)."""
    current = [document]
    for token in tokens:
        following = []
        for value in current:
            if token == "[]":
                if isinstance(value, list):
                    following.extend(value)
            elif token == "<N>":
                if isinstance(value, dict):
                    following.extend(v for k, v in value.items() if re.fullmatch(r"-?[0-9]+", k))
            elif isinstance(value, dict) and token in value:
                following.append(value[token])
        current = following
    return current


def check_paths(document, paths, example_prefix):
    """Problems with memsnap's document against one reference variant's paths."""
    problems = []
    for path, expected in paths.items():
        if example_prefix and path.startswith(example_prefix + "."):
            continue  # an example annotation name: checked as a dict of ints below
        values = values_at(document, split_path(path))
        if not values:
            problems.append("%s (%s): missing" % (path, expected))
            continue
        wrong = sorted({json_type(v) for v in values if json_type(v) != expected})
        if wrong:
            problems.append("%s: reference type %s, memsnap writes %s" % (path, expected, "/".join(wrong)))
    if example_prefix:
        for value in values_at(document, split_path(example_prefix)):
            if not isinstance(value, dict) or any(json_type(v) != "int" for v in value.values()):
                problems.append("%s: not a dict of ints" % example_prefix)
                break
    return problems


def schema_node(schema, tokens):
    """The schema node a reference path names, or None."""
    node = schema

    def resolve(n):
        for _ in range(8):
            if "$ref" in n:
                n = schema["$defs"][n["$ref"][len("#/$defs/"):]]
            elif "anyOf" in n and "properties" not in n:
                refs = [b for b in n["anyOf"] if "$ref" in b]
                if not refs:
                    return n
                # keep the union's own annotations: look through to the object
                return dict(schema["$defs"][refs[0]["$ref"][len("#/$defs/"):]], **{
                    k: v for k, v in n.items() if k in ("x-reference", "type", "description")})
            else:
                return n
        return n

    for token in tokens:
        node = resolve(node)
        if token == "[]":
            node = node.get("items")
        elif token == "<N>":
            patterns = node.get("patternProperties", {})
            node = next(iter(patterns.values()), None)
        else:
            node = node.get("properties", {}).get(token)
        if node is None:
            return None
    return node


SCHEMA_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean",
                "list": "array", "dict": "object", "null": "null"}


def reference_flags(schemas, reference):
    """The x-reference flags and types of the schemas against json-keys.json."""
    problems = []
    flagged = {}  # schema name -> set of id() of nodes reached from reference paths
    for variant, paths in reference.items():
        if variant not in REFERENCE_RUNS:
            continue
        schema_name = REFERENCE_RUNS[variant][0]
        schema = schemas[schema_name]
        example = EXAMPLE_KEYS_UNDER.get(schema_name)
        for path, expected in paths.items():
            if example and path.startswith(example + "."):
                continue
            node = schema_node(schema, split_path(path))
            if node is None:
                problems.append("%s: %s is not in %s" % (variant, path, SCHEMA_FILES[schema_name]))
                continue
            if node.get("x-reference") is not True:
                problems.append("%s: %s is not flagged x-reference in %s" % (variant, path, SCHEMA_FILES[schema_name]))
            types = node.get("type", [])
            types = [types] if isinstance(types, str) else types
            if SCHEMA_TYPES[expected] not in types:
                problems.append("%s: %s has type %s in %s, the reference writes %s"
                                % (variant, path, "/".join(types), SCHEMA_FILES[schema_name], expected))
            flagged.setdefault(schema_name, set()).add(id(node))

    # The other way: every key flagged x-reference is one the reference writes.
    def walk(schema_name, schema, path, node, seen):
        node_id = id(node)
        if node_id in seen:
            return
        seen.add(node_id)
        if node.get("x-reference") is True and path and node_id not in flagged.get(schema_name, set()):
            problems.append("%s: %s is flagged x-reference but no reference path names it"
                            % (SCHEMA_FILES[schema_name], path))
        if "$ref" in node:
            node = schema["$defs"][node["$ref"][len("#/$defs/"):]]
        walk_children(schema_name, schema, path, node, seen)

    def walk_children(schema_name, schema, path, node, seen):
        for branch in node.get("anyOf", []):
            if "$ref" in branch:
                walk_children(schema_name, schema, path, schema["$defs"][branch["$ref"][len("#/$defs/"):]], seen)
        for key, prop in node.get("properties", {}).items():
            walk(schema_name, schema, path + "." + key, prop, seen)
        for prop in node.get("patternProperties", {}).values():
            walk(schema_name, schema, path + ".<N>", prop, seen)
        if "items" in node:
            walk(schema_name, schema, path + "[]", node["items"], seen)

    for schema_name, schema in schemas.items():
        if schema_name not in {run[0] for run in REFERENCE_RUNS.values()}:
            continue
        walk(schema_name, schema, "", schema, set())
    return problems


def part_reference(memsnap, work, reference_file):
    with open(reference_file, encoding="utf-8") as f:
        reference = json.load(f)["commands"]
    schemas = load_schemas()
    for variant in reference:
        if variant not in REFERENCE_RUNS:
            check.fail("reference %s: a command variant this test does not know: add it to REFERENCE_RUNS" % variant)
    expect("reference: the schemas flag exactly the reference keys (x-reference) with their types",
           reference_flags(schemas, reference))

    outputs = {}
    for variant, paths in reference.items():
        if variant not in REFERENCE_RUNS:
            continue
        schema_name, arguments = REFERENCE_RUNS[variant]
        document, why = run_memsnap(memsnap, work, arguments)
        if document is None:
            check.fail("reference %s: %s" % (variant, why))
            continue
        outputs[variant] = document
        expect("reference %s: %d paths, same types" % (variant, len(paths)),
               check_paths(document, paths, EXAMPLE_KEYS_UNDER.get(schema_name)))

    # The reference keeps an annotation's whole name ('Optimizer.step#FusedAdam.step').
    variant = "replay-step --json --all-steps FILE"
    if variant in reference and variant in outputs:
        names = [name for path in reference[variant]
                 if path.startswith("[].annotations.") for name in [path[len("[].annotations."):]]]
        names_out = {name for row in outputs[variant] if isinstance(row, dict)
                     for name in (row.get("annotations") or {})}
        problems = []
        if any("#" in name for name in names) and not any("#" in name for name in names_out):
            problems.append("no annotation name keeps its '#...' part (memsnap writes %s)" % sorted(names_out))
        expect("reference replay-step: annotation names keep the part after '#'", problems)

    # Self-check: the path check can fail.
    variant = "parse --json FILE (with profiler steps)"
    if variant in outputs:
        document = copy.deepcopy(outputs[variant])
        document["segments"]["total"] = document["segments"].pop("total_size")
        document["file_size_bytes"] = float(document["file_size_bytes"])
        document["profiler_steps"] = {k: dict(v, complete=int(v["complete"]))
                                      for k, v in document["profiler_steps"].items()}
        problems = check_paths(document, reference[variant], None)
        caught = {p.split(":")[0].split(" ")[0] for p in problems}
        wanted = {".segments.total_size", ".file_size_bytes", ".profiler_steps.<N>.complete"}
        with check("self-check reference paths: a renamed key, an int written as a double, a bool written as an int"):
            assert wanted <= caught, "not caught: %s" % sorted(wanted - caught)


# ---------------------------------------------------------------- main


@pytest.fixture(scope="module")
def generated_snapshots(work):
    os.makedirs(work, exist_ok=True)
    generate(work)
    return work


def test_every_output_matches_its_schema(memsnap, generated_snapshots):
    try:
        validator_class = strict_validator_class()
    except ImportError:
        pytest.fail("the Python module jsonschema is missing (pip install jsonschema, or Debian's "
                    "python3-jsonschema for /usr/bin/python3)")
    part_schema(memsnap, generated_snapshots, validator_class)


@pytest.mark.part("reference")
def test_the_reference_keys_are_written_with_their_types(memsnap, generated_snapshots, request):
    reference = request.config.getoption("--reference-keys")
    if not os.path.isfile(reference):
        testlib.skip_absent(f"the reference keys {reference}")
    part_reference(memsnap, generated_snapshots, reference)
