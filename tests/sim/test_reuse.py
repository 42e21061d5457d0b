"""Kernel calls reused shifted in time (``simulate_plan(reuse=...)``, ``rdusim.sim.reuse``): a call
taken from the cache is a fresh simulation at its start time bit for bit (start, end, launch and
sync; the busy times and bytes to 1e-12), on a real MoE layer and on random pipelines (ties, and
times that round at every addition), under both engines and both schedulers; calls are taken
only where the shift is exact (the same binade, an even multiple of its spacing, or the same
start); an odd shift (an item lasting 1.5 spacings: a tie rounded to even) and a shift across
binades, which the cache refuses, do change the times."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.plan import Chunk, Item, KernelPlan, Stage
from rdusim.sim.engine import simulate_plan
from rdusim.sim.reuse import MARGIN, KernelReuse, _lattice
from rdusim.sim.trace import Trace
from tests.conftest import ROOT
from tests.sim.test_coalesce import _plain, synthetic_plan  # noqa: F401 (a fixture)
from tests.synthetic import (
    DDR_BYTES_PER_S,
    FLOP_PER_S,
    HBM_BYTES_PER_S,
    P2P_BYTES_PER_S,
    random_kernels,
)

REL = 1e-12


def _assert_fresh(reused: Trace, fresh: Trace) -> None:
    """``reused`` is ``fresh`` bit for bit in every time, to ``REL`` in the running totals."""
    assert len(reused.kernels) == len(fresh.kernels)
    for a, b in zip(reused.kernels, fresh.kernels, strict=True):
        assert (a.kernel, a.layer_type, a.layer, a.stage_pcus) == (b.kernel, b.layer_type, b.layer, b.stage_pcus)
        assert (repr(a.start_s), repr(a.end_s), repr(a.launch_sync_s)) == \
            (repr(b.start_s), repr(b.end_s), repr(b.launch_sync_s)), a.kernel
        for field in ("stage_busy_s", "pool_busy_s", "pool_bytes"):
            left, right = getattr(a, field), getattr(b, field)
            assert left.keys() == right.keys()
            assert all(math.isclose(left[k], right[k], rel_tol=REL, abs_tol=1e-18) for k in left), (field, left, right)
    assert reused.layer_multiplier == fresh.layer_multiplier
    assert reused.event_count <= fresh.event_count


@pytest.fixture(scope="module")
def moe_plan():
    """DeepSeek-R1 prefill at 8K: its MoE layer type alone (five kernels, the MoE FFN's expert tiles)."""
    return build_plan(load_mapping(ROOT / "mappings/deepseek-r1/prefill.yaml", seq_len=8192))


def _moe(plan, start: float, reuse: KernelReuse | None = None, **kw) -> Trace:   # noqa: ANN001
    return simulate_plan(plan, record_events=False, layer_types=("moe",), start_s=start, reuse=reuse, **kw)


def _latency(trace: Trace) -> float:
    return trace.kernels[-1].end_s - trace.kernels[-1].start_s


def test_a_moe_layer_shifted_in_its_binade_is_a_fresh_simulation(moe_plan) -> None:
    reuse = KernelReuse()
    s1 = 0.3                                   # binade [0.25, 0.5): spacing 2^-54
    u = math.ulp(s1)

    def parity(x: float, odd: bool) -> float:   # x, or the next double, of s1's parity (or the other)
        return x if (int(x / u) - int(s1 / u)) % 2 == odd else x + u

    first = _moe(moe_plan, s1, reuse)
    _assert_fresh(first, _moe(moe_plan, s1))   # filling the cache changes nothing
    kernels = len(first.kernels)
    assert reuse.hits == 0
    # the same start, even shifts (small and large), an odd one (not taken: kept as the odd class),
    # then odd ones (taken from it)
    for start, hits in [(s1, kernels), (s1 + 2 * u, kernels), (s1 + 2 * 12345 * u, kernels),
                        (parity(0.375, False), kernels), (s1 + u, 0), (s1 + 3 * u, kernels),
                        (parity(0.41, True), kernels)]:
        before = reuse.hits
        reused = _moe(moe_plan, start, reuse)
        _assert_fresh(reused, _moe(moe_plan, start))
        assert reuse.hits - before == hits, start
        if hits:
            assert reused.event_count < 10 * kernels   # the calls' events are gone
    # across binades nothing is taken, and shifting would not have been exact: the MoE layer
    # lasts a few ulps more or less when it starts in another binade
    before = reuse.hits
    for start in (0.2, 0.6, 1.3):
        _assert_fresh(_moe(moe_plan, start, reuse), _moe(moe_plan, start))
        assert reuse.hits == before
    latency = {s: _latency(_moe(moe_plan, s)) for s in (0.3, 0.6, 1.3, 3.0)}
    assert len(set(latency.values())) > 1, latency


def test_an_odd_shift_is_not_exact_and_is_refused(synthetic_plan) -> None:  # noqa: F811
    """Why the shift must be an even multiple of the spacing u: one item whose compute lasts 1.5 u
    (exact in binary; a stage of 1 op/s makes the delay its work) ends on a tie, rounded to the
    even multiple of u: 2 u after an even start, 1 u after an odd one. So the call started one u
    later is not the kept call shifted (the cache refuses it), and the call started 2 u later is
    (the cache takes it, the fresh simulation bit for bit)."""
    s1 = 80.0                                        # binade [64, 128)
    u = math.ulp(s1)
    item = Item(1.5 * u)
    kernel = KernelPlan("K0", "dense", (Stage("s0", "gemm", 1, 1.0, (), (Chunk((item,)),)),), sram_bytes=0.0,
                        chunk_tokens=1, weights_tier="hbm", buffer_depth=1)
    plan = dataclasses.replace(synthetic_plan, kernels={"dense": (kernel,)}, layer_counts={"dense": 1})

    def run(start: float, reuse: KernelReuse | None = None) -> Trace:
        return simulate_plan(plan, record_events=False, start_s=start, reuse=reuse)

    computes = s1 + plan.system.socket.launch_s(kernel.orchestration)   # the item's compute starts there
    assert math.ulp(computes) == u and int(computes / u) % 2 == 0        # at an even multiple of u
    reuse = KernelReuse()
    kept = run(s1, reuse).kernels[0]
    assert reuse.hits == 0 and _lattice(s1, kept.end_s) == ("shift", 7, 0)
    (_, node), = reuse.calls                          # the node the call was kept for
    odd, even = run(s1 + u).kernels[0], run(s1 + 2 * u).kernels[0]   # fresh simulations
    # the item lasts 2 u from an even start, 1 u from an odd one: the odd call ends 1 u earlier
    # than the kept call shifted by u, the even call exactly at the kept call shifted by 2 u
    assert odd.end_s - odd.start_s == kept.end_s - kept.start_s - u
    assert odd.end_s != kept.end_s + u and even.end_s == kept.end_s + 2 * u
    assert reuse.find(node, kernel, s1 + u) is None
    assert reuse.find(node, kernel, s1 + 3 * u) is None and reuse.hits == 0
    found = reuse.find(node, kernel, s1 + 2 * u)
    assert found is not None and found == (kept, even.end_s) and reuse.hits == 1
    _assert_fresh(run(s1 + 2 * u, reuse), run(s1 + 2 * u))
    _assert_fresh(run(s1 + u, reuse), run(s1 + u))    # simulated, and kept as the odd class
    assert reuse.hits == 2


def test_only_a_call_from_a_drained_node_to_a_drained_node_is_kept(moe_plan) -> None:
    """A looped layer type's calls overlap (the next iteration loads during this one): none is
    kept or taken; with a trace (events) nothing is."""
    looped = moe_plan.mapping.model_copy(
        update={"defaults": moe_plan.mapping.defaults.model_copy(update={"kernel_looping": True})})
    plan = dataclasses.replace(moe_plan, mapping=looped, kernels={"moe": moe_plan.kernels["moe"][-1:]},
                               layer_counts={"moe": 2})
    reuse = KernelReuse()
    for _ in range(2):
        _assert_fresh(_moe(plan, 0.3, reuse), _moe(plan, 0.3))
    assert reuse.hits == 0 and not reuse.calls
    simulate_plan(moe_plan, layer_types=("moe",), start_s=0.3, reuse=reuse)
    assert not reuse.calls


def test_every_socket_simulated_is_not_kept(synthetic_plan) -> None:  # noqa: F811
    """The reference engine on the general path simulates each socket: nothing is kept; the
    coalesced engine's one socket standing for all of them is."""
    reuse = KernelReuse()
    simulate_plan(synthetic_plan, fast=False, coalesce=False, record_events=False, reuse=reuse)
    assert not reuse.calls
    simulate_plan(synthetic_plan, fast=False, record_events=False, reuse=reuse)
    assert reuse.calls


def test_the_lattice_rule() -> None:
    """A class is a binade and a parity in its spacing; a call must end ``MARGIN`` spacings below
    the binade's top; zero and subnormal starts have none (only the same start is taken)."""
    u = math.ulp(1.0)
    assert _lattice(1.0) == ("shift", 1, 0) and _lattice(1.0 + u) == ("shift", 1, 1)
    assert _lattice(1.5, 2.0 - MARGIN * u - u) is not None
    assert _lattice(1.5, 2.0 - MARGIN * u) is None and _lattice(1.5, 2.5) is None
    assert _lattice(0.0) is None and _lattice(5e-324) is None


#: the most an item's work or a transfer lasts (s): a kernel call lasts at most 3 stages x 4 chunks
#: x (4 items x 3 + 2) x _SPAN = 13.4 s, a layer type's calls (two kernels, or three looped
#: layers) 41 s, so calls started at 64 s and at 80 s all end well inside the binade [64, 128)
_SPAN = 0.08


def _amount(rate: float) -> st.SearchStrategy[float]:
    """Work or bytes at ``rate`` per second: none, a tie value (1/32 or 1/16 s, exact in binary:
    equal-time ties) or an arbitrary one up to ``_SPAN`` s (a duration no multiple of the binade's
    spacing: every addition to a time rounds)."""
    return st.one_of(st.sampled_from([0.0, rate / 32, rate / 16]), st.floats(rate * 1e-4, rate * _SPAN))


_item = st.builds(lambda w, h, d: Item(w, tuple(x for x in (("hbm", h), ("ddr", d)) if x[1] > 0)),
                  _amount(FLOP_PER_S), _amount(HBM_BYTES_PER_S), _amount(DDR_BYTES_PER_S))
_chunk = st.builds(lambda items, p2p, store: Chunk(tuple(items), p2p_bytes=p2p, p2p_steps=1 if p2p else 0,
                                                   stores=(("hbm", store),) if store else ()),
                   st.lists(_item, min_size=1, max_size=4), _amount(P2P_BYTES_PER_S), _amount(HBM_BYTES_PER_S))




@given(kernels=random_kernels(_chunk), layers=st.integers(1, 3), looping=st.booleans(), coalesce=st.booleans(),
       steps=st.lists(st.integers(-2 ** 21, 2 ** 21), min_size=1, max_size=4, unique=True))
def test_random_pipelines_shifted_are_fresh_simulations(synthetic_plan, kernels, layers,  # noqa: F811
                                                        looping, coalesce, steps) -> None:
    """Random pipelines (work and bytes of tie values or arbitrary ones, whose times round) run at
    64 s, then at 80 s shifted by multiples of the binade's spacing u: a call from a drained node
    to a drained node is taken from the cache exactly when a call of its kernel was simulated at a
    start of the same parity in u (the first run's at an even shift; one at an odd shift, or after
    a call that lasted a u more or less, only once such a call was kept), and what the cache gives
    is the fresh simulation bit for bit, ties included, under direct scheduling and SimPy processes
    (each with its own cache: the node's key names the scheduling)."""
    mapping = synthetic_plan.mapping.model_copy(
        update={"defaults": synthetic_plan.mapping.defaults.model_copy(update={"kernel_looping": looping})})
    plan = dataclasses.replace(synthetic_plan, kernels={"dense": kernels}, layer_counts={"dense": layers},
                               mapping=mapping)
    direct, plain = KernelReuse(), KernelReuse()
    u = math.ulp(64.0)

    def run(start: float, cache: KernelReuse | None) -> Trace:
        return simulate_plan(plan, record_events=False, coalesce=coalesce, start_s=start, reuse=cache)

    # each kernel is called once (the fast path), from a drained node to a drained node, unless one
    # kernel is looped over several layers (each iteration loads during the one before: none is kept)
    reused = not (looping and len(kernels) == 1 and layers > 1)
    held: set[tuple[str, int]] = set()   # (kernel, parity of a start in u) the caches hold a call for

    def calls(trace: Trace) -> list[tuple[str, int]]:   # 64 s and 80 s are even multiples of u
        return [(r.kernel, int(r.start_s / u) % 2) for r in trace.kernels] if reused else []

    held.update(calls(run(64.0, direct)))
    _plain(lambda: run(64.0, plain))
    for step in (0, *steps):   # at 80 s, every call is taken (if any is)
        start = 80.0 + step * u
        fresh = run(start, None)
        assert all(r.end_s + MARGIN * u < 128.0 for r in fresh.kernels)   # (``_SPAN``)
        hits = direct.hits, plain.hits
        _assert_fresh(run(start, direct), fresh)
        _assert_fresh(_plain(lambda start=start: run(start, plain)), fresh)
        expected = sum(call in held for call in calls(fresh))
        assert (direct.hits - hits[0], plain.hits - hits[1]) == (expected, expected), step
        held.update(calls(fresh))
    assert (direct.hits > 0, plain.hits > 0) == (reused, reused)
