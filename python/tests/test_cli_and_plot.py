"""The command line the wheel installs, and the timeline (HTML, notebook, terminal)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import memsnap
from conftest import CLI, EXAMPLE_A, EXAMPLE_B, raises_code, run_cli


def test_console_script_and_python_m_run_the_cli() -> None:
    status, out, _ = run_cli("--version")
    assert status == 0 and out.strip() == f"memsnap {memsnap.__version__}"
    module = subprocess.run(
        [sys.executable, "-m", "memsnap", "parse", str(EXAMPLE_A), "--json"],
        capture_output=True, text=True, check=True,
    )
    assert json.loads(module.stdout) == memsnap.load(str(EXAMPLE_A)).parse()
    # a bare file is `explain`, as with the C++ binary
    status, out, _ = run_cli(str(EXAMPLE_A))
    assert status == 0 and "peak" in out


def test_cli_exit_statuses(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a pickle at all")
    status, _, err = run_cli("parse", str(bad))
    assert status == 1 and err.startswith(f"memsnap: {bad}: ")
    status, _, err = run_cli("parse", str(EXAMPLE_A), "--top", "-1")
    assert status == 2 and "--top" in err
    status, _, _ = run_cli("check", str(EXAMPLE_A), "--max-peak", "1KiB")
    assert status == 3


def test_cli_output_to_a_closed_pipe_ends_quietly() -> None:
    shell = subprocess.run(
        f"'{CLI}' events '{EXAMPLE_A}' | head -c 10 >/dev/null; echo ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, check=True,
    )
    assert shell.stdout.strip() in ("0", "141") and shell.stderr == ""


def test_plot_html_text_and_notebook_repr(tmp_path: Path) -> None:
    a, b = memsnap.load(str(EXAMPLE_A)), str(EXAMPLE_B)
    plot = memsnap.plot([a, b], labels=["batch 1x", "batch 1.5x"])
    page = plot.html
    assert page.lstrip().lower().startswith("<!doctype html") and "batch 1.5x" in page
    assert "http://" not in page.split("<script")[0]  # offline: nothing fetched
    saved = plot.save(tmp_path / "t.html")
    assert Path(saved).read_text(encoding="utf-8") == page
    shown = plot._repr_html_()
    assert shown.startswith("<iframe") and "srcdoc=" in shown and "&lt;" in shown
    status, expected, _ = run_cli(
        "plot", str(EXAMPLE_A), b, "--labels", "batch 1x", "batch 1.5x",
        "--text", "--width", "60", "--height", "8",
    )
    assert status == 0 and plot.text(width=60, height=8) == expected
    assert "training_steps.pickle.gz" in a.plot().text()


def page_runs(page: str) -> list:
    start = page.index(">", page.index('<script id="memsnap-data" type="application/json">')) + 1
    return json.loads(page[start:page.index("</script>", start)])["runs"]


def test_plot_whatif_draws_the_models_reserved_line_as_the_cli(tmp_path: Path) -> None:
    snapshot = memsnap.load(str(EXAMPLE_A))
    page = snapshot.plot(whatif={"expandable_segments": True}).html
    line = page_runs(page)[0]["whatif"]
    table = snapshot.whatif("expandable_segments:True")
    assert line["settings"] == "expandable_segments:True" and line["possible"]
    assert line["peak_reserved"] == table["runs"][1]["peak_reserved"]
    out = tmp_path / "cli.html"
    status, _, _ = run_cli("plot", str(EXAMPLE_A), "--whatif", "expandable_segments:True",
                           "-o", str(out))
    assert status == 0 and page_runs(out.read_text(encoding="utf-8"))[0]["whatif"] == line
    assert page_runs(snapshot.plot().html)[0]["whatif"] is None
    with raises_code("bad_parameter"):  # a setting the model does not know
        _ = snapshot.plot(whatif="backend:cudaMallocAsync").html


def test_the_in_process_cli_shares_no_state_with_threads_beside_it(tmp_path: Path) -> None:
    """Issue 40, finding 1: the in-process command (memsnap._core.run_cli)
    in one thread while others call ranks() and check(): no crash, every
    answer whole and the same as alone."""
    import concurrent.futures

    paths = [str(EXAMPLE_A), str(EXAMPLE_B)]
    ranks_alone = memsnap.ranks(paths)
    check_alone = memsnap.check(str(EXAMPLE_A), max_peak="100GiB")

    def cli(k: int) -> str:
        out = tmp_path / f"summaries_{k}"
        status = memsnap._core.run_cli(["memsnap", "summarize", str(EXAMPLE_A), "-o", str(out)])
        assert status == 0
        return (out / "training_steps.summary.json").read_text(encoding="utf-8")

    def reports(_: int) -> None:
        assert memsnap.ranks(paths) == ranks_alone
        assert memsnap.check(str(EXAMPLE_A), max_peak="100GiB") == check_alone

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        written = [pool.submit(cli, k) for k in range(8)]
        checked = [pool.submit(reports, k) for k in range(16)]
        texts = {future.result() for future in written}
        for future in checked:
            future.result()
    assert len(texts) == 1 and json.loads(texts.pop())["file"]["path"].endswith("training_steps.pickle.gz")


def test_import_is_small_and_leaves_numpy_for_tables() -> None:
    # A report needs neither numpy nor pandas: the RSS of a Snapshot stays the core's.
    code = (
        "import sys, memsnap; s = memsnap.load(sys.argv[1]); s.parse(); "
        "assert 'numpy' not in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code, str(EXAMPLE_A)], check=True)


def test_every_command_of_the_cli_is_there() -> None:
    status, out, _ = run_cli("--help")
    assert status == 0
    listed = out.split("Subcommands:")[1].split("Examples:")[0]
    commands = [line.split()[0] for line in listed.splitlines() if line.strip()]
    assert {"explain", "parse", "compare", "replay-to-time", "replay-step", "plot", "oom",
            "segments", "summarize", "ranks", "check", "dump", "events"} <= set(commands)
    for command in commands:
        status, out, _ = run_cli(command, "--help")
        assert status == 0 and f"memsnap {command}" in out
