"""Running the CLI in-process as a careless or hostile user would, and checking the contract:
exit 0, or exit 2 with a located message; never a traceback; nothing left behind on failure.

``cli`` runs ``rdusim.cli.main(argv)`` inside the test process with captured stdout and
stderr (``main`` returns argparse's exit code too; a stray ``SystemExit`` counts) and measures
the wall time. ``workspace`` is a scratch copy of the shipped mappings, hardware and models
folders, so tests may edit them.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rdusim.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: a run that takes longer than this is a hang for the contract's purpose (the guards answer
#: in well under a second; this leaves room for a loaded machine and first-call imports)
GUARD_S = 5.0


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    seconds: float


def run_cli(*argv: str) -> Run:
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exit_:  # argparse's option errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return Run(code, out.getvalue(), err.getvalue(), time.perf_counter() - started)


def assert_input_error(result: Run, *fragments: str) -> None:
    """Exit 2, no traceback, within the guard time, every fragment in the message."""
    assert "Traceback" not in result.err, result.err
    assert result.code == 2, (result.code, result.err)
    assert result.seconds < GUARD_S, f"took {result.seconds:.1f} s"
    for fragment in fragments:
        assert fragment in result.err, (fragment, result.err)


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*")}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """Copies of mappings/ and hw_configs/ in a scratch folder that is the working directory."""
    shutil.copytree(ROOT / "mappings", tmp_path / "mappings")
    shutil.copytree(ROOT / "hw_configs", tmp_path / "hw_configs")
    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(previous)


@pytest.fixture(scope="session", autouse=True)
def _imported() -> None:
    """Import every subcommand once, so the first test's time measures the run, not imports."""
    from rdusim.cli import build_parser  # noqa: PLC0415

    build_parser()
