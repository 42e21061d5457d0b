"""Sweeps: prompt lengths x KV policies x batch sizes (x draft lengths) -> one tidy row per point.

Owns: ``sweep``, ``SWEEP_COLUMNS``, ``policy_overrides``, and the summaries of a sweep's
table ``at_max_batch`` and ``policy_gain``. Imports: mapping, sim, breakdown, metrics, execution,
pandas. Each (prompt length, policy) is one task on an executor (worker processes by default,
or a Dask cluster); inside it, batches are tried in increasing order. ``batch="auto"`` tries powers of two until one does
not fit (that row is kept, with the reason). Rows come back in input order, so a sweep is
deterministic however the workers interleave. ``draft_ks`` (a speculative mapping only) adds
the draft length ``k`` as an axis: each row then says its ``draft_k``, the accepted tokens per
step, the draft's and the verification's share of the step, and the tokens/s per user.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from rdusim.analysis.breakdown import kernel_breakdown
from rdusim.analysis.execution import Executor, LocalExecutor, Progress
from rdusim.analysis.metrics import step_figures
from rdusim.config.schema import MappingSpec
from rdusim.errors import ConfigError, MappingError
from rdusim.kv_policy import COMPRESSING, parse_policy
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.capacity import batch_candidates, hbm_fit, kv_overflow, max_batch
from rdusim.mapping.plan import DRAFT_PREFIX
from rdusim.model.speculative import accepted_tokens_per_step
from rdusim.sim.engine import simulate_plan
from rdusim.summation import add_in_order

SWEEP_COLUMNS = ["model", "seq_len", "policy", "kv_len", "batch", "fits", "reason", "step_s", "ttft_s", "tpot_s",
                 "tokens_per_s", "max_batch", "margin_gib", "bound", "hbm_weights_bytes", "hbm_kv_bytes",
                 "hbm_activations_bytes", "hbm_reserved_bytes", "hbm_capacity_bytes",
                 "draft_k", "accepted_tokens_per_step", "tokens_per_s_per_user", "draft_s", "verify_s"]


def policy_overrides(policy: str, compression: float) -> list[str]:
    return [f"kv_policy.name={policy}",
            f"kv_policy.compression={compression if policy in COMPRESSING else 1}"]


def sweep(mapping: str | Path, seq_lens: list[int] | None, policies: list[str], batches: list[int] | str = "auto",
          *, compression: float = 4.0, workers: int | None = None, executor: Executor | None = None,
          progress: Progress | None = None, draft_ks: list[int] | None = None,
          overrides: list[str] | None = None) -> pd.DataFrame:
    """Simulate every point; infeasible points are rows with ``fits=False`` and a reason.

    The (prompt length, policy, draft length) groups run on ``executor`` (default: ``workers``
    local processes, at most one per group); rows come back in input order. ``seq_lens=None``
    sweeps the mapping's own prompt length. ``overrides`` (``KEY=VALUE``, as ``--set``) apply to
    every point, before the sweep's own axes.
    """
    extra = tuple(overrides or ())
    if seq_lens is None:
        seq_lens = [load_mapping(mapping, overrides=list(extra)).spec.workload.seq_len]
    ks: list[int | None] = list(draft_ks) if draft_ks else [None]
    tasks = [(str(mapping), s, parse_policy(p), batches, compression, k, extra) for s in seq_lens for p in policies
             for k in ks]
    for seq_len in seq_lens:  # file and option errors up front, not from inside a worker
        loaded = load_mapping(mapping, seq_len=seq_len, overrides=list(extra))
        if draft_ks and loaded.spec.speculative is None:
            raise ConfigError(f"--draft-k: {mapping} has no speculative section (a draft model and its "
                              "acceptance rate); the draft length applies to speculative decode mappings")
    own = executor is None
    executor = executor or LocalExecutor(min(workers or os.cpu_count() or 1, len(tasks)))
    try:
        results = executor.map(_run_group, tasks, progress)
    finally:
        if own:
            executor.close()
    return pd.DataFrame([row for group in results for row in group], columns=SWEEP_COLUMNS)


def _run_group(mapping: str, seq_len: int, policy: str, batches: list[int] | str, compression: float,
               draft_k: int | None = None, extra: tuple[str, ...] = ()) -> list[dict]:
    overrides = [*extra, f"workload.seq_len={seq_len}", *policy_overrides(policy, compression)]
    if draft_k is not None:
        overrides.append(f"speculative.k={draft_k}")
    auto = batches == "auto"
    candidates = batch_candidates(smallest_batch(load_mapping(mapping, overrides=list(extra)).spec)) \
        if auto else list(batches)
    rows: list[dict] = []
    for batch in candidates:
        row = _point(mapping, overrides + [f"workload.batch={batch}"], seq_len, policy, batch)
        rows.append(row)
        if auto and not row["fits"]:
            break
    fitting = [r["batch"] for r in rows if r["fits"]]
    largest = max(fitting, default=0) if auto else max_batch(mapping, overrides=overrides)[0]
    for row in rows:
        row["max_batch"] = largest
    return rows


def _point(mapping: str, overrides: list[str], seq_len: int, policy: str, batch: int) -> dict:
    base = {"seq_len": seq_len, "policy": policy, "batch": batch}
    try:
        loaded = load_mapping(mapping, overrides=overrides)
        sd = loaded.spec.speculative
        if sd is not None:
            base["draft_k"] = sd.k
        if overflow := kv_overflow(loaded):
            return base | {"fits": False, "reason": overflow}
        plan = build_plan(loaded)
    except MappingError as error:
        return base | {"fits": False, "reason": "; ".join(str(error).splitlines())}
    fit = hbm_fit(plan, loaded)
    row = base | {"model": plan.model.name, "kv_len": plan.kv_len, "fits": fit.fits, "reason": fit.reason,
                  "hbm_weights_bytes": fit.weights_bytes, "hbm_kv_bytes": fit.kv_bytes,
                  "hbm_activations_bytes": fit.activations_bytes, "hbm_reserved_bytes": fit.reserved_bytes,
                  "hbm_capacity_bytes": fit.capacity_bytes, "margin_gib": fit.next_batch_margin_bytes / 2**30}
    if not fit.fits:
        return row
    frame = kernel_breakdown(plan, simulate_plan(plan, record_events=False))
    w = loaded.spec.workload
    accepted = accepted_tokens_per_step(loaded.spec)
    figures = step_figures(loaded.spec.phase, float(frame["latency_s"].sum()), batch=batch, seq_len=w.seq_len,
                           accepted=accepted)
    row |= {k: figures[k] for k in ("step_s", "ttft_s", "tpot_s", "tokens_per_s")} | {
        "bound": frame.loc[frame["latency_s"].idxmax(), "bound"]}
    if loaded.spec.speculative is not None:
        draft = frame["layer_type"].str.startswith(DRAFT_PREFIX)
        row |= {"accepted_tokens_per_step": accepted, "tokens_per_s_per_user": accepted / figures["step_s"],
                "draft_s": float(frame.loc[draft, "latency_s"].sum()),
                "verify_s": float(frame.loc[~draft, "latency_s"].sum())}
    return row


def smallest_batch(spec: MappingSpec) -> int:
    """The smallest batch every data-parallel split of the mapping divides (their LCM)."""
    degrees = [k.dp or 1 for kernels in spec.layers.values() for k in kernels]
    degrees += [shard.get("batch", 1) for kernels in spec.layers.values() for k in kernels
                for shard in k.shard.values()]
    return math.lcm(*degrees)


def at_max_batch(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (prompt length, policy): the point at the maximum batch, and the limit.

    ``limit`` is the reason the next batch was rejected; ``over_bytes`` is how far that
    batch exceeds HBM (NaN when something else stopped it), so small values flag a maximum
    batch that a slightly larger footprint would halve.
    """
    rows = []
    keys = ["seq_len", "policy"] + (["draft_k"] if frame["draft_k"].notna().any() else [])
    for values, group in frame.groupby(keys, sort=False):
        ok, rejected = group[group["fits"]], group[~group["fits"]]
        row = dict(zip(keys, values, strict=True)) | {"max_batch": 0, "kv_len": float("nan"),
               "step_s": float("nan"), "ttft_s": float("nan"), "tpot_s": float("nan"), "tokens_per_s": float("nan")}
        if len(ok):
            best = ok.loc[ok["batch"].idxmax()]
            row |= {k: best[k] for k in ("max_batch", "kv_len", "step_s", "ttft_s", "tpot_s", "tokens_per_s")}
            row["max_batch"] = int(best["batch"])
        limit = rejected.iloc[0] if len(rejected) else None
        row["limit"] = "" if limit is None else limit["reason"]
        used = add_in_order(limit[c] for c in ("hbm_weights_bytes", "hbm_kv_bytes", "hbm_activations_bytes",
                                      "hbm_reserved_bytes")) if limit is not None else float("nan")
        row["over_bytes"] = used - limit["hbm_capacity_bytes"] if limit is not None else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def policy_gain(frame: pd.DataFrame, policy: str = "snapstream", baseline: str = "full") -> pd.DataFrame:
    """Per prompt length: maximum batch and throughput at it for ``baseline`` and ``policy``,
    and the ratios (``batch_gain``, ``throughput_gain``)."""
    best = at_max_batch(frame).set_index(["seq_len", "policy"])
    out = pd.DataFrame({
        f"{baseline}_max_batch": best.xs(baseline, level="policy")["max_batch"],
        f"{baseline}_tokens_per_s": best.xs(baseline, level="policy")["tokens_per_s"],
        f"{policy}_max_batch": best.xs(policy, level="policy")["max_batch"],
        f"{policy}_tokens_per_s": best.xs(policy, level="policy")["tokens_per_s"],
    })
    out["batch_gain"] = out[f"{policy}_max_batch"] / out[f"{baseline}_max_batch"]
    out["throughput_gain"] = out[f"{policy}_tokens_per_s"] / out[f"{baseline}_tokens_per_s"]
    return out.reset_index()
