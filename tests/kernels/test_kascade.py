"""Kascade: the anchor DP against brute force, head mapping, pooled top-k against a loop,
sparse attention identities, and the per-layer cache roles."""

from __future__ import annotations

import itertools
import math

import kernel_oracles as oracle
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kernel_inputs import KERNEL_SETTINGS, make_prompt, make_token

from rdusim.kernels import FullCache, KascadeCache, attention, kascade, padding_causal_mask


@KERNEL_SETTINGS
@given(
    layers=st.integers(1, 7),
    data=st.data(),
    seed=st.integers(0, 2**16),
    weighted=st.booleans(),
)
def test_anchor_dp_equals_brute_force(layers, data, seed, weighted):
    budget = data.draw(st.integers(1, layers))
    gen = torch.Generator().manual_seed(seed)
    sim = torch.rand(layers, layers, generator=gen, dtype=torch.float64)
    weights = torch.rand(layers, generator=gen, dtype=torch.float64) if weighted else None
    anchors = kascade.select_anchors(sim, budget, weights)
    w = weights.tolist() if weighted else [1.0] * layers
    value, best = oracle.anchors_brute_force(sim.tolist(), w, budget)
    assert anchors[0] == 0 and len(anchors) == budget and list(anchors) == sorted(set(anchors))
    assert oracle.anchor_value(sim.tolist(), w, anchors) == pytest.approx(value, rel=1e-12)
    assert anchors == best  # continuous random similarities: the optimum is unique


def test_anchor_dp_prefers_the_layer_where_similarity_drops():
    # Layers 0-2 agree with 0, layers 3-5 agree only with 3: two anchors must be (0, 3).
    sim = torch.full((6, 6), 0.2, dtype=torch.float64)
    sim[:3, :3] = 1.0
    sim[3:, 3:] = 1.0
    assert kascade.select_anchors(sim, 2) == (0, 3)
    assert kascade.select_anchors(sim, 1) == (0,)


def test_select_anchors_validates():
    with pytest.raises(ValueError, match=r"budget must be an int in \[1, 3\], got 4"):
        kascade.select_anchors(torch.rand(3, 3), 4)
    with pytest.raises(ValueError, match=r"weights must have shape \(3,\)"):
        kascade.select_anchors(torch.rand(3, 3), 2, torch.ones(2))


def test_head_mapping_matches_loop():
    gen = torch.Generator().manual_seed(0)
    head_sim = torch.rand(5, 5, 3, 3, generator=gen)
    anchors = (0, 2)
    anchor_of, source = kascade.head_mapping(head_sim, anchors)
    assert anchor_of.tolist() == [0, 0, 2, 2, 2]
    for layer, h in itertools.product(range(5), range(3)):
        a = anchor_of[layer].item()
        want = h if a == layer else max(range(3), key=lambda s: (head_sim[a, layer, h, s], -s))
        assert source[layer, h].item() == want
    with pytest.raises(ValueError, match="anchors must be strictly increasing"):
        kascade.head_mapping(head_sim, (1, 3))


def test_head_similarity_and_layer_similarity():
    gen = torch.Generator().manual_seed(1)
    source = torch.softmax(torch.randn(2, 4, 10, generator=gen), dim=-1)
    target = torch.softmax(torch.randn(2, 4, 10, generator=gen), dim=-1)
    sim = kascade.head_similarity(source, target, k=3)
    for ht, hs in itertools.product(range(2), range(2)):
        ratios = []
        for row in range(4):
            own = sorted(target[ht, row].tolist(), reverse=True)[:3]
            chosen = source[hs, row].topk(3).indices.tolist()
            ratios.append(sum(target[ht, row, i].item() for i in chosen) / sum(own))
        assert sim[ht, hs].item() == pytest.approx(min(ratios), rel=1e-12)
    assert kascade.head_similarity(target, target, k=3).diagonal().tolist() == [1.0, 1.0]
    layered = kascade.layer_similarity(torch.stack([torch.stack([sim, sim])] * 2))
    assert layered[0, 1].item() == pytest.approx(sim.amax(-1).mean().item())


@pytest.mark.parametrize("length,expected", [(0, 0), (50, 50), (1000, 128), (5000, 500)])
def test_default_budget(length, expected):
    assert kascade.default_budget(length) == expected


def qkv(prompt):
    """(queries, keys, values): the argument order of the attention functions."""
    return prompt.queries, prompt.keys, prompt.values


def loop_topk(q, k, lengths, k_budget, tile):
    """Top-k per (b, KV head, tile) from explicit per-row softmax, pooled over group and tile."""
    b_size, hq, tq, _ = q.shape
    hkv = k.shape[1]
    group = hq // hkv
    out = {}
    for b, h, start in itertools.product(range(b_size), range(hkv), range(0, tq, tile)):
        pooled = dict.fromkeys(range(min(start, lengths[b])), 0.0)
        for g, row in itertools.product(range(group), range(start, min(start + tile, tq))):
            if row >= lengths[b]:
                continue
            logits = {
                t: oracle.dot(q[b, h * group + g, row], k[b, h, t]) / math.sqrt(8)
                for t in range(row + 1)
            }
            for t, p in oracle.softmax(logits).items():
                if t in pooled:
                    pooled[t] += p
        out[b, h, start // tile] = oracle.best(pooled, k_budget)
    return out


@pytest.mark.parametrize("tile,k_budget", [(1, 3), (4, 2), (3, 20)])
def test_topk_indices_match_loop(tile, k_budget, device):
    lengths = [10, 6]
    prompt = make_prompt(5, lengths, kv_heads=2, group=2, device=device)
    got = kascade.topk_indices(prompt.queries, prompt.keys, k_budget, tile, lengths=prompt.lengths)
    assert got.shape == (2, 2, -(-10 // tile), k_budget)
    want = loop_topk(prompt.queries.cpu(), prompt.keys.cpu(), lengths, k_budget, tile)
    for (b, h, i), kept in want.items():
        assert got[b, h, i].tolist() == kept + [-1] * (k_budget - len(kept))


@pytest.mark.parametrize("tile", [1, 3, 4])
def test_sparse_attention_with_every_key_is_dense_causal_attention(tile, device):
    prompt = make_prompt(6, [11, 7], kv_heads=1, group=3, device=device)
    indices = kascade.topk_indices(prompt.queries, prompt.keys, 11, tile, lengths=prompt.lengths)
    out, _ = kascade.sparse_attention(*qkv(prompt), indices, tile=tile, lengths=prompt.lengths)
    mask = padding_causal_mask(prompt.lengths, 11, 11)
    dense, _ = attention(*qkv(prompt), mask=mask)
    for b, length in enumerate([11, 7]):
        torch.testing.assert_close(out[b, :, :length], dense[b, :, :length], rtol=0, atol=1e-12)
        assert (out[b, :, length:] == 0).all()


def test_sparse_attention_is_renormalised_post_softmax_top_k(device):
    prompt = make_prompt(7, [12], kv_heads=2, group=2, device=device)
    tile = 4
    indices = kascade.topk_indices(prompt.queries, prompt.keys, 3, tile)
    _, sparse = kascade.sparse_attention(*qkv(prompt), indices, tile=tile)
    _, dense = attention(*qkv(prompt), mask=padding_causal_mask(prompt.lengths, 12, 12))
    for head, row in itertools.product(range(4), range(12)):
        start = row // tile * tile
        chosen = set(indices[0, head // 2, row // tile].tolist()) | set(range(start, row + 1))
        chosen.discard(-1)
        keep = torch.zeros(12, dtype=torch.bool, device=device)
        keep[list(chosen)] = True
        renormalised = torch.where(keep, dense[0, head, row], 0.0)
        renormalised = renormalised / renormalised.sum()
        torch.testing.assert_close(sparse[0, head, row], renormalised, rtol=0, atol=1e-14)


def decode_caches(prompt, **anchor_params):
    """A dense layer 0, an anchor and a reuse layer, all over the same prompt."""
    dense = KascadeCache.from_prefill(*prompt, capacity=20, k_budget=3, dense=True)
    anchor = KascadeCache.from_prefill(*prompt, capacity=20, **anchor_params)
    return dense, anchor


def test_dense_layer_equals_full_attention_and_publishes_top_k(device):
    prompt = make_prompt(8, [9, 4], kv_heads=2, group=2, device=device)
    dense, _ = decode_caches(prompt, k_budget=3)
    full = FullCache.from_prefill(*prompt, capacity=20)
    for step in range(4):
        token = make_token(step, prompt)
        for cache in (dense, full):
            cache.append(token.key, token.value)
        torch.testing.assert_close(
            dense.attend(token.query), full.attend(token.query), rtol=0, atol=0
        )
        want = kascade.topk_indices(
            token.query,
            dense.keys,
            3,
            lengths=dense.lengths,
            q_positions=(dense.lengths - 1)[:, None],
        )
        assert torch.equal(dense.indices, want)


def test_reuse_layer_with_identity_map_equals_its_anchor(device):
    prompt = make_prompt(9, [12, 6], kv_heads=2, group=2, device=device)
    anchor = KascadeCache.from_prefill(*prompt, capacity=20, k_budget=4)
    reuse = KascadeCache.from_prefill(*prompt, capacity=20, anchor=anchor)
    swapped = KascadeCache.from_prefill(
        *prompt, capacity=20, anchor=anchor, head_map=torch.tensor([1, 0], device=device)
    )
    for step in range(4):
        token = make_token(step, prompt)
        for cache in (anchor, reuse, swapped):
            cache.append(token.key, token.value)
        out_anchor, w_anchor = anchor.attend(token.query, return_weights=True)
        torch.testing.assert_close(reuse.attend(token.query), out_anchor, rtol=0, atol=0)
        _, w_swapped = swapped.attend(token.query, return_weights=True)
        # Query head 0 (KV head 0) of the swapped layer attends to the keys anchor KV head 1
        # chose, plus the current token; the anchor's own head 0 to its own choice.
        for b in range(2):
            current = {int(anchor.lengths[b]) - 1}
            for weights, source in ((w_swapped, 1), (w_anchor, 0)):
                chosen = set(anchor.indices[b, source, 0].tolist()) - {-1}
                support = (weights[b, 0, 0] > 0).nonzero().flatten().tolist()
                assert set(support) == chosen | current


def test_role_errors(device):
    prompt = make_prompt(9, [6], kv_heads=2, group=1, device=device)
    anchor = KascadeCache.from_prefill(*prompt, capacity=8)
    with pytest.raises(ValueError, match="a dense layer is an anchor"):
        KascadeCache.from_prefill(*prompt, capacity=8, anchor=anchor, dense=True)
    with pytest.raises(ValueError, match=r"head_map entries must lie in \[0, 2\)"):
        KascadeCache.from_prefill(
            *prompt, capacity=8, anchor=anchor, head_map=torch.tensor([0, 2], device=device)
        )


@pytest.mark.parametrize("k_budget", [1, 5, 40])
def test_sparse_decode_equals_masked_sparse_attention(k_budget, device):
    """The gathered decode path computes the masked reference exactly (same keys, same softmax)."""
    gen = torch.Generator().manual_seed(k_budget)
    b, hq, hkv, tk, d = 3, 4, 2, 37, 8
    q = torch.randn(b, hq, 1, d, generator=gen, dtype=torch.float64).to(device)
    k = torch.randn(b, hkv, tk, d, generator=gen, dtype=torch.float64).to(device)
    v = torch.randn(b, hkv, tk, d, generator=gen, dtype=torch.float64).to(device)
    lengths = torch.tensor([37, 20, 1], device=device)
    qpos = (lengths - 1)[:, None]
    idx = kascade.topk_indices(q, k, k_budget, 1, lengths=lengths, q_positions=qpos)
    ref_out, ref_w = kascade.sparse_attention(q, k, v, idx, lengths=lengths, q_positions=qpos)
    out, w = kascade.sparse_decode(q, k, v, idx, lengths)
    torch.testing.assert_close(out, ref_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(w, ref_w, rtol=1e-12, atol=1e-12)
