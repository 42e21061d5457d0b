"""HBM's rate by read/write mix, and what the timing harness's flush costs the kernel after it (run ca).

Two questions the FA3 decode runs left (docs/gpu.md, "Run bx", "FA3's tile waits for the store
ahead of it"): the largest decode kernels stream K and V at 4.3-4.6 TB/s (91-95% of the H200's 4.8)
where the model caps every streaming kernel at the copy's share (``efficiency.hbm_stream`` 0.896,
a read and a write a byte); and the 134-268 MB kernels, profiled right after ``measure.flush``
(``buf.add_(1)`` over 256 MiB, which leaves L2 full of dirty lines), take 5-9 us more than the
model. This script measures both without attention in the way:

- ``mix``: a plain CUDA kernel (CuPy, NVRTC), every SM busy (2 CTAs of 512 threads an SM), each
  thread reading ``r`` planes and writing ``w`` planes of 16-byte elements (4 elements in flight a
  thread): read-only (r=1, w=0), 4:1, 2:1, copy (1:1), 1:2, write-only (0:1), at 8 MiB-4 GiB of
  bytes moved;
- three states before each timed launch: ``dirty`` (the harness's flush, ``measure.flush``),
  ``clean`` (a read of another 256 MiB: L2 full of clean lines) and ``warm`` (the same launch just
  before it);
- ``--attention`` (needs the ``fa3-fwd`` wheel): FA3's and SDPA's FA2 decode calls at points runs
  bt and bw profiled, after the dirty and after the clean state, every kernel named.

Device times come from the profiler (CUPTI: every kernel's own duration); CUDA events around each
timed launch are kept beside them. Rows: ``mix, r, w, mib, state, rep, bytes, profiler_us, event_us``.

Measure (one H200, about a minute)::

    python benchmarks/gpu/hbm_mix.py --out ca-mix.csv --attention ca-attn-kernels.csv

Analyse (CPU; ``--verdict``: the registered checks and the flush's fitted form)::

    python benchmarks/gpu/hbm_mix.py --analyse ca-mix.csv [--attn ca-attn-kernels.csv] [--verdict]

Hypotheses and their signatures: ``h200-20261129ca-hbm-hypotheses.md`` (committed before the run).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

MIB = 1 << 20
#: (name, read planes, write planes)
MIXES = (("read", 1, 0), ("r4w1", 4, 1), ("r2w1", 2, 1), ("copy", 1, 1), ("r1w2", 1, 2), ("write", 0, 1))
#: bytes moved a launch (MiB): the read-only sweep is finer, for the flush's cost by size
SIZES = (8, 16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096)
MIX_SIZES = (32, 128, 512, 1024, 4096)
STATES = ("dirty", "clean", "warm")
REPS = 5
THREADS = 512
CTAS_PER_SM = 2  # __launch_bounds__(512, 2): both resident, 64 KB of loads in flight an SM
FLUSH_MIB = 256
FIELDS = ["mix", "r", "w", "mib", "state", "rep", "bytes", "profiler_us", "event_us"]
#: decode calls (batch, q heads, kv heads, head_dim, keys) runs bt and bw profiled: one wave of tiles
#: at 33-268 MB, and 1-4.3 GB
ATTENTION_POINTS = (
    (2, 32, 8, 128, 4096),
    (1, 32, 8, 128, 32768),
    (1, 16, 4, 128, 65536),
    (32, 8, 1, 128, 8192),
    (8, 32, 8, 128, 8192),
    (256, 32, 8, 128, 256),
    (16, 32, 8, 128, 16384),
    (32, 32, 8, 128, 32768),
)
ATTENTION_REPS = 3

KERNEL = r"""
#define UNROLL 4
__device__ __forceinline__ void body(const int4* __restrict__ src, int4* __restrict__ dst, long long n,
                                     int r, int w, int4* __restrict__ sink) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  int4 acc = make_int4(0, 0, 0, 0);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride * UNROLL) {
    int4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = make_int4((int)(i + u * stride), 1, 2, 3);
    for (int p = 0; p < r; ++p) {
      int4 x[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const long long j = i + u * stride;
        if (j < n) x[u] = src[p * n + j];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (i + u * stride < n) { v[u].x ^= x[u].x; v[u].y ^= x[u].y; v[u].z ^= x[u].z; v[u].w ^= x[u].w; }
      }
    }
    for (int p = 0; p < w; ++p) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const long long j = i + u * stride;
        if (j < n) dst[p * n + j] = v[u];
      }
    }
    if (w == 0) {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) { acc.x ^= v[u].x; acc.y ^= v[u].y; acc.z ^= v[u].z; acc.w ^= v[u].w; }
    }
  }
  if (w == 0 && acc.x == 0x7f3a5c1e && acc.y == 0x0badf00d) sink[0] = acc;  // keeps the reads
}
extern "C" __global__ void __launch_bounds__(512, 2) mix(const int4* __restrict__ src, int4* __restrict__ dst,
                                                      long long n, int r, int w, int4* __restrict__ sink) {
  body(src, dst, n, r, w, sink);
}
extern "C" __global__ void __launch_bounds__(512, 2) prep_read(const int4* __restrict__ src, int4* __restrict__ dst,
                                                            long long n, int r, int w, int4* __restrict__ sink) {
  body(src, dst, n, r, w, sink);
}
"""


def elements(mib: int, r: int, w: int) -> int:
    """16-byte elements a plane for ``mib`` MiB moved over ``r + w`` planes."""
    return mib * MIB // (16 * (r + w))


def plan(sizes=SIZES, mix_sizes=MIX_SIZES, reps: int = REPS) -> list[dict]:
    """Every timed launch, in order: each mix at its sizes, each rep the three states in turn."""
    rows = []
    for name, r, w in MIXES:
        for mib in sizes if name == "read" else mix_sizes:
            for rep in range(reps):
                for state in STATES:
                    n = elements(mib, r, w)
                    rows.append({"mix": name, "r": r, "w": w, "mib": mib, "state": state, "rep": rep,
                                 "bytes": n * 16 * (r + w)})
    return rows


def _measure(rows: list[dict]) -> None:  # pragma: no cover - needs a GPU
    import cupy as cp
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import measure as M

    dev = torch.device("cuda")
    ctx = M.Ctx(device=dev, tiny=False)
    ctx.flush_buf = torch.zeros(FLUSH_MIB * MIB // 4, dtype=torch.float32, device=dev)
    biggest = max(r["bytes"] for r in rows)
    src = torch.randint(-(2**31), 2**31 - 1, (biggest // 4,), dtype=torch.int32, device=dev)
    dst = torch.empty(biggest // 4, dtype=torch.int32, device=dev)
    other = torch.randint(-(2**31), 2**31 - 1, (FLUSH_MIB * MIB // 4,), dtype=torch.int32, device=dev)
    sink = torch.zeros(4, dtype=torch.int32, device=dev)
    module = cp.RawModule(code=KERNEL)
    mix, prep = module.get_function("mix"), module.get_function("prep_read")
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid = (sms * CTAS_PER_SM,)
    ptr = {t: cp.asarray(t) for t in (src, dst, other, sink)}

    def launch(kernel, a, n: int, r: int, w: int) -> None:
        kernel(grid, (THREADS,), (ptr[a], ptr[dst], np.int64(n), np.int32(r), np.int32(w), ptr[sink]), stream=stream)

    def state(row: dict) -> None:
        if row["state"] == "dirty":
            M.flush(ctx)
        elif row["state"] == "clean":
            launch(prep, other, other.numel() // 4, 1, 0)
        else:
            launch(mix, src, elements(row["mib"], row["r"], row["w"]), row["r"], row["w"])

    for row in rows[:3]:  # warm-up: the module's load, the allocator
        state(row)
        launch(mix, src, elements(row["mib"], row["r"], row["w"]), row["r"], row["w"])
    torch.cuda.synchronize()
    events = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for row in rows:
            state(row)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            launch(mix, src, elements(row["mib"], row["r"], row["w"]), row["r"], row["w"])
            e1.record()
            events.append((e0, e1))
            if len(events) % 60 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
    for row, (e0, e1) in zip(rows, events, strict=True):
        row["event_us"] = round(e0.elapsed_time(e1) * 1e3, 3)
    _attach(rows, sorted((e.time_range.start, e.time_range.elapsed_us()) for e in prof.events()
                         if e.device_type == torch.autograd.DeviceType.CUDA and e.name == "mix"))


def _attach(rows: list[dict], launched: list[tuple[float, float]]) -> None:
    """Each timed row's profiler duration from the ``mix`` launches seen, in order (a warm state's
    preparation is a ``mix`` launch too, not timed); none where the count is not the one expected."""
    labels = _mix_labels(rows)
    if len(launched) != len(labels):
        print(f"profiler saw {len(launched)} mix kernels, expected {len(labels)}: events only", file=sys.stderr)
        for row in rows:
            row["profiler_us"] = ""
        return
    timed = [us for (_, us), warm_prep in zip(launched, labels, strict=True) if not warm_prep]
    for row, us in zip(rows, timed, strict=True):
        row["profiler_us"] = round(us, 3)


def _mix_labels(rows: list[dict]) -> list[bool]:
    """For each ``mix`` launch in order, whether it is a warm state's preparation (not timed)."""
    out = []
    for row in rows:
        if row["state"] == "warm":
            out.append(True)
        out.append(False)
    return out


def _attention(out: str) -> None:  # pragma: no cover - needs a GPU and the fa3-fwd wheel
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import measure as M
    from sweep import _fa3_interface, kernel_names

    dev = torch.device("cuda")
    ctx = M.Ctx(device=dev, tiny=False)
    print("sdpa backend:", M.pick_sdpa_backend(ctx), flush=True)
    ctx.flush_buf = torch.zeros(FLUSH_MIB * MIB // 4, dtype=torch.float32, device=dev)
    other = torch.ones(FLUSH_MIB * MIB // 2, dtype=torch.bfloat16, device=dev)
    kvcache = _fa3_interface().flash_attn_with_kvcache
    rows = []
    for b, h, hkv, hd, n in ATTENTION_POINTS:
        q = torch.randn(b, h, 1, hd, dtype=torch.bfloat16, device=dev)
        k = torch.randn(b, hkv, n, hd, dtype=torch.bfloat16, device=dev)
        v = torch.randn_like(k)
        seqlens = torch.full((b,), n, dtype=torch.int32, device=dev)
        calls = {"fa3": lambda q=q, k=k, v=v, seqlens=seqlens: kvcache(
                     q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), cache_seqlens=seqlens),
                 "fa2": lambda q=q, k=k, v=v: M.sdpa(q, k, v, False)}
        for label, fn in calls.items():
            fn()
            for rep in range(ATTENTION_REPS):
                for st in ("dirty", "clean"):
                    def call(fn=fn, st=st) -> object:
                        if st == "dirty":
                            M.flush(ctx)
                        else:
                            other.amax()  # a read of 256 MiB: L2 full of clean lines
                        return fn()
                    row = f"{label}_decode_b{b}_h{h}x{hkv}x{hd}_l{n}"
                    for i, (kn, dur) in enumerate(kernel_names(call)):
                        rows.append({"row": row, "m": b, "n": n, "k": hd, "state": st, "rep": rep, "index": i,
                                     "kernel": kn, "device_us": round(dur, 3)})
        del q, k, v, seqlens, calls
        torch.cuda.empty_cache()
        print(f"attention point {(b, h, hkv, hd, n)} done", flush=True)
    with open(out, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=["row", "m", "n", "k", "state", "rep", "index", "kernel", "device_us"])
        wr.writeheader()
        wr.writerows(rows)


def load(path: str) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def medians(rows: list[dict]) -> dict[tuple[str, int, str], float]:
    """(mix, MiB, state) -> median device us (the profiler's; the events' where it has none)."""
    times: dict[tuple[str, int, str], list[float]] = {}
    for r in rows:
        us = float(r["profiler_us"] or r["event_us"])
        times.setdefault((r["mix"], int(r["mib"]), r["state"]), []).append(us)
    return {key: statistics.median(v) for key, v in times.items()}


def analyse(path: str, peak_tb_s: float = 4.8, attn: str | None = None) -> None:
    rows = load(path)
    med = medians(rows)
    nbytes = {(r["mix"], int(r["mib"])): int(r["bytes"]) for r in rows}
    print(f"# HBM by read/write mix ({Path(path).name}); share of {peak_tb_s} TB/s after the clean state\n")
    print("| mix | MiB | dirty us | clean us | warm us | clean TB/s | share | dirty - clean us |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (mix, mib), b in sorted(nbytes.items(), key=lambda kv: ([m[0] for m in MIXES].index(kv[0][0]), kv[0][1])):
        d, c, w = (med.get((mix, mib, s), float("nan")) for s in STATES)
        rate = b / c / 1e6
        print(f"| {mix} | {mib} | {d:.1f} | {c:.1f} | {w:.1f} | {rate:.2f} | {rate / peak_tb_s:.3f} | {d - c:+.1f} |")
    print("\nAsymptotic rate (slope over the two largest sizes, clean state):\n")
    print("| mix | slope TB/s | share | intercept us |")
    print("|---|---:|---:|---:|")
    for mix, _, _ in MIXES:
        pts = sorted((mib, nbytes[(mix, mib)], med[(mix, mib, "clean")]) for (m, mib) in nbytes if m == mix)
        if len(pts) < 2:
            continue
        (_, b1, t1), (_, b2, t2) = pts[-2], pts[-1]
        slope = (b2 - b1) / (t2 - t1) / 1e6
        print(f"| {mix} | {slope:.2f} | {slope / peak_tb_s:.3f} | {t1 - b1 / slope / 1e6:.1f} |")
    if attn:
        _analyse_attention(attn)


def _analyse_attention(path: str) -> None:
    """Each decode call's main kernel after the dirty and the clean state (median of its reps)."""
    times = _attention_mains(path)
    print(f"\n# Decode attention main kernels after each state ({Path(path).name})\n")
    print("| row | dirty us | clean us | dirty - clean us |")
    print("|---|---:|---:|---:|")
    for row in sorted({k[0] for k in times}):
        d = statistics.median(times.get((row, "dirty"), [float("nan")]))
        c = statistics.median(times.get((row, "clean"), [float("nan")]))
        print(f"| {row} | {d:.1f} | {c:.1f} | {d - c:+.1f} |")


def flush_fit(med: dict[tuple[str, int, str], float], nbytes: dict[tuple[str, int], int]) -> tuple[float, float]:
    """(plateau us, L2 bytes): the read-only kernels' dirty - clean against D x (1 - exp(-B / C)),
    the share of the flush's dirty lines a read of B bytes evicts under random replacement in an L2
    of C bytes; C on a 1 MB grid (20-140 MB), D by least squares for each."""
    pts = [(b, med[("read", mib, "dirty")] - med[("read", mib, "clean")])
           for (mix, mib), b in sorted(nbytes.items()) if mix == "read"]
    best = None
    for c in (mb * 1e6 for mb in range(20, 141)):
        f = [1 - math.exp(-b / c) for b, _ in pts]
        d = sum(fi * y for fi, (_, y) in zip(f, pts, strict=True)) / sum(fi * fi for fi in f)
        loss = sum((d * fi - y) ** 2 for fi, (_, y) in zip(f, pts, strict=True))
        if best is None or loss < best[0]:
            best = (loss, d, c)
    return best[1], best[2]


def verdict(path: str, attn: str, peak_tb_s: float = 4.8) -> None:
    """The registered checks (h200-20261129ca-hbm-hypotheses.md) from the run's CSVs."""
    rows = load(path)
    med = medians(rows)
    nbytes = {(r["mix"], int(r["mib"])): int(r["bytes"]) for r in rows}

    def slope(mix: str) -> float:  # over its two largest sizes (read: 2-4 GiB, the mixes: 1-4 GiB)
        (b1, t1), (b2, t2) = sorted((b, med[(m, mib, "clean")]) for (m, mib), b in nbytes.items() if m == mix)[-2:]
        return (b2 - b1) / (t2 - t1) / 1e6 / peak_tb_s

    def at(mix: str) -> float:
        return nbytes[(mix, 4096)] / med[(mix, 4096, "clean")] / 1e6

    read, copy = slope("read"), slope("copy")
    t_r, t_w, t_c = (1 / at(m) for m in ("read", "write", "copy"))
    t_x = t_c - (t_r + t_w) / 2
    mixes = {"r4w1": 0.2, "r2w1": 1 / 3, "r1w2": 2 / 3}
    h3 = {m: at(m) * ((1 - f) * t_r + f * t_w + 2 * min(f, 1 - f) * t_x) - 1 for m, f in mixes.items()}
    extra = [med[("read", m, "dirty")] - med[("read", m, "clean")] for m in SIZES if m >= 64]
    mid = statistics.median(extra)
    h4 = 2.5 <= mid <= 7 and all(abs(e - mid) <= 0.3 * mid for e in extra)
    times = _attention_mains(attn)
    big = [row for row, st in times if st == "dirty" and _attention_bytes(row) >= 134e6]
    paid = [statistics.median(times[(row, "dirty")]) - statistics.median(times[(row, "clean")]) for row in big]
    h5 = sum(abs(p - mid) <= 2 for p in paid)
    d, c = flush_fit(med, nbytes)
    print("| registered | figure | verdict |")
    print("|---|---|---|")
    print(f"| H1: read-only slope >= 0.94 of peak (fails below 0.92) | {read:.3f} | "
          f"{'holds' if read >= 0.94 else 'fails' if read < 0.92 else 'not met, not refuted'} |")
    print(f"| H2: copy slope 0.88-0.915 | {copy:.3f} | {'holds' if 0.88 <= copy <= 0.915 else 'fails'} |")
    print(f"| H3: the mix form within 2% at 4 GiB (fails over 3%) | "
          f"{', '.join(f'{m} {e:+.1%}' for m, e in h3.items())} | "
          f"{'holds' if all(abs(e) <= 0.02 for e in h3.values()) else 'fails'} |")
    print(f"| H4: read-only dirty - clean over >= 64 MiB: median 2.5-7 us, all within 30% | median {mid:.1f} us "
          f"({min(extra):.1f}-{max(extra):.1f}) | {'holds' if h4 else 'fails'} |")
    print(f"| H5: decode main kernels >= 134 MB pay H4's median within 2 us | {h5} of {len(paid)} | "
          f"{'holds' if h5 == len(paid) else 'fails'} |")
    print(f"\nExplained after measurement: dirty - clean = {d:.1f} us x (1 - exp(-B / {c / 1e6:.0f} MB)) "
          "(random replacement in L2)")


def _attention_mains(path: str) -> dict[tuple[str, str], list[float]]:
    """(row, state) -> the device us of each profiled call's main kernel (FA3's forward, FA2's
    forward or split-KV kernel: the classes of ``fa3_decode._kind``, not imported: this script runs
    on the device, where ``rdusim`` is not on the path)."""
    times: dict[tuple[str, str], list[float]] = {}
    for r in load(path):
        low = r["kernel"].lower()
        if ("flash" in low or "fmha" in low) and "combine" not in low and "prepare" not in low:
            times.setdefault((r["row"], r["state"]), []).append(float(r["device_us"]))
    return times


def _attention_bytes(row: str) -> float:
    """K and V bytes of a decode call's row name (``..._b{B}_h{H}x{KV}x{D}_l{N}``)."""
    b, rest = row.split("_b")[1].split("_h")
    heads, n = rest.split("_l")
    _, kv, hd = heads.split("x")
    return int(b) * int(kv) * int(hd) * int(n) * 2 * 2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="the mix CSV to write (measure)")
    ap.add_argument("--attention", help="also profile FA3 / FA2 decode calls into this kernels CSV")
    ap.add_argument("--analyse", help="a mix CSV to summarise (CPU)")
    ap.add_argument("--attn", help="with --analyse: the attention kernels CSV")
    ap.add_argument("--verdict", action="store_true", help="with --analyse and --attn: the registered checks")
    ap.add_argument("--reps", type=int, default=REPS)
    args = ap.parse_args(argv)
    if args.analyse and args.verdict:
        verdict(args.analyse, args.attn)
        return 0
    if args.analyse:
        analyse(args.analyse, attn=args.attn)
        return 0
    if not args.out:
        ap.error("--out or --analyse")
    rows = plan(reps=args.reps)  # pragma: no cover - the rest needs a GPU
    _measure(rows)
    with open(args.out, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=FIELDS)
        wr.writeheader()
        wr.writerows(rows)
    print(f"wrote {args.out} ({len(rows)} rows)", flush=True)
    if args.attention:
        _attention(args.attention)
        print(f"wrote {args.attention}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
