"""Run ar (P12, a2a): the all-to-all's p2p pipeline fill and channels a peer, against the frozen table.

``python benchmarks/gpu/collectives_ar.py [DIR]`` (the standard library only) reads run ar's CSVs
(``h200x2-20261128ar-<variant>.csv``, written by ``collective_ramp_diag.py``) under DIR
(benchmarks/gpu by default) and the frozen ``h200x2-20261128ar-predicted.md``, and prints:

- every row against the frozen predictions (HA: the candidate model with the fill; H0: without;
  HA': the fill at one channel's own rate), signed error;
- each variant against this lease's default rows (the decision rules of
  ``h200x2-20261128ar-a2a-hypotheses.md`` compare these ratios, so lease drift cancels);
- each variant's marginal rate between neighbouring sizes (the all-to-all's peer bytes S/2, the
  all-reduce's wire bytes S, over the added time), GB/s;
- a straight line t = a + b x (S/2) through the one- and two-channel rows (p2p2, p2p4) and one ring
  channel's rate (ch1): the channel's rate 1/b and the intercept a, whose part above the 12 us
  latency is the fill.
"""

from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

PREFIX = "h200x2-20261128ar-"
MIB = 1 << 20
LATENCY_US = 11.8  # the model's Simple p2p latency (one ring step, tuning.cc)


def load(directory: Path) -> dict[tuple[str, str, int], float]:
    out = {}
    for path in sorted(directory.glob(PREFIX + "*.csv")):
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                if r["case"] == "plain":
                    out[r["variant"], r["op"], int(r["bytes"]) // MIB] = float(r["median_us"])
    return out


def frozen(directory: Path) -> dict[tuple[str, str, int], tuple[float, float, float]]:
    out = {}
    for line in (directory / (PREFIX + "predicted.md")).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[2].isdigit():
            out[cells[0], cells[1], int(cells[2])] = (float(cells[5]), float(cells[6]), float(cells[7]))
    return out


def line_fit(pts: list[tuple[float, float]]) -> tuple[float, float]:
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    directory = Path(args[0]) if args else Path(__file__).resolve().parent
    meas, pred = load(directory), frozen(directory)
    if not meas:
        print(f"no {PREFIX}*.csv under {directory}")
        return 1
    print("| variant | op | MiB | measured (us) | HA (us) | err | H0 (us) | err | HA' (us) | err | vs default |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key in sorted(meas, key=lambda k: (k[0], k[1], k[2])):
        v, op, mib = key
        t = meas[key]
        ha, h0, hap = pred.get(key, (float("nan"),) * 3)
        base = meas.get(("default", op, mib))
        rel = f"{(t / base - 1) * 100:+.1f}%" if base and v != "default" else "-"
        print(f"| {v} | {op} | {mib} | {t:.1f} | {ha:.1f} | {(ha / t - 1) * 100:+.0f}% | {h0:.1f} | "
              f"{(h0 / t - 1) * 100:+.0f}% | {hap:.1f} | {(hap / t - 1) * 100:+.0f}% | {rel} |")
    print()
    print("marginal rate between neighbouring sizes (GB/s; all-to-all: S/2, all-reduce: S):")
    for v, op in sorted({(k[0], k[1]) for k in meas}):
        sizes = sorted(m for (vv, o, m) in meas if (vv, o) == (v, op))
        per = 2 if op == "all_to_all" else 1
        rates = [f"{a}-{b}: {(b - a) * MIB / per / (meas[v, op, b] - meas[v, op, a]) / 1e3:.0f}"
                 for a, b in zip(sizes, sizes[1:], strict=False) if b >= 16]
        print(f"  {v} {op}: " + ", ".join(rates))
    print()
    for v, ranks_peer in (("p2p2", 2), ("p2p4", 2)):
        pts = [(mib * MIB / ranks_peer / 1e3, t) for (vv, op, mib), t in meas.items() if vv == v and mib >= 2]
        if len(pts) >= 2:
            a, b = line_fit(sorted(pts))
            print(f"{v}: t = {a:.1f} us + S/2 / {1 / b:.1f} GB/s (sizes 2-32 MiB); intercept - {LATENCY_US} us = "
                  f"{a - LATENCY_US:.1f} us; one 512 KiB chunk at that rate: {524288 * b / 1e3:.1f} us")
    pts = [(mib * MIB / 1e3, t) for (v, op, mib), t in meas.items() if v == "ch1"]
    if len(pts) >= 2:
        a, b = line_fit(sorted(pts))
        print(f"ch1 (one ring channel, all-reduce): {1 / b:.1f} GB/s of S, intercept {a:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
