"""benchmarks/gpu/ring_large.py (run cs): marginal rates and the registered verdicts on synthetic files."""

from __future__ import annotations

import csv
from itertools import pairwise
from pathlib import Path

import pytest

from .scripts import bench_script

SIZES = (256, 512, 1024, 2048, 3072, 4096)


def _times(rates: dict[int, float], share: float) -> dict[int, float]:
    """{MiB: us} of a call whose wire moves at ``rates[hi]`` GB/s from the size before ``hi`` (20 us fixed)."""
    us = 20.0 + share * SIZES[0] * (1 << 20) / (rates[SIZES[1]] * 1e3)
    out = {SIZES[0]: us}
    for lo, hi in pairwise(SIZES):
        us += share * (hi - lo) * (1 << 20) / (rates[hi] * 1e3)
        out[hi] = us
    return out


def _csv(path: Path, variant: str, rates: dict[str, dict[int, float]]) -> None:
    large = bench_script("ring_large")
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["variant", "case", "op", "bytes", "median_us", "sleep_us"])
        w.writeheader()
        for op, by in rates.items():
            for mib, us in _times(by, large.WIRE[op][0]).items():
                w.writerow({"variant": variant, "case": "plain", "op": op, "bytes": mib << 20, "median_us": us,
                            "sleep_us": 0})


def _flat(ar: float, rs: float, ag: float) -> dict[str, dict[int, float]]:
    return {op: dict.fromkeys(SIZES[1:], r) for op, r in zip(("all_reduce", "reduce_scatter", "all_gather"), (ar, rs, ag), strict=True)}


def test_marginal_rates_recover_the_rates() -> None:
    large = bench_script("ring_large")
    by = {512: 300.0, 1024: 320.0, 2048: 340.0, 3072: 350.0, 4096: 360.0}
    pts = _times(by, 0.5)
    assert [round(r, 6) for _, _, r in large.steps(pts, "reduce_scatter")] == [300, 320, 340, 350, 360]
    assert large.rate(pts, "reduce_scatter", 2048, 4096) == pytest.approx(2 / (1 / 350 + 1 / 360))


def test_verdicts_on_synthetic_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    large = bench_script("ring_large")
    engine = {"count": _flat(350, 260, 285), "prices": _flat(350, 280, 280)}
    monkeypatch.setattr(large, "engine_times",
                        lambda op, channels, sizes, pricing: _times(engine[pricing][op], large.WIRE[op][0]))
    # NCCL flat past 512 MiB at the prices' engine; the emulation 10% slower on the reduce-scatter
    _csv(tmp_path / "def.csv", "def", _flat(350, 282, 281))
    _csv(tmp_path / "ch16.csv", "ch16", _flat(300, 230, 220))
    with open(tmp_path / "emul.csv", "w") as fh:
        for c, rates in ((24, _flat(345, 254, 280)), (16, _flat(290, 210, 230))):
            _csv(tmp_path / f"e{c}.csv", f"cl4-ch{c}", rates)
            lines = (tmp_path / f"e{c}.csv").read_text().splitlines()
            fh.write("\n".join(lines if c == 24 else lines[1:]) + "\n")
    got = large.verdict(*(str(tmp_path / f) for f in ("def.csv", "ch16.csv", "emul.csv")))
    assert "| reduce_scatter, NCCL | 282.0 | 282.0 | 282.0 | 282.0 | 282.0 |" in got
    assert got[-5:] == ["L, the channels fill the link once apart: fail", "F, a fixed rate past 1 GiB: pass",
                        "P, the engine with run co's per-call prices: pass", "C, the engine as it is (the count): fail",
                        "E, the protocol alone as NCCL: fail"]
    # every op rising to the link past 2 GiB: L passes, F does not
    rising = {op: {**by, 2048: 360.0, 3072: 365.0, 4096: 366.0} for op, by in _flat(350, 282, 281).items()}
    _csv(tmp_path / "def.csv", "def", rising)
    got = large.verdict(*(str(tmp_path / f) for f in ("def.csv", "ch16.csv", "emul.csv")))
    assert got[-5:-3] == ["L, the channels fill the link once apart: pass", "F, a fixed rate past 1 GiB: fail"]


def test_run_script_asks_for_the_registered_rows() -> None:
    """The device script measures what the hypotheses name: three ops, 256-4096 MiB, NCCL at its own
    channels (twice) and 16, the emulation in clusters of four at 16 and 24 with stamps."""
    text = (Path(__file__).resolve().parents[2] / "benchmarks/gpu/ring_large_run_cs.sh").read_text()
    large = bench_script("ring_large")
    assert f"Z={','.join(map(str, large.SIZES))}" in text
    assert "OPS=all_reduce,reduce_scatter,all_gather" in text
    assert [line.split()[1] for line in text.splitlines() if line.startswith("nccl ")] == ["def", "ch16", "def2"]
    assert "--variants cl4" in text and "--channels 16,24" in text and "--stamps" in text
    emul = bench_script("ring_emul")
    assert all(("cl4", c, 4096) in emul.STAMP_ROWS for c in (16, 24))
