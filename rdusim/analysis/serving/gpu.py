"""GPU deployments: a serving file whose prefill and decode mappings are ``gpu_mapping`` documents.

Owns: ``gpu_sides`` (the request engine's inputs from two GPU mappings) and the memoised GPU
step times (``gpu_prefill_time``, ``gpu_decode_step_time``). Imports: the GPU model
(``rdusim.analysis.gpu.predict``), config, mapping (batch buckets), model (policy), sides.
Writes no files.

Where the numbers come from (one source of truth each, the same as ``rdusim compare-hw``'s GPU rows):

- prefill time of a prompt: ``simulate_gpu_mapping`` of the prefill mapping at batch 1 and the
  grid's prompt lengths; decode step time: the decode mapping at each compiled batch and the grid's
  KV lengths (a compressing policy's ratio set to 1 so the step attends over exactly that KV, as on
  the SN40L side), HBM unchecked there (the engine's admission holds it);
- HBM per GPU: ``replica_fit`` (weights of the replica's layout, KV bytes per token on each GPU
  that holds the cache), the same figures a GPU mapping's batch is checked against;
- engines: a GPU node of the serving file holds ``gpus / tp`` replicas, each an engine of its own
  (its own queue, batch and, disaggregated, its own ingress at ``interconnect.bandwidth``);
- batch buckets: the replica's KV groups (attention DP: its GPUs; else one) times powers of two and
  the largest multiple of 8 that fits at ``max_context`` (``_buckets``: vLLM's capture sizes, thinned),
  as CUDA-graph serving stacks capture a graph per batch size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from rdusim.analysis.gpu.predict import (
    kv_groups,
    load_gpu_mapping,
    replica_fit,
    simulate_gpu_mapping,
)
from rdusim.analysis.serving.sides import Sides, accepted_override, check_same_policy, step_tables
from rdusim.config.loader import Document
from rdusim.config.schema import GpuMappingSpec, ModelSpec
from rdusim.config.serving import ServingSpec
from rdusim.errors import ConfigError
from rdusim.hw.gpu import GpuNode
from rdusim.kv_policy import COMPRESSING
from rdusim.mapping.capacity import batch_candidates

#: vLLM's CUDA-graph batch alignment: it captures batches 1, 2, 4 and every multiple of 8 up to its
#: max_num_seqs (vllm/worker/model_runner.py ``_BATCH_SIZES_TO_CAPTURE``, vllm-project/vllm PR #7894)
GRAPH_ALIGNMENT = 8


def gpu_sides(document: Document, spec: ServingSpec, prefill_path: Path, decode_path: Path,
              extra_overrides: list[str], progress: Callable[[int, int], None] | None) -> Sides:
    """Two GPU mappings of one model: step tables from the GPU model, HBM per GPU of a decode replica."""
    overrides = tuple(accepted_override(spec) + extra_overrides)
    prefill, prefill_model, prefill_node = _load(prefill_path, ())
    decode, model, node = _load(decode_path, overrides)
    _check_pair(document, spec, prefill, decode, prefill_model.name, model.name, prefill_node, node)
    max_context = spec.decode.max_context or decode.workload.seq_len
    _check_context(document, spec, model, max_context)
    fit = replica_fit(decode, model, node, max_context)
    groups = kv_groups(decode)
    buckets, reason = _buckets(document, spec, groups, fit.max_batch, max_context, node.gpu.name)
    compressing = decode.kv_policy.name in COMPRESSING
    prefill_s = functools.partial(gpu_prefill_time, str(prefill_path))
    decode_s = functools.partial(gpu_decode_step_time, str(decode_path), overrides, compressing=compressing)
    prefill_table, decode_table = step_tables(document, spec, buckets, max_context, prefill_s, decode_s, progress)
    memory = {"groups": groups, "free_bytes": fit.capacity_bytes - fit.weights_bytes,
              "bytes_per_token_socket": fit.kv_bytes_per_token, "bytes_per_token": fit.whole_kv_bytes_per_token,
              "hbm_capacity_bytes": fit.capacity_bytes, "hbm_weights_bytes": fit.weights_bytes,
              "hbm_activations_bytes": 0.0, "hbm_reserved_bytes": 0.0}
    replicas = node.gpus // decode.tp
    info = {"prefill_mapping": str(prefill_path), "decode_mapping": str(decode_path), "max_context": max_context,
            "decode_overrides": overrides, "model": model.name, "hardware": node.name,
            "prefill_hardware": prefill_node.name, "tp": decode.tp, "replicas_per_node": replicas}
    return Sides(prefill_table, decode_table, tuple(buckets), reason, memory, decode.kv_policy,
                 decode.workload.accepted_tokens_per_step, decode.workload.seed, prefill_s, decode_s,
                 engines_per_node=replicas, prefill_engines_per_node=prefill_node.gpus // prefill.tp, info=info)


@functools.lru_cache(maxsize=64)
def _load(path: Path, overrides: tuple[str, ...]) -> tuple[GpuMappingSpec, ModelSpec, GpuNode]:
    return load_gpu_mapping(path, overrides=list(overrides), check_fit=False)


def _check_context(document: Document, spec: ServingSpec, model: ModelSpec, max_context: int) -> None:
    """The longest prompt accepted, and the prefill grid, within the model's context (the GPU model
    would run any length; the SN40L mappings refuse it when they load)."""
    if not model.max_context:
        return
    for key, tokens in ((("decode", "max_context"), max_context), (("prefill", "grid"), max(spec.prefill.grid or [0]))):
        if tokens > model.max_context:
            line = document.lines.get(key, document.lines.get((key[0], "mapping"), 1))
            raise ConfigError(f"{document.path}:{line}: {'.'.join(key)}: {tokens} tokens exceed {model.name}'s "
                              f"context of {model.max_context} tokens (max_position_embeddings)")


def _check_pair(document: Document, spec: ServingSpec, prefill: GpuMappingSpec, decode: GpuMappingSpec,
                prefill_model: str, decode_model: str, prefill_node: GpuNode, decode_node: GpuNode) -> None:
    """The rules that span the two GPU mappings, located in the serving file."""

    def at(role: str) -> str:
        return f"{document.path}:{document.lines.get((role, 'mapping'), 1)}: {role}.mapping"

    for role, mapping, phase in (("prefill", prefill, "prefill"), ("decode", decode, "decode")):
        if mapping.phase != phase:
            raise ConfigError(f"{at(role)}: {mapping.name} is a {mapping.phase} mapping; the {role} side "
                              f"needs phase: {phase}")
    if prefill_model != decode_model:
        raise ConfigError(f"{at('decode')}: its model {decode_model} differs from the prefill mapping's "
                          f"{prefill_model}")
    check_same_policy(document, prefill.kv_policy, decode.kv_policy)
    if spec.layout == "colocated" and (prefill_node.name, prefill.tp) != (decode_node.name, decode.tp):
        raise ConfigError(f"{at('prefill')}: co-located: the prefill mapping runs on {prefill.tp} x "
                          f"{prefill_node.name} where the decode mapping runs on {decode.tp} x {decode_node.name}; "
                          "one replica runs both phases (same hardware and tp)")


def _buckets(document: Document, spec: ServingSpec, groups: int, most: int, max_context: int,
             gpu: str) -> tuple[list[int], str]:
    """Compiled batches: per KV group, powers of two and the largest multiple of ``GRAPH_ALIGNMENT``
    that fits (vLLM captures 1, 2, 4 and every multiple of 8; the table keeps the powers of two of
    that list and its top, so no fitting batch is left unused)."""
    reason = f"HBM of one {gpu} at max_context {max_context} (weights + KV per sequence)"
    if spec.decode.max_batch is not None:
        most, reason = spec.decode.max_batch, "decode.max_batch in the serving file"
    per_group = most // groups
    sizes = set(batch_candidates(1, per_group))
    if per_group >= GRAPH_ALIGNMENT:
        sizes.add(per_group - per_group % GRAPH_ALIGNMENT)
    buckets = [groups * b for b in sorted(sizes)]
    if not buckets:
        line = document.lines.get(("decode", "max_batch"), document.lines.get(("decode", "mapping"), 1))
        raise ConfigError(f"{document.path}:{line}: decode: no compiled batch fits at max_context {max_context} "
                          f"(the smallest is {groups}, the replica's KV groups; at most {most} fit: {reason})")
    return buckets, reason


# ------------------------------------------------------------------------ step times (memoised)
@functools.lru_cache(maxsize=4096)
def gpu_prefill_time(mapping: str, prompt_tokens: int) -> float:
    """Time to first token of one prompt (batch 1) on one replica of the GPU prefill mapping, seconds."""
    spec, model, node = _load(Path(mapping), ())
    return simulate_gpu_mapping(spec, model, node, seq_len=prompt_tokens, batch=1, check_fit=False).step.seconds


@functools.lru_cache(maxsize=4096)
def gpu_decode_step_time(mapping: str, overrides: tuple[str, ...], batch: int, kv_tokens: int,
                         compressing: bool) -> float:
    """One decode step of a replica of the GPU decode mapping at ``batch`` over ``kv_tokens`` of KV
    per sequence, seconds (a compressing policy's ratio set to 1, HBM unchecked)."""
    spec, model, node = _load(Path(mapping), overrides)
    policy = spec.kv_policy.model_copy(update={"compression": 1.0}) if compressing else spec.kv_policy
    return simulate_gpu_mapping(spec, model, node, seq_len=kv_tokens, batch=batch, policy=policy,
                                check_fit=False).step.seconds
