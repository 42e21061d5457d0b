"""Regenerate the README figures: python docs/img/make_figures.py (from the repository root)."""

from __future__ import annotations

from pathlib import Path

from rdusim.analysis.calibration.prefill_compare import breakdown_frames, compare_prefill
from rdusim.analysis.frontier import published_points, speed_throughput
from rdusim.analysis.plots import plot_breakdown, plot_speed_throughput, plot_sweep
from rdusim.analysis.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
MAPPING = ROOT / "mappings/deepseek-r1/prefill-snapstream.yaml"
BASELINE = ROOT / "mappings/deepseek-r1/prefill.yaml"  # derived from MAPPING when absent
DECODE = ROOT / "mappings/deepseek-r1/decode.yaml"
DECODE_SEQ_LENS = [8192, 32768, 131072]
DECODE_POLICIES = ["none", "streamingllm", "snapkv", "snapstream", "h2o", "longflow", "kascade"]


def prefill_breakdown() -> None:
    comparison = compare_prefill(MAPPING, [32768, 65536, 131072],
                                 baseline=BASELINE if BASELINE.exists() else None)
    ax = plot_breakdown(breakdown_frames(comparison), layer_type=None)
    ax.set_title("DeepSeek-R1 prefill on SN40L-16 (TP16): baseline vs SnapStream, all 61 layers")
    _save(ax.figure, "prefill-breakdown.png")


def decode_sweep() -> None:
    """The README's ``rdusim sweep`` (the same picture as its ``--plot``, with a title)."""
    axes = plot_sweep(sweep(DECODE, DECODE_SEQ_LENS, DECODE_POLICIES, "auto"))
    figure = axes[0, 0].figure
    figure.suptitle("DeepSeek-R1 decode on SN40L-16: throughput and time per output token vs batch "
                    "(2.4 tokens accepted per step)")
    _save(figure, "decode-sweep.png")


def speed_or_throughput() -> None:
    """The README's "Configured for speed or for throughput" (notebooks/06 draws the same)."""
    ax = plot_speed_throughput(speed_throughput(root=ROOT), published_points())
    ax.set_title("SN40L-16, 8K prompts: tokens/s per user vs aggregate, over batch (model lines, published marks)")
    _save(ax.figure, "speed-throughput.png")


def _save(figure, name: str) -> None:  # noqa: ANN001 (a matplotlib Figure)
    out = Path(__file__).with_name(name)
    figure.savefig(out, dpi=110)
    print(f"wrote {out.relative_to(ROOT)}")


def main() -> None:
    prefill_breakdown()
    decode_sweep()
    speed_or_throughput()


if __name__ == "__main__":
    main()
