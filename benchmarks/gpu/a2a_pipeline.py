"""The all-to-all's p2p channels as NCCL 2.28's device code runs them: a pipeline per channel.

Explained after measurement (runs ar, cf, cg, ch): a candidate for ``rdusim.hw.collectives``'s p2p
Simple all-to-all, evaluated here before it is built into the engine. NCCL 2.28's
``src/device/sendrecv.h`` (RunWorkBatch<ncclFuncSendRecv>) gives a channel that sends to one peer
and receives from one 10 warps for the send and 9 for the receive, running at once; the send loop
puts one chunk (``NCCL_P2P_NVL_CHUNKSIZE``, 512 KiB) after another into the receiver's FIFO of
``NCCL_STEPS`` (8) slots, each chunk then posted (a fence and a flag: a fixed cost a chunk), and the
receive loop copies each posted chunk out and frees its slot. So each channel is two SimPy processes:

    sender:   for each chunk: wait for a free slot; the chunk on NVLink at most ``send`` (the link
              shared max-min by every sending channel of the GPU); then ``step`` (post)
    receiver: for each chunk: wait until it is posted; copy it out at ``recv`` (local); free its slot

started ``launch_skew`` apart across the channels (``h200.yaml``'s ring), every peer's channels at
once (NCCL's channels a peer by its rule, ``a2a_turns.channels_a_peer``). A call is NCCL's p2p
latency (``ALL_TO_ALL_LATENCY_US``) plus the last receiver's end.

Calibration (``fit``): ``send``, ``step`` and ``recv`` by linear least squares on run cg's one-channel
rows both ways (``sendrecv``, graph, 2-8 MiB of S at 128, 256 and 512 KiB chunks: 9 rows). With one
channel and a receiver that keeps up, t - latency = n (chunk / send + step) + last chunk / recv, n
chunks: linear in (1 / send, step, 1 / recv). Everything else is predicted.

    PYTHONPATH=. python benchmarks/gpu/a2a_pipeline.py                  # every committed row
    PYTHONPATH=. python benchmarks/gpu/a2a_pipeline.py --fit            # the documents' nvlink.p2p
    PYTHONPATH=. python benchmarks/gpu/a2a_pipeline.py --frozen <txt>   # run ci's rows, frozen
    PYTHONPATH=. python benchmarks/gpu/a2a_pipeline.py --frozen <txt> --compare <run ci csv>...
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import a2a_turns as turns
import numpy as np

from rdusim.hw import collectives as nccl
from rdusim.hw.collectives import P2pChannels, P2pPlan, RingChannels
from rdusim.sim.p2p import p2p_transfer_s

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ROOT / "benchmarks/gpu"
MIB = 1 << 20
KIB = 1 << 10
FIFO = 8  # NCCL_STEPS: a p2p connection's FIFO slots (src/include/device.h)
CG = {"c128": 128 * KIB, "c256": 256 * KIB, "c512": 512 * KIB}
CG_PRED = {"d128": 128 * KIB, "d256": 256 * KIB, "d512": 512 * KIB}


def transfer_s(link: float, skew: float, channels: int, chunks: tuple[float, ...], p: P2pChannels) -> float:
    """Seconds from the first channel's start to the last receiver's end: the engine's
    ``rdusim.sim.p2p.p2p_transfer_s`` on a plan of ``channels`` channels of ``chunks`` on ``link``."""
    return p2p_transfer_s(P2pPlan(p, RingChannels(channels, 1.0, link, skew), channels, tuple(chunks)))


def call_us(size: float, ranks: int, ring: RingChannels, p: P2pChannels, p2p_channels: int = turns.P2P_CHANNELS,
            chunk: int = turns.CHUNK) -> float:
    """Us of an all-to-all (or ``sendrecv``, both ways) of ``size`` on ``ranks`` GPUs: NCCL's p2p
    latency plus every peer's channels' pipelines on the GPU's link."""
    part = size / ranks
    ch = nccl.p2p_channels_a_peer(part, ranks, p2p_channels, chunk)
    chunks = nccl.channel_chunks(part, ch, chunk)
    t = transfer_s(ring.link_bytes_per_s, ring.launch_skew_s, ch * (ranks - 1), chunks, p)
    return (nccl.ALL_TO_ALL_LATENCY_US["Simple"] * 1e-6 + t) * 1e6


def fit(cg_paths: list[Path]) -> P2pChannels:
    """``send``, ``step`` and ``recv`` from run cg's one-channel ``sendrecv`` graph rows (module docstring)."""
    meas = turns.read_measured([str(p) for p in cg_paths])
    lat = nccl.ALL_TO_ALL_LATENCY_US["Simple"]
    a, b = [], []
    for (variant, case, op, mib), us in meas.items():
        if variant in CG and case == "plain" and op == "sendrecv":
            chunks = turns.channel_chunks(mib * MIB / 2, 1, CG[variant])
            a.append([sum(chunks) * 1e-6, len(chunks), chunks[-1] * 1e-6])  # x: (us/MB, us, us/MB)
            b.append(us - lat)
    x, *_ = np.linalg.lstsq(np.array(a), np.array(b), rcond=None)
    return P2pChannels(1e12 / x[0], 1e12 / x[2], x[1] * 1e-6)


def _fabric_ring():
    from rdusim.hw.gpu import load_gpu_node

    return load_gpu_node(ROOT / turns.DOC).gpu.fabric.ring


def report() -> list[str]:
    from rdusim.analysis.gpu.collectives import run_label

    cg = sorted(GPU_DIR.glob("h200x2-20261130cg-[cd]*.csv"))
    p = fit(cg)
    ring = _fabric_ring()
    out = [f"fitted (run cg, one channel both ways, 9 graph rows): send {p.send_bytes_per_s / 1e9:.1f} GB/s, receive "
           f"{p.receive_bytes_per_s / 1e9:.1f} GB/s, {p.step_s * 1e6:.2f} us a chunk posted; receiver keeps up: "
           f"{512 * KIB / p.receive_bytes_per_s <= 512 * KIB / p.send_bytes_per_s + p.step_s}", ""]
    out += ["| rows | pipeline: median / worst (errors by size, %) | H0 |", "|---|---|---|"]
    meas = turns.read_measured([str(x) for x in cg])
    for variant, chunk in {**CG, **CG_PRED}.items():
        for op in ("sendrecv", "all_to_all"):
            pts = {m: us for (v, c, o, m), us in meas.items() if (v, c, o) == (variant, "plain", op)}
            if not pts:
                continue
            p2p = 2 if variant in CG else turns.P2P_CHANNELS
            e = [call_us(m * MIB, 2, ring, p, p2p, chunk) / us - 1 for m, us in sorted(pts.items())]
            h0 = [turns.predict(op, m * MIB, p2p)["H0"] / us - 1 for m, us in sorted(pts.items())]
            out.append(f"| run cg {variant} {op} ({'calibration' if variant in CG else 'prediction'}) | "
                       f"{turns._stats(e)} ({' '.join(f'{x * 100:+.0f}' for x in e)}) | {turns._stats(h0)} |")
    for path in sorted(GPU_DIR.glob("h200x2-20261130ch-p2p*-eager.csv")) + [
            GPU_DIR / "h200x2-20261130cf-def-eager.csv", GPU_DIR / "h200x2-20261130cf-p2p64-eager.csv",
            GPU_DIR / "h200x2-20261130cf-def-plain.csv"]:
        p2p = int(path.name.split("-p2p")[1].split("-")[0]) if "-p2p" in path.name else turns.P2P_CHANNELS
        with path.open(newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["op"] in ("sendrecv", "all_to_all")]
        for op in ("sendrecv", "all_to_all"):
            pts = sorted((int(r["bytes"]), float(r["median_us"])) for r in rows if r["op"] == op)
            if not pts:
                continue
            e = [call_us(s, 2, ring, p, p2p) / us - 1 for s, us in pts]
            h0 = [turns.predict(op, s, p2p)["H0"] / us - 1 for s, us in pts]
            out.append(f"| {path.name} {op} | {turns._stats(e)} ({' '.join(f'{x * 100:+.0f}' for x in e)}) | "
                       f"{turns._stats(h0)} |")
    ar = GPU_DIR / "h200x2-20261128ar-chunk128k.csv"
    with ar.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["op"] == "all_to_all"]
    e = [call_us(int(r["bytes"]), 2, ring, p, chunk=128 * KIB) / float(r["median_us"]) - 1 for r in rows]
    out.append(f"| run ar, 128 KiB chunk | {turns._stats(e)} ({' '.join(f'{x * 100:+.0f}' for x in e)}) | |")
    out += ["", "| committed run (all-to-all, p2p Simple) | GPUs | launch | rows | pipeline: median / worst | "
            "H0: median / worst | pipeline errors by size (%) |", "|---|---:|---|---:|---|---|---|"]
    for path, ranks, launch, new, old in turns.committed_groups(lambda size, ranks, ring: call_us(size, ranks, ring, p)):
        out.append(f"| {run_label(path)} ({path.name}) | {ranks} | {launch} | {len(new)} | {turns._stats(new)} | "
                   f"{turns._stats(old)} | {' '.join(f'{x * 100:+.0f}' for x in new)} |")
    return out


#: run ci (frozen before its lease): variant -> (ops, sizes in MiB of S never measured there, p2p channels)
RUN_CI = {
    "def": (("all_to_all", "sendrecv"), (3, 6, 12, 24, 48, 96, 192, 384), turns.P2P_CHANNELS),
    "p2p8": (("sendrecv",), (24, 48, 96), 8),
    "p2p16": (("sendrecv",), (48, 96, 192), 16),
}


def write_frozen(path: Path) -> None:
    """Run ci's rows under the pipeline (fitted on run cg) and H0 (the engine now), graph rows."""
    p = replace(fit(sorted(GPU_DIR.glob("h200x2-20261130cg-c*.csv"))), queue=False)  # the engine then (H0 of run dj)
    ring = _fabric_ring()
    with path.open("w") as fh:
        fh.write(f"# run ci, frozen before the lease (a2a_pipeline.py --frozen; hw_configs/h200.yaml as committed; "
                 f"pipeline fitted on run cg's one channel: send {p.send_bytes_per_s / 1e9:.2f} GB/s, receive "
                 f"{p.receive_bytes_per_s / 1e9:.2f} GB/s, {p.step_s * 1e6:.3f} us a chunk)\n")
        fh.write("variant,op,mib,channels_a_peer,pipeline_us,H0_us\n")
        for variant, (ops, sizes, p2p) in RUN_CI.items():
            for op in ops:
                for mib in sizes:
                    ch = turns.channels_a_peer(mib * MIB / 2, p2p)
                    fh.write(f"{variant},{op},{mib},{ch},{call_us(mib * MIB, 2, ring, p, p2p):.1f},"
                             f"{turns.predict(op, mib * MIB, p2p)['H0']:.1f}\n")


def compare_ci(frozen: Path, paths: list[Path]) -> list[str]:
    """Run ci's graph rows against its frozen table, and checks R1 and R2 (its hypotheses file)."""
    lines = [ln for ln in frozen.read_text().splitlines() if not ln.startswith("#")]
    table = {(r["variant"], r["op"], int(r["mib"])): r for r in csv.DictReader(lines)}
    meas = turns.read_measured([str(x) for x in paths])
    out = ["| variant | op | MiB | channels a peer | measured us | pipeline | H0 |", "|---|---|---:|---:|---:|---:|---:|"]
    err: dict[str, tuple[list[float], list[float]]] = {}
    for (variant, case, op, mib), us in sorted(meas.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3])):
        row = table.get((variant, op, mib))
        if row is None or case != "plain":
            continue
        pipe, h0 = float(row["pipeline_us"]) / us - 1, float(row["H0_us"]) / us - 1
        group = "R1" if variant in ("p2p8", "p2p16") else "R2"
        err.setdefault(group, ([], []))[0].append(pipe)
        err[group][1].append(h0)
        out.append(f"| {variant} | {op} | {mib} | {row['channels_a_peer']} | {us:.1f} | {row['pipeline_us']} "
                   f"({pipe * 100:+.1f}%) | {row['H0_us']} ({h0 * 100:+.1f}%) |")
    out.append("")
    if "R1" in err:
        e = err["R1"][0]
        med, worst = statistics.median(abs(x) for x in e), max(abs(x) for x in e)
        out.append(f"R1 (4 and 8 channels a peer: median <= 10%, worst <= 25%): {med * 100:.1f}% / {worst * 100:.1f}% -> "
                   f"{'pass' if med <= 0.10 and worst <= 0.25 else 'fail'}")
    if "R2" in err:
        (e, h) = err["R2"]
        mp, wp = statistics.median(abs(x) for x in e), max(abs(x) for x in e)
        mh, wh = statistics.median(abs(x) for x in h), max(abs(x) for x in h)
        out.append(f"R2 (NCCL's defaults: pipeline {mp * 100:.1f}% / {wp * 100:.1f}% against H0 {mh * 100:.1f}% / "
                   f"{wh * 100:.1f}%, each no larger) -> {'pass' if mp <= mh and wp <= wh else 'fail'}")
    return out


#: run dj (frozen before its lease): variant -> (ops, sizes in MiB of S never measured there, p2p channels,
#: NCCL_P2P_NVL_CHUNKSIZE); its checks Q1 (16 channels a peer) and Q2 (8, and 32 a peer) in its hypotheses file
RUN_DJ = {
    "def": (("all_to_all", "sendrecv"), (5, 10, 20, 40, 80, 160, 320, 640), turns.P2P_CHANNELS, 512 * KIB),
    "c64": (("all_to_all", "sendrecv"), (6, 12, 24, 48), turns.P2P_CHANNELS, 64 * KIB),
    "c256": (("all_to_all", "sendrecv"), (10, 40, 160), turns.P2P_CHANNELS, 256 * KIB),
    "p2p16": (("sendrecv",), (20, 80, 320), 16, 512 * KIB),
    "p2p64": (("sendrecv",), (20, 80, 320), 64, 512 * KIB),
}


def write_frozen_dj(path: Path) -> None:
    """Run dj's rows under the engine now (H0: the sending channels share the link max-min) and the candidate
    (queue: the sending channels a closed network at the link, ``P2pChannels.send_at``), graph rows."""
    p = fit(sorted(GPU_DIR.glob("h200x2-20261130cg-c*.csv")))
    ring = _fabric_ring()
    with path.open("w") as fh:
        fh.write(f"# run dj, frozen before the lease (a2a_pipeline.py --frozen-dj; hw_configs/h200.yaml as committed; "
                 f"nvlink.p2p fitted on run cg's one channel: send {p.send_bytes_per_s / 1e9:.2f} GB/s, receive "
                 f"{p.receive_bytes_per_s / 1e9:.2f} GB/s, {p.step_s * 1e6:.3f} us a chunk; the ring's link "
                 f"{ring.link_bytes_per_s / 1e9:.1f} GB/s)\n")
        fh.write("variant,op,mib,channels_a_peer,queue_us,H0_us\n")
        for variant, (ops, sizes, p2p, chunk) in RUN_DJ.items():
            for op in ops:
                for mib in sizes:
                    ch = turns.channels_a_peer(mib * MIB / 2, p2p, chunk=chunk)
                    q = call_us(mib * MIB, 2, ring, replace(p, queue=True), p2p, chunk)
                    h0 = call_us(mib * MIB, 2, ring, replace(p, queue=False), p2p, chunk)
                    fh.write(f"{variant},{op},{mib},{ch},{q:.1f},{h0:.1f}\n")


def compare_dj(frozen: Path, paths: list[Path]) -> list[str]:
    """Run dj's graph rows against its frozen table, and checks Q1 and Q2 (its hypotheses file)."""
    lines = [ln for ln in frozen.read_text().splitlines() if not ln.startswith("#")]
    table = {(r["variant"], r["op"], int(r["mib"])): r for r in csv.DictReader(lines)}
    meas = turns.read_measured([str(x) for x in paths])
    out = ["| variant | op | MiB | channels a peer | measured us | queue | H0 |", "|---|---|---:|---:|---:|---:|---:|"]
    err: dict[str, tuple[list[float], list[float]]] = {"Q1": ([], []), "Q2": ([], [])}
    for (variant, case, op, mib), us in sorted(meas.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3])):
        row = table.get((variant, op, mib))
        if row is None or case != "plain":
            continue
        q, h0 = float(row["queue_us"]) / us - 1, float(row["H0_us"]) / us - 1
        group = "Q1" if int(row["channels_a_peer"]) == 16 else "Q2"
        err[group][0].append(q)
        err[group][1].append(h0)
        out.append(f"| {variant} | {op} | {mib} | {row['channels_a_peer']} | {us:.1f} | {row['queue_us']} "
                   f"({q * 100:+.1f}%) | {row['H0_us']} ({h0 * 100:+.1f}%) |")
    out.append("")
    stats = {g: [(statistics.median(abs(x) for x in e), max(abs(x) for x in e)) if e else (float("nan"),) * 2
                 for e in pair] for g, pair in err.items()}
    (mq, wq), (mh, wh) = stats["Q1"]
    out.append(f"Q1 (16 channels a peer, {len(err['Q1'][0])} rows: queue median <= H0's - 3 points and worst no "
               f"larger): queue {mq * 100:.1f}% / {wq * 100:.1f}%, H0 {mh * 100:.1f}% / {wh * 100:.1f}% -> "
               f"{'pass' if mq <= mh - 0.03 and wq <= wh else 'fail'}")
    (mq, wq), (mh, wh) = stats["Q2"]
    out.append(f"Q2 (8 and 32 channels a peer, {len(err['Q2'][0])} rows: queue median no more than 1 point over "
               f"H0's): queue {mq * 100:.1f}% / {wq * 100:.1f}%, H0 {mh * 100:.1f}% / {wh * 100:.1f}% -> "
               f"{'pass' if mq <= mh + 0.01 else 'fail'}")
    return out


def plot_dj(out: Path) -> list[str]:
    """docs/img/gpu-a2a-queue.png: the peer's rate (GB/s of S / 2, both ways) by channels a peer on two H200s,
    each a line over a variant's three largest sizes (run ch's ``sendrecv``; run dj's defaults, 8 and 32 a
    peer), against one channel's rate times the channels up to the link (max-min sharing, the engine before
    run dj) and the channels as a closed network at the link (the engine now). Returns its table."""
    import a2a_channels as chans
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = fit(sorted(GPU_DIR.glob("h200x2-20261130cg-c*.csv")))
    link = _fabric_ring().link_bytes_per_s
    c = turns.CHUNK
    one = c / (c / p.send_bytes_per_s + p.step_s)
    measured: list[tuple[str, int, float]] = []
    for (op, ch), pts in sorted(chans.read(sorted(GPU_DIR.glob("h200x2-20261130ch-p2p*-eager.csv"))).items()):
        if op == "sendrecv":
            measured.append(("run ch", ch, chans.line(sorted(pts)[-3:])[1]))
    for variant, ch in (("p2p16", 8), ("def", 16), ("p2p64", 32)):
        with (GPU_DIR / f"h200x2-20261130dj-{variant}-plain.csv").open(newline="") as fh:
            pts = sorted((int(r["bytes"]) / 2, float(r["median_us"])) for r in csv.DictReader(fh) if r["op"] == "sendrecv"
                         and turns.channels_a_peer(int(r["bytes"]) / 2, 2 * ch if variant != "def" else turns.P2P_CHANNELS) == ch)
        measured.append(("run dj", ch, chans.line(pts[-3:])[1]))
    counts = list(range(1, 41))
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    ax.plot(counts, [min(n * one, link) / 1e9 for n in counts], ":", color="grey",
            label="max-min link: one channel's rate x channels, up to the link")
    ax.plot(counts, [n * c / p.send_at(c, n, link) / 1e9 for n in counts], "-", color="C0",
            label="closed network at the link (h200.yaml now)")
    for run, marker in (("run ch", "o"), ("run dj", "s")):
        xs = [(ch, r) for who, ch, r in measured if who == run]
        ax.plot([x for x, _ in xs], [r for _, r in xs], marker, color="C3", mfc="none" if run == "run ch" else "C3",
                label=f"{run} ({'before' if run == 'run ch' else 'frozen before it'})")
    ax.set(xscale="log", xlabel="p2p channels a peer (NCCL's default on two GPUs: 16)",
           ylabel="the peer's part, both ways (GB/s)", xticks=[1, 2, 4, 8, 16, 32],
           title="NCCL's all-to-all channels queue at the link (two H200s)")
    ax.set_xticklabels(["1", "2", "4", "8", "16", "32"])
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    lines = ["| run | channels a peer | measured GB/s | max-min link | closed network |", "|---|---:|---:|---:|---:|"]
    for run, ch, r in measured:
        lines.append(f"| {run} | {ch} | {r:.1f} | {min(ch * one, link) / 1e9:.1f} | "
                     f"{ch * c / p.send_at(c, ch, link) / 1e9:.1f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="print the GPU document's nvlink.p2p, fitted on run cg")
    ap.add_argument("--frozen", type=Path, help="write run ci's frozen rows here")
    ap.add_argument("--compare", nargs="+", type=Path, metavar="CSV", help="run ci's CSVs against --frozen's table")
    ap.add_argument("--frozen-dj", type=Path, help="write run dj's frozen rows here (or read them, with --compare-dj)")
    ap.add_argument("--compare-dj", nargs="+", type=Path, metavar="CSV", help="run dj's CSVs against --frozen-dj's table")
    ap.add_argument("--plot-dj", type=Path, metavar="PNG", help="the peer's rate by channels a peer, measured and both "
                    "models (docs/img/gpu-a2a-queue.png); prints its table")
    args = ap.parse_args(argv)
    if args.plot_dj:
        print("\n".join(plot_dj(args.plot_dj)))
        return 0
    if args.fit:
        p = fit(sorted(GPU_DIR.glob("h200x2-20261130cg-c*.csv")))
        print(f'p2p:\n  send_bandwidth: "{p.send_bytes_per_s / 1e9:.2f} GB/s"\n'
              f'  receive_bandwidth: "{p.receive_bytes_per_s / 1e9:.1f} GB/s"\n  step: "{p.step_s * 1e6:.3f} us"')
        return 0
    # each registered run: (its frozen table, its CSVs to compare, its flags, how it writes and compares)
    for frozen, csvs, flags, write, compare in (
            (args.frozen_dj, args.compare_dj, ("--frozen-dj", "--compare-dj"), write_frozen_dj, compare_dj),
            (args.frozen, args.compare, ("--frozen", "--compare"), write_frozen, compare_ci)):
        if csvs:
            if not frozen:
                ap.error(f"{flags[1]} needs {flags[0]} (the table frozen before the run)")
            print("\n".join(compare(frozen, csvs)))
            return 0
        if frozen:
            write(frozen)
            return 0
    print("\n".join(report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
