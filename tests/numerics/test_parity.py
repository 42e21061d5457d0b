"""Our Llama forward and tokenizer against transformers' own GGUF loading of the same file.

transformers un-permutes llama.cpp's Q/K rows itself (``_reverse_permute_weights``), so a
wrong un-permutation, RoPE layout, norm epsilon or tied head shows up as a logit mismatch.
"""

from __future__ import annotations

import pytest
import torch
import transformers  # test-only dependency: the parity oracle

from rdusim.kernels import lm

TEXT = (
    "The pass key is 12345. Remember it. x1 abc123 don't  stop\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>"
)


@pytest.fixture(scope="module")
def reference(model: lm.LanguageModel) -> object:
    return transformers.AutoModelForCausalLM.from_pretrained(
        str(model.path.parent), gguf_file=model.path.name, dtype=torch.float32
    )


@pytest.mark.slow
def test_tokenizer_matches_transformers(model: lm.LanguageModel) -> None:
    reference = transformers.AutoTokenizer.from_pretrained(
        str(model.path.parent), gguf_file=model.path.name
    )
    assert model.encode(TEXT) == reference(TEXT, add_special_tokens=False).input_ids
    assert model.decode(model.encode(TEXT)) == TEXT


@pytest.mark.slow
def test_prefill_and_decode_logits_match_transformers(
    model: lm.LanguageModel, reference: object
) -> None:
    ids = model.encode(TEXT)
    with torch.inference_mode():
        expected = reference(torch.tensor([ids])).logits[0]  # type: ignore[operator]
        logits, layers = model.llama.prefill(torch.tensor(ids))
        cache = lm.build_caches(
            "full", lm.prefill_prompt(model, ids), budget=1, sink=4, max_new_tokens=1
        )
        next_token = int(expected[-1].argmax())
        stepped = model.llama.decode(next_token, len(ids), cache)
        expected_next = reference(torch.tensor([[*ids, next_token]])).logits[0, -1]  # type: ignore[operator]
    scale = expected.abs().max()
    torch.testing.assert_close(logits, expected[-1], rtol=0, atol=1e-4 * scale)
    torch.testing.assert_close(stepped, expected_next, rtol=0, atol=1e-4 * scale)
    assert len(layers) == model.llama.config.n_layers
