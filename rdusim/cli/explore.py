"""``rdusim explore``: propose mappings, rank them, and write the best as YAML.

Writes into ``--out``: ``ranking.csv`` (simulator-scored candidates, best first),
``estimates.csv`` (every candidate the search visited), ``pareto.csv`` and ``pareto.png``,
``top-01.yaml`` ... (each reproduces its row of ranking.csv under ``rdusim simulate``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from rdusim.analysis.estimate import Problem
from rdusim.analysis.execution import make_executor
from rdusim.analysis.explore import (
    ExploreResult,
    explore,
    seed_mapping,
    standalone_document,
)
from rdusim.analysis.sweep import policy_overrides
from rdusim.cli import command_parser
from rdusim.cli.options import policy_list
from rdusim.cli.output import write_atomic, write_atomic_binary
from rdusim.config.loader import dump_document
from rdusim.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "explore")
    parser.add_argument("--model", required=True, help="model with shipped mappings, e.g. deepseek-r1")
    parser.add_argument("--phase", choices=("prefill", "decode"), required=True)
    parser.add_argument("--hw", help="node YAML (default: the seed mapping's hardware)")
    parser.add_argument("--mapping", help="seed mapping (default: mappings/<model>/<phase>[-<policy>].yaml)")
    parser.add_argument("--seq-len", type=int, help="prompt length in tokens (default: the seed's)")
    parser.add_argument("--policy", default="none", help="KV policy ('none' = full cache), e.g. snapstream")
    parser.add_argument("--objective", choices=("throughput", "latency"), default="throughput")
    parser.add_argument("--slo-tpot-ms", type=float, help="decode: time-per-output-token limit in ms")
    parser.add_argument("--budget", type=int, default=2000, help="estimator evaluations (default 2000)")
    parser.add_argument("--top", type=int, default=10, help="mappings to re-simulate, print and write")
    parser.add_argument("--seed", type=int, default=0, help="search seed (same seed, same ranking)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--dask", metavar="ADDRESS", help="run evaluations on this Dask scheduler")
    parser.add_argument("--out", help="output folder (created; default: print only)")
    parser.set_defaults(handler=run)


def _problem(args: argparse.Namespace) -> Problem:
    [policy] = policy_list("--policy", args.policy)
    if args.mapping:
        path = Path(args.mapping)
        if not path.is_file():
            raise ConfigError(f"--mapping: file {args.mapping!r} not found")
        overrides = policy_overrides(policy, 4.0) if args.policy != "none" else []
    else:
        path = seed_mapping(args.model, args.phase, policy)
        overrides = []
    if args.seq_len is not None:
        if args.seq_len <= 0:
            raise ConfigError(f"--seq-len: expected a positive integer, got {args.seq_len}")
        overrides.append(f"workload.seq_len={args.seq_len}")
    if args.hw:
        if not Path(args.hw).is_file():
            raise ConfigError(f"--hw: file {args.hw!r} not found")
        overrides.append(f"hardware={Path(args.hw).resolve()}")
    for name in ("budget", "top"):
        if getattr(args, name) <= 0:
            raise ConfigError(f"--{name}: expected a positive integer, got {getattr(args, name)}")
    slo = args.slo_tpot_ms / 1e3 if args.slo_tpot_ms is not None else None
    return Problem(str(path.resolve()), tuple(overrides), args.objective, slo)


def run(args: argparse.Namespace) -> int:
    problem = _problem(args)
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not out.is_dir():
        raise ConfigError(f"--out: {out} exists and is not a folder")
    executor = make_executor(args.workers, args.dask)
    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        # disable=None: bars on a terminal, silence in logs and CI
        bar = bars.setdefault(stage, tqdm(total=total, desc=stage, unit="cand", file=sys.stderr, disable=None))
        bar.update(done - bar.n)

    try:
        result = explore(problem, budget=args.budget, rescore=args.top, seed=args.seed, executor=executor,
                         progress=progress)
    finally:
        executor.close()
        for bar in bars.values():
            bar.close()
    sys.stdout.write(summary(result, args.top))
    if out is not None:
        _write(result, out, args.top)
    return 0


def summary(result: ExploreResult, top: int) -> str:
    r = result.ranking
    columns = [c for c in ("rank", "est_rank", "batch", "sim_step_s", "sim_latency_s", "sim_tokens_per_s",
                           "sim_hbm_used_bytes", "dense_kernels", "moe_kernels", "dense_attention",
                           "moe_attention", "is_seed", "why") if c in r.columns]
    table = r.head(top + 1)[columns].to_string(index=False, float_format=lambda v: f"{v:.6g}")
    a = result.agreement
    seed = r[r["is_seed"]].iloc[0]
    best = r.iloc[0]
    unit = "ms per token" if result.space.phase == "decode" else "ms to first token"
    lines = [f"search: {result.method}, {len(result.estimates)} distinct mappings estimated "
             f"(space {result.space.size:.3g}); estimator {result.rates['estimator']:.0f} cand/s, "
             f"simulator {result.rates['simulator']:.2f} cand/s", "", table, "",
             f"estimator vs simulator on {a['candidates']:.0f} re-scored: Spearman rho {a['spearman_rho']:.3f}, "
             f"worst relative error {a['worst_relative_error'] * 100:.2f}%",
             f"best: {best['sim_tokens_per_s']:.6g} tokens/s, {best['sim_latency_s'] * 1e3:.4f} {unit}; "
             f"shipped (rank {seed['rank']}): {seed['sim_tokens_per_s']:.6g} tokens/s, "
             f"{seed['sim_latency_s'] * 1e3:.4f} {unit}"]
    return "\n".join(lines) + "\n"


def _write(result: ExploreResult, out: Path, top: int) -> None:
    from rdusim.analysis.plots import pareto_figure_png  # noqa: PLC0415 (matplotlib only when writing)

    files: list[tuple[Path, str | bytes]] = [
        (out / "ranking.csv", result.ranking.to_csv(index=False)),
        (out / "estimates.csv", result.estimates.to_csv(index=False)),
        (out / "pareto.csv", result.pareto.to_csv(index=False)),
        (out / "pareto.png", pareto_figure_png(result.estimates, result.pareto)),
    ]
    for row in result.ranking.head(top).itertuples():
        if not row.sim_fits:
            continue
        header = (f"# rdusim explore: rank {row.rank} (estimator rank {row.est_rank}) for {result.problem.objective}\n"
                  f"# reproduces under `rdusim simulate`: total_s={row.sim_step_s!r} latency_s={row.sim_latency_s!r} "
                  f"tokens_per_s={row.sim_tokens_per_s!r}\n# why: {row.why}\n")
        files.append((out / f"top-{row.rank:02d}.yaml", header + dump_document(standalone_document(result, row.genome))))
    out.mkdir(parents=True, exist_ok=True)
    for path, content in files:
        if isinstance(content, bytes):
            write_atomic_binary(path, content)
        else:
            write_atomic(path, content)
    print(f"wrote {len(files)} files to {out}", file=sys.stderr)
