"""``kernel_breakdown`` skips the group-by when every (layer type, kernel) has one record (the
fast path): the frame is the group-by's, exactly (values, dtypes, index)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rdusim.analysis import breakdown
from rdusim.config.schema import HBM
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.sim.engine import simulate_plan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("mapping", "fast"), [("deepseek-r1/decode.yaml", True),
                                               ("llama-3.1-8b/prefill.yaml", True),
                                               ("llama-3.1-8b/decode.yaml", False)])
def test_breakdown_equals_the_group_by(mapping: str, fast: bool) -> None:
    plan = build_plan(load_mapping(ROOT / "mappings" / mapping, seq_len=4096))
    trace = simulate_plan(plan, fast=fast, record_events=False)
    frame = breakdown.kernel_breakdown(plan, trace)
    kernels = plan.every_kernel()
    rows = [breakdown._row(r, kernels[(r.layer_type, r.kernel)], plan, trace.layer_multiplier.get(r.layer, 1))
            for r in trace.kernels]
    assert (len(rows) == len(frame)) == fast  # the fast path: one record per kernel; else grouped
    grouped = pd.DataFrame(rows, columns=breakdown.COLUMNS).groupby(["layer_type", "kernel"], sort=False,
                                                                     as_index=False).agg(breakdown._AGGREGATE)
    grouped = grouped[breakdown.COLUMNS]
    grouped["hbm_util"] = grouped["hbm_bytes"] / (plan.system.socket.tier_peak_bytes_per_s(HBM) * grouped["latency_s"])
    grouped["share"] = grouped["latency_s"] / grouped.groupby("layer_type")["latency_s"].transform("sum")
    pd.testing.assert_frame_equal(frame, grouped, check_exact=True, check_index_type=True)
    assert type(frame.index) is type(grouped.index)


def _same(a: object, b: object) -> bool:
    """Equal to the bit (repr tells -0.0 from 0.0 and shows every digit)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize(("mapping", "seq_len"), [("deepseek-r1/decode.yaml", 16384), ("deepseek-r1/prefill.yaml", 8192),
                                                  ("deepseek-r1/decode-snapstream.yaml", 16384),
                                                  ("llama-3.1-8b/decode.yaml", 4096),
                                                  ("llama-3.1-70b/decode-sd.yaml", 8192)])
def test_simulate_kernels_equals_simulate(mapping: str, seq_len: int) -> None:
    """The explorer's re-scores: ``simulate_kernels`` gives ``simulate``'s step time, kernel
    columns and HBM fit, with and without a layer cache (a speculative step: its draft's kernels
    repeat, the group-by path)."""
    from rdusim.analysis.result import LayerCache, simulate, simulate_kernels
    from rdusim.mapping.space import layer_types

    loaded = load_mapping(ROOT / "mappings" / mapping, seq_len=seq_len)
    full = simulate(loaded, record_events=False)
    keys = {t: ("a key", t) for t in layer_types(loaded)}
    cache = LayerCache()
    for layers in (None, (cache, keys), (cache, keys)):  # fresh, filling the cache, from the cache
        light = simulate_kernels(loaded, layers=layers)
        reference = simulate(loaded, record_events=False, layers=layers)
        for result in (full, reference):
            assert _same(light.total_s, result.total_s)
            assert _same(light.kernels, result.kernels[["layer_type", "kernel", "latency_s", "bound"]]
                         .to_dict(orient="records"))
            assert light.hbm == result.hbm
    assert (cache.hits > 0) == (full.plan.speculative is None)  # a speculative step runs whole
    assert (breakdown.kernel_latencies(full.trace) is None) == (full.plan.speculative is not None)
