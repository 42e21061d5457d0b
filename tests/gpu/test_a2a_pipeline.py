"""benchmarks/gpu/a2a_pipeline.py (runs ch, ci): a channel's pipeline in closed form, the fit on run
cg's one-channel rows, and run ci's frozen table as committed before the run."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"
KIB = 1 << 10


@pytest.fixture(scope="module")
def pipe() -> types.ModuleType:
    return bench_script("a2a_pipeline")


def test_one_channel_is_its_sends_then_the_last_copy(pipe: types.ModuleType) -> None:
    """One channel, a receiver faster than the sender: n chunks of (chunk / send + step), then the
    last chunk's copy out; a slower receiver sets the pace instead, after the first chunk lands."""
    c = 512 * KIB
    fast = pipe.P2pChannels(20e9, 100e9, 1.5e-6)
    t = pipe.transfer_s(1e12, 0.0, 1, (c,) * 4, fast)
    assert t == pytest.approx(4 * (c / 20e9 + 1.5e-6) + c / 100e9, rel=1e-12)
    slow = pipe.P2pChannels(100e9, 10e9, 0.0)
    assert pipe.transfer_s(1e12, 0.0, 1, (c,) * 4, slow) == pytest.approx(c / 100e9 + 4 * c / 10e9, rel=1e-12)


def test_channels_share_the_link_and_a_slow_receiver_sets_the_pace(pipe: types.ModuleType) -> None:
    """Two channels on a link of one channel's send rate take twice as long to send; a receiver
    slower than its sender paces the channel from the first chunk's landing on."""
    c = 512 * KIB
    p = pipe.P2pChannels(20e9, 1e15, 0.0)
    assert pipe.transfer_s(20e9, 0.0, 1, (c,) * 4, p) == pytest.approx(4 * c / 20e9 + c / 1e15, rel=1e-9)
    assert pipe.transfer_s(20e9, 0.0, 2, (c,) * 4, p) == pytest.approx(8 * c / 20e9 + c / 1e15, rel=1e-9)
    lagging = pipe.P2pChannels(1e15, 1e9, 0.0)
    assert pipe.transfer_s(1e18, 0.0, 1, (c,) * 16, lagging) == pytest.approx(c / 1e15 + 16 * c / 1e9, rel=1e-12)


def test_the_fit_reproduces_run_ci_frozen_table(pipe: types.ModuleType, tmp_path: Path) -> None:
    """Run cg's one-channel rows fit send 22.98 GB/s, receive 150.1 GB/s and 1.54 us a chunk; the
    table written now is the one committed before run ci, byte for byte."""
    p = pipe.fit(sorted(GPU.glob("h200x2-20261130cg-c*.csv")))
    assert (p.send_bytes_per_s / 1e9, p.receive_bytes_per_s / 1e9, p.step_s * 1e6) == (
        pytest.approx(22.98, abs=0.005), pytest.approx(150.12, abs=0.005), pytest.approx(1.539, abs=0.0005))
    out = tmp_path / "ci.txt"
    pipe.write_frozen(out)
    assert out.read_text() == (GPU / "h200x2-20261130ci-predicted.txt").read_text()


def test_run_dj_frozen_table_and_its_checks(pipe: types.ModuleType, tmp_path: Path) -> None:
    """Run dj's frozen table (the channels queued at the link and the max-min link, committed before the
    run) is what the script writes now, byte for byte, and its comparison reproduces the committed one,
    Q1 and Q2 passing as the adoption recorded."""
    out = tmp_path / "dj.txt"
    pipe.write_frozen_dj(out)
    frozen = GPU / "h200x2-20261130dj-predicted.txt"
    assert out.read_text() == frozen.read_text()
    lines = pipe.compare_dj(frozen, sorted(GPU.glob("h200x2-20261130dj-*-plain.csv")))
    assert "\n".join(lines) + "\n" == (GPU / "h200x2-20261130dj-compare.txt").read_text()
    assert lines[-2].startswith("Q1 (16 channels a peer, 29 rows") and lines[-2].endswith("-> pass")
    assert lines[-1].startswith("Q2 (8 and 32 channels a peer, 7 rows") and lines[-1].endswith("-> pass")


def test_run_dj_figure_table(pipe: types.ModuleType, tmp_path: Path) -> None:
    """`--plot-dj` draws the figure and its table: one channel's rate times the channels up to the link
    (max-min) and the closed network agree at one channel and part where the link begins to fill (16 a
    peer: 344.5 against 302.8 GB/s), and the measured lines are run ch's six counts and run dj's three."""
    png = tmp_path / "a2a.png"
    lines = pipe.plot_dj(png)
    assert png.stat().st_size > 10_000
    rows = [ln.split(" | ") for ln in lines[2:]]
    assert [(r[0].strip("| "), int(r[1])) for r in rows] == [("run ch", n) for n in (1, 2, 4, 8, 16, 32)] + [
        ("run dj", n) for n in (8, 16, 32)]
    one = next(r for r in rows if r[1] == "1")
    assert one[3] == one[4].strip(" |") == "21.5"
    sixteen = next(r for r in rows if r[:2] == ["| run dj", "16"])
    assert (sixteen[3], sixteen[4].strip(" |")) == ("344.5", "302.8")
