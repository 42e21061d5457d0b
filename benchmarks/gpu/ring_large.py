"""Run cs: past 1 GiB, do a ring's channels fill the link? (frozen before the run)

On the seven committed two-GPU sweeps the three ring ops' wire rates from 256 MB to 1 GiB come to
one figure of loads and stores a second (``ring_bends.py --rates``: all-reduce 336-345 GB/s,
reduce-scatter 269-283, all-gather 274-285; run cr's NCCL from 512 MiB to 1 GiB 350, 291, 289,
still rising). The engine's channels (``rdusim.sim.ring``) start in step and drift apart as they
share the link; past 1 GiB their rate stops rising short of the link (a plateau: at the document's
369.2 GB/s about 350, 260 and 285), its channels a loop apart but bunched. Run cs measures past
the committed sizes, 256 MiB to 4 GiB, where a drift that goes on would fill the link and a rate
limit would not:

- ``--frozen``: the engine's marginal wire rates (between consecutive sizes) at 24 and 16 channels,
  with each call at its count (the engine) and at run co's per-call prices (``ring_calls.fit_prices``,
  not adopted), and the checks' thresholds; written to ``h200x2-20261130cs-large-predicted.txt``
  before the run.
- ``--verdict DEF CH16 EMUL``: the registered checks (``h200x2-20261130cs-large-hypotheses.md``) on
  NCCL's graph rows at its 24 channels and forced to 16 (``collective_ramp_diag.py``) and the
  protocol emulated (``ring_emul.py``, clusters of four).

    PYTHONPATH=. python benchmarks/gpu/ring_large.py --frozen
    PYTHONPATH=. python benchmarks/gpu/ring_large.py --verdict <def.csv> <ch16.csv> <emul.csv>
"""

from __future__ import annotations

import argparse
import sys
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp_diag import load  # noqa: E402  (beside this file)
from ring_bends import WIRE  # noqa: E402
from ring_calls import MIB  # noqa: E402
from ring_queue import LINK, SKEW, engine_times  # noqa: E402

OPS = ("all_reduce", "reduce_scatter", "all_gather")
CHANNELS = (24, 16)
SIZES = (256, 512, 1024, 2048, 3072, 4096)  # MiB
#: the rates the checks read (MiB to MiB): the committed sizes' last step and the new sizes' last
BEFORE, AFTER = (512, 1024), (2048, 4096)
#: the registered thresholds
LINK_FILLED = 330.0  # L: GB/s of wire
SAME = 0.05          # F, P, E: within 5%


def rate(pts: dict[int, float], op: str, lo: int, hi: int) -> float:
    """GB/s of wire between ``lo`` and ``hi`` MiB of ``pts`` ({MiB: us})."""
    return WIRE[op][0] * (hi - lo) * MIB / ((pts[hi] - pts[lo]) * 1e3)


def steps(pts: dict[int, float], op: str) -> list[tuple[int, int, float]]:
    """The marginal wire rate between each pair of consecutive sizes of ``pts``: (lo, hi, GB/s)."""
    sizes = sorted(pts)
    return [(lo, hi, rate(pts, op, lo, hi)) for lo, hi in pairwise(sizes)]


def _row(label: str, pts: dict[int, float], op: str) -> str:
    return f"| {label} | " + " | ".join(f"{r:.1f}" for _, _, r in steps(pts, op)) + " |"


def _header(first: str) -> list[str]:
    pairs = [f"{lo}-{hi}" for lo, hi in pairwise(SIZES)]
    return [f"| {first} | " + " | ".join(pairs) + " |", "|---|" + "---:|" * len(pairs)]


def frozen_table() -> list[str]:
    lines = [f"The engine's marginal wire rate (GB/s) between sizes (MiB), two GPUs, link {LINK / 1e9:.1f} GB/s, "
             f"launch skew {SKEW * 1e6:.1f} us; each call at its count (the engine) or at run co's per-call prices", ""]
    for channels in CHANNELS:
        lines += [f"{channels} channels:", "", *_header("op, calls at")]
        for op in OPS:
            for pricing in ("count", "prices"):
                lines.append(_row(f"{op}, {pricing}", engine_times(op, channels, SIZES, pricing), op))
        lines.append("")
    lines += [f"Checks read NCCL's rate from {AFTER[0]} to {AFTER[1]} MiB (and from {BEFORE[0]} to {BEFORE[1]}): "
              f"L >= {LINK_FILLED:.0f} GB/s for every op; F, P, E within {100 * SAME:.0f}%"]
    return lines


def measured(paths: list[str], variant: str) -> dict[str, dict[int, float]]:
    """{op: {MiB: us}} of the ``plain`` rows of ``variant`` in ``paths``."""
    return {op: pts for (v, case, op), pts in load(paths).items() if v == variant and case == "plain" and op in OPS}


def _near(a: float, b: float) -> bool:
    return abs(a / b - 1) <= SAME


def verdict(def_csv: str, ch16_csv: str, emul_csv: str) -> list[str]:
    nccl = {24: measured([def_csv], "def"), 16: measured([ch16_csv], "ch16")}
    emul = {c: measured([emul_csv], f"cl4-ch{c}") for c in CHANNELS}
    lines = ["Marginal wire rate (GB/s) between sizes (MiB): NCCL, its protocol emulated (clusters of four) "
             "and the engine (count; run co's per-call prices)", ""]
    for channels in CHANNELS:
        lines += [f"{channels} channels:", "", *_header("op, source")]
        for op in OPS:
            lines += [_row(f"{op}, NCCL", nccl[channels][op], op), _row(f"{op}, emulated", emul[channels][op], op),
                      _row(f"{op}, engine (count)", engine_times(op, channels, SIZES, "count"), op),
                      _row(f"{op}, engine (prices)", engine_times(op, channels, SIZES, "prices"), op)]
        lines.append("")
    at = {op: rate(nccl[24][op], op, *AFTER) for op in OPS}
    before = {op: rate(nccl[24][op], op, *BEFORE) for op in OPS}
    lines += [f"24 channels, {AFTER[0]}-{AFTER[1]} MiB: " + ", ".join(
        f"{op} {at[op]:.1f} GB/s of wire ({at[op] * WIRE[op][1] / 1e3:.2f} TB/s of the count's loads and stores)"
        for op in OPS), ""]
    checks = {
        "L, the channels fill the link once apart": all(at[op] >= LINK_FILLED for op in OPS),
        "F, a fixed rate past 1 GiB": all(_near(at[op], before[op]) for op in OPS),
        "P, the engine with run co's per-call prices": all(
            _near(at[op], rate(engine_times(op, 24, SIZES, "prices"), op, *AFTER)) for op in OPS),
        "C, the engine as it is (the count)": all(
            _near(at[op], rate(engine_times(op, 24, SIZES, "count"), op, *AFTER)) for op in OPS),
        "E, the protocol alone as NCCL": all(_near(rate(emul[24][op], op, *AFTER), at[op]) for op in OPS),
    }
    return lines + [f"{name}: {'pass' if ok else 'fail'}" for name, ok in checks.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", action="store_true", help="the engine's rates and the checks' thresholds")
    ap.add_argument("--verdict", nargs=3, metavar=("DEF", "CH16", "EMUL"), help="the registered checks")
    args = ap.parse_args(argv)
    if args.verdict:
        print("\n".join(verdict(*args.verdict)))
    elif args.frozen:
        print("\n".join(frozen_table()))
    else:
        ap.error("one of --frozen, --verdict")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
