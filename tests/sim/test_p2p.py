"""rdusim.sim.p2p: an all-to-all's p2p channels, the sending channels a closed network at the link (run dj)
or sharing it max-min (runs ch-ci)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.hw.closed_network import closed_network_cycle
from rdusim.hw.collectives import P2pChannels, P2pPlan, RingChannels
from rdusim.sim.p2p import p2p_transfer_s

KIB = 1 << 10
P2P = P2pChannels(23e9, 150e9, 1.5e-6)


def _plan(p2p: P2pChannels, channels: int, chunks: tuple[float, ...], link: float = 369e9,
          skew: float = 0.0) -> P2pPlan:
    return P2pPlan(p2p, RingChannels(channels, 84e9, link, skew), channels, chunks)


def test_one_channel_is_its_lone_cycle_either_way() -> None:
    """One channel has the link to itself: n chunks of (chunk / send + step), then the last chunk's copy
    out, queued or not."""
    c = 512 * KIB
    want = 4 * (c / 23e9 + 1.5e-6) + c / 150e9
    for p2p in (P2P, replace(P2P, queue=False)):
        assert p2p_transfer_s(_plan(p2p, 1, (c,) * 4)) == pytest.approx(want, rel=1e-12)


def test_channels_starting_together_count_each_other() -> None:
    """Sixteen channels started at once, one chunk each: every chunk is the sixteen's closed-network cycle,
    whatever order SimPy starts their processes in; max-min sharing below the link gives the lone cycle."""
    c, link = 256 * KIB, 369e9
    at_link = c / link
    cycle = closed_network_cycle(c / 23e9 + 1.5e-6 - at_link, at_link, 16)
    assert p2p_transfer_s(_plan(P2P, 16, (c,), link)) == pytest.approx(cycle + c / 150e9, rel=1e-12)
    shared = p2p_transfer_s(_plan(replace(P2P, queue=False), 16, (c,), link))
    assert shared == pytest.approx(c / 23e9 + 1.5e-6 + c / 150e9, rel=1e-12)


def test_a_full_link_is_the_link_either_way() -> None:
    """Channels whose sends alone would take far more than the link: both forms move the bytes at the link
    (the network's cycle approaches n x service), within the first and last chunks' edges."""
    c, n, k = 512 * KIB, 64, 16
    link = 2 * 23e9   # two channels' sends fill it
    for p2p in (replace(P2P, step_s=0.0), replace(P2P, step_s=0.0, queue=False)):
        t = p2p_transfer_s(_plan(p2p, n, (c,) * k, link))
        assert t == pytest.approx(n * k * c / link, rel=0.02)


@settings(max_examples=40, deadline=None)
@given(channels=st.integers(1, 32), chunks=st.integers(1, 6), kib=st.sampled_from((64, 128, 256, 512)),
       skew_us=st.floats(0.0, 5.0), link_gbps=st.floats(40.0, 900.0))
def test_queued_channels_lie_between_their_bounds(channels: int, chunks: int, kib: int, skew_us: float,
                                                 link_gbps: float) -> None:
    """The closed network's cycle is never under the lone cycle nor the sending channels' bytes at the
    link: a queued transfer takes at least one channel's chunks at their lone cycle and every byte at the
    link, and at most every chunk of every channel one after another at its lone cycle plus the skew.
    (It can beat max-min sharing: channels that start in step all meet at the link on their first chunk,
    which the network's mean cycle spreads.)"""
    c = kib * KIB
    plan = _plan(P2P, channels, (float(c),) * chunks, link_gbps * 1e9, skew_us * 1e-6)
    queued = p2p_transfer_s(plan)
    lone = c / P2P.send_bytes_per_s + P2P.step_s
    assert queued >= (chunks * lone + c / P2P.receive_bytes_per_s) * (1 - 1e-9)
    assert queued >= channels * chunks * c / (link_gbps * 1e9) * (1 - 1e-9)
    at_link = c / (link_gbps * 1e9)
    worst = closed_network_cycle(max(lone - at_link, 0.0), at_link, channels)
    assert queued <= (skew_us * 1e-6 + chunks * worst + c / P2P.receive_bytes_per_s) * (1 + 1e-9)
