"""benchmarks/gpu/nvlink_copy.py (run bv): CLI validation, the plan's caps, a CTA's slice, the
progress arithmetic on synthetic stamps, and the pre-registered check on run bv's committed files."""

from __future__ import annotations

import csv
import gzip
import types
from pathlib import Path

import pytest

from .scripts import bench_script

MIB = 1 << 20
GPU = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"
RUN = "h200x2-20261129bv"


@pytest.fixture(scope="module")
def copy() -> types.ModuleType:
    return bench_script("nvlink_copy")


def test_bad_flags_exit_2(copy: types.ModuleType) -> None:
    for argv in (
        ["--dry-run", "--modes", "sideways"],
        ["--dry-run", "--ctas", "1,x"],
        ["--dry-run", "--ctas", "0"],
        ["--dry-run", "--ctas", "65"],
        ["--dry-run", "--sizes", "-2"],
        ["--modes", "bidir"],  # no --out
    ):
        with pytest.raises(SystemExit) as err:
            copy.main(argv)
        assert err.value.code == 2


def test_plan_caps_long_rows(copy: types.ModuleType) -> None:
    rows = copy.plan(copy.MODES, copy.CTAS, copy.SIZES, 20, 5)
    assert len(rows) == 3 * 9 * 12
    by = {(r["case"], r["ctas"], r["bytes"] // MIB): r for r in rows}
    # one CTA at 25 GB/s: 1 GiB takes 43 ms, past the 25 ms trial: one launch a trial, 3 trials
    assert (by["bidir", 1, 1024]["per"], by["bidir", 1, 1024]["reps"]) == (1, 3)
    # 24 CTAs (600 GB/s guessed): 1 GiB in 1.79 ms, 13 launches fit 25 ms
    assert (by["bidir", 24, 1024]["per"], by["bidir", 24, 1024]["reps"]) == (13, 5)
    assert by["local", 64, 2]["per"] == 20
    assert {r["variant"] for r in rows} == {f"cta{c}" for c in copy.CTAS}


def test_slice_is_whole_segments(copy: types.ModuleType) -> None:
    assert copy.slice_int4(2 * MIB, 64) == 2048
    n16 = copy.slice_int4(1024 * MIB, 24)
    assert n16 == 2796160 and n16 % copy.SEGMENTS == 0
    assert 1024 * MIB - n16 * 16 * 24 == 16 * 1024  # the rounding leaves 16 KiB of 1 GiB uncopied


def _two_phase(copy: types.ModuleType) -> list[list[int]]:
    """Two CTAs, 1 GiB: 100 GB/s together until 50 MB are done, then 200 GB/s."""
    seg = 1024 * MIB / 2 / copy.SEGMENTS
    stamps = []
    for _ in range(2):
        t, st = 0.0, [0]
        for s in range(copy.SEGMENTS):
            rate = 100e9 if s * seg * 2 < 100e9 * 500e-6 else 200e9
            t += seg * 2 / rate * 1e9
            st.append(round(t))
        stamps.append(st)
    return stamps


def test_progress_rates(copy: types.ModuleType) -> None:
    stamps = _two_phase(copy)
    rates = copy.window_rates(stamps, 1024 * MIB)
    assert [(lo, hi) for lo, hi, _ in rates][:3] == [(0, 100), (100, 250), (250, 500)]
    assert all(g == pytest.approx(100.0, rel=1e-3) for _, _, g in rates[:3])
    assert all(g == pytest.approx(200.0, rel=1e-3) for _, _, g in rates[4:])
    assert copy.bytes_done(
        stamps, 1024 * MIB / 2 / copy.SEGMENTS, stamps[0][-1] + 1
    ) == pytest.approx(1024 * MIB)
    assert copy.window_rate(stamps, 1024 * MIB, 1000, 1500) == pytest.approx(200.0, rel=1e-3)


def test_stamps_round_trip(
    copy: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "st.csv.gz"
    with gzip.open(path, "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(copy.STAMP_FIELDS)
        for b, st in enumerate(_two_phase(copy)):
            w.writerows(["bidir", 2, 1024, b, s, t] for s, t in enumerate(st))
    assert copy.load_stamps(str(path))["bidir", 2, 1024] == _two_phase(copy)
    assert copy.main(["--progress", str(path)]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith("| bidir | 2 | 1024 | 5620 | 0 | 0-100:100 ")


def test_run_bv_check_is_committed(copy: types.ModuleType) -> None:
    """The signatures of run bv's pre-registration, recomputed from its files, are the committed
    analysis's (h200x2-20261129bv-analysis.txt): neither hypothesis nor the control passes."""
    files = [
        str(GPU / f"{RUN}-{n}") for n in ("copy.csv", "ch24.csv", "ch8.csv", "copy-stamps.csv.gz")
    ]
    lines = copy.check(*files)
    committed = (GPU / f"{RUN}-analysis.txt").read_text().splitlines()
    assert lines == committed[2 : 2 + len(lines)]
    assert lines[-3:] == [
        "H1, the link: fail",
        "H2, NCCL's protocol: fail",
        "control (local copies within +-0.02): fail",
    ]
    assert "24 channels +0.086, 8 channels -0.007" in lines[0]


def test_run_bv_contended_tail(copy: types.ModuleType) -> None:
    """At 24 CTAs the link is shared unevenly: the last CTA of the 1 GiB copy ends 1.4 ms after the
    first, while up to 12 CTAs end within 52 us; no CTA count has a slow start (first 500 us)."""
    stamps = copy.load_stamps(str(GPU / f"{RUN}-copy-stamps.csv.gz"))
    spread = {
        c: (
            max(st[-1] for st in stamps["bidir", c, 1024])
            - min(st[-1] for st in stamps["bidir", c, 1024])
        )
        / 1e3
        for c in (12, 24)
    }
    assert spread[12] < 60 and spread[24] > 1300
    for c in (4, 8, 12, 16, 24, 32):
        st = stamps["bidir", c, 1024]
        assert copy.window_rate(st, 1024 * MIB, 0, 500) >= 0.98 * copy.window_rate(
            st, 1024 * MIB, 500, 1000
        )
