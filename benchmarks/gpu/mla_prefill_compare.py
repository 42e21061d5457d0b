"""Run bm: DeepSeek-V3/R1's MLA prefill attention on one H200, predicted (frozen before the run) and compared.

The points (``mla_prefill_points``; ``sweep.py --only mla_prefill`` measures them): causal batch-1 FA2
at head_dim 192 (16 heads, a TP8 share, and all 128), and vLLM's whole prefill attention block
(``rdusim.mapping.gpu_mla.mla_prefill_attention_kernels`` with bf16 weights, as the harness runs it;
no all-reduce: one GPU).

    python benchmarks/gpu/mla_prefill_compare.py --frozen > benchmarks/gpu/h200-20261129bm-mla-prefill-predicted.txt
    python benchmarks/gpu/mla_prefill_compare.py --compare RUN.csv --kernels RUN-kernels.csv.gz \\
        --predicted benchmarks/gpu/h200-20261129bm-mla-prefill-predicted.txt

CPU only: the model's figures from ``rdusim`` and hw_configs/h200.yaml (no refit).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mla_prefill_points as mp  # noqa: E402  (the points, shared with sweep.py)

from rdusim.analysis.gpu.measured import read_frozen  # noqa: E402
from rdusim.analysis.gpu.predict import kernels_device_s  # noqa: E402
from rdusim.config.loader import load_spec, model_path  # noqa: E402
from rdusim.config.schema import GpuSpec, ModelSpec  # noqa: E402
from rdusim.hw.gpu import Gpu  # noqa: E402
from rdusim.mapping.gpu import GpuKernel, flash_prefill  # noqa: E402
from rdusim.mapping.gpu_mla import mla_prefill_attention_kernels, mla_shape  # noqa: E402
from rdusim.sim.gpu import elapsed_s, simulate_gpu  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def h200() -> Gpu:
    return Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))


def bf16_deepseek() -> ModelSpec:
    """DeepSeek-R1's shapes with bf16 weights, as the harness's block holds them."""
    model = load_spec(model_path("deepseek-r1"), ModelSpec)
    return model.model_copy(update={"dtypes": model.dtypes.model_copy(update={"weights": "bf16"})})


def block_kernels(heads: int, tokens: int, gpu: Gpu) -> list[GpuKernel]:
    """The block on one GPU: ``heads`` of the 128 (a TP share, its all-reduce left out: one GPU)."""
    model = bf16_deepseek()
    tp = model.attention.heads // heads
    shape = mla_shape(model, 1, tokens, tp, query_tokens=tokens)
    return [k for k in mla_prefill_attention_kernels(shape, gpu) if k.math != "nvlink"]


def stream_us(kernels: list[GpuKernel], gpu: Gpu) -> float:
    return elapsed_s(simulate_gpu([(k, 0) for k in kernels], gpu, mode="stream")) * 1e6


def predictions(gpu: Gpu) -> dict[str, float]:
    """Row name -> predicted us: the FA2 rows (stream, as ``predict_row`` prices an ``attn_prefill``
    row), each block timed whole (stream) and its kernels' device times summed (``_ksum``)."""
    out = {}
    for heads, length in mp.FLASH_POINTS:
        out[mp.flash_name(heads, length)] = stream_us(flash_prefill("attention", 1, heads, heads, length,
                                                                   mp.HEAD_DIM, gpu), gpu)
    for heads, tokens in mp.BLOCK_POINTS:
        kernels = block_kernels(heads, tokens, gpu)
        out[mp.block_name(heads, tokens)] = stream_us(kernels, gpu)
        out[mp.block_name(heads, tokens) + "_ksum"] = kernels_device_s(kernels, gpu) * 1e6
    return out


def frozen() -> int:
    gpu = h200()
    print("# run bm frozen predictions (committed before the run): DeepSeek-V3/R1 MLA prefill attention, one H200")
    print("# (hw_configs/h200.yaml as committed; no refit). FA2 at head_dim 192 is priced with FA2_HD192's")
    print("# tile <192, 128, 64, 8> (never measured). `mla_prefill_compare.py --frozen`")
    print("| row | predicted (us) |")
    print("|---|---:|")
    for name, us in predictions(gpu).items():
        print(f"| {name} | {us:.1f} |")
    print()
    print("# the model's kernels of each block (stream), in launch order: name, us")
    for heads, tokens in mp.BLOCK_POINTS:
        kernels = block_kernels(heads, tokens, gpu)
        trace = simulate_gpu([(k, 0) for k in kernels], gpu, mode="stream")
        print(f"{mp.block_name(heads, tokens)}: "
              + ", ".join(f"{r.kernel} {(r.end_s - r.start_s) * 1e6:.1f}" for r in trace.kernels))
    return 0


def compare(csv_path: Path, kernels_path: Path | None, predicted_path: Path | None) -> int:
    gpu = h200()
    now = predictions(gpu)
    frozen_us = read_frozen(predicted_path) if predicted_path else {}
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    print("| row | backend | measured us | model now us | error | frozen us | frozen error |")
    print("|---|---|---:|---:|---:|---:|---:|")
    errors: dict[str, list[float]] = {}
    for row in rows:
        name, measured = row["name"], float(row["median_us"])
        backend = "cudnn" if name.startswith("mla_cudnn") else ("flash" if "flash" in name else "-")
        key = name.replace("mla_cudnn_", "mla_flash_")
        if key not in now:
            continue
        err = now[key] / measured - 1
        f = frozen_us.get(key)
        ferr = f"{f / measured - 1:+.1%}" if f else "-"
        print(f"| {name} | {backend} | {measured:.1f} | {now[key]:.1f} | {err:+.1%} | {f or '-'} | {ferr} |")
        group = "cudnn" if backend == "cudnn" else ("ksum" if name.endswith("_ksum") else
                                                    ("block" if name.startswith("mla_block") else "flash"))
        errors.setdefault(group, []).append(err)
    print()
    for group, errs in errors.items():
        print(f"{group}: {len(errs)} rows, median |error| {statistics.median(abs(e) for e in errs):.1%}, "
              f"worst {max(errs, key=abs):+.1%}")
    if kernels_path:
        opener = gzip.open if kernels_path.suffix == ".gz" else open
        with opener(kernels_path, "rt") as f:
            kern = list(csv.DictReader(f))
        print()
        print("# profiled kernels by row (name, device us)")
        for row in sorted({k["row"] for k in kern}):
            ks = [k for k in kern if k["row"] == row]
            print(f"{row}: " + ", ".join(f"{k['kernel'][:120]} {float(k['device_us']):.1f}" for k in ks))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", action="store_true", help="print the frozen predictions")
    ap.add_argument("--compare", type=Path, help="the run's CSV")
    ap.add_argument("--kernels", type=Path, help="the run's kernels CSV (.gz)")
    ap.add_argument("--predicted", type=Path, help="the frozen predictions file")
    args = ap.parse_args(argv)
    if args.frozen:
        return frozen()
    if args.compare:
        return compare(args.compare, args.kernels, args.predicted)
    ap.error("--frozen or --compare")
    return 2


if __name__ == "__main__":
    sys.exit(main())
