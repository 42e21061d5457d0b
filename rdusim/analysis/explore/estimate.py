"""The analytical estimator: a candidate mapping's step time and memory without simulating.

Owns: ``KernelEstimate``, ``kernel_estimate``, ``Problem``, ``Evaluator``. Imports: mapping
(plans, space, capacity, memory), hw, numpy. Never imports simpy.

It reads the same kernel plans the simulator runs (same stages, chunks, items, rates from
``rdusim.hw.system.Socket``) and replaces the event loop by a closed form per kernel:

    launch + sync + max(pipeline, HBM bytes / HBM rate, DDR bytes / DDR rate, P2P bytes / P2P rate)

where ``pipeline`` is the spatial pipeline's makespan from the recurrence
``finish[s][c] = max(finish[s][c-1], finish[inputs][c]) + max(compute, load) + send``
over stages s and chunks c (loads run ahead of compute; barriers wait for every chunk).

Speed comes from caches, not from skipping work: a kernel plan and its estimate are cached
by what the plan depends on (``rdusim.mapping.build._kernel_key``), a layer type's kernels by
the kernels its genes spell, so most candidates of a search cost dictionary look-ups, and a
batch of candidates is composed with numpy. A kernel's per-chunk sums are computed once per
chunk object (the plan builder shares repeated chunks and items), in the plan's order, so an
estimate is the item-by-item closed form's bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import TypeAdapter, ValidationError

from rdusim.analysis.metrics import step_figures
from rdusim.analysis.result import LayerCache
from rdusim.config.loader import Document
from rdusim.config.schema import DDR, HBM, KernelSpec, SpeculativeSpec, WorkloadSpec
from rdusim.errors import ConfigError, MappingError
from rdusim.mapping.build import build_layer, kv_length, layer_shape, speculative_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping, resolve_kernel_list
from rdusim.mapping.capacity import reservations
from rdusim.mapping.memory import (
    LayerMemory,
    kernel_weight_bytes,
    layer_memory,
    memory_of_layers,
    memory_report,
)
from rdusim.mapping.plan import Chunk, KernelPlan, Stage
from rdusim.mapping.space import (
    Space,
    candidate_data,
    kernel_signature,
    layer_kernels,
    layer_types,
    load_candidate,
    space_from_seed,
    speculative_genes,
)
from rdusim.mapping.stages import GraphCache
from rdusim.model.speculative import accepted_tokens_per_step, expected_accepted
from rdusim.model.transformer import base_layer_type, layer_graph
from rdusim.summation import add_in_order


@dataclass(frozen=True)
class KernelEstimate:
    name: str
    latency_s: float          # one call, launch and sync included
    compute_s: float          # busiest stage
    memory_s: float           # HBM + DDR bytes at the achievable rate
    comm_s: float             # P2P egress


def kernel_estimate(kernel: KernelPlan, loaded: LoadedMapping, kept: EstimateCache | None = None) -> KernelEstimate:
    """Closed-form time of one call of a kernel on one socket.

    ``kept``: per-chunk sums and per-stage steps kept across calls on the same socket (the plan
    builder shares chunks and whole stages' chunks between kernel plans: kept op stages,
    attention blocks, expert items, collective chunks)."""
    system = loaded.system
    socket = system.socket
    kept = EstimateCache() if kept is None else kept
    if kept.socket is not socket:
        kept.socket, kept.rates = socket, {HBM: socket.tier_bytes_per_s(HBM), DDR: socket.tier_bytes_per_s(DDR)}
        kept.p2p = (socket.p2p_latency_s, socket.p2p_bytes_per_s)
        kept.chunks.clear()
        kept.stages.clear()
    rates = kept.rates
    p2p_latency, p2p_rate = kept.p2p
    names = {s.name: i for i, s in enumerate(kernel.stages)}
    # per stage, each chunk's finish time (Python floats: the same IEEE doubles as numpy's, faster
    # to index one at a time)
    finish: list[list[float]] = []
    busy: list[float] = []
    # the bytes each tier moves and the P2P bytes, in the order the plan lists them (summed in
    # that order below)
    moved: dict[str, list[np.ndarray]] = {HBM: [], DDR: [], _P2P: []}
    for stage in kernel.stages:
        steps = _stage_steps(stage, kept, rates, p2p_latency, p2p_rate)
        done: list[float] = []
        prev = 0.0
        for ready, cost, send in zip(_ready(stage, finish, names), steps.costs, steps.sends, strict=True):
            prev = max(prev, ready) + cost + send
            done.append(prev)
        for tier, nbytes in steps.moved:
            moved[tier].append(nbytes)
        finish.append(done)
        busy.append(steps.busy)
    # np.cumsum adds one element after another, as ``total += nbytes`` chunk by chunk would (a
    # leading 0.0 as the running total's start; stages that add only zeros are left out: exact)
    totals = {tier: float(np.cumsum(np.concatenate([_ZERO, *parts]))[-1]) if parts else 0.0
              for tier, parts in moved.items()}
    memory = totals[HBM] / rates[HBM] + totals[DDR] / rates[DDR]
    comm = totals[_P2P] / p2p_rate
    tiers = max(totals[HBM] / rates[HBM], totals[DDR] / rates[DDR])
    # a stage's chunks finish in order (each adds non-negative times to the one before): its
    # last chunk is its latest
    body = max(max((done[-1] for done in finish if done), default=0.0), tiers, comm)
    latency = socket.launch_s(kernel.orchestration) + body + system.sync_s  # as the engine charges it
    return KernelEstimate(kernel.name, latency, max(busy, default=0.0), memory, comm)


_P2P = "p2p"
_ZERO = np.zeros(1)


@dataclass
class EstimateCache:
    """What ``kernel_estimate`` keeps across kernel plans of one socket: chunk sums by chunk object
    and stage steps by (chunks object, rate); each entry holds its object, so the id stays its.
    Given another socket (``is not``), it starts afresh."""

    chunks: dict[int, tuple[Chunk, _ChunkSums]] = field(default_factory=dict)
    stages: dict[tuple[int, float], tuple[tuple[Chunk, ...], _StageSteps]] = field(default_factory=dict)
    socket: Any = None                        # the socket they are for (another one starts afresh)
    rates: dict[str, float] = field(default_factory=dict)   # its tiers' achievable bytes per second
    p2p: tuple[float, float] = (0.0, 0.0)     # its P2P latency and achievable rate


@dataclass(frozen=True)
class _StageSteps:
    costs: list[float]                        # per chunk, max(compute, load)
    sends: list[float]                        # per chunk, its P2P send
    busy: float                               # its chunks' compute, summed chunk after chunk
    moved: tuple[tuple[str, np.ndarray], ...]  # per tier (and P2P), the bytes in chunk order


def _stage_steps(stage: Stage, kept: EstimateCache, rates: dict[str, float], p2p_latency: float,
                 p2p_rate: float) -> _StageSteps:
    """A stage's per-chunk steps, worked out once per chunk object (the plan repeats chunks) and
    once per (chunks, rate) across kernel plans."""
    rate = stage.rate_ops_per_s
    found = kept.stages.get((id(stage.chunks), rate))
    if found is not None:
        return found[1]
    steps: dict[int, tuple[float, float, float, _ChunkSums]] = {}
    step: tuple[float, float, float, _ChunkSums] | None = None
    costs, sends = [], []
    busy = 0.0
    moved: dict[str, list[np.ndarray]] = {HBM: [], DDR: []}
    p2p: list[float] = []
    last: Chunk | None = None
    for chunk in stage.chunks:
        step = step if chunk is last else steps.get(id(chunk))  # chunks repeat, mostly in runs
        last = chunk
        if step is None:
            sums = kept.chunks.get(id(chunk))
            if sums is None:
                sums = kept.chunks[id(chunk)] = (chunk, _chunk_sums(chunk, rates))
            work, load = sums[1].work, sums[1].load_s
            compute = work / rate if rate > 0 and work > 0 else 0.0
            send = chunk.p2p_steps * p2p_latency + chunk.p2p_bytes / p2p_rate if chunk.p2p_bytes > 0 else 0.0
            step = steps[id(chunk)] = (compute, max(compute, load), send, sums[1])
        compute, cost, send, chunk_sums = step
        costs.append(cost)
        sends.append(send)
        busy += compute
        p2p.append(chunk.p2p_bytes)
        for tier, nbytes in chunk_sums.moved:
            moved[tier].append(nbytes)
    parts = [(tier, np.concatenate(arrays)) for tier, arrays in moved.items() if arrays]
    if any(p2p):
        parts.append((_P2P, np.array(p2p, dtype=float)))
    result = _StageSteps(costs, sends, busy, tuple(parts))
    kept.stages[id(stage.chunks), rate] = (stage.chunks, result)
    return result


def _ready(stage: Stage, finish: list[list[float]], names: dict[str, int]) -> list[float]:
    """When each chunk's inputs are ready: the latest input stage's same chunk, or for a barrier
    the inputs' last chunks (first chunk; 0 for the others)."""
    inputs = [finish[names[i]] for i in stage.inputs]
    n = len(stage.chunks)
    if stage.is_barrier:
        return [max((f[-1] for f in inputs), default=0.0), *([0.0] * (n - 1))] if n else []
    if not inputs:
        return [0.0] * n
    if any(len(f) < n for f in inputs):
        raise IndexError(f"stage {stage.name}: an input stage has fewer than its {n} chunks")
    if len(inputs) == 1:
        return inputs[0][:n]
    return list(map(max, *(f[:n] for f in inputs)))


@dataclass(frozen=True)
class _ChunkSums:
    work: float                               # its items' work
    load_s: float                             # its items' loads at each tier's rate, one after another
    moved: tuple[tuple[str, np.ndarray], ...]  # per tier, the bytes it loads and then stores, in order


def _chunk_sums(chunk: Chunk, rates: dict[str, float]) -> _ChunkSums:
    work = add_in_order(item.work for item in chunk.items)
    load = 0.0
    moved: dict[str, list[float]] = {HBM: [], DDR: []}
    for item in chunk.items:
        for tier, nbytes in item.loads:
            load += nbytes / rates[tier]
            moved[tier].append(nbytes)
    for tier, nbytes in chunk.stores:
        moved[tier].append(nbytes)
    return _ChunkSums(work, load, tuple((t, np.array(b, dtype=float)) for t, b in moved.items() if b))


# ------------------------------------------------------------------------ problem
@dataclass(frozen=True)
class Problem:
    """What an exploration evaluates: picklable, so worker processes and Dask share it."""

    seed_path: str
    overrides: tuple[str, ...] = ()
    objective: str = "throughput"          # throughput | latency
    slo_tpot_s: float | None = None


@dataclass(frozen=True)
class LayerEstimate:
    """One layer type of a candidate, estimated: small and picklable (a worker sends it back)."""

    kernels: tuple[KernelEstimate, ...]
    memory: LayerMemory | None              # what its kernels add to the memory accounting
    activation_peak_bytes: float
    reason: str = ""                        # why it does not build ("" if it does)

    @property
    def latency_s(self) -> float:
        return add_in_order(k.latency_s for k in self.kernels)


#: a layer type of a candidate: (layer type, batch, draft length, the kernels its genes spell as JSON)
LayerKey = tuple[Any, ...]
#: one layer type's kernels, validated as a mapping document's are
_KERNEL_LIST = TypeAdapter(list[KernelSpec])


@dataclass(frozen=True)
class DraftEstimate:
    """A speculative candidate's draft: its k steps, and what it holds in HBM per socket."""

    step_s: float = 0.0
    weights_bytes: float = 0.0
    kv_bytes: float = 0.0
    activations_bytes: float = 0.0
    reason: str = ""


@dataclass
class Evaluator:
    """Estimates candidates of one problem, caching kernels and layers across calls."""

    problem: Problem
    seed: LoadedMapping = field(init=False)
    space: Space = field(init=False)
    counts: dict[str, int] = field(init=False)
    _layers: dict[Any, LayerEstimate] = field(default_factory=dict)
    _kernel_plans: dict[Any, KernelPlan] = field(default_factory=dict)
    _kernel_estimates: dict[Any, KernelEstimate] = field(default_factory=dict)
    _kernel_weights: dict[Any, float] = field(default_factory=dict)   # kernel_weight_bytes by kernel key
    _graphs: dict[Any, Any] = field(default_factory=dict)
    _graph_kept: dict[Any, GraphCache] = field(default_factory=dict)   # per graph: what build_layer keeps
    simulated: LayerCache = field(default_factory=LayerCache)   # re-scores: simulated layer types by layer key
    _drafts: dict[Any, DraftEstimate] = field(default_factory=dict)
    _spelled: dict[tuple[str, tuple[Any, ...]], str] = field(default_factory=dict)  # signature -> kernels (JSON)
    _signatures: dict[str, Callable[[tuple[int, ...]], tuple[Any, ...]]] = field(init=False)  # base type ->
    _keys: dict[tuple[int, ...], tuple[LayerKey, ...]] = field(default_factory=dict)  # genome -> its layers' keys
    _kernel_s: dict[LayerKey, dict[tuple[str, str], float]] = field(default_factory=dict)  # a row's, per layer
    _rows: dict[Any, dict[str, Any]] = field(default_factory=dict)    # a row but its genome, by layers and draft
    _spelled_lists: dict[tuple[str, tuple[Any, ...]], list[dict[str, Any]]] = field(default_factory=dict)
    _estimates_kept: EstimateCache = field(default_factory=lambda: EstimateCache())  # across kernel plans
    _resolved: dict[tuple[str, tuple[Any, ...]], list[KernelSpec]] = field(default_factory=dict)  # signature ->
    _workloads: dict[int, WorkloadSpec] = field(default_factory=dict)                               # kernels, ...
    _speculative: dict[tuple[str, int], SpeculativeSpec] = field(default_factory=dict)
    reserved_bytes: float = field(init=False)
    _document: Document = field(init=False)            # a candidate's (``candidate``)
    kv_len: int = field(init=False)

    def __post_init__(self) -> None:
        self.seed = load_mapping(self.problem.seed_path, overrides=list(self.problem.overrides))
        self._document = Document(path=self.seed.document.path, data=None, lines={})
        self.space = space_from_seed(self.seed)
        self.counts = layer_types(self.seed)
        self.reserved_bytes = add_in_order(reservations(self.seed).values())
        self.kv_len = kv_length(self.seed)
        self._signatures = {layer.layer_type: kernel_signature(self.space, layer) for layer in self.space.layers}
        self.simulated.kernel_plans = self._kernel_plans  # re-scores plan with the kernels estimates built

    def data(self, genome: tuple[int, ...]) -> dict[str, Any]:
        return candidate_data(self.space, self.seed.document.data, genome)

    def estimate(self, genomes: list[tuple[int, ...]]) -> list[dict[str, Any]]:
        """One row per genome: feasibility, step time, objective figures, HBM use.

        Layers come from the cache (built here when missing); the step times of the whole
        batch are composed with numpy, layer type by layer type in a fixed order, so a
        genome's figures do not depend on which batch (or worker) it came in.
        """
        cached = self._layers
        keys = [self.layer_keys(g) for g in genomes]
        layers = [[cached[key] if key in cached else self._layer(g, key[0]) for key in row]
                  for g, row in zip(genomes, keys, strict=True)]
        latency = np.array([[layer.latency_s for layer in row] for row in layers]).reshape(len(genomes), -1)
        step = np.zeros(len(genomes))
        for column, count in enumerate(self.counts.values()):
            step = step + latency[:, column] * float(count)
        drafts = [self._draft(g) for g in genomes]
        rows = []
        for g, row, s, draft, key in zip(genomes, layers, step, drafts, keys, strict=True):
            # genomes spelling the same layers (and draft) have the same row but for the genome
            same = (key, speculative_genes(self.space, g))
            rest = self._rows.get(same)
            if rest is None:
                rest = self._rows[same] = dict(self._row(g, row, float(s) + draft.step_s, draft, key))
                del rest["genome"]
            rows.append({"genome": g} | rest)
        return rows

    def _k(self, genome: tuple[int, ...]) -> int:
        sd = speculative_genes(self.space, genome)
        return 0 if sd is None else sd[1]

    def layer_key(self, genome: tuple[int, ...], layer_type: str) -> tuple[Any, ...]:
        """What decides a layer type's kernels in this problem: the batch, the draft length (it
        shapes the verification pass: k + 1 tokens per sequence) and the kernels its genes spell
        (``rdusim.mapping.space.layer_kernels``), so genomes differing only in genes that change
        no kernel (settings of a segment fused into another segment's kernel) share the layer."""
        return self._full_key(genome, layer_type)[1:]

    def layer_keys(self, genome: tuple[int, ...]) -> tuple[LayerKey, ...]:
        """``(layer type, *layer_key)`` of each layer type (``counts``' order), kept per genome."""
        keys = self._keys.get(genome)
        if keys is None:
            batch = self.space.value(genome, "batch") if self.space.phase == "decode" else 0
            k = self._k(genome)
            keys = self._keys[genome] = tuple((t, batch, k, self._spelled_kernels(genome, base_layer_type(t)))
                                              for t in self.counts)
        return keys

    def _spelled_kernels(self, genome: tuple[int, ...], base: str) -> str:
        """``layer_kernels`` of a base layer type as JSON (sorted keys), cached by its kernels'
        signature (``rdusim.mapping.space.kernel_signature``: equal exactly when the kernels are)."""
        signature = (base, self._signatures[base](genome))
        spelled = self._spelled.get(signature)
        if spelled is None:
            spelled = self._spelled[signature] = json.dumps(self._layer_kernels(genome, signature), sort_keys=True)
        return spelled

    def _layer_kernels(self, genome: tuple[int, ...], signature: tuple[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
        """``layer_kernels`` of a base layer type, kept by its signature (not to be changed)."""
        kernels = self._spelled_lists.get(signature)
        if kernels is None:
            layer = next(layer for layer in self.space.layers if layer.layer_type == signature[0])
            kernels = self._spelled_lists[signature] = layer_kernels(self.space, layer, genome)
        return kernels

    def mapping_key(self, genome: tuple[int, ...]) -> tuple[Any, ...]:
        """Equal for two genomes exactly when their documents (``data``) have the same layers and
        workload: each base layer type's kernels as JSON (the layer keys' cache) and, at decode,
        the batch (the one workload field a genome sets), without building the documents."""
        batch = self.space.value(genome, "batch") if self.space.phase == "decode" else None
        return (batch, *(self._spelled_kernels(genome, layer.layer_type) for layer in self.space.layers))

    def missing(self, genomes: list[tuple[int, ...]]) -> list[tuple[tuple[int, ...], str]]:
        """One (genome, layer type) per layer the cache lacks, for ``build_layers`` on workers."""
        found: dict[LayerKey, tuple[tuple[int, ...], str]] = {}
        for genome in genomes:
            for key in self.layer_keys(genome):
                if key not in self._layers and key not in found:
                    found[key] = (genome, key[0])
        return list(found.values())

    def build_layers(self, items: list[tuple[tuple[int, ...], str]]) -> list[tuple[LayerKey, LayerEstimate]]:
        """Estimate these layers (a worker's share of ``missing``), keyed for ``add_layers``."""
        return [(self._full_key(g, t), self._layer(g, t)) for g, t in items]

    def _full_key(self, genome: tuple[int, ...], layer_type: str) -> LayerKey:
        return self.layer_keys(genome)[list(self.counts).index(layer_type)]

    def add_layers(self, built: list[tuple[LayerKey, LayerEstimate]]) -> None:
        """Layers estimated elsewhere (workers) join this cache: every worker's builds are shared."""
        self._layers.update(built)

    def _layer(self, genome: tuple[int, ...], layer_type: str) -> LayerEstimate:
        key = self._full_key(genome, layer_type)
        if key not in self._layers:
            self._layers[key] = self._build(genome, layer_type, key[1])
        return self._layers[key]

    def _draft(self, genome: tuple[int, ...]) -> DraftEstimate:
        """A speculative candidate's k draft steps (time, and the draft's HBM), by the same closed
        form; the draft's mapping depends on the draft model and batch only (rdusim.mapping.draft)."""
        sd = speculative_genes(self.space, genome)
        if sd is None or sd[1] == 0:
            return DraftEstimate()
        draft, k = sd
        batch = self.space.value(genome, "batch")
        key = (draft, batch)
        if key not in self._drafts:
            self._drafts[key] = self._build_draft(genome)
        one = self._drafts[key]
        return dataclasses.replace(one, step_s=k * one.step_s)

    def candidate(self, genome: tuple[int, ...], only: str | None = None) -> LoadedMapping:
        """What ``load_candidate(self.seed, self.data(genome))`` gives ``build_layer`` (tested equal:
        the same spec), from parts validated once: each base layer type's kernels by its
        signature (validated and resolved against the seed's defaults, as ``validate_mapping``
        does), the workload by batch, the speculative section by draft and k; every other field
        is the seed's, which a candidate's document keeps. Its document has the seed's path and
        no data or lines, as a candidate's (the error messages read only those). ``only``: a base
        layer type to build alone (``build_layer`` reads no other layer type's kernels): the
        others keep the seed's kernels."""
        layers = dict(self.seed.spec.layers) if only is not None else {}
        for layer in self.space.layers:
            if only is None or layer.layer_type == only:
                layers[layer.layer_type] = self._kernel_specs(genome, layer.layer_type)
        update: dict[str, Any] = {"layers": layers}
        if self.space.phase == "decode":
            batch = self.space.value(genome, "batch")
            if batch not in self._workloads:
                workload = dict(self.seed.document.data["workload"]) | {"batch": batch}
                self._workloads[batch] = WorkloadSpec.model_validate(workload)
            update["workload"] = self._workloads[batch]
        sd = speculative_genes(self.space, genome)
        if sd is not None:
            if sd not in self._speculative:
                section = candidate_data(self.space, self.seed.document.data, genome)["speculative"]
                self._speculative[sd] = SpeculativeSpec.model_validate(section)
            update["speculative"] = self._speculative[sd]
        return LoadedMapping(self.seed.spec.model_copy(update=update), self.seed.model, self.seed.system,
                             self._document)

    def _kernel_specs(self, genome: tuple[int, ...], base: str) -> list[KernelSpec]:
        signature = (base, self._signatures[base](genome))
        kernels = self._resolved.get(signature)
        if kernels is None:
            validated = _KERNEL_LIST.validate_python(self._layer_kernels(genome, signature))
            kernels = self._resolved[signature] = resolve_kernel_list(validated, self.seed.spec.defaults)
        return kernels

    def _build_draft(self, genome: tuple[int, ...]) -> DraftEstimate:
        try:
            loaded = load_candidate(self.seed, self.data(genome))
            plan = speculative_plan(loaded)
        except (MappingError, ConfigError) as error:
            return DraftEstimate(reason=f"draft: {str(error).splitlines()[0]}")
        assert plan is not None and plan.draft is not None
        draft = plan.draft
        step = add_in_order(kernel_estimate(kernel, loaded).latency_s * draft.layer_counts[t]
                   for t, kernels in draft.kernels.items() for kernel in kernels)
        hbm = memory_report(draft)[HBM]
        return DraftEstimate(step, hbm["weights"], hbm["kv_cache"], hbm["activations"])

    def _build(self, genome: tuple[int, ...], layer_type: str, batch: int) -> LayerEstimate:
        try:
            try:
                loaded = self.candidate(genome, only=base_layer_type(layer_type))
            except ValidationError:  # not from the search's genes; the document's own message then
                loaded = load_candidate(self.seed, self.data(genome))
            graph_key = (layer_type, batch, self._k(genome))
            if graph_key not in self._graphs:
                self._graphs[graph_key] = layer_graph(loaded.model, layer_type, layer_shape(loaded),
                                                      loaded.spec.kv_policy)
            built = build_layer(loaded, layer_type, graph=self._graphs[graph_key], cache=self._kernel_plans,
                                kept=self._graph_kept.setdefault(graph_key, GraphCache()))
        except MappingError as error:
            return LayerEstimate((), None, 0.0, str(error).splitlines()[0])
        self.simulated.builds[layer_type, self._full_key(genome, layer_type)[1:]] = built  # re-scores plan with it
        estimates, weights = [], []
        for kernel, key in zip(built.kernels, built.keys, strict=True):
            if key not in self._kernel_estimates:
                self._kernel_estimates[key] = kernel_estimate(kernel, loaded, self._estimates_kept)
                self._kernel_weights[key] = kernel_weight_bytes(kernel)
            estimates.append(self._kernel_estimates[key])
            weights.append(self._kernel_weights[key])
        return LayerEstimate(tuple(estimates), layer_memory(built.kernels, weights), built.activation_peak_bytes)

    def _row(self, genome: tuple[int, ...], layers: list[LayerEstimate], step_s: float,
             draft: DraftEstimate, keys: tuple[LayerKey, ...]) -> dict[str, Any]:
        spec = self.seed.spec
        batch = self.space.value(genome, "batch") if self.space.phase == "decode" else spec.workload.batch
        row: dict[str, Any] = {"genome": genome, "batch": batch, "fits": True, "reason": ""}
        broken = next((layer.reason for layer in layers if layer.reason), "") or draft.reason
        if broken:
            return row | {"fits": False, "reason": broken}
        memory = self._memory(layers, batch, draft)
        row |= memory | self._figures(step_s, batch, genome)
        if draft.step_s:
            row["draft_s"] = draft.step_s
        kernel_s: dict[tuple[str, str], float] = {}
        for key, layer in zip(keys, layers, strict=True):  # each layer type's kernels' times, kept per layer
            times = self._kernel_s.get(key)
            if times is None:
                n = self.counts[key[0]]
                times = self._kernel_s[key] = {(key[0], k.name): k.latency_s * n for k in layer.kernels}
            kernel_s.update(times)
        row["kernel_s"] = kernel_s
        if memory["hbm_used_bytes"] > memory["hbm_capacity_bytes"]:
            row |= {"fits": False, "reason": "HBM: needs more than a socket has"}
        elif memory["ddr_used_bytes"] > self.seed.system.socket.capacity_bytes(DDR):
            row |= {"fits": False, "reason": "DDR: weights need more than a socket has"}
        elif self.problem.slo_tpot_s is not None and self.space.phase == "decode" \
                and row["tpot_s"] > self.problem.slo_tpot_s:
            row |= {"fits": False, "reason": f"TPOT {row['tpot_s'] * 1e3:.3f} ms over the SLO"}
        return row

    def _figures(self, step_s: float, batch: int, genome: tuple[int, ...]) -> dict[str, float]:
        spec = self.seed.spec
        sd = speculative_genes(self.space, genome)
        accepted = accepted_tokens_per_step(spec) if sd is None or spec.speculative is None else \
            expected_accepted(spec.speculative.acceptance.rate, sd[1])
        return step_figures(self.space.phase, step_s, batch=batch, seq_len=spec.workload.seq_len, accepted=accepted)

    def _memory(self, layers: list[LayerEstimate], batch: int, draft: DraftEstimate) -> dict[str, float]:
        """Per socket, by ``rdusim.mapping.memory.memory_usage`` (the simulator's accounting;
        a candidate differs from the seed only in its kernels, batch and draft), plus a
        speculative candidate's draft weights and KV cache (as ``memory_report`` adds them)."""
        memory = {t: layer.memory for t, layer in zip(self.counts, layers, strict=True) if layer.memory is not None}
        report = memory_of_layers(self.seed.spec, self.seed.model, self.counts, memory, batch, self.kv_len,
                                  max(layer.activation_peak_bytes for layer in layers))
        hbm, reserved = dict(report[HBM]), self.reserved_bytes
        hbm["weights"] += draft.weights_bytes
        hbm["kv_cache"] += draft.kv_bytes
        hbm["activations"] = max(hbm["activations"], draft.activations_bytes)
        used = hbm["weights"] + hbm["kv_cache"] + hbm["activations"] + reserved
        return {"hbm_used_bytes": used, "hbm_weights_bytes": hbm["weights"], "hbm_kv_bytes": hbm["kv_cache"],
                "hbm_activations_bytes": hbm["activations"], "hbm_reserved_bytes": reserved,
                "hbm_capacity_bytes": self.seed.system.socket.capacity_bytes(HBM),
                "ddr_used_bytes": report[DDR]["weights"]}

