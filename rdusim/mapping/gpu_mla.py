"""DeepSeek-style layers (MLA attention, MoE FFN) as GPU library kernels, one GPU's share.

Owns: ``MlaMoeShape``, ``mla_shape``, ``mla_attention_kernels``, ``ffn_kernels``,
``head_kernels``, ``mla_weight_bytes``, ``mla_kv_bytes_per_token``. Imports: config.schema,
hw.gpu, mapping.gpu.

The deployment a GPU node runs (the common SGLang/vLLM layout on 8 GPUs): attention tensor
parallel over heads (each GPU holds the whole latent KV cache of every sequence, MLA has one
latent "KV head"), the routed experts expert-parallel (each GPU holds ``experts / ep`` of them
and computes every token routed to them), shared experts and the dense layers' FFN tensor
parallel; an all-reduce after attention and after the FFN. Decode uses the absorbed form
(FlashMLA): queries are projected into the 512-wide latent space, attention reads the
576-wide latent cache once for all heads, and the output is projected back.
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
    flash_decode,
    gemm,
    gemm_tile,
    streaming,
)


@dataclass(frozen=True)
class MlaMoeShape:
    batch: int
    kv_len: int
    model: ModelSpec
    tp: int
    topk: int | None = None      # Kascade: keys a sparse layer attends
    anchor: bool = False

    @property
    def heads(self) -> int:
        return self.model.attention.heads // self.tp

    @property
    def wbytes(self) -> int:
        return DTYPE_BYTES[self.model.dtypes.weights]

    @property
    def latent(self) -> int:
        att = self.model.attention
        return att.kv_lora_rank + att.qk_rope_head_dim


def mla_shape(model: ModelSpec, batch: int, kv_len: int, tp: int) -> MlaMoeShape:
    if model.attention.kind != "mla" or model.ffn.moe is None:
        raise ValueError(f"{model.name}: expected an MLA model with MoE layers")
    return MlaMoeShape(batch, kv_len, model, tp)


def mla_attention_kernels(s: MlaMoeShape, gpu: Gpu) -> list[GpuKernel]:
    """Norm, low-rank Q/KV projections, absorbed MLA decode attention, output projection."""
    att, d, rows, w = s.model.attention, s.model.hidden, s.batch, s.wbytes
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    out = [streaming("attn_norm", 2 * rows * d * BF16, gpu, rows=rows)]
    out += gemm("q_a_proj", rows, att.q_lora_rank, d, gpu, dtype_bytes=w)
    out.append(streaming("q_a_norm", 2 * rows * att.q_lora_rank * BF16, gpu, rows=rows))
    out += gemm("q_b_proj", rows, s.heads * qk, att.q_lora_rank, gpu, dtype_bytes=w)
    out += gemm("kv_a_proj", rows, s.latent, d, gpu, dtype_bytes=w)
    out.append(streaming("kv_norm_rope_append", 4 * rows * s.latent * BF16, gpu, launches=3))
    out += gemm("q_absorb", rows * s.heads, att.kv_lora_rank, att.qk_nope_head_dim, gpu)
    per_token = s.latent * DTYPE_BYTES[s.model.dtypes.kv]
    if s.topk is None:
        out += flash_decode("mla_attention", s.batch, s.heads, 1, s.kv_len, s.latent, gpu,
                            kv_bytes_per_token=per_token, math_class="mla")
    else:
        if s.anchor:  # score every latent row, select top-k
            out.append(streaming("kascade.score", s.batch * s.kv_len * (per_token + s.heads * 4), gpu))
            out.append(streaming("kascade.topk", 2 * s.batch * s.kv_len * 4, gpu))
        out.append(streaming("kascade.gather", 2 * s.batch * s.topk * per_token, gpu))
        out += flash_decode("mla_attention", s.batch, s.heads, 1, s.topk, s.latent, gpu,
                            kv_bytes_per_token=per_token, math_class="mla")
    out += gemm("o_absorb", rows * s.heads, att.v_head_dim, att.kv_lora_rank, gpu)
    out += gemm("o_proj", rows, d, s.heads * att.v_head_dim, gpu, dtype_bytes=w)
    out += all_reduce("attn_all_reduce", rows * d * BF16, s.tp, gpu)
    return out


def ffn_kernels(s: MlaMoeShape, gpu: Gpu, *, moe: bool) -> list[GpuKernel]:
    """A dense SwiGLU layer (TP) or a MoE layer (router, local experts, shared expert)."""
    d, rows, w = s.model.hidden, s.batch, s.wbytes
    out = [streaming("ffn_norm", 2 * rows * d * BF16, gpu, rows=rows)]
    if not moe:
        inter = s.model.ffn.intermediate // s.tp
        out += gemm("gate_up", rows, 2 * inter, d, gpu, dtype_bytes=w)
        out.append(streaming("silu_mul", 5 * rows * inter * BF16, gpu))
        out += gemm("down", rows, d, inter, gpu, dtype_bytes=w)
    else:
        m = s.model.ffn.moe
        out += gemm("router", rows, m.experts, d, gpu)
        local = m.experts // s.tp
        active = local * (1 - (1 - m.experts_per_token / m.experts) ** rows)  # expected
        tokens = rows * m.experts_per_token / s.tp  # routed to this GPU's experts
        out.append(_grouped("experts_gate_up", active, tokens, 2 * m.intermediate, d, w, gpu))
        out.append(streaming("experts_silu_mul", 5 * tokens * m.intermediate * BF16, gpu))
        out.append(_grouped("experts_down", active, tokens, d, m.intermediate, w, gpu))
        shared = m.shared_experts * m.intermediate
        out += gemm("shared_gate_up", rows, 2 * shared, d, gpu, dtype_bytes=w)
        out += gemm("shared_down", rows, d, shared, gpu, dtype_bytes=w)
    out += all_reduce("ffn_all_reduce", rows * d * BF16, s.tp, gpu)
    return out


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


def head_kernels(s: MlaMoeShape, gpu: Gpu) -> list[GpuKernel]:
    d = s.model.hidden
    return [streaming("embedding", 2 * s.batch * d * BF16, gpu, rows=s.batch),
            streaming("final_norm", 2 * s.batch * d * BF16, gpu, rows=s.batch),
            *gemm("lm_head", s.batch, s.model.vocab // s.tp, d, gpu)]


def mla_weight_bytes(model: ModelSpec, tp: int) -> float:
    """Weights one GPU holds: attention TP over heads (low-rank A projections replicated),
    routed experts split ``experts / tp``, shared experts and dense FFNs TP, embeddings TP."""
    att, d, m = model.attention, model.hidden, model.ffn.moe
    w = DTYPE_BYTES[model.dtypes.weights]
    qk = att.qk_nope_head_dim + att.qk_rope_head_dim
    replicated = d * att.q_lora_rank + d * (att.kv_lora_rank + att.qk_rope_head_dim)
    split = (att.q_lora_rank * att.heads * qk + att.kv_lora_rank * att.heads * (att.qk_nope_head_dim + att.v_head_dim)
             + att.heads * att.v_head_dim * d)
    attention = replicated + split / tp
    dense = 3 * d * model.ffn.intermediate / tp
    moe = (m.experts * 3 * d * m.intermediate + m.shared_experts * 3 * d * m.intermediate) / tp + m.experts * d
    layers = (model.layers * attention + model.ffn.first_dense_layers * dense
              + (model.layers - model.ffn.first_dense_layers) * moe)
    return w * layers + 2 * model.vocab * d * BF16 / tp


def mla_kv_bytes_per_token(model: ModelSpec) -> float:
    """Latent KV of one token over all layers; every tensor-parallel GPU holds all of it."""
    att = model.attention
    return model.layers * (att.kv_lora_rank + att.qk_rope_head_dim) * DTYPE_BYTES[model.dtypes.kv]
