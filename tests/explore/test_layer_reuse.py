"""Re-scores reuse simulated layer types: candidates that share the genes (and the batch) of a
layer type and of every layer type before it take its simulation from the evaluator's
``LayerCache``; the step time equals a fresh simulation of the whole candidate bit for bit
(what ``rdusim simulate top-NN.yaml`` reproduces), the per-kernel figures to 1e-12."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdusim.analysis.explore.estimate import Problem
from rdusim.analysis.explore.search import _neighbours
from rdusim.analysis.explore.tasks import evaluator, simulate_task
from rdusim.analysis.result import simulate
from rdusim.errors import MappingError
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


def test_prefill_rescores_reuse_kernel_calls_shifted_and_match_a_fresh_simulation() -> None:
    """Prefill candidates differing in their dense layers start their MoE layers at other times:
    the MoE layers' kernel calls come from the ``LayerCache``'s kernel calls, shifted
    (``rdusim.sim.reuse``), and every step time, kernel latency and bound is a fresh simulation's."""
    problem = Problem(str(ROOT / "mappings/deepseek-r1/prefill.yaml"), ("workload.seq_len=8192",), "latency", None)
    ev = evaluator(problem)
    space = ev.space
    dense = [i for i, g in enumerate(space.genes) if g.name.startswith("dense.")]
    genomes = [space.seed, *[g for g in _neighbours(space, space.seed) if any(g[i] != space.seed[i] for i in dense)][:20]]
    hits, compared = ev.simulated.kernel_calls.hits, 0
    for genome in genomes:
        row = simulate_task(problem, genome)
        if "sim_step_s" not in row:   # does not fit SRAM
            continue
        compared += 1
        fresh = simulate(load_candidate(ev.seed, ev.data(genome)), record_events=False)
        assert repr(row["sim_step_s"]) == repr(fresh.total_s)
        assert [k["latency_s"] for k in row["sim_kernels"]] == list(fresh.kernels["latency_s"])
        assert [k["bound"] for k in row["sim_kernels"]] == list(fresh.kernels["bound"])
    assert compared >= 8
    assert ev.simulated.kernel_calls.hits - hits >= compared - 1


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


def test_rescores_plan_with_the_layers_the_estimates_built() -> None:
    """The estimator keeps each layer type it built (``LayerCache.builds``, by layer key);
    ``build_plan(built=...)`` takes them, and the plan, and a re-score's figures, are those
    of a plan built from scratch."""
    from rdusim.analysis.explore.estimate import Evaluator
    from rdusim.analysis.result import LayerCache, simulate_kernels
    from rdusim.mapping.build import build_plan

    ev = Evaluator(Problem(DECODE, ("workload.seq_len=32768",), "throughput", None))
    genomes = [ev.space.seed, *_neighbours(ev.space, ev.space.seed)[::9]]
    rows = ev.estimate(genomes)
    taken = 0
    for genome, row in zip(genomes, rows, strict=True):
        keys = {t: ev.layer_key(genome, t) for t in ev.counts}
        built = {t: ev.simulated.builds[t, key] for t, key in keys.items() if (t, key) in ev.simulated.builds}
        if row["fits"]:
            assert len(built) == len(keys)
        loaded = load_candidate(ev.seed, ev.data(genome))
        if len(built) < len(keys):
            continue
        taken += 1
        assert build_plan(loaded, built=built) == build_plan(loaded)
        cached = LayerCache(kernel_plans=ev.simulated.kernel_plans, builds=ev.simulated.builds)
        try:
            fresh = simulate(loaded, record_events=False)
        except MappingError as error:  # does not fit HBM: the same error
            with pytest.raises(MappingError) as again_error:
                simulate_kernels(loaded, layers=(cached, keys))
            assert str(again_error.value) == str(error)
            continue
        again = simulate_kernels(loaded, layers=(cached, keys))
        assert repr(again.total_s) == repr(fresh.total_s)
        assert [k["latency_s"] for k in again.kernels] == list(fresh.kernels["latency_s"])
    assert taken >= 10
