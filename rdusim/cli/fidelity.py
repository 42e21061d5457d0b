"""``rdusim fidelity``: every published figure against the model (markdown; ``--out`` CSV);
``--gpu``: the GPU model against its committed measurements instead."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rdusim.cli import command_parser
from rdusim.cli.output import Outputs
from rdusim.cli.progress import bar, updater
from rdusim.errors import ConfigError

if TYPE_CHECKING:  # run_gpu imports the GPU analysis when --gpu runs; here for the annotation only
    from rdusim.analysis.gpu.fidelity import Pooled


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "fidelity")
    parser.add_argument(
        "--root",
        default=".",
        help="repository root holding mappings/ and hw_configs/ (--gpu: and benchmarks/gpu) (default: .)",
    )
    parser.add_argument("--out", help="also write the table as CSV here")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="the GPU model against the measurements under <root>/benchmarks/gpu (issue 17's acceptance)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_sets",
        help="--gpu only: also the sets left out to keep it near a minute (repeats, paired eager runs, "
        "frozen predictions; several minutes)",
    )
    parser.add_argument(
        "--plot",
        help="--gpu only: also write a figure of every compared row's signed error (PNG): prediction "
        "rows one row per acceptance item with its tolerance, calibration rows grey, ungated kinds on "
        "rows of their own",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.gpu:
        return run_gpu(args)
    if args.plot is not None:
        raise ConfigError("--plot: only with --gpu (the GPU model's errors); the SN40L table has no figure")
    if args.all_sets:
        raise ConfigError("--all: only with --gpu (the GPU model's measurement sets)")
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
    lines = [
        "| figure | source | published | model | error | role | tolerance | within | leave-one-out |",
        "|---|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for row in frame.itertuples():
        share = row.unit in ("share", "fraction")  # absolute, in percentage points
        if row.published in ("rises", "falls"):  # a trend: its points, checked in order
            model, tol = row.detail, "order"
        else:
            model = (
                "-"
                if math.isnan(row.model)
                else (f"{row.model:.2%}" if share else f"{row.model:.4g}")
            )
            tol = f"{row.tolerance * 100:g} pp" if share else f"{row.tolerance:.0%}"
        loo = "" if math.isnan(row.leave_one_out) else f"{row.leave_one_out:+.1%}"
        err = (
            "-"
            if math.isnan(row.error)
            else (f"{row.error * 100:+.2f} pp" if share else f"{row.error:+.1%}")
        )
        within = (
            "yes" if row.within else ("no (known miss)" if row.role == "known miss" else "**no**")
        )
        lines.append(
            f"| {row.figure} | {row.source} | {row.published} | {model} | {err} | {row.role} | {tol} "
            f"| {within} | {loo} |"
        )
    bad = within_tolerance(frame)
    misses = known_misses(frame)
    lines.append("")
    lines.append(
        f"{len(frame)} figures: {sum(frame['role'] == 'fitted')} fitted, {sum(frame['role'] == 'predicted')} "
        f"predicted, {len(misses)} known misses; gated figures outside tolerance: {len(bad)}"
    )
    details = frame[(frame["detail"] != "") & ~frame["published"].isin(["rises", "falls"])]
    if not details.empty:
        lines.append("")
        lines.append("What each modelled figure simulates:")
        lines.extend(f"- {row.figure}: {row.detail}" for row in details.itertuples())
    if not misses.empty:
        lines.append("")
        lines.append('Known misses (docs/calibration.md, "Production configurations"):')
        lines.extend(f"- {row.figure}: {row.reason}" for row in misses.itertuples())
    if out is not None:
        outputs.put(out, frame.to_csv(index=False))
        outputs.commit()
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _pct(x: float, signed: bool = False) -> str:
    return "-" if math.isnan(x) else (f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%")


def _pooled_lines(pooled: list[Pooled]) -> list[str]:
    """``pooled_collectives``'s rows as a table with its heading: issue 17's collectives item in its own
    words, every committed run's rows together."""
    def mark(ok: bool) -> str:
        return "yes" if ok else "no"

    lines = [
        "Issue 17's collectives item over the runs pooled (every NCCL prediction row of the collectives runs "
        "above, H100 and H200 together, each on its run's fitted bus; the item names two GPUs, 1 KB-1 GB: "
        "median <= 10%, worst <= 25%):",
        "",
        "| GPUs | launch | op | rows | median abs error | worst | rows over 25% | median <= 10% | worst <= 25% |",
        "|---:|---|---|---:|---:|---:|---:|---|---|",
    ]
    for p in pooled:
        median_ok, worst_ok = p.within
        lines.append(
            f"| {p.gpus} | {p.launch} | {p.op.replace('_', '-')} | {p.rows} | {_pct(p.median)} | "
            f"{_pct(p.worst, signed=True)} | {p.over} | {mark(median_ok)} | {mark(worst_ok)} |"
        )
    return lines


def run_gpu(args: argparse.Namespace) -> int:
    """``--gpu``: one row per measurement set, kind and role, then issue 17's quoted figures and its
    collectives item over the runs pooled (``pooled_collectives``)."""
    from rdusim.analysis.gpu.fidelity import (
        KNOWN_MISS_RECORD,
        MISS_MARGIN,
        fidelity_table,
        footer,
        groups,
        issue17_quoted,
        points,
        pooled_collectives,
        read_record,
        regressions,
        sources,
        unmatched_records,
    )

    outputs = Outputs()
    out = outputs.file("--out", args.out)  # checked before the work
    plot = outputs.file("--plot", args.plot)
    root = Path(args.root)
    recorded = read_record(root)  # a missing or broken record: before the work, not after it
    with bar(len(sources(args.all_sets)), "fidelity --gpu", "set") as stages:
        gs = list(groups(root, progress=updater(stages), all_sets=args.all_sets))
    frame = fidelity_table(gs, root, recorded)
    quoted = issue17_quoted(root)
    lines = [
        "| set | GPU | kind | role | rows | median abs error | worst | tolerance (median / worst) | within |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for row in frame.itertuples():
        tol = (
            "-"
            if math.isnan(row.tolerance_median)
            else f"{row.tolerance_median * 100:g}% / {row.tolerance_worst * 100:g}%"
        )
        within = {"": "-", "no": "**no**"}.get(row.within, row.within)
        lines.append(
            f"| {row.set} | {row.gpu} | {row.kind} | {row.role} | {row.rows} | {_pct(row.median_abs_error)} "
            f"| {_pct(row.worst_error, signed=True)} | {tol} | {within} |"
        )
    pred, cal = frame[frame["role"] == "prediction"], frame[frame["role"] == "calibration"]
    gated = pred[pred["within"] != ""]
    lines += [
        "",
        f"{len(frame)} groups: {len(pred)} of prediction rows ({int(pred['rows'].sum())} rows), "
        f"{len(cal)} of calibration rows ({int(cal['rows'].sum())} rows, fitted, not gated); of "
        f"{len(gated)} gated prediction groups {sum(gated['within'] == 'yes')} within, "
        f"{sum(gated['within'] == 'known miss')} known misses (each within its recorded bound), "
        f"{len(regressions(frame))} regressions (outside with no known miss, or beyond its bound)",
        "",
        "Tolerances (issue 17's acceptance; P10's sets: no worse than P10's model):",
    ]
    lines += [
        f"- {key}: {text}"
        for key, text in dict.fromkeys(
            zip(gated["acceptance"], gated["tolerance_source"], strict=True)
        )
    ]
    misses = pred[pred["within"] == "known miss"]
    if not misses.empty:
        lines += [
            "",
            'Known misses (docs/gpu.md, "Issue 17 acceptance: where it stands"), each bounded: a group stays '
            "a known miss while its median and worst are each within its tolerance or its own recorded "
            f"figure plus {points(MISS_MARGIN)}, the larger (benchmarks/gpu/fidelity-known-misses.csv); "
            "beyond that it is a regression:",
        ]
        lines += [
            f"- {key}: {reason}"
            for key, reason in dict.fromkeys(
                zip(misses["acceptance"], misses["reason"], strict=True)
            )
        ]
    worse = regressions(frame)
    if not worse.empty:
        lines += [
            "",
            "Regressions (outside the tolerance with no known miss, or beyond its bound):",
        ]
        lines += [
            f"- {row.set}, {row.kind}: {row.reason or 'no known miss is recorded for this group'}"
            for row in worse.itertuples()
        ]
    stale = unmatched_records(recorded, frame, all_sets=args.all_sets)
    if stale:
        lines += [
            "",
            f"Warning: {len(stale)} row(s) of {KNOWN_MISS_RECORD} name no prediction group of this table "
            "(a stale or mistyped acceptance item, CSV, GPU or kind; "
            "benchmarks/gpu/fidelity_known_misses.py rewrites the record):",
        ]
        lines += [f"- {', '.join(key)}" for key in stale]
    lines += [
        "",
        "| figure issue 17 quotes (independent 8 x H100 measurements) | quoted | rdusim (h100-8.yaml) "
        "| role | tolerance | within |",
        "|---|---|---|---|---|---|",
    ]
    for q in quoted:
        within = "yes" if q.within else ("no (known miss)" if q.role == "known miss" else "**no**")
        lines.append(
            f"| {q.figure} | {q.quoted} | {q.model} | {q.role} | {q.tolerance} | {within} |"
        )
    lines += ["", "Known misses among the quoted figures:"]
    lines += [f"- {q.figure}: {q.reason}" for q in quoted if q.reason]
    pooled = pooled_collectives(gs)
    if pooled:
        lines += ["", *_pooled_lines(pooled)]
    lines += [
        "",
        "Prediction: a row no constant was fitted to (on the H200, run k's GEMMs and run m's small kernels "
        "at the H100 fit's calibration shapes are predictions: nothing was fitted there). The current model "
        "changed after most of these runs were measured: which rows were frozen before their run and which "
        "are explained after measurement is docs/gpu.md's (and collectives_parity.py's).",
        "",
        "Collectives: each run is compared with nvlink.bus_bandwidth re-fitted to its own calibration rows "
        "(the stream all-reduce at 256 MB-1 GB; the bus in its set label), the document's bus only where a "
        "run has none, as collectives.py --compare does; the other constants are the document's.",
        "",
        "Not yet in this table:",
    ]
    lines += [f"- {text}" for text in footer(args.all_sets)]
    if plot is not None:
        from rdusim.analysis.gpu.fidelity_plot import fidelity_figure_png  # noqa: PLC0415 (matplotlib only when plotting)

        outputs.put(plot, fidelity_figure_png(gs, frame))
    if out is not None:
        outputs.put(out, frame.to_csv(index=False))
    outputs.commit()
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
