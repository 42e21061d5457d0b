"""The request engine against closed forms, invariants and a hand-worked event log."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rdusim.sim.serving import DecodeTable, PrefillTable, simulate_serving
from tests.serving.conftest import constant, synthetic_model


def test_three_requests_exact_event_log(model) -> None:
    """Worked by hand (docs/serving.md): prefill 1 s, transfer 100 tokens = 0.125 s, step
    0.125 s x bucket. r1 goes to the idle prefill node; r2 queues behind r0 (less backlog);
    r1 is ready mid-step and joins the batch at the next step boundary, which runs bucket 2 until r0 retires."""
    two = synthetic_model(prefill_nodes=2)
    run = simulate_serving(two, np.array([0.0, 0.1875, 0.375]), np.array([100, 100, 200]), np.array([4, 3, 2]),
                           record_events=True)
    expected = [
        (0.0, "arrive", 0, ""), (0.0, "prefill_start", 0, "prefill0"),
        (0.1875, "arrive", 1, ""), (0.1875, "prefill_start", 1, "prefill1"),
        (0.375, "arrive", 2, ""),
        (1.0, "first_token", 0, "prefill0"), (1.0, "prefill_start", 2, "prefill0"),
        (1.0, "transfer_start", 0, "decode0"),
        (1.125, "decode_ready", 0, "decode0"), (1.125, "admit", 0, "decode0"),
        (1.1875, "first_token", 1, "prefill1"), (1.1875, "transfer_start", 1, "decode0"),
        (1.3125, "decode_ready", 1, "decode0"), (1.375, "admit", 1, "decode0"),
        (1.625, "finish", 0, "decode0"), (1.75, "finish", 1, "decode0"),
        (2.0, "first_token", 2, "prefill0"), (2.0, "transfer_start", 2, "decode0"),
        (2.25, "decode_ready", 2, "decode0"), (2.25, "admit", 2, "decode0"), (2.375, "finish", 2, "decode0"),
    ]
    assert [(float(t), e, r, n) for t, e, r, n in run.events] == expected
    steps = list(zip(run.steps["start_s"], run.steps["duration_s"], run.steps["active"], run.steps["bucket"],
                     run.steps["itl_s"], strict=True))
    assert steps == [(1.125, 0.125, 1, 1, 0.125), (1.25, 0.125, 1, 1, 0.125), (1.375, 0.25, 2, 2, 0.25),
                     (1.625, 0.125, 1, 1, 0.125), (2.25, 0.125, 1, 1, 0.125)]
    assert list(run.requests["kv_bytes_shipped"]) == [1e5, 1e5, 2e5]


def _md1(n: int, rho: float, seed: int):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rho, n))   # service 1 s: rate = rho
    model = synthetic_model(prefill_time=constant(1.0))
    run = simulate_serving(model, arrivals, np.full(n, 100), np.ones(n, dtype=np.int64), record_events=True)
    return arrivals, run


def test_md1_mean_wait_matches_pollaczek_khinchine() -> None:
    """Poisson arrivals, deterministic 1 s prefill, one server, prefill-only requests:
    mean wait = rho s / (2 (1 - rho)) (Pollaczek-Khinchine for M/D/1)."""
    rho = 0.7
    arrivals, run = _md1(100_000, rho, seed=3)
    wait = run.requests["prefill_start_s"] - arrivals
    expected = rho * 1.0 / (2 * (1 - rho))
    assert wait.mean() == pytest.approx(expected, rel=0.03)


def test_littles_law_on_a_disaggregated_pipeline() -> None:
    """Time-average number in system over a window = arrival rate x mean time in system
    of the requests that arrive in it (prefill, transfer and batched decode together)."""
    rng = np.random.default_rng(5)
    n = 10_000
    arrivals = np.cumsum(rng.exponential(1 / 1.5, n))
    prompts = rng.integers(100, 2000, n)
    outputs = rng.integers(2, 40, n)
    model = synthetic_model(prefill_nodes=2, prefill_time=lambda p: p / 2000.0, batch_buckets=(1, 2, 4, 8, 16),
                            decode_step_time=lambda b, kv: 0.05 + 0.005 * b + kv * 1e-6, link_bytes_per_s=1e7)
    run = simulate_serving(model, arrivals, prompts, outputs, record_events=True)
    finish = run.requests["finish_s"]
    lo, hi = arrivals[n // 10], arrivals[-n // 10]
    # integrate N(t) over [lo, hi] from each request's interval clipped to the window
    inside = np.clip(np.minimum(finish, hi) - np.maximum(arrivals, lo), 0, None).sum()
    mean_in_system = inside / (hi - lo)
    arriving = (arrivals >= lo) & (arrivals < hi)
    throughput = arriving.sum() / (hi - lo)
    assert mean_in_system == pytest.approx(throughput * (finish - arrivals)[arriving].mean(), rel=0.02)


def test_conservation_under_memory_pressure() -> None:
    """HBM binds (8 requests' worth per group): each admitted request finishes once, tokens
    are conserved, reservations return, no group ever over capacity, rejections have reasons."""
    rng = np.random.default_rng(11)
    n = 3000
    arrivals = np.cumsum(rng.exponential(0.05, n))
    prompts = rng.integers(100, 1200, n)
    outputs = rng.integers(1, 200, n)
    model = synthetic_model(prefill_nodes=3, decode_nodes=2, prefill_time=lambda p: p / 10000.0, kv_groups=2,
                            batch_buckets=(2, 4, 8, 16, 32), kv_bytes_per_group=8 * 1200 * 1000.0,
                            accepted_tokens_per_step=2.4, decode_step_time=lambda b, kv: 0.02 + 0.001 * b,
                            link_bytes_per_s=1e9)
    run = simulate_serving(model, arrivals, prompts, outputs, record_events=True)
    finishes = [r for _, e, r, _ in run.events if e == "finish"]
    rejected = set(run.reasons)
    assert sorted(finishes) == sorted(set(range(n)) - rejected)
    assert all("never fits" in run.reasons[r] for r in rejected)
    assert rejected == {r for r in range(n) if (prompts[r] + max(outputs[r] - 1, 0)) * 1000 > 8 * 1200 * 1000
                        and outputs[r] > 1}
    decoded = outputs[(outputs > 1) & ~np.isin(np.arange(n), list(rejected))] - 1
    nodes = [node for node in run.nodes if node["role"] == "decode"]
    assert sum(node["tokens_decoded"] for node in nodes) == pytest.approx(decoded.sum(), rel=1e-12)
    for node in nodes:
        assert node["kv_free_bytes_at_end"] == node["kv_capacity_bytes"]
        assert node["kv_peak_bytes"] <= node["kv_capacity_bytes"]
        assert node["kv_peak_bytes"] > 0.5 * node["kv_capacity_bytes"]   # memory really was the limit
    assert (run.steps["active"] <= run.steps["bucket"]).all()


def test_same_inputs_same_outputs_bit_for_bit() -> None:
    def once():
        rng = np.random.default_rng(2)
        n = 500
        model = synthetic_model(prefill_nodes=2, decode_step_time=lambda b, kv: 0.01 * b + kv * 1e-7,
                                batch_buckets=(1, 2, 4, 8), scheduling="shortest_prompt_first")
        return simulate_serving(model, np.cumsum(rng.exponential(0.3, n)), rng.integers(1, 3000, n),
                                rng.integers(1, 50, n), record_events=True)
    a, b = once(), once()
    assert a.events == b.events
    for key in a.requests:
        np.testing.assert_array_equal(a.requests[key], b.requests[key])


def test_shortest_prompt_first_reorders_the_queue() -> None:
    model = synthetic_model(scheduling="shortest_prompt_first")
    run = simulate_serving(model, np.array([0.0, 0.1, 0.2]), np.array([500, 300, 100]), np.ones(3, dtype=np.int64),
                           record_events=True)
    starts = [r for _, e, r, _ in run.events if e == "prefill_start"]
    assert starts == [0, 2, 1]


def test_colocated_prefill_stalls_decode_and_chunking_interleaves() -> None:
    common = dict(layout="colocated", prefill_nodes=0, prefill_time=lambda p: p / 1000.0,
                  decode_step_time=lambda b, kv: 0.125)
    whole = simulate_serving(synthetic_model(**common), np.array([0.0, 0.0]), np.array([1000, 1000]),
                             np.array([3, 3]), record_events=True)
    # prefill-first: both prompts (1 s each) before any decode step; then one batch of 2
    assert list(whole.requests["first_token_s"]) == [1.0, 2.0]
    assert list(whole.requests["finish_s"]) == [2.25, 2.25]
    chunked = simulate_serving(synthetic_model(**common, chunk_tokens=500), np.array([0.0, 0.0]),
                               np.array([1000, 1000]), np.array([3, 3]), record_events=True)
    # a prompt arriving mid-decode stalls the batch for its whole prefill: the next token of r0
    # comes 1 s + one step after the last (ITL), r1 joins the batch after its prefill
    stall = simulate_serving(synthetic_model(**common), np.array([0.0, 1.4]), np.array([1000, 1000]),
                             np.array([9, 2]), record_events=True)
    assert list(stall.requests["first_token_s"]) == [1.0, 2.5]
    assert list(stall.steps["itl_s"]) == [0.125] * 4 + [1.125] + [0.125] * 3
    # chunks of 0.5 s ride with decode steps: r0 done after 2 chunks; r1's chunks share steps with r0
    assert list(chunked.requests["first_token_s"]) == [1.0, 2.25]
    assert chunked.requests["kv_bytes_shipped"][0] == 0.0


def test_tables_interpolate_between_and_through_points() -> None:
    prefill = PrefillTable((1000, 4000), (1.0, 16.0))       # t ~ n^2 between the two points
    assert prefill(1000) == pytest.approx(1.0) and prefill(2000) == pytest.approx(4.0)
    assert prefill(8000) == pytest.approx(64.0)
    decode = DecodeTable((16, 32), (1000, 2000), ((1.0, 2.0), (3.0, 5.0)))
    assert decode(32, 1500) == pytest.approx(4.0) and decode(16, 3000) == pytest.approx(3.0)


def test_prompt_over_max_context_is_rejected_with_reason() -> None:
    model = synthetic_model(max_context=1000)
    run = simulate_serving(model, np.array([0.0]), np.array([1001]), np.array([5]))
    assert run.reasons == {0: "prompt of 1001 tokens exceeds max_context 1000"}
    assert math.isnan(run.requests["finish_s"][0])
