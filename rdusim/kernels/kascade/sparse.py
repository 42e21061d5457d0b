"""Kascade's attention kernels: post-softmax pooled top-k selection and sparse attention.

Owns: ``topk_indices``, ``sparse_attention``. Imports: torch, ``attention``, ``selection``.

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
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rdusim.kernels.attention import attention, default_scale, grouped_logits, masked_softmax
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


def _defaults(
    q: Tensor, k: Tensor, lengths: Tensor | None, q_positions: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Fill in all-valid key lengths (B,) and query positions 0 .. Tq-1 (B, Tq)."""
    b, tk, tq = k.shape[0], k.shape[2], q.shape[2]
    if lengths is None:
        lengths = torch.full((b,), tk, dtype=torch.int64, device=k.device)
    if q_positions is None:
        q_positions = torch.arange(tq, device=k.device).expand(b, tq)
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
