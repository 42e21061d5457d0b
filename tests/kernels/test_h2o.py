"""H2O: accumulated scores against explicit loops, and decoding against a list model."""

from __future__ import annotations

import itertools
import math

import kernel_oracles as oracle
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kernel_inputs import KERNEL_SETTINGS, make_prompt, make_token

from rdusim.kernels import H2OCache
from rdusim.kernels.h2o import accumulated_attention

SCALE = 1 / math.sqrt(8)


def test_prefill_scores_equal_an_explicit_loop(device):
    lengths = [11, 4, 7]
    prompt = make_prompt(1, lengths, kv_heads=2, group=3, device=device)
    got = accumulated_attention(prompt.keys, prompt.queries, prompt.lengths, scale=None).cpu()
    want = oracle.accumulated(prompt.keys.cpu(), prompt.queries.cpu(), lengths, SCALE)
    for (b, h), per_token in want.items():
        assert got[b, h, : lengths[b]].tolist() == pytest.approx(
            [per_token[t] for t in range(lengths[b])], rel=1e-12
        )
        assert got[b, h, lengths[b] :].abs().sum().item() == 0.0


class ListH2O:
    """H2O for one (sequence, KV head) as a dict {position: [key, value, score]}."""

    def __init__(self, prompt, scores, b, h, heavy, recent, normalize="sum"):
        self.heavy, self.recent, self.normalize = heavy, recent, normalize
        length = int(prompt.lengths[b])
        older = {t: self.rank(s, t, length) for t, s in scores.items() if t < length - recent}
        kept = oracle.best(older, heavy) + list(range(max(0, length - recent), length))
        keys, values = prompt.keys[b, h].cpu(), prompt.values[b, h].cpu()
        self.slots = {t: [keys[t], values[t], scores[t]] for t in kept}
        self.length = length

    def step(self, key, value, queries):
        t = self.length
        if len(self.slots) == self.heavy + self.recent:
            evictable = [p for p in self.slots if p <= t - self.recent]
            victim = min(evictable, key=lambda p: (self.rank(self.slots[p][2], p, t), p))
            del self.slots[victim]
        self.slots[t] = [key, value, 0.0]
        self.length += 1
        outs = []
        for q in queries:
            out, weights = oracle.attend(
                q, {p: (k, v) for p, (k, v, _) in self.slots.items()}, SCALE
            )
            for p, w in weights.items():
                self.slots[p][2] += w
            outs.append(out)
        return outs

    def rank(self, score, position, length):
        """The sum, or with "mean" the sum over the queries that saw the token so far."""
        return score if self.normalize == "sum" else score / (length - position)


def check_against_list_model(prompt, heavy, recent, steps, seed, normalize="sum"):
    cache = H2OCache.from_prefill(*prompt, heavy=heavy, recent=recent, normalize=normalize)
    b_size, hkv = prompt.keys.shape[:2]
    group = prompt.queries.shape[1] // hkv
    scores = oracle.accumulated(
        prompt.keys.cpu(), prompt.queries.cpu(), prompt.lengths.tolist(), SCALE
    )
    models = {
        (b, h): ListH2O(prompt, scores[b, h], b, h, heavy, recent, normalize)
        for b, h in itertools.product(range(b_size), range(hkv))
    }
    for step in range(steps):
        token = make_token(seed + step, prompt)
        cache.append(token.key, token.value)
        out = cache.attend(token.query).cpu()
        for (b, h), model in models.items():
            queries = [token.query[b, h * group + g, 0].cpu() for g in range(group)]
            want = model.step(token.key[b, h, 0].cpu(), token.value[b, h, 0].cpu(), queries)
            held = {
                p: s
                for p, s in zip(
                    cache.positions[b, h].tolist(), cache.scores[b, h].tolist(), strict=True
                )
                if p >= 0
            }
            assert sorted(held) == sorted(model.slots)
            for p, score in held.items():
                assert score == pytest.approx(model.slots[p][2], rel=1e-10, abs=1e-12)
            for g in range(group):
                assert out[b, h * group + g, 0].tolist() == pytest.approx(want[g], abs=1e-10)


@pytest.mark.parametrize("normalize", ["sum", "mean"])
def test_decode_matches_list_model(normalize, device):
    prompt = make_prompt(2, [12, 5, 9], kv_heads=2, group=2, device=device)
    check_against_list_model(prompt, heavy=3, recent=2, steps=12, seed=40, normalize=normalize)


@KERNEL_SETTINGS
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=2),
    heavy=st.integers(0, 4),
    recent=st.integers(0, 3),
    steps=st.integers(1, 8),
    seed=st.integers(0, 2**16),
    normalize=st.sampled_from(["sum", "mean"]),
)
def test_decode_matches_list_model_property(
    lengths, heavy, recent, steps, seed, normalize, device
):
    if heavy + recent == 0:
        heavy = 1
    prompt = make_prompt(seed, lengths, kv_heads=2, group=2, key_dim=8, device=device)
    check_against_list_model(
        prompt, heavy=heavy, recent=recent, steps=steps, seed=seed, normalize=normalize
    )


def test_invalid_normalize_raises(device):
    prompt = make_prompt(3, [6], device=device)
    with pytest.raises(ValueError, match="normalize must be one of 'sum', 'mean', got 'max'"):
        H2OCache.from_prefill(*prompt, heavy=2, recent=1, normalize="max")


def test_recent_tokens_are_never_evicted(device):
    prompt = make_prompt(3, [16], kv_heads=1, group=2, device=device)
    cache = H2OCache.from_prefill(*prompt, heavy=2, recent=3)
    for step in range(10):
        token = make_token(step, prompt)
        cache.append(token.key, token.value)
        cache.attend(token.query)
        t = 16 + step
        assert {t - 2, t - 1, t} <= set(cache.positions[0, 0].tolist())


def test_invalid_budgets_raise(device):
    prompt = make_prompt(3, [6], device=device)
    with pytest.raises(ValueError, match=r"heavy \+ recent must be an int >= 1, got 0"):
        H2OCache.from_prefill(*prompt, heavy=0, recent=0)
    with pytest.raises(ValueError, match="heavy must be an int >= 0, got -1"):
        H2OCache.from_prefill(*prompt, heavy=-1, recent=2)
