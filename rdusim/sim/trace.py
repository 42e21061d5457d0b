"""Trace records: the only contract between the simulator and the analysis layer.

Owns: ``TraceEvent``, ``KernelRecord``, ``Trace``. Imports: nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TraceEvent:
    """One busy interval of a resource: a stage computing an item, or a transfer."""

    socket: int
    track: str          # "compute:<stage>", "hbm", "ddr", "p2p"
    name: str
    kernel: str
    layer: int
    start_s: float
    end_s: float
    nbytes: float = 0.0
    work: float = 0.0


@dataclass(frozen=True)
class KernelRecord:
    """One kernel call on the node: from launch to the barrier after its last write."""

    kernel: str
    layer_type: str
    layer: int
    start_s: float
    end_s: float
    launch_sync_s: float                 # its launch + the barrier after it (0 inside a looped call)
    stage_busy_s: dict[str, float]       # compute busy time per stage (socket 0)
    stage_pcus: dict[str, int]
    pool_busy_s: dict[str, float]        # per pool kind, socket 0, within the kernel
    pool_bytes: dict[str, float]


@dataclass(frozen=True)
class Trace:
    kernels: tuple[KernelRecord, ...]
    events: tuple[TraceEvent, ...] = ()
    sockets_simulated: int = 1
    layers_simulated: int = 0
    event_count: int = 0
    layer_multiplier: dict[int, int] = field(default_factory=dict)
