"""The dense reference attention: GQA head mapping, masks, padding and the all-masked row."""

from __future__ import annotations

import itertools
import math

import kernel_oracles as oracle
import pytest
import torch
from kernel_inputs import make_prompt

from rdusim.kernels import attention, masked_softmax, padding_causal_mask


@pytest.mark.parametrize("kv_heads,group", [(1, 1), (1, 4), (2, 3), (3, 3)])
def test_attention_matches_loop_oracle_with_gqa_and_mask(kv_heads, group, device):
    prompt = make_prompt(
        kv_heads * 10 + group, [9, 6], kv_heads=kv_heads, group=group, device=device, pad=0.0
    )
    gen = torch.Generator().manual_seed(group)
    mask = (torch.rand(2, kv_heads, 9, 9, generator=gen) < 0.6).to(device)  # (B, Hkv, Tq, Tk)
    mask[..., 0] = True  # every row sees at least one key
    out, weights = attention(prompt.queries, prompt.keys, prompt.values, mask=mask)
    assert out.shape == (2, kv_heads * group, 9, 8) and weights.shape == (2, kv_heads * group, 9, 9)
    cpu = [x.cpu() for x in (prompt.queries, prompt.keys, prompt.values, mask)]
    q, k, v, m = cpu
    for b, head, row in itertools.product(range(2), range(kv_heads * group), range(9)):
        h = head // group  # query head i reads KV head i // G
        kept = {t: (k[b, h, t], v[b, h, t]) for t in range(9) if m[b, h, row, t]}
        want, want_weights = oracle.attend(q[b, head, row], kept, 1 / math.sqrt(8))
        assert out[b, head, row].tolist() == pytest.approx(want, abs=1e-12)
        for t in range(9):
            assert weights[b, head, row, t].item() == pytest.approx(
                want_weights.get(t, 0.0), abs=1e-14
            )


def test_masked_softmax_all_masked_row_is_zero_and_nan_does_not_leak(device):
    logits = torch.tensor([[1.0, float("nan"), 2.0], [float("nan"), 0.0, 5.0]], device=device)
    mask = torch.tensor([[True, False, True], [False, False, False]], device=device)
    probs = masked_softmax(logits, mask)
    assert probs[1].tolist() == [0.0, 0.0, 0.0]
    assert probs[0, 1].item() == 0.0
    assert probs[0].sum().item() == pytest.approx(1.0)
    assert not probs.isnan().any()


def test_padding_causal_mask(device):
    mask = padding_causal_mask(torch.tensor([3, 5], device=device), tq=2, tk=5)
    assert mask.shape == (2, 1, 2, 5)
    assert mask[0, 0].tolist() == [[True] * 3 + [False] * 2, [True] * 3 + [False] * 2]
    assert mask[1, 0].tolist() == [[True] * 4 + [False], [True] * 5]


def test_nan_padding_never_reaches_valid_rows(device):
    prompt = make_prompt(4, [7, 3], kv_heads=2, group=2, device=device)  # NaN padding
    mask = padding_causal_mask(prompt.lengths, 7, 7)
    out, weights = attention(prompt.queries, prompt.keys, prompt.values, mask=mask)
    alone = make_prompt(4, [7, 3], kv_heads=2, group=2, device=device, pad=0.0)
    want, _ = attention(alone.queries, alone.keys, alone.values, mask=mask)
    for b, length in enumerate([7, 3]):
        assert not out[b, :, :length].isnan().any()
        torch.testing.assert_close(out[b, :, :length], want[b, :, :length], rtol=0, atol=0)
        assert not weights[b, :, :length].isnan().any()


def test_batch_equals_each_sequence_alone(device):
    prompt = make_prompt(5, [8, 4, 6], kv_heads=1, group=3, device=device)
    mask = padding_causal_mask(prompt.lengths, 8, 8)
    out, _ = attention(prompt.queries, prompt.keys, prompt.values, mask=mask)
    for b, length in enumerate([8, 4, 6]):
        alone, _ = attention(
            prompt.queries[b : b + 1, :, :length],
            prompt.keys[b : b + 1, :, :length],
            prompt.values[b : b + 1, :, :length],
            mask=padding_causal_mask(prompt.lengths[b : b + 1], length, length),
        )
        torch.testing.assert_close(out[b : b + 1, :, :length], alone, rtol=0, atol=1e-14)
