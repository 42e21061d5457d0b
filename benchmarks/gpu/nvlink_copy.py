"""The Simple ramp without NCCL (run bv): SM-driven copies over NVLink, CTA by CTA.

NCCL's ring Simple collectives on two GPUs pay a per-call cost that grows with the bytes from 8-16
MiB to 384-512 MiB and then stays (docs/gpu.md, "The Simple ramp"); run ad found it only where 12 or
more ring channels contend (none at 1-8). This script asks whether the link itself does it: a plain
CUDA kernel (CuPy, NVRTC) in which each of ``C`` CTAs copies its contiguous slice of ``S`` bytes
with 16-byte loads and stores, NCCL's shape of a channel, but with none of NCCL's flags, FIFOs or
slices. Modes:

- ``bidir``: GPU 0 writes into GPU 1's memory and GPU 1 into GPU 0's at once (the two directions of
  a two-GPU ring; NCCL writes to its peer on NVLink, P2P write);
- ``uni``: GPU 0 writes into GPU 1's memory, GPU 1 idle;
- ``local``: each GPU copies within its own HBM (the control: no link).

Each row: ``per`` launches back to back on each GPU (interleaved, so the directions overlap), a
CUDA event pair around them on each GPU, the slower GPU's time / ``per``, median of ``reps``
trials. The CSV has ``collective_ramp_diag.py``'s columns (variant ``cta<C>``, case the mode, op
``copy``), so its ``--analyse`` prints the ramp: ``python benchmarks/gpu/collective_ramp_diag.py
--analyse <run>-copy.csv``. Every CTA also stamps the global timer after each of ``SEGMENTS``
equal parts of its slice; ``--stamps`` writes those of the last launch of chosen rows (GPU 0),
and ``--progress STAMPS.csv`` (CPU) prints the aggregate rate over time inside one kernel.

Measure (one process, both GPUs; about two minutes on two H200s)::

    python benchmarks/gpu/nvlink_copy.py --out bv-copy.csv --stamps bv-copy-stamps.csv

Hypotheses and their signatures: ``h200x2-20261129bv-ramp-hypotheses.md`` (committed before
the run).
"""

from __future__ import annotations

import argparse
import csv
import gzip
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

MODES = ("bidir", "uni", "local")
CTAS = (1, 2, 4, 8, 12, 16, 24, 32, 64)
SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024)
THREADS = 512  # NCCL's Simple ring kernel: up to 512 threads a channel (NCCL_MAX_NTHREADS 640)
SEGMENTS = 64
#: rows whose stamps are kept (mode, CTAs, MiB)
STAMP_ROWS = {
    (m, c, s) for m in ("bidir", "local") for c in (4, 8, 12, 16, 24, 32) for s in (64, 256, 1024)
}
#: a guess of one CTA's copy rate (GB/s) that caps the launches of a trial (per_calls)
CTA_GBPS = 25.0

KERNEL = r"""
#define UNROLL 4
extern "C" __global__ void __launch_bounds__(512)
peer_copy(const int4* __restrict__ src, int4* __restrict__ dst, long long per_cta, int nseg,
          unsigned long long* __restrict__ stamps) {
  const long long base = (long long)blockIdx.x * per_cta;
  const long long seg = per_cta / nseg;
  unsigned long long t;
  if (threadIdx.x == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    stamps[(long long)blockIdx.x * (nseg + 1)] = t;
  }
  for (int s = 0; s < nseg; ++s) {
    const long long lo = base + s * seg, hi = lo + seg;
    for (long long i = lo + threadIdx.x; i < hi; i += (long long)blockDim.x * UNROLL) {
      int4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const long long j = i + (long long)u * blockDim.x;
        if (j < hi) v[u] = src[j];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const long long j = i + (long long)u * blockDim.x;
        if (j < hi) dst[j] = v[u];
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      stamps[(long long)blockIdx.x * (nseg + 1) + s + 1] = t;
    }
  }
}
"""

STAMP_FIELDS = ["mode", "ctas", "mib", "block", "seg", "t_ns"]


def plan(modes, ctas, sizes, per: int, reps: int) -> list[dict]:
    rows = []
    for mode in modes:
        for c in ctas:
            for mib in sizes:
                n = per_calls(mib * MIB, per, CTA_GBPS * c)
                rows.append(
                    {
                        "variant": f"cta{c}",
                        "case": mode,
                        "op": "copy",
                        "bytes": mib * MIB,
                        "ranks": 2,
                        "per": n,
                        "reps": reps if n >= 4 else max(3, reps // 2),
                        "k": 1,
                        "ctas": c,
                    }
                )
    return rows


def slice_int4(size: int, ctas: int) -> int:
    """int4 elements a CTA copies: its share of ``size`` bytes, a whole number of segments."""
    return size // 16 // ctas // SEGMENTS * SEGMENTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write")
    ap.add_argument("--stamps", help="CSV(.gz) of the kept rows' per-segment stamps (GPU 0)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--ctas", default=",".join(map(str, CTAS)))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="MiB, comma-separated")
    ap.add_argument("--per", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--progress", metavar="STAMPS", help="print the rate over time (CPU)")
    ap.add_argument(
        "--check",
        nargs=4,
        metavar=("COPY", "NCCL24", "NCCL8", "STAMPS"),
        help="the pre-registered signatures of run bv against these files (CPU)",
    )
    args = ap.parse_args(argv)
    if args.progress:
        return progress(args.progress)
    if args.check:
        print("\n".join(check(*args.check)))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        ap.error(f"--modes: comma-separated, each one of {', '.join(MODES)}")
    try:
        ctas = [int(v) for v in args.ctas.split(",") if v]
        sizes = [int(v) for v in args.sizes.split(",") if v]
    except ValueError:
        ap.error("--ctas and --sizes take comma-separated whole numbers")
    if (
        not ctas
        or not sizes
        or min(ctas + sizes + [args.per, args.reps]) <= 0
        or max(ctas) > max(CTAS)
    ):
        ap.error(f"--ctas (1-{max(CTAS)}), --sizes, --per and --reps must be positive")
    rows = plan(modes, ctas, sizes, args.per, args.reps)
    if args.dry_run:
        for r in rows:
            print(
                f"{r['case']:6s} {r['variant']:6s} {r['bytes'] // MIB:5d} MiB per {r['per']:3d} reps {r['reps']}"
            )
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run / --progress)")
    return _run(rows, args.out, args.stamps)


def time_trials(cp, streams: dict, used, launch, per: int, reps: int) -> float:  # pragma: no cover - GPUs
    """Us a launch: ``launch()`` issues ``per`` launches on each GPU of ``used``; a CUDA event pair
    around them on each GPU's stream, the slower GPU's time / ``per``, median of ``reps`` trials
    (this script's and ring_emul.py's timing)."""
    times = []
    for _ in range(reps):
        ev = {}
        for d in used:
            with cp.cuda.Device(d):
                ev[d] = (cp.cuda.Event(), cp.cuda.Event())
                ev[d][0].record(streams[d])
        launch()
        for d in used:
            with cp.cuda.Device(d):
                ev[d][1].record(streams[d])
        for d in used:
            ev[d][1].synchronize()
        times.append(max(cp.cuda.get_elapsed_time(*ev[d]) for d in used) * 1e3 / per)
    return statistics.median(times)


class _Copier:  # pragma: no cover - needs two GPUs with peer access
    """Both GPUs' buffers, the kernel on each, a stream each; times one row, reads GPU 0's stamps."""

    PAIRS = {"bidir": ((0, 1), (1, 0)), "uni": ((0, 1),), "local": ((0, 0), (1, 1))}

    def __init__(self, biggest: int):
        import cupy as cp

        self.cp, rt = cp, cp.cuda.runtime
        assert rt.getDeviceCount() >= 2, "two GPUs needed"
        assert rt.deviceCanAccessPeer(0, 1) and rt.deviceCanAccessPeer(1, 0), "no peer access"
        self.bufs, self.kern, self.streams, self.stamps = {}, {}, {}, {}
        for d in (0, 1):
            with cp.cuda.Device(d):
                rt.deviceEnablePeerAccess(1 - d)
                self.bufs[d] = (
                    cp.ones(biggest // 4, dtype=cp.float32),
                    cp.zeros(biggest // 4, dtype=cp.float32),
                )
                self.kern[d] = cp.RawKernel(KERNEL, "peer_copy")
                self.streams[d] = cp.cuda.Stream(non_blocking=True)
                self.stamps[d] = cp.zeros(max(CTAS) * (SEGMENTS + 1), dtype=cp.uint64)
        self.gpu = rt.getDeviceProperties(0)["name"].decode()

    def launches(self, mode: str, c: int, n16: int, count: int) -> None:
        import numpy as np

        for _ in range(count):
            for src, dst in self.PAIRS[mode]:
                with self.cp.cuda.Device(src):
                    self.kern[src](
                        (c,),
                        (THREADS,),
                        (
                            self.bufs[src][0],
                            self.bufs[dst][1],
                            np.int64(n16),
                            np.int32(SEGMENTS),
                            self.stamps[src],
                        ),
                        stream=self.streams[src],
                    )

    def time_row(self, r: dict) -> float:
        """Us a launch: ``per`` launches on each GPU used, the slower GPU's events, median of ``reps``."""
        cp, mode, c = self.cp, r["case"], r["ctas"]
        n16 = slice_int4(r["bytes"], c)
        used = sorted({src for src, _ in self.PAIRS[mode]})
        self.launches(mode, c, n16, 2)  # warm-up (and the module's load on each GPU)
        for d in (0, 1):
            self.streams[d].synchronize()
        return time_trials(cp, self.streams, used, lambda: self.launches(mode, c, n16, r["per"]),
                           r["per"], r["reps"])

    def last_stamps(self, c: int) -> list[list[int]]:
        """GPU 0's stamps of its last launch, ns from its first CTA's start."""
        with self.cp.cuda.Device(0):
            st = (
                self.cp.asnumpy(self.stamps[0][: c * (SEGMENTS + 1)])
                .astype("int64")
                .reshape(c, SEGMENTS + 1)
            )
        return (st - st[:, 0].min()).tolist()


def _run(rows: list[dict], out: str, stamps_out: str | None) -> int:  # pragma: no cover - two GPUs
    copier = _Copier(max(r["bytes"] for r in rows))
    sfh = None
    if stamps_out:
        sfh = (gzip.open if stamps_out.endswith(".gz") else open)(stamps_out, "wt", newline="")
        swriter = csv.writer(sfh)
        swriter.writerow(STAMP_FIELDS)
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            us = copier.time_row(r)
            c, mib = r["ctas"], r["bytes"] // MIB
            moved = slice_int4(r["bytes"], c) * 16 * c
            env = f"threads={THREADS} moved={moved}"
            writer.writerow(
                {
                    **r,
                    "median_us": round(us, 3),
                    "sleep_us": 0,
                    "gpu": copier.gpu,
                    "nccl": "-",
                    "env": env,
                }
            )
            fh.flush()
            print(
                f"{r['case']:6s} cta{c:<3d} {mib:5d} MiB {us:10.1f} us {moved / us / 1e3:7.1f} GB/s (per {r['per']})",
                flush=True,
            )
            if sfh and (r["case"], c, mib) in STAMP_ROWS:
                for b, st in enumerate(copier.last_stamps(c)):
                    swriter.writerows([r["case"], c, mib, b, s, t] for s, t in enumerate(st))
    if sfh:
        sfh.close()
    return 0


# --- analysis (CPU) -------------------------------------------------------------------------

#: windows of the kernel's time (us) in which ``progress`` reports the aggregate rate
WINDOWS_US = (
    (0, 100),
    (100, 250),
    (250, 500),
    (500, 1000),
    (1000, 1500),
    (1500, 2500),
    (2500, 5000),
    (5000, 20000),
)


def load_stamps(path: str) -> dict[tuple[str, int, int], list[list[int]]]:
    """(mode, CTAs, MiB) -> per CTA its SEGMENTS + 1 stamps (ns from the kernel's first start)."""
    opener = gzip.open if path.endswith(".gz") else open
    out: dict[tuple[str, int, int], dict[int, dict[int, int]]] = {}
    with opener(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            key = (r["mode"], int(r["ctas"]), int(r["mib"]))
            out.setdefault(key, {}).setdefault(int(r["block"]), {})[int(r["seg"])] = int(r["t_ns"])
    return {
        k: [[blk[s] for s in sorted(blk)] for _, blk in sorted(v.items())] for k, v in out.items()
    }


def bytes_done(stamps: list[list[int]], seg_bytes: float, t_ns: float) -> float:
    """Bytes all CTAs have copied by ``t_ns``, each CTA linear within a segment."""
    total = 0.0
    for st in stamps:
        for s in range(len(st) - 1):
            a, b = st[s], st[s + 1]
            if t_ns >= b:
                total += seg_bytes
            elif t_ns > a:
                total += seg_bytes * (t_ns - a) / (b - a)
                break
            else:
                break
    return total


def window_rates(stamps: list[list[int]], total_bytes: float) -> list[tuple[int, int, float]]:
    """(from us, to us, GB/s) for each window of WINDOWS_US inside the kernel's span."""
    end = max(st[-1] for st in stamps) / 1e3
    return [(lo, round(min(hi, end)), window_rate(stamps, total_bytes, lo, min(hi, end)))
            for lo, hi in WINDOWS_US if lo < end]


def progress(path: str) -> int:
    data = load_stamps(path)
    print(
        "| mode | CTAs | MiB | kernel us | CTA end spread us | GB/s by window of the kernel's time (us) |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for (mode, c, mib), stamps in sorted(data.items()):
        ends = [st[-1] / 1e3 for st in stamps]
        rates = " ".join(f"{lo}-{hi}:{g:.0f}" for lo, hi, g in window_rates(stamps, mib * MIB))
        print(f"| {mode} | {c} | {mib} | {max(ends):.0f} | {max(ends) - min(ends):.0f} | {rates} |")
    return 0


#: the pre-registered bounds (h200x2-20261129bv-ramp-hypotheses.md)
RAMP_WINDOW = (16, 256)
RAMP_SHOWN, RAMP_NONE, NCCL_RAMP, NO_TEST = 0.05, 0.02, 0.08, 0.05
FAST_SHARE, SLOW_SHARE = 0.8, 0.4


def window_rate(stamps: list[list[int]], total_bytes: float, lo_us: float, hi_us: float) -> float:
    """GB/s all CTAs moved between ``lo_us`` and ``hi_us`` of the kernel's time."""
    seg_bytes = total_bytes / len(stamps) / (len(stamps[0]) - 1)
    got = bytes_done(stamps, seg_bytes, hi_us * 1e3) - bytes_done(stamps, seg_bytes, lo_us * 1e3)
    return got / ((hi_us - lo_us) * 1e3)


def check(copy_csv: str, nccl24_csv: str, nccl8_csv: str, stamps_csv: str) -> list[str]:
    """Each hypothesis's signature against run bv's files: the figures, then pass / fail."""
    data = load([copy_csv, nccl24_csv, nccl8_csv])
    rel, rate = {}, {}
    for (variant, case, _op), pts in data.items():
        per_mib, _ = fit_per_mib(pts, 512)
        rel[variant, case] = relative_ramp(pts, per_mib, *RAMP_WINDOW)
        rate[variant, case] = MIB / per_mib / 1e3  # GB/s of S
    best = max(r for (v, c), r in rate.items() if c == "bidir")
    fast = sorted(v for (v, c), r in rate.items() if c == "bidir" and r >= FAST_SHARE * best)
    slow = sorted(v for (v, c), r in rate.items() if c == "bidir" and r <= SLOW_SHARE * best)
    stamps = load_stamps(stamps_csv)
    early_late = {
        c: (
            window_rate(stamps["bidir", c, 1024], 1024 * MIB, 0, 500),
            window_rate(stamps["bidir", c, 1024], 1024 * MIB, 1500, 2500),
        )
        for c in (24, 32)
    }
    after = {
        c: [g for lo, _hi, g in window_rates(stamps["bidir", c, 1024], 1024 * MIB) if lo >= 100]
        for c in sorted({k[1] for k in stamps if k[0] == "bidir" and k[2] == 1024})
    }
    n24, n8 = rel["ch24", "plain"], rel["ch8", "plain"]

    def fmt(keys):
        keys = sorted(keys, key=lambda k: int(k[0].removeprefix("cta")))
        return ", ".join(f"{v} {rel[v, c]:+.3f}" for v, c in keys)

    h1 = (
        all(rel[v, "bidir"] >= RAMP_SHOWN for v in fast)
        and all(abs(rel[v, "bidir"]) <= RAMP_NONE for v in slow)
        and all(e <= 0.95 * late for e, late in early_late.values())
    )
    copies = [(v, c) for (v, c) in rel if c in ("bidir", "uni")]
    flat = {c: max(g) / min(g) - 1 for c, g in after.items()}
    h2 = (
        all(abs(rel[k]) <= RAMP_NONE for k in copies)
        and all(f <= 0.03 for f in flat.values())
        and n24 >= NCCL_RAMP
        and abs(n8) <= 0.03
    )
    local = [(v, c) for (v, c) in rel if c == "local"]
    control = all(abs(rel[k]) <= RAMP_NONE for k in local)
    return [
        f"relative ramp {RAMP_WINDOW[0]}-{RAMP_WINDOW[1]} MiB: NCCL all-reduce 24 channels {n24:+.3f}, 8 channels {n8:+.3f}",
        f"best bidirectional copy {best:.1f} GB/s; >= {FAST_SHARE} of it: {fmt((v, 'bidir') for v in fast)}",
        f"<= {SLOW_SHARE} of it: {fmt((v, 'bidir') for v in slow)}",
        "1 GiB bidirectional, GB/s over 0-500 us / 1500-2500 us: "
        + ", ".join(f"{c} CTAs {e:.0f} / {late:.0f}" for c, (e, late) in early_late.items()),
        "1 GiB bidirectional, window rates after 100 us, max / min - 1: "
        + ", ".join(f"{c} CTAs {f:+.3f}" for c, f in flat.items()),
        f"one way: {fmt(k for k in copies if k[1] == 'uni')}",
        f"local: {fmt(local)}",
        f"no test (NCCL 24 channels under +{NO_TEST}): {'yes' if n24 < NO_TEST else 'no'}",
        f"H1, the link: {'pass' if h1 else 'fail'}",
        f"H2, NCCL's protocol: {'pass' if h2 else 'fail'}",
        f"control (local copies within +-{RAMP_NONE}): {'pass' if control else 'fail'}",
    ]


if __name__ == "__main__":
    sys.exit(main())
