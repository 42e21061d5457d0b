"""``simulate()``: the one-call Python API, and the result it returns.

Owns: ``SimulationResult``, ``simulate``. Imports: mapping, sim, breakdown, pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rdusim.analysis.breakdown import kernel_breakdown
from rdusim.errors import MappingError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.capacity import HbmFit, hbm_fit, kv_overflow
from rdusim.mapping.memory import memory_report
from rdusim.mapping.plan import DRAFT_PREFIX, Plan
from rdusim.model.speculative import accepted_tokens_per_step
from rdusim.sim.engine import simulate_plan
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


def simulate(mapping: str | Path | LoadedMapping, *, seq_len: int | None = None, batch: int | None = None,
             hw: str | Path | None = None, overrides: list[str] | None = None, fast: bool = True,
             record_events: bool = True, check_capacity: bool = True, coalesce: bool = True) -> SimulationResult:
    """Simulate a mapping (a YAML path or a loaded mapping) and return the breakdown.

    ``coalesce=False`` runs the reference engine (one event per work item per socket; the
    default coalesces identical work, ``rdusim.sim.engine``), for tests and benchmarks.

    Raises ``MappingError`` with the numbers when the mapping does not fit: SRAM per kernel
    always, HBM per socket unless ``check_capacity=False`` (a what-if beyond capacity).
    """
    if isinstance(mapping, LoadedMapping):
        if seq_len is not None or batch is not None or hw is not None or overrides:
            mapping = load_mapping(mapping.document.path, overrides=overrides, seq_len=seq_len, batch=batch, hw=hw)
        loaded = mapping
    else:
        loaded = load_mapping(mapping, overrides=overrides, seq_len=seq_len, batch=batch, hw=hw)
    if check_capacity and (overflow := kv_overflow(loaded)):
        raise MappingError(f"{loaded.where('workload', 'batch')}: does not fit: {overflow} "
                           "(--ignore-capacity simulates it anyway)")
    plan = build_plan(loaded)
    memory = memory_report(plan)
    fit = hbm_fit(plan, loaded, memory)
    if check_capacity:
        if not fit.fits:
            raise MappingError(f"{loaded.where('workload', 'batch')}: does not fit: {fit.reason} "
                               "(--ignore-capacity simulates it anyway)")
    trace = simulate_plan(plan, fast=fast, record_events=record_events, coalesce=coalesce)
    return SimulationResult(plan, trace, kernel_breakdown(plan, trace), memory, fit)
