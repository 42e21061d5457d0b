"""Run bo (issue 17, P12; a diagnostic, explained after measurement): one FlashAttention-3 forward call
of a ``fa3_points`` point, for Nsight Compute to profile (``fa3_ncu_run_bo.sh``).

    python3 benchmarks/gpu/fa3_ncu.py fa3_func_causal_b1_h16x16x128v128_l16384

Runs the point's ``flash_attn_func`` (or, a ``varlen`` point of run br, ``flash_attn_varlen_func``
as ``sweep.py`` calls it) three times (the third is the one ``ncu -s 2 -c 1`` profiles) on random
bf16 inputs, with the carried ``fa3-fwd`` wheel on the path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (the points, beside this file)


def main() -> int:
    import fa3_fwd_config  # the wheel's interface reads its build flags as flash_attn_config

    sys.modules.setdefault("flash_attn_config", fa3_fwd_config)
    from fa3_fwd_interface import flash_attn_func, flash_attn_varlen_func

    point = next(p for p in f3.POINTS + f3.NCU_POINTS + f3.VARLEN_NCU if f3.name(p) == sys.argv[1])
    b, h, hkv, hd, hdv, n, causal, api = point
    q = torch.randn(b, n, h, hd, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, n, hkv, hd, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, n, hkv, hdv, dtype=torch.bfloat16, device="cuda")
    if api == "varlen":
        cu = torch.arange(0, (b + 1) * n, n, dtype=torch.int32, device="cuda")
        q, k, v = (x.reshape(b * n, *x.shape[2:]) for x in (q, k, v))
    for _ in range(3):
        if api == "varlen":
            flash_attn_varlen_func(q, k, v, cu, cu, n, n, causal=causal)
        else:
            flash_attn_func(q, k, v, causal=causal)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
