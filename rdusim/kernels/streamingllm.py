"""StreamingLLM: attention sinks plus a ring buffer of recent tokens (SnapStream with K = 0).

Owns: ``StreamingLLMCache``. Imports: torch, ``snapstream``.

Keys stay at their original positions (post-RoPE, no re-rotation), as in SnapStream.
"""

from __future__ import annotations

from typing import Self

from torch import Tensor

from rdusim.kernels.snapstream import SnapStreamCache


class StreamingLLMCache(SnapStreamCache):
    """``[sink | ring]`` slots: ``SnapStreamCache`` with ``topk=0``."""

    @classmethod
    def from_prefill(  # type: ignore[override]  # StreamingLLM takes no SnapKV parameters
        cls,
        keys: Tensor,
        values: Tensor,
        queries: Tensor,
        lengths: Tensor,
        *,
        sink: int,
        recent: int,
    ) -> Self:
        """Keep the first ``sink`` and the last ``recent`` prompt tokens.

        Shapes
        ------
        keys (B, Hkv, T, Dk), values (B, Hkv, T, Dv), queries (B, Hq, T, Dk) (validated only),
        lengths (B,) int64.
        """
        return super().from_prefill(
            keys, values, queries, lengths, sink=sink, recent=recent, topk=0
        )
