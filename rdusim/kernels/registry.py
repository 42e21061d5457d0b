"""The policy registry: one cache class per name in ``rdusim.kv_policy.POLICY_NAMES``, and the
rule that derives each policy's parameters from one total slot budget.

Owns: ``POLICIES``, ``BudgetRequest``, ``budget_split``, ``make_cache``. Imports: torch,
``rdusim.kv_policy``, every policy module.

Budget splits (``budget`` = slots per sequence and KV head; T = padded prompt length):

=============  ==============================================================================
full           ignores ``budget``; capacity = T + max_new_tokens
streamingllm   sink = S, recent = budget - S                       (budget >= S + 1)
snapstream     sink = S, topk = budget // 2, recent = budget - S - topk   (budget >= 2S + 1):
               ``rdusim.kv_policy.snapstream_slots``, the rule the simulator charges
snapkv         budget (window included); capacity = min(budget, T) + max_new_tokens
h2o            heavy = budget // 2, recent = budget - heavy        (budget >= 1)
longflow       slots = budget                                      (budget >= window + 1)
kascade        k_budget = budget, or ``rdusim.kv_policy.kascade_k(T)`` = min(max(T // 10, 128), T)
               if None; capacity as full
=============  ==============================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from torch import Tensor

from rdusim.kernels.cache import SlotCache
from rdusim.kernels.full import FullCache
from rdusim.kernels.h2o import H2OCache
from rdusim.kernels.kascade import KascadeCache
from rdusim.kernels.longflow import LongFlowCache
from rdusim.kernels.snapkv import SnapKVCache
from rdusim.kernels.snapstream import SnapStreamCache
from rdusim.kernels.streamingllm import StreamingLLMCache
from rdusim.kv_policy import (
    DEFAULT_POOL,
    DEFAULT_SINK,
    DEFAULT_WINDOW,
    POLICY_NAMES,
    kascade_k,
    snapstream_slots,
)

POLICIES: dict[str, type[SlotCache]] = {
    "full": FullCache,
    "streamingllm": StreamingLLMCache,
    "snapkv": SnapKVCache,
    "snapstream": SnapStreamCache,
    "h2o": H2OCache,
    "longflow": LongFlowCache,
    "kascade": KascadeCache,
}
"""Policy name -> cache class; the keys equal ``rdusim.kv_policy.POLICY_NAMES``."""

_SCORED = frozenset({"snapkv", "snapstream", "h2o", "longflow"})  # prefill uses ``scale``


class BudgetRequest(NamedTuple):
    """What a budget split may read: the budget and the shared knobs of ``make_cache``."""

    budget: int | None
    tokens: int
    sink: int
    window: int
    pool: int
    max_new_tokens: int


def budget_split(name: str, request: BudgetRequest) -> dict[str, int]:
    """The ``from_prefill`` parameters of policy ``name`` for ``request`` (see the table above).

    Raises
    ------
    ValueError
        For an unknown policy, or a budget too small for the policy's split.
    """
    if name not in _SPLITS:
        raise ValueError(f"unknown KV policy {name!r}; expected one of {', '.join(POLICY_NAMES)}")
    return _SPLITS[name](request)


def make_cache(
    name: str,
    keys: Tensor,
    values: Tensor,
    queries: Tensor,
    lengths: Tensor,
    *,
    budget: int | None = None,
    sink: int = DEFAULT_SINK,
    window: int = DEFAULT_WINDOW,
    pool: int = DEFAULT_POOL,
    max_new_tokens: int = 256,
    scale: float | None = None,
) -> SlotCache:
    """Build policy ``name``'s cache from a prompt and one total slot budget.

    Parameters
    ----------
    name
        One of ``POLICY_NAMES``.
    keys, values, queries, lengths
        The prompt, as every ``from_prefill`` takes it: (B, Hkv, T, Dk), (B, Hkv, T, Dv),
        (B, Hq, T, Dk), (B,) int64.
    budget
        Slots per sequence and KV head (Kascade: keys attended per step). Required except for
        ``full`` (ignored) and ``kascade`` (default rule).
    sink, window, pool
        Sink slots (StreamingLLM, SnapStream), observation window and odd pooling kernel
        (SnapKV, SnapStream, LongFlow).
    max_new_tokens
        Decode room of the caches that grow (full, snapkv, kascade).
    scale
        Prefill scoring scale, ``1 / sqrt(Dk)`` by default; pass the same one to ``attend``.
    """
    request = BudgetRequest(budget, int(keys.shape[2]), sink, window, pool, max_new_tokens)
    params: dict[str, object] = dict(budget_split(name, request))
    if name in _SCORED:
        params["scale"] = scale
    # Each cache class has its own keyword-only from_prefill; SlotCache cannot declare one
    # signature for all of them, so the type checker cannot see it here.
    cls: Any = POLICIES[name]
    cache: SlotCache = cls.from_prefill(keys, values, queries, lengths, **params)
    return cache


def _needs(request: BudgetRequest, name: str, minimum: int, rule: str) -> int:
    budget = request.budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < minimum:
        raise ValueError(f"budget for {name} must be an int >= {minimum} ({rule}), got {budget!r}")
    return budget


def _full(r: BudgetRequest) -> dict[str, int]:
    return {"capacity": r.tokens + r.max_new_tokens}


def _streamingllm(r: BudgetRequest) -> dict[str, int]:
    budget = _needs(r, "streamingllm", r.sink + 1, "sink + at least one recent slot")
    return {"sink": r.sink, "recent": budget - r.sink}


def _snapstream(r: BudgetRequest) -> dict[str, int]:
    budget = _needs(r, "snapstream", 2 * r.sink + 1, "sink + recent >= sink + 1 + budget // 2")
    sink, recent, topk = snapstream_slots(budget, r.sink)
    return {
        "sink": sink,
        "recent": recent,
        "topk": topk,
        "window": r.window,
        "pool": r.pool,
    }


def _snapkv(r: BudgetRequest) -> dict[str, int]:
    budget = _needs(r, "snapkv", r.window, "the observation window is always kept")
    return {
        "budget": budget,
        "capacity": min(budget, r.tokens) + r.max_new_tokens,
        "window": r.window,
        "pool": r.pool,
    }


def _h2o(r: BudgetRequest) -> dict[str, int]:
    budget = _needs(r, "h2o", 1, "heavy + recent")
    return {"heavy": budget // 2, "recent": budget - budget // 2}


def _longflow(r: BudgetRequest) -> dict[str, int]:
    budget = _needs(r, "longflow", r.window + 1, "window + one free slot")
    return {"slots": budget, "window": r.window, "pool": r.pool}


def _kascade(r: BudgetRequest) -> dict[str, int]:
    k_budget = kascade_k(r.tokens) if r.budget is None else _needs(r, "kascade", 0, "top-k")
    return {"capacity": r.tokens + r.max_new_tokens, "k_budget": k_budget}


_SPLITS: dict[str, Callable[[BudgetRequest], dict[str, int]]] = {
    "full": _full,
    "streamingllm": _streamingllm,
    "snapkv": _snapkv,
    "snapstream": _snapstream,
    "h2o": _h2o,
    "longflow": _longflow,
    "kascade": _kascade,
}
