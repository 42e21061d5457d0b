"""Run au's reader: the SM clock at the end of each TP2 prefill row against the frozen controllers.

Reads ``clock_run_au.sh``'s files (``<prefix>-70b-run.log``, ``-8b-run.log``: every output line
stamped with the host's epoch seconds; ``-clock.csv.gz``: nvidia-smi samples every 50 ms) and
prints, per row and GPU, the median ``clocks.sm`` of the samples in the last quarter of the row's
span (from the previous stamped line to the row's own), as a fraction of 1980 MHz, beside the
frozen table ``<prefix>-clock-predicted.md``.

    python benchmarks/gpu/clock_run_au_read.py [PREFIX]
"""

from __future__ import annotations

import csv
import datetime
import gzip
import re
import statistics
import sys
from pathlib import Path

FULL_MHZ = 1980.0  # hw_configs/h200.yaml clock (D.1, H100 SXM5 boost; same die)
ROW = re.compile(r"^(?P<t>\d+\.\d+) prediction\s+(?P<name>\S+)\s+(?P<us>[\d.]+) us")


def samples(path: Path) -> list[tuple[float, int, float, float]]:
    """(epoch s, GPU, MHz, W) per nvidia-smi sample; its timestamps are the device host's UTC."""
    out = []
    with gzip.open(path, "rt") as f:
        for r in list(csv.reader(f))[1:]:
            t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
            out.append((t.replace(tzinfo=datetime.UTC).timestamp(), int(r[1]), float(r[2]), float(r[3])))
    return out


def spans(log: Path) -> list[tuple[str, float, float, float]]:
    """(row, start, end, measured us) per row: a row spans from the previous stamped line to its own."""
    out, last = [], None
    for line in log.read_text().splitlines():
        m = ROW.match(line)
        if m and last is not None:
            out.append((m["name"], last, float(m["t"]), float(m["us"])))
        last = float(line.split(" ", 1)[0])
    return out


def frozen(path: Path) -> dict[str, tuple[float, float]]:
    """Row -> (SmClock, SlewSmClock) clock fractions of the frozen table."""
    out = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| tp2_"):
            out[cells[0].split()[0]] = (float(cells[1]), float(cells[3]))
    return out


def main(argv: list[str]) -> int:
    prefix = Path(argv[0] if argv else "benchmarks/gpu/h200x2-20261128au")
    clock = samples(Path(f"{prefix}-clock.csv.gz"))
    pred = frozen(Path(f"{prefix}-clock-predicted.md"))
    print(f"# {prefix.name}: clocks.sm at the end of each row (median of the last quarter), fraction of {FULL_MHZ:.0f} MHz")
    print("| row | step (us) | GPU 0 | GPU 1 | GPU 0 power (W) | SmClock (frozen) | SlewSmClock (frozen) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for part in ("70b", "8b"):
        for name, a, b, us in spans(Path(f"{prefix}-{part}-run.log")):
            end = [s for s in clock if a + 0.75 * (b - a) <= s[0] <= b]
            f = [statistics.median(s[2] for s in end if s[1] == g) / FULL_MHZ for g in (0, 1)]
            w = statistics.median(s[3] for s in end if s[1] == 0)
            sm, slew = pred[name]
            print(f"| {name} | {us:.0f} | {f[0]:.3f} | {f[1]:.3f} | {w:.0f} | {sm:.3f} ({sm - f[0]:+.3f}) "
                  f"| {slew:.3f} ({slew - f[0]:+.3f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
