"""Memory per socket and tier, by use: weights, KV cache, activations, SRAM working set.

Owns: ``memory_report`` / ``memory_usage`` (the one memory accounting, shared with the
analytical estimator), ``kv_cache_bytes_per_socket``, ``cached_layers``, ``kernel_weight_bytes``,
``kv_split``, ``live_activation_peak``. Imports: plan, sharding, model, config.
Weights: every layer's weight tensors as its ops are sharded, in the tier the mapping puts
them, plus embedding and output head (split by vocabulary across TP). KV cache: kept
tokens x bytes per token x layers, split as the mapping shards attention (DP splits
sequences, TP splits KV heads). Activations: the largest set of activation tensors live in HBM
between two kernels of a layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from rdusim.config.schema import DTYPE_BYTES, HBM, MEMORY_TIERS, SRAM, MappingSpec, ModelSpec
from rdusim.mapping.plan import DRAFT_PREFIX, KernelPlan, Plan
from rdusim.mapping.sharding import Layout, tensor_layout
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.transformer import HEAD, LAYER_INPUT, LAYER_OUTPUT

USES = ("weights", "kv_cache", "activations", "working_set")


def memory_report(plan: Plan) -> dict[str, dict[str, float]]:
    """``{tier: {use: bytes per socket}}``; a speculative plan's draft model adds its weights and
    KV cache (both stay in HBM beside the target's), and the larger of the two activation peaks
    and SRAM working sets (the draft and the verification run one after the other)."""
    report = memory_usage(plan.mapping, plan.model, plan.layer_counts, plan.kernels, plan.batch, plan.kv_len,
                          max(plan.activation_peak_bytes.values(), default=0.0))
    sd = plan.speculative
    if sd is not None and sd.draft is not None:
        draft = memory_report(sd.draft)
        for tier in MEMORY_TIERS:
            for use in ("weights", "kv_cache"):
                report[tier][use] += draft[tier][use]
            for use in ("activations", "working_set"):
                report[tier][use] = max(report[tier][use], draft[tier][use])
    return report


def memory_usage(mapping: MappingSpec, model: ModelSpec, layer_counts: Mapping[str, int],
                 kernels: Mapping[str, Sequence[KernelPlan]], batch: int, kv_len: int,
                 activation_peak_bytes: float) -> dict[str, dict[str, float]]:
    """``{tier: {use: bytes per socket}}`` of a mapping's kernels per layer type.

    The one memory accounting: ``memory_report`` gives it a built plan, the analytical
    estimator the kernel plans it has cached for a candidate.
    """
    report = {tier: dict.fromkeys(USES, 0.0) for tier in MEMORY_TIERS}
    # the head layer (a draft's too): counted once below
    decoder = {t: ks for t, ks in kernels.items() if t.removeprefix(DRAFT_PREFIX) != HEAD}
    for layer_type, layer_kernels in decoder.items():
        for kernel in layer_kernels:
            report[kernel.weights_tier]["weights"] += kernel_weight_bytes(kernel) * layer_counts[layer_type]
    report[HBM]["weights"] += head_weight_bytes(model) / mapping.defaults.tp
    mtp = mtp_layers(model, mapping)
    if mtp:
        # multi-token prediction: one more decoder layer (DeepSeek: an MoE layer, M1 in
        # hardware-and-models.md B.2), sharded like the last decoder layer type
        last = list(decoder)[-1]
        report[HBM]["weights"] += mtp * sum(kernel_weight_bytes(k) for k in decoder[last])
    split = kv_split(k for layer_kernels in kernels.values() for k in layer_kernels)
    report[HBM]["kv_cache"] = batch * kv_len * kv_bytes_per_token_layer(model) * (model.layers + mtp) / split
    report[HBM]["activations"] = activation_peak_bytes
    report[SRAM]["working_set"] = max(k.sram_bytes for ks in kernels.values() for k in ks)
    return report


def kv_cache_bytes_per_socket(plan: Plan) -> float:
    """The KV cache a socket holds once every layer has run (kept tokens only)."""
    return memory_report(plan)[HBM]["kv_cache"]


def cached_layers(plan: Plan) -> int:
    """Layers with a KV cache: the decoder's, plus the MTP layer's when MTP drafts tokens."""
    return plan.model.layers + mtp_layers(plan.model, plan.mapping)


def mtp_layers(model: ModelSpec, mapping: MappingSpec) -> int:
    """Multi-token-prediction layers in use: the model's, when the workload accepts more than
    one token per step (hardware-and-models.md B.3: "MTP layer KV (if MTP is used): +1 layer")."""
    return model.mtp_layers if mapping.workload.accepted_tokens_per_step > 1 else 0


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
    return sum(t.nbytes(s.op.sizes, tensor_layout(t, s.shard))
               for s in kernel.stages if s.op is not None for t in s.op.reads if t.role == "weight")


def live_activation_peak(graph: nx.DiGraph, kernel_of: dict[str, int], shards: dict[str, Layout]) -> float:
    """Peak bytes of activations held in HBM between kernels of one layer.

    A tensor is live from the kernel that writes it until the last kernel that reads it
    (the layer output until the next layer's last reader of its input); tensors made and
    used inside one kernel stay in SRAM and are not counted.
    """
    n_kernels = max(kernel_of.values()) + 1
    live = [0.0] * (2 * n_kernels)
    for name in graph.nodes:
        op = graph.nodes[name]["op"]
        for tensor in op.writes:
            if tensor.role != "activation":
                continue
            last = _last_reader(graph, kernel_of, tensor.name, n_kernels)
            nbytes = tensor.nbytes(op.sizes, tensor_layout(tensor, shards[name]))
            for boundary in range(kernel_of[name], last):
                live[boundary] += nbytes
    return max(live)


def _last_reader(graph: nx.DiGraph, kernel_of: dict[str, int], tensor: str, n_kernels: int) -> int:
    readers = [kernel_of[n] for n in graph.nodes if any(t.name == tensor for t in graph.nodes[n]["op"].reads)]
    if tensor == LAYER_OUTPUT:
        readers = [n_kernels + kernel_of[n] for n in graph.nodes
                   if any(t.name == LAYER_INPUT for t in graph.nodes[n]["op"].reads)]
    return max(readers, default=0)
