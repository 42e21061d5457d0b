"""Turn the ops of one fused kernel into pipeline stages with chunked loads, work and stores.

Owns: ``KernelContext``, ``build_kernel``: chunking along tokens, flash-style K/V blocks
(causal pairs counted exactly), per-expert weight streaming for routed MoE ops, where
each tensor is loaded from or stored to, inserted collective stages, PCU allocation and
the SRAM working set. Imports: plan, sharding, routing, model, config, summation.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from rdusim.config.schema import HBM, KernelSpec
from rdusim.errors import MappingError
from rdusim.mapping.bundle import DEFAULTED_FIELDS, LoadedMapping
from rdusim.mapping.plan import Chunk, Item, KernelPlan, Stage, chunks_work
from rdusim.mapping.routing import chunk_expert_tokens
from rdusim.mapping.sharding import Collective, EdgeCache, Layout, tensor_layout
from rdusim.model.ops import Op, TensorUse
from rdusim.model.transformer import (
    LAYER_INPUT,
    LAYER_OUTPUT,
    ROUTES,
    STREAM_DIMS,
    TOKEN_DIMS,
    base_layer_type,
)
from rdusim.summation import add_in_order

#: the kernel settings ``build_kernel`` reads, present once ``resolve_kernels`` has run
RESOLVED_FIELDS = tuple(f for f in DEFAULTED_FIELDS if f != "max_chunks")  # no cap is a valid setting
#: the most work items the kernels of one layer type may hold. Each item costs a few
#: microseconds to build and a few simulation events (about 4e5 events/s, benchmarks/RESULTS.md),
#: so this bounds a layer to seconds; the shipped mappings need under 10^5 (DeepSeek-R1 prefill at
#: 128K: 64 MoE tiles x 257 experts). A larger plan (a huge batch, chunk_tokens=1 on a long
#: prompt, kv_block_tokens=1) is refused before anything is built
MAX_LAYER_ITEMS = 1_000_000


@dataclass
class GraphCache:
    """What ``build_layer`` keeps across layers built on one layer graph, for mappings of one node
    and workload (the mapping explorer's candidates): op stages by everything ``_op_stage`` reads
    (``_op_stage_key``; kernel plans that differ elsewhere share them), each tensor's readers,
    the MoE router, the collectives' edges (``EdgeCache``), the bytes of written tensors
    (``live_activation_peak``) and the (op, shard) pairs the degree checks passed."""

    op_stages: dict[tuple[Any, ...], _Draft] = field(default_factory=dict)
    readers: dict[str, list[str]] | None = None
    router: str | None = None
    edges: EdgeCache = field(default_factory=EdgeCache)
    activation_bytes: dict[tuple[Any, ...], float] = field(default_factory=dict)  # ``live_activation_peak``'s
    fine_shards: set[tuple[Any, ...]] = field(default_factory=set)  # (op, shard) the degree checks passed


@dataclass
class KernelContext:
    loaded: LoadedMapping
    layer_type: str
    graph: nx.DiGraph
    shards: dict[str, Layout]
    collectives: list[Collective]
    kernel_specs: list[KernelSpec]
    #: what layers built on this graph before kept (the explorer's); None: nothing kept
    kept: GraphCache | None = None
    kernel_of: dict[str, int] = field(init=False)
    ops_of: list[list[str]] = field(init=False)      # per kernel, its ops in graph order
    router: str | None = field(init=False)           # the op writing an MoE layer's routes
    readers: dict[str, list[str]] = field(init=False)
    chunking: dict[int, tuple[list[str], int, int]] = field(init=False, default_factory=dict)  # ``_chunking``'s

    def __post_init__(self) -> None:
        unresolved = [k.kernel for k in self.kernel_specs if any(getattr(k, f) is None for f in RESOLVED_FIELDS)]
        assert not unresolved, f"kernels not resolved against the mapping defaults: {unresolved}"
        self.kernel_of = {op: k for k, spec in enumerate(self.kernel_specs) for op in spec.ops}
        self.ops_of = [[] for _ in self.kernel_specs]
        for name in self.graph.nodes:
            self.ops_of[self.kernel_of[name]].append(name)
        if self.kept is not None and self.kept.readers is not None:
            self.router, self.readers = self.kept.router, self.kept.readers
            return
        self.router = next((n for n in self.graph.nodes
                            if any(t.name == ROUTES for t in self.graph.nodes[n]["op"].writes)), None)
        self.readers = {}
        for name in self.graph.nodes:
            for tensor in self.graph.nodes[name]["op"].reads:
                key = LAYER_OUTPUT if tensor.name == LAYER_INPUT else tensor.name
                self.readers.setdefault(key, []).append(name)
        if self.kept is not None:
            self.kept.router, self.kept.readers = self.router, self.readers

    def needed_outside(self, tensor: TensorUse, kernel: int) -> bool:
        """Whether a written tensor must go to HBM (read by another kernel, kept, or final)."""
        readers = self.readers.get(tensor.name, [])
        if tensor.role == "kv" or not readers or tensor.name == LAYER_OUTPUT:
            return True
        return any(self.kernel_of[r] != kernel for r in readers)


@dataclass
class _Draft:
    """A stage before PCUs are allocated (not changed once made: op stages are shared between
    kernel plans, ``GraphCache.op_stages``)."""

    name: str
    op_class: str
    inputs: list[str]
    chunks: Sequence[Chunk]                 # a tuple: the stage's (shared with the stages of other plans)
    op: Op | None = None
    shard: Layout = field(default_factory=dict)
    resident_bytes: float = 0.0
    out_bytes_per_chunk: float = 0.0
    max_pcus: int | None = None             # independent instances per socket, if capped
    loads_follow_inputs: bool = False       # data-dependent loads (see ``_op_stage``)

    @functools.cached_property
    def work(self) -> float:
        """Its items' work, added item after item in plan order (``chunks_work``)."""
        return chunks_work(self.chunks)

    @functools.cached_property
    def max_item_load(self) -> float:
        return _max_item_load(self)


def _chunking(ctx: KernelContext, index: int) -> tuple[list[str], int, int]:
    """The kernel's ops, its chunk size in tokens and its number of chunks (once per kernel)."""
    found = ctx.chunking.get(index)
    if found is None:
        found = ctx.chunking[index] = _find_chunking(ctx, index)
    return found


def _find_chunking(ctx: KernelContext, index: int) -> tuple[list[str], int, int]:
    spec = ctx.kernel_specs[index]  # resolved: every setting present (bundle.resolve_kernels)
    chunk_tokens = spec.chunk_tokens
    ops = ctx.ops_of[index]
    # a kernel streams its token rows; only a kernel without any (SnapKV's) streams keys
    token_ops = [n for n in ops if "seq" in ctx.graph.nodes[n]["op"].loop] or ops
    rows = max(_rows(ctx.graph.nodes[n]["op"], ctx.shards[n]) for n in token_ops)
    per_chunk = chunk_tokens
    if ctx.loaded.spec.phase == "decode":
        # a speculative verification's k + 1 queries of one sequence attend the same cache: a
        # chunk holds whole sequences, so each K/V block is read once for all of them (1 query
        # per sequence in plain decoding: unchanged)
        queries = ctx.graph.nodes[token_ops[0]]["op"].sizes.get("seq", 1)
        per_chunk = -(-chunk_tokens // queries) * queries
    n_chunks = max(1, math.ceil(rows / per_chunk))
    if spec.max_chunks is not None:
        n_chunks = min(n_chunks, spec.max_chunks)
    return ops, chunk_tokens, n_chunks


def item_bound(ctx: KernelContext, index: int) -> int:
    """An upper bound on the work items kernel ``index``'s stages will hold (cheap: nothing is built)."""
    ops, _, n_chunks = _chunking(ctx, index)
    return _item_bound(ctx, ops, n_chunks, ctx.kernel_specs[index].kv_block_tokens)


def check_item_budget(ctx: KernelContext) -> None:
    """Refuse, before building anything, a layer whose kernels would hold more than
    ``MAX_LAYER_ITEMS`` work items; the message names the largest kernel and the knobs."""
    bounds = [item_bound(ctx, index) for index in range(len(ctx.kernel_specs))]
    if sum(bounds) <= MAX_LAYER_ITEMS:
        return
    index = max(range(len(bounds)), key=bounds.__getitem__)
    _, chunk_tokens, n_chunks = _chunking(ctx, index)
    where = ctx.loaded.where("layers", base_layer_type(ctx.layer_type), index)
    raise MappingError(f"{where}: kernel {ctx.kernel_specs[index].kernel!r} would be simulated as about "
                       f"{bounds[index]:.3g} work items ({n_chunks} chunks of {chunk_tokens} tokens, batch "
                       f"{ctx.loaded.spec.workload.batch}); a layer may have at most {MAX_LAYER_ITEMS:.3g}. "
                       "Use larger chunk_tokens or kv_block_tokens, set max_chunks, or a smaller batch")


def build_kernel(ctx: KernelContext, index: int) -> KernelPlan:
    spec = ctx.kernel_specs[index]  # resolved: every setting present (bundle.resolve_kernels)
    ops, chunk_tokens, n_chunks = _chunking(ctx, index)
    drafts: list[_Draft] = []
    provider: dict[str, str] = {}
    for name in ops:
        for coll in ctx.collectives:
            # one gather per tensor serves every reader in this kernel
            if coll.consumer == name and not coll.in_producer_kernel and all(d.name != coll.name for d in drafts):
                drafts.append(_gather_stage(ctx, coll, n_chunks, provider))
        drafts.append(_cached_op_stage(ctx, name, index, n_chunks, provider))
        for coll in ctx.collectives:
            if coll.producer == name and coll.in_producer_kernel:
                drafts.append(_reduce_stage(ctx, coll, n_chunks, provider, index))
    assert len({d.name for d in drafts}) == len(drafts), "stage names must be unique within a kernel"
    stages = _allocate(ctx, drafts)
    depth = spec.buffer_depth
    per_stage = tuple((x.name, x.resident_bytes + depth * (x.max_item_load + x.out_bytes_per_chunk)) for x in drafts)
    return KernelPlan(spec.kernel, ctx.layer_type, stages, add_in_order(b for _, b in per_stage), chunk_tokens, spec.weights,
                      depth, spec.orchestration, per_stage)


def _item_bound(ctx: KernelContext, ops: list[str], n_chunks: int, block: int) -> int:
    """An upper bound on the work items the kernel's stages will hold (see MAX_LAYER_ITEMS)."""
    total = 0
    for name in ops:
        op: Op = ctx.graph.nodes[name]["op"]
        total += n_chunks
        if op.op_class == "attention" and "kv_seq" in op.sizes:  # K/V blocks per chunk and sequence
            sequences = op.sizes.get("batch", 1) // ctx.shards[name].get("batch", 1)
            total += (sequences + 2 * n_chunks) * math.ceil(op.sizes["kv_seq"] / block)
        elif op.routed:  # one item per expert a chunk touches
            total += n_chunks * op.sizes.get("experts", 1)
    return total




def _rows(op: Op, shard: Layout) -> int:
    """Rows this op streams per socket: batch x its stream dimension."""
    rows = op.sizes["batch"] // shard.get("batch", 1) if "batch" in op.loop else 1
    stream = next((d for d in STREAM_DIMS if d in op.loop), None)
    if stream is not None:
        rows *= op.sizes[stream] // shard.get(stream, 1)
    return rows


# ---------------------------------------------------------------------------- op stage
def _cached_op_stage(ctx: KernelContext, name: str, index: int, n_chunks: int, provider: dict[str, str]) -> _Draft:
    """``_op_stage``, taken from ``ctx.kept`` when one with the same inputs was built (tested equal
    to a fresh one); ``provider`` is updated either way."""
    if ctx.kept is None:
        return _op_stage(ctx, name, index, n_chunks, provider)
    key = _op_stage_key(ctx, name, index, n_chunks, provider)
    draft = ctx.kept.op_stages.get(key)
    if draft is None:
        draft = ctx.kept.op_stages[key] = _op_stage(ctx, name, index, n_chunks, provider)
    else:
        for tensor in draft.op.writes if draft.op is not None else ():
            provider[tensor.name] = name
    return draft


def _op_stage_key(ctx: KernelContext, name: str, index: int, n_chunks: int, provider: dict[str, str]
                  ) -> tuple[Any, ...]:
    """Everything ``_op_stage`` reads besides the graph's op: its shard, chunks, the kernel's
    settings it uses, which of its reads this kernel makes (and where), the reductions it feeds
    in this kernel, which of its outputs leave the kernel, whether its router is in this kernel
    (routed experts), and the workload's routing."""
    op: Op = ctx.graph.nodes[name]["op"]
    spec = ctx.kernel_specs[index]
    workload = ctx.loaded.spec.workload
    return (name, n_chunks, tuple(ctx.shards[name].items()), spec.weights, spec.kv_block_tokens, spec.attention_split,
            spec.expert_weights, tuple(provider.get(t.name) for t in op.reads),
            tuple(c.tensor for c in ctx.collectives if c.producer == name and c.in_producer_kernel),
            tuple(ctx.needed_outside(t, index) for t in op.writes),
            op.routed and spec.expert_weights == "routed" and _router_in_kernel(ctx, index),
            workload.routing, workload.seed)


def _router_in_kernel(ctx: KernelContext, index: int) -> bool:
    """Whether the op writing the routes (an MoE router) is in kernel ``index``."""
    return ctx.router is not None and ctx.kernel_of[ctx.router] == index


def _op_stage(ctx: KernelContext, name: str, index: int, n_chunks: int, provider: dict[str, str]) -> _Draft:
    op: Op = ctx.graph.nodes[name]["op"]
    shard = ctx.shards[name]
    spec = ctx.kernel_specs[index]
    weights_tier = spec.weights
    inputs = sorted({provider[t.name] for t in op.reads if t.name in provider and provider[t.name] != name})
    streamed, blocked, resident = _classify_reads(op, shard, provider, weights_tier)
    if op.op_class == "attention" and (blocked or op.causal):
        # causal pairs per chunk also when the kernel makes its own K/V (nothing to load then)
        block = spec.kv_block_tokens
        if not op.causal and spec.attention_split != "keys":
            block = op.sizes["kv_seq"]  # the whole operand, on chip before the reduction
        chunks_items: Sequence[Sequence[Item]] = _attention_items(op, shard, n_chunks, block, blocked)
    elif op.routed:
        every_expert = spec.expert_weights == "all"
        chunks_items = _expert_items(ctx, op, shard, n_chunks, resident, every_expert)
        resident = []
    elif op.is_barrier:
        chunks_items = [(Item(op.work(shard)),)] + [(Item(0.0),)] * (n_chunks - 1)
    else:
        chunks_items = [(Item(op.work(shard) / n_chunks),)] * n_chunks
    reduced = {c.tensor for c in ctx.collectives if c.producer == name and c.in_producer_kernel}
    stores = [(HBM, t.nbytes(op.sizes, tensor_layout(t, shard)) / n_chunks) for t in op.writes
              if t.name not in reduced and ctx.needed_outside(t, index)]
    stored = tuple((t, b) for t, b in stores if b > 0)
    streamed_per_chunk = tuple((tier, b / n_chunks) for tier, b in streamed)
    chunks: list[Chunk] = []
    for i, items in enumerate(chunks_items):
        if i > 1 and items is chunks_items[i - 1]:
            chunks.append(chunks[-1])  # the same items as the chunk before (not the first): one chunk object
            continue
        extra = streamed_per_chunk + (tuple(resident) if i == 0 else ())
        first = Item(items[0].work, extra + items[0].loads)
        chunks.append(Chunk((first, *items[1:]), stores=stored))
    for tensor in op.writes:
        provider[tensor.name] = name
    out = add_in_order(t.nbytes(op.sizes, tensor_layout(t, shard)) for t in op.writes) / n_chunks
    if op.whole_operand:  # at least one whole sequence's output on chip at once
        sequences = max(1, op.sizes["batch"] // shard.get("batch", 1))
        out = max(out, out * n_chunks / sequences)
    # routed experts whose routes are made in this kernel: which experts' weights a chunk
    # streams is known only when its routes (and the rows they carry) arrive, so those loads
    # cannot run ahead of the router (a looped kernel cannot prefetch them either); routes
    # made by an earlier kernel call are known when this one starts
    follow = op.routed and spec.expert_weights == "routed" and _router_in_kernel(ctx, index)
    return _Draft(name, op.op_class, inputs, tuple(chunks), op, shard, resident_bytes=add_in_order(b for _, b in resident),
                  out_bytes_per_chunk=out, max_pcus=_pcu_cap(ctx, op, shard, spec), loads_follow_inputs=follow)


def _pcu_cap(ctx: KernelContext, op: Op, shard: Layout, spec: KernelSpec) -> int | None:
    """Independent instances of the op per socket: one PCU each at most.

    Decode attention with ``attention_split: heads`` reduces (softmax, then the weighted
    sum) over a sequence's whole cache in one instance per (sequence, query, head): without
    a flash-decoding split and combine, the keys are not a parallel dimension.
    """
    if op.op_class == "attention" and not op.causal and spec.attention_split == "heads":
        return max(1, math.prod(op.sizes[d] // shard.get(d, 1) for d in ("batch", "seq", "heads")))
    return op.max_pcus(shard)


def _classify_reads(op: Op, shard: Layout, provider: dict[str, str], weights_tier: str
                    ) -> tuple[list[tuple[str, float]], list[TensorUse], list[tuple[str, float]]]:
    """Split external reads into token-streamed (tier, bytes), K/V-blocked tensors and resident weights."""
    streamed, blocked, resident = [], [], []
    for tensor in op.reads:
        if tensor.name in provider:
            continue
        nbytes = tensor.nbytes(op.sizes, tensor_layout(tensor, shard))
        if op.op_class == "attention" and "kv_seq" in tensor.dims:
            blocked.append(tensor)
        elif not any(d in tensor.dims for d in TOKEN_DIMS):
            resident.append((weights_tier if tensor.role == "weight" else HBM, nbytes))
        else:
            streamed.append((HBM, nbytes))
    return streamed, blocked, resident


def _attention_items(op: Op, shard: Layout, n_chunks: int, block: int,
                     kv: list[TensorUse]) -> tuple[tuple[Item, ...], ...]:
    """Flash-style K/V streaming: each chunk reads, block by block, the keys its queries see.

    Rows are (sequence, query) pairs. Causal (prefill): a chunk is a range of query
    positions and reads every key up to its last query (re-reading earlier blocks, as flash
    attention does); pairs are counted exactly. Decode: a chunk is a range of sequences and
    reads each of their caches once.
    """
    seq, kv_seq = op.sizes["seq"], op.sizes["kv_seq"]
    sequences = op.sizes["batch"] // shard.get("batch", 1)
    per_pair = op.work(shard) / (sequences * _pairs(0, seq, 0, kv_seq, op.causal))
    key_bytes = add_in_order(t.nbytes(op.sizes, tensor_layout(t, shard)) for t in kv) / (sequences * kv_seq)
    return _block_items(seq, kv_seq, sequences, n_chunks, block, op.causal, per_pair, key_bytes)


@functools.lru_cache(maxsize=64)
def _block_items(seq: int, kv_seq: int, sequences: int, n_chunks: int, block: int, causal: bool,
                 per_pair: float, key_bytes: float) -> tuple[tuple[Item, ...], ...]:
    """``_attention_items``' K/V blocks, from the numbers they depend on (kept: kernel plans of
    different fusions and tiers share their attention op's blocks; items are immutable)."""
    rows = sequences * seq
    bounds = [(i * rows // n_chunks, (i + 1) * rows // n_chunks) for i in range(n_chunks)]
    chunks = []
    for r0, r1 in bounds:
        items = []
        for s0 in range(r0 // seq, -(-r1 // seq)):  # sequences this chunk touches
            q0, q1 = max(r0, s0 * seq) - s0 * seq, min(r1, (s0 + 1) * seq) - s0 * seq
            last_key = q1 if causal else kv_seq
            for k0 in range(0, last_key, block):
                k1 = min(k0 + block, last_key)
                items.append(Item(per_pair * _pairs(q0, q1, k0, k1, causal), ((HBM, key_bytes * (k1 - k0)),)))
        chunks.append(tuple(items) or (Item(0.0),))
    return tuple(chunks)


def _pairs(q0: int, q1: int, k0: int, k1: int, causal: bool) -> float:
    """(query, key) pairs with query in [q0,q1), key in [k0,k1), key <= query if causal."""
    if not causal:
        return float((q1 - q0) * (k1 - k0))
    # query q sees min(max(q + 1 - k0, 0), k1 - k0) keys: none before k0, a growing run up to
    # k1 - 1, then the whole block; summed in closed form (integers, exact)
    a, b = max(q0, k0), min(q1, k1 - 1)
    growing = (b - a) * (a + b + 1 - 2 * k0) // 2 if b > a else 0
    whole = (q1 - max(q0, k1 - 1)) * (k1 - k0) if q1 > max(q0, k1 - 1) else 0
    return float(growing + whole)


def _expert_items(ctx: KernelContext, op: Op, shard: Layout, n_chunks: int,
                  resident: list[tuple[str, float]], every_expert: bool) -> tuple[tuple[Item, ...], ...]:
    """One item per expert a chunk touches: its weights streamed, then its tokens computed.

    ``every_expert`` (``expert_weights: all``): a static graph streams every expert's
    weights each chunk, idle experts with no tokens.
    """
    tier = resident[0][0] if resident else HBM
    weight_bytes = add_in_order(b for _, b in resident) / op.sizes["experts"]
    rows = _rows(op, shard)
    per_token_slot = op.work(shard) / (rows * op.sizes["slots"])
    shared = op.sizes["experts"] - op.sizes["routed"]
    workload = ctx.loaded.spec.workload
    return _routed_items(rows, n_chunks, op.sizes["experts"], op.sizes["routed"], op.sizes["topk"], shared,
                         workload.routing, workload.seed, every_expert, per_token_slot, tier, weight_bytes)


@functools.lru_cache(maxsize=64)
def _routed_items(rows: int, n_chunks: int, experts: int, routed: int, topk: int, shared: int, routing: str,
                  seed: int, every_expert: bool, per_token_slot: float, tier: str,
                  weight_bytes: float) -> tuple[tuple[Item, ...], ...]:
    """``_expert_items`` from the numbers they depend on (kept, as ``_block_items``); experts
    with the same tokens in a chunk share one (immutable) item."""
    chunks: list[tuple[Item, ...]] = []
    made: dict[float, Item] = {}
    before: list[float] = []
    for tokens in chunk_expert_tokens(rows, n_chunks, routed, topk, shared, routing, seed):
        if every_expert:
            tokens = tokens + [0.0] * (experts - len(tokens))
        if chunks and tokens == before:
            chunks.append(chunks[-1])  # the same tokens per expert as the chunk before: the same items
            continue
        before = tokens
        items = []
        for t in tokens:
            item = made.get(t)
            if item is None:
                item = made[t] = Item(per_token_slot * t, ((tier, weight_bytes),))
            items.append(item)
        chunks.append(tuple(items))
    return tuple(chunks)


# ---------------------------------------------------------------------- collectives
@functools.lru_cache(maxsize=256)
def _collective_chunks(coll: Collective, n_chunks: int, loads: float, stores: float) -> tuple[Chunk, ...]:
    """A collective stage's chunks: one (immutable) chunk, n times (kept, as ``_block_items``)."""
    chunk = Chunk((Item(0.0, ((HBM, loads / n_chunks),) if loads else ()),), p2p_bytes=coll.egress_bytes / n_chunks,
                  p2p_steps=coll.phases, stores=((HBM, stores / n_chunks),) if stores else ())
    return (chunk,) * n_chunks


def _gather_stage(ctx: KernelContext, coll: Collective, n_chunks: int, provider: dict[str, str]) -> _Draft:
    name = f"{coll.kind}({coll.tensor})"
    producer_op: Op = ctx.graph.nodes[coll.producer]["op"]
    tensor = producer_op.tensor(coll.tensor)
    local = tensor.nbytes(producer_op.sizes, tensor_layout(tensor, ctx.shards[coll.producer]))
    source = coll.tensor if coll.tensor in provider else None
    inputs = [provider[source]] if source else []
    draft = _Draft(name, "collective", inputs, _collective_chunks(coll, n_chunks, 0.0 if source else local, 0.0),
                   out_bytes_per_chunk=(local + coll.egress_bytes) / n_chunks)
    provider[LAYER_INPUT if coll.tensor == LAYER_OUTPUT else coll.tensor] = name
    return draft


def _reduce_stage(ctx: KernelContext, coll: Collective, n_chunks: int, provider: dict[str, str],
                  index: int) -> _Draft:
    name = f"{coll.kind}({coll.tensor})"
    op: Op = ctx.graph.nodes[coll.producer]["op"]
    tensor = op.tensor(coll.tensor)
    local = tensor.nbytes(op.sizes, tensor_layout(tensor, ctx.shards[coll.producer]))
    result = local / coll.group if coll.kind == "reduce_scatter" else local
    stores = result if ctx.needed_outside(tensor, index) else 0.0
    draft = _Draft(name, "collective", [provider[coll.tensor]], _collective_chunks(coll, n_chunks, 0.0, stores),
                   out_bytes_per_chunk=local / n_chunks)
    provider[coll.tensor] = name
    return draft


# ---------------------------------------------------------------------- allocation
def _allocate(ctx: KernelContext, drafts: list[_Draft]) -> tuple[Stage, ...]:
    """PCUs per stage so that the spatial pipeline's slowest stage is as fast as whole PCUs allow."""
    socket = ctx.loaded.system.socket
    compute = [x for x in drafts if x.op_class != "collective"]
    one_pcu_s = {x.name: x.work * socket.pcus / socket.achievable_ops_per_s(x.op_class) for x in compute}
    caps = {x.name: x.max_pcus or socket.pcus for x in compute}
    pcus = balance_pcus(one_pcu_s, caps, socket.pcus)
    stages = []
    for x in drafts:
        n = pcus.get(x.name, 0)
        rate = socket.achievable_ops_per_s(x.op_class) * n / socket.pcus if n else 0.0
        barrier = x.op is not None and x.op.is_barrier
        stages.append(Stage(x.name, x.op_class, n, rate, tuple(x.inputs), tuple(x.chunks), x.op, dict(x.shard), barrier,
                            x.loads_follow_inputs))
    return tuple(stages)


def balance_pcus(one_pcu_s: dict[str, float], caps: dict[str, int], total: int) -> dict[str, int]:
    """Whole PCUs per stage minimising the slowest stage's time ``one_pcu_s / pcus``.

    Every stage gets one PCU (a stage must run somewhere; a kernel with more stages than the
    socket has PCUs is over-subscribed and says so by summing past ``total``); then each
    further PCU goes to the slowest stage that can still use one (at most ``caps``: a sort
    network's independent instances), until none is left or none can use more. Greedy
    water-filling is optimal for this min-max objective; ties go to the earlier stage, so
    the result is deterministic.
    """
    pcus = dict.fromkeys(one_pcu_s, 1)
    spare = total - len(pcus)
    growing = [(i, name) for i, (name, t) in enumerate(one_pcu_s.items()) if caps[name] > 1 and t > 0]
    if spare > 0 and growing:
        # The greedy hands out PCUs in decreasing order of ``one_pcu_s / pcus`` (the step from p to
        # p + 1 PCUs has key t / p). Every step whose key is above ``level`` comes before every
        # other step, so when at most ``spare`` of them exist they are all taken: hand them out
        # at once (a socket has 1040 PCUs: a thousand heap operations per kernel otherwise), then
        # go on one PCU at a time from the same state. Same allocation, bit for bit.
        level = add_in_order(one_pcu_s[name] for _, name in growing) / spare
        steps = {name: _steps_above(one_pcu_s[name], caps[name] - 1, level) for _, name in growing}
        if sum(steps.values()) <= spare:
            for name, n in steps.items():
                pcus[name] += n
            spare -= sum(steps.values())
    heap = [(-one_pcu_s[name] / pcus[name], i, name) for i, name in growing if pcus[name] < caps[name]]
    heapq.heapify(heap)
    while spare > 0 and heap:
        _, i, name = heapq.heappop(heap)
        pcus[name] += 1
        spare -= 1
        if pcus[name] < caps[name]:
            heapq.heappush(heap, (-one_pcu_s[name] / pcus[name], i, name))
    return pcus


def _steps_above(t: float, most: int, level: float) -> int:
    """How many of the keys ``t / p``, p = 1..most, exceed ``level`` (they fall as p grows)."""
    n = min(most, int(min(t / level, most + 1.0)))
    while n > 0 and not t / n > level:
        n -= 1
    while n < most and t / (n + 1) > level:
        n += 1
    return n


def _max_item_load(draft: _Draft) -> float:
    """Largest streamed item a stage buffers (chunk 0's first item also carries the resident
    weights, which ``resident_bytes`` counts once)."""
    if not draft.chunks or not draft.chunks[0].items:
        return 0.0
    first = draft.chunks[0].items[0]
    # chunks and items repeat as the same objects: each counted once
    chunks = {id(c): c for c in draft.chunks}.values()
    items = {id(i): i for i in itertools.chain.from_iterable(c.items for c in chunks)}
    del items[id(first)]
    return max([add_in_order(b for _, b in first.loads) - draft.resident_bytes,
                *(add_in_order(b for _, b in i.loads) for i in items.values())])
