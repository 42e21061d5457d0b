"""Prefill selection (SnapStream top-K, SnapKV) against loop-based fp64 oracles, pooling's
boundary rule, the tie rule and structural protection."""

from __future__ import annotations

import math

import kernel_oracles as oracle
import pytest
import torch
from kernel_inputs import make_prompt

from rdusim.kernels import SnapKVCache
from rdusim.kernels.selection import pool_votes, select_top, window_votes
from rdusim.kernels.snapkv import snapkv_positions
from rdusim.kernels.snapstream import topk_positions

# (lengths, kv_heads, group, sink, recent, topk, window, pool): varied, including windows
# longer than the ring (causality matters), prompts shorter than the window, empty candidates.
SNAPSTREAM_CASES = [
    ([23, 17, 9], 2, 3, 2, 4, 5, 6, 3),
    ([30], 1, 1, 1, 4, 3, 4, 5),
    ([12, 30], 3, 2, 0, 3, 8, 12, 7),
    ([5, 6], 2, 2, 4, 2, 3, 3, 1),
    ([40, 1], 1, 4, 4, 8, 10, 16, 5),
    ([19, 25, 8, 2], 2, 1, 3, 1, 6, 2, 3),
]


@pytest.mark.parametrize("case", SNAPSTREAM_CASES)
def test_snapstream_topk_matches_loop_oracle(case, device):
    lengths, hkv, group, sink, recent, topk, window, pool = case
    prompt = make_prompt(sum(lengths), lengths, kv_heads=hkv, group=group, device=device)
    params = {
        "sink": sink,
        "recent": recent,
        "topk": topk,
        "window": window,
        "pool": pool,
    }
    got = topk_positions(prompt.keys, prompt.queries, prompt.lengths, scale=None, **params)
    cpu = prompt.keys.cpu(), prompt.queries.cpu()
    want, _ = oracle.snapstream_topk(*cpu, lengths, scale=1 / math.sqrt(8), **params)
    for (b, h), kept in want.items():
        assert got[b, h].tolist() == kept + [-1] * (topk - len(kept))


@pytest.mark.parametrize("case", SNAPSTREAM_CASES)
def test_snapstream_pooled_scores_match_loop_oracle(case, device):
    lengths, hkv, group, sink, recent, topk, window, pool = case
    prompt = make_prompt(sum(lengths) + 1, lengths, kv_heads=hkv, group=group, device=device)
    token = torch.arange(prompt.keys.shape[2], device=device)
    candidates = (token >= sink) & (token < (prompt.lengths - recent)[:, None])
    votes = window_votes(
        prompt.queries, prompt.keys, prompt.lengths, window=window, key_set=candidates, scale=None
    )
    scores = pool_votes(votes, candidates, pool).cpu()
    _, want = oracle.snapstream_topk(
        prompt.keys.cpu(),
        prompt.queries.cpu(),
        lengths,
        sink=sink,
        recent=recent,
        topk=topk,
        window=window,
        pool=pool,
        scale=1 / math.sqrt(8),
    )
    for (b, h), per_token in want.items():
        for t, value in per_token.items():
            assert scores[b, h, t].item() == pytest.approx(value, rel=1e-12, abs=1e-14)


# (lengths, kv_heads, group, budget, window, pool)
SNAPKV_CASES = [
    ([23, 17, 9], 2, 3, 10, 4, 3),
    ([30], 1, 1, 8, 8, 5),
    ([12, 30], 3, 2, 20, 6, 7),
    ([5, 40], 2, 2, 9, 3, 1),
    ([3, 2], 1, 4, 6, 5, 3),
]


@pytest.mark.parametrize("case", SNAPKV_CASES)
def test_snapkv_selection_matches_loop_oracle(case, device):
    lengths, hkv, group, budget, window, pool = case
    prompt = make_prompt(sum(lengths) + 2, lengths, kv_heads=hkv, group=group, device=device)
    got = snapkv_positions(
        prompt.keys,
        prompt.queries,
        prompt.lengths,
        budget=budget,
        window=window,
        pool=pool,
        scale=None,
    )
    want, _ = oracle.snapkv_kept(
        prompt.keys.cpu(),
        prompt.queries.cpu(),
        lengths,
        budget=budget,
        window=window,
        pool=pool,
        scale=1 / math.sqrt(8),
    )
    width = min(budget, prompt.keys.shape[2])
    for (b, h), kept in want.items():
        assert len(kept) == min(lengths[b], budget)
        assert got[b, h].tolist() == kept + [-1] * (width - len(kept))


def test_pooling_divides_by_valid_cells_only(device):
    # Candidates are tokens 2..5 of 8; kernel 3. Token 2's window holds tokens 1..3, of which
    # only 2 and 3 are candidates: its pooled value is (v2 + v3) / 2, not (v2 + v3) / 3.
    votes = torch.tensor([[[100.0, 100.0, 1.0, 2.0, 4.0, 8.0, 100.0, 100.0]]], device=device)
    token = torch.arange(8, device=device)
    candidates = ((token >= 2) & (token < 6))[None]
    got = pool_votes(votes.double(), candidates, 3)[0, 0, 2:6].tolist()
    assert got == [1.5, 7 / 3, 14 / 3, 6.0]


@pytest.mark.parametrize("count_pad", [False, True])
def test_pooling_over_a_prefix_equals_torch_avg_pool(count_pad, device):
    # Candidates [0, 9) of 12 tokens: rdusim's default is avg_pool1d(count_include_pad=False),
    # count_pad=True is avg_pool1d's default (kvpress's SnapKVPress, SnapKV's official code).
    votes = torch.rand(2, 3, 12, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    candidates = (torch.arange(12) < 9)[None, :].expand(2, 12).to(device)
    got = pool_votes(votes.to(device), candidates, 5, count_pad=count_pad)[..., :9].cpu()
    want = torch.nn.functional.avg_pool1d(
        votes[..., :9], kernel_size=5, stride=1, padding=2, count_include_pad=count_pad
    )
    torch.testing.assert_close(got, want, rtol=1e-14, atol=0)


def test_snapkv_pool_count_pad_must_be_a_bool(device):
    prompt = make_prompt(3, [10], device=device)
    with pytest.raises(ValueError, match="pool_count_pad must be True or False, got 'yes'"):
        SnapKVCache.from_prefill(*prompt, budget=6, capacity=6, window=2, pool=3,
                                 pool_count_pad="yes")  # fmt: skip


def test_pool_of_one_is_identity(device):
    votes = torch.rand(2, 3, 11, dtype=torch.float64, device=device)
    candidates = torch.ones(2, 11, dtype=torch.bool, device=device)
    assert torch.equal(pool_votes(votes, candidates, 1), votes)


def test_ties_go_to_the_lower_position_and_output_is_ascending(device):
    scores = torch.tensor([[[1.0, 3.0, 3.0, 1.0, 3.0, 2.0]]], device=device)
    candidates = torch.ones(1, 1, 6, dtype=torch.bool, device=device)
    assert select_top(scores, candidates, 2).tolist() == [[[1, 2]]]
    assert select_top(scores, candidates, 4).tolist() == [[[1, 2, 4, 5]]]
    uniform = torch.zeros(1, 1, 6, device=device)
    assert select_top(uniform, candidates, 3).tolist() == [[[0, 1, 2]]]


def test_non_candidates_never_win_whatever_their_score(device):
    scores = torch.tensor([[[9.0, float("inf"), 0.0, float("nan"), 1.0]]], device=device)
    candidates = torch.tensor([[[False, False, True, False, True]]], device=device)
    assert select_top(scores, candidates, 4).tolist() == [[[2, 4, -1, -1]]]


def test_uniform_attention_still_keeps_the_whole_window(device):
    # kvpress #226: with uniform scores a score sentinel lost ties and evicted the window.
    prompt = make_prompt(3, [20], kv_heads=1, group=2, device=device)
    flat = prompt._replace(queries=torch.zeros_like(prompt.queries))
    kept = snapkv_positions(
        flat.keys, flat.queries, flat.lengths, budget=8, window=4, pool=1, scale=None
    )
    assert kept.tolist() == [[[0, 1, 2, 3, 16, 17, 18, 19]]]  # exact ties: lowest positions


def test_group_heads_are_summed_before_selection(device):
    # Two query heads of one KV head disagree; their summed votes decide, not either alone.
    # One-hot keys and scale 1 make each query row its own log-probabilities.
    keys = torch.eye(4, dtype=torch.float64, device=device)[None, None]  # (1, 1, 4, 4)
    queries = torch.zeros(1, 2, 4, 4, dtype=torch.float64, device=device)
    queries[0, 0, 3] = torch.tensor([0.5, 0.1, 0.4, 1e-30]).log()  # head 0 prefers token 0
    queries[0, 1, 3] = torch.tensor([0.1, 0.5, 0.4, 1e-30]).log()  # head 1 prefers token 1
    lengths = torch.tensor([4], device=device)
    kept = snapkv_positions(keys, queries, lengths, budget=2, window=1, pool=1, scale=1.0)
    assert kept.tolist() == [[[2, 3]]]  # token 2 collects 0.8 from both heads
