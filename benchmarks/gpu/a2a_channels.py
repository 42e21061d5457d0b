"""Runs ch and ck: the all-to-all's p2p channels by their count (and NCCL's launch), a line each and the
registered checks.

Reads run ch's CSVs (``a2a_run_ch.sh``: ``collective_ramp_diag.py`` eager rows of ``sendrecv``, both
ways, and ``send_oneway``, one way, at 1-32 p2p channels a peer, four sizes each), fits
t = a + (S / 2) / r to each op's rows at each count (least squares in S), and prints the lines, each
row's residual and the checks registered before the run (``h200x2-20261130ch-a2a-hypotheses.md``).

    PYTHONPATH=. python benchmarks/gpu/a2a_channels.py benchmarks/gpu/h200x2-20261130ch-p2p*-eager.csv
    PYTHONPATH=. python benchmarks/gpu/a2a_channels.py --percall benchmarks/gpu/h200x2-20261130cj-p2p*.csv.gz
    PYTHONPATH=. python benchmarks/gpu/a2a_channels.py --variants benchmarks/gpu/h200x2-20261130ck-*-eager.csv

``--variants`` (run ck, ``a2a_run_ck.sh``): the same rows under each CTA cluster size of NCCL's launch and
with P2P read, files ``<run>-<variant>-p2p<N>-eager.csv``; each line fitted to the three largest of its four
sizes (the longest calls: run ch's 16 a peer had its smallest disturbed, 313 us against run cf's 150), the
four-size fit beside it, and the checks registered before the run
(``h200x2-20261130ck-a2a-hypotheses.md``).
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


def variant_of(path: Path) -> str:
    """The variant of a run ck file: what sits between the run's prefix and ``-p2p<N>``."""
    match = re.search(r"-20\d{6}[a-z]+-(.+)-p2p\d+-", path.name)
    if not match:
        raise SystemExit(f"{path}: not a run ck file (<run>-<variant>-p2p<N>-eager.csv)")
    return match.group(1)


def variants(paths: list[Path]) -> str:
    """Run ck: each variant's line per op and channels a peer, and the registered checks."""
    data: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for path in paths:
        ch, var = channels_of(path), variant_of(path)
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row["op"] in OPS:
                    data.setdefault((var, row["op"], ch), []).append((int(row["bytes"]) / 2, float(row["median_us"])))
    fits = {key: line(sorted(pts)[-3:]) for key, pts in data.items() if len(pts) >= 2}
    lines = ["| variant | op | channels a peer | a (us) | r (GB/s) | r a channel | r, four sizes | residuals (us, by size) |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for (var, op, ch), (a, r) in sorted(fits.items()):
        pts = sorted(data[(var, op, ch)])
        res = " ".join(f"{t - (a + x / r * 1e-3):+.1f}" for x, t in pts)
        lines.append(f"| {var} | {op} | {ch} | {a:.1f} | {r:.1f} | {r / ch:.2f} | {line(pts)[1]:.1f} | {res} |")

    def rate(var: str, ch: int, op: str = "sendrecv") -> float | None:
        fit = fits.get((var, op, ch))
        return fit[1] if fit else None

    lines.append("")
    checks = []
    r16, r8 = {v: rate(v, 16) for v in CK_CGA}, {v: rate(v, 8) for v in CK_CGA}
    if all(r16.values()) and all(r8.values()):
        base16, base8 = r16["cga4"], r8["cga4"]
        far16 = max(("cga0", "cga1", "cga2", "cga8"), key=lambda v: abs(r16[v] / base16 - 1))
        move16 = r16[far16] / base16 - 1
        move8 = max(abs(r8[v] / base8 - 1) for v in ("cga0", "cga8"))
        best = max(r16.values())
        checks += [
            f"G1 (HG: a cluster size moves 16 a peer's rate >= 5% from clusters of 4's {base16:.1f}): largest move "
            f"{move16:+.1%} ({far16}) -> {'pass' if abs(move16) >= 0.05 else 'fail'}",
            f"G2 (control: 8 a peer under clusters of 0 and 8 within 3% of 4's {base8:.1f}): largest move {move8:.1%} -> "
            f"{'pass' if move8 <= 0.03 else 'fail'}",
            f"G3 (HG, strong: some cluster size gives 16 a peer >= {CK_R16_FULL:.0f} GB/s, 16 x run ch's one channel "
            f"within 3%): best {best:.1f} -> {'pass' if best >= CK_R16_FULL else 'fail'}",
        ]
        rd = rate("def", 16)
        if rd:
            checks.append(f"N (NCCL's default is clusters of 4: 16 a peer within 2%): def {rd:.1f} against cga4 {base16:.1f} "
                          f"({rd / base16 - 1:+.1%}) -> {'pass' if abs(rd / base16 - 1) <= 0.02 else 'fail'}")
    rr16, rr8, rw8 = rate("read", 16), rate("read", 8), rate("cga4", 8)
    if rr16 and rr8 and rw8:
        checks += [
            f"R1 (HR: read, 16 a peer's channel >= 0.97 x 8 a peer's): {rr16 / 16:.2f} against {rr8 / 8:.2f} "
            f"({rr16 / 2 / rr8 - 1:+.1%}) -> {'pass' if rr16 / 16 >= 0.97 * rr8 / 8 else 'fail'}",
            f"R2 (read at 8 a peer within 5% of write's {rw8:.1f}): {rr8:.1f} ({rr8 / rw8 - 1:+.1%}) -> "
            f"{'pass' if abs(rr8 / rw8 - 1) <= 0.05 else 'fail'}",
        ]
    return "\n".join(lines + checks)


#: run ck's cluster-size variants (``NCCL_CGA_CLUSTER_SIZE``; sm90's default is 4)
CK_CGA = ("cga0", "cga1", "cga2", "cga4", "cga8")
#: 16 channels at run ch's one-channel rate both ways (21.09 GB/s), less 3%
CK_R16_FULL = 0.97 * 16 * 21.09


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
    ap.add_argument("--variants", action="store_true", help="run ck's files, by NCCL launch variant")
    args = ap.parse_args(argv)
    missing = [p for p in args.csv if not p.is_file()]
    if missing:
        print(f"a2a_channels.py: no such file: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    print(percall(args.csv) if args.percall else variants(args.csv) if args.variants else report(args.csv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
