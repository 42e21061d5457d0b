"""Committed GPU measurements against the model: which GPU document predicts a run, and the
per-row comparisons of the P12 sweep CSVs (``benchmarks/gpu/sweep.py``, ``small_kernels.py``).

Owns: ``GPU_DOCS``, ``run_doc``, ``error_stats``, ``compare_gemm_rows``, ``compare_prefill_rows``,
``compare_graph_steps``, ``compare_paired_eager``, ``compare_small_rows``, ``small_kernels_csv``,
``is_flash_prefill``, ``read_csv``. Imports: analysis.gpu.predict, config, hw.gpu.

One place for the comparisons it owns: ``rdusim fidelity --gpu`` computes none of its own, and
``benchmarks/gpu/compare_sweep.py`` formats these rows into docs/gpu.md's tables where they
cover them. Not yet all: compare_sweep.py still calls ``predict_row`` / ``micro_device_s``
itself in about a dozen places (the frozen-vs-now tables, run k's H200 decode and host
comparisons, the P10 shapes on the H200, the clock and L2 sections: the footer of ``rdusim
fidelity --gpu`` lists the sets still compared there). Every compared row is the CSV row with
``pred`` (seconds) and ``err`` (signed, relative to the measured median) added.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable
from pathlib import Path

from rdusim.analysis.gpu.predict import (
    ATTENTION_CALIBRATION,
    GEMM_CLEAN_CALIBRATION,
    SMALL_CALIBRATION_PREFIXES,
    is_gemm_calibration,
    micro_device_s,
    micro_device_us,
    micro_gemm_s,
    predict_row,
    row_extra,
    site_host_costs,
    sweep_model,
)
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu

#: The GPU document that predicts a run: the hardware is the device the CSV itself names (every
#: row carries torch.cuda.get_device_name: ``device`` in the single-GPU CSVs, ``gpu`` in
#: ``collectives.py``'s), the one place a run is tied to its document.
GPU_DOCS = {"NVIDIA H100 80GB HBM3": "hw_configs/h100.yaml", "NVIDIA H200": "hw_configs/h200.yaml"}


def run_doc(rows: Iterable[dict], column: str = "device") -> str:
    """The GPU document (a path relative to the repository root) of the one device a run's rows
    name in ``column``; a ValueError naming the devices otherwise."""
    devices = {r[column] for r in rows}
    if len(devices) != 1 or not devices <= GPU_DOCS.keys():
        raise ValueError(
            f"a run names devices {sorted(devices)}; GPU_DOCS knows {sorted(GPU_DOCS)}"
        )
    return GPU_DOCS[devices.pop()]


def error_stats(errs: Iterable[float]) -> tuple[int, float, float]:
    """(rows, median absolute error, worst error signed) of relative errors; (0, nan, nan) when none."""
    errs = list(errs)
    if not errs:
        return 0, float("nan"), float("nan")
    return len(errs), statistics.median(map(abs, errs)), max(errs, key=abs)


def _compared(row: dict, pred: float, **extra: object) -> dict:
    t = float(row["median_us"]) * 1e-6
    return {**row, "pred": pred, "err": (pred - t) / t, **extra}


def compare_gemm_rows(rows: Iterable[dict], gpu: Gpu) -> list[dict]:
    """A ``sweep.py`` run's GEMM rows (P10's three, set ``p10``, left out), each timed alone after
    the flush (``predict_row``); ``cal``: a shape of ``fit_gemm``'s calibration subset."""
    return [
        _compared(r, predict_row(r, gpu), cal=is_gemm_calibration(r))
        for r in rows
        if r["kind"] == "gemm" and r["set"] != "p10"
    ]


def is_flash_prefill(row: dict) -> bool:
    """A FlashAttention-2 prefill row of a ``sweep.py`` run (cuDNN's rows beside them left out)."""
    return row["kind"] in ("attn_prefill", "attn_prefill_l2") and row["name"].startswith("flash_")


def compare_prefill_rows(rows: Iterable[dict], gpu: Gpu, *, fitted: bool) -> list[dict]:
    """A run's FA2 prefill rows against the model; ``cal``: an ``ATTENTION_CALIBRATION`` row of a
    run the attention fit read (``fitted``: runs a and d)."""
    return [
        _compared(r, predict_row(r, gpu), cal=fitted and r["name"] in ATTENTION_CALIBRATION)
        for r in rows
        if is_flash_prefill(r)
    ]


def compare_graph_steps(rows: Iterable[dict], gpu: Gpu, base: ModelSpec) -> list[dict]:
    """A run's CUDA-graph decode steps (the paired eager runs' steps left out), each model's
    shape from the row (``sweep_model``)."""
    return [
        _compared(r, predict_row(r, gpu, sweep_model(r, base)))
        for r in rows
        if r["kind"] == "e2e_decode" and r["mode"] == "graph" and "pair" not in row_extra(r)
    ]


def compare_paired_eager(
    rows: list[dict], spec: GpuSpec, base: ModelSpec, depth: int | None = None
) -> list[dict]:
    """Runs f, h, j, k: each eager step predicted with the host costs of the site pass taken just
    before it (``site_host_costs``), never from the e2e rows; ``depth``: the launch queue where
    the run measured none (its own ``queue`` row otherwise)."""
    depth = next((int(r["n"]) for r in rows if r["kind"] == "queue"), depth)
    sites: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["kind"] == "site_paired":
            e = row_extra(r)
            sites.setdefault((e["family"], r["batch"], r["kv_len"], e["pair"]), []).append(r)
    compared = []
    for r in rows:
        if r["kind"] != "e2e_decode" or "pair" not in row_extra(r):
            continue  # run k also has unpaired steps (sweep.py's e2e section)
        e = row_extra(r)
        costs = site_host_costs(sites[(e["family"], r["batch"], r["kv_len"], e["pair"])])
        gpu = Gpu(
            spec.model_copy(
                update={"launch": spec.launch.model_copy(update={**costs, "queue_depth": depth})}
            )
        )
        compared.append(_compared(r, predict_row(r, gpu, sweep_model(r, base))))
    return compared


def small_kernels_csv(name: str) -> str:
    """The profiled kernels of a ``small_kernels.py`` run (``...-small.csv``): ``...-small-kernels.csv``."""
    return name.replace("-small.csv", "-small-kernels.csv")


def compare_small_rows(
    rows: Iterable[dict], kernel_rows: Iterable[dict], gpu: Gpu, base: ModelSpec
) -> list[dict]:
    """Every ``small_kernels.py`` row the model predicts: small kernels by their profiled device
    time (``micro_device_us`` of the run's ``kernel_rows``), decode GEMMs by their share of a graph,
    decode steps by graph replay; ``meas`` (seconds) beside ``pred`` and ``err``, and ``cal``: a
    row of ``SMALL_CALIBRATION_PREFIXES`` or ``GEMM_CLEAN_CALIBRATION``."""
    device = micro_device_us(kernel_rows)
    out = []
    for r in rows:
        if r["kind"] == "sk_gemm_graph":
            pred, meas = micro_gemm_s(r, gpu), float(r["median_us"]) * 1e-6
            cal = r["name"] in GEMM_CLEAN_CALIBRATION
        elif r["kind"] == "e2e_decode":
            pred, meas, cal = (
                predict_row(r, gpu, sweep_model(r, base)),
                float(r["median_us"]) * 1e-6,
                False,
            )
        else:
            pred = micro_device_s(r, gpu)
            if pred is None or r["name"] not in device:
                continue
            meas, cal = device[r["name"]] * 1e-6, r["name"].startswith(SMALL_CALIBRATION_PREFIXES)
        out.append({**r, "pred": pred, "meas": meas, "err": (pred - meas) / meas, "cal": cal})
    return out


def read_csv(path: Path) -> list[dict]:
    """A committed measurement CSV's rows."""
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
