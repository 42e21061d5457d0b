"""``rdusim simulate`` on a ``gpu_mapping``: the GPU step's table, JSON or CSV.

Owns: ``run_gpu``. Imports: analysis.gpu, cli.output. Not a subcommand of its own:
``simulate`` hands GPU mappings over to it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from rdusim.analysis.gpu.predict import gpu_result_rows, load_gpu_mapping, simulate_gpu_mapping
from rdusim.cli.output import Outputs
from rdusim.errors import ConfigError


def run_gpu(args: argparse.Namespace) -> int:
    if args.trace:
        raise ConfigError("--trace: a Chrome trace is not available for GPU mappings yet; "
                          "use --format csv for the per-kernel times")
    outputs = Outputs()
    out = outputs.file("--out", args.out)  # checked before any work
    overrides = list(args.overrides)  # --seq-len and --batch as overrides: errors name the option
    for option, key, value in (("--seq-len", "seq_len", args.seq_len), ("--batch", "batch", args.batch)):
        if value is not None:
            overrides.append((f"{option} {value}", f"workload.{key}={value}"))
    spec, model, node = load_gpu_mapping(args.mapping, args.hw, overrides)
    result = simulate_gpu_mapping(spec, model, node)
    rows = gpu_result_rows(result)
    summary = {
        "mapping": result.name, "hardware": result.hardware, "phase": result.phase,
        "launch": result.mode, "batch": result.batch, "seq_len": result.seq_len,
        "kv_len": result.kv_len, "policy": result.policy, "step_ms": result.step.seconds * 1e3,
        "tokens_per_s": result.tokens_per_s, "kernel_launches": result.step.launches,
        "hbm_gb": result.hbm_bytes / 1e9, "weights_gb": result.weight_bytes / 1e9,
        "kv_gb": result.kv_bytes / 1e9, "max_batch": result.max_batch,
    }
    if spec.clock != "full":  # the SM clock under the power limit (docs/gpu.md); absent at full clock
        summary["clock"] = spec.clock
    if args.format == "json":
        text = json.dumps({"summary": summary, "kernels": rows}, indent=2) + "\n"
    elif args.format == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=["kernel", "time_us", "share"])
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    else:
        text = _table(summary, rows)
    if out is not None:
        outputs.put(out, text)
        outputs.commit()
    else:
        sys.stdout.write(text)
    return 0


def _table(summary: dict, rows: list[dict]) -> str:
    lines = [f"{summary['mapping']} on {summary['hardware']} ({summary['phase']}, {summary['launch']} launch"
             f"{', ' + summary['clock'] + ' clock' if 'clock' in summary else ''})",
             f"  batch {summary['batch']}, prompt {summary['seq_len']} tokens, KV {summary['kv_len']} "
             f"tokens/sequence ({summary['policy']})",
             f"  step {summary['step_ms']:.3f} ms, {summary['tokens_per_s']:.0f} tokens/s, "
             f"{summary['kernel_launches']} kernel launches",
             f"  HBM {summary['hbm_gb']:.1f} GB (weights {summary['weights_gb']:.1f}, KV {summary['kv_gb']:.1f}); "
             f"max batch {summary['max_batch']}", "",
             f"  {'kernel':28s} {'time (us)':>12s} {'share':>7s}"]
    lines += [f"  {r['kernel']:28s} {r['time_us']:12.1f} {r['share'] * 100:6.1f}%" for r in rows]
    return "\n".join(lines) + "\n"
