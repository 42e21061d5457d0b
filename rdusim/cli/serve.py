"""``rdusim serve DEPLOYMENT``: run requests through a serving deployment and report SLO metrics.

Writes into ``--out`` (created): ``requests.csv`` (one row per request, written as the requests
finish: the run is measured as it goes, ``run_serving(..., stream=True)``), ``summary.json``,
``nodes.csv`` (utilisation per node), ``batch_histogram.csv``, ``trace.json`` (Perfetto:
requests per node) and ``latency_cdf.png`` (TTFT and TPOT CDFs). Without ``--out`` it prints
the summary only. Workload: generated (``--rate``, ``--duration`` or ``--requests``,
``--prompt-tokens``, ``--output-tokens``, ``--arrivals``, ``--seed``) or replayed (``--trace``).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

from rdusim.analysis.serving.deployment import load_deployment
from rdusim.analysis.serving.metrics import Slo, check_slo_possible, default_slo
from rdusim.analysis.serving.perfetto import serving_trace
from rdusim.analysis.serving.run import run_serving
from rdusim.analysis.serving.workload import (
    MAX_OUTPUT_TOKENS,
    TRACE_FORMATS,
    GeneratedWorkload,
    parse_arrivals,
    parse_distribution,
    read_trace,
)
from rdusim.cli import command_parser
from rdusim.cli.options import nonnegative_int
from rdusim.cli.output import Outputs
from rdusim.cli.progress import bar, updater
from rdusim.errors import ConfigError

DEFAULT_PROMPT = "lognormal:32768,0.5"
DEFAULT_OUTPUT = "lognormal:1024,0.6"
#: the output written as the requests finish (``Outputs.stream``), not handed over at the end
STREAMED = "requests.csv"


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("generated workload")
    group.add_argument("--duration", type=float, help="seconds of arrivals (default 600 unless --requests)")
    group.add_argument("--requests", type=int, help="exactly this many requests instead of --duration")
    group.add_argument("--prompt-tokens", default=DEFAULT_PROMPT,
                       help=f"lognormal:MEDIAN,SIGMA | fixed:N | uniform:A,B (default {DEFAULT_PROMPT})")
    group.add_argument("--output-tokens", default=DEFAULT_OUTPUT, help=f"same forms (default {DEFAULT_OUTPUT})")
    group.add_argument("--arrivals", default="poisson", help="poisson | gamma:CV (bursty when CV > 1)")
    group.add_argument("--seed", type=nonnegative_int, default=0, help="workload seed (same seed, same requests)")
    slo = parser.add_argument_group("SLOs (default: the serving file's slo)")
    slo.add_argument("--slo-ttft-s", type=float, help="time to first token limit, seconds")
    slo.add_argument("--slo-tpot-ms", type=float, help="time per output token limit, milliseconds")


def workload_spec(args: argparse.Namespace) -> GeneratedWorkload:
    if args.duration is not None and args.requests is not None:
        raise ConfigError("--duration, --requests: give one of them, not both")
    duration = args.duration if args.requests is None else None
    return GeneratedWorkload(parse_distribution(args.prompt_tokens, "--prompt-tokens"),
                        parse_distribution(args.output_tokens, "--output-tokens", MAX_OUTPUT_TOKENS),
                        duration_s=600.0 if duration is None and args.requests is None else duration,
                        requests=args.requests, seed=args.seed, cv=parse_arrivals(args.arrivals))


def slo_from(args: argparse.Namespace, deployment: Any | None) -> Slo:
    if args.slo_ttft_s is None and args.slo_tpot_ms is None and deployment is not None:
        return default_slo(deployment)
    if args.slo_ttft_s is None or args.slo_tpot_ms is None:
        if deployment is not None and deployment.spec.slo is not None:
            base = default_slo(deployment)
            return Slo(args.slo_ttft_s if args.slo_ttft_s is not None else base.ttft_s,
                       args.slo_tpot_ms / 1e3 if args.slo_tpot_ms is not None else base.tpot_s)
        raise ConfigError("--slo-ttft-s, --slo-tpot-ms: give both (or an slo in the serving file)")
    return Slo(args.slo_ttft_s, args.slo_tpot_ms / 1e3)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "serve")
    parser.add_argument("deployment", help="serving YAML, e.g. mappings/deepseek-r1/serve-snapstream.yaml")
    parser.add_argument("--rate", type=float, help="requests per second (generated workload)")
    parser.add_argument("--trace", help="replay a trace file instead (CSV or JSONL)")
    parser.add_argument("--trace-format", default="auto", choices=("auto", *TRACE_FORMATS))
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="multiply the trace's arrival times (0.5 = twice the rate)")
    add_workload_arguments(parser)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a key of the serving file, e.g. --set decode.nodes=2")
    parser.add_argument("--out", help="output folder (created)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    outputs = Outputs()
    out = outputs.folder("--out", args.out)
    if (args.rate is None) == (args.trace is None):
        raise ConfigError("--rate, --trace: give one of them: --rate (a generated workload) or --trace FILE (a replay)")
    if args.trace is not None:
        with bar(None, "reading trace", "B", unit_scale=True) as reading:
            workload = read_trace(args.trace, layout=args.trace_format, time_scale=args.time_scale,
                                  progress=updater(reading))
    else:
        spec = workload_spec(args)
        workload = spec.at(args.rate) if args.rate is not None else None
    early = Slo(args.slo_ttft_s, args.slo_tpot_ms / 1e3) if None not in (args.slo_ttft_s, args.slo_tpot_ms) else None
    with bar(None, "step tables", "sim") as building:  # seconds of kernel simulations
        deployment = load_deployment(args.deployment, args.overrides, progress=updater(building))
    slo = early or slo_from(args, deployment)
    check_slo_possible(deployment, workload, slo)
    # STREAMED is written as the requests finish, into a file beside it renamed at commit
    # (removed if anything fails before)
    csv = outputs.stream(out / STREAMED) if out is not None else None
    try:
        text = _serve(outputs, out, deployment, workload, slo, csv)
    except BaseException:
        outputs.abort()
        raise
    sys.stdout.write(text)
    return 0


def _serve(outputs: Outputs, out: Any, deployment: Any, workload: Any, slo: Slo,
           csv: Any) -> str:
    """Run, measure as the run goes, and write the outputs; the printed summary."""
    with bar(len(workload), "serve", "req") as served:  # requests finished or rejected
        result = run_serving(deployment, workload, slo, record_events=False, progress=updater(served),
                             stream=True, requests_csv=csv)
    text = format_summary(result.summary, result.nodes)
    if out is not None:
        import matplotlib  # noqa: PLC0415 (heavy: only when writing figures)

        matplotlib.use("Agg")
        from rdusim.analysis.serving.plots import plot_latency_cdf  # noqa: PLC0415

        files = {   # handed over now; STREAMED is already written
            "summary.json": json.dumps(result.summary, indent=2) + "\n",
            "nodes.csv": result.nodes.to_csv(index=False),
            "batch_histogram.csv": result.batch_histogram.to_csv(index=False),
            "trace.json": json.dumps(serving_trace(result)),
        }
        files["latency_cdf.png"] = _cdf_figure(plot_latency_cdf, result, slo)
        for name, content in files.items():
            outputs.put(out / name, content)
        outputs.commit()
        text += f"\nwrote {', '.join([STREAMED, *files])} to {out}/\n"
    return text


def _cdf_figure(plot: Any, result: Any, slo: Slo) -> bytes:
    from matplotlib.figure import Figure  # noqa: PLC0415

    figure = Figure(figsize=(9, 3.5), layout="constrained")
    left, right = figure.subplots(1, 2)
    plot({result.deployment: result.latency["ttft_s"]}, "ttft_s", left, slo.ttft_s)
    plot({result.deployment: result.latency["tpot_s"]}, "tpot_s", right, slo.tpot_s)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


def format_summary(s: dict[str, Any], nodes: Any) -> str:
    lines = [f"{s['deployment']} (KV policy {s['policy']}): {s['workload']}",
             f"requests {s['requests']}: completed {s['completed']}, rejected {s['rejected']}"
             + (f", trace rows skipped {s['skipped_trace_rows']}" if s["skipped_trace_rows"] else ""),
             f"duration {s['duration_s']:.1f} s: {s['request_throughput']:.3f} req/s, "
             f"{s['output_throughput']:.1f} output tok/s",
             f"goodput {s['request_goodput']:.3f} req/s within TTFT <= {s['slo_ttft_s']:g} s and TPOT <= "
             f"{s['slo_tpot_s'] * 1e3:g} ms (SLO attainment {s['slo_attainment'] * 100:.1f}%)", "",
             f"{'metric':<6} {'mean':>10} {'median':>10} {'p90':>10} {'p99':>10}  (ms)"]
    for key, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2E")):
        lines.append(f"{label:<6} " + " ".join(f"{s[f'{q}_{key}_ms']:>10.1f}" for q in ("mean", "median", "p90", "p99")))
    lines += ["", f"mean decode batch {s['mean_decode_batch']:.1f}; tokens per request per step "
              f"{s['mean_tokens_per_step']:.2f} (ITL: between deliveries; TPOT: per token); KV shipped "
              f"{s['kv_bytes_shipped'] / 1e9:.1f} GB", "node utilisation: " + ", ".join(
                  f"{row.node} {row.utilisation * 100:.0f}%" for row in nodes.itertuples())]
    for reason, count in s.get("rejections", {}).items():
        lines.append(f"rejected {count}: {reason}")
    return "\n".join(lines) + "\n"
