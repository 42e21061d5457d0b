"""Runs bt and bu (issue 17, P12): FlashAttention-3 at decode on one H200 against the model, frozen first.

    PYTHONPATH=. python benchmarks/gpu/fa3_decode.py --frozen benchmarks/gpu/h200-20261129bt-fa3-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_decode.py --shard --frozen benchmarks/gpu/h200-20261129bu-fa3-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_decode.py --compare benchmarks/gpu/h200-20261129bt-fa3.csv \\
        --kernels benchmarks/gpu/h200-20261129bt-fa3-kernels.csv.gz --predicted benchmarks/gpu/h200-20261129bt-fa3-predicted.txt

``--frozen``: on ``hw_configs/h200.yaml``, for every ``fa3_points.DECODE_POINTS`` point, FA3's decode
call (``flash3_decode``: prepare, main, combine) and FA2's (``flash_decode``) as ``sweep.py --only
fa3_decode`` times them (stream-launched, one call), each kernel's device time (``<row>.<kernel>``:
its span in a graph less the graph's launch gap), and Llama-3.1-8B's graph decode step at
``E2E_DECODE`` with each attention (``simulate_gpu_step``): a Markdown table ``measured.read_frozen``
reads back. ``--compare``: each measured row against the model now and the frozen prediction,
FA3 over FA2 at each point measured and modelled, the profiled kernels (name, tile and split from
their template arguments and grids where the name carries them) against the modelled kernels, and
the decode steps. ``--shard`` (run bu): Llama-3.1-70B's TP8 shard's graph decode steps with each
attention (``SHARD_POINTS``), frozen and compared the same way.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import statistics
import sys
from pathlib import Path

from rdusim.analysis.gpu.measured import read_csv, read_frozen
from rdusim.analysis.gpu.predict import decoder_layer, simulate_gpu_step
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import (
    GpuKernel,
    fa2_decode_splits,
    fa3_decode_splits,
    fa3_decode_tile,
    flash3_decode,
    flash_decode,
)
from rdusim.sim.gpu import elapsed_s, simulate_gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (the points, beside this file)

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "hw_configs/h200.yaml"
KERNELS = ("fa3", "fa2")


def call_kernels(point: tuple, kernel: str, gpu: Gpu) -> list[GpuKernel]:
    b, h, hkv, hd, n = point
    build = flash3_decode if kernel == "fa3" else flash_decode
    return build("attention", b, h, hkv, n, hd, gpu)


def call_s(point: tuple, kernel: str, gpu: Gpu) -> float:
    """One call stream-launched, as ``sweep.py`` times it."""
    return elapsed_s(simulate_gpu([(k, 0) for k in call_kernels(point, kernel, gpu)], gpu, mode="stream"))


def kernel_device_s(point: tuple, kernel: str, gpu: Gpu) -> dict[str, float]:
    """Each kernel's device time: its span in a graph less the graph's launch gap."""
    trace = simulate_gpu([(k, 0) for k in call_kernels(point, kernel, gpu)], gpu, mode="graph")
    gap = gpu.launch_s("graph")
    return {r.kernel: r.end_s - r.start_s - gap for r in trace.kernels}


def step_s(model: ModelSpec, gpu: Gpu, batch: int, kv_len: int, kernel: str) -> float:
    return simulate_gpu_step(model, gpu, layer=decoder_layer(model), head=["embedding", "lm_head"], phase="decode",
                             batch=batch, seq_len=kv_len, mode="graph", attention_kernel=kernel).seconds


def step_name(batch: int, kv_len: int, kernel: str) -> str:
    return f"llama3.1-8b_decode_{kernel}_b{batch}_l{kv_len}_graph"


def shard_predictions(gpu: Gpu, run: f3.DecodeRun = f3.RUN_BU) -> dict[str, float]:
    """Predicted microseconds of one GPU's share of Llama-3.1-70B's graph decode step at
    ``run.shard_tp`` (``simulate_gpu_step`` at that ``tp``: the measured layer, no collective)."""
    model = load_spec(model_path("llama-3.1-70b"), ModelSpec)
    tp = run.shard_tp
    return {f3.shard_name(batch, kv_len, kernel, tp): simulate_gpu_step(
                model, gpu, layer=decoder_layer(model), head=["embedding", "lm_head"], phase="decode", batch=batch,
                seq_len=kv_len, mode="graph", tp=tp, attention_kernel=kernel).seconds * 1e6
            for batch, kv_len in run.shard_points for kernel in KERNELS}


def predictions(gpu: Gpu, run: f3.DecodeRun = f3.RUN_BT) -> dict[str, float]:
    """Predicted microseconds by row name (calls, their kernels, the Llama-3.1-8B decode steps)."""
    out: dict[str, float] = {}
    for point in run.calls:
        for kernel in KERNELS:
            row = f3.decode_name(point, kernel)
            out[row] = call_s(point, kernel, gpu) * 1e6
            for name, seconds in kernel_device_s(point, kernel, gpu).items():
                out[f"{row}.{name}"] = seconds * 1e6
    if run.steps:
        model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
        for batch, kv_len in run.steps:
            for kernel in KERNELS:
                out[step_name(batch, kv_len, kernel)] = step_s(model, gpu, batch, kv_len, kernel) * 1e6
    return out


def run_predictions(gpu: Gpu, run: f3.DecodeRun) -> dict[str, float]:
    """Every row ``run`` measures, predicted: its calls, their kernels, its 8B steps and its shard steps."""
    return predictions(gpu, run) | (shard_predictions(gpu, run) if run.shard else {})


def frozen(out: Path, run: f3.DecodeRun = f3.RUN_BT) -> None:
    """``run``'s predictions (calls, kernels, steps, shard steps) and each call's splits and tile."""
    gpu = Gpu(load_spec(H200, GpuSpec))
    rows = run_predictions(gpu, run)
    lines = ["| row | predicted us |", "|---|---:|"] + [f"| {name} | {us:.2f} |" for name, us in rows.items()]
    if run.calls:
        lines += ["", "FA3's splits (static, dynamic) and tile; FA2's (row blocks, splits):", ""]
    for point in run.calls:
        b, h, hkv, hd, n = point
        lines.append(f"- {f3.decode_name(point)}: FA3 splits {fa3_decode_splits(b, h, hkv, n, hd, hd, gpu)}, "
                     f"tile {fa3_decode_tile(hd, hd)}; FA2 {fa2_decode_splits(b, h, hkv, n, hd, gpu)}")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(rows)} predictions)")


def _kernel_rows(path: Path) -> dict[str, list[tuple[str, float]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict[str, list[tuple[str, float]]] = {}
    with opener(path, "rt") as fh:
        for r in csv.DictReader(fh):
            out.setdefault(r["row"], []).append((r["kernel"], float(r["device_us"])))
    return out


def _kind(kernel_name: str) -> str:
    """What one profiled kernel of a decode call is: the flush before it, FA3's prepare, combine or
    main kernel, FA2's split-KV kernel, its combine, or its forward kernel."""
    low = kernel_name.lower()
    if "prepare" in low:
        return "prepare"
    if "combine" in low:
        return "combine"
    if "flash" in low or "fmha" in low:
        return "main"
    return "other"


def _error_table(rows: list[str], measured: dict[str, float], now: dict[str, float], fro: dict[str, float],
                 label) -> None:
    """Measured, the model now and the frozen prediction for each of ``rows`` measured; a summary
    line per ``label(row)``."""
    print("| row | measured us | model now | error | frozen | error |")
    print("|---|---:|---:|---:|---:|---:|")
    errs: dict[str, list[float]] = {}
    for row in (r for r in rows if r in measured):
        t, m, f = measured[row], now[row], fro.get(row, float("nan"))
        errs.setdefault(label(row), []).append(m / t - 1)
        print(f"| {row} | {t:.1f} | {m:.1f} | {m / t - 1:+.1%} | {f:.1f} | {f / t - 1:+.1%} |")
    print()
    for key, e in errs.items():
        print(f"{key}: {len(e)} rows, median |error| {statistics.median(map(abs, e)):.1%}, worst {max(e, key=abs):+.1%}")


def _modelled(row: str, predicted: dict[str, float]) -> dict[str, float]:
    """The modelled device time of each kernel of one call (``main``, ``prepare``, ``combine``)."""
    out = {}
    for key, us in predicted.items():
        if key.startswith(row + "."):
            out[key.rsplit(".", 1)[-1] if key.count(".") > 1 else "main"] = us
    return out


def device_sums(profiled: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
    """Each profiled call's kernels' summed device time (the flush before it aside)."""
    return {row: sum(us for name, us in kernels if _kind(name) != "other") for row, kernels in profiled.items()}


def _kernel_table(profiled: dict[str, list[tuple[str, float]]], now: dict[str, float], fro: dict[str, float],
                  points: tuple) -> None:
    print("| row | kernel | measured us | model now | frozen | name |")
    print("|---|---|---:|---:|---:|---|")
    errs: dict[tuple[str, str, str], list[float]] = {}
    for row in (f3.decode_name(p, k) for p in points for k in KERNELS):
        modelled, frozen_us = _modelled(row, now), _modelled(row, fro)
        for name, us in profiled.get(row, []):
            kind = _kind(name)
            if kind == "other":
                continue
            m, f = modelled.get(kind, float("nan")), frozen_us.get(kind, float("nan"))
            errs.setdefault((row[:3], kind, "now"), []).append(m / us - 1)
            errs.setdefault((row[:3], kind, "frozen"), []).append(f / us - 1)
            print(f"| {row} | {kind} | {us:.2f} | {m:.2f} | {f:.2f} | {name[:120]} |")
    print()
    for (lib, kind, which), e in sorted(errs.items()):
        print(f"{lib} {kind}, {which}: {len(e)} kernels, median |error| {statistics.median(map(abs, e)):.1%}, "
              f"worst {max(e, key=abs):+.1%}")


def compare_shard(csv_path: Path, predicted: Path, run: f3.DecodeRun = f3.RUN_BU) -> None:
    """The shard's steps against the model now and the frozen prediction, and FA3 / FA2."""
    now, fro = shard_predictions(Gpu(load_spec(H200, GpuSpec)), run), read_frozen(predicted)
    measured = {r["name"]: float(r["median_us"]) for r in read_csv(csv_path)}
    tp = run.shard_tp
    print(f"## Llama-3.1-70B's TP{tp} shard, graph decode step\n")
    _error_table([f3.shard_name(b, n, k, tp) for b, n in run.shard_points for k in KERNELS], measured, now, fro,
                 lambda row: row.split("_")[2] + " steps")
    print("\n| batch x keys | FA3 / FA2 measured | model |")
    print("|---|---:|---:|")
    for b, n in run.shard_points:
        a, c = f3.shard_name(b, n, "fa3", tp), f3.shard_name(b, n, "fa2", tp)
        if a in measured and c in measured:
            print(f"| {b} x {n} | {measured[a] / measured[c]:.3f} | {now[a] / now[c]:.3f} |")


def compare(csv_path: Path, kernels_path: Path | None, predicted: Path, run: f3.DecodeRun = f3.RUN_BT) -> None:
    """``run``'s calls, their kernels and its steps against the model now and the frozen prediction
    (then its shard steps, if it has any: ``compare_shard``)."""
    gpu = Gpu(load_spec(H200, GpuSpec))
    now, fro = predictions(gpu, run), read_frozen(predicted)
    measured = {r["name"]: float(r["median_us"]) for r in read_csv(csv_path)}
    print("## Decode calls, timed cold (stream-launched, one call)\n")
    _error_table([f3.decode_name(p, k) for p in run.calls for k in KERNELS], measured, now, fro,
                 lambda row: row.split("_")[0] + " calls")
    profiled = _kernel_rows(kernels_path) if kernels_path is not None else {}
    device = device_sums(profiled)
    print("\n## FA3 over FA2, same tensors: the timed calls, and the profiled kernels' device time\n")
    print("| point | timed calls | device | model | host-bound (timed call > device + 20 us) |")
    print("|---|---:|---:|---:|---|")
    for point in run.calls:
        a, b = f3.decode_name(point, "fa3"), f3.decode_name(point, "fa2")
        if a in measured and b in measured:
            dev = device[a] / device[b] if a in device and b in device else float("nan")
            host = [k for k, r in (("fa3", a), ("fa2", b)) if r in device and measured[r] > device[r] + 20]
            print(f"| {a[4:]} | {measured[a] / measured[b]:.3f} | {dev:.3f} | {now[a] / now[b]:.3f} | "
                  f"{', '.join(host) or '-'} |")
    if profiled:
        print("\n## Profiled kernels (one call after an L2 flush) against the model's device times\n")
        _kernel_table(profiled, now, fro, run.calls)
    print("\n## Llama-3.1-8B decode step, CUDA graph\n")
    _error_table([step_name(b, n, k) for b, n in run.steps for k in KERNELS], measured, now, fro,
                 lambda row: row.split("_")[2] + " steps")
    if run.shard:
        print()
        compare_shard(csv_path, predicted, run)


def _model_kind(kernel: str) -> str:
    """A modelled step kernel's kind, as ``_kind`` names a profiled one."""
    if kernel == "attention":
        return "main"
    return kernel.rsplit(".", 1)[-1] if kernel.startswith("attention.") else "other"


def step_breakdown(csv_path: Path, kernels_path: Path, run: f3.DecodeRun) -> None:
    """Each profiled Llama-3.1-8B step of ``run`` (one graph replay, every kernel named) by kind: the
    attention's prepare, main and combine kernels, the other kernels, and the gaps (the timed step
    less its kernels), measured against the model's kernels now."""
    gpu, model = Gpu(load_spec(H200, GpuSpec)), load_spec(model_path("llama-3.1-8b"), ModelSpec)
    measured = {r["name"]: float(r["median_us"]) for r in read_csv(csv_path)}
    profiled = _kernel_rows(kernels_path)
    print("| step | kind | kernels measured | us measured | us modelled | error |")
    print("|---|---|---:|---:|---:|---:|")
    for batch, kv_len in run.steps_profiled:
        for kernel in KERNELS:
            row = step_name(batch, kv_len, kernel)
            got: dict[str, list[float]] = {}
            for name, us in profiled.get(row, []):
                got.setdefault(_kind(name), []).append(us)
            modelled: dict[str, float] = {}
            step = simulate_gpu_step(model, gpu, layer=decoder_layer(model), head=["embedding", "lm_head"],
                                     phase="decode", batch=batch, seq_len=kv_len, mode="graph",
                                     attention_kernel=kernel)
            for name, seconds in step.kernels.items():
                modelled[_model_kind(name)] = modelled.get(_model_kind(name), 0.0) + seconds * 1e6
            kinds = [k for k in ("prepare", "main", "combine", "other") if k in got or k in modelled]
            for kind in kinds:
                us, m = sum(got.get(kind, [])), modelled.get(kind, 0.0)
                err = f"{m / us - 1:+.1%}" if us else "-"
                print(f"| {row} | {kind} | {len(got.get(kind, []))} | {us:.1f} | {m:.1f} | {err} |")
            total = sum(sum(v) for v in got.values())
            if row in measured:
                print(f"| {row} | gaps (step - kernels) | - | {measured[row] - total:.1f} | "
                      f"{step.seconds * 1e6 - sum(modelled.values()):.1f} | - |")
                print(f"| {row} | step | - | {measured[row]:.1f} | {step.seconds * 1e6:.1f} | "
                      f"{step.seconds * 1e6 / measured[row] - 1:+.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", type=Path)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--kernels", type=Path)
    ap.add_argument("--predicted", type=Path)
    ap.add_argument("--run", choices=sorted(f3.DECODE_RUNS), default="bt", help="the run's points (fa3_points)")
    ap.add_argument("--shard", action="store_true", help="run bu's shard steps (the same as --run bu)")
    ap.add_argument("--steps", action="store_true", help="with --compare and --kernels: the profiled steps by kind")
    args = ap.parse_args()
    run = f3.DECODE_RUNS["bu" if args.shard else args.run]
    if args.frozen:
        frozen(args.frozen, run)
    if args.steps:
        step_breakdown(args.compare, args.kernels, run)
    elif args.compare and not run.calls:
        compare_shard(args.compare, args.predicted, run)
    elif args.compare:
        compare(args.compare, args.kernels, args.predicted, run)


if __name__ == "__main__":
    main()
