"""Run bk: Qwen3-8B's per-head QK-RMSNorm on one H200, predicted (frozen before the run) and compared.

The points (``sweep.py --only qk_norm`` measures them): decode steps (CUDA graph and eager) and
batch-1 prefills (eager) of Qwen3-8B with its QK norm (``attention.qk_norm``) and of the same
shape without it, and three graph replays of three decode steps profiled kernel by kernel.

    python benchmarks/gpu/qk_norm_compare.py --frozen > benchmarks/gpu/h200-20261129bk-qk-norm-predicted.txt
    python benchmarks/gpu/qk_norm_compare.py --compare RUN.csv --kernels RUN-kernels.csv \\
        --predicted benchmarks/gpu/h200-20261129bk-qk-norm-predicted.txt

CPU only (no torch): the model's figures from ``rdusim`` and hw_configs/h200.yaml. The points
(``QK_*``) import without rdusim: ``sweep.py`` takes them from here on the GPU host.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rdusim is imported where the model runs: sweep.py imports the points on the GPU host
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import Gpu

ROOT = Path(__file__).resolve().parents[2]
#: family -> with its QK norm (Qwen3-8B's config.json shape either way: rdusim/config/models/qwen3-8b.yaml)
QK_MODELS = {"qwen3-8b": True, "qwen3-8b-noqk": False}
QK_DECODE = [(1, 2048), (1, 32768), (8, 8192), (32, 4096), (64, 2048), (128, 1024)]
QK_PREFILL = [1024, 4096, 16384]
QK_PROFILED = [(1, 2048), (8, 8192), (64, 2048)]  # graph replays profiled kernel by kernel (qwen3-8b only)
HEAD = ["embedding", "lm_head"]
HEAD_TAIL = 3  # kernels a profiled replay launches after the last layer: final norm, memset, LM head GEMM


def model(family: str) -> ModelSpec:
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec

    base = load_spec(model_path("qwen3-8b"), ModelSpec)
    return base.model_copy(update={"attention": base.attention.model_copy(update={"qk_norm": QK_MODELS[family]})})


def h200() -> Gpu:
    from rdusim.config.loader import load_spec
    from rdusim.config.schema import GpuSpec
    from rdusim.hw.gpu import Gpu

    return Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))


def points() -> list[tuple[str, str, int, int, str]]:
    """(row name, phase, batch, tokens of context, mode) as sweep.py names its rows."""
    out = []
    for fam in QK_MODELS:
        for batch, kv_len in QK_DECODE:
            out += [(f"{fam}_decode_b{batch}_l{kv_len}_{mode}", "decode", batch, kv_len, mode) for mode in ("graph", "eager")]
        out += [(f"{fam}_prefill_b1_l{length}", "prefill", 1, length, "eager") for length in QK_PREFILL]
    return out


def predict(name: str, phase: str, batch: int, seq: int, mode: str, gpu: Gpu) -> float:
    from rdusim.analysis.gpu.predict import decoder_layer, simulate_gpu_step

    m = model(name.split("_", 1)[0])
    return simulate_gpu_step(m, gpu, layer=decoder_layer(m), head=HEAD, phase=phase, batch=batch,
                             seq_len=seq, mode=mode).seconds * 1e6


def layer_kernel_us(batch: int, kv_len: int, gpu: Gpu) -> list[tuple[str, float]]:
    """The model's kernels of one Qwen3-8B decode layer (graph), in launch order: (name, us)."""
    from rdusim.sim.gpu import simulate_gpu

    trace = simulate_gpu([(k, 0) for k in _layer(batch, kv_len, gpu)], gpu, mode="graph")
    return [(r.kernel, (r.end_s - r.start_s) * 1e6) for r in trace.kernels]


def frozen() -> int:
    gpu = h200()
    print("# run bk frozen predictions (committed before the run): Qwen3-8B with its per-head QK-RMSNorm and the same")
    print("# shape without it, one H200 (hw_configs/h200.yaml as committed; no refit). `qk_norm_compare.py --frozen`")
    print("| row | predicted (us) |")
    print("|---|---:|")
    for name, phase, batch, seq, mode in points():
        print(f"| {name} | {predict(name, phase, batch, seq, mode, gpu):.1f} |")
    print()
    print("# the model's kernels of one decode layer (graph), in launch order: name, us")
    for batch, kv_len in QK_PROFILED:
        ks = layer_kernel_us(batch, kv_len, gpu)
        print(f"layer b{batch} l{kv_len}: " + ", ".join(f"{n} {us:.2f}" for n, us in ks))
    return 0


def read_predicted(path: Path) -> dict[str, float]:
    out = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("qwen3"):
            out[cells[0]] = float(cells[1])
    return out


def _open(path: str):
    return gzip.open(path, "rt", newline="") if path.endswith(".gz") else open(path, newline="")


def compare(csv_path: str, kernels_path: str | None, predicted_path: str) -> int:
    gpu = h200()
    frozen_us = read_predicted(Path(predicted_path))
    with _open(csv_path) as fh:
        rows = {r["name"]: r for r in csv.DictReader(fh) if r["kind"] in ("e2e_decode", "e2e_prefill")}
    print("| row | measured (us) | frozen (us) | error | model now (us) | error |")
    print("|---|---:|---:|---:|---:|---:|")
    errors: dict[str, list[float]] = {}
    for name, phase, batch, seq, mode in points():
        if name not in rows:
            print(f"| {name} | - | {frozen_us.get(name, float('nan')):.1f} | - | - | - |")
            continue
        measured = float(rows[name]["median_us"])
        now = predict(name, phase, batch, seq, mode, gpu)
        was = frozen_us[name]
        errors.setdefault(f"{name.split('_', 1)[0]} {phase} {mode}", []).append(was / measured - 1)
        print(f"| {name} | {measured:.1f} | {was:.1f} | {was / measured - 1:+.1%} | {now:.1f} | {now / measured - 1:+.1%} |")
    print()
    print("| group (frozen) | rows | median abs error | worst |")
    print("|---|---:|---:|---:|")
    for group, errs in errors.items():
        worst = max(errs, key=abs)
        print(f"| {group} | {len(errs)} | {statistics.median(abs(e) for e in errs):.1%} | {worst:+.1%} |")
    print()
    print("The QK norm's share (with minus without, the same point): measured and frozen, us")
    print("| point | measured | frozen |")
    print("|---|---:|---:|")
    for name, *_ in points():
        if not name.startswith("qwen3-8b_"):
            continue
        plain = name.replace("qwen3-8b_", "qwen3-8b-noqk_")
        if name in rows and plain in rows:
            delta = float(rows[name]["median_us"]) - float(rows[plain]["median_us"])
            print(f"| {name.removeprefix('qwen3-8b_')} | {delta:+.1f} | {frozen_us[name] - frozen_us[plain]:+.1f} |")
    if kernels_path:
        print()
        _kernels(kernels_path, gpu)
    return 0


def _kernels(path: str, gpu: Gpu) -> None:
    """Per profiled point: each position of a decoder layer's kernels (the 36 layers and three replays), its
    median device us beside the model's kernel at that position."""
    with _open(path) as fh:
        kernels = [r for r in csv.DictReader(fh) if r["row"].startswith("qwen3-8b_decode")]
    for batch, kv_len in QK_PROFILED:
        model_ks = layer_kernel_us(batch, kv_len, gpu)
        replays = {}
        for r in kernels:
            if r["row"].startswith(f"qwen3-8b_decode_b{batch}_l{kv_len}_graph_r"):
                replays.setdefault(r["row"], []).append(r)
        if not replays:
            continue
        launches = len(next(iter(replays.values())))
        # the embedding's kernel, 36 layers, then the final norm, a memset and the LM head's GEMM
        per_layer, rest = divmod(launches - 1 - HEAD_TAIL, 36)
        print(f"b{batch} l{kv_len}: {launches} kernels a replay, {per_layer} a layer "
              f"(the model: {_per_layer_launches(batch, kv_len, gpu)}){'' if not rest else ' (not whole layers)'}")
        at: dict[int, list[float]] = {}
        names: dict[int, str] = {}
        for launched in replays.values():
            launched.sort(key=lambda r: int(r["index"]))
            body = launched[1:1 + 36 * per_layer]
            for i, r in enumerate(body):
                at.setdefault(i % per_layer, []).append(float(r["device_us"]))
                names.setdefault(i % per_layer, r["kernel"][:60])
        print("| position | kernel | measured median (us) |")
        print("|---:|---|---:|")
        for i in sorted(at):
            print(f"| {i} | {names[i]} | {statistics.median(at[i]):.2f} |")
        print("model: " + ", ".join(f"{n} {us:.2f}" for n, us in model_ks))
        print()


def _per_layer_launches(batch: int, kv_len: int, gpu: Gpu) -> int:
    return sum(k.launches for k in _layer(batch, kv_len, gpu))


def _layer(batch: int, kv_len: int, gpu: Gpu) -> list:
    """The model's kernels of one Qwen3-8B decode layer (``GpuKernel``s, one per launch group)."""
    from rdusim.analysis.gpu.predict import decoder_layer, llama_shape
    from rdusim.mapping.gpu import layer_kernels

    m = model("qwen3-8b")
    return layer_kernels(decoder_layer(m), llama_shape(m, batch=batch, tokens=1, kv_len=kv_len), gpu, phase="decode")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", action="store_true", help="print the frozen predictions")
    ap.add_argument("--compare", metavar="CSV", help="sweep.py --only qk_norm's CSV")
    ap.add_argument("--kernels", metavar="CSV", help="its --kernels CSV (profiled graph replays)")
    ap.add_argument("--predicted", metavar="TXT", help="the committed --frozen output")
    args = ap.parse_args(argv)
    if args.frozen:
        return frozen()
    if args.compare and args.predicted:
        return compare(args.compare, args.kernels, args.predicted)
    ap.error("--frozen, or --compare CSV --predicted TXT")
    return 2


if __name__ == "__main__":
    sys.exit(main())
