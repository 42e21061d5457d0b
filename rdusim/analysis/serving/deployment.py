"""Serving: a deployment of nodes under request traffic, from the kernel simulator upwards.

Owns: ``Deployment`` / ``load_deployment`` (a serving YAML -> the engine's ``ServingModel``,
with step-time tables built by the kernel simulator), ``run_serving`` and its
``ServingResult`` (per-request frame, summary named as serving benchmarks name things, node
utilisations, batch histogram), ``serve_sweep`` / ``sustained_rates`` (deployments x
rates, the capacity-planning answer), ``serving_trace`` (Perfetto) and
``interpolation_error``. Imports: config, mapping (capacity, memory), model (policy,
kv_cache), sim (the request engine), result (``simulate``), workload, explore (executors),
numpy, pandas. Writes no files.

Where the numbers come from (one source of truth each):

- prefill time of a prompt: ``rdusim.simulate`` of the prefill mapping at the grid's prompt
  lengths (steps of sqrt(2) to 8K, then powers of two), interpolated
  (``rdusim.sim.serving.PrefillTable``);
- decode step time: ``rdusim.simulate`` of the decode mapping at each compiled batch bucket
  and the grid's KV lengths (``DecodeTable``); simulations are memoised by
  (phase, mapping, batch bucket, KV length);
- kept KV tokens: ``rdusim.model.policy.kv_length``; bytes per token:
  ``rdusim.model.kv_cache.kv_bytes_per_token_layer`` x ``rdusim.mapping.memory.cached_layers``;
  per socket and free HBM: ``rdusim.mapping.memory.kv_cache_bytes_per_socket`` and
  ``rdusim.mapping.capacity.hbm_fit`` at the largest batch bucket;
- batch buckets: powers of two from the decode mapping's DP degree up to
  ``rdusim.mapping.capacity.max_batch`` at ``max_context``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rdusim.analysis.result import simulate
from rdusim.analysis.serving.workload import (
    LengthDistribution,
    Workload,
    generate_workload,
)
from rdusim.analysis.sweep import smallest_batch
from rdusim.config.loader import Document, apply_overrides, read_document, validate
from rdusim.config.serving import ServingSpec
from rdusim.errors import ConfigError, MappingError
from rdusim.kv_policy import COMPRESSING, FIXED_SIZE
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import LoadedMapping, load_mapping
from rdusim.mapping.capacity import batch_candidates, hbm_fit, max_batch
from rdusim.mapping.memory import cached_layers, kv_cache_bytes_per_socket
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.policy import kv_length
from rdusim.sim.serving import DecodeTable, PrefillTable, ServingModel, ServingRun, simulate_serving

GRID_START = 1024


# ------------------------------------------------------------------------ deployment
@dataclass(frozen=True)
class Deployment:
    """A serving YAML resolved: the engine's model plus what it was derived from."""

    name: str
    path: str
    spec: ServingSpec
    model: ServingModel
    policy: str
    compression: float
    max_batch_reason: str
    prefill_table: PrefillTable
    decode_table: DecodeTable
    info: dict[str, Any] = field(default_factory=dict)


def load_deployment(path: str | Path, overrides: list[str] | None = None,
                    decode_overrides: list[str] | None = None) -> Deployment:
    """Read and validate a serving YAML and build its step-time tables by simulation.

    ``overrides`` edit the serving file (``decode.nodes=2``); ``decode_overrides`` edit its
    decode mapping (``kv_policy.name=snapkv``), e.g. to pair it with another prefill mapping.
    """
    document = apply_overrides(read_document(path), list(overrides or []))
    spec: ServingSpec = validate(document, ServingSpec)
    prefill_path = _mapping_path(document, "prefill")
    decode_path = _mapping_path(document, "decode")
    decode_overrides = _decode_overrides(spec) + list(decode_overrides or [])
    decode = load_mapping(decode_path, overrides=decode_overrides)
    prefill = load_mapping(prefill_path)
    _check_policies(document, prefill, decode)
    max_context = spec.decode.max_context or decode.spec.workload.seq_len
    decode = load_mapping(decode_path, overrides=decode_overrides, seq_len=max_context)
    buckets, reason = _batch_buckets(document, spec, decode_path, decode_overrides, max_context)
    memory = _decode_memory(decode_path, decode_overrides, max_context, buckets[-1])
    policy = decode.spec.kv_policy
    accepted = decode.spec.workload.accepted_tokens_per_step
    prefill_table, decode_table = _step_tables(document, spec, prefill_path, decode_path, decode_overrides,
                                               buckets, max_context)
    link = spec.interconnect
    colocated = spec.layout == "colocated"
    model = ServingModel(
        layout=spec.layout, prefill_nodes=0 if colocated else int(spec.prefill.nodes or 0),
        decode_nodes=spec.decode.nodes, prefill_time=prefill_table, decode_step_time=decode_table,
        kept_tokens=functools.partial(kv_length, policy=policy), kv_grows=policy.name not in FIXED_SIZE,
        batch_buckets=tuple(buckets), kv_groups=memory["groups"], kv_bytes_per_group=memory["free_bytes"],
        kv_bytes_per_token=memory["bytes_per_token_socket"], shipped_bytes_per_token=memory["bytes_per_token"],
        accepted_tokens_per_step=accepted, max_context=max_context,
        link_bytes_per_s=link.bandwidth_bytes_per_s if link else math.inf,
        link_latency_s=link.latency_s if link else 0.0, scheduling=spec.scheduling,
        chunk_tokens=spec.prefill.chunk_tokens)
    info = {"prefill_mapping": str(prefill_path), "decode_mapping": str(decode_path), "max_context": max_context,
            "decode_overrides": tuple(decode_overrides),
            "model": decode.model.name, "hardware": decode.system.name} | memory
    return Deployment(spec.name, str(document.path), spec, model, policy.name, policy.compression, reason,
                      prefill_table, decode_table, info)


def _step_tables(document: Document, spec: ServingSpec, prefill_path: Path, decode_path: Path,
                 decode_overrides: list[str], buckets: list[int], max_context: int) -> tuple[PrefillTable, DecodeTable]:
    """Simulate the grids (memoised) and wrap them in interpolating tables."""
    prefill_grid = tuple(spec.prefill.grid or _prefill_grid(max_context))
    kv_grid = tuple(spec.decode.kv_grid or _powers_of_two(GRID_START, max_context))
    compressing = load_mapping(decode_path, overrides=decode_overrides).spec.kv_policy.name in COMPRESSING
    try:
        prefill = tuple(prefill_time(str(prefill_path), n) for n in prefill_grid)
    except MappingError as error:
        line = document.lines.get(("prefill", "grid"), document.lines.get(("prefill", "mapping"), 1))
        raise MappingError(f"{document.path}:{line}: prefill: the prefill-time grid {list(prefill_grid)} reaches "
                           f"a prompt the prefill mapping cannot run: {error}") from None
    decode = tuple(tuple(decode_step_time(str(decode_path), tuple(decode_overrides), b, kv, compressing)
                         for kv in kv_grid) for b in buckets)
    return PrefillTable(prefill_grid, prefill), DecodeTable(tuple(buckets), kv_grid, decode)


def _mapping_path(document: Document, role: str) -> Path:
    raw = document.data[role]["mapping"]
    path = Path(raw) if Path(raw).is_absolute() else document.path.parent / raw
    if not path.is_file():
        line = document.lines.get((role, "mapping"), 1)
        raise ConfigError(f"{document.path}:{line}: {role}.mapping: file {raw!r} not found (looked in {path})")
    return path.resolve()


def _decode_overrides(spec: ServingSpec) -> list[str]:
    overrides = []
    if spec.layout == "disaggregated":
        overrides.append("prefill=null")       # decode nodes run no prefill: no HBM reserve for one
    if spec.decode.accepted_tokens_per_step is not None:
        overrides.append(f"workload.accepted_tokens_per_step={spec.decode.accepted_tokens_per_step}")
    return overrides


def _check_policies(document: Document, prefill: LoadedMapping, decode: LoadedMapping) -> None:
    p, d = prefill.spec.kv_policy, decode.spec.kv_policy
    if (p.name, p.compression) != (d.name, d.compression):
        line = document.lines.get(("decode", "mapping"), 1)
        raise ConfigError(f"{document.path}:{line}: decode.mapping: its KV policy {d.name} (compression "
                          f"{d.compression:g}) differs from the prefill mapping's {p.name} (compression "
                          f"{p.compression:g}); the decode node must hold the cache the prefill made")


def _batch_buckets(document: Document, spec: ServingSpec, decode_path: Path, overrides: list[str],
                   max_context: int) -> tuple[list[int], str]:
    smallest = smallest_batch(load_mapping(decode_path, overrides=overrides).spec)
    largest, reason = max_batch(decode_path, overrides=[*overrides, f"workload.seq_len={max_context}"])
    if spec.decode.max_batch is not None:
        largest, reason = spec.decode.max_batch, "decode.max_batch in the serving file"
    buckets = [b for b in batch_candidates(smallest) if b <= largest]
    if not buckets:
        line = document.lines.get(("decode", "max_batch"), document.lines.get(("decode", "mapping"), 1))
        raise ConfigError(f"{document.path}:{line}: decode: no compiled batch fits at max_context {max_context} "
                          f"(the smallest is {smallest}, the DP degree): {reason}")
    return buckets, reason


def _decode_memory(decode_path: Path, overrides: list[str], max_context: int, batch: int) -> dict[str, Any]:
    """Free HBM per socket for KV, and KV bytes per token, from the decode mapping's memory model."""
    loaded = load_mapping(decode_path, overrides=overrides, seq_len=max_context, batch=batch)
    plan = build_plan(loaded)
    fit = hbm_fit(plan, loaded)
    groups = 1
    for kernels in plan.kernels.values():
        for kernel in kernels:
            for stage in kernel.stages:
                if stage.op is not None and stage.op.op_class == "attention":
                    groups = stage.shard.get("batch", 1)
    per_socket = kv_cache_bytes_per_socket(plan) * groups / (plan.batch * plan.kv_len)
    free = fit.capacity_bytes - fit.weights_bytes - fit.activations_bytes - fit.reserved_bytes
    return {"groups": groups, "free_bytes": free, "bytes_per_token_socket": per_socket,
            "bytes_per_token": kv_bytes_per_token_layer(plan.model) * cached_layers(plan),
            "hbm_capacity_bytes": fit.capacity_bytes, "hbm_weights_bytes": fit.weights_bytes,
            "hbm_activations_bytes": fit.activations_bytes, "hbm_reserved_bytes": fit.reserved_bytes}


def _prefill_grid(max_context: int) -> list[int]:
    """Prompt lengths to simulate: steps of sqrt(2) up to 8K, where whole chunks of the
    prefill tiles make the time less smooth (benchmarks/serve_speed.py measures the error),
    then powers of two."""
    fine = [round(GRID_START * 2 ** (k / 2)) for k in range(7)]          # 1024 ... 8192
    return sorted(set(fine[: 1 + sum(f < max_context for f in fine)] + _powers_of_two(8192, max_context)))


def _powers_of_two(start: int, stop: int) -> list[int]:
    grid = [start]
    while grid[-1] < stop:
        grid.append(grid[-1] * 2)
    return grid


# ------------------------------------------------------------------------ step times (memoised)
@functools.lru_cache(maxsize=4096)
def prefill_time(mapping: str, prompt_tokens: int) -> float:
    """Simulated time to first token of one prompt (batch 1), seconds."""
    return simulate(mapping, seq_len=prompt_tokens, batch=1, record_events=False).total_s


@functools.lru_cache(maxsize=4096)
def decode_step_time(mapping: str, overrides: tuple[str, ...], batch: int, kv_tokens: int,
                     compressing: bool) -> float:
    """Simulated decode step at ``batch`` over ``kv_tokens`` of KV per sequence, seconds.

    The prompt length is set to the KV length and a compressing policy's ratio to 1, so the
    kernels attend over exactly ``kv_tokens`` (the policy's decode ops stay); HBM is the
    request engine's business here, so the capacity check is off.
    """
    extra = [*overrides, "kv_policy.compression=1"] if compressing else list(overrides)
    return simulate(mapping, seq_len=kv_tokens, batch=batch, overrides=extra, record_events=False,
                    check_capacity=False).total_s


def interpolation_error(deployment: Deployment) -> pd.DataFrame:
    """Interpolated step times against direct simulation at the midpoints of each grid."""
    rows = []
    info = deployment.info
    grid = deployment.prefill_table.tokens
    for lo, hi in zip(grid, grid[1:], strict=False):
        point = round(math.sqrt(lo * hi))
        direct = prefill_time(info["prefill_mapping"], point)
        rows.append({"phase": "prefill", "batch": 1, "tokens": point, "simulated_s": direct,
                     "interpolated_s": deployment.prefill_table(point)})
    table = deployment.decode_table
    overrides = info["decode_overrides"]
    for bucket in table.buckets:
        for lo, hi in zip(table.kv_tokens, table.kv_tokens[1:], strict=False):
            point = (lo + hi) // 2
            direct = decode_step_time(info["decode_mapping"], overrides, bucket, point,
                                      deployment.policy in COMPRESSING)
            rows.append({"phase": "decode", "batch": bucket, "tokens": point, "simulated_s": direct,
                         "interpolated_s": table(bucket, point)})
    frame = pd.DataFrame(rows)
    frame["error"] = frame["interpolated_s"] / frame["simulated_s"] - 1
    return frame


# ------------------------------------------------------------------------ runs and metrics
@dataclass(frozen=True)
class Slo:
    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        for name, value in (("--slo-ttft-s", self.ttft_s), ("--slo-tpot-ms", self.tpot_s)):
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{name}: an SLO must be a positive, finite time, got {value:g}")


@dataclass(frozen=True)
class ServingResult:
    deployment: str
    requests: pd.DataFrame          # one row per request (REQUEST_COLUMNS)
    summary: dict[str, Any]
    nodes: pd.DataFrame
    batch_histogram: pd.DataFrame   # decode steps per (bucket, active requests)
    run: ServingRun


REQUEST_COLUMNS = ["request", "arrival_s", "prompt_tokens", "output_tokens", "status", "reason", "queue_s",
                   "ttft_s", "transfer_s", "decode_wait_s", "tpot_s", "e2e_s", "prefill_node", "decode_node",
                   "kv_bytes_shipped", "kv_bytes_reserved", "met_slo"]


def run_serving(deployment: Deployment, workload: Workload, slo: Slo | None = None, *,
                record_events: bool = True) -> ServingResult:
    """Run the workload through the deployment and measure it."""
    slo = slo or default_slo(deployment)
    run = simulate_serving(deployment.model, workload.arrival_s, workload.prompt_tokens, workload.output_tokens,
                           record_events=record_events)
    requests = request_frame(run, slo)
    summary = summarise(run, requests, slo) | {"deployment": deployment.name, "policy": deployment.policy,
                                               "skipped_trace_rows": workload.skipped, "workload": workload.source}
    return ServingResult(deployment.name, requests, summary, node_frame(run, summary["duration_s"]),
                         batch_histogram(run), run)


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
    r = run.requests
    names = {n["index"]: n["node"] for n in run.nodes}
    n = len(r["arrival_s"])
    rejected = np.zeros(n, dtype=bool)
    rejected[list(run.reasons)] = True
    output = r["output_tokens"]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (r["finish_s"] - r["first_token_s"]) / (output - 1), np.nan)
    ttft = r["first_token_s"] - r["arrival_s"]
    met = ~rejected & (ttft <= slo.ttft_s) & ((output <= 1) | (tpot <= slo.tpot_s))
    frame = pd.DataFrame({
        "request": np.arange(n), "arrival_s": r["arrival_s"], "prompt_tokens": r["prompt_tokens"],
        "output_tokens": output, "status": np.where(rejected, "rejected", "done"),
        "reason": [run.reasons.get(i, "") for i in range(n)], "queue_s": r["prefill_start_s"] - r["arrival_s"],
        "ttft_s": ttft, "transfer_s": r["decode_ready_s"] - r["first_token_s"],
        "decode_wait_s": r["admitted_s"] - r["decode_ready_s"], "tpot_s": tpot, "e2e_s": r["finish_s"] - r["arrival_s"],
        "prefill_node": [names.get(int(i), "") if i == i else "" for i in r["prefill_node"]],
        "decode_node": [names.get(int(i), "") if i == i else "" for i in r["decode_node"]],
        "kv_bytes_shipped": r["kv_bytes_shipped"], "kv_bytes_reserved": r["kv_bytes_reserved"], "met_slo": met})
    frame[["prompt_tokens", "output_tokens"]] = frame[["prompt_tokens", "output_tokens"]].astype(np.int64)
    return frame


def _stats(prefix: str, values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """mean, median, p90, p99 in milliseconds (serving benchmarks' names), NaN when empty."""
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    values = values[keep]
    out = {f"{k}_{prefix}_ms": float("nan") for k in ("mean", "median", "p90", "p99")}
    if not len(values):
        return out
    if weights is None:
        weights = np.ones_like(values)
    else:
        weights = np.asarray(weights, dtype=float)[keep]
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    cumulative = np.cumsum(weights) / weights.sum()
    out[f"mean_{prefix}_ms"] = float(np.average(values, weights=weights) * 1e3)
    for name, q in (("median", 0.5), ("p90", 0.9), ("p99", 0.99)):
        out[f"{name}_{prefix}_ms"] = float(values[min(np.searchsorted(cumulative, q), len(values) - 1)] * 1e3)
    return out


def summarise(run: ServingRun, requests: pd.DataFrame, slo: Slo) -> dict[str, Any]:
    done = requests[requests["status"] == "done"]
    duration = max(run.end_s, 1e-12)   # first arrival (time 0) to the last event
    good = int(requests["met_slo"].sum())
    summary: dict[str, Any] = {
        "requests": len(requests), "completed": len(done), "rejected": int((requests["status"] == "rejected").sum()),
        "duration_s": duration, "total_input_tokens": int(done["prompt_tokens"].sum()),
        "total_output_tokens": int(done["output_tokens"].sum()),
        "request_throughput": len(done) / duration, "output_throughput": float(done["output_tokens"].sum()) / duration,
        "total_token_throughput": float(done["prompt_tokens"].sum() + done["output_tokens"].sum()) / duration,
        "request_goodput": good / duration, "slo_attainment": good / max(len(requests), 1),
        "slo_ttft_s": slo.ttft_s, "slo_tpot_s": slo.tpot_s,
        "kv_bytes_shipped": float(done["kv_bytes_shipped"].sum()),
    }
    summary |= _stats("ttft", done["ttft_s"].to_numpy())
    summary |= _stats("tpot", done["tpot_s"].to_numpy())
    summary |= _stats("itl", run.steps["itl_s"], run.steps["active"])
    summary |= _stats("e2el", done["e2e_s"].to_numpy())
    summary["mean_decode_batch"] = float(np.average(run.steps["active"], weights=run.steps["duration_s"])) \
        if len(run.steps["active"]) else 0.0
    buckets, counts = np.unique(run.steps["bucket"], return_counts=True)
    summary["decode_steps_per_batch_bucket"] = {str(int(b)): int(c) for b, c in zip(buckets, counts, strict=True)}
    reasons = requests.loc[requests["status"] == "rejected", "reason"]
    summary["rejections"] = {str(k): int(v) for k, v in reasons.str.replace(r"\d[\d.]*", "N", regex=True)
                             .value_counts().items()}
    return summary


def node_frame(run: ServingRun, duration_s: float) -> pd.DataFrame:
    frame = pd.DataFrame(run.nodes)
    frame["utilisation"] = (frame["busy_prefill_s"] + frame["busy_decode_s"]) / duration_s
    return frame


def batch_histogram(run: ServingRun) -> pd.DataFrame:
    steps = pd.DataFrame({"bucket": run.steps["bucket"], "active": run.steps["active"],
                          "duration_s": run.steps["duration_s"]})
    frame = steps.groupby(["bucket", "active"]).agg(steps=("duration_s", "size"), time_s=("duration_s", "sum"))
    return frame.reset_index()


# ------------------------------------------------------------------------ Perfetto
_US = 1e6


def serving_trace(result: ServingResult, max_requests: int = 20000) -> dict:
    """Chrome trace events: one process per node; prefill slices, decode steps, and each
    request's stay on its decode node (async spans); the first ``max_requests`` requests."""
    events: list[dict] = []
    frame = result.requests.head(max_requests)
    index = {n["node"]: n["index"] for n in result.run.nodes}
    for node in result.run.nodes:
        pid = node["index"]
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{node['node']} ({node['role']})"}})
        for tid, name in ((1, "prefill"), (2, "decode steps"), (3, "requests")):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
    r = result.run.requests
    for row in frame.itertuples():
        i = row.request
        if row.prefill_node:
            start = r["prefill_start_s"][i]
            events.append({"ph": "X", "pid": index[row.prefill_node], "tid": 1, "name": f"req {i}", "cat": "prefill",
                           "ts": start * _US, "dur": (r["first_token_s"][i] - start) * _US,
                           "args": {"prompt_tokens": int(row.prompt_tokens)}})
        if row.decode_node and r["admitted_s"][i] == r["admitted_s"][i]:
            pid = index[row.decode_node]
            common = {"pid": pid, "tid": 3, "name": f"req {i}", "cat": "request", "id": int(i)}
            events.append(common | {"ph": "b", "ts": r["admitted_s"][i] * _US,
                                    "args": {"output_tokens": int(row.output_tokens)}})
            events.append(common | {"ph": "e", "ts": r["finish_s"][i] * _US})
    steps = result.run.steps
    limit = r["finish_s"][frame["request"].to_numpy()]
    horizon = np.nanmax(limit) if len(limit) and not np.all(np.isnan(limit)) else np.inf
    for node, start, duration, active, bucket in zip(steps["node"], steps["start_s"], steps["duration_s"],
                                                     steps["active"], steps["bucket"], strict=True):
        if start > horizon:
            break
        events.append({"ph": "X", "pid": int(node), "tid": 2, "name": f"batch {int(bucket)}", "cat": "decode",
                       "ts": float(start) * _US, "dur": float(duration) * _US, "args": {"active": int(active)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


# ------------------------------------------------------------------------ sweeps
@dataclass(frozen=True)
class GeneratedWorkload:
    """A generated workload without its rate (a sweep sets that)."""

    prompt: LengthDistribution
    output: LengthDistribution
    duration_s: float | None = 600.0
    requests: int | None = None
    seed: int = 0
    cv: float = 1.0

    def at(self, rate: float) -> Workload:
        return generate_workload(rate, self.prompt, self.output, seed=self.seed, duration_s=self.duration_s,
                                 requests=self.requests, cv=self.cv)


def sweep_task(deployment: Deployment, workload: GeneratedWorkload, rate: float, slo: Slo) -> dict[str, Any]:
    """One (deployment, rate) point: the summary (what a worker sends back)."""
    result = run_serving(deployment, workload.at(rate), slo, record_events=False)
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
    ratio = base.model.prefill_nodes / base.model.decode_nodes
    disaggregated = base.spec.layout == "disaggregated"

    def trial(prefill: int, decode: int) -> dict[str, Any]:
        sizes = [f"decode.nodes={decode}"] + ([f"prefill.nodes={prefill}"] if disaggregated else [])
        deployment = load_deployment(path, [*(overrides or []), *sizes], decode_overrides)
        row = sweep_task(deployment, workload, rate, slo)
        return row | {"decode_nodes": decode, "prefill_nodes": deployment.model.prefill_nodes,
                      "nodes": decode + deployment.model.prefill_nodes,
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
