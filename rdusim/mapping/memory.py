"""Memory per socket and tier, by use: weights, KV cache, activations, SRAM working set.

Owns: ``memory_report``, ``kv_cache_bytes_per_socket``. Imports: plan, sharding, model.
Weights: every layer's weight tensors as its ops are sharded, in the tier the mapping puts
them, plus embedding and output head (split by vocabulary across TP). KV cache: kept
tokens x bytes per token x layers, split as the mapping shards attention (DP splits
sequences, TP splits KV heads). Activations: the largest set of activation tensors live in HBM
between two kernels of a layer.
"""

from __future__ import annotations

import networkx as nx

from rdusim.config.schema import DTYPE_BYTES
from rdusim.mapping.plan import KernelPlan, Plan, Stage
from rdusim.mapping.sharding import Layout, tensor_layout
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.transformer import HEAD, LAYER_INPUT, LAYER_OUTPUT, base_layer_type

USES = ("weights", "kv_cache", "activations", "working_set")
TIERS = ("sram", "hbm", "ddr")


def memory_report(plan: Plan) -> dict[str, dict[str, float]]:
    """``{tier: {use: bytes per socket}}``."""
    report = {tier: dict.fromkeys(USES, 0.0) for tier in TIERS}
    for layer_type, kernels in plan.kernels.items():
        if layer_type == HEAD:
            continue  # embedding and classifier: counted once below
        for kernel in kernels:
            tier = _weights_tier(plan, layer_type, kernel)
            report[tier]["weights"] += _kernel_weight_bytes(kernel) * plan.layer_counts[layer_type]
    model = plan.model
    head_bytes = 2 * model.vocab * model.hidden * DTYPE_BYTES[model.dtypes.activations]
    report["hbm"]["weights"] += head_bytes / plan.mapping.defaults.tp
    if plan.mapping.workload.accepted_tokens_per_step > 1 and model.mtp_layers:
        # multi-token prediction: one more decoder layer (DeepSeek: an MoE layer, M1 in
        # hardware-and-models.md B.2), sharded like the last layer type
        last = [t for t in plan.kernels if t != HEAD][-1]
        report["hbm"]["weights"] += model.mtp_layers * sum(_kernel_weight_bytes(k) for k in plan.kernels[last])
    report["hbm"]["kv_cache"] = kv_cache_bytes_per_socket(plan)
    report["hbm"]["activations"] = max(plan.activation_peak_bytes.values(), default=0.0)
    report["sram"]["working_set"] = max(k.sram_bytes for ks in plan.kernels.values() for k in ks)
    return report


def kv_cache_bytes_per_socket(plan: Plan) -> float:
    """The KV cache a socket holds once every layer has run (kept tokens only)."""
    split = 1
    for stage in _stages(plan):
        if stage.op is not None and stage.op.op_class == "attention":
            split = stage.shard.get("batch", 1) * stage.shard.get("kv_heads", 1)
    return plan.batch * plan.kv_len * kv_bytes_per_token_layer(plan.model) * cached_layers(plan) / split


def cached_layers(plan: Plan) -> int:
    """Layers with a KV cache: the decoder's, plus the MTP layer's when MTP drafts tokens
    (hardware-and-models.md B.3: "MTP layer KV (if MTP is used): +1 layer")."""
    mtp = plan.model.mtp_layers if plan.mapping.workload.accepted_tokens_per_step > 1 else 0
    return plan.model.layers + mtp


def _stages(plan: Plan) -> list[Stage]:
    return [s for kernels in plan.kernels.values() for k in kernels for s in k.stages]


def _weights_tier(plan: Plan, layer_type: str, kernel: KernelPlan) -> str:
    spec = next(k for k in plan.mapping.layers[base_layer_type(layer_type)] if k.kernel == kernel.name)
    return spec.weights or plan.mapping.defaults.weights


def _kernel_weight_bytes(kernel: KernelPlan) -> float:
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
