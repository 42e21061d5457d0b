"""Token-to-expert routing of a batch: expected (closed form) or sampled with a seed.

Owns: ``expected_distinct_experts``, ``chunk_expert_tokens``. Imports: numpy only.
Routing decides which experts' weights a chunk must stream and how many tokens each gets.
"""

from __future__ import annotations

import numpy as np


def expected_distinct_experts(tokens: int, experts: int, top_k: int) -> float:
    """E[#experts hit] when each token picks ``top_k`` of ``experts`` uniformly.

    256 * (1 - (1 - 8/256)**B): B=16 -> 102, B=64 -> 222 (hardware-and-models.md B.3 [D]).
    """
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def chunk_expert_tokens(rows: int, n_chunks: int, experts: int, top_k: int, shared: int,
                        routing: str, seed: int) -> list[list[float]]:
    """Per chunk, the tokens each touched expert processes (shared experts first).

    ``expected``: the touched count is the rounded expectation and tokens split evenly;
    ``sampled``: every token draws ``top_k`` distinct experts from a seeded generator.
    """
    per_chunk = [rows // n_chunks + (1 if i < rows % n_chunks else 0) for i in range(n_chunks)]
    rng = np.random.default_rng(seed)
    result = []
    for r in per_chunk:
        if r == 0:
            result.append([0.0] * max(shared, 1))
            continue
        if routing == "sampled":
            picks = np.argsort(rng.random((r, experts)), axis=1)[:, :top_k]
            counts = np.bincount(picks.ravel(), minlength=experts)
            routed = [float(c) for c in counts if c > 0]
        else:
            touched = max(1, round(expected_distinct_experts(r, experts, top_k)))
            routed = [r * top_k / touched] * touched
        result.append([float(r)] * shared + routed)
    return result
