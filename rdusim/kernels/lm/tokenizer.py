"""The model's byte-level BPE tokenizer, rebuilt from the GGUF metadata with ``tokenizers``.

Owns: ``build_tokenizer``. Imports: ``tokenizers`` (lazily), rdusim.kernels.lm.loader.

A GGUF file carries the vocabulary, the merges and the token types but not the pre-tokenizer
itself, only its llama.cpp name (``tokenizer.ggml.pre``). SmolLM2's is ``smollm``, which llama.cpp
defines as "every digit on its own, then the GPT-2 split"; with ``tokenizers`` that is
``Digits(individual_digits=True)`` followed by the GPT-2 ``ByteLevel`` split. Control tokens
(``<|im_start|>`` ...) are added as special tokens so they are never split.
"""

from __future__ import annotations

from typing import Any

from rdusim.kernels.lm.loader import MODEL_PACKAGE, ModelLoadError

_CONTROL = 3  # llama.cpp's token type for control tokens
_SUPPORTED_PRE = ("smollm",)


def build_tokenizer(metadata: dict[str, Any]) -> Any:
    """A ``tokenizers.Tokenizer`` equivalent to the one llama.cpp builds from this metadata.

    Use ``tokenizer.encode(text, add_special_tokens=False).ids`` and ``tokenizer.decode(ids)``.
    """
    tokenizers = _import_tokenizers()
    model, pre = metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre")
    if model != "gpt2" or pre not in _SUPPORTED_PRE:
        raise ModelLoadError(
            f"unsupported tokenizer (model {model!r}, pre-tokenizer {pre!r}); "
            f"this loader knows the one of {MODEL_PACKAGE} (gpt2 / smollm)"
        )
    tokens: list[str] = metadata["tokenizer.ggml.tokens"]
    merges = [tuple(merge.split(" ", 1)) for merge in metadata["tokenizer.ggml.merges"]]
    vocab = {token: index for index, token in enumerate(tokens)}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [
            tokenizers.pre_tokenizers.Digits(individual_digits=True),
            tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    types = metadata["tokenizer.ggml.token_type"]
    control = [token for token, kind in zip(tokens, types, strict=True) if kind == _CONTROL]
    tokenizer.add_special_tokens(control)
    return tokenizer


def _import_tokenizers() -> Any:
    try:
        import tokenizers
        import tokenizers.decoders
        import tokenizers.models
        import tokenizers.pre_tokenizers  # noqa: F401
    except ImportError as error:
        raise ModelLoadError(
            f"tokenizing needs the 'tokenizers' package ({error}); "
            "install it with: pip install tokenizers"
        ) from error
    return tokenizers
