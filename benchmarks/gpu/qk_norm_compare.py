"""Runs bk and bl: Qwen3's per-head QK-RMSNorm on one H200, predicted (frozen before each run) and compared.

The points (``QK_RUNS``; ``sweep.py --only qk_norm`` / ``qk_norm_bl`` measures them): decode steps
(CUDA graph and eager) and batch-1 prefills (eager) of each run's families (run bk: Qwen3-8B with
its QK norm and the same shape without it; run bl: Qwen3-1.7B), and three decode steps' graph
replays profiled kernel by kernel.

    python benchmarks/gpu/qk_norm_compare.py --run bl --frozen > benchmarks/gpu/h200-20261129bl-qk-norm-predicted.txt
    python benchmarks/gpu/qk_norm_compare.py --run bl --compare RUN.csv --kernels RUN-kernels.csv \\
        --predicted benchmarks/gpu/h200-20261129bl-qk-norm-predicted.txt

CPU only (no torch): the model's figures from ``rdusim`` and hw_configs/h200.yaml. The points
(``QK_*``) import without rdusim: ``sweep.py`` takes them from here on the GPU host.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rdusim is imported where the model runs: sweep.py imports the points on the GPU host
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import Gpu

ROOT = Path(__file__).resolve().parents[2]
#: family -> (layers, hidden, q heads, kv heads, head_dim, ffn, vocab, QK norm), config.json's shapes:
#: Qwen3-8B (rdusim/config/models/qwen3-8b.yaml), the same without its norm, Qwen3-1.7B
#: (../shared/reference/hardware-and-models.md C: 28 layers, hidden 2048, 16 / 8 heads of 128, ffn 6144)
FAMILIES = {
    "qwen3-8b": (36, 4096, 32, 8, 128, 12288, 151936, True),
    "qwen3-8b-noqk": (36, 4096, 32, 8, 128, 12288, 151936, False),
    "qwen3-1.7b": (28, 2048, 16, 8, 128, 6144, 151936, True),
}


@dataclass(frozen=True)
class QkRun:
    """One run's points: its families (the first profiled), decode (batch, context), prefill lengths."""

    families: tuple[str, ...]
    decode: tuple[tuple[int, int], ...]
    prefill: tuple[int, ...]
    profiled: tuple[tuple[int, int], ...]  # graph replays profiled kernel by kernel (the first family)


QK_RUNS = {
    "bk": QkRun(("qwen3-8b", "qwen3-8b-noqk"), ((1, 2048), (1, 32768), (8, 8192), (32, 4096), (64, 2048), (128, 1024)),
                (1024, 4096, 16384), ((1, 2048), (8, 8192), (64, 2048))),
    # run bl: a small model, where a decode step is mostly small kernels (as a TP4 shard's)
    "bl": QkRun(("qwen3-1.7b",), ((1, 2048), (1, 16384), (8, 4096), (32, 2048), (64, 1024), (128, 1024)),
                (1024, 4096, 16384), ((1, 2048), (8, 4096), (64, 1024))),
}
HEAD = ["embedding", "lm_head"]
HEAD_TAIL = 3  # kernels a profiled replay launches after the last layer: final norm, memset, LM head GEMM


def model(family: str) -> ModelSpec:
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec

    layers, hidden, hq, hkv, hd, ffn, vocab, qk = FAMILIES[family]
    base = load_spec(model_path("qwen3-8b"), ModelSpec)
    att = base.attention.model_copy(update={"heads": hq, "kv_heads": hkv, "head_dim": hd, "qk_norm": qk})
    return base.model_copy(update={"name": family, "layers": layers, "hidden": hidden, "vocab": vocab,
                                   "attention": att, "ffn": base.ffn.model_copy(
                                       update={"intermediate": ffn, "first_dense_layers": layers})})


def h200() -> Gpu:
    from rdusim.config.loader import load_spec
    from rdusim.config.schema import GpuSpec
    from rdusim.hw.gpu import Gpu

    return Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))


def points(run: QkRun) -> list[tuple[str, str, int, int, str]]:
    """(row name, phase, batch, tokens of context, mode) as sweep.py names its rows."""
    out = []
    for fam in run.families:
        for batch, kv_len in run.decode:
            out += [(f"{fam}_decode_b{batch}_l{kv_len}_{mode}", "decode", batch, kv_len, mode) for mode in ("graph", "eager")]
        out += [(f"{fam}_prefill_b1_l{length}", "prefill", 1, length, "eager") for length in run.prefill]
    return out


def family_of(row: str) -> str:
    return row.split("_", 1)[0]


def predict(name: str, phase: str, batch: int, seq: int, mode: str, gpu: Gpu) -> float:
    from rdusim.analysis.gpu.predict import decoder_layer, simulate_gpu_step

    m = model(family_of(name))
    return simulate_gpu_step(m, gpu, layer=decoder_layer(m), head=HEAD, phase=phase, batch=batch,
                             seq_len=seq, mode=mode).seconds * 1e6


def layer_kernel_us(family: str, batch: int, kv_len: int, gpu: Gpu, *, device: bool = False) -> list[tuple[str, float]]:
    """The model's kernels of one decode layer of ``family`` (graph), in launch order: (name, us), each from
    its start to the next's (``device``: less its graph launch gap, ``launch.graph`` a launch, which a
    profiled kernel's duration leaves out; what the per-position comparison reads)."""
    from rdusim.sim.gpu import simulate_gpu

    kernels = _layer(family, batch, kv_len, gpu)
    trace = simulate_gpu([(k, 0) for k in kernels], gpu, mode="graph")
    gap = gpu.launch_s("graph") if device else 0.0
    return [(r.kernel, (r.end_s - r.start_s - k.launches * gap) * 1e6) for k, r in zip(kernels, trace.kernels, strict=True)]


#: what each run's frozen file says it is
FROZEN_TITLE = {
    "bk": "Qwen3-8B with its per-head QK-RMSNorm and the same\n# shape without it",
    "bl": "Qwen3-1.7B (its per-head QK-RMSNorm; a decode step of\n# mostly small kernels)",
}


def frozen(name: str) -> int:
    run, gpu = QK_RUNS[name], h200()
    print(f"# run {name} frozen predictions (committed before the run): {FROZEN_TITLE[name]}, one H200 "
          f"(hw_configs/h200.yaml as committed; no refit). `qk_norm_compare.py --run {name} --frozen`")
    print("| row | predicted (us) |")
    print("|---|---:|")
    for row, phase, batch, seq, mode in points(run):
        print(f"| {row} | {predict(row, phase, batch, seq, mode, gpu):.1f} |")
    print()
    print("# the model's kernels of one decode layer (graph), in launch order: name, us")
    for batch, kv_len in run.profiled:
        ks = layer_kernel_us(run.families[0], batch, kv_len, gpu)
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


def compare(name: str, csv_path: str, kernels_path: str | None, predicted_path: str) -> int:
    run, gpu = QK_RUNS[name], h200()
    frozen_us = read_predicted(Path(predicted_path))
    with _open(csv_path) as fh:
        rows = {r["name"]: r for r in csv.DictReader(fh) if r["kind"] in ("e2e_decode", "e2e_prefill")}
    print("| row | measured (us) | frozen (us) | error | model now (us) | error |")
    print("|---|---:|---:|---:|---:|---:|")
    errors: dict[str, list[float]] = {}
    for row, phase, batch, seq, mode in points(run):
        if row not in rows:
            print(f"| {row} | - | {frozen_us.get(row, float('nan')):.1f} | - | - | - |")
            continue
        measured = float(rows[row]["median_us"])
        now = predict(row, phase, batch, seq, mode, gpu)
        was = frozen_us[row]
        errors.setdefault(f"{family_of(row)} {phase} {mode}", []).append(was / measured - 1)
        print(f"| {row} | {measured:.1f} | {was:.1f} | {was / measured - 1:+.1%} | {now:.1f} | {now / measured - 1:+.1%} |")
    print()
    print("| group (frozen) | rows | median abs error | worst |")
    print("|---|---:|---:|---:|")
    for group, errs in errors.items():
        worst = max(errs, key=abs)
        print(f"| {group} | {len(errs)} | {statistics.median(abs(e) for e in errs):.1%} | {worst:+.1%} |")
    if "qwen3-8b-noqk" in run.families:
        _norm_share(run, rows, frozen_us)
    if kernels_path:
        print()
        _kernels(run, kernels_path, gpu)
    return 0


def _norm_share(run: QkRun, rows: dict[str, dict], frozen_us: dict[str, float]) -> None:
    print()
    print("The QK norm's share (with minus without, the same point): measured and frozen, us")
    print("| point | measured | frozen |")
    print("|---|---:|---:|")
    for row, *_ in points(run):
        if not row.startswith("qwen3-8b_"):
            continue
        plain = row.replace("qwen3-8b_", "qwen3-8b-noqk_")
        if row in rows and plain in rows:
            delta = float(rows[row]["median_us"]) - float(rows[plain]["median_us"])
            print(f"| {row.removeprefix('qwen3-8b_')} | {delta:+.1f} | {frozen_us[row] - frozen_us[plain]:+.1f} |")


def _kernels(run: QkRun, path: str, gpu: Gpu) -> None:
    """Per profiled point: each position of a decoder layer's kernels (every layer and three replays), its
    median device us beside the model's kernel at that position."""
    family = run.families[0]
    layers = FAMILIES[family][0]
    with _open(path) as fh:
        kernels = [r for r in csv.DictReader(fh) if r["row"].startswith(f"{family}_decode")]
    for batch, kv_len in run.profiled:
        model_ks = layer_kernel_us(family, batch, kv_len, gpu, device=True)
        replays = {}
        for r in kernels:
            if r["row"].startswith(f"{family}_decode_b{batch}_l{kv_len}_graph_r"):
                replays.setdefault(r["row"], []).append(r)
        if not replays:
            continue
        launches = len(next(iter(replays.values())))
        # the embedding's kernel, the layers, then the final norm, a memset and the LM head's GEMM
        per_layer, rest = divmod(launches - 1 - HEAD_TAIL, layers)
        print(f"b{batch} l{kv_len}: {launches} kernels a replay, {per_layer} a layer "
              f"(the model: {_per_layer_launches(family, batch, kv_len, gpu)}){'' if not rest else ' (not whole layers)'}")
        at: dict[int, list[float]] = {}
        names: dict[int, str] = {}
        for launched in replays.values():
            launched.sort(key=lambda r: int(r["index"]))
            body = launched[1:1 + layers * per_layer]
            for i, r in enumerate(body):
                at.setdefault(i % per_layer, []).append(float(r["device_us"]))
                names.setdefault(i % per_layer, r["kernel"][:60])
        print("| position | kernel | measured median (us) |")
        print("|---:|---|---:|")
        for i in sorted(at):
            print(f"| {i} | {names[i]} | {statistics.median(at[i]):.2f} |")
        small = [i for i in at if not _big(names[i])]
        print(f"layer: measured {sum(statistics.median(v) for v in at.values()):.2f} us, the model "
              f"{sum(us for _, us in model_ks):.2f}; its small kernels (not a GEMM, its split-K reduction or "
              f"attention) measured {sum(statistics.median(at[i]) for i in small):.2f}, the model "
              f"{sum(us for n, us in model_ks if not _big(n)):.2f}")
        print("model (device time: less the graph launch gap): " + ", ".join(f"{n} {us:.2f}" for n, us in model_ks))
        print()


def _big(kernel: str) -> bool:
    """A GEMM (cuBLAS's nvjet kernel, its split-K reduction) or attention (FA2's kernels), by the profiled
    kernel's name or the model's kernel's."""
    return any(key in kernel for key in ("nvjet", "splitK", "gemm", "flash", "attention"))


def _per_layer_launches(family: str, batch: int, kv_len: int, gpu: Gpu) -> int:
    return sum(k.launches for k in _layer(family, batch, kv_len, gpu))


def _layer(family: str, batch: int, kv_len: int, gpu: Gpu) -> list:
    """The model's kernels of one decode layer of ``family`` (``GpuKernel``s, one per launch group)."""
    from rdusim.analysis.gpu.predict import decoder_layer, llama_shape
    from rdusim.mapping.gpu import layer_kernels

    m = model(family)
    return layer_kernels(decoder_layer(m), llama_shape(m, batch=batch, tokens=1, kv_len=kv_len), gpu, phase="decode")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", default="bk", choices=sorted(QK_RUNS), help="whose points (default bk)")
    ap.add_argument("--frozen", action="store_true", help="print the frozen predictions")
    ap.add_argument("--compare", metavar="CSV", help="sweep.py --only qk_norm's CSV")
    ap.add_argument("--kernels", metavar="CSV", help="its --kernels CSV (profiled graph replays)")
    ap.add_argument("--predicted", metavar="TXT", help="the committed --frozen output")
    args = ap.parse_args(argv)
    if args.frozen:
        return frozen(args.run)
    if args.compare and args.predicted:
        return compare(args.run, args.compare, args.kernels, args.predicted)
    ap.error("--frozen, or --compare CSV --predicted TXT")
    return 2


if __name__ == "__main__":
    sys.exit(main())
