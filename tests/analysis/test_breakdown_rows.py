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
