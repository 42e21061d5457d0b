"""The Simple ramp with NCCL's protocol and nothing else (run cc): a ring all-reduce emulated.

NCCL's ring Simple collectives on two GPUs pay a per-call cost that grows with the bytes (the
Simple ramp, docs/gpu.md), only where 12 or more ring channels contend for NVLink (run ad); plain
SM copies over the same link, as many CTAs, have none (run bv). What is left is NCCL's protocol on
those channels. This script runs that protocol alone: a CUDA kernel (CuPy, NVRTC) in which each
CTA is one channel of a two-GPU ring all-reduce as NCCL 2.28's device code runs it
(``src/device/all_reduce.h`` runRing, ``prims_simple.h`` genericOp): the buffer in loops of
``channels x 2 x chunk`` (chunk 2 MiB: ``NCCL_BUFFSIZE`` 4 MiB / ``NCCL_STEPS`` 8 x
``CHUNKSTEPS`` 4), a loop's chunk shrunk to what is left; per loop three primitive calls, ``send``
(input to the peer's FIFO), ``recvReduceCopySend`` (the peer's slot plus the input, to the output
and the peer's FIFO) and ``recv`` (the peer's slot to the output: the step that puts nothing on
NVLink); each call two slices, a slice a wait on the peer's flag (the tail the sender posts into
the receiver's memory, the head the receiver posts back; 8 steps of 512 KiB a channel's FIFO),
a barrier, the copy by 512 threads (16-byte loads and stores), a barrier, a system fence and the
flag store. Variants:

- ``nccl``: as above;
- ``norecv``: the same flags and steps, but the last step moves no bytes (the FIFO-to-output copy
  skipped): what the local step costs when the channels run it in step;
- ``cl4``: as ``nccl``, the CTAs launched in clusters of 4 (``__cluster_dims__``): NCCL's own
  launch on sm90 (``src/enqueue.cc`` ncclLaunchKernel at 01e6dd9: the cluster dimension
  ``cgaClusterSize``, 4 by default, ``src/init.cc`` parseCommConfig; run cd);
- ``cl4w`` (run dn): as ``cl4`` with NCCL's roles (``prims_simple.h``): 512 workers and one more warp
  (544 threads), whose last two threads post (the send's fence and flag, the receive's flag) while the
  workers wait for and copy the next slice; the barrier closing a slice's copy waits for the post.

``--ranks N`` (run dn) runs a ring of the first N visible GPUs (GPU d sends to d + 1, receives from
d - 1): runRing's 2N - 1 calls a loop for the all-reduce, N for the others, each on the chunk or
part ringRanks gives it; after the rows each op and variant is checked to compute its collective.
Since run dn the kernel is compiled with ``__launch_bounds__(544)`` (runs cc-ct's with 512).
``--graphs`` (run dp) replays each row's calls from one CUDA graph a GPU: one Python thread launching a
call on every GPU costs about 14 us a launch, which bounds the calls below about 8 MiB on two GPUs (run
dn) and more on four.

``--ops`` (run cr) adds the two-rank reduce-scatter (``send``, ``recvReduceCopy``) and all-gather out
of place (``copySend``, ``recv``): ``reduce_scatter.h``, ``all_gather.h`` runRing, a loop channels x
one chunk of a rank's part (S / 2), two primitive calls of two slices; their stamps are labelled
``<variant>-<op>``.

Each row: ``per`` calls back to back on each GPU (one launch each, interleaved), a CUDA event pair
around them on each GPU, the slower GPU's time / ``per``, median of ``reps`` trials. The CSV has
``collective_ramp_diag.py``'s columns (variant ``<variant>-ch<C>``, case ``plain``, op
``all_reduce`` or the op ``--ops`` names). Every channel stamps the global timer after each slice; ``--stamps`` keeps GPU 0's
stamps of the last call of chosen rows (``--stamp-all``: every row's; since run ct each slice's stamp
also has its flag wait, its post, the fence and flag stores, in ns, and its bytes), and ``--analyse``
(CPU) prints the ramp by variant and
channels and, from the stamps, how far the channels drift apart and how often all of them are in
their local step at once.

Measure (one process, every GPU of the ring; about a minute on two H200s)::

    python benchmarks/gpu/ring_emul.py --out cc-emul.csv --stamps cc-emul-stamps.csv.gz

Hypotheses and their signatures: ``h200x2-20261129cc-ring-hypotheses.md`` (committed before
the run).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective_ramp_diag import (  # noqa: E402  (beside this file)
    FIELDS,
    MIB,
    fit_per_mib,
    load,
    per_calls,
    relative_ramp,
)
from nvlink_copy import time_trials  # noqa: E402  (beside this file)

VARIANTS = ("nccl", "norecv", "cl4", "cl4w")
#: the ops the kernel runs (its ``op`` argument) and the slices a loop of each (2 a primitive call)
OP_CODES = {"all_reduce": 0, "reduce_scatter": 1, "all_gather": 2}
SLICES_A_LOOP = {"all_reduce": 6, "reduce_scatter": 4, "all_gather": 4}
#: the variants a plain run measures (run cc); ``cl4`` is asked for by name (run cd)
DEFAULT_VARIANTS = ("nccl", "norecv")
CHANNELS = (4, 8, 12, 16, 24, 32)
SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048)
THREADS = 512  # NCCL_SIMPLE_MAX_NTHREADS (src/include/device.h)
STEPS = 8  # NCCL_STEPS
STEP_BYTES = 512 * 1024  # NCCL_BUFFSIZE 4 MiB / NCCL_STEPS
CHUNK_BYTES = 4 * STEP_BYTES  # ALLREDUCE_CHUNKSTEPS 4: 2 MiB (calcCollChunking leaves the ring's)
MAX_STAMPS = 512  # a channel's stamps kept (slices: 6 a loop; 1 GiB at 24 channels is 11 loops, 4 GiB at 16 is 64)
#: rows whose stamps are kept (variant, channels, MiB)
STAMP_ROWS = {(v, c, s) for v in VARIANTS for c in (8, 16, 24) for s in (64, 256, 1024, 4096)}  # 4096: run cs
#: the cluster attribute of each variant's kernel
CLUSTER = {"nccl": "", "norecv": "", "cl4": "__cluster_dims__(4, 1, 1)", "cl4w": "__cluster_dims__(4, 1, 1)"}
#: the variants whose posts a warp of their own makes, as NCCL's do (run dn): ``THREADS`` workers and that warp
POST_WARP = {"cl4w"}
#: a guess of one channel's rate (GB/s of S) that caps the calls of a trial (per_calls)
CHANNEL_GBPS = 20.0
#: a flag wait that passes this is a hang: the kernel gives up and the run stops
WAIT_NS = 2_000_000_000

KERNEL = r"""
#define NSTEPS 8
#define UNROLL 4
#define NWORKERS 512  // THREADS: NCCL_SIMPLE_MAX_NTHREADS
typedef unsigned long long u64;

__device__ __forceinline__ u64 now() {
  u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}
__device__ __forceinline__ u64 load_acquire(const u64* p) {
  u64 v; asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ void store_flag(u64* p, u64 v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}
// thread 0 waits until *p >= want; false (and *err set) after WAIT_NS
__device__ __forceinline__ bool wait_ge(const u64* p, u64 want, int* err) {
  const u64 t0 = now();
  while (load_acquire(p) < want) {
    if (now() - t0 > WAIT_NS) { atomicExch(err, 1); return false; }
  }
  return true;
}

// dst[i] = a[i] (+ b[i]) (also into dst2 when given), i < n, float4s, the CTA's NWORKERS workers
__device__ __forceinline__ void reduce_copy(const float4* a, const float4* b, float4* dst,
                                            float4* dst2, long long n) {
  const int nw = NWORKERS;
  for (long long i = threadIdx.x; i < n; i += (long long)nw * UNROLL) {
    float4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long j = i + (long long)u * nw;
      if (j < n) {
        v[u] = a[j];
        if (b) { const float4 w = b[j]; v[u].x += w.x; v[u].y += w.y; v[u].z += w.z; v[u].w += w.w; }
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long j = i + (long long)u * nw;
      if (j < n) { dst[j] = v[u]; if (dst2) dst2[j] = v[u]; }
    }
  }
}

// One channel (CTA) of an nranks-rank ring collective, NCCL's Simple protocol: op 0 the all-reduce
// (send, recvReduceSend x (n-2), recvReduceCopySend, recvCopySend x (n-2), recv), op 1 the
// reduce-scatter (send, recvReduceSend x (n-2), recvReduceCopy), op 2 the all-gather out of place
// (copySend, recvCopySend x (n-2), recv): src/device/all_reduce.h, reduce_scatter.h, all_gather.h
// runRing, the chunk or part each call works on as there (ringRanks). n16 is S (the all-reduce's
// buffer, the reduce-scatter's input, the all-gather's output); a rank's part is S / n.
// fifo_mine: this rank's FIFO, written by the previous rank; fifo_next: the next rank's, which this
// rank writes: [channels][NSTEPS * step16] float4. tail_*, head_*: [channels * 16] u64 (a 128-byte
// line a channel): the previous rank posts to my tail, the next rank to my head; I post to the next
// rank's tail (tail_next) and the previous rank's head (head_prev). On two ranks next and previous
// are the peer. steps: this GPU's [channels * 2] (send step, recv step), kept from call to call.
// postwarp 0: NWORKERS threads, thread 0 waits, copies with the others and posts (runs cc-ct);
// postwarp 1 (run dn): NCCL's roles (prims_simple.h): NWORKERS workers and one more warp, which
// posts (the CTA's last thread the send's fence and flag, the one before it the receive's flag)
// while the workers wait for and copy the next slice; the barrier after a slice's copy waits for it.
extern "C" __global__ void __launch_bounds__(NWORKERS + 32) CLUSTER_ATTR
ring_allreduce(const float4* __restrict__ in, float4* __restrict__ out, float4* fifo_mine,
               float4* fifo_next, u64* tail_mine, u64* tail_next, u64* head_mine, u64* head_prev,
               u64* steps, long long n16, long long chunk16, long long step16, int rank,
               int norecv, u64* stamps, int max_stamps, int* err, u64* where, int op, u64* extra,
               int nranks, int postwarp) {
  __shared__ int ok;
  const int c = blockIdx.x, nch = gridDim.x, tid = threadIdx.x;
  const bool lead = tid == 0, worker = tid < NWORKERS;
  const bool post_send = postwarp ? tid == (int)blockDim.x - 1 : lead;
  const bool post_recv = postwarp ? tid == (int)blockDim.x - 2 : lead;
  u64 send_step = steps[2 * c], recv_step = steps[2 * c + 1];
  float4* const fm = fifo_mine + (long long)c * NSTEPS * step16;
  float4* const fn = fifo_next + (long long)c * NSTEPS * step16;
  u64* const my_tail = tail_mine + 16 * c;  // the previous rank posts here: data in my FIFO
  u64* const my_head = head_mine + 16 * c;  // the next rank posts here: my data in its FIFO consumed
  u64* const next_tail = tail_next + 16 * c;
  u64* const prev_head = head_prev + 16 * c;
  int nst = 0;
  if (*err) return;  // an earlier call gave up: every later one returns at once
  if (lead) {
    ok = 1;
    unsigned sm, cluster;  // where this channel runs: its SM and, launched in clusters, its cluster
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cluster));
    where[c] = ((u64)cluster << 32) | sm;
  }
  __syncthreads();
  const int nprim = op == 0 ? 2 * nranks - 1 : nranks;
  const long long part = op == 0 ? n16 : n16 / nranks;  // what the loops cover
  const long long spread = op == 0 ? (long long)nch * nranks : nch;
  const long long loop = spread * chunk16;
  for (long long grid = 0; grid < part; grid += loop) {
    long long real = (part - grid + spread - 1) / spread;
    if (real > chunk16) real = chunk16;
    const long long base = grid + (long long)c * (op == 0 ? nranks : 1) * real;
    for (int prim = 0; prim < nprim; ++prim) {
      // the rank whose chunk (all-reduce) or part (the others) this call works on
      const int who = op == 1 ? (rank + nranks - 1 - prim) % nranks
                    : op == 2 ? (rank + nranks - prim) % nranks
                    : prim < nranks ? (rank + nranks - 1 - prim) % nranks
                    : (rank + 2 * nranks - 1 - prim) % nranks;
      const long long off = op == 0 ? base + who * real : base;
      const long long end = op == 0 ? n16 : part;
      long long nelem = end - off;
      if (nelem > real) nelem = real;
      if (nelem < 0) nelem = 0;
      long long slice = (nelem + 1) / 2;  // SlicePerChunk 2, at least a 32nd of a full slice
      if (slice < 2 * step16 / 32) slice = 2 * step16 / 32;
      long long done = 0;
      for (int s = 0; s < 2; ++s) {  // every slice steps the flags, empty or not (genericOp)
        const long long sz = done >= nelem ? 0 : (slice < nelem - done ? slice : nelem - done);
        const bool sends = prim < nprim - 1, recvs = prim > 0;
        u64 t_start = 0, t_waited = 0;
        if (lead) {
          t_start = now();
          bool good = true;
          if (sends) good = wait_ge(my_head, send_step + 2 > NSTEPS ? send_step + 2 - NSTEPS : 0, err);
          if (good && recvs) good = wait_ge(my_tail, recv_step + 2, err);
          if (!good) ok = 0;
          t_waited = now();
        }
        if (postwarp) {
          if (worker) asm volatile("bar.sync 1, %0;" :: "r"(NWORKERS) : "memory");  // the workers' subBarrier
        } else {
          __syncthreads();
        }
        if (worker && ok) {
          const long long slot_s = (long long)(send_step % NSTEPS) * step16;
          const long long slot_r = (long long)(recv_step % NSTEPS) * step16;
          const long long at = off + done;
          float4* const to = fn + slot_s;
          const float4* const got = fm + slot_r;
          if (op == 0) {
            if (prim == 0) reduce_copy(in + at, 0, to, 0, sz);
            else if (prim < nranks - 1) reduce_copy(got, in + at, to, 0, sz);
            else if (prim == nranks - 1) reduce_copy(got, in + at, out + at, to, sz);
            else if (prim < nprim - 1) reduce_copy(got, 0, out + at, to, sz);
            else if (!norecv) reduce_copy(got, 0, out + at, 0, sz);
          } else if (op == 1) {  // send rank who's part of my input, reduced with what came; mine to out
            if (prim == 0) reduce_copy(in + who * part + at, 0, to, 0, sz);
            else if (prim < nprim - 1) reduce_copy(got, in + who * part + at, to, 0, sz);
            else if (!norecv) reduce_copy(got, in + rank * part + at, out + at, 0, sz);
          } else {  // my input to my part of out as it goes on; rank who's part from the FIFO
            if (prim == 0) reduce_copy(in + at, 0, out + rank * part + at, to, sz);
            else if (prim < nprim - 1) reduce_copy(got, 0, out + who * part + at, to, sz);
            else if (!norecv) reduce_copy(got, 0, out + who * part + at, 0, sz);
          }
        }
        __syncthreads();  // postwarp: also waits for the post warp, done with the previous slice's post
        if (!ok) return;
        const u64 t_copied = now();
        if (post_send && sends) { __threadfence_system(); store_flag(next_tail, send_step + 2); }
        if (post_recv && recvs) store_flag(prev_head, recv_step + 2);
        if (nst < max_stamps) {
          const long long i = (long long)c * max_stamps + nst;
          if (lead) {
            // the slice's end (postwarp: when its copy is done and the previous post too), its flag wait,
            // its bytes (run ct), and (not postwarp) its post: the fence and flag stores
            const u64 t_end = postwarp ? t_copied : now();
            stamps[i] = t_end;
            extra[3 * i] = t_waited - t_start;
            extra[3 * i + 2] = (u64)sz * 16;
            if (!postwarp) extra[3 * i + 1] = t_end - t_copied;
          }
          if (postwarp && post_send) extra[3 * i + 1] = sends ? now() - t_copied : 0;  // the post warp's post
        }
        ++nst;
        if (sends) send_step += 2;
        if (recvs) recv_step += 2;
        done += sz;
      }
    }
  }
  if (lead) { steps[2 * c] = send_step; steps[2 * c + 1] = recv_step; }
}
"""

#: run ct added the last three (a slice's flag wait and post, ns, and its bytes); older files lack them
STAMP_FIELDS = ["variant", "channels", "mib", "channel", "slice", "t_ns", "sm", "cluster", "wait_ns", "post_ns", "bytes"]


def variant_name(variant: str, channels: int) -> str:
    return f"{variant}-ch{channels}"


def plan(variants, channels, sizes, per: int, reps: int, ops=("all_reduce",), ranks: int = 2) -> list[dict]:
    rows = []
    for op, v, c, mib in ((op, v, c, mib) for op in ops for v in variants for c in channels for mib in sizes):
        # a call's wire bytes: the all-reduce's 2 (n - 1) / n x S, the others' (n - 1) / n x S
        wire = mib * MIB * (ranks - 1) * (2 if op == "all_reduce" else 1) // ranks
        n = per_calls(wire, per, CHANNEL_GBPS * c)
        rows.append(
            {
                "variant": variant_name(v, c),
                "case": "plain",
                "op": op,
                "bytes": mib * MIB,
                "ranks": ranks,
                "per": n,
                "reps": reps if n >= 4 else max(3, reps // 2),
                "k": 1,
                "channels": c,
                "norecv": v == "norecv",
                "kind": v,
            }
        )
    return rows


def slices_a_loop(op: str, ranks: int = 2) -> int:
    """Slices a channel runs a loop, 2 a primitive call: the all-reduce's 2n - 1 calls, the others' n
    (``SLICES_A_LOOP`` on two ranks)."""
    return 2 * (2 * ranks - 1 if op == "all_reduce" else ranks)


def slices_per_call(size: int, channels: int, op: str = "all_reduce", ranks: int = 2) -> int:
    """Slices a channel runs in one call: ``slices_a_loop`` a loop; a loop is channels x n chunks of the
    all-reduce's S, channels x 1 chunk of the others' part (S / n)."""
    loop = channels * ranks * CHUNK_BYTES
    return slices_a_loop(op, ranks) * max(1, math.ceil(size / loop))


def stamp_variant(kind: str, op: str, ranks: int = 2) -> str:
    """The stamps file's ``variant``: the kind for the all-reduce (runs cc, cd), ``<kind>-<op>`` else;
    ``-r<n>`` after it on a ring of n != 2 ranks (run dn)."""
    name = kind if op == "all_reduce" else f"{kind}-{op}"
    return name if ranks == 2 else f"{name}-r{ranks}"


def _planned(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[dict]:
    """The rows a measuring run's arguments ask for (``ap.error`` on a bad one)."""
    variants = [v for v in args.variants.split(",") if v]
    if not variants or any(v not in VARIANTS for v in variants):
        ap.error(f"--variants: comma-separated, each one of {', '.join(VARIANTS)}")
    ops = [o for o in args.ops.split(",") if o]
    if not ops or any(o not in OP_CODES for o in ops):
        ap.error(f"--ops: comma-separated, each one of {', '.join(OP_CODES)}")
    try:
        channels = [int(v) for v in args.channels.split(",") if v]
        sizes = [int(v) for v in args.sizes.split(",") if v]
    except ValueError:
        ap.error("--channels and --sizes take comma-separated whole numbers")
    if not channels or not sizes or min(channels + sizes + [args.per, args.reps]) <= 0:
        ap.error("--channels, --sizes, --per and --reps must be positive")
    if max(channels) > 64:
        ap.error("--channels: at most 64")
    if any(CLUSTER[v] for v in variants) and any(c % 4 for c in channels):
        ap.error("--channels: cl4 and cl4w launch clusters of 4 CTAs; every count must be a multiple of 4")
    if args.ranks < 2:
        ap.error("--ranks: a ring needs 2 or more GPUs")
    return plan(variants, channels, sizes, args.per, args.reps, ops, args.ranks)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write")
    ap.add_argument("--stamps", help="CSV(.gz) of the kept rows' per-slice stamps (GPU 0)")
    ap.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    ap.add_argument("--ops", default="all_reduce", help=f"comma-separated, of {', '.join(OP_CODES)} (run cr)")
    ap.add_argument("--channels", default=",".join(map(str, CHANNELS)))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="MiB, comma-separated")
    ap.add_argument("--per", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--stamp-all", action="store_true", help="keep the stamps of every row (run ct), not STAMP_ROWS'")
    ap.add_argument("--ranks", type=int, default=2, help="GPUs in the ring, the first n visible (run dn: 4)")
    ap.add_argument("--graphs", action="store_true", help="replay each row's calls from a CUDA graph a GPU (the "
                    "host then launches once a GPU a trial, not once a call; env column launch=graph)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument(
        "--analyse",
        nargs="+",
        metavar="CSV",
        help="ramp tables of these CSVs (this script's and collective_ramp_diag.py's; CPU)",
    )
    ap.add_argument("--stamps-in", metavar="STAMPS", help="with --analyse: the stamps file")
    ap.add_argument(
        "--verdict",
        nargs=3,
        metavar=("EMUL", "NCCL", "STAMPS"),
        help="the registered signatures of run cc against these files (CPU)",
    )
    ap.add_argument(
        "--verdict-cd",
        nargs="+",
        metavar="CSV",
        help="the registered signatures of run cd: its emulation CSV, then NCCL's cga<N> CSVs (CPU)",
    )
    ap.add_argument("--verdict-dp", nargs=2, metavar=("DIRECT", "GRAPHS"),
                    help="run dp's checks: the rows launched directly, then replayed from graphs (CPU)")
    args = ap.parse_args(argv)
    if args.verdict_cd:
        print("\n".join(verdict_cd(args.verdict_cd)))
        return 0
    if args.verdict_dp:
        print("\n".join(verdict_dp(*args.verdict_dp)))
        return 0
    if args.verdict:
        print("\n".join(verdict(*args.verdict)))
        return 0
    if args.analyse:
        print("\n".join(analyse(args.analyse, args.stamps_in)))
        return 0
    rows = _planned(ap, args)
    if args.dry_run:
        for r in rows:
            print(f"{r['op']:15s} {r['variant']:12s} {r['ranks']} ranks {r['bytes'] // MIB:5d} MiB per {r['per']:3d} "
                  f"reps {r['reps']}")
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run / --analyse)")
    return _run(rows, args.out, args.stamps, args.stamp_all, args.graphs)


class _Ring:  # pragma: no cover - needs two or more GPUs with peer access
    """Every GPU's buffers, FIFOs and flags, the kernel on each, a stream each: GPU d of ``ranks`` sends
    to d + 1 and receives from d - 1 (mod ``ranks``)."""

    def __init__(self, biggest: int, max_channels: int, ranks: int = 2):
        import cupy as cp

        self.cp, rt = cp, cp.cuda.runtime
        self.ranks, self.gpus = ranks, tuple(range(ranks))
        assert rt.getDeviceCount() >= ranks, f"{ranks} GPUs needed"
        self.step16 = STEP_BYTES // 16
        self.buf, self.fifo, self.tail, self.head, self.steps = {}, {}, {}, {}, {}
        self.kern, self.stream, self.stamps, self.err, self.where, self.extra = {}, {}, {}, {}, {}, {}
        for d in self.gpus:
            with cp.cuda.Device(d):
                for peer in sorted({self.next(d), self.prev(d)}):
                    assert rt.deviceCanAccessPeer(d, peer), f"no peer access {d} -> {peer}"
                    rt.deviceEnablePeerAccess(peer)
                self.buf[d] = (
                    cp.ones(biggest // 4, dtype=cp.float32),
                    cp.zeros(biggest // 4, dtype=cp.float32),
                )
                self.fifo[d] = cp.zeros(max_channels * STEPS * STEP_BYTES // 4, dtype=cp.float32)
                self.tail[d] = cp.zeros(max_channels * 16, dtype=cp.uint64)
                self.head[d] = cp.zeros(max_channels * 16, dtype=cp.uint64)
                self.steps[d] = cp.zeros(max_channels * 2, dtype=cp.uint64)
                self.stamps[d] = cp.zeros(max_channels * MAX_STAMPS, dtype=cp.uint64)
                self.extra[d] = cp.zeros(max_channels * MAX_STAMPS * 3, dtype=cp.uint64)
                self.err[d] = cp.zeros(1, dtype=cp.int32)
                self.where[d] = cp.zeros(max_channels, dtype=cp.uint64)
                src = KERNEL.replace("WAIT_NS", f"{WAIT_NS}ull")
                self.kern[d] = {
                    v: cp.RawKernel(src.replace("CLUSTER_ATTR", attr), "ring_allreduce")
                    for v, attr in CLUSTER.items()
                }
                self.stream[d] = cp.cuda.Stream(non_blocking=True)
        self.gpu = rt.getDeviceProperties(0)["name"].decode()

    def next(self, d: int) -> int:
        return (d + 1) % self.ranks

    def prev(self, d: int) -> int:
        return (d - 1) % self.ranks

    def reset(self) -> None:
        """Flags and step counters to zero on every GPU (between rows: a new channel count)."""
        for d in self.gpus:
            with self.cp.cuda.Device(d):
                self.stream[d].synchronize()
                for a in (self.tail[d], self.head[d], self.steps[d]):
                    a.fill(0)
                self.cp.cuda.Device(d).synchronize()

    def launches(self, r: dict, count: int, gpus: tuple[int, ...] | None = None) -> None:
        """``count`` calls of row ``r`` on each GPU of ``gpus`` (all by default), GPU by GPU a call."""
        import numpy as np

        n16 = r["bytes"] // 16
        postwarp = r["kind"] in POST_WARP
        for _ in range(count):
            for d in gpus or self.gpus:
                nxt, prv = self.next(d), self.prev(d)
                with self.cp.cuda.Device(d):
                    self.kern[d][r["kind"]](
                        (r["channels"],),
                        (THREADS + (32 if postwarp else 0),),
                        (
                            self.buf[d][0],
                            self.buf[d][1],
                            self.fifo[d],
                            self.fifo[nxt],
                            self.tail[d],
                            self.tail[nxt],
                            self.head[d],
                            self.head[prv],
                            self.steps[d],
                            np.int64(n16),
                            np.int64(CHUNK_BYTES // 16),
                            np.int64(self.step16),
                            np.int32(d),
                            np.int32(1 if r["norecv"] else 0),
                            self.stamps[d],
                            np.int32(MAX_STAMPS),
                            self.err[d],
                            self.where[d],
                            np.int32(OP_CODES[r["op"]]),
                            self.extra[d],
                            np.int32(self.ranks),
                            np.int32(1 if postwarp else 0),
                        ),
                        stream=self.stream[d],
                    )

    def failed(self) -> bool:
        return any(int(self.err[d].get()[0]) for d in self.gpus)

    def check(self, r: dict) -> bool:
        """One call of row ``r`` on inputs d + 1 (GPU d) computes its collective: the all-reduce's sum
        everywhere, the reduce-scatter's in a rank's part, the all-gather's part k = k + 1 (run dn). The
        buffers go back to ones and zeros after."""
        cp, n = self.cp, self.ranks
        size = r["bytes"] // 4
        part = size // n
        self.reset()
        for d in self.gpus:
            with cp.cuda.Device(d):
                self.buf[d][0][:size].fill(d + 1)
                self.buf[d][1].fill(0)
                cp.cuda.Device(d).synchronize()
        self.launches(r, 1)
        good = not self.failed()
        for d in self.gpus:
            self.stream[d].synchronize()
            with cp.cuda.Device(d):
                out = self.buf[d][1]
                if r["op"] == "all_reduce":
                    good &= bool((out[:size] == n * (n + 1) / 2).all())
                elif r["op"] == "reduce_scatter":
                    good &= bool((out[:part] == n * (n + 1) / 2).all())
                else:
                    good &= all(bool((out[k * part:(k + 1) * part] == k + 1).all()) for k in range(n))
                self.buf[d][0].fill(1)
                out.fill(0)
                cp.cuda.Device(d).synchronize()
        return good

    def graphs(self, r: dict, count: int) -> dict | None:
        """Each GPU's ``count`` calls of row ``r`` captured in a CUDA graph of its own (``--graphs``: a
        replay costs the host one launch a GPU, not one a call), or None where capture fails."""
        cp, out = self.cp, {}
        for d in self.gpus:
            with cp.cuda.Device(d):
                stream = self.stream[d]
                try:
                    stream.begin_capture()
                    try:
                        self.launches(r, count, (d,))
                    finally:
                        out[d] = stream.end_capture()
                except Exception as err:  # noqa: BLE001 - any capture failure: launch directly
                    print(f"graph capture on GPU {d} failed ({err}); launching directly", flush=True)
                    return None
        return out

    def time_row(self, r: dict, graphs: bool = False) -> tuple[float, bool]:
        """Us a call: ``per`` calls on each GPU, the slowest GPU's events, median of ``reps``; and whether
        the calls were replayed from CUDA graphs (``graphs``, where capture works)."""
        cp = self.cp
        self.reset()
        self.launches(r, 2)  # warm-up (and the module's load on each GPU)
        for d in self.gpus:
            self.stream[d].synchronize()
        if self.failed():
            return math.nan, False
        captured = self.graphs(r, r["per"]) if graphs else None

        def replay() -> None:
            for d in self.gpus:
                with cp.cuda.Device(d):
                    captured[d].launch(self.stream[d])

        launch = replay if captured else (lambda: self.launches(r, r["per"]))
        return time_trials(cp, self.stream, self.gpus, launch, r["per"], r["reps"]), captured is not None

    def last_stamps(self, c: int, n: int) -> list[list[int]]:
        """GPU 0's stamps of its last call, ns from its first slice's end."""
        with self.cp.cuda.Device(0):
            st = self.cp.asnumpy(self.stamps[0][: c * MAX_STAMPS]).astype("int64")
        st = st.reshape(c, MAX_STAMPS)[:, : min(n, MAX_STAMPS)]
        return (st - st.min()).tolist()

    def last_extra(self, c: int, n: int) -> list[list[tuple[int, int, int]]]:
        """GPU 0's last call, per channel and slice: (flag wait ns, post ns, bytes) (run ct)."""
        with self.cp.cuda.Device(0):
            ex = self.cp.asnumpy(self.extra[0][: c * MAX_STAMPS * 3]).astype("int64")
        ex = ex.reshape(c, MAX_STAMPS, 3)[:, : min(n, MAX_STAMPS)]
        return [[tuple(int(v) for v in x) for x in ch] for ch in ex]

    def placement(self, c: int) -> list[tuple[int, int]]:
        """GPU 0's channels' (SM, cluster) in its last call."""
        with self.cp.cuda.Device(0):
            w = self.cp.asnumpy(self.where[0][:c]).astype("int64")
        return [(int(v) & 0xFFFFFFFF, int(v) >> 32) for v in w]


def _run(rows: list[dict], out: str, stamps_out: str | None, stamp_all: bool = False,
         graphs: bool = False) -> int:  # pragma: no cover
    ranks = rows[0]["ranks"]
    ring = _Ring(max(r["bytes"] for r in rows), max(r["channels"] for r in rows), ranks)
    sfh = None
    if stamps_out:
        sfh = (gzip.open if stamps_out.endswith(".gz") else open)(stamps_out, "wt", newline="")
        swriter = csv.writer(sfh)
        swriter.writerow(STAMP_FIELDS)
    rc = 0
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            us, replayed = ring.time_row(r, graphs)
            if ring.failed():
                print(f"{r['op']} {r['variant']} {r['bytes'] // MIB} MiB: a flag wait timed out; stopping", flush=True)
                rc = 1
                break
            c, mib = r["channels"], r["bytes"] // MIB
            env = (f"threads={THREADS} chunk={CHUNK_BYTES} step={STEP_BYTES} norecv={int(r['norecv'])}"
                   + (" postwarp=1" if r["kind"] in POST_WARP else "") + (" launch=graph" if replayed else ""))
            writer.writerow(
                {**r, "median_us": round(us, 3), "sleep_us": 0, "gpu": ring.gpu, "nccl": "-", "env": env}
            )
            fh.flush()
            print(
                f"{r['op']:15s} {r['variant']:12s} {ranks} ranks {mib:5d} MiB {us:10.1f} us "
                f"{r['bytes'] / us / 1e3:7.1f} GB/s of S (per {r['per']})",
                flush=True,
            )
            if sfh and (stamp_all or (r["kind"], c, mib) in STAMP_ROWS):
                n = slices_per_call(r["bytes"], c, r["op"], ranks)
                where = ring.placement(c)
                label = stamp_variant(r["kind"], r["op"], ranks)
                for ch, (st, ex) in enumerate(zip(ring.last_stamps(c, n), ring.last_extra(c, n), strict=True)):
                    swriter.writerows([label, c, mib, ch, s, t, *where[ch], *x] for s, (t, x) in enumerate(zip(st, ex, strict=True)))
    if sfh:
        sfh.close()
    if not rc:  # the kernel computes each collective it timed (one call per op and kind, at 8 MiB)
        for r in {(r["op"], r["kind"]): r for r in rows}.values():
            good = ring.check({**r, "bytes": 8 * MIB})
            print(f"check {r['op']} {r['kind']} {ranks} ranks {r['channels']} channels: {'ok' if good else 'FAILED'}",
                  flush=True)
            rc = rc or (0 if good else 1)
    return rc


# --- analysis (CPU) -------------------------------------------------------------------------

#: the registered windows (h200x2-20261129cc-ring-hypotheses.md): past the L2 (run bv) and the
#: rate from 512 MiB up as collective_ramp_diag.py's
RAMP_WINDOW = (64, 256)
RATE_FROM = 512


def load_stamps(path: str) -> dict[tuple[str, int, int], list[list[int]]]:
    """(variant, channels, MiB) -> per channel its slice-end stamps (ns from the call's first)."""
    opener = gzip.open if path.endswith(".gz") else open
    out: dict[tuple[str, int, int], dict[int, dict[int, int]]] = {}
    with opener(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            key = (r["variant"], int(r["channels"]), int(r["mib"]))
            out.setdefault(key, {}).setdefault(int(r["channel"]), {})[int(r["slice"])] = int(r["t_ns"])
    return {k: [[ch[s] for s in sorted(ch)] for _, ch in sorted(v.items())] for k, v in out.items()}


def load_placement(path: str) -> dict[tuple[str, int, int], list[tuple[int, int]]]:
    """(variant, channels, MiB) -> per channel its (SM, cluster); run cd's stamps on (run cc's have none)."""
    opener = gzip.open if path.endswith(".gz") else open
    out: dict[tuple[str, int, int], dict[int, tuple[int, int]]] = {}
    with opener(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            if r.get("sm") and r["slice"] == "0":
                key = (r["variant"], int(r["channels"]), int(r["mib"]))
                out.setdefault(key, {})[int(r["channel"])] = (int(r["sm"]), int(r["cluster"]))
    return {k: [v[c] for c in sorted(v)] for k, v in out.items()}


def loop_slices(variant: str) -> int:
    """Slices a loop of a stamps file's ``variant`` (``stamp_variant``): the all-reduce's 6, else its op's."""
    op = next((o for o in OP_CODES if variant.endswith(f"-{o}")), "all_reduce")
    return SLICES_A_LOOP[op]


def phase_spread(stamps: list[list[int]], per_loop: int = 6) -> list[float]:
    """Per loop, the spread (max - min, us) of the channels' ends of that loop's last slice."""
    loops = min(len(st) for st in stamps) // per_loop
    last = per_loop - 1
    return [
        (max(st[per_loop * k + last] for st in stamps) - min(st[per_loop * k + last] for st in stamps)) / 1e3
        for k in range(loops)
    ]


def all_local_share(stamps: list[list[int]], per_loop: int = 6) -> float:
    """Share of the call's time in which every channel is in its local step (a loop's last two slices).

    A channel is in its local step from the end of its loop's third slice from last (the all-reduce's
    fourth, the second of ``recvReduceCopySend``; the others' second, their send's) to the end of
    its last (the last call's second slice); the call spans the earliest to the latest stamp.
    """
    spans = []
    for st in stamps:
        spans.append([(st[per_loop * k + per_loop - 3], st[per_loop * k + per_loop - 1])
                      for k in range(len(st) // per_loop)])
    start = min(st[0] for st in stamps)
    end = max(st[-1] for st in stamps)
    events = []
    for sp in spans:
        for a, b in sp:
            events += [(a, 1), (b, -1)]
    events.sort()
    inside, last, total = 0, start, 0
    for t, d in events:
        if inside == len(stamps):
            total += t - last
        inside += d
        last = t
    return total / (end - start) if end > start else math.nan


def analyse(paths: list[str], stamps_path: str | None = None) -> list[str]:
    """The ramp by variant and channels (relative ramp 64-256 MiB, rate from 512 MiB up), stamps."""
    data = load(paths)
    out = [
        "| variant | S / t from 512 MiB (GB/s) | a channel (GB/s) | relative ramp 16-256 | relative ramp 64-256 | excess at 256 / 1024 MiB (us) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for (variant, case, op), pts in sorted(data.items()):
        if op not in OP_CODES or case != "plain":
            continue
        per_mib, _ = fit_per_mib(pts, RATE_FROM)
        gbps = MIB / per_mib / 1e3
        ch = _channels(variant)
        a_channel = f"{gbps / ch:.1f}" if ch else "-"
        big = sorted(s for s in pts if s >= RATE_FROM)
        icept = statistics.fmean(pts[s] - per_mib * s for s in big)
        exc = " / ".join(
            f"{pts[s] - per_mib * s - icept:+.0f}" if s in pts else "-" for s in (256, 1024)
        )
        label = variant if op == "all_reduce" else f"{variant} ({op})"
        out.append(
            f"| {label} | {gbps:.1f} | {a_channel} | {relative_ramp(pts, per_mib, 16, 256):+.3f} | "
            f"{relative_ramp(pts, per_mib, *RAMP_WINDOW):+.3f} | {exc} |"
        )
    if stamps_path:
        out += ["", "| variant | channels | MiB | call us (GPU 0) | spread of the loops' ends (us) | all channels in the local step at once |", "|---|---:|---:|---:|---|---:|"]
        for (v, c, mib), st in sorted(load_stamps(stamps_path).items()):
            spread = phase_spread(st, loop_slices(v))
            shown = ", ".join(f"{s:.0f}" for s in spread[:12])
            out.append(
                f"| {v} | {c} | {mib} | {max(s[-1] for s in st) / 1e3:.0f} | {shown} | "
                f"{all_local_share(st, loop_slices(v)):.3f} |"
            )
    return out


#: the registered bounds (h200x2-20261129cc-ring-hypotheses.md)
SHOWN, NONE, UNCONTENDED = 0.04, 0.02, 0.9


def verdict(emul_csv: str, nccl_csv: str, stamps_csv: str) -> list[str]:
    """Each registered hypothesis of run cc against its files: the figures, then pass / fail."""
    data = load([emul_csv, nccl_csv])
    rel, per_channel = {}, {}
    for (variant, case, op), pts in data.items():
        if op != "all_reduce" or case != "plain":
            continue
        per_mib, _ = fit_per_mib(pts, RATE_FROM)
        rel[variant] = relative_ramp(pts, per_mib, *RAMP_WINDOW)
        per_channel[variant] = MIB / per_mib / 1e3 / (_channels(variant) or 1)
    nccl = next(v for v in rel if not v.startswith(VARIANTS))
    emul = {_channels(v): v for v in rel if v.startswith("nccl-")}
    base = per_channel[emul[min(emul)]]
    uncontended = sorted(c for c, v in emul.items() if per_channel[v] >= UNCONTENDED * base)
    e24, n24, r24 = rel[emul[24]], rel["norecv-ch24"], rel[nccl]
    spread = phase_spread(load_stamps(stamps_csv)["nccl", 24, 1024])
    test = r24 >= SHOWN
    hp = test and e24 >= SHOWN and 0.5 <= e24 / r24 <= 2 and all(
        abs(rel[emul[c]]) <= NONE for c in uncontended
    )
    hl = hp and n24 <= 0.5 * e24 and spread[-1] >= 2 * spread[0]
    hx = hp and n24 >= 0.75 * e24
    h0 = test and e24 < NONE
    return [
        f"relative ramp {RAMP_WINDOW[0]}-{RAMP_WINDOW[1]} MiB (rate from {RATE_FROM} MiB up): "
        f"NCCL ({nccl}) {r24:+.3f}; emulated at 24 channels {e24:+.3f}, without the local step {n24:+.3f}",
        f"uncontended (a channel >= {UNCONTENDED} of {min(emul)} channels' {base:.1f} GB/s): "
        + ", ".join(f"{c} channels {rel[emul[c]]:+.3f} ({per_channel[emul[c]]:.1f} GB/s)" for c in uncontended),
        f"1 GiB, 24 channels: spread of the loops' ends {spread[0]:.0f} us (first loop) -> {spread[-1]:.0f} (last)",
        f"no test (NCCL under +{SHOWN}): {'yes' if not test else 'no'}",
        f"HP, the protocol as emulated makes the ramp: {'pass' if hp else 'fail'}",
        f"HL, the local step taken in step: {'pass' if hl else 'fail'}",
        f"HX, the protocol but not the local step: {'pass' if hx else 'fail'}",
        f"H0, not reproduced: {'pass' if h0 else 'fail'}",
    ]


#: run cd's registered bounds (h200x2-20261129cd-cluster-hypotheses.md)
MATTERS_RAMP, MATTERS_RATE = 0.03, 0.03
MATCH_RAMP, MATCH_RATE = 0.015, 0.03


def ramp_and_rate(pts: dict[int, float]) -> tuple[float, float]:
    """(relative ramp over RAMP_WINDOW, S / t in GB/s from RATE_FROM up) of one variant's rows."""
    per_mib, _ = fit_per_mib(pts, RATE_FROM)
    return relative_ramp(pts, per_mib, *RAMP_WINDOW), MIB / per_mib / 1e3


def verdict_cd(paths: list[str]) -> list[str]:
    """Run cd's registered hypotheses: does NCCL's cluster launch set its ramp (HC), does the
    emulation launched as NCCL launches behave as NCCL (HE), or neither (HN)."""
    got = {
        variant: ramp_and_rate(pts)
        for (variant, case, op), pts in load(paths).items()
        if op == "all_reduce" and case == "plain"
    }
    nccl = {int(v.removeprefix("cga")): got[v] for v in got if v.startswith("cga")}
    (r4, g4), (r0, g0) = nccl[4], nccl[0]
    (rc, gc), (rn, gn) = got["cl4-ch24"], got["nccl-ch24"]
    hc = abs(r0 - r4) >= MATTERS_RAMP or abs(g0 / g4 - 1) >= MATTERS_RATE
    he = (
        abs(rc - r4) <= MATCH_RAMP
        and abs(gc / g4 - 1) <= MATCH_RATE
        and abs(rn - r0) <= MATCH_RAMP
        and abs(gn / g0 - 1) <= MATCH_RATE
    )
    hn = abs(r0 - r4) < MATCH_RAMP and abs(g0 / g4 - 1) < MATTERS_RATE / 2
    lines = [
        f"relative ramp {RAMP_WINDOW[0]}-{RAMP_WINDOW[1]} MiB / S / t from {RATE_FROM} MiB (GB/s):",
        *(f"  NCCL, clusters of {k}: {r:+.3f} / {g:.1f}" for k, (r, g) in sorted(nccl.items())),
        *(
            f"  emulated, {v}: {got[v][0]:+.3f} / {got[v][1]:.1f}"
            for v in sorted(got, key=lambda v: (v.split("-")[0], _channels(v) or 0))
            if not v.startswith("cga")
        ),
        f"HC, NCCL's cluster launch sets its ramp or rate: {'pass' if hc else 'fail'}",
        f"HE, the emulation launched as NCCL behaves as NCCL: {'pass' if he else 'fail'}",
        f"HN, the cluster launch changes nothing: {'pass' if hn else 'fail'}",
    ]
    return lines


def _channels(variant: str) -> int | None:
    """Channels named by a variant: ``nccl-ch24`` (this script), ``ch24`` (collective_ramp_diag)."""
    tail = variant.rsplit("ch", 1)[-1]
    return int(tail) if tail.isdigit() else None


#: run dp's registered bounds (h200x2-20261130dp-graphs-hypotheses.md): GPU-bound rows (us), their median and
#: largest gap, and the host's floor gone at the small sizes
DP_BOUND_US, DP_MEDIAN, DP_WORST, DP_FLOOR = 60.0, 0.03, 0.08, 0.20


def verdict_dp(direct_csv: str, graphs_csv: str) -> list[str]:
    """Run dp's checks: the rows launched directly against the same rows replayed from CUDA graphs."""
    def rows(path: str) -> dict[tuple[str, str, int], float]:
        with open(path, newline="") as fh:
            return {(r["variant"], r["op"], int(r["bytes"]) // MIB): float(r["median_us"]) for r in csv.DictReader(fh)}

    direct, graphs = rows(direct_csv), rows(graphs_csv)
    keys = sorted(k for k in direct if k in graphs)
    lines = ["| variant | op | MiB | direct (us) | graphs (us) | graphs / direct |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {v} | {op} | {mib} | {direct[v, op, mib]:.1f} | {graphs[v, op, mib]:.1f} | "
              f"{graphs[v, op, mib] / direct[v, op, mib]:.3f} |" for v, op, mib in keys]
    bound = [abs(graphs[k] / direct[k] - 1) for k in keys if direct[k] >= DP_BOUND_US]
    small = [k for k in keys if k[1] != "all_reduce" and k[2] <= 8]
    floor = 1 - statistics.median(graphs[k] for k in small) / statistics.median(direct[k] for k in small)
    g1 = statistics.median(bound) <= DP_MEDIAN and max(bound) <= DP_WORST
    return lines + ["",
                    f"G1, the graph replays the same calls (rows >= {DP_BOUND_US:.0f} us direct: {len(bound)}): median "
                    f"{100 * statistics.median(bound):.1f}%, largest {100 * max(bound):.1f}% -> {'pass' if g1 else 'fail'}",
                    f"G2, the host's floor gone (reduce-scatter and all-gather, 2-8 MiB): the graphs' median "
                    f"{100 * floor:.0f}% under the direct rows' -> {'pass' if floor >= DP_FLOOR else 'fail'}"]


if __name__ == "__main__":
    sys.exit(main())
