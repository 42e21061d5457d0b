"""Regenerate the README figures: python docs/img/make_figures.py (from the repository root)."""

from __future__ import annotations

from pathlib import Path

from rdusim.analysis.compare import breakdown_frames, compare_prefill
from rdusim.analysis.plots import plot_breakdown

ROOT = Path(__file__).resolve().parents[2]
MAPPING = ROOT / "mappings/deepseek-r1/prefill-snapstream.yaml"
BASELINE = ROOT / "mappings/deepseek-r1/prefill.yaml"  # derived from MAPPING when absent


def main() -> None:
    comparison = compare_prefill(MAPPING, [32768, 65536, 131072],
                                 baseline=BASELINE if BASELINE.exists() else None)
    ax = plot_breakdown(breakdown_frames(comparison), layer_type=None)
    ax.set_title("DeepSeek-R1 prefill on SN40L-16 (TP16): baseline vs SnapStream, all 61 layers")
    out = Path(__file__).with_name("prefill-breakdown.png")
    ax.figure.savefig(out, dpi=110)
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
