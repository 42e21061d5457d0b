"""SnapStream / StreamingLLM: the ring buffer against the naive concatenating oracle, the
methods.md worked example, edge cases, padding, static storage, MLA shapes and needles."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_inputs import KERNEL_SETTINGS, canonical, make_prompt, make_token

from rdusim.kernels import NaiveSnapStreamCache, SnapStreamCache, StreamingLLMCache


def run_both(prompt, steps: int, seed: int, **params):
    """Prefill both caches, then decode ``steps`` tokens, checking them against each other
    after every append + attend. Returns the ring cache."""
    ring = SnapStreamCache.from_prefill(*prompt, **params)
    naive = NaiveSnapStreamCache.from_prefill(*prompt, **params)
    storage = [x.data_ptr() for x in (ring.keys, ring.values, ring.positions, ring.lengths)]
    shapes = [x.shape for x in (ring.keys, ring.values, ring.positions)]
    assert_same_tokens(ring, naive)
    for step in range(steps):
        token = make_token(seed + step, prompt)
        ring.append(token.key, token.value)
        naive.append(token.key, token.value)
        assert_same_tokens(ring, naive)
        out_ring, out_naive = ring.attend(token.query), naive.attend(token.query)
        assert not out_ring.isnan().any()
        torch.testing.assert_close(out_ring, out_naive, rtol=0, atol=1e-10)
    assert [x.data_ptr() for x in (ring.keys, ring.values, ring.positions, ring.lengths)] == storage
    assert [x.shape for x in (ring.keys, ring.values, ring.positions)] == shapes
    return ring


def assert_same_tokens(ring, naive):
    """Both caches hold the same (position, key, value) set in every (sequence, head)."""
    assert torch.equal(ring.lengths, naive.lengths)
    for a, b in zip(
        canonical(ring.positions, ring.keys, ring.values),
        canonical(naive.positions, naive.keys, naive.values),
        strict=True,
    ):
        assert torch.equal(a, b)


@st.composite
def ring_configs(draw):
    batch = draw(st.integers(1, 3))
    return {
        "lengths": draw(st.lists(st.integers(0, 20), min_size=batch, max_size=batch)),
        "kv_heads": draw(st.integers(1, 2)),
        "group": draw(st.integers(1, 3)),
        "sink": draw(st.integers(0, 4)),
        "recent": draw(st.integers(1, 5)),
        "topk": draw(st.integers(0, 5)),
        "window": draw(st.integers(1, 6)),
        "pool": draw(st.sampled_from([1, 3, 5])),
        "steps": draw(st.integers(0, 12)),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(KERNEL_SETTINGS, max_examples=200)
@given(cfg=ring_configs())
def test_ring_and_naive_hold_the_same_tokens_and_agree(cfg, device):
    prompt = make_prompt(
        cfg["seed"],
        cfg["lengths"],
        kv_heads=cfg["kv_heads"],
        group=cfg["group"],
        key_dim=4,
        value_dim=3,
        device=device,
    )
    params = {k: cfg[k] for k in ("sink", "recent", "topk", "window", "pool")}
    run_both(prompt, cfg["steps"], cfg["seed"], **params)


def test_worked_example_from_methods_md(device):
    # L = 26, S = 1, R = 4: ring slots 0..3 hold 25, 26, 23, 24 once token 26 is decoded;
    # decoding token 27 overwrites token 23.
    prompt = make_prompt(0, [26], kv_heads=1, group=1, device=device)
    cache = SnapStreamCache.from_prefill(*prompt, sink=1, recent=4, topk=2, window=4, pool=3)
    assert cache.positions[0, 0, :5].tolist() == [0, 25, 22, 23, 24]
    token = make_token(1, prompt)
    cache.append(token.key, token.value)
    assert cache.positions[0, 0, 1:5].tolist() == [25, 26, 23, 24]
    token = make_token(2, prompt)
    cache.append(token.key, token.value)
    assert cache.positions[0, 0, 1:5].tolist() == [25, 26, 27, 24]
    assert torch.equal(cache.keys[0, 0, 3], token.key[0, 0, 0])
    assert cache.lengths.tolist() == [28]


# (length, sink, recent, topk, expected slots after prefill)
EDGE_CASES = [
    (2, 4, 3, 2, [0, 1, -1, -1, -1, -1, -1, -1, -1]),  # L < S
    (5, 2, 6, 2, [0, 1, 2, 3, 4, -1, -1, -1, -1, -1]),  # L < S + R: ring partly filled
    (9, 2, 4, 5, None),  # L - S - R = 3 < K: two top-K slots stay empty
    (11, 2, 1, 3, None),  # R = 1
    (7, 0, 3, 2, None),  # no sinks
]


@pytest.mark.parametrize("length,sink,recent,topk,expected", EDGE_CASES)
def test_edge_cases_prefill_and_decode(length, sink, recent, topk, expected, device):
    prompt = make_prompt(length, [length, 1], kv_heads=2, group=2, device=device)
    params = {"sink": sink, "recent": recent, "topk": topk, "window": 3, "pool": 3}
    run_both(prompt, 2 * (sink + recent) + 3, seed=length, **params)
    fresh = SnapStreamCache.from_prefill(*prompt, **params)
    if expected is not None:
        assert fresh.positions[0, 0].tolist() == expected
    valid_topk = min(max(length - sink - recent, 0), topk)
    assert fresh.topk_count[0].tolist() == [valid_topk] * 2
    assert fresh.topk_count[1].tolist() == [0, 0]


def test_streamingllm_is_snapstream_without_topk(device):
    prompt = make_prompt(5, [30, 12], kv_heads=2, group=3, device=device)
    streaming = StreamingLLMCache.from_prefill(*prompt, sink=2, recent=5)
    snap = SnapStreamCache.from_prefill(*prompt, sink=2, recent=5, topk=0)
    assert streaming.capacity == 7
    assert torch.equal(streaming.positions, snap.positions)
    assert streaming.positions[0, 0].tolist() == [0, 1, 27, 28, 29, 25, 26]  # slot S+(t-S)%R


def test_append_allocates_nothing(device):
    prompt = make_prompt(7, [40, 33, 9], kv_heads=2, group=2, key_dim=16, device=device)
    cache = SnapStreamCache.from_prefill(*prompt, sink=2, recent=8, topk=6, window=4, pool=3)
    token = make_token(8, prompt)
    cache.append(token.key, token.value)  # warm up
    if device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats(device)["allocated_bytes.all.allocated"]
        for _ in range(5):
            cache.append(token.key, token.value)
        torch.cuda.synchronize()
        assert torch.cuda.memory_stats(device)["allocated_bytes.all.allocated"] == before
        return
    with torch.profiler.profile(profile_memory=True) as prof:
        for _ in range(5):
            cache.append(token.key, token.value)
    assert sum(max(e.cpu_memory_usage, 0) for e in prof.events()) == 0


def test_append_compiles_to_one_graph_without_breaks(device):
    # No .item(), no data-dependent Python branch: dynamo traces append in one graph.
    import torch._dynamo

    prompt = make_prompt(9, [14, 6], kv_heads=1, group=2, device=device)
    eager = SnapStreamCache.from_prefill(*prompt, sink=2, recent=3, topk=2, window=3, pool=3)
    traced = SnapStreamCache.from_prefill(*prompt, sink=2, recent=3, topk=2, window=3, pool=3)
    torch._dynamo.reset()
    compiled = torch.compile(traced.append, backend="eager", fullgraph=True)
    for step in range(6):
        token = make_token(step, prompt)
        eager.append(token.key, token.value)
        compiled(token.key, token.value)
    assert torch.equal(eager.positions, traced.positions)
    assert torch.equal(eager.keys, traced.keys)


def test_mla_shapes(device):
    # MLA: one latent KV head, Dk = 576 (512 latent + 64 RoPE), Dv = 512, 4 query heads.
    prompt = make_prompt(
        11, [37, 20], kv_heads=1, group=4, key_dim=576, value_dim=512, device=device
    )
    ring = run_both(prompt, 6, seed=3, sink=2, recent=6, topk=5, window=4, pool=3)
    assert ring.keys.shape == (2, 1, 13, 576)
    assert ring.values.shape == (2, 1, 13, 512)
    out = ring.attend(make_token(4, prompt).query, scale=1 / 192**0.5)
    assert out.shape == (2, 4, 1, 512)


def needle_prompt(device, needle: int = 30, length: int = 64):
    """Small random keys, one large 'needle' key, and observation queries aligned with it."""
    prompt = make_prompt(13, [length], kv_heads=1, group=2, key_dim=16, device=device)
    direction = torch.zeros(16, dtype=torch.float64, device=device)
    direction[3] = 1.0
    keys = prompt.keys * 0.1
    keys[0, 0, needle] = 6.0 * direction
    queries = prompt.queries * 0.1
    queries[0, :, length - 8 :] += 6.0 * direction
    return prompt._replace(keys=keys, queries=queries), direction


def test_planted_needle_is_kept_by_snapstream_and_dropped_by_streamingllm(device):
    prompt, direction = needle_prompt(device)
    snap = SnapStreamCache.from_prefill(*prompt, sink=2, recent=8, topk=4, window=8, pool=3)
    streaming = StreamingLLMCache.from_prefill(*prompt, sink=2, recent=8)
    assert 30 in snap.positions[0, 0].tolist()
    assert 30 not in streaming.positions[0, 0].tolist()
    query = (6.0 * direction).expand(1, 2, 1, 16).contiguous()
    token = make_token(0, prompt)
    for cache in (snap, streaming):
        cache.append(token.key * 0.1, token.value)
    _, weights = snap.attend(query, return_weights=True)
    slot = snap.positions[0, 0].tolist().index(30)
    assert weights[0, :, 0, slot].min() > 0.9  # the needle dominates retrieval
    _, weights = streaming.attend(query, return_weights=True)
    assert weights.max() < 0.5


@pytest.mark.parametrize(
    "params,message",
    [
        ({"sink": 2, "recent": 0, "topk": 1}, "recent must be an int >= 1, got 0"),
        ({"sink": -1, "recent": 2, "topk": 1}, "sink must be an int >= 0, got -1"),
        ({"sink": 1, "recent": 2, "topk": 1, "pool": 4}, "pool must be odd"),
        ({"sink": 1, "recent": 2, "topk": 1, "window": 0}, "window must be an int >= 1"),
        ({"sink": 1, "recent": 2, "topk": True}, "topk must be an int >= 0, got True"),
    ],
)
def test_invalid_parameters_raise(params, message, device):
    prompt = make_prompt(1, [5], device=device)
    with pytest.raises(ValueError, match=message):
        SnapStreamCache.from_prefill(*prompt, **params)


def test_invalid_tensors_raise(device):
    prompt = make_prompt(1, [5, 3], device=device)
    cache = SnapStreamCache.from_prefill(*prompt, sink=1, recent=2, topk=1)
    token = make_token(1, prompt)
    with pytest.raises(ValueError, match=r"k_new must have shape \(B, Hkv, 1, D\)"):
        cache.append(token.key[:, :, :, :4], token.value)
    with pytest.raises(ValueError, match="v_new must be torch.float64"):
        cache.append(token.key, token.value.float())
    with pytest.raises(ValueError, match=r"q_new must have shape \(B, Hq, 1, Dk\)"):
        cache.attend(token.query[:1])
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, T\] = \[0, 5\]"):
        SnapStreamCache.from_prefill(
            *prompt._replace(lengths=prompt.lengths + 1), sink=1, recent=2, topk=1
        )
    with pytest.raises(ValueError, match="query heads \\(3\\) must be a positive multiple"):
        SnapStreamCache.from_prefill(
            *prompt._replace(queries=prompt.queries[:, :3]), sink=1, recent=2, topk=1
        )
