"""Serving sweeps: deployments x request rates, the capacity-planning answer.

Owns: ``sweep_task`` (one deployment at one rate), ``serve_sweep``, ``sustained_rates`` and
``nodes_needed``. Imports: deployment, metrics (``Slo``), run, workload, explore's executors
(passed in), pandas. Writes no files.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from rdusim.analysis.serving.deployment import Deployment, load_deployment
from rdusim.analysis.serving.metrics import Slo
from rdusim.analysis.serving.run import run_serving
from rdusim.analysis.serving.workload import GeneratedWorkload
from rdusim.errors import ConfigError


def sweep_task(deployment: Deployment, workload: GeneratedWorkload, rate: float, slo: Slo) -> dict[str, Any]:
    """One (deployment, rate) point: the summary (what a worker sends back), measured as the run
    goes (memory follows the requests in flight)."""
    result = run_serving(deployment, workload.at(rate), slo, record_events=False, stream=True)
    summary = dict(result.summary)
    summary.pop("rejections", None)
    summary.pop("decode_steps_per_batch_bucket", None)
    summary["rate"] = rate
    util = result.nodes.groupby("role")["utilisation"].mean()
    for role, value in util.items():
        summary[f"utilisation_{role}"] = float(value)
    return summary


def serve_sweep(paths: list[str | Deployment], rates: list[float], workload: GeneratedWorkload, slo: Slo,
                executor: Any | None = None, load: Callable[[str], Deployment] = load_deployment) -> pd.DataFrame:
    """Every deployment at every rate; rows in input order whatever the executor."""
    for rate in rates:
        if not (rate > 0 and math.isfinite(rate)):
            raise ConfigError(f"--rate: every rate must be a positive number of requests per second, got {rate:g}")
    given = {i: p for i, p in enumerate(paths) if isinstance(p, Deployment)}
    todo = [p for p in paths if not isinstance(p, Deployment)]
    loaded = [load(p) for p in todo] if executor is None else executor.map(load, [(p,) for p in todo])
    deployments = [given[i] if i in given else loaded.pop(0) for i in range(len(paths))]
    tasks = [(d, workload, r, slo) for d in deployments for r in rates]
    rows = [sweep_task(*t) for t in tasks] if executor is None else executor.map(sweep_task, tasks)
    frame = pd.DataFrame(rows)
    first = ["deployment", "policy", "rate", "request_goodput", "slo_attainment", "request_throughput",
             "p90_ttft_ms", "p90_tpot_ms", "mean_decode_batch", "rejected"]
    return frame[first + [c for c in frame.columns if c not in first]]


def sustained_rates(frame: pd.DataFrame, attainment: float = 0.9) -> pd.DataFrame:
    """Per deployment: the highest rate whose SLO attainment is at least ``attainment``
    (every lower rate in the sweep must also meet it), and the goodput there."""
    rows = []
    for name, group in frame.groupby("deployment", sort=False):
        group = group.sort_values("rate")
        best = None
        for row in group.itertuples():
            if row.slo_attainment < attainment:
                break
            best = row
        top = best is not None and best.rate == group["rate"].max()
        rows.append({"deployment": name, "policy": group["policy"].iloc[0],
                     "sustained_rate": best.rate if best is not None else 0.0, "highest_tried": top,
                     "goodput_at_rate": best.request_goodput if best is not None else 0.0,
                     "p90_ttft_ms": best.p90_ttft_ms if best is not None else float("nan"),
                     "p90_tpot_ms": best.p90_tpot_ms if best is not None else float("nan")})
    return pd.DataFrame(rows)


def nodes_needed(path: str | Path, rate: float, workload: GeneratedWorkload, slo: Slo, *, attainment: float = 0.9,
                 max_decode_nodes: int = 8, overrides: list[str] | None = None,
                 decode_overrides: list[str] | None = None) -> pd.DataFrame:
    """The smallest deployment of this kind that serves ``rate`` within the SLOs.

    Decode nodes grow one at a time with prefill nodes in the file's ratio until
    ``attainment`` of the requests meet both SLOs; then (disaggregated) the fewest prefill nodes
    that still meet them, by bisection (attainment assumed monotone in nodes). One row per size
    tried; ``meets`` marks the ones that did.
    """
    base = load_deployment(path, overrides, decode_overrides)
    # nodes of the serving file (a GPU node may hold several engines: docs/serving.md)
    ratio = (base.spec.prefill.nodes or 0) / base.spec.decode.nodes
    disaggregated = base.spec.layout == "disaggregated"

    def trial(prefill: int, decode: int) -> dict[str, Any]:
        sizes = [f"decode.nodes={decode}"] + ([f"prefill.nodes={prefill}"] if disaggregated else [])
        deployment = load_deployment(path, [*(overrides or []), *sizes], decode_overrides)
        row = sweep_task(deployment, workload, rate, slo)
        prefill_nodes = deployment.spec.prefill.nodes if disaggregated else 0
        return row | {"decode_nodes": decode, "prefill_nodes": prefill_nodes, "nodes": decode + prefill_nodes,
                      "meets": row["slo_attainment"] >= attainment}

    rows = []
    for decode in range(1, max_decode_nodes + 1):
        rows.append(trial(max(1, math.ceil(ratio * decode)), decode))
        if rows[-1]["meets"]:
            break
    if disaggregated and rows[-1]["meets"]:       # bisect the fewest prefill nodes that still meet it
        decode, low, high = rows[-1]["decode_nodes"], 0, rows[-1]["prefill_nodes"]
        while high - low > 1:
            middle = (low + high) // 2
            rows.append(trial(middle, decode))
            low, high = (low, middle) if rows[-1]["meets"] else (middle, high)
    return pd.DataFrame(rows)[["deployment", "policy", "nodes", "prefill_nodes", "decode_nodes", "rate", "meets",
                               "slo_attainment", "request_goodput", "p90_ttft_ms", "p90_tpot_ms"]]
