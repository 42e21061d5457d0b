"""Every call's own time of a NCCL collective, to tell a random cost from a fixed one (run bb).

The Simple ramp (docs/gpu.md, "The Simple ramp") is an excess over the large sizes' rate that
grows with the bytes up to ~512 MiB; a graph's median over 20 calls cannot say whether each call
pays it alike (a fixed slow phase) or a random amount (the call waits for its slowest channel,
whose progress drifts). This script times each call alone.

Measure (one process per GPU; NCCL's variables set by the caller, ``--variant`` names them):

    torchrun --nproc_per_node 2 benchmarks/gpu/collective_percall.py --out pc.csv \\
        --variant default --ops all_reduce --sizes 16,64,256,1024

Every (op, size): ``--warm`` calls, a barrier, then ``--calls`` calls launched back to back on one
stream, each between two CUDA events; the host runs ahead of the GPU (a launch costs far less
than a call of 16 MiB or more), so a call's events bracket its kernel, and ``gap_us`` (the end of
one call to the start of the next) shows that it did. Every rank's times go to rank 0's CSV, one
row a call.

Analyse (CPU, the standard library only): ``--analyse CSV...`` prints, per variant, op and ranks,
each size's median, robust spread (IQR / 1.349), p10 / p90 and the median's excess over the rate of
the two largest sizes, and the log-log slope of the spread against the size from 16 to 256 MiB.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp_diag import nccl_process  # noqa: E402  (beside this file; the standard library only)
from collectives import _collective  # noqa: E402

MIB = 1 << 20
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DEFAULT_SIZES = [4, 16, 32, 64, 128, 256, 512, 1024]
FIELDS = ["variant", "op", "bytes", "ranks", "rank", "call", "us", "gap_us", "gpu", "nccl", "env"]
#: the sizes the spread's slope is taken over (MiB): the ramp, below its flat top
SLOPE = (16, 256)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write (rank 0)")
    ap.add_argument("--variant", default="default", help="label of the NCCL environment")
    ap.add_argument("--ops", default="all_reduce")
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="MiB, comma-separated")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--analyse", nargs="+", metavar="CSV")
    args = ap.parse_args(argv)
    if args.analyse:
        return analyse(args.analyse)
    args.ops = [o for o in args.ops.split(",") if o]
    bad = [o for o in args.ops if o not in OPS]
    if bad:
        ap.error(f"unknown op: {', '.join(bad)} (ops: {', '.join(OPS)})")
    try:
        args.sizes = [int(v) for v in args.sizes.split(",") if v]
    except ValueError:
        ap.error(f"--sizes: {args.sizes!r} is not comma-separated MiB")
    if not args.sizes or min(args.sizes) <= 0 or args.calls < 2 or args.warm < 0:
        ap.error("--sizes must be positive, --calls at least 2, --warm not negative")
    if not args.out:
        ap.error("--out is required (or --analyse)")
    return _run(args)


def _run(args: argparse.Namespace) -> int:  # pragma: no cover - needs two GPUs
    torch, dist, rank, world, dev, env = nccl_process()
    fh = open(args.out, "w", newline="") if rank == 0 else None  # noqa: SIM115 - closed below
    writer = csv.DictWriter(fh, fieldnames=FIELDS) if fh else None
    if writer:
        writer.writeheader()
    for op in args.ops:
        for mib in args.sizes:
            call = _collective(op, mib * MIB, world, dev, dist, torch)
            us, gaps = _percall(torch, dist, call, args.calls, args.warm)
            both = torch.tensor([us, gaps], dtype=torch.float64, device=dev)
            every = [torch.empty_like(both) for _ in range(world)]
            dist.all_gather(every, both)
            if writer:
                for r, t in enumerate(every):
                    t = t.cpu().tolist()
                    for i, (u, g) in enumerate(zip(t[0], t[1], strict=True)):
                        writer.writerow(
                            {"variant": args.variant, "op": op, "bytes": mib * MIB, "ranks": world,
                             "rank": r, "call": i, "us": round(u, 3), "gap_us": round(g, 3), **env}
                        )
                fh.flush()
                print(
                    f"{args.variant:8s} {op:15s} {mib:6d} MiB median {statistics.median(us):10.1f} us "
                    f"IQR {_iqr(us):8.1f} us max gap {max(gaps[:-1]):6.1f} us",
                    flush=True,
                )
            del call
            torch.cuda.empty_cache()
    if fh:
        fh.close()
    torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)  # never destroy_process_group (collective_micro.py: it hung)


def _percall(torch, dist, call, n: int, warm: int) -> tuple[list[float], list[float]]:  # pragma: no cover
    """Each of ``n`` back-to-back calls' time (us) and the gap after it (the last gap is 0)."""
    for _ in range(warm):
        call()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    us = [s.elapsed_time(e) * 1e3 for s, e in events]
    gaps = [events[i][1].elapsed_time(events[i + 1][0]) * 1e3 for i in range(n - 1)] + [0.0]
    return us, gaps


# --- analysis (CPU) -------------------------------------------------------------------------


def _iqr(xs: list[float]) -> float:
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def load(paths: list[str]) -> dict[tuple[str, str, int], dict[int, list[float]]]:
    """(variant, op, ranks) -> {MiB: every call's time, us, every rank}."""
    out: dict[tuple[str, str, int], dict[int, list[float]]] = {}
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", newline="") as fh:
            for r in csv.DictReader(fh):
                key = (r["variant"], r["op"], int(r["ranks"]))
                out.setdefault(key, {}).setdefault(int(r["bytes"]) // MIB, []).append(float(r["us"]))
    return out


def summarise(per: dict[int, list[float]]) -> list[dict]:
    """Per size: median, robust spread, p10 / p90, excess over the two largest sizes' rate."""
    sizes = sorted(per)
    med = {s: statistics.median(per[s]) for s in sizes}
    hi = sizes[-2:]
    per_mib = (med[hi[1]] - med[hi[0]]) / (hi[1] - hi[0]) if len(hi) == 2 and hi[1] > hi[0] else 0.0
    rows = []
    for s in sizes:
        dec = statistics.quantiles(per[s], n=10)
        rows.append(
            {"mib": s, "median": med[s], "spread": _iqr(per[s]) / 1.349, "p10": dec[0], "p90": dec[-1],
             "excess": med[s] - s * per_mib, "calls": len(per[s])}
        )
    return rows


def spread_slope(rows: list[dict], lo: int = SLOPE[0], hi: int = SLOPE[1]) -> float:
    """Least-squares slope of log(spread) on log(size) over [lo, hi] MiB (nan if under two sizes)."""
    pts = [(math.log(r["mib"]), math.log(r["spread"])) for r in rows if lo <= r["mib"] <= hi and r["spread"] > 0]
    if len(pts) < 2:
        return math.nan
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def analyse(paths: list[str]) -> int:
    for (variant, op, ranks), per in sorted(load(paths).items()):
        rows = summarise(per)
        print(f"\n{variant}, {op}, {ranks} GPUs (spread = IQR / 1.349; excess over the two largest sizes' rate)")
        print("| MiB | calls | median us | spread us | p10 | p90 | excess us | spread / excess |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            ratio = r["spread"] / r["excess"] if r["excess"] > 1 else math.nan
            print(
                f"| {r['mib']} | {r['calls']} | {r['median']:.1f} | {r['spread']:.2f} | {r['p10']:.1f} | "
                f"{r['p90']:.1f} | {r['excess']:.1f} | {ratio:.3f} |"
            )
        print(f"spread's log-log slope, {SLOPE[0]}-{SLOPE[1]} MiB: {spread_slope(rows):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
