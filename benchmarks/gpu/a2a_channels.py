"""Run ch: the all-to-all's p2p channels by their count, a line per count and the registered checks.

Reads run ch's CSVs (``a2a_run_ch.sh``: ``collective_ramp_diag.py`` eager rows of ``sendrecv``, both
ways, and ``send_oneway``, one way, at 1-32 p2p channels a peer, four sizes each), fits
t = a + (S / 2) / r to each op's rows at each count (least squares in S), and prints the lines, each
row's residual and the checks registered before the run (``h200x2-20261130ch-a2a-hypotheses.md``).

    PYTHONPATH=. python benchmarks/gpu/a2a_channels.py benchmarks/gpu/h200x2-20261130ch-p2p*-eager.csv
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

MIB = 1 << 20
OPS = ("sendrecv", "send_oneway")


def channels_of(path: Path) -> int:
    """Channels a peer of a run ch file: its p2p channels (``p2p<N>``) over the two ranks."""
    match = re.search(r"-p2p(\d+)-", path.name)
    if not match:
        raise SystemExit(f"{path}: not a run ch file (no -p2p<N>- in its name)")
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", type=Path, help="run ch's -p2p<N>-eager.csv files")
    args = ap.parse_args(argv)
    missing = [p for p in args.csv if not p.is_file()]
    if missing:
        print(f"a2a_channels.py: no such file: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    print(report(args.csv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
