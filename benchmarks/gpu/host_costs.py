"""A GPU document's eager host (``launch.eager_ops``, ``eager_sequence``, ``queue_depth``) and the
per-kernel gap of an eager step's GPU (``launch.eager_gap``) from the committed microbenchmarks,
never from an end-to-end row.

    PYTHONPATH=. python benchmarks/gpu/host_costs.py [--gpu h100|h200]

Reads the site microbenchmark (``sweep.py`` sections ``eager_rounds``, ``p10_eager``,
``eager_paired``: every PyTorch call of one decode layer and of the head timed alone with the
forward's own operands, in a loop, GPU behind) of runs d-j on H100 device hosts of the kind P10
measured on (hw_configs/h100.yaml), or of run k on the H200 device host (hw_configs/h200.yaml),
and prints ``pooled_host_costs`` (rdusim/analysis/gpu/predict.py): the median over runs of each
run's median per-op cost, as YAML to paste into the GPU document's ``launch`` block, then each
run's per-op medians and one Llama-3.1-8B decode layer's host sum, the spread the median hides.
``eager_sequence`` (``sequence_ratio``): a layer's calls in forward order against their loops, from
runs d, e and e pinned (``eager_rounds``) for the H100's hosts and from run dq
(``eager_backlog.py``) for the H200's.
``eager_gap`` (``eager_gap``, same module): ``launch.graph`` plus the median of what a small
kernel queued in a stream costs beyond the same call in a graph (the runs' site GPU times,
``gpu_us``, against ``small_kernels.py``'s ``sk_site`` rows of the same GPU: runs h, j and l; k and m).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import eager_backlog

from rdusim.analysis.gpu.predict import MEASURED_LAYER, eager_gap, pooled_host_costs, sequence_ratio
from rdusim.config.loader import load_spec
from rdusim.config.schema import HOST_OPS, GpuSpec
from rdusim.mapping.gpu import host_ops

ROOT = Path(__file__).resolve().parents[2]
#: the runs whose CSVs carry the site microbenchmark (docs/gpu.md, runs d-j; run i has none)
#: and of run k, the H200's (docs/gpu.md, "H200, never calibrated (run k)"), by GPU document
RUNS = {"h100": {"d": "h100-20261125d-sweep.csv", "e": "h100-20261125e-sweep.csv",
                 "e pinned": "h100-20261125e-pinned-sweep.csv", "f": "h100-20261125f-sweep.csv",
                 "h": "h100-20261125h-sweep.csv", "j": "h100-20261125j-sweep.csv"},
        "h200": {"k": "h200-20261125k-sweep.csv"}}
#: the runs whose site rows carry each site's GPU time (``gpu_us``), and the same GPU's graph of
#: the same calls (``small_kernels.py``, section ``sites``): ``eager_gap``
GAP_RUNS = {"h100": ("h", "j"), "h200": ("k",)}
SMALL = {"h100": "h100-20261125l-small.csv", "h200": "h200-20261125m-small.csv"}
#: the H200 host's calls in sequence and in loops (run dq; the H100's are in its RUNS' eager_rounds)
SEQUENCE_RUN = {"h200": "h200-20261201dq-backlog.csv.gz"}


def measured(gpu: str = "h100") -> dict:
    """``pooled_host_costs`` of the committed runs beside ``gpu`` (also read by tests/gpu); where the
    runs timed no layer in sequence, ``eager_sequence`` from ``SEQUENCE_RUN`` (run dq)."""
    pooled = pooled_host_costs({name: list(csv.DictReader((ROOT / "benchmarks/gpu" / path).open()))
                                for name, path in RUNS[gpu].items()})
    if pooled["eager_sequence"] is None:
        recs = eager_backlog.read(str(ROOT / "benchmarks/gpu" / SEQUENCE_RUN[gpu]))
        pooled["eager_sequence"] = sequence_ratio(eager_backlog.sequence_pairs(recs))
    return pooled


def measured_gap(gpu: str = "h100") -> dict:
    """``eager_gap`` of the committed runs beside ``gpu`` (also read by tests/gpu)."""
    def rows(path: str) -> list[dict]:
        return list(csv.DictReader((ROOT / "benchmarks/gpu" / path).open()))
    graph_s = load_spec(ROOT / f"hw_configs/{gpu}.yaml", GpuSpec).launch.graph_s
    return eager_gap({name: rows(RUNS[gpu][name]) for name in GAP_RUNS[gpu]}, rows(SMALL[gpu]), graph_s)


def yaml_lines(pooled: dict) -> list[str]:
    """The ``launch`` fields as YAML, costs in us rounded to 0.1 us."""
    out = ["  eager_ops:"] + [f"    {op}: \"{pooled['eager_ops'][op] * 1e6:.1f} us\"" for op in HOST_OPS]
    out.append(f"  eager_sequence: {pooled['eager_sequence']:.2f}")
    return out + ([f"  queue_depth: {pooled['queue_depth']}"] if pooled["queue_depth"] is not None else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=sorted(RUNS), default="h100", help="whose document's host (default h100)")
    gpu = ap.parse_args(argv).gpu
    pooled = measured(gpu)
    print("\n".join(yaml_lines(pooled)))
    gap = measured_gap(gpu)
    print(f"  eager_gap: \"{gap['eager_gap'] * 1e6:.2f} us\"  # graph + {gap['excess'] * 1e6:.2f} us; per run: "
          + ", ".join(f"{name} {x * 1e6:.2f} us ({n} sites)" for name, (x, n) in gap["runs"].items()))
    layer = [op for name in MEASURED_LAYER for op in host_ops(name)]
    print(f"\nper run: median over its (model, batch, KV, round/pair) groups; one Llama decode layer = {len(layer)} ops")
    print("| run | groups | layer host in loops (us) | sequence / loops |")
    print("|---|---:|---:|---:|")
    for name, run in [*pooled["runs"].items(), ("pooled", {**pooled, "groups": ""})]:
        loops = sum(run["eager_ops"][op] for op in layer) * 1e6
        ratio = "" if run["eager_sequence"] is None else f"{run['eager_sequence']:.3f}"
        print(f"| {name} | {run['groups']} | {loops:.0f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
