"""The all-to-all's p2p LL channel: its rate calibrated on one channel a peer (run dk), checked at NCCL's
defaults on sizes never measured (run dl).

NCCL 2.28 (``src/enqueue.cc``, addP2pToPlan) gives a peer's part ``min(nChannelsMin, divUp(part, stepSize /
8))`` channels, stepSize for LL the LL buffer (512 KiB) over NCCL_STEPS (8): one channel for each 8 KiB of
the part, up to 16 a peer on two GPUs (``rdusim.hw.collectives.p2p_ll_channels``). The engine moves an LL
all-to-all's wire bytes at min(the LL rate, its channels x one channel's LL rate)
(``nvlink.p2p_ll_channel_bandwidth``). Run dk calibrates that one rate: the inverse slope of the
least-squares line of the all-to-all's time by its part at one p2p channel a peer (LL forced by
``NCCL_P2P_LL_THRESHOLD``), K1 (a line) and K2 (two channels at twice the rate) its structure's checks
(``h200x2-20261130dk-a2a-ll-hypotheses.md``).

    PYTHONPATH=. python benchmarks/gpu/a2a_ll.py --fit                  # run dk: the rate, K1 and K2
    PYTHONPATH=. python benchmarks/gpu/a2a_ll.py --frozen-dl <txt>      # run dl's rows, frozen
    PYTHONPATH=. python benchmarks/gpu/a2a_ll.py --frozen-dl <txt> --compare-dl <csv>
    PYTHONPATH=. python benchmarks/gpu/a2a_ll.py --plot docs/img/gpu-a2a-ll.png
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import a2a_channels as chans

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ROOT / "benchmarks/gpu"
DK = {"ll1": GPU_DIR / "h200x2-20261130dk-ll1.csv", "ll2": GPU_DIR / "h200x2-20261130dk-ll2.csv"}


def rows(path: Path) -> list[tuple[float, float]]:
    """(a peer's part S / 2 in bytes, median us) of a two-GPU CSV's graph all-to-all rows."""
    with path.open(newline="") as fh:
        return sorted((int(r["bytes"]) / 2, float(r["median_us"])) for r in csv.DictReader(fh)
                      if r["op"] == "all_to_all" and r["mode"] == "graph" and int(r["ranks"]) == 2)


def fit() -> tuple[float, list[str]]:
    """One channel's LL rate (bytes/s) from run dk's ``ll1`` rows, and the report with checks K1 and K2: each
    variant's least-squares line t = a + part / r (``a2a_channels.line``)."""
    one, two = rows(DK["ll1"]), rows(DK["ll2"])
    a1, r1 = chans.line(one)
    a2, r2 = chans.line(two)
    out = [f"run dk, one p2p channel a peer (ll1, {len(one)} graph rows, LL forced): t = {a1:.2f} us + part / "
           f"{r1:.2f} GB/s", "", "| part (KiB) | ll1 us | line | residual |", "|---:|---:|---:|---:|"]
    worst = 0.0
    for part, us in one:
        fitted = a1 + part * 1e-3 / r1
        worst = max(worst, abs(fitted / us - 1))
        out.append(f"| {part / 1024:g} | {us:.2f} | {fitted:.2f} | {100 * (fitted / us - 1):+.1f}% |")
    out += ["", f"K1 (every ll1 row within 5% of the line): worst {100 * worst:.1f}% -> "
            f"{'pass' if worst <= 0.05 else 'fail'}",
            f"K2 (ll2's slope within 10% of half ll1's): ll2 t = {a2:.2f} us + part / {r2:.2f} GB/s, "
            f"slope ratio {r1 / r2:.3f} -> {'pass' if abs(2 * r1 / r2 - 1) <= 0.10 else 'fail'}"]
    return r1 * 1e9, out


#: run dl (frozen before its lease): S in bytes, NCCL's defaults on two GPUs, graph rows; sizes never measured
#: (parts 3-384 KiB: 1 to 16 LL channels a peer)
RUN_DL = (6144, 12288, 24576, 49152, 98304, 196608, 393216, 786432)


def write_frozen_dl(path: Path) -> None:
    """Run dl's rows under H1 (an LL all-to-all at most its channels x run dk's one-channel rate) and H0 (the
    LL rate alone: the engine now), ``hw_configs/h200.yaml`` as committed."""
    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw.collectives import p2p_ll_channels
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu
    rate, _ = fit()
    h0 = replace(gpu.fabric, p2p_ll_channel_bytes_per_s=None)
    h1 = replace(gpu.fabric, p2p_ll_channel_bytes_per_s=rate)
    with path.open("w") as fh:
        fh.write(f"# run dl, frozen before the lease (a2a_ll.py --frozen-dl; hw_configs/h200.yaml as committed; one "
                 f"p2p channel's LL rate {rate / 1e9:.2f} GB/s, run dk's ll1 rows)\n")
        fh.write("name,bytes,channels_a_peer,protocol,H1_us,H0_us\n")
        for size in RUN_DL:
            q, cost = predict_us(gpu, "all_to_all", size, 2, "graph", fabric=h1)
            p, _ = predict_us(gpu, "all_to_all", size, 2, "graph", fabric=h0)
            fh.write(f"all_to_all_{size}_graph,{size},{p2p_ll_channels(size / 2, 2)},{cost.protocol},{q:.2f},{p:.2f}\n")


def compare_dl(frozen: Path, paths: list[Path]) -> list[str]:
    """Run dl's graph rows against its frozen table, and check D1 (its hypotheses file)."""
    lines = [ln for ln in frozen.read_text().splitlines() if not ln.startswith("#")]
    table = {r["name"]: r for r in csv.DictReader(lines)}
    out = ["| S | channels a peer | measured us | H1 | H0 |", "|---:|---:|---:|---:|---:|"]
    e1, e0 = [], []
    for path in paths:
        with path.open(newline="") as fh:
            for r in csv.DictReader(fh):
                row = table.get(r["name"])
                if row is None:
                    continue
                us = float(r["median_us"])
                a, b = float(row["H1_us"]) / us - 1, float(row["H0_us"]) / us - 1
                e1.append(a)
                e0.append(b)
                out.append(f"| {int(row['bytes']) // 1024} KiB | {row['channels_a_peer']} | {us:.2f} | {row['H1_us']} "
                           f"({100 * a:+.1f}%) | {row['H0_us']} ({100 * b:+.1f}%) |")
    m1, w1 = statistics.median(abs(x) for x in e1), max(abs(x) for x in e1)
    m0, w0 = statistics.median(abs(x) for x in e0), max(abs(x) for x in e0)
    out += ["", f"D1 ({len(e1)} rows: H1's median at least 3 points under H0's, its worst no larger): H1 "
            f"{100 * m1:.1f}% / {100 * w1:.1f}%, H0 {100 * m0:.1f}% / {100 * w0:.1f}% -> "
            f"{'pass' if m1 <= m0 - 0.03 and w1 <= w0 else 'fail'}"]
    return out


def plot(out: Path) -> None:
    """docs/img/gpu-a2a-ll.png: an LL all-to-all's time by a peer's part on two H200s: run dk at one and two
    forced channels a peer with the one-channel line, and NCCL's defaults (run dl, frozen before it; run
    aa's sweep) against the engine with and without the channels' rate (the LL rate alone)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu
    bare = replace(gpu.fabric, p2p_ll_channel_bytes_per_s=None)
    rate, _ = fit()
    a1, r1 = chans.line(rows(DK["ll1"]))
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    for key, colour, label in (("ll1", "C1", "one channel a peer (run dk, calibration)"),
                               ("ll2", "C2", "two channels a peer (run dk, K2)")):
        pts = rows(DK[key])
        ax.plot([p / 1024 for p, _ in pts], [t for _, t in pts], "o", color=colour, mfc="none", label=label)
    parts = [2 ** k * 1024 for k in range(0, 10)]
    ax.plot([p / 1024 for p in parts], [a1 + p * 1e-3 / r1 for p in parts], ":", color="C1", lw=1,
            label=f"its line: {a1:.2f} us + part / {rate / 1e9:.2f} GB/s")
    defaults = rows(GPU_DIR / "h200x2-20261130dl-def.csv")
    ax.plot([p / 1024 for p, _ in defaults], [t for _, t in defaults], "s", color="C3",
            label="NCCL's defaults (run dl, frozen before it)")
    sweep = [(p, t) for p, t in rows(GPU_DIR / "h200x2-20261128aa-sweep.csv") if p <= 512 * 1024]
    ax.plot([p / 1024 for p, _ in sweep], [t for _, t in sweep], "s", color="C3", mfc="none",
            label="NCCL's defaults (run aa)")
    grid = [int(2 ** (k / 4) * 1024) for k in range(0, 37)]
    for fabric, style, label in ((gpu.fabric, "-", "h200.yaml: NCCL's LL channels x one channel's rate"),
                                 (bare, "--", "the LL rate alone (before run dl)")):
        ax.plot([p / 1024 for p in grid], [predict_us(gpu, "all_to_all", 2 * p, 2, "graph", fabric=fabric)[0]
                                           for p in grid], style, color="C0", label=label)
    ax.set(xscale="log", xlabel="a peer's part (KiB; S / 2)", ylabel="graph row (us)", ylim=(7, 40),
           title="NCCL's p2p LL all-to-all on two H200s: channels by the part")
    ax.legend(fontsize=7.5, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="run dk: one channel's LL rate, K1 and K2")
    ap.add_argument("--frozen-dl", type=Path, help="write run dl's frozen rows here (or read them, with --compare-dl)")
    ap.add_argument("--compare-dl", nargs="+", type=Path, metavar="CSV", help="run dl's CSVs against --frozen-dl's")
    ap.add_argument("--plot", type=Path, metavar="PNG", help="the LL all-to-all by its part (docs/img/gpu-a2a-ll.png)")
    args = ap.parse_args(argv)
    if args.plot:
        plot(args.plot)
        return 0
    if args.fit:
        print("\n".join(fit()[1]))
        return 0
    if args.compare_dl:
        if not args.frozen_dl:
            ap.error("--compare-dl needs --frozen-dl (the table frozen before the run)")
        print("\n".join(compare_dl(args.frozen_dl, args.compare_dl)))
        return 0
    if args.frozen_dl:
        write_frozen_dl(args.frozen_dl)
        return 0
    ap.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
