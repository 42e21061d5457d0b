"""PyTorch reference kernels for compressed KV caches (the only package that imports torch).

Owns: the public names below. Imports: torch, ``rdusim.units``, ``rdusim.errors``,
``rdusim.kv_policy`` (nothing else of rdusim; an import-linter contract checks it).

Every cache is built with ``Cache.from_prefill(keys, values, queries, lengths, **policy_params)``
(or ``make_cache(name, ..., budget=...)``) and decodes one token per step with
``append(k_new, v_new)`` then ``attend(q_new)``; see docs/kernels.md.
"""

from rdusim.kernels import kascade
from rdusim.kernels.attention import attention, masked_softmax, padding_causal_mask
from rdusim.kernels.cache import SlotCache
from rdusim.kernels.full import FullCache
from rdusim.kernels.h2o import H2OCache
from rdusim.kernels.kascade import KascadeCache
from rdusim.kernels.longflow import LongFlowCache
from rdusim.kernels.registry import POLICIES, BudgetRequest, budget_split, make_cache
from rdusim.kernels.snapkv import SnapKVCache
from rdusim.kernels.snapstream import SnapStreamCache
from rdusim.kernels.snapstream_naive import NaiveSnapStreamCache
from rdusim.kernels.streamingllm import StreamingLLMCache

__all__ = [
    "POLICIES",
    "BudgetRequest",
    "FullCache",
    "H2OCache",
    "KascadeCache",
    "LongFlowCache",
    "NaiveSnapStreamCache",
    "SlotCache",
    "SnapKVCache",
    "SnapStreamCache",
    "StreamingLLMCache",
    "attention",
    "budget_split",
    "kascade",
    "make_cache",
    "masked_softmax",
    "padding_causal_mask",
]
