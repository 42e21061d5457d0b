"""The Simple protocol's mid-size ramp on the H100 pair: its shape and the candidates it rules out (CPU only).

    python benchmarks/gpu/collective_ramp.py [--prefix benchmarks/gpu/h100x2-20261125]

Reads the committed measurement of runs t, u and v (``PREFIX{t,u,v}-collectives.csv``), run t's
one-call-per-trial run (``PREFIXt-collectives-percall.csv``), NCCL's per-call tuning logs
(``PREFIX{t,u,v}-nccl-tuning.txt``) and the diagnostic variants (``PREFIX{m2,m3,v}-diag.log``);
prints the markdown tables of docs/gpu.md, "The Simple ramp" (``--ramp CSV...``: the first table
only, for any runs' rows, e.g. a later lease's):

1. the ramp: per op (graph rows of t, u and v pooled), the time per wire byte of the rows from
   512 MiB up (least squares) and every Simple row's *excess* over it, ``t - wire / rate``; the
   excess's slope from 16 to 256 MiB, and that slope as a share of the ring's last step's own
   memory time (``last_step_share``);
2. the candidates NCCL 2.28's scheduling offers, each with the figure that rules it in or out:
   the channels NCCL ran (its tuning log), the slices a channel runs (the rule below) against
   the ``NCCL_BUFFSIZE`` variants, one call timed alone against twenty back to back, and the
   all-to-all's p2p channels per peer.

NCCL 2.28's ring, Simple protocol (NVIDIA/nccl ``src/enqueue.cc`` at commit
01e6dd915fdd2627a7205f5aa1c7f14d46990226, scheduleCollTasksToPlan and calcCollChunking;
``src/include/collectives.h``; ``src/device/all_reduce.h`` runRing and ``prims_simple.h``
genericOp, read in stored copies of the 2.2x device code, prims_simple.h at 06de78e): the
buffer is split evenly over the channels; a channel's chunk is ``NCCL_BUFFSIZE / NCCL_STEPS x CHUNKSTEPS``
(4 MiB / 8 x 4 = 2 MiB; calcCollChunking reduces it only for CollNet, NVLS, the tree's LL128
and PAT), a loop is ``ranks`` chunks, the last (or only) loop shrinks its chunk to what is left;
every primitive call (2(n-1)+1 a loop for the all-reduce, n for all-gather and reduce-scatter)
runs ``CHUNKSTEPS / SLICESTEPS`` = 2 slices, each a flag wait, a barrier, the copy, a barrier,
a system fence and a flag store.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from pathlib import Path

from rdusim.hw.collectives import BUSBW_FACTOR, memory_ops_per_wire_byte

MIB = 1 << 20
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
RUNS = ("t", "u", "v")
#: the rows whose slope is taken as the op's large-size rate (the all-reduce's is what ``bus_bandwidth`` fits)
SLOPE_FROM = 512 * MIB
#: the sizes whose excess gives the ramp's slope (every run has rows there)
RAMP = (16 * MIB, 256 * MIB)
#: NCCL's defaults (src/include/collectives.h, src/init.cc: DEFAULT_BUFFSIZE 4 MiB, NCCL_STEPS 8)
BUFFSIZE, NCCL_STEPS, CHUNKSTEPS, SLICESTEPS = 4 * MIB, 8, 4, 2
#: the tuning log's channels (24 coll channels; 32 p2p channels and 32 per peer: -nccl-init.txt)
CHANNELS, P2P_CHANNELS, P2P_PER_PEER = 24, 32, 32
#: NCCL's p2p chunk on NVLink ("P2P Chunksize set to 524288", -nccl-init.txt)
P2P_CHUNK = 512 * 1024
#: loads plus stores per byte of a ring's last step, the one that puts nothing on NVLink: the
#: all-reduce's and all-gather's ``recv`` (1, 1), the reduce-scatter's ``recvReduceCopy`` (2, 1)
#: (rdusim/hw/collectives.py's docstring, "Memory operations per wire byte": NVIDIA/nccl runRing)
LAST_STEP_OPS = {"all_reduce": 2, "all_gather": 2, "reduce_scatter": 3}


def wire_per_gpu(op: str, size: int, ranks: int = 2) -> float:
    """nccl-tests' bus bytes: what each GPU puts on NVLink for nccl-tests' S (the model's factor)."""
    return size * BUSBW_FACTOR[op](ranks)


def last_step_share(op: str, slope_us_per_mib: float, per_byte: float, ranks: int = 2) -> float:
    """The ramp's slope (us of excess per MiB of S) over the ring's last step's own memory time
    per MiB of S: its ``LAST_STEP_OPS`` loads and stores of S / ``ranks`` bytes, at the op's
    large-size rate of memory operations (the wire rate ``1 / per_byte`` times the model's
    ``memory_ops_per_wire_byte``). A hint, not a model (docs/gpu.md, "The Simple ramp")."""
    memory_rate = memory_ops_per_wire_byte(op, ranks) / per_byte  # loads + stores a second
    return slope_us_per_mib / (LAST_STEP_OPS[op] * MIB / ranks / memory_rate * 1e6)


def slices_per_channel(
    op: str, size: int, ranks: int = 2, buffsize: int = BUFFSIZE, channels: int = CHANNELS
) -> int:
    """Slices one ring channel runs for a Simple collective of nccl-tests' S (module docstring)."""
    chunk = buffsize // NCCL_STEPS * CHUNKSTEPS
    loops = max(
        1, math.ceil(size / channels / (ranks * chunk))
    )  # a loop: ranks chunks of nccl-tests' S
    calls = 2 * (ranks - 1) + 1 if op == "all_reduce" else ranks
    return loops * calls * (CHUNKSTEPS // SLICESTEPS)


def p2p_channels_per_peer(peer_bytes: int, ranks: int) -> int:
    """The channels NCCL 2.28 runs one peer's Simple send (or receive) on, one node (src/enqueue.cc at
    01e6dd9: scheduleP2pTasksToPlan's nChannelsMin, addP2pToPlan's part sizes)."""
    n_min = P2P_PER_PEER
    while n_min * ranks > P2P_CHANNELS and n_min > 1:
        n_min //= 2
    min_part, max_part = P2P_CHUNK // 8, P2P_CHUNK * 32
    n = min(n_min, -(-peer_bytes // min_part))
    part = max(min_part, -(-peer_bytes // n))
    while part > max_part and n <= P2P_PER_PEER // 2:
        n *= 2
        part = -(-peer_bytes // n)
    return n


def load(
    paths: dict[str, str], ranks: int = 2
) -> dict[tuple[str, str, int], list[tuple[float, str]]]:
    """(op, mode, bytes) -> [(median us, run), ...] over the runs' CSVs ({run: path}), rows of
    ``ranks``; a row timed host-ahead or busy (``*_queued``, ``*_busy``) has the mode
    ``stream_queued``, ``graph_busy``, ..., never the plain one. Every run's row is kept."""
    rows: dict[tuple[str, str, int], list[tuple[float, str]]] = {}
    for run, path in paths.items():
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["kind"] == "collective" and int(r.get("ranks") or 2) == ranks:
                    tail = r["name"].rsplit("_", 1)[-1]
                    mode = r["mode"] + (f"_{tail}" if tail in ("queued", "busy") else "")
                    rows.setdefault((r["op"], mode, int(r["bytes"])), []).append(
                        (float(r["median_us"]), run)
                    )
    return rows


def _us(entries: list[tuple[float, str]]) -> float:
    """One size's time: the mean over the runs that have it."""
    return sum(t for t, _ in entries) / len(entries)


def slope(rows: dict, op: str, mode: str, ranks: int = 2) -> float:
    """Seconds per wire byte of the op's rows from SLOPE_FROM up (least squares with an intercept)."""
    pts = [
        (wire_per_gpu(op, b, ranks), t * 1e-6)
        for (o, m, b), entries in rows.items()
        if o == op and m == mode and b >= SLOPE_FROM
        for t, _ in entries
    ]
    n = len({x for x, _ in pts})
    if n < 2:
        raise SystemExit(
            f"{op} {mode}: {n} sizes from {SLOPE_FROM // MIB} MiB up at {ranks} ranks; a slope needs 2"
        )
    return _fit_slope(pts)


def ramp_table(rows: dict, mode: str = "graph", ranks: int = 2) -> list[str]:
    per_byte = {op: slope(rows, op, mode, ranks) for op in OPS}
    out = [
        f"Excess over the large-size rate, {mode} rows (us): t - wire bytes / rate",
        "",
        "| size | run | " + " | ".join(OPS) + " |",
        "|---:|---|" + "---:|" * len(OPS),
        "| rate from >= 512 MiB (GB/s, wire) | | "
        + " | ".join(f"{1e-9 / per_byte[op]:.1f}" for op in OPS)
        + " |",
    ]
    sizes = sorted({b for (o, m, b) in rows if m == mode and b >= 2 * MIB})
    for size in sizes:
        cells, runs = [], []
        for op in OPS:
            entries = rows.get((op, mode, size), [])
            runs += [run for _, run in entries if run not in runs]
            excess = (
                _us(entries) - wire_per_gpu(op, size, ranks) * per_byte[op] * 1e6
                if entries
                else None
            )
            cells.append("" if excess is None else f"{excess:.0f}")
        out.append(f"| {size / MIB:g} MiB | {', '.join(runs)} | " + " | ".join(cells) + " |")
    ramp, share, flat = [], [], []
    for op in OPS:
        excess = [
            (b, t - wire_per_gpu(op, b, ranks) * per_byte[op] * 1e6)
            for (o, m, b), entries in rows.items()
            if o == op and m == mode
            for t, _ in entries
        ]
        slope_us = _fit_slope([(b / MIB, e) for b, e in excess if RAMP[0] <= b <= RAMP[1]])
        ramp.append(f"{slope_us:.3f}")
        share.append(
            f"{last_step_share(op, slope_us, per_byte[op], ranks):.2f}"
            if op in LAST_STEP_OPS
            else "-"
        )
        top = [e for b, e in excess if b >= SLOPE_FROM]
        if len(top) > 2:
            flat.append(f"{min(top):.0f}-{max(top):.0f}")
        else:  # the slope passes through both rows: their excess is the fit's intercept, not a plateau
            flat.append(f"{top[0]:.0f} (intercept)")
    out.append(
        f"| ramp: excess per MiB, {RAMP[0] // MIB}-{RAMP[1] // MIB} MiB (us) | | "
        + " | ".join(ramp)
        + " |"
    )
    out.append("| ramp slope / the ring's last step's memory time | | " + " | ".join(share) + " |")
    out.append(f"| excess from {SLOPE_FROM // MIB} MiB up (us) | | " + " | ".join(flat) + " |")
    return out


def _fit_slope(pts: list[tuple[float, float]]) -> float:
    """Least-squares slope of y against x."""
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def tuning_channels(prefix: str) -> list[str]:
    """Fewest and most channels NCCL logged for a ring Simple call, per run."""
    out = [
        "| run | ring Simple calls logged | sizes | channels (fewest-most) |",
        "|---|---:|---|---|",
    ]
    pat = re.compile(
        r"(\w+): (\d+) Bytes -> Algo RING proto SIMPLE channel\{Lo..Hi\}=\{(\d+)..(\d+)\}"
    )
    for run in RUNS:
        counts, sizes = [], []
        for line in Path(f"{prefix}{run}-nccl-tuning.txt").read_text().splitlines():
            m = pat.search(line)
            if m:
                counts.append(int(m.group(4)) - int(m.group(3)) + 1)
                sizes.append(int(m.group(2)))
        out.append(
            f"| {run} | {len(counts)} | {min(sizes) / MIB:.1f}-{max(sizes) / MIB:.0f} MiB | {min(counts)}-{max(counts)} |"
        )
    return out


def diag(path: Path) -> dict[str, dict[tuple[str, int], float]]:
    """variant -> (op, bytes) -> graph us, from a -diag.log."""
    out: dict[str, dict[tuple[str, int], float]] = {}
    variant = ""
    for line in path.read_text().splitlines():
        if line.startswith("==="):
            variant = line.strip("= ")
            continue
        m = re.match(r"prediction\s+(\w+?)_(\d+)_graph\s+([\d.]+) us", line)
        if m:
            out.setdefault(variant, {})[(m.group(1), int(m.group(2)))] = float(m.group(3))
    return out


def slice_table(prefix: str) -> list[str]:
    """Run v's NCCL_BUFFSIZE variants: slices per channel and time, all-reduce and all-gather."""
    d = diag(Path(f"{prefix}v-diag.log"))
    variants = [
        ("variant X=0", BUFFSIZE),
        ("variant NCCL_BUFFSIZE=1048576", MIB),
        ("variant NCCL_BUFFSIZE=16777216", 16 * MIB),
    ]
    out = [
        "| op | size | slices a channel, BUFFSIZE 4 / 1 / 16 MiB | graph us, 4 / 1 / 16 MiB | us per added slice (1 MiB vs 4) |",
        "|---|---:|---|---|---:|",
    ]
    for op, size in sorted(d["variant X=0"]):
        sl = [slices_per_channel(op, size, buffsize=b) for _, b in variants]
        us = [d[v][(op, size)] for v, _ in variants]
        per = (us[1] - us[0]) / (sl[1] - sl[0]) if sl[1] != sl[0] else float("nan")
        out.append(
            f"| {op} | {size / MIB:g} MiB | {sl[0]} / {sl[1]} / {sl[2]} | {us[0]:.1f} / {us[1]:.1f} / {us[2]:.1f} | {per:+.2f} |"
        )
    return out


def percall_table(prefix: str, rows: dict) -> list[str]:
    """One call timed alone (run t's first method) against twenty back to back (run t), graph rows."""
    alone: dict[tuple[str, int], float] = {}
    with open(f"{prefix}t-collectives-percall.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            if r["kind"] == "collective" and r["mode"] == "graph":
                alone[(r["op"], int(r["bytes"]))] = float(r["median_us"])
    sizes = [64 * MIB, 256 * MIB, 1024 * MIB]
    out = [
        "| op | " + " | ".join(f"{s // MIB} MiB: alone / in 20 (us)" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for op in OPS:
        cells = [
            f"{alone[(op, s)]:.0f} / {_us(rows[(op, 'graph', s)]):.0f} ({alone[(op, s)] / _us(rows[(op, 'graph', s)]) - 1:+.1%})"
            for s in sizes
        ]
        out.append(f"| {op} | " + " | ".join(cells) + " |")
    return out


def p2p_table(rows: dict, ranks: int = 2) -> list[str]:
    """The all-to-all's channels per peer (NCCL 2.28's rule) and its measured bus rate around the switch."""
    out = [
        "| size | bytes a peer | channels a peer | graph us | bus GB/s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size in (128 * MIB, 256 * MIB, 384 * MIB, 512 * MIB, 640 * MIB, 768 * MIB, 1024 * MIB):
        t = _us(rows[("all_to_all", "graph", size)])
        peer = size // ranks
        out.append(
            f"| {size // MIB} MiB | {peer // MIB} MiB | {p2p_channels_per_peer(peer, ranks)} | {t:.0f} | "
            f"{wire_per_gpu('all_to_all', size, ranks) / t * 1e-3:.0f} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", default="benchmarks/gpu/h100x2-20261125")
    ap.add_argument(
        "--ramp",
        nargs="+",
        metavar="CSV",
        help="only the ramp table, of these runs' rows (pooled), one per mode they have",
    )
    ap.add_argument("--ranks", type=int, default=2, help="with --ramp: the rows of this world size")
    args = ap.parse_args(argv)
    if args.ramp:
        rows = load(
            {Path(p).stem.split("-", 1)[-1].replace("-collectives", ""): p for p in args.ramp},
            args.ranks,
        )
        modes = sorted(
            {m for _, m, _ in rows}, key=lambda m: (m != "graph", m)
        )  # graph, stream, variants
        for mode in modes:
            print("\n".join(ramp_table(rows, mode, ranks=args.ranks) + [""]))
        return 0
    rows = load({run: f"{args.prefix}{run}-collectives.csv" for run in RUNS})
    out = ["# The Simple ramp on two H100s (runs t, u, v; benchmarks/gpu/collective_ramp.py)", ""]
    out += ramp_table(rows) + [""]
    out += ["Channels NCCL ran (its tuning log, rank 0)", ""] + tuning_channels(args.prefix) + [""]
    out += (
        ["Slices a channel runs against NCCL_BUFFSIZE (run v's lease, -v-diag.log)", ""]
        + slice_table(args.prefix)
        + [""]
    )
    out += (
        ["One call alone against twenty back to back (run t's lease)", ""]
        + percall_table(args.prefix, rows)
        + [""]
    )
    out += ["All-to-all: p2p channels a peer (NCCL 2.28's rule, 2 GPUs)", ""] + p2p_table(rows)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
