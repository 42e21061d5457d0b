"""GPU hardware as data: one GPU's rates and a node of GPUs joined by NVLink/NVSwitch.

Owns: ``Gpu``, ``GpuNode``, ``load_gpu_node``. Imports: config, errors, hw.collectives. Never
simulates.

Rates are *achievable*: datasheet peak times the efficiency the GPU document gives (each
efficiency is fitted to the calibration set of ``benchmarks/gpu`` or cited). The engine
(``rdusim.sim.gpu``) shares HBM among resident CTAs and the tensor rate per SM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rdusim.config.loader import check_kind, load_any, load_spec, read_document
from rdusim.config.schema import COLLECTIVE_HOST_OPS, GpuSpec
from rdusim.errors import ConfigError
from rdusim.hw.collectives import Fabric, P2pChannels, RingChannels
from rdusim.hw.custom_all_reduce import CustomArLink


@dataclass(frozen=True)
class Gpu:
    """One GPU; ``nvls`` when it sits in a node whose NVSwitch reduces (the node document's);
    ``all_reduce`` the library a mapping runs its all-reduces with (``nccl``, or ``custom``: vLLM's
    kernel where vLLM would run it, ``rdusim.hw.custom_all_reduce``)."""

    spec: GpuSpec
    nvls: bool = False
    all_reduce: str = "nccl"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def sms(self) -> int:
        return self.spec.compute.sms

    @property
    def hbm_bytes_per_s(self) -> float:
        """Achievable HBM bandwidth of a streaming kernel that occupies every SM."""
        return self.spec.memory.hbm_bytes_per_s * self.spec.efficiency.hbm_stream

    @property
    def gemm_stream_derate(self) -> float:
        """A GEMM's operand stream's HBM rate as a share of a streaming kernel's (<= 1 slows it)."""
        eff = self.spec.efficiency
        return 1.0 if eff.gemm_stream is None else eff.gemm_stream / eff.hbm_stream

    def gemm_stream_derate_in(self, mode: str) -> float:
        """``gemm_stream_derate`` for a GEMM launched in ``mode``: inside a step (graph, eager) the
        clean-L2 rate (``efficiency.gemm_stream_clean``) where the document gives one."""
        eff = self.spec.efficiency
        if mode in ("graph", "eager") and eff.gemm_stream_clean is not None:
            return eff.gemm_stream_clean / eff.hbm_stream
        return self.gemm_stream_derate

    def gemm_kernel_derate(self, nbytes: float, mode: str) -> float:
        """The share of a streaming kernel's HBM rate that a GEMM moving ``nbytes`` reaches over its
        whole run. Timed alone (``stream``), after measure.py's flush has left L2 full of dirty lines,
        its reads evict min(``nbytes``, L2) of them and the write-backs cost the stream
        ``efficiency.gemm_flush_writeback`` of those bytes: a bounded cost, where a derate alone
        grows with the weight. Inside a step (graph, eager) no flush precedes it."""
        derate = self.gemm_stream_derate_in(mode)
        share = self.spec.efficiency.gemm_flush_writeback
        if mode != "stream" or not share or nbytes <= 0:
            return derate
        return derate * nbytes / (nbytes + share * min(nbytes, self.l2_capacity_bytes))

    @property
    def strided_stream_derate(self) -> float:
        """PyTorch's non-vectorised elementwise kernels' HBM rate as a share of a streaming kernel's."""
        eff = self.spec.efficiency
        return 1.0 if eff.strided_stream is None else eff.strided_stream / eff.hbm_stream

    @property
    def hbm_latency_s(self) -> float:
        """A CTA's first bytes arrive one DRAM round trip after it starts."""
        return float(self.spec.memory.hbm_latency_s)

    @property
    def l2_latency_s(self) -> float:
        """One dependent load that hits L2 (``memory.l2_latency``; else a DRAM round trip)."""
        lat = self.spec.memory.l2_latency_s
        return self.hbm_latency_s if lat is None else float(lat)

    @property
    def attention_overlap(self) -> float:
        """Share of min(MMA time, shared-memory read time) of a FlashAttention CTA hidden under the
        other (``efficiency.attention_overlap``; 0: the two in series)."""
        return float(self.spec.efficiency.attention_overlap)

    @property
    def has_fa3(self) -> bool:
        """Whether the document calibrates FlashAttention-3 (``efficiency.fa3_pipe_loss`` and
        ``launch.fa3_tile``)."""
        return self.spec.efficiency.fa3_pipe_loss is not None

    def fa3_pipe_busy(self, rho: float) -> float:
        """The busy share of a FlashAttention-3 main loop's bottleneck pipe when the other pipe's
        work is ``rho`` (0-1) of its own, both at peak: ``1 - efficiency.fa3_pipe_loss x rho^2``
        (the pipe law of runs bo and bp, docs/gpu.md; 1 where the document has no FA3 constants)."""
        return 1.0 - float(self.spec.efficiency.fa3_pipe_loss or 0.0) * rho * rho

    @property
    def kernel_fixed_s(self) -> float:
        """A small kernel's device time beyond its round trips, in a graph or eager step."""
        return float(self.spec.launch.kernel_fixed_s)

    @property
    def l2_bytes_per_s(self) -> float | None:
        """L2 -> SM bandwidth at which GEMM CTAs read their operand panels (None: no limit)."""
        rate = self.spec.memory.l2_bytes_per_s
        return None if rate is None else float(rate)

    @property
    def l2_capacity_bytes(self) -> float:
        return float(self.spec.memory.l2_bytes)

    @property
    def fp32_flops_per_s(self) -> float:
        """Non-tensor FP32 peak, whole GPU (an FMA counts two)."""
        return float(self.spec.compute.fp32_flops_per_s)

    @property
    def sfu_per_s(self) -> float | None:
        """Special-function (exp2) evaluations per second, whole GPU (None: not a limit)."""
        rate = self.spec.compute.sfu_per_s
        return None if rate is None else float(rate)

    @property
    def shared_bytes_per_s(self) -> float | None:
        """Shared memory -> register bandwidth, whole GPU (None: not a limit)."""
        rate = self.spec.memory.shared_bytes_per_s
        return None if rate is None else float(rate)

    @property
    def hbm_capacity_bytes(self) -> float:
        return float(self.spec.memory.hbm_capacity_bytes)

    def tensor_peak_flops_per_s(self, dtype: str = "bf16") -> float:
        """The tensor cores' dense peak, whole GPU (``compute.tensor_peak``)."""
        return float(getattr(self.spec.compute.tensor_peak, f"{dtype}_flops_per_s"))

    def math_flops_per_s(self, math: str, dtype: str = "bf16") -> float:
        """Achievable tensor rate of a kernel class ("gemm", "attention", "mla" or "fa3") on the whole
        GPU. FlashAttention-3 issues the same ``wgmma`` as a cuBLAS GEMM on the same SMs: the GEMMs'
        share (``gemm_tensor``)."""
        peak = self.tensor_peak_flops_per_s(dtype)
        eff = self.spec.efficiency
        return peak * {"gemm": eff.gemm_tensor, "attention": eff.attention_tensor, "mla": eff.mla_tensor,
                       "fa3": eff.gemm_tensor}[math]

    def launch_s(self, mode: str) -> float:
        """Per-kernel cost before the CTAs run: ``stream`` (timed alone), ``graph`` (a graph node's
        device gap), ``eager`` (the host's cost of one eager launch, ``launch.eager_host``: the
        host side), ``eager_gap`` (the device gap of a kernel an eager step's GPU takes from the
        launch queue, as ``graph`` is a graph's: the device side), ``graph_event_pair``,
        ``pipeline``, the fixed cost every tensor-core kernel adds (``gemm_pipeline`` for a cuBLAS
        GEMM, where the GPU document gives one), ``fa2_split`` and ``fa2_combine`` (FA2's split-KV
        kernel's fixed cost and its combine's beyond its chain: ``fa2_split_fixed`` and
        ``fa2_combine_fixed``, where the document gives them; else ``pipeline`` and 0), and
        ``gemm_step``, ``fa3_tile`` (FlashAttention-3's fixed cost per output tile; 0 where the
        document has none)."""
        launch = self.spec.launch
        gemm = launch.pipeline_s if launch.gemm_pipeline_s is None else launch.gemm_pipeline_s
        split = launch.pipeline_s if launch.fa2_split_fixed_s is None else launch.fa2_split_fixed_s
        return {"stream": launch.stream_s, "graph": launch.graph_s, "eager": launch.eager_host_s,
                "pipeline": launch.pipeline_s, "gemm_pipeline": gemm, "gemm_step": launch.gemm_step_s,
                "fa2_split": split, "fa2_combine": launch.fa2_combine_fixed_s or 0.0,
                "graph_event_pair": launch.graph_event_pair_s, "eager_gap": launch.eager_gap_s,
                "fa3_tile": launch.fa3_tile_s or 0.0}[mode]

    @property
    def fa2_pair_calibrated(self) -> bool:
        """Whether the document gives FA2's split-KV pair its own fixed times (``launch.fa2_split_fixed``
        and ``launch.fa2_combine_fixed``): then the combine is priced as its chain."""
        return self.spec.launch.fa2_split_fixed_s is not None

    def host_op_s(self, op: str) -> float:
        """Host cost of one eager PyTorch op of kind ``op`` (``HOST_OPS``) inside a step: the GPU
        document's per-op cost (timed in a loop of its own calls) times ``eager_sequence`` (a call
        among different calls costs more than in its loop), whatever the GPU's backlog (run dq:
        docs/gpu.md, "Run dq"); else ``eager_host``. A collective (``COLLECTIVE_HOST_OPS``) costs
        its ``collective_host`` (calls back to back: docs/gpu.md, "Collectives"), else ``eager_host``."""
        launch = self.spec.launch
        if op in COLLECTIVE_HOST_OPS:
            host = launch.collective_host
            return launch.eager_host_s if host is None else float(getattr(host, op))
        if launch.eager_ops is None or launch.eager_sequence is None:
            return launch.eager_host_s
        return float(launch.eager_ops[op]) * launch.eager_sequence

    def prices_host_ops(self, ops: Sequence[str]) -> bool:
        """True when the GPU document gives a host cost for every op of ``ops``: a collective's in
        ``launch.collective_host``, a PyTorch op's in ``launch.eager_ops`` (each independent of
        the other); else the engine charges the kernel's launches at ``eager_host``."""
        launch = self.spec.launch
        return all((launch.collective_host if op in COLLECTIVE_HOST_OPS else launch.eager_ops) is not None
                   for op in ops)

    @property
    def queue_depth(self) -> int | None:
        """Kernels the host can queue ahead of the GPU before a launch blocks (None: no limit)."""
        return self.spec.launch.queue_depth

    @property
    def has_custom_all_reduce(self) -> bool:
        """Whether the document describes vLLM's custom all-reduce (``nvlink.custom_all_reduce``)."""
        return self.spec.nvlink.custom_all_reduce is not None

    @property
    def fabric(self) -> Fabric:
        """The NVLink fabric NCCL's collectives run on (``rdusim.hw.collectives``), with vLLM's custom
        all-reduce where ``all_reduce`` is ``custom`` and the document describes it."""
        link = self.spec.nvlink
        ll = None if link.ll_bytes_per_s is None else float(link.ll_bytes_per_s)
        ring = p2p = None
        if link.ring is not None:
            ring = RingChannels(link.ring.channels, float(link.ring.channel_bytes_per_s),
                                float(link.ring.link_bytes_per_s), float(link.ring.launch_skew_s),
                                float(link.ring.post_s), float(link.ring.post_per_channel_s))
        if link.p2p is not None:
            p2p = P2pChannels(float(link.p2p.send_bytes_per_s), float(link.p2p.receive_bytes_per_s),
                              float(link.p2p.step_s))
        custom = None
        car = link.custom_all_reduce
        if self.all_reduce == "custom" and car is not None:
            custom = CustomArLink(float(car.load_s), float(car.per_load_s), float(car.flag_s),
                                  float(car.read_bytes_per_s), float(car.kernel_s), float(car.fence_s),
                                  float(car.fence_per_block_s))
        ll_channel = None if link.p2p_ll_channel_bytes_per_s is None else float(link.p2p_ll_channel_bytes_per_s)
        return Fabric(float(link.bus_bytes_per_s), link.latency_scale, self.nvls, ll, ring, p2p, custom, ll_channel)


@dataclass(frozen=True)
class GpuNode:
    """``gpus`` identical GPUs behind an NVSwitch (all-to-all at full NVLink bandwidth)."""

    name: str
    gpu: Gpu
    gpus: int
    source: Path | None = None


def load_gpu_node(path: str | Path, what: str = "") -> GpuNode:
    """Load a ``gpu`` document (a node of one) or a ``gpu_node`` document and its GPU
    (``what``: the option or key that named it, for messages)."""
    path = Path(path)
    check_kind(path, ("gpu", "gpu_node"), what or "a GPU hardware path", given_by=what)
    spec = load_any(path)
    if isinstance(spec, GpuSpec):
        return GpuNode(spec.name, Gpu(spec), 1, path)
    gpu_path = (path.parent / spec.gpu).resolve()
    if not gpu_path.is_file():
        line = read_document(path).lines.get(("gpu",), 1)
        raise ConfigError(f"{path}:{line}: gpu: file {spec.gpu!r} not found (looked in {gpu_path})")
    return GpuNode(spec.name, Gpu(load_spec(gpu_path, GpuSpec), nvls=spec.nvls), spec.gpus, path)


def is_gpu_document(path: str | Path) -> bool:
    """True if ``path`` is a gpu or gpu_node document (without validating the rest)."""
    kind = read_document(Path(path)).data.get("kind") if Path(path).is_file() else None
    return kind in ("gpu", "gpu_node")
