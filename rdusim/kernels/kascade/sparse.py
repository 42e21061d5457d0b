"""Kascade's attention kernels: post-softmax pooled top-k selection and sparse attention.

Owns: ``topk_indices``, ``sparse_attention``, ``sparse_decode``. Imports: torch, ``attention``,
``cache``, ``selection``.

Queries come in tiles of ``tile`` consecutive rows (tile 1 at decode). A tile's top-k is
chosen from the keys strictly before the tile's first query, by the post-softmax weights summed
over the tile's valid rows and over the query heads of each KV head. A query then attends to
its tile's top-k keys plus, densely and causally, the keys of its own tile (``[tile start, own
position]``), as Kascade attends the diagonal tile densely; at decode this is the query's own
token. The softmax runs over exactly that set. With ``k`` at least the number of earlier keys
this is dense causal attention.

Query positions default to ``0 .. Tq-1`` (a right-padded prompt); a decode query passes
``q_positions = lengths - 1``. Keys at ``>= lengths[b]`` and queries at ``>= lengths[b]``
(padding) are ignored.

``sparse_decode`` is the decode step's fast path: it gathers the k selected keys and values
plus the query's own token into k + 1 slots and attends over those only, so its work is
proportional to k, not to the cache length (``sparse_attention`` masks a dense pass).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rdusim.kernels.attention import (
    attend_slots,
    attention,
    default_scale,
    grouped_logits,
    masked_softmax,
)
from rdusim.kernels.cache import gather_tokens
from rdusim.kernels.selection import select_top
from rdusim.kernels.validation import check_int


def topk_indices(
    q: Tensor,
    k: Tensor,
    k_budget: int,
    tile: int = 1,
    *,
    lengths: Tensor | None = None,
    q_positions: Tensor | None = None,
    scale: float | None = None,
) -> Tensor:
    """Top-``k_budget`` keys per KV head and query tile, ascending, ``-1`` padded.

    Shapes
    ------
    q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk), lengths (B,) valid keys (default Tk),
    q_positions (B, Tq) (default 0 .. Tq-1) -> (B, Hkv, ceil(Tq / tile), k_budget) int64.
    """
    check_int("k_budget", k_budget, 0)
    check_int("tile", tile, 1)
    lengths, q_positions = _defaults(q, k, lengths, q_positions)
    visible = _visible(q_positions, lengths, k.shape[2])  # (B, Tq, Tk)
    logits = grouped_logits(q, k, default_scale(q.shape[3], scale))  # (B, Hkv, G, Tq, Tk)
    probs = masked_softmax(logits, visible[:, None, None]).sum(dim=2)  # (B, Hkv, Tq, Tk)
    pooled = _sum_tiles(probs, tile)  # (B, Hkv, n_tiles, Tk)
    starts = q_positions[:, ::tile]  # (B, n_tiles): first query of each tile
    key = torch.arange(k.shape[2], device=k.device)
    earlier = (key < starts[..., None]) & (key < lengths[:, None, None])  # (B, n_tiles, Tk)
    return select_top(pooled, earlier[:, None], k_budget)


def sparse_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    indices: Tensor,
    *,
    tile: int = 1,
    lengths: Tensor | None = None,
    q_positions: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention restricted to each tile's ``indices`` plus the query's own tile (causal).

    Shapes
    ------
    q (B, Hq, Tq, Dk), k (B, Hkv, Tk, Dk), v (B, Hkv, Tk, Dv),
    indices (B, Hkv, ceil(Tq / tile), n) int64 in [-1, Tk) (``-1`` = none)
    -> out (B, Hq, Tq, Dv), weights (B, Hq, Tq, Tk) (0 outside the attended set).
    """
    check_int("tile", tile, 1)
    b, hkv, tk = k.shape[:3]
    tq = q.shape[2]
    n_tiles = -(-tq // tile)
    if indices.dim() != 4 or tuple(indices.shape[:3]) != (b, hkv, n_tiles):
        raise ValueError(
            f"indices must have shape (B, Hkv, ceil(Tq / tile), n) = ({b}, {hkv}, {n_tiles}, n), "
            f"got {tuple(indices.shape)}"
        )
    lengths, q_positions = _defaults(q, k, lengths, q_positions)
    chosen = torch.zeros(b, hkv, n_tiles, tk + 1, dtype=torch.bool, device=k.device)
    chosen.scatter_(-1, torch.where(indices >= 0, indices, tk), True)  # column Tk: "none"
    chosen = chosen[..., :tk].repeat_interleave(tile, dim=2)[:, :, :tq]  # (B, Hkv, Tq, Tk)
    row_start = q_positions[:, (torch.arange(tq, device=q.device) // tile) * tile]  # (B, Tq)
    key = torch.arange(tk, device=k.device)
    own_tile = key >= row_start[..., None]  # (B, Tq, Tk)
    mask = _visible(q_positions, lengths, tk)[:, None] & (chosen | own_tile[:, None])
    return attention(q, k, v, mask=mask, scale=scale)


def sparse_decode(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    indices: Tensor,
    lengths: Tensor,
    *,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """One decode query per sequence attending to its top-k keys and its own token.

    The same function as ``sparse_attention`` at ``tile=1`` with ``q_positions = lengths - 1``
    (the top-k lies strictly before the query; the own token is added), computed on k + 1
    gathered slots instead of a masked pass over all ``Tk`` keys.

    Shapes
    ------
    q (B, Hq, 1, Dk), k (B, Hkv, Tk, Dk), v (B, Hkv, Tk, Dv), indices (B, Hkv, 1, n) int64 in
    [-1, Tk) (``-1`` = none), lengths (B,) -> out (B, Hq, 1, Dv), weights (B, Hq, 1, Tk).
    """
    b, hkv, tk = k.shape[:3]
    if indices.dim() != 4 or tuple(indices.shape[:3]) != (b, hkv, 1) or q.shape[2] != 1:
        raise ValueError(
            f"sparse_decode takes one query and indices of shape (B, Hkv, 1, n) = ({b}, {hkv}, 1, n), "
            f"got q {tuple(q.shape)} and indices {tuple(indices.shape)}"
        )
    own = (lengths - 1)[:, None, None].expand(b, hkv, 1)  # (B, Hkv, 1): the query's own slot
    chosen = indices[:, :, 0]  # (B, Hkv, n)
    chosen = torch.where((chosen >= 0) & (chosen < own), chosen, -1)  # strictly before the query
    slots = torch.cat((chosen, own), dim=-1)  # (B, Hkv, n + 1)
    valid = (slots >= 0) & (slots < lengths[:, None, None])  # (B, Hkv, n + 1)
    slots = torch.where(valid, slots, -1)
    out, weights = attend_slots(q, gather_tokens(k, slots), gather_tokens(v, slots), valid, scale)
    hq = q.shape[1]
    index = slots.clamp(min=0).repeat_interleave(hq // hkv, dim=1)[:, :, None, :]  # (B, Hq, 1, n+1)
    dense = torch.zeros(b, hq, 1, tk, dtype=weights.dtype, device=weights.device)
    dense.scatter_add_(-1, index, torch.where(index >= 0, weights, 0.0))  # invalid slots carry 0
    return out, dense


def _defaults(
    q: Tensor, k: Tensor, lengths: Tensor | None, q_positions: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Fill in all-valid key lengths (B,) and query positions 0 .. Tq-1 (B, Tq)."""
    b, tk, tq = k.shape[0], k.shape[2], q.shape[2]
    if lengths is None:
        lengths = torch.full((b,), tk, dtype=torch.int64, device=k.device)
    if q_positions is None:
        q_positions = torch.arange(tq, device=k.device).expand(b, tq)  # (B, Tq)
    if tuple(q_positions.shape) != (b, tq) or tuple(lengths.shape) != (b,):
        raise ValueError(
            f"lengths must have shape ({b},) and q_positions ({b}, {tq}), "
            f"got {tuple(lengths.shape)} and {tuple(q_positions.shape)}"
        )
    return lengths, q_positions


def _visible(q_positions: Tensor, lengths: Tensor, tk: int) -> Tensor:
    """(B, Tq, Tk): key j is visible to a valid query at position p iff j <= p and j < L."""
    key = torch.arange(tk, device=lengths.device)
    causal = key <= q_positions[..., None]  # (B, Tq, Tk)
    valid_row = q_positions < lengths[:, None]  # (B, Tq): padded queries see nothing
    return causal & (key < lengths[:, None, None]) & valid_row[..., None]


def _sum_tiles(probs: Tensor, tile: int) -> Tensor:
    """Sum consecutive query rows in tiles of ``tile`` (the last tile zero-padded).

    Shapes
    ------
    probs (B, H, Tq, Tk) -> (B, H, ceil(Tq / tile), Tk).
    """
    b, h, tq, tk = probs.shape
    padded = F.pad(probs, (0, 0, 0, -tq % tile))  # (B, H, n_tiles * tile, Tk)
    return padded.view(b, h, -1, tile, tk).sum(dim=3)  # (B, H, n_tiles, Tk)
