"""Serving runs: a workload through a deployment, measured.

Owns: ``ServingResult`` and ``run_serving``. Imports: deployment, metrics, workload, sim (the
request engine), pandas. Writes no files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rdusim.analysis.serving.deployment import Deployment
from rdusim.analysis.serving.metrics import (
    Slo,
    batch_histogram,
    default_slo,
    node_frame,
    request_frame,
    step_summary,
    summarise,
)
from rdusim.analysis.serving.workload import Workload
from rdusim.errors import HorizonError
from rdusim.sim.serving import ServingRun, simulate_serving


@dataclass(frozen=True)
class ServingResult:
    deployment: str
    requests: pd.DataFrame          # one row per request (REQUEST_COLUMNS)
    summary: dict[str, Any]
    nodes: pd.DataFrame
    batch_histogram: pd.DataFrame   # decode steps per (bucket, active requests)
    run: ServingRun


def run_serving(deployment: Deployment, workload: Workload, slo: Slo | None = None, *,
                record_events: bool = True, progress: Callable[[int, int], None] | None = None) -> ServingResult:
    """Run the workload through the deployment and measure it (``progress(settled, total)``:
    requests finished or rejected so far)."""
    slo = slo or default_slo(deployment)
    try:
        run = simulate_serving(deployment.model, workload.arrival_s, workload.prompt_tokens, workload.output_tokens,
                               record_events=record_events, progress=progress)
    except HorizonError as error:  # of the engine's events only the KV transfers are bounded by the horizon
        key = ("interconnect", "bandwidth")
        where = deployment.document.where(key) if deployment.document else deployment.path
        raise HorizonError(f"{where}: {'.'.join(key)}: {error}") from None
    # from the steps first: their sorting copies are gone before the request frame is built
    histogram, steps = batch_histogram(run), step_summary(run)
    requests = request_frame(run, slo)
    summary = summarise(run, requests, slo, steps) | {"deployment": deployment.name, "policy": deployment.policy,
                                               "skipped_trace_rows": workload.skipped, "workload": workload.source}
    return ServingResult(deployment.name, requests, summary, node_frame(run, summary["duration_s"]), histogram, run)
