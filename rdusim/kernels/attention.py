"""Dense reference attention with boolean masks and GQA, the numeric core of every cache.

Owns: ``score_dtype``, ``grouped_logits``, ``masked_softmax``, ``weighted_values``,
``attention``, ``padding_causal_mask``, ``attend_slots``. Imports: torch.

GQA never materialises ``repeat_kv``: query head ``i`` reads KV head ``i // G`` because the
query tensor (B, Hq, T, D) is viewed as (B, Hkv, G*T, D) and multiplied against the
un-repeated keys. Softmax runs in ``score_dtype`` (fp32, or fp64 for fp64 inputs); masked-out
entries get weight exactly 0, and a row with no visible key gets all-zero weights, never NaN.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def score_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype softmax and scores run in: fp64 for fp64 inputs, fp32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def default_scale(key_dim: int, scale: float | None) -> float:
    """``scale`` if given, else ``1 / sqrt(Dk)``."""
    return 1.0 / math.sqrt(key_dim) if scale is None else float(scale)


def grouped_logits(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """Scaled logits of every query head against the keys of its KV head.

    The matmul runs in the input dtype (fp32 accumulation on GPUs), the result is cast to
    ``score_dtype`` before scaling, so a low-precision cache is never copied to fp32.

    Shapes
    ------
    q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk) -> (B, Hkv, G, Tq, Tk) in ``score_dtype``.
    """
    b, hq, tq, dk = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    group = hq // hkv
    q_grouped = q.reshape(b, hkv, group * tq, dk)  # (B, Hkv, G*Tq, Dk): head i -> KV head i // G
    logits = torch.matmul(q_grouped, k.transpose(-1, -2))  # (B, Hkv, G*Tq, Tk)
    logits = logits.view(b, hkv, group, tq, tk)  # (B, Hkv, G, Tq, Tk)
    return logits.to(score_dtype(q.dtype)) * scale


def masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last axis restricted to ``mask``; masked entries are exactly 0.

    A row whose mask is all False yields zeros (softmax of all -inf is NaN; ``where`` clears
    it). NaN logits at masked entries never leak, because ``where`` selects, it does not multiply.
    ``mask`` broadcasts against ``logits``.
    """
    probs = torch.softmax(torch.where(mask, logits, float("-inf")), dim=-1)
    return torch.where(mask, probs, 0.0)


def weighted_values(weights: Tensor, v: Tensor) -> Tensor:
    """Attention output from grouped weights.

    Shapes
    ------
    weights (B, Hkv, G, Tq, Tk), v (B, Hkv, Tk, Dv) -> (B, Hq, Tq, Dv) in ``v.dtype``.
    """
    b, hkv, group, tq, tk = weights.shape
    flat = weights.to(v.dtype).reshape(b, hkv, group * tq, tk)  # (B, Hkv, G*Tq, Tk)
    out = torch.matmul(flat, v)  # (B, Hkv, G*Tq, Dv)
    return out.view(b, hkv * group, tq, v.shape[3])  # (B, Hq, Tq, Dv)


def padding_causal_mask(lengths: Tensor, tq: int, tk: int) -> Tensor:
    """Mask of right-padded, causal attention where the queries are the last ``tq`` of ``tk``
    token slots: key ``j`` is visible to query row ``i`` iff ``j < lengths[b]`` and
    ``j <= i + tk - tq``. Rows of padded queries keep every valid key visible.

    Shapes
    ------
    lengths (B,) int64 -> (B, 1, Tq, Tk) bool.
    """
    key = torch.arange(tk, device=lengths.device)
    row = torch.arange(tq, device=lengths.device) + (tk - tq)
    causal = key[None, :] <= row[:, None]  # (Tq, Tk)
    valid = key[None, :] < lengths[:, None]  # (B, Tk)
    return causal[None, None] & valid[:, None, None, :]  # (B, 1, Tq, Tk)


def attention(
    q: Tensor, k: Tensor, v: Tensor, *, mask: Tensor | None = None, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """Dense GQA attention with an optional boolean mask: the ``full`` policy's reference.

    Values at keys that no query may see are zeroed first, so NaN padding cannot reach the
    output through ``0 * NaN``.

    Shapes
    ------
    q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk), v (B, Hkv, Tk, Dv),
    mask broadcastable to (B, Hkv, Tq, Tk) (e.g. (B, 1, Tq, Tk) or (B, Hkv, 1, Tk)).
    Returns the output (B, Hq, Tq, Dv) in ``v.dtype`` and the weights (B, Hq, Tq, Tk) in
    ``score_dtype``.
    """
    b, hq, tq, _ = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    logits = grouped_logits(q, k, default_scale(q.shape[3], scale))  # (B, Hkv, G, Tq, Tk)
    if mask is None:
        mask = torch.ones(1, 1, 1, tk, dtype=torch.bool, device=q.device)
    mask = mask.expand(b, hkv, tq, tk)
    weights = masked_softmax(logits, mask[:, :, None])  # (B, Hkv, G, Tq, Tk)
    seen = mask.any(dim=2)[..., None]  # (B, Hkv, Tk, 1): keys some query may see
    out = weighted_values(weights, torch.where(seen, v, 0.0))
    return out, weights.view(b, hq, tq, tk)  # (B, Hq, Tq, Tk)


def attend_slots(
    q: Tensor, keys: Tensor, values: Tensor, valid: Tensor, scale: float | None
) -> tuple[Tensor, Tensor]:
    """Decode attention of one query per head over the valid slots of a cache.

    Unlike :func:`attention` the values are not masked: every cache keeps its empty slots
    zero-filled, so no per-step copy of the value buffer is needed.

    Shapes
    ------
    q (B, Hq, 1, Dk), keys (B, Hkv, C, Dk), values (B, Hkv, C, Dv), valid (B, Hkv, C) bool.
    Returns the output (B, Hq, 1, Dv) and the weights (B, Hq, 1, C) in ``score_dtype``.
    """
    b, hq, _, dk = q.shape
    slots = keys.shape[2]
    logits = grouped_logits(q, keys, default_scale(dk, scale))  # (B, Hkv, G, 1, C)
    weights = masked_softmax(logits, valid[:, :, None, None, :])  # (B, Hkv, G, 1, C)
    out = weighted_values(weights, values)  # (B, Hq, 1, Dv)
    return out, weights.view(b, hq, 1, slots)  # (B, Hq, 1, C)
