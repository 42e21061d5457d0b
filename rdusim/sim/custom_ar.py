"""vLLM's custom all-reduce, block by block.

Owns: ``custom_ar_transfer_s``. Imports: resources, hw.custom_all_reduce.

A plan (``rdusim.hw.custom_all_reduce.CustomArPlan``) is one kernel of ``blocks`` blocks of
``VLLM_THREADS`` threads. Each block is a SimPy process: a barrier is a flag's way to a peer
(``flag_s``; every rank's same block stores and spins at once, so one way); a reading phase is the
block's passes over its packs (pack ``j x threads + t + m x blocks x threads`` is thread ``t``'s in
pass ``m``), each pass a flow on the GPU's NVLink (``CappedPool``, max-min fair among the blocks) of
the active threads' bytes from the peers, at most those bytes over one pass (``CustomArPlan.pass_with``
the blocks reading in that pass: a lone block's pass, a fixed part and a cost for each load a thread
keeps in flight, one a peer, queued at the reads' link with the other blocks' as a closed network,
``CustomArLink.pass_at``; a phase's last passes have fewer blocks reading). The
two-stage kernel's middle barrier also waits for its release fence (``CustomArLink.fence_at``: flat in
the shipped documents, run de). The transfer ends when the last block does; the kernel's own fixed time is
the cost's latency (``rdusim.hw.collectives.custom_ar_cost``).

A block's work depends only on the plan, so a transfer is simulated once in its own environment and
remembered.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from functools import lru_cache

import simpy

from rdusim.hw.custom_all_reduce import VLLM_THREADS, CustomArPlan
from rdusim.sim.resources import CappedPool, delay


@lru_cache(maxsize=4096)
def custom_ar_transfer_s(plan: CustomArPlan) -> float:
    """Seconds from the blocks' start to the last block's end (module docstring)."""
    env = simpy.Environment()
    link = CappedPool(env, plan.link.read_bytes_per_s)
    for block in range(plan.blocks):
        env.process(_block(env, link, plan, block))
    env.run()
    return env.now


def _block(env: simpy.Environment, link: CappedPool, plan: CustomArPlan, block: int) -> Generator:
    a_thread = plan.remote_bytes_a_thread
    stride = plan.blocks * VLLM_THREADS
    for phase, packs in enumerate(plan.phases):
        # the barrier before the phase; the two stages' middle one is release / acquire: a fence first
        yield delay(env, plan.link.flag_s + (plan.link.fence_at(plan.blocks) if phase else 0.0))
        first = block * VLLM_THREADS
        while first < packs:
            active = min(VLLM_THREADS, packs - first)
            nbytes = active * a_thread
            reading = min(plan.blocks, math.ceil((packs - (first - block * VLLM_THREADS)) / VLLM_THREADS))
            yield link.transfer(nbytes, nbytes / plan.pass_with(reading))
            first += stride
    if plan.stages == 1:
        yield delay(env, plan.link.flag_s)  # one stage's barrier at the end (barrier_at_end)
