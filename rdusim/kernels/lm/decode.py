"""Drive the ``rdusim.kernels`` caches with the language model: prefill, compress, decode.

Owns: ``DecodeCache``, ``Prefill``, ``CacheStack``, ``prefill_prompt``, ``build_caches``,
``greedy_decode``. Imports: torch, ``rdusim.kernels`` (the caches), ``rdusim.kernels.lm``.

Protocol, identical for every policy:

1. the model runs ordinary causal attention over the prompt except its last token and returns
   each layer's post-RoPE Q, K and V;
2. each layer gets its own cache from ``rdusim.kernels.make_cache`` (prefill compression);
3. every later token, starting with the prompt's last one, is decoded through the policy's own
   ``append`` then ``attend`` (for SnapStream the ring buffer), at its original position.

Step 3 starts at the prompt's last token so that *every* generated token is computed by
attention over the compressed cache; had the prompt been prefilled whole, the first answer
token would come from uncompressed prefill attention for every policy alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from rdusim import kernels
from rdusim.kernels.lm.llama import LayerQKV
from rdusim.kernels.lm.model import LanguageModel


class DecodeCache(Protocol):
    """What the harness uses of an ``rdusim.kernels`` cache (every policy's cache has it)."""

    positions: Tensor  # (B, Hkv, C) int64, -1 = empty

    def append(self, k_new: Tensor, v_new: Tensor) -> None: ...

    def attend(self, q_new: Tensor, *, return_weights: bool = ...) -> Any: ...


@dataclass(frozen=True)
class Prefill:
    """The prompt and the per-layer Q/K/V of all its tokens but the last."""

    prompt_ids: tuple[int, ...]
    layers: list[LayerQKV]

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_ids)


@dataclass
class CacheStack:
    """One ``rdusim.kernels`` cache per layer; callable as ``Llama.decode``'s attention.

    With ``record_weights`` each call also keeps, per layer, the attention weights over slots
    (1, Hq, 1, C) and a copy of the slot positions (1, Hkv, C) of that step, for diagnostics.
    """

    caches: list[DecodeCache]
    record_weights: bool = False
    weights: list[Tensor] = field(default_factory=list)
    positions: list[Tensor] = field(default_factory=list)

    def __call__(self, layer: int, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        cache = self.caches[layer]
        cache.append(k, v)
        if not self.record_weights:
            return cache.attend(q)
        if layer == 0:
            self.weights.clear()
            self.positions.clear()
        out, weights = cache.attend(q, return_weights=True)
        self.weights.append(weights)
        self.positions.append(cache.positions.clone())
        return out

    def held_positions(self, layer: int) -> Tensor:
        """(Hkv, C) int64: the token held by each slot of ``layer`` now, -1 if empty."""
        return self.caches[layer].positions[0]


def prefill_prompt(model: LanguageModel, prompt_ids: Sequence[int]) -> Prefill:
    """Run the causal forward over ``prompt_ids[:-1]`` (see the module docstring)."""
    if len(prompt_ids) < 2:
        raise ValueError(f"a prompt needs at least 2 tokens, got {len(prompt_ids)}")
    with torch.inference_mode():
        _, layers = model.llama.prefill(torch.tensor(prompt_ids[:-1], dtype=torch.int64))
    return Prefill(prompt_ids=tuple(prompt_ids), layers=layers)


def build_caches(
    policy: str, prefill: Prefill, *, budget: int, sink: int, max_new_tokens: int
) -> CacheStack:
    """One cache per layer, built by ``rdusim.kernels.make_cache`` from the prefill tensors.

    ``max_new_tokens`` counts every token decoded after the prefill, the prompt's last included.
    """
    lengths = torch.tensor([prefill.prompt_tokens - 1], dtype=torch.int64)
    with torch.inference_mode():
        caches = [
            kernels.make_cache(
                policy, qkv.keys, qkv.values, qkv.queries, lengths,
                budget=budget, sink=sink, max_new_tokens=max_new_tokens,
            )
            for qkv in prefill.layers
        ]  # fmt: skip
    return CacheStack(caches)


def greedy_decode(
    model: LanguageModel,
    prefill: Prefill,
    caches: CacheStack,
    *,
    max_new_tokens: int,
    stop_ids: Sequence[int] = (),
    on_prompt_end: Callable[[CacheStack], None] | None = None,
) -> list[int]:
    """Feed the prompt's last token, then generate greedily; returns the generated ids.

    Stops after ``max_new_tokens`` tokens or at a token of ``stop_ids`` (not returned).
    ``on_prompt_end(caches)`` is called once, when the whole prompt is in the caches.
    """
    token, position = prefill.prompt_ids[-1], prefill.prompt_tokens - 1
    generated: list[int] = []
    with torch.inference_mode():
        for step in range(max_new_tokens):
            token = int(model.llama.decode(token, position, caches).argmax())
            if step == 0 and on_prompt_end is not None:
                on_prompt_end(caches)
            if token in stop_ids:
                break
            generated.append(token)
            position += 1
    return generated
