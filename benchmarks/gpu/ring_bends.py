"""Run cr: the bends by op, NCCL's and its protocol's alone (frozen before the run).

Run cq's curves bend from twelve ring channels (``ring_queue.py --shape``): at 256 MiB the time runs
above the line through 64 MiB and 1 GiB. The engine bends where NCCL does but, by op, not as deep
(the reduce-scatter and the all-gather a half to a third of run cq's at 16-24 channels). Run cr
measures on one lease NCCL's three ops at 24 and 16 channels beside ``ring_emul.py``'s emulation of
the same protocol (clusters of four, as NCCL launches; its stamps of every slice), and this script
prints the bends, the emulation's all-local shares (every channel in its local step at once) and
the registered verdicts (``h200x2-20261130cr-bends-hypotheses.md``):

    PYTHONPATH=. python benchmarks/gpu/ring_bends.py --verdict <emul.csv> <def.csv> <ch16.csv> <stamps.csv.gz>

After the run, explained after measurement: ``--analyse <emul.csv> <def.csv> <stamps.csv.gz>`` sets the
emulation's channels beside the engine's (``engine_stamps``: the engine's channels stamped as the
emulation stamps its slices) and the three ops' times at 24 channels; ``--rates <collectives.py CSVs>``
each op's wire rate from 256 MB up and the count's loads and stores a second it takes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp_diag import load  # noqa: E402  (beside this file)
from ring_calls import CHANNEL_OPS_PER_S, MIB, hypothesis_cost, ring_calls  # noqa: E402
from ring_emul import all_local_share, load_stamps, loop_slices, phase_spread, stamp_variant  # noqa: E402
from ring_queue import LINK, NO_FORM, SKEW, engine_times, loop_calls, off_line, transfer_s  # noqa: E402

OPS = ("all_reduce", "reduce_scatter", "all_gather")
CHANNELS = (24, 16)
AT = 256  # MiB: where a bend is read
#: the registered bounds
SAME_LEASE_SLACK, AG_LEAST = 5.0, 12.0  # R: us
MATCH_SHARE, MATCH_FLOOR = 0.4, 8.0      # E: within 40% or 8 us, the larger


def bends(emul_csv: str, nccl_csvs: dict[int, str]) -> dict[tuple[str, str, int], float]:
    """{(source, op, channels): the bend at ``AT`` MiB, us}: source ``nccl``, ``emul`` or ``engine``."""
    out = {}
    emul = load([emul_csv])
    for channels, path in nccl_csvs.items():
        nccl = load([path])
        for (_, case, op), pts in nccl.items():
            if case == "plain" and op in OPS:
                out["nccl", op, channels] = off_line(pts)[AT]
                out["engine", op, channels] = off_line(engine_times(op, channels, tuple(sorted(pts))))[AT]
    for (variant, case, op), pts in emul.items():
        if case == "plain" and op in OPS and variant.startswith("cl4-ch"):
            out["emul", op, int(variant.removeprefix("cl4-ch"))] = off_line(pts)[AT]
    return out


def shares(stamps_csv: str) -> dict[tuple[str, int, int], float]:
    """{(op, channels, MiB): the emulation's all-local share} of its stamped rows (clusters of four)."""
    out = {}
    for (label, channels, mib), st in load_stamps(stamps_csv).items():
        op = next((o for o in OPS if stamp_variant("cl4", o) == label), None)
        if op is not None:
            out[op, channels, mib] = all_local_share(st, loop_slices(label))
    return out


def engine_stamps(op: str, channels: int, mib: int) -> list[list[float]]:
    """The engine's channels as the emulation's stamps: per channel two stamps a primitive call (its
    midpoint and its end, ns from the start), the engine's channels as ``rdusim.sim.ring`` runs them
    (the count, the document's link and launch skew: ``ring_queue.transfer_s`` with no form)."""
    from rdusim.hw import collectives as nccl

    ring = nccl.RingChannels(channels, CHANNEL_OPS_PER_S, LINK, SKEW)
    seen: list[list[tuple[float, float]]] = [[] for _ in range(channels)]
    transfer_s(ring, nccl.ring_loop_chunks(op, mib * MIB, 2, channels),
               loop_calls(op, 2, hypothesis_cost("count", 0.0)), NO_FORM, seen)
    return [[t for began, end in calls for t in (1e9 * (began + end) / 2, 1e9 * end)] for calls in seen]


def engine_shares(ops=OPS, channels=CHANNELS, mib: int = AT) -> dict[tuple[str, int], float]:
    """{(op, channels): the engine's all-local share at ``mib``} (``engine_stamps``)."""
    return {(op, c): all_local_share(engine_stamps(op, c, mib), 2 * len(ring_calls(op, 2)))
            for op in ops for c in channels}


def verdict(emul_csv: str, def_csv: str, ch16_csv: str, stamps_csv: str) -> list[str]:
    b = bends(emul_csv, {24: def_csv, 16: ch16_csv})
    sh = shares(stamps_csv)
    lines = [f"Bend at {AT} MiB (us above the line through 64 and 1024 MiB): NCCL / emulated / the engine; "
             f"the emulation's all-local share at {AT} MiB",
             "| op | channels | NCCL | emulated | engine | all-local share |", "|---|---:|---:|---:|---:|---:|"]
    for op in OPS:
        for c in CHANNELS:
            share = sh.get((op, c, AT))
            lines.append(f"| {op} | {c} | {b['nccl', op, c]:+.0f} | {b['emul', op, c]:+.0f} | "
                         f"{b['engine', op, c]:+.0f} | {'-' if share is None else f'{share:.3f}'} |")
    n = {op: b["nccl", op, 24] for op in OPS}
    e = {op: b["emul", op, 24] for op in OPS}
    r = n["reduce_scatter"] >= n["all_reduce"] - SAME_LEASE_SLACK and n["all_gather"] >= AG_LEAST
    ok_e = all(abs(e[op] - n[op]) <= max(MATCH_SHARE * abs(n[op]), MATCH_FLOOR) for op in OPS)
    deepest = max(OPS, key=e.__getitem__)
    s = max(OPS, key=lambda op: sh[op, 24, AT]) == deepest
    return lines + [
        "",
        f"R, run cq's bends hold on this lease: {'pass' if r else 'fail'}",
        f"E, NCCL's protocol alone bends as NCCL does: {'pass' if ok_e else 'fail'}",
        f"S, a deeper bend is a longer time in step (deepest emulated: {deepest}): {'pass' if s else 'fail'}",
    ]


def analyse(emul_csv: str, def_csv: str, stamps_csv: str) -> list[str]:
    """After the run (explained after measurement): the emulation's channels against the engine's, by
    op, channels and size (the all-local share, the spread of the loops' ends at 1 GiB), and the 24
    channels' times, NCCL / emulated / the engine's ring transfer (NCCL's latency and the launch not
    in it)."""
    emul_stamps = load_stamps(stamps_csv)
    emul_shares = shares(stamps_csv)
    lines = ["All channels in their local step at once, share of the call: emulated / the engine",
             "| op | channels | 64 MiB | 256 MiB | 1024 MiB | spread of the loops' ends at 1 GiB (us): emulated; the engine |",
             "|---|---:|---:|---:|---:|---|"]
    for op in OPS:
        per_loop = 2 * len(ring_calls(op, 2))
        for c in CHANNELS:
            cells = [f"{emul_shares[op, c, m]:.3f} / {all_local_share(engine_stamps(op, c, m), per_loop):.3f}"
                     for m in (64, 256, 1024)]
            spread = [phase_spread(emul_stamps[stamp_variant("cl4", op), c, 1024], per_loop),
                      phase_spread(engine_stamps(op, c, 1024), per_loop)]
            lines.append(f"| {op} | {c} | " + " | ".join(cells) + " | "
                         + "; ".join(", ".join(f"{x:.0f}" for x in sp) for sp in spread) + " |")
    nccl, emul = load([def_csv]), load([emul_csv])
    lines += ["", "24 channels, us: NCCL / emulated / the engine's ring transfer (no latency, no launch)"]
    for op in OPS:
        pts, em = nccl["def", "plain", op], emul["cl4-ch24", "plain", op]
        eng = engine_times(op, 24, tuple(sorted(pts)))
        lines.append(f"- {op}: " + ", ".join(f"{m} MiB {pts[m]:.0f} / {em[m]:.0f} / {eng[m]:.0f}" for m in sorted(pts)))
    return lines


#: wire bytes a byte of S and the count's loads and stores a wire byte, two GPUs (``ring_primitives``)
WIRE = {"all_reduce": (1.0, 4), "reduce_scatter": (0.5, 5), "all_gather": (0.5, 5)}
LARGE = 256 << 20  # bytes: the rows a large-size rate is read from (the calibration's window)


def large_rates(path: str) -> dict[str, tuple[float, float]]:
    """{op: (wire GB/s, the count's loads and stores GB/s)} of a ``collectives.py`` CSV's two-GPU graph
    rows from 256 MB to its largest: the slope between the two ends."""
    import csv

    pts: dict[str, dict[int, float]] = {}
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            if r.get("mode") == "graph" and r.get("op") in WIRE and int(r.get("ranks") or 2) == 2:
                pts.setdefault(r["op"], {})[int(r["bytes"])] = float(r["median_us"])
    out = {}
    for op, by in pts.items():
        big = sorted(b for b in by if b >= LARGE)
        if len(big) >= 2:
            share, ops = WIRE[op]
            wire = (big[-1] - big[0]) * share / ((by[big[-1]] - by[big[0]]) * 1e-6) / 1e9
            out[op] = (wire, wire * ops)
    return out


def rates_report(paths: list[str]) -> list[str]:
    lines = ["Two GPUs, graph rows from 256 MB up: wire GB/s (the count's loads and stores GB/s)",
             "| sweep | " + " | ".join(OPS) + " |", "|---|" + "---:|" * len(OPS)]
    for path in paths:
        got = large_rates(path)
        lines.append(f"| {Path(path).name} | " + " | ".join(
            f"{got[op][0]:.0f} ({got[op][1]:.0f})" if op in got else "-" for op in OPS) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--verdict", nargs=4, metavar=("EMUL", "DEF", "CH16", "STAMPS"))
    group.add_argument("--analyse", nargs=3, metavar=("EMUL", "DEF", "STAMPS"),
                       help="after the run: the emulation's channels against the engine's")
    group.add_argument("--rates", nargs="+", metavar="CSV",
                       help="collectives.py sweeps: each op's large-size wire rate and loads and stores")
    args = ap.parse_args(argv)
    if args.rates:
        print("\n".join(rates_report(args.rates)))
    else:
        print("\n".join(verdict(*args.verdict) if args.verdict else analyse(*args.analyse)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
