"""KV-cache size per token (analytic, no torch) and the length each policy keeps.

Owns: ``kv_bytes_per_token_layer``, ``kept_tokens``. Imports: config.
"""

from __future__ import annotations

import math

from rdusim.config.schema import DTYPE_BYTES, KvPolicySpec, MlaSpec, ModelSpec


def kv_bytes_per_token_layer(model: ModelSpec) -> int:
    """Bytes cached per token and layer.

    MLA caches the 512-wide latent plus the 64-wide decoupled RoPE key (576 elements,
    hardware-and-models.md B.3); GQA caches K and V for every KV head.
    """
    a = model.attention
    elements = a.kv_lora_rank + a.qk_rope_head_dim if isinstance(a, MlaSpec) else 2 * a.kv_heads * a.head_dim
    return elements * DTYPE_BYTES[model.dtypes.kv]


def kept_tokens(seq_len: int, policy: KvPolicySpec) -> int:
    """Tokens per sequence the policy keeps after prefill (capacity of the compressed cache)."""
    return max(1, min(seq_len, math.ceil(seq_len / policy.compression)))
