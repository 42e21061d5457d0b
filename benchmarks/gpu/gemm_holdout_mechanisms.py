"""The held-out GEMM misses (Phi-3-medium gate_up at m = 192, the m = 192-384 rows) against
candidate mechanisms, after run aj (docs/gpu.md, "Why the m = 192-384 rows miss"). Nothing here
changes the model: each candidate is applied as a patch for the length of one evaluation.

    PYTHONPATH=. python benchmarks/gpu/gemm_holdout_mechanisms.py > benchmarks/gpu/h200-20261128aj-gemm-mechanisms.txt

Sections: Nsight Compute's DRAM bytes of run aj's nine shapes (``-ncu.csv``) against the unique
operand bytes, and the model with cuBLAS's tile and those bytes (explained after measurement);
the fine m sweep's spikes (``-diag.csv``); the candidates on every committed GEMM set (runs a, b,
k: prediction rows; runs ag, ai, aj: the held-out rows), median abs / worst / median signed.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import rdusim.mapping.gpu as MG
from rdusim.analysis.gpu.predict import is_gemm_calibration, predict_row
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_shapes import NCU_SHAPES  # noqa: E402  the shapes gemm_holdout_ncu.py ran

ROOT = Path(__file__).resolve().parents[2]
B = ROOT / "benchmarks/gpu"
AJ = "h200-20261128aj-gemm-holdout"
#: (label, CSV, GPU document, sets compared)
SETS = (
    ("run a (H100)", "h100-20261125-sweep.csv", "h100", ("calibration", "prediction")),
    ("run b (H100)", "h100-20261125b-sweep.csv", "h100", ("calibration", "prediction")),
    ("run k (H200)", "h200-20261125k-sweep.csv", "h200", ("calibration", "prediction")),
    ("run ag (H100, held out)", "h100-20261128ag-gemm-holdout.csv", "h100", ("holdout",)),
    ("run ai (H100, held out)", "h100-20261128ai-gemm-holdout.csv", "h100", ("holdout",)),
    ("run aj (H200, held out)", f"{AJ}.csv", "h200", ("holdout",)),
)
GPUS = {g: Gpu(load_spec(ROOT / f"hw_configs/{g}.yaml", GpuSpec)) for g in ("h100", "h200")}
BF16 = 2


def _row(m: int, n: int, k: int) -> dict:
    return {"set": "x", "kind": "gemm", "m": str(m), "n": str(n), "k": str(k)}


def _nvjet_tile(kernel: str) -> tuple[int, int]:
    """(first, second) side of an nvjet kernel's tile; run aj's DRAM bytes put the first along n
    for the TNN kernels too (448x64 TNN at m = 192 re-reads the weight: three m blocks of 64)."""
    hit = re.search(r"_(\d+)x(\d+)_64x", kernel)
    return int(hit[1]), int(hit[2])


def _forced(m: int, n: int, k: int, gpu: Gpu, tile: tuple[int, int], dram: float | None) -> float:
    p = MG._gemm_estimate(m, n, k, tile[0], tile[1], 1, gpu, BF16)
    if dram is not None:
        p = dataclasses.replace(p, hbm_bytes=dram + m * n * BF16)
    with mock.patch.object(MG, "gemm_plan", lambda *a, **kw: p):
        return predict_row(_row(m, n, k), gpu) * 1e6


def ncu_lines() -> list[str]:
    by: dict[str, dict] = {}
    with (B / f"{AJ}-ncu.csv").open() as fh:
        for r in csv.DictReader(line for line in fh if line.startswith('"')):
            d = by.setdefault(r["ID"], {"kernel": r["Kernel Name"], "grid": r["Grid Size"]})
            d[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    gpu = GPUS["h200"]
    out = [
        "| m x n x k | cuBLAS kernel | grid | ncu time (us) | DRAM read (MB) | / unique operands | "
        "model (us) | cuBLAS tile + ncu DRAM bytes (us) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for d, (m, n, k) in zip(by.values(), NCU_SHAPES, strict=True):
        rd = d["dram__bytes_read.sum"]
        t = d["gpu__time_duration.sum"] / 1e3
        own = predict_row(_row(m, n, k), gpu) * 1e6
        expl = _forced(m, n, k, gpu, _nvjet_tile(d["kernel"]), rd)
        out.append(
            f"| {m} x {n} x {k} | {d['kernel'][15:]} | {d['grid']} | {t:.1f} | {rd / 1e6:.1f} | "
            f"{rd / ((m + n) * k * BF16):.2f} | {own:.1f} | {expl:.1f} |"
        )
    return out


def spike_lines() -> list[str]:
    """Points of the fine m sweep 1.2x or more the mean of their two neighbours (m +- 16)."""
    with (B / f"{AJ}-diag.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["set"] == "fine"]
    kern = {}
    with (B / f"{AJ}-diag-kernels.csv").open() as fh:
        for k in csv.DictReader(fh):
            if k["kernel"].startswith("nvjet"):
                kern[k["row"]] = k
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["name"].rsplit("_m", 1)[0], []).append(r)
    out = [
        "| shape (n x k) | m | time / neighbours | cuBLAS kernel | grid CTAs | tiles | m blocks |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    points = cls = cls_spikes = spikes = 0
    for lab, rs in by.items():
        rs.sort(key=lambda r: int(r["m"]))
        for a, r, b in zip(rs, rs[1:], rs[2:], strict=False):
            if int(b["m"]) - int(a["m"]) > 32:
                continue
            points += 1
            ratio = float(r["median_us"]) * 2 / (float(a["median_us"]) + float(b["median_us"]))
            kn = kern[r["name"]]
            an, bm = _nvjet_tile(kn["kernel"])
            g = json.loads(kn["grid"])
            m, n = int(r["m"]), int(r["n"])
            tiles, mb = math.ceil(n / an) * math.ceil(m / bm), math.ceil(m / bm)
            in_cls = bm == 64 and mb >= 2 and tiles > g[0] * g[1]
            cls += in_cls
            if ratio >= 1.2:
                spikes += 1
                cls_spikes += in_cls
                out.append(
                    f"| {lab} ({n} x {r['k']}) | {m} | {ratio:.2f} | {kn['kernel'][15:]} | "
                    f"{g[0] * g[1]} | {tiles} | {mb} |"
                )
    out += [
        "",
        f"{spikes} spikes in {points} interior points; kernels with a 64-row m side, two or more m "
        f"blocks and more tiles than the persistent grid: {cls} points, {cls_spikes} of them spikes.",
    ]
    return out


def _rows(name: str, sets: tuple[str, ...]) -> list[dict]:
    with (B / name).open() as fh:
        return [
            r
            for r in csv.DictReader(fh)
            if r["kind"] == "gemm" and r["set"] in sets and not is_gemm_calibration(r)
        ]


def _estimate(mode: str) -> Callable:
    """``_gemm_estimate`` with candidate A (each weight panel re-read once per pass of the grid
    when it has 2+ m blocks, more CTAs than SMs and a weight larger than L2) or B (the cluster
    multicasts the m-side panel when there are more n tiles than m tiles)."""

    def est(m: int, n: int, k: int, bn: int, bm: int, splits: int, gpu: Gpu, dtype_bytes: int):
        tiles = math.ceil(n / bn) * math.ceil(m / bm)
        ctas = tiles * splits
        k_slice = math.ceil(k / splits)
        out = m * n * (4 * splits if splits > 1 else dtype_bytes)
        hbm = (m * k + n * k) * dtype_bytes + out
        l2_cta = (max(bn, bm) / MG.GEMM_CLUSTER + min(bn, bm)) * k_slice * dtype_bytes
        nb, mb, w = math.ceil(n / bn), math.ceil(m / bm), n * k * dtype_bytes
        if mode == "A" and mb >= 2 and ctas > gpu.sms and w > gpu.l2_capacity_bytes:
            hbm += (min(mb, math.ceil(ctas / gpu.sms)) - 1) * w
        if mode == "B":
            side = (bn + bm / MG.GEMM_CLUSTER) if nb >= mb else (bn / MG.GEMM_CLUSTER + bm)
            l2_cta = side * k_slice * dtype_bytes
        waves = math.ceil(ctas / gpu.sms)
        math_s = waves * 2.0 * bn * bm * k_slice / (gpu.math_flops_per_s("gemm") / gpu.sms)
        l2_s = ctas * l2_cta / gpu.l2_bytes_per_s
        hbm_s = hbm / (gpu.hbm_bytes_per_s * gpu.gemm_stream_derate)
        steps = waves * math.ceil(k_slice / MG.GEMM_K_STEP) * gpu.launch_s("gemm_step")
        e = max(hbm_s, l2_s, math_s) + steps
        if splits > 1:
            e += gpu.launch_s("stream") + m * n * (4 * splits + dtype_bytes) / gpu.hbm_bytes_per_s
        return MG.GemmPlan(bn, bm, splits, ctas, k_slice, hbm, l2_cta, e)

    return est


def _plan_reread_engine_only(orig: Callable) -> Callable:
    """Candidate A': the model's own plan (the ranking unchanged, as cuBLAS's heuristic picks the
    re-reading kernel), its HBM bytes with candidate A's re-read."""

    def plan(m: int, n: int, k: int, gpu: Gpu, *, dtype_bytes: int = BF16):
        p = orig(m, n, k, gpu, dtype_bytes=dtype_bytes)
        mb, w = math.ceil(m / p.bm), n * k * dtype_bytes
        if p.splits == 1 and mb >= 2 and p.ctas > gpu.sms and w > gpu.l2_capacity_bytes:
            extra = (min(mb, math.ceil(p.ctas / gpu.sms)) - 1) * w
            p = dataclasses.replace(p, hbm_bytes=p.hbm_bytes + extra)
        return p

    return plan


def _stats(errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return f"{statistics.median(a) * 100:.2f}% / {max(a) * 100:.1f}% / {statistics.median(errs) * 100:+.1f}%"


def candidate_lines() -> list[str]:
    data = [(label, GPUS[g], _rows(name, sets)) for label, name, g, sets in SETS]
    spots = [  # (label, GPU, m, n, k, measured us)
        ("ai Phi-3 TP1 gate_up m192", "h100", 192, 35840, 5120, "h100-20261128ai-gemm-holdout.csv"),
        (
            "ai Llama-2-7B TP1 down m384",
            "h100",
            384,
            4096,
            11008,
            "h100-20261128ai-gemm-holdout.csv",
        ),
        ("aj Phi-3 TP1 gate_up m192", "h200", 192, 35840, 5120, f"{AJ}.csv"),
    ]
    measured = {}
    for _, _, m, n, k, name in spots:
        with (B / name).open() as fh:
            for r in csv.DictReader(fh):
                if r["set"] == "holdout" and (r["m"], r["n"], r["k"]) == (str(m), str(n), str(k)):
                    measured[(name, m, n, k)] = float(r["median_us"])
    head = " | ".join(label for label, _, _ in data)
    out = [
        f"| candidate (median abs / worst / median signed) | {head} | "
        + " | ".join(s[0] for s in spots)
        + " |",
        "|---|" + "---:|" * (len(data) + len(spots)),
    ]
    orig_est, orig_plan = MG._gemm_estimate, MG.gemm_plan
    cands = (
        ("today's model", {}),
        ("A: weight re-read per pass, ranking and engine", {"_gemm_estimate": _estimate("A")}),
        ("A': the same re-read, engine only", {"gemm_plan": _plan_reread_engine_only(orig_plan)}),
        ("B: cluster multicasts the m-side panel", {"_gemm_estimate": _estimate("B")}),
    )
    for label, patch in cands:
        with mock.patch.multiple(MG, **patch) if patch else contextlib.nullcontext():
            cells = []
            for _, gpu, rows in data:
                errs = [predict_row(r, gpu) / (float(r["median_us"]) * 1e-6) - 1 for r in rows]
                cells.append(_stats(errs))
            for _, g, m, n, k, name in spots:
                p = predict_row(_row(m, n, k), GPUS[g]) * 1e6
                cells.append(f"{p:.1f} us ({p / measured[(name, m, n, k)] - 1:+.1%})")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    assert MG._gemm_estimate is orig_est and MG.gemm_plan is orig_plan
    return out


def cublas_tile_lines() -> list[str]:
    """Candidate C: each profiled held-out row priced with cuBLAS's own tile (its grid's waves
    included) instead of the model's, first side along n, or along m for TNN kernels as
    ``gemm_holdout._tile`` read them until 2026-11-28; split-K kernels left out."""
    out = [
        "| run, rows | model's tile | cuBLAS's tile, first side along n | cuBLAS's tile, TNN first side along m |",
        "|---|---:|---:|---:|",
    ]
    for run, g, lab in (
        ("h100-20261128ai-gemm-holdout", "h100", "run ai (H100)"),
        (AJ, "h200", "run aj (H200)"),
    ):
        gpu = GPUS[g]
        with (B / f"{run}-kernels.csv").open() as fh:
            names = {
                k["row"]: k["kernel"] for k in csv.DictReader(fh) if k["kernel"].startswith("nvjet")
            }
        res = []
        with (B / f"{run}.csv").open() as fh:
            for r in csv.DictReader(fh):
                kn = names.get(r["name"])
                if r["set"] != "holdout" or not kn or "splitK" in kn:
                    continue
                m, n, k, t = int(r["m"]), int(r["n"]), int(r["k"]), float(r["median_us"])
                a, b = _nvjet_tile(kn)
                doc = (b, a) if kn.endswith("_TNN") else (a, b)
                own = predict_row(_row(m, n, k), gpu) * 1e6
                res.append(
                    (
                        m,
                        own / t - 1,
                        _forced(m, n, k, gpu, (a, b), None) / t - 1,
                        _forced(m, n, k, gpu, doc, None) / t - 1,
                    )
                )
        for label, lo, hi in (("all", 1, 8192), ("m = 192", 192, 192), ("m = 384", 384, 384)):
            sel = [x for x in res if lo <= x[0] <= hi]
            out.append(
                f"| {lab}, {label}, {len(sel)} | "
                + " | ".join(_stats([x[i] for x in sel]) for i in (1, 2, 3))
                + " |"
            )
    return out


def ratio_lines() -> list[str]:
    """The same held-out shapes on the two GPUs: measured H100 time / H200 time against the model's
    ratio (its frozen files), median by m."""

    def timed(name: str) -> dict[str, float]:
        with (B / name).open() as fh:
            return {
                r["name"]: float(r["median_us"])
                for r in csv.DictReader(fh)
                if r["set"] == "holdout"
            }

    def frozen(name: str) -> dict[str, float]:
        with (B / name).open() as fh:
            lines = [line for line in fh if not line.startswith("#")]
        return {r["name"]: float(r["predicted_us"]) for r in csv.DictReader(lines)}

    ag, ai = timed("h100-20261128ag-gemm-holdout.csv"), timed("h100-20261128ai-gemm-holdout.csv")
    aj = timed(f"{AJ}.csv")
    p100, p200 = frozen("h100-20261128ag-gemm-holdout-predicted.txt"), frozen(f"{AJ}-predicted.txt")
    by: dict[int, list[tuple[float, float, float]]] = {}
    for name in aj:
        by.setdefault(int(name.rsplit("_m", 1)[1]), []).append(
            (ag[name] / aj[name], ai[name] / aj[name], p100[name] / p200[name])
        )
    out = [
        "| m | rows | run ag / run aj | run ai / run aj | model, H100 / H200 |",
        "|---:|---:|---:|---:|---:|",
    ]
    for m in sorted(by):
        v = by[m]
        out.append(
            f"| {m} | {len(v)} | "
            + " | ".join(f"{statistics.median(x[i] for x in v):.3f}" for i in range(3))
            + " |"
        )
    return out


#: (shape, weight panels along n, m blocks, persistent grid CTAs, Nsight's DRAM read / unique)
RASTER_CASES = (
    ("192 x 35840 x 5120, 448x64", 80, 3, 120, 1.75),
    ("448 x 35840 x 5120, 384x64", 94, 7, 132, 2.81),
    ("192 x 17920 x 5120, 448x64", 40, 3, 120, 1.00),
    ("384 x 28672 x 4096, 168x128", 171, 3, 132, 1.04),
    ("256 x 28672 x 4096, 256x128", 112, 2, 132, 1.01),
)


def _raster_reads(panels: int, mblocks: int, grid: int, swizzle: int) -> float:
    """Weight reads / weight of a persistent grid walking the tiles along n in groups of
    ``swizzle`` m blocks (CUTLASS's swizzle, ``get_log_swizzle_size``), in lockstep passes of
    ``grid`` tiles, each panel fetched once a pass and nothing kept in L2 between passes."""
    order = [
        (p, m)
        for g in range(0, mblocks, swizzle)
        for p in range(panels)
        for m in range(g, min(mblocks, g + swizzle))
    ]
    return (
        sum(len({p for p, _ in order[i : i + grid]}) for i in range(0, len(order), grid)) / panels
    )


def raster_lines() -> list[str]:
    out = [
        "| shape, cuBLAS tile | Nsight | swizzle 1 | 2 | 4 | 8 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, panels, mblocks, grid, measured in RASTER_CASES:
        cells = " | ".join(f"{_raster_reads(panels, mblocks, grid, s):.2f}" for s in (1, 2, 4, 8))
        out.append(f"| {name} | {measured:.2f} | {cells} |")
    return out


def main() -> int:
    out = ["# Run aj's diagnostics and the candidate mechanisms (gemm_holdout_mechanisms.py)", ""]
    out += ["## Nsight Compute, nine shapes on the H200 (cold caches)", ""] + ncu_lines()
    out += ["", "## Fine m sweep (H200): spikes", ""] + spike_lines()
    out += ["", "## Raster along n with a swizzle: weight reads / weight", ""] + raster_lines()
    out += ["", "## H100 time / H200 time, same held-out shapes, by m", ""] + ratio_lines()
    out += ["", "## Candidates on every committed GEMM set", ""] + candidate_lines()
    out += ["", "## C: cuBLAS's own tile on the profiled held-out rows", ""] + cublas_tile_lines()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
