"""Passkey retrieval: a random 5-digit key hidden in filler text, asked for at the end.

Owns: ``PasskeySpec``, ``PasskeyPrompt``, ``make_passkey_prompt``, ``run_passkey``.
Imports: numpy, ``rdusim.kernels.lm``.

One trial = one random key, one prompt of about ``context`` tokens with the key at ``depth``
(the fraction of the filler before it), one prefill shared by every policy, then, per policy,
its compressed caches and a greedy answer of at most ``max_new_tokens`` tokens. The trial is
correct iff the five digits appear in the decoded answer. The prompt is the classic one of the
passkey literature (Mohtashami and Jaggi, 2023), ending in an open sentence so that the model
answers right away without a chat template.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rdusim.kernels.lm.decode import (
    CacheStack,
    Prefill,
    build_caches,
    greedy_decode,
    prefill_prompt,
)
from rdusim.kernels.lm.model import LanguageModel
from rdusim.kv_policy import DEFAULT_SINK, DEFAULT_WINDOW

INTRO = (
    "There is an important info hidden inside a lot of irrelevant text. "
    "Find it and memorize it. I will quiz you about the important information there."
)
# Every piece starts with a space so that tokenising the pieces one by one gives the same ids
# as tokenising the whole prompt (a test checks it).
FILLER = (
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
)
NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key."
QUESTION = " What is the pass key? The pass key is"
KEY_DIGITS = 5


@dataclass(frozen=True, kw_only=True)
class PasskeySpec:
    """The grid of a passkey experiment; every trial of every cell shares ``seed``'s stream."""

    policies: tuple[str, ...]
    contexts: tuple[int, ...]
    depths: tuple[float, ...]
    trials: int
    budget: int
    sink: int = DEFAULT_SINK
    window: int = DEFAULT_WINDOW
    # The pooling kernel must span the tokens the decoder copies after the first: the window
    # queries vote for where the key starts, and a 5-digit key is 5 tokens. Measured on
    # SmolLM2 at 2K / 128 slots: pool 7 keeps too few digits (SnapStream 6/10), 9-15 keep them
    # all (10/10); docs/numerics.md has the table.
    pool: int = 11
    seed: int = 0
    max_new_tokens: int = 8


@dataclass(frozen=True)
class PasskeyPrompt:
    """A prompt's token ids, its key, and where the key's digit tokens are."""

    token_ids: list[int]
    key: str
    key_spans: tuple[tuple[int, ...], ...]  # token indices of each occurrence of the key


def make_passkey_prompt(
    model: LanguageModel, *, context: int, depth: float, key: str
) -> PasskeyPrompt:
    """Intro, filler, the needle after ``depth`` of the filler, more filler, the question.

    The filler is a whole number of filler paragraphs, as many as fit in ``context`` tokens.
    """
    intro, filler, question = (model.encode(text) for text in (INTRO, FILLER, QUESTION))
    needle = model.encode(NEEDLE.format(key=key))
    room = context - len(intro) - len(needle) - len(question)
    paragraphs = room // len(filler)
    if paragraphs < 1:
        raise ValueError(f"context {context} is too short for the passkey prompt")
    before = round(depth * paragraphs)
    ids = intro + filler * before + needle + filler * (paragraphs - before) + question
    return PasskeyPrompt(token_ids=ids, key=key, key_spans=_find(ids, model.encode(key)))


def _find(ids: list[int], pattern: list[int]) -> tuple[tuple[int, ...], ...]:
    width = len(pattern)
    starts = [i for i in range(len(ids) - width + 1) if ids[i : i + width] == pattern]
    return tuple(tuple(range(start, start + width)) for start in starts)


def random_key(rng: np.random.Generator) -> str:
    """A 5-digit key without a leading zero."""
    return str(int(rng.integers(10 ** (KEY_DIGITS - 1), 10**KEY_DIGITS)))


Progress = Callable[[dict[str, Any]], None]


def run_passkey(
    model: LanguageModel, spec: PasskeySpec, *, progress: Progress | None = None
) -> list[dict[str, Any]]:
    """Run every trial; returns one record per (policy, context, depth, trial).

    Record keys: policy, context, depth, trial, key, prompt_tokens, key_token (index of the
    key's first digit), answer, correct, and, measured right after prefill compression,
    cache_slots (tokens a layer's cache holds, the maximum over layers and KV heads) and
    key_held (fraction of (layer, KV head) rows holding every digit of one occurrence of the key).
    """
    rng = np.random.default_rng(spec.seed)
    records: list[dict[str, Any]] = []
    for context in spec.contexts:
        for depth in spec.depths:
            for trial in range(spec.trials):
                prompt = make_passkey_prompt(
                    model, context=context, depth=depth, key=random_key(rng)
                )
                base = {"context": context, "depth": depth, "trial": trial}
                for record in _trial(model, spec, prompt):
                    records.append(base | record)
                    if progress is not None:
                        progress(records[-1])
    return records


def _trial(model: LanguageModel, spec: PasskeySpec, prompt: PasskeyPrompt) -> list[dict[str, Any]]:
    """One prompt, one prefill, then every policy's caches and answer."""
    prefill = prefill_prompt(model, prompt.token_ids)
    return [_answer(model, spec, prompt, prefill, policy) for policy in spec.policies]


def _answer(
    model: LanguageModel, spec: PasskeySpec, prompt: PasskeyPrompt, prefill: Prefill, policy: str
) -> dict[str, Any]:
    caches = build_caches(
        policy, prefill, budget=spec.budget, sink=spec.sink, window=spec.window,
        pool=spec.pool, max_new_tokens=spec.max_new_tokens,
    )  # fmt: skip
    occupancy = _occupancy(caches, prompt)  # right after prefill compression
    generated = greedy_decode(
        model, prefill, caches, max_new_tokens=spec.max_new_tokens, stop_ids=_stop_ids(model)
    )
    answer = model.decode(generated)
    return {
        "policy": policy,
        "key": prompt.key,
        "prompt_tokens": prefill.prompt_tokens,
        "key_token": prompt.key_spans[0][0],
        "answer": answer,
        "correct": prompt.key in answer,
    } | occupancy


def _occupancy(caches: CacheStack, prompt: PasskeyPrompt) -> dict[str, Any]:
    """cache_slots and key_held of the caches (see ``run_passkey``)."""
    slots, rows_with_key, rows = 0, 0, 0
    for layer in range(len(caches.caches)):
        held = caches.held_positions(layer)  # (Hkv, C)
        slots = max(slots, int((held >= 0).sum(dim=-1).max()))
        for row in held.tolist():
            present = set(row)
            rows_with_key += any(present.issuperset(span) for span in prompt.key_spans)
            rows += 1
    return {"cache_slots": slots, "key_held": rows_with_key / rows}


def _stop_ids(model: LanguageModel) -> tuple[int, ...]:
    names = ("<|endoftext|>", "<|im_end|>")
    found = (model.tokenizer.token_to_id(name) for name in names)
    return tuple(index for index in found if index is not None)
