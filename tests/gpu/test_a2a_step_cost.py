"""benchmarks/gpu/a2a_step_cost.py (run cg): the fit recovers a channel's turns from one-channel
rows made by its own model, and the turns' closed forms on one channel."""

from __future__ import annotations

import csv
import types
from pathlib import Path

import pytest

from .scripts import bench_script

MIB = 1 << 20


@pytest.fixture(scope="module")
def cg() -> types.ModuleType:
    return bench_script("a2a_step_cost")


def test_one_channel_closed_form(cg: types.ModuleType) -> None:
    """One channel a peer (2 p2p channels), both ways: latency + n chunks x (both turns); one way:
    n send turns and the last chunk's copy out."""
    t = cg.Turns(40e9, 55e9, 1.0e-6, 0.5e-6)
    k, n = 256 * 1024, 8  # S = 4 MiB: a 2 MiB part, 8 chunks
    both = cg.predict_us("sendrecv", 4 * MIB, k, t, 2)
    assert both == pytest.approx(11.8 + n * (1.5 + k / 40e3 + k / 55e3), rel=1e-9)
    one = cg.predict_us("send_oneway", 4 * MIB, k, t, 2)
    assert one == pytest.approx(11.8 + n * (1.0 + k / 40e3) + 0.5 + k / 55e3, rel=1e-9)


def test_fit_recovers_the_turns(cg: types.ModuleType, tmp_path: Path) -> None:
    """Rows made by HTc at known constants: the fit gives them back; HT (no fixed cost) is then
    off at 128 KiB chunks and HTc exact."""
    t = cg.Turns(40e9, 55e9, 1.0e-6, 0.5e-6)
    rows = []
    for variant, chunk in cg.CHUNKS.items():
        for op in ("sendrecv", "send_oneway"):
            for mib in (2, 4, 8):
                rows.append({"variant": variant, "case": "plain", "op": op, "bytes": mib * MIB,
                             "median_us": cg.predict_us(op, mib * MIB, chunk, t, 2)})
    for variant, chunk in cg.PREDICTED.items():
        for mib in (16, 64):
            rows.append({"variant": variant, "case": "plain", "op": "sendrecv", "bytes": mib * MIB,
                         "median_us": cg.predict_us("sendrecv", mib * MIB, chunk, t)})
    path = tmp_path / "cg.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    got = cg.fit(cg.turns.read_measured([str(path)]))
    for name in ("send", "recv", "c_send", "c_recv"):
        assert getattr(got, name) == pytest.approx(getattr(t, name), rel=1e-6)
    out = cg.compare([str(path)])
    assert "| G2 | d128 | sendrecv | 0.0% / " in "\n".join(out)
    assert out[-1].endswith("1.50 us: yes")
    assert any(line.startswith("| G2 | d128 | sendrecv |") and "| yes |" in line for line in out)


def test_run_cg_as_committed(cg: types.ModuleType) -> None:
    """Run cg's committed comparison is what the script prints from its CSVs: the send turn's fixed
    cost (1.81 us a chunk) and G2 failing at NCCL's own chunk (512 KiB: 6.4% / +13.3%)."""
    gpu = Path(__file__).resolve().parents[2] / "benchmarks/gpu"
    csvs = [str(gpu / f"h200x2-20261130cg-{v}.csv") for v in ("c512", "c256", "c128", "d128", "d256", "d512")]
    out = cg.compare(csvs)
    assert "\n".join(out) + "\n" == (gpu / "h200x2-20261130cg-compare.txt").read_text()
    assert out[0].startswith("HTc (this run's one channel, 2-8 MiB at 128 / 256 / 512 KiB): send 41.9 GB/s + 1.81 us")
    assert "| G2 | d512 | sendrecv | 6.4% / +13.3% | 4.1% / +8.9% | no |" in out
