"""What one socket does for one fused kernel: the contract between mapping and simulator.

Owns: ``Item``, ``Chunk``, ``Stage``, ``KernelPlan``, ``Plan``, ``chunks_work``. Imports: model, hw,
config, summation, numpy.

A fused kernel is a spatial pipeline of stages (one per op or inserted collective). Each
stage processes the kernel's chunks in order; a chunk is a list of items (an attention
K/V block, one expert's weights, or the whole chunk), each with bytes to load from a
memory tier and work to compute. Loads run ahead of compute (bounded by the buffer
depth), so overlap, fill and drain come out of the simulation, not out of this plan.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rdusim.config.schema import MappingSpec, ModelSpec
from rdusim.hw.system import System
from rdusim.model.ops import Op
from rdusim.summation import add_in_order

_WORK = operator.attrgetter("work")
_ZERO = np.zeros(1)   # a running total's start
_FEW_ITEMS = 512      # ``chunks_work`` over fewer items: a loop (numpy's calls cost more)


@dataclass(frozen=True)
class Item:
    work: float                              # FLOPs (matrix classes) or element ops
    loads: tuple[tuple[str, float], ...] = ()  # (tier, bytes) read before computing


@dataclass(frozen=True)
class Chunk:
    items: tuple[Item, ...]
    p2p_bytes: float = 0.0                   # egress bytes sent after the items
    p2p_steps: int = 0                       # latency steps of that send
    stores: tuple[tuple[str, float], ...] = ()  # (tier, bytes) written after the items


def chunks_work(chunks: Sequence[Chunk]) -> float:
    """The items' work added item after item in plan order, left to right: the same bits on every
    Python (``sum`` of floats compensates its rounding since Python 3.12). A loop over a few
    items; over many, ``np.add.accumulate`` (one addition after another, unlike ``np.sum``) over
    each chunk object's works, made once (chunks repeat as the same objects)."""
    if sum(len(c.items) for c in chunks) <= _FEW_ITEMS:
        total = 0.0
        for chunk in chunks:
            for item in chunk.items:
                total += item.work
        return total
    works: dict[int, np.ndarray] = {}
    parts = [_ZERO]
    for chunk in chunks:
        found = works.get(id(chunk))
        if found is None:
            found = works[id(chunk)] = np.fromiter(map(_WORK, chunk.items), float, len(chunk.items))
        parts.append(found)
    return float(np.add.accumulate(np.concatenate(parts))[-1])


@dataclass(frozen=True)
class Stage:
    name: str
    op_class: str
    pcus: int                                # PCUs allocated (0 for collectives)
    rate_ops_per_s: float                    # achievable rate of this stage's allocation
    inputs: tuple[str, ...]                  # upstream stages of the same kernel
    chunks: tuple[Chunk, ...]
    op: Op | None = None                     # None for an inserted collective
    shard: dict[str, int] = field(default_factory=dict)
    is_barrier: bool = False                 # waits for every input chunk before computing
    loads_follow_inputs: bool = False        # which bytes to load is known only once the chunk's
                                             # inputs arrive (routed experts picked in this kernel)

    @property
    def work(self) -> float:
        return chunks_work(self.chunks)

    def load_bytes(self, tier: str) -> float:
        return add_in_order(b for c in self.chunks for i in c.items for t, b in i.loads if t == tier)

    def store_bytes(self, tier: str) -> float:
        return add_in_order(b for c in self.chunks for t, b in c.stores if t == tier)

    @property
    def p2p_bytes(self) -> float:
        return add_in_order(c.p2p_bytes for c in self.chunks)


@dataclass(frozen=True)
class KernelPlan:
    name: str
    layer_type: str
    stages: tuple[Stage, ...]
    sram_bytes: float                        # working set per socket
    chunk_tokens: int
    weights_tier: str                        # where its weights live: "hbm" or "ddr"
    buffer_depth: int = 2
    orchestration: str = "hardware"
    stage_sram: tuple[tuple[str, float], ...] = ()  # on-chip bytes per stage (sums to sram_bytes)

    @property
    def n_chunks(self) -> int:
        return len(self.stages[0].chunks)


@dataclass(frozen=True)
class Plan:
    """A validated mapping, ready to simulate: per layer type, its kernels for one socket."""

    mapping: MappingSpec
    model: ModelSpec
    system: System
    layer_counts: dict[str, int]
    kernels: dict[str, tuple[KernelPlan, ...]]
    seq_len: int
    batch: int
    kv_len: int
    activation_peak_bytes: dict[str, float] = field(default_factory=dict)  # per layer type, per socket
    speculative: SpeculativePlan | None = None  # decode with a draft: this plan is the verification

    @property
    def phase(self) -> str:
        return self.mapping.phase

    def every_kernel(self) -> dict[tuple[str, str], KernelPlan]:
        """Every kernel a step runs by (layer type, name): the plan's, and a speculative draft's."""
        plans = [self] if self.speculative is None or self.speculative.draft is None else [self, self.speculative.draft]
        return {(k.layer_type, k.name): k for p in plans for ks in p.kernels.values() for k in ks}


#: the prefix of a draft's layer types (``draft dense``): its kernels are rows of their own
DRAFT_PREFIX = "draft "


@dataclass(frozen=True)
class SpeculativePlan:
    """A speculative decode step: ``k`` steps of the ``draft`` plan, then the target's plan
    verifying ``k + 1`` tokens per sequence; ``accepted`` tokens per step (the acceptance model).
    ``self_draft``: the target's own MTP module drafts (its weights and KV cache are the target's
    MTP layer's, counted with the target's memory, not again as a draft's)."""

    draft: Plan | None
    k: int
    rate: float
    accepted: float
    self_draft: bool = False
