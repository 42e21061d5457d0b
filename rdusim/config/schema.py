"""Frozen pydantic models, one per YAML document kind: socket, node, model, mapping.

Owns: the shape and single-field rules of every YAML document. Imports: quantity, errors.
Rules that span documents (a degree divides a model dimension, a kernel fits in SRAM)
live in ``rdusim.mapping.build``. Field names carry their SI unit; the YAML keys (aliases)
are short and carry the unit in the value instead (``bandwidth: "1.6 TB/s"``).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rdusim.config.quantity import Bytes, BytesPerS, Delay, FlopPerS, Hertz, Reserve, Seconds
from rdusim.kv_policy import (
    DEFAULT_POOL,
    DEFAULT_SINK,
    DEFAULT_TOPK_SHARE,
    DEFAULT_WINDOW,
    KASCADE_FRACTION,
    KASCADE_MINIMUM,
    POLICY_NAMES,
    RING_BUFFER,
)

OP_CLASSES = ("gemm", "attention", "elementwise", "sort", "collective")
OpClass = Literal["gemm", "attention", "elementwise", "sort", "collective"]
Phase = Literal["prefill", "decode"]


class Spec(BaseModel):
    """Base of every document: frozen, unknown keys rejected, YAML keys by alias, numbers finite."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be empty")
    return text


#: integers and reals exactly as YAML wrote them: ``true`` is not 1, ``"4"`` is not 4
Int = Annotated[int, Strict()]
Real = Annotated[float, Strict()]
#: a name or path: text that is not empty or blank
Name = Annotated[str, Strict(), AfterValidator(_not_blank)]
#: a parallel degree in a ``shard:`` entry
Degree = Annotated[int, Strict(), Field(gt=0)]
#: the largest node the simulator builds (its socket graph is explicit: n^2 links all-to-all);
#: published SN40L deployments use 8-16 sockets (hardware-and-models.md section A)
MAX_SOCKETS = 1024
#: the most PCUs, PMUs or tiles a socket may have: the plan hands out PCUs one at a time
#: (``mapping.stages.balance_pcus``) and places buffers PMU by PMU; an SN40L has 1040 of each
MAX_UNITS = 65536
#: the longest sequence, in tokens, of any document or request (a workload's seq_len, a
#: serving file's max_context and grids, a request's prompt or output): 16M, beyond the
#: longest published context windows (10M tokens); token counts stay exact in float64
#: products with bytes per token, and a sampled length never overflows int64
MAX_TOKENS = 2**24
#: the deepest model the simulator takes (it lists every layer; published LLMs have up to ~130)
MAX_LAYERS = 1024


Fraction = Field(gt=0.0, le=1.0)


# --------------------------------------------------------------------------- hardware
class ComputeSpec(Spec):
    peak_flops_per_s: FlopPerS = Field(alias="peak", description="dense BF16 matrix peak")
    simd_ops_per_s: FlopPerS = Field(
        alias="simd_peak", description="element operations per second on the PCU SIMD lanes"
    )
    pcus: Int = Field(gt=0, le=MAX_UNITS)
    pmus: Int = Field(gt=0, le=MAX_UNITS)
    tiles: Int = Field(gt=0, le=MAX_UNITS)
    clock_hz: Hertz = Field(alias="clock")


class MemoryTierSpec(Spec):
    capacity_bytes: Bytes = Field(alias="capacity")
    bandwidth_bytes_per_s: BytesPerS = Field(alias="bandwidth")
    efficiency: Real = Field(default=1.0, gt=0.0, le=1.0)


class MemorySpec(Spec):
    sram: MemoryTierSpec
    hbm: MemoryTierSpec
    ddr: MemoryTierSpec


class LinkSpec(Spec):
    bandwidth_bytes_per_s: BytesPerS = Field(alias="bandwidth", description="per direction")
    latency_s: Delay = Field(alias="latency")


class EfficiencySpec(Spec):
    """Achieved fraction of peak per operation class, each in (0, 1] (see calibration)."""

    gemm: Real = Fraction
    attention: Real = Fraction
    elementwise: Real = Fraction
    sort: Real = Fraction
    collective: Real = Fraction


class KernelLaunchSpec(Spec):
    """What a kernel call costs before it computes, per orchestration mode (R1 section VI-A)."""

    hardware_s: Delay = Field(alias="hardware", description="AGCU-orchestrated launch")
    software_s: Delay = Field(alias="software", description="host-orchestrated call (runtime, sync)")


#: a socket's memory tiers (the keys of its ``memory`` section); code names them by these
SRAM, HBM, DDR = "sram", "hbm", "ddr"
MEMORY_TIERS = (SRAM, HBM, DDR)
#: off-chip tiers: where weights live and what kernels stream from
OFF_CHIP_TIERS = (HBM, DDR)

Orchestration = Literal["hardware", "software"]
#: decode model choices the sources do not settle (docs/calibration.md, "Decode cost structure")
ExpertWeights = Literal["routed", "all"]
AttentionSplit = Literal["keys", "sequence", "heads"]


class SocketSpec(Spec):
    kind: Literal["socket"]
    name: Name
    compute: ComputeSpec
    memory: MemorySpec
    p2p: LinkSpec
    kernel_launch: KernelLaunchSpec
    efficiency: EfficiencySpec


class NodeSpec(Spec):
    kind: Literal["node"]
    name: Name
    socket: Name = Field(description="path of the socket YAML, relative to this file")
    sockets: Int = Field(gt=0, le=MAX_SOCKETS)
    sockets_per_module: Int = Field(default=1, gt=0)
    topology: Literal["all_to_all", "ring"] = "all_to_all"

    @model_validator(mode="after")
    def _modules_divide(self) -> NodeSpec:
        if self.sockets % self.sockets_per_module:
            raise ValueError(
                f"sockets_per_module={self.sockets_per_module} does not divide "
                f"sockets={self.sockets}"
            )
        return self


# ------------------------------------------------------------------------------ model
class MlaSpec(Spec):
    kind: Literal["mla"]
    heads: Int = Field(gt=0)
    q_lora_rank: Int = Field(gt=0)
    kv_lora_rank: Int = Field(gt=0)
    qk_nope_head_dim: Int = Field(gt=0)
    qk_rope_head_dim: Int = Field(gt=0)
    v_head_dim: Int = Field(gt=0)


class GqaSpec(Spec):
    kind: Literal["gqa"]
    heads: Int = Field(gt=0)
    kv_heads: Int = Field(gt=0)
    head_dim: Int = Field(gt=0)
    qk_norm: Annotated[bool, Strict()] = Field(
        default=False,
        description="an RMSNorm over head_dim on each query and key head before the rotary embedding "
                    "(Qwen3's q_norm and k_norm)")

    @model_validator(mode="after")
    def _group_divides(self) -> GqaSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads={self.kv_heads} does not divide heads={self.heads}")
        return self


class MoeSpec(Spec):
    experts: Int = Field(gt=0)
    experts_per_token: Int = Field(gt=0)
    shared_experts: Int = Field(ge=0)
    intermediate: Int = Field(gt=0)

    @model_validator(mode="after")
    def _routed_fit(self) -> MoeSpec:
        if self.experts_per_token > self.experts:
            raise ValueError(f"experts_per_token={self.experts_per_token} exceeds experts={self.experts}")
        return self


class FfnSpec(Spec):
    intermediate: Int = Field(gt=0, description="dense SwiGLU width")
    first_dense_layers: Int = Field(ge=0)
    moe: MoeSpec | None = None


DtypeName = Literal["fp8", "bf16", "fp16", "fp32"]
DTYPE_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4}


class DtypeSpec(Spec):
    weights: DtypeName = "bf16"
    activations: DtypeName = "bf16"
    kv: DtypeName = "bf16"


class ModelSpec(Spec):
    kind: Literal["model"]
    name: Name
    layers: Int = Field(gt=0, le=MAX_LAYERS)
    hidden: Int = Field(gt=0)
    vocab: Int = Field(gt=0)
    attention: MlaSpec | GqaSpec = Field(discriminator="kind")
    ffn: FfnSpec
    dtypes: DtypeSpec = DtypeSpec()
    mtp_layers: Int = Field(default=0, ge=0, le=MAX_LAYERS)
    tied_embeddings: Annotated[bool, Strict()] = Field(
        default=False, alias="tie_word_embeddings",
        description="config.json tie_word_embeddings: the output head reuses the embedding matrix")
    max_context: Int | None = Field(
        default=None, gt=0, alias="max_position_embeddings",
        description="longest sequence the model was trained for; longer prompts are refused",
    )

    @property
    def qk_norm(self) -> bool:
        """Each query and key head normalised before the rotary embedding (a GQA card's ``attention.qk_norm``)."""
        return isinstance(self.attention, GqaSpec) and self.attention.qk_norm

    @model_validator(mode="after")
    def _dense_layers_fit(self) -> ModelSpec:
        if self.ffn.first_dense_layers > self.layers:
            raise ValueError(
                f"ffn.first_dense_layers={self.ffn.first_dense_layers} exceeds layers={self.layers}"
            )
        if self.ffn.moe is None and self.ffn.first_dense_layers != self.layers:
            raise ValueError("a model without ffn.moe must have first_dense_layers == layers")
        return self


# ---------------------------------------------------------------------------- mapping
#: the most draft tokens a speculative step proposes (R4 studies k up to 9; serving stacks use <= 10)
MAX_DRAFT_TOKENS = 64


class WorkloadSpec(Spec):
    seq_len: Int = Field(gt=0, description="prompt length in tokens")
    batch: Int = Field(default=1, gt=0)
    routing: Literal["expected", "sampled"] = "expected"
    seed: Int = Field(default=0, ge=0, description="seed of sampled routing")
    accepted_tokens_per_step: Real = Field(
        default=1.0, ge=1.0, le=MAX_DRAFT_TOKENS + 1,  # a step yields at most its proposals + 1
        description="multi-token prediction: tokens accepted per decode step"
    )


class KvPolicySpec(Spec):
    name: Name = "full"
    compression: Real = Field(default=1.0, ge=1.0, description="prompt tokens per kept slot")
    # defaults and size rules: rdusim.kv_policy (shared with rdusim.kernels)
    sink: Int = Field(default=DEFAULT_SINK, ge=0, description="attention-sink slots (SnapStream, StreamingLLM)")
    window: Int = Field(default=DEFAULT_WINDOW, ge=1, description="SnapKV observation window")
    pool: Int = Field(default=DEFAULT_POOL, ge=1, description="SnapKV pooling kernel (odd)")
    topk_share: Real = Field(default=DEFAULT_TOPK_SHARE, ge=0.0, lt=1.0,
                              description="SnapStream: share of the slots for SnapKV's top-K; the ring has the rest")
    anchors: Int | None = Field(default=None, gt=0, description="Kascade anchor layers (default: 5 per 32 layers)")
    topk_fraction: Real = Field(default=KASCADE_FRACTION, gt=0.0, le=1.0,
                                 description="Kascade top-k fraction of the keys")
    topk_min: Int = Field(default=KASCADE_MINIMUM, gt=0, description="Kascade minimum top-k")
    kv_update: Literal["ring", "naive"] = Field(
        default="ring", description="SnapStream/StreamingLLM decode cache update: 'ring' writes the new "
        "token into its fixed slot (one scatter, methods.md section 1); 'naive' rebuilds [sink | recent | "
        "top-K] every step: both candidate caches built from slices, concatenated, one selected per sample")

    @field_validator("name")
    @classmethod
    def _known_policy(cls, name: str) -> str:
        if name not in POLICY_NAMES:
            raise ValueError(f"unknown KV policy {name!r}; known: {', '.join(POLICY_NAMES)}")
        return name

    @model_validator(mode="after")
    def _update_needs_a_ring(self) -> KvPolicySpec:
        if self.kv_update == "naive" and self.name not in RING_BUFFER:
            raise ValueError(f"kv_update 'naive' applies to snapstream and streamingllm, not {self.name!r}")
        return self

    @field_validator("pool")
    @classmethod
    def _odd_pool(cls, pool: int) -> int:
        if pool % 2 == 0:
            raise ValueError(f"pool must be odd (average pooling keeps the length), got {pool}")
        return pool


class KernelSpec(Spec):
    kernel: Name = Field(description="fused kernel name, e.g. 'MHA'")
    ops: list[Name] = Field(min_length=1)
    tp: Int | None = Field(default=None, gt=0)
    dp: Int | None = Field(default=None, gt=0)
    chunk_tokens: Int | None = Field(default=None, gt=0)
    max_chunks: Int | None = Field(default=None, gt=0, description="cap on chunks (rows per chunk grow)")
    kv_block_tokens: Int | None = Field(default=None, gt=0)
    buffer_depth: Int | None = Field(default=None, gt=0)
    weights: Literal["hbm", "ddr"] | None = None
    orchestration: Orchestration | None = None
    expert_weights: ExpertWeights | None = None
    attention_split: AttentionSplit | None = None
    shard: dict[Name, dict[Name, Degree]] = Field(
        default_factory=dict,
        description="per-op degrees by dimension, e.g. {attention: {batch: 16}}; replaces tp/dp for that op",
    )


class MappingDefaultsSpec(Spec):
    tp: Int = Field(default=1, gt=0)
    dp: Int = Field(default=1, gt=0)
    chunk_tokens: Int = Field(default=4096, gt=0)
    max_chunks: Int | None = Field(default=None, gt=0)
    kv_block_tokens: Int = Field(default=8192, gt=0)
    buffer_depth: Int = Field(default=2, gt=0)
    weights: Literal["hbm", "ddr"] = "hbm"
    orchestration: Orchestration = "hardware"
    kernel_looping: bool = Field(
        default=False, description="consecutive calls of a layer's only kernel are one call with a "
        "pipelined outer loop (R3): one launch, no sync between iterations, next weights prefetched")
    expert_weights: ExpertWeights = Field(
        default="routed", description="routed experts' weights a step reads: 'routed' (only the experts "
        "the batch's tokens pick) or 'all' (a static graph streams every expert every step)")
    attention_split: AttentionSplit = Field(
        default="keys", description="decode attention: 'keys' streams each sequence's cache in K/V blocks "
        "(online softmax / flash-decoding, a combine per block); 'sequence': the softmax reduction over a "
        "sequence's whole cache is not split, so its whole cache is loaded on chip before it computes "
        "(sequences overlap one another); 'heads': as 'sequence', and each (sequence, query, head) is one "
        "instance on one PCU")


class DeploymentSpec(Spec):
    """What a decode node reserves HBM for besides its batch (docs/calibration.md, "Capacity")."""

    max_prompt: Int | None = Field(
        default=None, gt=0, description="longest prompt the server admits; it reserves for that prompt, "
        "not for the current request (default: the workload's prompt length)")
    prefill: Literal["colocated", "remote"] = Field(
        default="colocated", description="'colocated': the prefill mapping named by 'prefill' runs on this "
        "node and keeps what it holds for one max_prompt prompt free; 'remote': prefill runs on another node "
        "and ships the compressed cache over (methods.md: 'transferred to the decoding node'), so one "
        "incoming compressed cache is reserved")
    prefill_reserve_bytes: Reserve | None = Field(
        default=None, alias="prefill_reserve", description="a co-located prefill's reserve per socket, stated "
        "instead of derived from the 'prefill' mapping (e.g. a measured figure)")
    runtime_reserve_bytes: Reserve = Field(
        default=0.0, alias="runtime_reserve", description="HBM the runtime keeps (programs, buffers); "
        "no public figure, 0 by default (sensitivity in docs/calibration.md)")


#: ``speculative.draft`` naming the target's own multi-token-prediction module (self-speculation)
MTP_DRAFT = "mtp"


class AcceptanceSpec(Spec):
    """Per-token acceptance of draft tokens (the closed form in ``rdusim.model.speculative``)."""

    rate: Real = Field(ge=0.0, le=1.0, description="probability that the target accepts a draft token, "
                       "given it accepted the ones before it")
    source: Name = Field(description="the public measurement the rate comes from (a citation), never a "
                         "number chosen to hit a figure")


class SpeculativeSpec(Spec):
    """Speculative decoding: a draft model proposes ``k`` tokens, the target verifies ``k + 1`` at once."""

    draft: Name = Field(description="draft model: a model document name (e.g. llama-3.2-1b) or path, "
                        "or 'mtp' for the target's own multi-token-prediction module")
    mapping: Name | None = Field(
        default=None, description="the draft's decode mapping (relative to this file); default: derived "
        "from this mapping's kernels on the same node")
    k: Int = Field(ge=0, le=MAX_DRAFT_TOKENS, description="draft tokens per step")
    acceptance: AcceptanceSpec

    @model_validator(mode="after")
    def _mtp_has_no_mapping(self) -> SpeculativeSpec:
        if self.draft == MTP_DRAFT and self.mapping is not None:
            raise ValueError("draft 'mtp' runs the target's own MTP module; it takes no mapping")
        return self


class MappingSpec(Spec):
    kind: Literal["mapping"]
    name: Name
    model: Name
    hardware: Name = Field(description="node YAML path, relative to this file")
    phase: Phase
    workload: WorkloadSpec
    kv_policy: KvPolicySpec = KvPolicySpec()
    defaults: MappingDefaultsSpec = MappingDefaultsSpec()
    layers: dict[Name, list[KernelSpec]] = Field(min_length=1)
    deployment: DeploymentSpec = DeploymentSpec()
    prefill: Name | None = Field(
        default=None,
        description="decode only: the prefill mapping that shares the node (continuous batching); "
        "HBM keeps its peak activations for the same prompt length free",
    )
    speculative: SpeculativeSpec | None = Field(
        default=None, description="decode only: speculative decoding (docs/speculative.md)")

    @field_validator("prefill")
    @classmethod
    def _prefill_only_for_decode(cls, prefill: str | None, info: ValidationInfo) -> str | None:
        if prefill is not None and info.data.get("phase") == "prefill":
            raise ValueError("only a decode mapping names the prefill mapping it shares the node with")
        return prefill

    @model_validator(mode="after")
    def _deployment_admits_the_prompt(self) -> MappingSpec:
        if "deployment" in self.model_fields_set and self.phase != "decode":
            raise ValueError("deployment applies to decode mappings (what a decode node reserves)")
        longest = self.deployment.max_prompt
        if longest is not None and self.workload.seq_len > longest:
            raise ValueError(f"workload.seq_len={self.workload.seq_len} exceeds deployment.max_prompt={longest}: "
                             "the deployment does not admit this prompt (raise deployment.max_prompt)")
        return self

# ------------------------------------------------------------------------ GPU targets
# A GPU is a different kind of machine: one kernel at a time across its SMs, library
# kernels (GEMMs, FlashAttention) rather than a spatial pipeline. Its documents are kinds
# of their own so nothing SN40L-specific (PCUs, PMUs, SRAM tiers) has to be faked.
# the quantity types are positive and finite by construction (config.quantity); Delay may be 0
PositiveFlopPerS = FlopPerS
PositiveBytesPerS = BytesPerS
PositiveBytes = Bytes
NonNegativeSeconds = Delay


class GpuTensorPeakSpec(Spec):
    """Dense tensor-core peak per dtype (the datasheet's, without sparsity)."""

    bf16_flops_per_s: PositiveFlopPerS = Field(alias="bf16")
    fp8_flops_per_s: PositiveFlopPerS = Field(alias="fp8")


#: the most SMs a GPU document may have: the GPU engine places CTAs SM by SM (a streaming
#: kernel launches 16 per SM), so time grows with SMs; an H100 has 132 (hardware-and-models.md
#: section D.1), and 1024 SMs runs a step in ~1 s
MAX_SMS = 1024
#: the most GPUs of one NVLink node (the same bound as an SN40L node's sockets, MAX_SOCKETS);
#: the shipped nodes have 8
MAX_GPUS = MAX_SOCKETS


class GpuComputeSpec(Spec):
    sms: Int = Field(gt=0, le=MAX_SMS, description="streaming multiprocessors")
    clock_hz: Annotated[Hertz, Field(gt=0)] = Field(alias="clock")
    tensor_peak: GpuTensorPeakSpec
    fp32_flops_per_s: PositiveFlopPerS = Field(alias="fp32_peak", description="non-tensor FP32")
    sfu_per_s: PositiveFlopPerS | None = Field(
        default=None, alias="sfu_peak",
        description="special-function (exp2) evaluations per second, whole GPU (none: not a limit)")


class GpuMemorySpec(Spec):
    hbm_capacity_bytes: PositiveBytes = Field(alias="hbm_capacity")
    hbm_bytes_per_s: PositiveBytesPerS = Field(alias="hbm_bandwidth")
    l2_bytes: PositiveBytes = Field(alias="l2")
    shared_per_sm_bytes: PositiveBytes = Field(alias="shared_per_sm")
    hbm_latency_s: NonNegativeSeconds = Field(alias="hbm_latency", description="one dependent DRAM round trip")
    l2_bytes_per_s: PositiveBytesPerS | None = Field(
        default=None, alias="l2_bandwidth",
        description="L2 -> SM bandwidth that GEMM operand panels are read at (none: not a limit)")
    shared_bytes_per_s: PositiveBytesPerS | None = Field(
        default=None, alias="shared_bandwidth",
        description="shared memory -> registers, all SMs together (none: not a limit)")
    l2_latency_s: NonNegativeSeconds | None = Field(
        default=None, alias="l2_latency",
        description="one dependent load that hits L2 (a step's activations: none: hbm_latency)")


class GpuRingSpec(Spec):
    """NCCL's ring channels for a ring Simple collective simulated channel by channel
    (``rdusim.sim.ring``; docs/gpu.md, "A ring's channels in the engine")."""

    channels: int = Field(ge=1, le=64, description="NCCL's ring channels (its INIT log: 'N coll channels')")
    channel_bytes_per_s: PositiveBytesPerS = Field(
        alias="channel_bandwidth", description="one channel's loads plus stores per second (one CTA)")
    link_bytes_per_s: PositiveBytesPerS = Field(
        alias="link_bandwidth", description="the NVLink the channels' sends share, per direction (to calibrate)")
    launch_skew_s: NonNegativeSeconds = Field(
        alias="launch_skew", description="from the first channel's start to the last's")
    post_s: NonNegativeSeconds = Field(
        default=0.0, alias="post",
        description="a slice's post after its bytes on NVLink (system fence, flag store), one channel; 0: none")
    post_per_channel_s: NonNegativeSeconds = Field(
        default=0.0, alias="post_per_channel", description="what each further channel adds to a post")


class GpuP2pSpec(Spec):
    """What one p2p channel that both sends and receives does, for an all-to-all simulated channel by
    channel (``rdusim.sim.p2p``; docs/gpu.md, "Runs ch and ci"); the channels sending queue at the link as
    a closed network (``rdusim.hw.closed_network``; docs/gpu.md, "Run dj")."""

    send_bytes_per_s: PositiveBytesPerS = Field(
        alias="send_bandwidth", description="its send loop's rate onto the peer's FIFO over NVLink (to calibrate)")
    receive_bytes_per_s: PositiveBytesPerS = Field(
        alias="receive_bandwidth", description="its receive loop's rate out of its own FIFO (to calibrate)")
    step_s: NonNegativeSeconds = Field(alias="step", description="a chunk's post after its bytes, fixed (to calibrate)")


class GpuCustomArSpec(Spec):
    """What vLLM's custom all-reduce is made of on this GPU (``rdusim.hw.custom_all_reduce``; docs/gpu.md,
    "vLLM's custom all-reduce")."""

    load_s: Seconds = Field(
        alias="load", description="a lone block's pass, its loads aside: a peer load's round trip and the loop's own "
        "work (to calibrate)")
    per_load_s: Seconds = Field(
        alias="per_load", description="what each 16-byte load a thread keeps in flight adds to a lone block's pass, "
        "one load a peer (to calibrate)")
    flag_s: Seconds = Field(alias="flag", description="a flag store's way to a peer over NVLink (half a ping-pong round)")
    read_bytes_per_s: PositiveBytesPerS = Field(
        alias="read_bandwidth", description="the NVLink a GPU's reads from its peers come in on (to calibrate)")
    kernel_s: Seconds = Field(alias="kernel", description="the kernel's own fixed time, its barriers aside (to calibrate)")
    fence_s: NonNegativeSeconds = Field(
        default=0.0, alias="fence", description="a release barrier's system fence, one block fencing (the two-stage "
        "kernel's middle barrier); 0: none")
    fence_per_block_s: NonNegativeSeconds = Field(
        default=0.0, alias="fence_per_block", description="what each further block fencing at once adds to it")


class GpuLinkSpec(Spec):
    """A GPU's NVLinks: the line rate, and what NCCL's collectives get of it
    (``rdusim.hw.collectives``; the two "to calibrate" quantities of docs/gpu.md)."""

    bandwidth_bytes_per_s: PositiveBytesPerS = Field(alias="bandwidth", description="line rate per direction")
    bus_bytes_per_s: PositiveBytesPerS = Field(
        alias="bus_bandwidth", description="NCCL's achieved bus bandwidth per GPU, per direction (to calibrate)")
    latency_scale: float = Field(gt=0.0, le=10.0, description="multiplies NCCL's latency table (to calibrate; 1 = NCCL's own)")
    ll_bytes_per_s: PositiveBytesPerS | None = Field(
        default=None, alias="ll_bandwidth",
        description="the LL protocol's bandwidth on one node as the NCCL version in use gives it (tuning.cc "
                    "llMaxBws; none: v2.19-2.20's 87.7 GB/s cap and its shares of the bus)")
    p2p_ll_channel_bytes_per_s: PositiveBytesPerS | None = Field(
        default=None, alias="p2p_ll_channel_bandwidth",
        description="one p2p channel's LL rate: an all-to-all's LL moves its wire bytes at no more than its channels "
                    "(NCCL's rule: one each 8 KiB of a peer's part) times it (to calibrate; none: the LL rate alone)")
    ring: GpuRingSpec | None = Field(
        default=None, description="a ring Simple collective channel by channel (none: its wire bytes at the bus rate)")
    p2p: GpuP2pSpec | None = Field(
        default=None, description="an all-to-all's p2p Simple channels one by one, on ring's link (none: its wire "
                                  "bytes at the bus rate)")
    custom_all_reduce: GpuCustomArSpec | None = Field(
        default=None, description="vLLM's custom all-reduce, block by block (none: a mapping's "
                                  "all_reduce_kernel: custom is refused)")

    @model_validator(mode="after")
    def _p2p_needs_the_rings_link(self) -> GpuLinkSpec:
        if self.p2p is not None and self.ring is None:
            raise ValueError("p2p needs ring (its link_bandwidth and launch_skew are the p2p channels' too)")
        return self

    @model_validator(mode="after")
    def _bus_within_line_rate(self) -> GpuLinkSpec:
        ring_link = None if self.ring is None else self.ring.link_bytes_per_s
        for key, rate in (("bus_bandwidth", self.bus_bytes_per_s), ("ll_bandwidth", self.ll_bytes_per_s),
                          ("ring.link_bandwidth", ring_link),
                          ("p2p_ll_channel_bandwidth", self.p2p_ll_channel_bytes_per_s)):
            if rate is not None and rate > self.bandwidth_bytes_per_s:
                raise ValueError(f"{key} ({rate / 1e9:g} GB/s) exceeds the line rate "
                                 f"bandwidth ({self.bandwidth_bytes_per_s / 1e9:g} GB/s)")
        return self


#: PyTorch eager ops whose host cost a GPU document may give (``launch.eager_ops``), as the
#: dispatch microbenchmark of benchmarks/gpu/sweep.py names them
HOST_OPS = ("gemm", "view", "transpose", "slice", "reshape_view", "elementwise_add", "elementwise_mul",
            "elementwise_neg", "silu", "cat", "index_copy", "rms_norm", "embedding", "sdpa")

#: keys a document of an earlier version may still carry, and what took their place (the loader says so
#: instead of "unknown key")
RETIRED_KEYS = {
    "eager_ops_idle": "retired: a call costs the host the same whatever the GPU's backlog; give "
                      "launch.eager_sequence, a step's calls over their loops (docs/gpu.md, \"Run dq\")",
}


class CollectiveHostSpec(Spec):
    """Host cost of one torch.distributed collective call, calls issued back to back: all four
    collectives (a section, so a misspelt or missing one is located at its own key)."""

    all_reduce: NonNegativeSeconds
    all_gather: NonNegativeSeconds
    reduce_scatter: NonNegativeSeconds
    all_to_all: NonNegativeSeconds


#: torch.distributed collectives whose per-call host cost a GPU document may give
#: (``launch.collective_host``): the collectives of ``rdusim.hw.collectives.OPS``
COLLECTIVE_HOST_OPS = tuple(CollectiveHostSpec.model_fields)


class GpuLaunchSpec(Spec):
    """What one kernel costs before its CTAs run, by how it is launched."""

    stream_s: NonNegativeSeconds = Field(alias="stream", description="one kernel timed alone on a stream")
    graph_s: NonNegativeSeconds = Field(alias="graph", description="per kernel inside a CUDA graph")
    eager_host_s: NonNegativeSeconds = Field(alias="eager_host", description="host dispatch per eager op")
    pipeline_s: NonNegativeSeconds = Field(
        alias="pipeline", description="fixed cost of a tensor-core kernel: pipeline prologue, epilogue, grid drain")
    gemm_pipeline_s: NonNegativeSeconds | None = Field(
        default=None, alias="gemm_pipeline",
        description="the same for a GEMM kernel of cuBLAS (none: pipeline)")
    gemm_step_s: NonNegativeSeconds = Field(
        default=0.0, alias="gemm_step",
        description="a GEMM CTA's per main-loop step cost that its loads and math do not hide (barriers)")
    kernel_fixed_s: NonNegativeSeconds = Field(
        default=0.0, alias="kernel_fixed",
        description="a small kernel's device time beyond its dependent memory round trips (CTA dispatch, "
                    "completion), in a graph or eager step; inside `stream`")
    fa2_split_fixed_s: NonNegativeSeconds | None = Field(
        default=None, alias="fa2_split_fixed",
        description="fixed cost of FlashAttention-2's split-KV kernel (decode with more than one KV split), "
                    "in place of `pipeline`; with fa2_combine_fixed (none: the pair is priced with `pipeline` "
                    "on the split kernel and its combine as one DRAM round trip)")
    fa2_combine_fixed_s: NonNegativeSeconds | None = Field(
        default=None, alias="fa2_combine_fixed",
        description="FlashAttention-2's split-KV combine kernel's fixed cost beyond its chain (`kernel_fixed` "
                    "and 1 + splits L2 round trips); with fa2_split_fixed")
    fa3_tile_s: NonNegativeSeconds | None = Field(
        default=None, alias="fa3_tile",
        description="FlashAttention-3's fixed cost per output tile (its persistent CTAs' per-tile work outside "
                    "the main loop); with efficiency.fa3_pipe_loss")
    eager_ops: dict[str, NonNegativeSeconds] | None = Field(
        default=None, description="host cost of one eager PyTorch op by kind, timed in a loop of its own calls "
                                  "(the GPU's backlog does not change it: run dq)")
    eager_sequence: float | None = Field(
        default=None, gt=0.0,
        description="what a call costs in a step's sequence of different calls over its cost in a loop of its "
                    "own (a decode layer's calls in forward order against the same calls' loops); with eager_ops")
    queue_depth: int | None = Field(
        default=None, gt=0, description="kernels the host can queue before a launch blocks")
    collective_host: CollectiveHostSpec | None = Field(
        default=None, description="host cost of one torch.distributed collective call by collective, "
                                  "calls issued back to back; all four or none (none: eager_host)")
    eager_gap_s: NonNegativeSeconds = Field(
        default=0.0, alias="eager_gap",
        description="per kernel an eager step's GPU runs from the host's launch queue (stream-launched "
                    "kernels back to back): the gap between kernels, as `graph` is inside a graph")
    graph_event_pair_s: NonNegativeSeconds = Field(
        default=0.0, alias="graph_event_pair",
        description="one external event wait + record node pair in a CUDA graph (what NCCL adds to a "
                    "captured collective)")

    @model_validator(mode="after")
    def _known_ops(self) -> GpuLaunchSpec:
        if (self.fa2_split_fixed_s is None) != (self.fa2_combine_fixed_s is None):
            raise ValueError("fa2_split_fixed and fa2_combine_fixed go together (FA2's split-KV pair)")
        if (self.eager_ops is None) != (self.eager_sequence is None):
            raise ValueError("eager_ops and eager_sequence go together (a call's cost in a loop, and in a step)")
        ops = self.eager_ops or {}
        for op in ops:
            if op not in HOST_OPS:
                close = difflib.get_close_matches(op, HOST_OPS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"eager_ops: unknown op {op!r}{hint} (known: {', '.join(HOST_OPS)})")
        missing = [op for op in HOST_OPS if op not in ops]
        if ops and missing:
            raise ValueError(f"eager_ops: missing {', '.join(missing)}")
        return self


class GpuEfficiencySpec(Spec):
    """Achieved fractions of peak of the library kernels' inner loops, each in (0, 1]."""

    hbm_stream: float = Field(gt=0.0, le=1.0, description="streaming kernels' share of HBM peak")
    gemm_tensor: float = Field(gt=0.0, le=1.0, description="a full wave of GEMM tiles' share of tensor peak")
    gemm_stream: float | None = Field(
        default=None, gt=0.0, le=1.0,
        description="a GEMM's operand stream's share of HBM peak (TMA tile loads; none: hbm_stream)")
    gemm_flush_writeback: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="a GEMM timed alone after a flush (stream launch): the share of L2's capacity its reads "
                    "evict and write back, charged as that many more bytes of its stream (none: 0)")
    gemm_stream_clean: float | None = Field(
        default=None, gt=0.0, le=1.0,
        description="a GEMM's operand stream inside a step (graph, eager), where L2 holds no dirty lines "
                    "for its reads to write back (none: gemm_stream)")
    strided_stream: float | None = Field(
        default=None, gt=0.0, le=1.0,
        description="PyTorch's non-vectorised elementwise path (an operand not contiguous) as a share of "
                    "HBM peak (none: hbm_stream)")
    attention_tensor: float = Field(gt=0.0, le=1.0, description="FlashAttention-2 main loop's share of tensor peak")
    attention_overlap: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="share of the shorter of a FlashAttention-2 CTA's MMA time and its shared-memory operand "
                    "reads that the SM overlaps with the other (0: in series)")
    mla_tensor: float = Field(gt=0.0, le=1.0, description="FlashMLA decode main loop's share of tensor peak")
    fa3_pipe_loss: float | None = Field(
        default=None, ge=0.0, lt=1.0,
        description="FlashAttention-3 (Hopper): the busy share its bottleneck pipe (tensor or XU) loses when the "
                    "MMAs and the exponentials of a tile take equal time at peak; at a ratio rho (shorter over "
                    "longer) the bottleneck is busy 1 - fa3_pipe_loss x rho^2 of the main loop; with launch.fa3_tile "
                    "(none: FA3 not calibrated for this GPU, a mapping's attention_kernel: fa3 is refused)")


class GpuClockAnchorSpec(Spec):
    """One workload of run v: its achieved rate at full clock and the board power it draws there,
    given as the power (a workload under the limit) or as its steady slowdown under the limit
    (full clock over steady clock, >= 1: the power at full clock is then ``idle + (limit - idle) x
    slowdown``, power linear in the clock above idle [A])."""

    rate: float = Field(gt=0.0, description="achieved tensor FLOP/s (memory: DRAM bytes/s) at full clock")
    power_w: float | None = Field(default=None, alias="power", gt=0.0, le=10_000.0,
                                  description="board power at full clock (W), a workload under the limit")
    slowdown: float | None = Field(default=None, ge=1.0, le=10.0,
                                   description="full clock over its steady clock under the limit")

    @model_validator(mode="after")
    def _one(self) -> GpuClockAnchorSpec:
        if (self.power_w is None) == (self.slowdown is None):
            raise ValueError("give exactly one of power and slowdown")
        return self


class GpuClockAttentionAnchorSpec(GpuClockAnchorSpec):
    """An FA2 prefill workload of run v: an anchor with the causal length it ran at."""

    tokens: Int = Field(gt=0, description="the causal length of the workload (its key span)")


def _anchor_power_in_range(name: str, anchor: GpuClockAnchorSpec, info: ValidationInfo) -> None:
    idle, limit = info.data.get("idle_w"), info.data.get("power_limit_w")
    if anchor.power_w is None or idle is None or limit is None:
        return  # power not given, or idle / limit already refused
    if not idle < anchor.power_w <= limit:
        raise ValueError(f"{name}: power ({anchor.power_w:g} W) must lie above idle ({idle:g} W) and at most "
                         f"power_limit ({limit:g} W) (over the limit: give slowdown)")


class GpuClockSpec(Spec):
    """The SM clock under the board power limit (docs/gpu.md, "The SM clock under sustained load").

    A per-GPU controller (``rdusim.hw.gpu_clock``): a running average of the power the kernels
    would draw at full clock (time constant ``fall_window`` while that power is above the
    average, ``rise_window`` while it is below) sets the clock at ``(limit - idle) / (average -
    idle)`` of full, at most full; a kernel's time follows the clock per class (``rise_rate`` and
    ``power_exponent``: the opt-in second controller, ``SlewSmClock``). Each rule that
    spans keys is checked at the later key (``idle`` against ``power_limit``, an anchor's power
    against both), so an error names the line it is about."""

    power_limit_w: float = Field(alias="power_limit", gt=0.0, le=10_000.0, description="board power limit (W)")
    idle_w: float = Field(alias="idle", gt=0.0, le=10_000.0, description="power with no kernel running (W)")
    fall_window_s: Seconds = Field(alias="fall_window", description="time constant of the average while the power is above it")
    rise_window_s: Seconds = Field(alias="rise_window", description="time constant of the average while the power is below it")
    gemm_knee: float = Field(gt=0.0, le=1.0, description="clock (share of full) under which a GEMM goes as 1/f")
    memory: GpuClockAnchorSpec = Field(description="a streaming copy (rate: DRAM bytes/s)")
    gemm: GpuClockAnchorSpec = Field(description="the reference GEMM (rate: tensor FLOP/s)")
    attention: list[GpuClockAttentionAnchorSpec] = Field(min_length=1, description="FA2 prefill anchors, by tokens")
    rise_rate: float | None = Field(
        default=None, gt=0.0, le=1000.0,
        description="the second controller (SlewSmClock): how fast the clock rises, share of full per second")
    power_exponent: float = Field(
        default=1.0, ge=1.0, le=4.0,
        description="the second controller (SlewSmClock): power above idle goes as clock^power_exponent")

    @field_validator("idle_w")
    @classmethod
    def _under_limit(cls, idle: float, info: ValidationInfo) -> float:
        limit = info.data.get("power_limit_w")
        if limit is not None and not idle < limit:
            raise ValueError(f"idle ({idle:g} W) must be under power_limit ({limit:g} W)")
        return idle

    @field_validator("memory", "gemm")
    @classmethod
    def _anchor(cls, anchor: GpuClockAnchorSpec, info: ValidationInfo) -> GpuClockAnchorSpec:
        _anchor_power_in_range(info.field_name or "", anchor, info)
        return anchor

    @field_validator("attention")
    @classmethod
    def _attention(cls, anchors: list[GpuClockAttentionAnchorSpec], info: ValidationInfo,
                   ) -> list[GpuClockAttentionAnchorSpec]:
        for i, a in enumerate(anchors):
            _anchor_power_in_range(f"attention[{i}] (tokens {a.tokens})", a, info)
        tokens = [a.tokens for a in anchors]
        if tokens != sorted(set(tokens)):
            raise ValueError(f"anchors need tokens in increasing order, got {tokens}")
        return anchors


class GpuSpec(Spec):
    kind: Literal["gpu"]
    name: str
    compute: GpuComputeSpec
    memory: GpuMemorySpec
    nvlink: GpuLinkSpec
    launch: GpuLaunchSpec
    efficiency: GpuEfficiencySpec
    clock: GpuClockSpec | None = Field(
        default=None, description="the SM clock under the board power limit (none: always full clock)")

    @model_validator(mode="after")
    def _fa3_pair(self) -> GpuSpec:
        if (self.efficiency.fa3_pipe_loss is None) != (self.launch.fa3_tile_s is None):
            raise ValueError("efficiency.fa3_pipe_loss and launch.fa3_tile go together (FlashAttention-3's fit)")
        return self


class GpuNodeSpec(Spec):
    kind: Literal["gpu_node"]
    name: str
    gpu: str = Field(description="path of the gpu YAML, relative to this file")
    gpus: Int = Field(gt=0, le=MAX_GPUS)
    topology: Literal["nvswitch"] = "nvswitch"
    nvls: Annotated[bool, Strict()] = Field(
        default=False, description="the NVSwitch reduces in the switch (NVLink SHARP): NCCL's NVLS algorithm")


LaunchMode = Literal["graph", "eager", "stream"]
GPU_LIBRARY_KERNELS = (
    "embedding", "rms_norm", "qkv_gemm", "qk_norm", "rope", "kv_append", "attention", "o_gemm",
    "residual_add", "gate_up_gemm", "silu_mul", "down_gemm", "all_reduce", "lm_head", "logits_gather",
)


class GpuMappingSpec(Spec):
    """A model on a GPU (or GPU node, tensor parallel): the library kernels of each layer."""

    kind: Literal["gpu_mapping"]
    name: str
    model: str
    hardware: str = Field(description="gpu or gpu_node YAML path, relative to this file")
    phase: Phase
    launch: LaunchMode = "graph"
    clock: Literal["full", "sustained"] = Field(
        default="full", description="the SM clock: full (the default), or sustained: the step run back to back "
        "from an idle GPU until the power-limited clock settles (the GPU document's clock section; GQA models)")
    tp: Int = Field(default=1, gt=0, le=MAX_GPUS, description="GPUs of one replica (the group its collectives span)")
    attention: Literal["tp", "dp"] = Field(
        default="tp", description="MLA + MoE models: heads split over the replica's GPUs (tp), or each GPU "
        "its own sequences and their KV with the routed experts expert-parallel over all-to-all (dp)")
    attention_kernel: Literal["fa2", "fa3"] = Field(
        default="fa2", description="the attention's library: FlashAttention-2 (fa2: what PyTorch's SDPA runs, the "
        "measured harness's) or FlashAttention-3 (fa3: Hopper, what vLLM runs there; prefill, and a GQA model's "
        "decode; a GPU document with efficiency.fa3_pipe_loss)")
    all_reduce_kernel: Literal["nccl", "custom"] = Field(
        default="nccl", description="the tensor-parallel all-reduce's library: NCCL (nccl: the measured harness's, "
        "torch.distributed) or vLLM's custom all-reduce (custom: its one- or two-stage kernel where vLLM runs it, "
        "on 2/4/6/8 GPUs under 8 MiB, NCCL otherwise; a GPU document with nvlink.custom_all_reduce)")
    workload: WorkloadSpec
    kv_policy: KvPolicySpec = KvPolicySpec()
    layer: list[str] = Field(default_factory=list, description="GQA models: library kernels of one decoder "
                             "layer, in order (MLA + MoE models take theirs from rdusim.mapping.gpu_mla)")
    head: list[str] = Field(default_factory=list, description="kernels before/after the layers")

    @field_validator("layer", "head")
    @classmethod
    def _known_kernels(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in GPU_LIBRARY_KERNELS:
                close = difflib.get_close_matches(name, GPU_LIBRARY_KERNELS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown library kernel {name!r}{hint} "
                                 f"(known: {', '.join(GPU_LIBRARY_KERNELS)})")
        return names
