"""``rdusim calibrate``: fit the calibration constants to the published figures, write them
into the socket YAML, print fitted vs published, then the predictions.

Inputs (fitted): the per-kernel shares of one 128K prefill MoE layer (five efficiencies) and
the 128K decode row (the software-orchestrated kernel-call cost). Predictions (never fitted): SnapStream's
prefill overhead, maximum batch and throughput at other prompt lengths.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import date
from pathlib import Path

from rdusim.analysis.calibration.fit import (
    MAX_EVALUATIONS,
    fit_decode_overhead,
    fit_efficiencies,
    snapstream_overhead,
    with_efficiencies,
    with_software_launch,
)
from rdusim.analysis.calibration.published import (
    DECODE_128K,
    PREFILL_128K_MOE_SHARES,
    SNAPSTREAM_PREFILL_OVERHEAD_RANGE,
)
from rdusim.cli import command_parser
from rdusim.cli.options import positive_int, positive_ints
from rdusim.cli.output import write_atomic
from rdusim.cli.progress import bar
from rdusim.errors import ConfigError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping

PREFILL_MAPPING = "mappings/deepseek-r1/prefill-snapstream.yaml"
DECODE_MAPPINGS = {"full": "mappings/deepseek-r1/decode.yaml", "snapstream": "mappings/deepseek-r1/decode-snapstream.yaml"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "calibrate")
    parser.add_argument("--phase", choices=("prefill", "decode", "all"), default="all")
    parser.add_argument("--mapping", default=PREFILL_MAPPING, help="prefill mapping to fit the efficiencies on")
    parser.add_argument("--max-evaluations", type=positive_int, default=MAX_EVALUATIONS,
                        help=f"simplex evaluations after the 18-point starting grid (default {MAX_EVALUATIONS})")
    parser.add_argument("--dry-run", action="store_true", help="print the fit, do not write the socket YAML")
    parser.add_argument("--predict", default="32768,65536,131072",
                        help="prompt lengths for the SnapStream prefill-overhead prediction")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    predict = positive_ints("--predict", args.predict)  # before minutes of fitting
    if args.phase in ("prefill", "all"):
        _check_prefill_mapping(args.mapping, predict)
        _prefill(args, predict)
    if args.phase in ("decode", "all"):
        _decode(args)
    return 0


def _check_prefill_mapping(mapping: str, predict: list[int]) -> None:
    """Before fitting: the mapping is a prefill mapping with the published kernels, and every
    --predict length is valid for it (minutes of fitting must not end in an option error)."""
    loaded = load_mapping(mapping)
    if loaded.spec.phase != "prefill":
        raise ConfigError(f"--mapping {mapping}: is a {loaded.spec.phase} mapping; the prefill calibration "
                          "needs a prefill mapping")
    have = [k.kernel for k in loaded.spec.layers.get("moe", [])]
    missing = [k for k in PREFILL_128K_MOE_SHARES if k not in have]
    if missing:
        raise ConfigError(f"--mapping {mapping}: the prefill calibration fits the published shares of the "
                          f"MoE layer's kernels {', '.join(PREFILL_128K_MOE_SHARES)}; this mapping's moe layer has "
                          f"{', '.join(have) or 'no kernels'} (missing: {', '.join(missing)})")
    for seq_len in predict:
        build_plan(load_mapping(mapping, overrides=[(f"--predict {seq_len}", f"workload.seq_len={seq_len}")]))


def _rewrite(path: Path, edit: Callable[[str], str]) -> None:
    """Replace the socket YAML at ``path`` by ``edit`` of its text, atomically."""
    try:
        text = edit(path.read_text(encoding="utf-8"))
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
    write_atomic(path, text)
    print(f"wrote {path}")


def _socket_yaml(loaded: LoadedMapping) -> Path:
    return Path(loaded.system.source).parent / loaded.system.node.socket


def _prefill(args: argparse.Namespace, predict: list[int]) -> None:
    loaded = load_mapping(args.mapping)

    fit_bar = bar(args.max_evaluations, "prefill fit", "eval")

    def progress(count: int, error: float) -> None:
        fit_bar.update(count - fit_bar.n)
        fit_bar.set_postfix_str(f"squared error {error:8.3f} pp^2")

    print(f"prefill: fitting {', '.join(PREFILL_128K_MOE_SHARES)} (128K MoE layer, methods.md section 1)")
    result = fit_efficiencies(loaded, PREFILL_128K_MOE_SHARES, max_evaluations=args.max_evaluations,
                              progress=progress)
    fit_bar.close()
    print(f"\n{'kernel':<24} {'fitted':>8} {'published':>10} {'error pp':>9}")
    for kernel, published in PREFILL_128K_MOE_SHARES.items():
        fitted = result.fitted[kernel]
        print(f"{kernel:<24} {fitted * 100:>7.2f}% {published * 100:>9.2f}% {(fitted - published) * 100:>+9.2f}")
    print(f"worst error {result.worst_error_pp:.2f} pp, squared error {result.squared_error_pp2:.2f} pp^2 after "
          f"{result.evaluations} evaluations ({result.simulations} points simulated)")
    print("efficiency: " + ", ".join(f"{k}={v}" for k, v in result.efficiency.items()))
    if not args.dry_run:
        note = (f"calibrated: {date.today().isoformat()} by `rdusim calibrate` on {args.mapping}\n"
                f"fitted to the 128K prefill MoE-layer shares of methods.md section 1 "
                f"(worst error {result.worst_error_pp:.2f} pp); do not edit by hand")
        _rewrite(_socket_yaml(loaded), lambda text: with_efficiencies(text, result.efficiency, note))
    low, high = SNAPSTREAM_PREFILL_OVERHEAD_RANGE
    print(f"\npredictions (not fitted): SnapStream prefill overhead, published {low:.0%}-{high:.0%}")
    for seq_len in predict:
        overhead = snapstream_overhead(loaded, seq_len, result.efficiency)
        print(f"  {seq_len:>7} tokens: {overhead * 100:5.2f}%")


def _decode(args: argparse.Namespace) -> None:
    points = {}
    for policy, path in DECODE_MAPPINGS.items():
        row = DECODE_128K[policy]
        points[policy] = (load_mapping(path, seq_len=131072, batch=row["max_batch"]), row["tokens_per_s"])
    print("\ndecode: fitting kernel_launch.software to the 128K row (methods.md section 1)")
    result = fit_decode_overhead(points)
    print(f"{'policy':<12} {'batch':>6} {'fitted tok/s':>13} {'published':>10} {'error':>7}")
    for policy, (loaded, published) in points.items():
        fitted = result.fitted[policy]
        print(f"{policy:<12} {loaded.spec.workload.batch:>6} {fitted:>13.0f} {published:>10.0f} "
              f"{fitted / published - 1:>+7.1%}")
    print(f"kernel_launch.software = {result.overhead_s * 1e6:.1f} us per kernel call")
    if not args.dry_run:
        _rewrite(_socket_yaml(points["full"][0]), lambda text: with_software_launch(text, result.overhead_s))
