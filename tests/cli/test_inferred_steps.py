"""Steps without ProfilerStep marks: training iterations inferred from the optimizer.

Megatron Bridge's snapshots carry thousands of record_function marks and never
ProfilerStep#N; each iteration still ends with one Optimizer.step#... mark and
begins with the data loader's next batch. Files without marks still show the
optimizer in their allocations' frames (torch/optim/). These tests generate
such files with tests/gen/make_snapshot.py and check that:

* --steps auto (the default) infers one step per iteration and every report
  says so (text and JSON: steps_source);
* on a file with both ProfilerStep and optimizer marks, the inferred steps
  agree with the markers: as many, each inside its ProfilerStep window, with
  the same absolute peak;
* --steps profiler / none / optimizer choose, and a file without steps says so.

Run by CTest (tests/CMakeLists.txt) with --memsnap set to the binary (tests/conftest.py).
"""
import json
import os
import pickle
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = os.path.join(os.path.dirname(HERE), "gen", "make_snapshot.py")
ITERATIONS = 5
# The generator's last step runs until the event budget is spent, which cuts
# its last iteration short: the iterations it completes.
COMPLETE = ITERATIONS - 1


def generate(path, *flags):
    subprocess.run([sys.executable, GENERATOR, "--out", str(path), "--events", "3000",
                    "--steps", str(ITERATIONS), "--seed", "11", *flags], check=True)
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    work = tmp_path_factory.mktemp("inferred_steps")
    bridge = generate(work / "bridge.pickle", "--bridge")
    both = generate(work / "both.pickle", "--marks")
    # The Bridge run without any marks: only its frames say where the optimizer ran.
    frames_only = str(work / "frames_only.pickle")
    with open(bridge, "rb") as f:
        snapshot = pickle.load(f)
    snapshot["external_annotations"] = []
    with open(frames_only, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    plain = generate(work / "plain.pickle", "--no-time")
    larger = generate(work / "bridge_larger.pickle", "--bridge", "--batch-scale", "1.5")
    return {"bridge": bridge, "both": both, "frames_only": frames_only, "no_time": plain,
            "bridge_larger": larger}


def run(memsnap, *args, expect=0):
    done = subprocess.run([memsnap, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == expect, (args, done.returncode, done.stderr[-600:])
    return done


def steps_json(memsnap, path, *flags):
    return json.loads(run(memsnap, "replay-step", path, "--all-steps", "--json", *flags).stdout)


def table_peaks(memsnap, path, *flags, only=None):
    """{step: (peak delta, absolute peak)} of the complete steps, from replay-step --json."""
    return {s["step"]: (s["peak_delta"], s["absolute_peak"]) for s in steps_json(memsnap, path, *flags)
            if s["complete"] and (only is None or s["step"] in only)}


def test_bridge_iterations_come_from_the_optimizer_marks(memsnap, files):
    steps = steps_json(memsnap, files["bridge"])
    complete = [s for s in steps if s["complete"]]
    assert len(complete) == COMPLETE and len(steps) == ITERATIONS
    assert not steps[-1]["complete"]  # cut by the end of the trace
    assert [s["step"] for s in steps] == list(range(len(steps)))
    for step in steps:
        assert step["steps_source"] == {"kind": "optimizer_annotations", "inferred": True,
                                        "from": "Optimizer.step#FusedAdam.step"}
        # Each iteration holds its optimizer step and its forward.
        if step["complete"]:
            assert step["annotations"].get("Optimizer.step#FusedAdam.step") == 1
            assert step["annotations"].get("CustomFSDP.forward") == 1


def test_every_report_says_the_steps_are_inferred(memsnap, files):
    path = files["bridge"]
    for command in (["parse"], ["explain"], ["replay-step", "--all-steps"],
                    ["compare", files["bridge_larger"]]):
        text = run(memsnap, command[0], path, *command[1:]).stdout
        assert "Steps are inferred" in text and "Optimizer.step#FusedAdam.step" in text, command
    parse = json.loads(run(memsnap, "parse", path, "--json").stdout)
    assert parse["steps_source"]["inferred"] is True
    assert len(parse["profiler_steps"]) >= ITERATIONS
    explain = json.loads(run(memsnap, "explain", path, "--json").stdout)
    assert explain["steps"]["count"] == COMPLETE
    assert explain["steps"]["source"]["kind"] == "optimizer_annotations"
    compare = json.loads(run(memsnap, "compare", path, files["bridge_larger"], "--json").stdout)
    assert compare["steps_source_a"]["inferred"] and compare["steps_source_b"]["inferred"]
    assert len(compare["matching_steps"]) == COMPLETE


def test_inferred_steps_agree_with_profiler_markers(memsnap, files):
    path = files["both"]
    profiler = {s["step"]: s for s in steps_json(memsnap, path)}
    optimizer = {s["step"]: s for s in steps_json(memsnap, path, "--steps", "optimizer")}
    assert all(s["steps_source"]["kind"] == "profiler" for s in profiler.values())
    assert all(s["steps_source"]["kind"] == "optimizer_annotations" for s in optimizer.values())
    complete_profiler = sorted(n for n, s in profiler.items() if s["complete"])
    complete_optimizer = sorted(n for n, s in optimizer.items() if s["complete"])
    assert complete_profiler == list(range(ITERATIONS))
    assert complete_optimizer == list(range(COMPLETE))
    parse_profiler = json.loads(run(memsnap, "parse", path, "--json").stdout)["profiler_steps"]
    parse_optimizer = json.loads(
        run(memsnap, "parse", path, "--json", "--steps", "optimizer").stdout)["profiler_steps"]
    for n in complete_optimizer:
        outer, inner = parse_profiler[str(n)], parse_optimizer[str(n)]
        assert outer["start_us"] <= inner["start_us"] <= inner["end_us"] <= outer["end_us"], n
    assert (table_peaks(memsnap, path, "--steps", "profiler", only=complete_optimizer)
            == table_peaks(memsnap, path, "--steps", "optimizer"))


def test_iterations_from_frames_without_marks(memsnap, files):
    steps = steps_json(memsnap, files["frames_only"])
    assert all(s["steps_source"]["kind"] == "optimizer_frames" for s in steps)
    assert len([s for s in steps if s["complete"]]) >= COMPLETE
    text = run(memsnap, "parse", files["frames_only"]).stdout
    assert "Steps are inferred" in text and "torch/optim/" in text
    # Iteration n by frames holds the end of the optimizer step the marks end
    # iteration n with, and peaks as high (the peak is in forward and backward).
    by_marks = json.loads(run(memsnap, "parse", files["bridge"], "--json").stdout)["profiler_steps"]
    by_frames = json.loads(run(memsnap, "parse", files["frames_only"], "--json").stdout)["profiler_steps"]
    for n in range(COMPLETE):
        marks, frames = by_marks[str(n)], by_frames[str(n)]
        assert frames["start_us"] <= marks["end_us"] <= frames["end_us"], n
    absolute = lambda peaks: {n: peak[1] for n, peak in peaks.items()}
    assert absolute(table_peaks(memsnap, files["bridge"])) == absolute(
        table_peaks(memsnap, files["frames_only"], only=range(COMPLETE)))


def test_steps_flag_chooses(memsnap, files):
    path = files["both"]
    # none: no steps at all; replay-step explains and exits 1.
    parse = json.loads(run(memsnap, "parse", path, "--json", "--steps", "none").stdout)
    assert parse["profiler_steps"] == {} and parse["steps_source"]["kind"] == "none"
    run(memsnap, "replay-step", path, "--all-steps", "--steps", "none", expect=1)
    # profiler on a Bridge file: there are no markers, and nothing is inferred.
    bridge = json.loads(run(memsnap, "parse", files["bridge"], "--json", "--steps", "profiler").stdout)
    assert bridge["profiler_steps"] == {} and bridge["steps_source"]["inferred"] is False
    # A word that is no choice is a usage error naming the choices.
    done = run(memsnap, "parse", path, "--steps", "optimiser", expect=2)
    assert "optimizer" in done.stderr
    # Without timestamps nothing can be inferred (windows are times).
    plain = json.loads(run(memsnap, "parse", files["no_time"], "--json", "--steps", "optimizer").stdout)
    assert plain["profiler_steps"] == {}
