"""SnapStream: SnapKV top-K at prefill plus a StreamingLLM ring buffer at decode, fixed size.

Owns: ``SnapStreamCache``, ``check_snapstream``, ``ring_positions``, ``topk_positions``,
``snapstream_positions``.
Imports: torch, ``cache``, ``selection``, ``validation``.

Slots per (sequence, KV head): ``[0, S)`` sinks, ``[S, S+R)`` the ring of recent tokens,
``[S+R, S+R+K)`` the top-K prompt tokens chosen by SnapKV among the evicted middle
(methods.md section 1). Decoding writes token ``t`` to slot ``t`` if ``t < S``, else to
``S + (t - S) mod R``: one in-place scatter into preallocated buffers, computed from
preallocated index tensors, so a decode ``append`` allocates nothing and never syncs.
"""

from __future__ import annotations

from typing import Self

import torch
from torch import Tensor

from rdusim.kernels.cache import SlotCache, gather_tokens
from rdusim.kernels.selection import pool_votes, select_top, window_votes
from rdusim.kernels.validation import check_int, check_pool, check_prefill, check_step
from rdusim.kv_policy import DEFAULT_POOL, DEFAULT_WINDOW


def check_snapstream(*, sink: int, recent: int, topk: int, window: int, pool: int) -> None:
    """Validate SnapStream's parameters: S >= 0, R >= 1, K >= 0, W >= 1, P odd."""
    check_int("sink", sink, 0)
    check_int("recent", recent, 1)
    check_int("topk", topk, 0)
    check_int("window", window, 1)
    check_pool(pool)


def ring_positions(lengths: Tensor, sink: int, recent: int) -> Tensor:
    """The prompt token held by each ring slot after prefill, ``-1`` if none.

    Ring slot ``j`` holds the latest token ``t < L`` with ``(t - S) mod R == j`` and
    ``t >= S``; that token lies in ``[max(S, L-R), L)`` by construction.

    Shapes
    ------
    lengths (B,) -> (B, R) int64.
    """
    slot = torch.arange(recent, device=lengths.device)
    last = lengths[:, None] - 1  # (B, 1)
    token = last - torch.remainder(last - sink - slot, recent)  # (B, R)
    return torch.where(token >= sink, token, -1)


def topk_positions(
    keys: Tensor,
    queries: Tensor,
    lengths: Tensor,
    *,
    sink: int,
    recent: int,
    topk: int,
    window: int,
    pool: int,
    scale: float | None,
) -> Tensor:
    """SnapStream's top-K prompt tokens among the evicted middle ``[S, L-R)``, per KV head.

    Votes use a softmax restricted to the candidates (and causal), summed over the last
    ``window`` rows and the group's heads, pooled over the candidates only; ties go to the
    lower position; the result is ascending and ``-1`` padded.

    Shapes
    ------
    keys (B, Hkv, T, Dk), queries (B, Hq, T, Dk), lengths (B,) -> (B, Hkv, K) int64.
    """
    token = torch.arange(keys.shape[2], device=keys.device)
    candidates = (token[None, :] >= sink) & (token[None, :] < (lengths - recent)[:, None])
    votes = window_votes(
        queries, keys, lengths, window=window, key_set=candidates, scale=scale
    )  # (B, Hkv, T)
    return select_top(pool_votes(votes, candidates, pool), candidates[:, None, :], topk)


def snapstream_positions(
    keys: Tensor,
    queries: Tensor,
    lengths: Tensor,
    *,
    sink: int,
    recent: int,
    topk: int,
    window: int,
    pool: int,
    scale: float | None,
) -> Tensor:
    """The token held by every slot after prefill: ``[sink | ring | top-K]``, ``-1`` if empty.

    Shapes
    ------
    keys (B, Hkv, T, Dk), queries (B, Hq, T, Dk), lengths (B,) -> (B, Hkv, S+R+K) int64.
    """
    b, hkv = keys.shape[:2]
    first = torch.arange(sink, device=keys.device)
    sinks = torch.where(first[None, :] < lengths[:, None], first[None, :], -1)  # (B, S)
    fixed = torch.cat([sinks, ring_positions(lengths, sink, recent)], dim=1)  # (B, S+R)
    fixed = fixed[:, None, :].expand(b, hkv, sink + recent)  # (B, Hkv, S+R)
    if topk == 0:  # StreamingLLM: nothing to score (a static branch on a Python int)
        return fixed.contiguous()
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
    return torch.cat([fixed, top], dim=2)


class SnapStreamCache(SlotCache):
    """Fixed-size ``[sink | ring | top-K]`` cache; ``topk=0`` is StreamingLLM.

    ``keys``, ``values`` and ``positions`` never change shape or storage after prefill:
    ``append`` is a ring-buffer scatter with precomputed index buffers.
    """

    def __init__(
        self,
        keys: Tensor,
        values: Tensor,
        positions: Tensor,
        lengths: Tensor,
        *,
        sink: int,
        recent: int,
    ) -> None:
        super().__init__(keys, values, positions, lengths)
        self.sink, self.recent = sink, recent
        self.topk = self.capacity - sink - recent
        device, batch = keys.device, lengths.shape[0]
        self._sink_size = torch.tensor(sink, dtype=torch.int64, device=device)  # 0-dim
        self._ring_size = torch.tensor(recent, dtype=torch.int64, device=device)  # 0-dim
        self._ring_slot = torch.empty(batch, dtype=torch.int64, device=device)
        self._slot = torch.empty(batch, dtype=torch.int64, device=device)
        self._is_sink = torch.empty(batch, dtype=torch.bool, device=device)

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
        """Compress a right-padded prompt into ``S + R + K`` slots (methods.md section 1).

        Parameters
        ----------
        keys, values, queries
            (B, Hkv, T, Dk), (B, Hkv, T, Dv), (B, Hq, T, Dk), post-RoPE, right-padded.
        lengths
            (B,) int64 prompt lengths, each in [0, T].
        sink, recent, topk
            S >= 0 sink slots, R >= 1 ring slots, K >= 0 top-K slots.
        window, pool
            Observation window W >= 1 (last prompt queries that vote) and odd pooling kernel P.
        scale
            Logit scale of the voting softmax, ``1 / sqrt(Dk)`` by default.
        """
        check_prefill(keys, values, queries, lengths)
        check_snapstream(sink=sink, recent=recent, topk=topk, window=window, pool=pool)
        positions = snapstream_positions(
            keys,
            queries,
            lengths,
            sink=sink,
            recent=recent,
            topk=topk,
            window=window,
            pool=pool,
            scale=scale,
        )
        return cls(
            gather_tokens(keys, positions),
            gather_tokens(values, positions),
            positions,
            lengths.clone(),
            sink=sink,
            recent=recent,
        )

    @property
    def topk_count(self) -> Tensor:
        """(B, Hkv) int64: valid top-K slots, ``min(max(L - S - R, 0), K)``."""
        return (self.positions[:, :, self.sink + self.recent :] >= 0).sum(dim=-1)

    def append(self, k_new: Tensor, v_new: Tensor) -> None:
        """Write the new token into its sink or ring slot in place (no allocation, no sync).

        Shapes
        ------
        k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv).
        """
        check_step(self.keys, self.values, k_new, v_new)
        slot = self._write_slot().view(-1, 1, 1)  # (B, 1, 1): one slot for all heads
        self._write(slot, k_new, v_new)
        self.lengths.add_(self._one)

    def _write_slot(self) -> Tensor:
        """(B,) slot of token ``t = lengths``: ``t`` if ``t < S`` else ``S + (t - S) mod R``,
        computed into preallocated buffers with 0-dim operands (no allocation)."""
        torch.sub(self.lengths, self._sink_size, out=self._ring_slot)
        torch.remainder(self._ring_slot, self._ring_size, out=self._ring_slot)
        self._ring_slot.add_(self._sink_size)
        torch.lt(self.lengths, self._sink_size, out=self._is_sink)
        return torch.where(self._is_sink, self.lengths, self._ring_slot, out=self._slot)
