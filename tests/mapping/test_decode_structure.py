"""The decode cost-structure choices (docs/calibration.md): what each one changes, in closed form."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rdusim.analysis.kv_update import kv_update_comparison
from rdusim.analysis.result import simulate
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.onchip import pmu_allocation

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "mappings/deepseek-r1/decode.yaml"
SNAP = ROOT / "mappings/deepseek-r1/decode-snapstream.yaml"
LLAMA = ROOT / "mappings/llama-3.1-8b/decode.yaml"
HIDDEN, FFN_MOE, EXPERTS = 7168, 2048, 256 + 1   # DeepSeek-R1: routed + shared, FP8 = 1 byte


def _stage(plan, layer_type: str, kernel: str, stage: str):
    k = next(k for k in plan.kernels[layer_type] if k.name == kernel)
    return next(s for s in k.stages if s.name == stage)


@pytest.mark.parametrize("batch", [16, 64])
def test_static_graph_streams_every_expert_whatever_the_batch(batch):
    plan = build_plan(load_mapping(DECODE, batch=batch, seq_len=4096, overrides=["defaults.expert_weights=all"]))
    up = _stage(plan, "moe", "FFN", "moe_up").load_bytes("hbm")
    down = _stage(plan, "moe", "FFN", "moe_down").load_bytes("hbm")
    weights = EXPERTS * 3 * HIDDEN * FFN_MOE / 16
    tokens = batch * (HIDDEN * 2 + 8 * 8)   # moe_up also streams each token's BF16 state and 8 routes
    assert up + down == pytest.approx(weights + tokens, rel=1e-12)


def test_routed_weights_follow_the_batch():
    small, large = (build_plan(load_mapping(DECODE, batch=b, seq_len=4096, overrides=["defaults.expert_weights=routed"]))
                    for b in (16, 64))
    assert (_stage(small, "moe", "FFN", "moe_up").load_bytes("hbm")
            < _stage(large, "moe", "FFN", "moe_up").load_bytes("hbm"))


@pytest.mark.parametrize(("split", "items_per_sequence"), [("keys", 4), ("sequence", 1)])
def test_attention_split_decides_the_items_a_sequence_streams(split, items_per_sequence):
    # 32K keys, 8K blocks: 4 blocks per sequence when keys split, the whole cache when not
    plan = build_plan(load_mapping(DECODE, batch=16, seq_len=32768, overrides=[f"defaults.attention_split={split}"]))
    attention = _stage(plan, "moe", "MLA", "attention")
    items = [i for c in attention.chunks for i in c.items if i.loads]
    assert len(items) == items_per_sequence
    assert sum(b for i in items for _, b in i.loads) == 32768 * 1152  # one sequence per socket


def test_attention_split_heads_caps_pcus_at_sequences_times_heads():
    plan = build_plan(load_mapping(DECODE, batch=64, seq_len=8192, overrides=["defaults.attention_split=heads"]))
    assert _stage(plan, "moe", "MLA", "attention").pcus == 4 * 128


def test_head_kernels_read_the_classifier_once_per_step():
    plan = build_plan(load_mapping(LLAMA, hw=ROOT / "hw_configs/sn40l-16.yaml", batch=1, overrides=["defaults.tp=16"]))
    assert [k.name for k in plan.kernels["head"]] == ["Embedding", "Classifier", "Sampling"]
    classifier = _stage(plan, "head", "Classifier", "lm_head").load_bytes("hbm")
    assert classifier == 4096 * 128256 * 2 / 16   # the BF16 head split by vocabulary (its input stays on chip)


def test_kernel_looping_pays_one_launch_and_overlaps_loads():
    kw = {"hw": ROOT / "hw_configs/sn40l-16.yaml", "batch": 1, "record_events": False}
    looped = simulate(LLAMA, overrides=["defaults.tp=16", "defaults.kernel_looping=true"], **kw)
    plain = simulate(LLAMA, overrides=["defaults.tp=16"], **kw)
    decoder = [r for r in looped.trace.kernels if r.kernel == "Decoder"]
    # one launch for the loop, no sync between iterations; the loop's end synchronises once
    assert len(decoder) == 32 and decoder[0].launch_sync_s == 1e-6 and all(r.launch_sync_s == 0 for r in decoder[1:-1])
    assert decoder[-1].launch_sync_s == pytest.approx(2e-6)
    assert looped.total_s < plain.total_s
    assert looped.kernels["hbm_bytes"].sum() == pytest.approx(plain.kernels["hbm_bytes"].sum(), rel=1e-9)
    full = simulate(LLAMA, overrides=["defaults.tp=16", "defaults.kernel_looping=true"], fast=False, **kw)
    assert full.total_s == pytest.approx(looped.total_s, rel=1e-12)


def test_pmus_are_whole_512_kib_units():
    plan = build_plan(load_mapping(SNAP, seq_len=32768, batch=64))
    kernel = plan.kernels["moe"][0]
    onchip = pmu_allocation(kernel, plan.system.socket)
    assert onchip.pmus == sum(math.ceil(b / 2**19) for _, b in kernel.stage_sram if b > 0)
    assert onchip.bytes == pytest.approx(kernel.sram_bytes) and onchip.fits


def test_naive_update_holds_both_candidate_caches_of_a_sequence():
    by_op, summary = kv_update_comparison(SNAP, 32768, 64)
    naive = by_op[by_op["update"] == "naive"].set_index("op")["sram_bytes"]
    per_sequence = 8192 * 1152                       # the kept cache of one sequence, one layer
    assert naive["naive_select"] == pytest.approx(2 * per_sequence)       # double-buffered output
    assert naive["naive_concat"] >= 2 * 2 * per_sequence                  # two candidates, double-buffered
    ring, slow = summary.set_index("update").loc[["ring", "naive"], "step_s"]
    assert slow > ring


def test_an_overflowing_update_is_a_row_not_a_crash():
    # 32 sequences per socket at a 128K prompt: the naive update's buffers do not fit 1040 PMUs
    _, summary = kv_update_comparison(SNAP, 131072, 64, overrides=["defaults.attention_split=sequence",
                                                                   "kv_policy.compression=1"])
    naive = summary.set_index("update").loc["naive"]
    assert not naive["fits"] and naive["pmus"] > 1040 and naive["step_s"] > 0


def test_per_stage_sram_adds_up_to_the_kernel_working_set():
    plan = build_plan(load_mapping(SNAP, seq_len=32768, batch=64))
    for kernel in (k for kernels in plan.kernels.values() for k in kernels):
        assert [name for name, _ in kernel.stage_sram] == [s.name for s in kernel.stages]
        assert sum(b for _, b in kernel.stage_sram) == pytest.approx(kernel.sram_bytes, rel=1e-12)


@pytest.mark.parametrize(("override", "message"), [
    ("workload.seq_len=262144", "exceeds deployment.max_prompt=131072"),
    ("deployment.prefill=elsewhere", "'colocated' or 'remote'"),
    ("defaults.attention_split=blocks", "'keys', 'sequence' or 'heads'"),
    ("defaults.expert_weights=some", "'routed' or 'all'"),
])
def test_bad_decode_choices_are_located_errors(override, message):
    from rdusim.errors import ConfigError
    with pytest.raises(ConfigError, match=message):
        load_mapping(DECODE, overrides=[override])


def test_naive_update_needs_a_ring_cache():
    from rdusim.errors import ConfigError
    with pytest.raises(ConfigError, match="applies to snapstream and streamingllm"):
        load_mapping(DECODE, overrides=["kv_policy.kv_update=naive"])


def test_deployment_is_for_decode_mappings():
    from rdusim.errors import ConfigError
    with pytest.raises(ConfigError, match="deployment applies to decode mappings"):
        load_mapping(ROOT / "mappings/deepseek-r1/prefill.yaml", overrides=["deployment.max_prompt=8192"])
