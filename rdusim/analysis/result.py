"""``simulate()``: the one-call Python API, and the result it returns.

Owns: ``SimulationResult``, ``simulate``, ``KernelTimes``, ``simulate_kernels``, ``LayerCache`` (simulated layer types kept by a
caller's key, so candidates sharing a layer type reuse its simulation). Imports: mapping, sim,
breakdown, pandas.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rdusim.analysis.breakdown import kernel_breakdown, kernel_latencies
from rdusim.errors import MappingError
from rdusim.mapping.build import LayerBuild, build_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.capacity import HbmFit, hbm_fit, kv_overflow
from rdusim.mapping.memory import memory_report
from rdusim.mapping.plan import DRAFT_PREFIX, KernelPlan, Plan
from rdusim.model.speculative import accepted_tokens_per_step
from rdusim.sim.engine import simulate_plan
from rdusim.sim.reuse import KernelReuse
from rdusim.sim.trace import Trace


@dataclass(frozen=True)
class SimulationResult:
    """What one simulation produced. ``kernels`` is the per-kernel breakdown (pandas)."""

    plan: Plan
    trace: Trace
    kernels: pd.DataFrame
    memory: dict[str, dict[str, float]]
    hbm: HbmFit | None = None                # the HBM budget per socket (capacity, deployment reserves)

    @property
    def phase(self) -> str:
        return self.plan.phase

    @property
    def total_s(self) -> float:
        """Prefill: time to first token. Decode: time of one step (a speculative step: the draft's
        ``k`` steps and the verification)."""
        return float(self.kernels["latency_s"].sum())

    @property
    def accepted_tokens_per_step(self) -> float:
        """Decode: tokens a step yields per sequence (speculative: the acceptance model's expectation)."""
        return accepted_tokens_per_step(self.plan.mapping)

    @property
    def tokens_per_s_per_user(self) -> float:
        """Decode: accepted tokens per step / step time."""
        return self.accepted_tokens_per_step / self.total_s

    @property
    def tokens_per_s(self) -> float:
        """Decode: every sequence's accepted tokens per second."""
        return self.plan.batch * self.tokens_per_s_per_user

    def speculative_split(self) -> dict[str, float]:
        """A step's time in the draft's kernels and in the target's (the verification)."""
        draft = self.kernels["layer_type"].str.startswith(DRAFT_PREFIX)
        return {"draft_s": float(self.kernels.loc[draft, "latency_s"].sum()),
                "verify_s": float(self.kernels.loc[~draft, "latency_s"].sum())}

    def _speculative(self) -> dict | None:
        sd = self.plan.mapping.speculative
        if sd is None:
            return None
        return {"draft": sd.draft, "k": sd.k, "acceptance_rate": sd.acceptance.rate,
                "acceptance_source": sd.acceptance.source, **self.speculative_split(),
                "accepted_tokens_per_step": self.accepted_tokens_per_step,
                "tokens_per_s_per_user": self.tokens_per_s_per_user}

    def _budget(self) -> dict[str, float] | None:
        """Decode: HBM per socket by use and reserve, free, and the margin to the next batch."""
        fit = self.hbm
        if fit is None or self.phase != "decode":
            return None
        return {"capacity": fit.capacity_bytes, "weights": fit.weights_bytes, "kv_cache": fit.kv_bytes,
                "activations": fit.activations_bytes, **{k.replace(" ", "_"): v for k, v in fit.reserves.items()},
                "free": fit.free_bytes, "next_batch_margin": fit.next_batch_margin_bytes}

    def to_dict(self) -> dict:
        """The JSON output contract (``rdusim simulate --format json``)."""
        spec = self.plan.mapping
        return {
            "mapping": spec.name, "model": self.plan.model.name, "hardware": self.plan.system.name,
            "phase": self.phase, "seq_len": self.plan.seq_len, "batch": self.plan.batch,
            "kv_policy": spec.kv_policy.name, "kv_len": self.plan.kv_len, "total_s": self.total_s,
            "kernels": self.kernels.to_dict(orient="records"), "speculative": self._speculative(),
            "memory": {"sockets": self.plan.system.sockets, "per_socket": self.memory,
                       "hbm_budget": self._budget()},
            "simulation": {"events": self.trace.event_count, "sockets_simulated": self.trace.sockets_simulated,
                           "layers_simulated": self.trace.layers_simulated},
        }


@dataclass
class LayerCache:
    """Simulated layer types (fast path, no events), kept by the caller's keys of every layer
    type up to and including that one.

    On the fast path a layer type starts from a drained, synchronised node, so its kernel
    records depend on its own kernels (the node and workload are fixed by the caller for one
    cache) and on the time it starts, which the earlier layer types decide: a candidate whose
    layer types up to this one have the same keys reuses its simulation, which
    ``simulate_plan(start_s=...)`` ran at the same start time. Kernel times come out bit for
    bit; the per-kernel busy times differ in the last bits only (the pools' running totals
    start from zero instead of the earlier layers' sums).

    Within a layer type, a kernel call that a candidate shares with an earlier one (the same
    kernel plan, reached at another time) is that call shifted in time, bit for bit, when the
    two start times allow it (``kernel_calls``, ``rdusim.sim.reuse``: the same start, or the
    same binade and an even multiple of its spacing, the calls ending ``MARGIN`` spacings below
    the binade's top): the explorer's prefill candidates differ in their attention kernels and
    share the MoE FFN kernel, simulated once or twice per process and binade of its start times
    (once per parity) instead of once per candidate; a call ending nearer its binade's top is
    simulated again at each new start.

    A reused call's stage and pool busy times and bytes are the increments of the call simulated
    first, not a fresh simulation's: those fields can depend on which candidate filled the cache
    first, in their last bits only, and so can the kernel's ``bound`` derived from them (only
    where two of its parts agree to those bits); ``Trace.event_count`` (a call taken is one
    event) depends on which calls were taken. The times (start, end, latency, step time) are a
    fresh simulation's, bit for bit, whichever candidate filled the cache.
    """

    traces: dict[tuple[Any, ...], Trace] = field(default_factory=dict)
    hits: int = 0
    kernel_plans: dict[Any, KernelPlan] = field(default_factory=dict)  # ``build_plan``'s cache (same node, workload)
    #: layer types built (``build_layer``) by (layer type, the caller's key of that layer type alone:
    #: a build does not depend on the layer types before it), handed to ``build_plan(built=...)``
    builds: dict[tuple[str, Hashable], LayerBuild] = field(default_factory=dict)
    kernel_calls: KernelReuse = field(default_factory=KernelReuse)   # simulated kernel calls, reused shifted

    def trace(self, plan: Plan, keys: Mapping[str, Hashable]) -> Trace:
        parts: list[Trace] = []
        prefix: tuple[Any, ...] = ()
        for layer_type in plan.layer_counts:
            prefix = (*prefix, (layer_type, keys[layer_type]))
            if prefix in self.traces:
                self.hits += 1
            else:
                start = parts[-1].kernels[-1].end_s if parts and parts[-1].kernels else 0.0
                self.traces[prefix] = simulate_plan(plan, record_events=False, layer_types=(layer_type,),
                                                    start_s=start, reuse=self.kernel_calls)
            parts.append(self.traces[prefix])
        return Trace(kernels=tuple(k for part in parts for k in part.kernels), sockets_simulated=1,
                     layers_simulated=sum(p.layers_simulated for p in parts),
                     event_count=sum(p.event_count for p in parts),
                     layer_multiplier={k: v for p in parts for k, v in p.layer_multiplier.items()})


def simulate(mapping: str | Path | LoadedMapping, *, seq_len: int | None = None, batch: int | None = None,
             hw: str | Path | None = None, overrides: list[str] | None = None, fast: bool = True,
             record_events: bool = True, check_capacity: bool = True, coalesce: bool = True,
             layers: tuple[LayerCache, Mapping[str, Hashable]] | None = None) -> SimulationResult:
    """Simulate a mapping (a YAML path or a loaded mapping) and return the breakdown.

    ``coalesce=False`` runs the reference engine (one event per work item per socket; the
    default coalesces identical work, ``rdusim.sim.engine``), for tests and benchmarks.
    ``layers=(cache, keys)`` takes each layer type's simulation from ``cache`` by its key in
    ``keys`` (fast path, no events; the mapping explorer's re-scores), its kernel plans from
    the cache's ``kernel_plans`` and the layer types the cache's ``builds`` hold by those keys
    (the explorer's estimates built them); a speculative plan's step (its draft's steps, then the
    verification) is simulated whole.

    Raises ``MappingError`` with the numbers when the mapping does not fit: SRAM per kernel
    always, HBM per socket unless ``check_capacity=False`` (a what-if beyond capacity).
    """
    if isinstance(mapping, LoadedMapping):
        if seq_len is not None or batch is not None or hw is not None or overrides:
            mapping = load_mapping(mapping.document.path, overrides=overrides, seq_len=seq_len, batch=batch, hw=hw)
        loaded = mapping
    else:
        loaded = load_mapping(mapping, overrides=overrides, seq_len=seq_len, batch=batch, hw=hw)
    plan, trace, memory, fit = _run(loaded, fast=fast, record_events=record_events, check_capacity=check_capacity,
                                    coalesce=coalesce, layers=layers)
    return SimulationResult(plan, trace, kernel_breakdown(plan, trace), memory, fit)


def _run(loaded: LoadedMapping, *, fast: bool, record_events: bool, check_capacity: bool, coalesce: bool,
         layers: tuple[LayerCache, Mapping[str, Hashable]] | None,
         ) -> tuple[Plan, Trace, dict[str, dict[str, float]], HbmFit]:
    """``simulate`` up to its breakdown: the plan, the trace, the memory report and the HBM fit."""
    if check_capacity and (overflow := kv_overflow(loaded)):
        raise MappingError(f"{loaded.where('workload', 'batch')}: does not fit: {overflow} "
                           "(--ignore-capacity simulates it anyway)")
    if layers is None:
        plan = build_plan(loaded)
    else:
        cache, keys = layers
        built = {t: b for t, key in keys.items() if (b := cache.builds.get((t, key))) is not None}
        plan = build_plan(loaded, cache=cache.kernel_plans, built=built)
    memory = memory_report(plan)
    fit = hbm_fit(plan, loaded, memory)
    if check_capacity:
        if not fit.fits:
            raise MappingError(f"{loaded.where('workload', 'batch')}: does not fit: {fit.reason} "
                               "(--ignore-capacity simulates it anyway)")
    if layers is not None and plan.speculative is None:  # a speculative step (draft + verify) runs whole
        trace = layers[0].trace(plan, layers[1])
    else:
        trace = simulate_plan(plan, fast=fast, record_events=record_events, coalesce=coalesce)
    return plan, trace, memory, fit


@dataclass(frozen=True)
class KernelTimes:
    """A simulation's step time and per-kernel latency and bound, without the breakdown table
    (the mapping explorer's re-scores read only these): the same numbers as ``simulate``'s
    ``total_s`` and ``kernels`` columns (tested)."""

    plan: Plan
    hbm: HbmFit
    kernels: list[dict[str, Any]]   # per (layer type, kernel) in execution order: layer_type, kernel, latency_s, bound
    total_s: float


def simulate_kernels(loaded: LoadedMapping, *, layers: tuple[LayerCache, Mapping[str, Hashable]] | None = None
                     ) -> KernelTimes:
    """``simulate(loaded, record_events=False, layers=layers)``'s ``total_s``, ``kernels`` (those four
    columns, as records) and ``hbm``; raises the same ``MappingError``."""
    plan, trace, _, fit = _run(loaded, fast=True, record_events=False, check_capacity=True, coalesce=True,
                               layers=layers)
    rows = kernel_latencies(trace)
    if rows is None:  # a kernel with several records: the breakdown's group-by sums them
        frame = kernel_breakdown(plan, trace)
        return KernelTimes(plan, fit, frame[["layer_type", "kernel", "latency_s", "bound"]].to_dict(orient="records"),
                           float(frame["latency_s"].sum()))
    # the sum ``SimulationResult.total_s`` takes (pandas' over the same column)
    total = float(pd.Series([r["latency_s"] for r in rows], dtype=float).sum())
    return KernelTimes(plan, fit, rows, total)
