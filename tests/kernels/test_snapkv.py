"""SnapKV: kept counts and layout, the observation window, needles, capacity, identity."""

from __future__ import annotations

import math

import kernel_oracles as oracle
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from kernel_inputs import KERNEL_SETTINGS, make_prompt, make_token

from rdusim.kernels import FullCache, SnapKVCache, StreamingLLMCache
from rdusim.kernels.snapkv import snapkv_positions


@st.composite
def snapkv_configs(draw):
    batch = draw(st.integers(1, 3))
    window = draw(st.integers(1, 5))
    return {
        "lengths": draw(st.lists(st.integers(0, 16), min_size=batch, max_size=batch)),
        "kv_heads": draw(st.integers(1, 2)),
        "group": draw(st.integers(1, 3)),
        "window": window,
        "budget": draw(st.integers(window, window + 8)),
        "pool": draw(st.sampled_from([1, 3, 5])),
        "pool_count_pad": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


@KERNEL_SETTINGS
@given(cfg=snapkv_configs())
def test_snapkv_selection_matches_loop_oracle_property(cfg, device):
    prompt = make_prompt(
        cfg["seed"],
        cfg["lengths"],
        kv_heads=cfg["kv_heads"],
        group=cfg["group"],
        key_dim=4,
        device=device,
    )
    params = {k: cfg[k] for k in ("budget", "window", "pool", "pool_count_pad")}
    got = snapkv_positions(prompt.keys, prompt.queries, prompt.lengths, scale=None, **params)
    want, _ = oracle.snapkv_kept(
        prompt.keys.cpu(), prompt.queries.cpu(), cfg["lengths"], scale=1 / math.sqrt(4), **params
    )
    for (b, h), kept in want.items():
        assert got[b, h].tolist() == kept + [-1] * (got.shape[2] - len(kept))


def test_layout_counts_and_window(device):
    prompt = make_prompt(3, [30, 9, 16], kv_heads=2, group=2, device=device)
    cache = SnapKVCache.from_prefill(*prompt, budget=12, window=4, pool=3, capacity=15)
    for b, length in enumerate([30, 9, 16]):
        for h in range(2):
            kept = [p for p in cache.positions[b, h].tolist() if p >= 0]
            assert len(kept) == min(length, 12)
            assert kept == sorted(kept)
            assert kept[-min(4, length) :] == list(range(max(0, length - 4), length))
            assert cache.positions[b, h, len(kept) :].tolist() == [-1] * (15 - len(kept))


def test_short_prompts_are_kept_whole_and_match_full_attention(device):
    prompt = make_prompt(4, [9, 5], kv_heads=1, group=3, device=device)
    snap = SnapKVCache.from_prefill(*prompt, budget=9, window=3, capacity=12)
    full = FullCache.from_prefill(*prompt, capacity=12)
    assert torch.equal(snap.positions, full.positions)
    for step in range(3):
        token = make_token(step, prompt)
        snap.append(token.key, token.value)
        full.append(token.key, token.value)
        torch.testing.assert_close(
            snap.attend(token.query), full.attend(token.query), rtol=0, atol=0
        )


def test_appending_beyond_capacity_raises(device):
    prompt = make_prompt(5, [20, 3], kv_heads=1, group=1, device=device)
    cache = SnapKVCache.from_prefill(*prompt, budget=6, window=2, capacity=8)
    token = make_token(0, prompt)
    cache.append(token.key, token.value)
    cache.append(token.key, token.value)
    before = cache.positions.clone()
    with pytest.raises(ValueError, match="SnapKVCache is full: all 8 slots"):
        cache.append(token.key, token.value)
    assert torch.equal(cache.positions, before)  # nothing was written
    assert cache.positions[1].tolist() == [[0, 1, 2, 3, 4, -1, -1, -1]]


def test_capacity_must_hold_the_compressed_prompt(device):
    prompt = make_prompt(5, [20], device=device)
    with pytest.raises(ValueError, match="capacity must be an int >= 6, got 5"):
        SnapKVCache.from_prefill(*prompt, budget=6, window=2, capacity=5)
    with pytest.raises(ValueError, match="budget must be an int >= 4, got 3"):
        SnapKVCache.from_prefill(*prompt, budget=3, window=4, capacity=5)


def test_planted_needle_is_kept_by_snapkv_and_dropped_by_streamingllm(device):
    length, needle = 64, 21
    prompt = make_prompt(13, [length], kv_heads=2, group=2, key_dim=16, device=device)
    direction = torch.zeros(16, dtype=torch.float64, device=device)
    direction[5] = 1.0
    keys, queries = prompt.keys * 0.1, prompt.queries * 0.1
    keys[0, :, needle] = 6.0 * direction
    queries[0, :, length - 8 :] += 6.0 * direction
    planted = prompt._replace(keys=keys, queries=queries)
    snap = SnapKVCache.from_prefill(*planted, budget=12, window=8, pool=5, capacity=12)
    streaming = StreamingLLMCache.from_prefill(*planted, sink=4, recent=8)
    for h in range(2):
        assert needle in snap.positions[0, h].tolist()
        assert needle not in streaming.positions[0, h].tolist()
