"""Loop-based fp64 oracles: the rdusim semantics written as plainly as possible.

Each oracle walks sequences, heads and tokens one by one with Python floats (``math.exp``,
explicit softmax and pooling), independent of the vectorised kernels it checks.
"""

from __future__ import annotations

import itertools
import math

from torch import Tensor


def softmax(logits: dict[int, float]) -> dict[int, float]:
    """Softmax over a dict of logits, max-subtracted; empty in, empty out."""
    if not logits:
        return {}
    top = max(logits.values())
    exp = {t: math.exp(x - top) for t, x in logits.items()}
    total = sum(exp.values())
    return {t: e / total for t, e in exp.items()}


def dot(a: Tensor, b: Tensor) -> float:
    return float((a.double() * b.double()).sum())


def pooled(
    votes: dict[int, float], candidates: list[int], pool: int, count_pad: bool = False
) -> dict[int, float]:
    """Mean of the candidate votes within ``pool // 2`` positions: over the candidates only, or
    with ``count_pad`` over all ``pool`` cells (non-candidates count as zeros)."""
    half, inside = pool // 2, set(candidates)
    out = {}
    for t in candidates:
        window = [votes[u] for u in range(t - half, t + half + 1) if u in inside]
        out[t] = sum(window) / (pool if count_pad else len(window))
    return out


def best(scores: dict[int, float], k: int) -> list[int]:
    """The ``k`` best positions (ties to the lower position), ascending."""
    ranked = sorted(scores, key=lambda t: (-scores[t], t))
    return sorted(ranked[:k])


def window_votes(
    keys: Tensor,
    queries: Tensor,
    b: int,
    h: int,
    length: int,
    window: int,
    softmax_set: list[int],
    scale: float,
) -> dict[int, float]:
    """Votes of KV head h of sequence b: for every group head and every row of the last
    ``window`` prompt rows, a causal softmax over ``softmax_set``, summed."""
    group = queries.shape[1] // keys.shape[1]
    votes = dict.fromkeys(softmax_set, 0.0)
    for g, row in itertools.product(range(group), range(max(0, length - window), length)):
        q = queries[b, h * group + g, row]
        seen = {t: dot(q, keys[b, h, t]) * scale for t in softmax_set if t <= row}
        for t, p in softmax(seen).items():
            votes[t] += p
    return votes


def snapstream_topk(
    keys: Tensor,
    queries: Tensor,
    lengths: list[int],
    *,
    sink: int,
    recent: int,
    topk: int,
    window: int,
    pool: int,
    scale: float,
) -> tuple[dict[tuple[int, int], list[int]], dict[tuple[int, int], dict[int, float]]]:
    """SnapStream's top-K per (b, h) and the pooled scores of its candidates."""
    chosen, scores = {}, {}
    for b, h in itertools.product(range(keys.shape[0]), range(keys.shape[1])):
        candidates = list(range(sink, lengths[b] - recent))
        votes = window_votes(keys, queries, b, h, lengths[b], window, candidates, scale)
        scores[b, h] = pooled(votes, candidates, pool)
        chosen[b, h] = best(scores[b, h], topk)
    return chosen, scores


def snapkv_kept(
    keys: Tensor,
    queries: Tensor,
    lengths: list[int],
    *,
    budget: int,
    window: int,
    pool: int,
    scale: float,
    pool_count_pad: bool = False,
) -> tuple[dict[tuple[int, int], list[int]], dict[tuple[int, int], dict[int, float]]]:
    """SnapKV's kept prompt tokens per (b, h) and the pooled scores of the prefix."""
    kept, scores = {}, {}
    for b, h in itertools.product(range(keys.shape[0]), range(keys.shape[1])):
        length = lengths[b]
        prefix = list(range(max(0, length - window)))
        votes = window_votes(keys, queries, b, h, length, window, list(range(length)), scale)
        scores[b, h] = pooled({t: votes[t] for t in prefix}, prefix, pool, pool_count_pad)
        kept[b, h] = best(scores[b, h], budget - window) + list(range(len(prefix), length))
    return kept, scores


def accumulated(keys: Tensor, queries: Tensor, lengths: list[int], scale: float) -> dict:
    """H2O prompt scores per (b, h): attention every valid prompt query gives each key."""
    group = queries.shape[1] // keys.shape[1]
    out = {}
    for b, h in itertools.product(range(keys.shape[0]), range(keys.shape[1])):
        total = dict.fromkeys(range(lengths[b]), 0.0)
        for g, row in itertools.product(range(group), range(lengths[b])):
            q = queries[b, h * group + g, row]
            probs = softmax({t: dot(q, keys[b, h, t]) * scale for t in range(row + 1)})
            for t, p in probs.items():
                total[t] += p
        out[b, h] = total
    return out


def attend(q: Tensor, kept: dict[int, tuple[Tensor, Tensor]], scale: float) -> tuple[list, dict]:
    """Attention of one query vector over ``kept`` = {position: (key, value)}: (out, weights)."""
    weights = softmax({t: dot(q, k) * scale for t, (k, _) in kept.items()})
    dim = next(iter(kept.values()))[1].shape[0]
    out = [sum(weights[t] * float(v[d]) for t, (_, v) in kept.items()) for d in range(dim)]
    return out, weights


def anchors_brute_force(sim: list[list[float]], weights: list[float], budget: int) -> tuple:
    """Best anchor set (containing 0) by enumeration: (value, anchors)."""
    n = len(weights)
    found = None
    for rest in itertools.combinations(range(1, n), budget - 1):
        anchors = (0, *rest)
        value = anchor_value(sim, weights, anchors)
        if found is None or value > found[0]:
            found = (value, anchors)
    return found


def anchor_value(sim: list[list[float]], weights: list[float], anchors: tuple) -> float:
    """``sum_b weights[b] * sim[anchor(b)][b]`` with anchor(b) the latest anchor <= b."""
    return sum(w * sim[max(a for a in anchors if a <= b)][b] for b, w in enumerate(weights))
