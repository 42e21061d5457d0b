"""Drive the ``rdusim.kernels`` caches with the language model: prefill, compress, decode.

Owns: ``DecodeCache``, ``Prefill``, ``CacheStack``, ``prefill_prompt``, ``build_caches``,
``greedy_decode``. Imports: torch, ``rdusim.kernels`` (the caches), ``rdusim.kernels.lm``.

The protocol is the deployment one of SnapKV and SnapStream, identical for every policy:

1. the model runs ordinary causal attention over the whole prompt and returns each layer's
   post-RoPE Q, K and V, and the logits of the first answer token;
2. each layer gets its own cache built by ``rdusim.kernels`` from those tensors (prefill
   compression; Kascade's layers are wired to their anchors, see ``kascade_plan``);
3. every later token is decoded through the policy's own ``append`` then ``attend`` (for
   SnapStream the ring buffer), at its original position (no re-rotation).

So the first answer token comes from the uncompressed prefill for every policy alike; every
later one sees only what the policy kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from rdusim import kernels
from rdusim.kernels.lm.kascade_plan import KASCADE, build_kascade_caches, cached_plan
from rdusim.kernels.lm.llama import LayerQKV
from rdusim.kernels.lm.model import LanguageModel
from rdusim.kv_policy import DEFAULT_WINDOW


class DecodeCache(Protocol):
    """What the harness uses of an ``rdusim.kernels`` cache (every policy's cache has it)."""

    positions: Tensor  # (B, Hkv, C) int64, -1 = empty

    def append(self, k_new: Tensor, v_new: Tensor) -> None: ...

    def attend(self, q_new: Tensor, *, return_weights: bool = ...) -> Any: ...


@dataclass(frozen=True)
class Prefill:
    """A prompt, its next-token logits (V,) and the per-layer Q/K/V of its tokens."""

    prompt_ids: tuple[int, ...]
    logits: Tensor
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

    def attended_positions(self, layer: int) -> Tensor:
        """(Hkv, n) int64: the tokens the last ``attend`` of ``layer`` could see, -1 padded.

        The held tokens, except for Kascade's sparse layers, which see only the top-k slots
        of their anchor (this step's, through the head map) plus the current token.
        """
        cache = self.caches[layer]
        if not isinstance(cache, kernels.KascadeCache) or cache.dense:
            return self.held_positions(layer)
        source = cache if cache.anchor is None else cache.anchor
        head_map = torch.arange(cache.head_map.shape[0]) if cache.anchor is None else cache.head_map
        slots = source.indices[0, head_map, 0]  # (Hkv, k), -1 padded
        held = cache.positions[0].gather(1, slots.clamp(min=0))  # (Hkv, k)
        top = torch.where(slots >= 0, held, -1)
        current = (cache.lengths[0] - 1).expand(top.shape[0], 1)  # (Hkv, 1)
        return torch.cat([top, current], dim=1)  # (Hkv, k + 1)


def prefill_prompt(model: LanguageModel, prompt_ids: Sequence[int]) -> Prefill:
    """Run the causal forward over the whole prompt (step 1 of the module docstring)."""
    if len(prompt_ids) < 1:
        raise ValueError("a prompt needs at least one token")
    with torch.inference_mode():
        logits, layers = model.llama.prefill(torch.tensor(prompt_ids, dtype=torch.int64))
    return Prefill(prompt_ids=tuple(prompt_ids), logits=logits, layers=layers)


def build_caches(
    policy: str,
    prefill: Prefill,
    *,
    budget: int,
    sink: int,
    max_new_tokens: int,
    window: int = DEFAULT_WINDOW,
    pool: int = 11,
) -> CacheStack:
    """One cache per layer, built by ``rdusim.kernels`` from the prefill tensors.

    Every policy but Kascade goes through ``rdusim.kernels.make_cache`` (its budget split);
    Kascade's layers reference each other, see ``kascade_plan.build_kascade_caches``.
    ``max_new_tokens`` is the decode room of the caches that grow.
    """
    lengths = torch.tensor([prefill.prompt_tokens], dtype=torch.int64)
    if policy == KASCADE:
        plan = cached_plan(prefill.prompt_ids, prefill.layers)
        caches = build_kascade_caches(
            prefill.layers, lengths, k_budget=budget, max_new_tokens=max_new_tokens, plan=plan
        )
        return CacheStack(list(caches))
    with torch.inference_mode():
        made = [
            kernels.make_cache(
                policy, qkv.keys, qkv.values, qkv.queries, lengths, budget=budget, sink=sink,
                window=window, pool=pool, max_new_tokens=max_new_tokens,
            )
            for qkv in prefill.layers
        ]  # fmt: skip
    return CacheStack(list(made))


def greedy_decode(
    model: LanguageModel,
    prefill: Prefill,
    caches: CacheStack,
    *,
    max_new_tokens: int,
    stop_ids: Sequence[int] = (),
) -> list[int]:
    """Greedy answer: the prefill's argmax, then tokens decoded through ``caches``.

    Stops after ``max_new_tokens`` tokens or at a token of ``stop_ids`` (not returned).
    """
    token, position = int(prefill.logits.argmax()), prefill.prompt_tokens
    generated: list[int] = []
    with torch.inference_mode():
        while token not in stop_ids and len(generated) < max_new_tokens:
            generated.append(token)
            if len(generated) < max_new_tokens:
                token = int(model.llama.decode(token, position, caches).argmax())
                position += 1
    return generated
