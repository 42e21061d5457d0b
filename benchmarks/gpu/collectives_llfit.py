"""The falsified ring LL latency fit (P12, reverted): median abs error / worst per run, op, mode and ranks

    PYTHONPATH=. python benchmarks/gpu/collectives_llfit.py > benchmarks/gpu/h100x4-20261128y-llfit-before-after.txt

The record of an experiment, not the model. After run w was seen, the ring LL latency was fitted
(least squares, ``fit_ll_latency``) to its host-ahead all-reduce rows at 1, 2 and 4 KiB on 2, 3
and 4 H100s (``is_floor_row``): base 4.71 us + 0.976 us a ring step (commit 443ea5b), in place of
tuning.cc's 6.6 + 0.6. Run y was frozen with the fit on every ring LL (all-reduce base + 2(n-1)
steps, all-gather and reduce-scatter base + (n-1): commit 3ec8630); after run y, commit 3ff6a75
kept it on the all-reduce only. Both are emulated here beside tuning.cc's latency (the model now:
the fit was falsified by run y and reverted, docs/gpu.md "Run y"). Every prediction row of the H100
runs w, x and y (the fit's own rows left out) is predicted as ``collectives.py --compare`` does,
on the document's bus (no refit).
"""

from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import collectives as bench  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parents[2]
G = "benchmarks/gpu/"
#: the fit's rows, declared after run w was seen: the all-reduce with the host ahead at 1, 2, 4 KiB
FLOOR_SIZES = {1 << 10, 1 << 11, 1 << 12}
FLOOR_FILES = [f"h100x4-20261128w-{n}.csv" for n in ("x2-floors-tp2", "x3-floors", "floors-tp4")]
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


def is_floor_row(row: dict) -> bool:
    """One of the fit's rows: an all-reduce with the host ahead (``*_stream_queued``) at 1-4 KiB."""
    return (
        row["kind"] == "collective"
        and row["op"] == "all_reduce"
        and row["name"].endswith("_stream_queued")
        and int(row["bytes"]) in FLOOR_SIZES
    )


def read_rows(names: list[str]) -> list[dict]:
    rows = []
    for name in names:
        with open(ROOT / G / name, newline="") as fh:
            rows += list(csv.DictReader(fh))
    return rows


def fit_ll_latency(fabric, rows: list[dict], transfer=None) -> tuple[float, float, int]:
    """Least squares of latency = base + 2(n-1) x step over the floor rows, a row's latency being
    its time less its transfer term: ``transfer(cost) -> s``, by default the bytes over the ring
    LL rate (what 443ea5b charged: under 0.05 us at 4 KiB). Returns (base, step, rows) in s."""
    from rdusim.hw.collectives import collective_cost

    xs, ys = [], []
    for r in filter(is_floor_row, rows):
        c = collective_cost("all_reduce", int(r["bytes"]), int(r["ranks"]), fabric)
        assert (c.algorithm, c.protocol) == ("ring", "LL"), r["name"]
        moved = transfer(c) if transfer else c.wire_bytes / c.bus_bytes_per_s
        xs.append(2 * (int(r["ranks"]) - 1))
        ys.append(float(r["median_us"]) * 1e-6 - moved)
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    step = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return my - step * mx, step, len(xs)


def main() -> int:
    import rdusim.hw.collectives as nccl
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h100.yaml").gpu
    tuning = nccl.collective_cost
    base, step, n = fit_ll_latency(gpu.fabric, read_rows(FLOOR_FILES))
    base, step = round(base * 1e6, 2) * 1e-6, round(step * 1e6, 3) * 1e-6  # as 443ea5b wrote them

    def fitted(ops):
        def cost_fn(op, nbytes, ranks, fabric):
            cost = tuning(op, nbytes, ranks, fabric)
            if op in ops and (cost.algorithm, cost.protocol) == ("ring", "LL"):
                steps = 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
                cost = dataclasses.replace(cost, latency_s=base + steps * step)
            return cost

        return cost_fn

    variants = (
        ("tuning.cc (now)", tuning),
        (
            "fit, every ring LL (run y frozen, 3ec8630)",
            fitted({"all_reduce", "all_gather", "reduce_scatter"}),
        ),
        ("fit, all-reduce only (3ff6a75, reverted)", fitted({"all_reduce"})),
    )
    print(
        f"# {__doc__.splitlines()[0]} (bus {gpu.fabric.bus_bytes_per_s / 1e9:.1f} GB/s, the document's)"
    )
    print(
        f"# the fit: {n} floor rows of run w, base {base * 1e6:.2f} us + {step * 1e6:.3f} us a ring step"
    )
    print("| set | op | mode | rows | " + " | ".join(v[0] for v in variants) + " |")
    print("|---|---|---|---:|" + "---:|" * len(variants))
    try:
        for label, files in SETS.items():
            groups: dict[tuple[str, str], list[list[float]]] = {}
            for r in read_rows(files):
                if r["kind"] != "collective" or r["set"] == "calibration" or is_floor_row(r):
                    continue
                queued = r["name"].endswith("_stream_queued")
                errs = groups.setdefault(
                    (r["op"], "queued" if queued else r["mode"]), [[] for _ in variants]
                )
                for i, (_, cost_fn) in enumerate(variants):
                    nccl.collective_cost = cost_fn
                    us, _ = bench.predict_us(
                        gpu, r["op"], int(r["bytes"]), int(r["ranks"]), r["mode"], queued=queued
                    )
                    errs[i].append(us / float(r["median_us"]) - 1)
            for (op, mode), errs in groups.items():
                cells = ["{:.0f}% / {:+.0f}%".format(*bench.median_worst(e)) for e in errs]
                print(f"| {label} | {op} | {mode} | {len(errs[0])} | " + " | ".join(cells) + " |")
    finally:
        nccl.collective_cost = tuning
    return 0


if __name__ == "__main__":
    sys.exit(main())
