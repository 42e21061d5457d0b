"""FA2's forward kernel at decode (one KV split) and at prefill by head_dim: what its time is made of.

Run on the GPU machine (bf16; measure.py's, sweep.py's and small_kernels.py's helpers):

    python benchmarks/gpu/fa2_mech.py --out fa2.csv --kernels kernels.csv [--only decode,diag,prefill]

Sections:

- ``decode``: FA2 decode through SDPA (one query a sequence, GQA) where FA2's split heuristic
  picks one split, so its forward kernel runs: batch 32-192 at 4096 keys and 512-16384 keys at
  batch 64 (32 x 8 heads, head_dim 128), one KV head's group of 8 (8 x 1) and no group (8 x 8),
  head_dim 64 and 256. KV caches cycled through 2x L2 (K/V come from HBM, as in a step). Kind
  ``sk_fa2`` (small_kernels.py's): the graph share and the profiled device time, kernel names.
- ``diag``: the same forward kernel with its K/V resident in L2 (one cache under L2's size,
  called again and again) against the same shape cycled through 2x L2 (kind ``fa2_l2``); and
  the decode grid with full query tiles (128 query rows a (sequence, KV head), MHA, no mask:
  the same CTAs, the same K/V bytes from HBM, 32x the rows; kind ``fa2_fullq``).
- ``holdout`` (run r, not in the default): ``HOLDOUT_DECODE`` and ``HOLDOUT_PREFILL``, other
  shapes the same two ways.
- ``prefill``: causal FA2 prefill at head_dim 64, 128 and 256 (8 x 1 heads at 8K-32K, 32 x 8
  at 16K) and without the mask at 16K (kind ``attn_prefill_l2``, sweep.py's), timed cold as
  sweep.py does, the kernel names of each head_dim.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure as M  # noqa: E402
import small_kernels as SK  # noqa: E402
import sweep as S  # noqa: E402
from fa2_mech_shapes import (  # noqa: E402
    DECODE_SHAPES,
    FULLQ_SHAPES,
    HOLDOUT_DECODE,
    HOLDOUT_PREFILL,
    L2_SHAPES,
    PREFILL_CASES,
)

BF16 = torch.bfloat16


def _decode_fns(batch: int, hq: int, hkv: int, kv_len: int, hd: int, device, copies: int) -> list:
    q = torch.randn(batch, hq, 1, hd, dtype=BF16, device=device)
    kvs = [(torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=device),
            torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=device)) for _ in range(copies)]
    return [lambda k=k, v=v: M.sdpa(q, k, v, False) for k, v in kvs]


def decode_rows(ctx: M.Ctx, shapes: list = DECODE_SHAPES) -> None:
    for batch, hq, hkv, kv_len, hd in shapes:
        cache = 2 * batch * hkv * kv_len * hd * 2
        fns = _decode_fns(batch, hq, hkv, kv_len, hd, ctx.device, max(2, math.ceil(2 * SK.l2_bytes() / cache)))
        SK.measure(ctx, "sk_fa2", f"fa2_b{batch}_h{hq}x{hkv}x{hd}_l{kv_len}", fns, batch=batch, q_heads=hq,
                   kv_heads=hkv, head_dim=hd, kv_len=kv_len, bytes=cache)
        del fns
        torch.cuda.empty_cache()


def diag_rows(ctx: M.Ctx) -> None:
    for batch, hq, hkv, kv_len, hd in L2_SHAPES:
        cache = 2 * batch * hkv * kv_len * hd * 2
        for where, copies in (("l2", 1), ("hbm", max(2, math.ceil(2 * SK.l2_bytes() / cache)))):
            fns = _decode_fns(batch, hq, hkv, kv_len, hd, ctx.device, copies)
            SK.measure(ctx, "fa2_l2", f"fa2_{where}_b{batch}_h{hq}x{hkv}x{hd}_l{kv_len}", fns, batch=batch,
                       q_heads=hq, kv_heads=hkv, head_dim=hd, kv_len=kv_len, bytes=cache, mode=where)
            del fns
            torch.cuda.empty_cache()
    for batch, hkv, kv_len, hd in FULLQ_SHAPES:
        cache = 2 * batch * hkv * kv_len * hd * 2
        q = torch.randn(batch, hkv, 128, hd, dtype=BF16, device=ctx.device)
        kvs = [(torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device),
                torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device))
               for _ in range(max(2, math.ceil(2 * SK.l2_bytes() / cache)))]
        fns = [lambda k=k, v=v, q=q: M.sdpa(q, k, v, False) for k, v in kvs]
        SK.measure(ctx, "fa2_fullq", f"fa2_fullq_b{batch}_h{hkv}x{hkv}x{hd}_l{kv_len}", fns, batch=batch,
                   q_heads=hkv, kv_heads=hkv, head_dim=hd, kv_len=kv_len, seq_len=128, bytes=cache)
        del kvs, fns, q
        torch.cuda.empty_cache()


def prefill_rows(ctx: M.Ctx, cases: list = PREFILL_CASES) -> None:
    from torch.nn.attention import SDPBackend

    profiled = set()
    for batch, hq, hkv, hd, length, causal in cases:
        fn = functools.partial(S.sdpa_fn(ctx, batch, hq, hkv, hd, length, SDPBackend.FLASH_ATTENTION), causal)
        t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
        pairs = length * (length + 1) // 2 if causal else length * length
        name = f"flash_hd_b{batch}_h{hq}x{hkv}x{hd}_l{length}" + ("" if causal else "_full")
        M.record(ctx, "prediction", "attn_prefill_l2", name, t, reps, batch=batch, seq_len=length, kv_len=length,
                 q_heads=hq, kv_heads=hkv, head_dim=hd, flops=4 * batch * hq * hd * pairs,
                 bytes=2 * batch * length * hd * (2 * hq + 2 * hkv), backend="flash",
                 mode="causal" if causal else "noncausal", kv_head_mb=round(4 * length * hd / 1e6, 1))
        if hd not in profiled:
            profiled.add(hd)
            for kn, dur in S.kernel_names(fn):
                SK.KERNEL_ROWS.append({"row": name, "index": 0, "kernel": kn[:300], "calls": 1,
                                       "device_us": round(dur, 3), "min_us": round(dur, 3)})
        del fn
        torch.cuda.empty_cache()


def holdout_rows(ctx: M.Ctx) -> None:
    decode_rows(ctx, HOLDOUT_DECODE)
    prefill_rows(ctx, HOLDOUT_PREFILL)


SECTIONS = {"decode": decode_rows, "diag": diag_rows, "prefill": prefill_rows, "holdout": holdout_rows}
DEFAULT = "decode,diag,prefill"  # runs p and q; ``holdout`` is run r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--env")
    ap.add_argument("--only", default=DEFAULT)
    args = ap.parse_args(argv)
    ctx = SK.gpu_ctx("fa2_mech.py", args.env, reduced_precision=False)
    if ctx is None:
        return 2
    M.run_sections({name: functools.partial(fn, ctx) for name, fn in SECTIONS.items()}, args.only,
                   lambda: (M.write(args.out, ctx), SK.write_kernels(args.kernels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
