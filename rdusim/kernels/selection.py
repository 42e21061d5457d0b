"""Observation-window votes, pooling and deterministic top-k: the SnapKV family's selection.

Owns: ``observation_rows``, ``window_votes``, ``pool_votes``, ``select_top``,
``compact_positions``. Imports: torch, ``attention``.

Used by SnapKV, SnapStream and LongFlow at prefill and by Kascade's top-k. Every step runs in
``score_dtype`` (fp32, fp64 for fp64 inputs). Selection is structural: candidates rank before
non-candidates by a stable sort on the candidate flag, never by a score sentinel, and equal
scores go to the lower position (stable sort). Returned positions are ascending, ``-1`` padded.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rdusim.kernels.attention import default_scale, grouped_logits, masked_softmax, score_dtype


def observation_rows(lengths: Tensor, window: int) -> tuple[Tensor, Tensor]:
    """Row indices of the last ``window`` prompt queries of each sequence.

    Shapes
    ------
    lengths (B,) -> rows (B, W) int64 clamped to >= 0, valid (B, W) bool (False where
    ``L - W + i < 0``, i.e. the prompt is shorter than the window).
    """
    rows = lengths[:, None] - window + torch.arange(window, device=lengths.device)  # (B, W)
    return rows.clamp(min=0), rows >= 0


def window_votes(
    queries: Tensor,
    keys: Tensor,
    lengths: Tensor,
    *,
    window: int,
    key_set: Tensor,
    scale: float | None,
) -> Tensor:
    """Attention votes of the observation window, summed over its rows and the group's heads.

    Each of the last ``window`` valid prompt queries (rows ``[max(0, L-W), L)``) takes a
    softmax over the keys in ``key_set`` that it can see causally (``t <= row``); the
    probabilities are summed over rows and over the query heads of each KV head.

    Shapes
    ------
    queries (B, Hq, T, Dk), keys (B, Hkv, T, Dk), lengths (B,), key_set (B, T) bool
    -> votes (B, Hkv, T) in ``score_dtype`` (0 outside ``key_set``).
    """
    b, hq, tokens, dk = queries.shape
    dtype = score_dtype(queries.dtype)
    rows, row_valid = observation_rows(lengths, window)  # (B, W)
    index = rows[:, None, :, None].expand(b, hq, window, dk)  # (B, Hq, W, Dk)
    q_window = queries.gather(2, index).to(dtype)  # (B, Hq, W, Dk)
    logits = grouped_logits(q_window, keys.to(dtype), default_scale(dk, scale))  # (B,Hkv,G,W,T)
    key = torch.arange(tokens, device=lengths.device)
    causal = key[None, None, :] <= rows[:, :, None]  # (B, W, T)
    mask = causal & key_set[:, None, :] & row_valid[:, :, None]  # (B, W, T)
    probs = masked_softmax(logits, mask[:, None, None])  # (B, Hkv, G, W, T)
    return probs.sum(dim=(2, 3))  # (B, Hkv, T)


def pool_votes(votes: Tensor, candidates: Tensor, pool: int, *, count_pad: bool = False) -> Tensor:
    """Average-pool votes along the token axis over the candidate set only.

    Kernel ``pool`` (odd), stride 1, padding ``pool // 2``; cells outside the candidate set
    (padding, and tokens that are not candidates) are never summed. By default they are not
    counted either: each value is the mean of the candidate votes within ``pool // 2``
    positions (rdusim's convention). With ``count_pad`` they count as zeros, so every sum is
    divided by ``pool``: ``torch.nn.functional.avg_pool1d``'s default ``count_include_pad=True``
    applied to the candidate range, as SnapKV's official code and kvpress's ``SnapKVPress`` do
    (the tokens next to the range's edges are damped). Values at non-candidates are finite but
    meaningless.

    Shapes
    ------
    votes (B, H, T), candidates (B, T) bool -> (B, H, T) in ``votes.dtype``.
    """
    half = pool // 2
    inside = candidates[:, None, :]  # (B, 1, T)
    summed = F.pad(torch.where(inside, votes, 0.0), (half, half))  # (B, H, T + 2*half)
    sums = summed.unfold(-1, pool, 1).sum(dim=-1)  # (B, H, T)
    if count_pad:
        return sums / pool
    counted = F.pad(inside.to(votes.dtype), (half, half))  # (B, 1, T + 2*half)
    counts = counted.unfold(-1, pool, 1).sum(dim=-1)  # (B, 1, T)
    return sums / counts.clamp(min=1.0)


def select_top(scores: Tensor, candidates: Tensor, k: int) -> Tensor:
    """Positions of the ``min(k, #candidates)`` best candidates, ascending, ``-1`` padded.

    Ties go to the lower position. Candidates rank before non-candidates structurally (a
    stable sort on the candidate flag after a stable sort on the score).

    Shapes
    ------
    scores (..., T), candidates broadcastable to (..., T) bool -> (..., k) int64.
    """
    is_candidate = candidates.expand(scores.shape)  # (..., T)
    by_score = torch.sort(scores, dim=-1, descending=True, stable=True).indices  # (..., T)
    flag = is_candidate.gather(-1, by_score).to(torch.uint8)  # (..., T)
    by_flag = torch.sort(flag, dim=-1, descending=True, stable=True).indices  # (..., T)
    order = by_score.gather(-1, by_flag)[..., :k]  # (..., min(k, T))
    count = is_candidate.sum(dim=-1, keepdim=True)  # (..., 1)
    rank = torch.arange(order.shape[-1], device=scores.device)
    chosen = torch.where(rank < count, order, -1)  # (..., min(k, T))
    return compact_positions(chosen, k)


def compact_positions(positions: Tensor, width: int) -> Tensor:
    """Sort valid positions (>= 0) ascending in front, ``-1`` after, truncated or padded to
    ``width`` columns. The caller guarantees at most ``width`` valid entries per row.

    Shapes
    ------
    positions (..., N) int64 -> (..., width) int64.
    """
    beyond = torch.iinfo(torch.int64).max  # sorts empty entries after every real position
    ordered = torch.sort(torch.where(positions >= 0, positions, beyond), dim=-1).values
    ordered = torch.where(ordered == beyond, -1, ordered)  # (..., N)
    missing = width - ordered.shape[-1]
    if missing > 0:  # static: depends on shapes only
        ordered = F.pad(ordered, (0, missing), value=-1)
    return ordered[..., :width]
