"""benchmarks/gpu/hbm_mix.py (run ca): the plan's launches, the profiler's durations matched to the
timed rows, the flush's fitted form on a closed-form case, and run ca's committed analysis and
registered verdicts reproduced from its committed CSVs."""

from __future__ import annotations

import math
import types
from pathlib import Path

import pytest

from .scripts import bench_script

GPU = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"
RUN = GPU / "h200-20261129ca-hbm"


@pytest.fixture(scope="module")
def mix() -> types.ModuleType:
    return bench_script("hbm_mix")


def test_the_plan_moves_the_bytes_it_names(mix: types.ModuleType) -> None:
    rows = mix.plan()
    assert len(rows) == (len(mix.SIZES) + 5 * len(mix.MIX_SIZES)) * mix.REPS * 3
    for r in rows:  # each launch moves its size, to a 16-byte element a plane
        assert r["bytes"] <= r["mib"] << 20 and (r["mib"] << 20) - r["bytes"] < 16 * (r["r"] + r["w"])


def test_warm_preparations_are_not_timed(mix: types.ModuleType) -> None:
    """A warm row's preparation is a ``mix`` launch of its own: the profiler's n-th duration goes to
    the n-th timed row, the preparations skipped."""
    rows = mix.plan(sizes=(8,), mix_sizes=(), reps=1)[:3]  # read, 8 MiB: dirty, clean, warm
    assert mix._mix_labels(rows) == [False, False, True, False]
    mix._attach(rows, [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)])
    assert [r["profiler_us"] for r in rows] == [1.0, 2.0, 4.0]
    mix._attach(rows, [(0.0, 1.0)])  # a profiler that missed launches: none kept, the events stand
    assert [r["profiler_us"] for r in rows] == ["", "", ""]


def test_the_flush_fit_recovers_its_form(mix: types.ModuleType) -> None:
    nbytes = {("read", mib): mib << 20 for mib in mix.SIZES}
    med = {}
    for (m, mib), b in nbytes.items():
        med[(m, mib, "clean")] = b / 4.4e6
        med[(m, mib, "dirty")] = med[(m, mib, "clean")] + 9.0 * (1 - math.exp(-b / 60e6))
    d, c = mix.flush_fit(med, nbytes)
    assert d == pytest.approx(9.0, abs=1e-6) and c == 60e6


def test_a_decode_rows_bytes(mix: types.ModuleType) -> None:
    assert mix._attention_bytes("fa3_decode_b32_h32x8x128_l32768") == 32 * 8 * 128 * 32768 * 4


def test_run_ca_analysis_and_verdicts_are_committed(mix: types.ModuleType, capsys) -> None:
    """Run ca as registered: H1 not met (0.930 of peak), H2-H5 fail; the flush's cost 8.7 us x
    (1 - exp(-B / 65 MB))."""
    mix.main(["--analyse", f"{RUN}.csv", "--attn", f"{RUN}-attn.csv"])
    assert capsys.readouterr().out == Path(f"{RUN}-analysis.txt").read_text()
    mix.main(["--analyse", f"{RUN}.csv", "--attn", f"{RUN}-attn.csv", "--verdict"])
    out = capsys.readouterr().out
    assert out == Path(f"{RUN}-verdict.txt").read_text()
    assert "| 0.930 | not met, not refuted |" in out and out.count("| fails |") == 4
    assert "8.7 us x (1 - exp(-B / 65 MB))" in out
