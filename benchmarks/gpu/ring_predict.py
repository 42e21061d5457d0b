"""Run ce: the ring's channels in the engine, frozen before a lease it never saw.

The engine simulates a ring Simple collective channel by channel (``rdusim/sim/ring.py``; docs/gpu.md,
"A ring's channels in the engine"). This script freezes what it gives for NCCL's graph rows
(``collective_ramp_diag.py``'s: one graph of calls, the time a call) on two H200s, with
``hw_configs/h200.yaml`` as committed (nothing refitted), beside the model before it (the wire
bytes at the bus rate), for NCCL as it runs by default and with what the channels' model says
matters: the channel count (``NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS``) and the chunk
(``NCCL_BUFFSIZE``: a channel's chunk is half of it, ``hw.collectives.RING_CHUNK_BYTES``).

    PYTHONPATH=. python benchmarks/gpu/ring_predict.py --frozen h200x2-20261129ce-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/ring_predict.py --compare h200x2-20261129ce-predicted.txt <csv>...

Variants (the CSV's ``variant`` column, ``ring_emul_run_ce.sh``): ``def`` (NCCL's defaults: 24
channels, 4 MiB buffer), ``ch12``, ``ch16``, ``ch32`` (channels), ``buf1m``, ``buf16m`` (buffer).
Checks: ``h200x2-20261129ce-ring-hypotheses.md`` (committed before the run).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
SIZES = (2, 4, 8, 16, 32, 64, 96, 128, 256, 384, 512, 768, 1024, 1536, 2048)
#: variant -> (ops, ring channels, the buffer NCCL_BUFFSIZE in bytes)
VARIANTS = {
    "def": (("all_reduce", "all_gather", "reduce_scatter"), 24, 4 * MIB),
    "ch12": (("all_reduce",), 12, 4 * MIB),
    "ch16": (("all_reduce",), 16, 4 * MIB),
    "ch32": (("all_reduce",), 32, 4 * MIB),
    "buf1m": (("all_reduce",), 24, 1 * MIB),
    "buf16m": (("all_reduce",), 24, 16 * MIB),
}
DOC = "hw_configs/h200.yaml"
CALLS = 20  # a graph of calls, as collectives.py's CALLS_PER_ROW


def predict(variant: str, op: str, size: int, doc: Path = ROOT / DOC) -> tuple[float, float]:
    """(the channels' model, the model before it): us a call of one graph row, ``doc``'s fabric."""
    from rdusim.hw import collectives as nccl
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import collective
    from rdusim.sim.gpu import elapsed_s, simulate_gpu

    _, channels, buffsize = VARIANTS[variant]
    gpu = load_gpu_node(doc).gpu
    fabric = gpu.fabric
    ring = dataclasses.replace(fabric.ring, channels=channels)
    cost = nccl.collective_cost(op, size, 2, dataclasses.replace(fabric, ring=ring))
    if cost.ring is not None:
        cost = dataclasses.replace(cost, ring=nccl.ring_plan(op, size, 2, ring, buffsize // 2))
    out = []
    for c in (cost, dataclasses.replace(cost, ring=None)):
        kernel = dataclasses.replace(collective(op, op, size, 2, gpu)[0], collective=c)
        out.append(elapsed_s(simulate_gpu([(kernel, 0)] * CALLS, gpu, mode="graph")) / CALLS * 1e6)
    return out[0], out[1]


def frozen_table() -> list[str]:
    lines = [
        f"# Run ce, frozen before the run: NCCL's graph rows on two H200s, {DOC} as committed (nothing",
        "# refitted); `model` the ring's channels, `before` the wire bytes at the bus rate.",
        "| variant | op | MiB | model (us) | before (us) |",
        "|---|---|---:|---:|---:|",
    ]
    for variant, (ops, _, _) in VARIANTS.items():
        for op in ops:
            for mib in SIZES:
                now, before = predict(variant, op, mib * MIB)
                lines.append(f"| {variant} | {op} | {mib} | {now:.1f} | {before:.1f} |")
    return lines


def frozen_rows(path: str, values: int) -> dict[tuple[str, str, int], list[float]]:
    """A frozen table's rows, ``| variant | op | MiB | value ... |`` with ``values`` values: {(variant,
    op, MiB): the values} (the header and rule lines skipped)."""
    out = {}
    with open(path) as fh:
        for line in fh:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 3 + values and cells[2].isdigit():
                out[cells[0], cells[1], int(cells[2])] = [float(c) for c in cells[3:]]
    return out


def read_frozen(path: str) -> dict[tuple[str, str, int], tuple[float, float]]:
    return {key: (now, before) for key, (now, before) in frozen_rows(path, 2).items()}


def read_measured(paths: list[str]) -> dict[tuple[str, str, int], float]:
    out = {}
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["case"] == "plain":
                    out[r["variant"], r["op"], int(r["bytes"]) // MIB] = float(r["median_us"])
    return out


#: the registered checks (h200x2-20261129ce-ring-hypotheses.md): (variant, op) -> (median, worst)
#: over the rows from CHECK_FROM MiB up
CHECKS = {
    ("def", "all_reduce"): (0.06, 0.15),
    ("def", "reduce_scatter"): (0.08, 0.20),
    ("def", "all_gather"): (0.15, 0.25),
    ("ch12", "all_reduce"): (0.06, 0.15),
    ("ch16", "all_reduce"): (0.06, 0.15),
    ("ch32", "all_reduce"): (0.06, 0.15),
}
CHECK_FROM = 8
#: the buffer check: each variant's time over the default's at these sizes, within this of the model's
BUFFER_SIZES, BUFFER_POINTS = (96, 256, 1024), 0.03


def compare(frozen_path: str, csv_paths: list[str]) -> list[str]:
    frozen, measured = read_frozen(frozen_path), read_measured(csv_paths)
    lines = ["| variant | op | rows | model: median / worst | before: median / worst | check (median / worst) | passed? |",
             "|---|---|---:|---|---|---|---|"]
    for (variant, op), (med_bound, worst_bound) in CHECKS.items():
        keys = sorted(k for k in frozen if k[:2] == (variant, op) and k[2] >= CHECK_FROM and k in measured)
        if not keys:
            lines.append(f"| {variant} | {op} | 0 | - | - | - | not measured |")
            continue
        errs = [frozen[k][0] / measured[k] - 1 for k in keys]
        before = [frozen[k][1] / measured[k] - 1 for k in keys]
        med, worst = statistics.median(abs(e) for e in errs), max(errs, key=abs)
        bmed, bworst = statistics.median(abs(e) for e in before), max(before, key=abs)
        ok = med <= med_bound and abs(worst) <= worst_bound
        lines.append(f"| {variant} | {op} | {len(keys)} | {100 * med:.1f}% / {100 * worst:+.1f}% | "
                     f"{100 * bmed:.1f}% / {100 * bworst:+.1f}% | {100 * med_bound:.0f}% / {100 * worst_bound:.0f}% | "
                     f"{'yes' if ok else 'no'} |")
    lines += ["", "| buffer | MiB | measured / default | model / default | points apart | within 3? |", "|---|---:|---:|---:|---:|---|"]
    for variant in ("buf1m", "buf16m"):
        for mib in BUFFER_SIZES:
            mine, base = (variant, "all_reduce", mib), ("def", "all_reduce", mib)
            if mine not in measured or base not in measured:
                lines.append(f"| {variant} | {mib} | - | - | - | not measured |")
                continue
            m = measured[mine] / measured[base]
            p = frozen[mine][0] / frozen[base][0]
            lines.append(f"| {variant} | {mib} | {m:.3f} | {p:.3f} | {100 * (p - m):+.1f} | "
                         f"{'yes' if abs(p - m) <= BUFFER_POINTS else 'no'} |")
    lines += ["", "Rows (us): measured, model, before"]
    for k in sorted(measured):
        if k in frozen:
            lines.append(f"- {k[0]} {k[1]} {k[2]} MiB: {measured[k]:.1f}, {frozen[k][0]:.1f} "
                         f"({100 * (frozen[k][0] / measured[k] - 1):+.1f}%), {frozen[k][1]:.1f} "
                         f"({100 * (frozen[k][1] / measured[k] - 1):+.1f}%)")
    return lines


def frozen_arguments(ap: argparse.ArgumentParser) -> None:
    """``--frozen OUT`` and ``--compare FROZEN CSV...``: a registered run's two steps (this script's,
    ring_calls.py's)."""
    ap.add_argument("--frozen", metavar="OUT", help="write the frozen table")
    ap.add_argument("--compare", nargs="+", metavar=("FROZEN", "CSV"), help="the frozen table, then the CSVs")


def frozen_or_compare(ap: argparse.ArgumentParser, args: argparse.Namespace, table, against) -> int:
    """``--frozen``: write ``table()``'s lines; ``--compare``: print ``against(frozen, csvs)``'s."""
    if args.frozen:
        Path(args.frozen).write_text("\n".join(table()) + "\n")
        return 0
    if args.compare:
        if len(args.compare) < 2:
            ap.error("--compare takes the frozen table and at least one CSV")
        print("\n".join(against(args.compare[0], args.compare[1:])))
        return 0
    ap.error("--frozen OUT or --compare FROZEN CSV...")
    return 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    frozen_arguments(ap)
    return frozen_or_compare(ap, ap.parse_args(argv), frozen_table, compare)


if __name__ == "__main__":
    sys.exit(main())
