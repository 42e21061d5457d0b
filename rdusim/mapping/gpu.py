"""GPU library kernels as CTA grids, and the kernels a decoder layer launches on a GPU.

Owns: ``CtaGroup``, ``GpuKernel``, the kernel builders (``gemm``, ``flash_prefill``,
``flash3_prefill``, ``flash_decode``, ``flash3_decode``, ``streaming``, ``collective``, ``all_reduce``),
``fa2_splits``, ``fa3_num_splits`` and ``layer_kernels``. Imports: hw.gpu, hw.collectives, config.schema. Never simulates: the engine
(``rdusim.sim.gpu``) runs the grids.

A kernel is what the library launches: a grid of CTAs in launch order, each with the HBM
bytes it moves and the tensor FLOPs it issues, and how many CTAs fit on one SM. Time comes
out of the engine; here only the structure is decided, from the libraries' own rules:

- GEMM (cuBLAS/CUTLASS on Hopper): output tiles of 128x256 (64x128 when M <= 64), one CTA per
  SM; tiles are padded (tile quantisation); when the tiles do not fill the SMs the K axis is
  split (split-K) and a second kernel reduces the fp32 partials.
- Prefill attention (FlashAttention-2, what ``scaled_dot_product_attention`` runs): one CTA per
  128 query rows per head (64 at head_dim 256); with a causal mask a CTA visits only the keys up
  to its last row; MMAs, softmax exponentials and shared-memory operand reads in series (the
  engine hides ``efficiency.attention_overlap`` of the shorter of MMAs and operand reads); K/V
  re-reads miss L2 once a head's K/V outgrows it (causal), and a tile's first read comes from
  DRAM (``fa2_first_read_share``, ``fa2_dram_tile_wait_s``).
- Prefill attention with FlashAttention-3 (Hopper; what vLLM runs there, a mapping's
  ``attention_kernel: fa3``): one persistent CTA an SM over tiles of 128 (192 at head_dim 64)
  query rows, its main loop the longer of the MMAs (``wgmma``, at the GEMMs' rate) and the
  exponentials over the pipe law's busy share (``efficiency.fa3_pipe_loss``, fitted to Nsight
  Compute counters: ``fit_fa3_pipes``), a fixed cost a tile (``launch.fa3_tile``, fitted to timed
  calls: ``fit_fa3_tile``).
- Decode attention (FlashAttention-2 split-KV): GQA queries of one KV head are packed into the
  row tile (64 rows, padded) over key blocks of 256 / 128 / 64 by head_dim (``fa2_splitkv_block_n``,
  FA2's source); the KV axis is split by FA2's own heuristic (``fa2_splits``) to
  fill 2 CTAs per SM, and a combine kernel merges the partial results; with one split FA2 runs
  its forward kernel, each CTA reading its (sequence, KV head)'s K/V alone from DRAM.
- Decode attention with FlashAttention-3 (``attention_kernel: fa3``, ``flash3_decode``): a prepare
  kernel sets each sequence's KV splits, the persistent forward kernel runs its non-causal tile
  (the query group packed into its rows) over (sequence, KV head, split) tiles by TMA, a combine
  merges the partials (FA3's source; run bt checked it).
- Norms and elementwise kernels stream their bytes with every SM busy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from rdusim.hw.collectives import CollectiveCost, collective_cost, custom_ar_cost
from rdusim.hw.gpu import Gpu
from rdusim.summation import add_in_order

BF16 = 2


@dataclass(frozen=True)
class CtaGroup:
    """``count`` identical CTAs: HBM bytes and tensor FLOPs of each, in ``tiles`` steps of its
    main loop (a K step of a GEMM, a key block of attention): the loads of step j+1 overlap the
    math of step j, so the first load and the last step's math are not hidden."""

    count: int
    bytes: float
    flops: float = 0.0
    tiles: int = 1
    l2_bytes: float = 0.0  # bytes each CTA reads through L2 (GEMM operand panels; 0: not limited)
    sfu: float = 0.0       # special-function evaluations (softmax exponentials) each CTA issues
    smem_bytes: float = 0.0  # bytes each CTA's warps read from shared memory into registers
    stall_s: float = 0.0   # DRAM round trips its main loop waits on without other work to hide them
    prologue_bytes: float = 0.0  # of ``bytes``: read before the main loop starts (FA2's Q tile)
    epilogue_bytes: float = 0.0  # of ``bytes``: written after the main loop ends (FA2's O tile)
    #: of ``bytes``: what a persistent kernel's producer loads for a tile before the tile ahead of it
    #: has stored its output (FA3: Q and the first K block; the rest waits for V's shared memory)
    prefetch_bytes: float = 0.0


@dataclass(frozen=True)
class GpuKernel:
    name: str
    groups: tuple[CtaGroup, ...]
    ctas_per_sm: int
    math: str = "none"          # "gemm", "attention", "mla", "nvlink" or "none" (which rate applies)
    launches: int = 1           # host-side ops this kernel stands for (eager dispatch)
    host_ops: tuple[str, ...] = ()  # the eager PyTorch ops the host dispatches for it (HOST_OPS kinds)
    collective: CollectiveCost | None = None  # math "nvlink": the NCCL collective it runs
    strided: bool = False       # PyTorch's non-vectorised elementwise path (an operand not contiguous)
    #: dependent memory round trips of each kernel this one stands for (one entry per launch; empty:
    #: one DRAM round trip per CTA, the engine's default); ``resident``: its operands are a step's
    #: activations, just written and in L2, so each round trip hits L2 (``memory.l2_latency``)
    round_trips: tuple[int, ...] = ()
    resident: bool = False
    #: of ``round_trips`` (all its launches), those whose load waits on a layer's weight, read once
    #: a forward pass: between two reads the step streams every other weight through L2, so in the
    #: grid's first wave each waits a DRAM round trip even when the kernel is ``resident``; later
    #: waves find the weight in L2 (RMSNorm's second pass, ``rt_rms_norm_weight``)
    cold_round_trips: int = 0
    #: its host cost is in the ``host_ops`` of the kernel before it: launched by the same library
    #: call (cuBLAS's split-K reduction, FA2's split-KV combine) or by one of that kernel's ops
    #: (the lm_head GEMM after the final norm).
    #: Where those ops are priced (``Gpu.prices_host_ops``) an eager host pays nothing more for it:
    #: the site microbenchmark times each call whole, and a call that launched two or three device
    #: operations cost its kind's per-call cost +0.4 to +4.3 us (median of each of runs d-j; H200,
    #: run k: +2.0), not + ``launch.eager_host`` (8 us) a kernel
    #: (benchmarks/gpu/h100-20261125-eager-host-kernels.txt, h200-20261125k-eager-host-kernels.txt)
    host_paid: bool = False
    #: launched by the same library call right behind the kernel before it (cuBLAS's
    #: ``splitKreduce_kernel`` after a ``splitK`` GEMM): it is already in the stream's queue when
    #: that kernel ends, so a kernel timed alone (``stream``) pays no host launch for it, only
    #: the queued kernel's start (``launch.graph``, as a graph node) and its own fixed time
    #: (``launch.kernel_fixed``) and round trips, as in a graph. The reduction ran 1.6-1.9 us of
    #: device time behind a 4.3-7 us split-K GEMM (benchmarks/gpu/h100-20261125-kernels.csv,
    #: h200-20261125k-kernels.csv: DeepSeek-V3's kv_a at m = 1-64), under a timed-alone launch
    #: (``launch.stream``, 4.33 us)
    queued: bool = False
    #: an attention kernel's longest key span (the SM-clock model's power anchor, rdusim.hw.gpu_clock)
    keys: int = 0
    #: the ``Gpu.launch_s`` key of the fixed cost this kernel pays in place of its math class's
    #: (``pipeline`` / ``gemm_pipeline``; none for other classes): FA2's split-KV pair (``flash_decode``)
    fixed: str = ""
    #: a persistent kernel (FA3's forward): one CTA an SM walks the grid's tiles, a producer warp
    #: loading the next tile's operands by TMA while the consumers compute this one, so a tile that
    #: is not its SM's first exposes no DRAM round trip or first load, only its output store
    #: (``rdusim.sim.gpu``, ``_prefetched_bundle``); the grid's CTAs stand for those tiles
    persistent: bool = False

    @property
    def ctas(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def bytes(self) -> float:
        return add_in_order(g.count * g.bytes for g in self.groups)

    @property
    def flops(self) -> float:
        return add_in_order(g.count * g.flops for g in self.groups)


# ------------------------------------------------------------------------------ GEMM
#: smallest K slice a split-K CTA is given: four 64-deep K steps keep its pipeline full
SPLIT_K_MIN_DEPTH = 256
GEMM_K_STEP = 64  # K depth of one main-loop step (one shared-memory stage) of a Hopper GEMM
#: Output tiles cuBLAS 13's Hopper kernels use: the kernel names ``nvjet_sm90_tst_{A}x{B}_64x{stages}_..._TN{T|N}``
#: that cuBLAS launched for 1452 GEMM shapes (benchmarks/gpu/h100-20261125-kernels.csv). A ``TNT``
#: kernel computes C^T = W x^T, a ``TNN`` kernel C = x W^T; in both A runs along n and B along m
#: (run aj's Nsight DRAM bytes and launch grids, benchmarks/gpu/h200-20261128aj-gemm-*). Both
#: orientations of every observed (A, B) are candidates (``GEMM_TILES`` lists (BN, BM)).
_OBSERVED_TILES = (
    (8, 64), (16, 64), (24, 64), (32, 64), (40, 64), (48, 64), (64, 8), (64, 16), (64, 32), (64, 40),
    (64, 64), (72, 64), (80, 64), (80, 128), (88, 64), (88, 128), (96, 64), (96, 128), (112, 64),
    (112, 128), (128, 8), (128, 16), (128, 32), (128, 64), (128, 128), (128, 160), (128, 256),
    (144, 64), (144, 128), (160, 192), (168, 128), (176, 128), (192, 8), (192, 16), (192, 32),
    (192, 64), (192, 128), (192, 192), (224, 64), (224, 128), (256, 8), (256, 16), (256, 32),
    (256, 64), (256, 128), (320, 64), (320, 128), (384, 8), (448, 64), (512, 16), (512, 32),
)
GEMM_TILES = tuple(sorted(set(_OBSERVED_TILES) | {(b, a) for a, b in _OBSERVED_TILES}))
SPLIT_K_MAX = 16
GEMM_CLUSTER = 2  # CTAs of a thread-block cluster sharing one operand panel by TMA multicast
GEMM_TIE = 0.01  # estimates within 1% are equal: the closed form cannot tell them apart


@dataclass(frozen=True)
class GemmPlan:
    """A GEMM's launch: output tile (``bn`` x ``bm``), K splits, CTAs, and the bytes each CTA
    moves from HBM (unique operands, shared through L2) and reads through L2 (its panels)."""

    bn: int
    bm: int
    splits: int
    ctas: int
    k_slice: int
    hbm_bytes: float
    l2_bytes_per_cta: float
    estimate_s: float


def gemm_plan(m: int, n: int, k: int, gpu: Gpu, *, dtype_bytes: int = BF16) -> GemmPlan:
    """The tile and split-K a library heuristic picks: of the candidate tiles (``GEMM_TILE_N`` x
    the two smallest ``GEMM_TILE_M`` that hold ``m``, and the 256 x 128 tile once m >= 256) and
    split counts (while the grid is under one wave and each slice keeps ``SPLIT_K_MIN_DEPTH``),
    the one whose closed-form time is least (``_gemm_estimate``: the larger of HBM bytes, L2
    panel bytes and per-CTA math over whole waves, plus each wave's unhidden per-step cost and
    a split-K reduction). Within
    ``GEMM_TIE`` of the least (a memory-bound GEMM, where many tiles tie), the least padded
    output, then the grid that fills more SMs, then fewer splits."""
    plans = []
    for bn, bm in GEMM_TILES:
        tiles = math.ceil(n / bn) * math.ceil(m / bm)
        for splits in range(1, SPLIT_K_MAX + 1):
            if splits > 1 and (tiles * splits > gpu.sms or k // splits < SPLIT_K_MIN_DEPTH):
                break
            plans.append(_gemm_estimate(m, n, k, bn, bm, splits, gpu, dtype_bytes))
    fastest = min(p.estimate_s for p in plans)
    near = [p for p in plans if p.estimate_s <= fastest * (1 + GEMM_TIE)]
    return min(near, key=lambda p: (p.ctas // p.splits * p.bn * p.bm, -min(p.ctas, gpu.sms), p.splits, -p.bn))


def _gemm_estimate(m: int, n: int, k: int, bn: int, bm: int, splits: int, gpu: Gpu,
                   dtype_bytes: int) -> GemmPlan:
    tiles = math.ceil(n / bn) * math.ceil(m / bm)
    ctas = tiles * splits
    k_slice = math.ceil(k / splits)
    out = m * n * (4 * splits if splits > 1 else dtype_bytes)
    hbm = (m * k + n * k) * dtype_bytes + out  # each operand leaves HBM once (L2 shares panels)
    # the CTA's two operand panels, read through L2; the kernels run in clusters of two CTAs
    # (``_2x1_``/``_1x2_`` in the names) that TMA-multicast the larger panel, so each CTA reads
    # half of it
    l2_cta = (max(bn, bm) / GEMM_CLUSTER + min(bn, bm)) * k_slice * dtype_bytes
    waves = math.ceil(ctas / gpu.sms)
    math_s = waves * 2.0 * bn * bm * k_slice / (gpu.math_flops_per_s("gemm") / gpu.sms)
    l2_rate = gpu.l2_bytes_per_s
    l2_s = ctas * l2_cta / l2_rate if l2_rate else 0.0
    # the operand stream's rate without the harness's flush write-backs (``Gpu.gemm_kernel_derate``
    # charges those in ``stream`` mode only): cuBLAS's heuristic does not see whether L2 is dirty,
    # so the tile it picks is the same in every launch mode
    hbm_s = hbm / (gpu.hbm_bytes_per_s * gpu.gemm_stream_derate)
    # the per-step cost the main loop does not hide is paid once per wave
    est = max(hbm_s, l2_s, math_s) + waves * math.ceil(k_slice / GEMM_K_STEP) * gpu.launch_s("gemm_step")
    # the reduction kernel: a launch and its bytes. The ranking charges a timed-alone launch
    # (``launch.stream``) though the engine runs the reduction as a queued kernel (``GpuKernel.queued``):
    # with the queued kernel's start here too, the model picks cuBLAS's split-K for DeepSeek-V3's
    # kv_a at m = 1-16, but the refit of the GEMM constants it needs moves the graph decode steps
    # the wrong way (docs/gpu.md, "Split-K's reduction is queued"); not adopted
    if splits > 1:
        est += gpu.launch_s("stream") + m * n * (4 * splits + dtype_bytes) / gpu.hbm_bytes_per_s
    return GemmPlan(bn, bm, splits, ctas, k_slice, hbm, l2_cta, est)


def gemm_tile(m: int) -> tuple[int, int]:
    """(BM, BN) of a large GEMM's output tile at ``m`` rows (the old fixed choice; kept for
    callers that size a tile without a GPU)."""
    return (64, 128) if m <= 64 else (128, 256)


def gemm(name: str, m: int, n: int, k: int, gpu: Gpu, *, dtype_bytes: int = BF16) -> list[GpuKernel]:
    """y (M, N) = x (M, K) W^T: the main kernel (``gemm_plan``'s tile and splits), plus a
    split-K reduction when K is split."""
    p = gemm_plan(m, n, k, gpu, dtype_bytes=dtype_bytes)
    steps = math.ceil(p.k_slice / GEMM_K_STEP)
    main = GpuKernel(name, (CtaGroup(p.ctas, p.hbm_bytes / p.ctas, 2.0 * p.bn * p.bm * p.k_slice, steps,
                                     l2_bytes=p.l2_bytes_per_cta),),
                     ctas_per_sm=1, math="gemm")
    if p.splits == 1:
        return [main]
    reduce = streaming(f"{name}.splitk_reduce", m * n * (4 * p.splits + dtype_bytes), gpu,
                       round_trips=(RT_VECTORIZED,), resident=True)
    return [main, replace(reduce, queued=True, host_paid=True)]


# ------------------------------------------------------------------------- attention
FA2_PREFILL_TILE = (128, 64)  # (query rows, key columns) of FA2's hd<=128 forward kernel
FA2_CTAS_PER_SM = 2            # FA2: "multiply number of SMs by 2 ... 128 threads per block"
FA2_WARPS = 4                  # warps per CTA of FA2's forward kernels but hd 192's (the traits' 4th field)
#: FA2's head-dim-192 forward kernel (DeepSeek's MLA prefill: q and k 192 wide, V padded to them):
#: ``run_mha_fwd_hdim192`` without dropout launches ``Flash_fwd_kernel_traits<192, 128, 64, 8>``
#: (flash_fwd_launch_template.h, the same for every architecture), two CTAs to an H100/H200 SM
#: (96 KiB of shared memory each); its name is checked on run bm's profile (docs/gpu.md)
FA2_HD192 = (128, 64, 8)


def fa2_fwd_tile(head_dim: int) -> tuple[int, int]:
    """(query rows, key columns) of the FA2 forward kernel PyTorch runs on Hopper at ``head_dim``:
    the kernel names ``flash_fwd_kernel<Flash_fwd_kernel_traits<hd, rows, cols, 4, ...>>`` in
    benchmarks/gpu/h100-20261125d-kernels.csv read <64, 128, 128, 4>, <128, 128, 64, 4> and
    <256, 64, 64, 4> (FA2's flash_fwd_launch_template.h for sm90, no dropout); head dims 161-192
    run the hd-192 kernel (``FA2_HD192``). Head dims 129-160 and 193-256 take the hd-256 tile here
    (not measured)."""
    if head_dim <= 64:
        return 128, 128
    if head_dim <= 128:
        return FA2_PREFILL_TILE
    if _fa2_hd192(head_dim):
        return FA2_HD192[:2]
    return 64, 64


def fa2_fwd_warps(head_dim: int) -> int:
    """Warps of one CTA of the FA2 forward kernel at ``head_dim`` (``fa2_fwd_tile``'s kernel)."""
    return FA2_HD192[2] if _fa2_hd192(head_dim) else FA2_WARPS


def _fa2_hd192(head_dim: int) -> bool:
    """FA2 rounds head dims of 161-192 up to its hd-192 kernel."""
    return 160 < head_dim <= 192


def l2_hit_fraction(working_set: float, capacity: float) -> float:
    """Share of re-reads that hit in an L2 of ``capacity`` bytes when every access re-reads a line
    last touched one whole ``working_set`` ago (a cyclic sweep), with random replacement: a line
    survives the misses in between with probability ``exp(-misses / lines)``, so the hit share h
    solves ``h = exp(-(W / C) (1 - h))``: 1 while W <= C, then falling smoothly (0.5 at W = 1.39 C,
    0.2 at 2 C). (True LRU would miss every access once W > C; GPU L2s hash addresses over sets and
    do not keep strict LRU order.)"""
    ratio = working_set / capacity
    if ratio <= 1.0:
        return 1.0
    h = 0.0
    for _ in range(200):  # fixed-point iteration from 0 converges to the smaller root
        h = math.exp(-ratio * (1.0 - h))
    return h


def fa2_smem_bytes(rows: int, cols: int, head_dim: int, warps: int = FA2_WARPS) -> float:
    """Shared-memory bytes one FA2 CTA's ``warps`` read per key tile: the warps split the query rows
    and each reads its Q rows (Q stays in shared memory: ``Is_Q_in_regs`` is false) and the whole
    K and V tile for its two MMAs (the probabilities stay in registers)."""
    return (rows * head_dim + warps * 2 * cols * head_dim) * BF16


def flash_prefill(name: str, batch: int, q_heads: int, kv_heads: int, length: int, head_dim: int,
                  gpu: Gpu, *, causal: bool = True, kv_len: int | None = None) -> list[GpuKernel]:
    """FlashAttention-2 forward: one CTA per ``fa2_fwd_tile`` query rows of each (sequence, head),
    its main loop one key tile a step. Per step a CTA issues the tile's two MMAs (tensor FLOPs),
    one exponential per score (``sfu``) and its warps' shared-memory operand reads
    (``fa2_smem_bytes``), charged in series by the engine; Q is read before the loop and O written
    after it. A K or V tile that misses L2 (causal, K/V past L2: see below) comes from HBM, and
    FA2 waits on every tile copy it issued one GEMM earlier (``cp_async_wait<0>``, one tile in
    flight), so each miss also exposes one DRAM round trip (``memory.hbm_latency``) that a hit
    does not (``stall_s``). A tile's first read comes from DRAM too (``fa2_first_read_share``: all
    of them where one CTA reads a KV head alone) and waits ``fa2_dram_tile_wait_s`` more."""
    kv_len = length if kv_len is None else kv_len
    rows, cols = fa2_fwd_tile(head_dim)
    warps = fa2_fwd_warps(head_dim)
    m_blocks = math.ceil(length / rows)
    heads = batch * q_heads
    kv_bytes_per_head = 2 * kv_len * head_dim * BF16 * kv_heads / q_heads  # GQA: shared via L2
    # K/V re-read through L2. FA2's grid runs query blocks fastest (then batch, then head), so the
    # CTAs in flight are consecutive query blocks of one head (of a few heads when a head has fewer
    # blocks than slots) and each walks its keys from its diagonal down to key 0. Causal: CTAs of
    # different lengths drift apart, so their positions spread over the head's whole K/V and each
    # tile is re-read one working set later (``l2_hit_fraction``); the misses come from HBM.
    # Without the mask the CTAs of a wave move in lockstep and read each tile together.
    miss = kv_miss_share(heads, q_heads, kv_heads, m_blocks, FA2_CTAS_PER_SM * gpu.sms,
                         2 * kv_len * head_dim * BF16, gpu, causal)
    groups = []
    tile_keys = [_visible_keys(i, rows, cols, length, kv_len, causal) for i in range(m_blocks)]
    # the first read of each K/V tile comes from DRAM: of the tiles the CTAs of one KV head's group
    # read, the share that are first reads (1 where one CTA reads a KV head alone: a short query
    # block over a long KV); it waits ``fa2_dram_tile_wait_s`` more than an L2 hit
    first = fa2_first_read_share(math.ceil(kv_len / cols), sum(tile_keys) / cols * q_heads / kv_heads)
    for keys in tile_keys:
        flops = 4.0 * rows * head_dim * keys
        nbytes = 2 * rows * head_dim * BF16 + kv_bytes_per_head / m_blocks + miss * 2 * keys * head_dim * BF16
        groups.append(CtaGroup(heads, nbytes, flops, keys // cols, sfu=float(rows * keys),
                               smem_bytes=fa2_smem_bytes(rows, cols, head_dim, warps) * (keys // cols),
                               stall_s=(2 * miss * gpu.hbm_latency_s + first * fa2_dram_tile_wait_s(gpu)) * (keys // cols),
                               prologue_bytes=rows * head_dim * BF16, epilogue_bytes=rows * head_dim * BF16))
    # launch order: block i of every (sequence, head), then block i + 1. FA2's own grid runs the
    # query blocks of one head first (grid(m_blocks, b, h)); in that order the same rows differ by
    # under 2% (tried) and the simulation takes heads-fold longer
    return [GpuKernel(name, tuple(groups), FA2_CTAS_PER_SM, math="attention", keys=kv_len)]


def kv_miss_share(heads: int, q_heads: int, kv_heads: int, m_blocks: int, slots: int, kv_head_bytes: float,
                  gpu: Gpu, causal: bool) -> float:
    """Share of a causal prefill's K/V tile re-reads that miss L2 (``flash_prefill``'s comment):
    the ``slots`` CTAs in flight hold consecutive query blocks of a few of the ``heads`` (sequence,
    query head) pairs, so their working set is those heads' KV heads (``kv_head_bytes`` of K and V
    each); without the mask the CTAs read each tile together and nothing misses."""
    if not causal:
        return 0.0
    heads_in_flight = min(heads, max(1, math.ceil(slots / m_blocks)))
    kv_in_flight = max(1, math.ceil(heads_in_flight * kv_heads / q_heads))
    return 1.0 - l2_hit_fraction(kv_in_flight * kv_head_bytes, gpu.l2_capacity_bytes)


def _visible_keys(block: int, rows: int, cols: int, length: int, kv_len: int, causal: bool) -> int:
    """Keys (whole ``cols`` tiles) query block ``block`` of a ``length``-query FA2 forward visits,
    the queries being the last ``length`` of ``kv_len`` positions."""
    last_row = min(length, (block + 1) * rows) - 1 + kv_len - length
    keys = min(kv_len, last_row + 1) if causal else kv_len
    return math.ceil(keys / cols) * cols


def fa2_first_read_share(kv_tiles: int, tile_reads: float) -> float:
    """Share of a KV head's K/V tile reads that are a tile's first read (from DRAM; the later
    reads of the same tile by the group's other CTAs hit L2 while it fits): ``kv_tiles`` distinct
    tiles over ``tile_reads`` reads by all the CTAs that read them."""
    return min(1.0, kv_tiles / tile_reads) if tile_reads else 0.0


# ------------------------------------------------------------------------------ FlashAttention-3
FA3_CTAS_PER_SM = 1  # FA3's forward fills an SM's shared memory ("128 x 112 hits the limit of smem")


def fa3_fwd_tile(head_dim: int, head_dim_v: int, causal: bool) -> tuple[int, int]:
    """(query rows kBlockM, key columns kBlockN) of FlashAttention-3's Hopper forward kernel, bf16,
    no paged KV, local window or softcap: flash-attention hopper/tile_size.h,
    ``tile_size_fwd_sm90``: 192 x 128 (causal) or 192 x 192 at head_dim <= 64, 192 x 144 at <= 96,
    128 x 128 (causal) or 128 x 176 at <= 128, 128 x 128 at <= 192 with a V of <= 128 (DeepSeek's
    192 / 128; 112 with a wider V), 128 x 80 above."""
    if head_dim <= 64:
        return 192, 128 if causal else 192
    if head_dim <= 96:
        return 192, 144
    if head_dim <= 128:
        return 128, 128 if causal else 176
    if head_dim <= 192:
        return 128, 128 if head_dim_v <= 128 else 112
    return 128, 80


def flash3_prefill(name: str, batch: int, q_heads: int, kv_heads: int, length: int, head_dim: int,
                   gpu: Gpu, *, head_dim_v: int | None = None, causal: bool = True,
                   kv_len: int | None = None) -> list[GpuKernel]:
    """FlashAttention-3 forward (Hopper): one CTA per ``fa3_fwd_tile`` query rows of each (sequence,
    head), one to an SM; a producer warpgroup loads K/V tiles by TMA into a multi-stage pipeline
    while the consumer warpgroups (one per 64 query rows) issue ``wgmma`` on operands in shared
    memory, so no per-warp operand reads are charged (the ``smem_bytes`` of FA2's CTAs) and no
    DRAM round trip per key tile is exposed (FA2's ``stall_s``). The MMAs (the tensor pipe) and the
    exponentials (the XU pipe, ``compute.sfu_peak``) run at once, by the warpgroups' ping-pong
    schedule and the softmax / PV overlap inside a warpgroup (FlashAttention-3 paper, G4 section
    3): the engine's main loop is the longer of the two over the pipe law's busy share
    (``Gpu.fa3_pipe_busy``) at the GEMMs' share of tensor peak (``sim.gpu._step_s``). Q and V
    may differ in width (``head_dim_v``: DeepSeek's MLA prefill, 192 and 128, runs without
    padding V). K/V re-reads through L2 as FA2's (``flash_prefill``). Causal: the longest query
    blocks are handed out first (the persistent scheduler's order), so the grid's tail is the
    short ones. In series with both: every key block rescales the output accumulator (rows x
    head_dim_v multiplies at the FP32 rate, ``compute.fp32_peak`` / 2 lanes a second) and each
    tile pays ``launch.fa3_tile``. The persistent kernel's producer loads a tile's Q and first K
    block while the one before computes (``CtaGroup.prefetch_bytes``), but V's shared memory holds
    the previous tile's output until it is stored (``smem_o`` aliases ``smem_v``), so the store, a
    round trip and the first block's other loads are exposed (``GpuKernel.persistent``).

    Calibrated on today's build on an H200 (runs bo and bn), checked frozen (run bq): docs/gpu.md,
    "FlashAttention-3 against the published figures", "Run bq"."""
    kv_len = length if kv_len is None else kv_len
    dv = head_dim if head_dim_v is None else head_dim_v
    rows, cols = fa3_fwd_tile(head_dim, dv, causal)
    m_blocks = math.ceil(length / rows)
    heads = batch * q_heads
    kv_bytes_per_head = kv_len * (head_dim + dv) * BF16 * kv_heads / q_heads
    miss = kv_miss_share(heads, q_heads, kv_heads, m_blocks, FA3_CTAS_PER_SM * gpu.sms,
                         kv_len * (head_dim + dv) * BF16, gpu, causal)
    tile_keys = sorted((_visible_keys(i, rows, cols, length, kv_len, causal) for i in range(m_blocks)),
                       reverse=True)
    rescale_s = rows * dv / (gpu.fp32_flops_per_s / 2 / gpu.sms)
    tile_fixed_s = gpu.launch_s("fa3_tile")
    groups = []
    for keys in tile_keys:
        nbytes = (rows * head_dim + rows * dv) * BF16 + kv_bytes_per_head / m_blocks \
            + miss * keys * (head_dim + dv) * BF16
        groups.append(CtaGroup(heads, nbytes, 2.0 * rows * keys * (head_dim + dv), keys // cols,
                               sfu=float(rows * keys), stall_s=keys // cols * rescale_s + tile_fixed_s,
                               prologue_bytes=rows * head_dim * BF16, epilogue_bytes=rows * dv * BF16,
                               prefetch_bytes=rows * head_dim * BF16 + miss * min(keys, cols) * head_dim * BF16))
    return [GpuKernel(name, tuple(groups), FA3_CTAS_PER_SM, math="fa3", keys=kv_len, persistent=True)]


def fa3_decode_tile(head_dim: int, head_dim_v: int) -> tuple[int, int]:
    """(query rows kBlockM, key columns kBlockN) of FlashAttention-3's forward at decode (one query
    a sequence, the cache contiguous): ``mha_fwd`` (hopper/flash_api.cpp) drops the causal flag when
    ``seqlen_q == 1`` without paged KV, so ``tile_size_fwd_sm90`` gives the non-causal tile
    (``fa3_fwd_tile``): 128 x 176 at head_dim 128, 192 x 192 at 64, the KV head's query group packed
    into the rows (``pack_gqa``) and padded. The main kernels run bt profiled carry these tiles in
    their template arguments (``cute::C<128>, cute::C<176>``, two MMA warpgroups). A newer source's
    ``use_one_mma_wg`` (hopper/heuristics.h: 64 rows at head_dim 128 for a group of 64 or fewer)
    is not in the build measured (the ``fa3-fwd`` 0.0.3 wheel): registered for run bt, it was wrong
    there (docs/gpu.md, "Run bt")."""
    return fa3_fwd_tile(head_dim, head_dim_v, causal=False)


def fa3_num_splits(total_mblocks: int, sms: int, n_blocks: int, max_splits: int = 128) -> int:
    """FlashAttention-3's ``num_splits_heuristic`` (hopper/heuristics.h) at decode: one split when
    the row blocks nearly fill the SMs (its clause for a KV head over 50 MB needs 2 x SMs row
    blocks: never at decode) or there are 4 key blocks or fewer; else, as FA2's, the fewest splits
    whose wave efficiency is within 85% of the best, up to min(128, SMs, key blocks), with no rule
    on which split counts are eligible (FA2's ``fa2_splits`` skips a count that leaves the blocks a
    split as the one before)."""
    if total_mblocks >= 0.8 * sms or n_blocks <= 4:
        return 1
    return fewest_efficient_splits(total_mblocks, sms, range(1, min(max_splits, sms, n_blocks) + 1))


def fa3_decode_splits(batch: int, q_heads: int, kv_heads: int, kv_len: int, head_dim: int,
                      head_dim_v: int, gpu: Gpu) -> tuple[int, int]:
    """(static, dynamic) KV splits of one FlashAttention-3 decode call over a cache of ``kv_len``
    keys a sequence, given as ``cache_seqlens`` (``seqused_k``: the varlen path, as vLLM calls it).
    Static (``get_num_splits``, flash_api.cpp): ``fa3_num_splits`` as if the batch were one
    sequence (varlen: an upper bound), its key blocks those of the tile without ``use_one_mma_wg``.
    Dynamic (``prepare_varlen_num_blocks_kernel``, hopper/flash_prepare_scheduler.cu, one CTA before
    the main kernel): every sequence's ``ceil(n_blocks / blocks_per_sm)``, ``blocks_per_sm =
    ceil(1.1 x batch x m_blocks x n_blocks x kv_heads / SMs)``, between 1 and the static count."""
    rows, cols = fa3_decode_tile(head_dim, head_dim_v)
    n_blocks = math.ceil(kv_len / cols)
    m_blocks = math.ceil(q_heads // kv_heads / rows)
    static = fa3_num_splits(kv_heads * m_blocks, gpu.sms, n_blocks)
    per_sm = math.ceil(batch * m_blocks * n_blocks * 1.1 * kv_heads / gpu.sms)
    return static, max(1, min(math.ceil(n_blocks / per_sm), static))


#: dependent round trips of FA3's ``prepare_varlen_num_blocks_kernel`` (one CTA): the sequences'
#: lengths, then its own per-sequence key-block counts after the CTA's reduction (the split counts
#: are stored; the main kernel reads them). The build run bt measured (``<NumWarps, Sort>``) also
#: orders the sequences by work with a CUB block merge sort, not priced (2.6-5.3 us measured against
#: 1.8: docs/gpu.md, "Run bt")
RT_FA3_PREPARE = 2
#: stages of FA3's combine's ``cp.async`` pipeline of partial outputs (``kStages``,
#: hopper/flash_fwd_combine_kernel.h): ``kStages - 1`` splits' loads in flight at once
FA3_COMBINE_STAGES = 4


def fa3_combine_round_trips(splits: int) -> int:
    """Dependent L2 round trips of a thread of FA3's combine (``FlashAttnFwdCombine``) over
    ``splits`` (the sequence's dynamic count): none at one split (the kernel returns at once:
    ``if (num_splits <= 1) { return; }``); else the splits' log-sum-exps in one unrolled read, then
    the partial outputs through the ``FA3_COMBINE_STAGES`` pipeline, ``kStages - 1`` splits a round
    trip (FA2's combine waits on one split at a time: ``fa2_combine_round_trips``)."""
    if splits <= 1:
        return 0
    return 1 + math.ceil(splits / (FA3_COMBINE_STAGES - 1))


def flash3_decode(name: str, batch: int, q_heads: int, kv_heads: int, kv_len: int, head_dim: int,
                  gpu: Gpu, *, head_dim_v: int | None = None) -> list[GpuKernel]:
    """FlashAttention-3 decode (``flash_attn_with_kvcache`` with ``cache_seqlens``, vLLM's varlen
    call on Hopper): up to three kernels. The scheduler's prepare kernel (one CTA: the dynamic split
    counts, ``fa3_decode_splits``); the forward kernel, persistent (one CTA an SM), over tiles of
    one (sequence, KV head, split): the KV head's query group packed into ``fa3_decode_tile``'s rows
    (padded), its split of the keys read once by TMA and multiplied at the pipe law's rate over
    whole key blocks (``wgmma`` and the exponentials run ``kBlockN`` columns a block, the last block's
    masked after the MMA: as ``flash_decode`` and ``flash3_prefill`` charge; the bytes are the keys
    read, TMA fills a block's columns past the cache with zeros without reading them), each
    tile paying ``launch.fa3_tile`` and, after an SM's first, the wait for the tile ahead's output
    store as prefill's (its Q and first K block prefetched); the combine (when the static count is over one),
    the partial outputs (fp32) merged into the bf16 output. Nothing is fitted on decode: the
    prefill fit's constants carry over (a check, docs/gpu.md "Run bt")."""
    dv = head_dim if head_dim_v is None else head_dim_v
    group = q_heads // kv_heads
    rows, cols = fa3_decode_tile(head_dim, dv)
    static, splits = fa3_decode_splits(batch, q_heads, kv_heads, kv_len, head_dim, dv, gpu)
    out_bytes = group * dv * (4 if static > 1 else BF16)
    rescale_s = rows * dv / (gpu.fp32_flops_per_s / 2 / gpu.sms)
    heads = batch * kv_heads * math.ceil(group / rows)  # (sequence, KV head, row block)s, each over the splits
    tiles = []
    for count, keys in fa3_split_keys(kv_len, cols, splits):
        blocks = math.ceil(keys / cols)
        if not blocks:  # an empty split stores its zero output and -inf log-sum-exp, nothing read
            tiles.append(CtaGroup(heads * count, out_bytes, epilogue_bytes=out_bytes))
            continue
        tiles.append(CtaGroup(heads * count, keys * (head_dim + dv) * BF16 + group * head_dim * BF16 + out_bytes,
                              2.0 * rows * blocks * cols * (head_dim + dv), blocks, sfu=float(rows * blocks * cols),
                              stall_s=blocks * rescale_s + gpu.launch_s("fa3_tile"),
                              prologue_bytes=group * head_dim * BF16, epilogue_bytes=out_bytes,
                              prefetch_bytes=group * head_dim * BF16 + min(keys, cols) * head_dim * BF16))
    # the lengths it reads were last read a layer ago, a layer's weights streamed through L2 since
    # (and after run bt's L2 flush): DRAM round trips
    prepare = streaming(f"{name}.prepare", 2 * batch * 4, gpu, rows=1, round_trips=(RT_FA3_PREPARE,))
    main = GpuKernel(name, tuple(tiles), FA3_CTAS_PER_SM, math="fa3", keys=kv_len, persistent=True)
    if static == 1:
        return [prepare, replace(main, host_paid=True)]
    partials = batch * q_heads * splits * (dv + 1) * 4 + batch * q_heads * dv * BF16
    combine = streaming(f"{name}.combine", partials, gpu, rows=math.ceil(batch * q_heads / fa3_combine_rows(dv)),
                        round_trips=(fa3_combine_round_trips(splits),), resident=True)
    return [prepare, replace(main, host_paid=True), replace(combine, host_paid=True)]


def fa3_split_keys(kv_len: int, cols: int, splits: int) -> list[tuple[int, int]]:
    """(splits, keys each) of one (sequence, KV head) cut into ``splits`` by FlashAttention-3, which
    splits key blocks, not keys (``get_n_block_min_max``, hopper/block.h): each split takes
    ``ceil(n_blocks / splits)`` blocks of ``cols`` from the start, the last active one the rest, and
    a count that does not divide the blocks leaves the splits after it empty (no eligibility rule
    skips such counts, as FA2's has): 12 blocks over 11 splits are 6 of 2 blocks and 5 empty."""
    n_blocks = math.ceil(kv_len / cols)
    if not n_blocks:  # no keys: every split stores only
        return [(splits, 0)]
    per_split = math.ceil(n_blocks / splits)
    active = math.ceil(n_blocks / per_split)
    last = kv_len - (active - 1) * per_split * cols
    parts = [(active - 1, per_split * cols), (1, last), (splits - active, 0)]
    return [(count, keys) for count, keys in parts if count]


def fa3_combine_rows(head_dim_v: int) -> int:
    """Query rows a CTA of FA3's combine merges (``run_mha_fwd_combine_``, hopper/
    flash_fwd_combine_launch_template.h: ``kBlockM`` 8 at a V width that is a multiple of 128, 16 at
    64, else 32; its grid ``ceil(batch x heads / kBlockM)``)."""
    return 8 if head_dim_v % 128 == 0 else 16 if head_dim_v % 64 == 0 else 32


def fa2_splits(batch_heads_mblocks: int, slots: int, n_blocks: int, max_splits: int = 128) -> int:
    """FlashAttention-2's ``num_splits_heuristic``: the fewest KV splits whose wave
    efficiency is within 85% of the best, or 1 when the grid already fills 80% of ``slots``;
    ``n_blocks`` counts keys in the split-KV kernel's blocks (``fa2_splitkv_block_n``)."""
    if batch_heads_mblocks >= 0.8 * slots:
        return 1
    max_splits = min(max_splits, slots, n_blocks)

    def eligible(s: int) -> bool:
        return s == 1 or math.ceil(n_blocks / s) != math.ceil(n_blocks / (s - 1))

    return fewest_efficient_splits(batch_heads_mblocks, slots, (s for s in range(1, max_splits + 1) if eligible(s)))


def fewest_efficient_splits(blocks: int, slots: int, counts: Iterable[int]) -> int:
    """The rule FA2's and FA3's ``num_splits_heuristic`` share: of the split ``counts`` (ascending),
    the fewest whose wave efficiency (``blocks x splits`` CTAs over ``slots``: waves over their
    ceiling) is within 85% of the best of them."""
    effs = {s: blocks * s / slots / math.ceil(blocks * s / slots) for s in counts}
    best = max(effs.values())
    return next(s for s, e in effs.items() if e >= 0.85 * best)


#: waits of FA2's forward loop on its tile copies per key tile: ``cp_async_wait<0>`` on K before
#: S = QK^T, then on V before O += PV (flash_fwd_kernel.h, ``compute_attn_1rowblock``)
FA2_TILE_WAITS = 2


def fa2_dram_tile_wait_s(gpu: Gpu) -> float:
    """What a key tile of FA2's forward kernel waits beyond what the attention rate holds when its
    K and V come from DRAM rather than L2: each of the loop's ``FA2_TILE_WAITS`` waits is one
    round trip, and the fitted rate (``efficiency.attention_tensor``, on prefill rows whose K/V
    tiles hit L2: many CTAs read each) already holds an L2 hit's; a tile read by one CTA alone
    (decode with one KV split: a (sequence, KV head) per CTA) waits ``hbm_latency - l2_latency``
    more at each (zero where the document gives no L2 latency: ``Gpu.l2_latency_s`` is then the
    DRAM round trip)."""
    return FA2_TILE_WAITS * max(0.0, gpu.hbm_latency_s - gpu.l2_latency_s)


FA2_SPLITKV_ROWS = 64  # kBlockM of FA2's split-KV kernel: "Fixed for all head dimensions"
#: (query rows, key columns) FlashMLA's decode is priced with (``math_class="mla"``): FA2's split-KV
#: structure at its head_dim-128 tile, kept as it was (FlashMLA's scheduler is not FA2's heuristic,
#: and FA2's ``kBlockN`` rule stops at head_dim 256)
MLA_DECODE_TILE = (64, 128)


def fa2_splitkv_block_n(head_dim: int) -> int:
    """Key columns (``kBlockN``) of FA2's split-KV kernel at ``head_dim``: 256 up to 64, 128 up to
    128, else 64. The same rule sets the key blocks ``num_splits_heuristic`` counts: PyTorch's copy
    (pytorch/pytorch aten/src/ATen/native/transformers/cuda/flash_attn/, which SDPA runs),
    flash_api.cpp (commit 03b7c19d) ``set_params_splitkv``: ``const int block_n = head_size <= 64 ? 256 : (head_size
    <= 128 ? 128 : 64);`` ("This needs to match with run_mha_fwd_splitkv_dispatch"), and
    flash_fwd_launch_template.h (04ff5beb) ``run_mha_fwd_splitkv_dispatch``: ``kBlockN = Headdim <= 64 ? 256 :
    (Headdim <= 128 ? 128 : 64)`` with ``Flash_fwd_kernel_traits<Headdim, 64, kBlockN, 4, ...>``;
    Dao-AILab/flash-attention csrc/flash_attn/flash_api.cpp and src/flash_fwd_launch_template.h
    say the same (on max(head_size, v_head_size))."""
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def fa2_decode_rows(q_heads: int, kv_heads: int, head_dim: int) -> tuple[int, int]:
    """(heads, query rows a head) of one decode call as FA2 lays it out: GQA swaps the query group
    into the rows (``seqlenq_ngroups_swapped``, flash_api.cpp), so a KV head's group is one tile's rows."""
    if q_heads > kv_heads and head_dim % 8 == 0:
        return kv_heads, q_heads // kv_heads
    return q_heads, 1


def fa2_decode_splits(batch: int, q_heads: int, kv_heads: int, kv_len: int, head_dim: int, gpu: Gpu,
                      *, tile: tuple[int, int] | None = None) -> tuple[int, int]:
    """(row-tile blocks ``batch x heads x m-blocks``, KV splits) of one split-KV decode call: FA2's
    ``num_splits_heuristic`` (``fa2_splits``) over 2 CTAs an SM and the key blocks of ``tile``
    (query rows, key columns; FA2's split-KV tile at ``head_dim`` by default)."""
    rows_tile, cols = tile or (FA2_SPLITKV_ROWS, fa2_splitkv_block_n(head_dim))
    heads, rows = fa2_decode_rows(q_heads, kv_heads, head_dim)
    bhm = batch * heads * math.ceil(rows / rows_tile)
    return bhm, fa2_splits(bhm, FA2_CTAS_PER_SM * gpu.sms, math.ceil(kv_len / cols))


def flash_decode(name: str, batch: int, q_heads: int, kv_heads: int, kv_len: int, head_dim: int,
                 gpu: Gpu, *, kv_bytes_per_token: float | None = None, math_class: str = "attention",
                 ) -> list[GpuKernel]:
    """FlashAttention-2 split-KV decode (one query per sequence) over ``kv_len`` keys; FlashMLA
    (``math_class="mla"``) has the same structure (64-row head tiles, split KV, a combine)."""
    fa2 = math_class == "attention"  # FlashMLA (wgmma, its own pipeline) keeps its tensor rate alone
    rows_tile, cols = (FA2_SPLITKV_ROWS, fa2_splitkv_block_n(head_dim)) if fa2 else MLA_DECODE_TILE
    warps = FA2_WARPS
    heads, rows = fa2_decode_rows(q_heads, kv_heads, head_dim)
    bhm, splits = fa2_decode_splits(batch, q_heads, kv_heads, kv_len, head_dim, gpu, tile=(rows_tile, cols))
    if splits == 1 and fa2:
        # one split: FA2 runs its forward kernel (``run_mha_fwd``), not the split-KV one: the
        # forward kernel's tile (``fa2_fwd_tile``; ``flash_fwd_kernel`` at batch 64 in
        # benchmarks/gpu/h100-20261125l-small-kernels.csv), its 128 query rows mostly padding
        rows_tile, cols = fa2_fwd_tile(head_dim)
        warps = fa2_fwd_warps(head_dim)
        bhm = batch * heads * math.ceil(rows / rows_tile)
    per_token = 2 * head_dim * BF16 if kv_bytes_per_token is None else kv_bytes_per_token
    keys = kv_len / splits
    kv_share = kv_heads / heads  # MHA-packed heads read their own KV; a swapped GQA group its head's (1)
    nbytes = keys * per_token * kv_share + 2 * rows * head_dim * BF16
    tiles = math.ceil(keys / cols)
    flops = 4.0 * rows_tile * head_dim * tiles * cols
    # one split: every K and V tile of the forward kernel is read by this CTA alone (GQA packed
    # its group's heads into the rows), so every read is a first read from DRAM where prefill's
    # mostly hit L2 (``fa2_first_read_share`` = 1; ``fa2_dram_tile_wait_s``)
    stall = fa2_dram_tile_wait_s(gpu) * tiles if splits == 1 and fa2 else 0.0
    main = GpuKernel(name, (CtaGroup(bhm * splits, nbytes, flops, tiles,
                                     sfu=float(rows_tile * tiles * cols) if fa2 else 0.0,
                                     smem_bytes=fa2_smem_bytes(rows_tile, cols, head_dim, warps) * tiles if fa2 else 0.0,
                                     stall_s=stall),),
                     FA2_CTAS_PER_SM, math=math_class, keys=kv_len)
    if splits == 1:
        return [main]
    partials = splits * batch * q_heads * head_dim * 4 + batch * q_heads * head_dim * BF16
    if fa2 and gpu.fa2_pair_calibrated:
        # the pair's own fixed times, calibrated on profiled kernels (launch.fa2_split_fixed,
        # fa2_combine_fixed; benchmarks/gpu/fa2_combine.py --fit: the H200's on run as, the H100's on
        # run l's split-KV rows); the combine is its chain: one CTA per
        # ``fa2_combine_rows`` query rows, ``fa2_combine_round_trips`` dependent loads of the partials
        # the split kernel just wrote (L2), ``kernel_fixed`` and its own fixed time beyond that
        ctas = math.ceil(batch * q_heads / fa2_combine_rows(head_dim))
        combine = streaming(f"{name}.combine", partials, gpu, rows=ctas,
                            round_trips=(fa2_combine_round_trips(splits),), resident=True)
        return [replace(main, fixed="fa2_split"), replace(combine, host_paid=True, fixed="fa2_combine")]
    # without the pair's own fixed times (a document that gives neither; the H100's before run l's
    # fit): the combine is latency-bound too
    # (6.2 us at 16 splits, benchmarks/gpu/h100-20261125l-small.csv), but the pair is priced
    # together: the main kernel's fixed ``launch.pipeline`` (7.02 us, fitted on P10's rows) stands
    # in for it (Llama-3.1-8B, batch 1: 13.6 us modelled, 13.2 us measured)
    return [main, replace(streaming(f"{name}.combine", partials, gpu), host_paid=True)]


def fa2_combine_rows(head_dim: int) -> int:
    """Query rows per CTA of FA2's split-KV combine (``kBlockM`` in ``run_flash_splitkv_fwd``,
    flash_fwd_launch_template.h: 128 threads load 512 fp32 at a time, so 4 rows at head_dim 128,
    8 at 64, else 16); the grid is ``ceil(batch x heads x seqlen_q / kBlockM)`` (GQA decode swaps
    the group into ``seqlen_q``: ``batch x q_heads`` rows)."""
    return 4 if head_dim % 128 == 0 else 8 if head_dim % 64 == 0 else 16


def fa2_combine_round_trips(splits: int) -> int:
    """Dependent L2 round trips a thread of FA2's combine waits on (``combine_attn_seqk_parallel``,
    flash_fwd_kernel.h): the splits' log-sum-exps in one unrolled read, then the loop
    ``for split < num_splits``, whose trip count is a runtime value: each iteration loads that
    split's 4 fp32 partial outputs (one 16-byte load) into the same registers and adds them in, so
    the loads come one after another. The partials were just written by the split kernel (L2).
    Its time grows with ``splits``, which FA2's heuristic makes largest at small batch
    (``fa2_splits``), not with the batch: its grid (2-256 CTAs at decode) is one wave."""
    return 1 + splits


def fa2_combine_chain_s(splits: int, gpu: Gpu) -> float:
    """The combine's latency-bound floor as a small kernel (docs/gpu.md, "Small kernels"): its
    fixed time and its chain of round trips at L2's latency. The step model prices the combine so
    (plus its bytes and ``launch.fa2_combine_fixed``) where the GPU document gives the pair's own
    fixed times (``flash_decode``); else the pair pays ``launch.pipeline`` on the main kernel."""
    return gpu.kernel_fixed_s + fa2_combine_round_trips(splits) * gpu.l2_latency_s


# ------------------------------------------------------------------ streaming kernels
STREAM_CTAS_PER_SM = 16  # 2048 resident threads per SM / 128-thread blocks


def streaming(name: str, nbytes: float, gpu: Gpu, *, rows: int | None = None,
              launches: int = 1, strided: bool = False, round_trips: tuple[int, ...] = (),
              resident: bool = False, cold_round_trips: int = 0) -> GpuKernel:
    """A memory-bound kernel (norm, elementwise, gather, copy): ``nbytes`` read + written.

    ``rows`` gives one CTA per row (fused RMSNorm); otherwise the grid fills every SM.
    ``strided``: a PyTorch elementwise op with an operand that is not contiguous takes
    TensorIterator's non-vectorised path (``elementwise_kernel<128, 4>``: one 2-byte element per
    load, offsets computed per element) instead of ``vectorized_elementwise_kernel<8>``
    (16-byte loads), and streams at ``efficiency.strided_stream`` of HBM peak.
    ``round_trips`` (one entry per launched kernel), ``resident`` and ``cold_round_trips``: see ``GpuKernel``; the
    latency-bound floor of a small kernel (``KERNEL_ROUND_TRIPS``).
    """
    if round_trips and len(round_trips) != launches:
        raise ValueError(f"{name}: {len(round_trips)} round-trip counts for {launches} launches")
    ctas = rows if rows is not None else gpu.sms * STREAM_CTAS_PER_SM
    ctas = max(1, ctas)
    return GpuKernel(name, (CtaGroup(ctas, nbytes / ctas),), STREAM_CTAS_PER_SM, launches=launches, strided=strided,
                     round_trips=round_trips, resident=resident, cold_round_trips=cold_round_trips)


# Dependent memory round trips a thread of each PyTorch / library kernel class waits on, in
# series, from its first load to its last store (the kernel's latency-bound floor; docs/gpu.md,
# "Small kernels"). From the kernels' source:
#: ``vectorized_elementwise_kernel`` (contiguous operands): one vector load per operand, then the
#: store (PyTorch aten/src/ATen/native/cuda/CUDALoops.cuh)
RT_VECTORIZED = 1
#: ``elementwise_kernel<128, 4>`` (an operand not contiguous): each thread's 4 elements one after
#: another, the load of element i + 1 issued after the store of element i (they may alias)
RT_STRIDED = 4
#: ``elementwise_kernel<128, 4>``'s threads a CTA (``launch_legacy_kernel<128, 4>``)
STRIDED_THREADS = 128
#: ``CatArrayBatchedCopy`` with a strided input: the same per-element load-store path (one 2-byte
#: element per load, offsets computed per element); measured alike (benchmarks/gpu/
#: h100-20261125l-small.csv: 1.86-1.90 us against 1.86-1.95 for the strided negation at batch 1)
RT_CAT = RT_STRIDED
#: ``index_elementwise_kernel<128, 4>`` (``index_copy_``): the strided path plus the index read
#: that gives the destination
RT_INDEX = RT_STRIDED + 1
NORM_THREADS, NORM_VEC = 128, 4  # vectorized_layer_norm_kernel: 128 threads, 4 elements per load


def rt_strided(elements: int) -> int:
    """The elements a thread of ``elementwise_kernel<128, 4>`` runs one after another over ``elements``:
    ceil(N / 512) CTAs of 128 threads, each thread ``for i < 4: if idx < N: f(idx); idx += 128``
    (CUDALoops.cuh), so min(4, ceil(N / 128)) in the last (or only) CTA, the longest chain: a kernel
    of 128 elements runs one, of 256 two, from 385 on ``RT_STRIDED`` (run bc, timed alone: 1.06, 1.38,
    1.86-1.89 us at 1, 2, 4; docs/gpu.md "Run bc")."""
    return max(1, min(RT_STRIDED, math.ceil(elements / STRIDED_THREADS)))


def rt_index(elements: int) -> int:
    """``index_elementwise_kernel<128, 4>`` over ``elements``: the strided path's chain plus the index read."""
    return rt_strided(elements) + RT_INDEX - RT_STRIDED


def rt_rms_norm(width: int) -> int:
    """PyTorch's ``vectorized_layer_norm_kernel`` (``F.rms_norm``, layer_norm_kernel.cu): one CTA
    of 128 threads per row, 4-element loads; a first pass over the row sums the squares, a second
    reads it again (and the weight) and writes the output: each pass ``width / 512`` loads a
    thread, one after another."""
    return 2 * rt_rms_norm_weight(width)


def rt_rms_norm_weight(width: int) -> int:
    """Of ``rt_rms_norm``, the second pass's round trips: each loads the row's next 4 elements and
    the weight's (``vectorized_layer_norm_kernel_impl``'s loop over ``X_vec[i]``, ``gamma_vec[i]``,
    storing ``Y_vec[i]`` before the next load)."""
    return math.ceil(width / (NORM_THREADS * NORM_VEC))


def rms_norm(name: str, rows: int, width: int, gpu: Gpu) -> GpuKernel:
    """An RMSNorm of ``rows`` x ``width`` in a forward pass (each layer's two, the final norm;
    decode and prefill): its rows just written (in L2), its weight read once a pass, after every
    other weight streamed through L2 since its last read, so the second pass's round trips wait on
    DRAM (``cold_round_trips``; explained after measurement, docs/gpu.md "RMSNorm's weight from
    DRAM"). A norm timed alone, repeated, reads a weight still in L2 (``small_kernels.py``'s rows,
    ``predict.micro_kernel``: the small-kernel fit's calibration rows keep it warm)."""
    return streaming(name, 2 * rows * width * BF16, gpu, rows=rows, round_trips=(rt_rms_norm(width),),
                     resident=True, cold_round_trips=rt_rms_norm_weight(width))


def collective(name: str, op: str, nbytes: float, group: int, gpu: Gpu) -> list[GpuKernel]:
    """An NCCL collective (``rdusim.hw.collectives``: the algorithm and protocol NCCL's tuner
    picks) of ``nbytes`` among ``group`` GPUs: one kernel on the NVLink whose bytes are what
    this GPU sends and whose time the engine takes from ``cost``; in eager mode the host issues
    it as one torch.distributed call (``host_ops``: the collective's own host cost). None on one GPU.
    An all-reduce on a GPU whose fabric carries vLLM's custom all-reduce (``Gpu.all_reduce``) runs as
    that kernel where vLLM would run it (``custom_ar_cost``), NCCL's otherwise; its eager host cost is
    taken as the torch.distributed call's [A]."""
    if group <= 1:
        return []
    fabric = gpu.fabric
    cost = (custom_ar_cost(nbytes, group, fabric) if op == "all_reduce" else None) or \
        collective_cost(op, nbytes, group, fabric)
    return [GpuKernel(name, (CtaGroup(1, cost.wire_bytes),), 1, math="nvlink", collective=cost, host_ops=(op,))]


def all_reduce(name: str, nbytes: float, group: int, gpu: Gpu) -> list[GpuKernel]:
    return collective(name, "all_reduce", nbytes, group, gpu)


# ------------------------------------------------------------- a decoder layer's kernels
@dataclass(frozen=True)
class LayerShape:
    """What one forward step of a GQA decoder layer computes on one GPU (after TP)."""

    batch: int
    tokens: int          # new tokens per sequence (1 at decode, the prompt at prefill)
    kv_len: int          # keys each query attends over (after the KV policy)
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tp: int = 1
    topk: int | None = None     # Kascade: keys a sparse layer attends
    anchor: bool = False        # Kascade: this layer selects its own top-k
    attention_kernel: str = "fa2"  # attention: FlashAttention-2 ("fa2") or -3 ("fa3", Hopper)


def layer_kernels(names: list[str], s: LayerShape, gpu: Gpu, *, phase: str) -> list[GpuKernel]:
    """The library kernels a decoder layer (or the model head) launches, in order.

    Kernels named like the PyTorch ops of ``benchmarks/gpu/measure.py``'s model: ``rope`` is
    PyTorch's unfused rotary embedding (5 elementwise ops each for q and k), ``kv_append`` two
    ``index_copy_``, ``silu_mul`` two elementwise ops, ``qk_norm`` (a model with
    ``attention.qk_norm``) the per-head RMSNorm of q and of k.
    """
    out: list[GpuKernel] = []
    for name in names:
        if name not in _BUILDERS:
            raise ValueError(f"unknown GPU library kernel {name!r}")
        built = _BUILDERS[name](_Ctx(s, gpu, phase))
        ops = host_ops(name)
        if built and ops:  # the host dispatches the ops, then the kernels follow
            built[0] = replace(built[0], host_ops=ops)
        out += built
    return out


_ROPE_CALL = ("slice", "elementwise_neg", "slice", "cat", "elementwise_mul", "elementwise_mul", "elementwise_add")


def host_ops(name: str) -> tuple[str, ...]:
    """The eager PyTorch ops (``HOST_OPS`` kinds) ``measure.py``'s Llama forward dispatches for a
    library kernel, in order: the GEMM call and its views, the rotary embedding's slices,
    negation, cat, products and sum, the KV append's two ``index_copy_``, the SDPA call and the
    output's transpose and reshape (a view: FA2's output is (B, T, H, hd) in memory)."""
    return {
        "embedding": ("embedding",),
        "rms_norm": ("rms_norm",),
        "qkv_gemm": ("gemm", "view", "transpose"),
        "rope": ("slice", *_ROPE_CALL, "slice", *_ROPE_CALL, "slice"),
        "kv_append": ("index_copy", "index_copy"),
        "attention": ("sdpa", "transpose", "reshape_view"),
        "o_gemm": ("gemm",),
        "residual_add": ("elementwise_add",),
        "gate_up_gemm": ("gemm",),
        "silu_mul": ("slice", "silu", "slice", "elementwise_mul"),
        "down_gemm": ("gemm",),
        "lm_head": ("slice", "rms_norm", "gemm"),
    }.get(name, ())


@dataclass(frozen=True)
class _Ctx:
    s: LayerShape
    gpu: Gpu
    phase: str

    @property
    def rows(self) -> int:
        return self.s.batch * self.s.tokens

    @property
    def hq(self) -> int:
        return self.s.q_heads // self.s.tp

    @property
    def hkv(self) -> int:
        return max(1, self.s.kv_heads // self.s.tp)


def _lm_head(c: _Ctx) -> list[GpuKernel]:  # logits of the last position of each sequence
    # the GEMM's "gemm" host op is among the final norm's (``host_ops``)
    return [rms_norm("final_norm", c.s.batch, c.s.hidden, c.gpu),
            *(replace(k, host_paid=True)
              for k in gemm("lm_head", c.s.batch, c.s.vocab // c.s.tp, c.s.hidden, c.gpu))]


def _logits_gather(c: _Ctx) -> list[GpuKernel]:
    """The logits of a vocabulary-split LM head gathered on every GPU of the group: an NCCL
    all-gather of ``batch x vocab`` bf16 logits (each GPU's ``vocab / tp`` of them), as
    ``benchmarks/gpu/collectives.py``'s TP step runs it (``all_gather_into_tensor`` after the LM
    head, the harness every TP row was measured with) and as vLLM's logits processor gathers a
    tensor-parallel LM head's output (``vllm/model_executor/layers/logits_processor.py``
    ``_gather_logits``: an all-gather, or a gather to one rank). None on one GPU."""
    return collective("logits_gather", "all_gather", c.s.batch * c.s.vocab * BF16, c.s.tp, c.gpu)


def _rope_rt(c: _Ctx) -> tuple[int, ...]:
    """The rotary embedding's launches, q's then k's: the negation of a strided half, the cat, the two
    products on strided views, the contiguous sum; each strided one's chain by its elements."""
    out: tuple[int, ...] = ()
    for heads in (c.hq, c.hkv):
        full = c.rows * heads * c.s.head_dim
        out += (rt_strided(full // 2), RT_CAT, rt_strided(full), rt_strided(full), RT_VECTORIZED)
    return out


def _qk_norm(c: _Ctx) -> list[GpuKernel]:
    """Qwen3's per-head RMSNorm of q, then of k (``F.rms_norm`` over head_dim on the QKV GEMM's
    output viewed as (rows, heads, head_dim), before the transpose; the host's ``rms_norm`` and the
    ``transpose`` after it). With more than one row the q (k) slice of a row is not contiguous and
    ``_fused_rms_norm_cuda`` materialises it first (``expect_contiguous``, PyTorch
    aten/src/ATen/native/cuda/layer_norm_kernel.cu): a copy on the non-vectorised path, launched
    inside the same call. The norm is ``rms_norm``'s kernel over rows x heads rows of head_dim."""
    out: list[GpuKernel] = []
    for heads in (c.hq, c.hkv):
        elements = c.rows * heads * c.s.head_dim
        call = [rms_norm("qk_norm", c.rows * heads, c.s.head_dim, c.gpu)]
        if c.rows > 1:
            call.insert(0, streaming("qk_norm.copy", 2 * elements * BF16, c.gpu, strided=True,
                                     round_trips=(rt_strided(elements),), resident=True))
        out += [replace(call[0], host_ops=("rms_norm", "transpose")),
                *(replace(k, host_paid=True) for k in call[1:])]
    return out


_BUILDERS = {
    "embedding": lambda c: [streaming("embedding", 2 * c.rows * c.s.hidden * BF16, c.gpu, rows=c.rows)],
    "rms_norm": lambda c: [rms_norm("rms_norm", c.rows, c.s.hidden, c.gpu)],
    "qkv_gemm": lambda c: gemm("qkv_gemm", c.rows, (c.hq + 2 * c.hkv) * c.s.head_dim, c.s.hidden, c.gpu),
    # rotate_half slices x[..., :hd/2] and x[..., hd/2:]: its neg and muls run on strided views at
    # every row count (elementwise_kernel<128, 4> in h100-20261125-kernels.csv, batch 1 decode)
    # per q and k: the negation, the cat, the two products on strided views, the contiguous sum
    "qk_norm": _qk_norm,
    "rope": lambda c: [streaming("rope", 15 * c.rows * (c.hq + c.hkv) * c.s.head_dim * BF16, c.gpu,
                                 launches=10, strided=True, round_trips=_rope_rt(c), resident=True)],
    "kv_append": lambda c: [streaming("kv_append", 4 * c.rows * c.hkv * c.s.head_dim * BF16, c.gpu,
                                      launches=2, round_trips=(rt_index(c.rows * c.hkv * c.s.head_dim),) * 2,
                                      resident=True)],
    "attention": lambda c: _attention(c.s, c.hq, c.hkv, c.gpu, c.phase),
    # FA2 writes its output (B, T, H, hd) in memory and returns it as a (B, H, T, hd) view, so the
    # forward's transpose(1, 2).reshape is a view at prefill as at decode: no copy kernel (run ax's
    # profiles, benchmarks/gpu/h200x2-20261128ax-kernels-r0.csv.gz: flash_fwd_kernel, then the O GEMM)
    "o_gemm": lambda c: gemm("o_gemm", c.rows, c.s.hidden, c.hq * c.s.head_dim, c.gpu),
    "residual_add": lambda c: [streaming("residual_add", 3 * c.rows * c.s.hidden * BF16, c.gpu,
                                         round_trips=(RT_VECTORIZED,), resident=True)],
    "gate_up_gemm": lambda c: gemm("gate_up_gemm", c.rows, 2 * c.s.ffn // c.s.tp, c.s.hidden, c.gpu),
    # silu(gu[..., :f]) * gu[..., f:]: the halves of the gate-up output are strided views (row
    # stride 2f) unless there is one row, so both ops take the non-vectorised path
    "silu_mul": lambda c: [streaming("silu_mul", 5 * c.rows * (c.s.ffn // c.s.tp) * BF16, c.gpu, launches=2,
                                     strided=c.rows > 1,
                                     round_trips=(rt_strided(c.rows * c.s.ffn // c.s.tp) if c.rows > 1 else RT_VECTORIZED,) * 2,
                                     resident=True)],
    "down_gemm": lambda c: gemm("down_gemm", c.rows, c.s.hidden, c.s.ffn // c.s.tp, c.gpu),
    "all_reduce": lambda c: all_reduce("all_reduce", c.rows * c.s.hidden * BF16, c.s.tp, c.gpu),
    "lm_head": _lm_head,
    "logits_gather": _logits_gather,
}


def _attention(s: LayerShape, hq: int, hkv: int, gpu: Gpu, phase: str) -> list[GpuKernel]:
    if phase == "prefill" and s.attention_kernel == "fa3":
        return flash3_prefill("attention", s.batch, hq, hkv, s.tokens, s.head_dim, gpu)
    if s.attention_kernel == "fa3" and s.topk is None:
        return flash3_decode("attention", s.batch, hq, hkv, s.kv_len, s.head_dim, gpu)
    if phase == "prefill":
        return flash_prefill("attention", s.batch, hq, hkv, s.tokens, s.head_dim, gpu)
    if s.topk is None:
        return flash_decode("attention", s.batch, hq, hkv, s.kv_len, s.head_dim, gpu)
    return kascade_decode(s.batch, hq, hkv, s.kv_len, s.head_dim, s.topk, gpu, anchor=s.anchor)


def kascade_decode(batch: int, hq: int, hkv: int, kv_len: int, head_dim: int, topk: int, gpu: Gpu,
                   *, anchor: bool) -> list[GpuKernel]:
    """Kascade decode attention as PyTorch runs it (``measure.py``'s ``kascade_rows``).

    Reuse layer: gather the anchor's top-k keys and values (two ``gather`` kernels), then
    FA2 decode over them. Anchor layer first scores every key: q.K^T (a GEMV over the cache),
    fp32 softmax summed over the group's heads, top-k selection.
    """
    out: list[GpuKernel] = []
    if anchor:
        g = hq // hkv
        cache = batch * hkv * kv_len * head_dim * BF16
        scores = batch * hq * kv_len
        out.append(streaming("kascade.score", cache + scores * BF16, gpu))
        out.append(streaming("kascade.softmax_sum", scores * (BF16 + 4 + 4 + 4) + scores / g * 4, gpu,
                             launches=3))
        out.append(streaming("kascade.topk", 2 * batch * hkv * kv_len * 4, gpu))
    sel = batch * hkv * topk * head_dim * BF16
    out.append(streaming("kascade.gather", 4 * sel + 2 * batch * hkv * topk * 8, gpu, launches=2))
    out += flash_decode("kascade.attention", batch, hq, hkv, topk, head_dim, gpu)
    return out
