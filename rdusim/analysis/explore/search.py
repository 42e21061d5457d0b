"""The mapping explorer: search the space around a seed mapping, rank, re-score, explain.

Owns: ``explore``, ``ExploreResult``, ``pareto_front``, the ranking tables. Imports: estimate,
tasks (what workers run), execution, metrics, mapping, numpy, pandas.

Two levels: the analytical estimator (``rdusim.analysis.explore.estimate``) scores every candidate
the search visits; the discrete-event simulator re-scores the best ``rescore`` of them and
the seed, and the final ranking is the simulator's. Search is exhaustive when the space is
no larger than the budget, else a seeded evolutionary search (the seed's one-gene
neighbours first, then tournament selection, uniform crossover and mutation), so a seed
gives one ranking. Evaluations run through an executor (worker processes, or a Dask
cluster); results come back in submission order, so the ranking does not depend on it.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rdusim.analysis.execution import Executor, LocalExecutor
from rdusim.analysis.explore.estimate import Evaluator, Problem
from rdusim.analysis.explore.tasks import Genome, evaluator, layers_task, simulate_many_task
from rdusim.analysis.metrics import STEP_FIGURES
from rdusim.errors import ConfigError
from rdusim.mapping.space import Space, speculative_genes

Progress = Callable[[str, int, int], None]
#: a batch missing fewer layers than this per worker builds them in the search's process: a
#: decode layer takes about 2-3 ms to estimate, a round trip to the workers about as long
#: (benchmarks/RESULTS.md, "Explorer estimator and re-scores")
LOCAL_LAYERS = 8
#: the cyclic garbage collector's thresholds while exploring (default 700, 10, 10): the estimator
#: keeps many objects (kernel plans, their stages, chunks and items) and makes few cycles, and
#: at the default a decode search spends about 15 % of its time in collections that find
#: nothing (benchmarks/RESULTS.md, "Explorer, continued")
GC_THRESHOLDS = (50_000, 20, 100)


# ------------------------------------------------------------------------ search
@dataclass(frozen=True)
class ExploreResult:
    problem: Problem
    space: Space
    method: str
    estimates: pd.DataFrame        # every candidate the search visited, estimator ranking
    ranking: pd.DataFrame          # re-scored candidates, simulator ranking (seed included)
    pareto: pd.DataFrame           # non-dominated feasible candidates (estimator figures)
    agreement: dict[str, float]
    rates: dict[str, float]        # candidates per second: estimator, simulator
    documents: dict[Genome, dict[str, Any]]   # mapping data of every re-scored candidate


def explore(problem: Problem, *, budget: int = 1000, rescore: int = 20, seed: int = 0,
            executor: Executor | None = None, progress: Progress | None = None) -> ExploreResult:
    """Search, rank with the estimator, re-score the best with the simulator."""
    ev = evaluator(problem)
    space = ev.space
    own = executor is None
    executor = executor or LocalExecutor(1)
    with _few_collections():
        try:
            start = time.perf_counter()
            method, rows = _search(problem, space, budget, seed, executor, progress)
            est_s = time.perf_counter() - start
            estimates = _estimate_frame(space, rows, problem.objective, ev)
            feasible = estimates[estimates["fits"]]
            if feasible.empty:
                reasons = estimates["reason"].value_counts().head(3)
                detail = "; ".join(f"{n} x {r}" for r, n in reasons.items())
                raise ConfigError(f"{problem.seed_path}: no candidate mapping fits the constraints "
                                  f"({len(estimates)} tried): {detail}")
            # one per distinct estimate: genomes differing only in settings that change nothing
            distinct = feasible.drop_duplicates(subset=["step_s", "hbm_used_bytes", "batch"])
            picks = list(dict.fromkeys([*distinct["genome"].head(rescore), space.seed]))
            start = time.perf_counter()
            sims = _simulate(problem, ev, picks, executor, progress)
            sim_s = time.perf_counter() - start
        finally:
            if own:
                executor.close()
    ranking = _ranking(space, estimates, sims, problem.objective)
    return ExploreResult(problem, space, method, estimates, ranking, pareto_front(feasible),
                         _agreement(ranking), {"estimator": len(rows) / est_s, "simulator": len(picks) / sim_s},
                         {g: ev.data(g) for g in picks})


@contextmanager
def _few_collections() -> Iterator[None]:
    """``GC_THRESHOLDS`` while exploring (worker processes forked meanwhile inherit them); the
    previous thresholds afterwards. Collections change no figure, only when memory is freed."""
    before = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _simulate(problem: Problem, ev: Evaluator, picks: list[Genome], executor: Executor,
              progress: Progress | None) -> list[dict[str, Any]]:
    """Re-score ``picks`` (results in their order). Candidates sharing their first layer type's key
    go to a worker together (its ``LayerCache`` reuses the layers they share), in runs of at most
    ``len(picks) / (2 x workers)``, so the workers stay evenly loaded."""
    keys = {g: tuple(ev.layer_key(g, t) for t in ev.counts) for g in picks}
    ordered = sorted(picks, key=lambda g: (keys[g], g))
    size = max(1, math.ceil(len(ordered) / (2 * executor.workers))) if executor.workers > 1 else 1
    runs: list[list[Genome]] = []
    for _, group in itertools.groupby(ordered, key=lambda g: keys[g][:1]):
        members = list(group)
        runs += [members[i:i + size] for i in range(0, len(members), size)]
    # workers that did not fork from this process (Dask) get the layer types the estimator built
    # for their candidates: unpickling them costs less than building them (benchmarks/RESULTS.md,
    # "Explorer estimator, vectorised caches"); forked local workers hold them already
    ship = not isinstance(executor, LocalExecutor)
    tasks = [(problem, run, _builds(ev, run) if ship else None) for run in runs]
    done = executor.map(simulate_many_task, tasks,
                        progress=(lambda k, total: progress("simulate", k, total)) if progress else None)
    by_genome = {row["genome"]: row for rows in done for row in rows}
    return [by_genome[g] for g in picks]


def _builds(ev: Evaluator, genomes: list[Genome]) -> dict[tuple[str, Any], Any]:
    """The layer types of ``genomes`` that ``ev``'s estimator built, by layer type and layer key."""
    found = {}
    for genome in genomes:
        for layer_type in ev.counts:
            key = (layer_type, ev.layer_key(genome, layer_type))
            if key in ev.simulated.builds:
                found[key] = ev.simulated.builds[key]
    return found


def _search(problem: Problem, space: Space, budget: int, seed: int, executor: Executor,
            progress: Progress | None) -> tuple[str, dict[Genome, dict[str, Any]]]:
    rows: dict[Genome, dict[str, Any]] = {}
    ranked: list[tuple[Any, ...]] = []  # every row's ``_key``, kept sorted (the keys are distinct: genome last)

    ev = evaluator(problem)

    def run(genomes: list[Genome], here: bool = False) -> None:
        """Workers (or, ``here``, this process) estimate the layers no earlier batch built (each
        once, similar layers on the same worker, whose kernel plans they share); this process's
        evaluator keeps every layer and composes the batch's rows."""
        genomes = [g for g in dict.fromkeys(genomes) if g not in rows][: budget - len(rows)]
        _build_missing(problem, ev, genomes, executor, here)
        for genome, row in zip(genomes, ev.estimate(genomes), strict=True):
            rows[genome] = row
            bisect.insort(ranked, _key(row, problem.objective))
        if progress:
            progress("estimate", len(rows), budget)

    if space.size <= budget:
        all_genomes = list(itertools.product(*(range(len(g.choices)) for g in space.genes)))
        for i in range(0, len(all_genomes), 512):
            run(all_genomes[i:i + 512])
        return "exhaustive", rows
    rng = np.random.default_rng(seed)
    # an evolutionary search builds every layer in this process, the first batch (the seed's
    # neighbours) too: the later generations (built here: few layers each) need the kernel
    # plans of the first batch's layers, and a worker's plans cost more to send back than to
    # build again (``pickle.loads`` of decode's 382 plans at 128K: 0.27 s, building them about
    # 0.3 s); with the first batch on 2 workers the search took longer than in one process
    # (benchmarks/RESULTS.md, "Explorer, continued"). The workers start (fork) at the re-scores
    # then, holding this process's kernel plans, which the re-scores plan with.
    run([space.seed, *_neighbours(space, space.seed)], here=True)
    population = 32
    stale = 0
    while len(rows) < budget and stale < 20:
        parents = [key[-1] for key in ranked[:population]]  # the best rows so far
        children: list[Genome] = []
        for _ in range(population * 4):
            child = _child(space, rng, parents)
            if child not in rows and child not in children:
                children.append(child)
            if len(children) >= population:
                break
        stale = stale + 1 if not children else 0
        if children:
            run(children, here=True)
    return "evolutionary", rows


def _build_missing(problem: Problem, ev: Evaluator, genomes: list[Genome], executor: Executor,
                   here: bool = False) -> None:
    """The layers of ``genomes`` that ``ev`` lacks, estimated (by the workers, or here when few or
    ``here``) into it."""
    missing = sorted(ev.missing(genomes), key=lambda item: (item[1], ev.layer_key(*item)))
    if here or len(missing) < max(1, LOCAL_LAYERS * executor.workers):
        # a few layers (a generation's children mostly reuse their parents' layers): built here,
        # as the workers would build them, without a round trip to them
        ev.add_layers(ev.build_layers(missing))
        return
    n = max(1, min(len(missing), executor.workers * 2))
    size = math.ceil(len(missing) / n)
    chunks = [missing[i:i + size] for i in range(0, len(missing), size)]
    for built in executor.map(layers_task, [(problem, c) for c in chunks]):
        ev.add_layers(built)


def _neighbours(space: Space, genome: Genome) -> list[Genome]:
    """Every genome one gene away (so each option is tried against the seed once)."""
    out = []
    for i, gene in enumerate(space.genes):
        for c in range(len(gene.choices)):
            if c != genome[i]:
                out.append(genome[:i] + (c,) + genome[i + 1:])
    return out


def _key(row: dict[str, Any], objective: str) -> tuple[Any, ...]:
    if not row["fits"]:
        return (1, 0.0, row["genome"])
    value = -row["tokens_per_s"] if objective == "throughput" else row["latency_s"]
    return (0, value, row["genome"])


def _child(space: Space, rng: np.random.Generator, parents: list[Genome]) -> Genome:
    a, b = (parents[int(rng.integers(len(parents), size=2).min())] for _ in range(2))  # tournaments of 2
    mask = (rng.random(len(a)) < 0.5).tolist()
    child = [x if m else y for x, y, m in zip(a, b, mask, strict=True)]
    for _ in range(1 + int(rng.integers(2))):
        i = int(rng.integers(len(child)))
        child[i] = int(rng.integers(len(space.genes[i].choices)))
    return tuple(child)


# ------------------------------------------------------------------------ tables
def describe(space: Space, genome: Genome) -> dict[str, Any]:
    """Readable columns for a genome: kernels per layer type and attention strategy (and, for a
    speculative seed, the draft model and its length k)."""
    out: dict[str, Any] = {}
    sd = speculative_genes(space, genome)
    if sd is not None:
        out["draft"], out["draft_k"] = sd
    for layer in space.layers:
        base = layer.layer_type
        cuts = sum(1 for i, free in enumerate(layer.cut_is_free) if not free or space.value(genome, f"{base}.cut{i}"))
        out[f"{base}_kernels"] = cuts + 1
        if layer.attention_op is not None:
            heads, batch = space.value(genome, f"{base}.attn")
            out[f"{base}_attention"] = attention_label(heads, batch)
    return out


def attention_label(heads: int, batch: int) -> str:
    if heads == 1 and batch == 1:
        return "replicated"
    if batch == 1:
        return f"TP{heads}"
    if heads == 1:
        return f"DP{batch}"
    return f"TP{heads}xDP{batch}"


COLUMNS = ["genome", "fits", "reason", "batch", *STEP_FIGURES, "hbm_used_bytes",
           "hbm_weights_bytes", "hbm_kv_bytes", "hbm_activations_bytes", "hbm_reserved_bytes", "ddr_used_bytes"]


def _estimate_frame(space: Space, rows: dict[Genome, dict[str, Any]], objective: str, ev: Evaluator) -> pd.DataFrame:
    """Estimator ranking; genomes that spell the same mapping (unused genes) count once (the same
    layers and workload: ``Evaluator.mapping_key``, tested against the documents)."""
    ordered = sorted(rows.values(), key=lambda r: _key(r, objective))
    seed_signature = ev.mapping_key(space.seed)
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for row in ordered:
        key = ev.mapping_key(row["genome"])
        if key not in seen:
            seen.add(key)
            unique.append(rows[space.seed] if key == seed_signature else row)
    frame = pd.DataFrame([{c: r.get(c) for c in COLUMNS} | describe(space, r["genome"]) for r in unique])
    frame.insert(0, "est_rank", range(1, len(frame) + 1))
    frame["is_seed"] = [g == space.seed for g in frame["genome"]]
    return frame


def _ranking(space: Space, estimates: pd.DataFrame, sims: list[dict[str, Any]], objective: str) -> pd.DataFrame:
    by_genome = estimates.set_index("genome", drop=False)
    seed_kernels = next(s for s in sims if s["genome"] == space.seed).get("sim_kernels", [])
    rows = []
    for sim in sims:
        row = by_genome.loc[[sim["genome"]]].iloc[0].to_dict() | sim
        row["why"] = why(seed_kernels, sim.get("sim_kernels", []))
        rows.append(row)
    sign = -1 if objective == "throughput" else 1
    column = "sim_tokens_per_s" if objective == "throughput" else "sim_latency_s"
    rows.sort(key=lambda r: (not r["sim_fits"], sign * r.get(column, 0.0), r["genome"]))
    frame = pd.DataFrame(rows).drop(columns=["sim_kernels"], errors="ignore")
    frame.insert(0, "rank", range(1, len(frame) + 1))
    return frame


def why(seed_kernels: list[dict[str, Any]], kernels: list[dict[str, Any]], n: int = 3) -> str:
    """The kernels whose simulated time changed most against the seed mapping."""
    before = {(k["layer_type"], k["kernel"]): k["latency_s"] for k in seed_kernels}
    after = {(k["layer_type"], k["kernel"]): k["latency_s"] for k in kernels}
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in dict.fromkeys([*before, *after])}
    top = sorted(delta.items(), key=lambda kv: -abs(kv[1]))[:n]
    return "; ".join(f"{t} {k} {d * 1e3:+.2f} ms" for (t, k), d in top if abs(d) > 0) or "same kernels as the seed"


def _agreement(ranking: pd.DataFrame) -> dict[str, float]:
    both = ranking[ranking["sim_fits"] & ranking["fits"]]
    if len(both) < 2:
        rho = float("nan")
    else:
        rho = float(both["step_s"].rank().corr(both["sim_step_s"].rank()))
    error = (both["step_s"] - both["sim_step_s"]).abs() / both["sim_step_s"]
    return {"candidates": float(len(both)), "spearman_rho": rho,
            "worst_relative_error": float(error.max()) if len(both) else float("nan")}


def pareto_front(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows not dominated in (latency down, throughput up, HBM bytes down); latency is TPOT at
    decode, TTFT at prefill (``rdusim.analysis.metrics``)."""
    if frame.empty:
        return frame
    points = np.column_stack([frame["latency_s"], -frame["tokens_per_s"], frame["hbm_used_bytes"]]).astype(float)
    keep = np.ones(len(points), dtype=bool)
    for i, p in enumerate(points):
        dominated = np.all(points <= p, axis=1) & np.any(points < p, axis=1)
        keep[i] = not dominated.any()
    front = frame[keep].drop_duplicates(subset=["latency_s", "tokens_per_s", "hbm_used_bytes"])
    return front.sort_values("latency_s").reset_index(drop=True)
