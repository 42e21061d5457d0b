"""Freeze the model's predictions of every ``fa2_mech.py`` row on a GPU, before it is measured.

    PYTHONPATH=. python benchmarks/gpu/fa2_mech_predicted.py [--holdout] hw_configs/h100.yaml > PREDICTED.txt

Rows from ``fa2_mech.py``'s shape lists (nothing measured is read). ``sk_fa2`` and ``fa2_l2``: FA2
decode's device time (``micro_device_s``: the model has no L2 residency for decode K/V, so both
``fa2_l2`` rows of a shape get one prediction); ``fa2_fullq``: the forward kernel with 128 query
rows a (sequence, head), no mask, its device time; ``attn_prefill_l2``: timed alone (``predict_row``).
``predicted_s`` is the library's ``fa2_mech_s`` (rdusim.analysis.gpu.measured).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fa2_mech_shapes import (  # noqa: E402
    DECODE_SHAPES,
    FULLQ_SHAPES,
    HOLDOUT_DECODE,
    HOLDOUT_PREFILL,
    L2_SHAPES,
    PREFILL_CASES,
)

from rdusim.analysis.gpu.measured import fa2_mech_s as predicted_s  # noqa: E402
from rdusim.config.loader import load_spec  # noqa: E402
from rdusim.config.schema import GpuSpec  # noqa: E402
from rdusim.hw.gpu import Gpu  # noqa: E402


def rows(holdout: bool = False) -> list[dict]:
    """Runs p and q's rows, or (``holdout``) run r's."""
    decode, l2, fullq, prefill = ((HOLDOUT_DECODE, [], [], HOLDOUT_PREFILL) if holdout
                                  else (DECODE_SHAPES, L2_SHAPES, FULLQ_SHAPES, PREFILL_CASES))
    out = []
    for b, hq, hkv, kv, hd in decode:
        out.append(dict(set="micro", kind="sk_fa2", name=f"fa2_b{b}_h{hq}x{hkv}x{hd}_l{kv}", batch=b, q_heads=hq,
                        kv_heads=hkv, kv_len=kv, head_dim=hd))
    for b, hq, hkv, kv, hd in l2:
        for where in ("l2", "hbm"):
            out.append(dict(set="micro", kind="fa2_l2", name=f"fa2_{where}_b{b}_h{hq}x{hkv}x{hd}_l{kv}", batch=b,
                            q_heads=hq, kv_heads=hkv, kv_len=kv, head_dim=hd))
    for b, hkv, kv, hd in fullq:
        out.append(dict(set="micro", kind="fa2_fullq", name=f"fa2_fullq_b{b}_h{hkv}x{hkv}x{hd}_l{kv}", batch=b,
                        q_heads=hkv, kv_heads=hkv, kv_len=kv, head_dim=hd, seq_len=128))
    for b, hq, hkv, hd, L, causal in prefill:
        out.append(dict(set="prediction", kind="attn_prefill_l2", batch=b, q_heads=hq, kv_heads=hkv, head_dim=hd,
                        seq_len=L, kv_len=L, mode="causal" if causal else "noncausal",
                        name=f"flash_hd_b{b}_h{hq}x{hkv}x{hd}_l{L}" + ("" if causal else "_full")))
    return out


def main(argv: list[str]) -> int:
    holdout = "--holdout" in argv
    argv = [a for a in argv if a != "--holdout"]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    gpu = Gpu(load_spec(argv[0], GpuSpec))
    print(f"# predicted by {argv[0]} (rdusim's GPU model) for fa2_mech.py's {'holdout ' if holdout else ''}rows; us")
    print("kind,name,predicted_us")
    for r in rows(holdout):
        print(f"{r['kind']},{r['name']},{predicted_s(r, gpu) * 1e6:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
