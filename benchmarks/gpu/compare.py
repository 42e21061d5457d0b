"""Predicted vs measured on the committed H100 CSV: docs/gpu.md's table and parity plot.

    PYTHONPATH=. python benchmarks/gpu/compare.py [--csv benchmarks/gpu/h100-20261123b.csv]

Prints the calibration fit (from the ``calibration`` rows only; the constants in
hw_configs/h100.yaml come from it) and writes docs/gpu-table.md and docs/img/gpu-parity.png.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from rdusim.analysis.gpu import compare_rows, fit_calibration, summary
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {"attention": ("attn_prefill", "attn_decode", "kascade"), "gemm": ("gemm",),
          "norm/elementwise": ("rmsnorm", "silu_mul"), "launch": ("launch",),
          "e2e decode": ("e2e_decode",), "e2e prefill": ("e2e_prefill",)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default=str(ROOT / "benchmarks/gpu/h100-20261123b.csv"))
    ap.add_argument("--hw", default=str(ROOT / "hw_configs/h100.yaml"))
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.csv)))
    spec = load_spec(args.hw, GpuSpec)
    print("calibration fit (calibration rows only):", fit_calibration(rows, spec))
    model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    compared = compare_rows(rows, Gpu(spec), model)
    lines = ["| set | row | measured (us) | predicted (us) | error |", "|---|---|---:|---:|---:|"]
    for r in compared:
        err = "n/a" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        pred = "—" if r["predicted_us"] is None else f"{r['predicted_us']:.1f}"
        lines.append(f"| {r['set']} | {r['name']} | {float(r['median_us']):.1f} | {pred} | {err} |")
    lines += ["", "| prediction group | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    for label, kinds in GROUPS.items():
        for mode in ((None, "graph", "eager") if label == "e2e decode" else (None,)):
            s = summary(compared, kinds, mode)
            name = label + (f" ({mode})" if mode else "")
            lines.append(f"| {name} | {s['n']} | {s['median'] * 100:.1f}% | {s['worst'] * 100:.1f}% |")
        if label == "attention":
            for sub in kinds:
                s = summary(compared, (sub,))
                lines.append(f"| &nbsp; {sub} | {s['n']} | {s['median'] * 100:.1f}% | {s['worst'] * 100:.1f}% |")
    (ROOT / "docs/gpu-table.md").write_text("\n".join(lines) + "\n")
    _plot(compared, ROOT / "docs/img/gpu-parity.png")
    print("\n".join(lines[-14:]))
    return 0


def _plot(compared: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6.5))
    for i, (label, kinds) in enumerate(GROUPS.items()):
        pts = [(float(r["median_us"]), r["predicted_us"]) for r in compared
               if r["kind"] in kinds and r["predicted_us"] is not None]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=14, label=label, color=f"C{i}")
    lo, hi = 1.0, 1e6
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    for f in (0.85, 1.15):
        ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured on H100 (us)")
    ax.set_ylabel("rdusim predicted (us)")
    ax.set_title("H100: predicted vs measured (dotted: ±15%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
