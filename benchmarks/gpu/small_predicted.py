"""Freeze the model's predictions of every ``small_kernels.py`` row on a GPU, before it is measured.

    PYTHONPATH=. python benchmarks/gpu/small_predicted.py ROWS.csv hw_configs/h200.yaml > PREDICTED.txt

``ROWS.csv`` gives the row list (a run of the same script on another GPU: the rows are the same
shapes); nothing of its measurements is read. Per row: the small kernels' device time
(``micro_device_s``), a decode GEMM's share of a graph (``micro_gemm_s``), a decode step's
graph-replayed time (``predict_row``). ``compare_sweep.py`` reads the file back beside the run.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from rdusim.analysis.gpu.predict import micro_device_s, micro_gemm_s, predict_row, sweep_model
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu


def predictions(rows: list[dict], gpu: Gpu, base: ModelSpec) -> list[tuple[str, str, float]]:
    out = []
    for r in rows:
        kind = r["kind"]
        if kind == "sk_gemm_graph":
            out.append((kind, r["name"], micro_gemm_s(r, gpu)))
        elif kind == "e2e_decode":
            out.append((kind, r["name"], predict_row(r, gpu, sweep_model(r, base))))
        else:
            t = micro_device_s(r, gpu)
            if t is not None:
                out.append((kind, r["name"], t))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = list(csv.DictReader(Path(argv[0]).open()))
    gpu = Gpu(load_spec(argv[1], GpuSpec))
    base = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    print(f"# predicted by {argv[1]} (rdusim's GPU model), rows of {Path(argv[0]).name}; us")
    print("kind,name,predicted_us")
    for kind, name, t in predictions(rows, gpu, base):
        print(f"{kind},{name},{t * 1e6:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
