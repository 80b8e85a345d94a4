#!/usr/bin/env python3
"""Golden outputs: every report, text and JSON, on real fixtures and generated files.

    python3 -m pytest tests/golden/check_golden.py --memsnap PATH [--part fixtures [--fixtures-dir DIR]]
    python3 tests/golden/check_golden.py --memsnap PATH --update [--fixtures DIR]

Runs memsnap with cwd set to the folder of the input so that file names in the
output do not depend on where the checkout lives. A missing golden file is a
failure; `--update` (re)writes the golden files of every case whose input is
present after a deliberate change: review the diff before committing.

The cases come in three places, by where their input lives: generated (written
here by tests/gen/make_snapshot.py), repo (examples/) and fixtures
(--fixtures-dir, ../shared/fixtures/real by default). CTest runs `golden`
(generated and repo, which never skip) and `golden_fixtures` (skipped, exit
77, where the fixtures are absent).
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR = os.path.join(REPO, "tests", "gen", "make_snapshot.py")

sys.path.insert(0, os.path.dirname(HERE))  # tests/, when run as a script to --update
import testlib  # noqa: E402

# (golden name, where: "fixtures" | "generated" | "repo", arguments)
CASES = [
    ("explain_multi_device_oom", "fixtures", ["explain", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("explain_multi_device_oom.json", "fixtures", ["explain", "--json", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("explain_no_trace", "fixtures", ["explain", "volcengine_verl__mem.pickle"]),
    ("explain_example", "repo", ["explain", "examples/training_steps.pickle.gz"]),
    ("parse_cpp_frames", "fixtures", ["parse", "kkaitlyn111_cs336-a2-systems__memory_ctx128_fullstep.pickle"]),
    ("parse_cpp_frames.json", "fixtures", ["parse", "--json", "kkaitlyn111_cs336-a2-systems__memory_ctx128_fullstep.pickle"]),
    ("parse_multi_device_oom", "fixtures", ["parse", "--device", "1", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("parse_multi_device_oom.json", "fixtures", ["parse", "--json", "--device", "1", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("parse_legacy_history", "fixtures", ["parse", "Yiyi-philosophy_LLM-inference__oom_snapshot.pickle"]),
    ("parse_no_time", "fixtures", ["parse", "cranberrii_ftcourse__memory_snapshot.pickle"]),
    ("parse_graph_pools", "fixtures", ["parse", "volcengine_verl__mem.pickle"]),
    ("parse_segment_list", "fixtures", ["parse", "nonconforming/Muduard_LayoutEditing__memory_snapshot@33ade60.pkl"]),
    ("parse_empty", "fixtures", ["parse", "angelolmn_HitsBE__my_snapshot.pickle"]),
    ("compare_real", "fixtures", ["compare", "Wedsonlin_assignment2-systems__medium_128_training_memory_snapshot.pickle",
                                  "Wedsonlin_assignment2-systems__medium_512_training_memory_snapshot.pickle"]),
    ("compare_real.json", "fixtures", ["compare", "--json", "Wedsonlin_assignment2-systems__medium_128_training_memory_snapshot.pickle",
                                       "Wedsonlin_assignment2-systems__medium_512_training_memory_snapshot.pickle"]),
    ("replay_to_time_cpp_frames", "fixtures", ["replay-to-time", "--time", "0.15", "kkaitlyn111_cs336-a2-systems__memory_ctx128_fullstep.pickle"]),
    ("replay_to_time_cpp_frames.json", "fixtures", ["replay-to-time", "--json", "--time", "0.15", "kkaitlyn111_cs336-a2-systems__memory_ctx128_fullstep.pickle"]),
    ("replay_to_time_pair", "fixtures", ["replay-to-time", "--time", "0.2", "kkaitlyn111_cs336-a2-systems__memory_ctx128_fullstep.pickle",
                                         "kkaitlyn111_cs336-a2-systems__memory_files_memory_ctx512_fullstep_.pickle"]),
    ("replay_to_time_pair.json", "fixtures", ["replay-to-time", "--json", "--time", "0.2", "kkaitlyn111_cs336-a2-systems__memory_ctx128_fullstep.pickle",
                                              "kkaitlyn111_cs336-a2-systems__memory_files_memory_ctx512_fullstep_.pickle"]),
    ("segments_expandable_oom", "fixtures", ["segments", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("segments_expandable_oom.json", "fixtures", ["segments", "--json", "--device", "1", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("segments_legacy_history", "fixtures", ["segments", "Yiyi-philosophy_LLM-inference__oom_snapshot.pickle"]),
    ("segments_graph_pools", "fixtures", ["segments", "--top", "8", "volcengine_verl__mem.pickle"]),
    ("segments_example", "repo", ["segments", "--top", "5", "examples/training_steps.pickle.gz"]),
    ("streams_side_streams", "fixtures", ["streams", "Maphsge4_select_n__snapshot@04d383c.pickle"]),
    ("streams_side_streams.json", "fixtures", ["streams", "--json", "--top", "3", "Maphsge4_select_n__snapshot@04d383c.pickle"]),
    ("streams_example", "repo", ["streams", "examples/training_steps.pickle.gz"]),
    ("oom_real", "fixtures", ["oom", "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("oom_real.json", "fixtures", ["oom", "--json", "--window", "0.2", "--capacity", "81559MiB",
                                   "Constructor-Sun_code_location__memory_snapshot.pickle"]),
    ("oom_none", "repo", ["oom", "examples/training_steps.pickle.gz"]),
    ("oom_peak", "repo", ["oom", "--at", "peak", "--capacity", "16GiB", "examples/training_steps.pickle.gz"]),
    ("oom_peak.json", "repo", ["oom", "--json", "--at", "peak", "examples/training_steps.pickle.gz"]),
    ("oom_peak_legacy_history", "fixtures", ["oom", "--at", "peak", "Yiyi-philosophy_LLM-inference__oom_snapshot.pickle"]),
    ("oom_generated", "generated", ["oom", "two_devices_oom.pickle"]),
    ("parse_example", "repo", ["parse", "examples/training_steps.pickle.gz"]),
    ("parse_example.json", "repo", ["parse", "--json", "examples/training_steps.pickle.gz"]),
    ("replay_step_all", "repo", ["replay-step", "--all-steps", "examples/training_steps.pickle.gz"]),
    ("replay_step_all.json", "repo", ["replay-step", "--all-steps", "--json", "examples/training_steps.pickle.gz"]),
    ("replay_step_one", "repo", ["replay-step", "--step", "3", "--frame-depth", "2", "examples/training_steps.pickle.gz"]),
    ("compare_generated", "generated", ["compare", "small_steps.pickle", "large_steps.pickle"]),
    ("compare_generated.json", "generated", ["compare", "--json", "small_steps.pickle", "large_steps.pickle"]),
    ("compare_generated_step", "generated", ["compare", "--step", "2", "--top", "5", "small_steps.pickle", "large_steps.pickle"]),
    ("replay_step_cpp_frames", "generated", ["replay-step", "--step", "1", "all_stacks.pickle"]),
    ("plot_text", "generated", ["plot", "--text", "--width", "60", "--height", "12", "small_steps.pickle", "large_steps.pickle"]),
]

GENERATED = {
    "small_steps.pickle": ["--events", "3000", "--steps", "6", "--marks", "--seed", "11"],
    "large_steps.pickle": ["--events", "4500", "--steps", "6", "--marks", "--seed", "12"],
    "all_stacks.pickle": ["--events", "2000", "--steps", "4", "--stacks", "all", "--seed", "13"],
    "two_devices_oom.pickle": ["--events", "2000", "--devices", "2", "--oom", "--seed", "14"],
}


def make_generated(folder):
    os.makedirs(folder, exist_ok=True)
    for name, generator_args in GENERATED.items():
        subprocess.run([sys.executable, GENERATOR, "--out", os.path.join(folder, name)] + generator_args,
                       check=True)


def golden_cases(memsnap, folders, update=False):
    """Runs the cases whose input lives in one of `folders` (place -> folder)
    and compares each output with its golden file, or writes it (update).
    Returns the failures, one text each."""
    failures = []
    for name, place, command in CASES:
        if place not in folders:
            continue
        env = dict(os.environ, NO_COLOR="1")
        run = subprocess.run([memsnap] + command, cwd=folders[place], capture_output=True, text=True, env=env,
                             timeout=300)
        if run.returncode != 0:
            failures.append(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
            continue
        path = os.path.join(HERE, name if name.endswith(".json") else name + ".txt")
        if update:
            with open(path, "w") as f:
                f.write(run.stdout)
            print(f"WROTE {os.path.relpath(path, REPO)}")
            continue
        if not os.path.exists(path):
            # Writing it here would make a new case pass unseen.
            failures.append(f"{name}: no golden file {os.path.relpath(path, REPO)} (write it with --update, "
                            "then review it)")
            continue
        with open(path) as f:
            expected = f.read()
        if expected != run.stdout:
            diff = "".join(difflib.unified_diff(expected.splitlines(True), run.stdout.splitlines(True), "golden",
                                                "got", n=2))
            failures.append(f"{name}: output differs from {os.path.relpath(path, REPO)}\n{diff[:4000]}")
        else:
            print(f"ok   {name}")
    return failures


def test_golden_outputs_of_generated_and_bundled_files(memsnap, work):
    generated = os.path.join(work, "golden")
    make_generated(generated)
    failures = golden_cases(memsnap, {"generated": generated, "repo": REPO})
    assert not failures, "\n".join(failures)


@pytest.mark.fixtures
def test_golden_outputs_of_the_fixtures(memsnap, fixtures_dir):
    failures = golden_cases(memsnap, {"fixtures": fixtures_dir})
    assert not failures, "\n".join(failures)


def main():
    """--update: (re)writes the golden files of every case whose input is here."""
    parser = argparse.ArgumentParser(description="Rewrite the golden files after a deliberate change.")
    parser.add_argument("--memsnap", required=True)
    parser.add_argument("--update", action="store_true", required=True,
                        help="write the golden files (the tests compare: python3 -m pytest this file)")
    parser.add_argument("--fixtures", default=testlib.DEFAULT_FIXTURES)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as generated:
        make_generated(generated)
        folders = {"generated": generated, "repo": REPO}
        if os.path.isdir(args.fixtures):
            folders["fixtures"] = args.fixtures
        failures = golden_cases(os.path.abspath(args.memsnap), folders, update=True)
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
