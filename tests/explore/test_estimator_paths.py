"""The estimator's fast paths against its plain definitions, over random genomes (hypothesis):

- kernel estimates: per-chunk sums once per chunk object and tier totals by ``np.cumsum``
  against the item-by-item loop (``_scalar_estimate`` below, the estimator before them), on
  kernel plans built fresh (no caches) for the genome;
- kernel plans from the caches (the evaluator's, and the plan builder's kept attention blocks
  and expert items) equal the ones built fresh;
- a batch's figures equal each genome estimated alone by a fresh evaluator, and the step time
  the layer-by-layer sum in the same order;
- genomes that spell the same kernels (they differ only in genes no kernel reads) share a layer key.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdusim.analysis.explore.estimate import Evaluator, KernelEstimate, Problem
from rdusim.config.schema import DDR, HBM
from rdusim.errors import MappingError
from rdusim.mapping import stages
from rdusim.mapping.build import build_layer
from rdusim.mapping.bundle import LoadedMapping
from rdusim.mapping.plan import KernelPlan
from rdusim.mapping.space import load_candidate

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = {"decode": Problem(str(ROOT / "mappings/deepseek-r1/decode.yaml"), ("workload.seq_len=16384",),
                              "throughput", 0.1),
            "prefill": Problem(str(ROOT / "mappings/deepseek-r1/prefill.yaml"), ("workload.seq_len=8192",),
                               "latency", None)}
EVALUATORS = {name: Evaluator(problem) for name, problem in PROBLEMS.items()}


def _scalar_estimate(kernel: KernelPlan, loaded: LoadedMapping) -> KernelEstimate:
    """The closed form item by item (``kernel_estimate``'s definition)."""
    system = loaded.system
    socket = system.socket
    names = {s.name: i for i, s in enumerate(kernel.stages)}
    finish = np.zeros((len(kernel.stages), kernel.n_chunks))
    busy = np.zeros(len(kernel.stages))
    totals = {HBM: 0.0, DDR: 0.0}
    p2p_bytes = 0.0
    for s, stage in enumerate(kernel.stages):
        inputs = [names[i] for i in stage.inputs]
        prev = 0.0
        for c, chunk in enumerate(stage.chunks):
            work = sum(item.work for item in chunk.items)
            load = 0.0
            for item in chunk.items:
                for tier, nbytes in item.loads:
                    load += nbytes / socket.tier_bytes_per_s(tier)
                    totals[tier] += nbytes
            for tier, nbytes in chunk.stores:
                totals[tier] += nbytes
            compute = work / stage.rate_ops_per_s if stage.rate_ops_per_s > 0 and work > 0 else 0.0
            send = chunk.p2p_steps * socket.p2p_latency_s + chunk.p2p_bytes / socket.p2p_bytes_per_s \
                if chunk.p2p_bytes > 0 else 0.0
            p2p_bytes += chunk.p2p_bytes
            ready = max((finish[i, -1] if stage.is_barrier else finish[i, c] for i in inputs), default=0.0)
            if stage.is_barrier and c > 0:
                ready = 0.0
            prev = max(prev, ready) + max(compute, load) + send
            finish[s, c] = prev
            busy[s] += compute
    hbm, ddr = totals[HBM] / socket.tier_bytes_per_s(HBM), totals[DDR] / socket.tier_bytes_per_s(DDR)
    comm = p2p_bytes / socket.p2p_bytes_per_s
    body = max(float(finish.max(initial=0.0)), max(hbm, ddr), comm)
    latency = socket.launch_s(kernel.orchestration) + body + system.sync_s
    return KernelEstimate(kernel.name, latency, float(busy.max(initial=0.0)), hbm + ddr, comm)


def _genomes(name: str) -> st.SearchStrategy[tuple[int, ...]]:
    """Any genome, or (most layers build then) the seed with a few genes changed, as the search makes them."""
    space = EVALUATORS[name].space
    anything = st.tuples(*(st.integers(0, len(g.choices) - 1) for g in space.genes))

    def mutate(changes: list[tuple[int, int]]) -> tuple[int, ...]:
        genome = list(space.seed)
        for i, value in changes:
            genome[i % len(genome)] = value % len(space.genes[i % len(genome)].choices)
        return tuple(genome)

    near = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=4).map(mutate)
    return st.one_of(near, near, anything)


def _check(name: str, genomes: list[tuple[int, ...]]) -> None:
    ev = EVALUATORS[name]
    rows = ev.estimate(genomes)
    for genome, row in zip(genomes, rows, strict=True):
        alone = Evaluator(PROBLEMS[name]).estimate([genome])[0]
        assert alone == row
        loaded = load_candidate(ev.seed, ev.data(genome))
        step = 0.0
        for layer_type, count in ev.counts.items():
            stages._block_items.cache_clear()
            stages._routed_items.cache_clear()
            try:
                built = build_layer(loaded, layer_type)
            except MappingError as error:
                assert not row["fits"]
                assert ev._layer(genome, layer_type).reason == str(error).splitlines()[0]
                continue
            layer = ev._layer(genome, layer_type)
            assert list(layer.kernels) == [_scalar_estimate(k, loaded) for k in built.kernels]
            assert [ev._kernel_plans[key] for key in built.keys if key in ev._kernel_plans] == \
                [k for k, key in zip(built.kernels, built.keys, strict=True) if key in ev._kernel_plans]
            step = step + layer.latency_s * float(count)
        if row["fits"]:
            assert row["step_s"] == step + (row.get("draft_s") or 0.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_genomes("decode"), min_size=1, max_size=4))
def test_decode_estimates_equal_the_scalar_path(genomes: list[tuple[int, ...]]) -> None:
    _check("decode", genomes)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_genomes("prefill"), min_size=1, max_size=3))
def test_prefill_estimates_equal_the_scalar_path(genomes: list[tuple[int, ...]]) -> None:
    _check("prefill", genomes)


def test_genomes_spelling_the_same_kernels_share_the_layer() -> None:
    ev = EVALUATORS["decode"]
    space = ev.space
    seed = list(space.seed)
    # fuse every movable boundary of the MoE layer: only the lead segment's settings are read
    for i, gene in enumerate(space.genes):
        if gene.name.startswith("moe.cut"):
            seed[i] = 0
    fused = tuple(seed)
    other = list(fused)
    tp = next(i for i, g in enumerate(space.genes) if g.name == "moe.seg4.tp")
    other[tp] = (other[tp] + 1) % len(space.genes[tp].choices)  # a segment that is not the lead one
    assert ev.layer_key(fused, "moe") == ev.layer_key(tuple(other), "moe")
    assert ev.data(fused)["layers"]["moe"] == ev.data(tuple(other))["layers"]["moe"]
    a, b = Evaluator(PROBLEMS["decode"]).estimate([fused, tuple(other)])
    assert {k: v for k, v in a.items() if k != "genome"} == {k: v for k, v in b.items() if k != "genome"}


def _document_signature(ev: Evaluator, genome: tuple[int, ...]) -> str:
    """What the explorer's estimate table deduplicated by before ``mapping_key``: the document."""
    data = ev.data(genome)
    return json.dumps([data["layers"], data["workload"]], sort_keys=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROBLEMS)), st.data())
def test_mapping_key_partitions_like_the_documents(name: str, data: st.DataObject) -> None:
    ev = EVALUATORS[name]
    genomes = data.draw(st.lists(_genomes(name), min_size=2, max_size=6))
    # pairs that spell the same document are frequent only by construction: add a fused twin
    genomes.append(_fused_twin(ev, genomes[0]))
    for a in genomes:
        for b in genomes:
            assert (ev.mapping_key(a) == ev.mapping_key(b)) == \
                (_document_signature(ev, a) == _document_signature(ev, b))


def _fused_twin(ev: Evaluator, genome: tuple[int, ...]) -> tuple[int, ...]:
    """The genome with a setting of a non-lead segment of a fully fused MoE kernel changed (the
    same kernels), after fusing it."""
    space = ev.space
    fused = [0 if g.name.startswith("moe.cut") else v for g, v in zip(space.genes, genome, strict=True)]
    tp = next(i for i, g in enumerate(space.genes) if g.name == "moe.seg4.tp")
    fused[tp] = (fused[tp] + 1) % len(space.genes[tp].choices)
    return tuple(fused)


def test_mapping_key_equal_for_the_same_document() -> None:
    ev = EVALUATORS["decode"]
    twin = _fused_twin(ev, ev.space.seed)
    once = list(twin)
    tp = next(i for i, g in enumerate(ev.space.genes) if g.name == "moe.seg4.tp")
    once[tp] = (once[tp] + 1) % len(ev.space.genes[tp].choices)
    assert ev.mapping_key(twin) == ev.mapping_key(tuple(once))
    assert _document_signature(ev, twin) == _document_signature(ev, tuple(once))
    assert ev.mapping_key(twin) != ev.mapping_key(ev.space.seed)
