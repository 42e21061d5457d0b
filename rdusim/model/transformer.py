"""Model spec -> per-layer operator graphs for prefill and decode.

Owns: which ops a transformer layer has, with their loop dimensions and tensors, for MLA
(DeepSeek: decompressed at prefill, absorbed over the latent cache at decode) and GQA
(Llama, Qwen; with Qwen3's per-head q_norm / k_norm when the model card sets ``qk_norm``)
attention, dense and MoE FFNs, and the SnapStream prefill ops.
Imports: ops, config. Knows nothing of hardware or mappings.

Conventions: ``batch`` sequences of ``seq`` query tokens attend to ``kv_seq`` keys
(prefill: kv_seq == seq; decode: seq == 1 and kv_seq is the length the KV policy keeps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx

from rdusim.config.schema import GqaSpec, KvPolicySpec, MlaSpec, ModelSpec
from rdusim.model.builder import LayerBuilder, dtypes
from rdusim.model.ops import Op, TensorUse
from rdusim.model.policy import add_policy_ops, kascade_anchor_layers, kascade_topk, policy_sizes

#: dimensions that grow with tokens: a tensor with one streams through a kernel chunk by
#: chunk; one without (a weight) stays resident (rdusim.mapping.stages)
TOKEN_DIMS = ("batch", "seq", "kv_seq", "window", "ring", "capacity", "topk_slots")
#: the dimension an op streams its chunks along, in order of preference: query tokens, else
#: keys or cache slots
STREAM_DIMS = ("seq", "kv_seq", "capacity", "ring", "topk_slots")
FP32 = 4
ROUTE_BYTES = 8  # expert index (int32) + gate weight (fp32) per routed slot
ROUTES = "routes"  # the router's output: each token's experts (what routed expert ops read)


@dataclass(frozen=True)
class Shape:
    """The workload a layer graph is built for."""

    phase: str
    batch: int
    seq: int
    kv_seq: int


def layer_counts(model: ModelSpec, policy: KvPolicySpec | None = None, phase: str = "prefill",
                 head: bool = False) -> dict[str, int]:
    """How many layers of each type the model has, in order of appearance.

    Kascade at decode splits each type into anchor and reuse layers (``moe@anchor``...).
    ``head``: a decode step also runs the per-step ``head`` ops once (after the layers).
    """
    dense = model.ffn.first_dense_layers
    kinds = ["dense"] * dense + ["moe"] * (model.layers - dense)
    if policy is not None and policy.name == "kascade" and phase == "decode":
        anchors = set(kascade_anchor_layers(model.layers, policy))
        kinds = [f"{k}@anchor" if i in anchors else f"{k}@reuse" for i, k in enumerate(kinds)]
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    if head and phase == "decode":
        counts[HEAD] = 1
    return counts


#: the per-step ops outside the decoder layers (R4 in hardware-and-models.md A.5: SN40 issues
#: embedding, looped decoders, classifier, sampling per token); a decode mapping that lists
#: kernels for it runs it once per step
HEAD = "head"


def base_layer_type(layer_type: str) -> str:
    """``moe@anchor`` -> ``moe``: the mapping's kernels are per base layer type."""
    return layer_type.partition("@")[0]


def layer_graph(model: ModelSpec, layer_type: str, shape: Shape, policy: KvPolicySpec) -> nx.DiGraph:
    """The operator graph of one layer: nodes are op names (attribute ``op``), edges tensors.

    ``layer_type`` is ``dense`` or ``moe``, optionally with a KV-policy variant after ``@``
    (Kascade decode: ``moe@anchor``, ``moe@reuse``; see ``rdusim.model.policy``).
    """
    base, _, variant = layer_type.partition("@")
    if base == HEAD:
        return _head_graph(model, shape)
    if variant == "reuse":
        shape = Shape(shape.phase, shape.batch, shape.seq, kascade_topk(shape.kv_seq, policy))
    sizes = _sizes(model, shape, policy)
    b = LayerBuilder(sizes, dtypes(model))
    latent = isinstance(model.attention, MlaSpec)
    if latent:
        (_mla_prefill if shape.phase == "prefill" else _mla_decode)(b)
    else:
        _gqa(b, decode=shape.phase == "decode", qk_norm=model.qk_norm)
    add_policy_ops(b, policy, shape.phase, latent, variant)
    _ffn(b, moe=base == "moe")
    return _connect(b.ops)


def _sizes(model: ModelSpec, shape: Shape, policy: KvPolicySpec) -> dict[str, int]:
    sizes = {"batch": shape.batch, "seq": shape.seq, "kv_seq": shape.kv_seq,
             "hidden": model.hidden, "one": 1}
    a = model.attention
    if isinstance(a, MlaSpec):
        sizes |= {"heads": a.heads, "q_rank": a.q_lora_rank, "kv_rank": a.kv_lora_rank,
                  "kv_dim": a.kv_lora_rank + a.qk_rope_head_dim,
                  "qk_dim": a.qk_nope_head_dim + a.qk_rope_head_dim, "nope": a.qk_nope_head_dim,
                  "v_dim": a.v_head_dim, "kv_b_dim": a.qk_nope_head_dim + a.v_head_dim,
                  "kv_heads": 1}
    else:
        assert isinstance(a, GqaSpec)
        sizes |= {"heads": a.heads, "kv_heads": a.kv_heads, "head_dim": a.head_dim}
    sizes["ffn"] = model.ffn.intermediate
    if model.ffn.moe is not None:
        moe = model.ffn.moe
        sizes |= {"experts": moe.experts + moe.shared_experts, "routed": moe.experts,
                  "slots": moe.experts_per_token + moe.shared_experts,
                  "topk": moe.experts_per_token, "ffn_moe": moe.intermediate}
    sizes |= policy_sizes(shape.seq if shape.phase == "prefill" else None, shape.kv_seq, policy)
    return sizes


# ------------------------------------------------------------------------ attention
def _mla_common(b: LayerBuilder) -> None:
    b.norm("attn_norm", b.act("x", "batch", "seq", "hidden"), b.act("xn", "batch", "seq", "hidden"), "hidden")
    # q_a and kv_a are replicated under TP (no head dimension), as in vLLM/SGLang
    b.gemm("q_a_proj", b.act("xn", "batch", "seq", "hidden"), b.weight("w_q_a", "hidden", "q_rank"),
           b.act("q_lat", "batch", "seq", "q_rank"), ("hidden",))
    b.norm("q_a_norm", b.act("q_lat", "batch", "seq", "q_rank"), b.act("q_latn", "batch", "seq", "q_rank"), "q_rank")
    b.gemm("q_b_proj", b.act("q_latn", "batch", "seq", "q_rank"), b.weight("w_q_b", "q_rank", "heads", "qk_dim"),
           b.act("q", "batch", "seq", "heads", "qk_dim"), ("q_rank",), tp_dim="heads")
    b.gemm("kv_a_proj", b.act("xn", "batch", "seq", "hidden"), b.weight("w_kv_a", "hidden", "kv_dim"),
           b.act("kv_lat", "batch", "seq", "kv_dim"), ("hidden",))
    # the normalised latent (+ rotated rope key) is the KV cache entry: written to HBM
    b.add("kv_a_norm", "elementwise", ("batch", "seq", "kv_dim"), 4.0,
          (b.act("kv_lat", "batch", "seq", "kv_dim"), b.weight("w_kv_a_norm", "kv_rank")),
          (b.kv("kv_cache", "batch", "seq", "kv_dim"), b.act("c_kv", "batch", "seq", "kv_rank")))
    b.add("rope", "elementwise", ("batch", "seq", "heads", "qk_dim"), 3.0,
          (b.act("q", "batch", "seq", "heads", "qk_dim"),), (b.act("q_rot", "batch", "seq", "heads", "qk_dim"),),
          tp_dim="heads")


def _mla_prefill(b: LayerBuilder) -> None:
    _mla_common(b)
    b.gemm("kv_b_proj", b.act("c_kv", "batch", "seq", "kv_rank"), b.weight("w_kv_b", "kv_rank", "heads", "kv_b_dim"),
           b.act("kv_full", "batch", "seq", "heads", "kv_b_dim"), ("kv_rank",), tp_dim="heads")
    # flash-style: QK^T (qk_dim) and PV (v_dim), 2 FLOP per MAC, causal
    wpp = 2.0 * (b.sizes["qk_dim"] + b.sizes["v_dim"])
    b.add("attention", "attention", ("batch", "heads", "seq", "kv_seq"), wpp,
          (b.act("q_rot", "batch", "seq", "heads", "qk_dim"), b.act("kv_full", "batch", "kv_seq", "heads", "kv_b_dim")),
          (b.act("attn_out", "batch", "seq", "heads", "v_dim"),), reduce=("kv_seq",), tp_dim="heads", causal=True)
    _o_proj(b, ("heads", "v_dim"))


def _mla_decode(b: LayerBuilder) -> None:
    _mla_common(b)
    # the 128 no-rope query dims become 512 latent dims through w_uk; the 64 rope dims pass
    # through, so q_abs is 576 wide but the GEMM computes 512 of them
    b.add("q_absorb", "gemm", ("batch", "seq", "heads", "kv_rank", "nope"), 2.0,
          (b.act("q_rot", "batch", "seq", "heads", "nope"), b.weight("w_uk", "heads", "nope", "kv_rank")),
          (b.act("q_abs", "batch", "seq", "heads", "kv_dim"),), reduce=("nope",), tp_dim="heads")
    # absorbed MLA: scores over the 576-wide latent, output in the 512-wide latent
    wpp = 2.0 * (b.sizes["kv_dim"] + b.sizes["kv_rank"])
    b.add("attention", "attention", ("batch", "heads", "seq", "kv_seq"), wpp,
          (b.act("q_abs", "batch", "seq", "heads", "kv_dim"), b.kv("kv_past", "batch", "kv_seq", "kv_dim"),
           b.act("c_kv", "batch", "seq", "kv_rank")),
          (b.act("o_lat", "batch", "seq", "heads", "kv_rank"),), reduce=("kv_seq",), tp_dim="heads")
    b.gemm("v_absorb", b.act("o_lat", "batch", "seq", "heads", "kv_rank"), b.weight("w_uv", "heads", "kv_rank", "v_dim"),
           b.act("attn_out", "batch", "seq", "heads", "v_dim"), ("kv_rank",), tp_dim="heads")
    _o_proj(b, ("heads", "v_dim"))


#: Qwen3's per-head norms of the queries and keys (HF ``Qwen3Attention.q_norm`` / ``k_norm``):
#: ops of a GQA layer only when its model card sets ``attention.qk_norm``
QK_NORM_OPS = ("q_norm", "k_norm")


def _gqa(b: LayerBuilder, decode: bool, qk_norm: bool) -> None:
    b.norm("attn_norm", b.act("x", "batch", "seq", "hidden"), b.act("xn", "batch", "seq", "hidden"), "hidden")
    xn = b.act("xn", "batch", "seq", "hidden")
    b.gemm("q_proj", xn, b.weight("w_q", "hidden", "heads", "head_dim"),
           b.act("q", "batch", "seq", "heads", "head_dim"), ("hidden",), tp_dim="heads")
    kv_new = ("batch", "seq", "kv_heads", "head_dim")   # k and v of this step's tokens (factor 2)
    b.gemm("kv_proj", xn, b.weight("w_kv", "hidden", "kv_heads", "head_dim", factor=2),
           TensorUse("kv_new", kv_new, "activation", b.dt.act, 2.0),
           ("hidden",), wpp=4.0, tp_dim="kv_heads")
    rope_reads: tuple[TensorUse, ...] = (b.act("q", "batch", "seq", "heads", "head_dim"),
                                         TensorUse("kv_new", kv_new, "activation", b.dt.act, 2.0))
    if qk_norm:
        # Qwen3's q_norm / k_norm: an RMSNorm over head_dim on each query and key head before
        # the rotary embedding (hardware-and-models.md C, "extras"); k_norm reads the keys (one
        # of kv_new's two halves), rope the normed q and k and the values as kv_proj wrote them
        q_norm, k_norm = QK_NORM_OPS
        b.norm(q_norm, b.act("q", "batch", "seq", "heads", "head_dim"),
               b.act("q_n", "batch", "seq", "heads", "head_dim"), "head_dim", tp_dim="heads")
        b.norm(k_norm, TensorUse("kv_new", kv_new, "activation", b.dt.act),
               b.act("k_n", *kv_new), "head_dim", tp_dim="kv_heads")
        rope_reads = (b.act("q_n", "batch", "seq", "heads", "head_dim"), b.act("k_n", *kv_new),
                      TensorUse("kv_new", kv_new, "activation", b.dt.act))
    b.add("rope", "elementwise", ("batch", "seq", "heads", "head_dim"), 3.0, rope_reads,
          (b.act("q_rot", "batch", "seq", "heads", "head_dim"),
           TensorUse("kv_cache", ("batch", "seq", "kv_heads", "head_dim"), "kv", b.dt.kv, 2.0)),
          tp_dim="heads")
    # decode reads the cache of earlier tokens from HBM; prefill attends to this prompt's K/V
    kv = TensorUse("kv_past" if decode else "kv_cache", ("batch", "kv_seq", "kv_heads", "head_dim"),
                   "kv" if decode else "activation", b.dt.kv, 2.0)
    b.add("attention", "attention", ("batch", "heads", "seq", "kv_seq"), 4.0 * b.sizes["head_dim"],
          (b.act("q_rot", "batch", "seq", "heads", "head_dim"), kv),
          (b.act("attn_out", "batch", "seq", "heads", "head_dim"),), reduce=("kv_seq",),
          tp_dim="heads", causal=not decode)
    _o_proj(b, ("heads", "head_dim"))


def _o_proj(b: LayerBuilder, head_dims: tuple[str, str]) -> None:
    b.gemm("o_proj", b.act("attn_out", "batch", "seq", *head_dims), b.weight("w_o", *head_dims, "hidden"),
           b.act("o", "batch", "seq", "hidden"), head_dims, tp_dim="heads")
    # residual add + RMSNorm before the FFN
    b.add("ffn_norm", "elementwise", ("batch", "seq", "hidden"), 5.0,
          (b.act("o", "batch", "seq", "hidden"), b.act("x", "batch", "seq", "hidden"), b.weight("w_ffn_norm", "hidden")),
          (b.act("hn", "batch", "seq", "hidden"), b.act("h", "batch", "seq", "hidden")))


# ------------------------------------------------------------------------------ FFN
def _ffn(b: LayerBuilder, moe: bool) -> None:
    if moe:
        _moe(b)
        return
    hn = b.act("hn", "batch", "seq", "hidden")
    b.gemm("ffn_up", hn, b.weight("w_up", "hidden", "ffn", factor=2), b.act("ffn_h", "batch", "seq", "ffn", nbytes=2 * b.dt.act),
           ("hidden",), wpp=4.0, tp_dim="ffn")
    b.add("ffn_act", "elementwise", ("batch", "seq", "ffn"), 4.0,
          (b.act("ffn_h", "batch", "seq", "ffn", nbytes=2 * b.dt.act),), (b.act("ffn_a", "batch", "seq", "ffn"),), tp_dim="ffn")
    b.gemm("ffn_down", b.act("ffn_a", "batch", "seq", "ffn"), b.weight("w_down", "ffn", "hidden"),
           b.act("ffn_y", "batch", "seq", "hidden"), ("ffn",), tp_dim="ffn")
    b.add("residual_add", "elementwise", ("batch", "seq", "hidden"), 1.0,
          (b.act("ffn_y", "batch", "seq", "hidden"), b.act("h", "batch", "seq", "hidden")),
          (b.act("x_out", "batch", "seq", "hidden"),))


def _moe(b: LayerBuilder) -> None:
    hn = b.act("hn", "batch", "seq", "hidden")
    # the router and its BF16 gate stay replicated (one 7168 x 256 GEMM)
    b.gemm("router_gemm", hn, b.weight("w_router", "hidden", "routed", nbytes=2),
           b.act("logits", "batch", "seq", "routed", nbytes=FP32), ("hidden",))
    # top-8 of 256 per token with a bitonic network: log2(E)(log2(E)+1)/2 passes per element
    passes = math.log2(b.sizes["routed"]) * (math.log2(b.sizes["routed"]) + 1) / 2
    b.add("router_topk", "sort", ("batch", "seq", "routed"), passes,
          (b.act("logits", "batch", "seq", "routed", nbytes=FP32),),
          (b.act(ROUTES, "batch", "seq", "topk", nbytes=ROUTE_BYTES),))
    # the token selection is an address-generated gather of hn (no copy in HBM): each token
    # row streams through the experts its routes name
    b.add("moe_up", "gemm", ("batch", "seq", "slots", "hidden", "ffn_moe"), 4.0,
          (hn, b.act(ROUTES, "batch", "seq", "topk", nbytes=ROUTE_BYTES),
           b.weight("w_moe_up", "experts", "hidden", "ffn_moe", factor=2)),
          (b.act("moe_h", "batch", "seq", "slots", "ffn_moe", nbytes=2 * b.dt.act),),
          reduce=("hidden",), tp_dim="ffn_moe", routed=True)
    b.add("moe_act", "elementwise", ("batch", "seq", "slots", "ffn_moe"), 4.0,
          (b.act("moe_h", "batch", "seq", "slots", "ffn_moe", nbytes=2 * b.dt.act),),
          (b.act("moe_a", "batch", "seq", "slots", "ffn_moe"),), tp_dim="ffn_moe")
    # down projection scaled by the gate weight and accumulated over the token's slots in
    # SRAM (the weighted expert sum is fused into the accumulation), then the residual add
    b.add("moe_down", "gemm", ("batch", "seq", "slots", "ffn_moe", "hidden"), 2.0,
          (b.act("moe_a", "batch", "seq", "slots", "ffn_moe"), b.weight("w_moe_down", "experts", "ffn_moe", "hidden")),
          (b.act("moe_y", "batch", "seq", "hidden"),), reduce=("ffn_moe", "slots"), tp_dim="ffn_moe", routed=True)
    b.add("moe_combine", "elementwise", ("batch", "seq", "hidden"), 1.0,
          (b.act("moe_y", "batch", "seq", "hidden"), b.act("h", "batch", "seq", "hidden")),
          (b.act("x_out", "batch", "seq", "hidden"),))


# ------------------------------------------------------------------------------- head
def _head_graph(model: ModelSpec, shape: Shape) -> nx.DiGraph:
    """Embedding lookup, final norm + classifier, sampling: once per step, for each new token."""
    sizes = {"batch": shape.batch, "seq": shape.seq, "hidden": model.hidden, "vocab": model.vocab}
    b = LayerBuilder(sizes, dtypes(model))
    # the lookup gathers one embedding row per token (address-generated, no full-table read)
    b.add("embed", "elementwise", ("batch", "seq", "hidden"), 1.0,
          (b.act("token_rows", "batch", "seq", "hidden"),), (b.act("x_emb", "batch", "seq", "hidden"),))
    b.norm("final_norm", b.act("x_last", "batch", "seq", "hidden"), b.act("xf", "batch", "seq", "hidden"), "hidden")
    b.gemm("lm_head", b.act("xf", "batch", "seq", "hidden"), b.weight("w_head", "hidden", "vocab"),
           b.act("logits", "batch", "seq", "vocab", nbytes=FP32), ("hidden",), tp_dim="vocab")
    # top-k / argmax over each socket's slice of the vocabulary: log2(V) compare passes (a
    # reduction tree, split along the vocabulary; the per-socket winners' combine is tiny)
    b.add("sample", "sort", ("batch", "seq", "vocab"), math.log2(model.vocab),
          (b.act("logits", "batch", "seq", "vocab", nbytes=FP32),), (b.act("next_token", "batch", "seq", nbytes=FP32),),
          tp_dim="vocab")
    return _connect(b.ops)


# ------------------------------------------------------------------------------ graph
LAYER_INPUT, LAYER_OUTPUT = "x", "x_out"


def _connect(ops: list[Op]) -> nx.DiGraph:
    """Edges from each tensor's last writer to its readers, in op order.

    Edge attribute ``tensors`` lists the tensor names that flow along it. The layer input
    ``x`` has no writer inside the layer: it is the previous layer's ``x_out``.
    """
    graph = nx.DiGraph()
    writer: dict[str, str] = {}
    for op in ops:
        graph.add_node(op.name, op=op)
        for tensor in op.reads:
            source = writer.get(tensor.name)
            if source is not None and source != op.name:
                if not graph.has_edge(source, op.name):
                    graph.add_edge(source, op.name, tensors=[])
                graph.edges[source, op.name]["tensors"].append(tensor.name)
        for tensor in op.writes:
            writer[tensor.name] = op.name
    return graph
