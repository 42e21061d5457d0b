"""The serving document (``kind: serving``): a deployment of nodes that serves requests.

Owns: ``ServingSpec`` and its parts, the shape and single-field rules of a serving YAML.
Imports: schema (``Spec``), quantity. Rules that need the mappings it names (the two
policies agree, the decode batch buckets fit HBM) live in ``rdusim.analysis.serving.deployment``.

A deployment is either **disaggregated** (``prefill.nodes`` nodes run prompts at batch 1
and ship the KV cache over ``interconnect`` to ``decode.nodes`` nodes that run decode steps
with continuous batching) or **co-located** (one pool of ``decode.nodes`` nodes runs both
phases; nothing crosses the interconnect).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from rdusim.config.quantity import BytesPerS, Seconds
from rdusim.config.schema import MAX_TOKENS, Spec

#: nodes of one pool: the request engine keeps a process and a queue per node, and a
#: deployment of this size is far past any published one (SN40L racks of 16 sockets)
MAX_NODES = 4096
#: points of a step-time grid: each is a run of the kernel simulator (~0.1-1 s)
MAX_GRID_POINTS = 64
#: the largest compiled decode batch: the decode table simulates every power of two up to it
MAX_BATCH = 2**20

Layout = Literal["disaggregated", "colocated"]
Scheduling = Literal["fcfs", "shortest_prompt_first"]


def _token_grid(grid: list[int] | None) -> list[int] | None:
    """A step-time grid: strictly increasing token counts in [1, MAX_TOKENS]."""
    if grid is not None and (any(not 0 < g <= MAX_TOKENS for g in grid) or sorted(set(grid)) != grid):
        shown = grid if len(grid) <= 8 else [*grid[:8], "..."]
        raise ValueError(f"must be strictly increasing token counts in [1, {MAX_TOKENS}], got {shown}")
    return grid


class ServingPrefillSpec(Spec):
    mapping: str = Field(description="prefill mapping YAML, relative to this file")
    nodes: int | None = Field(default=None, gt=0, le=MAX_NODES, description="prefill nodes (disaggregated only)")
    chunk_tokens: int | None = Field(
        default=None, gt=0, le=MAX_TOKENS,
        description="co-located only: prompt tokens prefilled per decode step (chunked prefill); "
        "default: a whole prompt at batch 1 between two decode steps",
    )
    grid: list[int] | None = Field(
        default=None, min_length=2, max_length=MAX_GRID_POINTS,
        description="prompt lengths simulated for the prefill-time table (default: steps of sqrt(2) "
        "from 1024 to 8192, then powers of two up to decode.max_context)",
    )

    _grid = field_validator("grid")(_token_grid)


class ServingDecodeSpec(Spec):
    mapping: str = Field(description="decode mapping YAML, relative to this file")
    nodes: int = Field(gt=0, le=MAX_NODES, description="decode nodes (co-located: the whole pool)")
    max_context: int | None = Field(
        default=None, gt=0, le=MAX_TOKENS,
        description="longest prompt the deployment accepts, in tokens; the decode graphs are compiled "
        "for it (default: the decode mapping's workload.seq_len)",
    )
    max_batch: int | None = Field(
        default=None, gt=0, le=MAX_BATCH,
        description="largest compiled batch (default: rdusim.mapping.capacity.max_batch at max_context)",
    )
    accepted_tokens_per_step: float | None = Field(
        default=None, ge=1.0, description="multi-token prediction (default: the decode mapping's)",
    )
    kv_grid: list[int] | None = Field(
        default=None, min_length=2, max_length=MAX_GRID_POINTS,
        description="KV lengths simulated for the decode step-time table (default: powers of two "
        "from 1024 to max_context)",
    )

    _grid = field_validator("kv_grid")(_token_grid)


class InterconnectSpec(Spec):
    """The network between nodes that carries the KV cache from prefill to decode."""

    bandwidth_bytes_per_s: BytesPerS = Field(alias="bandwidth", description="per node, into a decode node")
    latency_s: Seconds = Field(alias="latency", description="per transfer (setup + switch)")


class ServingSloSpec(Spec):
    ttft_s: Seconds = Field(alias="ttft", description="time to first token limit")
    tpot_s: Seconds = Field(alias="tpot", description="time per output token limit")


class ServingSpec(Spec):
    kind: Literal["serving"]
    name: str
    layout: Layout = "disaggregated"
    prefill: ServingPrefillSpec
    decode: ServingDecodeSpec
    interconnect: InterconnectSpec | None = None
    scheduling: Scheduling = Field(
        default="fcfs", description="order of each prefill queue: arrival order, or shortest prompt first",
    )
    slo: ServingSloSpec | None = Field(default=None, description="default SLOs for goodput")

    @model_validator(mode="after")
    def _layout_rules(self) -> ServingSpec:
        if self.layout == "disaggregated":
            if self.prefill.nodes is None:
                raise ValueError("a disaggregated deployment needs prefill.nodes")
            if self.interconnect is None:
                raise ValueError("a disaggregated deployment needs an interconnect (bandwidth, latency)")
            if self.prefill.chunk_tokens is not None:
                raise ValueError("prefill.chunk_tokens applies to co-located deployments only "
                                 "(a prefill node runs one prompt at a time)")
        elif self.prefill.nodes is not None:
            raise ValueError("co-located: one pool of decode.nodes nodes runs both phases; "
                             "remove prefill.nodes")
        return self
