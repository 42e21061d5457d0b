"""Run bs (issue 17, P12): Llama-3.1-8B's whole prefill step with FlashAttention-3 on one H200, frozen first.

    PYTHONPATH=. python benchmarks/gpu/fa3_e2e.py --frozen benchmarks/gpu/h200-20261129bs-e2e-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_e2e.py --compare benchmarks/gpu/h200-20261129bs-e2e.csv \\
        --predicted benchmarks/gpu/h200-20261129bs-e2e-predicted.txt

``--frozen``: for each prompt length of ``fa3_points.E2E_LENGTHS`` and each attention kernel (``fa3``,
and ``fa2`` beside it), the step as ``sweep.py --only fa3_e2e`` times it (``simulate_gpu_step``,
eager, batch 1, ``hw_configs/h200.yaml``): at full clock (the default model), and on the opt-in SM
clock (``SmClock``: a warm-up step from idle, 1 s idle, then ``E2E_STEPS`` steps back to back) its
first step and the median of its last five. ``--compare``: each measured row (``_first``,
``_last5``) against the full-clock model and the clock model's figure for the same step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from rdusim.analysis.gpu.measured import read_csv, read_frozen
from rdusim.analysis.gpu.predict import decoder_layer, row_extra, simulate_gpu_step
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.hw.gpu_clock import SmClock

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (the points, beside this file)

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ("fa3", "fa2")


def steps(model: ModelSpec, gpu: Gpu, length: int, kernel: str) -> tuple[float, float, float]:
    """(full clock, first step after idle, median of the last five) seconds of the step."""
    def step(clock: SmClock | None = None) -> float:
        return simulate_gpu_step(model, gpu, layer=decoder_layer(model), head=["embedding", "lm_head"], phase="prefill",
                                 batch=1, seq_len=length, mode="eager", clock=clock, attention_kernel=kernel).seconds

    clock = SmClock(gpu.spec.clock)
    step(clock)  # the warm-up step
    clock.idle(1.0)
    times = [step(clock) for _ in range(f3.E2E_STEPS)]
    return step(), times[0], statistics.median(times[-5:])


def frozen(out: Path) -> None:
    model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    gpu = Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))
    lines = ["| row | predicted us |", "|---|---:|"]
    for length in f3.E2E_LENGTHS:
        for kernel in KERNELS:
            full, first, last5 = steps(model, gpu, length, kernel)
            name = f"prefill_{kernel}_b1_l{length}"
            lines += [f"| {name}_first | {full * 1e6:.1f} |", f"| {name}_last5 | {full * 1e6:.1f} |",
                      f"| {name}_first_clock | {first * 1e6:.1f} |", f"| {name}_last5_clock | {last5 * 1e6:.1f} |"]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(lines) - 2} rows)")


def compare(csv_path: Path, predicted: Path) -> None:
    fro = read_frozen(predicted)
    print("| row | measured ms | full clock ms | error | clock model ms | error |")
    print("|---|---:|---:|---:|---:|---:|")
    errs: dict[str, list[float]] = {}
    for r in read_csv(csv_path):
        if r["kind"] != "e2e_prefill":
            continue
        t, full, clocked = float(r["median_us"]), fro[r["name"]], fro[r["name"] + "_clock"]
        key = f"{row_extra(r)['attention_kernel']} {row_extra(r)['part']}"
        errs.setdefault(key + ", full clock", []).append(full / t - 1)
        errs.setdefault(key + ", clock model", []).append(clocked / t - 1)
        print(f"| {r['name']} | {t / 1e3:.2f} | {full / 1e3:.2f} | {full / t - 1:+.1%} | {clocked / 1e3:.2f} | "
              f"{clocked / t - 1:+.1%} |")
    print()
    for key, e in errs.items():
        print(f"{key}: {len(e)} rows, median |error| {statistics.median(map(abs, e)):.1%}, worst {max(e, key=abs):+.1%}")
    measured = {r["name"]: float(r["median_us"]) for r in read_csv(csv_path) if r["kind"] == "e2e_prefill"}
    print("\n| tokens | FA3 / FA2 step, last five, measured | clock model | full clock |")
    print("|---:|---:|---:|---:|")
    for length in f3.E2E_LENGTHS:
        a, b = f"prefill_fa3_b1_l{length}_last5", f"prefill_fa2_b1_l{length}_last5"
        if a in measured and b in measured:
            print(f"| {length} | {measured[a] / measured[b]:.3f} | {fro[a + '_clock'] / fro[b + '_clock']:.3f} | "
                  f"{fro[a] / fro[b]:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", type=Path)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--predicted", type=Path)
    args = ap.parse_args()
    if args.frozen:
        frozen(args.frozen)
    if args.compare:
        compare(args.compare, args.predicted)


if __name__ == "__main__":
    main()
