"""Does a plan fit in HBM, and the largest batch that does.

Owns: ``HbmFit``, ``hbm_fit``, ``reserved_prefill_bytes``, ``max_batch``. Imports: build,
bundle, memory, plan.

Per socket: weights (plus the MTP layer when multi-token prediction is on), the KV cache
for the batch, the decode activations, and, when the decode mapping names the prefill
mapping it shares the node with, what that prefill holds for one prompt of the same length:
its KV cache (plus, for a compressing policy, the layer being compressed at full length)
and peak live activations (continuous batching runs prefill on the same sockets, so that
much HBM stays free). With multi-token prediction the MTP layer has a KV cache too.
Static graphs are compiled for power-of-two batches, so the maximum batch is the largest
power of two (and multiple of the attention's DP degree) that fits.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from rdusim.errors import MappingError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.memory import cached_layers, memory_report
from rdusim.mapping.plan import Plan
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.policy import kv_length
from rdusim.units import format_bytes


@dataclass(frozen=True)
class HbmFit:
    fits: bool
    reason: str
    capacity_bytes: float
    weights_bytes: float
    kv_bytes: float
    activations_bytes: float
    reserved_bytes: float

    @property
    def used_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes + self.activations_bytes + self.reserved_bytes


def hbm_fit(plan: Plan, loaded: LoadedMapping, report: dict[str, dict[str, float]] | None = None) -> HbmFit:
    """HBM per socket against capacity; ``report`` reuses a ``memory_report(plan)`` already made."""
    hbm = (report or memory_report(plan))["hbm"]
    reserved = reserved_prefill_bytes(loaded)
    capacity = plan.system.socket.capacity_bytes("hbm")
    fit = HbmFit(True, "", capacity, hbm["weights"], hbm["kv_cache"], hbm["activations"], reserved)
    if fit.used_bytes <= capacity:
        return fit
    reason = (f"HBM per socket: weights {format_bytes(fit.weights_bytes)} + KV {format_bytes(fit.kv_bytes)} "
              f"(batch {plan.batch} x {plan.kv_len} tokens) + activations {format_bytes(fit.activations_bytes)}"
              f" + prefill reserve {format_bytes(reserved)} = {format_bytes(fit.used_bytes)} "
              f"> {format_bytes(capacity)}")
    return HbmFit(False, reason, capacity, fit.weights_bytes, fit.kv_bytes, fit.activations_bytes, reserved)


def reserved_prefill_bytes(loaded: LoadedMapping) -> float:
    """HBM the companion prefill mapping needs for one prompt of this length (0 if none).

    The prefill mapping is read without compression; the KV it holds follows this
    mapping's policy: the kept tokens of every layer, plus the layer being compressed at
    full length.
    """
    if loaded.spec.phase != "decode" or loaded.spec.prefill is None:
        return 0.0
    path = (loaded.document.path.parent / loaded.spec.prefill).resolve()
    seq_len = loaded.spec.workload.seq_len
    activations, full_kv, layers = _prefill_footprint(str(path), seq_len)
    kept = kv_length(seq_len, loaded.spec.kv_policy) / seq_len
    return activations + full_kv * kept + full_kv / layers * (1 - kept)


@functools.lru_cache(maxsize=64)
def _prefill_footprint(path: str, seq_len: int) -> tuple[float, float, int]:
    """(peak live activations, full-length KV cache, cached layers) of a prefill, per socket."""
    plan = build_plan(load_mapping(Path(path), seq_len=seq_len))
    hbm = memory_report(plan)["hbm"]
    return hbm["activations"], hbm["kv_cache"], cached_layers(plan)


def batch_candidates(start: int, limit: int = 1 << 16) -> list[int]:
    """Powers of two from ``start`` (rounded up to one) to ``limit``."""
    batch = 1
    while batch < start:
        batch *= 2
    out = []
    while batch <= limit:
        out.append(batch)
        batch *= 2
    return out


def max_batch(path: str | Path, *, overrides: list[str] | None = None) -> tuple[int, str]:
    """Largest power-of-two batch that builds and fits HBM, and why the next one does not."""
    best, reason = 0, "no batch fits"
    for batch in batch_candidates(1):
        try:
            loaded = load_mapping(path, overrides=overrides, batch=batch)
            fit = hbm_fit(build_plan(loaded), loaded)
        except MappingError as error:
            if best:
                return best, str(error).splitlines()[0]
            reason = str(error).splitlines()[0]
            continue
        if not fit.fits:
            return best, fit.reason
        best = batch
    return best, reason


def kv_overflow(loaded: LoadedMapping) -> str:
    """Why the batch cannot fit before any plan is built ('' when it might).

    A cheap lower bound for absurd batches: one layer's KV cache for the whole batch
    against the HBM of every socket of the node. ``hbm_fit`` is the real check.
    """
    spec = loaded.spec
    kept = kv_length(spec.workload.seq_len, spec.kv_policy)
    need = spec.workload.batch * kept * kv_bytes_per_token_layer(loaded.model)
    have = loaded.system.sockets * loaded.system.socket.capacity_bytes("hbm")
    if need <= have:
        return ""
    return (f"batch {spec.workload.batch} x {kept} tokens needs {format_bytes(need)} of KV cache for a single "
            f"layer, more than the {format_bytes(have)} of HBM of all {loaded.system.sockets} sockets")
