"""Why the bus fitted at four ranks is ~5% above the two-rank fit (CPU only, committed CSVs).

    python benchmarks/gpu/collectives_rankbus.py

``nvlink.bus_bandwidth`` is fitted per run as the slope of the stream all-reduce between 256 MiB
and 1 GiB (``rdusim.analysis.gpu.collectives.fit_bus_bandwidth``). This script takes the same
slope for every ring op (and the all-to-all) on every committed sweep that has both rows, as a
rate of wire bytes (nccl-tests' busbw factor, ``BUSBW_FACTOR``), and prints the markdown tables
of docs/gpu.md, "Run an: four H200s (frozen)", bullet "The fitted bus is 5% above the
document's" (committed output: ``benchmarks/gpu/h200x4-20261128an-rank-bus.txt``):

1. per GPU, rank count and op (stream rows, the fit's launch mode), the fitted wire rate, mean
   and range over the runs; the four-rank rate over the two-rank one; and that factor over the
   one the model already gives the op (``memory_ops_per_wire_byte``: all-gather and
   reduce-scatter run at the all-reduce's rate times its operations per wire byte over theirs,
   which changes with the ranks; 1 for the all-reduce and the all-to-all);
2. the residual by size: the marginal wire rate of the all-reduce between neighbouring sizes
   (graph, stream and queued rows pooled per run, the launches it has), 16 MiB to 1 GiB, and each size's excess over
   the line through the 256 MiB and 1 GiB rows (the fit's own line), in us;
3. run w's H100 host at 2, 3 and 4 ranks (the only 3-rank rows, 16 and 256 MiB): the
   all-reduce's slope between those two sizes, ramp included;
4. the cost per primitive call (NCCL's ring Simple loop) that one wire rate would need to give
   both all-reduce fits.
"""

from __future__ import annotations

import csv
import statistics
import sys
from itertools import pairwise
from pathlib import Path

from rdusim.hw.collectives import BUSBW_FACTOR, memory_ops_per_wire_byte

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp import BUFFSIZE, CHANNELS, CHUNKSTEPS, NCCL_STEPS  # noqa: E402  (beside this file)

MIB = 1 << 20
GPU_DIR = Path(__file__).resolve().parent
#: the fit's two sizes (fit_bus_bandwidth: the calibration all-reduce rows from 256 MiB, 1 GiB the largest)
FIT = (256 * MIB, 1024 * MIB)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
#: every committed sweep with 256 MiB and 1 GiB rows of every op: (GPU, run label, CSV)
RUNS = (
    ("H200", "an", "h200x4-20261128an-sweep.csv"),
    ("H200", "an repeat", "h200x4-20261128an-sweep2.csv"),
    ("H200", "an, GPUs 0-1", "h200x4-20261128an-x2-sweep.csv"),
    ("H200", "an fallback", "h200x2-20261128an-x2-sweep.csv"),
    ("H200", "an fallback repeat", "h200x2-20261128an-x2-sweep2.csv"),
    ("H200", "aa", "h200x2-20261128aa-sweep.csv"),
    ("H200", "aa repeat", "h200x2-20261128aa-sweep2.csv"),
    ("H100", "t", "h100x2-20261125t-collectives.csv"),
    ("H100", "t repeat", "h100x2-20261125t-collectives-run2.csv"),
    ("H100", "x", "h100x2-20261128x-collectives.csv"),
    ("H100", "w", "h100x4-20261128w-collectives.csv"),
    ("H100", "w repeat", "h100x4-20261128w-collectives-run2.csv"),
)
#: run w's host at 2, 3 and 4 ranks (16 and 256 MiB rows; graph)
RUN_W_RANKS = (
    (2, "h100x4-20261128w-x2-nomix-graph.csv"),
    (3, "h100x4-20261128w-x3-floors.csv"),
    (4, "h100x4-20261128w-nomix-graph.csv"),
)
#: the all-reduce sizes of the residual table (every sweep has them)
RESIDUAL_SIZES = tuple(s * MIB for s in (16, 32, 64, 128, 256, 512, 1024))


def load(name: str) -> dict[tuple[str, str, int], dict[int, float]]:
    """(op, launch, ranks) -> {bytes: median us} of a CSV's collective rows; launch is stream,
    queued (a ``*_stream_queued`` row) or graph."""
    out: dict[tuple[str, str, int], dict[int, float]] = {}
    with open(GPU_DIR / name, newline="") as f:
        for r in csv.DictReader(f):
            if r["kind"] != "collective":
                continue
            launch = "queued" if r["name"].endswith("_queued") else r["mode"]
            key = (r["op"], launch, int(r["ranks"]))
            out.setdefault(key, {})[int(r["bytes"])] = float(r["median_us"])
    return out


def wire_rate(times: dict[int, float], op: str, ranks: int, a: int = FIT[0], b: int = FIT[1]) -> float:
    """Wire bytes per GPU per second between sizes ``a`` and ``b`` (GB/s): the fit's slope."""
    return BUSBW_FACTOR[op](ranks) * (b - a) / ((times[b] - times[a]) * 1e-6) / 1e9


def ranks_of(rows: dict) -> int:
    (n,) = {k[2] for k in rows}
    return n


def op_model_factor(op: str) -> float:
    """The four-rank over two-rank rate the model gives ``op`` at one bus (all-reduce: 1)."""
    if op == "all_to_all":
        return 1.0
    ratio = {n: memory_ops_per_wire_byte("all_reduce", n) / memory_ops_per_wire_byte(op, n) for n in (2, 4)}
    return ratio[4] / ratio[2]


def fitted(mode: str = "stream") -> dict[tuple[str, int, str], list[float]]:
    """(GPU, ranks, op) -> the fitted wire rate (GB/s) of every run, in ``RUNS`` order."""
    out: dict[tuple[str, int, str], list[float]] = {}
    for gpu, _, name in RUNS:
        rows = load(name)
        n = ranks_of(rows)
        for op in OPS:
            out.setdefault((gpu, n, op), []).append(wire_rate(rows[(op, mode, n)], op, n))
    return out


def fit_table(fits: dict[tuple[str, int, str], list[float]]) -> list[str]:
    out = [
        "| GPU | op | memory ops a wire byte, 2 / 4 ranks | 2 ranks (GB/s) | 4 ranks (GB/s) | 4 / 2 "
        "| model's 4 / 2 at one bus | left over |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for gpu in ("H200", "H100"):
        for op in OPS:
            two, four = fits[(gpu, 2, op)], fits[(gpu, 4, op)]
            m2, m4 = statistics.fmean(two), statistics.fmean(four)
            model = op_model_factor(op)
            ops = (
                "-" if op == "all_to_all"
                else " / ".join(f"{memory_ops_per_wire_byte(op, n):.2f}" for n in (2, 4))
            )
            out.append(
                f"| {gpu} | {op.replace('_', '-')} | {ops} | {m2:.1f} ({min(two):.0f}-{max(two):.0f}, {len(two)}) "
                f"| {m4:.1f} ({min(four):.0f}-{max(four):.0f}, {len(four)}) | {m4 / m2:.3f} "
                f"| {model:.3f} | {m4 / m2 / model:.3f} |"
            )
    return out


def residual_table() -> list[str]:
    """The all-reduce by size: marginal wire rate from the size before (GB/s) and the excess over
    the fit's line (us), graph, stream and queued pooled per run."""
    sizes = RESIDUAL_SIZES
    head = " | ".join(f"{s // MIB} MiB" for s in sizes)
    out = [f"| GPU | ranks | runs | {head} |", "|---|---:|---:|" + "---:|" * len(sizes)]
    for gpu in ("H200", "H100"):
        for n in (2, 4):
            marg = {s: [] for s in sizes}
            excess = {s: [] for s in sizes}
            runs = 0
            for g, _, name in RUNS:
                rows = load(name)
                if g != gpu or ranks_of(rows) != n:
                    continue
                runs += 1
                for launch in ("graph", "stream", "queued"):
                    t = rows.get(("all_reduce", launch, n), {})
                    if not all(s in t for s in sizes):
                        continue  # the H100 runs have no queued rows
                    rate = wire_rate(t, "all_reduce", n)
                    w = BUSBW_FACTOR["all_reduce"](n)
                    for prev, s in pairwise(sizes):
                        marg[s].append(wire_rate(t, "all_reduce", n, prev, s))
                    for s in sizes:
                        line = t[FIT[0]] + w * (s - FIT[0]) / (rate * 1e9) * 1e6
                        excess[s].append(t[s] - line)
            cells = [
                f"{statistics.fmean(excess[s]):+.0f}"
                + (f" / {statistics.fmean(marg[s]):.0f}" if marg[s] else "")
                for s in sizes
            ]
            out.append(f"| {gpu} | {n} | {runs} | " + " | ".join(cells) + " |")
    return out


def primitive_calls(size: int, ranks: int) -> int:
    """Primitive calls a channel runs for a ring Simple all-reduce of ``size`` bytes: 2(n-1)+1 a
    loop, a loop being one 2 MiB chunk per rank a channel, the last loop shrunk, not dropped
    (NCCL 2.28, ``collective_ramp.py``'s docstring)."""
    loop = ranks * CHANNELS * BUFFSIZE // NCCL_STEPS * CHUNKSTEPS
    return -(-size // loop) * (2 * (ranks - 1) + 1)


def per_call_cost_us(gpu: str, fits: dict[tuple[str, int, str], list[float]]) -> float:
    """The cost per primitive call that would, with one wire rate, give the 2- and 4-rank
    all-reduce fits (the slope between the fit's sizes: added wire time plus added calls)."""
    dt, dcalls, wire = {}, {}, {}
    for n in (2, 4):
        wire[n] = BUSBW_FACTOR["all_reduce"](n) * (FIT[1] - FIT[0])
        dt[n] = wire[n] / (statistics.fmean(fits[(gpu, n, "all_reduce")]) * 1e9) * 1e6
        dcalls[n] = primitive_calls(FIT[1], n) - primitive_calls(FIT[0], n)
    k = wire[4] / wire[2]
    return (k * dt[2] - dt[4]) / (k * dcalls[2] - dcalls[4])


def run_w_table() -> list[str]:
    """The all-reduce only: at 3 ranks the per-rank parts of the other ops are not 16-byte
    aligned (the 256 MiB all-gather is 89478484 bytes a rank, -x3-floors-nccl-tuning.txt)."""
    out = ["| ranks | all-reduce |", "|---:|---:|"]
    for n, name in RUN_W_RANKS:
        t = load(name)[("all_reduce", "graph", n)]
        out.append(f"| {n} | {wire_rate(t, 'all_reduce', n, 16 * MIB, 256 * MIB):.0f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    if argv:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    fits = fitted()
    out = [
        "# The bus by rank count (benchmarks/gpu/collectives_rankbus.py)",
        "",
        "Fitted wire rate, 256 MiB to 1 GiB, stream rows; mean (range, runs):",
        "",
        *fit_table(fits),
        "",
        "All-reduce by size (graph, stream, queued pooled): excess over the fit's line (us)"
        " / marginal wire rate from the size before (GB/s):",
        "",
        *residual_table(),
        "",
        "Run w's H100 host, graph rows, all-reduce wire rate between 16 and 256 MiB (GB/s):",
        "",
        *run_w_table(),
        "",
        "A cost per primitive call that would give both all-reduce fits with one wire rate"
        f" (calls a channel adds from 256 MiB to 1 GiB: {primitive_calls(FIT[1], 2) - primitive_calls(FIT[0], 2)}"
        f" at 2 ranks, {primitive_calls(FIT[1], 4) - primitive_calls(FIT[0], 4)} at 4): "
        + ", ".join(f"{gpu} {per_call_cost_us(gpu, fits):.1f} us" for gpu in ("H200", "H100")),
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
