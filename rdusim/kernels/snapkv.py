"""SnapKV: one-time prefill compression by observation-window votes, then append.

Owns: ``SnapKVCache``, ``snapkv_positions``. Imports: torch, ``append``, ``cache``,
``selection``, ``validation``.

Semantics (methods.md section 2): the last ``W`` prompt queries take a causal softmax over all
visible prompt keys; their probabilities on the prefix ``[0, L-W)`` are summed over rows and over
the query heads of each KV head, average-pooled over the prefix (padded cells not counted), and
the best ``budget - W`` prefix tokens are kept per KV head (ties to the lower position), plus
the whole window. A prompt no longer than ``budget`` is kept whole.

Option ``pool_count_pad=True`` divides every pooled sum by ``P`` (cells beyond the prefix count
as zeros), the ``count_include_pad`` convention of SnapKV's official code and kvpress's
``SnapKVPress``; it changes which tokens are kept near the prefix edges, never how many
(docs/kernels.md, "Differential tests against kvpress").
"""

from __future__ import annotations

from typing import Self

import torch
from torch import Tensor

from rdusim.kernels.append import AppendCache
from rdusim.kernels.cache import gather_tokens, pad_slots
from rdusim.kernels.selection import (
    compact_positions,
    observation_rows,
    pool_votes,
    select_top,
    window_votes,
)
from rdusim.kernels.validation import check_flag, check_int, check_pool, check_prefill
from rdusim.kv_policy import DEFAULT_POOL, DEFAULT_WINDOW


def snapkv_positions(
    keys: Tensor,
    queries: Tensor,
    lengths: Tensor,
    *,
    budget: int,
    window: int,
    pool: int,
    scale: float | None,
    pool_count_pad: bool = False,
) -> Tensor:
    """The prompt tokens SnapKV keeps, ascending, ``-1`` padded: ``min(L, budget)`` per row.

    Shapes
    ------
    keys (B, Hkv, T, Dk), queries (B, Hq, T, Dk), lengths (B,)
    -> (B, Hkv, min(budget, T)) int64.
    """
    b, hkv, tokens = keys.shape[:3]
    token = torch.arange(tokens, device=keys.device)
    visible = token[None, :] < lengths[:, None]  # (B, T)
    prefix = token[None, :] < (lengths - window)[:, None]  # (B, T): candidates [0, L-W)
    votes = window_votes(
        queries, keys, lengths, window=window, key_set=visible, scale=scale
    )  # (B, Hkv, T)
    pooled = pool_votes(votes, prefix, pool, count_pad=pool_count_pad)  # (B, Hkv, T)
    top = select_top(pooled, prefix[:, None, :], budget - window)
    rows, row_valid = observation_rows(lengths, window)  # (B, W)
    kept_window = torch.where(row_valid, rows, -1)[:, None, :].expand(b, hkv, window)  # (B,Hkv,W)
    return compact_positions(torch.cat([top, kept_window], dim=2), min(budget, tokens))


class SnapKVCache(AppendCache):
    """SnapKV-compressed prompt in slots ``[0, kept)``, decoded tokens appended after it."""

    @classmethod
    def from_prefill(
        cls,
        keys: Tensor,
        values: Tensor,
        queries: Tensor,
        lengths: Tensor,
        *,
        budget: int,
        capacity: int,
        window: int = DEFAULT_WINDOW,
        pool: int = DEFAULT_POOL,
        scale: float | None = None,
        pool_count_pad: bool = False,
    ) -> Self:
        """Compress the prompt to at most ``budget`` tokens per KV head.

        Parameters
        ----------
        keys, values, queries
            (B, Hkv, T, Dk), (B, Hkv, T, Dv), (B, Hq, T, Dk), post-RoPE, right-padded.
        lengths
            (B,) int64 prompt lengths.
        budget
            Prompt tokens kept per KV head, window included (``budget >= window``).
        capacity
            Slots per sequence, at least ``min(budget, T)``; the rest takes decoded tokens.
        window, pool
            Observation window W >= 1 and odd pooling kernel P.
        scale
            Logit scale of the voting softmax, ``1 / sqrt(Dk)`` by default.
        pool_count_pad
            Divide every pooled sum by ``pool`` (zero padding counted, kvpress's and SnapKV's
            ``avg_pool1d`` default) instead of by the number of prefix cells in the kernel
            (rdusim's default). Only which tokens are kept can change, not how many.
        """
        shape = check_prefill(keys, values, queries, lengths)
        check_int("window", window, 1)
        check_int("budget", budget, window)
        check_int("capacity", capacity, min(budget, shape.tokens))
        check_pool(pool)
        check_flag("pool_count_pad", pool_count_pad)
        kept = snapkv_positions(
            keys, queries, lengths, budget=budget, window=window, pool=pool, scale=scale,
            pool_count_pad=pool_count_pad,
        )  # fmt: skip
        positions = pad_slots(kept, capacity)  # (B, Hkv, C)
        return cls(
            gather_tokens(keys, positions),
            gather_tokens(values, positions),
            positions,
            lengths.clone(),
        )
