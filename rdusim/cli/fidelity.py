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
    from rdusim.analysis.calibration.fidelity import fidelity, within_tolerance

    outputs = Outputs()
    out = outputs.file("--out", args.out)  # checked before the work
    with bar(6, "fidelity", "stage") as stages:
        frame = fidelity(Path(args.root), progress=updater(stages))
    lines = ["| figure | source | published | model | error | role | tolerance | within | leave-one-out |",
             "|---|---|---:|---:|---:|---|---:|---|---:|"]
    for row in frame.itertuples():
        share = row.unit in ("share", "fraction")  # absolute, in percentage points
        model = "-" if math.isnan(row.model) else (f"{row.model:.2%}" if share else f"{row.model:.4g}")
        tol = "-" if not math.isfinite(row.tolerance) else (f"{row.tolerance * 100:g} pp" if share else f"{row.tolerance:.0%}")
        loo = "" if math.isnan(row.leave_one_out) else f"{row.leave_one_out:+.1%}"
        err = "-" if math.isnan(row.error) else (f"{row.error * 100:+.2f} pp" if share else f"{row.error:+.1%}")
        within = "n/a" if row.role == "context" else ("yes" if row.within else "**no**")
        lines.append(f"| {row.figure} | {row.source} | {row.published} | {model} | {err} | {row.role} | {tol} "
                     f"| {within} | {loo} |")
    bad = within_tolerance(frame)
    lines.append("")
    lines.append(f"{len(frame)} figures; gated figures outside tolerance: {len(bad)}")
    if out is not None:
        outputs.put(out, frame.to_csv(index=False))
        outputs.commit()
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
