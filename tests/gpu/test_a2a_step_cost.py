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
