"""benchmarks/gpu/a2a_turns.py (run cf): NCCL's channels a peer, the candidate models' closed
forms and the frozen table as committed before the run."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"
CF = "h200x2-20261130cf"
MIB = 1 << 20


@pytest.fixture(scope="module")
def turns() -> types.ModuleType:
    return bench_script("a2a_turns")


def test_channels_a_peer_follow_nccls_rule(turns: types.ModuleType) -> None:
    """Two GPUs, 32 p2p channels: 16 a peer until a channel's part passes 32 chunks (16 MiB), then
    32 (run ar's defaults: 16 to 512 MiB of S, 32 above); 2 p2p channels: 1, then 2; 64: 32."""
    assert [turns.channels_a_peer(mib * MIB / 2, 32) for mib in (64, 512, 768, 1024)] == [16, 16, 32, 32]
    assert [turns.channels_a_peer(mib * MIB / 2, 2) for mib in (8, 32, 64)] == [1, 1, 2]
    assert turns.channels_a_peer(64 * MIB / 2, 64) == 32


def test_models_closed_forms(turns: types.ModuleType) -> None:
    """One channel: HT and HS move 84 / 4 GB/s both ways and 84 / 2 one way (plus the last chunk's
    copy out); HC 84 / 4 either way plus a chunk of fill; sixteen channels one way: HT and HS at
    the link; both ways HT is slower than HS (the sends coincide, the link idles in the turns)."""
    lat = 11.8
    one = turns.predict("sendrecv", 32 * MIB, 2)
    part = 16 * MIB
    assert one["HS"] == pytest.approx(lat + part / 21e9 * 1e6, rel=1e-9)
    assert one["HT"] == pytest.approx(one["HS"], rel=1e-6)
    way = turns.predict("send_oneway", 32 * MIB, 2)
    copy_out = 512 * 1024 * 2 / 84e9 * 1e6
    assert way["HS"] == pytest.approx(lat + part / 42e9 * 1e6 + copy_out, rel=1e-9)
    assert way["HC"] == pytest.approx(one["HC"]) == pytest.approx(lat + part / 21e9 * 1e6 + 2 * copy_out)
    both, oneway = turns.predict("sendrecv", 256 * MIB, 32), turns.predict("send_oneway", 256 * MIB, 32)
    link = 369.2e9
    assert oneway["HS"] == pytest.approx(lat + 128 * MIB / link * 1e6 + copy_out, rel=1e-9)
    assert oneway["HS"] <= oneway["HT"] <= oneway["HS"] * 1.01
    assert both["HT"] > 1.2 * both["HS"]


def test_frozen_table_as_committed(turns: types.ModuleType, tmp_path: Path) -> None:
    """The committed frozen table is what the script writes from h200.yaml as committed."""
    out = tmp_path / "f.txt"
    assert turns.main(["--frozen", str(out)]) == 0
    assert out.read_text() == (GPU / f"{CF}-predicted.txt").read_text()
    frozen = turns.read_frozen(out)
    assert len(frozen) == sum(len(ops) * len(sizes) for ops, sizes, _ in turns.VARIANTS.values())


def test_compare_needs_csvs(turns: types.ModuleType) -> None:
    with pytest.raises(SystemExit) as err:
        turns.main(["--compare", str(GPU / f"{CF}-predicted.txt")])
    assert err.value.code == 2


def _cf_csvs() -> list[str]:
    return [str(GPU / f"{CF}-{v}-eager.csv") for v in ("def", "p2p2", "p2p64", "cga0")] + [str(GPU / f"{CF}-def-plain.csv")]


def test_run_cf_checks_as_committed(turns: types.ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """Run cf's committed comparison is what the script prints from the frozen table and the CSVs;
    the registered checks: A 1.68 (short of 1.7: no model passes), B 367.5 GB/s one way (HT and HS
    pass, HU's 298-330 out), C fails for HT, HS and HC, D 3 of 4, E passes for HT."""
    assert turns.main(["--compare", str(GPU / f"{CF}-predicted.txt"), *_cf_csvs()]) == 0
    out = capsys.readouterr().out
    assert out == (GPU / f"{CF}-compare.txt").read_text()
    assert "| A. one channel: one way / both ways | 1.68 | HT, HS >= 1.7; HC <= 1.2 | no | no | no |" in out
    assert "| B. 16 channels one way, 128-512 MiB | 367.5 GB/s |" in out and "| yes | yes | no |" in out
    assert "8.2% / +15.7% no | 15.8% / -25.3% no | 8.2% / -9.0% no |" in out
    assert "| within 3% | 3 of 4 |" in out and "| 5.6% / -6.8% yes |" in out


def test_one_channel_rates_from_run_cf(turns: types.ModuleType) -> None:
    """One channel a peer: the send turn 35.7 GB/s (one way), the receive 52.2 (both ways 21.2)."""
    send, recv = turns.one_channel_rates(turns.read_measured(_cf_csvs()))
    assert send / 1e9 == pytest.approx(35.7, abs=0.05) and recv / 1e9 == pytest.approx(52.2, abs=0.05)
    assert 1 / (1 / send + 1 / recv) / 1e9 == pytest.approx(21.2, abs=0.05)
