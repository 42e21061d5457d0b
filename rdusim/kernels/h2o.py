"""H2O: heavy hitters by accumulated attention plus the most recent tokens, fixed capacity.

Owns: ``H2OCache``, ``accumulated_attention``, ``h2o_positions``, ``seen_by``,
``ranking_scores``. Imports: torch,
``attention``, ``cache``, ``selection``, ``validation``.

Semantics (methods.md section 4), per KV head: a token's score is the attention weight it has
received from every query so far (prompt queries included), summed over the query heads of the
group. Capacity ``C = heavy + recent``. Prefill keeps the last ``recent`` prompt tokens and the
``heavy`` best-scored earlier ones (one shot, from the full causal prompt attention). At decode,
``append`` first frees a slot: an empty slot if any, else the evictable token (older than the
last ``recent`` tokens once the new one is in) with the lowest score, ties to the lower
position; the new token starts at score 0. ``attend`` then adds this step's weights to the
scores, so call it exactly once per step.

Option ``normalize="mean"`` ranks a token by its accumulated attention divided by the number of
queries that have seen it (``length - position``: every query from the token itself on), at
prefill and at every eviction. At prefill this is kvpress's ``ObservedAttentionPress`` score,
which removes the sum's bias toward early tokens; the stored ``scores`` stay the sums. The
default ``"sum"`` is methods.md section 4. Either way the cache holds ``heavy + recent`` tokens.
"""

from __future__ import annotations

from typing import Literal, Self

import torch
from torch import Tensor

from rdusim.kernels.attention import default_scale, grouped_logits, masked_softmax, score_dtype
from rdusim.kernels.cache import SlotCache, gather_tokens
from rdusim.kernels.selection import compact_positions, select_top
from rdusim.kernels.validation import check_choice, check_int, check_prefill, check_step

_ROW_CHUNK = 256  # prompt queries per block: bounds the (B, Hq, rows, T) temporary

Normalize = Literal["sum", "mean"]
NORMALIZE_CHOICES: tuple[Normalize, ...] = ("sum", "mean")


def accumulated_attention(
    keys: Tensor, queries: Tensor, lengths: Tensor, *, scale: float | None
) -> Tensor:
    """Attention each prompt key receives from every valid prompt query (causal softmax over
    the visible keys), summed over the queries and the query heads of each KV head.

    Shapes
    ------
    keys (B, Hkv, T, Dk), queries (B, Hq, T, Dk), lengths (B,) -> (B, Hkv, T) in
    ``score_dtype``.
    """
    b, hkv, tokens, dk = keys.shape
    dtype = score_dtype(keys.dtype)
    keys_scored = keys.to(dtype)
    key = torch.arange(tokens, device=keys.device)
    total = torch.zeros(b, hkv, tokens, dtype=dtype, device=keys.device)
    for start in range(0, tokens, _ROW_CHUNK):
        row = key[start : start + _ROW_CHUNK]  # (c,)
        rows = queries[:, :, start : start + _ROW_CHUNK].to(dtype)  # (B, Hq, c, Dk)
        logits = grouped_logits(rows, keys_scored, default_scale(dk, scale))  # (B,Hkv,G,c,T)
        seen = (key[None, :] <= row[:, None])[None] & (key < lengths[:, None])[:, None]  # (B,c,T)
        seen = seen & (row[None, :] < lengths[:, None])[..., None]  # padded rows vote nothing
        total += masked_softmax(logits, seen[:, None, None]).sum(dim=(2, 3))
    return total


def seen_by(positions: Tensor, lengths: Tensor) -> Tensor:
    """How many queries have seen each token so far: ``length - position`` (at least 1).

    Shapes
    ------
    positions (B, H, N) int64 (``-1`` allowed, the result there is meaningless), lengths (B,)
    -> (B, H, N) int64.
    """
    return (lengths[:, None, None] - positions).clamp(min=1)


def ranking_scores(
    scores: Tensor, positions: Tensor, lengths: Tensor, normalize: Normalize
) -> Tensor:
    """The scores H2O ranks by: the sums, or with ``"mean"`` the sums over ``seen_by``.

    Shapes
    ------
    scores (B, H, N), positions (B, H, N) or broadcastable, lengths (B,) -> (B, H, N).
    """
    if normalize == "sum":
        return scores
    return scores / seen_by(positions, lengths).to(scores.dtype)


def h2o_positions(
    scores: Tensor, lengths: Tensor, *, heavy: int, recent: int, normalize: Normalize = "sum"
) -> Tensor:
    """Prompt tokens kept at prefill: the last ``recent`` and the ``heavy`` best earlier ones.

    Shapes
    ------
    scores (B, Hkv, T), lengths (B,) -> (B, Hkv, heavy + recent) int64, ascending, -1 padded.
    """
    b, hkv, tokens = scores.shape
    token = torch.arange(tokens, device=scores.device)
    older = token[None, :] < (lengths - recent)[:, None]  # (B, T): not among the recent
    ranked = ranking_scores(scores, token[None, None, :], lengths, normalize)  # (B, Hkv, T)
    top = select_top(ranked, older[:, None, :], heavy)  # (B, Hkv, heavy)
    latest = lengths[:, None] - recent + torch.arange(recent, device=scores.device)  # (B, R)
    latest = torch.where(latest >= 0, latest, -1)[:, None, :].expand(b, hkv, recent)  # (B,Hkv,R)
    return compact_positions(torch.cat([top, latest], dim=2), heavy + recent)


class H2OCache(SlotCache):
    """Fixed ``heavy + recent`` slots per KV head with accumulated-attention eviction.

    Attributes
    ----------
    scores
        (B, Hkv, C) accumulated attention per slot in fp32 (fp64 for fp64 caches), 0 if empty.
    """

    def __init__(
        self,
        keys: Tensor,
        values: Tensor,
        positions: Tensor,
        lengths: Tensor,
        scores: Tensor,
        *,
        recent: int,
        normalize: Normalize = "sum",
    ) -> None:
        super().__init__(keys, values, positions, lengths)
        self.scores = scores
        self.recent = recent
        self.normalize = check_choice("normalize", normalize, NORMALIZE_CHOICES)

    @classmethod
    def from_prefill(
        cls,
        keys: Tensor,
        values: Tensor,
        queries: Tensor,
        lengths: Tensor,
        *,
        heavy: int,
        recent: int,
        scale: float | None = None,
        normalize: Normalize = "sum",
    ) -> Self:
        """Keep the ``recent`` last prompt tokens and the ``heavy`` most-attended earlier ones.

        Parameters
        ----------
        keys, values, queries
            (B, Hkv, T, Dk), (B, Hkv, T, Dv), (B, Hq, T, Dk), post-RoPE, right-padded.
        lengths
            (B,) int64 prompt lengths.
        heavy, recent
            Heavy-hitter and recent slots (``heavy >= 0``, ``recent >= 0``, sum >= 1).
        scale
            Logit scale, ``1 / sqrt(Dk)`` by default; pass the same scale to ``attend``.
        normalize
            ``"sum"`` (methods.md: rank by accumulated attention) or ``"mean"`` (rank by
            accumulated attention over the number of queries that saw the token, kvpress's
            ``ObservedAttentionPress``), at prefill and at every eviction.
        """
        check_prefill(keys, values, queries, lengths)
        check_int("heavy", heavy, 0)
        check_int("recent", recent, 0)
        check_int("heavy + recent", heavy + recent, 1)
        check_choice("normalize", normalize, NORMALIZE_CHOICES)
        total = accumulated_attention(keys, queries, lengths, scale=scale)  # (B, Hkv, T)
        positions = h2o_positions(
            total, lengths, heavy=heavy, recent=recent, normalize=normalize
        )  # (B, Hkv, C)
        scores = torch.where(positions >= 0, total.gather(2, positions.clamp(min=0)), 0.0)
        return cls(
            gather_tokens(keys, positions),
            gather_tokens(values, positions),
            positions,
            lengths.clone(),
            scores,
            recent=recent,
            normalize=normalize,
        )

    def append(self, k_new: Tensor, v_new: Tensor) -> None:
        """Free a slot (an empty one, else evict) and write the new token with score 0.

        Shapes
        ------
        k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv).
        """
        check_step(self.keys, self.values, k_new, v_new)
        slot = self.victim()[..., None]  # (B, Hkv, 1)
        self._write(slot, k_new, v_new)
        self.scores.scatter_(2, slot, 0.0)
        self.lengths.add_(self._one)

    def victim(self) -> Tensor:
        """(B, Hkv) slot the next token goes to: the lowest empty slot if any, else the
        lowest-ranked token older than the last ``recent`` (ties to the lower position); the
        rank is the score, or with ``normalize="mean"`` the score over ``seen_by``."""
        empty = self.positions < 0  # (B, Hkv, C)
        first_empty = empty.to(torch.uint8).argmax(dim=-1)  # argmax returns the first maximum
        newest_evictable = (self.lengths - self.recent)[:, None, None]  # (B, 1, 1)
        evictable = ~empty & (self.positions <= newest_evictable)
        # +inf only excludes: a full cache always holds heavy + 1 >= 1 evictable tokens.
        ranked = ranking_scores(self.scores, self.positions, self.lengths, self.normalize)
        masked = torch.where(evictable, ranked, float("inf"))
        tied = evictable & (masked == masked.amin(dim=-1, keepdim=True))
        never = torch.iinfo(torch.int64).max
        lowest = torch.where(tied, self.positions, never).argmin(dim=-1)  # (B, Hkv)
        return torch.where(empty.any(dim=-1), first_empty, lowest)

    def _attend(self, q_new: Tensor, scale: float | None) -> tuple[Tensor, Tensor]:
        """Attend, then add the weights (summed over each KV head's query heads) to scores."""
        out, weights = super()._attend(q_new, scale)  # weights (B, Hq, 1, C)
        b, hq, _, slots = weights.shape
        hkv = self.positions.shape[1]
        grouped = weights.view(b, hkv, hq // hkv, slots)  # (B, Hkv, G, C)
        self.scores.add_(grouped.sum(dim=2))
        return out, weights
