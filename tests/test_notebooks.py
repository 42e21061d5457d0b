"""Execute every notebook in notebooks/ in a real Jupyter kernel, on small inputs.

The kernel is nbclient's ``python3``: jupyter_client starts it with ``sys.executable`` (the
interpreter running pytest), so it sees the same environment and the same rdusim. The
environment variables below tell notebooks to keep their runs small; each notebook reads
the ones it needs in its parameters cell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SMALL_ENV = {
    "RDUSIM_NB_SMALL": "1",
    "RDUSIM_NB_SEQ_LENS": "8192,16384",
    "MPLBACKEND": "Agg",
}
CELL_TIMEOUT_S = 300


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SMALL_ENV.items():
        monkeypatch.setenv(name, value)  # the kernel process inherits this environment
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # raises CellExecutionError, with the failing cell's traceback
    executable = nb.cells[-1].outputs[0]["text"].strip()
    assert Path(executable).resolve() == Path(sys.executable).resolve()


def test_notebooks_are_stripped() -> None:
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name}: outputs not stripped"
