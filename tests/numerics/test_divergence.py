"""Divergence from the full cache: exact zeros where a policy keeps everything, and recall."""

from __future__ import annotations

import pytest
import torch

from rdusim.kernels import lm
from rdusim.kv_policy import POLICY_NAMES

TEXT = (
    "Attention sinks are the first tokens of a sequence; most heads put a large share of their "
    "probability on them. A cache that evicts them degrades quickly, while one that keeps a few "
    "sinks and a window of recent tokens stays close to the full model for a long time. "
) * 6


@pytest.fixture(scope="module")
def result(model: lm.LanguageModel) -> lm.DivergenceResult:
    ids = model.encode(TEXT)
    spec = lm.DivergenceSpec(policies=POLICY_NAMES, budget=256, prompt_tokens=120, steps=6)
    assert len(ids) > 127 and spec.prompt_tokens + spec.steps < spec.budget - 4
    return lm.run_divergence(model, ids, spec)


def test_full_against_full_is_exact(result: lm.DivergenceResult) -> None:
    rows = [row for row in result.steps if row["policy"] == "full"]
    assert len(rows) == 6
    assert all(row["kl"] == 0.0 and row["top1_agree"] for row in rows)
    torch.testing.assert_close(
        torch.from_numpy(result.recall["full"]),
        torch.ones(6, 30, 9, dtype=torch.float64),
        rtol=0,
        atol=1e-6,  # fp32 attention weights sum to 1 within ~3e-7
    )


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_a_budget_above_the_length_keeps_every_policy_exact(
    result: lm.DivergenceResult, policy: str
) -> None:
    rows = [row for row in result.steps if row["policy"] == policy]
    assert max(row["kl"] for row in rows) < 1e-6
    assert all(row["top1_agree"] for row in rows)
    assert result.recall[policy].min() > 1 - 1e-6  # fp32 weights sum to 1 within ~1e-7


def test_small_budget_diverges_and_loses_recall(model: lm.LanguageModel) -> None:
    ids = model.encode(TEXT)
    spec = lm.DivergenceSpec(policies=("streamingllm",), budget=16, prompt_tokens=120, steps=4)
    result = lm.run_divergence(model, ids, spec)
    assert max(row["kl"] for row in result.steps) > 1e-3
    assert 0.0 < result.recall["streamingllm"].mean() < 1.0


def test_attention_recall_sums_weights_of_held_tokens() -> None:
    weights = torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.4, 0.4]])  # (Hq=2, C=4)
    positions = torch.tensor([[0, 1, 2, -1]])  # (Hkv=1, C): slot 3 empty
    held = torch.tensor([[2, 0, -1]])  # tokens 0 and 2 held, in another order
    recall = lm.attention_recall(weights, positions, held, group=2)
    torch.testing.assert_close(recall, torch.tensor([0.7, 0.5], dtype=torch.float64))
