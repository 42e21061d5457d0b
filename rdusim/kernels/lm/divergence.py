"""How far each policy's next-token distributions drift from the full cache on real text.

Owns: ``DivergenceSpec``, ``DivergenceResult``, ``run_divergence``, ``attention_recall``.
Imports: torch, numpy, ``rdusim.kernels.lm``.

The text is split into a prompt and a continuation. Every policy, and the full cache, prefill
the same prompt and are then teacher-forced through the same continuation, side by side, so that
step ``i`` of every policy predicts the same true token. Per step: KL(full || policy) of the
next-token distributions, top-1 agreement, and each one's negative log-likelihood of the true
token. Per step, layer and query head: the *attention recall* of the policy, the share of the
full cache's attention probability (same step, same layer, same head) that falls on tokens the
policy's cache holds, SnapKV's "hit rate".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from rdusim.kernels.lm.decode import CacheStack, Prefill, build_caches, prefill_prompt
from rdusim.kernels.lm.model import LanguageModel
from rdusim.kv_policy import DEFAULT_SINK, DEFAULT_WINDOW

FULL = "full"


@dataclass(frozen=True, kw_only=True)
class DivergenceSpec:
    """Which policies to compare with the full cache, and how the text is split."""

    policies: tuple[str, ...]
    budget: int
    prompt_tokens: int
    steps: int
    sink: int = DEFAULT_SINK
    window: int = DEFAULT_WINDOW
    pool: int = 11  # see passkey.PasskeySpec.pool


@dataclass(frozen=True)
class DivergenceResult:
    """steps: one record per (policy, step); recall: per policy, (steps, layers, Hq) fp64."""

    steps: list[dict[str, Any]]
    recall: dict[str, np.ndarray]


def run_divergence(
    model: LanguageModel,
    token_ids: Sequence[int],
    spec: DivergenceSpec,
    *,
    progress: Callable[[int], None] | None = None,
) -> DivergenceResult:
    """Compare every policy of ``spec`` with the full cache on ``token_ids``.

    Uses ``token_ids[:prompt_tokens]`` as the prompt; step i feeds the true token
    ``token_ids[prompt_tokens + i]`` to every cache and compares the predictions of the token
    after it. ``progress(step)`` is called after each step.
    """
    needed = spec.prompt_tokens + spec.steps + 1
    if len(token_ids) < needed:
        raise ValueError(f"the text has {len(token_ids)} tokens, {needed} are needed")
    prefill = prefill_prompt(model, token_ids[: spec.prompt_tokens])
    reference = _stack(FULL, prefill, spec)  # separate from a "full" entry of spec.policies
    reference.record_weights = True
    stacks = {name: _stack(name, prefill, spec) for name in spec.policies}
    group = model.llama.config.group
    records: list[dict[str, Any]] = []
    recall: dict[str, list[np.ndarray]] = {name: [] for name in spec.policies}
    fed = token_ids[spec.prompt_tokens : needed - 1]
    targets = token_ids[spec.prompt_tokens + 1 : needed]
    with torch.inference_mode():
        for step, (token, target) in enumerate(zip(fed, targets, strict=True)):
            position = spec.prompt_tokens + step
            full = _log_probs(model, token, position, reference)
            for name, stack in stacks.items():
                other = _log_probs(model, token, position, stack)
                records.append(_compare(name, step, position, full, other, target))
                recall[name].append(_layer_recall(reference, stack, group))
            if progress is not None:
                progress(step)
    return DivergenceResult(steps=records, recall={n: np.stack(r) for n, r in recall.items()})


def attention_recall(weights: Tensor, positions: Tensor, held: Tensor, group: int) -> Tensor:
    """Share of one step's attention probability that falls on the tokens in ``held``.

    Parameters
    ----------
    weights
        (Hq, C) attention weights over the slots of the reference cache.
    positions
        (Hkv, C) int64 token held by each reference slot, -1 if empty.
    held
        (Hkv, C') int64 tokens held by the other cache, -1 if empty; each token at most once
        per row.
    group
        Query heads per KV head (query head i reads KV head i // group).

    Returns
    -------
    (Hq,) fp64 recall in [0, 1].
    """
    ref = positions.repeat_interleave(group, dim=0)  # (Hq, C)
    kept = held.repeat_interleave(group, dim=0)  # (Hq, C')
    n_tokens = int(max(ref.max(), kept.max())) + 1
    w = torch.where(ref >= 0, weights.to(torch.float64), 0.0)  # (Hq, C)
    by_token = torch.zeros(ref.shape[0], n_tokens, dtype=torch.float64)
    by_token.scatter_add_(1, ref.clamp(min=0), w)  # (Hq, n_tokens)
    captured = torch.where(kept >= 0, by_token.gather(1, kept.clamp(min=0)), 0.0)  # (Hq, C')
    return captured.sum(dim=1)


def _stack(name: str, prefill: Prefill, spec: DivergenceSpec) -> CacheStack:
    return build_caches(
        name, prefill, budget=spec.budget, sink=spec.sink, window=spec.window, pool=spec.pool,
        max_new_tokens=spec.steps,
    )  # fmt: skip


def _log_probs(model: LanguageModel, token: int, position: int, stack: CacheStack) -> Tensor:
    return torch.log_softmax(model.llama.decode(token, position, stack).to(torch.float64), -1)


def _compare(
    name: str, step: int, position: int, full: Tensor, other: Tensor, target: int
) -> dict[str, Any]:
    """full and other: (V,) fp64 log-probabilities of the same step."""
    kl = float((full.exp() * (full - other)).sum().clamp(min=0.0))
    return {
        "policy": name,
        "step": step,
        "position": position,
        "kl": kl,
        "top1_agree": bool(full.argmax() == other.argmax()),
        "nll": float(-other[target]),
        "nll_full": float(-full[target]),
    }


def _layer_recall(full: CacheStack, other: CacheStack, group: int) -> np.ndarray:
    """(layers, Hq) recall of ``other`` against the weights ``full`` recorded this step."""
    rows = [
        attention_recall(weights[0, :, 0], positions[0], other.attended_positions(layer), group)
        for layer, (weights, positions) in enumerate(zip(full.weights, full.positions, strict=True))
    ]
    return torch.stack(rows).numpy()
