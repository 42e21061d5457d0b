"""Serving metrics: SLOs and what a request-level run measures.

Owns: ``Slo`` (``default_slo``, ``check_slo_possible``), the per-request frame
(``request_frame``, ``REQUEST_COLUMNS``), the summary named as serving benchmarks name things
(``summarise``: mean, median, p90, p99 of TTFT, TPOT, ITL, E2E latency; goodput; SLO
attainment), node utilisations (``node_frame``) and the decode batch histogram
(``batch_histogram``). Imports: deployment (its model), workload, sim (``ServingRun``), numpy,
pandas. Writes no files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rdusim.analysis.serving.deployment import Deployment
from rdusim.analysis.serving.workload import Workload
from rdusim.errors import ConfigError
from rdusim.sim.serving import ServingRun


@dataclass(frozen=True)
class Slo:
    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        for name, value in (("--slo-ttft-s", self.ttft_s), ("--slo-tpot-ms", self.tpot_s)):
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{name}: an SLO must be a positive, finite time, got {value:g}")


REQUEST_COLUMNS = ["request", "arrival_s", "prompt_tokens", "output_tokens", "status", "reason", "queue_s",
                   "ttft_s", "transfer_s", "decode_wait_s", "tpot_s", "e2e_s", "prefill_node", "decode_node",
                   "kv_bytes_shipped", "kv_bytes_reserved", "met_slo"]


def check_slo_possible(deployment: Deployment, workload: Workload, slo: Slo) -> None:
    """Raise ``ConfigError`` when no request of the workload could meet an SLO even on an idle
    deployment: TTFT below the shortest prompt's prefill, or TPOT below one decode step of
    the smallest batch over the shortest cache, per accepted token."""
    if not len(workload):
        return
    model = deployment.model
    shortest = int(workload.prompt_tokens.min())
    ttft = model.prefill_time(shortest)
    if slo.ttft_s < ttft:
        raise ConfigError(f"--slo-ttft-s {slo.ttft_s:g}: impossible on {deployment.name}: the shortest prompt "
                          f"({shortest} tokens) alone takes {ttft:.3g} s to prefill")
    tpot = model.decode_step_time(model.batch_buckets[0], model.kept_tokens(shortest)) \
        / model.accepted_tokens_per_step
    if slo.tpot_s < tpot and (workload.output_tokens > 1).any():
        raise ConfigError(f"--slo-tpot-ms {slo.tpot_s * 1e3:g}: impossible on {deployment.name}: one decode step "
                          f"at the smallest batch ({model.batch_buckets[0]}) takes {tpot * 1e3:.3g} ms per "
                          f"accepted token")


def default_slo(deployment: Deployment) -> Slo:
    if deployment.spec.slo is None:
        raise ConfigError(f"{deployment.path}: no slo in the serving file; give --slo-ttft-s and --slo-tpot-ms")
    return Slo(deployment.spec.slo.ttft_s, deployment.spec.slo.tpot_s)


def request_frame(run: ServingRun, slo: Slo) -> pd.DataFrame:
    return request_rows(run.requests, 0, run.reasons, {n["index"]: n["node"] for n in run.nodes}, slo)


def request_rows(r: dict[str, np.ndarray], first: int, reasons: dict[int, str], names: dict[int, str],
                 slo: Slo) -> pd.DataFrame:
    """The rows of requests ``first`` onwards (``r``: their ``REQUEST_FIELDS`` as float arrays,
    ``reasons``: the rejected ones among them by request id): each row depends on its request only,
    so a run's frame is the concatenation of the rows of its slices."""
    n = len(r["arrival_s"])
    rejected = np.zeros(n, dtype=bool)
    rejected[[i - first for i in reasons]] = True
    output = r["output_tokens"]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (r["finish_s"] - r["first_token_s"]) / (output - 1), np.nan)
    ttft = r["first_token_s"] - r["arrival_s"]
    met = ~rejected & (ttft <= slo.ttft_s) & ((output <= 1) | (tpot <= slo.tpot_s))
    frame = pd.DataFrame({
        "request": np.arange(first, first + n), "arrival_s": r["arrival_s"], "prompt_tokens": r["prompt_tokens"],
        "output_tokens": output, "status": np.where(rejected, "rejected", "done"),
        "reason": [reasons.get(i, "") for i in range(first, first + n)], "queue_s": r["prefill_start_s"] - r["arrival_s"],
        "ttft_s": ttft, "transfer_s": r["decode_ready_s"] - r["first_token_s"],
        "decode_wait_s": r["admitted_s"] - r["decode_ready_s"], "tpot_s": tpot, "e2e_s": r["finish_s"] - r["arrival_s"],
        "prefill_node": [names.get(int(i), "") if i == i else "" for i in r["prefill_node"]],
        "decode_node": [names.get(int(i), "") if i == i else "" for i in r["decode_node"]],
        "kv_bytes_shipped": r["kv_bytes_shipped"], "kv_bytes_reserved": r["kv_bytes_reserved"], "met_slo": met,
        # tokens each decode step delivered to this request on average (bursts under speculative decoding)
        "tokens_per_step": np.where(r["decode_steps"] > 0, (output - 1) / np.where(r["decode_steps"] > 0,
                                                                                   r["decode_steps"], 1), np.nan)}, copy=False)
    frame[["prompt_tokens", "output_tokens"]] = frame[["prompt_tokens", "output_tokens"]].astype(np.int64)
    return frame


def stats(prefix: str, values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """mean, median, p90, p99 in milliseconds (serving benchmarks' names), NaN when empty.

    Exact (weighted) percentiles need every value: a few copies of the column live here while it
    is sorted, then go (~10M decode steps at a million requests)."""
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    if keep.all():
        keep = slice(None)
    else:
        values = values[keep]
    out = {f"{k}_{prefix}_ms": float("nan") for k in ("mean", "median", "p90", "p99")}
    if not len(values):
        return out
    order = np.argsort(values, kind="stable")
    values = values[order]
    # the weights sorted before they become floats (a step's active count is 4 bytes), the mean
    # taken before the cumulative sum: fewer full-length copies alive at once, the same numbers
    weights = np.ones_like(values) if weights is None else np.asarray(weights)[keep][order].astype(float)
    del order, keep
    out[f"mean_{prefix}_ms"] = float(np.average(values, weights=weights) * 1e3)
    cumulative = np.cumsum(weights)
    cumulative /= weights.sum()
    del weights
    for name, q in (("median", 0.5), ("p90", 0.9), ("p99", 0.99)):
        out[f"{name}_{prefix}_ms"] = float(values[min(np.searchsorted(cumulative, q), len(values) - 1)] * 1e3)
    return out


def step_summary(run: ServingRun) -> dict[str, Any]:
    """What the summary takes from the decode steps (computed before the request frame exists,
    so their sorting copies and the frame are never in memory together)."""
    steps = run.steps
    out = stats("itl", steps["itl_s"], steps["active"])
    out["mean_decode_batch"] = float(np.average(steps["active"], weights=steps["duration_s"])) \
        if len(steps["active"]) else 0.0
    # tokens a request receives per decode step (a burst under speculative decoding): every
    # delivery of every step; the ITL above is the gap between deliveries, TPOT counts each token
    active = steps["active"].sum()
    out["mean_tokens_per_step"] = float(steps["tokens"].sum() / active) if active else 0.0
    buckets, counts = np.unique(steps["bucket"], return_counts=True)
    out["decode_steps_per_batch_bucket"] = {str(int(b)): int(c) for b, c in zip(buckets, counts, strict=True)}
    return out


def summarise(run: ServingRun, requests: pd.DataFrame, slo: Slo, steps: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's summary; ``steps``: ``step_summary(run)`` if already computed."""
    steps = step_summary(run) if steps is None else steps
    done = requests.loc[requests["status"] == "done",   # only the columns summed (a million rows: no strings copied)
                        ["prompt_tokens", "output_tokens", "kv_bytes_shipped", "ttft_s", "tpot_s", "e2e_s"]]
    counts = {"requests": len(requests), "completed": len(done),
              "rejected": int((requests["status"] == "rejected").sum()),
              "input_tokens": done["prompt_tokens"].sum(), "output_tokens": done["output_tokens"].sum(),
              "good": int(requests["met_slo"].sum()), "kv_bytes_shipped": float(done["kv_bytes_shipped"].sum())}
    latency = stats("ttft", done["ttft_s"].to_numpy()) | stats("tpot", done["tpot_s"].to_numpy()) \
        | stats("e2el", done["e2e_s"].to_numpy())
    del done
    return assemble_summary(run.end_s, slo, counts, latency, steps, rejection_counts(requests))


def assemble_summary(end_s: float, slo: Slo, counts: dict[str, Any], latency: dict[str, float],
                     steps: dict[str, Any], rejections: dict[str, int]) -> dict[str, Any]:
    """The summary, in its order, from what the requests and the steps gave (in memory or streamed)."""
    duration = max(end_s, 1e-12)   # first arrival (time 0) to the last event
    good, done, total = counts["good"], counts["completed"], counts["requests"]
    summary: dict[str, Any] = {
        "requests": total, "completed": done, "rejected": counts["rejected"],
        "duration_s": duration, "total_input_tokens": int(counts["input_tokens"]),
        "total_output_tokens": int(counts["output_tokens"]),
        "request_throughput": done / duration, "output_throughput": float(counts["output_tokens"]) / duration,
        "total_token_throughput": float(counts["input_tokens"] + counts["output_tokens"]) / duration,
        "request_goodput": good / duration, "slo_attainment": good / max(total, 1),
        "slo_ttft_s": slo.ttft_s, "slo_tpot_s": slo.tpot_s,
        "kv_bytes_shipped": counts["kv_bytes_shipped"],
    }
    summary |= {k: latency[k] for k in latency if "_ttft_" in k or "_tpot_" in k}
    summary |= {k: steps[k] for k in ("mean_itl_ms", "median_itl_ms", "p90_itl_ms", "p99_itl_ms")}
    summary |= {k: latency[k] for k in latency if "_e2el_" in k}
    summary |= {k: steps[k] for k in ("mean_decode_batch", "mean_tokens_per_step", "decode_steps_per_batch_bucket")}
    summary["rejections"] = rejections
    return summary


def rejection_kinds(requests: pd.DataFrame) -> pd.Series:
    """The rejected requests' reasons with their numbers replaced by N (the kinds counted)."""
    return requests.loc[requests["status"] == "rejected", "reason"].str.replace(r"\d[\d.]*", "N", regex=True)


def rejection_counts(requests: pd.DataFrame | None, counts: dict[str, int] | None = None) -> dict[str, int]:
    """Rejections per kind, most first (ties in order of first appearance, as ``value_counts``);
    from the frame, or from ``counts`` (kind -> count, in order of first appearance)."""
    if counts is None:
        return {str(k): int(v) for k, v in rejection_kinds(requests).value_counts().items()}
    ordered = pd.Series(list(counts.values()), index=pd.Index(list(counts), dtype=object), dtype=np.int64)
    return {str(k): int(v) for k, v in ordered.sort_values(ascending=False, kind="stable").items()}


def node_frame(run: ServingRun, duration_s: float) -> pd.DataFrame:
    frame = pd.DataFrame(run.nodes)
    frame["utilisation"] = (frame["busy_prefill_s"] + frame["busy_decode_s"]) / duration_s
    return frame


def batch_histogram(run: ServingRun) -> pd.DataFrame:
    """Decode steps and their time per (bucket, active requests). Grouped by one 8-byte key
    (bucket << 32 | active: the same groups in the same order) over the steps' own duration
    column, so the ~10M steps of a million requests are not copied into a frame; the sums are
    pandas' groupby sums over the same rows in the same order."""
    steps = run.steps
    return histogram_frame(*histogram_groups(histogram_key(steps["bucket"], steps["active"]), steps["duration_s"]))


def histogram_key(bucket: np.ndarray, active: np.ndarray) -> np.ndarray:
    """One 8-byte key per step, ``bucket << 32 | active``: ordered as (bucket, active)."""
    key = bucket.astype(np.int64) << 32
    key |= active
    return key


def histogram_groups(key: np.ndarray, duration: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, steps, seconds) per key, keys increasing: pandas' groupby size and sum (each group's
    sum over its own rows in order, so any subset of whole groups gives the same figures)."""
    frame = pd.Series(duration, copy=False).groupby(key).agg(["size", "sum"])
    return frame.index.to_numpy(), frame["size"].to_numpy(), frame["sum"].to_numpy()


def histogram_frame(codes: np.ndarray, sizes: np.ndarray, sums: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"bucket": (codes >> 32).astype(np.uint32), "active": (codes & 0xFFFFFFFF).astype(np.uint32),
                         "steps": sizes, "time_s": sums})


#: points of a latency CDF figure (the exact quantiles at evenly spaced ranks)
CDF_POINTS = 1000


def cdf_ranks(n: int, points: int = CDF_POINTS) -> np.ndarray:
    """The positions in a sorted column of ``n`` values that a CDF figure draws (all when n <= points)."""
    if n <= points:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, points)).astype(np.int64))


def cdf_points(values: np.ndarray, points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(value, fraction of values at or below it) at ``cdf_ranks`` of the sorted finite values."""
    values = np.sort(values[~np.isnan(values)])
    ranks = cdf_ranks(len(values), points)
    return values[ranks], cdf_fractions(ranks, len(values))


def cdf_fractions(ranks: np.ndarray, n: int) -> np.ndarray:
    """The fraction of a sorted column's ``n`` values at or below each of its positions ``ranks``."""
    return (ranks + 1) / max(n, 1)
