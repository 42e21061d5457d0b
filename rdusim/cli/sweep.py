"""``rdusim sweep MAPPING``: prompt lengths x KV policies x batches -> a tidy CSV (and a plot).

Points run in parallel worker processes; infeasible points are kept with the reason.
"""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from rdusim.analysis.sweep import resolve_policy, sweep
from rdusim.cli.options import finite_float, names, positive_int, positive_ints
from rdusim.cli.output import Outputs


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sweep", help="sweep prompt lengths, KV policies and batch sizes")
    parser.add_argument("mapping", help="a decode mapping, e.g. mappings/deepseek-r1/decode.yaml")
    parser.add_argument("--seq-len", type=positive_ints, default=[131072], help="comma-separated prompt lengths")
    parser.add_argument("--policy", type=names, default=["none"],
                        help="comma-separated KV policies ('none' = full cache)")
    parser.add_argument("--batch", type=_batches, default="auto",
                        help="'auto' (powers of two up to the first that does not fit) or comma-separated sizes")
    parser.add_argument("--compression", type=finite_float(1.0), default=4.0,
                        help="prompt tokens per kept slot for compressing policies (published: 4)")
    parser.add_argument("--workers", type=positive_int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--out", help="write the table as CSV here (default: print it)")
    parser.add_argument("--plot", help="write throughput and time-per-token plots here (PNG)")
    parser.set_defaults(handler=run)


def _batches(text: str) -> list[int] | str:
    return "auto" if text == "auto" else positive_ints(text)


def run(args: argparse.Namespace) -> int:
    outputs = Outputs()
    out = outputs.file("--out", args.out)
    plot = outputs.file("--plot", args.plot)
    seq_lens, batches = args.seq_len, args.batch
    policies = [resolve_policy(p) for p in args.policy]
    bar = tqdm(total=len(seq_lens) * len(policies), desc="sweep", unit="config", file=sys.stderr,
               disable=not sys.stderr.isatty())

    def progress(done: int, total: int) -> None:
        bar.update(done - bar.n)

    frame = sweep(args.mapping, seq_lens, policies, batches, compression=args.compression,
                  workers=args.workers, progress=progress)
    bar.close()
    if plot is not None:
        from rdusim.analysis.plots import sweep_figure_png  # noqa: PLC0415 (matplotlib only when plotting)

        outputs.put(plot, sweep_figure_png(frame))
    if out is not None:
        outputs.put(out, frame.to_csv(index=False))
    outputs.commit()
    if out is None:
        sys.stdout.write(frame.drop(columns=[c for c in frame.columns if c.startswith("hbm_")]).to_string(index=False)
                         + "\n")
    return 0
