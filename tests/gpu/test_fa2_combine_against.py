"""fa2_combine.py --against: every section of run as's frozen table against the measured calls."""

from __future__ import annotations

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"


def test_frozen_sections_hold_three_models_of_32_rows():
    module = bench_script("fa2_combine")
    sections = module.frozen_sections(str(GPU / "h200-20261128as-fa2combine-predicted.txt"))
    assert list(sections) == ["(1) the model now", "(2) candidate A", "(3) candidate AF"]
    assert all(len(rows) == 32 for rows in sections.values())
    assert sections["(2) candidate A"]["b1_h8x1_l32768"] == {"combine": 25.48, "call": 39.67}


def test_the_committed_comparison_is_what_against_prints(capsys):
    module = bench_script("fa2_combine")
    assert module.main(["--compare", str(GPU / "h200-20261128as-fa2combine-kernels.csv.gz"),
                        str(GPU / "h200-20261128as-fa2combine.csv"),
                        "--against", str(GPU / "h200-20261128as-fa2combine-predicted.txt")]) == 0
    assert capsys.readouterr().out == (GPU / "h200-20261128as-fa2combine-against-frozen.txt").read_text()
