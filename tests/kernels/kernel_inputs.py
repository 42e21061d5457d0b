"""Random prompts and decode tokens for the kernel tests, and their Hypothesis settings.

Prompts are right-padded and their padding is NaN, so any leak of padding into a result shows.
Everything is seeded: a test's tensors depend only on its seed and sizes.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from hypothesis import HealthCheck, settings
from torch import Tensor

KERNEL_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Deterministic, deadline-free Hypothesis settings for tensor tests (applied per test, so
other packages' Hypothesis defaults are untouched)."""


class Prompt(NamedTuple):
    keys: Tensor  # (B, Hkv, T, Dk)
    values: Tensor  # (B, Hkv, T, Dv)
    queries: Tensor  # (B, Hq, T, Dk)
    lengths: Tensor  # (B,) int64


class Token(NamedTuple):
    key: Tensor  # (B, Hkv, 1, Dk)
    value: Tensor  # (B, Hkv, 1, Dv)
    query: Tensor  # (B, Hq, 1, Dk)


def make_prompt(
    seed: int,
    lengths: list[int],
    *,
    kv_heads: int = 2,
    group: int = 2,
    tokens: int | None = None,
    key_dim: int = 8,
    value_dim: int = 8,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float64,
    pad: float = float("nan"),
) -> Prompt:
    """A right-padded random prompt; cells at ``t >= lengths[b]`` hold ``pad`` (NaN)."""
    gen = torch.Generator().manual_seed(seed)
    b, t = len(lengths), tokens if tokens is not None else max(max(lengths), 1)
    hq = kv_heads * group
    keys = torch.randn(b, kv_heads, t, key_dim, generator=gen, dtype=torch.float64)
    values = torch.randn(b, kv_heads, t, value_dim, generator=gen, dtype=torch.float64)
    queries = torch.randn(b, hq, t, key_dim, generator=gen, dtype=torch.float64)
    length = torch.tensor(lengths, dtype=torch.int64)
    padded = torch.arange(t)[None, :] >= length[:, None]  # (B, T)
    keys, values, queries = (
        x.masked_fill(padded[:, None, :, None], pad).to(device=device, dtype=dtype)
        for x in (keys, values, queries)
    )
    return Prompt(keys, values, queries, length.to(device))


def make_token(seed: int, prompt: Prompt) -> Token:
    """A random decode token (key, value, query) shaped like ``prompt``."""
    gen = torch.Generator().manual_seed(seed)
    b, hkv, _, dk = prompt.keys.shape
    hq, dv = prompt.queries.shape[1], prompt.values.shape[3]
    like = {"dtype": prompt.keys.dtype, "device": prompt.keys.device}
    return Token(
        torch.randn(b, hkv, 1, dk, generator=gen, dtype=torch.float64).to(**like),
        torch.randn(b, hkv, 1, dv, generator=gen, dtype=torch.float64).to(**like),
        torch.randn(b, hq, 1, dk, generator=gen, dtype=torch.float64).to(**like),
    )


def canonical(positions: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Slots sorted by position (empty slots last, zeroed): equal token sets compare equal.

    Shapes
    ------
    positions (B, H, C), keys (B, H, C, Dk), values (B, H, C, Dv) -> the same shapes.
    """
    order = torch.where(positions >= 0, positions, torch.iinfo(torch.int64).max).argsort(dim=-1)
    pos = positions.gather(-1, order)
    k = keys.gather(2, order[..., None].expand_as(keys))  # (B, H, C, Dk)
    v = values.gather(2, order[..., None].expand_as(values))  # (B, H, C, Dv)
    empty = (pos < 0)[..., None]
    return pos, k.masked_fill(empty, 0.0), v.masked_fill(empty, 0.0)


def history_append(history: Prompt, token: Token) -> Prompt:
    """The full token stream after one decode step, for dense reference attention.

    Every sequence gains its token at index ``lengths[b]`` (columns grow by one when needed).
    """
    keys, values, lengths = history.keys, history.values, history.lengths
    if int(lengths.max()) >= keys.shape[2]:
        keys = torch.cat([keys, torch.zeros_like(keys[:, :, :1])], dim=2)
        values = torch.cat([values, torch.zeros_like(values[:, :, :1])], dim=2)
    index = lengths.view(-1, 1, 1, 1)  # (B, 1, 1, 1)
    keys = keys.scatter(2, index.expand(*keys.shape[:2], 1, keys.shape[3]), token.key)
    values = values.scatter(2, index.expand(*values.shape[:2], 1, values.shape[3]), token.value)
    return Prompt(keys, values, history.queries, lengths + 1)
