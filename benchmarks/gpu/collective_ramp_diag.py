"""Diagnostics for the Simple ramp (docs/gpu.md, "The Simple ramp"): channels, L2, idle gaps, p2p channels.

Measure (one process per GPU; NCCL's channel variables set by the caller, ``--variant`` names them):

    NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 torchrun --nproc_per_node 2 \\
        benchmarks/gpu/collective_ramp_diag.py --out ch1.csv --variant ch1 --ops all_reduce \\
        --sizes 2,4,8,16,32,64,128,256,512,1024 --cases plain,gap1000

Analyse (CPU, no torch, no rdusim): ``--analyse CSV...`` prints, per variant, case and op, the
time per MiB of the largest sizes (``--rate-from``, 512 MiB by default, or the two largest sizes
a variant has) and every row's *excess* over it, ``t - S x (dt/dS)``, the excess's slope from 16
to 256 MiB, and the marginal time per MiB between neighbouring sizes (the ramp shows as a
marginal time above the large sizes' one). ``--dry-run`` prints the rows a run writes.

Cases (every one captured ``--per`` calls to a CUDA graph, replayed ``--reps`` times after a
barrier, median, divided by ``per``; the same method as collectives.py's graph rows):

- ``plain``: the same buffers at every call (collectives.py's graph rows).
- ``rot``: ``k`` buffer sets in turn, ``k`` such that the other ``k - 1`` sets of a call hold at
  least ``ROTATE_BYTES`` (four times the H100's 50 MB L2) and at most ``per``, and a
  ``FLUSH_BYTES`` write before every trial: no call finds its buffers in L2 (NCCL's own FIFOs
  stay as they are).
- ``gap10``, ``gap1000``: a ``torch.cuda._sleep`` of about 10 us or 1 ms before every call in the
  graph; the same graph of sleeps alone is timed too (``sleep_us``, per call) and the analysis
  takes it off.
- ``eager``: the same buffers, ``per`` calls issued from the host back to back between two CUDA
  events after a barrier, no graph (for calls long enough that the host stays ahead).

Besides NCCL's collectives as collectives.py calls them (out of place), ``all_gather_inplace``
(not run by default): the all-gather with its input the rank's own part of the output
(``all_gather_into_tensor(whole, whole.narrow(0, rank x part, part))``), which NCCL runs in place:
its ring's first call sends the part (``directSend``) where out of place it copies it to the output
as it sends (``directCopySend``; NVIDIA/nccl ``src/device/all_gather.h`` runRing).

And two point-to-point ops on two GPUs (``--ops``, not run by default),
each moving the all-to-all's part a peer (S / 2) with ``batch_isend_irecv``: ``sendrecv``, each
rank sends its part to the other and receives the other's (the all-to-all without its self
copy), and ``send_oneway``, rank 1 sends and rank 0 receives (rank 0's time is the row's: it
ends when the last chunk is out of its FIFO).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collectives import _collective  # noqa: E402  (beside this file; the standard library only)

MIB = 1 << 20
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
#: point-to-point ops (module docstring): asked for by name, never in the default ``--ops``
P2P_OPS = ("sendrecv", "send_oneway")
#: the all-gather run in place (module docstring): asked for by name, never in the default ``--ops``
INPLACE_OPS = ("all_gather_inplace",)
CASES = ("plain", "rot", "gap10", "gap1000", "eager")
#: cycles of torch.cuda._sleep for the gap cases (~1.98 GHz boost clock of the H100 SXM: 10 us, 1 ms);
#: the time a graph of them takes is measured, not assumed
SLEEP_CYCLES = {"gap10": 20_000, "gap1000": 2_000_000}
ROTATE_BYTES = 4 * 50 * 10**6  # four H100 L2s (50 MB, NVIDIA H100 whitepaper)
FLUSH_BYTES = 256 * MIB  # as measure.py's L2 flush
#: sizes a default run measures (MiB): the ramp (2-384 MiB) and its flat top (512 MiB-1 GiB)
DEFAULT_SIZES = [2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024]
#: per-call budget: a size whose trial would pass this many ms of collectives gets fewer calls a graph
TRIAL_MS = 25.0
RATE_FROM = 512
RAMP = (16, 256)
FIELDS = [
    "variant",
    "case",
    "op",
    "bytes",
    "ranks",
    "per",
    "reps",
    "median_us",
    "sleep_us",
    "k",
    "gpu",
    "nccl",
    "env",
]


def footprint(op: str, size: int, ranks: int) -> int:
    """Bytes of user buffer one call touches (in place all-reduce: S; the others: input + output)."""
    if op in ("all_reduce", "sendrecv", "send_oneway"):
        return size
    if op in ("all_gather", "reduce_scatter"):
        return size + size // ranks
    if op in INPLACE_OPS:
        return size
    return 2 * size


def rotations(op: str, size: int, ranks: int, per: int) -> int:
    """Buffer sets for the ``rot`` case: the others of a call hold at least ROTATE_BYTES; at most ``per``."""
    return max(2, min(per, math.ceil(ROTATE_BYTES / footprint(op, size, ranks)) + 1))


def per_calls(size: int, per: int, est_gbps: float) -> int:
    """Calls a graph: ``per``, fewer where ``per`` calls at ``est_gbps`` (S / t) would pass TRIAL_MS."""
    est_ms = size / (est_gbps * 1e9) * 1e3
    return max(1, min(per, int(TRIAL_MS / est_ms) if est_ms > 0 else per))


def plan(args: argparse.Namespace, ranks: int) -> list[dict]:
    rows = []
    for op in args.ops:
        for case in args.cases:
            for mib in args.sizes:
                size = mib * MIB
                if case != "plain" and args.case_max and mib > args.case_max:
                    continue
                per = per_calls(size, args.per, args.est_gbps)
                reps = args.reps if per >= 4 else max(3, args.reps // 2)
                rows.append(
                    {
                        "variant": args.variant,
                        "case": case,
                        "op": op,
                        "bytes": size,
                        "ranks": ranks,
                        "per": per,
                        "reps": reps,
                        "k": rotations(op, size, ranks, per) if case == "rot" else 1,
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write (rank 0)")
    ap.add_argument(
        "--variant", default="default", help="label of the NCCL environment (ch1, ch24, p2p8, ...)"
    )
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--cases", default="plain")
    ap.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="MiB, comma-separated"
    )
    ap.add_argument(
        "--case-max", type=int, default=0, help="MiB: cases other than plain only up to this size"
    )
    ap.add_argument("--per", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument(
        "--est-gbps", type=float, default=300.0, help="S / t guess that caps the calls a graph"
    )
    ap.add_argument("--ranks", type=int, default=2, help="--dry-run: ranks")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--analyse", nargs="+", metavar="CSV")
    ap.add_argument(
        "--rate-from", type=int, default=RATE_FROM, help="MiB: rows the rate is fitted to"
    )
    args = ap.parse_args(argv)
    if args.analyse:
        return analyse(args.analyse, args.rate_from)
    args.ops = [o for o in args.ops.split(",") if o]
    args.cases = [c for c in args.cases.split(",") if c]
    known = OPS + P2P_OPS + INPLACE_OPS
    bad = [o for o in args.ops if o not in known] + [c for c in args.cases if c not in CASES]
    if bad:
        ap.error(
            f"unknown op or case: {', '.join(bad)} (ops: {', '.join(known)}; cases: {', '.join(CASES)})"
        )
    if args.ranks != 2 and any(o in P2P_OPS for o in args.ops):
        ap.error(f"{', '.join(P2P_OPS)} run on two GPUs only")
    try:
        args.sizes = [int(v) for v in args.sizes.split(",") if v]
    except ValueError:
        ap.error(f"--sizes: {args.sizes!r} is not comma-separated MiB")
    if (
        not args.sizes
        or min(args.sizes) <= 0
        or args.per <= 0
        or args.reps <= 0
        or args.est_gbps <= 0
    ):
        ap.error("--sizes, --per, --reps and --est-gbps must be positive")
    if args.dry_run:
        for row in plan(args, args.ranks):
            print(
                f"{row['variant']:8s} {row['case']:8s} {row['op']:18s} {row['bytes'] // MIB:6d} MiB "
                f"per {row['per']:3d} reps {row['reps']:3d} k {row['k']}"
            )
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run / --analyse)")
    return _run(args)


def nccl_process():  # pragma: no cover - needs two GPUs
    """This torchrun process with NCCL's process group up: (torch, dist, rank, world, device, the
    row fields ``gpu``, ``nccl`` and ``env``: the NCCL variables set, the debug ones left out)."""
    import torch
    import torch.distributed as dist

    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    env = {
        "gpu": torch.cuda.get_device_name(),
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "env": " ".join(
            f"{k}={v}"
            for k, v in sorted(os.environ.items())
            if k.startswith("NCCL_")
            and k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
        ),
    }
    return torch, dist, rank, dist.get_world_size(), torch.device("cuda"), env


def _run(args: argparse.Namespace) -> int:  # pragma: no cover - needs two GPUs
    torch, dist, rank, world, dev, env = nccl_process()
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=dev)
    fh = open(args.out, "w", newline="") if rank == 0 else None  # noqa: SIM115 - closed below
    writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore") if fh else None
    if writer:
        writer.writeheader()
        fh.flush()
    sleep_us = {}
    for case, cycles in SLEEP_CYCLES.items():
        if case in args.cases:
            sleep_us[case] = _sleep_graph_us(torch, cycles, args.per)
            if rank == 0:
                print(f"sleep {case}: {cycles} cycles = {sleep_us[case]:.2f} us", flush=True)
    for row in plan(args, world):
        make = _p2p if row["op"] in P2P_OPS else _inplace if row["op"] in INPLACE_OPS else _collective
        calls = [make(row["op"], row["bytes"], world, dev, dist, torch) for _ in range(row["k"])]
        us = _measure(torch, dist, row, calls, flush)
        if writer:
            writer.writerow(
                {
                    **row,
                    **env,
                    "median_us": round(us, 3),
                    "sleep_us": round(sleep_us.get(row["case"], 0), 3),
                }
            )
            fh.flush()
            print(
                f"{row['variant']:8s} {row['case']:8s} {row['op']:18s} {row['bytes'] // MIB:6d} MiB "
                f"{us:10.1f} us (per {row['per']}, k {row['k']})",
                flush=True,
            )
        del calls
        torch.cuda.empty_cache()
    if fh:
        fh.close()
    torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)  # never destroy_process_group: it hung after captured graphs (collective_micro.py)


def _p2p(op, size, world, device, dist, torch):  # pragma: no cover - needs two GPUs
    """A call of one point-to-point op (module docstring) moving ``size / 2`` bytes a direction."""
    if world != 2:
        raise SystemExit(f"{op} runs on two GPUs, not {world}")
    elems = max(world, size // 2)
    part = (elems - elems % world) // world
    send = torch.randn(part, dtype=torch.bfloat16, device=device)
    recv = torch.empty_like(send)
    rank = dist.get_rank()
    if op == "sendrecv":
        ops = [dist.P2POp(dist.isend, send, 1 - rank), dist.P2POp(dist.irecv, recv, 1 - rank)]
    elif rank == 1:
        ops = [dist.P2POp(dist.isend, send, 0)]
    else:
        ops = [dist.P2POp(dist.irecv, recv, 1)]

    def call() -> None:
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return call


def _inplace(op, size, world, device, dist, torch):  # pragma: no cover - needs two GPUs
    """A call of the all-gather in place (module docstring): ``size`` bytes of output, the input
    the rank's own part of it, as collectives.py sizes its all-gather."""
    elems = max(world, size // 2)
    elems -= elems % world
    whole = torch.randn(elems, dtype=torch.bfloat16, device=device)
    part = whole.narrow(0, dist.get_rank() * (elems // world), elems // world)
    return lambda: dist.all_gather_into_tensor(whole, part)


def _measure(
    torch, dist, row: dict, calls: list, flush
) -> float:  # pragma: no cover - needs two GPUs
    """Us per call: ``row["per"]`` calls (buffer sets in turn, a sleep before each in a gap case)
    captured to one graph, replayed ``row["reps"]`` times after a barrier, median / per; the
    ``eager`` case issues them from the host between the events instead."""
    cycles = SLEEP_CYCLES.get(row["case"], 0)

    def batch() -> None:
        for i in range(row["per"]):
            if cycles:
                torch.cuda._sleep(cycles)
            calls[i % len(calls)]()

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        batch()  # warm-up outside capture (NCCL's lazy setup)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    if row["case"] == "eager":
        return _eager_us(torch, dist, row, batch)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        batch()
    for _ in range(2):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(row["reps"]):
        dist.barrier()
        torch.cuda.synchronize()
        if row["case"] == "rot":
            flush.fill_(1.0)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / row["per"])
    del graph
    return statistics.median(times)


def _eager_us(torch, dist, row: dict, batch) -> float:  # pragma: no cover - needs two GPUs
    """Us per call of ``batch`` issued from the host between two events, median of ``reps``."""
    times = []
    for _ in range(row["reps"]):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        batch()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / row["per"])
    return statistics.median(times)


def _sleep_graph_us(torch, cycles: int, per: int) -> float:  # pragma: no cover - needs a GPU
    """Per sleep, us: a graph of ``per`` sleeps of ``cycles``, median of 7 replays."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(per):
            torch.cuda._sleep(cycles)
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / per)
    return statistics.median(times)


# --- analysis (CPU) -------------------------------------------------------------------------


def load(paths: list[str]) -> dict[tuple[str, str, str], dict[int, float]]:
    """(variant, case, op) -> {MiB: us per call, the sleep taken off}."""
    out: dict[tuple[str, str, str], dict[int, float]] = {}
    for path in paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                us = float(r["median_us"]) - float(r["sleep_us"] or 0)
                out.setdefault((r["variant"], r["case"], r["op"]), {})[int(r["bytes"]) // MIB] = us
    return out


def fit_per_mib(pts: dict[int, float], rate_from: int) -> tuple[float, list[int]]:
    """Least-squares dt/dS (us per MiB) over the sizes >= ``rate_from`` (the two largest if fewer than two)."""
    sizes = sorted(s for s in pts if s >= rate_from)
    if len(sizes) < 2:
        sizes = sorted(pts)[-2:]
    if len(sizes) < 2:
        return math.nan, sizes
    mx = statistics.fmean(sizes)
    my = statistics.fmean(pts[s] for s in sizes)
    den = sum((s - mx) ** 2 for s in sizes)
    return sum((s - mx) * (pts[s] - my) for s in sizes) / den, sizes


def excess(pts: dict[int, float], per_mib: float) -> dict[int, float]:
    return {s: pts[s] - s * per_mib for s in sorted(pts)}


def ramp_slope(exc: dict[int, float]) -> float:
    """Excess slope (us per MiB) between RAMP's sizes; nan where a size is missing."""
    lo, hi = RAMP
    return (exc[hi] - exc[lo]) / (hi - lo) if lo in exc and hi in exc else math.nan


def marginal(pts: dict[int, float]) -> list[tuple[int, int, float]]:
    """(from, to, us per MiB) between neighbouring sizes."""
    s = sorted(pts)
    return [(a, b, (pts[b] - pts[a]) / (b - a)) for a, b in zip(s, s[1:], strict=False)]


def relative_ramp(pts: dict[int, float], per_mib: float, lo: int, hi: int) -> float:
    """Marginal dt/dS between ``lo`` and ``hi`` MiB over the fit, minus 1 (nan where a size is missing)."""
    if lo not in pts or hi not in pts:
        return math.nan
    return (pts[hi] - pts[lo]) / (hi - lo) / per_mib - 1


#: the windows of the summary: the flat part, the ramp, the ramp's upper half (pre-registration)
WINDOWS = ((2, 32), (16, 256), (64, 256), (64, 1024))


def summary(
    data: dict[tuple[str, str, str], dict[int, float]], rate_from: int = RATE_FROM
) -> list[str]:
    """One markdown row per variant, case and op: fit, ramp slope, relative ramp over WINDOWS, excess at 1 GiB."""
    head = " | ".join(f"rel. {lo}-{hi}" for lo, hi in WINDOWS)
    lines = [
        f"| variant | case | op | fit us/MiB | ramp slope us/MiB | {head} | excess at 2 / 256 / max MiB |",
        "|---|---|---|---:|---:|" + "---:|" * len(WINDOWS) + "---|",
    ]
    for (variant, case, op), pts in sorted(data.items()):
        per_mib, _ = fit_per_mib(pts, rate_from)
        exc = excess(pts, per_mib)
        rel = " | ".join(f"{relative_ramp(pts, per_mib, lo, hi):+.3f}" for lo, hi in WINDOWS)
        ends = " / ".join(f"{exc[s]:.0f}" if s in exc else "-" for s in (2, 256, max(exc)))
        lines.append(
            f"| {variant} | {case} | {op} | {per_mib:.4f} | {ramp_slope(exc):.3f} | {rel} | {ends} |"
        )
    return lines


def analyse(paths: list[str], rate_from: int = RATE_FROM) -> int:
    data = load(paths)
    print("\n".join(summary(data, rate_from)))
    print()
    for (variant, case, op), pts in sorted(data.items()):
        per_mib, used = fit_per_mib(pts, rate_from)
        exc = excess(pts, per_mib)
        print(
            f"## {variant} {case} {op}: {per_mib:.4f} us/MiB from {used} MiB "
            f"({MIB / per_mib / 1e3:.1f} GB/s of S); ramp slope {ramp_slope(exc):.3f} us/MiB"
        )
        print("| MiB | us | excess us | marginal us/MiB to next | marginal / fit |")
        print("|---:|---:|---:|---:|---:|")
        marg = {a: m for a, _, m in marginal(pts)}
        for s in sorted(pts):
            m = marg.get(s, math.nan)
            print(f"| {s} | {pts[s]:.1f} | {exc[s]:.1f} | {m:.4f} | {m / per_mib:.3f} |")
        print()
    # case against plain at the same variant / op / size
    for (variant, case, op), pts in sorted(data.items()):
        base = data.get((variant, "plain", op))
        if case == "plain" or not base:
            continue
        common = sorted(set(pts) & set(base))
        diffs = " ".join(f"{s}:{pts[s] - base[s]:+.1f}" for s in common)
        print(f"{variant} {op} {case} - plain (us, sleep off): {diffs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
