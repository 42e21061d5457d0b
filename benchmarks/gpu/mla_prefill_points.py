"""Run bm (issue 17, P12: a fair GPU side for DeepSeek-R1): the points of MLA prefill attention on one H200.

``sweep.py --only mla_prefill`` measures them (``benchmarks/gpu/mla_prefill_run_bm.sh`` runs it):

- ``FLASH_POINTS``: causal batch-1 SDPA at head_dim 192 (q and k 128 + 64 wide, V zero-padded
  from 128 to 192 as vLLM does when FlashAttention-2 is its prefill kernel: FA2 wants one head_dim
  for q, k and v), as many KV heads as query heads (MLA's prefill runs multi-head attention on the
  up-projected keys and values). 16 heads is a TP8 share of DeepSeek-V3/R1's 128; 128 is one GPU
  holding them all. Rows ``flash_name(heads, length)`` on the FLASH_ATTENTION backend and the same
  with ``cudnn`` in place of ``flash`` on CUDNN_ATTENTION, where cuDNN runs it; FLOPs
  ``4 * heads * 192 * length * (length + 1) / 2``. The kernels of ``FLASH_PROFILED`` are named.
- ``BLOCK_POINTS``: the whole MLA prefill attention block as vLLM's ``_forward_prefill`` runs it
  (compute-friendly path: the latent KV up-projected for every token), eager PyTorch at batch 1
  on (heads, tokens): the input RMSNorm, q down-projection, its norm and up-projection, the KV
  down-projection (latent + rope key), its norm, the rotary embedding of q's and k's rope slices,
  the KV up-projection, K assembled (nope + the shared rope key broadcast over heads), V padded to
  192, FA2 causal attention, V's padding sliced off and the output projection. Rows
  ``block_name(heads, tokens)`` (CUDA events, the block's wall time on the GPU) and
  ``block_name(heads, tokens) + "_ksum"`` (the sum of its kernels' device times, one profiled call).

Shapes (``MLA``): DeepSeek-V3/R1's config.json (hidden_size 7168, q_lora_rank 1536,
kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, 128 attention heads).

Pure constants: imports without torch and without rdusim (``sweep.py`` takes them on the GPU host).
"""

from __future__ import annotations

#: DeepSeek-V3/R1 attention shapes (config.json)
MLA = dict(hidden=7168, q_lora_rank=1536, kv_lora_rank=512, qk_nope=128, qk_rope=64, v_head_dim=128, heads=128)
HEAD_DIM = MLA["qk_nope"] + MLA["qk_rope"]  # 192: q and k per head, and V once padded

#: (heads, length) of the causal batch-1 SDPA rows at head_dim 192 (heads == kv heads)
FLASH_POINTS = (
    *((16, length) for length in (1024, 2048, 4096, 8192, 16384, 32768, 65536)),
    *((128, length) for length in (1024, 2048, 4096, 8192, 16384, 32768)),
)
#: FLASH_POINTS whose flash call's kernels are profiled
FLASH_PROFILED = ((16, 8192), (128, 8192))
#: (heads, tokens) of the whole MLA prefill attention block
BLOCK_POINTS = ((16, 2048), (16, 8192), (16, 16384), (128, 2048), (128, 8192))


def flash_name(heads: int, length: int) -> str:
    """The FLASH_ATTENTION row of one FLASH_POINTS point (``mla_cudnn_...`` for cuDNN's)."""
    return f"mla_flash_prefill_h{heads}x{heads}x192_l{length}"


def block_name(heads: int, tokens: int) -> str:
    """The row of one BLOCK_POINTS point (``+ "_ksum"``: its kernels' summed device time)."""
    return f"mla_block_h{heads}_t{tokens}"
