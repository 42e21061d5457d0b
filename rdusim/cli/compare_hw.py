"""``rdusim compare-hw MAPPING --hw A.yaml,B.yaml``: one workload on several machines.

Owns: the ``compare-hw`` subcommand. Imports: analysis (gpu, simulate), mapping.capacity,
cli.output; matplotlib inside ``run`` only.

An SN40L node document runs MAPPING itself. A GPU document (``gpu`` or ``gpu_node``) runs the
same model, phase, prompt length and KV policy as the library kernels a PyTorch stack launches
(``rdusim.analysis.gpu.predict.MEASURED_LAYER``), CUDA-graph captured, one model replica per
GPU (data parallel) when the weights fit one GPU, else tensor parallel over the node. Each row:
time per output token, node tokens/s, the largest batch that fits, and HBM in use.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from rdusim.cli import command_parser
from rdusim.cli.options import comma_list, finite_float, policy_list, positive_int
from rdusim.cli.output import Outputs
from rdusim.config.loader import check_kind
from rdusim.errors import ConfigError

POLICY_COMPRESSION = 4.0  # prompt tokens per kept slot for compressing policies (the R1 mappings' 4x)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "compare-hw")
    parser.add_argument("mapping", help="an SN40L decode mapping, e.g. mappings/llama-3.1-8b/decode.yaml")
    parser.add_argument("--hw", required=True, help="comma-separated node/gpu YAMLs")
    parser.add_argument("--seq-len", type=positive_int, required=True, help="prompt length in tokens")
    parser.add_argument("--policy", default="none", help="comma-separated KV policies (none = full)")
    parser.add_argument("--batch", default="auto", help="batch per replica, or 'auto' (largest that fits)")
    parser.add_argument("--compression", type=finite_float(1.0), default=POLICY_COMPRESSION,
                        help=f"prompt tokens per kept slot for snapstream/snapkv/streamingllm (default {POLICY_COMPRESSION:g})")
    parser.add_argument("--out", help="write the table as CSV here")
    parser.add_argument("--plot", help="write a bar chart (PNG) here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rdusim.analysis.gpu.compare_hw import compare_hardware

    outputs = Outputs()
    out = outputs.file("--out", args.out)
    plot = outputs.file("--plot", args.plot)
    hws = comma_list("--hw", args.hw, str, "comma-separated hardware YAML files")
    policies = policy_list("--policy", args.policy)
    check_kind(args.mapping, ("mapping",), "compare-hw MAPPING",
               "give an SN40L decode mapping here and GPU documents (gpu, gpu_node, gpu_mapping) in --hw")
    for hw in hws:
        if not Path(hw).is_file():
            raise ConfigError(f"--hw: file {hw!r} not found")
        check_kind(hw, ("node", "gpu", "gpu_node", "gpu_mapping"), "--hw", given_by="--hw")
    if args.batch != "auto" and (not args.batch.isdigit() or int(args.batch) < 1):
        raise ConfigError(f"--batch: expected a positive integer or 'auto', got {args.batch!r}")
    batch = None if args.batch == "auto" else int(args.batch)
    rows = compare_hardware(args.mapping, hws, seq_len=args.seq_len, policies=policies, batch=batch,
                            compression=args.compression)
    if out is not None:
        outputs.put(out, _csv(rows))
    if plot is not None:
        outputs.put(plot, _plot(rows, args.seq_len))
    outputs.commit()
    sys.stdout.write(_table(rows))
    return 0


COLUMNS = ("hardware", "policy", "batch", "max_batch", "kv_len", "tpot_ms", "tokens_per_s", "hbm_gb_per_device", "note")


def _csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _table(rows: list[dict]) -> str:
    head = f"{'hardware':14s} {'policy':11s} {'batch':>5s} {'max':>5s} {'TPOT ms':>8s} {'tokens/s':>9s} {'HBM GB/dev':>10s}  note"
    lines = [head]
    for r in rows:
        lines.append(f"{r['hardware']:14s} {r['policy']:11s} {r['batch']:5d} {r['max_batch']:5d} "
                     f"{r['tpot_ms']:8.2f} {r['tokens_per_s']:9.0f} {r['hbm_gb_per_device']:10.1f}  {r['note']}")
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict], seq_len: int) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['hardware']}\n{r['policy']}" for r in rows]
    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    for ax, key, title in zip(axes, ("tokens_per_s", "tpot_ms", "max_batch", "hbm_gb_per_device"),
                              ("node tokens/s", "time per output token (ms)", "max batch", "HBM per device (GB)"),
                              strict=True):
        ax.bar(range(len(rows)), [r[key] for r in rows], color=["C0" if "SN40L" in r["hardware"] else "C1" for r in rows])
        ax.set_xticks(range(len(rows)), labels, rotation=60, fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.suptitle(f"compare-hw at a {seq_len}-token prompt")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()
