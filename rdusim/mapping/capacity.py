"""Does a plan fit in HBM, and the largest batch that does.

Owns: ``HbmFit``, ``hbm_fit``, ``reservations``, ``max_batch``. Imports: build, bundle,
memory, plan, model.

Per socket: weights (plus the MTP layer when multi-token prediction is on), the KV cache
for the batch, the decode activations, and what the mapping's ``deployment`` section
reserves, each named: for a co-located prefill (the mapping's ``prefill``), what that
prefill holds for one prompt of ``max_prompt`` tokens, built on the same hardware as the
decode (``--hw`` applies): its kept KV (plus, for a compressing policy, the layer being
compressed at full length) and its peak live activations; for a remote prefill, one
incoming compressed cache; and the runtime reserve. With multi-token prediction the MTP
layer has a KV cache too.
Static graphs are compiled for power-of-two batches, so the maximum batch is the largest
power of two (and multiple of the attention's DP degree) that fits.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path

from rdusim.config.schema import HBM
from rdusim.errors import MappingError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.memory import cached_layers, memory_report, mtp_layers
from rdusim.mapping.plan import Plan
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.policy import kv_length
from rdusim.summation import add_in_order
from rdusim.units import format_bytes


@dataclass(frozen=True)
class HbmFit:
    fits: bool
    reason: str
    capacity_bytes: float
    weights_bytes: float
    kv_bytes: float
    activations_bytes: float
    reserves: dict[str, float] = field(default_factory=dict)   # named deployment reservations
    batch: int = 0

    @property
    def reserved_bytes(self) -> float:
        return add_in_order(self.reserves.values())

    @property
    def used_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes + self.activations_bytes + self.reserved_bytes

    @property
    def free_bytes(self) -> float:
        return self.capacity_bytes - self.used_bytes

    @property
    def next_batch_margin_bytes(self) -> float:
        """HBM left if the batch doubled (the next power of two): KV and activations scale with
        the batch; negative is how far the next batch would overflow."""
        return self.free_bytes - self.kv_bytes - self.activations_bytes


def hbm_fit(plan: Plan, loaded: LoadedMapping, report: dict[str, dict[str, float]] | None = None) -> HbmFit:
    """HBM per socket against capacity; ``report`` reuses a ``memory_report(plan)`` already made."""
    hbm = (report or memory_report(plan))[HBM]
    reserves = reservations(loaded)
    capacity = plan.system.socket.capacity_bytes(HBM)
    fit = HbmFit(True, "", capacity, hbm["weights"], hbm["kv_cache"], hbm["activations"], reserves, plan.batch)
    if fit.used_bytes <= capacity:
        return fit
    reserved = "".join(f" + {name} {format_bytes(b)}" for name, b in reserves.items() if b)
    reason = (f"HBM per socket: weights {format_bytes(fit.weights_bytes)} + KV {format_bytes(fit.kv_bytes)} "
              f"(batch {plan.batch} x {plan.kv_len} tokens) + activations {format_bytes(fit.activations_bytes)}"
              f"{reserved} = {format_bytes(fit.used_bytes)} > {format_bytes(capacity)}")
    return dataclasses.replace(fit, fits=False, reason=reason)


def reservations(loaded: LoadedMapping) -> dict[str, float]:
    """Per socket, what the decode mapping's ``deployment`` keeps free, by name (decode only).

    ``prefill reserve``: as stated (``deployment.prefill_reserve``), else a co-located prefill
    of one ``max_prompt`` prompt, the ``prefill`` mapping built on this mapping's hardware;
    its KV follows this mapping's policy (the kept tokens of every layer, plus the layer
    being compressed at full length). ``incoming cache``: a remote prefill's
    compressed cache of one such prompt, as one decoding socket receives it.
    """
    spec = loaded.spec
    if spec.phase != "decode":
        return {}
    deployment = spec.deployment
    prompt = deployment.max_prompt or spec.workload.seq_len
    kept = kv_length(prompt, spec.kv_policy)
    out: dict[str, float] = {}
    if deployment.prefill == "colocated" and deployment.prefill_reserve_bytes is not None:
        out["prefill reserve"] = deployment.prefill_reserve_bytes
    elif deployment.prefill == "colocated" and spec.prefill is not None:
        path = (loaded.document.path.parent / spec.prefill).resolve()
        activations, full_kv, layers = _prefill_footprint(str(path), prompt, loaded.system.source)
        out["prefill reserve"] = activations + full_kv * kept / prompt + full_kv / layers * (1 - kept / prompt)
    elif deployment.prefill == "remote":
        model = loaded.model
        out["incoming cache"] = kept * kv_bytes_per_token_layer(model) * (model.layers + mtp_layers(model, spec))
    out["runtime reserve"] = deployment.runtime_reserve_bytes
    return out


@functools.lru_cache(maxsize=64)
def _prefill_footprint(path: str, seq_len: int, hardware: Path | None) -> tuple[float, float, int]:
    """(peak live activations, full-length KV cache, cached layers) of a prefill, per socket,
    on the given node (the decode mapping's, so ``--hw`` applies to both)."""
    plan = build_plan(load_mapping(Path(path), seq_len=seq_len, hw=hardware))
    hbm = memory_report(plan)[HBM]
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
    have = loaded.system.sockets * loaded.system.socket.capacity_bytes(HBM)
    if need <= have:
        return ""
    return (f"batch {spec.workload.batch} x {kept} tokens needs {format_bytes(need)} of KV cache for a single "
            f"layer, more than the {format_bytes(have)} of HBM of all {loaded.system.sockets} sockets")
