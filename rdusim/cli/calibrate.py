"""``rdusim calibrate``: fit the efficiency constants to the published 128K breakdown,
write them into the socket YAML, print fitted vs published, then the predictions.

Calibration inputs (fitted): the per-kernel shares of one 128K prefill MoE layer.
Predictions (never fitted): SnapStream's prefill overhead at other prompt lengths.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

from rdusim.analysis.calibrate import fit_efficiencies, snapstream_overhead, write_efficiencies
from rdusim.analysis.published import PREFILL_128K_MOE_SHARES, SNAPSTREAM_PREFILL_OVERHEAD_RANGE
from rdusim.mapping.bundle import load_mapping

DEFAULT_MAPPING = "mappings/deepseek-r1/prefill-snapstream.yaml"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("calibrate", help="fit efficiency constants to the published breakdown")
    parser.add_argument("--mapping", default=DEFAULT_MAPPING)
    parser.add_argument("--max-evaluations", type=int, default=160)
    parser.add_argument("--dry-run", action="store_true", help="print the fit, do not write the socket YAML")
    parser.add_argument("--predict", default="32768,65536,131072",
                        help="prompt lengths for the SnapStream overhead prediction")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = load_mapping(args.mapping)

    def progress(count: int, error: float) -> None:
        print(f"\r  evaluation {count:4d}: squared error {error:8.3f} pp^2", end="", file=sys.stderr, flush=True)

    print(f"fitting {', '.join(PREFILL_128K_MOE_SHARES)} (128K prefill MoE layer, methods.md section 1)")
    result = fit_efficiencies(loaded, PREFILL_128K_MOE_SHARES, max_evaluations=args.max_evaluations,
                              progress=progress)
    print(file=sys.stderr)
    print(f"\n{'kernel':<24} {'fitted':>8} {'published':>10} {'error pp':>9}")
    for kernel, published in PREFILL_128K_MOE_SHARES.items():
        fitted = result.fitted[kernel]
        print(f"{kernel:<24} {fitted * 100:>7.2f}% {published * 100:>9.2f}% {(fitted - published) * 100:>+9.2f}")
    print(f"worst error {result.worst_error_pp:.2f} pp after {result.evaluations} evaluations")
    print("efficiency: " + ", ".join(f"{k}={v}" for k, v in result.efficiency.items()))
    socket_yaml = Path(loaded.system.source).parent / loaded.system.node.socket
    if not args.dry_run:
        note = (f"calibrated: {date.today().isoformat()} by `rdusim calibrate` on {args.mapping}\n"
                f"fitted to the 128K prefill MoE-layer shares of methods.md section 1 "
                f"(worst error {result.worst_error_pp:.2f} pp); do not edit by hand")
        write_efficiencies(socket_yaml, result.efficiency, note)
        print(f"wrote {socket_yaml}")
    low, high = SNAPSTREAM_PREFILL_OVERHEAD_RANGE
    print(f"\npredictions (not fitted): SnapStream prefill overhead, published {low:.0%}-{high:.0%}")
    for seq_len in (int(s) for s in args.predict.split(",")):
        overhead = snapstream_overhead(loaded, seq_len, result.efficiency)
        print(f"  {seq_len:>7} tokens: {overhead * 100:5.2f}%")
    return 0
