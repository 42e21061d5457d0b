"""DeepSeek-style layers (MLA attention, MoE FFN) as GPU library kernels, one GPU's share.

Owns: ``MlaMoeShape``, ``mla_shape``, ``mla_attention_kernels``, ``mla_prefill_attention_kernels``,
``ffn_kernels``, ``head_kernels``, ``mtp_kernels``, ``expected_gpus_per_token``, ``mla_weight_bytes``,
``mla_kv_bytes_per_token``. Imports: config.schema, hw.gpu, mapping.gpu.

Two layouts of a group of ``tp`` GPUs (``MlaMoeShape.attention``):

- ``"tp"``: attention tensor parallel over heads (each GPU holds the whole latent KV cache of
  every sequence, MLA has one latent "KV head"), routed experts expert-parallel (each GPU holds
  ``experts / tp`` and computes every token routed to them), shared experts and the dense
  layers' FFN tensor parallel; an all-reduce after attention and after the FFN.
- ``"dp"`` (what serving stacks run at high load on 8 x H200: vLLM's DeepSeek recipe "Data
  Parallel + Expert Parallel (DP8+EP)", SGLang's ``--enable-dp-attention``): attention, the
  dense layers, the shared expert and the LM head data parallel (each GPU serves its own
  ``batch / tp`` sequences and holds only their KV), routed experts expert-parallel with an
  all-to-all dispatch of each token to the GPUs of its experts and an all-to-all combine back.

Decode uses the absorbed form (FlashMLA): queries are projected into the 512-wide latent
space, attention reads the 576-wide latent cache once for all heads, and the output is
projected back. With multi-token prediction (``query_tokens`` = 2: DeepSeek-V3's one MTP
module drafts one token, the main model verifies it) every sequence brings two query rows.

Prefill (``query_tokens`` = the prompt) uses the compute-friendly form vLLM runs for prefill
(vllm/attention/backends/mla/common.py, ``_forward_prefill``: "MHA with QK headdim = P + R, V
headdim = V"): the prompt's latent is projected up to per-head keys and values (``kv_b_proj``),
and a causal FlashAttention over 128 heads of 192-wide queries and keys follows; FA2 takes one
head_dim for q, k and v, so V is zero-padded to 192 and the output sliced back
(``_flash_attn_varlen_diff_headdims``, ``_pad_v``: vLLM pads unless FA3 runs on sm90). With
``attention_kernel: fa3`` (what vLLM runs on Hopper: ``get_flash_attn_version`` picks FA3 on
sm90, and ``_pad_v`` is false there) FlashAttention-3 takes V at 128 and neither pad nor slice
runs (``flash3_prefill``; docs/gpu.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rdusim.config.schema import DTYPE_BYTES, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import (
    BF16,
    GEMM_K_STEP,
    CtaGroup,
    GpuKernel,
    all_reduce,
    collective,
    flash3_prefill,
    flash_decode,
    flash_prefill,
    gemm,
    gemm_tile,
    streaming,
)


@dataclass(frozen=True)
class MlaMoeShape:
    batch: int                   # sequences of the whole group
    kv_len: int
    model: ModelSpec
    tp: int                      # GPUs of the group
    topk: int | None = None      # Kascade: keys a sparse layer attends
    anchor: bool = False
    attention: str = "tp"        # "tp" (heads split) or "dp" (sequences split, experts EP)
    query_tokens: int = 1        # new tokens per sequence per step (2 with one MTP draft; the prompt at prefill)
    attention_kernel: str = "fa2"  # prefill attention: FlashAttention-2 ("fa2", V padded) or -3 ("fa3", Hopper)

    @property
    def dp(self) -> bool:
        return self.attention == "dp"

    @property
    def seqs(self) -> int:
        """Sequences this GPU attends for: its share under DP, all of them under TP."""
        return math.ceil(self.batch / self.tp) if self.dp else self.batch

    @property
    def rows(self) -> int:
        """Token rows through this GPU's attention, dense and shared-expert GEMMs."""
        return self.seqs * self.query_tokens

    @property
    def group_rows(self) -> int:
        """Token rows of the whole group, which reach the routed experts (under TP every GPU sees
        them all; under DP each GPU brings its own sequences')."""
        return self.batch * self.query_tokens

    @property
    def heads(self) -> int:
        return self.model.attention.heads if self.dp else self.model.attention.heads // self.tp

    @property
    def wbytes(self) -> int:
        return DTYPE_BYTES[self.model.dtypes.weights]

    @property
    def latent(self) -> int:
        att = self.model.attention
        return att.kv_lora_rank + att.qk_rope_head_dim


def mla_shape(model: ModelSpec, batch: int, kv_len: int, tp: int, *, attention: str = "tp",
              query_tokens: int = 1, attention_kernel: str = "fa2") -> MlaMoeShape:
    if model.attention.kind != "mla" or model.ffn.moe is None:
        raise ValueError(f"{model.name}: expected an MLA model with MoE layers")
    if attention not in ("tp", "dp"):
        raise ValueError(f"attention must be 'tp' or 'dp', got {attention!r}")
    return MlaMoeShape(batch, kv_len, model, tp, attention=attention, query_tokens=query_tokens,
                       attention_kernel=attention_kernel)


def mla_attention_kernels(s: MlaMoeShape, gpu: Gpu) -> list[GpuKernel]:
    """Norm, low-rank Q/KV projections, absorbed MLA decode attention, output projection."""
    att, d, rows, w = s.model.attention, s.model.hidden, s.rows, s.wbytes
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    out = [streaming("attn_norm", 2 * rows * d * BF16, gpu, rows=rows)]
    out += gemm("q_a_proj", rows, att.q_lora_rank, d, gpu, dtype_bytes=w)
    out.append(streaming("q_a_norm", 2 * rows * att.q_lora_rank * BF16, gpu, rows=rows))
    out += gemm("q_b_proj", rows, s.heads * qk, att.q_lora_rank, gpu, dtype_bytes=w)
    out += gemm("kv_a_proj", rows, s.latent, d, gpu, dtype_bytes=w)
    out.append(streaming("kv_norm_rope_append", 4 * rows * s.latent * BF16, gpu, launches=3))
    out += gemm("q_absorb", rows * s.heads, att.kv_lora_rank, att.qk_nope_head_dim, gpu)
    per_token = s.latent * DTYPE_BYTES[s.model.dtypes.kv]
    q_rows = s.heads * s.query_tokens  # FlashMLA packs a sequence's query tokens with its heads
    if s.topk is None:
        out += flash_decode("mla_attention", s.seqs, q_rows, 1, s.kv_len, s.latent, gpu,
                            kv_bytes_per_token=per_token, math_class="mla")
    else:
        if s.anchor:  # score every latent row, select top-k
            out.append(streaming("kascade.score", s.seqs * s.kv_len * (per_token + q_rows * 4), gpu))
            out.append(streaming("kascade.topk", 2 * s.seqs * s.kv_len * 4, gpu))
        out.append(streaming("kascade.gather", 2 * s.seqs * s.topk * per_token, gpu))
        out += flash_decode("mla_attention", s.seqs, q_rows, 1, s.topk, s.latent, gpu,
                            kv_bytes_per_token=per_token, math_class="mla")
    out += gemm("o_absorb", rows * s.heads, att.v_head_dim, att.kv_lora_rank, gpu)
    out += gemm("o_proj", rows, d, s.heads * att.v_head_dim, gpu, dtype_bytes=w)
    if not s.dp:
        out += all_reduce("attn_all_reduce", rows * d * BF16, s.tp, gpu)
    return out


def mla_prefill_attention_kernels(s: MlaMoeShape, gpu: Gpu) -> list[GpuKernel]:
    """A prompt's attention as vLLM's MLA prefill runs it (the module docstring): norm, the low-rank
    Q and KV projections, the latent's norm, rope and cache write, the rope of the queries' rope
    slice (one fused kernel in place), ``kv_b_proj`` projecting the prompt's latent up to per-head
    keys (no-rope part) and values, the keys assembled (each head's 128 no-rope columns beside the
    shared 64-wide rope key), V zero-padded to 192, causal FA2 over ``seqs`` prompts of
    ``query_tokens`` with 192-wide heads (MHA: every head its own keys), the output's 128 value
    columns copied out and ``o_proj``; an all-reduce after it under TP. With FA3 (``attention_kernel``)
    V keeps its width: no pad and no slice."""
    att, d, rows, w = s.model.attention, s.model.hidden, s.rows, s.wbytes
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    h, nope, rope, v = s.heads, att.qk_nope_head_dim, att.qk_rope_head_dim, att.v_head_dim
    out = [streaming("attn_norm", 2 * rows * d * BF16, gpu, rows=rows)]
    out += gemm("q_a_proj", rows, att.q_lora_rank, d, gpu, dtype_bytes=w)
    out.append(streaming("q_a_norm", 2 * rows * att.q_lora_rank * BF16, gpu, rows=rows))
    out += gemm("q_b_proj", rows, h * qk, att.q_lora_rank, gpu, dtype_bytes=w)
    out += gemm("kv_a_proj", rows, s.latent, d, gpu, dtype_bytes=w)
    out.append(streaming("kv_norm_rope_append", 4 * rows * s.latent * BF16, gpu, launches=3))
    out.append(streaming("q_rope", 2 * rows * h * rope * BF16, gpu, strided=True))
    out += gemm("kv_b_proj", rows, h * (nope + v), att.kv_lora_rank, gpu, dtype_bytes=w)
    out.append(streaming("k_assemble", (rows * h * (nope + qk) + rows * rope) * BF16, gpu, strided=True))
    if s.attention_kernel == "fa3":  # FA3 takes V at its own width: no pad, no slice
        out += flash3_prefill("mla_attention", s.seqs, h, h, s.query_tokens, qk, gpu, head_dim_v=v)
    else:
        out.append(streaming("v_pad", rows * h * (v + qk) * BF16, gpu, strided=True))
        out += flash_prefill("mla_attention", s.seqs, h, h, s.query_tokens, qk, gpu)
        out.append(streaming("o_slice", 2 * rows * h * v * BF16, gpu, strided=True))
    out += gemm("o_proj", rows, d, h * v, gpu, dtype_bytes=w)
    if not s.dp:
        out += all_reduce("attn_all_reduce", rows * d * BF16, s.tp, gpu)
    return out


def ffn_kernels(s: MlaMoeShape, gpu: Gpu, *, moe: bool) -> list[GpuKernel]:
    """A dense SwiGLU layer (TP, or whole on each GPU under DP) or a MoE layer (router, local
    experts, shared expert; under DP an all-to-all dispatch before the experts and an
    all-to-all combine after)."""
    d, rows, w = s.model.hidden, s.rows, s.wbytes
    split = 1 if s.dp else s.tp
    out = [streaming("ffn_norm", 2 * rows * d * BF16, gpu, rows=rows)]
    if not moe:
        inter = s.model.ffn.intermediate // split
        out += gemm("gate_up", rows, 2 * inter, d, gpu, dtype_bytes=w)
        out.append(streaming("silu_mul", 5 * rows * inter * BF16, gpu))
        out += gemm("down", rows, d, inter, gpu, dtype_bytes=w)
    else:
        m = s.model.ffn.moe
        group_rows = s.group_rows  # every token of the group reaches the experts
        out += gemm("router", rows, m.experts, d, gpu)
        # each token goes once to each GPU holding one of its experts (DeepEP/NCCL all-to-all)
        exchanged = rows * expected_gpus_per_token(s.model, s.tp) * d * BF16
        if s.dp:
            out += collective("moe_dispatch", "all_to_all", exchanged, s.tp, gpu)
        local = m.experts // s.tp
        active = local * (1 - (1 - m.experts_per_token / m.experts) ** group_rows)  # expected
        tokens = group_rows * m.experts_per_token / s.tp  # routed to this GPU's experts
        out.append(_grouped("experts_gate_up", active, tokens, 2 * m.intermediate, d, w, gpu))
        out.append(streaming("experts_silu_mul", 5 * tokens * m.intermediate * BF16, gpu))
        out.append(_grouped("experts_down", active, tokens, d, m.intermediate, w, gpu))
        if s.dp:
            out += collective("moe_combine", "all_to_all", exchanged, s.tp, gpu)
        shared = m.shared_experts * m.intermediate // split
        out += gemm("shared_gate_up", rows, 2 * shared, d, gpu, dtype_bytes=w)
        out += gemm("shared_down", rows, d, shared, gpu, dtype_bytes=w)
    if not s.dp:
        out += all_reduce("ffn_all_reduce", rows * d * BF16, s.tp, gpu)
    return out


def expected_gpus_per_token(model: ModelSpec, gpus: int) -> float:
    """GPUs a token's ``experts_per_token`` distinct experts land on, ``experts / gpus`` per
    GPU, routing uniform: gpus x (1 - C(E - E/g, k) / C(E, k))."""
    m = model.ffn.moe
    per_gpu = m.experts // gpus
    miss = math.comb(m.experts - per_gpu, m.experts_per_token) / math.comb(m.experts, m.experts_per_token)
    return gpus * (1 - miss)


def _grouped(name: str, active: float, tokens: float, n: int, k: int, wbytes: int, gpu: Gpu) -> GpuKernel:
    """A grouped GEMM over the active experts: each expert's tiles, its weights read once."""
    experts = max(1, round(active))
    m_e = max(1, math.ceil(tokens / experts))
    bm, bn = gemm_tile(m_e)
    per_expert = math.ceil(m_e / bm) * math.ceil(n / bn)  # tiles; the experts fill the SMs
    nbytes = (m_e * k + n * k) * wbytes + m_e * n * BF16
    flops = 2.0 * bm * bn * k
    steps = math.ceil(k / GEMM_K_STEP)
    return GpuKernel(name, (CtaGroup(experts * per_expert, nbytes / per_expert, flops, steps),),
                     ctas_per_sm=1, math="gemm")


def head_kernels(s: MlaMoeShape, gpu: Gpu, *, prefill: bool = False) -> list[GpuKernel]:
    """Embedding, final norm and LM head (vocabulary split under TP, whole under DP); at
    ``prefill`` the norm and head run on each prompt's last position only."""
    d, rows = s.model.hidden, s.rows
    last = s.seqs if prefill else rows
    return [streaming("embedding", 2 * rows * d * BF16, gpu, rows=rows),
            streaming("final_norm", 2 * last * d * BF16, gpu, rows=last),
            *gemm("lm_head", last, s.model.vocab // (1 if s.dp else s.tp), d, gpu)]


def mtp_kernels(s: MlaMoeShape, gpu: Gpu) -> list[GpuKernel]:
    """DeepSeek-V3's MTP module drafting one token: the next token's embedding and the main
    model's last hidden state, normed, concatenated and projected (``eh_proj``, 2d -> d), one
    MLA + MoE block, the shared head. One query token per sequence."""
    one = _replace(s, query_tokens=1)
    d, rows = s.model.hidden, one.rows
    out = [streaming("mtp.norms", 4 * rows * d * BF16, gpu, rows=rows)]
    out += gemm("mtp.eh_proj", rows, d, 2 * d, gpu, dtype_bytes=s.wbytes)
    out += mla_attention_kernels(one, gpu) + ffn_kernels(one, gpu, moe=True)
    return out + head_kernels(one, gpu)[1:]


def _replace(s: MlaMoeShape, **changes: object) -> MlaMoeShape:
    from dataclasses import replace

    return replace(s, **changes)


def mla_weight_bytes(model: ModelSpec, tp: int, *, attention: str = "tp", mtp: bool = False) -> float:
    """Weights one GPU holds. TP: attention split over heads (low-rank A projections
    replicated), routed experts split ``experts / tp``, shared experts, dense FFNs and
    embeddings split. DP: attention, dense FFNs, shared experts, router and embeddings whole on
    every GPU, routed experts split. ``mtp`` adds the MTP module (one MLA + MoE block and its
    2d x d projection; it shares the embedding and head)."""
    att, d, m = model.attention, model.hidden, model.ffn.moe
    w = DTYPE_BYTES[model.dtypes.weights]
    split = 1 if attention == "dp" else tp
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    low_rank = d * att.q_lora_rank + d * (att.kv_lora_rank + att.qk_rope_head_dim)
    heads = (att.q_lora_rank * att.heads * qk + att.kv_lora_rank * att.heads * (att.qk_nope_head_dim + att.v_head_dim)
             + att.heads * att.v_head_dim * d)
    attention_w = low_rank + heads / split
    dense = 3 * d * model.ffn.intermediate / split
    expert = 3 * d * m.intermediate
    moe = m.experts * expert / tp + m.shared_experts * expert / split + m.experts * d
    moe_layers = model.layers - model.ffn.first_dense_layers + (model.mtp_layers if mtp else 0)
    layers = ((model.layers + (model.mtp_layers if mtp else 0)) * attention_w
              + model.ffn.first_dense_layers * dense + moe_layers * moe)
    extra = model.mtp_layers * 2 * d * d if mtp else 0
    return w * (layers + extra) + 2 * model.vocab * d * BF16 / split


def mla_kv_bytes_per_token(model: ModelSpec, *, mtp: bool = False) -> float:
    """Latent KV of one token over all layers (and the MTP module's, with ``mtp``)."""
    att = model.attention
    layers = model.layers + (model.mtp_layers if mtp else 0)
    return layers * (att.kv_lora_rank + att.qk_rope_head_dim) * DTYPE_BYTES[model.dtypes.kv]
