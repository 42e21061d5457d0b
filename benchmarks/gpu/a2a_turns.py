"""Run cf: the all-to-all's p2p channels, frozen before a lease of two H200s.

The engine prices NCCL's all-to-all as its wire bytes at the bus rate (H0: ``hw.collectives``,
p2p Simple), 10-33% short at 2-512 MiB on every committed two-GPU lease (docs/gpu.md, "Run ar").
Run ar left two facts: a p2p channel moves 20.8 GB/s of a peer's part both ways with no pipeline
fill (one and two channels a peer: straight lines through the latency), and NCCL's 16 channels a
peer move 283-309 GB/s where 16 x 20.8 = 333. Candidates, each with what it gives here:

- **HT, turns**: a channel's send and receive take turns on one CTA's loads and stores
  (``nvlink.ring.channel_bandwidth``, 84 GB/s): a chunk (``NCCL_P2P_NVL_CHUNKSIZE``, 512 KiB) on
  NVLink at 84 / 2, then one out of the FIFO, local, at 84 / 2, as a ring's calls
  (``rdusim.sim.ring``: the channels share the link, start ``launch_skew`` apart). Two ways, the
  channels' sends coincide and the link idles in their local turns; one way, a channel only sends
  (the peer's channel only copies out), so the link fills.
- **HS, a shared budget**: send and receive run at once on the CTA's warps and share its 84 GB/s:
  both ways 84 / 4 a channel, no turns; one way the sender alone, 84 / 2 a channel; the channels at
  most the link (no contention below it).
- **HC, halves**: send and receive on half the warps each (v2.19-2.20 ``src/device/sendrecv.h``),
  each half 84 / 4: one way as slow as both ways. (Run ar's missing fill already speaks against it:
  a receiving half behind a sending one gives a chunk of fill.)
- **HU, the link shared unevenly** (run bv: 16 plain CTAs copy 314 GB/s one way, 305 both ways):
  listed for its signature only (no model).

Rows (``collective_ramp_diag.py``, case ``eager``: calls issued back to back between events; the
all-to-all also as graph rows, ``plain``): ``sendrecv`` (each rank its part S / 2 to the other,
the all-to-all without its self copy), ``send_oneway`` (rank 1 to rank 0), ``all_to_all``; NCCL's
defaults (``def``), one and 32 channels a peer (``p2p2``, ``p2p64``), and NCCL's launch without
clusters (``cga0``, exploratory: the models have no launch).

    PYTHONPATH=. python benchmarks/gpu/a2a_turns.py --frozen h200x2-20261130cf-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/a2a_turns.py --compare h200x2-20261130cf-predicted.txt <csv>...
    PYTHONPATH=. python benchmarks/gpu/a2a_turns.py --after <run cf's csv>...

``--after`` (explained after measurement, not adopted: docs/gpu.md, "Run cf"): turns at the
rates run cf's one channel gives (one way: the send turn; both ways: 1 / send + 1 / receive),
on run cf's rows, run ar's 128 KiB chunk (a variant it never saw) and every committed two- and
four-GPU all-to-all row NCCL runs as p2p Simple (each run's link fitted as ``rdusim fidelity
--gpu`` fits it). A committed row's launch and host are what the engine adds to its own collective
time; on stream rows, where the host's floor is not additive, that depends on the engine's
all-to-all, which is the p2p pipeline since runs ch and ci: run today, those rows differ from the
committed ``h200x2-20261130cf-after.txt`` (written before; turns' medians 2.1-10.2% against 2.4-10.2%).

Checks: ``h200x2-20261130cf-a2a-hypotheses.md`` (committed with the frozen table, before the run).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ROOT / "benchmarks/gpu"
MIB = 1 << 20
DOC = "hw_configs/h200.yaml"
CHUNK = 512 * 1024  # NCCL_P2P_NVL_CHUNKSIZE (src/init.cc; run ar's init log caps larger ones to it)
P2P_CHANNELS = 32  # p2pnChannels on one NVLink node (NCCL's INIT log, run ar)
BIG = (64, 128, 256, 512, 768, 1024)
#: variant -> (ops, sizes in MiB of S, p2p channels: NCCL_MIN/MAX_P2P_NCHANNELS)
VARIANTS = {
    "def": (("sendrecv", "send_oneway", "all_to_all"), BIG, P2P_CHANNELS),
    "p2p2": (("sendrecv", "send_oneway"), (8, 16, 32), 2),
    "p2p64": (("sendrecv", "send_oneway"), BIG, 64),
    "cga0": (("sendrecv", "send_oneway", "all_to_all"), BIG, P2P_CHANNELS),
}
MODELS = ("HT", "HS", "HC", "H0")


def channels_a_peer(part: float, p2p_channels: int, ranks: int = 2, chunk: int = CHUNK) -> int:
    """NCCL 2.28's channels for one peer's part: ``rdusim.hw.collectives.p2p_channels_a_peer``."""
    from rdusim.hw.collectives import p2p_channels_a_peer

    return p2p_channels_a_peer(part, ranks, p2p_channels, chunk)


def channel_chunks(part: float, channels: int, chunk: int = CHUNK) -> tuple[float, ...]:
    """A channel's chunks of a peer's ``part``: ``rdusim.hw.collectives.channel_chunks``."""
    from rdusim.hw.collectives import channel_chunks as chunks

    return chunks(part, channels, chunk)


def predict(op: str, size: int, p2p_channels: int) -> dict[str, float]:
    """Us a call under each model (module docstring), the document's fabric as committed."""
    from rdusim.hw import collectives as nccl
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.sim.ring import ring_transfer_s

    fabric = load_gpu_node(ROOT / DOC).gpu.fabric
    ring = fabric.ring
    latency = nccl.ALL_TO_ALL_LATENCY_US["Simple"] * 1e-6
    part = size / 2
    ch = channels_a_peer(part, p2p_channels)
    chunks = channel_chunks(part, ch)
    lanes = dataclasses.replace(ring, channels=ch)
    rate = ring.channel_bytes_per_s
    oneway = op == "send_oneway"
    calls = ((True, 2),) if oneway else ((True, 2), (False, 2))
    ht = latency + ring_transfer_s(nccl.RingPlan(lanes, chunks, calls))
    if oneway:  # the receiver copies the last chunk out after it lands
        ht += chunks[-1] * 2 / rate
    per_channel = rate / (2 if oneway else 4)
    hs = latency + part / min(ch * per_channel, ring.link_bytes_per_s)
    if oneway:
        hs += chunks[-1] * 2 / rate
    hc = latency + part / min(ch * rate / 4, ring.link_bytes_per_s) + chunks[0] * 4 / rate
    h0 = latency + part / fabric.bus_bytes_per_s
    return {"HT": ht * 1e6, "HS": hs * 1e6, "HC": hc * 1e6, "H0": h0 * 1e6}


def frozen_rows() -> list[dict]:
    rows = []
    for variant, (ops, sizes, p2p) in VARIANTS.items():
        for op in ops:
            for mib in sizes:
                pred = predict(op, mib * MIB, p2p)
                rows.append({"variant": variant, "op": op, "mib": mib,
                             "channels": channels_a_peer(mib * MIB / 2, p2p), **pred})
    return rows


def write_frozen(path: Path) -> None:
    with path.open("w") as fh:
        fh.write("# run cf, frozen before the lease (a2a_turns.py --frozen; hw_configs/h200.yaml as committed)\n")
        fh.write("variant,op,mib,channels_a_peer," + ",".join(f"{m}_us" for m in MODELS) + "\n")
        for r in frozen_rows():
            fh.write(f"{r['variant']},{r['op']},{r['mib']},{r['channels']},"
                     + ",".join(f"{r[m]:.1f}" for m in MODELS) + "\n")


def read_frozen(path: Path) -> dict[tuple[str, str, int], dict[str, float]]:
    out = {}
    with path.open() as fh:
        lines = [ln for ln in fh if not ln.startswith("#")]
    for r in csv.DictReader(lines):
        out[(r["variant"], r["op"], int(r["mib"]))] = {m: float(r[f"{m}_us"]) for m in MODELS}
    return out


def read_measured(paths: list[str]) -> dict[tuple[str, str, str, int], float]:
    out = {}
    for p in paths:
        with open(p, newline="") as fh:
            for r in csv.DictReader(fh):
                out[(r["variant"], r["case"], r["op"], int(r["bytes"]) // MIB)] = float(r["median_us"])
    return out


def marginal_rate(pts: dict[int, float], lo: int, hi: int) -> float:
    """GB/s of the peer's part (S / 2) between ``lo`` and ``hi`` MiB of S."""
    return (hi - lo) * MIB / 2 / ((pts[hi] - pts[lo]) * 1e-6) / 1e9


def _errors(frozen, pts: dict[int, float], variant: str, op: str, model: str) -> tuple[float, float]:
    """Median abs error and worst (signed) of ``model``'s frozen times on ``pts`` (MiB -> us)."""
    e = [frozen[(variant, op, mib)][model] / us - 1 for mib, us in sorted(pts.items())]
    return statistics.median(abs(x) for x in e), max(e, key=abs)


def checks(frozen, meas) -> list[str]:
    """The registered checks A-E (h200x2-20261130cf-a2a-hypotheses.md) on the eager rows."""

    def rows(variant: str, op: str, lo: int = 0, hi: int = 1 << 30) -> dict[int, float]:
        return {m: us for (v, c, o, m), us in meas.items() if (v, c, o) == (variant, "eager", op) and lo <= m <= hi}

    out = ["| check | measured | rule | HT | HS | HC |", "|---|---|---|---|---|---|"]
    one, both = rows("p2p2", "send_oneway"), rows("p2p2", "sendrecv")
    ratio = marginal_rate(one, min(one), max(one)) / marginal_rate(both, min(both), max(both))
    ht_hs = "yes" if ratio >= 1.7 else "no"
    out.append(f"| A. one channel: one way / both ways | {ratio:.2f} | HT, HS >= 1.7; HC <= 1.2 | {ht_hs} | {ht_hs} "
               f"| {'yes' if ratio <= 1.2 else 'no'} |")
    way = rows("def", "send_oneway", 128, 512)
    rate = marginal_rate(way, 128, 512)
    out.append(f"| B. 16 channels one way, 128-512 MiB | {rate:.1f} GB/s | HT, HS >= 350; HU 298-330; HC 316-350 "
               f"| {'yes' if rate >= 350 else 'no'} | {'yes' if rate >= 350 else 'no'} "
               f"| {'yes' if 316 <= rate <= 350 else 'no'} |")
    two = rows("def", "sendrecv", 64, 512)
    cells = []
    for model in ("HT", "HS", "HC"):
        median, worst = _errors(frozen, two, "def", "sendrecv", model)
        cells.append(f"{median * 100:.1f}% / {worst * 100:+.1f}% {'yes' if median <= 0.06 and abs(worst) <= 0.12 else 'no'}")
    out.append("| C. 16 channels both ways, 64-512 MiB | | median <= 6%, worst <= 12% | " + " | ".join(cells) + " |")
    a2a = rows("def", "all_to_all", 64, 512)
    diffs = [a2a[m] / two[m] - 1 for m in sorted(two) if m in a2a]
    within = sum(abs(d) <= 0.03 for d in diffs)
    out.append(f"| D. all-to-all over sendrecv, 64-512 MiB | {' '.join(f'{d * 100:+.1f}%' for d in diffs)} "
               f"| within 3% | {within} of {len(diffs)} | | |")
    wide = rows("p2p64", "sendrecv")
    median, worst = _errors(frozen, wide, "p2p64", "sendrecv", "HT")
    out.append(f"| E. 32 channels a peer both ways, 64 MiB-1 GiB | | HT median <= 6%, worst <= 12% "
               f"| {median * 100:.1f}% / {worst * 100:+.1f}% {'yes' if median <= 0.06 and abs(worst) <= 0.12 else 'no'} | | |")
    return out


def compare(frozen_path: Path, paths: list[str]) -> int:
    frozen = read_frozen(frozen_path)
    meas = read_measured(paths)
    print("| variant | case | op | MiB | measured us | " + " | ".join(MODELS) + " |")
    print("|---|---|---|---:|---:|" + "---:|" * len(MODELS))
    errs: dict[tuple[str, str, str], list[float]] = {}
    for (variant, case, op, mib), us in sorted(meas.items()):
        f = frozen.get((variant, op, mib))
        if f is None:
            continue
        cells = []
        for m in MODELS:
            e = f[m] / us - 1
            errs.setdefault((variant, op, m), []).append(e)
            cells.append(f"{f[m]:.1f} ({e * 100:+.1f}%)")
        print(f"| {variant} | {case} | {op} | {mib} | {us:.1f} | " + " | ".join(cells) + " |")
    print()
    print("| variant | op | " + " | ".join(f"{m} median / worst" for m in MODELS) + " |")
    print("|---|---|" + "---|" * len(MODELS))
    for variant, op in sorted({(v, o) for v, o, _ in errs}):
        cells = []
        for m in MODELS:
            e = errs[(variant, op, m)]
            worst = max(e, key=abs)
            cells.append(f"{statistics.median(abs(x) for x in e) * 100:.1f}% / {worst * 100:+.1f}%")
        print(f"| {variant} | {op} | " + " | ".join(cells) + " |")
    print()
    for variant in VARIANTS:
        for op in ("sendrecv", "send_oneway", "all_to_all"):
            pts = {mib: us for (v, c, o, mib), us in meas.items() if v == variant and c == "eager" and o == op}
            if len(pts) >= 2:
                lo, hi = (256, 1024) if 256 in pts and 1024 in pts else (min(pts), max(pts))
                print(f"{variant} {op}: marginal {marginal_rate(pts, lo, hi):.1f} GB/s of the part ({lo}-{hi} MiB of S)")
    print()
    print("\n".join(checks(frozen, meas)))
    return 0


def turns_us(size: float, ranks: int, ring, send: float, recv: float, p2p_channels: int = P2P_CHANNELS,
             chunk: int = CHUNK, oneway: bool = False) -> float:
    """Turns (HT's structure) with a send and a receive turn at their own rates (bytes/s): us a call,
    each of the ranks - 1 peers on its channels, all on the GPU's link (``ring``: ``RingChannels``)."""
    from rdusim.hw import collectives as nccl
    from rdusim.sim.ring import ring_transfer_s

    part = size / ranks
    ch = channels_a_peer(part, p2p_channels, ranks, chunk)
    chunks = channel_chunks(part, ch, chunk)
    rate = ring.channel_bytes_per_s
    calls = ((True, rate / send),) if oneway else ((True, rate / send), (False, rate / recv))
    lanes = dataclasses.replace(ring, channels=ch * (ranks - 1))
    t = nccl.ALL_TO_ALL_LATENCY_US["Simple"] * 1e-6 + ring_transfer_s(nccl.RingPlan(lanes, chunks, calls))
    return (t + (chunks[-1] / recv if oneway else 0.0)) * 1e6


def one_channel_rates(meas) -> tuple[float, float]:
    """(send, receive) bytes/s from run cf's one channel a peer: one way the send turn's rate; both
    ways 1 / (1 / send + 1 / receive), marginal rates over the sizes measured."""
    def pts(op: str) -> dict[int, float]:
        return {m: us for (v, c, o, m), us in meas.items() if (v, c, o) == ("p2p2", "eager", op)}
    one, both = pts("send_oneway"), pts("sendrecv")
    send = marginal_rate(one, min(one), max(one)) * 1e9
    both_rate = marginal_rate(both, min(both), max(both)) * 1e9
    return send, 1 / (1 / both_rate - 1 / send)


def committed_groups(model_us):
    """Every committed two- and four-GPU all-to-all group NCCL runs as p2p Simple, in the runs ``rdusim
    fidelity --gpu`` compares (each run's link fitted as there): (CSV, ranks, launch, the errors of
    ``model_us(size, ranks, ring)`` plus what the engine adds to its own collective time, H0's errors:
    the wire bytes at the bus rate plus the same)."""
    from rdusim.analysis.gpu.collectives import (
        collective_runs,
        compare_collective_rows,
        fitted_fabric,
    )
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.sim.ring import collective_time_s

    out = []
    for path in collective_runs(GPU_DIR):
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        gpu = load_gpu_node(ROOT / ("hw_configs/h200.yaml" if path.name.startswith("h200") else "hw_configs/h100.yaml")).gpu
        fabric, _ = fitted_fabric(gpu, rows)
        groups: dict[tuple[int, str], tuple[list[float], list[float]]] = {}
        for c in compare_collective_rows(rows, gpu, fabric):
            if c["op"] != "all_to_all" or c["cost"].protocol != "Simple" or c["ranks"] not in (2, 4):
                continue
            outside = c["pred"] - collective_time_s(c["cost"]) * 1e6  # what the engine adds to NCCL's time
            t = model_us(int(c["bytes"]), c["ranks"], fabric.ring) + outside
            new, old = groups.setdefault((c["ranks"], c["launch"]), ([], []))
            new.append(t / float(c["median_us"]) - 1)
            old.append((outside + c["cost"].time_s * 1e6) / float(c["median_us"]) - 1)
        out += [(path, ranks, launch, new, old) for (ranks, launch), (new, old) in sorted(groups.items())]
    return out


def after(paths: list[str]) -> int:
    from rdusim.analysis.gpu.collectives import (
        run_label,
    )
    from rdusim.hw.gpu import load_gpu_node

    meas = read_measured(paths)
    send, recv = one_channel_rates(meas)
    doc = load_gpu_node(ROOT / DOC).gpu
    print(f"one channel (run cf, p2p2): send turn {send / 1e9:.1f} GB/s, receive turn {recv / 1e9:.1f} GB/s")
    print()
    print("| rows | turns at these rates: median / worst | H0 (the bus rate, the engine before runs ch and ci) |")
    print("|---|---|---|")
    for variant, op, p2p in (("def", "sendrecv", 32), ("def", "all_to_all", 32), ("def", "send_oneway", 32),
                             ("p2p64", "sendrecv", 64), ("p2p64", "send_oneway", 64)):
        pts = {m: us for (v, c, o, m), us in meas.items() if (v, c, o) == (variant, "eager", op)}
        e = [turns_us(m * MIB, 2, doc.fabric.ring, send, recv, p2p, oneway=op == "send_oneway") / us - 1
             for m, us in sorted(pts.items())]
        h0 = [predict(op, m * MIB, p2p)["H0"] / us - 1 for m, us in sorted(pts.items())]
        print(f"| run cf {variant} {op} | {_stats(e)} ({' '.join(f'{x * 100:+.0f}' for x in e)}) | {_stats(h0)} |")
    ar = GPU_DIR / "h200x2-20261128ar-chunk128k.csv"
    with ar.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["op"] == "all_to_all"]
    e = [turns_us(int(r["bytes"]), 2, doc.fabric.ring, send, recv, chunk=128 * 1024) / float(r["median_us"]) - 1
         for r in rows]
    print(f"| run ar, 128 KiB chunk (held out) | {_stats(e)} ({' '.join(f'{x * 100:+.0f}' for x in e)}) | |")
    print()
    print("| committed run (all-to-all, p2p Simple) | GPUs | launch | rows | turns: median / worst | H0: median / worst |")
    print("|---|---:|---|---:|---|---|")
    for path, ranks, launch, new, old in committed_groups(
            lambda size, ranks, ring: turns_us(size, ranks, ring, send, recv)):
        print(f"| {run_label(path)} ({path.name}) | {ranks} | {launch} | {len(new)} | {_stats(new)} | {_stats(old)} |")
    return 0


def _stats(errors: list[float]) -> str:
    return f"{statistics.median(abs(x) for x in errors) * 100:.1f}% / {max(errors, key=abs) * 100:+.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--frozen", type=Path, metavar="OUT", help="write the frozen predictions")
    g.add_argument("--compare", type=Path, metavar="FROZEN", help="the frozen table against CSVs")
    g.add_argument("--after", action="store_true", help="turns at run cf's one-channel rates (not adopted)")
    ap.add_argument("csv", nargs="*")
    args = ap.parse_args(argv)
    if args.frozen:
        write_frozen(args.frozen)
        return 0
    if not args.csv:
        ap.error("--compare and --after need the run's CSVs")
    if args.after:
        return after(args.csv)
    return compare(args.compare, args.csv)


if __name__ == "__main__":
    sys.exit(main())
