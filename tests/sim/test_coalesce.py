"""The coalesced engine (the default) against the reference engine (``coalesce=False``: one
event per work item per socket): the same kernel records and trace events to 1e-9 relative on
every shipped mapping, on the general path (every layer on every socket), and on random
pipelines (Hypothesis) that stress the loader-to-compute buffer rule; and fewer events. Direct
scheduling (``engine.DIRECT``, the default) against SimPy processes, ``Timeout``s and
``env.run()``: the same events, records and event counts, bit for bit."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdusim.analysis.result import simulate
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.plan import Chunk, Item, KernelPlan, Stage
from rdusim.sim import engine
from rdusim.sim.engine import simulate_plan
from rdusim.sim.trace import Trace
from tests.conftest import LLAMA, MAPPINGS
from tests.synthetic import FLOP_PER_S, random_kernels, two_kernel_layers, write_mapping, write_node

REL = 1e-9


def _close(a: float, b: float) -> bool:
    return a == b or math.isclose(a, b, rel_tol=REL, abs_tol=1e-18)


def _assert_same_kernels(reference: Trace, coalesced: Trace) -> None:
    assert len(reference.kernels) == len(coalesced.kernels)
    for a, b in zip(reference.kernels, coalesced.kernels, strict=True):
        assert (a.kernel, a.layer, a.layer_type, a.stage_pcus) == (b.kernel, b.layer, b.layer_type, b.stage_pcus)
        for x, y in [(a.start_s, b.start_s), (a.end_s, b.end_s), (a.launch_sync_s, b.launch_sync_s)]:
            assert _close(x, y), (a.kernel, a.layer, x, y)
        for field in ("stage_busy_s", "pool_busy_s", "pool_bytes"):
            left, right = getattr(a, field), getattr(b, field)
            assert left.keys() == right.keys()
            assert all(_close(left[k], right[k]) for k in left), (a.kernel, field, left, right)
    assert reference.layer_multiplier == coalesced.layer_multiplier
    assert reference.sockets_simulated == coalesced.sockets_simulated


def _assert_same(reference: Trace, coalesced: Trace) -> None:
    _assert_same_kernels(reference, coalesced)

    def rows(trace: Trace) -> list[tuple]:
        return sorted((e.socket, e.track, e.name, e.kernel, e.layer, e.start_s, e.end_s, e.nbytes, e.work)
                      for e in trace.events)

    left, right = rows(reference), rows(coalesced)
    assert len(left) == len(right)
    for x, y in zip(left, right, strict=True):
        assert x[:5] == y[:5] and all(_close(p, q) for p, q in zip(x[5:], y[5:], strict=True)), (x, y)


@pytest.mark.parametrize("mapping", MAPPINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_mapping_same_as_the_reference_engine(mapping) -> None:
    reference = simulate(mapping, coalesce=False)   # as shipped: DeepSeek-R1 prefill at 128K
    coalesced = simulate(mapping)
    _assert_same(reference.trace, coalesced.trace)
    assert _close(reference.total_s, coalesced.total_s)
    assert coalesced.trace.event_count < reference.trace.event_count
    # without a trace, landings nobody reacts to at their instant are no events (lazy landings):
    # the same kernel records bit for bit, in fewer events still
    lazy = simulate(mapping, record_events=False)
    _assert_same_kernels(reference.trace, lazy.trace)
    assert lazy.trace.kernels == coalesced.trace.kernels and lazy.total_s == coalesced.total_s
    assert lazy.trace.event_count <= coalesced.trace.event_count


def _plain(run):   # noqa: ANN001, ANN202
    """``run()`` with SimPy processes, ``Timeout``s, event timers and ``env.run()`` (``DIRECT`` off)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "DIRECT", False)
        return run()


def _assert_identical(direct: Trace, plain: Trace) -> None:
    assert direct.kernels == plain.kernels
    assert direct.events == plain.events   # in the same order
    assert direct.event_count == plain.event_count


@pytest.mark.parametrize("mapping", MAPPINGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_direct_scheduling_same_as_simpy_processes_on_every_shipped_mapping(mapping) -> None:
    for record in (True, False):
        direct = simulate(mapping, record_events=record)
        plain = _plain(lambda record=record: simulate(mapping, record_events=record))
        _assert_identical(direct.trace, plain.trace)
        assert direct.total_s == plain.total_s
    reference = simulate(mapping, coalesce=False, record_events=False)   # the reference engine under each
    _assert_identical(reference.trace, _plain(lambda: simulate(mapping, coalesce=False, record_events=False)).trace)


@pytest.mark.parametrize("overrides", [[], ["defaults.kernel_looping=true"]], ids=["plain", "looped"])
def test_general_path_sockets_coalesced_same_as_every_socket_simulated(overrides) -> None:
    kw = {"seq_len": 2048, "fast": False, "overrides": overrides}
    reference = simulate(LLAMA, coalesce=False, **kw)
    coalesced = simulate(LLAMA, **kw)
    _assert_same(reference.trace, coalesced.trace)
    assert {e.socket for e in coalesced.trace.events} == set(range(reference.plan.system.sockets))
    assert coalesced.trace.event_count * 4 < reference.trace.event_count
    lazy = simulate(LLAMA, record_events=False, **kw)
    assert lazy.trace.kernels == coalesced.trace.kernels


@pytest.fixture(scope="module")
def synthetic_plan(tmp_path_factory):
    folder = tmp_path_factory.mktemp("coalesce")
    node = write_node(folder, 2)
    path = write_mapping(folder, "base", model="llama-3.1-8b", hardware=node, phase="prefill",
                         layers=two_kernel_layers("llama-3.1-8b", "prefill"), workload={"seq_len": 64})
    return build_plan(load_mapping(path))


_item = st.builds(lambda w, h, d: Item(w, tuple(x for x in (("hbm", h), ("ddr", d)) if x[1] > 0)),
                  st.sampled_from([0.0, 1e3, 2e3, 5e3]), st.sampled_from([0.0, 0.0, 1e3, 3e3]),
                  st.sampled_from([0.0, 0.0, 0.0, 1e2]))
_chunk = st.builds(lambda items, p2p, store: Chunk(tuple(items), p2p_bytes=p2p, p2p_steps=1 if p2p else 0,
                                                   stores=(("hbm", store),) if store else ()),
                   st.lists(_item, min_size=1, max_size=4), st.sampled_from([0.0, 0.0, 1e3]),
                   st.sampled_from([0.0, 0.0, 2e3]))




@given(kernels=random_kernels(_chunk), layers=st.integers(1, 3), looping=st.booleans())
def test_random_pipelines_same_as_the_reference_engine(synthetic_plan, kernels, layers, looping) -> None:
    mapping = synthetic_plan.mapping.model_copy(
        update={"defaults": synthetic_plan.mapping.defaults.model_copy(update={"kernel_looping": looping})})
    plan = dataclasses.replace(synthetic_plan, kernels={"dense": kernels}, layer_counts={"dense": layers},
                               mapping=mapping)
    reference, coalesced = simulate_plan(plan, fast=False, coalesce=False), simulate_plan(plan, fast=False)
    _assert_same(reference, coalesced)
    lazy = simulate_plan(plan, fast=False, record_events=False)
    _assert_same_kernels(reference, lazy)
    assert lazy.kernels == coalesced.kernels
    for trace, kw in ((coalesced, {}), (lazy, {"record_events": False})):
        _assert_identical(trace, _plain(lambda kw=kw: simulate_plan(plan, fast=False, **kw)))


# ---------------------------------------------------------------------- equal-time ties
# Bytes and work in quarters of the synthetic socket's rates (1 GB/s, 1 GFLOP/s): every load,
# compute and send lasts a multiple of 0.25 s, exact in binary, so events of different stages
# and pools fall at exactly the same times (a load landing as compute ends, two flows landing
# together, a write-back landing as the next load starts). The engines order such events
# differently (the reference by its processes' event ids, the coalesced engine by its feed
# counters, the lazy one when a pool is next touched); the logs must still be the same, bit
# for bit: no tolerance below.
_Q = 2.5e8
_tie_item = st.builds(lambda w, h, d: Item(w, tuple(x for x in (("hbm", h), ("ddr", d)) if x[1] > 0)),
                      st.sampled_from([0.0, _Q, 2 * _Q, 4 * _Q]), st.sampled_from([0.0, _Q, 2 * _Q, 4 * _Q]),
                      st.sampled_from([0.0, 0.0, _Q / 10]))
_tie_chunk = st.builds(lambda items, p2p, store: Chunk(tuple(items), p2p_bytes=p2p, p2p_steps=1 if p2p else 0,
                                                       stores=(("hbm", store),) if store else ()),
                       st.lists(_tie_item, min_size=1, max_size=4), st.sampled_from([0.0, 0.0, 2 * _Q]),
                       st.sampled_from([0.0, 0.0, _Q, 2 * _Q]))




def _rows(trace: Trace) -> list[tuple]:
    return sorted((e.socket, e.track, e.name, e.kernel, e.layer, e.start_s, e.end_s, e.nbytes, e.work)
                  for e in trace.events)


@given(kernels=random_kernels(_tie_chunk), layers=st.integers(1, 3), looping=st.booleans())
def test_equal_time_ties_give_the_same_log_bit_for_bit(synthetic_plan, kernels, layers, looping) -> None:
    mapping = synthetic_plan.mapping.model_copy(
        update={"defaults": synthetic_plan.mapping.defaults.model_copy(update={"kernel_looping": looping})})
    plan = dataclasses.replace(synthetic_plan, kernels={"dense": kernels}, layer_counts={"dense": layers},
                               mapping=mapping)
    reference = simulate_plan(plan, fast=False, coalesce=False)
    coalesced = simulate_plan(plan, fast=False)
    lazy = simulate_plan(plan, fast=False, record_events=False)
    assert _rows(coalesced) == _rows(reference)
    assert coalesced.kernels == reference.kernels
    assert lazy.kernels == reference.kernels
    # direct scheduling: the very events of SimPy processes and ``env.run()``, ties included
    for trace, kw in ((reference, {"coalesce": False}), (coalesced, {}), (lazy, {"record_events": False})):
        _assert_identical(trace, _plain(lambda kw=kw: simulate_plan(plan, fast=False, **kw)))
    assert lazy.event_count <= coalesced.event_count < reference.event_count or not any(
        item.loads for kernel in kernels for stage in kernel.stages for chunk in stage.chunks for item in chunk.items)


def test_equal_time_ties_happen_in_the_tie_cases(synthetic_plan) -> None:
    """The values above do make ties: a pipeline whose every load lands as compute ends."""
    items = (Item(_Q, (("hbm", _Q),)),) * 3
    stage = Stage("s0", "gemm", 1, FLOP_PER_S, (), (Chunk(items),))
    trace = simulate_plan(dataclasses.replace(synthetic_plan, kernels={"dense": (KernelPlan(
        "K0", "dense", (stage,), sram_bytes=0.0, chunk_tokens=1, weights_tier="hbm", buffer_depth=1),)},
        layer_counts={"dense": 1}), fast=False)
    reads = sorted(e.end_s for e in trace.events if e.track == "hbm")
    computes = sorted(e.end_s for e in trace.events if e.track.startswith("compute"))
    assert set(reads[1:]) & set(computes)   # a load lands at the very time a compute ends
