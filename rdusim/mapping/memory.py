"""Memory per socket and tier, by use: weights, KV cache, activations, SRAM working set.

Owns: ``memory_report``, ``kv_cache_bytes_per_socket``. Imports: plan, sharding, model.
Weights: every layer's weight tensors as its ops are sharded, in the tier the mapping puts
them, plus embedding and output head (split by vocabulary across TP). KV cache: kept
tokens x bytes per token x layers, split as the mapping shards attention (DP splits
sequences, TP splits KV heads). Activations: the largest set of activation tensors one
kernel reads from and writes to HBM.
"""

from __future__ import annotations

from rdusim.config.schema import DTYPE_BYTES
from rdusim.mapping.plan import KernelPlan, Plan, Stage
from rdusim.mapping.sharding import tensor_layout
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from rdusim.model.transformer import base_layer_type

USES = ("weights", "kv_cache", "activations", "working_set")
TIERS = ("sram", "hbm", "ddr")


def memory_report(plan: Plan) -> dict[str, dict[str, float]]:
    """``{tier: {use: bytes per socket}}``."""
    report = {tier: dict.fromkeys(USES, 0.0) for tier in TIERS}
    for layer_type, kernels in plan.kernels.items():
        for kernel in kernels:
            tier = _weights_tier(plan, layer_type, kernel)
            report[tier]["weights"] += _kernel_weight_bytes(kernel) * plan.layer_counts[layer_type]
    model = plan.model
    head_bytes = 2 * model.vocab * model.hidden * DTYPE_BYTES[model.dtypes.activations]
    report["hbm"]["weights"] += head_bytes / plan.mapping.defaults.tp
    report["hbm"]["kv_cache"] = kv_cache_bytes_per_socket(plan)
    report["hbm"]["activations"] = max(_kernel_activation_bytes(k) for ks in plan.kernels.values() for k in ks)
    report["sram"]["working_set"] = max(k.sram_bytes for ks in plan.kernels.values() for k in ks)
    return report


def kv_cache_bytes_per_socket(plan: Plan) -> float:
    """The KV cache a socket holds once every layer has run (kept tokens only)."""
    split = 1
    for stage in _stages(plan):
        if stage.op is not None and stage.op.op_class == "attention":
            split = stage.shard.get("batch", 1) * stage.shard.get("kv_heads", 1)
    return plan.batch * plan.kv_len * kv_bytes_per_token_layer(plan.model) * plan.model.layers / split


def _stages(plan: Plan) -> list[Stage]:
    return [s for kernels in plan.kernels.values() for k in kernels for s in k.stages]


def _weights_tier(plan: Plan, layer_type: str, kernel: KernelPlan) -> str:
    spec = next(k for k in plan.mapping.layers[base_layer_type(layer_type)] if k.kernel == kernel.name)
    return spec.weights or plan.mapping.defaults.weights


def _kernel_weight_bytes(kernel: KernelPlan) -> float:
    return sum(t.nbytes(s.op.sizes, tensor_layout(t, s.shard))
               for s in kernel.stages if s.op is not None for t in s.op.reads if t.role == "weight")


def _kernel_activation_bytes(kernel: KernelPlan) -> float:
    total = 0.0
    for stage in kernel.stages:
        if stage.op is None:
            continue
        for tensor in stage.op.reads + stage.op.writes:
            if tensor.role == "activation":
                total += tensor.nbytes(stage.op.sizes, tensor_layout(tensor, stage.shard))
    return total
