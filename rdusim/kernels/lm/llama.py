"""A minimal Llama forward in plain torch, with the KV cache as a plug-in per layer.

Owns: ``LlamaConfig``, ``LayerWeights``, ``LlamaWeights``, ``Llama`` (prefill and one-token
decode), RoPE in the non-interleaved ("rotate half") layout. Imports: torch.

Why not a Hugging Face model: the compressed caches of ``rdusim.kernels`` must sit exactly where
attention reads the KV, and the policies need the prefill *queries* to score tokens. A 100-line
forward makes both explicit and avoids depending on transformers at run time (transformers is
only the parity oracle in the tests).

Shapes: batch B = 1 throughout (trials run one prompt at a time); T prompt tokens, Hq query
heads, Hkv KV heads, D head width, E model width, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F


@dataclass(frozen=True, kw_only=True)
class LlamaConfig:
    """Architecture hyper-parameters, read from the GGUF metadata."""

    n_layers: int
    d_model: int
    d_ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_theta: float
    rms_eps: float
    vocab_size: int
    context_length: int

    @property
    def group(self) -> int:
        """Query heads per KV head (query head i reads KV head i // group)."""
        return self.n_heads // self.n_kv_heads


@dataclass(frozen=True)
class LayerWeights:
    """One decoder block, fp32, in ``torch.nn.Linear`` layout (out_features, in_features)."""

    attn_norm: Tensor  # (E,)
    wq: Tensor  # (Hq*D, E), rows in Hugging Face order (llama.cpp's permutation undone)
    wk: Tensor  # (Hkv*D, E), idem
    wv: Tensor  # (Hkv*D, E)
    wo: Tensor  # (E, Hq*D)
    ffn_norm: Tensor  # (E,)
    w_gate: Tensor  # (F, E)
    w_up: Tensor  # (F, E)
    w_down: Tensor  # (E, F)


@dataclass(frozen=True)
class LlamaWeights:
    """All parameters; the output head is tied to ``embedding``."""

    embedding: Tensor  # (V, E)
    layers: tuple[LayerWeights, ...]
    final_norm: Tensor  # (E,)


@dataclass(frozen=True)
class LayerQKV:
    """Post-RoPE queries, keys and values of one layer over the prompt, as the kernels take them."""

    queries: Tensor  # (1, Hq, T, D)
    keys: Tensor  # (1, Hkv, T, D)
    values: Tensor  # (1, Hkv, T, D)


#: attend(layer, q, k, v) -> attention output; q (1, Hq, 1, D), k and v (1, Hkv, 1, D) post-RoPE
#: for the new token; returns (1, Hq, 1, D). The caller's cache decides what is attended to.
AttendFn = Callable[[int, Tensor, Tensor, Tensor], Tensor]


class Llama:
    """Llama decoder (RMSNorm, GQA attention with RoPE, SwiGLU MLP, tied embeddings).

    ``prefill`` runs ordinary causal attention over the whole prompt and returns every layer's
    post-RoPE Q, K and V; ``decode`` runs one token and delegates attention to a callback, so the
    KV cache (full or compressed) lives outside the model.
    """

    def __init__(self, config: LlamaConfig, weights: LlamaWeights) -> None:
        self.config = config
        self.weights = weights
        half = config.head_dim // 2
        exponent = torch.arange(half, dtype=torch.float64) * 2.0 / config.head_dim
        self._inv_freq = (1.0 / config.rope_theta**exponent).to(torch.float32)  # (D/2,)

    def prefill(self, token_ids: Tensor) -> tuple[Tensor, list[LayerQKV]]:
        """Causal forward over a prompt.

        Parameters
        ----------
        token_ids
            int64 (T,), the prompt.

        Returns
        -------
        logits of the last prompt token, fp32 (V,), and per layer the post-RoPE Q/K/V
        (queries (1, Hq, T, D), keys and values (1, Hkv, T, D)) at positions 0..T-1.
        """
        positions = torch.arange(token_ids.shape[0])
        x = self.weights.embedding[token_ids]  # (T, E)
        per_layer: list[LayerQKV] = []
        for layer in self.weights.layers:
            q, k, v = self._qkv(layer, x, positions)
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = self._finish_block(layer, x, attended)
            per_layer.append(LayerQKV(queries=q, keys=k, values=v))
        return self._logits(x[-1:])[0], per_layer

    def decode(self, token_id: int, position: int, attend: AttendFn) -> Tensor:
        """One new token at absolute ``position``; returns its next-token logits, fp32 (V,).

        RoPE uses the original position (no re-rotation of cached keys), as methods.md specifies.
        """
        positions = torch.tensor([position])
        x = self.weights.embedding[torch.tensor([token_id])]  # (1, E)
        for index, layer in enumerate(self.weights.layers):
            q, k, v = self._qkv(layer, x, positions)
            x = self._finish_block(layer, x, attend(index, q, k, v))
        return self._logits(x)[0]

    def _qkv(self, layer: LayerWeights, x: Tensor, positions: Tensor) -> tuple[Tensor, ...]:
        """x (T, E) -> q (1, Hq, T, D), k and v (1, Hkv, T, D), RoPE applied to q and k."""
        cfg = self.config
        h = rms_norm(x, layer.attn_norm, cfg.rms_eps)
        q = (h @ layer.wq.T).view(-1, cfg.n_heads, cfg.head_dim)  # (T, Hq, D)
        k = (h @ layer.wk.T).view(-1, cfg.n_kv_heads, cfg.head_dim)  # (T, Hkv, D)
        v = (h @ layer.wv.T).view(-1, cfg.n_kv_heads, cfg.head_dim)  # (T, Hkv, D)
        cos, sin = self._rope_tables(positions)
        q = apply_rope(q.transpose(0, 1), cos, sin).unsqueeze(0)  # (1, Hq, T, D)
        k = apply_rope(k.transpose(0, 1), cos, sin).unsqueeze(0)  # (1, Hkv, T, D)
        return q, k, v.transpose(0, 1).unsqueeze(0)  # v: (1, Hkv, T, D)

    def _finish_block(self, layer: LayerWeights, x: Tensor, attended: Tensor) -> Tensor:
        """Output projection, residual, SwiGLU MLP, residual. attended (1, Hq, T, D)."""
        merged = attended[0].transpose(0, 1).reshape(x.shape[0], -1)  # (T, Hq*D)
        x = x + merged @ layer.wo.T
        h = rms_norm(x, layer.ffn_norm, self.config.rms_eps)
        return x + (F.silu(h @ layer.w_gate.T) * (h @ layer.w_up.T)) @ layer.w_down.T

    def _logits(self, x: Tensor) -> Tensor:
        """x (T, E) -> logits (T, V) through the final norm and the tied embedding."""
        h = rms_norm(x, self.weights.final_norm, self.config.rms_eps)
        return h @ self.weights.embedding.T

    def _rope_tables(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """cos and sin, each (T, D), in the rotate-half layout (frequencies repeated twice)."""
        angles = positions.to(torch.float32)[:, None] * self._inv_freq[None, :]  # (T, D/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, D)
        return angles.cos(), angles.sin()


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm over the last axis, in fp32."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x (H, T, D) by position: the non-interleaved layout, pairs (i, i + D/2)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # (H, T, D)
    return x * cos + rotated * sin
