"""The analytical estimator against the event engine and closed forms, on hand-built kernels.

Kernels are built directly (``Stage``/``Chunk``/``Item``) and run on the synthetic node of
tests/synthetic.py (4 sockets, all-to-all: sync = one 1 us P2P step; launch 10 us, or 100 us
software-orchestrated; 1 GFLOP/s, HBM 1 GB/s, DDR 0.1 GB/s, P2P 1 GB/s).

Where the estimator's recurrence is exact (compute-only pipelines without back-pressure,
barriers, P2P sends, loads or stores alone) the estimate, the engine and a closed form agree to
1e-12. Where it is not, the gap is stated and asserted exactly: the estimator overlaps every
load with compute and ignores the write-back tail, so it leaves out the pipeline fill (the
first item's load before anything computes) and the drain (the last write after the last
compute).
"""

from __future__ import annotations

import dataclasses

import pytest

from rdusim.analysis.explore.estimate import kernel_estimate
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.plan import Chunk, Item, KernelPlan, Stage
from rdusim.sim.engine import simulate_plan
from tests.synthetic import (
    DDR_BYTES_PER_S,
    FLOP_PER_S,
    HBM_BYTES_PER_S,
    LAUNCH_HW_S,
    LAUNCH_SW_S,
    P2P_BYTES_PER_S,
    P2P_LATENCY_S,
    two_kernel_layers,
    write_mapping,
    write_node,
)

SYNC_S = P2P_LATENCY_S      # one all-to-all step among the 4 sockets
EXACT = 1e-12


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("estimate")
    node = write_node(folder, 4)
    return load_mapping(write_mapping(folder, "base", model="llama-3.1-8b", hardware=node, phase="prefill",
                                      layers=two_kernel_layers("llama-3.1-8b", "prefill"),
                                      workload={"seq_len": 64}))


@pytest.fixture(scope="module")
def base_plan(loaded):
    return build_plan(loaded)


def _stage(name, works, *, inputs=(), loads=(), stores=(), p2p=(0.0, 0), barrier=False, rate=FLOP_PER_S):
    """A stage of one item per chunk; ``loads``/``stores`` are (tier, bytes) per chunk."""
    chunks = tuple(Chunk((Item(w, tuple(loads)),), p2p_bytes=p2p[0], p2p_steps=p2p[1], stores=tuple(stores))
                   for w in works)
    return Stage(name, "gemm", 1, rate, tuple(inputs), chunks, is_barrier=barrier)


def _kernel(*stages, depth=8, orchestration="hardware"):
    return KernelPlan(name="K", layer_type="dense", stages=tuple(stages), sram_bytes=0.0, chunk_tokens=1,
                      weights_tier="hbm", buffer_depth=depth, orchestration=orchestration)


def _engine_s(base_plan, kernel) -> float:
    plan = dataclasses.replace(base_plan, kernels={"dense": (kernel,)}, layer_counts={"dense": 1})
    (record,) = simulate_plan(plan).kernels
    return record.end_s - record.start_s


def _estimate_s(loaded, kernel) -> float:
    return kernel_estimate(kernel, loaded).latency_s


def _both(loaded, base_plan, kernel) -> tuple[float, float]:
    return _engine_s(base_plan, kernel), _estimate_s(loaded, kernel)


# ------------------------------------------------------------------------ exact cases
@pytest.mark.parametrize("orchestration, launch", [("hardware", LAUNCH_HW_S), ("software", LAUNCH_SW_S)])
def test_single_stage_compute(loaded, base_plan, orchestration, launch):
    kernel = _kernel(_stage("A", [3e6] * 5), orchestration=orchestration)
    engine, estimate = _both(loaded, base_plan, kernel)
    expected = launch + 5 * 3e6 / FLOP_PER_S + SYNC_S
    assert engine == pytest.approx(expected, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


@pytest.mark.parametrize("a, b", [(2e6, 3e6), (3e6, 2e6), (2e6, 2e6)])
def test_two_stage_pipeline(loaded, base_plan, a, b):
    # fill with one chunk of the first stage, then the slower stage sets the pace
    n = 6
    kernel = _kernel(_stage("A", [a] * n), _stage("B", [b] * n, inputs=["A"]), depth=n)
    engine, estimate = _both(loaded, base_plan, kernel)
    fast, slow = sorted((a, b))
    expected = LAUNCH_HW_S + (n * slow + fast) / FLOP_PER_S + SYNC_S
    assert engine == pytest.approx(expected, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


def test_diamond_with_uneven_chunks(loaded, base_plan):
    # A feeds B and C; D joins them. Chunk works differ per stage, so the recurrence
    # finish[s][c] = max(finish[s][c-1], finish[inputs][c]) + work is exercised on every term
    a, b, c, d = [1e6, 4e6, 1e6], [3e6, 1e6, 1e6], [1e6, 1e6, 5e6], [2e6, 2e6, 1e6]
    kernel = _kernel(_stage("A", a), _stage("B", b, inputs=["A"]), _stage("C", c, inputs=["A"]),
                     _stage("D", d, inputs=["B", "C"]), depth=3)
    engine, estimate = _both(loaded, base_plan, kernel)
    # by hand (ms): A ends 1, 5, 6; B 4, 6, 7; C 2, 6, 11; D max(B,C)+d: 6, 8, 12
    assert engine == pytest.approx(LAUNCH_HW_S + 12e-3 + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


def test_barrier_takes_every_chunk_first(loaded, base_plan):
    # B (a global top-K) computes once all of A's 4 chunks arrived; C follows B chunk by chunk
    kernel = _kernel(_stage("A", [1e6] * 4), _stage("B", [5e6, 0, 0, 0], inputs=["A"], barrier=True),
                     _stage("C", [2e6] * 4, inputs=["B"]))
    engine, estimate = _both(loaded, base_plan, kernel)
    assert engine == pytest.approx(LAUNCH_HW_S + (4 * 1e6 + 5e6 + 4 * 2e6) / FLOP_PER_S + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


@pytest.mark.parametrize("tier, rate", [("hbm", HBM_BYTES_PER_S), ("ddr", DDR_BYTES_PER_S)])
def test_loads_alone(loaded, base_plan, tier, rate):
    kernel = _kernel(_stage("L", [0.0] * 4, loads=[(tier, 1e5)]))
    engine, estimate = _both(loaded, base_plan, kernel)
    assert engine == pytest.approx(LAUNCH_HW_S + 4 * 1e5 / rate + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


def test_stores_alone_share_hbm(loaded, base_plan):
    # four write-backs in flight at once share HBM: all land at 4 x bytes / bandwidth
    kernel = _kernel(_stage("S", [0.0] * 4, stores=[("hbm", 2e5)]))
    engine, estimate = _both(loaded, base_plan, kernel)
    assert engine == pytest.approx(LAUNCH_HW_S + 4 * 2e5 / HBM_BYTES_PER_S + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


def test_compute_then_send(loaded, base_plan):
    # each chunk: compute, then its collective: 2 latency steps, then the bytes at the P2P rate
    kernel = _kernel(_stage("X", [1e6] * 3, p2p=(5e5, 2)))
    engine, estimate = _both(loaded, base_plan, kernel)
    per_chunk = 1e6 / FLOP_PER_S + 2 * P2P_LATENCY_S + 5e5 / P2P_BYTES_PER_S
    assert engine == pytest.approx(LAUNCH_HW_S + 3 * per_chunk + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine, rel=EXACT)


# ------------------------------------------------------------- where the estimate is short
@pytest.mark.parametrize("load_bytes, work", [(1e5, 3e5), (3e5, 1e5)])
def test_load_and_compute_misses_the_pipeline_fill(loaded, base_plan, load_bytes, work):
    # loads run ahead of compute; nothing computes before the first load has landed
    n = 5
    kernel = _kernel(_stage("G", [work] * n, loads=[("hbm", load_bytes)]))
    engine, estimate = _both(loaded, base_plan, kernel)
    load, compute = load_bytes / HBM_BYTES_PER_S, work / FLOP_PER_S
    assert engine == pytest.approx(LAUNCH_HW_S + n * max(load, compute) + min(load, compute) + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine - min(load, compute), rel=EXACT)


def test_compute_and_store_misses_the_write_back_tail(loaded, base_plan):
    n, work, store = 4, 3e5, 1e5
    kernel = _kernel(_stage("G", [work] * n, stores=[("hbm", store)]))
    engine, estimate = _both(loaded, base_plan, kernel)
    assert engine == pytest.approx(LAUNCH_HW_S + n * work / FLOP_PER_S + store / HBM_BYTES_PER_S + SYNC_S, rel=EXACT)
    assert estimate == pytest.approx(engine - store / HBM_BYTES_PER_S, rel=EXACT)
