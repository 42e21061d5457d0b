"""benchmarks/gpu/a2a_ll.py (runs dk, dl) and the engine's p2p LL channels: NCCL's LL channel rule, one
channel's LL rate calibrated on run dk, run dl's frozen table and its check as committed."""

from __future__ import annotations

import math
import types
from dataclasses import replace
from pathlib import Path

import pytest

from rdusim.hw.collectives import LL_MAX_GBPS, collective_cost, p2p_ll_channels
from rdusim.hw.gpu import load_gpu_node

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"
KIB = 1 << 10


@pytest.fixture(scope="module")
def ll() -> types.ModuleType:
    return bench_script("a2a_ll")


def test_ll_channels_are_nccls_rule() -> None:
    """NCCL 2.28 addP2pToPlan: one channel for each 8 KiB of a peer's LL part (an LL step of 64 KiB over 8),
    up to nChannelsMin: 16 a peer on two GPUs, 8 on four, 4 on eight."""
    for ranks, cap in ((2, 16), (4, 8), (8, 4)):
        for part in (1, 4 * KIB, 8 * KIB, 8 * KIB + 1, 24 * KIB, 100 * KIB, 512 * KIB):
            assert p2p_ll_channels(part, ranks) == min(cap, math.ceil(part / (8 * KIB)))


def test_an_ll_all_to_all_moves_at_its_channels_rate_up_to_the_ll_rate() -> None:
    """h200.yaml: an all-to-all of S on two GPUs puts S / 2 on the wire at min(87.7 GB/s, channels x 5.98
    GB/s); on four, every peer's channels at once; without the document's rate, the LL rate alone."""
    fabric = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu.fabric
    one = fabric.p2p_ll_channel_bytes_per_s
    assert one == pytest.approx(5.98e9)
    for size, channels in ((16 * KIB, 1), (48 * KIB, 3), (256 * KIB, 16), (768 * KIB, 16)):
        cost = collective_cost("all_to_all", size, 2, fabric)
        assert (cost.protocol, cost.wire_bytes) == ("LL", size / 2)
        assert cost.bus_bytes_per_s == pytest.approx(min(LL_MAX_GBPS * 1e9, channels * one), rel=1e-12)
    four = collective_cost("all_to_all", 4 * 8 * KIB, 4, fabric)   # a peer's part 8 KiB: one channel, 3 peers
    assert four.bus_bytes_per_s == pytest.approx(3 * one, rel=1e-12)
    bare = collective_cost("all_to_all", 16 * KIB, 2, replace(fabric, p2p_ll_channel_bytes_per_s=None))
    assert bare.bus_bytes_per_s == pytest.approx(LL_MAX_GBPS * 1e9, rel=1e-12)


def test_run_dk_fit_is_the_documents_rate(ll: types.ModuleType) -> None:
    """Run dk's one-channel rows fit 5.98 GB/s a channel (the committed report, K1 and K2 passing), the
    rate h200.yaml and h100.yaml give."""
    rate, lines = ll.fit()
    assert "\n".join(lines) + "\n" == (GPU / "h200x2-20261130dk-fit.txt").read_text()
    assert lines[-2].endswith("-> pass") and lines[-1].endswith("-> pass")
    for doc in ("h200.yaml", "h100.yaml"):
        given = load_gpu_node(ROOT / "hw_configs" / doc).gpu.fabric.p2p_ll_channel_bytes_per_s
        assert given == pytest.approx(round(rate / 1e9, 2) * 1e9, rel=1e-12)


def test_run_dl_frozen_table_and_its_check(ll: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run dl's comparison reproduces the committed one (D1 passing), and its frozen table is what the script
    writes now (H0 and H1 set on the fabric, whatever the document gives)."""
    frozen = GPU / "h200x2-20261130dl-predicted.txt"
    lines = ll.compare_dl(frozen, [GPU / "h200x2-20261130dl-def.csv"])
    assert "\n".join(lines) + "\n" == (GPU / "h200x2-20261130dl-compare.txt").read_text()
    assert lines[-1].startswith("D1 (8 rows") and lines[-1].endswith("-> pass")
    out = tmp_path / "dl.txt"
    ll.write_frozen_dl(out)
    assert out.read_text() == frozen.read_text()
