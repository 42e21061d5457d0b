"""The mapping design space around a seed mapping: genes, genomes and the mappings they spell.

Owns: ``Gene``, ``Space``, ``space_from_seed``, ``candidate_data``, ``load_candidate``,
Imports: build, bundle, model, config.

A candidate is a flat tuple of gene indices (a *genome*), so exhaustive enumeration,
mutation and crossover are all plain tuple operations. Per base layer type the seed's
kernels are flattened into one op order (always a valid dependency order, because the seed
is); the genes are:

- ``cut``: whether a kernel boundary sits at a candidate cut point (the seed's boundaries
  plus both sides of the attention op and the start of the FFN half); kernels made only of
  a KV policy's ops (SnapStream's ring buffer and SnapKV compression) stay intact;
- ``attn``: the attention op's sharding ``{heads: t, batch: d}``, t*d dividing the node;
- per *segment* (ops between two candidate cut points): ``tp`` (a divisor of the node),
  ``chunk`` (powers of two around the seed's) and ``weights`` (hbm/ddr); a kernel made of
  several segments takes the settings of its lead segment (the one with attention, else
  its first);
- ``batch`` (decode only): powers of two;
- speculative decode seeds (a draft model, not MTP): ``sd.k``, the draft length (0 = plain
  decoding), and ``sd.draft``, the draft model among the packaged models that share the
  target's vocabulary and are smaller than it (the draft's mapping is derived on the node,
  ``rdusim.mapping.draft``, unless the candidate keeps the seed's draft and its mapping).

The seed genome spells the seed mapping (same kernels, same degrees), so the seed is
always in the space.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdusim.config.loader import MODELS_DIR, Document, read_document, validate
from rdusim.config.schema import DDR, HBM, MTP_DRAFT, KernelSpec, KvPolicySpec, ModelSpec
from rdusim.mapping.build import layer_shape
from rdusim.mapping.bundle import LoadedMapping, validate_mapping
from rdusim.model.transformer import HEAD, base_layer_type, layer_counts, layer_graph

BATCHES = tuple(2**k for k in range(11))       # 1 .. 1024
#: draft lengths the explorer tries (R4 studies up to 9; serving stacks use a few to ~10)
DRAFT_KS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16)
CHUNK_STEPS = (-2, -1, 0, 1, 2)                # seed chunk x 2**step
KERNEL_KEYS = ("max_chunks", "kv_block_tokens", "buffer_depth", "orchestration")


@dataclass(frozen=True)
class Gene:
    name: str                 # e.g. "moe.cut3", "moe.seg1.tp", "moe.attn", "batch"
    choices: tuple[Any, ...]


@dataclass(frozen=True)
class Segment:
    ops: tuple[str, ...]
    seed_kernel: int          # index of the seed kernel its first op is in
    is_fixed: bool            # a KV-policy kernel kept whole


@dataclass(frozen=True)
class LayerSpace:
    layer_type: str
    segments: tuple[Segment, ...]
    cut_is_free: tuple[bool, ...]      # per boundary between segments: a gene, or always cut
    attention_op: str | None
    seed_kernels: tuple[KernelSpec, ...]
    kv_heads: int = 1                  # KV heads of the attention op (GQA > 1)


@dataclass(frozen=True)
class Space:
    seed_path: Path
    phase: str
    sockets: int
    genes: tuple[Gene, ...]
    layers: tuple[LayerSpace, ...]
    seed: tuple[int, ...]
    index: dict[str, int] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return math.prod(len(g.choices) for g in self.genes)

    def value(self, genome: tuple[int, ...], name: str) -> Any:
        gene = self.genes[self.index[name]]
        return gene.choices[genome[self.index[name]]]


def divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def space_from_seed(loaded: LoadedMapping) -> Space:
    """The space around a loaded seed mapping, and the genome that spells the seed."""
    spec = loaded.spec
    sockets = loaded.system.sockets
    genes: list[Gene] = []
    seed: list[int] = []
    if spec.phase == "decode":
        batches = tuple(sorted(set(BATCHES) | {spec.workload.batch}))
        genes.append(Gene("batch", batches))
        seed.append(batches.index(spec.workload.batch))
    sd = spec.speculative
    if sd is not None and sd.draft != MTP_DRAFT:
        ks = tuple(sorted(set(DRAFT_KS) | {sd.k}))
        drafts = draft_choices(loaded)
        genes += [Gene(SD_K, ks), Gene(SD_DRAFT, drafts)]
        seed += [ks.index(sd.k), drafts.index(sd.draft)]
    layers = []
    for base, kernels in spec.layers.items():
        layer = _layer_space(loaded, base, kernels)
        layers.append(layer)
        _layer_genes(loaded, layer, sockets, genes, seed)
    index = {g.name: i for i, g in enumerate(genes)}
    return Space(Path(loaded.document.path).resolve(), spec.phase, sockets, tuple(genes), tuple(layers),
                 tuple(seed), index)


SD_K, SD_DRAFT = "sd.k", "sd.draft"


def draft_choices(loaded: LoadedMapping) -> tuple[str, ...]:
    """The seed's draft model and every packaged dense model that shares the target's vocabulary
    (a draft must share its tokenizer) and has fewer parameters than the target."""
    assert loaded.spec.speculative is not None
    target = loaded.model
    names = {loaded.spec.speculative.draft}
    for path in sorted(MODELS_DIR.glob("*.yaml")):
        model = validate(read_document(path), ModelSpec)
        if model.vocab == target.vocab and model.ffn.moe is None and _parameters(model) < _parameters(target):
            names.add(model.name)
    return tuple(sorted(names))


def _parameters(model: ModelSpec) -> float:
    """Decoder parameters, to order models by size (attention as 4 hidden^2, a dense SwiGLU FFN)."""
    return model.layers * (4 * model.hidden**2 + 3 * model.hidden * model.ffn.intermediate)


def speculative_genes(space: Space, genome: tuple[int, ...]) -> tuple[str, int] | None:
    """(draft model, k) a genome spells, or None when the seed is not speculative."""
    if SD_K not in space.index:
        return None
    return space.value(genome, SD_DRAFT), space.value(genome, SD_K)


def _layer_space(loaded: LoadedMapping, base: str, kernels: list[KernelSpec]) -> LayerSpace:
    full_type = next(t for t in layer_types(loaded) if base_layer_type(t) == base)
    plain = layer_graph(loaded.model, base_layer_type(full_type), layer_shape(loaded), KvPolicySpec())
    attention = next((n for k in kernels for n in k.ops
                      if n in plain.nodes and plain.nodes[n]["op"].op_class == "attention"), None)
    segments: list[Segment] = []
    cut_is_free: list[bool] = []
    for k, kernel in enumerate(kernels):
        is_fixed = any(n not in plain.nodes for n in kernel.ops)
        pieces = [list(kernel.ops)] if is_fixed else _split(kernel.ops, attention)
        for piece in pieces:
            if segments:
                # a boundary inside a seed kernel or between two movable kernels is a gene
                cut_is_free.append(not is_fixed and not segments[-1].is_fixed)
            segments.append(Segment(tuple(piece), k, is_fixed))
    kv_heads = plain.nodes[attention]["op"].sizes.get("kv_heads", 1) if attention else 1
    return LayerSpace(base, tuple(segments), tuple(cut_is_free), attention, tuple(kernels), kv_heads)


def _split(ops: list[str], attention: str | None) -> list[list[str]]:
    """Split a seed kernel's ops around the attention op and before the FFN half."""
    pieces: list[list[str]] = [[]]
    for name in ops:
        starts_ffn = name == "ffn_norm"
        if pieces[-1] and (name == attention or starts_ffn or (pieces[-1][-1] == attention)):
            pieces.append([])
        pieces[-1].append(name)
    return pieces


def _layer_genes(loaded: LoadedMapping, layer: LayerSpace, sockets: int, genes: list[Gene], seed: list[int]) -> None:
    base = layer.layer_type
    seed_kernel_of_segment = [s.seed_kernel for s in layer.segments]
    for i, free in enumerate(layer.cut_is_free):
        if free:
            genes.append(Gene(f"{base}.cut{i}", (False, True)))
            seed.append(int(seed_kernel_of_segment[i] != seed_kernel_of_segment[i + 1]))
    if layer.attention_op is not None:
        choices = _attention_choices(loaded, sockets)
        holder = next(k for k in layer.seed_kernels if layer.attention_op in k.ops)
        shard = holder.shard.get(layer.attention_op)
        if shard is None:
            current = (holder.tp, holder.dp)
        else:
            current = (shard.get("heads", 1), shard.get("batch", 1))
        if current not in choices:
            choices = (*choices, current)
        genes.append(Gene(f"{base}.attn", choices))
        seed.append(choices.index(current))
    tps = divisors(sockets)
    for s, segment in enumerate(layer.segments):
        kernel = layer.seed_kernels[segment.seed_kernel]
        tp, chunk, weights = kernel.tp, kernel.chunk_tokens, kernel.weights
        chunks = tuple(sorted({max(1, int(chunk * 2.0**step)) for step in CHUNK_STEPS}))
        for name, choices, value in ((f"{base}.seg{s}.tp", tps, tp), (f"{base}.seg{s}.chunk", chunks, chunk),
                                     (f"{base}.seg{s}.weights", (HBM, DDR), weights)):
            if segment.is_fixed:
                choices = (value,)
            if value not in choices:
                choices = (*choices, value)
            genes.append(Gene(name, choices))
            seed.append(choices.index(value))


def _attention_choices(loaded: LoadedMapping, sockets: int) -> tuple[tuple[int, int], ...]:
    """(heads degree, batch degree) pairs whose product divides the node."""
    batch_ok = loaded.spec.phase == "decode"
    return tuple((t, dp) for t in divisors(sockets) for dp in divisors(sockets)
                 if sockets % (t * dp) == 0 and (batch_ok or dp == 1))


# ----------------------------------------------------------------- genome -> mapping
def candidate_data(space: Space, seed_data: dict[str, Any], genome: tuple[int, ...]) -> dict[str, Any]:
    """The raw mapping document (as YAML data) that a genome spells."""
    data = dict(seed_data)
    data["layers"] = {layer.layer_type: layer_kernels(space, layer, genome) for layer in space.layers}
    if space.phase == "decode":
        data["workload"] = dict(seed_data["workload"]) | {"batch": space.value(genome, "batch")}
    sd = speculative_genes(space, genome)
    if sd is not None:
        draft, k = sd
        speculative = dict(seed_data["speculative"]) | {"draft": draft, "k": k}
        if draft != seed_data["speculative"]["draft"]:
            speculative.pop("mapping", None)  # another draft: its mapping is derived
        data["speculative"] = speculative
    return data


def layer_kernels(space: Space, layer: LayerSpace, genome: tuple[int, ...]) -> list[dict[str, Any]]:
    """The kernels (mapping YAML data) a genome spells for one base layer type. Genomes that
    differ only in genes this ignores (a segment's settings when it is not its kernel's lead
    segment) spell the same kernels: the explorer keys its layer caches by this."""
    base = layer.layer_type
    groups: list[list[int]] = [[0]]
    for i, free in enumerate(layer.cut_is_free):
        if not free or space.value(genome, f"{base}.cut{i}"):
            groups.append([i + 1])
        else:
            groups[-1].append(i + 1)
    return [_kernel(space, layer, group, genome) for group in groups]


def kernel_signature(space: Space, layer: LayerSpace) -> Callable[[tuple[int, ...]], tuple[Any, ...]]:
    """A function of a genome equal for two genomes exactly when ``layer_kernels`` spells the same
    kernels for them (tested): per kernel, its segments and the gene indices ``_kernel`` reads (its
    lead segment's TP, chunk and weights; the attention gene if it holds the attention op). A
    gene's choices are distinct values, so distinct indices spell distinct kernels. A few tuple
    operations, where ``layer_kernels`` builds every kernel's document."""
    base = layer.layer_type
    cuts = tuple(space.index[f"{base}.cut{i}"] if free else None for i, free in enumerate(layer.cut_is_free))
    settings = tuple(tuple(space.index[f"{base}.seg{s}.{g}"] for g in ("tp", "chunk", "weights"))
                     for s in range(len(layer.segments)))
    holder = next((s for s, segment in enumerate(layer.segments) if layer.attention_op in segment.ops), None)
    attn = space.index.get(f"{base}.attn")

    def signature(genome: tuple[int, ...]) -> tuple[Any, ...]:
        kernels: list[tuple[Any, ...]] = []
        start = 0
        for end in range(1, len(settings) + 1):
            if end < len(settings) and cuts[end - 1] is not None and not genome[cuts[end - 1]]:
                continue  # no boundary here: the next segment joins this kernel
            lead = holder if holder is not None and start <= holder < end else start
            tp, chunk, weights = settings[lead]
            kernels.append((end, genome[tp], genome[chunk], genome[weights],
                            genome[attn] if lead == holder and attn is not None else -1))
            start = end
        return tuple(kernels)

    return signature


def _kernel(space: Space, layer: LayerSpace, group: list[int], genome: tuple[int, ...]) -> dict[str, Any]:
    base = layer.layer_type
    segments = [layer.segments[i] for i in group]
    ops = [n for s in segments for n in s.ops]
    lead = next((i for i in group if layer.attention_op in layer.segments[i].ops), group[0])
    seed_kernel = layer.seed_kernels[layer.segments[lead].seed_kernel]
    tp = space.value(genome, f"{base}.seg{lead}.tp")
    kernel: dict[str, Any] = {"kernel": _kernel_name(layer, ops), "ops": ops, "tp": tp,
                              "chunk_tokens": space.value(genome, f"{base}.seg{lead}.chunk"),
                              "weights": space.value(genome, f"{base}.seg{lead}.weights")}
    for key in KERNEL_KEYS:
        value = getattr(seed_kernel, key)
        if value is not None:
            kernel[key] = value
    shard = _shards(space, layer, ops, tp, genome)
    if shard:
        kernel["shard"] = shard
    return kernel


def _shards(space: Space, layer: LayerSpace, ops: list[str], tp: int, genome: tuple[int, ...]) -> dict[str, Any]:
    """Seed per-op shards rescaled to this kernel's TP, and the attention gene."""
    shard: dict[str, Any] = {}
    for seed_kernel in layer.seed_kernels:
        seed_tp = seed_kernel.tp
        for name, dims in seed_kernel.shard.items():
            if name not in ops or name == layer.attention_op:
                continue
            if len(dims) == 1 and seed_tp in (None, *dims.values()):
                dim = next(iter(dims))
                shard[name] = {dim: tp} if tp > 1 else {}
            else:
                shard[name] = dict(dims)
    if layer.attention_op in ops:
        heads, batch = space.value(genome, f"{layer.layer_type}.attn")
        # a socket holding a group of query heads holds their KV heads (as op_shard does)
        kv = math.gcd(heads, layer.kv_heads) if layer.kv_heads > 1 else 1
        dims = {k: v for k, v in (("heads", heads), ("kv_heads", kv), ("batch", batch)) if v > 1}
        shard[layer.attention_op] = dims
    return shard


def _kernel_name(layer: LayerSpace, ops: list[str]) -> str:
    """The seed kernel's name if the ops are exactly one; else the names it touches."""
    touched: list[int] = []
    for k, seed_kernel in enumerate(layer.seed_kernels):
        if any(n in seed_kernel.ops for n in ops):
            touched.append(k)
    names = [layer.seed_kernels[k].kernel for k in touched]
    whole = all(all(n in ops for n in layer.seed_kernels[k].ops) for k in touched)
    if whole:
        return "+".join(names)
    return f"{'+'.join(names)}[{ops[0]}..{ops[-1]}]"


def load_candidate(seed: LoadedMapping, data: dict[str, Any]) -> LoadedMapping:
    """A candidate document validated against the schema, sharing the seed's model and node."""
    document = Document(path=seed.document.path, data=data, lines={})
    return LoadedMapping(validate_mapping(document), seed.model, seed.system, document)


def layer_types(loaded: LoadedMapping) -> dict[str, int]:
    """Layer types of the phase (with KV-policy variants) and how many layers each."""
    return layer_counts(loaded.model, loaded.spec.kv_policy, loaded.spec.phase, head=HEAD in loaded.spec.layers)
