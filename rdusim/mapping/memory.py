"""Memory per socket and tier, by use: weights, KV cache, activations, SRAM working set.

Owns: ``memory_report`` / ``memory_usage`` / ``memory_of_layers`` (the one memory accounting,
shared with the analytical estimator through ``LayerMemory`` / ``layer_memory``),
``kv_cache_bytes_per_socket``, ``cached_layers``, ``kernel_weight_bytes``, ``kv_split``, ``live_activation_peak``. Imports: plan, sharding, model, config, summation.
Weights: every layer's weight tensors as its ops are sharded, in the tier the mapping puts
them, plus embedding and output head (split by vocabulary across TP). KV cache: kept
tokens x bytes per token x layers, split as the mapping shards attention (DP splits
sequences, TP splits KV heads). Activations: the largest set of activation tensors live in HBM
between two kernels of a layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from rdusim.config.schema import (
    DTYPE_BYTES,
    HBM,
    MEMORY_TIERS,
    MTP_DRAFT,
    SRAM,
    MappingSpec,
    ModelSpec,
)
from rdusim.mapping.plan import DRAFT_PREFIX, KernelPlan, Plan
from rdusim.mapping.sharding import Layout, tensor_layout
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.transformer import HEAD, LAYER_INPUT, LAYER_OUTPUT
from rdusim.summation import add_in_order

USES = ("weights", "kv_cache", "activations", "working_set")


def memory_report(plan: Plan) -> dict[str, dict[str, float]]:
    """``{tier: {use: bytes per socket}}``; a speculative plan's draft model adds its weights and
    KV cache (both stay in HBM beside the target's), and the larger of the two activation peaks
    and SRAM working sets (the draft and the verification run one after the other)."""
    report = memory_usage(plan.mapping, plan.model, plan.layer_counts, plan.kernels, plan.batch, plan.kv_len,
                          max(plan.activation_peak_bytes.values(), default=0.0))
    sd = plan.speculative
    if sd is not None and sd.draft is not None and not sd.self_draft:
        draft = memory_report(sd.draft)
        for tier in MEMORY_TIERS:
            for use in ("weights", "kv_cache"):
                report[tier][use] += draft[tier][use]
            for use in ("activations", "working_set"):
                report[tier][use] = max(report[tier][use], draft[tier][use])
    return report


@dataclass(frozen=True)
class LayerMemory:
    """What one layer type's kernels contribute to the memory accounting (picklable, small):
    per kernel in order its weights' tier and bytes per socket; the KV split of its last
    attention stage (None: no attention); its largest SRAM working set."""

    weights: tuple[tuple[str, float], ...]
    kv_split: int | None
    sram_bytes: float


def layer_memory(kernels: Sequence[KernelPlan], weight_bytes: Sequence[float] | None = None) -> LayerMemory:
    """What a layer type's kernels add to the memory accounting; ``weight_bytes``: each kernel's
    ``kernel_weight_bytes`` when the caller keeps them."""
    split = None
    for kernel in kernels:
        for stage in kernel.stages:
            if stage.op is not None and stage.op.op_class == "attention":
                split = stage.shard.get("batch", 1) * stage.shard.get("kv_heads", 1)
    weights = [kernel_weight_bytes(k) for k in kernels] if weight_bytes is None else weight_bytes
    return LayerMemory(tuple((k.weights_tier, w) for k, w in zip(kernels, weights, strict=True)), split,
                       max((k.sram_bytes for k in kernels), default=0.0))


def memory_usage(mapping: MappingSpec, model: ModelSpec, layer_counts: Mapping[str, int],
                 kernels: Mapping[str, Sequence[KernelPlan]], batch: int, kv_len: int,
                 activation_peak_bytes: float) -> dict[str, dict[str, float]]:
    """``{tier: {use: bytes per socket}}`` of a mapping's kernels per layer type.

    The one memory accounting: ``memory_report`` gives it a built plan, the analytical
    estimator the per-layer summaries (``layer_memory``) of a candidate's cached kernels.
    """
    layers = {t: layer_memory(ks) for t, ks in kernels.items()}
    return memory_of_layers(mapping, model, layer_counts, layers, batch, kv_len, activation_peak_bytes)


def memory_of_layers(mapping: MappingSpec, model: ModelSpec, layer_counts: Mapping[str, int],
                     layers: Mapping[str, LayerMemory], batch: int, kv_len: int,
                     activation_peak_bytes: float) -> dict[str, dict[str, float]]:
    """``memory_usage`` from each layer type's ``LayerMemory``."""
    report = {tier: dict.fromkeys(USES, 0.0) for tier in MEMORY_TIERS}
    # the head layer (a draft's too): counted once below
    decoder = {t: layer for t, layer in layers.items() if t.removeprefix(DRAFT_PREFIX) != HEAD}
    for layer_type, layer in decoder.items():
        for tier, nbytes in layer.weights:
            report[tier]["weights"] += nbytes * layer_counts[layer_type]
    report[HBM]["weights"] += head_weight_bytes(model) / mapping.defaults.tp
    mtp = mtp_layers(model, mapping)
    if mtp:
        # multi-token prediction: one more decoder layer (DeepSeek: an MoE layer, M1 in
        # hardware-and-models.md B.2), sharded like the last decoder layer type
        last = list(decoder)[-1]
        report[HBM]["weights"] += mtp * add_in_order(nbytes for _, nbytes in decoder[last].weights)
    split = 1   # sockets the KV cache is split over: the last attention stage's (kv_split)
    for layer in layers.values():
        if layer.kv_split is not None:
            split = layer.kv_split
    report[HBM]["kv_cache"] = batch * kv_len * kv_bytes_per_token_layer(model) * (model.layers + mtp) / split
    report[HBM]["activations"] = activation_peak_bytes
    report[SRAM]["working_set"] = max(layer.sram_bytes for layer in layers.values())
    return report


def kv_cache_bytes_per_socket(plan: Plan) -> float:
    """The KV cache a socket holds once every layer has run (kept tokens only)."""
    return memory_report(plan)[HBM]["kv_cache"]


def cached_layers(plan: Plan) -> int:
    """Layers with a KV cache: the decoder's, plus the MTP layer's when MTP drafts tokens."""
    return plan.model.layers + mtp_layers(plan.model, plan.mapping)


def mtp_layers(model: ModelSpec, mapping: MappingSpec) -> int:
    """Multi-token-prediction layers in use: the model's, when the workload accepts more than
    one token per step, or when the MTP module drafts for speculative decoding (``speculative:
    {draft: mtp}``, k > 0) (hardware-and-models.md B.3: "MTP layer KV (if MTP is used): +1 layer")."""
    sd = mapping.speculative
    drafting = sd is not None and sd.draft == MTP_DRAFT and sd.k > 0
    return model.mtp_layers if mapping.workload.accepted_tokens_per_step > 1 or drafting else 0


def head_weight_bytes(model: ModelSpec) -> float:
    """Embedding and output head: two vocab x hidden matrices (one when the model ties them,
    config.json ``tie_word_embeddings``), split by vocabulary across the mapping's TP degree by
    the caller."""
    matrices = 1 if model.tied_embeddings else 2
    return matrices * model.vocab * model.hidden * DTYPE_BYTES[model.dtypes.activations]


def kv_split(kernels: Iterable[KernelPlan]) -> int:
    """Sockets the KV cache is split over: the attention op's batch (DP) x KV-head (TP) degrees."""
    split = 1
    for kernel in kernels:
        for stage in kernel.stages:
            if stage.op is not None and stage.op.op_class == "attention":
                split = stage.shard.get("batch", 1) * stage.shard.get("kv_heads", 1)
    return split


def kernel_weight_bytes(kernel: KernelPlan) -> float:
    """Weights of one kernel's ops per socket, as they are sharded."""
    return add_in_order(t.nbytes(s.op.sizes, tensor_layout(t, s.shard))
               for s in kernel.stages if s.op is not None for t in s.op.reads if t.role == "weight")


def live_activation_peak(graph: nx.DiGraph, kernel_of: dict[str, int], shards: dict[str, Layout],
                         kept: dict[tuple[Any, ...], float] | None = None) -> float:
    """Peak bytes of activations held in HBM between kernels of one layer.

    A tensor is live from the kernel that writes it until the last kernel that reads it
    (the layer output until the next layer's last reader of its input); tensors made and
    used inside one kernel stay in SRAM and are not counted. ``kept``: each written tensor's
    bytes by op, tensor and the op's shard, kept across layers of the same graph.
    """
    n_kernels = max(kernel_of.values()) + 1
    last_reader: dict[str, int] = {}   # tensor -> the last kernel reading it (one pass over the graph)
    for name in graph.nodes:
        for tensor in {t.name for t in graph.nodes[name]["op"].reads}:
            last_reader[tensor] = max(last_reader.get(tensor, 0), kernel_of[name])
    if LAYER_INPUT in last_reader:     # the layer output is read by the next layer's readers of its input
        last_reader[LAYER_OUTPUT] = n_kernels + last_reader[LAYER_INPUT]
    else:
        last_reader.pop(LAYER_OUTPUT, None)
    live = [0.0] * (2 * n_kernels)
    for name in graph.nodes:
        op = graph.nodes[name]["op"]
        for tensor in op.writes:
            if tensor.role != "activation":
                continue
            last = last_reader.get(tensor.name, 0)
            if kept is None:
                nbytes = tensor.nbytes(op.sizes, tensor_layout(tensor, shards[name]))
            else:
                key = (name, tensor.name, tuple(shards[name].items()))
                found = kept.get(key)
                if found is None:
                    found = kept[key] = tensor.nbytes(op.sizes, tensor_layout(tensor, shards[name]))
                nbytes = found
            for boundary in range(kernel_of[name], last):
                live[boundary] += nbytes
    return max(live)
