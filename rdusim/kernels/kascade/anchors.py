"""Kascade's offline calibration: top-k similarity, anchor layers by dynamic programming,
and the head mapping of reuse layers onto anchor heads.

Owns: ``default_budget``, ``head_similarity``, ``layer_similarity``, ``select_anchors``,
``head_mapping``. Imports: torch.

Similarity ``sim(a, b)`` is the attention mass of layer b captured by layer a's top-k keys,
relative to the mass of b's own top-k (methods.md section 6): 1 when a's choice is as good as
b's own, at most 1. These functions run once per model, off the decode path, so they may use
host-side Python (``tolist``) freely.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rdusim.kv_policy import kascade_k


def default_budget(length: int) -> int:
    """Kascade's default top-k: ``min(max(floor(L / 10), 128), L)`` keys for ``L`` keys
    (``rdusim.kv_policy.kascade_k``, the rule the simulator charges)."""
    if isinstance(length, bool) or not isinstance(length, int) or length < 0:
        raise ValueError(f"length must be an int >= 0, got {length!r}")
    return kascade_k(length)


def head_similarity(source_probs: Tensor, target_probs: Tensor, k: int) -> Tensor:
    """Worst-case (over queries) share of the target's top-k mass captured by the source's top-k.

    For every target head h and source head s, and every query row with non-zero mass:
    ``sum(P_target[h] over topk(P_source[s])) / sum(P_target[h] over topk(P_target[h]))``,
    then the minimum over rows. Rows with no mass (padding) are ignored.

    Shapes
    ------
    source_probs, target_probs (H, Tq, Tk) post-softmax weights pooled per KV head (one
    sequence) -> (H_target, H_source) in fp64.
    """
    if source_probs.shape != target_probs.shape or source_probs.dim() != 3:
        raise ValueError(
            "source_probs and target_probs must both have shape (H, Tq, Tk), "
            f"got {tuple(source_probs.shape)} and {tuple(target_probs.shape)}"
        )
    target = target_probs.double()
    own = target.topk(k, dim=-1).values.sum(dim=-1)  # (H, Tq)
    chosen = source_probs.double().topk(k, dim=-1).indices  # (H, Tq, k)
    heads = target.shape[0]
    index = chosen[None].expand(heads, -1, -1, -1)  # (H_target, H_source, Tq, k)
    captured = target[:, None].expand(-1, heads, -1, -1).gather(-1, index)  # (H_t, H_s, Tq, k)
    ratio = captured.sum(dim=-1) / own[:, None].clamp(min=torch.finfo(torch.float64).tiny)
    ratio = torch.where(own[:, None] > 0, ratio, 1.0)  # (H_target, H_source, Tq)
    return ratio.amin(dim=-1)


def layer_similarity(head_sim: Tensor) -> Tensor:
    """Layer-level similarity from head-level: mean over target heads of the best source head.

    Shapes
    ------
    head_sim (L, L, H_target, H_source), indexed [source layer, target layer] -> (L, L).
    """
    return head_sim.amax(dim=-1).mean(dim=-1)


def select_anchors(
    similarity: Tensor, budget: int, weights: Tensor | None = None
) -> tuple[int, ...]:
    """Choose ``budget`` anchor layers, layer 0 always included, that maximize
    ``sum_b weights[b] * similarity[anchor(b), b]`` where ``anchor(b)`` is the latest anchor
    at or before b. Exact dynamic programming in O(budget * L^2); ties go to earlier anchors.

    Parameters
    ----------
    similarity
        (L, L): ``similarity[a, b]`` scores layer a's top-k for layer b (only a <= b is read).
    budget
        Number of anchors M, 1 <= M <= L.
    weights
        (L,) layer importance (Kascade: ``1 - cos(x_l, y_l)``); ones by default.

    Returns
    -------
    The anchors, ascending, starting with 0.
    """
    n_layers = _check_square(similarity)
    if similarity.dim() != 2:
        raise ValueError(f"similarity must have shape (L, L), got {tuple(similarity.shape)}")
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= n_layers:
        raise ValueError(f"budget must be an int in [1, {n_layers}], got {budget!r}")
    if weights is None:
        weights = torch.ones(n_layers, dtype=torch.float64)
    if tuple(weights.shape) != (n_layers,):
        raise ValueError(f"weights must have shape ({n_layers},), got {tuple(weights.shape)}")
    cover = _segment_values(similarity.double().tolist(), weights.double().tolist())
    return _best_partition(cover, n_layers, budget)


def head_mapping(head_sim: Tensor, anchors: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """For every layer, the anchor it reuses and, per KV head, the anchor head it borrows.

    Anchor layers map to themselves with the identity head map. A reuse layer b maps head h to
    ``argmax_s head_sim[anchor(b), b, h, s]`` (many-to-one allowed, ties to the lower head).

    Shapes
    ------
    head_sim (L, L, H, H) indexed [source layer, target layer, target head, source head]
    -> anchor_of (L,) int64 and source_head (L, H) int64.
    """
    n_layers = _check_square(head_sim)
    if head_sim.dim() != 4 or head_sim.shape[2] != head_sim.shape[3]:
        raise ValueError(f"head_sim must have shape (L, L, H, H), got {tuple(head_sim.shape)}")
    _check_anchors(anchors, n_layers)
    anchor_of = torch.tensor(
        [max(a for a in anchors if a <= layer) for layer in range(n_layers)], dtype=torch.int64
    )
    layer = torch.arange(n_layers)
    best = head_sim[anchor_of, layer].argmax(dim=-1).cpu()  # (L, H): argmax returns the first
    identity = torch.arange(head_sim.shape[2]).expand(n_layers, -1)  # (L, H)
    return anchor_of, torch.where((anchor_of == layer)[:, None], identity, best)


def _check_square(similarity: Tensor) -> int:
    if (
        similarity.dim() < 2
        or similarity.shape[0] != similarity.shape[1]
        or similarity.shape[0] < 1
    ):
        raise ValueError(
            f"similarity must be indexed [source layer, target layer] with L >= 1 layers, "
            f"got shape {tuple(similarity.shape)}"
        )
    return int(similarity.shape[0])


def _check_anchors(anchors: tuple[int, ...], n_layers: int) -> None:
    ordered = list(anchors)
    if not ordered or ordered[0] != 0 or ordered != sorted(set(ordered)) or ordered[-1] >= n_layers:
        raise ValueError(
            f"anchors must be strictly increasing layer indices in [0, {n_layers}) "
            f"starting with 0, got {anchors!r}"
        )


def _segment_values(sim: list[list[float]], weights: list[float]) -> list[list[float]]:
    """``cover[a][e] = sum_{b=a}^{e-1} weights[b] * sim[a][b]``: anchor a serving [a, e)."""
    n_layers = len(weights)
    cover = [[0.0] * (n_layers + 1) for _ in range(n_layers)]
    for a in range(n_layers):
        for e in range(a + 1, n_layers + 1):
            cover[a][e] = cover[a][e - 1] + weights[e - 1] * sim[a][e - 1]
    return cover


def _best_partition(cover: list[list[float]], n_layers: int, budget: int) -> tuple[int, ...]:
    """Split [0, L) into ``budget`` segments starting at 0 maximizing the summed cover.

    ``best[m][e]``: best value of layers [0, e) with m anchors; ``start[m][e]``: the last
    anchor of that optimum (the first maximizer, so ties go to earlier anchors).
    """
    best = [[float("-inf")] * (n_layers + 1) for _ in range(budget + 1)]
    start = [[0] * (n_layers + 1) for _ in range(budget + 1)]
    best[1] = [float("-inf")] + [cover[0][e] for e in range(1, n_layers + 1)]
    for m in range(2, budget + 1):
        for e in range(m, n_layers + 1):
            for a in range(m - 1, e):
                value = best[m - 1][a] + cover[a][e]
                if value > best[m][e]:
                    best[m][e], start[m][e] = value, a
    anchors, end = [], n_layers
    for m in range(budget, 1, -1):
        end = start[m][end]
        anchors.append(end)
    return (0, *reversed(anchors))
