"""On-chip memory per PMU: each stage's buffers allocated onto whole PMUs.

Owns: ``StageSram``, ``OnChip``, ``pmu_allocation``. Imports: plan, hw, summation.

A socket has 1040 PMUs of 512 KiB (hardware-and-models.md A.1: R1 Table II; R10/R4 "0.5 MB"
per PMU). A stage's buffers (its resident weights, ``buffer_depth`` streamed items and output
chunks, ``KernelPlan.stage_sram``) go to PMUs of their own: a tensor split along a parallel
dimension is interleaved across as many PMUs as it needs (R1 section IV-B: bank bits for
cross-PMU interleaving), so a stage takes ceil(bytes / 512 KiB) PMUs; an op that cannot be
split along the sequence (decode attention with ``attention_split: sequence``, the naive
SnapStream update's concatenation and selection) holds a whole sequence's operand, which the
plan already counts. A kernel fits when its stages' PMUs fit the socket's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rdusim.config.schema import SRAM
from rdusim.hw.system import Socket
from rdusim.mapping.plan import KernelPlan
from rdusim.summation import add_in_order


@dataclass(frozen=True)
class StageSram:
    stage: str
    bytes: float
    pmus: int


@dataclass(frozen=True)
class OnChip:
    kernel: str
    layer_type: str
    stages: tuple[StageSram, ...]
    pmus_available: int
    pmu_bytes: float

    @property
    def pmus(self) -> int:
        return sum(s.pmus for s in self.stages)

    @property
    def bytes(self) -> float:
        return add_in_order(s.bytes for s in self.stages)

    @property
    def fits(self) -> bool:
        return self.pmus <= self.pmus_available


def pmu_allocation(kernel: KernelPlan, socket: Socket) -> OnChip:
    """PMUs each stage of ``kernel`` occupies on one socket."""
    pmus = socket.spec.compute.pmus
    pmu_bytes = socket.capacity_bytes(SRAM) / pmus
    stages = tuple(StageSram(name, nbytes, math.ceil(nbytes / pmu_bytes)) for name, nbytes in kernel.stage_sram
                   if nbytes > 0)
    return OnChip(kernel.name, kernel.layer_type, stages, pmus, pmu_bytes)
