"""Predicted vs measured on the P12 sweep CSVs (``sweep.py``): GEMM tile selection, long
prefill attention, eager host dispatch. Rewrites docs/gpu.md's P12 sections and parity plots.

    PYTHONPATH=. python benchmarks/gpu/compare_sweep.py [--fit]

``--fit`` first prints ``fit_gemm`` on the first CSV's 24 GEMM calibration rows (the six GEMM
constants in hw_configs/h100.yaml come from it). Every other GEMM row, every prefill row and every
e2e row is a prediction. The eager rows are predicted with the per-op host costs measured by the
dispatch microbenchmark of the same run (same host), never from the e2e rows.

Each run is predicted by the GPU document of the device its rows name (``GPU_DOCS``,
``run_spec``): the H100 runs by hw_configs/h100.yaml, run k (an H200 no constant was fitted on)
by hw_configs/h200.yaml; its tables go to docs/gpu.md's "H200, never calibrated (run k)" and
docs/img/gpu-p12-h200-parity.png.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from compare import parity_axes  # compare.py beside this file

from rdusim.analysis.gpu.measured import (
    compare_dispatch_steps,
    compare_eager_rounds,
    compare_eager_steps,
    compare_fa2_decode,
    compare_fa2_mech,
    compare_frozen_prefill,
    compare_gemm_cliff,
    compare_gemm_rows,
    compare_graph_steps,
    compare_p10_shapes,
    compare_paired_eager,
    compare_prefill_rows,
    compare_small_rows,
    kernels_csv,
    prefill_shape,
    read_frozen_shapes,
    round_key,
    run_doc,
    small_kernels_csv,
)
from rdusim.analysis.gpu.measured import read_frozen as measured_frozen
from rdusim.analysis.gpu.predict import (
    MEASURED_LAYER,
    fit_attention,
    fit_gemm,
    fit_gemm_clean,
    fit_small_kernels,
    is_gemm_calibration,
    llama_shape,
    micro_device_us,
    predict_row,
    row_extra,
    sweep_model,
    with_host,
)
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import HOST_OPS, GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import gemm_plan, layer_kernels

ROOT = Path(__file__).resolve().parents[2]
RUNS = ("benchmarks/gpu/h100-20261125-sweep.csv", "benchmarks/gpu/h100-20261125b-sweep.csv",
        "benchmarks/gpu/h100-20261125c-sweep.csv")  # run 3: dispatch, in-situ and decode rows only
#: run d (sweep.py --only prefill_l2,gemm_cliff,eager_rounds,dispatch,p10): K/V across L2, the
#: kv_a cliff, the forward-operand host microbenchmark interleaved with eager steps
RUN_D = "benchmarks/gpu/h100-20261125d-sweep.csv"
#: run e (another machine start): prefill repeats, P10's decode shapes eager with the host
#: microbenchmark, eager rounds; the same eager sections again pinned to one core (taskset -c 3)
RUN_E = ("benchmarks/gpu/h100-20261125e-sweep.csv", "benchmarks/gpu/h100-20261125e-pinned-sweep.csv")
#: run f: 12 pairs (one-pass site microbenchmark, then one eager step) per model and batch
RUN_F = "benchmarks/gpu/h100-20261125f-sweep.csv"
#: run h: run f again, each site's GPU time recorded (site_host_costs corrects GPU-paced idle sites)
RUN_H = "benchmarks/gpu/h100-20261125h-sweep.csv"
#: run j: runs f/h again on another machine, plus P10's decode shapes of Llama-3.1-8B (p10_paired)
RUN_J = "benchmarks/gpu/h100-20261125j-sweep.csv"
#: run g: FA2 prefill shapes measured after the attention model was frozen (predictions written
#: first: h100-20261125g-holdout-predicted.txt)
RUN_G = "benchmarks/gpu/h100-20261125g-holdout.csv"
#: run k, an H200 (never calibrated on; every constant fitted on the H100 runs): sweep.py --only
#: prefill_l2,prefill_holdout,p10,e2e,gemm,prefill,eager_paired. Its FA2 prefill rows were
#: predicted before it was measured: h200-20261125-prefill-predicted.txt
RUN_K = "benchmarks/gpu/h200-20261125k-sweep.csv"
RUN_K_FROZEN = "benchmarks/gpu/h200-20261125-prefill-predicted.txt"
#: runs l (an H100) and m (an H200): small_kernels.py, the small kernels of a decode step and
#: the decode GEMMs timed kernel by kernel (graph share and profiled device time), the decode
#: steps again with every kernel of an eager step profiled. The small-kernel constants are fitted
#: on run l's calibration rows only (fit_small_kernels, fit_gemm_clean); run m was predicted
#: before it was measured: h200-20261125m-small-predicted.txt
RUN_L = "benchmarks/gpu/h100-20261125l-small.csv"
RUN_M = "benchmarks/gpu/h200-20261125m-small.csv"
RUN_M_FROZEN = "benchmarks/gpu/h200-20261125m-small-predicted.txt"
#: run n (an H200): FA2 decode at serving shapes (small_kernels.py --only fa2,latency_l2,latency),
#: predicted first: h200-20261125n-fa2-predicted.txt
RUN_N = "benchmarks/gpu/h200-20261125n-fa2.csv"
RUN_N_FROZEN = "benchmarks/gpu/h200-20261125n-fa2-predicted.txt"
#: run o (an H100): sweep.py --only e2e,p10_eager --quick after its timing loops became helpers
#: (two models' steps and P10's six decode shapes, graph and eager), and both pointer chases
RUN_O = "benchmarks/gpu/h100-20261125o-sweep.csv"
#: run i (an H100): runs d's prefill_l2 and g's holdout again on another machine
RUN_I = "benchmarks/gpu/h100-20261125i-sweep.csv"

def run_spec(rows: list[dict]) -> GpuSpec:
    """The GPU document of the device a run was measured on (``GPU_DOCS``, rdusim.analysis.gpu.measured)."""
    try:
        return load_spec(ROOT / run_doc(rows), GpuSpec)
    except ValueError as error:
        raise SystemExit(f"compare_sweep: {error}") from None


def _stats(errs: list[float]) -> str:
    if not errs:
        return "| 0 | — | — |"
    a = [abs(e) for e in errs]
    return f"| {len(a)} | {statistics.median(a) * 100:.1f}% | {max(a) * 100:.1f}% |"


def gemm_section(runs: list[list[dict]], gpu: Gpu, names: tuple[str, ...] = RUNS,
                 sets: tuple[str, str] = ("calibration", "prediction")) -> tuple[list[str], list[list[dict]]]:
    """``sets`` labels the fit's calibration shapes and the rest (on a run the fit never saw,
    both are predictions)."""
    out = ["| run | set | m | rows | median abs error | worst |", "|---|---|---|---:|---:|---:|"]
    compared_runs = []
    for name, rows in zip(names, runs, strict=True):
        if not any(r["kind"] == "gemm" and r["set"] != "p10" for r in rows):
            continue
        compared = compare_gemm_rows(rows, gpu)
        compared_runs.append(compared)
        label = Path(name).name
        for set_, keep in ((sets[0], True), (sets[1], False)):
            sel = [c for c in compared if c["cal"] == keep]
            out.append(f"| {label} | {set_} | all {_stats([c['err'] for c in sel])}")
            if not keep:
                for lo, hi in ((1, 16), (17, 128), (129, 1024), (1025, 8192)):
                    errs = [c["err"] for c in sel if lo <= int(c["m"]) <= hi]
                    out.append(f"| {label} | {sets[1]} | {lo}-{hi} {_stats(errs)}")
    pred = [c for c in compared_runs[0] if not c["cal"]]
    out += ["", "| family (first run, prediction set) | rows | median abs error | worst | median signed |",
            "|---|---:|---:|---:|---:|"]
    for fam in sorted({row_extra(c)["family"] for c in pred}):
        errs = [c["err"] for c in pred if row_extra(c)["family"] == fam]
        out.append(f"| {fam} {_stats(errs)} {statistics.median(errs) * 100:+.1f}% |")
    out += ["", "| worst predicted rows (first run) | m | n | k | measured (us) | predicted (us) | error | tile (BN x BM), splits |",
            "|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in sorted(pred, key=lambda c: -abs(c["err"]))[:12]:
        m, n, k = int(c["m"]), int(c["n"]), int(c["k"])
        p = gemm_plan(m, n, k, gpu)
        out.append(f"| {c['name']} | {m} | {n} | {k} | {float(c['median_us']):.1f} | {c['pred'] * 1e6:.1f} | "
                   f"{c['err'] * 100:+.1f}% | {p.bn} x {p.bm}, {p.splits} |")
    return out, compared_runs


def prefill_section(rows: list[dict], rows_d: list[dict], gpu: Gpu) -> tuple[list[str], list[dict]]:
    out = ["| run | batch | heads (q x kv x hd) | tokens | mask | K/V of one head (MB) | FA2 measured (us) | predicted (us) | error | FA2 TFLOP/s | cuDNN TFLOP/s |",
           "|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    compared = []
    rows_e = list(csv.DictReader((ROOT / RUN_E[0]).open()))
    for run, sel in (("a", rows), ("d", rows_d), ("e", rows_e)):
        by = {r["name"]: r for r in sel}
        for c in compare_prefill_rows(sel, gpu, fitted=run in ("a", "d")):
            r, pred, cal = c, c["pred"], c["cal"]
            t = float(r["median_us"]) * 1e-6
            c["run"] = run
            compared.append(c)
            cud = by.get(r["name"].replace("flash_", "cudnn_"))
            tf = float(r["flops"]) / t / 1e12
            cud_s = "—" if cud is None else f"{float(r['flops']) / float(cud['median_us']) / 1e6:.0f}"
            mask = "none" if r["mode"] == "noncausal" else "causal"
            kv_mb = 4 * int(r["seq_len"]) * int(r["head_dim"]) / 1e6
            out.append(f"| {run}{' (calibration)' if cal else ''} | {r['batch']} | {r['q_heads']} x {r['kv_heads']} x {r['head_dim']} | "
                       f"{r['seq_len']} | {mask} | {kv_mb:.1f} | {t * 1e6:.0f} | {pred * 1e6:.0f} | {c['err'] * 100:+.1f}% | {tf:.0f} | {cud_s} |")
    pred_rows = [c for c in compared if not c["cal"]]
    out += ["", "| prediction group | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    groups = (("run a: five head shapes, 4K-128K (the issue's set)", lambda c: c["run"] == "a"),
              ("run a, 8K-128K", lambda c: c["run"] == "a" and int(c["seq_len"]) >= 8192),
              ("run d: head_dim 64 / 128, 16K-256K, causal", lambda c: c["run"] == "d" and c["mode"] != "noncausal"
               and int(c["head_dim"]) <= 128),
              ("run d: head_dim 256", lambda c: c["run"] == "d" and int(c["head_dim"]) == 256),
              ("run d: no mask", lambda c: c["run"] == "d" and c["mode"] == "noncausal"),
              ("run e: 4K rows and one KV head at 64K-128K, three repeats each", lambda c: c["run"] == "e"),
              ("all predicted rows", lambda c: True))
    for label, keep in groups:
        out.append(f"| {label} " + _stats([c["err"] for c in pred_rows if keep(c)]))
    return out, compared


def cliff_section(rows_d: list[dict], gpu: Gpu) -> list[str]:
    """The kv_a neighbourhood (n = 576, k = 7168) and its kernels (run d)."""
    kernels = {}
    for r in csv.DictReader((ROOT / RUN_D.replace("-sweep.csv", "-kernels.csv")).open()):
        if r["row"].startswith("cliff_") and r["index"] == "0":
            kernels[r["row"]] = (r["kernel"].replace("nvjet_sm90_tst_", ""), float(r["device_us"]))
    out = ["| m x n x k | measured (us) | TFLOP/s | cuBLAS kernel (tile_kstages_cluster) | predicted (us) | error | model tile (BN x BM), splits |",
           "|---|---:|---:|---|---:|---:|---|"]
    errs = []
    for r in compare_gemm_cliff(rows_d, gpu):
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        t, pred = float(r["median_us"]) * 1e-6, r["pred"]
        errs.append(r["err"])
        p = gemm_plan(m, n, k, gpu)
        kn = kernels.get(r["name"], ("—", 0.0))[0]
        out.append(f"| {m} x {n} x {k} | {t * 1e6:.1f} | {2 * m * n * k / t / 1e12:.0f} | {kn} | {pred * 1e6:.1f} | "
                   f"{errs[-1] * 100:+.1f}% | {p.bn} x {p.bm}, {p.splits} |")
    out += ["", f"These {len(errs)} shapes (never fitted): median abs error {statistics.median(abs(e) for e in errs) * 100:.1f}%, "
            f"worst {max(abs(e) for e in errs) * 100:.1f}%."]
    return out


def eager_rounds_section(runs: list[tuple[str, list[dict]]], spec: GpuSpec, base: ModelSpec) -> tuple[list[str], list[dict]]:
    """Runs d and e: each eager step predicted with the per-op host costs of the same (model,
    batch, KV) and round, timed by the site microbenchmark (the forward's own operands) just
    before it; the host's own issue time and the sites run in sequence beside it."""
    out = ["| run | model | batch | KV | round | sites alone, one layer (us) | sites in sequence, one layer (us) | host issue (us) | "
           "host issue / (sequence x layers + head) | measured eager (us) | measured graph (us) | predicted eager (us) | error |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    compared = []
    for label, rows in runs:
        graph = {(row_extra(r)["family"], r["batch"], r["kv_len"]): float(r["median_us"])
                 for r in rows if r["kind"] == "e2e_decode" and r["mode"] == "graph"}
        for r in compare_eager_rounds(rows, spec, base):
            e, sites, pred, t = row_extra(r), r["sites"], r["pred"], float(r["median_us"]) * 1e-6
            c, key = {**r, "run": label}, round_key(r)
            compared.append(c)
            layer = sum(float(x["median_us"]) for x in sites if x["mode"] == "behind" and row_extra(x)["where"] == "layer")
            head = sum(float(x["median_us"]) for x in sites if x["mode"] == "behind" and row_extra(x)["where"] == "head")
            seq = next(float(x["median_us"]) for x in rows if x["kind"] == "site_sequence" and round_key(x) == key)
            host = next(float(x["median_us"]) for x in rows if x["kind"] == "e2e_host" and round_key(x) == key)
            layers = int(e["layers"])
            g = graph.get((e["family"], r["batch"], r["kv_len"]))
            out.append(f"| {label}{' (P10 shape)' if e.get('p10') else ''} | {e['family']} | {r['batch']} | {r['kv_len']} | {e['round']} | "
                       f"{layer:.0f} | {seq:.0f} | {host:.0f} | {host / (seq * layers + head):.2f} | {t * 1e6:.0f} | "
                       f"{'—' if g is None else f'{g:.0f}'} | {pred * 1e6:.0f} | {c['err'] * 100:+.1f}% |")
    out += ["", "| eager decode, never fitted | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    for label, _ in runs:
        sel = [c for c in compared if c["run"] == label]
        out.append(f"| run {label} " + _stats([c["err"] for c in sel]))
        p10 = [c for c in sel if row_extra(c).get("p10")]
        if p10:
            out.append(f"| run {label}, P10's shapes " + _stats([c["err"] for c in p10]))
    out.append("| all " + _stats([c["err"] for c in compared]))
    return out, compared


def dispatch_section(runs: list[list[dict]], spec: GpuSpec, base: ModelSpec) -> tuple[list[str], list[dict]]:
    out = ["| op (host, per call, us) | " + " | ".join(f"run {i}: GPU behind | run {i}: keeping up" for i in
                                                  range(1, len(runs) + 1)) + " |",
           "|---|" + "---:|" * (2 * len(runs))]
    costs = []
    for rows in runs:
        d = {}
        for r in rows:
            if r["kind"] == "dispatch":
                d[(row_extra(r)["op"], r["mode"])] = float(r["median_us"])
        costs.append(d)
    for op in HOST_OPS:
        out.append(f"| {op} | " + " | ".join(f"{d[(op, 'behind')]:.1f} | {d[(op, 'idle')]:.1f}" for d in costs) + " |")
    depth = [r["n"] for rows in runs for r in rows if r["kind"] == "queue"]
    out += ["", f"Launch queue: the host blocks after {', '.join(depth)} queued kernels (runs 1, 2, 3).", "",
            "| run | model | batch | KV | measured eager (us) | predicted (us) | error | measured graph (us) | predicted | error | host issue measured (us) | per-op sum (us) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    compared = []
    for i, rows in enumerate(runs, 1):
        gpu = Gpu(with_host(spec, rows))  # the per-op host sums below
        host = {r["name"].replace("_host_issue", ""): float(r["median_us"]) for r in rows if r["kind"] == "e2e_host"}
        e2e = {}
        for r in compare_dispatch_steps(rows, spec, base):
            e2e[r["name"]] = c = {**r, "run": i}
            compared.append(c)
        for name, c in e2e.items():
            if c["mode"] != "eager":
                continue
            g = e2e[name.replace("_eager", "_graph")]
            model = sweep_model(c, base)
            s = llama_shape(model, batch=int(c["batch"]), tokens=1, kv_len=int(c["kv_len"]))
            per_layer = sum(gpu.host_op_s(op) for k in layer_kernels(MEASURED_LAYER, s, gpu, phase="decode")
                            for op in k.host_ops)
            head = sum(gpu.host_op_s(op) for k in layer_kernels(["embedding", "lm_head"], s, gpu,
                                                                             phase="decode") for op in k.host_ops)
            key = name.replace("_eager", "")
            out.append(f"| {i} | {row_extra(c)['family']} | {c['batch']} | {c['kv_len']} | {float(c['median_us']):.0f} | "
                       f"{c['pred'] * 1e6:.0f} | {c['err'] * 100:+.1f}% | {float(g['median_us']):.0f} | {g['pred'] * 1e6:.0f} | "
                       f"{g['err'] * 100:+.1f}% | {host[key]:.0f} | {(per_layer * model.layers + head) * 1e6:.0f} |")
    out += ["", "| decode prediction group | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    for i in range(1, len(runs) + 1):
        for mode in ("eager", "graph"):
            out.append(f"| run {i}, {mode} " + _stats([c["err"] for c in compared if c["run"] == i and c["mode"] == mode]))
    return out, compared


def holdout_prefill_section(rows: list[dict], gpu: Gpu) -> tuple[list[str], list[dict]]:
    frozen = read_frozen_shapes(ROOT / RUN_G.replace("-holdout.csv", "-holdout-predicted.txt"))
    out = ["| batch | heads (q x kv x hd) | tokens | measured (us) | frozen prediction (us) | predicted now (us) | error (frozen) |",
           "|---:|---|---:|---:|---:|---:|---:|"]
    errs, compared = [], []
    for c in compare_frozen_prefill([r for r in rows if r["set"] == "holdout"], frozen, gpu, by_shape=True):
        r, t, f, now = c, float(c["median_us"]), frozen[prefill_shape(c)], c["pred"] * 1e6
        errs.append(c["err_frozen"])
        compared.append({**r, "pred": f * 1e-6})
        out.append(f"| {r['batch']} | {r['q_heads']} x {r['kv_heads']} x {r['head_dim']} | {r['seq_len']} | {t:.0f} | {f:.0f} | "
                   f"{now:.0f} | {errs[-1] * 100:+.1f}% |")
    out += ["", "| held-out prefill rows (frozen predictions) " + _stats(errs)]
    return out, compared


def eager_paired_section(runs: list[tuple[str, list[dict]]], spec: GpuSpec, base: ModelSpec) -> tuple[list[str], list[dict]]:
    """Runs f and h: each eager step predicted from the site pass taken just before it (0.1 s)."""
    out = ["| run | model | batch | KV | pairs | measured step, median (us) | predicted, median (us) | median abs error | worst | median signed |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    compared = []
    for label, rows in runs:
        lines, sel = _paired(label, rows, spec, base)
        out += lines
        compared += sel
    out += ["", "| paired eager steps (never fitted) | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    for label, _ in runs:
        out.append(f"| run {label} " + _stats([c["err"] for c in compared if c["run"] == label]))
    return out, compared


def _paired(label: str, rows: list[dict], spec: GpuSpec, base: ModelSpec,
            depth: int | None = None) -> tuple[list[str], list[dict]]:
    """``depth``: the launch queue where the run measured none (its own ``queue`` row otherwise)."""
    compared = [{**c, "run": label} for c in compare_paired_eager(rows, spec, base, depth)]
    out = []
    for key in sorted({(row_extra(c)["family"], int(c["batch"]), c["kv_len"]) for c in compared}):
        sel = [c for c in compared if (row_extra(c)["family"], int(c["batch"]), c["kv_len"]) == key]
        errs = [c["err"] for c in sel]
        out.append(f"| {label} | {key[0]} | {key[1]} | {key[2]} | {len(sel)} | {statistics.median(float(c['median_us']) for c in sel):.0f} | "
                   f"{statistics.median(c['pred'] for c in sel) * 1e6:.0f} {_stats(errs)[_stats(errs).index('|', 2):]} "
                   f"{statistics.median(errs) * 100:+.1f}% |")
    return out, compared


def _between(text: str, marker: str, lines: list[str]) -> str:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return head + start + "\n" + "\n".join(lines) + "\n" + end + tail


def _plots(gemm_runs: list[list[dict]], prefill: list[dict], e2e: list[dict], holdout: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 5.3))
    ax = axes[0]
    cal = [c for c in gemm_runs[0] if c["cal"]]
    pred = [c for c in gemm_runs[0] if not c["cal"]]
    for sel, label, style in ((pred, "prediction (1428 shapes)", dict(s=6, alpha=0.5)),
                              (cal, "calibration (24)", dict(s=30, marker="x", color="k"))):
        ax.scatter([float(c["median_us"]) for c in sel], [c["pred"] * 1e6 for c in sel], label=label, **style)
    parity_axes(ax, 3, 2e4, "GEMMs, H100 (bf16, cold L2)", title_size=9)
    ax = axes[1]
    for hd, color in ((128, "C0"), (64, "C1"), (256, "C4")):
        sel = [c for c in prefill if int(c["head_dim"]) == hd and not c["cal"]]
        ax.scatter([float(c["median_us"]) for c in sel], [c["pred"] * 1e6 for c in sel], color=color,
                   label=f"FA2 prefill, head_dim {hd}", s=18)
    cal = [c for c in prefill if c["cal"]]
    ax.scatter([float(c["median_us"]) for c in cal], [c["pred"] * 1e6 for c in cal], color="k", marker="x",
               label=f"calibration ({len(cal)})", s=30)
    ax.scatter([float(c["median_us"]) for c in holdout], [c["pred"] * 1e6 for c in holdout], facecolors="none",
               edgecolors="k", marker="s", label="held out (run g, frozen predictions)", s=30)
    parity_axes(ax, 1e2, 2e6, "FA2 prefill 4K-256K (runs a, d, e, g)", title_size=9)
    ax = axes[2]
    for mode, color in (("graph", "C2"), ("eager", "C3")):
        for run, marker in ((1, "o"), (2, "^"), (3, "s"), ("d", "D"), ("e", "v"), ("e pinned", "P")):
            sel = [c for c in e2e if c["mode"] == mode and c["run"] == run]
            ax.scatter([float(c["median_us"]) for c in sel], [c["pred"] * 1e6 for c in sel], color=color,
                       marker=marker, label=f"decode step, {mode}, run {run}", s=22)
    parity_axes(ax, 1e3, 5e4, "Decode steps of 4 Llama-shaped models", title_size=9)
    fig.tight_layout()
    fig.savefig(ROOT / "docs/img/gpu-p12-parity.png", dpi=100)


# ---------------------------------------------------------------------- run k: an H200, never calibrated
def h200_frozen_section(rows: list[dict], gpu: Gpu) -> tuple[list[str], list[dict]]:
    """Run k's FA2 prefill rows against the predictions frozen before it was measured, and the
    same rows predicted by today's code."""
    frozen = read_frozen(RUN_K_FROZEN)
    out = ["| set | batch | heads (q x kv x hd) | tokens | mask | measured (us) | frozen prediction (us) | error (frozen) | "
           "predicted now (us) | error (now) |", "|---|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    compared = []
    for r in compare_frozen_prefill(rows, frozen, gpu):  # the plot: the frozen prediction as pred
        t, f, now = float(r["median_us"]), frozen[r["name"]], r["pred"] * 1e6
        c = {**r, "pred": r["frozen"], "err": r["err_frozen"], "err_now": r["err"]}
        compared.append(c)
        mask = "none" if r["mode"] == "noncausal" else "causal"
        out.append(f"| {r['set']} | {r['batch']} | {r['q_heads']} x {r['kv_heads']} x {r['head_dim']} | {r['seq_len']} | {mask} | "
                   f"{t:.0f} | {f:.0f} | {c['err'] * 100:+.1f}% | {now:.0f} | {c['err_now'] * 100:+.1f}% |")
    missing = sorted(set(frozen) - {c["name"] for c in compared})
    out += ["", "| frozen H200 prefill predictions (never fitted) | rows | median abs error (frozen) | worst (frozen) | "
            "median abs error (now) | worst (now) |", "|---|---:|---:|---:|---:|---:|"]
    for label, keep in (("K/V across L2 (run d's shapes), causal", lambda c: c["set"] != "holdout" and c["mode"] != "noncausal"),
                        ("K/V across L2, no mask", lambda c: c["mode"] == "noncausal"),
                        ("held-out head shapes (run g's set)", lambda c: c["set"] == "holdout"),
                        ("all", lambda c: True)):
        sel = [c for c in compared if keep(c)]
        out.append(f"| {label} {_stats([c['err'] for c in sel])} {_stats([c['err_now'] for c in sel]).split(' | ', 1)[1]}")
    if missing:
        out += ["", f"Frozen rows the run did not measure: {', '.join(missing)}."]
    return out, compared


def h200_prefill_section(rows: list[dict], gpu: Gpu) -> tuple[list[str], list[dict]]:
    """Run k's FA2 prefill sweep (run a's five head shapes, 4K-128K), predicted by h200.yaml."""
    out = ["| batch | heads (q x kv x hd) | tokens | FA2 measured (us) | predicted (us) | error | FA2 TFLOP/s | cuDNN TFLOP/s |",
           "|---:|---|---:|---:|---:|---:|---:|---:|"]
    compared = []
    by = {r["name"]: r for r in rows}
    for c in compare_prefill_rows([r for r in rows if r["kind"] == "attn_prefill"], gpu, fitted=False):
        r, pred = c, c["pred"]
        t = float(r["median_us"]) * 1e-6
        compared.append(c)
        cud = by.get(r["name"].replace("flash_", "cudnn_"))
        cud_s = "—" if cud is None else f"{float(r['flops']) / float(cud['median_us']) / 1e6:.0f}"
        out.append(f"| {r['batch']} | {r['q_heads']} x {r['kv_heads']} x {r['head_dim']} | {r['seq_len']} | {t * 1e6:.0f} | "
                   f"{pred * 1e6:.0f} | {compared[-1]['err'] * 100:+.1f}% | {float(r['flops']) / t / 1e12:.0f} | {cud_s} |")
    out += ["", "| H200 prefill sweep (never fitted) | rows | median abs error | worst |", "|---|---:|---:|---:|",
            "| five head shapes, 4K-128K (the issue's set) " + _stats([c["err"] for c in compared]),
            "| 8K-128K " + _stats([c["err"] for c in compared if int(c["seq_len"]) >= 8192])]
    return out, compared


def h200_decode_section(rows: list[dict], spec: GpuSpec, base: ModelSpec, spec_h100: GpuSpec,
                        h100_rows: list[dict]) -> tuple[list[str], list[dict]]:
    """Run k's decode steps: CUDA graph and eager as h200.yaml prices them, eager again with
    h100.yaml's host (measured on the H100 device hosts), the same shapes on the H100 (run 1) for
    the speed-up, and the paired eager steps with the host costs of their own site pass (as runs
    f/h/j; the launch queue, which run k did not measure, is h200.yaml's, taken from the H100 runs: same driver)."""
    gpu = Gpu(spec)
    launch_h100 = {k: getattr(spec_h100.launch, k) for k in ("eager_ops", "eager_sequence", "queue_depth")}
    gpu_host = Gpu(spec.model_copy(update={"launch": spec.launch.model_copy(update=launch_h100)}))
    h100 = {r["name"]: r for r in h100_rows if r["kind"] == "e2e_decode"}
    host = {r["name"].replace("_host_issue", ""): float(r["median_us"]) for r in rows if r["kind"] == "e2e_host"}
    out = ["| model | batch | KV | graph: H100 measured, run 1 (us) | H200 measured (us) | predicted (us) | error | "
           "H200 / H100 measured | predicted (h200.yaml / h100.yaml) | eager measured (us) | "
           "predicted, h200.yaml's host (us) | error | predicted, h100.yaml's host (us) | error | host issue measured (us) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    compared = [{**c, "run": "k"} for c in compare_graph_steps(rows, gpu, base) + compare_eager_steps(rows, gpu, base)]
    with_h100_host = compare_eager_steps(rows, gpu_host, base)
    by = {c["name"]: c for c in compared}
    by_host = {c["name"]: c for c in with_h100_host}
    for name, g in by.items():
        if g["mode"] != "graph":
            continue
        e, eh, h = by[name.replace("_graph", "_eager")], by_host[name.replace("_graph", "_eager")], h100[name]
        h_pred = predict_row(h, Gpu(spec_h100), sweep_model(h, base))
        ratios.append((float(g["median_us"]) / float(h["median_us"]), g["pred"] / h_pred))
        out.append(f"| {row_extra(g)['family']} | {g['batch']} | {g['kv_len']} | {float(h['median_us']):.0f} | "
                   f"{float(g['median_us']):.0f} | {g['pred'] * 1e6:.0f} | {g['err'] * 100:+.1f}% | {ratios[-1][0]:.3f} | "
                   f"{ratios[-1][1]:.3f} | {float(e['median_us']):.0f} | {e['pred'] * 1e6:.0f} | {e['err'] * 100:+.1f}% | "
                   f"{eh['pred'] * 1e6:.0f} | {eh['err'] * 100:+.1f}% | {host[name.replace('_graph', '')]:.0f} |")
    paired_lines, paired = _paired("k", rows, spec, base, spec.launch.queue_depth)
    paired_nodepth = _paired("k", rows, spec, base, None)[1]
    for c in paired:
        c["mode"] = "eager paired"
    within = sum(abs(c["err"]) <= 0.15 for c in paired)
    out += ["", "| model | batch | KV | pairs | measured step, median (us) | predicted, median (us) | median abs error | worst | median signed |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    out += [line.replace("| k | ", "| ", 1) for line in paired_lines]
    out += ["", "| H200 decode steps (never fitted) | rows | median abs error | worst |", "|---|---:|---:|---:|",
            "| CUDA graph " + _stats([c["err"] for c in compared if c["mode"] == "graph"]),
            "| eager, h200.yaml's per-op host (run k's own site microbenchmark, pooled) " + _stats([c["err"] for c in compared if c["mode"] == "eager"]),
            "| eager, h100.yaml's per-op host (measured on the H100 device hosts) " + _stats([c["err"] for c in with_h100_host]),
            f"| eager paired, each step's own site pass, queue depth {spec.launch.queue_depth} (h200.yaml's: the H100 runs', same driver) "
            + _stats([c["err"] for c in paired]),
            "| eager paired, no queue limit " + _stats([c["err"] for c in paired_nodepth]),
            "", f"Paired eager steps within 15%: {within} of {len(paired)}. CUDA graph, H200 over H100 step time: measured median "
            f"{statistics.median(m for m, _ in ratios):.3f} ({min(m for m, _ in ratios):.3f}-{max(m for m, _ in ratios):.3f}), "
            f"predicted median {statistics.median(p for _, p in ratios):.3f} ({min(p for _, p in ratios):.3f}-{max(p for _, p in ratios):.3f})."]
    return out, compared + paired


def h200_p10_section(rows: list[dict], gpu: Gpu, h100_rows: list[dict]) -> tuple[list[str], list[dict]]:
    """P10's calibration shapes on the H200 (copies, the three P10 GEMMs, run k's fit_gemm
    calibration shapes are in the GEMM table): all predictions here."""
    h100 = {r["name"]: float(r["median_us"]) for r in h100_rows}
    out = ["| row | H100 measured (us) | H200 measured (us) | H200 predicted (us) | error |", "|---|---:|---:|---:|---:|"]
    compared = []
    for r in compare_p10_shapes(rows, gpu):
        t, pred = float(r["median_us"]) * 1e-6, r["pred"]
        compared.append(r)
        out.append(f"| {r['name']} | {h100.get(r['name'], float('nan')):.1f} | {t * 1e6:.1f} | {pred * 1e6:.1f} | "
                   f"{compared[-1]['err'] * 100:+.1f}% |")
    chase = sorted((int(r["n"]) if r["n"] else int(r["name"].rsplit("_", 1)[1]), float(r["median_us"]))
                   for r in rows if r["kind"] == "latency")
    (n0, t0), (n1, t1) = chase[0], chase[-1]
    out += ["", f"| P10's shapes on the H200 (never fitted) {_stats([c['err'] for c in compared])}",
            "", f"Pointer chase (set `hardware`, a constant of the device, not a prediction): {(t1 - t0) / (n1 - n0) * 1e3:.0f} ns "
            f"per dependent load (h200.yaml carries the H100's 352 ns)."]
    return out, compared


def _h200_plot(gemms: list[dict], frozen: list[dict], prefill: list[dict], decode: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 5.3))
    ax = axes[0]
    ax.scatter([float(c["median_us"]) for c in gemms], [c["pred"] * 1e6 for c in gemms], s=6, alpha=0.5,
               label=f"GEMM families ({len(gemms)} shapes)")
    parity_axes(ax, 3, 2e4, "GEMMs, H200 (bf16, cold L2), h200.yaml", title_size=9)
    ax = axes[1]
    for sel, label, style in ((prefill, "prefill sweep, 4K-128K", dict(color="C0", s=18)),
                              ([c for c in frozen if c["set"] != "holdout"], "K/V across L2 (frozen)",
                               dict(color="C1", marker="^", s=22)),
                              ([c for c in frozen if c["set"] == "holdout"], "held-out heads (frozen)",
                               dict(facecolors="none", edgecolors="k", marker="s", s=30))):
        ax.scatter([float(c["median_us"]) for c in sel], [c["pred"] * 1e6 for c in sel], label=label, **style)
    parity_axes(ax, 1e2, 1e6, "FA2 prefill on the H200, predictions", title_size=9)
    ax = axes[2]
    for mode, color, marker in (("graph", "C2", "o"), ("eager", "C3", "v"), ("eager paired", "C4", ".")):
        sel = [c for c in decode if c["mode"] == mode]
        ax.scatter([float(c["median_us"]) for c in sel], [c["pred"] * 1e6 for c in sel], color=color, marker=marker,
                   label=f"decode step, {mode}", s=18)
    parity_axes(ax, 1e3, 5e4, "Decode steps of 4 Llama-shaped models, H200", title_size=9)
    fig.suptitle("Run k: an H200 this project never calibrated on (every constant fitted on H100 runs)", fontsize=10)
    fig.tight_layout()
    fig.savefig(ROOT / "docs/img/gpu-p12-h200-parity.png", dpi=100)


def h200_sections(spec_h100: GpuSpec, base: ModelSpec, h100_rows: list[dict]) -> list[tuple[str, list[str]]]:
    rows = list(csv.DictReader((ROOT / RUN_K).open()))
    spec = run_spec(rows)
    gpu = Gpu(spec)
    frozen_lines, frozen = h200_frozen_section(rows, gpu)
    gemm_lines, gemm_runs = gemm_section([rows], gpu, (RUN_K,), ("H100 fit's calibration shapes", "prediction"))
    prefill_lines, prefill = h200_prefill_section(rows, gpu)
    decode_lines, decode = h200_decode_section(rows, spec, base, spec_h100, h100_rows)
    p10_lines, _ = h200_p10_section(rows, gpu, h100_rows)
    _h200_plot(gemm_runs[0], frozen, prefill, decode)
    return [("p12-h200-frozen", frozen_lines), ("p12-h200-gemm", gemm_lines), ("p12-h200-prefill", prefill_lines),
            ("p12-h200-decode", decode_lines), ("p12-h200-p10", p10_lines)]


def _kernels_path(run: str) -> Path:
    return ROOT / small_kernels_csv(run)


def _group(r: dict) -> str:
    """A small-kernel row's group in the tables: its kernel class at decode (the site's op)."""
    return {"sk_site": f"decode site: {r['mode']}", "sk_rmsnorm": "RMSNorm rows x width",
            "sk_copy": "size sweep: copy (cudaMemcpy)", "sk_add": "size sweep: add (vectorised)",
            "sk_neg_strided": "size sweep: negation of a strided half"}[r["kind"]]


def small_rows(run: str, gpu: Gpu, base: ModelSpec, frozen: dict[str, float] | None = None) -> list[dict]:
    """Every small_kernels.py row of ``run`` the model predicts: small kernels by profiled device
    time, decode GEMMs by their share of a graph, decode steps by graph replay."""
    rows = list(csv.DictReader((ROOT / run).open()))
    return compare_small_rows(rows, csv.DictReader(_kernels_path(run).open()), gpu, base, frozen)


def read_frozen(path: str) -> dict[str, float]:
    return measured_frozen(ROOT / path)


LABELS = ("l (H100)", "err"), ("m (H200), frozen", "err_frozen"), ("m (H200), now", "err")


def _class_lines(label: str, compared: list[dict], key: str) -> list[str]:
    out = []
    small_c = [c for c in compared if c["kind"].startswith("sk_") and c["kind"] != "sk_gemm_graph"]
    for set_, keep in (("calibration", True), ("prediction", False)):
        sel = [c for c in small_c if c["cal"] == keep]
        name = "H100's calibration shapes" if keep and "m (H200)" in label else set_
        out.append(f"| {label} | all small kernels | {name} {_stats([c[key] for c in sel])} "
                   f"{statistics.median(c[key] for c in sel) * 100:+.1f}% |")
    for group in sorted({_group(c) for c in small_c}):
        sel = [c for c in small_c if _group(c) == group and not c["cal"]]
        if sel:
            out.append(f"| {label} | {group} | prediction {_stats([c[key] for c in sel])} "
                       f"{statistics.median(c[key] for c in sel) * 100:+.1f}% |")
    return out


def _gemm_lines(label: str, compared: list[dict], key: str) -> list[str]:
    g = [c for c in compared if c["kind"] == "sk_gemm_graph"]
    out = []
    for set_, keep in (("calibration", True), ("prediction", False)):
        sel = [c for c in g if c["cal"] == keep]
        name = "H100's calibration shapes" if keep and "m (H200)" in label else set_
        out.append(f"| {label} | qkv, o, gate_up, down, lm_head of 4 models | {name} {_stats([c[key] for c in sel])} "
                   f"{statistics.median(c[key] for c in sel) * 100:+.1f}% |")
    return out


def _step_lines(label: str, compared: list[dict]) -> list[str]:
    out = []
    for c in compared:
        if c["kind"] == "e2e_decode":
            fz = (f"{c['frozen'] * 1e6:.0f} | {c['err_frozen'] * 100:+.1f}%" if "frozen" in c else "— | —")
            out.append(f"| {label} | {row_extra(c)['family']} | {c['batch']} | {c['kv_len']} | {c['meas'] * 1e6:.0f} | "
                       f"{c['pred'] * 1e6:.0f} | {c['err'] * 100:+.1f}% | {fz} |")
    return out


def _chase_ns(rows: list[dict], prefix: str) -> float:
    t = {r["name"]: float(r["median_us"]) for r in rows}
    return (t[f"{prefix}_8000"] - t[f"{prefix}_1000"]) / 7


def small_kernels_section(base: ModelSpec) -> list[str]:
    """Runs l and m: the small-kernel constants fitted on run l, the microbenchmark rows by kernel
    class (calibration and prediction apart; run m frozen and now), the decode GEMMs in a graph
    against the sweep's flushed timing, and the decode steps."""
    rows_l = list(csv.DictReader((ROOT / RUN_L).open()))
    rows_m = list(csv.DictReader((ROOT / RUN_M).open()))
    spec_l, spec_m = run_spec(rows_l), run_spec(rows_m)
    small = fit_small_kernels(rows_l, micro_device_us(csv.DictReader(_kernels_path(RUN_L).open())), spec_l)
    clean = fit_gemm_clean(rows_l, spec_l)
    runs = {"l (H100)": small_rows(RUN_L, Gpu(spec_l), base),
            "m (H200)": small_rows(RUN_M, Gpu(spec_m), base, read_frozen(RUN_M_FROZEN))}
    out = [f"Fitted on run l's calibration rows only: `launch.kernel_fixed` {small['kernel_fixed'] * 1e6:.3f} us and "
           f"`memory.l2_latency` {small['l2_latency'] * 1e9:.1f} ns ({small['rows']} rows, least squares); "
           f"`efficiency.gemm_stream_clean` {clean['gemm_stream_clean']:.3f} ({clean['rows']} rows). "
           f"Pointer chase over 8 MiB, warm (an L2 hit a hop; set `hardware`, run m, H200): "
           f"{_chase_ns(rows_m, 'pointer_chase_l2'):.0f} ns a hop; over 1 GiB (DRAM): "
           f"{_chase_ns(rows_m, 'pointer_chase'):.0f} ns (run m), {_chase_ns(rows_l, 'pointer_chase'):.0f} ns (run l, H100).",
           "", "| run | kernels | set | rows | median abs error | worst | median signed |", "|---|---|---|---:|---:|---:|---:|"]
    for label, key in LABELS:
        out += _class_lines(label, runs[label[:8]], key)
    out += ["", "| run | decode GEMMs, m = 1-64, in a graph | set | rows | median abs error | worst | median signed |",
            "|---|---|---|---:|---:|---:|---:|"]
    for label, key in LABELS:
        out += _gemm_lines(label, runs[label[:8]], key)
    flushed = []
    for rows in (rows_l, rows_m):
        by = {r["name"]: float(r["median_us"]) for r in rows}
        flushed += [by[n] / by[n.replace("_dirty", "_graph")] for n in by if n.endswith("_dirty")]
    out += ["", f"The same GEMMs timed as sweep.py's `gemm` rows (CUDA events around one call after measure.py's "
            f"flush, which leaves L2 full of dirty lines) take a median {statistics.median(flushed):.2f}x their share "
            f"of a graph ({min(flushed):.2f}-{max(flushed):.2f}x, {len(flushed)} rows, runs l and m).",
            "", "| run | model | batch | KV | graph step measured (us) | predicted (us) | error | frozen prediction (us) | error (frozen) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, compared in runs.items():
        out += _step_lines(label, compared)
    return out


def fa2_section() -> list[str]:
    """Run n: FA2 decode at serving shapes on the H200, frozen prediction and now, by the kernel
    FA2 ran (its name in the profile: the forward kernel for one KV split, split-KV otherwise)."""
    rows = [r for r in csv.DictReader((ROOT / RUN_N).open()) if r["kind"] == "sk_fa2"]
    gpu = Gpu(run_spec(rows))
    frozen = read_frozen(RUN_N_FROZEN)
    kernels = csv.DictReader((ROOT / kernels_csv(RUN_N)).open())
    out = ["| batch | heads (q x kv) | keys | FA2 kernel | measured, graph share (us) | frozen prediction (us) | error | "
           "predicted now (us) | error |", "|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    errs: dict[str, list[float]] = {}
    for r in compare_fa2_decode(rows, kernels, frozen, gpu):
        t, now, fz = float(r["median_us"]), r["pred"] * 1e6, frozen[r["name"]]
        errs.setdefault(r["kernel"], []).append(r["err_frozen"])
        out.append(f"| {r['batch']} | {r['q_heads']} x {r['kv_heads']} | {r['kv_len']} | {r['kernel']} | {t:.1f} | "
                   f"{fz:.1f} | {r['err_frozen'] * 100:+.1f}% | {now:.1f} | {r['err'] * 100:+.1f}% |")
    out += ["", "| run n, FA2 decode on the H200 (frozen predictions) | rows | median abs error | worst | median signed |",
            "|---|---:|---:|---:|---:|"]
    for name, e in sorted(errs.items()):
        out.append(f"| {name} {_stats(e)} {statistics.median(e) * 100:+.1f}% |")
    return out


RUN_P = "benchmarks/gpu/h100-20261125p-fa2mech.csv"
RUN_P_FROZEN = "benchmarks/gpu/h100-20261125p-fa2mech-predicted.txt"  # before the DRAM tile wait
RUN_Q = "benchmarks/gpu/h200-20261125q-fa2mech.csv"
RUN_Q_FROZEN = "benchmarks/gpu/h200-20261125q-fa2mech-predicted.txt"  # with it, before the first-read share
RUN_R = "benchmarks/gpu/h100-20261125r-fa2mech-holdout.csv"  # held out: frozen with both changes
RUN_R_FROZEN = "benchmarks/gpu/h100-20261125r-fa2mech-holdout-predicted.txt"


def fa2_mech_section() -> list[str]:
    """Runs p (H100), q (H200) and r (H100, held-out shapes): fa2_mech.py's rows, measured (a
    decode row's graph share), the frozen prediction and today's, by group."""
    out = ["| run | row | measured (us) | frozen prediction (us) | error | predicted now (us) | error |",
           "|---|---|---:|---:|---:|---:|---:|"]
    errs: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for run, path, frozen_path in (("p (H100)", RUN_P, RUN_P_FROZEN), ("q (H200)", RUN_Q, RUN_Q_FROZEN),
                                   ("r (H100, held out)", RUN_R, RUN_R_FROZEN)):
        rows = list(csv.DictReader((ROOT / path).open()))
        gpu = Gpu(run_spec(rows))
        frozen = read_frozen(frozen_path)
        for r in compare_fa2_mech(rows, frozen, gpu):
            t, fz, now = float(r["median_us"]), frozen[r["name"]], r["pred"] * 1e6
            e = errs.setdefault((run, r["group"]), ([], []))
            e[0].append(r["err_frozen"])
            e[1].append(r["err"])
            out.append(f"| {run} | {r['name']} | {t:.1f} | {fz:.1f} | {(fz / t - 1) * 100:+.1f}% | {now:.1f} | "
                       f"{(now / t - 1) * 100:+.1f}% |")
    out += ["", "| run | group | rows | frozen: median abs error | worst | median signed | now: median abs error | worst "
            "| median signed |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (run, group), (fz, now) in errs.items():
        def part(e: list[float]) -> str:
            a = [abs(x) for x in e]
            return f"{statistics.median(a) * 100:.1f}% | {max(a) * 100:.1f}% | {statistics.median(e) * 100:+.1f}%"
        out.append(f"| {run} | {group} | {len(fz)} | {part(fz)} | {part(now)} |")
    return out


def decode_summary_section(base: ModelSpec, spec_h100: GpuSpec, runs_1: list[dict]) -> list[str]:
    """Graph decode steps of every run, with today's model: runs 1 (H100), k (H200), l, m."""
    rows_k = list(csv.DictReader((ROOT / RUN_K).open()))
    out = ["| graph decode steps (4 models x batch 1, 16, 64 unless named) | GPU | rows | median abs error | worst | median signed |",
           "|---|---|---:|---:|---:|---:|"]
    for label, rows, spec in (("run 1 (h100-20261125-sweep.csv)", runs_1, spec_h100),
                              ("run k (h200-20261125k-sweep.csv)", rows_k, run_spec(rows_k)),
                              ("run l (h100-20261125l-small.csv)", list(csv.DictReader((ROOT / RUN_L).open())), None),
                              ("run m (h200-20261125m-small.csv)", list(csv.DictReader((ROOT / RUN_M).open())), None),
                              ("run o (h100-20261125o-sweep.csv: two models, P10's six shapes)",
                               list(csv.DictReader((ROOT / RUN_O).open())), None)):
        spec = spec or run_spec(rows)
        errs = [c["err"] for c in compare_graph_steps(rows, Gpu(spec), base)]
        device = "H200" if "H200" in spec.name else "H100"
        out.append(f"| {label} | {device} {_stats(errs)} {statistics.median(errs) * 100:+.1f}% |")
    return out


#: an SDPA attention row of a CSV (FA2, cuDNN, FA2 decode): the kernels that draw the board's power
ATTENTION_ROW = ("flash_", "cudnn_", "fa2_")
#: back-to-back attention that long (a row's median x repetitions) leaves the next row at a
#: power-limited SM clock: run s (h100-20261125s-clocks.csv) saw the clock fall from 1980 MHz to
#: 1590-1785 within about 0.1 s of sustained FA2 and come back within 0.1-0.2 s once the load dropped
CLOCK_BURST_S = 0.25


def clock_section() -> list[str]:
    """FA2 prefill rows of 4K-8K tokens (the short ones, a few ms of measurement in all), split
    by what the GPU ran just before them: a row measured right after ``CLOCK_BURST_S`` or more of
    back-to-back attention (the previous CSV row) against the rest."""
    runs = (("a", RUNS[0]), ("d", RUN_D), ("e", RUN_E[0]), ("g", RUN_G), ("i", RUN_I), ("k", RUN_K),
            ("p", RUN_P), ("q", RUN_Q), ("r", RUN_R))
    out = ["| run | row | tokens | measured right after | that row's repetitions (s) | measured (us) | predicted (us) | error |",
           "|---|---|---:|---|---:|---:|---:|---:|"]
    errs: dict[str, list[float]] = {"after": [], "after128": [], "other": []}
    for run, path in runs:
        rows = list(csv.DictReader((ROOT / path).open()))
        gpu = Gpu(run_spec(rows))
        for i, r in enumerate(rows):
            if not (r["kind"].startswith("attn_prefill") and r["name"].startswith("flash_")
                    and int(float(r["seq_len"])) <= 8192):
                continue
            prev = rows[i - 1] if i else None
            burst = (float(prev["median_us"]) * int(prev["reps"]) * 1e-6
                     if prev is not None and prev["name"].startswith(ATTENTION_ROW) else 0.0)
            t, pred = float(r["median_us"]), predict_row(r, gpu) * 1e6
            after = burst >= CLOCK_BURST_S
            errs["after" if after else "other"].append(pred / t - 1)
            if after and prev["head_dim"] and int(float(prev["head_dim"])) == 128:
                errs["after128"].append(pred / t - 1)
            before = "—" if prev is None else f"`{prev['name']}`"
            out.append(f"| {run} | `{r['name']}` | {int(float(r['seq_len']))} | {before} | "
                       f"{burst:.2f}{' (burst)' if after else ''} | {t:.0f} | {pred:.0f} | {(pred / t - 1) * 100:+.1f}% |")
    out += ["", "| FA2 prefill rows of 4K-8K tokens, runs a d e g i k p q r | rows | median abs error | worst | median signed |",
            "|---|---:|---:|---:|---:|"]
    for label, key in ((f"right after >= {CLOCK_BURST_S} s of back-to-back attention", "after"),
                       ("of which after head_dim-128 attention (FA2 or cuDNN)", "after128"), ("the others", "other")):
        e = errs[key]
        out.append(f"| {label} {_stats(e)} {statistics.median(e) * 100:+.1f}% |")
    return out


def gemm_clock_section() -> list[str]:
    """The GEMM sweep's predicted rows against two measurements of each: the CUDA-event median of
    its back-to-back repetitions (the table above) and the one call the profiler timed afterwards
    (``-kernels.csv``, every kernel of the call summed), by the profiled call's length."""
    out = ["| run | profiled call | rows | timed / profiled (median) | model vs timed: median signed | median abs | "
           "worst | model vs profiled: median signed | median abs | worst |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run, path in (("1 (H100)", RUNS[0]), ("2 (H100)", RUNS[1]), ("k (H200)", RUN_K)):
        rows = list(csv.DictReader((ROOT / path).open()))
        gpu = Gpu(run_spec(rows))
        device: dict[str, float] = {}
        for k in csv.DictReader((ROOT / path.replace("-sweep.csv", "-kernels.csv")).open()):
            device[k["row"]] = device.get(k["row"], 0.0) + float(k["device_us"])
        groups: dict[str, list[tuple[float, float, float]]] = {}
        for r in rows:
            if r["kind"] != "gemm" or r["set"] != "prediction" or is_gemm_calibration(r) or r["name"] not in device:
                continue
            t, d = float(r["median_us"]), device[r["name"]]
            if d < 100:
                continue  # a short call's timed median holds the flush's write-backs and the launch (sections above)
            p = predict_row(r, gpu) * 1e6
            label = "0.1-0.5 ms" if d < 500 else "0.5-2 ms" if d < 2000 else "over 2 ms"
            groups.setdefault(label, []).append((t / d, p / t - 1, p / d - 1))
        for label in ("0.1-0.5 ms", "0.5-2 ms", "over 2 ms"):
            g = groups.get(label, [])
            if not g:
                continue
            def part(e: list[float]) -> str:
                return (f"{statistics.median(e) * 100:+.1f}% | {statistics.median(abs(x) for x in e) * 100:.1f}% | "
                        f"{max(abs(x) for x in e) * 100:.1f}%")
            out.append(f"| {run} | {label} | {len(g)} | {statistics.median(x[0] for x in g):.3f} | "
                       f"{part([x[1] for x in g])} | {part([x[2] for x in g])} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fit", action="store_true", help="print fit_gemm on the first run's calibration rows")
    args = ap.parse_args()
    runs = [list(csv.DictReader((ROOT / r).open())) for r in RUNS]
    spec = run_spec(runs[0])
    rows_d = list(csv.DictReader((ROOT / RUN_D).open()))
    if args.fit:
        print("fit_gemm (24 calibration rows):", fit_gemm(runs[0], spec))
        print("fit_attention (4 calibration rows, runs a and d):", fit_attention(runs[0] + rows_d, spec))
    gpu = Gpu(spec)
    base = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    gemm_lines, gemm_runs = gemm_section(runs, gpu)
    prefill_lines, prefill = prefill_section(runs[0], rows_d, gpu)
    dispatch_lines, e2e = dispatch_section(runs, spec, base)
    cliff_lines = cliff_section(rows_d, gpu)
    rows_e = [list(csv.DictReader((ROOT / f).open())) for f in RUN_E]
    eager_lines, e2e_d = eager_rounds_section([("d", rows_d), ("e", rows_e[0]), ("e pinned", rows_e[1])], spec, base)
    paired_lines, e2e_f = eager_paired_section([("f", list(csv.DictReader((ROOT / RUN_F).open()))),
                                                ("h", list(csv.DictReader((ROOT / RUN_H).open()))),
                                                ("j", list(csv.DictReader((ROOT / RUN_J).open())))], spec, base)
    holdout_lines, holdout = holdout_prefill_section(list(csv.DictReader((ROOT / RUN_G).open())), gpu)
    doc = ROOT / "docs/gpu.md"
    text = doc.read_text()
    for marker, lines in (("p12-gemm", gemm_lines), ("p12-prefill", prefill_lines), ("p12-dispatch", dispatch_lines),
                          ("p12-cliff", cliff_lines), ("p12-eager-d", eager_lines), ("p12-eager-f", paired_lines),
                          ("p12-prefill-holdout", holdout_lines)):
        text = _between(text, marker, lines)
    h200 = h200_sections(spec, base, runs[0])
    h200 += [("p12-small", small_kernels_section(base)), ("p12-small-steps", decode_summary_section(base, spec, runs[0])),
             ("p12-fa2", fa2_section()), ("p12-fa2mech", fa2_mech_section()), ("p12-prefill-clock", clock_section()),
             ("p12-gemm-clock", gemm_clock_section())]
    for marker, lines in h200:
        text = _between(text, marker, lines)
    doc.write_text(text)
    print("\n".join(gemm_lines[:12] + [""] + prefill_lines[-8:] + [""] + dispatch_lines[-6:] + [""]
                    + cliff_lines[-1:] + eager_lines[-8:] + paired_lines[-3:] + holdout_lines[-1:]))
    for marker, lines in h200:
        print(f"\n{marker}:\n" + "\n".join(line for line in lines if "never fitted" in line or line.startswith("| ")
                                            and "%" in line and line.count("|") <= 7))
    _plots(gemm_runs, prefill, e2e + e2e_d, holdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
