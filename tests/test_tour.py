"""The notebook tour (docs/tour.ipynb) runs from top to bottom on the installed library."""
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def test_the_tour_notebook_runs(tmp_path):
    nb = nbformat.read(ROOT / "docs/tour.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = {i: "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
               for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    text = "\n".join(outputs.values())
    assert "adapter attention: 6 layers" in text and "baseline accuracy:" in text
    assert "top 1 heads ablated" in text and "without the top 2 heads" in text
    page = tmp_path / "tour-explorer.html"
    assert page.is_file() and "gna-data" in page.read_text()
