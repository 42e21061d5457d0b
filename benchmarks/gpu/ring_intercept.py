"""After run dn: a ring Simple call's fixed cost, measured and modelled (P12; analysis, model unchanged).

Run dn (``ring_post.py --verdict-dn``) found NCCL's graph calls 12-19 us longer than NCCL's protocol
emulated at the same marginal rate. Here, on every committed two- and four-GPU sweep (``FILES``), the
graph rows of the three ring ops at 32-128 MiB (the Simple protocol, past the small sizes) are fitted
with a line, measured and as the model gives them on each run's fitted fabric (``collectives.py
--compare``'s): its slope (us a MiB of S) and intercept.

    PYTHONPATH=. python benchmarks/gpu/ring_intercept.py --table        # the lines (seconds)
    PYTHONPATH=. python benchmarks/gpu/ring_intercept.py --evaluate 22 1 # the trial below (about a minute)

The measured intercepts come to 25-38 us for every op on two and four ranks; the model's follow
tuning.cc's ring Simple latency (8.4 us + 3.4 a step: 2(n - 1) steps for the all-reduce, n - 1 for the
others), 15-20 us on two ranks, 21-32 on four. ``--evaluate L0 H``: ``rdusim fidelity --gpu`` with a ring
Simple call's fixed time L0 + H us a step (the tuner's choice unchanged: NCCL picks with tuning.cc's),
beside the engine as committed (``flat_latency``): 19 groups regress, not adopted.

Run do (after the trial): NCCL's ring Simple forced from 4 KiB (``NCCL_PROTO=Simple NCCL_ALGO=Ring``) and at
its defaults on two H200s, against the model's ring Simple candidate (``forced_simple_us``):
``--frozen-do OUT`` writes the frozen table, ``--verdict-do FROZEN SIMPLE_CSV DEFAULT_CSV`` the registered
checks (``h200x2-20261130do-simple-hypotheses.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
#: the committed sweeps with the three ring ops' graph rows at 32-128 MiB (two and four GPUs)
FILES = ("h100x2-20261125t-collectives.csv", "h100x2-20261125t-collectives-run2.csv",
         "h100x2-20261125u-collectives.csv", "h100x2-20261128x-collectives.csv",
         "h200x2-20261128aa-sweep.csv", "h200x2-20261128aa-sweep2.csv", "h200x2-20261128an-x2-sweep.csv",
         "h200x2-20261128an-x2-sweep2.csv", "h100x4-20261128w-collectives.csv",
         "h100x4-20261128w-collectives-run2.csv", "h200x4-20261128an-sweep.csv", "h200x4-20261128an-sweep2.csv")
OPS = ("all_reduce", "reduce_scatter", "all_gather")
LINE = (32, 128)  # MiB: the rows each line is fitted to


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares (slope, intercept)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def table() -> list[str]:
    """Per sweep, ranks and op: the measured and modelled lines through the graph rows at ``LINE``."""
    from rdusim.analysis.gpu.collectives import compare_collective_rows
    from rdusim.analysis.gpu.measured import read_csv
    from rdusim.hw.gpu import load_gpu_node

    lines = [f"Graph rows of {LINE[0]}-{LINE[1]} MiB, a line each (us a MiB of S; intercept us): measured and the model "
             "(each run's fitted fabric)",
             "| sweep | ranks | op | measured slope | measured intercept | model slope | model intercept | difference |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for name in FILES:
        doc = ROOT / "hw_configs" / ("h200.yaml" if name.startswith("h200") else "h100.yaml")
        rows = compare_collective_rows(read_csv(ROOT / "benchmarks/gpu" / name), load_gpu_node(doc).gpu)
        for ranks in sorted({r["ranks"] for r in rows}):
            for op in OPS:
                pts = [(int(r["bytes"]) / MIB, float(r["median_us"]), r["pred"]) for r in rows
                       if r["op"] == op and r["launch"] == "graph" and r["ranks"] == ranks
                       and LINE[0] * MIB <= int(r["bytes"]) <= LINE[1] * MIB]
                if len(pts) < 2:
                    continue
                a, b = _line([p[0] for p in pts], [p[1] for p in pts])
                c, d = _line([p[0] for p in pts], [p[2] for p in pts])
                lines.append(f"| {name} | {ranks} | {op} | {a:.3f} | {b:.1f} | {c:.3f} | {d:.1f} | {b - d:+.1f} |")
    return lines


@contextlib.contextmanager
def flat_latency(base_us: float, step_us: float) -> Iterator[None]:
    """The engine with a ring Simple call's fixed time ``base_us`` + ``step_us`` a step in place of
    tuning.cc's (``rdusim.sim.ring.collective_time_s``); NCCL's choice of algorithm and protocol as before."""
    from rdusim.analysis.gpu import collectives as analysis
    from rdusim.sim import gpu as simgpu
    from rdusim.sim import ring as engine

    saved = engine.collective_time_s

    def time_s(cost) -> float:
        if cost.ring is None:
            return saved(cost)
        steps = 2 * (cost.ranks - 1) if cost.op == "all_reduce" else cost.ranks - 1
        return (base_us + steps * step_us) * 1e-6 + engine.ring_transfer_s(cost.ring)

    engine.collective_time_s = simgpu.collective_time_s = analysis.collective_time_s = time_s
    try:
        yield
    finally:
        engine.collective_time_s = simgpu.collective_time_s = analysis.collective_time_s = saved


def evaluate(base_us: float, step_us: float) -> list[str]:
    """``rdusim fidelity --gpu`` with ``flat_latency`` beside the engine as committed: the gated collectives
    groups, then every group whose verdict moved."""
    from ring_calls import _evaluation, _moved
    from ring_queue import _fidelity_rows

    now = _fidelity_rows(contextlib.nullcontext())
    flat = _fidelity_rows(flat_latency(base_us, step_us))
    return [f"rdusim fidelity --gpu with a ring Simple call's fixed time {base_us:g} us + {step_us:g} us a step "
            "(the engine now -> flat)", "", *_evaluation(now, flat, ("now", "flat")), "", *_moved(now, flat, "flat")]


# --- run do: NCCL's ring Simple calls from a few KiB up, forced and by default ---------------------------

#: run do's rows (bytes): the Simple protocol forced on the ring (NCCL_PROTO=Simple NCCL_ALGO=Ring) and
#: NCCL's defaults, graph, two H200s
DO_SIZES = (4096, 65536, 262144, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20)
#: the registered bounds (h200x2-20261130do-simple-hypotheses.md)
NEAR, FIXED_AG, WITH_BYTES, GROWS, FLAT = 0.15, 3.0, 1.0, 5.0, 2.0
TINY, LARGE = (4096, 65536), (16 << 20, 32 << 20, 64 << 20)


def forced_simple_us(gpu, op: str, size: int, ranks: int = 2) -> float:
    """A graph row of ``op`` with NCCL's ring Simple forced, as the engine prices it: ``predict_us`` with
    NCCL's choice replaced by its tuner's ring Simple candidate (tuning.cc's latency, the ring's channels)."""
    import dataclasses

    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw import collectives as nccl

    chosen = nccl.collective_cost

    def ring_simple(op: str, nbytes: float, ranks: int, fabric):
        cost = next(c for c in nccl.candidates(op, nbytes, ranks, fabric)
                    if (c.algorithm, c.protocol) == ("ring", "Simple"))
        return dataclasses.replace(cost, ring=nccl.ring_plan(op, nbytes, ranks, fabric.ring))

    nccl.collective_cost = ring_simple  # predict_us looks NCCL's choice up at each call
    try:
        return predict_us(gpu, op, size, ranks, "graph")[0]
    finally:
        nccl.collective_cost = chosen


def frozen_table_do() -> list[str]:
    """Run do's frozen table: each row with the ring's Simple forced and at NCCL's choice, h200.yaml as
    committed (nothing refitted)."""
    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu
    lines = ["# Run do, frozen before the run: NCCL's graph rows on two H200s, hw_configs/h200.yaml as committed;",
             "# `simple` the ring's Simple forced (tuning.cc's latency, the ring's channels), `default` NCCL's choice.",
             "| op | bytes | simple (us) | default (us) | default's protocol |", "|---|---:|---:|---:|---|"]
    for op in OPS:
        for size in DO_SIZES:
            us, cost = predict_us(gpu, op, size, 2, "graph")
            lines.append(f"| {op} | {size} | {forced_simple_us(gpu, op, size):.2f} | {us:.2f} | "
                         f"{cost.algorithm}/{cost.protocol} |")
    return lines


def _frozen_do(path: str) -> dict[tuple[str, int], tuple[float, float]]:
    """Run do's frozen table: {(op, bytes): (the ring's Simple forced, NCCL's choice), us}."""
    out = {}
    with open(path) as fh:
        for line in fh:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 5 and cells[1].isdigit():
                out[cells[0], int(cells[1])] = (float(cells[2]), float(cells[3]))
    return out


def _graph_rows(path: str) -> dict[tuple[str, int], float]:
    """A collectives.py CSV's graph rows: {(op, bytes): us}."""
    with open(path, newline="") as fh:
        return {(r["op"], int(r["bytes"])): float(r["median_us"]) for r in csv.DictReader(fh)
                if r.get("kind") == "collective" and r["mode"] == "graph"}


def verdict_do(frozen_path: str, forced_csv: str, default_csv: str) -> list[str]:
    """Run do's registered checks (``h200x2-20261130do-simple-hypotheses.md``) from its files."""
    frozen, forced, default = _frozen_do(frozen_path), _graph_rows(forced_csv), _graph_rows(default_csv)
    lines = ["NCCL's graph rows on two H200s (us a call): the ring's Simple forced and NCCL's choice, beside the "
             "frozen model", "| op | bytes | Simple, measured | model | difference | default, measured | model |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    diff = {}
    for op in OPS:
        for size in DO_SIZES:
            m, (p, d) = forced.get((op, size), math.nan), frozen[op, size]
            diff[op, size] = m - p
            lines.append(f"| {op} | {size} | {m:.1f} | {p:.1f} | {m - p:+.1f} | {default.get((op, size), math.nan):.1f} "
                         f"| {d:.1f} |")
    s1 = {op: statistics.median(abs(forced[op, b] / frozen[op, b][0] - 1) for b in TINY) for op in OPS}
    s2 = statistics.median(forced["all_gather", b] - forced["reduce_scatter", b] for b in TINY)
    s3 = {op: statistics.median(diff[op, b] for b in LARGE) - statistics.median(diff[op, b] for b in TINY)
          for op in OPS}
    lines += ["",
              "S1, tuning.cc's fixed cost at a few KiB (4 and 64 KiB, within 15% of the model, each op): " + ", ".join(
                  f"{op} {100 * v:.1f}%" for op, v in s1.items()) + f" -> {'pass' if max(s1.values()) <= NEAR else 'fail'}",
              f"S2, the all-gather over the reduce-scatter at 4 and 64 KiB: {s2:+.1f} us -> "
              + ("fixed" if s2 >= FIXED_AG else "with the bytes" if s2 <= WITH_BYTES else "neither"),
              "S3, NCCL over the model at 16-64 MiB less at 4-64 KiB (each op): " + ", ".join(
                  f"{op} {v:+.1f} us" for op, v in s3.items()) + " -> "
              + ("grows" if min(s3.values()) >= GROWS else "flat" if max(s3.values()) <= FLAT else "neither")]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--table", action="store_true", help="the measured and modelled lines")
    group.add_argument("--evaluate", nargs=2, type=float, metavar=("BASE_US", "STEP_US"),
                       help="rdusim fidelity --gpu with a flat ring Simple fixed time")
    group.add_argument("--frozen-do", metavar="OUT", help="write run do's frozen table")
    group.add_argument("--verdict-do", nargs=3, metavar=("FROZEN", "FORCED_CSV", "DEFAULT_CSV"),
                       help="run do's checks")
    args = ap.parse_args(argv)
    if args.frozen_do:
        Path(args.frozen_do).write_text("\n".join(frozen_table_do()) + "\n")
    elif args.verdict_do:
        print("\n".join(verdict_do(*args.verdict_do)))
    else:
        print("\n".join(table() if args.table else evaluate(*args.evaluate)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
