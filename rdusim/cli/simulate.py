"""``rdusim simulate MAPPING``: simulate a mapping and print or write its breakdown."""

from __future__ import annotations

import argparse
import json
import sys

from rdusim.analysis.chrome_trace import chrome_trace
from rdusim.analysis.result import SimulationResult, simulate
from rdusim.cli import command_parser
from rdusim.cli.output import Outputs, format_table
from rdusim.units import format_bytes


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "simulate")
    parser.add_argument("mapping", help="mapping YAML, e.g. mappings/deepseek-r1/prefill-snapstream.yaml")
    parser.add_argument("--seq-len", type=int, help="prompt length in tokens (overrides workload.seq_len)")
    parser.add_argument("--batch", type=int, help="batch size (overrides workload.batch)")
    parser.add_argument("--hw", help="node YAML to run on instead of the mapping's hardware")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any mapping key, e.g. --set defaults.chunk_tokens=2048 (repeatable)")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
    parser.add_argument("--out", help="write the result here instead of standard output")
    parser.add_argument("--trace", help="write a Chrome trace-event JSON (open it in Perfetto)")
    parser.add_argument("--ignore-capacity", action="store_true",
                        help="simulate even when HBM per socket overflows (a what-if); SRAM is always checked")
    parser.add_argument("--full", action="store_true",
                        help="simulate every layer on every socket (slow; same result as the default)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rdusim.analysis.gpu.predict import is_gpu_mapping

    if is_gpu_mapping(args.mapping):  # a GPU target: library kernels, not a spatial pipeline
        from rdusim.cli.gpu_report import run_gpu

        return run_gpu(args)

    outputs = Outputs()
    out = outputs.file("--out", args.out)
    trace = outputs.file("--trace", args.trace)
    result = simulate(args.mapping, seq_len=args.seq_len, batch=args.batch, hw=args.hw,
                      overrides=args.overrides, fast=not args.full, record_events=bool(args.trace),
                      check_capacity=not args.ignore_capacity)
    if args.format == "json":
        text = json.dumps(result.to_dict(), indent=2) + "\n"
    elif args.format == "csv":
        text = result.kernels.to_csv(index=False)
    else:
        text = format_table(result) + hbm_budget(result)
    if out is not None:
        outputs.put(out, text)
    if trace is not None:
        outputs.put(trace, json.dumps(chrome_trace(result.trace)))
    outputs.commit()  # everything is computed before anything is written
    if out is None:
        sys.stdout.write(text)
    return 0


def hbm_budget(result: SimulationResult) -> str:
    """Decode: the HBM budget per socket, each deployment reserve named, and the margin to the
    next batch (a power of two up); empty for prefill."""
    fit = result.hbm
    if fit is None or result.phase != "decode":
        return ""
    parts = [("weights", fit.weights_bytes), ("KV cache", fit.kv_bytes), ("activations", fit.activations_bytes),
             *fit.reserves.items(), ("free", fit.free_bytes)]
    lines = ["", f"HBM budget per socket (of {format_bytes(fit.capacity_bytes)}; deployment reserves from the mapping):"]
    lines += [f"  {name:<16} {format_bytes(b):>11}" for name, b in parts]
    margin = fit.next_batch_margin_bytes
    verdict = "fits" if margin >= 0 else "does not fit"
    lines.append(f"  next batch ({2 * fit.batch}) {verdict}: margin {margin / 2**30:+.2f} GiB")
    return "\n".join(lines) + "\n"
