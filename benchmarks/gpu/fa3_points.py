"""Run bn (issue 17, P12: FlashAttention-3 measured): the points of FA3's forward on one H200.

``sweep.py --only fa3_prefill`` measures them (``benchmarks/gpu/fa3_run_bn.sh`` runs it) with the
``fa3-fwd`` wheel (0.0.3: FlashAttention-3's hopper/ forward built against PyTorch's stable ABI and
CUDA 13, backward and paged KV left out; its ``fa3_fwd_interface.flash_attn_func``):

- ``PAPER_POINTS``: the FlashAttention-3 paper's Fig. 5 setup (G4; hardware-and-models.md D.2):
  batch x seqlen = 16K tokens, hidden 2048 (heads = 2048 / head_dim), 512-16K, head_dim 64 and
  128 causal, 128 non-causal, 256 causal. On the H100 the paper published these; here they run on
  an H200 (the same SMs, HBM3e), every one a prediction of the model fitted to two H100 columns.
- ``MLA_POINTS``: DeepSeek-R1's MLA prefill attention as vLLM runs it on Hopper: q and k 192 wide,
  V 128 (not padded), as many KV heads as query heads, causal, batch 1; 16 heads (a TP8 share)
  1K-64K and 128 heads 1K-32K: run bm's FA2 and cuDNN points. ``MLA_VARLEN``: two of them again
  through ``flash_attn_varlen_func``, vLLM's call (a varlen scheduler, no clusters).
- ``GQA_POINTS``: Llama-3.1-8B's and -70B's full head shapes (32 x 8 and 64 x 8, head_dim 128),
  causal, batch 1, shapes FA3's figures do not have.

Each row: kind ``fa3_prefill``, set ``prediction``, timed cold (``measure.time_fn``: L2 flushed,
CUDA events around each call, the median); ``extra`` holds ``head_dim_v`` and ``api``. The kernels
of ``PROFILED`` are named (their template arguments carry the tile).

Pure constants: imports without torch and without rdusim (``sweep.py`` takes them on the GPU host).
"""

from __future__ import annotations

from typing import NamedTuple

SEQ = (512, 1024, 2048, 4096, 8192, 16384)
#: (head_dim, causal) of the paper's columns
PAPER_COLUMNS = ((128, True), (64, True), (128, False), (256, True))
#: (batch, heads, kv_heads, head_dim, head_dim_v, seq_len, causal, api)
PAPER_POINTS = tuple((16384 // s, 2048 // hd, 2048 // hd, hd, hd, s, causal, "func")
                     for hd, causal in PAPER_COLUMNS for s in SEQ)
MLA_POINTS = (
    *((1, 16, 16, 192, 128, n, True, "func") for n in (1024, 2048, 4096, 8192, 16384, 32768, 65536)),
    *((1, 128, 128, 192, 128, n, True, "func") for n in (1024, 2048, 4096, 8192, 16384, 32768)),
)
MLA_VARLEN = ((1, 16, 16, 192, 128, 8192, True, "varlen"), (1, 16, 16, 192, 128, 32768, True, "varlen"))
GQA_POINTS = (
    *((1, 32, 8, 128, 128, n, True, "func") for n in (4096, 16384, 65536)),
    *((1, 64, 8, 128, 128, n, True, "func") for n in (8192, 32768)),
)
POINTS = PAPER_POINTS + MLA_POINTS + MLA_VARLEN + GQA_POINTS
#: points whose FA3 call is profiled (kernel names)
PROFILED = ((1, 16, 16, 128, 128, 16384, True, "func"), (1, 16, 16, 128, 128, 16384, False, "func"),
            (1, 32, 32, 64, 64, 16384, True, "func"), (1, 8, 8, 256, 256, 16384, True, "func"),
            (1, 16, 16, 192, 128, 8192, True, "func"), (1, 16, 16, 192, 128, 8192, True, "varlen"),
            (1, 32, 8, 128, 128, 16384, True, "func"))


#: run bp (Nsight Compute only, ``fa3_ncu_run_bp.sh``): head dims run bn did not time, and two long
#: shapes of its own: head_dim 96 and 192 (with V 192), causal, 16 heads at 16K; GQA 32 x 8 at 64K;
#: the MLA shape with 128 heads at 8K
NCU_POINTS = ((1, 16, 16, 96, 96, 16384, True, "func"), (1, 16, 16, 192, 192, 16384, True, "func"),
              (1, 32, 8, 128, 128, 65536, True, "func"), (1, 128, 128, 192, 128, 8192, True, "func"))


#: run bq (frozen after the pipe law, ``fa3_run_bq.sh``): shapes no run timed, as deployments run
#: them: GQA at head_dim 128 (Qwen3-8B / Llama-3.1-8B's 32 x 8, batch 1 and 4; Llama-3.1-70B's TP8
#: share 8 x 1; Llama-3.1-8B's TP2 share 16 x 4), head_dim 64 GQA (gpt-oss's 64 x 8) and MHA at
#: batch 4, head_dim 96 (32 x 32, Phi-3-mini's), head_dim 256 (Gemma's 16 x 8, and 8 x 8 at batch
#: 4), DeepSeek-R1's MLA at TP4 and TP2 shares (32 and 64 heads), 192 / 192, and non-causal at 4K
#: x 4 and 32K
BQ_POINTS = (
    *((1, 32, 8, 128, 128, n, True, "func") for n in (2048, 8192, 32768)),
    (4, 32, 8, 128, 128, 4096, True, "func"),
    *((1, 8, 1, 128, 128, n, True, "func") for n in (8192, 32768)),
    (1, 16, 4, 128, 128, 16384, True, "func"),
    *((1, 64, 8, 64, 64, n, True, "func") for n in (8192, 32768)),
    (4, 32, 32, 64, 64, 4096, True, "func"),
    *((1, 32, 32, 96, 96, n, True, "func") for n in (4096, 16384)),
    (1, 16, 8, 256, 256, 8192, True, "func"),
    (4, 8, 8, 256, 256, 4096, True, "func"),
    *((1, 32, 32, 192, 128, n, True, "func") for n in (4096, 16384)),
    (1, 64, 64, 192, 128, 8192, True, "func"),
    (1, 16, 16, 192, 192, 8192, True, "func"),
    (4, 16, 16, 128, 128, 4096, False, "func"),
    (1, 16, 16, 128, 128, 32768, False, "func"),
)
#: run bq: after its back-to-back calls each point is timed once more, one call after this long idle
BQ_IDLE_S = 1.0
#: run bq's points whose FA3 call is profiled (kernel names: the tiles at head_dim 96, 64 GQA, 256 GQA)
BQ_PROFILED = ((1, 32, 32, 96, 96, 16384, True, "func"), (1, 64, 8, 64, 64, 8192, True, "func"),
               (1, 16, 8, 256, 256, 8192, True, "func"), (1, 16, 16, 192, 192, 8192, True, "func"))


#: run br (a diagnostic: why vLLM's ``flash_attn_varlen_func`` took 35% longer than ``flash_attn_func`` at
#: 8K in run bn and 2% at 32K): both calls at DeepSeek-R1's MLA shape, 16 heads 4K-32K, 32 and 128
#: heads at 8K; ``VARLEN_NCU``: the 8K pair Nsight Compute profiles (with DRAM bytes and L2 hits)
VARLEN_POINTS = tuple((1, h, h, 192, 128, n, True, api)
                      for h, n in ((16, 4096), (16, 8192), (16, 16384), (16, 32768), (32, 8192), (128, 8192))
                      for api in ("func", "varlen"))
VARLEN_NCU = ((1, 16, 16, 192, 128, 8192, True, "func"), (1, 16, 16, 192, 128, 8192, True, "varlen"))


#: run bs: Llama-3.1-8B's whole prefill step (batch 1, eager) with FA3's attention, and with FA2's
#: (SDPA) beside it, at these prompt lengths; ``E2E_STEPS`` steps back to back after 1 s idle
E2E_LENGTHS = (4096, 8192, 16384, 32768)
E2E_STEPS = 12


#: run bt: FlashAttention-3 at decode (one query a sequence over a contiguous cache of ``kv_len``
#: keys, ``flash_attn_with_kvcache`` with ``cache_seqlens``: vLLM's varlen call on Hopper), FA2's
#: decode (SDPA) beside it on the same tensors: (batch, q_heads, kv_heads, head_dim, kv_len).
#: Llama-3.1-8B's 32 x 8 at batch 1-128 and 1K-32K; Llama-3.1-70B's TP8 share 8 x 1; head_dim 64
#: (Llama-3.2-1B's 32 x 8)
DECODE_POINTS = (
    *((b, 32, 8, 128, n) for b in (1, 8, 32, 128) for n in (1024, 8192, 32768)),
    *((b, 8, 1, 128, n) for b in (1, 32) for n in (8192, 32768)),
    *((b, 32, 8, 64, n) for b in (1, 32) for n in (8192,)),
)
#: run bt: Llama-3.1-8B's whole decode step, CUDA-graph replayed, with FA3's decode call and with FA2's
#: (SDPA) at P10's (batch, kv_len) points (measure.py's ``e2e_rows``)
E2E_DECODE = ((1, 1024), (1, 8192), (1, 32768), (8, 8192), (32, 4096), (32, 8192), (64, 2048), (128, 1024))
#: run bt: the decode step whose graph replay is profiled (every kernel named), with each attention
E2E_DECODE_PROFILED = ((32, 8192),)


#: run bu: one GPU's share of Llama-3.1-70B's TP8 decode step (the layout compare-hw prices on
#: 8 x H200: 8 query heads, 1 KV head, FFN 3584, vocabulary 16032, 80 layers; no NCCL), literal
#: (the device has no rdusim; tests check it against the model document split 8 ways)
SHARD_70B_TP8 = dict(layers=80, hidden=8192, q_heads=8, kv_heads=1, head_dim=128, ffn=3584, vocab=16032)
#: run bu: (batch, kv_len) of the shard's graph decode step with FA3's decode and FA2's: the serving
#: tight-TPOT point (batch 1 x 2K), run ap's batch 32 x 8K, batch 128 (FA2 split-KV) and compare-hw's
#: largest batch on 8 x H200 at 8K (367: FA2's one-split forward kernel)
SHARD_POINTS = ((1, 2048), (32, 8192), (128, 8192), (367, 8192))


def shard_name(batch: int, kv_len: int, kernel: str, tp: int = 8) -> str:
    """The row name of one shard step (runs bu, bw)."""
    return f"llama3.1-70b-tp{tp}shard_decode_{kernel}_b{batch}_l{kv_len}_graph"


#: run bw (held out, frozen after runs bt and bu): decode calls at shapes and points neither run had:
#: Llama-3.1-8B's 32 x 8 at batch 2-256; Llama-3.1-70B's full 64 x 8 (a group of 8); its TP4 share
#: 16 x 2; Llama-3.1-8B's TP2 share 16 x 4 (to 64K); multi-head 32 x 32 (a group of 1); head_dim 64
#: at 32 x 8 (Llama-3.2-1B) and 64 x 8 (gpt-oss); Llama-3.1-70B's TP8 share at 128K keys
HOLDOUT_CALLS = (
    (2, 32, 8, 128, 4096), (16, 32, 8, 128, 16384), (64, 32, 8, 128, 2048), (256, 32, 8, 128, 1024),
    (4, 64, 8, 128, 8192), (32, 64, 8, 128, 4096),
    (8, 16, 2, 128, 16384), (64, 16, 2, 128, 4096),
    (1, 16, 4, 128, 65536), (16, 16, 4, 128, 8192),
    (1, 32, 32, 128, 16384), (8, 32, 32, 128, 4096),
    (8, 32, 8, 64, 4096), (128, 32, 8, 64, 2048), (1, 64, 8, 64, 32768),
    (1, 8, 1, 128, 131072),
)
#: run bw: Llama-3.1-8B's whole graph decode step at (batch, kv_len) points no run measured
HOLDOUT_STEPS = ((2, 16384), (16, 2048), (96, 4096), (256, 512))
#: run bw: one GPU's share of Llama-3.1-70B's TP4 decode step (16 query heads, 2 KV heads, FFN 7168,
#: vocabulary 32064, 80 layers; no NCCL), literal, and its (batch, kv_len) points
SHARD_70B_TP4 = dict(layers=80, hidden=8192, q_heads=16, kv_heads=2, head_dim=128, ffn=7168, vocab=32064)
HOLDOUT_SHARD = ((1, 4096), (16, 8192), (64, 4096), (192, 2048))


class DecodeRun(NamedTuple):
    """What one FA3 decode run measures: calls (FA3's and FA2's on the same tensors), Llama-3.1-8B's
    graph steps (those profiled), and one GPU's share of Llama-3.1-70B at ``shard_tp`` (a literal
    shape) at ``shard_points``; every step with each attention."""

    calls: tuple = ()
    steps: tuple = ()
    steps_profiled: tuple = ()
    shard: dict | None = None
    shard_tp: int = 8
    shard_points: tuple = ()


RUN_BT = DecodeRun(DECODE_POINTS, E2E_DECODE, E2E_DECODE_PROFILED)
RUN_BU = DecodeRun(shard=SHARD_70B_TP8, shard_tp=8, shard_points=SHARD_POINTS)
RUN_BW = DecodeRun(HOLDOUT_CALLS, HOLDOUT_STEPS, (), SHARD_70B_TP4, 4, HOLDOUT_SHARD)
#: run bx (a diagnostic of run bw's one miss, Llama-3.1-8B's FA3 step at batch 256 x 512 keys): FA3's
#: call at 512 keys (batch 64-256) and 256 keys, and that step, its graph replay profiled kernel by kernel
RUN_BX = DecodeRun(((256, 32, 8, 128, 512), (256, 32, 8, 128, 256), (128, 32, 8, 128, 512), (64, 32, 8, 128, 512)),
                   ((256, 512),), ((256, 512),))
#: run by (frozen after a tile's wait for the store ahead of it was modelled): FA3's decode where SMs walk
#: several tiles, at points no run had: Llama-3.1-8B's 32 x 8 at batch 192 x 768 keys, its TP2 share
#: 16 x 4 at 96 x 2K, Llama-3.1-70B's TP8 share 8 x 1 at 384 x 4K, its TP4 share 16 x 2 at 512 x 512, its
#: full 64 x 8 at 256 x 256, head_dim 64 at 160 x 1K; the 8B's graph step at 192 x 768 and 384 x 256,
#: the 70B TP4 shard's at 256 x 1K and 128 x 3K
RUN_BY = DecodeRun(((192, 32, 8, 128, 768), (96, 16, 4, 128, 2048), (384, 8, 1, 128, 4096),
                    (512, 16, 2, 128, 512), (256, 64, 8, 128, 256), (160, 32, 8, 64, 1024)),
                   ((192, 768), (384, 256)), (), SHARD_70B_TP4, 4, ((256, 1024), (128, 3072)))
#: run cb (frozen after FA3's math over whole key blocks): pairs one key apart across a block edge (176 / 177 and
#: 352 / 353 keys at head_dim 128, 192 / 193 at 64, the 64 x 8 group at 528 / 529), two calls whose split count leaves
#: empty splits (24 blocks over 21, 18 over 16), Llama-3.1-8B's graph step at 320 x 176 / 177 and 256 x 352 / 353, the
#: 70B TP4 shard's at 192 x 176 / 177
RUN_CB = DecodeRun(((256, 32, 8, 128, 176), (256, 32, 8, 128, 177), (256, 32, 8, 128, 352), (256, 32, 8, 128, 353),
                    (256, 32, 8, 64, 192), (256, 32, 8, 64, 193), (128, 64, 8, 128, 528), (128, 64, 8, 128, 529),
                    (1, 8, 1, 128, 4096), (1, 16, 2, 128, 3000)),
                   ((320, 176), (320, 177), (256, 352), (256, 353)), (), SHARD_70B_TP4, 4, ((192, 176), (192, 177)))
DECODE_RUNS = {"bt": RUN_BT, "bu": RUN_BU, "bw": RUN_BW, "bx": RUN_BX, "by": RUN_BY, "cb": RUN_CB}
#: run by: FA3 prefill with many short tiles a CTA (the same wait), shapes no run had
BY_PREFILL = (
    (64, 16, 16, 128, 128, 512, True, "func"),
    (32, 32, 8, 128, 128, 1024, True, "func"),
    (16, 64, 8, 128, 128, 2048, True, "func"),
    (8, 16, 16, 128, 128, 4096, False, "func"),
    (32, 32, 32, 64, 64, 1024, True, "func"),
    (16, 16, 16, 256, 256, 1024, True, "func"),
)


def decode_name(point: tuple, kernel: str = "fa3") -> str:
    """The row name of one decode point (``kernel``: ``fa3`` or ``fa2``)."""
    b, h, hkv, hd, n = point
    return f"{kernel}_decode_b{b}_h{h}x{hkv}x{hd}_l{n}"


def name(point: tuple) -> str:
    """The row name of one point."""
    b, h, hkv, hd, hdv, n, causal, api = point
    mode = "causal" if causal else "noncausal"
    return f"fa3_{api}_{mode}_b{b}_h{h}x{hkv}x{hd}v{hdv}_l{n}"


def flops(point: tuple) -> int:
    """Tensor FLOPs as the paper counts them: 2 s^2 h (d + dv) per sequence, halved when causal."""
    b, h, _, hd, hdv, n, causal, _ = point
    return b * h * n * n * 2 * (hd + hdv) // (2 if causal else 1)
