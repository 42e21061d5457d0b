"""Run cr: the bends by op, NCCL's and its protocol's alone (frozen before the run).

Run cq's curves bend from twelve ring channels (``ring_queue.py --shape``): at 256 MiB the time runs
above the line through 64 MiB and 1 GiB. The engine bends where NCCL does but, by op, not as deep
(the reduce-scatter and the all-gather a half to a third of run cq's at 16-24 channels). Run cr
measures on one lease NCCL's three ops at 24 and 16 channels beside ``ring_emul.py``'s emulation of
the same protocol (clusters of four, as NCCL launches; its stamps of every slice), and this script
prints the bends, the emulation's all-local shares (every channel in its local step at once) and
the registered verdicts (``h200x2-20261130cr-bends-hypotheses.md``):

    PYTHONPATH=. python benchmarks/gpu/ring_bends.py --verdict <emul.csv> <def.csv> <ch16.csv> <stamps.csv.gz>
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp_diag import load  # noqa: E402  (beside this file)
from ring_emul import all_local_share, load_stamps, loop_slices, stamp_variant  # noqa: E402
from ring_queue import engine_times, off_line  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verdict", nargs=4, required=True, metavar=("EMUL", "DEF", "CH16", "STAMPS"))
    args = ap.parse_args(argv)
    print("\n".join(verdict(*args.verdict)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
