"""Committed GPU measurements against the model: which GPU document predicts a run, and the
per-row comparisons of the P12 sweep CSVs (``benchmarks/gpu/sweep.py``, ``small_kernels.py``).

Owns: ``GPU_DOCS``, ``run_doc``, ``error_stats``, ``compare_gemm_rows``, ``compare_prefill_rows``,
``compare_frozen_prefill``, ``compare_graph_steps``, ``compare_eager_steps``, ``compare_paired_eager``,
``compare_small_rows``, ``compare_fa2_decode``, ``fa2_kernel_labels``, ``read_frozen``,
``compare_eager_rounds``, ``round_key``, ``compare_dispatch_steps``, ``read_frozen_shapes``,
``prefill_shape``, ``compare_gemm_cliff``, ``compare_p10_shapes``, ``fa2_mech_s``,
``fa2_mech_group``, ``compare_fa2_mech``,
``small_kernels_csv``, ``kernels_csv``, ``is_flash_prefill``, ``read_csv``, ``compare_fa3_published``. Imports: analysis.gpu.predict, config, hw.gpu, mapping.gpu, sim.gpu.

One place for the comparisons it owns: ``rdusim fidelity --gpu`` computes none of its own, and
``benchmarks/gpu/compare_sweep.py`` formats these rows into docs/gpu.md's tables where they
cover them. Not yet all: compare_sweep.py still calls ``predict_row`` itself in a few places
(run k's H200 over H100 ratios, the clock sections: the footer of ``rdusim fidelity
--gpu --all`` lists the sets still compared only there). Every compared row is the CSV row with ``pred`` (seconds)
and ``err`` (signed, relative to the measured median) added; a row with a prediction frozen
before its run also carries ``frozen`` (seconds) and ``err_frozen``.
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
    fa3_published_s,
    is_gemm_calibration,
    micro_device_s,
    micro_device_us,
    micro_gemm_s,
    predict_fa3_row,
    predict_row,
    row_extra,
    site_host_costs,
    sweep_model,
    with_host,
)
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import flash_prefill
from rdusim.sim.gpu import elapsed_s, simulate_gpu

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
    return row["kind"] in ("attn_prefill", "attn_prefill_l2") and row["name"].startswith(("flash_", "mla_flash_"))


def compare_prefill_rows(rows: Iterable[dict], gpu: Gpu, *, fitted: bool) -> list[dict]:
    """A run's FA2 prefill rows against the model; ``cal``: an ``ATTENTION_CALIBRATION`` row of a
    run the attention fit read (``fitted``: runs a and d)."""
    return [
        _compared(r, predict_row(r, gpu), cal=fitted and r["name"] in ATTENTION_CALIBRATION)
        for r in rows
        if is_flash_prefill(r)
    ]


def compare_fa3_published(rows: Iterable[dict], gpu: Gpu) -> list[dict]:
    """The FlashAttention-3 paper's figures (``FA3_PUBLISHED_CSV``) against the model, each as the
    time its FLOPs take at its TFLOP/s (``err``: the model's time over that, minus one); ``cal``:
    a row the CSV names calibration (none since the pipe law)."""
    out = []
    for r in rows:
        t = fa3_published_s(r)
        pred = predict_fa3_row(r, gpu)
        out.append({**r, "pred": pred, "err": (pred - t) / t, "cal": r["set"] == "calibration"})
    return out


def compare_graph_steps(rows: Iterable[dict], gpu: Gpu, base: ModelSpec) -> list[dict]:
    """A run's CUDA-graph decode steps (the paired eager runs' steps left out), each model's
    shape from the row (``sweep_model``)."""
    return [
        _compared(r, predict_row(r, gpu, sweep_model(r, base)))
        for r in rows
        if r["kind"] == "e2e_decode" and r["mode"] == "graph" and "pair" not in row_extra(r)
    ]


def compare_eager_steps(rows: Iterable[dict], gpu: Gpu, base: ModelSpec) -> list[dict]:
    """A run's eager decode steps outside the paired runs (sweep.py's ``e2e`` and ``p10_eager``
    sections), with the eager host of ``gpu``'s document (run k's), each model's shape from
    the row."""
    return [
        _compared(r, predict_row(r, gpu, sweep_model(r, base)))
        for r in rows
        if r["kind"] == "e2e_decode" and r["mode"] == "eager" and "pair" not in row_extra(r)
    ]


def compare_prefill_steps(rows: Iterable[dict], gpu: Gpu, base: ModelSpec) -> list[dict]:
    """A run's whole prefill steps (``sweep.py``'s ``qk_norm`` section: batch 1, eager, the LM head on the
    last position), each model's shape from the row."""
    return [_compared(r, predict_row(r, gpu, sweep_model(r, base))) for r in rows if r["kind"] == "e2e_prefill"]


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


def kernels_csv(name: str) -> str:
    """The profiled kernels of a run's CSV (``....csv``, a path or a name): ``...-kernels.csv``
    beside it."""
    path = Path(name)
    return str(path.with_name(f"{path.stem}-kernels.csv"))


def compare_gemm_cliff(rows: Iterable[dict], gpu: Gpu) -> list[dict]:
    """Run d's ``gemm_cliff`` rows (DeepSeek-V3's kv_a neighbourhood, n = 576, k = 7168), each
    timed alone after the flush like a ``gemm`` row; never fitted."""
    return [_compared(r, predict_row({**r, "kind": "gemm"}, gpu)) for r in rows if r["kind"] == "gemm_cliff"]


def compare_p10_shapes(rows: Iterable[dict], gpu: Gpu) -> list[dict]:
    """A ``sweep.py`` run's copies and P10's three GEMMs (set ``p10``), every one a prediction
    (on the H200's run k nothing was fitted)."""
    return [
        _compared(r, predict_row({**r, "set": "prediction"}, gpu))
        for r in rows
        if r["kind"] == "copy" or r["set"] == "p10"
    ]


def fa2_mech_s(row: dict, gpu: Gpu) -> float:
    """The model's time of one ``fa2_mech.py`` row (shape columns as ints): ``sk_fa2`` and
    ``fa2_l2``, FA2 decode's device time (``micro_device_s``: no L2 residency for decode K/V, so
    both ``fa2_l2`` rows of a shape get one prediction); ``fa2_fullq``, the forward kernel with 128
    query rows a (sequence, head), no mask, its device time; ``attn_prefill_l2``, timed alone."""
    if row["kind"] in ("sk_fa2", "fa2_l2"):
        return micro_device_s({**row, "kind": "sk_fa2"}, gpu)
    if row["kind"] == "fa2_fullq":
        ks = flash_prefill("attention", row["batch"], row["q_heads"], row["kv_heads"], 128, row["head_dim"], gpu,
                           causal=False, kv_len=row["kv_len"])
        return elapsed_s(simulate_gpu([(k, 0) for k in ks], gpu, mode="graph")) - gpu.launch_s("graph")
    return predict_row({k: str(v) for k, v in row.items()}, gpu)


def fa2_mech_group(row: dict) -> str:
    """A ``fa2_mech.py`` row's group (docs/gpu.md's FA2 mechanism table)."""
    hd = row["head_dim"]
    if row["kind"] == "sk_fa2":
        return f"one-split decode, hd {hd}"
    if row["kind"] == "fa2_l2":
        return "one-split decode, K/V in L2 or HBM"
    if row["kind"] == "fa2_fullq":
        return "128 queries over their own KV (decode grid, full tiles)"
    return f"prefill {'causal' if row['mode'] == 'causal' else 'no mask'}, hd {hd}"


_MECH_SHAPE = ("batch", "q_heads", "kv_heads", "kv_len", "head_dim", "seq_len")


def compare_fa2_mech(rows: Iterable[dict], frozen: dict[str, float], gpu: Gpu) -> list[dict]:
    """Runs p, q and r (``fa2_mech.py``; a decode row is its share of a graph): the model now
    (``fa2_mech_s``: ``pred``, ``err``) and the prediction frozen before the run (``frozen``, us
    by name: ``frozen`` in seconds, ``err_frozen``); ``group``: ``fa2_mech_group``'s."""
    out = []
    for r in rows:
        shape = {k: (int(r[k]) if r[k] else 0) for k in _MECH_SHAPE}
        row = {**r, **shape} if r["kind"] != "attn_prefill_l2" else r
        t, fz = float(r["median_us"]), frozen[r["name"]]
        pred = fa2_mech_s(row, gpu)
        group = fa2_mech_group(shape | {"kind": r["kind"], "mode": r["mode"]})
        out.append({**r, "pred": pred, "err": pred * 1e6 / t - 1, "frozen": fz * 1e-6, "err_frozen": fz / t - 1,
                    "group": group})
    return out


def round_key(row: dict) -> tuple:
    """The eager round of a row of runs d and e (model, batch, KV, round, P10 shape): an eager step
    and the site microbenchmark, site sequence and host issue timed with it share it."""
    e = row_extra(row)
    return (e.get("family"), row["batch"], row["kv_len"], e.get("round"), e.get("p10"))


def compare_eager_rounds(rows: list[dict], spec: GpuSpec, base: ModelSpec) -> list[dict]:
    """Runs d and e: each eager step predicted with the per-op host costs (``site_host_costs``) of
    the site microbenchmark of its own round (``round_key``: the forward's own operands, timed just
    before it) and the run's launch queue, never from the e2e rows; ``sites``: those site rows."""
    depth = next(int(r["n"]) for r in rows if r["kind"] == "queue")
    out = []
    for r in rows:
        if r["kind"] != "e2e_decode" or r["mode"] != "eager":
            continue
        sites = [x for x in rows if x["kind"] == "site" and round_key(x) == round_key(r)]
        costs = site_host_costs(sites)
        gpu = Gpu(spec.model_copy(update={"launch": spec.launch.model_copy(update={**costs, "queue_depth": depth})}))
        out.append({**_compared(r, predict_row(r, gpu, sweep_model(r, base))), "sites": sites})
    return out


def compare_dispatch_steps(rows: list[dict], spec: GpuSpec, base: ModelSpec) -> list[dict]:
    """Runs 1-3: every decode step (eager and CUDA graph) predicted with the eager host measured by
    the run's own dispatch microbenchmark (``with_host``: the same host as its e2e rows)."""
    gpu = Gpu(with_host(spec, rows))
    return [_compared(r, predict_row(r, gpu, sweep_model(r, base))) for r in rows if r["kind"] == "e2e_decode"]


def small_kernels_csv(name: str) -> str:
    """The profiled kernels of a ``small_kernels.py`` run (``...-small.csv``): ``...-small-kernels.csv``."""
    return name.replace("-small.csv", "-small-kernels.csv")


def compare_small_rows(
    rows: Iterable[dict],
    kernel_rows: Iterable[dict],
    gpu: Gpu,
    base: ModelSpec,
    frozen: dict[str, float] | None = None,
) -> list[dict]:
    """Every ``small_kernels.py`` row the model predicts: small kernels by their profiled device
    time (``micro_device_us`` of the run's ``kernel_rows``), decode GEMMs by their share of a graph,
    decode steps by graph replay; ``meas`` (seconds) beside ``pred`` and ``err``, and ``cal``: a
    row of ``SMALL_CALIBRATION_PREFIXES`` or ``GEMM_CLEAN_CALIBRATION``. ``frozen``: the run's
    predictions frozen before it was measured (``read_frozen``, us by row name; run m's), each
    row's as ``frozen`` and ``err_frozen``."""
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
    for c in out if frozen is not None else ():
        c["frozen"] = frozen[c["name"]] * 1e-6
        c["err_frozen"] = (c["frozen"] - c["meas"]) / c["meas"]
    return out


def read_frozen(path: Path) -> dict[str, float]:
    """A committed file of predictions frozen before their run (``#`` comment lines first): a CSV
    with ``name`` and ``predicted_us`` columns (runs m, n), ``name us`` pairs (run k's prefill), or
    a Markdown table of ``| name | us |`` rows, lines after it aside (run bm's); predicted
    microseconds by row name."""
    with path.open() as fh:
        lines = [line for line in fh if not line.startswith("#") and line.strip()]
    if lines and lines[0].startswith("|"):
        cells = (line.strip().strip("|").split("|") for line in lines if line.startswith("|"))
        return {name.strip(): float(us) for name, us in (c for c in cells if len(c) == 2) if _is_number(us)}
    if lines and "," in lines[0]:
        return {r["name"]: float(r["predicted_us"]) for r in csv.DictReader(lines)}
    return {name: float(us) for name, us in (line.split() for line in lines)}


def read_fa3_pipes(path: Path) -> list[dict]:
    """A committed Nsight Compute reading of FlashAttention-3 kernels (``fa3_ncu_read.py``'s table:
    runs bo and bp): each kernel's point, head dims (from its name, ``..._h<q>x<kv>x<d>v<dv>_...``)
    and its tensor and XU pipes' busy shares (0-1)."""
    out = []
    for line in path.read_text().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        dims = next(part for part in cells[0].split("_") if part.startswith("h") and "v" in part)
        d, dv = (int(x) for x in dims.split("x")[2].split("v"))
        out.append({"point": cells[0], "head_dim": d, "head_dim_v": dv,
                    "tensor": float(cells[4]) / 100, "xu": float(cells[5]) / 100})
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_frozen_shapes(path: Path) -> dict[tuple[str, ...], float]:
    """Run g's frozen prefill predictions (``#`` comment lines first, then ``batch q_heads kv_heads
    head_dim tokens us``): predicted microseconds by ``prefill_shape``."""
    with path.open() as fh:
        lines = [line.split() for line in fh if not line.startswith("#") and line.strip()]
    return {tuple(f[:5]): float(f[5]) for f in lines}


def prefill_shape(row: dict) -> tuple[str, ...]:
    """A prefill row's shape as ``read_frozen_shapes`` keys it: (batch, q_heads, kv_heads, head_dim,
    seq_len), the CSV's strings."""
    return (row["batch"], row["q_heads"], row["kv_heads"], row["head_dim"], row["seq_len"])


def compare_frozen_prefill(
    rows: Iterable[dict], frozen: dict, gpu: Gpu, *, by_shape: bool = False
) -> list[dict]:
    """A run's FA2 (or FA3: kind ``fa3_prefill``, run bn) prefill rows whose prediction was frozen
    before it (``frozen``: us by name, run k's; ``by_shape``: by ``prefill_shape``, run g's), against
    that prediction (``frozen``, ``err_frozen``) and the model now (``pred``, ``err``)."""
    out = []
    for r in rows:
        key = prefill_shape(r) if by_shape else r["name"]
        if not (is_flash_prefill(r) or r["kind"] == "fa3_prefill") or key not in frozen:
            continue
        t, f = float(r["median_us"]), frozen[key]
        pred = predict_row(r, gpu)
        now = pred * 1e6
        out.append({**r, "pred": pred, "err": (now - t) / t, "frozen": f * 1e-6, "err_frozen": (f - t) / t})
    return out


def fa2_kernel_labels(kernel_rows: Iterable[dict]) -> dict[str, str]:
    """The kernel FA2 ran for each ``sk_fa2`` row (its first profiled call, the spin kernel left
    out): ``forward (one split)``, or ``split-KV + combine``."""
    return {
        k["row"]: "split-KV + combine" if "splitkv" in k["kernel"] else "forward (one split)"
        for k in kernel_rows
        if "spin_kernel" not in k["kernel"] and k["index"] == "0"
    }


def compare_fa2_decode(
    rows: Iterable[dict], kernel_rows: Iterable[dict], frozen: dict[str, float], gpu: Gpu
) -> list[dict]:
    """Run n: FA2 decode rows (``sk_fa2``, a row's share of a graph) against the model now
    (``micro_device_s``: ``pred``, ``err``) and the prediction frozen before the run (``frozen``,
    us by name: ``frozen`` in seconds, ``err_frozen``); ``kernel``: ``fa2_kernel_labels``'s."""
    kernel = fa2_kernel_labels(kernel_rows)
    out = []
    for r in rows:
        if r["kind"] != "sk_fa2":
            continue
        t, fz = float(r["median_us"]), frozen[r["name"]]
        pred = micro_device_s(r, gpu)
        out.append({**r, "kernel": kernel[r["name"]], "pred": pred, "err": pred * 1e6 / t - 1,
                    "frozen": fz * 1e-6, "err_frozen": fz / t - 1})
    return out


def read_csv(path: Path) -> list[dict]:
    """A committed measurement CSV's rows."""
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))
