"""vLLM's custom all-reduce on two and four GPUs (runs cw to db): its kernel emulated, and what it is made of.

vLLM's tensor parallelism does not call NCCL for a small all-reduce: on 2, 4, 6 or 8 fully
NVLink-connected GPUs of one node, a buffer under its ``max_size`` (8 MiB by default) goes to its own
kernel (vLLM ``csrc/custom_all_reduce.cuh``, ``vllm/distributed/device_communicators/
custom_all_reduce.py``). This script runs that kernel as vLLM's source writes it, in a CUDA kernel of
ours (CuPy, NVRTC; the two GPUs in one process with peer access, as vLLM's ranks map each other's
buffers through CUDA IPC):

- a grid of ``min(36, ceil(S / 16 / 512))`` blocks of 512 threads (``allreduce``: ``block_limit`` 36,
  ``threads`` 512, 16-byte packs of 8 bf16);
- ``1stage`` (``cross_device_reduce_1stage``, what vLLM runs on two GPUs at every size): every block
  meets the same block of every rank (``barrier_at_start``: thread r stores the block's flag into rank
  r's signal and spins on its own until rank r's arrives), then each thread sums its packs of every
  rank's buffer (the peers' over NVLink, loads of 16 bytes) in fp32 and stores them, then the blocks
  meet again (``barrier_at_end``, the final one: volatile stores);
- ``2stage`` (``cross_device_reduce_2stage``, what vLLM runs on 4-8 GPUs above 512 / 256 KiB): the
  rank's part S / n summed from every rank into its own temporary buffer, a barrier with release /
  acquire (the part visible to the peers), then every rank's part read into the result; no end
  barrier. Measured here on two GPUs, where vLLM itself does not run it, for its mechanism.

Two probes, each its own microbenchmark:

- ``chase``: one thread follows a random cycle of slots 256 bytes apart in the peer's memory
  (``peer``) or its own (``local``), ``CHASE_STEPS`` dependent loads of 4 bytes (``ld.global.cg``), in
  buffers of several sizes: a load's round trip;
- ``pingpong``: one thread on each GPU, a flag stored into the other's memory and the answer awaited
  (volatile, as vLLM's barrier), ``PING_ROUNDS`` rounds: half a round is a flag's way to the peer.

And ``empty``: the ``1stage`` kernel with nothing to sum (the kernel and its two barriers alone).

Each timed row: ``per`` calls back to back on each GPU (one launch each, interleaved), queued behind
a sleep on each GPU so the host is ahead (``_Ar.time_ahead``; run cw had no sleep, and below about
16 us a call its rows timed the host's launches), a CUDA event pair around the calls on each GPU,
the slower GPU's time / ``per``, median of ``reps`` trials; then GPU 0's result is checked against the
sum computed apart (``ok``). A flag wait that passes ``WAIT_NS`` sets an error and the run stops.

Measure (one process, both GPUs; about 20 s on two H200s)::

    python benchmarks/gpu/custom_ar.py --out cx-custom-ar.csv

Run cy (``--run cy``, ``custom_ar_run_cy.sh``): the two-stage kernel's release barrier, frozen
(``--frozen cy``, ``--compare-cy CSV``): run cx's constants and a fence measured apart (run ct). Run cz
(``--run cz``, ``custom_ar_run_cz.sh``, four GPUs): the two-GPU constants frozen where a pass has three
peers' loads (``--frozen cz``, ``--compare-cz CSV``; ``--compare-cz-now CSV`` against the model after run
db). The kernel is ``vllm_ar_n``, vLLM's kernels on n ranks; runs cw-cy ran a two-rank form of it
(``vllm_ar``, this file at 95691ac) that did the same loads, sums, stores and barriers at n = 2. Runs da
and db (``--run da`` / ``db``, ``custom_ar_run_da.sh`` / ``_db.sh``; ``--frozen``, ``--compare-da`` /
``--compare-db``, ``--plot-passes PNG``): ``pass_probe``, vLLM's one-stage loop without barriers, its
threads each loading their own pack and k of the one peer's, on both GPUs at once; a pass is the slope
between two pass counts (what a pass costs by the loads a thread keeps in flight). Run dc (``--run dc``,
``--frozen dc``, ``--compare-dc``): the two-stage kernel's release barrier frozen as a flat fence. Run dd
(``--run dd``, ``--compare-dd``, ``--ptx``): ``vllm_ar_t<N>``, vLLM's kernels as vLLM compiles them (the
ranks a template parameter, the pointers in registers), row by row against ``vllm_ar_n``, and its stage
2 alone (``gather_t``). Runs de and df (``--run de`` / ``df``, ``--frozen``, ``--compare-de`` / ``-df``):
vLLM's compiled form only, its loop as ``pass_t<N>``.

Compare with the model (CPU, rdusim): ``--compare CSV`` calibrates the model's pass, reads' link and
kernel time on three rows (``calibrate``; the flag is the ping-pong's), prints every row against
``rdusim.hw.collectives.custom_ar_cost`` simulated (``rdusim.sim.custom_ar``) and run cx's registered
checks (``h200x2-20261130cx-custom-ar-hypotheses.md``). Run cw's table
(``h200x2-20261130cw-compare.txt``) came from this script at d722dd4, its model then a load's round
trip from the chase and the ring's link. ``--plot CX_CSV NCCL_CSV PNG`` draws docs/img/gpu-custom-ar.png
(run cx's kernels and NCCL's all-reduce on its lease against the GPU document's model).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rdusim.hw.custom_all_reduce import CustomArLink

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp_diag import per_calls  # noqa: E402  (beside this file)

KIB, MIB = 1 << 10, 1 << 20
THREADS = 512  # vLLM's allreduce(): threads = 512
BLOCK_LIMIT = 36  # vLLM's allreduce(): block_limit = 36
PACK = 16  # bytes a thread loads from each rank at once (packed_t: 16 / sizeof(T) elements)
MAX_BLOCKS = 160  # signal slots a GPU keeps (the block sweep goes to 132, one a streaming multiprocessor)
SIZES = tuple(1 << p for p in range(10, 27))  # 1 KiB - 64 MiB
#: the block sweep: (stages, forced block limit, sizes) beside vLLM's own 36
SWEEP = ((1, (4, 8, 16, 72, 132), (2 * MIB, 16 * MIB, 64 * MIB)), (2, (132,), (16 * MIB, 64 * MIB)))
#: run cy (h200x2-20261130cy-custom-ar-hypotheses.md): the two-stage kernel with nothing to sum at these
#: blocks (its release barrier's fence by the blocks fencing), and both kernels at these forced block
#: counts through these sizes (each a grid of the limit: at least limit x 8 KiB), none measured before
CY_EMPTY_BLOCKS = (1, 2, 4, 8, 16, 24, 36, 64)
CY_LIMITS = (2, 6, 12, 24, 48)
CY_SIZES = (384 * KIB, 1536 * KIB, 6 * MIB)
#: run cz (h200x4-20261130cz-custom-ar-hypotheses.md): vLLM's kernels on four GPUs, where a pass has three
#: peers' loads in flight; two stages at these sizes (vLLM's from 512 KiB on four GPUs, two below it), one
#: stage at these forced block counts through 16 MiB
CZ_RANKS = 4
CZ_TWO_STAGE = (16 * KIB, 128 * KIB, 512 * KIB, 1 * MIB, 2 * MIB, 4 * MIB)
CZ_LIMITS = (4, 16, 132)
#: run da (h200x2-20261130da-custom-ar-hypotheses.md): ``pass_probe`` on both GPUs at once, each thread's pass
#: its own pack and k from the peer, k at 512 threads and 4 blocks; the threads and the blocks at k = 1 and 3;
#: each at two passes a block, the pass the slope between them
DA_LOADS = (0, 1, 2, 3, 4, 5, 7)
DA_THREADS = (64, 128, 256)
DA_BLOCKS = (1, 8)
DA_PASSES = (16, 256)
#: run dc (h200x2-20261130dc-custom-ar-hypotheses.md): the two-stage kernel with nothing to sum at these
#: blocks; two stages at these forced block limits through these sizes, at vLLM's grid through the small
#: and the wide sizes; none measured before
DC_EMPTY_BLOCKS = (3, 12, 48)
DC_LIMITS = (1, 3, 8)
DC_SIZES = (48 * KIB, 160 * KIB, 640 * KIB)
DC_VLLM_SIZES = (3 * KIB, 20 * KIB, 100 * KIB)
DC_WIDE = (768 * KIB, 3 * MIB, 6 * MIB)
#: run dd (h200x2-20261130dd-custom-ar-hypotheses.md): each row with both kernels, vllm_ar_n and vLLM's
#: compiled form vllm_ar_t; and vLLM's stage 2 alone (gather_t) at these ranks and blocks, two pass counts each
DD_ONE_STAGE = ((4, 16 * MIB), (BLOCK_LIMIT, 16 * KIB), (BLOCK_LIMIT, 1 * MIB))
DD_GATHER_RANKS = (2, 4, 8)
DD_GATHER_BLOCKS = (1, 4)
#: run de (h200x2-20261130de-custom-ar-hypotheses.md): vLLM's compiled form throughout: pass_t at these
#: (loads, threads, blocks); vllm_ar_t<2> with two stages at these limits through these sizes and at vLLM's grid
#: through the next, with one stage at vLLM's grid through the last; none measured before
DE_PASS_CONFIGS = ((1, 512, 4), (2, 512, 4), (3, 512, 4), (4, 512, 4), (5, 512, 4), (7, 512, 4), (1, 512, 1),
                   (3, 512, 1), (3, 512, 10), (7, 512, 2), (3, 192, 4), (7, 192, 4))
DE_LIMITS = (2, 5, 12)
DE_SIZES = (96 * KIB, 320 * KIB, 1280 * KIB)
DE_VLLM_TWO = (40 * KIB, 200 * KIB, 1536 * KIB, 5 * MIB)
DE_VLLM_ONE = (24 * KIB, 384 * KIB, 3 * MIB)
#: run df (h200x2-20261130df-custom-ar-hypotheses.md): pass_t at (loads, threads, blocks) runs da-de never ran
DF_PASS_CONFIGS = ((2, 512, 3), (3, 512, 3), (5, 512, 3), (6, 512, 3), (2, 512, 6), (3, 512, 6), (5, 512, 6),
                   (6, 512, 6), (7, 512, 1), (7, 512, 12), (3, 256, 4), (7, 256, 4))
#: run dg (h200x4-20261130dg-custom-ar-hypotheses.md, four GPUs): pass_t at (loads, threads, blocks, spread: the
#: loads from that many distinct peers, or all from the next GPU)
DG_PASS_CONFIGS = ((1, 512, 4, False), (3, 512, 4, True), (3, 512, 4, False), (3, 512, 1, True), (3, 512, 10, True))
#: run dh (h200x2-20261130dh-custom-ar-hypotheses.md, a survey): pass_t over loads x blocks at 512 threads
DH_LOADS = (1, 2, 3, 5, 7)
DH_BLOCKS = (1, 2, 4, 8, 16)
#: run di (h200x2-20261130di-custom-ar-hypotheses.md): pass_t at (loads, threads, blocks) runs da-dh never ran: 512
#: threads at these blocks and loads (run df's seven loads at 12 blocks aside), and 384 threads at 8 and 16 blocks
DI_BLOCKS = (5, 7, 12, 20, 28, 36)
DI_LOADS = (1, 2, 3, 4, 6, 7)
DI_PASS_CONFIGS = tuple((k, THREADS, b) for b in DI_BLOCKS for k in DI_LOADS if (k, b) != (7, 12)) + tuple(
    (k, 384, b) for b in (8, 16) for k in (3, 6))
#: the runs whose lone-block passes at 512 threads calibrate run di's line (vLLM's compiled loop)
DI_LINE_RUNS = ("de", "df", "dh")
#: run db (h200x2-20261130db-custom-ar-hypotheses.md): ``pass_probe`` at (loads, threads, blocks) run da never
#: ran: loads at 512 threads and 2-10 blocks, partial passes (192 and 384 threads), vLLM's 36 blocks; run da's
#: k = 1 at 4 blocks again, beside them
DB_CONFIGS = ((1, 512, 4), (6, 512, 4), (2, 512, 2), (4, 512, 2), (2, 512, 10), (4, 512, 10), (2, 192, 4),
              (5, 192, 4), (2, 384, 4), (5, 384, 4), (1, 512, 36), (3, 512, 36), (7, 512, 36))
#: the probes: chase buffers (bytes) and their dependent loads; ping-pong rounds
CHASE_BYTES = (1 * MIB, 16 * MIB, 1024 * MIB)
CHASE_STRIDE = 256
CHASE_STEPS = 4000
PING_ROUNDS = 2000
#: a guess of the kernel's rate (GB/s of S) that caps the calls of a trial (per_calls)
EST_GBPS = 150.0
WAIT_NS = 2_000_000_000
#: run dd: the template instances compiled beside the kernels (NVRTC name expressions)
TEMPLATES = ("vllm_ar_t<2>", "vllm_ar_t<4>", "gather_t<2>", "gather_t<4>", "gather_t<8>")
#: run de: pass_t instances, a thread's own pack and N - 1 of the peer's (vLLM's compiled form of pass_probe)
PASS_TEMPLATES = tuple(f"pass_t<{n}>" for n in (2, 3, 4, 5, 6, 7, 8))
FIELDS = ["kind", "variant", "stages", "limit", "blocks", "bytes", "per", "reps", "median_us", "ok", "gpu", "ranks",
          "threads", "loads", "kernel", "spread"]

KERNEL = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
#define MAXB MAX_BLOCKS_VALUE
#define WAIT_NS WAIT_NS_VALUE

__device__ __forceinline__ u64 now() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ void st_volatile(u32* p, u32 v) {
  asm volatile("st.volatile.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ld_volatile(const u32* p) {
  u32 v; asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ void st_release(u32* p, u32 v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ld_acquire(const u32* p) {
  u32 v; asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
// spin until *p == want (acquire or volatile loads); false, and *err set, after WAIT_NS
__device__ __forceinline__ bool spin(const u32* p, u32 want, bool acquire, int* err) {
  const u64 t0 = now();
  while ((acquire ? ld_acquire(p) : ld_volatile(p)) != want) {
    if (now() - t0 > WAIT_NS) { atomicExch(err, 1); return false; }
  }
  return true;
}

__device__ __forceinline__ u32 bf16r(float f) {  // round to nearest even, the upper 16 bits
  const u32 x = __float_as_uint(f); return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// vLLM's kernels on n ranks (n <= 8): ins, sigs, tmps hold the ranks' device pointers (rank order).
// A signal (u32): start[MAXB][8], end[MAXB][8], the block's own counter [MAXB]. vLLM's barrier_at_start
// (which 0) and barrier_at_end (which 1; release / acquire unless final)
__device__ __forceinline__ void barrier_n(const u64* sigs, int n, int rank, int which, bool release, int* err) {
  u32* const self = (u32*)sigs[rank];
  const int b = blockIdx.x;
  if (which == 1) __syncthreads();
  const u32 flag = self[2 * MAXB * 8 + b] + 1;
  if (threadIdx.x < n) {
    u32* const slot = (u32*)sigs[threadIdx.x] + which * MAXB * 8 + b * 8 + rank;
    const u32* const mine = self + which * MAXB * 8 + b * 8 + threadIdx.x;
    if (release) st_release(slot, flag); else st_volatile(slot, flag);
    spin(mine, flag, release, err);
  }
  __syncthreads();
  if (threadIdx.x == 0) self[2 * MAXB * 8 + b] = flag;
}
__device__ __forceinline__ void acc8(float* a, uint4 v, bool first) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float lo = __uint_as_float(w[j] << 16), hi = __uint_as_float(w[j] & 0xffff0000u);
    a[2 * j] = first ? lo : a[2 * j] + lo;
    a[2 * j + 1] = first ? hi : a[2 * j + 1] + hi;
  }
}
// the n ranks' packs i summed in fp32 from rank `first` on (vLLM's packed_reduce), every load issued first
__device__ __forceinline__ uint4 sum_n(const u64* ins, int n, int first, long long i) {
  uint4 v[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) if (k < n) v[k] = ((const uint4*)ins[(first + k) % n])[i];
  float a[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) if (k < n) acc8(a, v[k], k == 0);
  return make_uint4((bf16r(a[1]) << 16) | bf16r(a[0]), (bf16r(a[3]) << 16) | bf16r(a[2]),
                    (bf16r(a[5]) << 16) | bf16r(a[4]), (bf16r(a[7]) << 16) | bf16r(a[6]));
}
extern "C" __global__ void __launch_bounds__(512, 1)
vllm_ar_n(const u64* ins, const u64* sigs, const u64* tmps, uint4* __restrict__ result, int n, int rank,
          long long packs, int stages, int* err) {
  if (*err) return;
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  barrier_n(sigs, n, rank, 0, false, err);
  if (stages == 1) {
    for (long long i = tid; i < packs; i += stride) result[i] = sum_n(ins, n, 0, i);
    barrier_n(sigs, n, rank, 1, false, err);
  } else {
    const long long part = packs / n, start = rank * part, end = rank == n - 1 ? packs : start + part;
    uint4* const mine = (uint4*)tmps[rank];
    for (long long i = start + tid; i < end; i += stride) mine[i - start] = sum_n(ins, n, rank, i);
    barrier_n(sigs, n, rank, 1, true, err);
    for (long long i = tid; i < part; i += stride) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if (k < n) { const int r = (rank + k) % n; result[r * part + i] = ((const uint4*)tmps[r])[i]; }
      }
    }
  }
}

// run da: vLLM's one-stage loop with no barriers, n - 1 loads of a pass from the tables' peer slices
// (ins[0] the GPU's own input): what a block's pass costs by the bytes it keeps in flight
extern "C" __global__ void __launch_bounds__(512, 1)
pass_probe(const u64* ins, uint4* __restrict__ result, int n, long long packs) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += stride)
    result[i] = sum_n(ins, n, 0, i);
}

// run dd: vLLM's kernels as vLLM compiles them, ngpus a template parameter: the ranks' pointers held in
// registers (rank order rotated to start at the GPU's own), every loop over the ranks unrolled
// (cross_device_reduce_1stage / _2stage with packed_reduce)
template <int N>
__device__ __forceinline__ uint4 sum_t(const uint4* const* ptrs, long long i) {
  uint4 v[N];
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = ptrs[k][i];
  float a[8];
#pragma unroll
  for (int k = 0; k < N; ++k) acc8(a, v[k], k == 0);
  return make_uint4((bf16r(a[1]) << 16) | bf16r(a[0]), (bf16r(a[3]) << 16) | bf16r(a[2]),
                    (bf16r(a[5]) << 16) | bf16r(a[4]), (bf16r(a[7]) << 16) | bf16r(a[6]));
}
template <int N>
__global__ void __launch_bounds__(512, 1)
vllm_ar_t(const u64* ins, const u64* sigs, const u64* tmps, uint4* __restrict__ result, int rank,
          long long packs, int stages, int* err) {
  if (*err) return;
  const uint4* ptrs[N];
  uint4* tp[N];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int target = (rank + i) % N;
    ptrs[i] = (const uint4*)ins[target];
    tp[i] = (uint4*)tmps[target];
  }
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long stride = (long long)gridDim.x * blockDim.x;
  barrier_n(sigs, N, rank, 0, false, err);
  if (stages == 1) {
    for (long long i = tid; i < packs; i += stride) result[i] = sum_t<N>(ptrs, i);
    barrier_n(sigs, N, rank, 1, false, err);
    return;
  }
  const long long part = packs / N, start = rank * part, end = rank == N - 1 ? packs : start + part;
  const long long largest = part + packs % N;
  for (long long i = start + tid; i < end; i += stride) tp[0][i - start] = sum_t<N>(ptrs, i);
  barrier_n(sigs, N, rank, 1, true, err);
  for (long long idx = tid; idx < largest; idx += stride) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int g = (rank + i) % N;
      if (g == N - 1 || idx < part) result[g * part + idx] = tp[i][idx];
    }
  }
}
// run dd: vLLM's stage 2 alone (its gather, as vllm_ar_t writes it): N parts from the table (the GPU's own,
// then slices of the peer's), each thread's pack of every part stored into the result; `largest` the loop's
// end as vLLM's (here = part)
template <int N>
__global__ void __launch_bounds__(512, 1)
gather_t(const u64* tabs, uint4* __restrict__ result, long long part, long long largest) {
  uint4* tp[N];
#pragma unroll
  for (int i = 0; i < N; ++i) tp[i] = (uint4*)tabs[i];
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < largest; idx += stride) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i == N - 1 || idx < part) result[i * part + idx] = tp[i][idx];
    }
  }
}

// run de: pass_probe as vLLM compiles its loop: N packs a thread (its own, then N - 1 of the peer's slices),
// the pointers in registers, packed_reduce unrolled over N
template <int N>
__global__ void __launch_bounds__(512, 1)
pass_t(const u64* ins, uint4* __restrict__ result, long long packs) {
  const uint4* ptrs[N];
#pragma unroll
  for (int i = 0; i < N; ++i) ptrs[i] = (const uint4*)ins[i];
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += stride)
    result[i] = sum_t<N>(ptrs, i);
}

// one thread spins for `ns` nanoseconds: the GPU busy while the host queues a trial's calls
extern "C" __global__ void sleep_ns(long long ns) {
  const u64 t0 = now();
  while ((long long)(now() - t0) < ns) {}
}

// one thread: `steps` dependent loads through the cycle in `next` (u32 indices); ns on out[0]
extern "C" __global__ void chase(const u32* next, long long steps, u64* out) {
  u32 i = 0;
  const u64 t0 = now();
  for (long long s = 0; s < steps; ++s) {
    u32 v; asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(next + i) : "memory"); i = v;
  }
  out[0] = now() - t0; out[1] = i;
}

// one thread on each GPU: `rounds` flags there and back (GPU 0 leads); ns on out[0]
extern "C" __global__ void pingpong(u32* mine, u32* peer, u32 base, int rounds, int lead, u64* out, int* err) {
  const u64 t0 = now();
  for (int r = 1; r <= rounds; ++r) {
    if (lead) { st_volatile(peer, base + r); if (!spin(mine, base + r, false, err)) break; }
    else { if (!spin(mine, base + r, false, err)) break; st_volatile(peer, base + r); }
  }
  out[0] = now() - t0;
}
""".replace("MAX_BLOCKS_VALUE", str(MAX_BLOCKS)).replace("WAIT_NS_VALUE", f"{WAIT_NS}ull")


def vllm_blocks(size: int, limit: int = BLOCK_LIMIT) -> int:
    """vLLM's grid: ``min(block_limit, ceil(packs / threads))``, at least one block."""
    return max(1, min(limit, -(-size // PACK // THREADS)))


def _row_plan(kind: str, stages: int, limit: int, size: int, per: int, reps: int, ranks: int = 2) -> dict:
    """One timed row: its variant, vLLM's grid at the block limit, and the calls a trial (``per_calls``)."""
    n = per_calls(max(size, 1), per, EST_GBPS)
    variant = f"{stages}stage-b{limit}" if kind == "ar" else f"empty{'2' if stages == 2 else ''}-b{limit}"
    return {"kind": kind, "variant": variant, "stages": stages, "limit": limit,
            "blocks": vllm_blocks(size, limit) if size else limit, "bytes": size, "per": n,
            "reps": reps if n >= 4 else max(3, reps // 2), "ranks": ranks}


def _pass_row(loads: int, threads: int, blocks: int, passes: int, per: int, reps: int) -> dict:
    """One timed row of run da: ``pass_probe`` with ``loads`` peer loads a thread, ``passes`` a block."""
    size = passes * blocks * threads * PACK
    n = per_calls(size, per, EST_GBPS)
    return {"kind": "pass", "variant": f"pass-k{loads}-t{threads}-b{blocks}", "stages": "", "limit": blocks,
            "blocks": blocks, "bytes": size, "per": n, "reps": reps if n >= 4 else max(3, reps // 2), "ranks": 2,
            "threads": threads, "loads": loads}


def da_configs() -> list[tuple[int, int, int]]:
    """Run da's (loads, threads, blocks): the loads at 512 threads and 4 blocks, then the threads and the
    blocks at one and three loads."""
    cfgs = [(k, THREADS, 4) for k in DA_LOADS]
    cfgs += [(k, t, 4) for k in (1, 3) for t in DA_THREADS]
    return cfgs + [(k, THREADS, b) for k in (1, 3) for b in DA_BLOCKS]


def _cz_keys() -> list[tuple]:
    """Runs cz's and dg's rows on four GPUs: one stage at 36 blocks from 1 KiB to 16 MiB (vLLM runs it under
    512 KiB there), two stages at ``CZ_TWO_STAGE`` (vLLM's from 512 KiB), one stage at ``CZ_LIMITS``
    blocks through 16 MiB, and the kernel alone with one and two stages."""
    keys = [("ar", 1, BLOCK_LIMIT, size) for size in SIZES if size <= 16 * MIB]
    keys += [("ar", 2, BLOCK_LIMIT, size) for size in CZ_TWO_STAGE]
    keys += [("ar", 1, limit, 16 * MIB) for limit in CZ_LIMITS]
    return keys + [("empty", stages, BLOCK_LIMIT, 0) for stages in (1, 2)]


def _passes(cfgs, per: int, reps: int, kernel: str | None = None) -> list[dict]:
    """A run's ``pass_probe`` / ``pass_t`` rows: each (loads, threads, blocks) at both pass counts."""
    extra = {"kernel": kernel} if kernel else {}
    return [{**_pass_row(*cfg, passes, per, reps), **extra} for cfg in cfgs for passes in DA_PASSES]


def _plan_cx(per: int, reps: int) -> list[dict]:
    keys = [("ar", stages, BLOCK_LIMIT, size) for stages in (1, 2) for size in SIZES]
    keys += [("ar", stages, limit, size) for stages, limits, sizes in SWEEP for limit in limits for size in sizes]
    keys += [("empty", 1, limit, 0) for limit in (1, BLOCK_LIMIT)]
    return [_row_plan(*key, per, reps) for key in keys]


def _plan_cy(per: int, reps: int) -> list[dict]:
    keys = [("empty", 2, limit, 0) for limit in CY_EMPTY_BLOCKS]
    keys += [("ar", stages, limit, size) for stages in (2, 1) for limit in CY_LIMITS for size in CY_SIZES]
    return [_row_plan(*key, per, reps) for key in keys]


def _plan_dc(per: int, reps: int) -> list[dict]:
    keys = [("empty", 2, limit, 0) for limit in DC_EMPTY_BLOCKS]
    keys += [("ar", 2, limit, size) for limit in DC_LIMITS for size in DC_SIZES]
    keys += [("ar", 2, BLOCK_LIMIT, size) for size in DC_VLLM_SIZES + DC_WIDE]
    return [_row_plan(*key, per, reps) for key in keys]


def _plan_dd(per: int, reps: int) -> list[dict]:
    keys = [("ar", 2, limit, size) for limit in DC_LIMITS for size in DC_SIZES]
    keys += [("ar", 2, BLOCK_LIMIT, size) for size in (3 * KIB, 100 * KIB, 768 * KIB, 6 * MIB)]
    keys += [("ar", 1, limit, size) for limit, size in DD_ONE_STAGE]
    keys += [("empty", stages, BLOCK_LIMIT, 0) for stages in (2, 1)]
    rows = [{**_row_plan(*key, per, reps), "kernel": kernel} for key in keys for kernel in ("n", "t")]
    for ranks in DD_GATHER_RANKS:
        for blocks in DD_GATHER_BLOCKS:
            for passes in DA_PASSES:
                row = _pass_row(ranks, THREADS, blocks, passes, per, reps)
                rows.append({**row, "kind": "gather", "variant": f"gather-n{ranks}-b{blocks}", "kernel": "t"})
    return rows + _passes([(0, THREADS, blocks) for blocks in DD_GATHER_BLOCKS], per, reps)


def _plan_de(per: int, reps: int) -> list[dict]:
    keys = [("ar", 2, limit, size) for limit in DE_LIMITS for size in DE_SIZES]
    keys += [("ar", 2, BLOCK_LIMIT, size) for size in DE_VLLM_TWO]
    keys += [("ar", 1, BLOCK_LIMIT, size) for size in DE_VLLM_ONE]
    keys += [("empty", stages, BLOCK_LIMIT, 0) for stages in (2, 1)]
    return _passes(DE_PASS_CONFIGS, per, reps, "t") + [{**_row_plan(*key, per, reps), "kernel": "t"} for key in keys]


def _plan_dg(per: int, reps: int) -> list[dict]:
    rows = [{**_row_plan(*key, per, reps, CZ_RANKS), "kernel": "t"} for key in _cz_keys()]
    for k, t, b, spread in DG_PASS_CONFIGS:
        for passes in DA_PASSES:
            row = {**_pass_row(k, t, b, passes, per, reps), "kernel": "t", "ranks": CZ_RANKS, "spread": spread}
            rows.append({**row, "variant": row["variant"] + ("-spread" if spread else "")})
    return rows


#: each run's rows (``plan``)
_PLANS = {
    "cx": _plan_cx, "cy": _plan_cy, "dc": _plan_dc, "dd": _plan_dd, "de": _plan_de, "dg": _plan_dg,
    "cz": lambda per, reps: [_row_plan(*key, per, reps, CZ_RANKS) for key in _cz_keys()],
    "da": lambda per, reps: _passes(da_configs(), per, reps),
    "db": lambda per, reps: _passes(DB_CONFIGS, per, reps),
    "df": lambda per, reps: _passes(DF_PASS_CONFIGS, per, reps, "t"),
    "dh": lambda per, reps: _passes([(k, THREADS, b) for b in DH_BLOCKS for k in DH_LOADS], per, reps, "t"),
    "di": lambda per, reps: _passes(DI_PASS_CONFIGS, per, reps, "t"),
}


def plan(per: int, reps: int, run: str = "cx") -> list[dict]:
    """The timed rows (kind, stages, block limit, bytes) of a run (``_PLANS``). Runs cw and cx: vLLM's two
    kernels at its own grid over ``SIZES``, the block sweep, and the empty kernel at 1 and 36 blocks. Run
    cy: the two-stage kernel with nothing to sum at ``CY_EMPTY_BLOCKS`` blocks, and both kernels at
    ``CY_LIMITS`` blocks through ``CY_SIZES``. Runs cz and dg, on ``CZ_RANKS`` GPUs: ``_cz_keys`` (dg with
    vLLM's compiled kernel, and ``pass_t``). Runs da-df: their hypotheses files."""
    return _PLANS[run](per, reps)


def chase_cycle(size: int, stride: int = CHASE_STRIDE, seed: int = 0):
    """One random cycle through the buffer's slots (``stride`` bytes apart, in a random order, so every
    slot is on it): a uint32 array of ``size`` bytes where a slot's first word is the next slot's index."""
    import numpy as np

    step = stride // 4
    order = np.random.default_rng(seed).permutation(size // stride).astype(np.uint32) * np.uint32(step)
    nxt = np.zeros(size // 4, dtype=np.uint32)
    nxt[order] = np.roll(order, -1)
    return nxt


class _Ar:  # pragma: no cover - needs GPUs with peer access
    """Every GPU's buffers, signals and kernels, a stream each (two GPUs: runs cw-cy; ``gpus`` of them: run cz)."""

    def __init__(self, biggest: int, gpus: int = 2):
        import cupy as cp
        import numpy as np

        self.cp, rt, self.n = cp, cp.cuda.runtime, gpus
        devs = range(gpus)
        assert rt.getDeviceCount() >= gpus, f"{gpus} GPUs needed"
        assert all(rt.deviceCanAccessPeer(a, b) for a in devs for b in devs if a != b), "no peer access"
        self.inp, self.out, self.tmp, self.sig, self.err, self.stream, self.fn = {}, {}, {}, {}, {}, {}, {}
        words = biggest // 2  # bf16 elements as uint16
        for d in devs:
            with cp.cuda.Device(d):
                for peer in devs:
                    if peer != d:
                        rt.deviceEnablePeerAccess(peer)
                rng = cp.random.default_rng(d)
                vals = rng.standard_normal(words, dtype=cp.float32)
                self.inp[d] = (vals.view(cp.uint32) >> 16).astype(cp.uint16)  # bf16 by truncation
                self.out[d] = cp.zeros(words, dtype=cp.uint16)
                self.tmp[d] = cp.zeros(words // 2 + 8, dtype=cp.uint16)
                self.sig[d] = cp.zeros(2 * MAX_BLOCKS * 8 + MAX_BLOCKS, dtype=cp.uint32)
                self.err[d] = cp.zeros(1, dtype=cp.int32)
                mod = cp.RawModule(code=KERNEL, name_expressions=TEMPLATES + PASS_TEMPLATES)
                self.fn[d] = {name: mod.get_function(name) for name in
                              ("vllm_ar_n", "pass_probe", "chase", "pingpong", "sleep_ns", *TEMPLATES, *PASS_TEMPLATES)}
                self.stream[d] = cp.cuda.Stream(non_blocking=True)
        self.ptrs = {}  # each GPU's copy of the ranks' pointers (inputs, signals, temporaries)
        for d in devs:
            with cp.cuda.Device(d):
                self.ptrs[d] = tuple(cp.asarray(np.array([a[r].data.ptr for r in devs], dtype=np.uint64))
                                     for a in (self.inp, self.sig, self.tmp))
        self.gpu = rt.getDeviceProperties(0)["name"].decode()
        self.ping_base = 0

    def _check_err(self) -> None:
        for d in range(self.n):
            with self.cp.cuda.Device(d):
                if int(self.err[d][0]) != 0:
                    raise RuntimeError(f"GPU {d}: a flag wait passed {WAIT_NS} ns (a hang): stopping")

    def launches(self, stages: int, blocks: int, packs: int, count: int, kernel: str = "n") -> None:
        """``count`` calls on every GPU: ``vllm_ar_n`` (kernel "n", the ranks a runtime argument) or
        ``vllm_ar_t<n>`` (kernel "t", run dd: the ranks a template parameter, as vLLM compiles it)."""
        import numpy as np

        for _ in range(count):
            for d in range(self.n):
                with self.cp.cuda.Device(d):
                    if kernel == "t":
                        args = (*self.ptrs[d], self.out[d], np.int32(d), np.int64(packs), np.int32(stages),
                                self.err[d])
                        self.fn[d][f"vllm_ar_t<{self.n}>"]((blocks,), (THREADS,), args, stream=self.stream[d])
                        continue
                    args = (*self.ptrs[d], self.out[d], np.int32(self.n), np.int32(d), np.int64(packs),
                            np.int32(stages), self.err[d])
                    self.fn[d]["vllm_ar_n"]((blocks,), (THREADS,), args, stream=self.stream[d])

    def pass_sources(self, d: int, loads: int, spread: bool) -> list[tuple[int, int]]:
        """The (GPU, slice) a pass's loads read on GPU ``d``: ``loads`` slices of the next GPU's input one
        after the other, or (``spread``, run dg) the first slice of each of the next ``loads`` GPUs."""
        return [((d + 1 + j) % self.n, 0) if spread else ((d + 1) % self.n, j) for j in range(loads)]

    def pass_tables(self, loads: int, size: int, spread: bool = False) -> dict:
        """Runs da-dg: each GPU's table for ``pass_probe`` / ``pass_t``: its own input, then its loads'
        slices of ``size`` bytes (``pass_sources``)."""
        import numpy as np

        tables = {}
        for d in range(self.n):
            with self.cp.cuda.Device(d):
                ptrs = [self.inp[d].data.ptr] + [self.inp[g].data.ptr + j * size
                                                 for g, j in self.pass_sources(d, loads, spread)]
                tables[d] = self.cp.asarray(np.array(ptrs, dtype=np.uint64))
        return tables

    def time_pass(self, r: dict) -> tuple[float, bool]:
        """Runs da-de's row: ``pass_probe`` (kernel "n") or ``pass_t<k + 1>`` (kernel "t", run de) on both GPUs
        at once, each reading the other's slices."""
        import numpy as np

        spread = bool(r.get("spread"))
        tables, packs = self.pass_tables(r["loads"], r["bytes"], spread), r["bytes"] // PACK
        compiled = r.get("kernel") == "t"

        def launch(count: int) -> None:
            for _ in range(count):
                for d in range(self.n):
                    with self.cp.cuda.Device(d):
                        fn, args = ((self.fn[d][f"pass_t<{r['loads'] + 1}>"], (tables[d], self.out[d], np.int64(packs)))
                                    if compiled else (self.fn[d]["pass_probe"], (tables[d], self.out[d],
                                                                                  np.int32(r["loads"] + 1),
                                                                                  np.int64(packs))))
                        fn((r["blocks"],), (r["threads"],), args, stream=self.stream[d])

        launch(2)
        for d in range(self.n):
            self.stream[d].synchronize()
        us = self.time_ahead(lambda: launch(r["per"]), r["per"], r["reps"])
        return us, self.correct_pass(r["loads"], r["bytes"], spread)

    def correct_pass(self, loads: int, size: int, spread: bool = False) -> bool:
        """GPU 0's result against its own input and its loads' slices summed in fp32 apart."""
        cp, n = self.cp, size // 2
        with cp.cuda.Device(0):
            parts = [self.inp[0][:n]] + [cp.array(self.inp[g][j * n:(j + 1) * n])
                                         for g, j in self.pass_sources(0, loads, spread)]
            want = sum((p.astype(cp.uint32) << 16).view(cp.float32) for p in parts)
            got = (self.out[0][:n].astype(cp.uint32) << 16).view(cp.float32)
            return bool(cp.all(cp.abs(got - want) <= 1e-2 * cp.abs(want) + 1e-6))

    def time_gather(self, r: dict) -> tuple[float, bool]:
        """Run dd's gather row: ``gather_t<N>`` on both GPUs at once, each its own part and N - 1 slices of
        the other's input; GPU 0's result checked against those parts."""
        import numpy as np

        ranks, part = r["loads"], r["bytes"] // PACK
        tables = self.pass_tables(ranks - 1, r["bytes"])

        def launch(count: int) -> None:
            for _ in range(count):
                for d in range(self.n):
                    with self.cp.cuda.Device(d):
                        self.fn[d][f"gather_t<{ranks}>"]((r["blocks"],), (r["threads"],),
                                                        (tables[d], self.out[d], np.int64(part), np.int64(part)),
                                                        stream=self.stream[d])

        launch(2)
        for d in range(self.n):
            self.stream[d].synchronize()
        us = self.time_ahead(lambda: launch(r["per"]), r["per"], r["reps"])
        cp, n = self.cp, r["bytes"] // 2
        with cp.cuda.Device(0):
            ok = bool(cp.all(self.out[0][:n] == self.inp[0][:n]))
            ok = ok and bool(cp.all(self.out[0][n:2 * n] == cp.array(self.inp[1][:n])))
        return us, ok

    def time_row(self, r: dict) -> tuple[float, bool]:
        if r["kind"] == "pass":
            return self.time_pass(r)
        if r["kind"] == "gather":
            return self.time_gather(r)
        packs, kernel = r["bytes"] // PACK, r.get("kernel") or "n"
        self.launches(r["stages"], r["blocks"], packs, 2, kernel)
        for d in range(self.n):
            self.stream[d].synchronize()
        self._check_err()
        us = self.time_ahead(lambda: self.launches(r["stages"], r["blocks"], packs, r["per"], kernel), r["per"],
                             r["reps"])
        self._check_err()
        return us, self.correct(r["bytes"])

    def time_ahead(self, launch, per: int, reps: int) -> float:
        """Us a call with the host ahead of the GPUs (run cx): each trial first keeps every GPU busy
        (``sleep_ns``, 2 ms plus 40 us a call a GPU: longer than the host takes to queue the calls), then
        an event pair on each GPU around the ``per`` calls; the slowest GPU's time / ``per``, median
        of ``reps`` trials. Run cw timed without the sleep: below about 16 us a call the host's
        launches of the two GPUs' calls set the pace, not the kernel."""
        import numpy as np

        cp, times, devs = self.cp, [], range(self.n)
        for _ in range(reps):
            ev = {}
            for d in devs:
                with cp.cuda.Device(d):
                    self.fn[d]["sleep_ns"]((1,), (1,), (np.int64(2_000_000 + 20_000 * self.n * per),),
                                           stream=self.stream[d])
                    ev[d] = (cp.cuda.Event(), cp.cuda.Event())
                    ev[d][0].record(self.stream[d])
            launch()
            for d in devs:
                with cp.cuda.Device(d):
                    ev[d][1].record(self.stream[d])
            for d in devs:
                ev[d][1].synchronize()
            times.append(max(cp.cuda.get_elapsed_time(*ev[d]) for d in devs) * 1e3 / per)
        return statistics.median(times)

    def correct(self, size: int) -> bool:
        """GPU 0's result against every rank's input summed in fp32 and rounded to bf16 apart."""
        cp = self.cp
        if not size:
            return True
        n = size // 2
        with cp.cuda.Device(0):
            want = sum((cp.array(self.inp[r][:n]).astype(cp.uint32) << 16).view(cp.float32) for r in range(self.n))
            got = (self.out[0][:n].astype(cp.uint32) << 16).view(cp.float32)
            return bool(cp.all(cp.abs(got - want) <= 1e-2 * cp.abs(want) + 1e-6))

    def chase_ns(self, where: str, size: int) -> float:
        """ns a dependent load, GPU 0's thread through a cycle in GPU 1's memory (peer) or its own."""
        import numpy as np

        cp, owner = self.cp, 1 if where == "peer" else 0
        with cp.cuda.Device(owner):
            nxt = cp.asarray(chase_cycle(size))
        with cp.cuda.Device(0):
            out = cp.zeros(2, dtype=cp.uint64)
            f = self.fn[0]["chase"]
            f((1,), (1,), (nxt, np.int64(CHASE_STEPS // 4), out))  # warm-up
            cp.cuda.Device(0).synchronize()
            times = []
            for _ in range(5):
                f((1,), (1,), (nxt, np.int64(CHASE_STEPS), out))
                cp.cuda.Device(0).synchronize()
                times.append(int(out[0]) / CHASE_STEPS)
        del nxt
        return statistics.median(times)

    def pingpong_ns(self) -> float:
        """ns one way: half a round of GPU 0's flag to GPU 1 and back, median of 5 runs."""
        import numpy as np

        cp = self.cp
        flags, outs = {}, {}
        for d in (0, 1):
            with cp.cuda.Device(d):
                flags[d] = cp.zeros(32, dtype=cp.uint32)
                outs[d] = cp.zeros(1, dtype=cp.uint64)
        times = []
        for _ in range(6):
            for d in (1, 0):  # the follower first, so it waits
                with cp.cuda.Device(d):
                    self.fn[d]["pingpong"](
                        (1,), (1,), (flags[d], flags[1 - d], np.uint32(self.ping_base), np.int32(PING_ROUNDS),
                                     np.int32(d == 0), outs[d], self.err[d]), stream=self.stream[d])
            for d in (0, 1):
                self.stream[d].synchronize()
            self._check_err()
            self.ping_base += PING_ROUNDS
            times.append(int(outs[0][0]) / PING_ROUNDS / 2)
        return statistics.median(times[1:])


def dump_ptx(path: str) -> int:  # pragma: no cover - NVRTC
    """Run dd: the PTX NVRTC makes of ``KERNEL`` and its template instances (for the GPU it runs on), to
    read the order of each kernel's loads and stores."""
    from cupy.cuda import compiler

    try:
        got = compiler.compile_using_nvrtc(KERNEL, name_expressions=TEMPLATES)
        ptx = got[0] if isinstance(got, tuple) else got
        if isinstance(ptx, bytes) and ptx.startswith(b"\x7fELF"):  # run dd: NVRTC gave a cubin (cuobjdump reads it)
            Path(path).with_suffix(".cubin").write_bytes(ptx)
            return 0
        Path(path).write_text(ptx.decode() if isinstance(ptx, bytes) else str(ptx))
    except Exception as exc:  # noqa: BLE001 - the run goes on; the file says why
        Path(path).write_text(f"// no PTX: {exc!r}\n")
    return 0


def _run(rows: list[dict], out: str) -> int:  # pragma: no cover - GPUs
    ar = _Ar(max(r["bytes"] * max(1, r.get("loads", 1)) for r in rows), rows[0]["ranks"])
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()

        def put(row: dict) -> None:
            writer.writerow({**row, "gpu": ar.gpu})
            fh.flush()

        one_way = ar.pingpong_ns()
        put({"kind": "pingpong", "variant": "flag", "median_us": round(one_way / 1e3, 4), "per": PING_ROUNDS,
             "reps": 5, "ok": True, "stages": "", "limit": "", "blocks": 1, "bytes": 4})
        print(f"pingpong one way {one_way:.0f} ns", flush=True)
        for where in ("peer", "local"):
            for size in CHASE_BYTES:
                ns = ar.chase_ns(where, size)
                put({"kind": "chase", "variant": where, "median_us": round(ns / 1e3, 4), "per": CHASE_STEPS,
                     "reps": 5, "ok": True, "stages": "", "limit": "", "blocks": 1, "bytes": size})
                print(f"chase {where:5s} {size // MIB:5d} MiB {ns:7.0f} ns a load", flush=True)
        for r in rows:
            us, ok = ar.time_row(r)
            put({**r, "median_us": round(us, 3), "ok": ok})
            print(f"{r['variant']:14s} {r.get('kernel', ''):1s} {r['bytes']:>10d} B blocks {r['blocks']:3d} {us:9.2f} us ok={ok} "
                  f"(per {r['per']})", flush=True)
    return 0


# --- analysis (CPU, rdusim) -----------------------------------------------------------------

#: run cx's calibration rows (registered before it): the empty kernel at vLLM's 36 blocks (the kernel's
#: fixed time, its two barriers at the ping-pong's flag aside), four blocks through 16 MiB (512 passes of
#: a block far from filling the link: the pass), 132 blocks through 64 MiB (the reads' link, full)
CALIBRATION = {("empty-b36", 0), ("1stage-b4", 16 * MIB), ("1stage-b132", 64 * MIB)}
#: run cx's registered checks (h200x2-20261130cx-custom-ar-hypotheses.md): rows, median / worst abs error
CHECKS = {
    "C1": ("vLLM's kernel where vLLM runs it on two GPUs: 1stage-b36, 1 KiB-4 MiB", 10.0, 25.0),
    "C2": ("the block sweep: 1stage at 4-132 blocks, 2-64 MiB, calibration rows aside", 15.0, 30.0),
    "C3": ("two stages: 2stage-b36, 1 KiB-4 MiB", 15.0, 30.0),
    "C4": ("the empty kernel at one block", 25.0, 25.0),
    "C5": ("past vLLM's 8 MiB: 1stage-b36 and 2stage-b36 at 8-64 MiB, 2stage-b132", 15.0, 30.0),
}


def load(path: str) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _row(rows: list[dict], variant: str, size: int) -> float:
    """A timed row's us."""
    for r in rows:
        if r["variant"] == variant and int(r["bytes"]) == size:
            return float(r["median_us"])
    raise SystemExit(f"the CSV has no {variant} row at {size} bytes")


def flag_s(rows: list[dict]) -> float:
    """The ping-pong's one way, seconds."""
    flag = [r for r in rows if r["kind"] == "pingpong"]
    if not flag:
        raise SystemExit("the CSV has no ping-pong row")
    return float(flag[0]["median_us"]) * 1e-6


def predicted_us(row: dict, link) -> float:
    """The model's time of one timed row (``rdusim.analysis.gpu.collectives.custom_ar_row_us``)."""
    from rdusim.analysis.gpu.collectives import custom_ar_row_us

    return custom_ar_row_us(row, link)


def calibrate(rows: list[dict]):
    """The model's link from a CSV (``CALIBRATION``): the flag from the ping-pong, a load's round trip
    from the chase through the peer's 16 MiB (both measured); the kernel's fixed time the empty kernel's
    less two flags; the pass the four-block 16 MiB row's time beyond the empty kernel's over its 512
    passes, a load's round trip and one load a thread (two GPUs: one peer), so its cost a load is the
    pass less the chase; the reads' link where the model takes the 132-block 64 MiB row's time
    (geometric bisection to a part in 10^9)."""
    from rdusim.hw.custom_all_reduce import CustomArLink

    flag = flag_s(rows)
    empty = _row(rows, "empty-b36", 0) * 1e-6
    passes = 16 * MIB // PACK // (4 * THREADS)
    pass_s = (_row(rows, "1stage-b4", 16 * MIB) * 1e-6 - empty) / passes
    load_s = chase_us(rows) * 1e-6
    link = CustomArLink(load_s, pass_s - load_s, flag, 1e9, empty - 2 * flag, queue=False)
    want = _row(rows, "1stage-b132", 64 * MIB)
    row = {"kind": "ar", "bytes": 64 * MIB, "stages": 1, "limit": 132}
    lo, hi = 1e10, 1e13
    while hi > lo * (1 + 1e-9):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if predicted_us(row, dataclasses.replace(link, read_bytes_per_s=mid)) > want else (lo, mid)
    return dataclasses.replace(link, read_bytes_per_s=(lo * hi) ** 0.5)


def check_of(row: dict) -> str | None:
    """Which registered check a timed row belongs to (``CHECKS``), if any; None for a calibration row."""
    size, variant = int(row["bytes"]), row["variant"]
    if (variant, size) in CALIBRATION:
        return None
    if row["kind"] == "empty":
        return "C4"
    if variant in ("1stage-b36", "2stage-b36") and size <= 4 * MIB:
        return "C1" if variant == "1stage-b36" else "C3"
    if variant in ("1stage-b36", "2stage-b36", "2stage-b132") and size >= 8 * MIB:
        return "C5" if variant != "1stage-b36" or size not in (16 * MIB, 64 * MIB) else "C2"
    if row["stages"] == "1" and size >= 2 * MIB:
        return "C2"
    return None


def check_lines(checks: dict[str, tuple[str, float, float]], errs: dict[str, list[float]]) -> list[str]:
    """The registered checks' table: each check's rows, median abs and worst error against its bounds."""
    lines = ["", "| check | what | rows | median | worst | registered (median / worst) | passes |",
             "|---|---|---:|---:|---:|---|---|"]
    for key, (what, med_max, worst_max) in checks.items():
        e = errs[key]
        if not e:
            lines.append(f"| {key} | {what} | 0 | - | - | {med_max:g}% / {worst_max:g}% | no rows |")
            continue
        med = statistics.median(abs(x) for x in e) * 100
        worst = max(e, key=abs) * 100
        ok = med <= med_max and abs(worst) <= worst_max
        lines.append(f"| {key} | {what} | {len(e)} | {med:.1f}% | {worst:+.1f}% | {med_max:g}% / {worst_max:g}% | "
                     f"{'yes' if ok else 'no'} |")
    return lines


def compare(path: str) -> list[str]:
    """Every timed row against the model calibrated on the CSV's own three rows, and the checks."""
    rows = load(path)
    link = calibrate(rows)
    lines = [f"# {path}: calibrated on {', '.join(f'{v} {b // MIB} MiB' for v, b in sorted(CALIBRATION))}: pass "
             f"{link.pass_at(1) * 1e6:.3f} us, reads {link.read_bytes_per_s / 1e9:.1f} GB/s, kernel "
             f"{link.kernel_s * 1e6:.3f} us; flag {link.flag_s * 1e6:.3f} us (ping-pong, one way)", "",
             "| probe | bytes | us |", "|---|---:|---:|"]
    lines += [f"| {r['kind']} {r['variant']} | {r['bytes']} | {float(r['median_us']):.3f} |"
              for r in rows if r["kind"] in ("chase", "pingpong")]
    lines += ["", "| row | bytes | blocks | measured (us) | predicted (us) | error | ok | role |",
              "|---|---:|---:|---:|---:|---:|---|---|"]
    errs: dict[str, list[float]] = {k: [] for k in CHECKS}
    for r in rows:
        if r["kind"] not in ("ar", "empty"):
            continue
        meas, pred = float(r["median_us"]), predicted_us(r, link)
        err = pred / meas - 1
        check = check_of(r)
        if check:
            errs[check].append(err)
        role = check or ("calibration" if (r["variant"], int(r["bytes"])) in CALIBRATION else "-")
        lines.append(f"| {r['variant']} | {r['bytes']} | {r['blocks']} | {meas:.2f} | {pred:.2f} | {100 * err:+.1f}% | "
                     f"{r['ok']} | {role} |")
    return lines + check_lines(CHECKS, errs)


def plot(cx_csv: str, nccl_csv: str, out: str, hw: str = "hw_configs/h200.yaml") -> list[str]:
    """docs/img/gpu-custom-ar.png: run cx's one- and two-stage kernels at vLLM's grid measured against
    the GPU document's model (``nvlink.custom_all_reduce``), and NCCL's graph all-reduce measured on the
    same lease against the model's NCCL (``collectives.predict_us``). Returns the table it plots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw.gpu import Gpu, load_gpu_node

    spec = load_gpu_node(hw).gpu.spec
    link = Gpu(spec, all_reduce="custom").fabric.custom
    rows = load(cx_csv)
    nccl = {int(r["bytes"]): float(r["median_us"]) for r in load(nccl_csv) if r["mode"] == "graph"}
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    lines = ["| bytes | 1 stage measured / model | 2 stages measured / model | NCCL graph measured / model |",
             "|---:|---|---|---|"]
    series = {}
    for variant, colour, name in (("1stage-b36", "C0", "vLLM one stage"), ("2stage-b36", "C1", "vLLM two stages")):
        pts = sorted((int(r["bytes"]), float(r["median_us"]), predicted_us(r, link)) for r in rows
                     if r["variant"] == variant)
        series[variant] = {b: (m, p) for b, m, p in pts}
        ax.plot([b for b, _, _ in pts], [m for _, m, _ in pts], "o", color=colour, label=f"{name}, measured")
        ax.plot([b for b, _, _ in pts], [p for _, _, p in pts], "-", color=colour, label=f"{name}, model")
    sizes = sorted(nccl)
    model = [predict_us(Gpu(spec), "all_reduce", b, 2, "graph")[0] for b in sizes]
    ax.plot(sizes, [nccl[b] for b in sizes], "s", color="C2", label="NCCL graph, measured")
    ax.plot(sizes, model, "--", color="C2", label="NCCL graph, model")
    ax.axvline(8 << 20, color="grey", lw=0.8, ls=":")
    ax.text(8 << 20, 0.03, " vLLM's max_size, 8 MiB", color="grey", fontsize=8, transform=ax.get_xaxis_transform())
    ax.set(xscale="log", yscale="log", xlabel="all-reduce size (bytes)", ylabel="us a call (queued / graph)",
           title="vLLM's custom all-reduce vs NCCL on two H200s (run cx)")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_xlim(600, 1.6e8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    for b, ncc in zip(sizes, model, strict=True):
        one, two = series["1stage-b36"].get(b), series["2stage-b36"].get(b)
        cells = [f"{m:.1f} / {p:.1f}" if (m, p) else "-" for m, p in (one or (0, 0), two or (0, 0))]
        lines.append(f"| {b} | {cells[0]} | {cells[1]} | {nccl[b]:.1f} / {ncc:.1f} |")
    return lines


#: run cy's registered checks (h200x2-20261130cy-custom-ar-hypotheses.md): rows, median / worst abs error
CY_CHECKS = {
    "F1": ("the two-stage kernel with nothing to sum at 1-64 blocks: its release barrier's fence", 10.0, 20.0),
    "F2": ("two stages at 2-48 forced blocks, 384 KiB-6 MiB", 10.0, 20.0),
    "F3": ("one stage at the same blocks and sizes (the calibrated model where run cx never ran it)", 10.0, 20.0),
}


def cy_link(hw: str = "hw_configs/h200.yaml"):
    """Run cy's frozen model: the GPU document's ``nvlink.custom_all_reduce`` (run cx's constants) with
    the candidate fence, run ct's line (``ring_post.ct_post_form``: a system fence and flag store after
    a slice, 1.122 us with one channel fencing plus 0.0528 us for each further one)."""
    from ring_post import ct_post_form

    from rdusim.hw.custom_all_reduce import CustomArLink
    from rdusim.hw.gpu import load_gpu_node

    car = load_gpu_node(hw).gpu.spec.nvlink.custom_all_reduce
    fence, per_block = ct_post_form()
    return CustomArLink(float(car.load_s), float(car.per_load_s), float(car.flag_s), float(car.read_bytes_per_s),
                        float(car.kernel_s), fence, per_block, queue=False)


def cy_check_of(row: dict) -> str:
    return "F1" if row["kind"] == "empty" else ("F2" if str(row["stages"]) == "2" else "F3")


def _frozen_table(run: str, link, title: str, check_of) -> list[str]:
    """A run's rows as its frozen model (``link``) predicts them, before the run."""
    lines = [title, "", "| row | bytes | blocks | predicted (us) | check |", "|---|---:|---:|---:|---|"]
    for r in plan(100, 7, run):
        if r["kind"] not in ("ar", "empty"):
            continue
        lines.append(f"| {r['variant']} | {r['bytes']} | {r['blocks']} | {predicted_us(r, link):.2f} | "
                     f"{check_of(r) or '-'} |")
    return lines


def _frozen_compare(path: str, link, title: str, checks: dict, check_of, bare=None, model: str = "frozen") -> list[str]:
    """A run's measured rows against its frozen model (``link``; ``model`` names it in the table) and its
    checks; with ``bare``, each row also against that model."""
    rows = [r for r in load(path) if r["kind"] in ("ar", "empty")]
    extra = ("", "") if bare is None else (" without the fence |", "---:|")
    lines = [title, "", f"| row | bytes | blocks | measured (us) | {model} (us) | error |{extra[0]} ok | check |",
             f"|---|---:|---:|---:|---:|---:|{extra[1]}---|---|"]
    errs: dict[str, list[float]] = {k: [] for k in checks}
    for r in rows:
        meas, pred = float(r["median_us"]), predicted_us(r, link)
        check = check_of(r)
        if check:
            errs[check].append(pred / meas - 1)
        without = "" if bare is None else f" {100 * (predicted_us(r, bare) / meas - 1):+.1f}% |"
        lines.append(f"| {r['variant']} | {r['bytes']} | {r['blocks']} | {meas:.2f} | {pred:.2f} | "
                     f"{100 * (pred / meas - 1):+.1f}% |{without} {r['ok']} | {check or '-'} |")
    return lines + check_lines(checks, errs)


def _link_words(link) -> str:
    """A frozen table's title words for a link's reads, kernel and flag."""
    return (f"reads {link.read_bytes_per_s / 1e9:.1f} GB/s, kernel {link.kernel_s * 1e6:.2f} us, flag "
            f"{link.flag_s * 1e6:.2f} us")


def frozen_cy() -> list[str]:
    """Run cy's rows as the frozen model predicts them (``cy_link``), before the run."""
    link = cy_link()
    return _frozen_table("cy", link, f"# run cy frozen predictions (committed before the run): h200.yaml's "
                         f"custom_all_reduce (pass {link.pass_at(1) * 1e6:.2f} us, {_link_words(link)}) and the release "
                         f"barrier's fence {link.fence_s * 1e6:.3f} us + {link.fence_per_block_s * 1e6:.4f} us a further "
                         "block (run ct)", cy_check_of)


def compare_cy(path: str) -> list[str]:
    """Run cy's measured rows against its frozen model (``cy_link``) and the checks ``CY_CHECKS``; the
    same rows without the fence beside them."""
    link = cy_link()
    return _frozen_compare(path, link, f"# {path} against run cy's frozen model (h200.yaml's custom_all_reduce, the "
                           f"fence {link.fence_s * 1e6:.3f} us + {link.fence_per_block_s * 1e6:.4f} us a further block)",
                           CY_CHECKS, cy_check_of, dataclasses.replace(link, fence_s=0.0, fence_per_block_s=0.0))


#: run cz's registered checks (h200x4-20261130cz-custom-ar-hypotheses.md): rows, median / worst abs error
CZ_CHECKS = {
    "D1": ("vLLM's kernel where vLLM runs it on four GPUs, one stage: 36 blocks, 1 KiB-256 KiB", 10.0, 25.0),
    "D2": ("vLLM's two-stage kernel where vLLM runs it on four GPUs: 512 KiB-4 MiB (its fence uncharged)", 20.0, 30.0),
    "D3": ("a pass with three peers' loads: one stage at 4, 16 and 36 blocks, 1-16 MiB", 10.0, 20.0),
    "D4": ("the reads' link from three peers: one stage at 132 blocks through 16 MiB", 15.0, 15.0),
    "D5": ("the one-stage kernel alone, barriers with three peers", 15.0, 15.0),
}


def cz_check_of(row: dict) -> str | None:
    size, stages, limit = int(row["bytes"]), str(row["stages"]), int(row["limit"])
    if row["kind"] == "empty":
        return "D5" if stages == "1" else None
    if stages == "2":
        return "D2" if size >= 512 * KIB else None
    if limit == 132:
        return "D4"
    if limit != BLOCK_LIMIT or size >= MIB:
        return "D3"
    return "D1" if size <= 256 * KIB else None


def document_link(hw: str = "hw_configs/h200.yaml"):
    """The GPU document's ``nvlink.custom_all_reduce`` as the engine takes it."""
    from rdusim.hw.gpu import Gpu, load_gpu_node

    return Gpu(load_gpu_node(hw).gpu.spec, all_reduce="custom").fabric.custom


def cz_link(hw: str = "hw_configs/h200.yaml"):
    """Run cz's frozen model: the GPU document's ``nvlink.custom_all_reduce`` as committed then (run cx's
    two-GPU constants, no fence), whose pass cost one peer's (1.00 us) whatever the peers: the
    document's pass with one load a thread, nothing for further loads and no fence (runs da to de came
    after)."""
    link = document_link(hw)
    return dataclasses.replace(link, load_s=link.pass_at(1), per_load_s=0.0, fence_s=0.0, fence_per_block_s=0.0,
                               queue=False)


def frozen_cz() -> list[str]:
    link = cz_link()
    return _frozen_table("cz", link, f"# run cz frozen predictions (committed before the run), four GPUs: h200.yaml's "
                         f"custom_all_reduce as committed (pass {link.pass_at(1) * 1e6:.2f} us, {_link_words(link)}; "
                         "no fence)", cz_check_of)


def compare_cz(path: str) -> list[str]:
    return _frozen_compare(path, cz_link(), f"# {path} against run cz's frozen model (h200.yaml's custom_all_reduce)",
                           CZ_CHECKS, cz_check_of)


def compare_cz_now(path: str) -> list[str]:
    """Run cz's rows against the GPU document's model now (a lone block's pass by a thread's loads and the
    blocks queued at the reads' link, run di; the two-stage kernel's fence since run de): explained after
    measurement, not predicted (run cz came first), with run cz's checks for comparison. Run cz timed
    ``vllm_ar_n``, which run dd found slower than vLLM's compiled kernel on two GPUs."""
    link = document_link()
    return _frozen_compare(path, link, f"# {path} against h200.yaml's custom_all_reduce now (a lone block's pass "
                           f"{link.load_s * 1e6:.3f} us + {link.per_load_s * 1e6:.3f} us a load a thread: "
                           f"{link.pass_at(CZ_RANKS - 1) * 1e6:.3f} us on four GPUs, "
                           f"{link.pass_at(CZ_RANKS - 1, BLOCK_LIMIT) * 1e6:.3f} us with 36 blocks reading; the "
                           f"release fence {link.fence_s * 1e6:.2f} us): explained after measurement, not frozen",
                           CZ_CHECKS, cz_check_of, model="model now")


#: run dc's registered checks (h200x2-20261130dc-custom-ar-hypotheses.md): rows, median / worst abs error
DC_CHECKS = {
    "H1": ("two stages at 1-8 blocks (48-640 KiB) and at vLLM's grid through 3-100 KiB", 10.0, 20.0),
    "H2": ("the two-stage kernel with nothing to sum at 3, 12 and 48 blocks: its release barrier", 10.0, 15.0),
    "H3": ("two stages at vLLM's 36 blocks, 768 KiB-6 MiB (not in the adoption rule)", 15.0, 30.0),
}
CY_CSV = "benchmarks/gpu/h200x2-20261130cy-custom-ar.csv"


def dc_check_of(row: dict) -> str:
    if row["kind"] == "empty":
        return "H2"
    return "H3" if int(row["limit"]) == BLOCK_LIMIT and int(row["bytes"]) >= min(DC_WIDE) else "H1"


def h200_after_db(fence_s: float = 0.0):
    """h200.yaml's ``nvlink.custom_all_reduce`` as it stood after run db's adoption (48f8c05; run de then
    added its fence, ``fence_s`` here): the model runs dc, de and dg froze theirs on, kept here so their
    frozen tables stay what they were whatever the document says later."""
    from rdusim.hw.custom_all_reduce import CustomArLink

    return CustomArLink(load_s=0.80e-6, per_load_s=0.20e-6, flag_s=0.70e-6, read_bytes_per_s=327.3e9,
                        kernel_s=3.03e-6, fence_s=fence_s, queue=False)


def dc_fence_s() -> float:
    """Run dc's frozen fence: run cy's two-stage kernel with nothing to sum (1-64 blocks) took the same at
    every block count; its median less the model's one-stage kernel with nothing to sum (the kernel's
    fixed time and two flags) is what the release barrier costs over a flag."""
    link = h200_after_db()
    empty2 = [float(r["median_us"]) * 1e-6 for r in load(CY_CSV) if r["variant"].startswith("empty2")]
    return statistics.median(empty2) - (link.kernel_s + 2 * link.flag_s)


def dc_link():
    """Run dc's frozen model: h200.yaml after run db (``h200_after_db``) with a flat release fence
    (``dc_fence_s``), nothing for the blocks fencing at once."""
    return h200_after_db(dc_fence_s())


def frozen_dc() -> list[str]:
    link = dc_link()
    return _frozen_table("dc", link, f"# run dc frozen predictions (committed before the run): h200.yaml's "
                         f"custom_all_reduce (a pass {link.load_s * 1e6:.2f} + {link.per_load_s * 1e6:.2f} us a load, "
                         f"{_link_words(link)}) and a flat release fence {link.fence_s * 1e6:.3f} us (run cy's "
                         "empty two-stage kernel less the model's empty kernel)", dc_check_of)


def compare_dc(path: str) -> list[str]:
    link = dc_link()
    return _frozen_compare(path, link, f"# {path} against run dc's frozen model (h200.yaml's custom_all_reduce, a "
                           f"flat fence {link.fence_s * 1e6:.3f} us)", DC_CHECKS, dc_check_of,
                           dataclasses.replace(link, fence_s=0.0))


#: run dd's registered checks (h200x2-20261130dd-custom-ar-hypotheses.md): vLLM's compiled form (vllm_ar_t)
#: against the emulation the earlier runs timed (vllm_ar_n), row by row; median / worst abs difference
DD_CHECKS = {
    "J1": ("one stage (and its kernel alone): vllm_ar_t against vllm_ar_n", 3.0, 8.0),
    "J2": ("two stages (and its kernel alone): vllm_ar_t against vllm_ar_n", 3.0, 8.0),
}


def compare_dd(path: str) -> list[str]:
    """Run dd: each row with both kernels (vLLM's compiled form against the emulation) and the model
    (h200.yaml; with run dc's flat fence beside it); vLLM's stage 2 alone by its ranks against a pass
    with every load in flight and one with the loads one after another."""
    rows = load(path)
    link = h200_after_db()  # as it was at run dd, no fence
    fenced = dataclasses.replace(link, fence_s=dc_fence_s())
    by = {(r["variant"], int(r["bytes"]), r.get("kernel") or "n"): r for r in rows if r["kind"] in ("ar", "empty")}
    lines = [f"# {path}: vLLM's compiled form (vllm_ar_t, the ranks a template parameter) against the emulation "
             f"(vllm_ar_n); the model h200.yaml's, and with run dc's flat fence {fenced.fence_s * 1e6:.3f} us", "",
             "| probe | bytes | us |", "|---|---:|---:|"]
    lines += [f"| {r['kind']} {r['variant']} | {r['bytes']} | {float(r['median_us']):.3f} |"
              for r in rows if r["kind"] in ("chase", "pingpong")]
    lines += ["", "| row | bytes | blocks | vllm_ar_n (us) | vllm_ar_t (us) | t / n | model (us) | t against it | "
              "with the fence (us) | t against it | check |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    errs: dict[str, list[float]] = {k: [] for k in DD_CHECKS}
    for (variant, size, kernel), r in by.items():
        if kernel != "t" or (variant, size, "n") not in by:
            continue
        n_us, t_us = float(by[variant, size, "n"]["median_us"]), float(r["median_us"])
        check = "J1" if str(r["stages"]) == "1" else "J2"
        errs[check].append(t_us / n_us - 1)
        model, with_fence = predicted_us(r, link), predicted_us(r, fenced)
        lines.append(f"| {variant} | {size} | {r['blocks']} | {n_us:.2f} | {t_us:.2f} | {100 * (t_us / n_us - 1):+.1f}% | "
                     f"{model:.2f} | {100 * (model / t_us - 1):+.1f}% | {with_fence:.2f} | "
                     f"{100 * (with_fence / t_us - 1):+.1f}% | {check} |")
    rt, local = chase_us(rows), {p["blocks"]: p["pass_us"] for p in pass_slopes(rows, [(0, THREADS, b) for b in
                                                                                        DD_GATHER_BLOCKS])}
    gathers = pass_slopes([{**r, "kind": "pass", "variant": r["variant"].replace("gather-n", "pass-k").replace(
        "-b", "-t512-b")} for r in rows if r["kind"] == "gather"], [(n, THREADS, b) for n in DD_GATHER_RANKS
                                                                    for b in DD_GATHER_BLOCKS])
    lines += ["", f"vLLM's stage 2 alone (gather_t): a pass from the slope of {DA_PASSES[0]} and {DA_PASSES[1]} passes; "
              f"all in flight: the lease's chase {rt:.3f} us + {link.per_load_s * 1e6:.2f} us a peer load (run db's "
              "form); one after another: the lease's local pass (pass_probe, no peer) + a one-load pass for each peer",
              "", "| ranks | blocks | pass (us) | all in flight (us) | one after another (us) |",
              "|---:|---:|---:|---:|---:|"]
    for g in gathers:
        n, b = g["loads"], g["blocks"]
        inflight = rt + (n - 1) * link.per_load_s * 1e6
        serial = local.get(b, float("nan")) + (n - 1) * (rt + link.per_load_s * 1e6)
        lines.append(f"| {n} | {b} | {g['pass_us']:.3f} | {inflight:.3f} | {serial:.3f} |")
    lines += ["", "| local pass (pass_probe, no peer) | blocks | us |", "|---|---:|---:|"]
    lines += [f"| pass-k0-t512 | {b} | {us:.3f} |" for b, us in sorted(local.items())]
    return lines + check_lines(DD_CHECKS, errs)


#: run de's registered checks of vLLM's kernels (h200x2-20261130de-custom-ar-hypotheses.md): rows, median /
#: worst abs error against run dc's frozen model (h200.yaml with the flat fence)
DE_AR_CHECKS = {
    "K3": ("vLLM's two-stage form (vllm_ar_t<2>) at 2-12 blocks and vLLM's grid, 40 KiB-5 MiB, and alone", 10.0, 20.0),
    "K4": ("vLLM's one-stage form at vLLM's grid, 24 KiB-3 MiB, and alone (reported)", 10.0, 20.0),
}


def de_check_of(row: dict) -> str:
    return "K3" if str(row["stages"]) == "2" else "K4"


def de_pass_check_of(loads: int, threads: int, blocks: int) -> str:
    return "K1" if (threads, blocks) == (THREADS, 4) else "K2"


def de_run() -> PassRun:
    """Run de's passes (h200x2-20261130de-custom-ar-hypotheses.md): pass_t, vLLM's compiled loop, against run
    db's form as adopted (h200.yaml's per_load, the lease's chase, the reads' link)."""
    cx = calibrate(load(CX_CSV))
    return PassRun("de", DE_PASS_CONFIGS, {
        "K1": ("vLLM's compiled loop (pass_t) with k = 1-5 and 7 loads: 512 threads, 4 blocks", 10.0, 20.0),
        "K2": ("the same at 1, 2 and 10 blocks and with 192 threads (reported)", 15.0, 30.0),
    }, de_pass_check_of, lambda k, t, b, rt: db_pass_us(k, t, b, rt, cx),
        f"+ {cx.per_load_s * 1e6:.3f} us a load a thread, at least the blocks' bytes at {cx.read_bytes_per_s / 1e9:.1f} GB/s",
        f"+ {cx.per_load_s * 1e6:.3f} us for each load a thread has in flight (h200.yaml's per_load since run db), at "
        f"least the blocks' bytes at {cx.read_bytes_per_s / 1e9:.1f} GB/s; vLLM's compiled loop (pass_t)")


DE_CSV = "benchmarks/gpu/h200x2-20261130de-custom-ar.csv"


def de_per_load_us(de_csv: str = DE_CSV) -> float:
    """Run df's frozen cost of a further load a thread keeps in flight (us): run de's vLLM compiled loop at 512
    threads and 4 blocks, its pass with seven loads less its pass with one, over six."""
    at = {p["loads"]: p["pass_us"] for p in pass_slopes(load(de_csv), DE_PASS_CONFIGS)
          if (p["threads"], p["blocks"]) == (THREADS, 4)}
    return (at[7] - at[1]) / 6


def df_pass_us(loads: int, threads: int, blocks: int, round_trip_us: float, cx: CustomArLink, further_us: float) -> float:
    """Run df's frozen form: a pass with one load a thread is run cx's (its chase's round trip and what a pass
    adds to it: ``cx.per_load_s``), each further load ``further_us``; at least the blocks' bytes at the
    reads' link."""
    alone = round_trip_us + cx.per_load_s * 1e6 + (loads - 1) * further_us
    return max(alone, blocks * loads * threads * PACK / cx.read_bytes_per_s * 1e6)


def df_run() -> PassRun:
    """Run df (h200x2-20261130df-custom-ar-hypotheses.md): vLLM's compiled loop, a pass run cx's with one load
    and run de's further-load cost for each further one."""
    cx, further = calibrate(load(CX_CSV)), de_per_load_us()
    return PassRun("df", DF_PASS_CONFIGS, {
        "L1": ("vLLM's compiled loop with k = 2, 3, 5, 6 loads at 512 threads, 3 and 6 blocks", 10.0, 20.0),
        "L2": ("seven loads at 1 and 12 blocks, and 256 threads at k = 3 and 7 (reported)", 15.0, 30.0),
    }, lambda k, t, b: "L1" if t == THREADS and b in (3, 6) else "L2",
        lambda k, t, b, rt: df_pass_us(k, t, b, rt, cx, further),
        f"+ {cx.per_load_s * 1e6:.3f} us + {further:.4f} us a further load a thread, at least the blocks' bytes at "
        f"{cx.read_bytes_per_s / 1e9:.1f} GB/s",
        f"+ {cx.per_load_s * 1e6:.3f} us (run cx: a pass with one load a thread less its chase) + {further:.4f} us for "
        f"each further load a thread keeps in flight (run de: vLLM's compiled loop, its pass at seven loads less its "
        f"pass at one, over six), at least the blocks' bytes at {cx.read_bytes_per_s / 1e9:.1f} GB/s; pass_t",
        lambda k: cx.pass_at(k) * 1e6, "run db's form as adopted, run cx's chase + 0.20 us a load")


def compiled_passes(runs=DI_LINE_RUNS) -> list[dict]:
    """Every ``pass_t`` pass (vLLM's compiled loop) the runs timed, each with its run."""
    out = []
    for run in runs:
        rows = [r for r in load(f"benchmarks/gpu/h200x2-20261130{run}-custom-ar.csv") if r["kind"] == "pass"]
        configs = sorted({tuple(int(x) for x in r["variant"].removeprefix("pass-k").replace("-t", " ").replace(
            "-b", " ").split()) for r in rows})
        out += [{**p, "run": run} for p in pass_slopes(rows, configs)]
    return out


def di_line(passes: list[dict] | None = None) -> tuple[float, float]:
    """Run di's calibration (us): the least-squares line of a lone block's pass (512 threads) by the loads a thread
    keeps in flight, over every such pass of vLLM's compiled loop in runs de, df and dh (``passes``, read when not
    given): (at no load, a load)."""
    lone = [p for p in passes or compiled_passes() if (p["threads"], p["blocks"]) == (THREADS, 1)]
    ks = [p["loads"] for p in lone]
    slope, intercept = statistics.linear_regression(ks, [p["pass_us"] for p in lone])
    return intercept, slope


def di_link_us(loads: int, threads: int) -> float:
    """A block's bytes of one pass at the reads' link alone (us), as h200.yaml had it when run di was frozen."""
    return loads * threads * PACK / h200_after_db().read_bytes_per_s * 1e6


def di_max_pass_us(loads: int, threads: int, blocks: int, line: tuple[float, float]) -> float:
    """Run di's form A, the engine's structure: a block's pass is the line's (whatever the threads active), at least
    the blocks' bytes at the reads' link (max-min fair)."""
    return max(line[0] + loads * line[1], blocks * di_link_us(loads, threads))


def di_mva_pass_us(loads: int, threads: int, blocks: int, line: tuple[float, float]) -> float:
    """Run di's form B, the blocks as a closed queueing network: each block alternates a fixed part (the line's
    pass less its own bytes at the link) and its bytes on the reads' link, which serves the blocks there in turn;
    the blocks drift apart, so a pass is the cycle time by mean value analysis (Reiser and Lavenberg, J. ACM
    27(2), 1980; exact for a processor-sharing link and a delay of any distribution, BCMP 1975): the engine's
    ``closed_network_cycle``, which came from this form when run di adopted it."""
    from rdusim.hw.closed_network import closed_network_cycle

    d = di_link_us(loads, threads)
    return closed_network_cycle(line[0] + loads * line[1] - d, d, blocks)


#: run di's registered checks (h200x2-20261130di-custom-ar-hypotheses.md): rows, median / worst abs error
DI_CHECKS = {
    "N1": ("form A at 512 threads, 5-36 blocks, k = 1-4, 6, 7", 5.0, 25.0),
    "N2": ("form B at 512 threads, 5-36 blocks, k = 1-4, 6, 7", 5.0, 15.0),
    "N3": ("form A at 384 threads, 8 and 16 blocks, k = 3, 6 (reported)", 10.0, 25.0),
    "N4": ("form B at 384 threads, 8 and 16 blocks, k = 3, 6 (reported)", 10.0, 25.0),
}


def di_today_us(loads: int, threads: int, blocks: int) -> float:
    """The documents' pass when run di was frozen: run db's form, at least the blocks' bytes at the link."""
    return max(h200_after_db().pass_at(loads) * 1e6, blocks * di_link_us(loads, threads))


def di_forms_text(line: tuple[float, float]) -> list[str]:
    rate = h200_after_db().read_bytes_per_s / 1e9
    return [f"form A (the engine's structure): a lone block's pass {line[0]:.4f} us + {line[1]:.4f} us a load a thread "
            f"(runs de, df, dh: vLLM's compiled loop, one block, 512 threads; whatever the threads), at least the "
            f"blocks' bytes at the reads' link ({rate:.1f} GB/s)",
            f"form B (a closed network): each block a fixed part (that line less its own bytes at the link) and its "
            f"bytes on the reads' link ({rate:.1f} GB/s) shared by the blocks; a pass the cycle by mean value analysis",
            "today's documents: run db's form (0.80 + 0.20 us a load), at least the blocks' bytes at the link"]


def frozen_di() -> list[str]:
    """Run di's frozen predictions (committed before the run): its calibration, both forms in sample on runs de,
    df and dh (not the check), and every configuration under each form."""
    passes = compiled_passes()
    line = di_line(passes)
    out = ["# run di frozen predictions (committed before the run); nothing is fitted on run di", ""]
    out += [f"- {t}" for t in di_forms_text(line)]
    out += ["", "Calibration, the lone-block line (vLLM's compiled loop, 512 threads, one block):", "",
            "| run | loads | pass (us) | line (us) |", "|---|---:|---:|---:|"]
    out += [f"| {p['run']} | {p['loads']} | {p['pass_us']:.3f} | {line[0] + p['loads'] * line[1]:.3f} |"
            for p in passes if (p["threads"], p["blocks"]) == (THREADS, 1)]
    out += ["", "In sample (not the check): every other pass of runs de, df and dh under each form:", "",
            "| form | passes | median abs error | worst |", "|---|---:|---:|---:|"]
    multi = [p for p in passes if p["blocks"] > 1 or p["threads"] != THREADS]
    for name, form in (("A", lambda k, t, b: di_max_pass_us(k, t, b, line)),
                       ("B", lambda k, t, b: di_mva_pass_us(k, t, b, line)), ("today's documents", di_today_us)):
        errs = [form(p["loads"], p["threads"], p["blocks"]) / p["pass_us"] - 1 for p in multi]
        out.append(f"| {name} | {len(errs)} | {100 * statistics.median(abs(e) for e in errs):.1f}% | "
                   f"{100 * max(errs, key=abs):+.1f}% |")
    out += ["", "| loads | threads | blocks | bytes in flight | form A (us) | form B (us) | today's (us) | checks |",
            "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for k, t, b in DI_PASS_CONFIGS:
        checks = "N1, N2" if t == THREADS else "N3, N4"
        out.append(f"| {k} | {t} | {b} | {k * t * b * PACK} | {di_max_pass_us(k, t, b, line):.3f} | "
                   f"{di_mva_pass_us(k, t, b, line):.3f} | {di_today_us(k, t, b):.3f} | {checks} |")
    return out


def compare_di(path: str) -> list[str]:
    """Run di's passes against its two frozen forms, today's documents and its registered checks."""
    line, rows = di_line(), load(path)
    out = [f"# {path}: vLLM's compiled loop (pass_t), a pass from the slope of {DA_PASSES[0]} and {DA_PASSES[1]} "
           f"passes a block; the lease's chase {chase_us(rows):.3f} us (not used)", ""]
    out += [f"- {t}" for t in di_forms_text(line)]
    out += ["", "| loads | threads | blocks | bytes in flight | pass (us) | form A | error | form B | error | today's | "
            "ok |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    errs: dict[str, list[float]] = {key: [] for key in DI_CHECKS}
    for p in pass_slopes(rows, DI_PASS_CONFIGS):
        k, t, b, got = p["loads"], p["threads"], p["blocks"], p["pass_us"]
        a, mva = di_max_pass_us(k, t, b, line), di_mva_pass_us(k, t, b, line)
        full = t == THREADS
        errs["N1" if full else "N3"].append(a / got - 1)
        errs["N2" if full else "N4"].append(mva / got - 1)
        out.append(f"| {k} | {t} | {b} | {k * t * b * PACK} | {got:.3f} | {a:.3f} | {100 * (a / got - 1):+.1f}% | "
                   f"{mva:.3f} | {100 * (mva / got - 1):+.1f}% | {100 * (di_today_us(k, t, b) / got - 1):+.1f}% | "
                   f"{p['ok']} |")
    return out + check_lines(DI_CHECKS, errs)


#: run dg's registered checks (h200x4-20261130dg-custom-ar-hypotheses.md): rows, median / worst abs error against
#: the documents as they stood (h200.yaml: run db's pass, run de's fence)
DG_CHECKS = {
    "M1": ("vLLM's compiled one-stage kernel where vLLM runs it on four GPUs: 36 blocks, 1-256 KiB", 10.0, 25.0),
    "M2": ("vLLM's compiled two-stage kernel where vLLM runs it on four GPUs: 512 KiB-4 MiB", 15.0, 30.0),
    "M3": ("a pass with three peers' loads: one stage at 4, 16 and 36 blocks, 1-16 MiB", 10.0, 20.0),
    "M4": ("the reads' link from three peers: one stage at 132 blocks through 16 MiB", 15.0, 15.0),
    "M5": ("the kernels alone, one and two stages", 15.0, 15.0),
}
DG_LINK_TEXT = "h200.yaml as committed before run dg (a pass 0.80 + 0.20 us a load, the fence 1.29 us)"


def dg_check_of(row: dict) -> str | None:
    if row["kind"] == "empty":
        return "M5"
    return {"D1": "M1", "D2": "M2", "D3": "M3", "D4": "M4"}.get(cz_check_of(row))


def dg_link():
    """Run dg's frozen model: h200.yaml's ``nvlink.custom_all_reduce`` as committed when run dg was
    registered (73bebb4): run db's pass and run de's fence, 1.29 us."""
    return h200_after_db(1.29e-6)


def dg_passes(rows: list[dict]) -> list[dict]:
    """Run dg's passes (us): each ``DG_PASS_CONFIGS`` entry's slope of its two rows."""
    lo, hi = DA_PASSES
    by = {(r["variant"], int(r["bytes"])): r for r in rows if r["kind"] == "pass"}
    out = []
    for k, t, b, spread in DG_PASS_CONFIGS:
        variant = f"pass-k{k}-t{t}-b{b}" + ("-spread" if spread else "")
        rs = [by.get((variant, p * b * t * PACK)) for p in (lo, hi)]
        if None not in rs:
            out.append({"loads": k, "threads": t, "blocks": b, "spread": spread,
                        "pass_us": (float(rs[1]["median_us"]) - float(rs[0]["median_us"])) / (hi - lo)})
    return out


def frozen_dg() -> list[str]:
    link = dg_link()
    lines = _frozen_table("dg", link, f"# run dg frozen predictions (committed before the run), four GPUs, vLLM's "
                          f"compiled kernels (vllm_ar_t<4>): {DG_LINK_TEXT}", dg_check_of)
    lines += ["", "| pass_t: loads | threads | blocks | from | frozen pass (us, run cx's chase; the lease's replaces it) |",
              "|---:|---:|---:|---|---:|"]
    rt = chase_us(load(CX_CSV))
    lines += [f"| {k} | {t} | {b} | {'three peers' if spread else 'one peer'} | "
              f"{rt + k * link.per_load_s * 1e6:.3f} |" for k, t, b, spread in DG_PASS_CONFIGS]
    return lines


def compare_dg(path: str) -> list[str]:
    """Run dg's rows against its frozen model (``DG_CHECKS``), and its passes: three loads from three peers
    against three from one (the lease's chase + h200.yaml's per_load a load beside them)."""
    rows, link = load(path), dg_link()
    lines = _frozen_compare(path, link, f"# {path} against run dg's frozen model ({DG_LINK_TEXT})", DG_CHECKS,
                            dg_check_of)
    rt = chase_us(rows)
    lines += ["", f"pass_t on four GPUs (the lease's chase {rt:.3f} us + {link.per_load_s * 1e6:.2f} us a load beside):",
              "", "| loads | threads | blocks | from | pass (us) | run db's form (us) |", "|---:|---:|---:|---|---:|---:|"]
    lines += [f"| {p['loads']} | {p['threads']} | {p['blocks']} | {'three peers' if p['spread'] else 'one peer'} | "
              f"{p['pass_us']:.3f} | {rt + p['loads'] * link.per_load_s * 1e6:.3f} |" for p in dg_passes(rows)]
    return lines


def h200_after_di():
    """h200.yaml's ``nvlink.custom_all_reduce`` as adopted after run di (its form B, the blocks queued at the
    reads' link; run de's fence): the second model run dg is frozen on, kept here whatever the document says
    later."""
    return dataclasses.replace(h200_after_db(1.29e-6), load_s=0.953e-6, per_load_s=0.047e-6, queue=True)


#: run dg's checks against the documents after run di (an addendum registered before the run): the same rows and
#: bounds as ``DG_CHECKS``
DG_DI_CHECKS = {f"P{key[1:]}": value for key, value in DG_CHECKS.items()}
DG_DI_TEXT = ("h200.yaml after run di (a lone pass 0.953 + 0.047 us a load, the blocks queued at the reads' link, "
              "327.3 GB/s; the fence 1.29 us)")


def dg_di_check_of(row: dict) -> str | None:
    check = dg_check_of(row)
    return check and f"P{check[1:]}"


def frozen_dg_di() -> list[str]:
    """Run dg's rows and passes as the documents after run di predict them (before the run)."""
    link = h200_after_di()
    lines = _frozen_table("dg", link, f"# run dg frozen predictions after run di (committed before the run), four GPUs, "
                          f"vLLM's compiled kernels (vllm_ar_t<4>): {DG_DI_TEXT}", dg_di_check_of)
    lines += ["", "| pass_t: loads | threads | blocks | from | frozen pass (us) |", "|---:|---:|---:|---|---:|"]
    lines += [f"| {k} | {t} | {b} | {'three peers' if spread else 'one peer'} | {link.pass_at(k, b) * 1e6:.3f} |"
              for k, t, b, spread in DG_PASS_CONFIGS]
    return lines


def compare_dg_di(path: str) -> list[str]:
    """Run dg's rows and passes against the documents after run di (``DG_DI_CHECKS``)."""
    rows, link = load(path), h200_after_di()
    lines = _frozen_compare(path, link, f"# {path} against {DG_DI_TEXT}", DG_DI_CHECKS, dg_di_check_of)
    lines += ["", "pass_t on four GPUs against the same model:", "",
              "| loads | threads | blocks | from | pass (us) | model (us) | error |", "|---:|---:|---:|---|---:|---:|---:|"]
    for p in dg_passes(rows):
        model = link.pass_at(p["loads"], p["blocks"]) * 1e6
        lines.append(f"| {p['loads']} | {p['threads']} | {p['blocks']} | {'three peers' if p['spread'] else 'one peer'} | "
                     f"{p['pass_us']:.3f} | {model:.3f} | {100 * (model / p['pass_us'] - 1):+.1f}% |")
    return lines


def survey_dh(path: str) -> list[str]:
    """Run dh (a survey, nothing frozen): vLLM's compiled loop's pass (us) by a thread's loads and the
    blocks, with the blocks' loads in flight together and what the reads' link alone would take."""
    rows = load(path)
    link = h200_after_db()  # the reads' link as it stood at run dh
    got = {(p["loads"], p["blocks"]): p["pass_us"] for p in
           pass_slopes(rows, [(k, THREADS, b) for b in DH_BLOCKS for k in DH_LOADS])}
    lines = [f"# {path}: vLLM's compiled loop (pass_t), a pass (us) from the slope of {DA_PASSES[0]} and "
             f"{DA_PASSES[1]} passes a block, 512 threads; the lease's chase {chase_us(rows):.3f} us; in brackets the "
             f"blocks' bytes at the reads' link ({link.read_bytes_per_s / 1e9:.1f} GB/s)", "",
             "| loads \\ blocks | " + " | ".join(str(b) for b in DH_BLOCKS) + " |",
             "|---:|" + "---:|" * len(DH_BLOCKS)]
    for k in DH_LOADS:
        cells = [f"{got[k, b]:.3f} ({b * k * THREADS * PACK / link.read_bytes_per_s * 1e6:.2f})" if (k, b) in got else "-"
                 for b in DH_BLOCKS]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return lines


def frozen_de() -> list[str]:
    link = dc_link()
    return frozen_passes(de_run()) + [""] + _frozen_table(
        "de", link, f"# run de's kernels (vllm_ar_t<2>), frozen: h200.yaml's custom_all_reduce and run dc's flat fence "
        f"{link.fence_s * 1e6:.3f} us", de_check_of)


def compare_de(path: str) -> list[str]:
    link = dc_link()
    return compare_passes(de_run(), path) + [""] + _frozen_compare(
        path, link, f"# {path}: vLLM's kernels (vllm_ar_t<2>) against run dc's frozen model (h200.yaml's "
        f"custom_all_reduce, a flat fence {link.fence_s * 1e6:.3f} us)", DE_AR_CHECKS, de_check_of,
        dataclasses.replace(link, fence_s=0.0))


#: run cx's CSV: runs da's and db's frozen forms take their constants from its calibration and its chase
CX_CSV = "benchmarks/gpu/h200x2-20261130cx-custom-ar.csv"


def chase_us(rows: list[dict], where: str = "peer", size: int = 16 * MIB) -> float:
    """A chase's round trip (us) in a CSV."""
    for r in rows:
        if r["kind"] == "chase" and r["variant"] == where and int(r["bytes"]) == size:
            return float(r["median_us"])
    raise SystemExit(f"the CSV has no {where} chase row at {size} bytes")


def da_block_rate(cx_csv: str = CX_CSV) -> float:
    """Run da's frozen rate (bytes/s) a block's peer loads go out at: run cx's pass (calibrated: 4 blocks
    through 16 MiB) less its chase's round trip is 512 threads' 16 bytes (8 KiB) at that rate."""
    rows = load(cx_csv)
    return THREADS * PACK / calibrate(rows).per_load_s


def da_pass_us(loads: int, threads: int, round_trip_us: float, rate: float) -> float:
    """Run da's frozen form: a block's pass is a peer load's round trip plus its bytes in flight (each
    thread's ``loads`` packs of 16 bytes) at the block's rate."""
    return round_trip_us + loads * threads * PACK / rate * 1e6


def db_pass_us(loads: int, threads: int, blocks: int, round_trip_us: float, cx: CustomArLink) -> float:
    """Run db's frozen form: a block's pass is a peer load's round trip plus run cx's pass less its chase
    (``cx.per_load_s``) for each load a thread has in flight, whatever the threads; the blocks' passes
    share the reads' link (``cx.read_bytes_per_s``), so a pass is at least the blocks' bytes at its rate."""
    alone = round_trip_us + loads * cx.per_load_s * 1e6
    return max(alone, blocks * loads * threads * PACK / cx.read_bytes_per_s * 1e6)


@dataclasses.dataclass(frozen=True)
class PassRun:
    """A run of ``pass_probe`` (runs da and db): its (loads, threads, blocks), its registered checks (rows,
    median / worst abs error), which check a configuration belongs to, and its frozen form's pass (us) from
    a configuration and the lease's chase."""

    name: str
    configs: tuple[tuple[int, int, int], ...]
    checks: dict[str, tuple[str, float, float]]
    check_of: Callable[[int, int, int], str | None]
    form: Callable[[int, int, int, float], float]
    form_text: str  # the frozen form, in words, after "a pass = the lease's chase"
    frozen_text: str  # the same in the frozen table's title, with where its constants come from
    today: Callable[[int], float] | None = None  # the documents' pass (us) by loads when frozen; None: 1.00
    today_text: str = "1.00 us"  # the same in words


def da_check_of(loads: int, threads: int, blocks: int) -> str | None:
    if loads == 0:
        return None
    if threads != THREADS:
        return "E2"
    return "E3" if blocks != 4 else "E1"


def db_check_of(loads: int, threads: int, blocks: int) -> str | None:
    if threads != THREADS:
        return "G2"
    if blocks == BLOCK_LIMIT:
        return "G3"
    return None if (loads, blocks) == (1, 4) else "G1"


def da_run() -> PassRun:
    """Run da (h200x2-20261130da-custom-ar-hypotheses.md): H, a pass's bytes in flight at a block's rate."""
    rate = da_block_rate()
    return PassRun("da", tuple(da_configs()), {
        "E1": ("a pass with k = 1-5 and 7 loads from the peer: 512 threads, 4 blocks", 10.0, 20.0),
        "E2": ("a pass at 64-256 threads a block, k = 1 and 3: 4 blocks", 10.0, 20.0),
        "E3": ("a pass at 1 and 8 blocks, k = 1 and 3: 512 threads", 10.0, 20.0),
    }, da_check_of, lambda k, t, b, rt: da_pass_us(k, t, rt, rate),
        f"+ bytes at {rate / 1e9:.2f} GB/s a block", f"+ loads x threads x 16 B at {rate / 1e9:.2f} GB/s a block "
        "(run cx's calibrated pass less its chase over 8 KiB)")


def db_run() -> PassRun:
    """Run db (h200x2-20261130db-custom-ar-hypotheses.md): a pass's loads a thread, whatever the threads."""
    cx = calibrate(load(CX_CSV))
    return PassRun("db", DB_CONFIGS, {
        "G1": ("a pass with 2, 4 and 6 loads from the peer at 512 threads: 2, 4 and 10 blocks", 10.0, 20.0),
        "G2": ("a partial pass: 192 and 384 threads, k = 2 and 5 (not in the adoption rule)", 15.0, 30.0),
        "G3": ("36 blocks (vLLM's) at k = 1, 3 and 7: the reads' link full from k = 3", 10.0, 20.0),
    }, db_check_of, lambda k, t, b, rt: db_pass_us(k, t, b, rt, cx),
        f"+ {cx.per_load_s * 1e6:.3f} us a load a thread, at least the blocks' bytes at {cx.read_bytes_per_s / 1e9:.1f} GB/s",
        f"+ {cx.per_load_s * 1e6:.3f} us for each load a thread has in flight, whatever the threads (run cx's calibrated "
        f"pass less its chase), at least the blocks' bytes at {cx.read_bytes_per_s / 1e9:.1f} GB/s (run cx's reads' link)")


def pass_slopes(rows: list[dict], configs) -> list[dict]:
    """Each configuration's pass (us): the slope of its two rows (``DA_PASSES``)."""
    lo, hi = DA_PASSES
    by = {(r["variant"], int(r["bytes"])): r for r in rows if r["kind"] == "pass"}
    out = []
    for k, t, b in configs:
        variant = f"pass-k{k}-t{t}-b{b}"
        rs = [by.get((variant, p * b * t * PACK)) for p in (lo, hi)]
        if None in rs:
            continue
        times = [float(r["median_us"]) for r in rs]
        out.append({"loads": k, "threads": t, "blocks": b, "lo_us": times[0], "hi_us": times[1],
                    "pass_us": (times[1] - times[0]) / (hi - lo), "ok": all(r["ok"] == "True" for r in rs)})
    return out


def frozen_passes(run: PassRun) -> list[str]:
    """A ``pass_probe`` run's passes as its frozen form predicts them, before the run (run cx's chase shown
    for the lease's)."""
    rt = chase_us(load(CX_CSV))
    lines = [f"# run {run.name} frozen predictions (committed before the run): a pass = a peer load's round trip (the "
             f"lease's own chase, 16 MiB; run cx's {rt:.3f} us shown) {run.frozen_text}; today's model: "
             f"{run.today_text}{'' if run.today else ' whatever the bytes'}",
             "", "| loads | threads | blocks | bytes a pass | frozen pass (us) | today's model (us) | check |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for k, t, b in run.configs:
        today = f"{run.today(k):.3f}" if run.today else "1.000"
        frozen, today = (f"{run.form(k, t, b, rt):.3f}", today) if k else ("-", "-")
        lines.append(f"| {k} | {t} | {b} | {k * t * PACK} | {frozen} | {today} | {run.check_of(k, t, b) or '-'} |")
    return lines


def compare_passes(run: PassRun, path: str) -> list[str]:
    """A ``pass_probe`` run's passes against its frozen form (the lease's chase) and today's model."""
    rows = load(path)
    rt = chase_us(rows)
    lines = [f"# {path}: a pass from the slope of {DA_PASSES[0]} and {DA_PASSES[1]} passes a block; frozen: the lease's "
             f"chase {rt:.3f} us {run.form_text}; today's model: {run.today_text}", "",
             "| probe | bytes | us |", "|---|---:|---:|"]
    lines += [f"| {r['kind']} {r['variant']} | {r['bytes']} | {float(r['median_us']):.3f} |"
              for r in rows if r["kind"] in ("chase", "pingpong")]
    lines += ["", "| loads | threads | blocks | bytes a pass | 16 passes (us) | 256 passes (us) | pass (us) | frozen (us) | "
              f"error | today's {'model' if run.today else '1.00'} | ok | check |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    errs: dict[str, list[float]] = {k: [] for k in run.checks}
    for p in pass_slopes(rows, run.configs):
        k, t, b = p["loads"], p["threads"], p["blocks"]
        pred = run.form(k, t, b, rt)
        check = run.check_of(k, t, b)
        if check:
            errs[check].append(pred / p["pass_us"] - 1)
        today = run.today(k) if run.today else 1.0
        cells = (f"{pred:.3f}", f"{100 * (pred / p['pass_us'] - 1):+.1f}%",
                 f"{100 * (today / p['pass_us'] - 1):+.1f}%") if k else ("-", "-", "-")
        lines.append(f"| {k} | {t} | {b} | {k * t * PACK} | {p['lo_us']:.2f} | {p['hi_us']:.2f} | {p['pass_us']:.3f} | "
                     f"{' | '.join(cells)} | {p['ok']} | {check or '-'} |")
    return lines + check_lines(run.checks, errs)


def plot_passes(out: str) -> list[str]:
    """docs/img/gpu-custom-ar-passes.png: a block's pass by the loads a thread keeps in flight, on two H200s:
    the emulation's loop (runs da and db, ``pass_probe``) and vLLM's compiled loop (runs de and df,
    ``pass_t``), at 512 threads (filled) and fewer (hollow), run cz's pass with three peers (the emulation on
    four GPUs), against h200.yaml's pass (``load + k per_load``) and the one before run db (one peer's
    whatever the loads). Returns its table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    link = document_link()
    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    lines = ["| run | loop | loads | threads | blocks | pass (us) | model (us) |", "|---|---|---:|---:|---:|---:|---:|"]
    runs = (("da", da_configs(), "o", "C0", "emulation"), ("db", DB_CONFIGS, "s", "C0", "emulation"),
            ("de", DE_PASS_CONFIGS, "^", "C3", "vLLM's compiled"), ("df", DF_PASS_CONFIGS, "v", "C3", "vLLM's compiled"))
    for run, configs, marker, colour, loop in runs:
        for p in pass_slopes(load(f"benchmarks/gpu/h200x2-20261130{run}-custom-ar.csv"), configs):
            k, t, b = p["loads"], p["threads"], p["blocks"]
            if not k or b == BLOCK_LIMIT:  # no peer; vLLM's 36 blocks fill the link from k = 3
                continue
            full = t == THREADS
            ax.plot(k, p["pass_us"], marker, color=colour, mfc=colour if full else "none", ms=6)
            lines.append(f"| {run} | {loop} | {k} | {t} | {b} | {p['pass_us']:.3f} | {link.pass_at(k) * 1e6:.2f} |")
    rows = load("benchmarks/gpu/h200x4-20261130cz-custom-ar.csv")
    cz = (_row(rows, "1stage-b4", 16 * MIB) - _row(rows, "empty-b36", 0)) / (16 * MIB // PACK // (4 * THREADS))
    ax.plot(3, cz, "*", color="C1", ms=13)
    lines.append(f"| cz (four GPUs, three peers) | emulation | 3 | 512 | 4 | {cz:.3f} | {link.pass_at(3) * 1e6:.2f} |")
    ks = list(range(0, 8))
    ax.plot(ks, [link.pass_at(k) * 1e6 for k in ks], "-", color="C2")
    ax.axhline(link.pass_at(1) * 1e6, color="grey", ls="--", lw=1)
    ax.plot([], [], "o", color="C0", label="emulation's loop (runs da o, db s), 1-10 blocks")
    ax.plot([], [], "^", color="C3", label="vLLM's compiled loop (runs de ^, df v), 1-12 blocks")
    ax.plot([], [], "o", color="grey", mfc="none", label="fewer than 512 threads")
    ax.plot([], [], "*", color="C1", ms=11, label="run cz: emulation on four GPUs, three peers")
    ax.plot([], [], "-", color="C2", label=f"h200.yaml, a lone block: {link.load_s * 1e6:.3f} + {link.per_load_s * 1e6:.3f} "
            "us x loads (run di)")
    ax.plot([], [], "--", color="grey", label="before run db: one peer's pass")
    ax.set(xlabel="16-byte loads a thread keeps in flight from peers (one a peer in vLLM's kernel)",
           ylabel="a block's pass (us)", title="vLLM's custom all-reduce: a pass by the loads in flight (two H200s)")
    ax.set_xlim(0, 7.5)
    ax.set_ylim(0, 2.6)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return lines


def plot_di(out: str) -> list[str]:
    """docs/img/gpu-custom-ar-queue.png: a block's pass of vLLM's compiled loop by the blocks reading at once, at
    1, 2, 3 and 7 loads a thread (512 threads, two H200s): runs de, df and dh hollow (the lone-block points
    calibrate the line, the rest in sample), run di filled (frozen before it), against h200.yaml now (form B:
    the blocks a closed network at the reads' link), run di's form A (the lone pass, at least the link's share)
    and the link alone. Returns its table."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    link, passes = document_link(), compiled_passes()
    line = di_line(passes)
    fig, ax = plt.subplots(figsize=(7.6, 4.8))
    lines = ["| run | loads | blocks | pass (us) | model now (us) | error |", "|---|---:|---:|---:|---:|---:|"]
    measured = [(p, False) for p in passes] + [
        (p, True) for p in pass_slopes(load("benchmarks/gpu/h200x2-20261130di-custom-ar.csv"), DI_PASS_CONFIGS)]
    blocks = list(range(1, BLOCK_LIMIT + 1))
    for colour, k in zip(("C0", "C2", "C1", "C3"), (1, 2, 3, 7), strict=True):
        ax.plot(blocks, [link.pass_at(k, b) * 1e6 for b in blocks], "-", color=colour, label=f"{k} load{'s' * (k > 1)}")
        ax.plot(blocks, [di_max_pass_us(k, THREADS, b, line) for b in blocks], ":", color=colour, lw=1)
        for p, frozen in measured:
            if (p["loads"], p["threads"]) != (k, THREADS):
                continue
            model = link.pass_at(k, p["blocks"]) * 1e6
            ax.plot(p["blocks"], p["pass_us"], "o", color=colour, mfc=colour if frozen else "none", ms=6)
            lines.append(f"| {'di' if frozen else p['run']} | {k} | {p['blocks']} | {p['pass_us']:.3f} | {model:.3f} | "
                         f"{100 * (model / p['pass_us'] - 1):+.1f}% |")
    ax.plot([], [], "o", color="grey", label="run di (frozen before it)")
    ax.plot([], [], "o", color="grey", mfc="none", label="runs de, df, dh")
    ax.plot([], [], "-", color="grey", label="h200.yaml: a closed network (run di's form B)")
    ax.plot([], [], ":", color="grey", label="form A: the lone pass or the link's share")
    ax.set(xlabel="blocks reading at once (512 threads each)", ylabel="a block's pass (us)", xlim=(0, 37), ylim=(0.8, 3.6),
           title="vLLM's custom all-reduce: a pass queued at the reads' link (two H200s)")
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write (two GPUs; run cz four)")
    ap.add_argument("--per", type=int, default=100)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dry-run", action="store_true", help="print the timed rows")
    ap.add_argument("--run", choices=("cx", "cy", "cz", "da", "db", "dc", "dd", "de", "df", "dg", "dh", "di"),
                    default="cx", help="the rows to time: runs cw and cx's, run cy's, run cz's (four GPUs), runs da's, "
                    "db's, df's and di's passes, runs dc's, dd's or de's, run dg's (four GPUs) or run dh's survey")
    ap.add_argument("--ptx", metavar="PATH", help="write NVRTC's PTX of the kernels (GPU host)")
    ap.add_argument("--compare", metavar="CSV", help="a measured CSV against the model calibrated on it and run cx's "
                    "checks (CPU)")
    ap.add_argument("--frozen", choices=("cy", "cz", "da", "db", "dc", "de", "df", "dg", "dg-di", "di"), help="a run's rows as its frozen model predicts them (CPU)")
    ap.add_argument("--plot", nargs=3, metavar=("CX_CSV", "NCCL_CSV", "PNG"),
                    help="run cx's kernels and NCCL's all-reduce on its lease against the model, to a figure (CPU)")
    ap.add_argument("--plot-di", metavar="PNG", help="runs de-di's passes by the blocks reading against the model, to "
                    "a figure (CPU)")
    ap.add_argument("--plot-passes", metavar="PNG", help="runs da's and db's passes by loads a thread against the "
                    "model, to a figure (CPU)")
    ap.add_argument("--compare-cy", metavar="CSV", help="run cy's CSV against its frozen model and checks (CPU)")
    ap.add_argument("--compare-cz", metavar="CSV", help="run cz's CSV against its frozen model and checks (CPU)")
    ap.add_argument("--compare-cz-now", metavar="CSV", help="run cz's CSV against the document's model now (runs da "
                    "and db's pass; explained after measurement) and its checks (CPU)")
    ap.add_argument("--compare-da", metavar="CSV", help="run da's passes against its frozen form and checks (CPU)")
    ap.add_argument("--compare-dc", metavar="CSV", help="run dc's CSV against its frozen model and checks (CPU)")
    ap.add_argument("--survey-dh", metavar="CSV", help="run dh's passes by loads and blocks (CPU)")
    ap.add_argument("--compare-dg", metavar="CSV", help="run dg's CSV against its frozen model and checks (CPU)")
    ap.add_argument("--compare-dg-di", metavar="CSV", help="run dg's CSV against the documents after run di, frozen "
                    "too, and their checks (CPU)")
    ap.add_argument("--compare-df", metavar="CSV", help="run df's passes against its frozen form and checks (CPU)")
    ap.add_argument("--compare-di", metavar="CSV", help="run di's passes against its two frozen forms and checks (CPU)")
    ap.add_argument("--compare-de", metavar="CSV", help="run de's CSV against its frozen models and checks (CPU)")
    ap.add_argument("--compare-dd", metavar="CSV", help="run dd's CSV: vLLM's compiled form against the emulation, "
                    "its checks, and the stage-2 gather (CPU)")
    ap.add_argument("--compare-db", metavar="CSV", help="run db's passes against its frozen form and checks (CPU)")
    args = ap.parse_args(argv)
    for wanted, report in ((args.compare, compare), (args.compare_cy, compare_cy), (args.compare_cz, compare_cz),
                           (args.compare_cz_now, compare_cz_now),
                           (args.compare_da, lambda p: compare_passes(da_run(), p)),
                           (args.compare_db, lambda p: compare_passes(db_run(), p)),
                           (args.compare_dc, compare_dc), (args.compare_dd, compare_dd),
                           (args.compare_de, compare_de), (args.compare_df, lambda p: compare_passes(df_run(), p)),
                           (args.compare_dg, compare_dg), (args.survey_dh, survey_dh), (args.compare_di, compare_di),
                           (args.compare_dg_di, compare_dg_di)):
        if wanted:
            print("\n".join(report(wanted)))
            return 0
    if args.ptx:
        return dump_ptx(args.ptx)
    if args.plot:
        print("\n".join(plot(*args.plot)))
        return 0
    if args.plot_passes:
        print("\n".join(plot_passes(args.plot_passes)))
        return 0
    if args.plot_di:
        print("\n".join(plot_di(args.plot_di)))
        return 0
    if args.frozen:
        print("\n".join({"cy": frozen_cy, "cz": frozen_cz, "da": lambda: frozen_passes(da_run()),
                          "db": lambda: frozen_passes(db_run()), "dc": frozen_dc,
                          "de": frozen_de, "df": lambda: frozen_passes(df_run()),
                          "dg": frozen_dg, "dg-di": frozen_dg_di, "di": frozen_di}[args.frozen]()))
        return 0
    if args.per <= 0 or args.reps <= 0:
        ap.error("--per and --reps must be positive")
    rows = plan(args.per, args.reps, args.run)
    if args.dry_run:
        for r in rows:
            print(f"{r['variant']:14s} {r['bytes']:>10d} B blocks {r['blocks']:3d} per {r['per']:3d} reps {r['reps']}")
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run / --compare)")
    return _run(rows, args.out)


if __name__ == "__main__":
    sys.exit(main())
