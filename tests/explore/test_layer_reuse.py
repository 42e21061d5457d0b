"""Re-scores reuse simulated layer types: candidates that share the genes (and the batch) of a
layer type and of every layer type before it take its simulation from the evaluator's
``LayerCache``; the step time equals a fresh simulation of the whole candidate bit for bit
(what ``rdusim simulate top-NN.yaml`` reproduces), the per-kernel figures to 1e-12."""

from __future__ import annotations

from pathlib import Path

from rdusim.analysis.explore.estimate import Problem
from rdusim.analysis.explore.search import _neighbours
from rdusim.analysis.explore.tasks import evaluator, simulate_task
from rdusim.analysis.result import simulate
from rdusim.mapping.space import load_candidate

ROOT = Path(__file__).resolve().parents[2]
DECODE = str(ROOT / "mappings/deepseek-r1/decode.yaml")


def test_rescores_sharing_layers_reuse_them_and_match_a_fresh_simulation() -> None:
    problem = Problem(DECODE, ("workload.seq_len=32768",), "throughput", None)
    ev = evaluator(problem)
    space = ev.space
    moe_gene = next(i for i, g in enumerate(space.genes) if g.name.startswith("moe.seg"))
    genomes = [space.seed] + [g for g in _neighbours(space, space.seed) if g[moe_gene] != space.seed[moe_gene]][:4]
    hits, compared = ev.simulated.hits, 0
    for genome in genomes:
        row = simulate_task(problem, genome)
        assert "sim_step_s" in row, row["sim_reason"]
        compared += 1
        fresh = simulate(load_candidate(ev.seed, ev.data(genome)), record_events=False)
        assert row["sim_step_s"] == fresh.total_s
        latencies = [k["latency_s"] for k in row["sim_kernels"]]
        assert latencies == list(fresh.kernels["latency_s"])
        assert [k["bound"] for k in row["sim_kernels"]] == list(fresh.kernels["bound"])
    assert compared == len(genomes) == 5
    # the neighbours change only a MoE gene: the dense layers (before the MoE ones) come from the cache
    assert ev.simulated.hits - hits >= len(genomes) - 1


def test_one_worker_and_two_give_the_same_estimates_and_ranking() -> None:
    """Layers built on either worker, composed in the search's process: the batch layout and the
    worker count change nothing, bit for bit."""
    import pandas as pd

    from rdusim.analysis.execution import LocalExecutor
    from rdusim.analysis.explore.search import explore

    problem = Problem(DECODE, ("workload.seq_len=32768",), "throughput", 0.1)
    results = []
    for workers in (1, 2):
        executor = LocalExecutor(workers)
        results.append(explore(problem, budget=150, rescore=3, seed=3, executor=executor))
        executor.close()
    one, two = results
    pd.testing.assert_frame_equal(one.estimates, two.estimates, check_exact=True)
    pd.testing.assert_frame_equal(one.ranking, two.ranking, check_exact=True)
