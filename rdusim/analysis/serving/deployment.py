"""Serving deployments: a serving YAML resolved into the request engine's model, with step-time
tables built by the kernel simulator (SN40L mappings) or the GPU model (GPU mappings: ``.gpu``).

Owns: ``Deployment`` / ``load_deployment`` (a serving YAML -> the engine's ``ServingModel``;
the two mappings must be of one kind), the SN40L side (``_sn40l_sides``), its memoised
step-time simulations (``prefill_time``, ``decode_step_time``) and ``interpolation_error``.
Imports: config, mapping (capacity, memory), model (policy, kv_cache), sim (the request
engine), result (``simulate``), sweep (``smallest_batch``), gpu (``is_gpu_mapping``), serving
(``.sides``, ``.gpu``), pandas. Writes no files. Runs: ``rdusim.analysis.serving.run``;
metrics: ``.metrics``; traces: ``.perfetto``; rate sweeps: ``.sweep``.

Where the numbers come from for SN40L mappings (one source of truth each):

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

import pandas as pd

from rdusim.analysis.gpu.predict import is_gpu_mapping
from rdusim.analysis.result import simulate
from rdusim.analysis.serving.gpu import gpu_sides
from rdusim.analysis.serving.sides import Sides, accepted_override, check_same_policy, step_tables
from rdusim.analysis.sweep import smallest_batch
from rdusim.config.loader import Document, apply_overrides, read_document, validate
from rdusim.config.serving import ServingSpec
from rdusim.errors import ConfigError
from rdusim.kv_policy import COMPRESSING, FIXED_SIZE
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.capacity import batch_candidates, hbm_fit, max_batch
from rdusim.mapping.memory import cached_layers, kv_cache_bytes_per_socket
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.policy import kv_length
from rdusim.model.speculative import accepted_tokens_per_step
from rdusim.sim.serving import DecodeTable, PrefillTable, ServingModel


# ------------------------------------------------------------------------ deployment
@dataclass(frozen=True)
class Deployment:
    """A serving YAML resolved: the engine's model plus what it was derived from."""

    name: str
    path: str
    spec: ServingSpec
    model: ServingModel
    #: what the two mappings gave the engine: tables, buckets, memory, policy, direct step functions
    sides: Sides = field(repr=False, compare=False)
    info: dict[str, Any] = field(default_factory=dict)
    #: the serving YAML as read (with ``--set`` overrides): ``document.where(key)`` locates a key
    document: Document | None = field(default=None, repr=False, compare=False)

    @property
    def policy(self) -> str:
        return self.sides.policy.name

    @property
    def compression(self) -> float:
        return self.sides.policy.compression

    @property
    def max_batch_reason(self) -> str:
        return self.sides.max_batch_reason

    @property
    def prefill_table(self) -> PrefillTable:
        return self.sides.prefill_table

    @property
    def decode_table(self) -> DecodeTable:
        return self.sides.decode_table


def load_deployment(path: str | Path, overrides: list[str] | None = None,
                    decode_overrides: list[str] | None = None,
                    progress: Callable[[int, int], None] | None = None) -> Deployment:
    """Read and validate a serving YAML and build its step-time tables by simulation.

    The mappings are SN40L ``mapping`` documents (the kernel simulator) or GPU ``gpu_mapping``
    documents (the GPU model, ``rdusim.analysis.serving.gpu``), both of one kind.
    ``overrides`` edit the serving file (``decode.nodes=2``); ``decode_overrides`` edit its
    decode mapping (``kv_policy.name=snapkv``), e.g. to pair it with another prefill mapping.
    ``progress(done, total)``: step-table simulations so far (memoised ones count too).
    """
    document = apply_overrides(read_document(path), list(overrides or []))
    spec: ServingSpec = validate(document, ServingSpec)
    prefill_path = _mapping_path(document, "prefill")
    decode_path = _mapping_path(document, "decode")
    gpu = [is_gpu_mapping(prefill_path), is_gpu_mapping(decode_path)]
    if gpu[0] != gpu[1]:
        kind = ["mapping (SN40L)", "gpu_mapping"]
        raise ConfigError(f"{document.path}:{document.lines.get(('decode', 'mapping'), 1)}: decode.mapping: a "
                          f"{kind[gpu[1]]} beside a {kind[gpu[0]]} prefill mapping: both must be SN40L mappings "
                          "(kind: mapping) or both GPU mappings (kind: gpu_mapping); the decode side holds the "
                          "KV cache the prefill side made")
    build = gpu_sides if gpu[0] else _sn40l_sides
    sides = build(document, spec, prefill_path, decode_path, list(decode_overrides or []), progress)
    link = spec.interconnect
    colocated = spec.layout == "colocated"
    memory = sides.memory
    model = ServingModel(
        layout=spec.layout,
        prefill_nodes=0 if colocated else int(spec.prefill.nodes or 0) * sides.prefill_engines_per_node,
        decode_nodes=spec.decode.nodes * sides.engines_per_node, prefill_time=sides.prefill_table,
        decode_step_time=sides.decode_table,
        kept_tokens=functools.partial(kv_length, policy=sides.policy), kv_grows=sides.policy.name not in FIXED_SIZE,
        batch_buckets=sides.buckets, kv_groups=memory["groups"],
        kv_bytes_per_group=memory["free_bytes"], kv_bytes_per_token=memory["bytes_per_token_socket"],
        shipped_bytes_per_token=memory["bytes_per_token"], accepted_tokens_per_step=sides.accepted_tokens_per_step,
        max_context=sides.info["max_context"],
        link_bytes_per_s=link.bandwidth_bytes_per_s if link else math.inf,
        link_latency_s=link.latency_s if link else 0.0, scheduling=spec.scheduling,
        chunk_tokens=spec.prefill.chunk_tokens, draft_tokens=sides.draft_tokens,
        acceptance_rate=sides.acceptance_rate, seed=sides.seed)
    return Deployment(spec.name, str(document.path), spec, model, sides, sides.info | memory, document)


def _sn40l_sides(document: Document, spec: ServingSpec, prefill_path: Path, decode_path: Path,
                 extra_overrides: list[str], progress: Callable[[int, int], None] | None) -> Sides:
    """SN40L mappings: every step time from the kernel simulator, HBM from the mapping's memory model."""
    decode_overrides = _decode_overrides(spec) + extra_overrides
    decode = load_mapping(decode_path, overrides=decode_overrides)
    prefill = load_mapping(prefill_path)
    check_same_policy(document, prefill.spec.kv_policy, decode.spec.kv_policy)
    max_context = spec.decode.max_context or decode.spec.workload.seq_len
    decode = load_mapping(decode_path, overrides=decode_overrides, seq_len=max_context)
    buckets, reason = _batch_buckets(document, spec, decode_path, decode_overrides, max_context)
    memory = _decode_memory(decode_path, decode_overrides, max_context, buckets[-1])
    policy = decode.spec.kv_policy
    sd = decode.spec.speculative
    compressing = policy.name in COMPRESSING
    overrides = tuple(decode_overrides)
    prefill_s = functools.partial(prefill_time, str(prefill_path))
    decode_s = functools.partial(decode_step_time, str(decode_path), overrides, compressing=compressing)
    prefill_table, decode_table = step_tables(document, spec, buckets, max_context, prefill_s, decode_s, progress)
    info = {"prefill_mapping": str(prefill_path), "decode_mapping": str(decode_path), "max_context": max_context,
            "decode_overrides": overrides, "model": decode.model.name, "hardware": decode.system.name}
    return Sides(prefill_table, decode_table, tuple(buckets), reason, memory, policy,
                 accepted_tokens_per_step(decode.spec), decode.spec.workload.seed,
                 prefill_s, decode_s,
                 draft_tokens=sd.k if sd is not None else 0,
                 acceptance_rate=sd.acceptance.rate if sd is not None else 0.0, info=info)


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
    return overrides + accepted_override(spec)


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
    # per socket: the target's cache and a speculative draft's (memory_report holds both)
    per_socket = kv_cache_bytes_per_socket(plan) * groups / (plan.batch * plan.kv_len)
    free = fit.capacity_bytes - fit.weights_bytes - fit.activations_bytes - fit.reserved_bytes
    shipped = kv_bytes_per_token_layer(plan.model) * cached_layers(plan)
    sd = plan.speculative
    if sd is not None and sd.draft is not None and not sd.self_draft:  # a draft model's prompt cache too
        shipped += kv_bytes_per_token_layer(sd.draft.model) * sd.draft.model.layers
    return {"groups": groups, "free_bytes": free, "bytes_per_token_socket": per_socket,
            "bytes_per_token": shipped,
            "hbm_capacity_bytes": fit.capacity_bytes, "hbm_weights_bytes": fit.weights_bytes,
            "hbm_activations_bytes": fit.activations_bytes, "hbm_reserved_bytes": fit.reserved_bytes}


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
    sides = deployment.sides
    grid = deployment.prefill_table.tokens
    for lo, hi in zip(grid, grid[1:], strict=False):
        point = round(math.sqrt(lo * hi))
        rows.append({"phase": "prefill", "batch": 1, "tokens": point, "simulated_s": sides.prefill_step(point),
                     "interpolated_s": deployment.prefill_table(point)})
    table = deployment.decode_table
    for bucket in table.buckets:
        for lo, hi in zip(table.kv_tokens, table.kv_tokens[1:], strict=False):
            point = (lo + hi) // 2
            rows.append({"phase": "decode", "batch": bucket, "tokens": point,
                         "simulated_s": sides.decode_step(bucket, point), "interpolated_s": table(bucket, point)})
    frame = pd.DataFrame(rows)
    frame["error"] = frame["interpolated_s"] / frame["simulated_s"] - 1
    return frame
