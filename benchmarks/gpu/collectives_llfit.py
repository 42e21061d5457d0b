"""Before and after the ring LL latency fit: median abs error / worst per run, op, mode and ranks.

    PYTHONPATH=. python benchmarks/gpu/collectives_llfit.py > benchmarks/gpu/h100x4-20261128y-llfit-before-after.txt

Every prediction row of the H100 runs w, x and y (the floor calibration rows left out), predicted
as ``collectives.py --compare`` does but on the document's bus (no refit), three ways: with
tuning.cc's ring LL latency (``hw_configs/h100.yaml`` without its measured one), with the fit on
every ring LL (all-reduce base + 2(n-1) steps, all-gather and reduce-scatter base + (n-1): run
y's frozen model, commit 3ec8630, emulated here) and with the fit on the all-reduce only (the
model now). docs/gpu.md, "Run y", quotes it.
"""

from __future__ import annotations

import csv
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import collectives as bench  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parents[2]
G = "benchmarks/gpu/"
SETS = {
    "w 4 ranks": [
        "h100x4-20261128w-collectives.csv",
        "h100x4-20261128w-collectives-run2.csv",
        "h100x4-20261128w-v-sizes.csv",
        "h100x4-20261128w-floors-tp4.csv",
    ],
    "w 3 ranks": ["h100x4-20261128w-x3-floors.csv"],
    "w 2 ranks": ["h100x4-20261128w-x2-floors-tp2.csv"],
    "x 2 ranks": ["h100x2-20261128x-collectives.csv", "h100x2-20261128x-floors-tp2.csv"],
    "y 4 ranks": ["h100x4-20261128y-y4.csv"],
    "y 3 ranks": ["h100x4-20261128y-y3.csv", "h100x4-20261128y-y3align.csv"],
    "y 2 ranks": ["h100x4-20261128y-y2.csv"],
}


def main() -> int:
    import rdusim.hw.collectives as nccl
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h100.yaml").gpu
    tuning = dataclasses.replace(gpu.fabric, ll_latency_s=None)
    now = nccl.collective_cost

    def every_ring_ll(
        op, nbytes, ranks, fabric
    ):  # 3ec8630: the fit on all-gather and reduce-scatter too
        cost = now(op, nbytes, ranks, fabric)
        if (
            fabric.ll_latency_s
            and op != "all_reduce"
            and (cost.algorithm, cost.protocol) == ("ring", "LL")
        ):
            base, step = fabric.ll_latency_s
            cost = dataclasses.replace(cost, latency_s=base + nccl.ring_steps(op, ranks) * step)
        return cost

    variants = (
        ("tuning.cc", now, tuning),
        ("fit, every ring LL", every_ring_ll, gpu.fabric),
        ("fit, all-reduce only (now)", now, gpu.fabric),
    )
    print(
        f"# {__doc__.splitlines()[0]} (bus {gpu.fabric.bus_bytes_per_s / 1e9:.1f} GB/s, the document's)"
    )
    print("| set | op | mode | rows | " + " | ".join(v[0] for v in variants) + " |")
    print("|---|---|---|---:|" + "---:|" * len(variants))
    try:
        for label, files in SETS.items():
            groups: dict[tuple[str, str], list[list[float]]] = {}
            for name in files:
                with open(ROOT / G / name, newline="") as fh:
                    for r in csv.DictReader(fh):
                        if (
                            r["kind"] != "collective"
                            or r["set"] == "calibration"
                            or bench.is_floor_calibration(r)
                        ):
                            continue
                        queued = r["name"].endswith("_stream_queued")
                        errs = groups.setdefault(
                            (r["op"], "queued" if queued else r["mode"]), [[] for _ in variants]
                        )
                        for i, (_, cost_fn, fabric) in enumerate(variants):
                            nccl.collective_cost = cost_fn
                            us, _ = bench.predict_us(
                                gpu,
                                r["op"],
                                int(r["bytes"]),
                                int(r["ranks"]),
                                r["mode"],
                                fabric,
                                queued=queued,
                            )
                            errs[i].append(us / float(r["median_us"]) - 1)
            for (op, mode), errs in groups.items():
                cells = [
                    f"{statistics.median(map(abs, e)) * 100:.0f}% / {max(e, key=abs) * 100:+.0f}%"
                    for e in errs
                ]
                print(f"| {label} | {op} | {mode} | {len(errs[0])} | " + " | ".join(cells) + " |")
    finally:
        nccl.collective_cost = now
    return 0


if __name__ == "__main__":
    sys.exit(main())
