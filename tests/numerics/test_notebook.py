"""Execute notebooks/03-kv-policies-real-model.ipynb at its small size in a real kernel."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "03-kv-policies-real-model.ipynb"


@pytest.mark.slow
def test_notebook_runs_small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RDUSIM_NB_SMALL", "1")  # the kernel process inherits this environment
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()  # raises CellExecutionError with the failing cell's traceback
    images = [
        output
        for cell in nb.cells
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert len(images) == 2  # the heat map and the divergence / recall figure


def test_notebook_is_stripped() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None
