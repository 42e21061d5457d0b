"""The plan builder's shortcuts give what their definitions give, bit for bit: ``balance_pcus``
(most PCUs handed out at once) against the one-PCU-at-a-time greedy water-filling, ties included;
``_pairs`` (causal query-key pairs in closed form) against counting them; shared chunks
conserve bytes."""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.config.schema import DDR, HBM
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.stages import _pairs, balance_pcus

ROOT = Path(__file__).resolve().parents[2]


def _greedy(one_pcu_s: dict[str, float], caps: dict[str, int], total: int) -> dict[str, int]:
    """The definition: each spare PCU to the slowest stage that can use one, ties to the earlier."""
    pcus = dict.fromkeys(one_pcu_s, 1)
    heap = [(-t, i, name) for i, (name, t) in enumerate(one_pcu_s.items()) if caps[name] > 1 and t > 0]
    heapq.heapify(heap)
    spare = total - len(pcus)
    while spare > 0 and heap:
        _, i, name = heapq.heappop(heap)
        pcus[name] += 1
        spare -= 1
        if pcus[name] < caps[name]:
            heapq.heappush(heap, (-one_pcu_s[name] / pcus[name], i, name))
    return pcus


times = st.one_of(st.just(0.0), st.floats(1e-9, 1e3), st.sampled_from([1.0, 2.0, 3.0, 0.5, 1e-3]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(times, st.integers(1, 2000)), min_size=1, max_size=12), st.integers(1, 2200))
def test_bulk_water_filling_equals_the_greedy(stages: list[tuple[float, int]], total: int) -> None:
    one = {f"s{i}": t for i, (t, _) in enumerate(stages)}
    caps = {f"s{i}": c for i, (_, c) in enumerate(stages)}
    assert balance_pcus(one, caps, total) == _greedy(one, caps, total)


def test_ties_go_to_the_earlier_stage() -> None:
    # equal stages, an odd number of spare PCUs: the first stage gets the extra one
    assert balance_pcus({"a": 1.0, "b": 1.0}, {"a": 1040, "b": 1040}, 1040) == {"a": 520, "b": 520}
    assert balance_pcus({"a": 1.0, "b": 1.0}, {"a": 1040, "b": 1040}, 1041) == {"a": 521, "b": 520}
    # a capped stage stops at its cap; the rest goes to the other
    assert balance_pcus({"a": 9.0, "b": 1.0}, {"a": 4, "b": 1040}, 1040) == {"a": 4, "b": 1036}


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 600), st.integers(0, 5000), st.integers(1, 600), st.booleans())
def test_pairs_closed_form_counts_them(q0: int, n: int, k0: int, width: int, causal: bool) -> None:
    q1, k1 = q0 + n, k0 + width
    q = np.arange(q0, q1, dtype=np.int64)
    counted = np.clip(q + 1 - k0, 0, k1 - k0).sum() if causal else n * width
    assert _pairs(q0, q1, k0, k1, causal) == float(counted)


@pytest.mark.parametrize("batch", [16, 64])
def test_chunking_conserves_the_bytes_an_op_loads_and_stores(batch: int) -> None:
    """A kernel call loads each weight once and each streamed tensor once, however many chunks
    (the builder shares the chunks after the first: they must not repeat the first's weights)."""
    path = ROOT / "mappings/deepseek-r1/decode.yaml"
    chunked = build_plan(load_mapping(path, batch=batch))
    whole = build_plan(load_mapping(path, batch=batch, overrides=["defaults.max_chunks=1"]))
    compared = 0
    for layer_type, kernels in chunked.kernels.items():
        for kernel, one in zip(kernels, whole.kernels[layer_type], strict=True):
            for stage, single in zip(kernel.stages, one.stages, strict=True):
                if stage.op is None or stage.op.routed or stage.op.op_class == "attention":
                    continue
                assert len(single.chunks) == 1
                compared += len(stage.chunks) > 1
                for tier in (HBM, DDR):
                    assert stage.load_bytes(tier) == pytest.approx(single.load_bytes(tier), rel=1e-12)
                    assert stage.store_bytes(tier) == pytest.approx(single.store_bytes(tier), rel=1e-12)
    assert compared > 10
