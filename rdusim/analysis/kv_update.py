"""Ring buffer vs naive SnapStream decode update: on-chip memory per op, fit, step time.

Owns: ``kv_update_comparison``, ``UPDATE_OPS``. Imports: mapping (build, onchip), sim, breakdown, summation.

Both updates are planned for the same decode mapping and prompt; the kernel holding the
update (the one with ``attention``) is allocated onto PMUs (``mapping.onchip``) and each
whole step is simulated. A plan whose working set overflows SRAM is still planned and
simulated (``check_sram=False``): it is a row with ``fits=False`` and the numbers.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rdusim.analysis.breakdown import kernel_breakdown
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.onchip import pmu_allocation
from rdusim.sim.engine import simulate_plan
from rdusim.summation import add_in_order

#: the ops each update adds (the "indexing" ops of the comparison)
UPDATE_OPS = {"ring": ("ring_slot",), "naive": ("naive_shift", "naive_concat", "naive_select")}


def kv_update_comparison(mapping: str | Path, seq_len: int, batch: int, overrides: list[str] | None = None
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per op: update, stage, bytes, PMUs, indexing; per update: totals, fits, step)."""
    by_op, summary = [], []
    for update in ("ring", "naive"):
        extra = [*(overrides or []), f"kv_policy.kv_update={update}", f"workload.seq_len={seq_len}",
                 f"workload.batch={batch}"]
        plan = build_plan(load_mapping(mapping, overrides=extra), check_sram=False)
        layer_type = [t for t in plan.kernels if t.startswith("moe")] or list(plan.kernels)
        kernel = next(k for k in plan.kernels[layer_type[-1]] if any(s.name == "attention" for s in k.stages))
        onchip = pmu_allocation(kernel, plan.system.socket)
        for stage in onchip.stages:
            by_op.append({"update": update, "op": stage.stage, "sram_bytes": stage.bytes, "pmus": stage.pmus,
                          "indexing": stage.stage in UPDATE_OPS[update]})
        indexing = add_in_order(s.bytes for s in onchip.stages if s.stage in UPDATE_OPS[update])
        step = float(kernel_breakdown(plan, simulate_plan(plan, record_events=False))["latency_s"].sum())
        summary.append({"update": update, "kernel": kernel.name, "seq_len": seq_len, "batch": batch,
                        "kv_len": plan.kv_len, "sram_bytes": onchip.bytes, "pmus": onchip.pmus,
                        "pmus_available": onchip.pmus_available, "indexing_bytes": indexing,
                        "indexing_share": indexing / onchip.bytes, "fits": onchip.fits, "step_s": step})
    frame = pd.DataFrame(summary)
    frame["vs_ring"] = frame["sram_bytes"] / frame.loc[frame["update"] == "ring", "sram_bytes"].iloc[0]
    return pd.DataFrame(by_op), frame
