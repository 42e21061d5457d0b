"""The engine on hand-built kernels: exact event logs, backpressure, closed forms."""

from __future__ import annotations

import dataclasses

import pytest

from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.plan import Chunk, Item, KernelPlan, Stage
from rdusim.sim.engine import simulate_plan
from tests.conftest import LLAMA

LAUNCH, SYNC = 1e-6, 2e-6  # sn40l.yaml kernel_launch; p2p latency x 1 step (all-to-all)


@pytest.fixture(scope="module")
def base_plan():
    return build_plan(load_mapping(LLAMA, seq_len=1024))


def _run(base_plan, *stages: Stage, depth: int = 2):
    kernel = KernelPlan("K", "dense", tuple(stages), sram_bytes=0.0, chunk_tokens=1, weights_tier="hbm",
                        buffer_depth=depth)
    plan = dataclasses.replace(base_plan, kernels={"dense": (kernel,)}, layer_counts={"dense": 1})
    return simulate_plan(plan)


def _stage(name: str, works: list[float], inputs=(), loads=(), stores=(), rate=1e12) -> Stage:
    chunks = tuple(Chunk((Item(w, tuple(loads)),), stores=tuple(stores)) for w in works)
    return Stage(name, "gemm", 1, rate, tuple(inputs), chunks)


def _log(trace, track_prefix="compute:"):
    return [(e.name, round(e.start_s, 12), round(e.end_s, 12)) for e in trace.events if e.track.startswith(track_prefix)]


def test_two_stage_pipeline_exact_log(base_plan):
    # A: 3 chunks of 2 ms; B (fed by A): 3 chunks of 3 ms. B starts when A's first chunk is done.
    trace = _run(base_plan, _stage("A", [2e9] * 3), _stage("B", [3e9] * 3, inputs=["A"]))
    ms = [(name, round(LAUNCH + a * 1e-3, 12), round(LAUNCH + b * 1e-3, 12)) for name, a, b in [
        ("A", 0, 2), ("A", 2, 4), ("B", 2, 5), ("A", 4, 6), ("B", 5, 8), ("B", 8, 11)]]
    assert _log(trace) == ms
    t0 = LAUNCH
    (kernel,) = trace.kernels
    assert kernel.end_s == pytest.approx(t0 + 11e-3 + SYNC, rel=1e-12)


def test_bounded_buffer_back_pressure(base_plan):
    # B is slow (5 ms); with a buffer of depth 1 A cannot run more than one chunk ahead:
    # A's 4th chunk starts only when B takes A's 2nd chunk at l+7 ms.
    trace = _run(base_plan, _stage("A", [2e9] * 4), _stage("B", [5e9] * 4, inputs=["A"]), depth=1)
    starts = [s for name, s, _ in _log(trace) if name == "A"]
    t0 = LAUNCH
    assert starts == pytest.approx([t0, t0 + 2e-3, t0 + 4e-3, t0 + 7e-3], rel=1e-12)


def test_single_gemm_closed_form(base_plan):
    # one chunk: load, compute, store happen in sequence: launch + in/bw + work/rate + out/bw + sync
    hbm = base_plan.system.socket.tier_bytes_per_s("hbm")
    trace = _run(base_plan, _stage("G", [4e9], loads=[("hbm", 3e9)], stores=[("hbm", 1e9)]))
    (kernel,) = trace.kernels
    expected = LAUNCH + 3e9 / hbm + 4e9 / 1e12 + 1e9 / hbm + SYNC
    assert kernel.end_s - kernel.start_s == pytest.approx(expected, rel=1e-12)


def test_streaming_overlaps_load_and_compute(base_plan):
    # 16 chunks: loads run ahead of compute, so the kernel takes about max(memory, compute)
    hbm = base_plan.system.socket.tier_bytes_per_s("hbm")
    n, load, work = 16, 1e9, 1e9
    trace = _run(base_plan, _stage("G", [work] * n, loads=[("hbm", load)]))
    latency = trace.kernels[0].end_s - trace.kernels[0].start_s
    memory, compute = n * load / hbm, n * work / 1e12
    assert max(memory, compute) < latency < max(memory, compute) + min(memory, compute) / n * 1.01 + 1e-5


def test_concurrent_loads_contend_for_hbm(base_plan):
    # two stages each loading 1 GB at once share HBM: both finish at 2 GB / bandwidth
    hbm = base_plan.system.socket.tier_bytes_per_s("hbm")
    trace = _run(base_plan, _stage("A", [0.0], loads=[("hbm", 1e9)]), _stage("B", [0.0], loads=[("hbm", 1e9)]))
    reads = [e for e in trace.events if e.track == "hbm"]
    assert [e.end_s - e.start_s for e in reads] == pytest.approx([2e9 / hbm] * 2, rel=1e-9)
