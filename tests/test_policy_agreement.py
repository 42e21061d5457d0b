"""The simulator and the kernels agree on what a KV policy keeps (one definition, issue 9).

For every policy and several (prompt, compression) pairs, the tokens ``rdusim simulate``
charges (``rdusim.model.policy.kv_length``: the slots in HBM and the keys a decode step
attends to, and the ring / top-K split its prefill kernels copy) equal what the PyTorch cache
built by ``rdusim.kernels.make_cache`` holds: a fixed-size cache's slots, and the tokens the
first decode step attends to (write-then-attend; a growing cache has the new token on top,
which the simulator does not add: docs/design.md, "What is not modelled").
"""

from __future__ import annotations

import pytest
import torch

from rdusim.config.schema import KvPolicySpec
from rdusim.kernels import make_cache
from rdusim.kv_policy import FIXED_SIZE, POLICY_NAMES, compressed_budget
from rdusim.model.policy import kascade_topk, kv_length, policy_sizes

CASES = [(100, 4.0), (257, 3.0), (1000, 8.0), (64, 2.0), (4096, 4.0)]
SINK, WINDOW, POOL = 4, 8, 3


def _prompt(tokens: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(1, 2, tokens, 8, generator=gen, dtype=torch.float64)  # (B, Hkv, T, Dk)
    values = torch.randn(1, 2, tokens, 8, generator=gen, dtype=torch.float64)  # (B, Hkv, T, Dv)
    queries = torch.randn(1, 4, tokens, 8, generator=gen, dtype=torch.float64)  # (B, Hq, T, Dk)
    return keys, values, queries, torch.tensor([tokens])


def _spec(name: str, compression: float) -> KvPolicySpec:
    return KvPolicySpec(name=name, compression=compression if name != "full" else 1.0, sink=SINK,
                        window=WINDOW, pool=POOL)


@pytest.mark.parametrize("tokens,compression", CASES)
@pytest.mark.parametrize("name", POLICY_NAMES)
def test_simulator_charges_what_the_kernel_keeps(name, tokens, compression):
    spec = _spec(name, compression)
    budget = compressed_budget(tokens, compression)
    keys, values, queries, lengths = _prompt(tokens)
    cache = make_cache(name, keys, values, queries, lengths, budget=budget, sink=SINK, window=WINDOW,
                       pool=POOL, max_new_tokens=1)
    charged = kv_length(tokens, spec)
    if name in FIXED_SIZE:
        assert cache.capacity == charged  # HBM slots
    cache.step(keys[:, :, :1], values[:, :, :1], queries[:, :, :1])
    attended = (cache.positions >= 0).sum(dim=-1)  # (B, Hkv): valid slots at the first decode step
    grows = 0 if name in FIXED_SIZE else 1
    assert attended.unique().tolist() == [charged + grows]


@pytest.mark.parametrize("tokens,compression", CASES)
def test_snapstream_split_matches(tokens, compression):
    spec = _spec("snapstream", compression)
    sizes = policy_sizes(tokens, tokens, spec)
    cache = make_cache("snapstream", *_prompt(tokens), budget=sizes["capacity"], sink=SINK, window=WINDOW,
                       pool=POOL)
    assert (cache.capacity, cache.sink + cache.recent, cache.topk) == (
        sizes["capacity"], sizes["ring"], sizes["topk_slots"])


@pytest.mark.parametrize("tokens", [100, 1280, 1285, 5000, 131072])
def test_kascade_k_matches(tokens):
    spec = _spec("kascade", 1.0)
    keys, values, queries, lengths = _prompt(min(tokens, 1300))
    if tokens > 1300:  # the kernel's rule on the true length, without building a huge prompt
        from rdusim.kernels.kascade import default_budget  # noqa: PLC0415

        assert default_budget(tokens) == kascade_topk(tokens, spec)
        return
    cache = make_cache("kascade", keys, values, queries, lengths, max_new_tokens=0)
    assert cache.k_budget == kascade_topk(tokens, spec)
