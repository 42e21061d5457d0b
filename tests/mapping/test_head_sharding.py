"""Decode attention sharded by heads: the layout a batch smaller than the node needs.

With data-parallel attention (``shard: {attention: {batch: 16}}``) each socket holds its own
sequences and their KV cache, so a batch below 16 cannot be split. Sharded by heads, each
socket computes 1/16 of the query heads for every sequence: MLA's latent cache (one KV head,
shared by all query heads) is replicated and read whole by every socket; a GQA model's KV
heads go with their query heads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rdusim.errors import MappingError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.memory import memory_report

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "mappings/deepseek-r1/decode.yaml"
LLAMA_70B = ROOT / "mappings/llama-3.1-70b/decode-tp16.yaml"
HEADS = ["layers.dense.0.shard={attention: {heads: 16}}", "layers.moe.0.shard={attention: {heads: 16}}"]
LATENT_BYTES = (512 + 64) * 2      # MLA: one BF16 latent + rope key per token and layer (B.3)
LAYERS, MTP = 61, 1


def _attention(plan, layer_type="moe"):
    return next(s for k in plan.kernels[layer_type] for s in k.stages if s.name == "attention")


@pytest.mark.parametrize("batch", [1, 2, 16])
def test_every_socket_reads_every_sequences_whole_latent_cache(batch):
    plan = build_plan(load_mapping(DECODE, batch=batch, seq_len=8192, overrides=HEADS))
    attention = _attention(plan)
    assert attention.shard == {"heads": 16}
    assert attention.load_bytes("hbm") == batch * 8192 * LATENT_BYTES
    # the cache is replicated, not split: every socket holds all of it (decode layers + the MTP layer)
    assert memory_report(plan)["hbm"]["kv_cache"] == batch * 8192 * LATENT_BYTES * (LAYERS + MTP)


def test_heads_split_the_attention_work_that_data_parallel_attention_splits_by_sequence():
    heads = _attention(build_plan(load_mapping(DECODE, batch=16, seq_len=8192, overrides=HEADS)))
    batch = _attention(build_plan(load_mapping(DECODE, batch=16, seq_len=8192)))
    assert heads.work == pytest.approx(batch.work, rel=1e-12)              # 1/16 of the node's work either way
    assert heads.load_bytes("hbm") == 16 * batch.load_bytes("hbm")        # but 16x the cache read per socket


def test_head_sharded_mla_needs_no_all_to_all():
    plan = build_plan(load_mapping(DECODE, batch=1, seq_len=8192, overrides=HEADS))
    collectives = [s.name for k in plan.kernels["moe"] for s in k.stages if s.op is None]
    assert collectives == ["all_reduce(o)", "all_reduce(moe_y)"]
    data_parallel = build_plan(load_mapping(DECODE, batch=16, seq_len=8192))
    assert any(s.name.startswith("all_to_all") for k in data_parallel.kernels["moe"] for s in k.stages)


def test_a_batch_below_the_data_parallel_degree_is_refused_with_the_way_out():
    with pytest.raises(MappingError) as error:
        build_plan(load_mapping(DECODE, batch=1, seq_len=8192))
    text = str(error.value)
    assert "decode.yaml:44: layers.dense[0].shard.attention: degree 16 does not divide batch=1" in text
    assert "shard attention by heads instead: shard: {attention: {heads: 16}}" in text
    assert "whole latent cache" in text


def test_an_explicit_heads_split_of_gqa_takes_the_kv_heads_with_it():
    tp = build_plan(load_mapping(LLAMA_70B, batch=1))
    explicit = build_plan(load_mapping(LLAMA_70B, batch=1, overrides=["layers.dense.0.shard={attention: {heads: 16}}"]))
    for plan in (tp, explicit):   # 64 query heads, 8 KV heads: each KV head on 2 sockets
        attention = _attention(plan, "dense")
        assert attention.shard == {"heads": 16, "kv_heads": 8}
        assert attention.load_bytes("hbm") == 8192 * 1 * 128 * 2 * 2      # one KV head: K and V, BF16
    assert memory_report(explicit)["hbm"]["kv_cache"] == memory_report(tp)["hbm"]["kv_cache"]


def test_a_kv_split_that_does_not_follow_the_heads_is_refused():
    with pytest.raises(MappingError, match=r"splits heads 16 ways and kv_heads 4 ways.*kv_heads 8"):
        build_plan(load_mapping(LLAMA_70B, batch=1,
                                overrides=["layers.dense.0.shard={attention: {heads: 16, kv_heads: 4}}"]))
