"""Exact event logs of the engine on the synthetic node: barriers, sends, write-backs, deadlocks.

The node (tests/synthetic.py) has round numbers: 1 GFLOP/s, HBM 1 GB/s, P2P 1 GB/s with 1 us
per transfer setup, launch 10 us, 4 sockets all-to-all (sync: one 1 us step). Every expected
time below is worked out by hand from those rates, in the comments.
"""

from __future__ import annotations

import dataclasses

import pytest

from rdusim.errors import SimulationError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.plan import Chunk, Item, KernelPlan, Stage
from rdusim.sim.engine import simulate_plan
from tests.synthetic import (
    FLOP_PER_S,
    LAUNCH_HW_S,
    P2P_LATENCY_S,
    two_kernel_layers,
    write_mapping,
    write_node,
)

T0 = LAUNCH_HW_S
US, MS = 1e-6, 1e-3


@pytest.fixture(scope="module")
def base_plan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("events")
    node = write_node(folder, 4)
    path = write_mapping(folder, "base", model="llama-3.1-8b", hardware=node, phase="prefill",
                         layers=two_kernel_layers("llama-3.1-8b", "prefill"), workload={"seq_len": 64})
    return build_plan(load_mapping(path))


def _stage(name, works, *, inputs=(), loads=(), stores=(), p2p=(0.0, 0), barrier=False):
    chunks = tuple(Chunk((Item(w, tuple(loads)),), p2p_bytes=p2p[0], p2p_steps=p2p[1], stores=tuple(stores))
                   for w in works)
    return Stage(name, "gemm", 1, FLOP_PER_S, tuple(inputs), chunks, is_barrier=barrier)


def _kernel(name, *stages, depth=2):
    return KernelPlan(name=name, layer_type="dense", stages=tuple(stages), sram_bytes=0.0, chunk_tokens=1,
                      weights_tier="hbm", buffer_depth=depth)


def _run(base_plan, *kernels):
    plan = dataclasses.replace(base_plan, kernels={"dense": kernels}, layer_counts={"dense": 1})
    return simulate_plan(plan)


def _log(trace):
    """(track, name, start, end, bytes) of every event, in start order, to 1e-12 s."""
    rows = [(e.track, e.name, round(e.start_s, 12), round(e.end_s, 12), e.nbytes) for e in trace.events]
    return sorted(rows, key=lambda r: (r[2], r[3], r[0]))


def _at(*rows):
    return sorted(((track, name, round(T0 + a, 12), round(T0 + b, 12), n) for track, name, a, b, n in rows),
                  key=lambda r: (r[2], r[3], r[0]))


def test_barrier_takes_every_input_chunk_before_computing(base_plan):
    # L: 2 chunks, each reads 100 kB (0.1 ms), computes 0.2 MFLOP (0.2 ms), sends 100 kB
    #    (1 us setup + 0.1 ms). B (barrier): 0.3 MFLOP once both chunks are in; each chunk
    #    writes 100 kB back. Both write-backs start together and share HBM: 0.2 ms.
    kernel = _kernel("K", _stage("L", [2e5, 2e5], loads=[("hbm", 1e5)], p2p=(1e5, 1)),
                     _stage("B", [3e5, 0.0], inputs=["L"], stores=[("hbm", 1e5)], barrier=True))
    trace = _run(base_plan, kernel)
    send = US + 0.1 * MS
    expected = _at(
        ("hbm", "L:read", 0, 0.1 * MS, 1e5),
        ("hbm", "L:read", 0.1 * MS, 0.2 * MS, 1e5),                 # the loader runs ahead
        ("compute:L", "L", 0.1 * MS, 0.3 * MS, 0.0),
        ("p2p", "L", 0.3 * MS, 0.3 * MS + send, 1e5),
        ("compute:L", "L", 0.3 * MS + send, 0.5 * MS + send, 0.0),
        ("p2p", "L", 0.5 * MS + send, 0.5 * MS + 2 * send, 1e5),
        ("compute:B", "B", 0.5 * MS + 2 * send, 0.8 * MS + 2 * send, 0.0),   # only after L's 2nd chunk
        ("hbm", "B:write", 0.8 * MS + 2 * send, 1.0 * MS + 2 * send, 1e5),
        ("hbm", "B:write", 0.8 * MS + 2 * send, 1.0 * MS + 2 * send, 1e5),
    )
    assert _log(trace) == expected
    (record,) = trace.kernels
    assert record.end_s == pytest.approx(T0 + 1.0 * MS + 2 * send + P2P_LATENCY_S, rel=1e-12)


def test_without_the_barrier_the_same_stage_streams(base_plan):
    # the same kernel with B an ordinary stage: B computes chunk 0 as soon as L sent it
    kernel = _kernel("K", _stage("L", [2e5, 2e5], loads=[("hbm", 1e5)], p2p=(1e5, 1)),
                     _stage("B", [3e5, 0.0], inputs=["L"], stores=[("hbm", 1e5)]))
    send = US + 0.1 * MS
    computes = [(name, start, end) for track, name, start, end, _ in _log(_run(base_plan, kernel))
                if track.startswith("compute:")]
    assert computes == [("L", round(T0 + 0.1 * MS, 12), round(T0 + 0.3 * MS, 12)),
                        ("L", round(T0 + 0.3 * MS + send, 12), round(T0 + 0.5 * MS + send, 12)),
                        ("B", round(T0 + 0.3 * MS + send, 12), round(T0 + 0.6 * MS + send, 12))]


def test_barrier_releases_its_chunks_downstream_one_by_one(base_plan):
    # A: 3 x 1 ms; B (barrier): 2 ms on all of them; C: 1 ms per chunk B releases
    kernel = _kernel("K", _stage("A", [1e6] * 3), _stage("B", [2e6, 0, 0], inputs=["A"], barrier=True),
                     _stage("C", [1e6] * 3, inputs=["B"]), depth=1)
    computes = [(name, start, end) for track, name, start, end, _ in _log(_run(base_plan, kernel))
                if track.startswith("compute:")]
    assert computes == [(n, round(T0 + a * MS, 12), round(T0 + b * MS, 12)) for n, a, b in [
        ("A", 0, 1), ("A", 1, 2), ("A", 2, 3), ("B", 3, 5), ("C", 5, 6), ("C", 6, 7), ("C", 7, 8)]]


def test_a_stage_waiting_for_a_chunk_nobody_sends_deadlocks_and_names_the_kernel(base_plan):
    # B expects 3 chunks from A, which makes 2: the event queue empties with B waiting
    good = _kernel("First", _stage("X", [1e6]))
    bad = _kernel("Second", _stage("A", [1e6] * 2), _stage("B", [1e6] * 3, inputs=["A"]))
    with pytest.raises(SimulationError) as error:
        _run(base_plan, good, bad)
    message = str(error.value)
    # stuck after First (launch + 1 ms + sync), Second's launch, and A's and B's two chunks each
    now = T0 + 1 * MS + P2P_LATENCY_S + T0 + 3 * MS
    assert f"deadlocked at t={now:.6g} s in kernel 'Second' (dense layer 0)" in message
    assert "stage(s) B never finished" in message
    assert "1 kernel call(s) completed before it" in message


def test_stages_waiting_on_each_other_deadlock(base_plan):
    kernel = _kernel("Loop", _stage("A", [1e6], inputs=["B"]), _stage("B", [1e6], inputs=["A"]))
    with pytest.raises(SimulationError, match=r"in kernel 'Loop' \(dense layer 0\): stage\(s\) A, B never finished"):
        _run(base_plan, kernel)
