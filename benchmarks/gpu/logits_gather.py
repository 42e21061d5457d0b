"""Run cp: what the TP step's logits all-gather costs in the step (frozen before the run).

The model's TP step ends with the vocabulary-split LM head's logits all-gathered on every GPU
(``logits_gather``: an NCCL all-gather of batch x vocab bf16 logits; docs/gpu.md, "The TP step's
logits all-gather"), as ``collectives.py``'s TP step runs it. Run cp times Llama-3.1-8B's TP2
decode step on two H200s at large batches, where the gather is 75-500 us, each step twice in a
row: as measured so far, then without the gather (``collectives.py --without-gather``: rows
``*_nogather``). The difference is the gather's cost in the step, which the model prices as the
step less the same step without ``logits_gather`` in its head.

    PYTHONPATH=. python benchmarks/gpu/logits_gather.py --frozen h200x2-20261130cp-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/logits_gather.py --compare h200x2-20261130cp-predicted.txt <csv>

Checks: ``h200x2-20261130cp-gather-hypotheses.md`` (committed before the run).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = "hw_configs/h200.yaml"
#: Llama-3.1-8B TP2 decode points (batch x KV length): the gather 75-500 us
POINTS = ((128, 512), (256, 512), (384, 256), (512, 256), (1024, 128))
#: the registered checks: each point's measured difference within this share of the modelled one
#: (G1), and the median over the points within this (G2)
EACH, MEDIAN = 0.35, 0.20


def row_name(batch: int, kv: int) -> str:
    return f"tp2_decode_b{batch}_l{kv}_graph"


def frozen_table() -> list[str]:
    """The model's step, its gather's kernel and the step without the gather (us), every point."""
    from rdusim.analysis.gpu.collectives import TP_HEAD_WITHOUT_GATHER, predict_tp_step
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / DOC).gpu
    model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    lines = [
        f"# Run cp, frozen before the run: Llama-3.1-8B TP2 decode steps (CUDA graph) on two H200s, {DOC} as",
        "# committed (nothing refitted); `difference` the step less the step without logits_gather.",
        "| row | step (us) | without the gather (us) | difference (us) | the gather's kernel (us) |",
        "|---|---:|---:|---:|---:|",
    ]
    for batch, kv in POINTS:
        point = {"phase": "decode", "batch": batch, "length": kv, "mode": "graph", "tp": 2}
        step = predict_tp_step(model, gpu, **point)
        bare = predict_tp_step(model, gpu, **point, head=TP_HEAD_WITHOUT_GATHER)
        lines.append(f"| {row_name(batch, kv)} | {step.seconds * 1e6:.1f} | {bare.seconds * 1e6:.1f} | "
                     f"{(step.seconds - bare.seconds) * 1e6:.1f} | {step.kernels['logits_gather'] * 1e6:.1f} |")
    return lines


def read_frozen(path: str) -> dict[str, tuple[float, float]]:
    """{row: (step, step without the gather)} of a frozen table, us."""
    out = {}
    for line in Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("tp2_decode_"):
            out[cells[0]] = (float(cells[1]), float(cells[2]))
    return out


def read_measured(path: str) -> dict[str, float]:
    with open(path, newline="") as fh:
        return {r["name"]: float(r["median_us"]) for r in csv.DictReader(fh)}


def compare(frozen_path: str, csv_path: str) -> list[str]:
    frozen, measured = read_frozen(frozen_path), read_measured(csv_path)
    lines = ["| row | measured: step / without / difference (us) | model: step / without / difference (us) | "
             "step error | difference: measured / model |", "|---|---|---|---:|---:|"]
    ratios = []
    for name, (step, bare) in frozen.items():
        if name not in measured or f"{name}_nogather" not in measured:
            lines.append(f"| {name} | not measured | | | |")
            continue
        m_step, m_bare = measured[name], measured[f"{name}_nogather"]
        ratio = (m_step - m_bare) / (step - bare)
        ratios.append(ratio)
        lines.append(f"| {name} | {m_step:.1f} / {m_bare:.1f} / {m_step - m_bare:.1f} | {step:.1f} / {bare:.1f} / "
                     f"{step - bare:.1f} | {100 * (step / m_step - 1):+.1f}% | {ratio:.2f} |")
    lines += ["", "Checks (h200x2-20261130cp-gather-hypotheses.md):"]
    if not ratios:
        return [*lines, "- not measured"]
    each = all(abs(r - 1) <= EACH for r in ratios)
    med = statistics.median(ratios)
    lines.append(f"- G1 each point's measured difference within {100 * EACH:.0f}% of the model's: "
                 f"{'yes' if each else 'no'} (ratios {', '.join(f'{r:.2f}' for r in ratios)})")
    lines.append(f"- G2 their median within {100 * MEDIAN:.0f}%: {'yes' if abs(med - 1) <= MEDIAN else 'no'} "
                 f"(median {med:.2f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", metavar="OUT", help="write the frozen table")
    ap.add_argument("--compare", nargs=2, metavar=("FROZEN", "CSV"), help="the frozen table and the run's CSV")
    args = ap.parse_args(argv)
    if args.frozen:
        Path(args.frozen).write_text("\n".join(frozen_table()) + "\n")
        return 0
    if args.compare:
        print("\n".join(compare(*args.compare)))
        return 0
    ap.error("--frozen OUT or --compare FROZEN CSV")
    return 2


if __name__ == "__main__":
    sys.exit(main())
