"""The estimator's shortcuts against their reference paths, over random genomes (hypothesis):

- ``kernel_signature`` (what the layer keys are cached by) is equal for two genomes exactly when
  ``layer_kernels`` spells the same kernels for them;
- ``Evaluator.candidate`` (the candidate's spec from parts validated once) equals
  ``load_candidate(seed, data(genome))``'s, and its layers build to the same plans and keys;
- the layer keys kept per genome equal ``layer_key`` computed afresh;
- kernel plans built with what layers of the same graph kept (``build_layer(kept=GraphCache())``:
  op stages, readers, collectives) equal plans built from scratch, collectives included;
- re-scores planned with the layer types the search built, shipped to a worker that did not fork
  from it (Dask), equal re-scores that build them.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rdusim.analysis.explore import search, tasks
from rdusim.analysis.explore.estimate import Evaluator, Problem
from rdusim.errors import MappingError
from rdusim.mapping import build as build_module
from rdusim.mapping.build import build_layer, layer_shape
from rdusim.mapping.space import kernel_signature, layer_kernels, load_candidate
from rdusim.mapping.stages import GraphCache
from rdusim.model.transformer import base_layer_type, layer_graph

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = {"decode": Problem(str(ROOT / "mappings/deepseek-r1/decode.yaml"), ("workload.seq_len=16384",),
                              "throughput", 0.1),
            "snapstream": Problem(str(ROOT / "mappings/deepseek-r1/decode-snapstream.yaml"),
                                  ("workload.seq_len=16384",), "throughput", 0.1),
            "prefill": Problem(str(ROOT / "mappings/deepseek-r1/prefill.yaml"), ("workload.seq_len=8192",),
                               "latency", None),
            "sd": Problem(str(ROOT / "mappings/llama-3.1-70b/decode-sd.yaml"), ("workload.seq_len=8192",),
                          "throughput", None)}
EVALUATORS = {name: Evaluator(problem) for name, problem in PROBLEMS.items()}
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _genome(ev: Evaluator, data: st.DataObject, near: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """A random genome, or ``near`` (default the seed) with a few genes changed."""
    space = ev.space
    if data.draw(st.booleans()):
        return tuple(data.draw(st.integers(0, len(g.choices) - 1)) for g in space.genes)
    genome = list(near or space.seed)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(genome) - 1))
        genome[i] = data.draw(st.integers(0, len(space.genes[i].choices) - 1))
    return tuple(genome)


@SETTINGS
@given(st.sampled_from(sorted(PROBLEMS)), st.data())
def test_kernel_signature_equal_exactly_when_the_kernels_are(name: str, data: st.DataObject) -> None:
    ev = EVALUATORS[name]
    space = ev.space
    a = _genome(ev, data)
    # a random relative, and every genome one gene away (each gene's every choice)
    others = [_genome(ev, data, near=a), *(a[:i] + (c,) + a[i + 1:] for i, g in enumerate(space.genes)
                                           for c in range(len(g.choices)))]
    for layer in space.layers:
        signature = kernel_signature(space, layer)
        for b in others:
            assert (signature(a) == signature(b)) == \
                (layer_kernels(space, layer, a) == layer_kernels(space, layer, b))


def test_kernel_signature_ignores_a_fused_segments_settings() -> None:
    ev = EVALUATORS["decode"]
    space = ev.space
    fused = [0 if g.name.startswith("moe.cut") else v for g, v in zip(space.genes, space.seed, strict=True)]
    other = list(fused)
    tp = space.index["moe.seg4.tp"]
    other[tp] = (other[tp] + 1) % len(space.genes[tp].choices)
    moe = next(layer for layer in space.layers if layer.layer_type == "moe")
    signature = kernel_signature(space, moe)
    assert signature(tuple(fused)) == signature(tuple(other))
    lead = next(s for s, segment in enumerate(moe.segments) if moe.attention_op in segment.ops)
    tp = space.index[f"moe.seg{lead}.tp"]  # the lead segment's (it holds the attention op)
    other[tp] = (fused[tp] + 1) % len(space.genes[tp].choices)
    assert signature(tuple(fused)) != signature(tuple(other))


@SETTINGS
@given(st.sampled_from(sorted(PROBLEMS)), st.data())
def test_candidate_spec_equals_the_loaded_document(name: str, data: st.DataObject) -> None:
    ev = EVALUATORS[name]
    genome = _genome(ev, data)
    light, loaded = ev.candidate(genome), load_candidate(ev.seed, ev.data(genome))
    assert light.spec == loaded.spec
    assert light.spec.model_dump_json() == loaded.spec.model_dump_json()
    for layer_type, kernels in loaded.spec.layers.items():
        assert [k.model_dump_json() for k in light.spec.layers[layer_type]] == [k.model_dump_json() for k in kernels]
    assert (light.model, light.system, light.document.path) == (loaded.model, loaded.system, loaded.document.path)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROBLEMS)), st.data())
def test_candidate_builds_the_same_layers(name: str, data: st.DataObject) -> None:
    ev = EVALUATORS[name]
    genome = _genome(ev, data)
    loaded = load_candidate(ev.seed, ev.data(genome))
    for layer_type in ev.counts:
        light = ev.candidate(genome, only=base_layer_type(layer_type))  # as the estimator builds a layer
        try:
            expected = build_layer(loaded, layer_type)
        except MappingError as error:
            try:
                build_layer(light, layer_type)
            except MappingError as same:
                assert str(same) == str(error)
                continue
            raise AssertionError("the light candidate built a layer the document does not") from None
        assert build_layer(light, layer_type) == expected


@SETTINGS
@given(st.sampled_from(sorted(PROBLEMS)), st.data())
def test_layer_keys_kept_per_genome_equal_fresh_ones(name: str, data: st.DataObject) -> None:
    ev = EVALUATORS[name]
    genome = _genome(ev, data)
    ev.layer_keys(genome)
    fresh = Evaluator(PROBLEMS[name])
    assert ev.layer_keys(genome) == tuple((t, *fresh.layer_key(genome, t)) for t in fresh.counts)
    assert [ev.layer_key(genome, t) for t in ev.counts] == [fresh.layer_key(genome, t) for t in ev.counts]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(PROBLEMS)), st.data())
def test_shared_op_stages_build_the_same_plans(name: str, data: st.DataObject) -> None:
    """Kernel plans built with a ``GraphCache`` kept across the layers of several genomes of one
    graph equal plans built from scratch, stage for stage, and the collectives found equal; a
    layer that does not build gives the same issues."""
    ev = EVALUATORS[name]
    first = _genome(ev, data)
    genomes = [first, *(_genome(ev, data, near=first) for _ in range(5))]
    kept: dict[tuple[str, int, int], tuple[object, GraphCache]] = {}
    for genome in genomes:
        for layer_type in ev.counts:
            loaded = ev.candidate(genome)
            graph_key = (layer_type, loaded.spec.workload.batch, ev._k(genome))
            if graph_key not in kept:
                kept[graph_key] = (layer_graph(loaded.model, layer_type, layer_shape(loaded), loaded.spec.kv_policy),
                                   GraphCache())
            graph, cache = kept[graph_key]
            try:
                fresh = build_layer(loaded, layer_type)
            except MappingError as error:
                try:
                    build_layer(loaded, layer_type, graph=graph, kept=cache)
                except MappingError as same:
                    assert str(same) == str(error)  # the same issues, kept checks or not
                    continue
                raise AssertionError("built with the graph's cache, not from scratch") from None
            shared = build_layer(loaded, layer_type, graph=graph, kept=cache)
            assert shared == fresh
            for a, b in zip(shared.kernels, fresh.kernels, strict=True):
                assert a.stages == b.stages and a.stage_sram == b.stage_sram and a.sram_bytes == b.sram_bytes


def test_rescores_with_shipped_builds_equal_fresh_ones(monkeypatch) -> None:
    """A worker that did not fork from the search (Dask) plans its re-scores with the layer types the
    search's estimator built (``simulate_many_task(..., builds)``): the same figures as building
    them itself, and no layer type of theirs is built again."""
    problem = Problem(PROBLEMS["decode"].seed_path, PROBLEMS["decode"].overrides, "latency", None)
    ev = tasks.evaluator(problem)
    space = ev.space
    genomes = [space.seed, *(space.seed[:i] + ((space.seed[i] + 1) % len(g.choices),) + space.seed[i + 1:]
                             for i, g in enumerate(space.genes) if g.name in ("moe.seg1.chunk", "batch"))]
    ev.estimate(genomes)
    builds = search._builds(ev, genomes)
    assert builds and all(key in ev.simulated.builds for key in builds)
    built: list[str] = []
    real = build_module.build_layer

    def counting(loaded, layer_type, **kwargs):  # noqa: ANN001, ANN003, ANN202
        built.append(layer_type)
        return real(loaded, layer_type, **kwargs)

    monkeypatch.setattr(build_module, "build_layer", counting)
    tasks._EVALUATORS.pop(problem)          # a worker's process: a fresh evaluator
    shipped = tasks.simulate_many_task(problem, genomes, builds)
    assert built == []
    tasks._EVALUATORS.pop(problem)
    fresh = tasks.simulate_many_task(problem, genomes)
    assert built                             # it built them itself
    tasks._EVALUATORS.pop(problem)
    assert shipped == fresh
