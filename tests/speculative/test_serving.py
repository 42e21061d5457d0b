"""Serving with speculative decoding: bursts of accepted tokens, conserved, seeded per request."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rdusim.model.speculative import expected_accepted
from rdusim.sim.serving import simulate_serving
from tests.serving.conftest import synthetic_model

K, RATE = 3, 0.6


def _sd_model(**changes):
    return synthetic_model(draft_tokens=K, acceptance_rate=RATE, accepted_tokens_per_step=expected_accepted(RATE, K),
                           **changes)


def _workload(n, seed=5):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.exponential(0.2, n)), rng.integers(50, 400, n), rng.integers(1, 120, n)


def test_tokens_are_conserved_and_each_step_delivers_a_burst_per_request():
    arrivals, prompts, outputs = _workload(800)
    model = _sd_model(prefill_nodes=2, decode_nodes=2, kv_groups=2, batch_buckets=(2, 4, 8, 16),
                      prefill_time=lambda p: p / 5000.0, decode_step_time=lambda b, kv: 0.01 + 0.001 * b)
    run = simulate_serving(model, arrivals, prompts, outputs, record_events=True)
    assert not run.reasons
    decoded = int((outputs - 1).clip(min=0).sum())
    assert sum(n["tokens_decoded"] for n in run.nodes if n["role"] == "decode") == decoded
    assert run.steps["tokens"].sum() == decoded
    # every active request gets 1 .. k + 1 tokens per step
    assert (run.steps["tokens"] >= run.steps["active"]).all()
    assert (run.steps["tokens"] <= (K + 1) * run.steps["active"]).all()
    steps = run.requests["decode_steps"]
    decoding = outputs > 1
    assert (steps[decoding] >= np.ceil((outputs[decoding] - 1) / (K + 1))).all()
    assert (steps[decoding] <= outputs[decoding] - 1).all()
    # the bursts average the acceptance model's expectation (less the cut last bursts)
    per_step = run.steps["tokens"].sum() / run.steps["active"].sum()
    assert 0.9 * expected_accepted(RATE, K) < per_step <= expected_accepted(RATE, K) + 0.05


def test_a_requests_bursts_do_not_depend_on_the_others():
    arrivals, prompts, outputs = _workload(200)
    model = _sd_model(batch_buckets=(1, 2, 4, 8), decode_step_time=lambda b, kv: 0.01 * b)
    together = simulate_serving(model, arrivals, prompts, outputs)
    for request in (0, 17, 99):
        # the same request id among other, one-token requests that never decode beside it
        others = np.arange(request + 1) != request
        again = simulate_serving(model, np.zeros(request + 1), np.full(request + 1, 100),
                                 np.where(others, 1, outputs[request]))
        assert again.requests["decode_steps"][request] == together.requests["decode_steps"][request]


def test_tpot_counts_every_token_and_itl_each_delivery():
    """One request, a constant step time T: its bursts arrive every T (ITL), and its decode time
    over its tokens is T / (tokens per step)."""
    T, output = 0.125, 400
    model = _sd_model(decode_step_time=lambda b, kv: T)
    run = simulate_serving(model, np.array([0.0]), np.array([100]), np.array([output]))
    steps = int(run.requests["decode_steps"][0])
    decoding = run.requests["finish_s"][0] - run.requests["admitted_s"][0]
    assert decoding == pytest.approx(steps * T, rel=1e-12)
    assert list(run.steps["itl_s"]) == pytest.approx([T] * steps, rel=1e-12)
    assert decoding / (output - 1) < T / 1.5   # bursts: several tokens per step
    transfer = run.requests["decode_ready_s"][0] - run.requests["first_token_s"][0]
    tpot = (run.requests["finish_s"][0] - run.requests["first_token_s"][0]) / (output - 1)
    assert tpot == pytest.approx((transfer + steps * T) / (output - 1), rel=1e-12)
    assert math.isclose(run.steps["tokens"].sum(), output - 1)


def test_the_expected_tokens_must_match_the_acceptance_model():
    with pytest.raises(ValueError, match="expectation"):
        synthetic_model(draft_tokens=K, acceptance_rate=RATE, accepted_tokens_per_step=2.0)


def test_a_deployment_with_a_speculative_decode_mapping(tmp_path):
    """``rdusim serve`` on a decode mapping with speculative decoding: the engine draws bursts with
    the mapping's k and rate, the step table is the SD step, HBM per token holds the draft's KV."""
    from rdusim.analysis.serving.deployment import load_deployment  # noqa: PLC0415
    from rdusim.analysis.serving.metrics import Slo  # noqa: PLC0415
    from rdusim.analysis.serving.run import run_serving  # noqa: PLC0415
    from rdusim.analysis.serving.workload import LengthDistribution, generate_workload  # noqa: PLC0415
    from tests.conftest import ROOT  # noqa: PLC0415

    small = ROOT / "tests" / "data" / "serving" / "llama-small.yaml"
    sd = ["speculative.draft=llama-3.2-1b", f"speculative.k={K}", f"speculative.acceptance.rate={RATE}",
          "speculative.acceptance.source=test input"]
    plain, spec = load_deployment(small), load_deployment(small, decode_overrides=sd)
    assert (spec.model.draft_tokens, spec.model.acceptance_rate) == (K, RATE)
    assert spec.model.accepted_tokens_per_step == pytest.approx(expected_accepted(RATE, K))
    assert spec.model.kv_bytes_per_token > plain.model.kv_bytes_per_token          # + the draft's KV
    assert spec.model.shipped_bytes_per_token > plain.model.shipped_bytes_per_token
    assert spec.decode_table.seconds[0][0] > plain.decode_table.seconds[0][0]      # draft + verify
    workload = generate_workload(2.0, LengthDistribution("uniform", (200, 1500)), LengthDistribution("uniform", (20, 200)),
                                 seed=3, requests=40)
    result = run_serving(spec, workload, Slo(2.0, 0.05))
    done = result.requests[result.requests["status"] == "done"]
    assert result.summary["completed"] == 40
    assert result.summary["mean_tokens_per_step"] > 1.5
    assert (done["tokens_per_step"] > 1).all() and (done["tokens_per_step"] <= K + 1).all()


def test_coalesced_decode_blocks_deliver_the_same_bursts_as_the_step_by_step_engine():
    arrivals, prompts, outputs = _workload(400, seed=9)
    model = _sd_model(prefill_nodes=2, decode_nodes=2, kv_groups=2, batch_buckets=(2, 4, 8, 16),
                      prefill_time=lambda p: p / 5000.0, decode_step_time=lambda b, kv: 0.01 + 0.001 * b + kv * 1e-7)
    blocks = simulate_serving(model, arrivals, prompts, outputs, record_events=True)
    steps = simulate_serving(model, arrivals, prompts, outputs, record_events=True, coalesce=False)
    assert blocks.events == steps.events
    for key in blocks.requests:
        assert np.array_equal(blocks.requests[key], steps.requests[key], equal_nan=True), key
    for key in blocks.steps:
        assert np.array_equal(blocks.steps[key], steps.steps[key]), key
    assert blocks.nodes == steps.nodes and blocks.end_s == steps.end_s
