"""Parameter counts and FLOPs of the layer graphs against the model cards.

Expected values are the figures of ../shared/reference/hardware-and-models.md (B.2 for
DeepSeek-R1, C for Llama-3.1-8B and Qwen3-8B), checked at the precision the card prints
them, and closed forms over the published config dimensions. Parameters are counted from the
weight tensors the layer graphs read; FLOPs from the plans built on the synthetic node
(tests/synthetic.py, one socket, no sharding).

What the plans cover: the decoder layers. The embedding lookup and the output head are counted
in memory (``memory_report``) but are not ops of the layer graph, so a decode step's simulated
FLOPs and weight bytes leave out the head's 2 x 0.93 GFLOP and 1.85 GB per token (DeepSeek-R1;
B.3 lists them); the tests below say so explicitly.
"""

from __future__ import annotations

import math

import pytest

from rdusim.config.schema import KvPolicySpec
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.memory import memory_report
from rdusim.model.transformer import Shape, layer_counts, layer_graph
from tests.synthetic import two_kernel_layers, write_mapping, write_node

M, B = 1e6, 1e9

# DeepSeek-R1 dimensions (B.1) and the per-block counts of B.2, as B.2 writes their formulas
DS_MLA = 7168 * 1536 + 1536 * (128 * 192) + 7168 * 576 + 512 * (128 * 256) + 16384 * 7168
DS_EXPERT = 3 * 7168 * 2048
DS_DENSE_FFN = 3 * 7168 * 18432
DS_ROUTER = 256 * 7168
DS_HEAD = 129280 * 7168             # embedding and output head each (untied)
DS_ATTENTION_FLOP_PER_KEY = 2 * 128 * (576 + 512)   # absorbed MLA: scores over 576, output over 512


def _plan(folder, model: str, phase: str, *, batch: int = 1, seq_len: int = 64):
    node = write_node(folder, 1)
    path = write_mapping(folder, f"{model}-{phase}-{batch}-{seq_len}", model=model, hardware=node, phase=phase,
                         layers=two_kernel_layers(model, phase), workload={"seq_len": seq_len, "batch": batch},
                         defaults={"chunk_tokens": 4096})
    return build_plan(load_mapping(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("cards")


def _layer_weights(model, layer_type: str, phase: str = "prefill") -> dict[str, float]:
    """Parameters per weight tensor of one layer, from the dimensions the graph gives it."""
    graph = layer_graph(model, layer_type, Shape(phase, 1, 1 if phase == "decode" else 16, 16), KvPolicySpec())
    weights = {}
    for name in graph.nodes:
        op = graph.nodes[name]["op"]
        for tensor in op.reads:
            if tensor.role == "weight":
                weights[tensor.name] = math.prod(op.sizes[d] for d in tensor.dims) * tensor.factor
    return weights


def _model(folder, name):
    return _plan(folder, name, "decode").model


# --------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("name, card, digits", [
    ("deepseek-r1", 671.03 * B, 0.01 * B),      # B.2: "our count from the config gives 671.03 B" (M1/M3: 671 B)
    ("llama-3.1-8b", 8.03 * B, 0.01 * B),       # C: 8.03 B
    ("qwen3-8b", 8.19 * B, 0.01 * B),           # C: 8.19 B
    ("llama-3.1-70b", 70.55 * B, 0.01 * B),     # model card: 70.55 B (config.json counted)
    ("llama-3.1-405b", 405.85 * B, 0.01 * B),   # model card: 405.85 B (config.json counted)
])
def test_total_parameters_match_the_card(folder, name, card, digits):
    model = _model(folder, name)
    layers = sum(n * sum(_layer_weights(model, t).values()) for t, n in layer_counts(model).items())
    total = layers + 2 * model.vocab * model.hidden       # untied embedding and head
    assert total == pytest.approx(card, abs=digits / 2)


def test_deepseek_blocks_match_b2(folder):
    model = _model(folder, "deepseek-r1")
    moe = _layer_weights(model, "moe")
    dense = _layer_weights(model, "dense")
    mla = sum(moe[w] for w in ("w_q_a", "w_q_b", "w_kv_a", "w_kv_b", "w_o"))
    assert mla == DS_MLA and mla == pytest.approx(187.1 * M, abs=0.05 * M)
    experts = 256 + 1
    assert (moe["w_moe_up"] + moe["w_moe_down"]) / experts == DS_EXPERT == pytest.approx(44.04 * M, abs=0.005 * M)
    assert dense["w_up"] + dense["w_down"] == DS_DENSE_FFN == pytest.approx(396.4 * M, abs=0.05 * M)
    assert moe["w_router"] == DS_ROUTER
    # decode absorbs kv_b into the query and output sides: same parameters, split in two
    decode = _layer_weights(model, "moe", "decode")
    assert decode["w_uk"] + decode["w_uv"] == moe["w_kv_b"]


def test_qwen3_layer_parameters_include_the_qk_norms(folder):
    # C: per-head QK-RMSNorm ("extras"): q_norm and k_norm, head_dim = 128 weights each per
    # layer, 36 x 2 x 128 of the card's 8.19 B; the rest as Llama's layer at Qwen3's widths
    model = _model(folder, "qwen3-8b")
    weights = _layer_weights(model, "dense")
    assert weights["w_q_norm"] == weights["w_k_norm"] == 128
    matrices = 4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 12288     # q, o, k and v, gate/up/down
    assert sum(weights.values()) == matrices + 2 * 4096 + 2 * 128     # + attn_norm, ffn_norm, q_norm, k_norm
    assert "w_q_norm" not in _layer_weights(_model(folder, "llama-3.1-8b"), "dense")


def test_deepseek_activated_parameters_match_the_card(folder):
    # per token: every non-expert weight, the shared expert and 8 of the 256 routed experts
    model = _model(folder, "deepseek-r1")
    active = 2 * DS_HEAD
    for layer_type, n in layer_counts(model).items():
        weights = _layer_weights(model, layer_type)
        experts = weights.pop("w_moe_up", 0.0) + weights.pop("w_moe_down", 0.0)
        active += n * (sum(weights.values()) + experts * 9 / 257)
    assert active == pytest.approx(37.55 * B, abs=0.005 * B)     # B.2 [D], full embedding and head
    assert active == pytest.approx(37 * B, rel=0.02)             # B.2: M3 "37 B activated"


def test_weight_bytes_match_the_checkpoints(folder):
    # DeepSeek: FP8 linear layers, BF16 router, embedding and head: "about 673 GB" (B.2, with
    # 1/16384 FP32 scales that the simulator does not count: 0.16 GB). Llama: BF16, 2 x 8.03 B
    deepseek = memory_report(_plan(folder, "deepseek-r1", "decode"))["hbm"]["weights"]
    assert deepseek == pytest.approx(673 * B, rel=1e-3)
    llama = memory_report(_plan(folder, "llama-3.1-8b", "decode"))["hbm"]["weights"]
    assert llama == pytest.approx(2 * 8.03 * B, abs=2 * 0.005 * B)


# ------------------------------------------------------------------------------- FLOPs
def _matrix_flop(plan) -> float:
    """FLOPs of the matrix-class stages (GEMMs and attention) over every layer, per socket."""
    return sum(plan.layer_counts[t] * s.work for t, kernels in plan.kernels.items()
               for k in kernels for s in k.stages if s.op_class in ("gemm", "attention"))


def test_deepseek_decode_flop_per_token_is_twice_the_active_layer_parameters(folder):
    kv_len = 64
    plan = _plan(folder, "deepseek-r1", "decode", seq_len=kv_len)
    layers = 61 * DS_MLA + 3 * DS_DENSE_FFN + 58 * (9 * DS_EXPERT + DS_ROUTER)
    attention = 61 * DS_ATTENTION_FLOP_PER_KEY * kv_len
    assert _matrix_flop(plan) == pytest.approx(2 * layers + attention, rel=1e-12)
    # with the output head the layer plan leaves out (2 FLOP per head weight), about 2 x 37 B
    assert _matrix_flop(plan) + 2 * DS_HEAD == pytest.approx(2 * 37 * B, rel=0.02)


def test_deepseek_decode_streams_the_card_weight_bytes(folder):
    # B.3: a batch-1 decode step reads about 37.7 GB = 35.6 GB FP8 linear + 1.85 GB BF16 head
    # + 0.2 GB router. The layer plan streams all but the head.
    plan = _plan(folder, "deepseek-r1", "decode", seq_len=64)
    loaded = sum(plan.layer_counts[t] * s.load_bytes("hbm") for t, kernels in plan.kernels.items()
                 for k in kernels for s in k.stages)
    assert loaded == pytest.approx((35.6 + 0.2) * B, rel=5e-3)
    assert loaded + 2 * DS_HEAD == pytest.approx(37.7 * B, rel=5e-3)


@pytest.mark.parametrize("phase, seq", [("prefill", 100), ("decode", 100)])
def test_llama_flop_closed_form(folder, phase, seq):
    # per token: 2 FLOP per matrix weight of the layers; attention 4 x heads x head_dim per
    # (query, key) pair, causal at prefill (T(T+1)/2 pairs), T keys for the decode token
    plan = _plan(folder, "llama-3.1-8b", phase, seq_len=seq)
    matrices = 4096 * 4096 * 2 + 2 * 4096 * 1024 + 3 * 4096 * 14336     # q, o, k and v, gate/up/down
    pair = 4 * 32 * 128
    if phase == "prefill":
        expected = 32 * (2 * matrices * seq + pair * seq * (seq + 1) / 2)
    else:
        expected = 32 * (2 * matrices + pair * seq)
    assert _matrix_flop(plan) == pytest.approx(expected, rel=1e-12)
