"""Hardware as data: a node of identical sockets and the rates derived from its specs.

Owns: ``Socket``, ``System``, ``load_system``. Imports: config, link. Never simulates.
Rates here are *achievable*: peak times the efficiency of the operation class (calibrated)
or of the memory tier (cited), so the simulator and the analytical estimator share them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rdusim.config.loader import read_document, validate
from rdusim.config.schema import NodeSpec, SocketSpec
from rdusim.hw.link import latency_steps

#: operation classes that run on the systolic arrays; the others run on the SIMD lanes
MATRIX_CLASSES = ("gemm", "attention")


@dataclass(frozen=True)
class Socket:
    spec: SocketSpec

    @property
    def pcus(self) -> int:
        return self.spec.compute.pcus

    def peak_ops_per_s(self, op_class: str) -> float:
        """Peak rate of an operation class on the whole socket (FLOP/s or element ops/s)."""
        c = self.spec.compute
        return c.peak_flops_per_s if op_class in MATRIX_CLASSES else c.simd_ops_per_s

    def achievable_ops_per_s(self, op_class: str) -> float:
        return self.peak_ops_per_s(op_class) * self.efficiency(op_class)

    def efficiency(self, op_class: str) -> float:
        return float(getattr(self.spec.efficiency, op_class))

    def tier_bytes_per_s(self, tier: str) -> float:
        """Achievable bandwidth of a memory tier (peak x cited efficiency)."""
        t = getattr(self.spec.memory, tier)
        return t.bandwidth_bytes_per_s * t.efficiency

    def tier_peak_bytes_per_s(self, tier: str) -> float:
        return float(getattr(self.spec.memory, tier).bandwidth_bytes_per_s)

    def capacity_bytes(self, tier: str) -> float:
        return float(getattr(self.spec.memory, tier).capacity_bytes)

    @property
    def p2p_bytes_per_s(self) -> float:
        """Achievable P2P egress (per direction): link bandwidth x collective efficiency."""
        return self.spec.p2p.bandwidth_bytes_per_s * self.efficiency("collective")

    @property
    def p2p_latency_s(self) -> float:
        return self.spec.p2p.latency_s

    def launch_s(self, orchestration: str) -> float:
        """What a kernel call costs before it computes, under hardware or software orchestration."""
        launch = self.spec.kernel_launch
        return launch.hardware_s if orchestration == "hardware" else launch.software_s


@dataclass(frozen=True)
class System:
    """A node: ``sockets`` identical sockets joined by P2P links in ``topology``."""

    name: str
    node: NodeSpec
    socket: Socket
    source: Path | None = None

    @property
    def sockets(self) -> int:
        return self.node.sockets

    def collective_steps(self, group: int) -> int:
        """Latency steps of one collective phase among ``group`` sockets."""
        return latency_steps(self.node.topology, group)

    @property
    def sync_s(self) -> float:
        """The barrier that ends every kernel call: one collective latency step among all sockets.

        With ``Socket.launch_s`` this is the whole fixed cost of a kernel call; the engine
        and the analytical estimator both charge it from here.
        """
        return self.socket.p2p_latency_s * self.collective_steps(self.sockets)

    def with_efficiency(self, **efficiency: float) -> System:
        """A copy with some operation-class efficiencies replaced (used by calibration)."""
        eff = self.socket.spec.efficiency.model_copy(update=efficiency)
        spec = self.socket.spec.model_copy(update={"efficiency": eff})
        return System(self.name, self.node, Socket(spec), self.source)

    def with_software_launch(self, seconds: float) -> System:
        """A copy with another software-orchestrated call cost (used by calibration)."""
        launch = self.socket.spec.kernel_launch.model_copy(update={"software_s": seconds})
        spec = self.socket.spec.model_copy(update={"kernel_launch": launch})
        return System(self.name, self.node, Socket(spec), self.source)


def load_system(path: str | Path, what: str = "") -> System:
    """Load a node YAML (and the socket YAML it names) into a ``System``.

    ``what`` locates the key or option that named the node file, for its errors.
    """
    path = Path(path)
    document = read_document(path, what)
    node = validate(document, NodeSpec)
    socket_path = Path(os.path.normpath(path.parent / node.socket))  # lexical: a NUL byte stays an error
    socket = Socket(validate(read_document(socket_path, f"{document.where(('socket',))}: socket"), SocketSpec))
    return System(node.name, node, socket, path)
