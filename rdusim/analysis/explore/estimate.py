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
the genes that decide them, so most candidates of a search cost dictionary look-ups, and a
batch of candidates is composed with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rdusim.analysis.metrics import step_figures
from rdusim.config.schema import DDR, HBM
from rdusim.errors import MappingError
from rdusim.mapping.build import build_layer, kv_length, layer_shape
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.capacity import reservations
from rdusim.mapping.memory import memory_usage
from rdusim.mapping.plan import KernelPlan
from rdusim.mapping.space import (
    Space,
    candidate_data,
    layer_genes,
    layer_types,
    load_candidate,
    space_from_seed,
)
from rdusim.model.speculative import accepted_tokens_per_step
from rdusim.model.transformer import base_layer_type, layer_graph


@dataclass(frozen=True)
class KernelEstimate:
    name: str
    latency_s: float          # one call, launch and sync included
    compute_s: float          # busiest stage
    memory_s: float           # HBM + DDR bytes at the achievable rate
    comm_s: float             # P2P egress


def kernel_estimate(kernel: KernelPlan, loaded: LoadedMapping) -> KernelEstimate:
    """Closed-form time of one call of a kernel on one socket."""
    system = loaded.system
    socket = system.socket
    names = {s.name: i for i, s in enumerate(kernel.stages)}
    n_chunks = kernel.n_chunks
    finish = np.zeros((len(kernel.stages), n_chunks))
    busy = np.zeros(len(kernel.stages))
    totals = {HBM: 0.0, DDR: 0.0}
    p2p_bytes = 0.0
    for s, stage in enumerate(kernel.stages):
        rate = stage.rate_ops_per_s
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
            compute = work / rate if rate > 0 and work > 0 else 0.0
            send = chunk.p2p_steps * socket.p2p_latency_s + chunk.p2p_bytes / socket.p2p_bytes_per_s \
                if chunk.p2p_bytes > 0 else 0.0
            p2p_bytes += chunk.p2p_bytes
            ready = max((finish[i, -1] if stage.is_barrier else finish[i, c] for i in inputs), default=0.0)
            if stage.is_barrier and c > 0:
                ready = 0.0
            prev = max(prev, ready) + max(compute, load) + send
            finish[s, c] = prev
            busy[s] += compute
    memory = totals[HBM] / socket.tier_bytes_per_s(HBM) + totals[DDR] / socket.tier_bytes_per_s(DDR)
    comm = p2p_bytes / socket.p2p_bytes_per_s
    tiers = max(totals[HBM] / socket.tier_bytes_per_s(HBM), totals[DDR] / socket.tier_bytes_per_s(DDR))
    body = max(float(finish.max(initial=0.0)), tiers, comm)
    latency = socket.launch_s(kernel.orchestration) + body + system.sync_s  # as the engine charges it
    return KernelEstimate(kernel.name, latency, float(busy.max(initial=0.0)), memory, comm)


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
    kernels: tuple[KernelEstimate, ...]
    plans: tuple[KernelPlan, ...]           # what the estimates were made from (memory reads them)
    activation_peak_bytes: float
    reason: str = ""                        # why it does not build ("" if it does)


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
    _graphs: dict[Any, Any] = field(default_factory=dict)
    reserved_bytes: float = field(init=False)
    kv_len: int = field(init=False)

    def __post_init__(self) -> None:
        self.seed = load_mapping(self.problem.seed_path, overrides=list(self.problem.overrides))
        self.space = space_from_seed(self.seed)
        self.counts = layer_types(self.seed)
        self.reserved_bytes = sum(reservations(self.seed).values())
        self.kv_len = kv_length(self.seed)

    def data(self, genome: tuple[int, ...]) -> dict[str, Any]:
        return candidate_data(self.space, self.seed.document.data, genome)

    def estimate(self, genomes: list[tuple[int, ...]]) -> list[dict[str, Any]]:
        """One row per genome: feasibility, step time, objective figures, HBM use."""
        layers = [[self._layer(g, t) for t in self.counts] for g in genomes]
        counts = np.array(list(self.counts.values()), dtype=float)
        step = np.array([[sum(k.latency_s for k in layer.kernels) for layer in row] for row in layers]) @ counts
        return [self._row(g, row, float(s)) for g, row, s in zip(genomes, layers, step, strict=True)]

    def _layer(self, genome: tuple[int, ...], layer_type: str) -> LayerEstimate:
        base = base_layer_type(layer_type)
        batch = self.space.value(genome, "batch") if self.space.phase == "decode" else 0
        key = (layer_type, batch, layer_genes(self.space, base, genome))
        if key not in self._layers:
            self._layers[key] = self._build(genome, layer_type, batch)
        return self._layers[key]

    def _build(self, genome: tuple[int, ...], layer_type: str, batch: int) -> LayerEstimate:
        try:
            loaded = load_candidate(self.seed, self.data(genome))
            graph_key = (layer_type, batch)
            if graph_key not in self._graphs:
                self._graphs[graph_key] = layer_graph(loaded.model, layer_type, layer_shape(loaded),
                                                      loaded.spec.kv_policy)
            built = build_layer(loaded, layer_type, graph=self._graphs[graph_key], cache=self._kernel_plans)
        except MappingError as error:
            return LayerEstimate((), (), 0.0, str(error).splitlines()[0])
        estimates = []
        for kernel, key in zip(built.kernels, built.keys, strict=True):
            if key not in self._kernel_estimates:
                self._kernel_estimates[key] = kernel_estimate(kernel, loaded)
            estimates.append(self._kernel_estimates[key])
        return LayerEstimate(tuple(estimates), built.kernels, built.activation_peak_bytes)

    def _row(self, genome: tuple[int, ...], layers: list[LayerEstimate], step_s: float) -> dict[str, Any]:
        spec = self.seed.spec
        batch = self.space.value(genome, "batch") if self.space.phase == "decode" else spec.workload.batch
        row: dict[str, Any] = {"genome": genome, "batch": batch, "fits": True, "reason": ""}
        broken = next((layer.reason for layer in layers if layer.reason), "")
        if broken:
            return row | {"fits": False, "reason": broken}
        memory = self._memory(layers, batch)
        row |= memory | self._figures(step_s, batch)
        row["kernel_s"] = {(t, k.name): k.latency_s * n for (t, n), layer in zip(self.counts.items(), layers, strict=True)
                           for k in layer.kernels}
        if memory["hbm_used_bytes"] > memory["hbm_capacity_bytes"]:
            row |= {"fits": False, "reason": "HBM: needs more than a socket has"}
        elif memory["ddr_used_bytes"] > self.seed.system.socket.capacity_bytes(DDR):
            row |= {"fits": False, "reason": "DDR: weights need more than a socket has"}
        elif self.problem.slo_tpot_s is not None and self.space.phase == "decode" \
                and row["tpot_s"] > self.problem.slo_tpot_s:
            row |= {"fits": False, "reason": f"TPOT {row['tpot_s'] * 1e3:.3f} ms over the SLO"}
        return row

    def _figures(self, step_s: float, batch: int) -> dict[str, float]:
        w = self.seed.spec.workload
        return step_figures(self.space.phase, step_s, batch=batch, seq_len=w.seq_len, accepted=accepted_tokens_per_step(self.seed.spec))

    def _memory(self, layers: list[LayerEstimate], batch: int) -> dict[str, float]:
        """Per socket, by ``rdusim.mapping.memory.memory_usage`` (the simulator's accounting;
        a candidate differs from the seed only in its kernels and batch)."""
        kernels = {t: layer.plans for t, layer in zip(self.counts, layers, strict=True)}
        report = memory_usage(self.seed.spec, self.seed.model, self.counts, kernels, batch, self.kv_len,
                              max(layer.activation_peak_bytes for layer in layers))
        hbm, reserved = report[HBM], self.reserved_bytes
        used = hbm["weights"] + hbm["kv_cache"] + hbm["activations"] + reserved
        return {"hbm_used_bytes": used, "hbm_weights_bytes": hbm["weights"], "hbm_kv_bytes": hbm["kv_cache"],
                "hbm_activations_bytes": hbm["activations"], "hbm_reserved_bytes": reserved,
                "hbm_capacity_bytes": self.seed.system.socket.capacity_bytes(HBM),
                "ddr_used_bytes": report[DDR]["weights"]}

