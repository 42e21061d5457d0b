"""One table over every registered policy: the registry, budget splits, and the shared cache
contract (static storage, write-then-attend, weights, padding, gather == mask)."""

from __future__ import annotations

import pytest
import torch
from kernel_inputs import history_append, make_prompt, make_token

from rdusim.kernels import POLICIES, BudgetRequest, attention, budget_split, make_cache
from rdusim.kv_policy import POLICY_NAMES

PARAMS = {"budget": 12, "sink": 2, "window": 3, "pool": 3, "max_new_tokens": 8}


def test_registry_has_exactly_the_shared_policy_names():
    assert tuple(POLICIES) == POLICY_NAMES


@pytest.mark.parametrize(
    "name,expected",
    [
        ("full", {"capacity": 100 + 256}),
        ("streamingllm", {"sink": 4, "recent": 60}),
        ("snapstream", {"sink": 4, "recent": 28, "topk": 32, "window": 8, "pool": 7}),
        ("snapkv", {"budget": 64, "capacity": 64 + 256, "window": 8, "pool": 7}),
        ("h2o", {"heavy": 32, "recent": 32}),
        ("longflow", {"slots": 64, "window": 8, "pool": 7}),
        ("kascade", {"capacity": 100 + 256, "k_budget": 64}),
    ],
)
def test_budget_split_table(name, expected):
    request = BudgetRequest(budget=64, tokens=100, sink=4, window=8, pool=7, max_new_tokens=256)
    assert budget_split(name, request) == expected


def test_kascade_default_budget_and_full_ignore_budget():
    request = BudgetRequest(None, tokens=5000, sink=4, window=8, pool=7, max_new_tokens=0)
    assert budget_split("kascade", request)["k_budget"] == 500
    assert budget_split("kascade", request._replace(tokens=300))["k_budget"] == 128
    assert budget_split("kascade", request._replace(tokens=100))["k_budget"] == 100
    assert budget_split("full", request) == {"capacity": 5000}


@pytest.mark.parametrize(
    "name,budget,message",
    [
        ("snapstream", 8, r"budget for snapstream must be an int >= 9 .*got 8"),
        ("streamingllm", 4, r"budget for streamingllm must be an int >= 5"),
        ("snapkv", 7, r"budget for snapkv must be an int >= 8"),
        ("longflow", 8, r"budget for longflow must be an int >= 9"),
        ("h2o", None, r"budget for h2o must be an int >= 1 .*got None"),
        ("quest", 8, r"unknown KV policy 'quest'; expected one of full, streamingllm"),
    ],
)
def test_budget_errors(name, budget, message):
    request = BudgetRequest(budget, tokens=100, sink=4, window=8, pool=7, max_new_tokens=0)
    with pytest.raises(ValueError, match=message):
        budget_split(name, request)


def build(name: str, device, **overrides):
    prompt = make_prompt(21, [20, 7, 13], kv_heads=2, group=3, device=device)
    return prompt, make_cache(name, *prompt, **{**PARAMS, **overrides})


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_cache_contract(name, device):
    prompt, cache = build(name, device)
    b, hkv, slots, dk = cache.keys.shape
    assert cache.positions.shape == (b, hkv, slots) and cache.positions.dtype == torch.int64
    assert cache.values.shape == (b, hkv, slots, 8)
    assert torch.equal(cache.lengths, prompt.lengths) and cache.lengths is not prompt.lengths
    storage = [x.data_ptr() for x in (cache.keys, cache.values, cache.positions, cache.lengths)]
    for step in range(6):
        token = make_token(step, prompt)
        cache.append(token.key, token.value)
        out, weights = cache.attend(token.query, return_weights=True)
        assert out.shape == (b, 6, 1, 8) and weights.shape == (b, 6, 1, slots)
        assert not out.isnan().any()
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))
        empty = (cache.positions < 0).repeat_interleave(3, dim=1)[:, :, None]  # (B, Hq, 1, C)
        assert (weights[empty] == 0).all()
        assert torch.equal(cache.lengths, prompt.lengths + step + 1)
    assert storage == [
        x.data_ptr() for x in (cache.keys, cache.values, cache.positions, cache.lengths)
    ]


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_write_then_attend_sees_the_new_token(name, device):
    prompt, cache = build(name, device)
    token = make_token(1, prompt)
    query = token.query
    key = query.view(3, 2, 3, 1, 8).sum(dim=2) * 40  # (B, Hkv, 1, Dk): matches its group
    cache.append(key, token.value)
    _, weights = cache.attend(query, return_weights=True)
    newest = (cache.positions == prompt.lengths[:, None, None]).repeat_interleave(3, dim=1)
    assert (weights[:, :, 0][newest] > 0.9).all()


@pytest.mark.parametrize("name", [n for n in POLICY_NAMES if n != "kascade"])
def test_attend_equals_dense_attention_restricted_to_the_kept_tokens(name, device):
    # Gather == mask: attention over the cache's slots equals attention over the whole token
    # stream with every token the cache does not hold masked out.
    prompt, cache = build(name, device)
    history = prompt
    for step in range(5):
        token = make_token(step + 30, prompt)
        history = history_append(history, token)
        cache.append(token.key, token.value)
        out = cache.attend(token.query)
        tokens = history.keys.shape[2]
        held = torch.zeros(3, 2, tokens + 1, dtype=torch.bool, device=device)  # (B, Hkv, T+1)
        slots = torch.where(cache.positions >= 0, cache.positions, tokens)  # empty -> column T
        mask = held.scatter_(2, slots, True)[:, :, None, :tokens]  # (B, Hkv, 1, T)
        want, _ = attention(token.query, history.keys, history.values, mask=mask)
        torch.testing.assert_close(out, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_scale_is_applied(name, device):
    prompt, cache = build(name, device)
    token = make_token(2, prompt)
    cache.append(token.key, token.value)
    _, default = cache.attend(token.query, return_weights=True)
    _, rescaled = cache.attend(token.query * 0.5, scale=2 / 8**0.5, return_weights=True)
    torch.testing.assert_close(default, rescaled, rtol=0, atol=1e-12)
