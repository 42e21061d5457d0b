"""An NCCL ring collective's Simple transfer, channel by channel.

Owns: ``ring_transfer_s``, ``collective_time_s``. Imports: resources, p2p, custom_ar, hw.collectives.

NCCL's tuner (``rdusim.hw.collectives``) picks a collective's algorithm and protocol; a ring
Simple collective then takes what its channels do (``RingPlan``). Each channel is a SimPy process
(one CTA): it starts at its share of the launch's skew (channel c of C at ``c / (C - 1)`` of
``launch_skew``), then for each loop's chunk runs the loop's primitive calls in order. A call
that puts its chunk on NVLink is a flow on the link (``CappedPool``: max-min fair, each flow at
most the channel's rate over the call's loads and stores a byte); the last call of a loop is
local, the channel's rate over its operations, no link. With a post (``RingChannels.post_at``) a call
on NVLink is its ``RING_SLICES`` slices, each a flow then the post, the channel idle. The transfer
ends when the last channel does. Nothing here decides how the channels line up: with the link
full, channels that started together take their local calls together and the link idles
meanwhile; a channel a little ahead takes more of the link while others are local and draws
further ahead, so the channels drift apart and the link fills. What that costs by size (the mid-size Simple ramp) comes out of
the simulation (docs/gpu.md, "A ring's channels in the engine").

The channels' work depends only on the plan and the fabric's ``ring``, not on anything around
it (the engine runs one kernel at a time and nothing else uses NVLink), so a transfer is
simulated once in its own environment and remembered.
"""

from __future__ import annotations

from collections.abc import Generator
from functools import lru_cache

import simpy

from rdusim.hw.collectives import RING_SLICES, CollectiveCost, RingPlan
from rdusim.sim.custom_ar import custom_ar_transfer_s
from rdusim.sim.p2p import p2p_transfer_s
from rdusim.sim.resources import CappedPool, delay


def collective_time_s(cost: CollectiveCost) -> float:
    """What a collective takes: NCCL's latency plus its transfer, a ring Simple one's simulated
    channel by channel (``ring_transfer_s``) where it carries a plan (its fabric has a ``ring``), an
    all-to-all's p2p Simple one's the same way (``rdusim.sim.p2p``, its fabric has ``p2p``), else the
    wire bytes at the protocol's rate (``CollectiveCost.time_s``); vLLM's custom all-reduce its
    kernel's fixed time plus its blocks simulated (``rdusim.sim.custom_ar``)."""
    if cost.custom is not None:
        return cost.latency_s + custom_ar_transfer_s(cost.custom)
    if cost.ring is not None:
        return cost.latency_s + ring_transfer_s(cost.ring)
    if cost.p2p is not None:
        return cost.latency_s + p2p_transfer_s(cost.p2p)
    return cost.time_s


@lru_cache(maxsize=4096)
def ring_transfer_s(plan: RingPlan) -> float:
    """Seconds from the first channel's start to the last channel's end (module docstring)."""
    ring = plan.ring
    env = simpy.Environment()
    link = CappedPool(env, ring.link_bytes_per_s)
    count = ring.channels
    for channel in range(count):
        env.process(_channel(env, link, plan, ring.channel_bytes_per_s, ring.start_s(channel, count)))
    env.run()
    return env.now


def _channel(env: simpy.Environment, link: CappedPool, plan: RingPlan, rate: float,
             start: float) -> Generator:
    post = plan.ring.post_at(plan.ring.channels)
    slices = RING_SLICES if post else 1  # without a post a call's slices are one flow
    if start:
        yield delay(env, start)
    for chunk in plan.chunks:
        for on_link, ops in plan.primitives:
            if on_link:
                for _ in range(slices):
                    yield link.transfer(chunk / slices, rate / ops)
                    if post:
                        yield delay(env, post)
            else:
                yield delay(env, chunk * ops / rate)
