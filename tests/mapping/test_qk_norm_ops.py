"""A mapping of a model with ``attention.qk_norm`` (Qwen3) must place its per-head q_norm and
k_norm; one that leaves them out, misspells them or names them for a model without them gets a
located error (``file:line: key``), exit 2 and no traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ..cli_edits import edit as _edit
from ..cli_edits import line_of as _line_of
from ..cli_edits import run as _run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Copies of the shipped Qwen3-8B and Llama-3.1-8B decode and prefill mappings next to
    copies of the hardware they name."""
    shutil.copytree(ROOT / "hw_configs", tmp_path / "hw_configs")
    for model in ("qwen3-8b", "llama-3.1-8b"):
        (tmp_path / model).mkdir()
        for phase in ("decode", "prefill"):
            text = (ROOT / "mappings" / model / f"{phase}.yaml").read_text()
            (tmp_path / model / f"{phase}.yaml").write_text(text.replace("../../hw_configs/", "../hw_configs/"))
    return tmp_path


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_qwen3_mapping_listing_the_qk_norms_validates(folder, capsys, phase):
    code, _ = _run(capsys, "validate", str(folder / "qwen3-8b" / f"{phase}.yaml"))
    assert code == 0
    assert "q_norm, k_norm" in (folder / "qwen3-8b" / f"{phase}.yaml").read_text()


@pytest.mark.parametrize("command", ["validate", "simulate"])
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_qwen3_mapping_without_the_qk_norms_names_them(folder, capsys, command, phase):
    mapping = folder / "qwen3-8b" / f"{phase}.yaml"
    _edit(mapping, "q_norm, k_norm, ", "")
    code, err = _run(capsys, command, str(mapping))
    assert code == 2
    assert f"{mapping}:{_line_of(mapping, '  dense:')}: layers.dense: ops in no kernel: q_norm, k_norm" in err


def test_misspelled_qk_norm_suggests_it(folder, capsys):
    mapping = folder / "qwen3-8b" / "decode.yaml"
    _edit(mapping, "q_norm, k_norm", "qnorm, k_norm")
    code, err = _run(capsys, "validate", str(mapping))
    assert code == 2
    line = _line_of(mapping, "qnorm")
    assert f"{mapping}:{line}: layers.dense[0].ops[3]: unknown op 'qnorm' for dense layers; did you mean 'q_norm'?" in err
    assert "layers.dense: ops in no kernel: q_norm" in err


def test_qk_norms_for_a_model_without_them_say_so(folder, capsys):
    mapping = folder / "llama-3.1-8b" / "decode.yaml"
    _edit(mapping, "kv_proj, rope", "kv_proj, q_norm, k_norm, rope")
    code, err = _run(capsys, "validate", str(mapping))
    assert code == 2
    line = _line_of(mapping, "q_norm")
    for j, name in ((3, "q_norm"), (4, "k_norm")):
        assert (f"{mapping}:{line}: layers.dense[0].ops[{j}]: unknown op {name!r} for dense layers; "
                "llama-3.1-8b's model card does not set attention.qk_norm (Qwen3's per-head norms)") in err


def test_qk_norm_in_the_head_kernels_of_qwen3_is_an_unknown_op_there(folder, capsys):
    mapping = folder / "qwen3-8b" / "decode.yaml"
    _edit(mapping, "ops: [embed]", "ops: [embed, q_norm]")
    code, err = _run(capsys, "validate", str(mapping))
    assert code == 2
    assert "layers.head[0].ops[1]: unknown op 'q_norm' for head layers" in err
    assert "does not set attention.qk_norm" not in err
