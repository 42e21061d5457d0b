"""``rdusim sweep MAPPING``: prompt lengths x KV policies x batches -> a tidy CSV (and a plot).

Points run in parallel worker processes; infeasible points are kept with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys

from rdusim.analysis.execution import make_executor
from rdusim.analysis.sweep import sweep
from rdusim.cli import command_parser
from rdusim.cli.options import (
    finite_float,
    nonnegative_ints,
    policy_list,
    positive_int,
    positive_ints,
)
from rdusim.cli.output import Outputs
from rdusim.cli.progress import bar, updater


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "sweep")
    parser.add_argument("mapping", help="a decode mapping, e.g. mappings/deepseek-r1/decode.yaml")
    parser.add_argument("--seq-len", default=None,
                        help="comma-separated prompt lengths (default: the mapping's own workload.seq_len)")
    parser.add_argument("--policy", default="none", help="comma-separated KV policies ('none' = full cache)")
    parser.add_argument("--batch", default="auto",
                        help="'auto' (powers of two up to the first that does not fit) or comma-separated sizes")
    parser.add_argument("--compression", type=finite_float(1.0), default=4.0,
                        help="prompt tokens per kept slot for compressing policies (published: 4)")
    parser.add_argument("--draft-k", help="speculative mappings: comma-separated draft lengths k to sweep "
                        "(0 = plain decoding)")
    parser.add_argument("--workers", type=positive_int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--dask", metavar="ADDRESS", help="run the points on this Dask scheduler")
    parser.add_argument("--out", help="write the table as CSV here (default: print it)")
    parser.add_argument("--plot", help="write throughput and time-per-token plots here (PNG)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    outputs = Outputs()
    out = outputs.file("--out", args.out)
    plot = outputs.file("--plot", args.plot)
    seq_lens = None if args.seq_len is None else positive_ints("--seq-len", args.seq_len)
    policies = policy_list("--policy", args.policy)
    batches = "auto" if args.batch == "auto" else positive_ints("--batch", args.batch)
    draft_ks = None if args.draft_k is None else nonnegative_ints("--draft-k", args.draft_k)
    groups = (1 if seq_lens is None else len(seq_lens)) * len(policies) * len(draft_ks or [None])
    configs = bar(groups, "sweep", "config")

    executor = make_executor(min(args.workers or os.cpu_count() or 1, groups), args.dask)
    try:
        frame = sweep(args.mapping, seq_lens, policies, batches, compression=args.compression,
                      executor=executor, progress=updater(configs), draft_ks=draft_ks)
    finally:
        executor.close()
        configs.close()
    if plot is not None:
        from rdusim.analysis.plots import sweep_figure_png  # noqa: PLC0415 (matplotlib only when plotting)

        outputs.put(plot, sweep_figure_png(frame))
    if out is not None:
        outputs.put(out, frame.to_csv(index=False))
    outputs.commit()
    if out is None:
        shown = frame.drop(columns=[c for c in frame.columns if c.startswith("hbm_")])
        if draft_ks is None and shown["draft_k"].isna().all():  # the speculative columns only when used
            shown = shown.drop(columns=["draft_k", "accepted_tokens_per_step", "tokens_per_s_per_user", "draft_s",
                                        "verify_s"])
        sys.stdout.write(shown.to_string(index=False) + "\n")
    return 0
