"""Validate a loaded mapping against its model and hardware and build the per-socket plan.

Owns: ``build_plan`` and every cross-document rule (ops covered once, kernel order,
degrees divide dimensions and fit the node, working sets fit SRAM). Imports: bundle,
sharding, stages, model, hw. Raises ``MappingError`` listing every problem with numbers.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx

from rdusim.config.schema import MTP_DRAFT, SRAM, KernelSpec
from rdusim.errors import MappingError
from rdusim.mapping.bundle import LoadedMapping
from rdusim.mapping.draft import draft_candidates
from rdusim.mapping.memory import live_activation_peak
from rdusim.mapping.plan import DRAFT_PREFIX, KernelPlan, Plan, SpeculativePlan
from rdusim.mapping.sharding import Layout, aligned_kv_degree, collectives, op_shard
from rdusim.mapping.stages import GraphCache, KernelContext, build_kernel, check_item_budget
from rdusim.model.ops import Op
from rdusim.model.policy import kv_length as policy_kv_length
from rdusim.model.speculative import expected_accepted
from rdusim.model.transformer import (
    HEAD,
    QK_NORM_OPS,
    Shape,
    base_layer_type,
    layer_counts,
    layer_graph,
)
from rdusim.units import format_bytes


def kv_length(loaded: LoadedMapping) -> int:
    """Tokens of KV each sequence keeps after prefill (the policy's compression)."""
    return policy_kv_length(loaded.spec.workload.seq_len, loaded.spec.kv_policy)


def layer_shape(loaded: LoadedMapping) -> Shape:
    """The workload of one layer: a prefill pass over the prompt, or a decode step of one query
    token per sequence, or ``k + 1`` under speculative decoding (the verification: attention of
    ``k + 1`` queries against the cache, GEMMs of ``batch x (k + 1)`` rows, ``k + 1`` KV writes)."""
    w = loaded.spec.workload
    if loaded.spec.phase == "prefill":
        return Shape("prefill", w.batch, w.seq_len, w.seq_len)
    return Shape("decode", w.batch, query_tokens(loaded), kv_length(loaded))


def query_tokens(loaded: LoadedMapping) -> int:
    """Query tokens per sequence of a decode step: 1, or ``k + 1`` verified under speculative decoding."""
    sd = loaded.spec.speculative
    return 1 if sd is None else sd.k + 1


def build_plan(loaded: LoadedMapping, *, check_sram: bool = True, cache: dict[Any, KernelPlan] | None = None,
               built: Mapping[str, LayerBuild] | None = None) -> Plan:
    """The per-socket plan of every layer type; raises MappingError with all problems.

    ``check_sram=False`` plans a mapping whose working set overflows SRAM (a what-if the
    on-chip report shows as not fitting, with the numbers). ``cache``: kernel plans by what
    they depend on (``build_layer``), shared with other plans of the same node and workload.
    ``built``: layer types the caller already built (``build_layer`` of this mapping's layer
    type, or of one whose kernels, batch and workload are the same: the mapping explorer's
    estimates), taken instead of building them again."""
    spec, model = loaded.spec, loaded.model
    counts = layer_counts(model, spec.kv_policy, spec.phase, head=HEAD in spec.layers)
    issues = _check_layer_types(loaded, {base_layer_type(t): n for t, n in counts.items()})
    if issues:
        raise MappingError(issues)
    kernels: dict[str, tuple[KernelPlan, ...]] = {}
    activations: dict[str, float] = {}
    for layer_type in counts:
        layer = built.get(layer_type) if built is not None else None
        if layer is None:
            try:
                layer = build_layer(loaded, layer_type, check_sram=check_sram, cache=cache)
            except MappingError as error:
                issues += error.issues
                continue
        kernels[layer_type] = layer.kernels
        activations[layer_type] = layer.activation_peak_bytes
    if issues:
        raise MappingError(issues)
    return Plan(spec, model, loaded.system, counts, kernels, spec.workload.seq_len,
                spec.workload.batch, kv_length(loaded), activation_peak_bytes=activations,
                speculative=speculative_plan(loaded, check_sram=check_sram))


def speculative_plan(loaded: LoadedMapping, *, check_sram: bool = True) -> SpeculativePlan | None:
    """The draft side of a speculative decode mapping (None without ``speculative``, or with ``k = 0``:
    nothing is drafted, the step is plain decoding and the draft is not loaded)."""
    sd = loaded.spec.speculative
    if sd is None or sd.k == 0:
        return None
    accepted = expected_accepted(sd.acceptance.rate, sd.k)
    if sd.draft == MTP_DRAFT:
        return SpeculativePlan(_as_draft(_mtp_draft(loaded, check_sram)), sd.k, sd.acceptance.rate, accepted,
                               self_draft=True)
    failures: list[str] = []
    for candidate in draft_candidates(loaded):
        try:
            draft = build_plan(candidate, check_sram=check_sram)
        except MappingError as error:
            failures.append(f"at TP {candidate.spec.defaults.tp}: {error.issues[0]}")
            continue
        return SpeculativePlan(_as_draft(draft), sd.k, sd.acceptance.rate, accepted)
    raise MappingError([f"{loaded.where('speculative', 'draft')}: the draft {sd.draft} does not build on "
                        f"{loaded.system.name}:", *failures])


def _mtp_draft(loaded: LoadedMapping, check_sram: bool) -> Plan:
    """Self-speculation with the target's multi-token-prediction module (DeepSeek-V3 report,
    arXiv 2412.19437, section 2.2): each draft step runs the MTP module for one token per
    sequence, i.e. ``mtp_layers`` decoder layers of the target's last layer type (DeepSeek: an
    MLA + MoE block) and the per-step head (embedding, shared output head, sampling), with the
    target's own kernels at one query token. Its weights and KV cache are the MTP layer's
    (``memory.mtp_layers``); the embedding and output head are the target's, shared."""
    plain = build_plan(dataclasses.replace(loaded, spec=loaded.spec.model_copy(update={"speculative": None})),
                       check_sram=check_sram)
    last = [t for t in plain.layer_counts if t != HEAD][-1]
    counts = {last: loaded.model.mtp_layers} | ({HEAD: 1} if HEAD in plain.layer_counts else {})
    return dataclasses.replace(plain, layer_counts=counts, kernels={t: plain.kernels[t] for t in counts},
                               activation_peak_bytes={t: plain.activation_peak_bytes[t] for t in counts})


def _as_draft(plan: Plan) -> Plan:
    """The draft's plan with its layer types named ``draft <type>`` (rows of their own in reports)."""
    rename = {t: DRAFT_PREFIX + t for t in plan.layer_counts}
    kernels = {rename[t]: tuple(dataclasses.replace(k, layer_type=rename[t]) for k in ks)
               for t, ks in plan.kernels.items()}
    return dataclasses.replace(plan, layer_counts={rename[t]: n for t, n in plan.layer_counts.items()},
                               kernels=kernels,
                               activation_peak_bytes={rename[t]: b for t, b in plan.activation_peak_bytes.items()})


@dataclass(frozen=True)
class LayerBuild:
    kernels: tuple[KernelPlan, ...]
    keys: tuple[Any, ...]                 # what each kernel's plan depends on (a cache key)
    activation_peak_bytes: float


def build_layer(loaded: LoadedMapping, layer_type: str, *, graph: nx.DiGraph | None = None,
                cache: dict[Any, KernelPlan] | None = None, check_sram: bool = True,
                kept: GraphCache | None = None) -> LayerBuild:
    """Check and plan one layer type (MappingError lists its problems).

    ``graph`` reuses a layer graph built for the same shape; ``cache`` reuses kernel plans
    whose inputs (spec, op shards, collectives, what leaves the kernel) are the same, which
    is what lets the mapping explorer score thousands of candidates a second. ``kept`` (with
    ``graph``, and only for mappings of the same node and workload): what layers built on that
    graph before kept (``rdusim.mapping.stages.GraphCache``: op stages, readers, collectives).
    """
    spec = loaded.spec
    if graph is None:
        graph = layer_graph(loaded.model, layer_type, layer_shape(loaded), spec.kv_policy)
    base = base_layer_type(layer_type)
    kernel_specs = _attach_policy_ops(spec.layers[base], graph)
    issues = _check_coverage(loaded, base, graph, kernel_specs)
    if issues:
        raise MappingError(issues)
    shards = {n: op_shard(graph.nodes[n]["op"], _kernel_of(kernel_specs, n)) for n in graph.nodes}
    issues = _check_degrees(loaded, base, graph, kernel_specs, shards, kept.fine_shards if kept is not None else None)
    if issues:
        raise MappingError(issues)
    found = collectives(graph, shards, loaded.system.collective_steps, kept.edges if kept is not None else None)
    context = KernelContext(loaded, layer_type, graph, shards, found, kernel_specs, kept)
    check_item_budget(context)
    keys = tuple(_kernel_key(context, index) for index in range(len(kernel_specs)))
    cache = {} if cache is None else cache
    plans = []
    for index, key in enumerate(keys):
        if key not in cache:
            cache[key] = build_kernel(context, index)
        plans.append(cache[key])
    issues = _check_sram(loaded, base, tuple(plans)) if check_sram else []
    if issues:
        raise MappingError(issues)
    peak = live_activation_peak(graph, context.kernel_of, shards, kept.activation_bytes if kept is not None else None)
    return LayerBuild(tuple(plans), keys, peak)


def _kernel_key(ctx: KernelContext, index: int) -> tuple[Any, ...]:
    """Everything ``build_kernel`` reads for kernel ``index`` (the rest is fixed per mapping)."""
    ops = ctx.ops_of[index]
    shards = tuple((n, tuple(sorted(ctx.shards[n].items()))) for n in ops)
    members = set(ops)
    found = tuple(c for c in ctx.collectives if c.producer in members or c.consumer in members)
    outside = tuple(ctx.needed_outside(t, index) for n in ops for t in ctx.graph.nodes[n]["op"].writes)
    batch = ctx.loaded.spec.workload.batch
    return (ctx.layer_type, batch, query_tokens(ctx.loaded), ctx.kernel_specs[index].model_dump_json(), shards,
            found, outside)


def _attach_policy_ops(kernel_specs: list[KernelSpec], graph: nx.DiGraph) -> list[KernelSpec]:
    """Ops a KV policy adds join the kernel of the op they attach to, unless placed."""
    placed = {name for k in kernel_specs for name in k.ops}
    extra: dict[int, list[str]] = {}
    for name in graph.nodes:
        target = graph.nodes[name]["op"].attach_to
        if name not in placed and target is not None:
            index = next((i for i, k in enumerate(kernel_specs) if target in k.ops), None)
            if index is not None:
                extra.setdefault(index, []).append(name)
    return [k.model_copy(update={"ops": k.ops + extra[i]}) if i in extra else k for i, k in enumerate(kernel_specs)]


def _kernel_of(kernel_specs: list[KernelSpec], op_name: str) -> KernelSpec:
    return next(k for k in kernel_specs if op_name in k.ops)


def _check_layer_types(loaded: LoadedMapping, counts: dict[str, int]) -> list[str]:
    issues = _check_kernel_names(loaded)
    anchors = loaded.spec.kv_policy.anchors
    if anchors is not None and anchors > loaded.model.layers:
        issues.append(f"{loaded.where('kv_policy', 'anchors')}: {anchors} anchor layers but "
                      f"{loaded.model.name} has {loaded.model.layers} layers")
    for layer_type in counts:
        if layer_type not in loaded.spec.layers:
            issues.append(f"{loaded.where('layers')}: no kernels for the model's {layer_type!r} layers "
                          f"({counts[layer_type]} of {loaded.model.layers})")
    for layer_type in loaded.spec.layers:
        if layer_type not in counts:
            close = difflib.get_close_matches(layer_type, list(counts), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the model has {', '.join(counts)}"
            issues.append(f"{loaded.where('layers', layer_type)}: {loaded.model.name} has no "
                          f"{layer_type!r} layers{hint}")
    return issues


def _check_kernel_names(loaded: LoadedMapping) -> list[str]:
    """Kernel names within a layer are distinct (the breakdown has one row per name)."""
    issues = []
    for layer_type, kernel_specs in loaded.spec.layers.items():
        first: dict[str, int] = {}
        for k, kernel in enumerate(kernel_specs):
            if kernel.kernel in first:
                issues.append(f"{loaded.where('layers', layer_type, k, 'kernel')}: kernel name {kernel.kernel!r} "
                              f"is already used by layers.{layer_type}[{first[kernel.kernel]}]")
            first.setdefault(kernel.kernel, k)
    return issues


def _check_coverage(loaded: LoadedMapping, layer_type: str, graph: nx.DiGraph,
                    kernel_specs: list[KernelSpec]) -> list[str]:
    """Every op in exactly one kernel, no unknown ops, kernels in dependency order."""
    issues: list[str] = []
    placed: dict[str, int] = {}
    for k, kernel in enumerate(kernel_specs):
        for name in kernel.shard:
            if name not in kernel.ops:
                issues.append(f"{loaded.where('layers', layer_type, k, 'shard', name)}: shards op {name!r}, "
                              f"which is not in kernel {kernel.kernel!r} (its ops: {', '.join(kernel.ops)})")
        for j, name in enumerate(kernel.ops):
            if name not in graph.nodes:
                close = difflib.get_close_matches(name, list(graph.nodes), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                if name in QK_NORM_OPS and not loaded.model.qk_norm:
                    hint = f"; {loaded.model.name}'s model card does not set attention.qk_norm (Qwen3's per-head norms)"
                issues.append(f"{loaded.where('layers', layer_type, k, 'ops', j)}: unknown op {name!r} for "
                              f"{layer_type} layers{hint}")
            elif name in placed:
                issues.append(f"{loaded.where('layers', layer_type, k, 'ops', j)}: op {name!r} is already in "
                              f"kernel {kernel_specs[placed[name]].kernel!r}")
            else:
                placed[name] = k
    missing = [n for n in graph.nodes if n not in placed]
    if missing:
        issues.append(f"{loaded.where('layers', layer_type)}: ops in no kernel: {', '.join(missing)}")
    for producer, consumer in graph.edges:
        if producer in placed and consumer in placed and placed[producer] > placed[consumer]:
            issues.append(
                f"{loaded.where('layers', layer_type, placed[consumer], 'ops')}: kernel "
                f"{kernel_specs[placed[consumer]].kernel!r} runs {consumer!r} before kernel "
                f"{kernel_specs[placed[producer]].kernel!r} produces its input ({producer!r})")
    return issues


def _check_degrees(loaded: LoadedMapping, layer_type: str, graph: nx.DiGraph,
                   kernel_specs: list[KernelSpec], shards: dict[str, Layout],
                   fine: set[tuple[Any, ...]] | None = None) -> list[str]:
    """Degrees divide the dimensions they split and fit the node. ``fine``: (op, shard) pairs
    found without an issue before on this graph and node (the checks read nothing else)."""
    issues: list[str] = []
    sockets = loaded.system.sockets
    for k, kernel in enumerate(kernel_specs):
        for name in kernel.ops:
            op, shard = graph.nodes[name]["op"], shards[name]
            known = (name, tuple(shard.items()))
            if fine is not None and known in fine:
                continue
            before = len(issues)
            key = ("shard", name) if name in kernel.shard else ("tp",)
            where = _Where(loaded, ("layers", layer_type, k, *key))  # formatted only for an issue
            for dim, degree in shard.items():
                if dim not in op.sizes:
                    issues.append(f"{where}: op {name!r} has no dimension {dim!r} to shard "
                                  f"(it has {', '.join(d for d in op.sizes if d in op.loop)})")
                elif op.sizes[dim] % degree:
                    issues.append(f"{where}: degree {degree} does not divide {dim}={op.sizes[dim]} "
                                  f"of op {name!r}{_fewer_sequences_hint(op, dim, degree)}")
            if "heads" in shard and "kv_heads" in shard and shard["kv_heads"] != aligned_kv_degree(op, shard["heads"]):
                issues.append(f"{where}: op {name!r} splits heads {shard['heads']} ways and kv_heads "
                              f"{shard['kv_heads']} ways, but a socket holding {op.sizes['heads'] // shard['heads']} "
                              f"query heads needs exactly their KV heads: kv_heads "
                              f"{aligned_kv_degree(op, shard['heads'])} (or leave kv_heads out)")
            # a socket holding a group of query heads holds their KV head: aligned, not extra
            used = math.prod(k for d, k in shard.items() if not (d == "kv_heads" and "heads" in shard))
            if used > sockets or sockets % used:
                issues.append(f"{where}: op {name!r} is split {used} ways ({shard}), which does not "
                              f"fit or divide the {sockets} sockets of {loaded.system.name}")
            if fine is not None and len(issues) == before:
                fine.add(known)
    return sorted(set(issues), key=issues.index)


@dataclass(frozen=True)
class _Where:
    """``loaded.where(*keys)``, looked up when formatted (most checks find nothing to report)."""

    loaded: LoadedMapping
    keys: tuple[Any, ...]

    def __str__(self) -> str:
        return self.loaded.where(*self.keys)


def _fewer_sequences_hint(op: Op, dim: str, degree: int) -> str:
    """A decode batch smaller than attention's data-parallel degree: say how to shard instead."""
    if dim != "batch" or op.op_class != "attention" or "heads" not in op.sizes:
        return ""
    heads = op.sizes["heads"]
    fit = degree if heads % degree == 0 else math.gcd(heads, degree)
    whole = " (MLA: each socket keeps the whole latent cache)" if op.sizes.get("kv_heads", 1) == 1 else ""
    return (f"; with fewer sequences than sockets, shard attention by heads instead: "
            f"shard: {{{op.name}: {{heads: {fit}}}}}{whole}")


def _check_sram(loaded: LoadedMapping, layer_type: str, plans: tuple[KernelPlan, ...]) -> list[str]:
    sram = loaded.system.socket.capacity_bytes(SRAM)
    issues = []
    for k, plan in enumerate(plans):
        if plan.sram_bytes > sram:
            fit = max(1, int(plan.chunk_tokens * sram / plan.sram_bytes) // 256 * 256)
            issues.append(
                f"{loaded.where('layers', layer_type, k)}: kernel {plan.name!r} needs "
                f"{format_bytes(plan.sram_bytes)} of SRAM per socket but a socket has "
                f"{format_bytes(sram)}; try chunk_tokens <= {fit} (now {plan.chunk_tokens})")
    return issues
