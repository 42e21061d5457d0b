"""Kascade's per-layer decode cache: every token is kept; attention is sparse.

Owns: ``KascadeCache``. Imports: torch, ``append``, ``attention``, ``cache``, ``full``,
``kascade.anchors``, ``kascade.sparse``, ``validation``.

A model has one cache per layer, in one of three roles fixed at construction:

- **dense anchor** (layer 0, ``dense=True``): full attention, and it publishes its top-k;
- **anchor** (``anchor=None``, the default): picks its own top-k each step, publishes it in
  ``indices`` and attends sparsely to it;
- **reuse** (``anchor=<the anchor layer's cache>``): attends to the anchor's ``indices`` of the
  current step, KV head h borrowing anchor head ``head_map[h]``.

Per decode step, a driver calls ``append`` then ``attend`` layer by layer in model order, so an
anchor has published this step's ``indices`` before its reuse layers read them. Kascade saves
attention work, not memory: the cache grows like ``FullCache``.
"""

from __future__ import annotations

from typing import Self

import torch
from torch import Tensor

from rdusim.kernels.append import AppendCache
from rdusim.kernels.attention import attend_slots
from rdusim.kernels.cache import gather_tokens
from rdusim.kernels.full import full_positions
from rdusim.kernels.kascade.anchors import default_budget
from rdusim.kernels.kascade.sparse import sparse_decode, topk_indices
from rdusim.kernels.validation import check_int, check_prefill


class KascadeCache(AppendCache):
    """All tokens in slot == position; top-k sparse decode attention shared across layers.

    Attributes
    ----------
    indices
        (B, Hkv, 1, k) int64: this step's top-k slots of an anchor (``-1`` padded).
    head_map
        (Hkv,) int64: the anchor KV head each of this layer's KV heads reads (reuse layers).
    """

    def __init__(
        self,
        keys: Tensor,
        values: Tensor,
        positions: Tensor,
        lengths: Tensor,
        *,
        k_budget: int,
        anchor: KascadeCache | None,
        head_map: Tensor,
        dense: bool,
    ) -> None:
        super().__init__(keys, values, positions, lengths)
        self.k_budget, self.anchor, self.head_map, self.dense = k_budget, anchor, head_map, dense
        b, hkv = positions.shape[:2]
        self.indices = torch.full((b, hkv, 1, k_budget), -1, dtype=torch.int64, device=keys.device)

    @classmethod
    def from_prefill(
        cls,
        keys: Tensor,
        values: Tensor,
        queries: Tensor,
        lengths: Tensor,
        *,
        capacity: int,
        k_budget: int | None = None,
        anchor: KascadeCache | None = None,
        head_map: Tensor | None = None,
        dense: bool = False,
    ) -> Self:
        """Keep the whole prompt in a cache of ``capacity`` slots (``FullCache`` layout).

        Parameters
        ----------
        keys, values, queries, lengths
            The prompt as every ``from_prefill`` takes it; queries are validated only.
        capacity
            Slots per sequence (>= T).
        k_budget
            Keys selected per step; ``default_budget(T)`` = min(max(T // 10, 128), T) if None.
        anchor
            The anchor layer's cache for a reuse layer; None for an anchor layer.
        head_map
            (Hkv,) int64 anchor head per KV head (reuse layers); identity if None.
        dense
            Layer 0: attend densely (still publishing top-k). Not allowed with ``anchor``.
        """
        shape = check_prefill(keys, values, queries, lengths)
        check_int("capacity", capacity, shape.tokens)
        k_budget = default_budget(shape.tokens) if k_budget is None else k_budget
        check_int("k_budget", k_budget, 0)
        head_map = _check_role(anchor, head_map, dense, shape.batch, shape.kv_heads, keys.device)
        positions = full_positions(lengths, shape.kv_heads, shape.tokens, capacity)
        return cls(
            gather_tokens(keys, positions),
            gather_tokens(values, positions),
            positions,
            lengths.clone(),
            k_budget=k_budget,
            anchor=anchor,
            head_map=head_map,
            dense=dense,
        )

    def _attend(self, q_new: Tensor, scale: float | None) -> tuple[Tensor, Tensor]:
        """Dense, anchor or reuse attention of the current token (see the module docstring)."""
        q_positions = (self.lengths - 1)[:, None]  # (B, 1): the token just appended
        if self.anchor is None:  # a role fixed at construction, not a data-dependent branch
            chosen = topk_indices(
                q_new,
                self.keys,
                self.k_budget,
                1,
                lengths=self.lengths,
                q_positions=q_positions,
                scale=scale,
            )  # (B, Hkv, 1, k)
            self.indices.copy_(chosen)
            if self.dense:
                return attend_slots(q_new, self.keys, self.values, self.positions >= 0, scale)
            borrowed = self.indices
        else:
            borrowed = self.anchor.indices[:, self.head_map]  # (B, Hkv, 1, k_anchor)
        return sparse_decode(q_new, self.keys, self.values, borrowed, self.lengths, scale=scale)


def _check_role(
    anchor: KascadeCache | None,
    head_map: Tensor | None,
    dense: bool,
    batch: int,
    kv_heads: int,
    device: torch.device,
) -> Tensor:
    """Validate the layer's role and return its head map (identity by default)."""
    if anchor is not None and dense:
        raise ValueError("a dense layer is an anchor: it cannot also reuse another anchor")
    if anchor is not None and anchor.indices.shape[0] != batch:
        raise ValueError(f"anchor holds {anchor.indices.shape[0]} sequences, this layer {batch}")
    if head_map is None:
        return torch.arange(kv_heads, device=device)
    anchor_heads = kv_heads if anchor is None else anchor.indices.shape[1]
    if tuple(head_map.shape) != (kv_heads,) or head_map.dtype != torch.int64:
        raise ValueError(
            f"head_map must be an int64 tensor of shape ({kv_heads},), "
            f"got {head_map.dtype} of shape {tuple(head_map.shape)}"
        )
    if bool(((head_map < 0) | (head_map >= anchor_heads)).any()):  # construction-time sync
        raise ValueError(f"head_map entries must lie in [0, {anchor_heads})")
    return head_map.to(device)
