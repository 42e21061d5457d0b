"""rdusim.sim.ring: a ring Simple collective's channels on a shared link, against closed forms
(one channel; channels in step for good), the link's and the channels' bounds, and the plan
from rdusim.hw.collectives."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.hw.collectives import (
    Fabric,
    RingChannels,
    collective_cost,
    memory_ops_per_wire_byte,
    ring_plan,
)
from rdusim.sim.ring import collective_time_s, ring_transfer_s

MIB = 1 << 20


def test_one_channel_runs_every_call_at_its_rate():
    """One channel on a link it cannot fill: each call of each loop at 84 GB/s over its loads and
    stores a byte, one after another: a 2-GPU all-reduce of 8 MiB is two loops of 2 MiB chunks,
    each 2 + 4 + 2 operations a byte."""
    ring = RingChannels(1, 84e9, 400e9, 0.0)
    plan = ring_plan("all_reduce", 8 * MIB, 2, ring)
    assert plan.chunks == (2 * MIB, 2 * MIB)
    assert math.isclose(ring_transfer_s(plan), 2 * 2 * MIB * 8 / 84e9, rel_tol=1e-12)


def test_channels_in_step_for_good_idle_the_link_in_their_local_step():
    """With no skew the channels never part: every loop they share the full link in their two
    NVLink calls (24 x 2 MiB over 369.2 GB/s each), then all take the local call at once at
    84 GB/s / 2 while the link idles."""
    ring = RingChannels(24, 84e9, 369.2e9, 0.0)
    plan = ring_plan("all_reduce", 1024 * MIB, 2, ring)
    loop = 2 * 24 / 369.2e9 + 2 / 84e9
    want = sum(chunk * loop for chunk in plan.chunks)
    assert math.isclose(ring_transfer_s(plan), want, rel_tol=1e-9)


def test_a_skew_lets_the_channels_drift_apart_and_fill_the_link():
    """3.5 us of launch skew: the channels drift apart, so a 1 GiB all-reduce beats the channels
    in step for good, and comes nearer the link's bound as the call lengthens (its excess over
    the bound falls from 16 to 1024 MiB as a share of the call)."""
    stepped = RingChannels(24, 84e9, 369.2e9, 0.0)
    skewed = RingChannels(24, 84e9, 369.2e9, 3.5e-6)

    def excess(ring: RingChannels, mib: int) -> float:
        return ring_transfer_s(ring_plan("all_reduce", mib * MIB, 2, ring)) / (mib * MIB / 369.2e9) - 1

    assert excess(skewed, 1024) < excess(stepped, 1024)
    assert excess(skewed, 1024) < excess(skewed, 256) < excess(skewed, 16)
    assert excess(skewed, 1024) > 0


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]), ranks=st.integers(2, 8),
       mib=st.integers(1, 600), channels=st.integers(1, 32), skew_us=st.floats(0.0, 20.0),
       link=st.floats(50e9, 450e9))
def test_no_ring_beats_its_link_or_its_channels(op, ranks, mib, channels, skew_us, link):
    """No transfer beats the link (the wire bytes each GPU sends over it) or a channel (its own
    loads and stores at its rate); and none is slower than the channels in step for good plus
    the skew."""
    ring = RingChannels(channels, 84e9, link, skew_us * 1e-6)
    plan = ring_plan(op, mib * MIB, ranks, ring)
    t = ring_transfer_s(plan)
    link_bytes = sum(chunk * sum(on for on, _ in plan.primitives) for chunk in plan.chunks) * channels
    own = sum(chunk * sum(ops for _, ops in plan.primitives) for chunk in plan.chunks) / 84e9
    assert t >= link_bytes / link * (1 - 1e-9)
    assert t >= own * (1 - 1e-9)
    in_step = sum(
        chunk * sum(max(ops / 84e9, channels / link) if on else ops / 84e9 for on, ops in plan.primitives)
        for chunk in plan.chunks
    )
    assert t <= in_step + skew_us * 1e-6 + 1e-12


def test_plan_bytes_and_operations():
    """A plan's NVLink bytes are the collective's wire bytes (nccl-tests' factors), and its
    operations a wire byte the module's count."""
    ring = RingChannels(24, 84e9, 369.2e9, 3.5e-6)
    for op, factor in (("all_reduce", lambda n: 2 * (n - 1) / n), ("all_gather", lambda n: (n - 1) / n),
                       ("reduce_scatter", lambda n: (n - 1) / n)):
        for ranks in (2, 4, 8):
            plan = ring_plan(op, 256 * MIB, ranks, ring)
            on_link = sum(on for on, _ in plan.primitives)
            assert math.isclose(sum(plan.chunks) * 24 * on_link, 256 * MIB * factor(ranks), rel_tol=1e-9)
            assert sum(ops for _, ops in plan.primitives) / on_link == memory_ops_per_wire_byte(op, ranks)


def test_only_a_ring_simple_cost_is_simulated():
    """NCCL's tuner chooses as before; a ring Simple choice carries the plan and takes the
    channels' time, anything else (LL at 64 KiB) its closed form; without ``ring`` nothing is
    simulated."""
    ring = RingChannels(24, 84e9, 369.2e9, 3.5e-6)
    fabric = Fabric(344e9, 1.0, False, 141e9, ring)
    big = collective_cost("all_reduce", 256 * MIB, 2, fabric)
    assert (big.algorithm, big.protocol) == ("ring", "Simple") and big.ring is not None
    assert collective_time_s(big) == pytest.approx(big.latency_s + ring_transfer_s(big.ring), rel=1e-12)
    small = collective_cost("all_reduce", 64 * 1024, 2, fabric)
    assert small.ring is None and collective_time_s(small) == small.time_s
    plain = collective_cost("all_reduce", 256 * MIB, 2, Fabric(344e9, 1.0, False, 141e9))
    assert plain.ring is None and collective_time_s(plain) == plain.time_s
    assert (plain.algorithm, plain.protocol, plain.time_s) == (big.algorithm, big.protocol, big.time_s)


def test_a_post_ends_each_slice_that_sends():
    """With a post (run ct: a system fence and a flag store), a call on NVLink is its two slices, each
    followed by the post while the channel moves nothing; the local call posts nothing: one channel's
    8 MiB all-reduce on two GPUs is two loops of 8 operations a byte of a 2 MiB chunk and 4 posts."""
    post = 1.5e-6
    ring = RingChannels(1, 84e9, 400e9, 0.0, post)
    plan = ring_plan("all_reduce", 8 * MIB, 2, ring)
    assert math.isclose(ring_transfer_s(plan), 2 * (2 * MIB * 8 / 84e9 + 4 * post), rel_tol=1e-12)
    # no post: the call is one flow, as before the post existed (the same transfer, event for event)
    bare = RingChannels(24, 84e9, 369.2e9, 3.5e-6)
    assert ring_transfer_s(ring_plan("reduce_scatter", 64 * MIB, 2, bare)) == ring_transfer_s(
        ring_plan("reduce_scatter", 64 * MIB, 2, RingChannels(24, 84e9, 369.2e9, 3.5e-6, 0.0)))
