"""Regenerate the README figures: python docs/img/make_figures.py (from the repository root)."""

from __future__ import annotations

from pathlib import Path

from rdusim.analysis.calibration.prefill_compare import breakdown_frames, compare_prefill
from rdusim.analysis.frontier import published_points, speed_throughput
from rdusim.analysis.plots import plot_breakdown, plot_speed_throughput, plot_sweep
from rdusim.analysis.serving.metrics import Slo
from rdusim.analysis.serving.plots import plot_goodput_vs_rate
from rdusim.analysis.serving.sweep import serve_sweep
from rdusim.analysis.serving.workload import GeneratedWorkload, parse_distribution
from rdusim.analysis.sweep import sweep
from rdusim.cli.serve import DEFAULT_OUTPUT, DEFAULT_PROMPT

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


#: the README's SN40L-vs-GPU traffic comparison: (title, deployments, rates, tight TPOT SLO in s)
SERVING = [
    ("Llama-3.1-8B: SN40L-8 vs 8 x H100",
     ["mappings/llama-3.1-8b/serve.yaml", "mappings/llama-3.1-8b/serve-h100.yaml",
      "mappings/llama-3.1-8b/serve-h100x8-tp8.yaml"],
     [1, 2, 4, 6, 8, 12, 16, 24, 32, 40, 48], 0.006),
    ("Llama-3.1-70B: SN40L-16 vs 8 x H200",
     ["mappings/llama-3.1-70b/serve-tp16.yaml", "mappings/llama-3.1-70b/serve-h200x8.yaml"],
     [0.25, 0.5, 1, 1.5, 2, 3, 4, 5], 0.015),
]


def serving_sn40l_vs_gpu() -> None:
    """The README's "Which system serves my traffic": goodput over offered rate, chat SLOs and a tight TPOT."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    workload = GeneratedWorkload(parse_distribution("lognormal:2048,0.5", "--prompt-tokens"),
                                 parse_distribution("lognormal:256,0.6", "--output-tokens"),
                                 duration_s=None, requests=2000)
    figure, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for row, (title, paths, rates, tight) in zip(axes, SERVING, strict=True):
        for ax, slo in zip(row, (Slo(2.0, 0.050), Slo(2.0, tight)), strict=True):
            plot_goodput_vs_rate(serve_sweep([str(ROOT / p) for p in paths], rates, workload, slo), ax=ax)
            ax.set_title(f"{title}\nTTFT <= {slo.ttft_s:g} s, TPOT <= {slo.tpot_s * 1e3:g} ms", fontsize="medium")
    figure.suptitle("Goodput over offered rate: 2K-token prompts, 256-token outputs (lognormal), Poisson arrivals")
    figure.tight_layout()
    _save(figure, "serving-sn40l-vs-gpu.png")


#: the README's "DeepSeek-R1 on SN40L and on H200s": the published SN40L deployment and its GPU
#: counterpart at both KV policies, serve-sweep's default workload (32K prompts, 1K outputs, 600 s)
DEEPSEEK_SERVING = ["mappings/deepseek-r1/serve.yaml", "mappings/deepseek-r1/serve-h200x8.yaml",
                    "mappings/deepseek-r1/serve-snapstream.yaml", "mappings/deepseek-r1/serve-snapstream-h200x8.yaml"]


def serving_deepseek() -> None:
    """Goodput over offered rate of the four DeepSeek-R1 deployments (TTFT <= 10 s, TPOT <= 100 ms)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    workload = GeneratedWorkload(parse_distribution(DEFAULT_PROMPT, "--prompt-tokens"),
                                 parse_distribution(DEFAULT_OUTPUT, "--output-tokens"), duration_s=600.0)
    figure, ax = plt.subplots(figsize=(8, 5))
    plot_goodput_vs_rate(serve_sweep([str(ROOT / p) for p in DEEPSEEK_SERVING], [0.1, 0.2, 0.5, 1, 1.5, 2, 3, 4],
                                     workload, Slo(10.0, 0.100)), ax=ax)
    ax.set_title("DeepSeek-R1, six prefill nodes + one decode node: SN40L-16 vs 8 x H200\n"
                 "32K-token prompts, 1K outputs (lognormal); TTFT <= 10 s, TPOT <= 100 ms", fontsize="medium")
    figure.tight_layout()
    _save(figure, "serving-deepseek-sn40l-vs-h200.png")


def _save(figure, name: str) -> None:  # noqa: ANN001 (a matplotlib Figure)
    out = Path(__file__).with_name(name)
    figure.savefig(out, dpi=110)
    print(f"wrote {out.relative_to(ROOT)}")


def main() -> None:
    prefill_breakdown()
    decode_sweep()
    speed_or_throughput()
    serving_sn40l_vs_gpu()
    serving_deepseek()


if __name__ == "__main__":
    main()
