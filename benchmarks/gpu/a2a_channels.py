"""Run ch: the all-to-all's p2p channels by their count, a line per count and the registered checks.

Reads run ch's CSVs (``a2a_run_ch.sh``: ``collective_ramp_diag.py`` eager rows of ``sendrecv``, both
ways, and ``send_oneway``, one way, at 1-32 p2p channels a peer, four sizes each), fits
t = a + (S / 2) / r to each op's rows at each count (least squares in S), and prints the lines, each
row's residual and the checks registered before the run (``h200x2-20261130ch-a2a-hypotheses.md``).

    PYTHONPATH=. python benchmarks/gpu/a2a_channels.py benchmarks/gpu/h200x2-20261130ch-p2p*-eager.csv
    PYTHONPATH=. python benchmarks/gpu/a2a_channels.py --percall benchmarks/gpu/h200x2-20261130cj-p2p*.csv.gz
"""

from __future__ import annotations

import argparse
import csv
import gzip
import re
import sys
from pathlib import Path

MIB = 1 << 20
OPS = ("sendrecv", "send_oneway")


def channels_of(path: Path) -> int:
    """Channels a peer of a run ch or cj file: its p2p channels (``p2p<N>``) over the two ranks."""
    match = re.search(r"-p2p(\d+)[-.]", path.name)
    if not match:
        raise SystemExit(f"{path}: not a run ch or cj file (no -p2p<N>- or -p2p<N>. in its name)")
    return int(match.group(1)) // 2


def line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares a (us) and r (GB/s) of t = a + part / r over (part bytes, t us) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx  # us a byte
    return my - slope * mx, 1e-3 / slope


def read(paths: list[Path]) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """(op, channels a peer) -> [(the peer's part S / 2 in bytes, median us)]."""
    out: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for path in paths:
        ch = channels_of(path)
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row["op"] in OPS:
                    out.setdefault((row["op"], ch), []).append((int(row["bytes"]) / 2, float(row["median_us"])))
    return out


def report(paths: list[Path]) -> str:
    data = read(paths)
    fits = {key: line(sorted(points)) for key, points in data.items() if len(points) >= 2}
    lines = ["| op | channels a peer | a (us) | r (GB/s) | r a channel | residuals (us, by size) |",
             "|---|---:|---:|---:|---:|---|"]
    for (op, ch), (a, r) in sorted(fits.items()):
        res = " ".join(f"{t - (a + x / r * 1e-3):+.1f}" for x, t in sorted(data[(op, ch)]))
        lines.append(f"| {op} | {ch} | {a:.1f} | {r:.1f} | {r / ch:.2f} | {res} |")
    both = {ch: fits[("sendrecv", ch)] for op, ch in fits if op == "sendrecv"}
    one = {ch: fits[("send_oneway", ch)] for op, ch in fits if op == "send_oneway"}
    lines.append("")
    if 1 in both:
        r1 = both[1][1]
        if shares := [(both[c][1] / c / r1 - 1, c) for c in (2, 4, 8) if c in both]:
            worst = min(shares)
            lines.append(f"A (HI: r / channels at 2-8 within 5% of 1 channel's {r1:.1f}): worst {worst[0]:+.1%} "
                         f"at {worst[1]} -> {'pass' if worst[0] >= -0.05 else 'fail'}")
        if 16 in both and 32 in both:
            bound = 0.97 * min(16 * r1, both[32][1])
            lines.append(f"B (HL: r(16) < 0.97 x min(16 r(1), r(32)) = {bound:.1f}): r(16) {both[16][1]:.1f} -> "
                         f"{'pass' if both[16][1] < bound else 'fail'}")
    if 1 in both and 16 in both and 32 in both and 1 in one and 16 in one:
        g16, g32, g1 = both[16][0] - both[1][0], both[32][0] - both[1][0], one[16][0] - one[1][0]
        ok = g16 >= 10 and g32 >= 10 and g1 < 5
        lines.append(f"C (HK: both ways a(16) - a(1) {g16:+.1f}, a(32) - a(1) {g32:+.1f} us, >= 10; one way "
                     f"a(16) - a(1) {g1:+.1f} us, < 5) -> {'pass' if ok else 'fail'}")
    if one:
        lines.append("D (one way, r a channel by count): " + ", ".join(
            f"{ch}: {one[ch][1] / ch:.1f}" for ch in sorted(one)))
    return "\n".join(lines)


def percall(paths: list[Path]) -> str:
    """Run cj (``a2a_run_cj.sh``): every all-to-all call timed alone (``collective_percall.py``) at 1, 4
    and 16 p2p channels a peer, the same chunks a channel; per count and size the median, the robust
    spread (IQR / 1.349) and the median's excess over the engine's pipeline (``rdusim.sim.p2p``: the
    GPU document's ``nvlink.p2p`` and link, NCCL's latency), and check S registered before the run
    (``h200x2-20261130cj-a2a-hypotheses.md``)."""
    import statistics

    from rdusim.hw.collectives import (
        ALL_TO_ALL_LATENCY_US,
        P2pPlan,
        channel_chunks,
        p2p_channels_a_peer,
    )
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.sim.p2p import p2p_transfer_s

    fabric = load_gpu_node(Path(__file__).resolve().parents[2] / "hw_configs/h200.yaml").gpu.fabric
    calls: dict[tuple[int, int], list[float]] = {}
    for path in paths:
        ch = channels_of(path)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", newline="") as fh:
            for row in csv.DictReader(fh):
                if row["op"] == "all_to_all":
                    calls.setdefault((ch, int(row["bytes"])), []).append(float(row["us"]))
    lines = ["| channels a peer | MiB | calls | median us | spread us | pipeline us | excess us |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    by_ch: dict[int, list[tuple[float, float]]] = {}
    for (ch, size), us in sorted(calls.items()):
        q = statistics.quantiles(us, n=4)
        spread = (q[2] - q[0]) / 1.349
        part = size / 2
        assert p2p_channels_a_peer(part, 2, 2 * ch) == ch
        plan = P2pPlan(fabric.p2p, fabric.ring, ch, channel_chunks(part, ch))
        model = ALL_TO_ALL_LATENCY_US["Simple"] + p2p_transfer_s(plan) * 1e6
        med = statistics.median(us)
        by_ch.setdefault(ch, []).append((spread, med - model))
        lines.append(f"| {ch} | {size // MIB} | {len(us)} | {med:.1f} | {spread:.2f} | {model:.1f} | {med - model:+.1f} |")
    if {1, 4, 16} <= by_ch.keys():
        sp = {ch: statistics.median(s for s, _ in v) for ch, v in by_ch.items()}
        ex = {ch: statistics.median(e for _, e in v) for ch, v in by_ch.items()}
        ok = sp[16] >= 2 * sp[1] and sp[1] <= sp[4] <= sp[16] and ex[16] >= 15 and ex[1] <= 5
        lines += ["", f"S (a call exposes its slowest channel: spread at 16 >= 2 x at 1, at 4 between; excess at 16 "
                      f">= 15 us, at 1 <= 5 us): spread {sp[1]:.2f} / {sp[4]:.2f} / {sp[16]:.2f} us, excess "
                      f"{ex[1]:+.1f} / {ex[4]:+.1f} / {ex[16]:+.1f} us at 1 / 4 / 16 -> {'pass' if ok else 'fail'}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", type=Path, help="run ch's -p2p<N>-eager.csv files (run cj's with --percall)")
    ap.add_argument("--percall", action="store_true", help="run cj's calls timed one by one (collective_percall.py)")
    args = ap.parse_args(argv)
    missing = [p for p in args.csv if not p.is_file()]
    if missing:
        print(f"a2a_channels.py: no such file: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    print(percall(args.csv) if args.percall else report(args.csv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
