"""FlashAttention-3's two constants, each from the measurement that isolates it (issue 17, P12).

    PYTHONPATH=. python benchmarks/gpu/fa3_fit.py > benchmarks/gpu/fa3_fit.txt

1. ``efficiency.fa3_pipe_loss`` (``fit_fa3_pipes``) from run bo's Nsight Compute pipe counters
   (``h200-20261129bo-fa3-ncu.txt``: six FA3 kernels on an H200): the bottleneck pipe's busy share
   against rho (the exponentials' XU time over the MMAs' tensor time a score at peak; from first
   principles, ``fa3_pipe_ratio``). No timing is read.
2. ``launch.fa3_tile`` (``fit_fa3_tile``) at that loss, from run bn's 12 timed calls at the
   FlashAttention-3 paper's causal head_dim-128 and -64 shapes (``is_fa3_calibration``).

Then the law against run bp's four kernels (profiled after run bo; registered before it ran:
``h200-20261129bp-fa3-hypotheses.md``), a prediction of the counters.
"""

from __future__ import annotations

from pathlib import Path

from rdusim.analysis.gpu.measured import read_csv, read_fa3_pipes
from rdusim.analysis.gpu.predict import (
    FA3_CALIBRATION_CSV,
    FA3_PIPES_TABLE,
    fa3_pipe_ratio,
    fit_fa3_pipes,
    fit_fa3_tile,
    is_fa3_calibration,
)
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu

GPU_DIR = Path(__file__).resolve().parent
H200 = GPU_DIR.parents[1] / "hw_configs/h200.yaml"
RUN_BP = "h200-20261129bp-fa3-ncu.txt"


def main() -> None:
    spec = load_spec(H200, GpuSpec)
    gpu = Gpu(spec)
    pipes = fit_fa3_pipes(read_fa3_pipes(GPU_DIR / FA3_PIPES_TABLE), gpu)
    loss = pipes["fa3_pipe_loss"]
    print(f"fa3_pipe_loss {loss:.2f} from {pipes['kernels']} kernels of {FA3_PIPES_TABLE} "
          f"(worst {pipes['worst_points']:.1f} points off the law)")
    cal = [r for r in read_csv(GPU_DIR / FA3_CALIBRATION_CSV) if is_fa3_calibration(r)]
    tile = fit_fa3_tile(cal, spec, loss)
    print(f"fa3_tile {tile['fa3_tile_us']:.2f} us from {len(cal)} rows of {FA3_CALIBRATION_CSV} (loss {tile['loss']:.4f})")
    print()
    print("| kernel | rho | law: bottleneck busy | measured: max(tensor, XU) | points |")
    print("|---|---:|---:|---:|---:|")
    for table in (FA3_PIPES_TABLE, RUN_BP):
        role = "calibration" if table == FA3_PIPES_TABLE else "prediction (run bp)"
        for r in read_fa3_pipes(GPU_DIR / table):
            rho = fa3_pipe_ratio(r["head_dim"], r["head_dim_v"], gpu)
            law, meas = gpu.fa3_pipe_busy(rho), max(r["tensor"], r["xu"])
            print(f"| {r['point']} ({role}) | {rho:.2f} | {law:.1%} | {meas:.1%} | {100 * (law - meas):+.1f} |")


if __name__ == "__main__":
    main()
