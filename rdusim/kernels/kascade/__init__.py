"""Kascade (Deshmukh et al., 2025): sparse attention that reuses anchor layers' top-k keys.

Owns: the ``rdusim.kernels.kascade`` namespace. Imports: its own modules.

Offline: ``head_similarity`` / ``layer_similarity`` measure how well one layer's top-k serves
another, ``select_anchors`` picks the anchor layers by dynamic programming and ``head_mapping``
maps every reuse head onto an anchor head. Online: ``topk_indices`` and ``sparse_attention``
are the functional kernels; ``KascadeCache`` is the per-layer decode cache.
"""

from rdusim.kernels.kascade.anchors import (
    default_budget,
    head_mapping,
    head_similarity,
    layer_similarity,
    select_anchors,
)
from rdusim.kernels.kascade.cache import KascadeCache
from rdusim.kernels.kascade.sparse import sparse_attention, sparse_decode, topk_indices

__all__ = [
    "KascadeCache",
    "default_budget",
    "head_mapping",
    "head_similarity",
    "layer_similarity",
    "select_anchors",
    "sparse_attention",
    "sparse_decode",
    "topk_indices",
]
