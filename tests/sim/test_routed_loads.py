"""Routed experts picked in the same kernel: their weights load only once the routes exist.

A fused decoder layer (router and experts in one kernel) cannot stream a routed expert's
weights before the router has picked it; with ``expert_weights: all`` (a static graph that
streams every expert) nothing depends on the routes and the loads start with the kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rdusim.analysis.result import simulate
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "mappings/deepseek-r1/decode.yaml"
MLA = ["attn_norm", "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_a_norm", "rope", "q_absorb", "attention",
       "v_absorb", "o_proj"]
FUSED = [f"layers.moe=[{{kernel: Decoder, ops: [{', '.join(MLA)}, ffn_norm, router_gemm, router_topk, moe_up, "
         "moe_act, moe_down, moe_combine], shard: {attention: {heads: 16}}}]",
         "layers.dense.0.shard={attention: {heads: 16}}", "defaults.orchestration=hardware"]


def _events(experts: str, looping: bool = False):
    result = simulate(DECODE, batch=1, seq_len=4096, overrides=[*FUSED, f"defaults.expert_weights={experts}",
                                                                   f"defaults.kernel_looping={str(looping).lower()}"])
    return [e for e in result.trace.events if e.kernel == "Decoder" and e.layer == 3]


@pytest.mark.parametrize("looping", [False, True])
def test_routed_loads_wait_for_the_router_in_the_same_kernel(looping):
    events = _events("routed", looping)
    routed = min(e.start_s for e in events if e.name in ("moe_up:read", "moe_down:read"))
    router = max(e.end_s for e in events if e.track == "compute:router_topk")
    assert routed == router                     # not a moment before: the addresses come from the routes
    static = _events("all", looping)
    first = min(e.start_s for e in static if e.track == "hbm")
    assert min(e.start_s for e in static if e.name == "moe_up:read") == first   # nothing to wait for


def test_only_routed_experts_with_an_in_kernel_router_follow_their_inputs():
    fused = build_plan(load_mapping(DECODE, batch=1, seq_len=4096, overrides=[*FUSED, "defaults.expert_weights=routed"]))
    assert {s.name for k in fused.kernels["moe"] for s in k.stages if s.loads_follow_inputs} == {"moe_up", "moe_down"}
    split = build_plan(load_mapping(DECODE, batch=16, seq_len=4096, overrides=["defaults.expert_weights=routed"]))
    # the published two-kernel layer: the routes come from the previous call, so nothing waits
    assert not any(s.loads_follow_inputs for ks in split.kernels.values() for k in ks for s in k.stages)


@pytest.mark.parametrize("looping", [False, True])
def test_routed_loads_same_on_the_reference_engine(looping):
    """The coalesced engine's loader counter releases a chunk's loads when its inputs arrive,
    exactly as the reference engine's loader process does."""
    overrides = [*FUSED, "defaults.expert_weights=routed", f"defaults.kernel_looping={str(looping).lower()}"]
    reference = simulate(DECODE, batch=1, seq_len=4096, overrides=overrides, coalesce=False)
    coalesced = simulate(DECODE, batch=1, seq_len=4096, overrides=overrides)
    assert reference.total_s == pytest.approx(coalesced.total_s, rel=1e-9)
    assert [(k.kernel, k.layer) for k in reference.trace.kernels] == [(k.kernel, k.layer) for k in coalesced.trace.kernels]
    for a, b in zip(reference.trace.kernels, coalesced.trace.kernels, strict=True):
        assert a.end_s == pytest.approx(b.end_s, rel=1e-9)
