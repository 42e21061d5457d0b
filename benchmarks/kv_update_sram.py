"""On-chip memory of the SnapStream decode update, ring buffer vs naive (README, docs/kernels.md).

    python benchmarks/kv_update_sram.py [--seq-len 32768] [--batch 64,256]

For each batch: SRAM per socket by op of the kernel holding the update (allocated onto
512 KiB PMUs), the total, naive/ring, the share the update's own ops take, whether it fits
the 1040 PMUs, and the simulated decode step.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rdusim.analysis.kv_update import kv_update_comparison

ROOT = Path(__file__).resolve().parents[1]
MAPPING = ROOT / "mappings/deepseek-r1/decode-snapstream.yaml"
MiB = 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=32768)
    parser.add_argument("--batch", default="64,256")
    args = parser.parse_args(argv)
    for batch in (int(b) for b in args.batch.split(",")):
        by_op, summary = kv_update_comparison(MAPPING, args.seq_len, batch)
        print(f"\nDeepSeek-R1 SnapStream decode, {args.seq_len // 1024}K prompt, batch {batch} "
              f"({batch // 16} sequences per socket), kernel {summary['kernel'].iloc[0]}\n")
        ops = by_op.pivot_table(index="op", columns="update", values="sram_bytes", sort=False).fillna(0.0)
        print("| op | ring (MiB) | naive (MiB) |\n|---|---:|---:|")
        for op, row in ops.iterrows():
            print(f"| {op} | {row.get('ring', 0) / MiB:.2f} | {row.get('naive', 0) / MiB:.2f} |")
        print("\n| update | SRAM per socket | PMUs (of 1040) | vs ring | update ops' share | fits | step |")
        print("|---|---:|---:|---:|---:|---|---:|")
        for row in summary.itertuples():
            print(f"| {row.update} | {row.sram_bytes / MiB:.1f} MiB | {row.pmus} | x{row.vs_ring:.2f} "
                  f"| {row.indexing_share:.1%} | {row.fits} | {row.step_s * 1e3:.2f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
