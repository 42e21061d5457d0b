"""Tensor/data-parallel split rules and the collectives they imply.

Owns: per-op shard degrees, tensor layouts, and where all-reduce, reduce-scatter,
all-gather and all-to-all go. Imports: model, hw, config.

Rules (the einsum view used by Calculon and ZigZag): sharding a dimension divides the work
and every tensor with that dimension; a sharded contracted dimension leaves partial sums,
reduced in the producer's kernel before their first reader (all-reduce, or reduce-scatter
when the reader is itself split along another dimension); a reader that needs a tensor
less sharded than it was produced gathers it in its own kernel, chunk by chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from rdusim.config.schema import KernelSpec
from rdusim.model.ops import Op, TensorUse
from rdusim.model.transformer import LAYER_INPUT, LAYER_OUTPUT

Layout = dict[str, int]


@dataclass(frozen=True)
class Collective:
    """A collective on one tensor, per socket."""

    kind: str                  # all_reduce | reduce_scatter | all_gather | all_to_all
    tensor: str
    producer: str              # op whose output it acts on
    consumer: str              # first op that needs the result
    group: int                 # sockets taking part
    egress_bytes: float        # bytes each socket sends
    phases: int                # sequential phases (2 for all-reduce)
    in_producer_kernel: bool   # reductions run where the partial sums are made

    @property
    def name(self) -> str:
        return f"{self.kind}({self.tensor})"


def op_shard(op: Op, kernel: KernelSpec) -> Layout:
    """Shard degrees of one op: its explicit ``shard`` entry if the kernel has one (which
    replaces TP/DP for that op), else kernel TP on the op's TP dimension and DP on batch
    (``kernel`` as resolved by ``rdusim.mapping.bundle.resolve_kernels``)."""
    if op.name in kernel.shard:
        return _aligned_kv_heads(op, {d: k for d, k in kernel.shard[op.name].items() if k > 1})
    if op.attach_to in kernel.shard:  # a policy's op follows the op it serves
        return _aligned_kv_heads(op, {d: k for d, k in kernel.shard[op.attach_to].items() if k > 1 and d in op.sizes})
    tp = kernel.tp or 1
    dp = kernel.dp or 1
    shard: Layout = {}
    if op.tp_dim is not None and tp > 1:
        if op.tp_dim == "kv_heads":
            # more TP ranks than KV heads: KV heads are replicated across rank groups
            shard["kv_heads"] = math.gcd(tp, op.sizes["kv_heads"])
        else:
            shard[op.tp_dim] = tp
        if op.tp_dim == "heads" and op.sizes.get("kv_heads", 1) > 1:
            shard["kv_heads"] = aligned_kv_degree(op, tp)
    if dp > 1:
        shard["batch"] = dp
    return {d: k for d, k in shard.items() if k > 1}


def aligned_kv_degree(op: Op, heads_degree: int) -> int:
    """KV-head degree that goes with splitting query heads ``heads_degree`` ways: a socket
    holding a group of query heads holds exactly their KV heads (GQA group ``heads //
    kv_heads``); more sockets than KV heads replicate each KV head across its rank group."""
    return math.gcd(heads_degree, op.sizes.get("kv_heads", 1))


def _aligned_kv_heads(op: Op, shard: Layout) -> Layout:
    """An explicit ``heads`` split of an op with several KV heads splits its KV heads with it
    (the same rule as the TP path): without it every socket would read every KV head.
    MLA has one latent KV head per token: it is replicated, each socket reads it whole."""
    if "heads" in shard and "kv_heads" not in shard and op.sizes.get("kv_heads", 1) > 1:
        degree = aligned_kv_degree(op, shard["heads"])
        if degree > 1:
            return {**shard, "kv_heads": degree}
    return shard


def tensor_layout(tensor: TensorUse, shard: Layout) -> Layout:
    return {d: k for d, k in shard.items() if d in tensor.dims}


def partial_degree(op: Op, shard: Layout) -> int:
    """How many sockets hold partial sums of the op's outputs."""
    return math.prod(k for d, k in shard.items() if d in op.reduce)


@dataclass
class EdgeCache:
    """What ``collectives`` keeps across layers built on one layer graph and node: the graph's
    edges, each tensor's writer, and each edge's collectives by everything they depend on (the
    shards at its two ends and the partial-sum degree of the tensor)."""

    edges: list[tuple[str, str, list[str]]] | None = None
    writers: dict[str, str] = field(default_factory=dict)
    steps: Callable[[int], int] | None = None
    found: dict[tuple[Any, ...], list[Collective]] = field(default_factory=dict)


def collectives(graph: nx.DiGraph, shards: dict[str, Layout], steps: Callable[[int], int],
                kept: EdgeCache | None = None) -> list[Collective]:
    """Every collective the layer needs, in op order. ``kept``: what earlier layers on the same
    graph found (a node's ``steps`` other than the one it was kept for starts afresh)."""
    if kept is None or kept.edges is None or kept.steps != steps:
        kept = kept if kept is not None else EdgeCache()
        kept.edges, kept.steps, kept.found = _edges(graph), steps, {}
        # the tensor's last writer (its partial sums: ``partial_degree`` of that op's shard)
        kept.writers = {t.name: n for n in graph.nodes for t in graph.nodes[n]["op"].writes}
    found: list[Collective] = []
    partial: dict[str, int] = {}
    seen: set[tuple[str, str, str]] = set()
    for producer, consumer, tensors in kept.edges:
        for tensor_name in tensors:
            if tensor_name not in partial:
                writer = kept.writers.get(tensor_name)
                partial[tensor_name] = 1 if writer is None else partial_degree(graph.nodes[writer]["op"], shards[writer])
            key = (producer, consumer, tensor_name, tuple(shards[producer].items()), tuple(shards[consumer].items()),
                   partial[tensor_name])
            edge = kept.found.get(key)
            if edge is None:
                edge = kept.found[key] = _edge_collectives(graph, producer, consumer, tensor_name, shards, partial,
                                                           steps)
            for collective in edge:
                # one reduction serves every reader; gathers are per reading op
                once = (collective.kind, collective.tensor,
                        collective.producer if collective.in_producer_kernel else collective.consumer)
                if once not in seen:
                    seen.add(once)
                    found.append(collective)
    return found


def _edges(graph: nx.DiGraph) -> list[tuple[str, str, list[str]]]:
    """Edges inside the layer plus the wrap-around from ``x_out`` to next layer's readers of ``x``."""
    edges = [(u, v, list(d["tensors"])) for u, v, d in graph.edges(data=True)]
    out_writer = next((n for n in graph.nodes if any(t.name == LAYER_OUTPUT for t in graph.nodes[n]["op"].writes)), None)
    if out_writer is not None:
        for name in graph.nodes:
            if any(t.name == LAYER_INPUT for t in graph.nodes[name]["op"].reads):
                edges.append((out_writer, name, [LAYER_OUTPUT]))
    return edges


def _edge_collectives(graph: nx.DiGraph, producer: str, consumer: str, tensor_name: str,
                      shards: dict[str, Layout], partial: dict[str, int], steps: Callable[[int], int]) -> list[Collective]:
    p_op: Op = graph.nodes[producer]["op"]
    c_op: Op = graph.nodes[consumer]["op"]
    written = p_op.tensor(tensor_name)
    read = _read_tensor(c_op, tensor_name)
    have = tensor_layout(written, shards[producer])
    need = tensor_layout(read, shards[consumer])
    result: list[Collective] = []
    group = partial.get(tensor_name, 1)
    if group > 1:
        local = written.nbytes(p_op.sizes, have)
        scatter = [d for d in need if d not in have]
        kind = "reduce_scatter" if scatter and need[scatter[0]] == group else "all_reduce"
        phases = 1 if kind == "reduce_scatter" else 2
        egress = local * (group - 1) / group * phases
        result.append(Collective(kind, tensor_name, producer, consumer, group, egress,
                                 phases * steps(group), True))
        if kind == "reduce_scatter":
            have = have | {scatter[0]: group}
    gather = math.prod(k // need.get(d, 1) for d, k in have.items() if k > need.get(d, 1))
    slice_ = math.prod(k for d, k in need.items() if d not in have)
    if gather > 1:
        local = read.nbytes(c_op.sizes, have)
        kind = "all_to_all" if slice_ > 1 else "all_gather"
        egress = local * (gather - 1) / gather if kind == "all_to_all" else local * (gather - 1)
        result.append(Collective(kind, tensor_name, producer, consumer, gather, egress,
                                 steps(gather), False))
    return result


def _read_tensor(op: Op, name: str) -> TensorUse:
    if name == LAYER_OUTPUT:
        name = LAYER_INPUT
    for tensor in op.reads:
        if tensor.name == name:
            return tensor
    raise KeyError(f"op {op.name!r} does not read {name!r}")
