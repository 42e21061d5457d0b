"""``rdusim serve-sweep A.yaml,B.yaml --rate R1,R2,...``: capacity planning over deployments x rates.

Runs every (deployment, rate) point of one generated workload (same seed at every rate) on
a process pool, or on Dask with ``--dask ADDRESS`` (same rows either way), prints the highest
rate each deployment sustains within the SLOs, and writes ``sweep.csv`` and
``sustained.csv`` into ``--out`` and the goodput-vs-rate figure to ``--plot``.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from rdusim.analysis.serving.deployment import load_deployment
from rdusim.analysis.serving.metrics import Slo, check_slo_possible
from rdusim.analysis.serving.sweep import serve_sweep, sustained_rates
from rdusim.analysis.serving.workload import check_workload_size
from rdusim.cli import command_parser
from rdusim.cli.options import MAX_LIST_ITEMS, comma_list, positive_int
from rdusim.cli.output import Outputs
from rdusim.cli.progress import ProgressExecutor, bar, updater
from rdusim.cli.serve import add_workload_arguments, slo_from, workload_spec
from rdusim.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "serve-sweep")
    parser.add_argument("deployments", help="comma-separated serving YAMLs")
    parser.add_argument("--rate", required=True, help="comma-separated requests per second, e.g. 0.1,0.2,0.5")
    add_workload_arguments(parser)
    parser.add_argument("--attainment", type=float, default=0.9,
                        help="a rate is sustained when this fraction of requests meets both SLOs (default 0.9)")
    parser.add_argument("--workers", type=positive_int, help="worker processes (default: all cores)")
    parser.add_argument("--dask", metavar="ADDRESS", help="run the points on this Dask scheduler")
    parser.add_argument("--out", help="output folder (created): sweep.csv, sustained.csv")
    parser.add_argument("--plot", help="goodput-vs-rate figure (PNG)")
    parser.set_defaults(handler=run)


def _rates(text: str) -> list[float]:
    rates = comma_list("--rate", text, float, "comma-separated requests per second, e.g. 0.1,0.2,0.5")
    for rate in rates:
        if not rate > 0 or rate == float("inf"):
            raise ConfigError(f"--rate: every rate must be a positive number of requests per second, got {rate:g}")
    return rates


def run(args: argparse.Namespace) -> int:
    outputs = Outputs()
    out = outputs.folder("--out", args.out)
    plot = outputs.file("--plot", args.plot)
    paths = comma_list("DEPLOYMENTS", args.deployments, str, "comma-separated serving YAMLs")
    for path in paths:
        if not Path(path).is_file():
            raise ConfigError(f"{path}: file not found")
    rates = _rates(args.rate)
    if not 0 < args.attainment <= 1:
        raise ConfigError(f"--attainment: expected a fraction in (0, 1], got {args.attainment:g}")
    if len(paths) * len(rates) > MAX_LIST_ITEMS:
        raise ConfigError(f"DEPLOYMENTS x --rate: {len(paths)} x {len(rates)} = {len(paths) * len(rates)} serving "
                          f"runs; at most {MAX_LIST_ITEMS}: split the sweep")
    workload = workload_spec(args)
    for rate in rates:  # every point's size, before any deployment is loaded
        check_workload_size(rate, duration_s=workload.duration_s, requests=workload.requests)
    with bar(None, "step tables", "sim") as building:  # the first deployment's (the sweep's are tasks below)
        first = load_deployment(paths[0], progress=updater(building))
    slo = Slo(args.slo_ttft_s, args.slo_tpot_ms / 1e3) if None not in (args.slo_ttft_s, args.slo_tpot_ms) \
        else slo_from(args, first)
    check_slo_possible(first, workload.at(rates[0]), slo)
    from rdusim.analysis.execution import make_executor  # noqa: PLC0415 (dask only if asked)

    tasks = bar(len(paths) * (1 + len(rates)), "serve-sweep", "task")  # loads, then (deployment, rate) points
    executor = ProgressExecutor(make_executor(args.workers, args.dask), tasks)
    try:
        frame = serve_sweep(paths, rates, workload, slo, executor)
    finally:
        executor.close()
        tasks.close()
    sustained = sustained_rates(frame, args.attainment)
    text = _format(frame, sustained, slo, args.attainment)
    if out is not None:
        outputs.put(out / "sweep.csv", frame.to_csv(index=False))
        outputs.put(out / "sustained.csv", sustained.to_csv(index=False))
    if plot is not None:
        outputs.put(plot, _figure(frame))
    outputs.commit()
    sys.stdout.write(text)
    return 0


def _figure(frame) -> bytes:  # noqa: ANN001
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    from rdusim.analysis.serving.plots import plot_goodput_vs_rate  # noqa: PLC0415

    ax = plot_goodput_vs_rate(frame)
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


def _format(frame, sustained, slo: Slo, attainment: float) -> str:  # noqa: ANN001
    lines = [f"SLOs: TTFT <= {slo.ttft_s:g} s, TPOT <= {slo.tpot_s * 1e3:g} ms; sustained = at least "
             f"{attainment * 100:g}% of requests within both", "",
             f"{'deployment':<28} {'rate':>6} {'goodput':>8} {'in SLO':>7} {'p90 TTFT s':>11} "
             f"{'p90 TPOT ms':>12} {'batch':>6} {'rejected':>9}"]
    for row in frame.itertuples():
        lines.append(f"{row.deployment:<28} {row.rate:>6g} {row.request_goodput:>8.3f} "
                     f"{row.slo_attainment * 100:>6.1f}% {row.p90_ttft_ms / 1e3:>11.2f} {row.p90_tpot_ms:>12.1f} "
                     f"{row.mean_decode_batch:>6.1f} {row.rejected:>9d}")
    lines += ["", "highest rate sustained within the SLOs:"]
    for row in sustained.itertuples():
        more = "; the highest rate tried: try higher rates" if row.highest_tried else ""
        lines.append(f"  {row.deployment:<28} {row.sustained_rate:g} req/s (goodput {row.goodput_at_rate:.3f} req/s{more})")
    return "\n".join(lines) + "\n"
