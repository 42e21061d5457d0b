"""The ``full`` policy: keep every token (the uncompressed reference).

Owns: ``FullCache``. Imports: torch, ``append``, ``cache``, ``validation``.
"""

from __future__ import annotations

from typing import Self

import torch
from torch import Tensor

from rdusim.kernels.append import AppendCache
from rdusim.kernels.cache import gather_tokens, pad_slots
from rdusim.kernels.validation import check_int, check_prefill


class FullCache(AppendCache):
    """Every prompt token in slot ``t`` and every decoded token after it: slot == position."""

    @classmethod
    def from_prefill(
        cls, keys: Tensor, values: Tensor, queries: Tensor, lengths: Tensor, *, capacity: int
    ) -> Self:
        """Copy the valid prompt tokens into a cache of ``capacity`` slots.

        Parameters
        ----------
        keys, values, queries
            (B, Hkv, T, Dk), (B, Hkv, T, Dv), (B, Hq, T, Dk), right-padded; queries are
            validated but unused (the interface is shared by every policy).
        lengths
            (B,) int64 prompt lengths.
        capacity
            Slots per sequence, at least T; decoding can add ``capacity - max(lengths)`` tokens.
        """
        shape = check_prefill(keys, values, queries, lengths)
        check_int("capacity", capacity, shape.tokens)
        token = torch.arange(shape.tokens, device=keys.device)
        kept = torch.where(token[None, :] < lengths[:, None], token[None, :], -1)  # (B, T)
        kept = kept[:, None, :].expand(shape.batch, shape.kv_heads, shape.tokens)  # (B, Hkv, T)
        positions = pad_slots(kept, capacity)  # (B, Hkv, C)
        return cls(
            gather_tokens(keys, positions),
            gather_tokens(values, positions),
            positions,
            lengths.clone(),
        )
