"""Run au's reader (benchmarks/gpu/clock_run_au_read.py) on the committed files: row spans from the
stamped run logs, the end-of-row clock from the nvidia-smi samples, and the frozen table."""

from __future__ import annotations

from pathlib import Path

from .scripts import ROOT, bench_script

PREFIX = ROOT / "benchmarks/gpu/h200x2-20261128au"


def test_row_spans_run_from_the_previous_stamped_line():
    au = bench_script("clock_run_au_read")
    spans = au.spans(Path(f"{PREFIX}-70b-run.log"))
    assert [(name, round(us)) for name, _, _, us in spans] == [
        ("tp2_70b_prefill_b1_l1024", 135726), ("tp2_70b_prefill_b1_l4096", 545362)]
    (_, a1, b1, _), (_, a2, b2, _) = spans
    assert a1 < b1 == a2 < b2  # the second row starts where the first was printed
    assert 12.0 < b2 - a2 < 13.0  # 23 steps of ~0.55 s


def test_the_committed_comparison_is_what_the_reader_prints(capsys):
    au = bench_script("clock_run_au_read")
    assert au.main([str(PREFIX)]) == 0
    assert capsys.readouterr().out == Path(f"{PREFIX}-clock-compare.txt").read_text()


def test_frozen_table_holds_both_controllers_per_row():
    au = bench_script("clock_run_au_read")
    frozen = au.frozen(Path(f"{PREFIX}-clock-predicted.md"))
    assert frozen["tp2_70b_prefill_b1_l4096"] == (0.757, 0.819)
    assert len(frozen) == 4
