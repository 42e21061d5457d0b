"""An NCCL all-to-all's p2p Simple transfer, channel by channel: a pipeline a channel.

Owns: ``p2p_transfer_s``. Imports: resources, hw.collectives.

NCCL runs an all-to-all as grouped sends and receives to every peer at once, each peer's part on
its channels (``rdusim.hw.collectives.P2pPlan``). A channel that sends to one peer and receives
from one runs its send and its receive at once on separate warps (NCCL 2.28
``src/device/sendrecv.h``), so each channel is two SimPy processes joined by the receiver's FIFO of
``P2P_FIFO_STEPS`` chunks:

- the sender, for each chunk: waits for a free slot, puts the chunk on NVLink (a flow on the GPU's
  link, ``CappedPool``: max-min fair among every sending channel, each at most ``send``), then
  posts it (``step``, fixed: the fence and flag after its bytes);
- the receiver, for each chunk: waits until it is posted, copies it out at ``receive`` (local) and
  frees its slot.

With ``P2pChannels.queue`` (the GPU documents' default since run dj), a chunk's send and post is
instead the cycle of the sending channels as a closed network at the link
(``P2pChannels.send_at``, ``rdusim.hw.closed_network``), with the channels sending when the chunk
starts: those started by then (their start times, so channels starting together count each other)
less those whose last chunk is sent. Max-min sharing lets equal channels fall into step and meet at
the link only once it is full; NCCL's 16 channels a peer on two GPUs took 10-24% longer than that
(runs ch, ci), which the network's cycle predicts (run dj, frozen: 4.8% against 11.7% median;
docs/gpu.md, "Run dj").

Channels start ``launch_skew`` apart across the launch, as the ring's. The transfer ends when the
last receiver does. A channel's work depends only on the plan (the engine runs one kernel at a
time), so a transfer is simulated once in its own environment and remembered.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Generator
from functools import lru_cache

import simpy

from rdusim.hw.collectives import P2P_FIFO_STEPS, P2pPlan
from rdusim.sim.resources import CappedPool, delay


@lru_cache(maxsize=4096)
def p2p_transfer_s(plan: P2pPlan) -> float:
    """Seconds from the first channel's start to the last receiver's end (module docstring)."""
    env = simpy.Environment()
    count = plan.channels
    starts = sorted(plan.ring.start_s(channel, count) for channel in range(count))
    link = None if plan.p2p.queue else CappedPool(env, plan.ring.link_bytes_per_s)
    sent = [0]  # channels whose last chunk is sent
    for start in starts:
        slots = simpy.Container(env, capacity=P2P_FIFO_STEPS, init=P2P_FIFO_STEPS)
        posted: simpy.Store = simpy.Store(env)
        if link is None:
            env.process(_queued_sender(env, plan, start, starts, sent, slots, posted))
        else:
            env.process(_sender(env, link, plan, start, slots, posted))
        env.process(_receiver(env, plan, slots, posted))
    env.run()
    return env.now


def _sender(env: simpy.Environment, link: CappedPool, plan: P2pPlan, start: float, slots: simpy.Container,
            posted: simpy.Store) -> Generator:
    if start:
        yield delay(env, start)
    for chunk in plan.chunks:
        yield slots.get(1)
        yield link.transfer(chunk, plan.p2p.send_bytes_per_s)
        yield delay(env, plan.p2p.step_s)
        yield posted.put(chunk)


def _queued_sender(env: simpy.Environment, plan: P2pPlan, start: float, starts: list[float], sent: list[int],
                   slots: simpy.Container, posted: simpy.Store) -> Generator:
    if start:
        yield delay(env, start)
    link_rate = plan.ring.link_bytes_per_s
    for chunk in plan.chunks:
        yield slots.get(1)
        sending = bisect_right(starts, env.now) - sent[0]
        yield delay(env, plan.p2p.send_at(chunk, sending, link_rate))
        yield posted.put(chunk)
    sent[0] += 1


def _receiver(env: simpy.Environment, plan: P2pPlan, slots: simpy.Container, posted: simpy.Store) -> Generator:
    for _ in plan.chunks:
        chunk = yield posted.get()
        yield delay(env, chunk / plan.p2p.receive_bytes_per_s)
        yield slots.put(1)
