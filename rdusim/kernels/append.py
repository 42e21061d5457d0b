"""Caches that keep their prompt tokens and append decoded tokens into free capacity.

Owns: ``AppendCache``. Imports: torch, ``cache``, ``validation``.

Layout per (sequence, KV head): the kept prompt tokens in ascending order in slots
``[0, kept)``, then decoded tokens in the order they arrive, up to a fixed capacity given at
construction. Appending to a full cache raises ``ValueError``; nothing grows silently. The
fullness check uses a host-side counter, so ``append`` never syncs with the device.
"""

from __future__ import annotations

from torch import Tensor

from rdusim.kernels.cache import SlotCache
from rdusim.kernels.validation import check_step


class AppendCache(SlotCache):
    """Prompt tokens first, decoded tokens appended after them, up to ``capacity`` slots.

    ``positions`` (B, Hkv, C) must hold, per row, its valid tokens in the leading slots.
    """

    def __init__(self, keys: Tensor, values: Tensor, positions: Tensor, lengths: Tensor) -> None:
        super().__init__(keys, values, positions, lengths)
        self._fill = (positions >= 0).sum(dim=-1)  # (B, Hkv): the next free slot of each row
        # Host-side count of the fullest row (one sync here, at construction only).
        self._used = int(self._fill.max())

    def append(self, k_new: Tensor, v_new: Tensor) -> None:
        """Write the new token into the next free slot of every row.

        Shapes
        ------
        k_new (B, Hkv, 1, Dk), v_new (B, Hkv, 1, Dv).

        Raises
        ------
        ValueError
            If the fullest row has no free slot left.
        """
        check_step(self.keys, self.values, k_new, v_new)
        if self._used >= self.capacity:
            raise ValueError(
                f"{type(self).__name__} is full: all {self.capacity} slots of the longest "
                f"sequence are used; build it with a larger capacity (or max_new_tokens)"
            )
        b, hkv = self.positions.shape[:2]
        slot = self._fill[..., None]  # (B, Hkv, 1)
        self.keys.scatter_(2, slot[..., None].expand(b, hkv, 1, self.keys.shape[3]), k_new)
        self.values.scatter_(2, slot[..., None].expand(b, hkv, 1, self.values.shape[3]), v_new)
        token = self.lengths.view(b, 1, 1).expand(b, hkv, 1)  # (B, Hkv, 1)
        self.positions.scatter_(2, slot, token)
        self._fill.add_(self._one)
        self.lengths.add_(self._one)
        self._used += 1
