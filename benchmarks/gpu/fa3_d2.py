"""FlashAttention-3's forward against the published figures (issue 17, P12).

The FlashAttention-3 paper's Fig. 5 (G4; ../shared/reference/hardware-and-models.md section D.2:
H100 SXM5, bf16, batch x seqlen = 16K tokens, hidden 2048, TFLOP/s = 4 s^2 d h, halved when
causal; ``benchmarks/gpu/g4-fa3-h100.csv``) against ``rdusim.mapping.gpu.flash3_prefill`` on
``hw_configs/h100.yaml``, each kernel timed back to back (``predict_fa3_row``). Every figure is a
prediction: the model's constants come from today's FA3 build on an H200 (run bo's pipe counters,
run bn's timed calls: ``benchmarks/gpu/fa3_fit.py``), the paper's figures from its 2024 build.

    PYTHONPATH=. python benchmarks/gpu/fa3_d2.py                # the table (benchmarks/gpu/fa3_d2.txt)
    PYTHONPATH=. python benchmarks/gpu/fa3_d2.py --mla          # DeepSeek's 192 / 128 beside run bm's cuDNN

``--mla``: the FA3 model at DeepSeek-R1's MLA prefill shape (q and k 192 wide, V 128, causal, batch
1; ``hw_configs/h200.yaml``) beside what run bm measured on an H200 for the same attention with V
padded to 192 (1.2x the FLOPs): FA2 and cuDNN's Hopper kernel (``h200-20261129bm-mla-prefill.csv``).
Context, not a check (FA3 itself at this shape: runs bn and bq).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rdusim.analysis.gpu.measured import compare_fa3_published, read_csv
from rdusim.analysis.gpu.predict import (
    FA3_PUBLISHED_CSV,
)
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import fa3_fwd_tile, flash3_prefill
from rdusim.sim.gpu import elapsed_s, simulate_gpu

ROOT = Path(__file__).resolve().parents[2]
ROWS = read_csv(ROOT / "benchmarks/gpu" / FA3_PUBLISHED_CSV)
SPEC = load_spec(ROOT / "hw_configs/h100.yaml", GpuSpec)


def table(gpu: Gpu) -> None:
    """Each published figure against the model (the CSV's order: one line per column)."""
    compared = compare_fa3_published(ROWS, gpu)
    columns: dict[tuple[str, str], list[dict]] = {}
    for c in compared:
        columns.setdefault((c["head_dim"], c["mode"]), []).append(c)
    seqs = [c["seq_len"] for c in next(iter(columns.values()))]
    print("model time over the published figure's, minus one (TFLOP/s: published / model)")
    print()
    print("| column | tile | role | " + " | ".join(f"{int(s) // 1024 or 0.5}K" for s in seqs) + " | median abs | worst |")
    print("|---|---|---|" + "---:|" * (len(seqs) + 2))
    for (hd, mode), cs in columns.items():
        rows, cols = fa3_fwd_tile(int(hd), int(hd), mode == "causal")
        errs = [c["err"] for c in cs]
        cells = [f"{c['err']:+.1%} ({float(c['tflops']):.0f} / {float(c['tflops']) / (1 + c['err']):.0f})" for c in cs]
        print(f"| hd{hd} {mode} | {rows} x {cols} | {cs[0]['set']} | " + " | ".join(cells)
              + f" | {statistics.median(map(abs, errs)):.1%} | {max(errs, key=abs):+.1%} |")
    errs = [c["err"] for c in compared]
    print(f"\nprediction: {len(errs)} figures, median abs {statistics.median(map(abs, errs)):.1%}, "
          f"worst {max(errs, key=abs):+.1%}")


def mla_context() -> None:
    """The FA3 model at 192 / 128 against run bm's FA2 and cuDNN rows (V padded to 192)."""
    gpu = Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))
    measured = {r["name"]: float(r["median_us"]) for r in read_csv(ROOT / "benchmarks/gpu/h200-20261129bm-mla-prefill.csv")}
    print("| heads | tokens | FA3 model (us) | its TFLOP/s | FA2 measured (us) | cuDNN measured (us) | FA3 model / cuDNN |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for heads, lengths in ((16, (2048, 8192, 32768, 65536)), (128, (2048, 8192, 32768))):
        for n in lengths:
            kernels = flash3_prefill("attention", 1, heads, heads, n, 192, gpu, head_dim_v=128)
            t = elapsed_s(simulate_gpu([(k, 0) for k in kernels], gpu, mode="stream")) * 1e6
            shape = f"h{heads}x{heads}x192_l{n}"
            fa2, cudnn = measured[f"mla_flash_prefill_{shape}"], measured[f"mla_cudnn_prefill_{shape}"]
            print(f"| {heads} | {n} | {t:.0f} | {n * n * heads * 320 / t / 1e6:.0f} | {fa2:.0f} | {cudnn:.0f} | {t / cudnn:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mla", action="store_true", help="DeepSeek's MLA prefill shape beside run bm's cuDNN rows")
    args = ap.parse_args()
    if args.mla:
        mla_context()
    else:
        table(Gpu(SPEC))


if __name__ == "__main__":
    main()
