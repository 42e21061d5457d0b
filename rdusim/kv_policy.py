"""The KV-cache policies: their names, defaults and how many tokens each keeps.

Owns: ``POLICY_NAMES``, ``parse_policy``, the default knobs, and the size rules
(``compressed_budget``, ``kept_tokens``, ``snapstream_slots``, ``kascade_k``). Imports: stdlib.

This is the one definition both sides use: the simulator's ``kv_policy`` section
(``rdusim.model.policy`` charges time and memory for these sizes) and the PyTorch caches
(``rdusim.kernels.make_cache`` builds them with these sizes); a test checks that, for every
policy, the tokens the simulator charges are the tokens the kernel keeps. It is torch-free
on purpose, so the simulator and the CLI never load ``rdusim.kernels``.

Semantics: ../shared/reference/methods.md. One slot budget ``C`` per sequence, layer and KV
head; a compressing policy sized by a compression ratio ``r`` gets ``C = ceil(T / r)``.
"""

from __future__ import annotations

import difflib
import math
from fractions import Fraction

POLICY_DESCRIPTIONS: dict[str, str] = {
    "full": "keep every token (no compression)",
    "streamingllm": "attention sinks + a ring buffer of recent tokens (SnapStream with K = 0)",
    "snapkv": "one-time prefill compression by observation-window votes, then append",
    "snapstream": "SnapKV at prefill + StreamingLLM ring buffer at decode, fixed size",
    "h2o": "heavy hitters by accumulated attention + recent tokens, fixed budget",
    "longflow": "static cache; each step overwrites the slot with the smallest alpha*|v|_1",
    "kascade": "sparse attention: anchor layers pick top-k keys that reuse layers attend to",
}

POLICY_NAMES: tuple[str, ...] = tuple(POLICY_DESCRIPTIONS)

#: names users may type for a policy
ALIASES: dict[str, str] = {"none": "full"}

#: policies whose cache holds a fixed budget of tokens instead of the whole prompt
COMPRESSING: tuple[str, ...] = ("snapstream", "streamingllm", "snapkv", "h2o", "longflow")
#: policies whose decode cache is a [sink | recent ring | top-K] slot buffer (StreamingLLM: no top-K)
RING_BUFFER: tuple[str, ...] = ("snapstream", "streamingllm")
#: policies whose cache never grows at decode (the others append every generated token)
FIXED_SIZE: tuple[str, ...] = ("snapstream", "streamingllm", "h2o", "longflow")

# Default knobs, shared by the mapping schema, the kernels and ``rdusim numerics``.
#: attention sinks: StreamingLLM's 4 (kvpress StreamingLLMPress n_sink=4,
#: kv-compression-implementations.md section 1.0)
DEFAULT_SINK = 4
#: SnapKV observation window: 32 (SnapKV ``init_snapkv`` and its LongBench configs, ibid. 1.1)
DEFAULT_WINDOW = 32
#: SnapKV pooling kernel: 7 (SnapKV's LongBench ablation configs, ibid. 1.1)
DEFAULT_POOL = 7
#: SnapStream's share of the budget for SnapKV's top-K; the rest after the sinks is the ring.
#: Not public (ibid. 1.10 (b)): half [A]
DEFAULT_TOPK_SHARE = 0.5
#: Kascade's top-k rule ``min(max(0.1 L, 128), L)`` (methods.md section 6)
KASCADE_FRACTION = 0.1
KASCADE_MINIMUM = 128


def parse_policy(name: str) -> str:
    """A policy name as users type it (``none`` means ``full``); ValueError with a suggestion."""
    policy = ALIASES.get(name, name)
    if policy in POLICY_NAMES:
        return policy
    close = difflib.get_close_matches(name, [*POLICY_NAMES, *ALIASES], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown KV policy {name!r}; known: none, {', '.join(POLICY_NAMES)}{hint}")


def compressed_budget(prompt: int, compression: float) -> int:
    """Slots of a compressing policy sized by a ratio: ``ceil(T / r)``, within ``[1, T]``."""
    return max(1, min(prompt, math.ceil(prompt / compression)))


def kept_tokens(name: str, prompt: int, budget: int) -> int:
    """Tokens of KV a sequence keeps after prefill of ``prompt`` tokens with ``budget`` slots."""
    if name not in COMPRESSING:
        return prompt
    return min(prompt, budget)


def snapstream_slots(budget: int, sink: int, topk_share: float = DEFAULT_TOPK_SHARE) -> tuple[int, int, int]:
    """SnapStream's ``(sink, recent, topk)`` slots for a budget (methods.md section 1).

    ``topk = floor(budget * topk_share)``, ``recent = budget - sink - topk`` (ValueError when
    that leaves no recent slot). StreamingLLM is the case ``topk_share = 0``.
    """
    topk = int(budget * Fraction(topk_share).limit_denominator(1 << 20))
    recent = budget - sink - topk
    if recent < 1:
        raise ValueError(f"a budget of {budget} slots leaves no recent slot after {sink} sinks "
                         f"and {topk} top-K slots (needs >= {sink + topk + 1})")
    return sink, recent, topk


def kascade_k(keys: int, fraction: float = KASCADE_FRACTION, minimum: int = KASCADE_MINIMUM) -> int:
    """Kascade's keys per step: ``min(max(floor(fraction * L), minimum), L)``."""
    share = int(keys * Fraction(fraction).limit_denominator(1 << 20))
    return min(max(share, minimum), keys)
