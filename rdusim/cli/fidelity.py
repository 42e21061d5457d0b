"""``rdusim fidelity``: every published figure against the model (markdown; ``--out`` CSV)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rdusim.cli import command_parser
from rdusim.cli.output import Outputs
from rdusim.cli.progress import bar, updater


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "fidelity")
    parser.add_argument("--root", default=".", help="repository root holding mappings/ and hw_configs/ (default: .)")
    parser.add_argument("--out", help="also write the table as CSV here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rdusim.analysis.calibration.fidelity import (
        GROUPS,
        fidelity,
        known_misses,
        within_tolerance,
    )

    outputs = Outputs()
    out = outputs.file("--out", args.out)  # checked before the work
    with bar(len(GROUPS), "fidelity", "group") as stages:
        frame = fidelity(Path(args.root), progress=updater(stages))
    lines = ["| figure | source | published | model | error | role | tolerance | within | leave-one-out |",
             "|---|---|---:|---:|---:|---|---:|---|---:|"]
    for row in frame.itertuples():
        share = row.unit in ("share", "fraction")  # absolute, in percentage points
        if row.published in ("rises", "falls"):    # a trend: its points, checked in order
            model, tol = row.detail, "order"
        else:
            model = "-" if math.isnan(row.model) else (f"{row.model:.2%}" if share else f"{row.model:.4g}")
            tol = f"{row.tolerance * 100:g} pp" if share else f"{row.tolerance:.0%}"
        loo = "" if math.isnan(row.leave_one_out) else f"{row.leave_one_out:+.1%}"
        err = "-" if math.isnan(row.error) else (f"{row.error * 100:+.2f} pp" if share else f"{row.error:+.1%}")
        within = "yes" if row.within else ("no (known miss)" if row.role == "known miss" else "**no**")
        lines.append(f"| {row.figure} | {row.source} | {row.published} | {model} | {err} | {row.role} | {tol} "
                     f"| {within} | {loo} |")
    bad = within_tolerance(frame)
    misses = known_misses(frame)
    lines.append("")
    lines.append(f"{len(frame)} figures: {sum(frame['role'] == 'fitted')} fitted, {sum(frame['role'] == 'predicted')} "
                 f"predicted, {len(misses)} known misses; gated figures outside tolerance: {len(bad)}")
    details = frame[(frame["detail"] != "") & ~frame["published"].isin(["rises", "falls"])]
    if not details.empty:
        lines.append("")
        lines.append("What each modelled figure simulates:")
        lines.extend(f"- {row.figure}: {row.detail}" for row in details.itertuples())
    if not misses.empty:
        lines.append("")
        lines.append("Known misses (docs/calibration.md, \"Production configurations\"):")
        lines.extend(f"- {row.figure}: {row.reason}" for row in misses.itertuples())
    if out is not None:
        outputs.put(out, frame.to_csv(index=False))
        outputs.commit()
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
