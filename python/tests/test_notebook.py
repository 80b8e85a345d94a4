"""examples/memsnap_in_a_notebook.ipynb runs top to bottom in a Jupyter kernel (nbclient)."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient

import memsnap
from conftest import EXAMPLE_A, ROOT


def test_example_notebook_runs_and_shows_the_reports() -> None:
    path = ROOT / "examples" / "memsnap_in_a_notebook.ipynb"
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in code:
        assert not [out for out in cell.outputs if out.output_type == "error"], cell.source

    def text(cell) -> str:  # type: ignore[no-untyped-def]
        parts = []
        for out in cell.outputs:
            parts.append(out.get("text", ""))
            parts.append(out.get("data", {}).get("text/plain", ""))
        return "".join(parts)

    peak = memsnap.load(str(EXAMPLE_A)).explain()["peak"]
    assert text(code[0]).startswith("<memsnap.Snapshot 'training_steps.pickle.gz'")
    assert f"absolute peak {peak['absolute'] / 2**30:.2f} GiB" in text(code[1])
    assert peak["by_source"]["rows"][0]["source"] in text(code[1])
    first_row = text(code[2]).splitlines()[1].split()
    assert first_row == ["train@train.py:171", "12587272192"]
    html = code[3].outputs[0]["data"]["text/html"]
    assert html.startswith("<iframe") and "batch 1.5x" in html
