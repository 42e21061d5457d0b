"""Run bo's Nsight Compute profiles of FlashAttention-3's forward, one line per point.

    PYTHONPATH=. python benchmarks/gpu/fa3_ncu_read.py > benchmarks/gpu/h200-20261129bo-fa3-ncu.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_ncu_read.py h200-20261129bp > benchmarks/gpu/h200-20261129bp-fa3-ncu.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_ncu_read.py h200-20261129br > benchmarks/gpu/h200-20261129br-fa3-ncu.txt

Reads ``h200-20261129bo-<point>.csv.gz`` (``fa3_ncu_run_bo.sh``: ``ncu --page raw --csv``, SM clock
uncontrolled; gzipped when committed) and prints the kernel's duration, its SM clock, its TFLOP/s at ``fa3_points.flops``,
the tensor pipe's (wgmma) and the XU pipe's (MUFU: exponentials) busy share, issue activity, and
XU and FMA instructions per attention score (the scores its tiles compute). Run br's profiles carry
``EXTRA`` too (DRAM bytes read, the L2 sector hit rate, the SMs' active cycles over elapsed): a second
table.
"""

from __future__ import annotations

import csv
import gzip
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (the points, beside this file)

HERE = Path(__file__).resolve().parent
RUN = "h200-20261129bo"  # the default run; the first argument names another
METRICS = {
    "us": "gpu__time_duration.sum",
    "clock_hz": "sm__cycles_elapsed.avg.per_second",
    "tensor_pct": "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
    "xu_pct": "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "fma_pct": "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "alu_pct": "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "issue_pct": "sm__issue_active.avg.pct_of_peak_sustained_active",
    "xu_inst": "sm__inst_executed_pipe_xu.sum",
    "fma_inst": "sm__inst_executed_pipe_fma.sum",
    "alu_inst": "sm__inst_executed_pipe_alu.sum",
    "inst": "smsp__inst_executed.sum",
}
#: run br's metrics beyond run bo's (``fa3_ncu_run_bo.sh``'s ``EXTRA``)
EXTRA = {
    "dram_bytes": "dram__bytes_read.sum",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "active_cycles": "sm__cycles_active.avg",
    "elapsed_cycles": "sm__cycles_elapsed.avg",
}


def read(path: Path) -> dict[str, float]:
    with gzip.open(path, "rt") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.startswith('"')]
    header, _units, values = list(csv.reader(lines))[:3]
    row = dict(zip(header, values, strict=True))
    out = {}
    for key, metric in (METRICS | {k: m for k, m in EXTRA.items() if m in row}).items():
        raw = row[metric].replace(",", "")
        out[key] = float(raw) * (1e-3 if key == "us" else 1.0)  # ns -> us
    return out


def scores(point: tuple) -> float:
    """Attention scores the point's tiles compute (causal: the tile-rounded triangle)."""
    b, h, _, hd, hdv, n, causal, _ = point
    return f3.flops(point) / (2 * (hd + hdv))


def main(run: str = RUN) -> None:
    print("| point | us | SM clock GHz | TFLOP/s | tensor pipe % | XU pipe % | FMA % | ALU % | issue % "
          "| XU inst / score x 32 | FMA inst / score x 32 | ALU inst / score x 32 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    extra = []
    for point in dict.fromkeys(f3.POINTS + f3.NCU_POINTS + f3.VARLEN_NCU):
        path = HERE / f"{run}-{f3.name(point)}.csv.gz"
        if not path.exists():
            continue
        m = read(path)
        if "dram_bytes" in m:
            extra.append((f3.name(point), m))
        s = scores(point)
        print(f"| {f3.name(point)} | {m['us']:.1f} | {m['clock_hz'] / 1e9:.2f} | {f3.flops(point) / m['us'] / 1e6:.0f} | "
              f"{m['tensor_pct']:.1f} | {m['xu_pct']:.1f} | {m['fma_pct']:.1f} | {m['alu_pct']:.1f} | {m['issue_pct']:.1f} | "
              f"{m['xu_inst'] * 32 / s:.2f} | {m['fma_inst'] * 32 / s:.2f} | {m['alu_inst'] * 32 / s:.2f} |")
    if extra:
        print("\n| point | DRAM MB read | L2 hit % | SM active cycles | elapsed cycles | active / elapsed |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, m in extra:
            print(f"| {name} | {m['dram_bytes'] / 1e6:.1f} | {m['l2_hit_pct']:.1f} | {m['active_cycles']:.0f} | "
                  f"{m['elapsed_cycles']:.0f} | {m['active_cycles'] / m['elapsed_cycles']:.1%} |")


if __name__ == "__main__":
    main(*sys.argv[1:2])
