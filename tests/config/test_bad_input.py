"""One test per class of bad input: the message names file, line and key; exit code 2;
no traceback; nothing written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ..cli_edits import edit as _edit
from ..cli_edits import line_of as _line_of
from ..cli_edits import run as _run

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "mappings" / "deepseek-r1" / "prefill-snapstream.yaml"


@pytest.fixture
def mapping(tmp_path: Path) -> Path:
    """A copy of the shipped mapping next to copies of the hardware it names."""
    (tmp_path / "m").mkdir()
    shutil.copytree(ROOT / "hw_configs", tmp_path / "hw_configs")
    target = tmp_path / "m" / "x.yaml"
    target.write_text(SOURCE.read_text().replace("../../hw_configs/", "../hw_configs/"))
    return target


def test_unknown_key_suggests_the_right_one(mapping, capsys):
    _edit(mapping, "  chunk_tokens: 4096", "  chunk_tokns: 4096")
    code, err = _run(capsys, "simulate", str(mapping))
    assert code == 2
    line = _line_of(mapping, "chunk_tokns")
    assert f"{mapping}:{line}: defaults.chunk_tokns: unknown key 'chunk_tokns'; did you mean 'chunk_tokens'?" in err


def test_wrong_type(mapping, capsys):
    _edit(mapping, "  seq_len: 131072", "  seq_len: lots")
    code, err = _run(capsys, "simulate", str(mapping))
    assert code == 2
    assert re.search(rf"{re.escape(str(mapping))}:{_line_of(mapping, 'seq_len: lots')}: workload\.seq_len: .*integer", err)


def test_bad_unit(mapping, capsys):
    socket = mapping.parent.parent / "hw_configs" / "sn40l.yaml"
    _edit(socket, 'bandwidth: "1.6 TB/s"', 'bandwidth: "1.6 TB"')
    code, err = _run(capsys, "simulate", str(mapping))
    assert code == 2
    line = _line_of(socket, '"1.6 TB"')
    assert f"{socket}:{line}: memory.hbm.bandwidth: unit 'TB' is not a bytes_per_s unit; write e.g. '1.6 TB/s'" in err


def test_bare_number_for_a_quantity(mapping, capsys):
    socket = mapping.parent.parent / "hw_configs" / "sn40l.yaml"
    _edit(socket, 'latency: "2 us"', "latency: 2")
    code, err = _run(capsys, "validate", str(socket))
    assert code == 2
    assert f"{socket}:{_line_of(socket, 'latency: 2')}: p2p.latency: a bare number is ambiguous" in err


def test_missing_file(tmp_path, capsys):
    code, err = _run(capsys, "simulate", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert f"{tmp_path / 'nope.yaml'}: file not found" in err


def test_missing_referenced_hardware(mapping, capsys):
    _edit(mapping, "sn40l-16.yaml", "sn40l-61.yaml")
    code, err = _run(capsys, "simulate", str(mapping))
    assert code == 2
    hw = mapping.parent / "../hw_configs/sn40l-61.yaml"
    assert f"{mapping}:{_line_of(mapping, 'hardware:')}: hardware: {hw}: file not found" in err


def test_infeasible_sram_gives_the_numbers(mapping, capsys):
    _edit(mapping, "  chunk_tokens: 4096", "  chunk_tokens: 65536")
    code, err = _run(capsys, "simulate", str(mapping))
    assert code == 2
    assert re.search(r"layers\.(moe|dense)\[0\]: kernel 'QKV' needs [\d.]+ GiB of SRAM per socket but a socket has "
                     r"520\.00 MiB; try chunk_tokens <= \d+ \(now 65536\)", err)
    dense_qkv = [i for i, line in enumerate(mapping.read_text().splitlines(), 1) if "kernel: QKV" in line][1]
    assert f"{mapping}:{dense_qkv}: layers.dense[0]: kernel 'QKV' needs" in err


def test_bad_degree(mapping, capsys):
    _edit(mapping, "  tp: 16", "  tp: 6")
    code, err = _run(capsys, "simulate", str(mapping))
    assert code == 2
    assert "degree 6 does not divide heads=128 of op 'q_b_proj'" in err
    assert "which does not fit or divide the 16 sockets" in err


def test_unknown_op_suggests(mapping, capsys):
    _edit(mapping, "ops: [attention]", "ops: [atention]")
    code, err = _run(capsys, "validate", str(mapping))
    assert code == 2
    assert "unknown op 'atention' for moe layers; did you mean 'attention'?" in err


def test_override_goes_through_validation(mapping, capsys):
    code, err = _run(capsys, "simulate", str(mapping), "--set", "workload.seq_len=-5")
    assert code == 2
    assert f"{mapping} (--set 'workload.seq_len=-5'): workload.seq_len: Input should be greater than 0" in err


def test_nothing_half_written(mapping, tmp_path, capsys):
    _edit(mapping, "  tp: 16", "  tp: 6")
    out = tmp_path / "out.json"
    code, _ = _run(capsys, "simulate", str(mapping), "--format", "json", "--out", str(out))
    assert code == 2 and not out.exists()
    assert not list(tmp_path.glob(".out.json*"))


def test_duplicate_key(mapping, capsys):
    _edit(mapping, "  batch: 1\n", "  batch: 1\n  batch: 2\n")
    code, err = _run(capsys, "validate", str(mapping))
    assert code == 2 and "workload.batch: duplicate key" in err
