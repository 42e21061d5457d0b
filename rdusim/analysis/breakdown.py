"""Trace -> tidy per-kernel breakdown: latency, share, compute/memory/comm time, bound.

Owns: ``kernel_breakdown``, ``kernel_latencies``, ``roofline_s``. Imports: sim.trace, mapping.plan, summation, pandas.

Definitions (per socket, per call, then times the calls of the phase):
- ``latency_s``: launch to barrier, i.e. what the kernel adds to the phase;
- ``compute_s``: busy time of the kernel's busiest stage (its PCUs are its own);
- ``memory_s`` / ``comm_s``: time the HBM+DDR / P2P ports had at least one transfer;
- ``bound``: the largest of the three, or ``latency`` when none covers half the kernel
  (fill, drain, launch and synchronisation dominate);
- utilisations are against peak: PCU-seconds used / available, bytes / (peak x time).
"""

from __future__ import annotations

import pandas as pd

from rdusim.config.schema import DDR, HBM
from rdusim.mapping.plan import KernelPlan, Plan
from rdusim.sim.trace import KernelRecord, Trace
from rdusim.summation import add_in_order

COLUMNS = ["kernel", "layer_type", "calls", "latency_s", "share", "compute_s", "memory_s", "comm_s",
           "bound", "pcu_util", "hbm_util", "roofline_s", "hbm_bytes", "p2p_bytes", "sram_bytes"]


def roofline_s(kernel: KernelPlan, plan: Plan) -> float:
    """Lower bound on one call: max of compute at peak, bytes per tier, link bytes."""
    socket = plan.system.socket
    compute = add_in_order(s.work / socket.peak_ops_per_s(s.op_class) for s in kernel.stages if s.pcus)
    tiers = [(add_in_order(s.load_bytes(t) + s.store_bytes(t) for s in kernel.stages)) / socket.tier_peak_bytes_per_s(t)
             for t in (HBM, DDR)]
    link = add_in_order(s.p2p_bytes for s in kernel.stages) / socket.spec.p2p.bandwidth_bytes_per_s
    return max(compute, *tiers, link)


def kernel_breakdown(plan: Plan, trace: Trace) -> pd.DataFrame:
    """One row per (layer type, kernel), in execution order."""
    rows = []
    plans = plan.every_kernel()
    for record in trace.kernels:
        kernel = plans[(record.layer_type, record.kernel)]
        calls = trace.layer_multiplier.get(record.layer, 1)
        rows.append(_row(record, kernel, plan, calls))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if len({(r["layer_type"], r["kernel"]) for r in rows}) < len(rows):  # else each row is its own group
        frame = frame.groupby(["layer_type", "kernel"], sort=False, as_index=False).agg(_AGGREGATE)[COLUMNS]
    peak = plan.system.socket.tier_peak_bytes_per_s(HBM)
    frame["hbm_util"] = frame["hbm_bytes"] / (peak * frame["latency_s"])  # over every call of the row
    totals = frame.groupby("layer_type")["latency_s"].transform("sum")
    frame["share"] = frame["latency_s"] / totals
    return frame


def kernel_latencies(trace: Trace) -> list[dict] | None:
    """``kernel_breakdown``'s ``layer_type``, ``kernel``, ``latency_s`` and ``bound`` columns as
    records (the same numbers, without the table), or None when a kernel has several records
    (the breakdown's group-by combines them)."""
    rows = []
    for record in trace.kernels:
        calls = trace.layer_multiplier.get(record.layer, 1)
        latency, (_, _, _, bound) = _times(record)
        rows.append({"layer_type": record.layer_type, "kernel": record.kernel, "latency_s": latency * calls,
                     "bound": bound})
    if len({(r["layer_type"], r["kernel"]) for r in rows}) < len(rows):
        return None
    return rows


def _times(record: KernelRecord) -> tuple[float, tuple[float, float, float, str]]:
    """One call's latency, and its compute, memory and comm times and bound."""
    latency = record.end_s - record.start_s
    compute = max(record.stage_busy_s.values(), default=0.0)
    memory = record.pool_busy_s.get(HBM, 0.0) + record.pool_busy_s.get(DDR, 0.0)
    comm = record.pool_busy_s.get("p2p", 0.0)
    parts = {"compute": compute, "memory": memory, "comm": comm}
    top = max(parts, key=lambda k: parts[k])
    bound = top if parts[top] >= 0.5 * latency else "latency"
    return latency, (compute, memory, comm, bound)


def _row(record: KernelRecord, kernel: KernelPlan, plan: Plan, calls: int) -> dict:
    socket = plan.system.socket
    latency, (compute, memory, comm, bound) = _times(record)
    pcu_s = add_in_order(record.stage_busy_s[n] * record.stage_pcus[n] for n in record.stage_busy_s)
    return {
        "kernel": record.kernel, "layer_type": record.layer_type, "calls": calls,
        "latency_s": latency * calls, "share": 0.0, "compute_s": compute * calls, "memory_s": memory * calls,
        "comm_s": comm * calls, "bound": bound, "pcu_util": pcu_s / (socket.pcus * latency),
        "hbm_util": record.pool_bytes.get(HBM, 0.0) / (socket.tier_peak_bytes_per_s(HBM) * latency),
        "roofline_s": roofline_s(kernel, plan) * calls, "hbm_bytes": record.pool_bytes.get(HBM, 0.0) * calls,
        "p2p_bytes": record.pool_bytes.get("p2p", 0.0) * calls, "sram_bytes": kernel.sram_bytes,
    }


_AGGREGATE = {c: "sum" for c in ("calls", "latency_s", "compute_s", "memory_s", "comm_s", "roofline_s",
                                 "hbm_bytes", "p2p_bytes")} | {
    "share": "first", "bound": "first", "pcu_util": "mean", "hbm_util": "mean", "sram_bytes": "max"}
