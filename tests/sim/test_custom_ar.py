"""vLLM's custom all-reduce: its rule and grid (rdusim.hw.custom_all_reduce, against vLLM's source),
its blocks on the link (rdusim.sim.custom_ar) against closed forms and bounds, and the engine's choice
of it (rdusim.mapping.gpu via Gpu.all_reduce)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.hw.closed_network import closed_network_cycle
from rdusim.hw.collectives import Fabric, collective_cost, custom_ar_cost
from rdusim.hw.custom_all_reduce import (
    VLLM_MAX_BYTES,
    CustomArLink,
    custom_ar_applies,
    custom_ar_blocks,
    custom_ar_plan,
    custom_ar_stages,
    custom_ar_wire_bytes,
)
from rdusim.sim.custom_ar import custom_ar_transfer_s
from rdusim.sim.ring import collective_time_s

KIB, MIB = 1 << 10, 1 << 20
#: a pass with one load a thread 1.5 us (two GPUs), 0.3 us more for each further peer's
LINK = CustomArLink(load_s=1.2e-6, per_load_s=0.3e-6, flag_s=0.8e-6, read_bytes_per_s=369.2e9, kernel_s=1.106e-6)


@pytest.mark.parametrize(("ranks", "nbytes", "stages"), [
    (2, 1 * KIB, 1), (2, 7 * MIB, 1), (4, 512 * KIB - 16, 1), (4, 512 * KIB, 2), (6, 256 * KIB - 16, 1),
    (6, 256 * KIB, 2), (8, 256 * KIB - 16, 1), (8, 4 * MIB, 2),
])
def test_vllms_stage_rule(ranks: int, nbytes: int, stages: int) -> None:
    """allreduce's REDUCE_CASE: one stage on two GPUs; on 4 under 512 KiB, on 6-8 under 256 KiB."""
    assert custom_ar_stages(nbytes, ranks) == stages


def test_vllms_grid_and_when_it_runs() -> None:
    """min(36, ceil(packs / 512)) blocks; 2/4/6/8 GPUs, whole 16-byte packs, under 8 MiB."""
    assert [custom_ar_blocks(s) for s in (16, 8 * KIB, 8 * KIB + 16, 288 * KIB, 289 * KIB, 64 * MIB)] == \
        [1, 1, 2, 36, 36, 36]
    assert custom_ar_applies(VLLM_MAX_BYTES - 16, 8) and not custom_ar_applies(VLLM_MAX_BYTES, 8)
    assert not custom_ar_applies(1 * KIB, 3) and not custom_ar_applies(1 * KIB + 8, 2)
    assert custom_ar_cost(1 * KIB, 2, Fabric(344e9)) is None  # the document does not describe it


def test_one_pass_one_block_is_two_barriers_and_a_pass() -> None:
    """8 KiB on two GPUs: one block, each thread one pack from the peer; 8 KiB in flight cross in a
    pass (the link could take them in 22 ns): flag + pass + flag."""
    plan = custom_ar_plan(8 * KIB, 2, LINK)
    assert (plan.blocks, plan.phases, plan.barriers) == (1, (512,), 2)
    assert custom_ar_transfer_s(plan) == pytest.approx(2 * 0.8e-6 + 1.5e-6, rel=1e-12)


@pytest.mark.parametrize(("nbytes", "ranks", "pass_s"), [
    (16, 4, 2.1e-6), (8 * KIB, 4, 2.1e-6), (16, 8, 3.3e-6), (4 * KIB, 6, 2.7e-6), (1 * KIB, 2, 1.5e-6)])
def test_a_pass_costs_a_load_a_peer_whatever_the_threads(nbytes: int, ranks: int, pass_s: float) -> None:
    """One block, one pass, one stage: a load's round trip plus 0.3 us for each of the n - 1 loads a
    thread keeps in flight, whether one thread is active or 512 (runs da and db)."""
    plan = custom_ar_plan(nbytes, ranks, LINK)
    assert (plan.blocks, plan.stages, plan.pass_s) == (1, 1, pytest.approx(pass_s, rel=1e-12))
    assert custom_ar_transfer_s(plan) == pytest.approx(2 * 0.8e-6 + pass_s, rel=1e-12)


def test_latency_bound_passes_add_up() -> None:
    """4 MiB on two GPUs at vLLM's 36 blocks: 262144 packs over 36 x 512 threads is 15 passes, the last
    with 4096 packs (8 blocks reading); 36 x 8 KiB over 1.5 us (197 GB/s) stays under the link, so each
    pass is the closed network's cycle at its blocks reading, a little over the lone 1.5 us."""
    plan = custom_ar_plan(4 * MIB, 2, LINK)
    assert math.ceil(262144 / (36 * 512)) == 15 and 262144 - 14 * 36 * 512 == 8 * 512
    at_link = 8 * KIB / 369.2e9
    full, last = (closed_network_cycle(1.5e-6 - at_link, at_link, n) for n in (36, 8))
    assert 1.5e-6 < last < full < 1.5e-6 + 36 * at_link
    assert custom_ar_transfer_s(plan) == pytest.approx(2 * 0.8e-6 + 14 * full + last, rel=1e-9)


def test_link_bound_blocks_share_the_link() -> None:
    """On a link the blocks' loads in flight overfill (132 blocks, 1 GB/s), every byte crosses at the
    link's rate: the barriers plus the peer's bytes over the link."""
    slow = dataclasses.replace(LINK, read_bytes_per_s=1e9)
    plan = custom_ar_plan(16 * MIB, 2, slow, block_limit=132)
    assert custom_ar_transfer_s(plan) == pytest.approx(2 * 0.8e-6 + 16 * MIB / 1e9, rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(ranks=st.sampled_from([2, 4, 6, 8]), packs=st.integers(1, 1 << 19), limit=st.sampled_from([1, 8, 36, 132]),
       link=st.sampled_from([50e9, 369.2e9, 5e12]))
def test_no_custom_all_reduce_beats_its_bounds(ranks: int, packs: int, limit: int, link: float) -> None:
    """Never faster than its first and last barrier plus its peer bytes at the link's rate (a block's
    barrier between two phases overlaps the others' reads), nor than its barriers plus a pass each of
    its first block's; bytes conserved: the phases read every pack once a stage."""
    nbytes = 16 * packs
    at = dataclasses.replace(LINK, read_bytes_per_s=link)
    plan = custom_ar_plan(nbytes, ranks, at, block_limit=limit)
    t = custom_ar_transfer_s(plan)
    barriers = plan.barriers * at.flag_s
    read = sum(plan.phases) * 16 * (ranks - 1)
    whole = 16 * (packs - packs % ranks) if plan.stages == 2 else nbytes  # two stages: the remainder aside
    assert read == pytest.approx(custom_ar_wire_bytes(whole, ranks, plan.stages), abs=16 * ranks * ranks)
    ends = (2 if plan.stages == 1 else 1) * at.flag_s
    assert t >= ends + read / link * (1 - 1e-9)
    reading = [min(plan.blocks, math.ceil((p - m * plan.blocks * 512) / 512))
               for p in plan.phases for m in range(math.ceil(p / (plan.blocks * 512)))]
    assert t >= barriers + sum(plan.pass_with(n) for n in reading) * (1 - 1e-9)  # the first block reads every pass


def test_the_engine_runs_it_only_where_vllm_would() -> None:
    """With the link in the fabric an all-reduce under 8 MiB is vLLM's kernel (its time: the kernel's
    fixed time plus the blocks); 8 MiB and up, and other collectives, are NCCL's."""
    fabric = Fabric(344e9, custom=LINK)
    cost = custom_ar_cost(1 * MIB, 8, fabric)
    assert (cost.algorithm, cost.protocol, cost.custom.stages) == ("custom", "2-stage", 2)
    assert collective_time_s(cost) == pytest.approx(LINK.kernel_s + custom_ar_transfer_s(cost.custom))
    assert custom_ar_cost(8 * MIB, 8, fabric) is None
    assert collective_cost("all_reduce", 1 * MIB, 8, fabric).custom is None  # NCCL's tuner never picks it


def test_two_stages_fence_their_middle_barrier() -> None:
    """1 MiB on eight GPUs at 36 blocks, two stages of one pass each (its part, 8192 packs, under 36 x 512
    threads; on a link the 16 busy blocks' 7 x 8 KiB each cannot fill): flag, a pass (seven loads a
    thread: 1.2 + 7 x 0.3 us alone, 16 blocks reading), the middle barrier (the fence of 36 blocks fencing
    at once, then a flag), a pass; no end barrier. Without a fence the middle barrier is the flag alone."""
    fenced = dataclasses.replace(LINK, fence_s=1.1e-6, fence_per_block_s=0.05e-6, read_bytes_per_s=5e12)
    plan = custom_ar_plan(1 * MIB, 8, fenced)
    assert (plan.stages, plan.blocks, plan.phases, plan.barriers) == (2, 36, (8192, 8192), 2)
    at_link = 7 * 8 * KIB / 5e12
    one = closed_network_cycle(3.3e-6 - at_link, at_link, 16)
    assert plan.pass_with(16) == pytest.approx(one, rel=1e-12) and 3.3e-6 < one < 3.3e-6 + 16 * at_link
    want = 0.8e-6 + one + (1.1e-6 + 35 * 0.05e-6) + 0.8e-6 + one
    assert custom_ar_transfer_s(plan) == pytest.approx(want, rel=1e-9)
    bare = dataclasses.replace(fenced, fence_s=0.0, fence_per_block_s=0.0)
    assert custom_ar_transfer_s(custom_ar_plan(1 * MIB, 8, bare)) == pytest.approx(want - 2.85e-6, rel=1e-9)


def test_the_closed_network_by_hand() -> None:
    """Mean value analysis by hand: one customer is the delay and the service; two (delay 1, service 1): the
    second finds the first at the server half the time, 1 + 1 x (1 + 1/2) = 2.5; no delay: the server's n x
    service exactly."""
    assert closed_network_cycle(0.7, 0.3, 1) == pytest.approx(1.0, rel=1e-15)
    assert closed_network_cycle(1.0, 1.0, 2) == pytest.approx(2.5, rel=1e-15)
    assert closed_network_cycle(0.0, 0.25, 12) == pytest.approx(3.0, rel=1e-15)


@settings(max_examples=60, deadline=None)
@given(delay=st.floats(0.0, 10.0), service=st.floats(1e-3, 10.0), n=st.integers(1, 200))
def test_the_closed_network_lies_between_its_bounds(delay: float, service: float, n: int) -> None:
    """A cycle is never under the lone cycle nor the server's n x service, never over the lone cycle with
    every other customer queued ahead, and grows with the customers (throughput n / cycle never over 1 /
    service)."""
    cycle = closed_network_cycle(delay, service, n)
    assert cycle >= max(delay + service, n * service) * (1 - 1e-12)
    assert cycle <= (delay + n * service) * (1 + 1e-12)
    assert closed_network_cycle(delay, service, n + 1) >= cycle * (1 - 1e-12)


def test_a_lone_block_is_its_line_and_many_queue_at_the_link() -> None:
    """``pass_at``: one block reading is the lone pass (load + loads x per_load); with many the closed
    network's cycle, at least the blocks' bytes at the link; without ``queue``, the lone pass whatever the
    blocks (runs cx-dh's model)."""
    at_link = 3 * 8 * KIB / LINK.read_bytes_per_s
    assert LINK.pass_at(3, 1) == pytest.approx(LINK.alone_at(3), rel=1e-12) == pytest.approx(2.1e-6)
    many = LINK.pass_at(3, 200)
    assert many == pytest.approx(closed_network_cycle(2.1e-6 - at_link, at_link, 200), rel=1e-15)
    assert many >= 200 * at_link
    assert dataclasses.replace(LINK, queue=False).pass_at(3, 200) == LINK.alone_at(3)
