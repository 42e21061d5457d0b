"""Helpers of the tests that edit a copied YAML document and run the CLI on it (bad input: exit 2,
located, no traceback)."""

from __future__ import annotations

from pathlib import Path

from rdusim.cli import main


def run(capsys, *argv: str) -> tuple[int, str]:
    """The CLI's exit code and stderr for ``argv``; never a traceback."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def edit(path: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in the file (which must hold it) with ``new``."""
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def line_of(path: Path, needle: str) -> int:
    """The 1-based number of the file's first line holding ``needle``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)
