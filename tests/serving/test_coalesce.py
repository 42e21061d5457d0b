"""The request engine's coalesced decode (a block of steps per event between disturbances, the
default) against the step-by-step engine (``coalesce=False``): the same per-request times, steps,
node records and event log, bit for bit, on random deployments and workloads (Hypothesis) and
on a shipped deployment with its simulated step tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdusim.sim.serving import DecodeTable, ServingRun, simulate_serving
from tests.serving.conftest import synthetic_model

ROOT = Path(__file__).resolve().parents[2]


def _assert_same(a: ServingRun, b: ServingRun) -> None:
    for key in a.requests:
        np.testing.assert_array_equal(a.requests[key], b.requests[key], err_msg=key)
    for key in a.steps:
        np.testing.assert_array_equal(a.steps[key], b.steps[key], err_msg=key)
    assert a.nodes == b.nodes
    assert a.reasons == b.reasons
    assert a.end_s == b.end_s
    assert a.events == b.events


def _both(model, arrivals, prompts, outputs, record_events: bool = True) -> tuple[ServingRun, ServingRun]:
    return tuple(simulate_serving(model, arrivals, prompts, outputs, record_events=record_events, coalesce=c)
                 for c in (False, True))


def _check(model, arrivals, prompts, outputs) -> ServingRun:
    """Both engines with the event log (blocks cut at every retirement) and without it (blocks run
    through retirements when one decode node has nobody waiting): the same run every way."""
    reference, coalesced = _both(model, arrivals, prompts, outputs)
    _assert_same(reference, coalesced)
    reference.events = []
    for run in _both(model, arrivals, prompts, outputs, record_events=False):
        _assert_same(reference, run)
    return reference


@given(seed=st.integers(0, 2**16), prefill_nodes=st.integers(1, 3), decode_nodes=st.integers(1, 3),
       groups=st.sampled_from([1, 2]), accepted=st.sampled_from([1.0, 2.4]), tight=st.booleans(),
       table=st.booleans(), grows=st.booleans(), gap=st.sampled_from([0.05, 0.3]))
def test_random_deployments_same_as_step_by_step(seed, prefill_nodes, decode_nodes, groups, accepted, tight,
                                                 table, grows, gap) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    arrivals = np.cumsum(rng.exponential(gap, n))
    prompts = rng.integers(50, 1500, n)
    outputs = rng.integers(1, 120, n)
    step = DecodeTable((2, 4, 8, 16), (128, 1024, 4096), ((0.02, 0.021, 0.03), (0.021, 0.023, 0.035),
                                                          (0.022, 0.026, 0.045), (0.025, 0.032, 0.07))) \
        if table else (lambda b, kv: 0.02 + 0.001 * b + kv * 1e-6)
    model = synthetic_model(prefill_nodes=prefill_nodes, decode_nodes=decode_nodes, kv_groups=groups,
                            prefill_time=lambda p: p / 20000.0, batch_buckets=(2, 4, 8, 16), decode_step_time=step,
                            kv_bytes_per_group=(6 if tight else 1000) * 1500 * 1000.0, kv_grows=grows,
                            accepted_tokens_per_step=accepted, link_bytes_per_s=5e8, link_latency_s=1e-3)
    reference = _check(model, arrivals, prompts, outputs)
    assert len(reference.steps["start_s"]) > 0


def test_shipped_deployment_same_as_step_by_step() -> None:
    from rdusim.analysis.serving.deployment import load_deployment
    from rdusim.analysis.serving.workload import generate_workload, parse_distribution

    deployment = load_deployment(ROOT / "tests/data/serving/llama-small.yaml")
    workload = generate_workload(4.0, parse_distribution("lognormal:1024,0.4", "p"),
                                 parse_distribution("uniform:2,64", "o"), seed=1, requests=2000)
    _check(deployment.model, workload.arrival_s, workload.prompt_tokens, workload.output_tokens)


@given(seed=st.integers(0, 2**16), k=st.integers(1, 5), rate=st.sampled_from([0.3, 0.7, 0.9]),
       decode_nodes=st.integers(1, 2))
def test_speculative_bursts_same_as_step_by_step(seed, k, rate, decode_nodes) -> None:
    """Speculative decoding: the bursts drawn at admission land on the same steps in a block."""
    from rdusim.model.speculative import expected_accepted

    rng = np.random.default_rng(seed)
    n = 200
    arrivals = np.cumsum(rng.exponential(0.05, n))
    prompts, outputs = rng.integers(50, 1500, n), rng.integers(1, 120, n)
    model = synthetic_model(prefill_nodes=2, decode_nodes=decode_nodes, kv_groups=2, batch_buckets=(2, 4, 8, 16),
                            prefill_time=lambda p: p / 20000.0, decode_step_time=lambda b, kv: 0.02 + 0.001 * b,
                            draft_tokens=k, acceptance_rate=rate, accepted_tokens_per_step=expected_accepted(rate, k))
    reference = _check(model, arrivals, prompts, outputs)
    assert reference.steps["tokens"].sum() == int((outputs - 1).clip(min=0).sum())


def test_blocks_run_through_retirements(monkeypatch) -> None:
    """One decode node, nobody waiting: requests retire inside a block (their finish is written
    when the block ends, at the step that completed them), and the run is the step-by-step one."""
    import rdusim.sim.serving as serving

    inside = []
    original = serving._Engine.retire_entries

    def spy(self, node, steps_done, entries, at):
        inside.append(at < self.env.now)
        original(self, node, steps_done, entries, at)

    monkeypatch.setattr(serving._Engine, "retire_entries", spy)
    vectors = []
    many = DecodeTable.many
    monkeypatch.setattr(DecodeTable, "many", lambda self, bucket, kv: vectors.append(len(kv)) or many(self, bucket, kv))
    rng = np.random.default_rng(5)
    n = 200
    arrivals, prompts, outputs = np.cumsum(rng.exponential(0.5, n)), rng.integers(50, 1500, n), rng.integers(2, 400, n)
    table = DecodeTable((2, 4, 8, 16), (128, 1024, 4096), ((0.02, 0.021, 0.03), (0.021, 0.023, 0.035),
                                                           (0.022, 0.026, 0.045), (0.025, 0.032, 0.07)))
    model = synthetic_model(prefill_nodes=2, decode_nodes=1, kv_groups=2, batch_buckets=(2, 4, 8, 16),
                            prefill_time=lambda p: p / 20000.0, decode_step_time=table, accepted_tokens_per_step=1.7,
                            link_bytes_per_s=5e8, link_latency_s=1e-3)
    reference = simulate_serving(model, arrivals, prompts, outputs, coalesce=False)
    inside.clear()
    through = simulate_serving(model, arrivals, prompts, outputs)
    assert sum(inside) > n // 4
    assert max(vectors) >= serving.VECTOR_STEPS     # long segments read the table as a vector
    _assert_same(reference, through)


@given(kv=st.lists(st.floats(-1e3, 3e5, allow_nan=False), min_size=1, max_size=40), bucket=st.sampled_from([2, 4, 8]))
def test_decode_table_many_is_the_scalar_lookup(kv, bucket) -> None:
    """The vectorised table read (a decode block's steps at once) gives the scalar read's floats."""
    table = DecodeTable((2, 4, 8), (128, 1024, 4096, 131072), ((0.02, 0.021, 0.03, 0.5), (0.021, 0.023, 0.035, 0.7),
                                                               (0.022, 0.026, 0.045, 1.1)))
    assert table.many(bucket, np.array(kv)).tolist() == [table(bucket, x) for x in kv]


@given(seed=st.integers(0, 2**16), accepted=st.sampled_from([1.0, 2.4]), grows=st.booleans(),
       gap=st.sampled_from([0.02, 0.2, 1.0]), tight=st.booleans())
def test_invariants_of_blocks_through_retirements(seed, accepted, grows, gap, tight) -> None:
    """The fast path on its own (one decode node, no event log): every request not rejected
    finishes exactly once after it was admitted, each decode step serves requests for exactly the
    steps they were given (sum of active over steps = sum of decode steps), tokens are conserved,
    every reservation comes back and no group ever exceeds its free HBM."""
    import math

    rng = np.random.default_rng(seed)
    n = 300
    arrivals = np.cumsum(rng.exponential(gap, n))
    prompts, outputs = rng.integers(50, 1500, n), rng.integers(1, 300, n)
    model = synthetic_model(prefill_nodes=2, decode_nodes=1, kv_groups=2, batch_buckets=(2, 4, 8, 16),
                            prefill_time=lambda p: p / 20000.0, decode_step_time=lambda b, kv: 0.02 + 0.001 * b + kv * 1e-7,
                            kv_bytes_per_group=(4 if tight else 1000) * 1800 * 1000.0, kv_grows=grows,
                            accepted_tokens_per_step=accepted, link_bytes_per_s=5e8, link_latency_s=1e-3)
    run = simulate_serving(model, arrivals, prompts, outputs)
    r = run.requests
    served = np.setdiff1d(np.arange(n), list(run.reasons))
    assert not np.isnan(r["finish_s"][served]).any() and np.isnan(r["finish_s"][list(run.reasons)]).all()
    decoding = served[outputs[served] > 1]
    assert (r["admitted_s"][decoding] >= r["decode_ready_s"][decoding]).all()
    assert (r["finish_s"][decoding] > r["admitted_s"][decoding]).all()
    steps = [math.ceil((int(o) - 1) / accepted) for o in outputs[decoding]]
    assert r["decode_steps"][decoding].tolist() == steps
    assert int(run.steps["active"].sum()) == sum(steps)
    node = next(x for x in run.nodes if x["role"] == "decode")
    assert node["decode_steps"] == len(run.steps["start_s"])
    assert node["tokens_decoded"] == pytest.approx(float((outputs[decoding] - 1).sum()), rel=1e-12)
    assert node["kv_free_bytes_at_end"] == node["kv_capacity_bytes"] >= node["kv_peak_bytes"]
    assert (run.steps["active"] <= run.steps["bucket"]).all()
    ends = run.steps["start_s"] + run.steps["duration_s"]
    assert (run.steps["start_s"][1:] >= ends[:-1]).all()          # one node: steps never overlap
    assert set(r["finish_s"][decoding].tolist()) <= set(ends.tolist())   # a request finishes at a step's end
