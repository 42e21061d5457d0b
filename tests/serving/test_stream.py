"""A run measured as it goes (``run_serving(..., stream=True)``, ``rdusim serve``) against the run
kept in memory: the same requests.csv bytes, summary, batch histogram, latency CDF points and
trace, bit for bit, on random deployments with every buffer small enough to be cut many times
(CSV slices, decode-step drains, external-sort ranges, pairwise-sum leaves); and the exact
primitives (``exact``) against numpy."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.analysis.serving import exact
from rdusim.analysis.serving.metrics import (
    Slo,
    batch_histogram,
    cdf_points,
    request_frame,
    stats,
    step_summary,
    summarise,
)
from rdusim.analysis.serving.perfetto import serving_trace
from rdusim.analysis.serving.run import ServingResult
from rdusim.analysis.serving.stream import StreamedMeasure
from rdusim.model.speculative import expected_accepted
from rdusim.sim import serving
from rdusim.sim.serving import DecodeTable, node_names, simulate_serving
from tests.serving.conftest import synthetic_model


@pytest.mark.parametrize("n", [0, 1, 7, 8, 129, 1000, 4099, 70001])
def test_pairwise_sum_is_numpys_sum_bit_for_bit(n: int, monkeypatch) -> None:
    monkeypatch.setattr(exact, "LEAF", 256)   # the tree above the leaves walked here, not by numpy
    rng = np.random.default_rng(n)
    values = rng.lognormal(0, 4, n) * rng.choice([-1.0, 1.0], n)
    cuts = np.sort(rng.integers(0, n + 1, 5)) if n else np.array([], dtype=int)
    chunks = np.split(values, cuts)
    assert exact.pairwise_sum(iter(chunks), n) == values.sum()
    assert exact.pairwise_sum(iter(chunks), n).tobytes() == np.add.reduce(values).tobytes()


@given(seed=st.integers(0, 2**16), n=st.integers(0, 3000), weighted=st.booleans(), run=st.sampled_from([7, 64, 5000]),
       distinct=st.sampled_from([3, 50, 10**9]))
@settings(max_examples=60, deadline=None)
def test_sorted_column_stats_are_metrics_stats(seed, n, weighted, run, distinct) -> None:
    """Ties (few distinct values) with different weights, NaNs, ranges of 7 values: the mean,
    median, p90 and p99 of the external sort are the in-memory ones, and the values at any ranks
    the sorted column's."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (("SAMPLE", 16), ("LEAF", 32), ("READ_CHUNK", 13)):
            patch.setattr(exact, name, value)
        _sorted_column_case(seed, n, weighted, run, distinct)


def _sorted_column_case(seed, n, weighted, run, distinct) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, distinct, n) * 0.37 + (0.0 if distinct < 100 else rng.random(n))
    values[rng.random(n) < 0.05] = np.nan
    weights = rng.integers(1, 9, n).astype(np.uint32) if weighted else None
    column = exact.SortedColumn(weighted=weighted, run=run)
    cuts = np.sort(rng.integers(0, n + 1, 4))
    for part in np.split(np.arange(n), cuts):
        column.append(values[part], None if weights is None else weights[part])
    finite = np.sort(values[~np.isnan(values)])
    ranks = np.unique(rng.integers(0, max(len(finite), 1), 10)) if len(finite) else np.array([], dtype=int)
    got, at = column.stats("x", ranks)
    column.close()
    want = stats("x", values, weights)
    assert json.dumps(got) == json.dumps(want)   # NaN where empty, the same floats otherwise
    assert at.tolist() == finite[ranks].tolist()


def _measured(model, arrivals, prompts, outputs, slo, small: bool):
    """The run in memory and streamed (every buffer tiny when ``small``)."""
    whole = simulate_serving(model, arrivals, prompts, outputs)
    frame = request_frame(whole, slo)
    histogram, steps = batch_histogram(whole), step_summary(whole)
    summary = summarise(whole, frame, slo, steps)
    done = frame["status"] == "done"
    latency = {m: cdf_points(frame.loc[done, m].to_numpy()) for m in ("ttft_s", "tpot_s", "e2e_s")}
    text = io.StringIO()
    sizes = dict(rows=5, trace_requests=17, run=11) if small else {}
    measure = StreamedMeasure(arrivals, prompts, outputs, node_names(model), slo, text, **sizes)
    streamed = simulate_serving(model, arrivals, prompts, outputs, sink=measure)
    out = measure.finish(streamed.end_s)
    measure.close()
    assert streamed.requests is None and streamed.steps is None
    assert streamed.nodes == whole.nodes and streamed.end_s == whole.end_s
    assert text.getvalue() == frame.to_csv(index=False)
    assert json.dumps(out["summary"]) == json.dumps(summary)
    assert out["batch_histogram"].to_csv(index=False) == histogram.to_csv(index=False)
    for metric, (x, y) in latency.items():
        assert out["latency"][metric][0].tobytes() == x.tobytes(), metric
        assert out["latency"][metric][1].tobytes() == y.tobytes(), metric
    trace = 17 if small else 20000
    a = ServingResult("x", frame, summary, None, histogram, whole)
    b = ServingResult("x", None, out["summary"], None, out["batch_histogram"], streamed, out["latency"], out["head"])
    if len(frame):
        assert serving_trace(a, trace) == serving_trace(b, trace)
    return whole, summary


@given(seed=st.integers(0, 2**16), prefill_nodes=st.integers(1, 3), decode_nodes=st.integers(1, 3),
       layout=st.sampled_from(["disaggregated", "colocated"]), chunked=st.booleans(), speculative=st.booleans(),
       grows=st.booleans(), table=st.booleans(), shuffled=st.booleans())
@settings(max_examples=25, deadline=None)
def test_streamed_run_is_the_run_in_memory(seed, prefill_nodes, decode_nodes, layout, chunked, speculative, grows,
                                           table, shuffled) -> None:
    """Rejections (prompts over max_context), one-token requests, several decode nodes (steps
    recorded out of start order), co-located steps, speculative bursts, a trace out of arrival
    order; decode steps drained every 7 steps, CSV slices of 5 rows, sorts and histogram groups
    in ranges of about 11 values: every output the same bytes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serving, "STEP_CHUNK", 7)
        for name, value in (("SAMPLE", 8), ("LEAF", 16), ("READ_CHUNK", 9)):
            patch.setattr(exact, name, value)
        _streamed_case(seed, prefill_nodes, decode_nodes, layout, chunked, speculative, grows, table, shuffled)


def _streamed_case(seed, prefill_nodes, decode_nodes, layout, chunked, speculative, grows, table, shuffled) -> None:
    rng = np.random.default_rng(seed)
    n = 150
    arrivals = np.cumsum(rng.exponential(0.08, n))
    if shuffled:
        arrivals = rng.permutation(arrivals)
    prompts = rng.integers(50, 1700, n)
    outputs = rng.integers(1, 60, n)
    step = DecodeTable((2, 4, 8), (128, 1024, 4096), ((0.02, 0.021, 0.03), (0.021, 0.023, 0.035),
                                                      (0.022, 0.026, 0.045))) \
        if table else (lambda b, kv: 0.02 + 0.001 * b + kv * 1e-6)
    rate, k = 0.7, 3
    model = synthetic_model(layout=layout, prefill_nodes=0 if layout == "colocated" else prefill_nodes,
                            decode_nodes=decode_nodes, prefill_time=lambda p: p / 20000.0, batch_buckets=(2, 4, 8),
                            decode_step_time=step, kv_grows=grows, max_context=1600,
                            chunk_tokens=256 if chunked and layout == "colocated" else None,
                            accepted_tokens_per_step=expected_accepted(rate, k) if speculative else 2.4,
                            draft_tokens=k if speculative else 0, acceptance_rate=rate if speculative else 0.0,
                            seed=seed, kv_bytes_per_group=3000 * 1000.0, link_bytes_per_s=5e8, link_latency_s=1e-3)
    whole, summary = _measured(model, arrivals, prompts, outputs, Slo(0.5, 0.03), small=True)
    assert summary["rejected"] > 0 and len(whole.steps["start_s"]) > 7


def test_streamed_with_default_buffers() -> None:
    model = synthetic_model(prefill_time=lambda p: p / 20000.0, decode_step_time=lambda b, kv: 0.01 + kv * 1e-6)
    rng = np.random.default_rng(1)
    arrivals, prompts, outputs = np.cumsum(rng.exponential(0.1, 400)), rng.integers(10, 900, 400), rng.integers(1, 30, 400)
    _, summary = _measured(model, arrivals, prompts, outputs, Slo(1.0, 0.05), small=False)
    assert summary["completed"] == 400 and not math.isnan(summary["p99_itl_ms"])


@pytest.mark.parametrize("groups", [[1], [300, 3, 120, 1, 1, 40], [5, 500]])
def test_histogram_in_ranges_is_pandas_groupby_of_the_whole(groups) -> None:
    """Groups larger than a range (alone in theirs), small ones sharing one, a single group in the
    whole column: each group's time is what pandas sums over the whole column."""
    from types import SimpleNamespace

    rng = np.random.default_rng(len(groups))
    active = rng.permutation(np.repeat(np.arange(1, len(groups) + 1, dtype=np.uint32), groups))
    n = len(active)
    steps = {"node": np.zeros(n, np.int32), "start_s": np.arange(n, dtype=float), "duration_s": rng.random(n) * 0.05,
             "active": active, "bucket": np.full(n, 8, np.uint32), "itl_s": rng.random(n), "tokens": active * 1.0}
    measure = StreamedMeasure(np.zeros(0), np.zeros(0, int), np.zeros(0, int), ["decode0"], Slo(1, 1), run=50)
    for lo in range(0, n, 37):
        measure.steps({k: v[lo:lo + 37] for k, v in steps.items()})
    got = measure.histogram().to_csv(index=False)
    measure.close()
    assert got == batch_histogram(SimpleNamespace(steps=steps)).to_csv(index=False)
