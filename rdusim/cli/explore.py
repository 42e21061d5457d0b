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

from rdusim.analysis.execution import make_executor
from rdusim.analysis.explore.estimate import Problem
from rdusim.analysis.explore.export import seed_mapping, standalone_document
from rdusim.analysis.explore.search import ExploreResult, explore
from rdusim.analysis.sweep import policy_overrides
from rdusim.cli import command_parser
from rdusim.cli.options import bounded_int, finite_float, nonnegative_int, policy_list, positive_int
from rdusim.cli.output import Outputs
from rdusim.cli.progress import bar
from rdusim.config.loader import dump_document
from rdusim.errors import ConfigError
from rdusim.mapping.bundle import load_mapping

#: limits of one search: the estimates table grows with the budget, each top mapping is simulated
MAX_BUDGET = 1_000_000
MAX_TOP = 1000


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = command_parser(subparsers, "explore")
    parser.add_argument("--model", required=True, help="model with shipped mappings, e.g. deepseek-r1")
    parser.add_argument("--phase", choices=("prefill", "decode"), required=True)
    parser.add_argument("--hw", help="node YAML (default: the seed mapping's hardware)")
    parser.add_argument("--mapping", help="seed mapping (default: mappings/<model>/<phase>[-<policy>].yaml)")
    parser.add_argument("--seq-len", type=positive_int, help="prompt length in tokens (default: the seed's)")
    parser.add_argument("--policy", default="none", help="KV policy ('none' = full cache), e.g. snapstream")
    parser.add_argument("--objective", choices=("throughput", "latency"), default="throughput")
    parser.add_argument("--slo-tpot-ms", type=finite_float(0.0, exclusive=True),
                        help="decode: time-per-output-token limit in ms")
    parser.add_argument("--budget", type=bounded_int(MAX_BUDGET, "the search keeps every estimate in memory"),
                        default=2000, help="estimator evaluations (default 2000)")
    parser.add_argument("--top", type=bounded_int(MAX_TOP, "each is re-simulated"), default=10,
                        help="mappings to re-simulate, print and write")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="search seed (same seed, same ranking)")
    parser.add_argument("--workers", type=positive_int, default=None, help="worker processes (default: all cores)")
    parser.add_argument("--dask", metavar="ADDRESS", help="run evaluations on this Dask scheduler")
    parser.add_argument("--out", help="output folder (created; top-NN.yaml of an earlier run are replaced; "
                                      "default: print only)")
    parser.set_defaults(handler=run)


def _problem(args: argparse.Namespace) -> Problem:
    """The search problem, with the seed mapping loaded once here so that bad options fail now."""
    policies = policy_list("--policy", args.policy)
    if len(policies) != 1:
        raise ConfigError(f"--policy: explore searches for one KV policy at a time, got {args.policy!r}")
    policy = policies[0]
    overrides: list[tuple[str, str]] = []  # (the option as typed, the override it makes)
    if args.mapping:
        path = Path(args.mapping)
        if args.policy != "none":
            overrides += [(f"--policy {args.policy}", o) for o in policy_overrides(policy, 4.0)]
    else:
        path = seed_mapping(args.model, args.phase, policy)
    if args.seq_len is not None:
        overrides.append((f"--seq-len {args.seq_len}", f"workload.seq_len={args.seq_len}"))
    if args.hw:
        overrides.append((f"--hw {args.hw}", f"hardware={Path(args.hw).absolute()}"))
    seed = load_mapping(path, overrides=overrides)
    if seed.spec.phase != args.phase:
        raise ConfigError(f"--mapping {args.mapping}: is a {seed.spec.phase} mapping but --phase is {args.phase}")
    slo = args.slo_tpot_ms / 1e3 if args.slo_tpot_ms is not None else None
    return Problem(str(path.resolve()), tuple(text for _, text in overrides), args.objective, slo)


def run(args: argparse.Namespace) -> int:
    outputs = Outputs()
    out = outputs.folder("--out", args.out, stale="top-*.yaml")
    problem = _problem(args)
    executor = make_executor(args.workers, args.dask)
    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:  # one bar per stage (setdefault would open a new one every call)
            bars[stage] = bar(total, stage, "cand")
        bars[stage].update(done - bars[stage].n)

    try:
        result = explore(problem, budget=args.budget, rescore=args.top, seed=args.seed, executor=executor,
                         progress=progress)
    finally:
        executor.close()
        for stage_bar in bars.values():
            stage_bar.close()
    sys.stdout.write(summary(result, args.top))
    if out is not None:
        _write(result, outputs, out, args.top)
    return 0


def summary(result: ExploreResult, top: int) -> str:
    r = result.ranking
    columns = [c for c in ("rank", "est_rank", "batch", "sim_step_s", "sim_latency_s", "sim_tokens_per_s",
                           "sim_hbm_used_bytes", "draft", "draft_k", "dense_kernels", "moe_kernels", "dense_attention",
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


def _write(result: ExploreResult, outputs: Outputs, out: Path, top: int) -> None:
    from rdusim.analysis.plots import pareto_figure_png  # noqa: PLC0415 (matplotlib only when writing)

    outputs.put(out / "ranking.csv", result.ranking.to_csv(index=False))
    outputs.put(out / "estimates.csv", result.estimates.to_csv(index=False))
    outputs.put(out / "pareto.csv", result.pareto.to_csv(index=False))
    outputs.put(out / "pareto.png", pareto_figure_png(result.estimates, result.pareto))
    for row in result.ranking.head(top).itertuples():
        if not row.sim_fits:
            continue
        header = (f"# rdusim explore: rank {row.rank} (estimator rank {row.est_rank}) for {result.problem.objective}\n"
                  f"# reproduces under `rdusim simulate`: total_s={row.sim_step_s!r} latency_s={row.sim_latency_s!r} "
                  f"tokens_per_s={row.sim_tokens_per_s!r}\n# why: {row.why}\n")
        outputs.put(out / f"top-{row.rank:02d}.yaml", header + dump_document(standalone_document(result, row.genome)))
    written = outputs.commit()
    print(f"wrote {len(written)} files to {out}", file=sys.stderr)
