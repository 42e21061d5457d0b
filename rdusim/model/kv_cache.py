"""KV-cache size per token (analytic, no torch); the length each policy keeps is in policy.py.

Owns: ``kv_bytes_per_token_layer``. Imports: config.
"""

from __future__ import annotations

from rdusim.config.schema import DTYPE_BYTES, MlaSpec, ModelSpec


def kv_bytes_per_token_layer(model: ModelSpec) -> int:
    """Bytes cached per token and layer.

    MLA caches the 512-wide latent plus the 64-wide decoupled RoPE key (576 elements,
    hardware-and-models.md B.3); GQA caches K and V for every KV head.
    """
    a = model.attention
    elements = a.kv_lora_rank + a.qk_rope_head_dim if isinstance(a, MlaSpec) else 2 * a.kv_heads * a.head_dim
    return elements * DTYPE_BYTES[model.dtypes.kv]
