"""LongFlow: a static cache where each decode token overwrites the slot chosen one step before.

Owns: ``LongFlowCache``. Imports: torch, ``attention``, ``cache``, ``snapkv``, ``validation``.

Semantics (methods.md section 5), per KV head: ``C`` static slots. A prompt longer than
``C - 1`` tokens is first compressed with SnapKV to ``C - 1`` (one slot stays free for the first
decoded token, as in the official code). At each decode step the new token overwrites the slot
chosen at the previous step (``next_slot``), attention runs over all valid slots, and the next
victim is the lowest empty slot if any, else ``argmin_i alpha_i * ||v_i||_1`` with ties to the
lowest slot. ``alpha_i`` is this step's attention weight on slot i *summed* over the query heads
of the KV head (a mean gives the same argmin up to rounding). Victims are per KV head (the
official code shares one across heads). No slot is protected: not sinks, not the newest token.
"""

from __future__ import annotations

from typing import Self

import torch
from torch import Tensor

from rdusim.kernels.attention import attend_slots, score_dtype
from rdusim.kernels.cache import SlotCache, gather_tokens, pad_slots
from rdusim.kernels.snapkv import snapkv_positions
from rdusim.kernels.validation import check_int, check_pool, check_prefill, check_step
from rdusim.kv_policy import DEFAULT_POOL, DEFAULT_WINDOW


class LongFlowCache(SlotCache):
    """``C`` static slots with one-in/one-out replacement by ``alpha * ||v||_1``.

    Attributes
    ----------
    next_slot
        (B, Hkv) int64: the slot the next appended token overwrites.
    value_norms
        (B, Hkv, C): ``||v_i||_1`` of every slot in fp32 (fp64 for fp64 caches), kept up to
        date on every write so no step recomputes it over the whole cache.
    """

    def __init__(self, keys: Tensor, values: Tensor, positions: Tensor, lengths: Tensor) -> None:
        super().__init__(keys, values, positions, lengths)
        self.value_norms = values.to(score_dtype(values.dtype)).abs().sum(dim=-1)  # (B, Hkv, C)
        self.next_slot = self._choose(torch.zeros_like(self.value_norms))  # lowest empty slot

    @classmethod
    def from_prefill(
        cls,
        keys: Tensor,
        values: Tensor,
        queries: Tensor,
        lengths: Tensor,
        *,
        slots: int,
        window: int = DEFAULT_WINDOW,
        pool: int = DEFAULT_POOL,
        scale: float | None = None,
    ) -> Self:
        """Keep at most ``slots - 1`` prompt tokens per KV head (SnapKV when longer).

        Parameters
        ----------
        keys, values, queries
            (B, Hkv, T, Dk), (B, Hkv, T, Dv), (B, Hq, T, Dk), post-RoPE, right-padded.
        lengths
            (B,) int64 prompt lengths.
        slots
            Static capacity C (``C >= window + 1``).
        window, pool
            SnapKV observation window and odd pooling kernel for prompts longer than C - 1.
        scale
            Logit scale of the SnapKV votes, ``1 / sqrt(Dk)`` by default.
        """
        check_prefill(keys, values, queries, lengths)
        check_int("window", window, 1)
        check_int("slots", slots, window + 1)
        check_pool(pool)
        kept = snapkv_positions(
            keys, queries, lengths, budget=slots - 1, window=window, pool=pool, scale=scale
        )  # (B, Hkv, min(C - 1, T))
        positions = pad_slots(kept, slots)  # (B, Hkv, C)
        return cls(
            gather_tokens(keys, positions),
            gather_tokens(values, positions),
            positions,
            lengths.clone(),
        )

    def append(self, k_new: Tensor, v_new: Tensor) -> None:
        """Overwrite ``next_slot`` with the new token.

        Shapes
        ------
        k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv).
        """
        check_step(self.keys, self.values, k_new, v_new)
        slot = self.next_slot[..., None]  # (B, Hkv, 1)
        self._write(slot, k_new, v_new)
        norm = v_new.to(self.value_norms.dtype).abs().sum(dim=-1)  # (B, Hkv, 1)
        self.value_norms.scatter_(2, slot, norm)
        self.lengths.add_(self._one)

    def fused_step(
        self, k_new: Tensor, v_new: Tensor, q_new: Tensor, *, scale: float | None = None
    ) -> tuple[Tensor, Tensor]:
        """One decode step: write, attend, choose the next victim.

        Shapes
        ------
        k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv), q_new (B, Hq, 1, Dk)
        -> out (B, Hq, 1, Dv), next victim slot (B, Hkv) int64 (a copy of ``next_slot``).
        """
        self.append(k_new, v_new)
        out = self.attend(q_new, scale=scale)
        return out, self.next_slot.clone()

    def _attend(self, q_new: Tensor, scale: float | None) -> tuple[Tensor, Tensor]:
        """Attend over the valid slots and pick ``next_slot`` from the same weights."""
        valid = self.positions >= 0
        out, weights = attend_slots(q_new, self.keys, self.values, valid, scale)  # (B,Hq,1,C)
        b, hq, _, slots = weights.shape
        hkv = self.positions.shape[1]
        alpha = weights.view(b, hkv, hq // hkv, slots).sum(dim=2)  # (B, Hkv, C)
        self.next_slot.copy_(self._choose(alpha * self.value_norms))
        return out, weights

    def _choose(self, score: Tensor) -> Tensor:
        """(B, Hkv): the lowest empty slot if any, else the argmin of ``score`` (first wins)."""
        empty = self.positions < 0  # (B, Hkv, C)
        first_empty = empty.to(torch.uint8).argmax(dim=-1)  # argmax returns the first maximum
        return torch.where(empty.any(dim=-1), first_empty, score.argmin(dim=-1))
