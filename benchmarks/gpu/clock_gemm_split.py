"""Item (b) of the clock model (p12clock3): how a GEMM's call time follows the probe clock.

    python benchmarks/gpu/clock_gemm_split.py

Every burst call of run v's GEMM 8192^3, run ah's and run al's two GEMMs (and the FA2 rows for contrast),
with the mean probe clock around it (the probes before and after), against the median cold call:
a least-squares fit of ``t / t_cold = a + b x (f_cold / f)`` (``a``: a share that does not follow
the SM clock), and the kernel's DRAM share at full clock (its operands and result once at run v's
copy rate, 2.995 TB/s) for comparison.
"""

from __future__ import annotations

import csv
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
COPY_BPS = 2.995e12  # run v copy_1g (hw_configs/h100.yaml, clock.memory)
ROWS = (  # (run prefix, workload, m, n, k or None for FA2)
    ("h100-20261125v-clock", "gemm_8192", 8192, 8192, 8192),
    ("h100-20261128ah-clock", "gemm_8192x28672x8192", 8192, 28672, 8192),
    ("h100-20261128ah-clock", "gemm_4096x4096x14336", 4096, 4096, 14336),
    ("h100-20261128al-clock", "gemm_12288x12288x12288", 12288, 12288, 12288),
    ("h100-20261128al-clock", "gemm_6144x6144x6144", 6144, 6144, 6144),
    ("h100-20261128ah-clock", "fa2_prefill_32k", 0, 0, 0),
    ("h100-20261128ah-clock", "fa2_prefill_64k", 0, 0, 0),
)


def _pairs(rs: list[dict[str, str]]) -> list[tuple[float, float]]:
    out = []
    for i, r in enumerate(rs):
        if r["kind"] == "call":
            near = [float(x["probe_mhz"]) for x in rs[max(0, i - 1) : i + 2] if x["probe_mhz"]]
            if near:
                out.append((float(r["us"]), statistics.mean(near)))
    return out


def main() -> int:
    cache: dict[str, dict[tuple[str, str], list[dict[str, str]]]] = {}
    print(
        "| run | workload | calls | cold (us) | cold clock (MHz) | a (not clock-bound) | b | "
        "rms residual | t/t_cold at 0.75 of cold clock: fit | 1/f | max(1, 0.884/f) | DRAM share |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for prefix, w, m, n, k in ROWS:
        if prefix not in cache:
            ph: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
            with gzip.open(HERE / f"{prefix}-events.csv.gz", "rt") as fh:
                for r in csv.DictReader(fh):
                    ph[(r["workload"], r["phase"])].append(r)
            cache[prefix] = ph
        ph = cache[prefix]
        cold = _pairs(ph[(w, "cold")])
        t0 = statistics.median(t for t, _ in cold)
        f0 = statistics.median(f for _, f in cold)
        pts = _pairs(ph[(w, "burst")]) + _pairs(ph.get((w, "long_burst"), []))
        xs = [f0 / f for _, f in pts]
        ys = [t / t0 for t, _ in pts]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mx) ** 2 for x in xs
        )
        a = my - b * mx
        rms = statistics.fmean([(y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True)]) ** 0.5
        dram = f"{(m * k + n * k + m * n) * 2 / COPY_BPS / (t0 * 1e-6):.1%}" if k else "-"
        print(
            f"| {prefix.split('-')[1]} | `{w}` | {len(pts)} | {t0:.0f} | {f0:.0f} | {a:.2f} | "
            f"{b:.2f} | {rms:.3f} | {a + b / 0.75:.3f} | {1 / 0.75:.3f} | "
            f"{max(1, 0.884 / 0.75):.3f} | {dram} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
