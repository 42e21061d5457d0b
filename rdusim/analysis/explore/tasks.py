"""What the explorer's workers run: estimate a batch of candidates, or re-simulate one.

Owns: ``Genome``, ``evaluator`` (one cached ``Evaluator`` per problem and process, with its
kernel plans and simulated layers), ``layers_task``, ``simulate_task``, ``simulate_many_task``. Imports: estimate, metrics, result (simulate_kernels), mapping.
The functions are module-level and their arguments picklable, so worker processes and Dask
workers run the same code as this process.
"""

from __future__ import annotations

from typing import Any

from rdusim.analysis.explore.estimate import Evaluator, LayerEstimate, LayerKey, Problem
from rdusim.analysis.metrics import step_figures
from rdusim.analysis.result import simulate_kernels
from rdusim.errors import MappingError
from rdusim.mapping.build import LayerBuild
from rdusim.mapping.space import load_candidate
from rdusim.model.speculative import accepted_tokens_per_step

Genome = tuple[int, ...]

_EVALUATORS: dict[Problem, Evaluator] = {}  # per process: caches live as long as the worker


def evaluator(problem: Problem) -> Evaluator:
    if problem not in _EVALUATORS:
        _EVALUATORS[problem] = Evaluator(problem)
    return _EVALUATORS[problem]


def layers_task(problem: Problem, items: list[tuple[Genome, str]]) -> list[tuple[LayerKey, LayerEstimate]]:
    """Estimate layers the search's own evaluator lacks; it shares them with every later batch."""
    return evaluator(problem).build_layers(items)


def simulate_many_task(problem: Problem, genomes: list[Genome],
                       builds: dict[tuple[str, Any], LayerBuild] | None = None) -> list[dict[str, Any]]:
    """``simulate_task`` for several candidates in one worker (they share its simulated layers).
    ``builds``: their layer types as the search's estimator built them (by layer type and layer
    key), for a worker that did not fork from the search (Dask): it plans with them instead of
    building them again; a worker's own builds are kept."""
    if builds:
        cache = evaluator(problem).simulated
        for key, build in builds.items():
            if key not in cache.builds:
                cache.builds[key] = build
                for plan_key, plan in zip(build.keys, build.kernels, strict=True):
                    cache.kernel_plans.setdefault(plan_key, plan)
    return [simulate_task(problem, genome) for genome in genomes]


def simulate_task(problem: Problem, genome: Genome) -> dict[str, Any]:
    """Re-score one candidate with the discrete-event simulator; a layer type whose kernels an
    earlier candidate of this process shared (same layer key) reuses that simulation."""
    ev = evaluator(problem)
    loaded = load_candidate(ev.seed, ev.data(genome))
    keys = {t: ev.layer_key(genome, t) for t in ev.counts}
    try:
        # ``simulate``'s step time, kernel latencies and HBM fit, without its breakdown table
        result = simulate_kernels(loaded, layers=(ev.simulated, keys))
    except MappingError as error:
        return {"genome": genome, "sim_fits": False, "sim_reason": str(error).splitlines()[0]}
    fit = result.hbm
    w = loaded.spec.workload
    figures = step_figures(loaded.spec.phase, result.total_s, batch=w.batch, seq_len=w.seq_len,
                           accepted=accepted_tokens_per_step(loaded.spec))
    slo, tpot = problem.slo_tpot_s, figures["tpot_s"]
    reason = fit.reason or (f"TPOT {tpot * 1e3:.3f} ms over the SLO" if slo and tpot > slo else "")
    kernels = result.kernels
    return {"genome": genome, "sim_fits": not reason, "sim_reason": reason,
            **{f"sim_{k}": v for k, v in figures.items()}, "sim_hbm_used_bytes": fit.used_bytes,
            "sim_kernels": kernels}
