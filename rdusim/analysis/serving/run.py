"""Serving runs: a workload through a deployment, measured.

Owns: ``ServingResult`` and ``run_serving``. Imports: deployment, metrics, workload, sim (the
request engine), pandas. Writes no files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
import pandas as pd

from rdusim.analysis.serving.deployment import Deployment
from rdusim.analysis.serving.metrics import (
    Slo,
    batch_histogram,
    cdf_points,
    default_slo,
    node_frame,
    request_frame,
    step_summary,
    summarise,
)
from rdusim.analysis.serving.stream import StreamedMeasure
from rdusim.analysis.serving.workload import Workload
from rdusim.errors import HorizonError
from rdusim.sim.serving import ServingRun, node_names, simulate_serving


@dataclass(frozen=True)
class ServingResult:
    deployment: str
    requests: pd.DataFrame | None   # one row per request (REQUEST_COLUMNS); None when streamed
    summary: dict[str, Any]
    nodes: pd.DataFrame
    batch_histogram: pd.DataFrame   # decode steps per (bucket, active requests)
    run: ServingRun                 # streamed: its requests, reasons and steps are None
    # latency CDF points per metric (ttft_s, tpot_s, e2e_s): (value s, fraction at or below) at
    # metrics.cdf_ranks of the finished requests' sorted values
    latency: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    # streamed: the first stream.TRACE_REQUESTS requests' rows and records, and the decode steps up
    # to their last finish (what the Perfetto trace draws)
    head: tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]] | None = None


def run_serving(deployment: Deployment, workload: Workload, slo: Slo | None = None, *,
                record_events: bool = True, progress: Callable[[int, int], None] | None = None,
                stream: bool = False, requests_csv: TextIO | None = None) -> ServingResult:
    """Run the workload through the deployment and measure it (``progress(settled, total)``:
    requests finished or rejected so far).

    ``stream``: measure the requests and decode steps as they settle (``StreamedMeasure``) instead
    of keeping them: memory follows the requests in flight, not the run; the same summary, batch
    histogram and CSV bytes; ``requests`` is None, and ``requests_csv`` (a text handle) receives
    the rows of ``requests.csv`` as the requests finish. No event log is kept when streamed."""
    slo = slo or default_slo(deployment)
    if stream:
        return _streamed(deployment, workload, slo, progress, requests_csv)
    run = _simulate(deployment, workload, record_events=record_events, progress=progress)
    # from the steps first: their sorting copies are gone before the request frame is built
    histogram, steps = batch_histogram(run), step_summary(run)
    requests = request_frame(run, slo)
    summary = summarise(run, requests, slo, steps) | _about(deployment, workload)
    done = requests["status"] == "done"
    latency = {m: cdf_points(requests.loc[done, m].to_numpy()) for m in ("ttft_s", "tpot_s", "e2e_s")}
    return ServingResult(deployment.name, requests, summary, node_frame(run, summary["duration_s"]), histogram, run,
                         latency)


def _about(deployment: Deployment, workload: Workload) -> dict[str, Any]:
    return {"deployment": deployment.name, "policy": deployment.policy, "skipped_trace_rows": workload.skipped,
            "workload": workload.source}


def _simulate(deployment: Deployment, workload: Workload, **options: Any) -> ServingRun:
    try:
        return simulate_serving(deployment.model, workload.arrival_s, workload.prompt_tokens, workload.output_tokens,
                                **options)
    except HorizonError as error:  # of the engine's events only the KV transfers are bounded by the horizon
        key = ("interconnect", "bandwidth")
        where = deployment.document.where(key) if deployment.document else deployment.path
        raise HorizonError(f"{where}: {'.'.join(key)}: {error}") from None


def _streamed(deployment: Deployment, workload: Workload, slo: Slo, progress: Callable[[int, int], None] | None,
              requests_csv: TextIO | None) -> ServingResult:
    measure = StreamedMeasure(workload.arrival_s, workload.prompt_tokens, workload.output_tokens,
                              node_names(deployment.model), slo, requests_csv)
    try:
        run = _simulate(deployment, workload, record_events=False, progress=progress, sink=measure)
        out = measure.finish(run.end_s)
    finally:
        measure.close()
    summary = out["summary"] | _about(deployment, workload)
    return ServingResult(deployment.name, None, summary, node_frame(run, summary["duration_s"]),
                         out["batch_histogram"], run, out["latency"], out["head"])
