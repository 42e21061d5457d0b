"""Naive SnapStream: rebuild ``[sink | last R tokens in order | top-K]`` by concatenation.

Owns: ``NaiveSnapStreamCache``, ``Segment``. Imports: torch, ``cache``, ``snapstream``,
``validation``.

The oracle for the ring buffer and the memory/time baseline of ``benchmarks/kv_update.py``.
Its prefill derives the recent tokens as "the last R prompt tokens that are not sinks" (not
through the ring's modular slot rule), keeps them in chronological order, and every decode
step shifts them by slicing and concatenation, then rebuilds the whole cache with ``torch.cat``:
two fresh tensors of the cache's size per step. It shares only the top-K scoring with the ring.
"""

from __future__ import annotations

from typing import NamedTuple, Self

import torch
from torch import Tensor

from rdusim.kernels.cache import SlotCache, gather_tokens
from rdusim.kernels.snapstream import check_snapstream, topk_positions
from rdusim.kernels.validation import check_prefill, check_step
from rdusim.kv_policy import DEFAULT_POOL, DEFAULT_WINDOW


class Segment(NamedTuple):
    """A run of slots: keys (B, Hkv, N, Dk), values (B, Hkv, N, Dv), positions (B, Hkv, N)."""

    keys: Tensor
    values: Tensor
    positions: Tensor


def _segment(keys: Tensor, values: Tensor, positions: Tensor) -> Segment:
    """Gather the tokens at ``positions`` (B, Hkv, N) into a segment; -1 slots are zeros."""
    return Segment(gather_tokens(keys, positions), gather_tokens(values, positions), positions)


class NaiveSnapStreamCache(SlotCache):
    """Same interface and token set as ``SnapStreamCache``; concatenates every step."""

    def __init__(self, sink: Segment, recent: Segment, top: Segment, lengths: Tensor) -> None:
        self._sink, self._recent, self._top = sink, recent, top
        super().__init__(*self._concatenate(), lengths)
        self.sink, self.recent, self.topk = (
            sink.positions.shape[2],
            recent.positions.shape[2],
            top.positions.shape[2],
        )

    @classmethod
    def from_prefill(
        cls,
        keys: Tensor,
        values: Tensor,
        queries: Tensor,
        lengths: Tensor,
        *,
        sink: int,
        recent: int,
        topk: int,
        window: int = DEFAULT_WINDOW,
        pool: int = DEFAULT_POOL,
        scale: float | None = None,
    ) -> Self:
        """Same parameters and semantics as ``SnapStreamCache.from_prefill``."""
        check_prefill(keys, values, queries, lengths)
        check_snapstream(sink=sink, recent=recent, topk=topk, window=window, pool=pool)
        b, hkv = keys.shape[:2]
        first = torch.arange(sink, device=keys.device)
        sinks = torch.where(first < lengths[:, None], first, -1)  # (B, S)
        last = lengths[:, None] - recent + torch.arange(recent, device=keys.device)  # (B, R)
        latest = torch.where(last >= sink, last, -1)  # (B, R), oldest first
        top = topk_positions(
            keys,
            queries,
            lengths,
            sink=sink,
            recent=recent,
            topk=topk,
            window=window,
            pool=pool,
            scale=scale,
        )  # (B, Hkv, K)
        return cls(
            _segment(keys, values, sinks[:, None, :].expand(b, hkv, sink).contiguous()),  # S
            _segment(keys, values, latest[:, None, :].expand(b, hkv, recent).contiguous()),  # R
            _segment(keys, values, top),
            lengths.clone(),
        )

    def append(self, k_new: Tensor, v_new: Tensor) -> None:
        """Write the new token into a sink (``t < S``) or shift it into the recent run, then
        rebuild the cache by concatenation.

        Shapes
        ------
        k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv).
        """
        check_step(self.keys, self.values, k_new, v_new)
        b, hkv = self.positions.shape[:2]
        token = self.lengths.view(b, 1, 1).expand(b, hkv, 1)  # (B, Hkv, 1)
        hit = torch.arange(self.sink, device=token.device) == token  # (B, Hkv, S)
        self._sink = Segment(
            torch.where(hit[..., None], k_new, self._sink.keys),
            torch.where(hit[..., None], v_new, self._sink.values),
            torch.where(hit, token, self._sink.positions),
        )
        shifted = Segment(
            torch.cat([self._recent.keys[:, :, 1:], k_new], dim=2),
            torch.cat([self._recent.values[:, :, 1:], v_new], dim=2),
            torch.cat([self._recent.positions[:, :, 1:], token], dim=2),
        )
        to_sink = token < self.sink  # (B, Hkv, 1): the recent run does not move
        stays = to_sink[..., None]  # (B, Hkv, 1, 1)
        self._recent = Segment(
            torch.where(stays, self._recent.keys, shifted.keys),
            torch.where(stays, self._recent.values, shifted.values),
            torch.where(to_sink, self._recent.positions, shifted.positions),
        )
        self.keys, self.values, self.positions = self._concatenate()
        self.lengths.add_(self._one)

    def _concatenate(self) -> tuple[Tensor, Tensor, Tensor]:
        """keys (B, Hkv, C, Dk), values (B, Hkv, C, Dv), positions (B, Hkv, C) as
        ``[sink | recent | top-K]``."""
        parts = (self._sink, self._recent, self._top)
        return (
            torch.cat([p.keys for p in parts], dim=2),
            torch.cat([p.values for p in parts], dim=2),
            torch.cat([p.positions for p in parts], dim=2),
        )
