"""hw_configs/h100.yaml's eager host (``launch.eager_ops``, ``eager_ops_idle``, ``queue_depth``) from
the committed per-op host microbenchmarks, never from an end-to-end row.

    PYTHONPATH=. python benchmarks/gpu/host_costs.py

Reads the site microbenchmark of runs d-j (``sweep.py`` sections ``eager_rounds``, ``p10_eager``,
``eager_paired``: every PyTorch call of one decode layer and of the head timed alone with the
forward's own operands, GPU behind and GPU idle, on H100 device hosts of the kind P10 measured on)
and prints ``pooled_host_costs`` (rdusim/analysis/gpu/predict.py): the median over runs of each
run's median per-op cost, as YAML to paste into the GPU document's ``launch`` block, then each
run's per-op medians and one Llama-3.1-8B decode layer's host sum, the spread the median hides.
"""

from __future__ import annotations

import csv
from pathlib import Path

from rdusim.analysis.gpu.predict import MEASURED_LAYER, pooled_host_costs
from rdusim.config.schema import HOST_OPS
from rdusim.mapping.gpu import host_ops

ROOT = Path(__file__).resolve().parents[2]
#: the runs whose CSVs carry the site microbenchmark (docs/gpu.md, runs d-j; run i has none)
RUNS = {"d": "h100-20261125d-sweep.csv", "e": "h100-20261125e-sweep.csv",
        "e pinned": "h100-20261125e-pinned-sweep.csv", "f": "h100-20261125f-sweep.csv",
        "h": "h100-20261125h-sweep.csv", "j": "h100-20261125j-sweep.csv"}


def measured() -> dict:
    """``pooled_host_costs`` of the committed runs (also read by tests/gpu)."""
    return pooled_host_costs({name: list(csv.DictReader((ROOT / "benchmarks/gpu" / path).open()))
                              for name, path in RUNS.items()})


def yaml_lines(pooled: dict) -> list[str]:
    """The ``launch`` fields as YAML, costs in us rounded to 0.1 us."""
    out = []
    for key in ("eager_ops", "eager_ops_idle"):
        out.append(f"  {key}:")
        out += [f"    {op}: \"{pooled[key][op] * 1e6:.1f} us\"" for op in HOST_OPS]
    return out + [f"  queue_depth: {pooled['queue_depth']}"]


def main() -> int:
    pooled = measured()
    print("\n".join(yaml_lines(pooled)))
    layer = [op for name in MEASURED_LAYER for op in host_ops(name, "decode")]
    print(f"\nper run: median over its (model, batch, KV, round/pair) groups; one Llama decode layer = {len(layer)} ops")
    print("| run | groups | GPU time recorded | layer host, GPU behind (us) | layer host, GPU idle (us) |")
    print("|---|---:|---|---:|---:|")
    for name, run in [*pooled["runs"].items(), ("pooled", {**pooled, "groups": "", "gpu_timed": ""})]:
        behind = sum(run["eager_ops"][op] for op in layer) * 1e6
        idle = sum(run["eager_ops_idle"][op] for op in layer) * 1e6
        timed = {True: "yes", False: "no (idle not used)", "": ""}[run["gpu_timed"]]
        print(f"| {name} | {run['groups']} | {timed} | {behind:.0f} | {idle:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
