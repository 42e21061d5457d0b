"""The slot-buffer base class every policy's cache derives from, and slot gathering.

Owns: ``SlotCache`` (buffers, write-then-attend decoding, diagnostics weights),
``gather_tokens``, ``pad_slots``. Imports: torch, ``attention``, ``validation``.

A cache holds, per sequence and KV head, ``C`` slots: ``keys`` (B, Hkv, C, Dk), ``values``
(B, Hkv, C, Dv) and ``positions`` (B, Hkv, C) int64, the token index held by each slot or ``-1``
when empty. Empty slots are zero-filled, which lets attention skip masking the values.
``lengths`` (B,) counts the tokens seen so far (prompt plus decoded). One decode step is
``append(k_new, v_new)`` then ``attend(q_new)``: the token just appended is attended to.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor

from rdusim.kernels.attention import attend_slots
from rdusim.kernels.validation import check_query


class SlotCache(ABC):
    """Static-capacity KV slots with write-then-attend decoding.

    Attributes
    ----------
    keys, values
        (B, Hkv, C, Dk) and (B, Hkv, C, Dv), post-RoPE, in the prompt's dtype.
    positions
        (B, Hkv, C) int64: the token index held by each slot, ``-1`` if empty.
    lengths
        (B,) int64: tokens seen so far; the next token of sequence b has index ``lengths[b]``.
    """

    def __init__(self, keys: Tensor, values: Tensor, positions: Tensor, lengths: Tensor) -> None:
        self.keys = keys
        self.values = values
        self.positions = positions
        self.lengths = lengths
        # A 0-dim operand: in-place integer updates then allocate nothing.
        self._one = torch.ones((), dtype=torch.int64, device=keys.device)

    @property
    def capacity(self) -> int:
        """The number of slots C per sequence and KV head."""
        return int(self.keys.shape[2])

    @abstractmethod
    def append(self, k_new: Tensor, v_new: Tensor) -> None:
        """Write one new token per sequence: k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv).

        The token's index is ``lengths[b]``; ``lengths`` then grows by one.
        """

    @overload
    def attend(
        self, q_new: Tensor, *, scale: float | None = ..., return_weights: Literal[False] = ...
    ) -> Tensor: ...

    @overload
    def attend(
        self, q_new: Tensor, *, scale: float | None = ..., return_weights: Literal[True]
    ) -> tuple[Tensor, Tensor]: ...

    def attend(
        self, q_new: Tensor, *, scale: float | None = None, return_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attention of the current query over the valid slots (call after ``append``).

        Parameters
        ----------
        q_new
            (B, Hq, 1, Dk) post-RoPE query; head i reads KV head i // (Hq / Hkv).
        scale
            Logit scale, ``1 / sqrt(Dk)`` by default (MLA models pass their own).
        return_weights
            Also return the attention weights over slots, for diagnostics.

        Returns
        -------
        out (B, Hq, 1, Dv) in the cache dtype, and with ``return_weights`` the weights
        (B, Hq, 1, C) in fp32 (fp64 for an fp64 cache), 0 at empty or unattended slots.
        """
        check_query(q_new, self.keys)
        out, weights = self._attend(q_new, scale)
        return (out, weights) if return_weights else out

    def step(
        self, k_new: Tensor, v_new: Tensor, q_new: Tensor, *, scale: float | None = None
    ) -> Tensor:
        """One decode step: ``append(k_new, v_new)`` then ``attend(q_new, scale=scale)``."""
        self.append(k_new, v_new)
        return self.attend(q_new, scale=scale)

    def _attend(self, q_new: Tensor, scale: float | None) -> tuple[Tensor, Tensor]:
        """The policy's attention; returns (out, weights). Overridden by stateful policies."""
        return attend_slots(q_new, self.keys, self.values, self.positions >= 0, scale)


def gather_tokens(tokens: Tensor, positions: Tensor) -> Tensor:
    """Copy the tokens named by ``positions`` into slots; slots with position ``-1`` get zeros.

    Shapes
    ------
    tokens (B, Hkv, T, D), positions (B, Hkv, C) int64 in [-1, T) -> (B, Hkv, C, D).
    """
    b, hkv, slots = positions.shape
    index = positions.clamp(min=0)[..., None].expand(b, hkv, slots, tokens.shape[3])
    gathered = tokens.gather(2, index)  # (B, Hkv, C, D)
    return torch.where(positions[..., None] >= 0, gathered, 0.0)


def pad_slots(positions: Tensor, capacity: int) -> Tensor:
    """Append empty (``-1``) slots so the last axis has ``capacity`` entries.

    Shapes
    ------
    positions (B, Hkv, N) -> (B, Hkv, capacity), with N <= capacity.
    """
    return F.pad(positions, (0, capacity - positions.shape[-1]), value=-1)
