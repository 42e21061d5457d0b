"""Explorer speed and estimator/simulator agreement (benchmarks/RESULTS.md (section Mapping explorer)).

    PYTHONPATH=. python benchmarks/explore_speed.py [--budget 2000] [--rescore 20] [--workers 2]

Estimator rates: cold (fresh caches, every candidate a new genome) through the search, and
warm (the same candidates again, cached kernels and layers, one process). Simulator rate:
the discrete-event re-scores of the search.
"""

from __future__ import annotations

import argparse
import time

from rdusim.analysis.execution import LocalExecutor
from rdusim.analysis.explore.estimate import Evaluator, Problem
from rdusim.analysis.explore.search import explore


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--rescore", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    cases = [("decode", "mappings/deepseek-r1/decode.yaml", "throughput", 0.1),
             ("decode-snapstream", "mappings/deepseek-r1/decode-snapstream.yaml", "throughput", 0.1),
             ("prefill", "mappings/deepseek-r1/prefill.yaml", "latency", None)]
    for name, path, objective, slo in cases:
        problem = Problem(path, ("workload.seq_len=131072",), objective, slo)
        budget = args.budget if name != "prefill" else max(50, args.budget // 10)
        executor = LocalExecutor(args.workers)
        start = time.perf_counter()
        result = explore(problem, budget=budget, rescore=args.rescore, seed=0, executor=executor)
        wall = time.perf_counter() - start
        executor.close()
        genomes = list(result.estimates["genome"])
        ev = Evaluator(problem)
        ev.estimate(genomes)
        start = time.perf_counter()
        ev.estimate(genomes)
        warm = len(genomes) / (time.perf_counter() - start)
        r = result.ranking
        seed, best = r[r["is_seed"]].iloc[0], r.iloc[0]
        metric = "sim_tokens_per_s" if objective == "throughput" else "sim_step_s"
        print(f"{name}: budget {budget}, {len(genomes)} distinct, {wall:.1f} s wall; estimator "
              f"{result.rates['estimator']:.0f} cand/s cold ({args.workers} workers), {warm:.0f} cand/s warm "
              f"(1 process); simulator {result.rates['simulator']:.2f} cand/s; rho "
              f"{result.agreement['spearman_rho']:.3f} over {result.agreement['candidates']:.0f}, worst error "
              f"{result.agreement['worst_relative_error'] * 100:.2f}%; best {metric} {best[metric]:.6g} "
              f"(batch {best['batch']}) vs shipped {seed[metric]:.6g} (batch {seed['batch']}, rank {seed['rank']})")


if __name__ == "__main__":
    main()
