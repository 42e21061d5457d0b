"""LongFlow: prefill compression to C - 1, the victim rule computed independently, and the
slot-reuse cache against a list model."""

from __future__ import annotations

import itertools
import math

import kernel_oracles as oracle
import pytest
import torch
from kernel_inputs import make_prompt, make_token

from rdusim.kernels import LongFlowCache
from rdusim.kernels.snapkv import snapkv_positions

SCALE = 1 / math.sqrt(8)


def test_prefill_keeps_at_most_c_minus_one_tokens(device):
    prompt = make_prompt(1, [30, 5, 10], kv_heads=2, group=2, device=device)
    cache = LongFlowCache.from_prefill(*prompt, slots=10, window=3, pool=3)
    compressed = snapkv_positions(
        prompt.keys, prompt.queries, prompt.lengths, budget=9, window=3, pool=3, scale=None
    )
    assert torch.equal(cache.positions[..., :9], compressed)
    assert (cache.positions[..., 9] == -1).all()
    assert cache.positions[1, 0].tolist() == [0, 1, 2, 3, 4] + [-1] * 5
    assert cache.next_slot.tolist() == [[9, 9], [5, 5], [9, 9]]  # the lowest empty slot


def independent_victim(cache, query):
    """argmin over slots of alpha * ||v||_1 from an explicit per-head loop (empties first)."""
    b_size, hkv, slots = cache.positions.shape
    group = query.shape[1] // hkv
    victims = torch.zeros(b_size, hkv, dtype=torch.int64)
    for b, h in itertools.product(range(b_size), range(hkv)):
        positions = cache.positions[b, h].tolist()
        empty = [s for s, p in enumerate(positions) if p < 0]
        if empty:
            victims[b, h] = min(empty)
            continue
        held = {s: (cache.keys[b, h, s].cpu(), cache.values[b, h, s].cpu()) for s in range(slots)}
        alpha = dict.fromkeys(range(slots), 0.0)
        for g in range(group):
            _, weights = oracle.attend(query[b, h * group + g, 0].cpu(), held, SCALE)
            for s, w in weights.items():
                alpha[s] += w
        score = {s: alpha[s] * float(held[s][1].abs().sum()) for s in range(slots)}
        victims[b, h] = min(score, key=lambda s: (score[s], s))
    return victims


@pytest.mark.parametrize("lengths,slots", [([30, 5, 10], 10), ([8], 9), ([40, 40], 6)])
def test_victim_equals_independent_argmin(lengths, slots, device):
    prompt = make_prompt(2, lengths, kv_heads=2, group=3, device=device)
    cache = LongFlowCache.from_prefill(*prompt, slots=slots, window=3, pool=3)
    for step in range(12):
        token = make_token(step, prompt)
        out, victim = cache.fused_step(token.key, token.value, token.query)
        assert out.shape == (len(lengths), 6, 1, 8)
        assert torch.equal(victim.cpu(), independent_victim(cache, token.query))
        assert torch.equal(victim, cache.next_slot)


def test_slot_reuse_equals_a_list_model(device):
    # Each step drops the token in the chosen slot and adds the new one: as a set, the cache is
    # "previous set - victim + new token", and the new token sits in the old victim's slot.
    prompt = make_prompt(3, [20, 9], kv_heads=1, group=2, device=device)
    cache = LongFlowCache.from_prefill(*prompt, slots=8, window=2, pool=1)
    for step in range(15):
        token = make_token(step, prompt)
        before = cache.positions.clone()
        target = cache.next_slot.clone()
        cache.fused_step(token.key, token.value, token.query)
        for b in range(2):
            expected = before[b, 0].clone()
            expected[target[b, 0]] = 20 + step if b == 0 else 9 + step
            assert torch.equal(cache.positions[b, 0], expected)
            assert torch.equal(cache.keys[b, 0, target[b, 0]], token.key[b, 0, 0])


def test_value_norms_follow_every_write(device):
    prompt = make_prompt(4, [12], kv_heads=2, group=1, device=device)
    cache = LongFlowCache.from_prefill(*prompt, slots=6, window=2, pool=3)
    for step in range(8):
        token = make_token(step, prompt)
        cache.fused_step(token.key, token.value, token.query)
        torch.testing.assert_close(
            cache.value_norms, cache.values.abs().sum(-1), rtol=0, atol=1e-12
        )


def test_slots_must_leave_room_beyond_the_window(device):
    prompt = make_prompt(4, [12], device=device)
    with pytest.raises(ValueError, match="slots must be an int >= 5, got 4"):
        LongFlowCache.from_prefill(*prompt, slots=4, window=4)
