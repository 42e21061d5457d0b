"""Does an eager library call that launches two kernels cost the host one call, or one call plus
a launch? From the committed microbenchmarks only (never an end-to-end step).

    PYTHONPATH=. python benchmarks/gpu/eager_host_kernels.py [--gpu h100|h200]

Kernels per call: ``small_kernels.py``'s rows of the same GPU (run l on the H100, run m on the
H200: ``*-small-kernels.csv``), each decode GEMM of the four models in a graph of 24 calls at
m = 1-64 (``{model}_{site}_m{m}_graph``) and SDPA at the decode shapes (``{model}_b{b}_sdpa_cold``);
m = 128 from ``h100-20261125-kernels.csv`` (``{model}_tp1_{site}_m128``). Device operations per
call = the profiled rows less the sleep kernel: a cuBLAS split-K GEMM and its ``splitKreduce``,
FA2's split-KV kernel and its combine, a cuBLAS ``Memset`` before some GEMMs.

Host cost per call: the site microbenchmark (``sweep.py`` ``layer_sites``: each call of one decode
layer and of the head timed alone, GPU behind, with the forward's operands; runs d-j on the H100
hosts, run k on the H200's), each (run, model, batch, KV, round or pair) a group. A site whose
device operations per call change with the batch (Llama-3.1-8B's O projection: split-K at m <= 16,
one kernel from m = 32) gives a difference in differences: its cost less the same group's
one-kernel GEMM sites (QKV and gate-up, one kernel at every batch: the host's speed at that
moment), median over the groups with more operations, less the median over those with fewer,
divided by the added operations. If the added launch cost ``launch.eager_host`` (8 us) the
estimate would read about 8 us; if the call's measured cost already covers it, about 0.

Outputs committed: ``h100-20261125-eager-host-kernels.txt`` (runs d-j, l) and
``h200-20261125k-eager-host-kernels.txt`` (``--gpu h200``: runs k, m).

Also prints what the engine charges: the kernels of each library call after its first (no
``host_ops``), each of which pays ``launch.eager_host`` in an eager step.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import defaultdict
from pathlib import Path

from rdusim.analysis.gpu.predict import MEASURED_LAYER, row_extra, site_host_costs
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import LayerShape, host_ops, layer_kernels

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks/gpu"
#: the site microbenchmark runs beside each GPU (as benchmarks/gpu/host_costs.py)
RUNS = {"h100": {"d": "h100-20261125d-sweep.csv", "e": "h100-20261125e-sweep.csv",
                 "e pinned": "h100-20261125e-pinned-sweep.csv", "f": "h100-20261125f-sweep.csv",
                 "h": "h100-20261125h-sweep.csv", "j": "h100-20261125j-sweep.csv"},
        "h200": {"k": "h200-20261125k-sweep.csv"}}
KERNELS = {"h100": ("h100-20261125l-small-kernels.csv", "h100-20261125-kernels.csv"),
           "h200": ("h200-20261125m-small-kernels.csv", None)}
#: ``layer_sites``' index of each library call with a profiled kernel list (head sites: 36-39)
SITES = {("layer", 1): "qkv", ("layer", 23): "sdpa", ("layer", 26): "o", ("layer", 29): "gate_up",
         ("layer", 34): "down", ("head", 39): "lm_head"}
GEMMS = ("qkv", "o", "gate_up", "down", "lm_head")
#: the KV length SDPA's kernels were profiled at, by batch (``small_kernels.py``'s ``sk_sdpa``)
SDPA_KV = {1: 2048, 16: 2048, 64: 1024}
#: what the added device operation of each contrast is (the kernel lists above)
ADDED = {"cuBLAS splitKreduce (the O projection at the batches cuBLAS splits it)": lambda model, site: site == "o",
         "cuBLAS Memset (lm_head, Qwen2.5-7B's down projection, at the batches cuBLAS adds it)":
             lambda model, site: site in ("lm_head", "down"),
         "FA2 split-KV combine (SDPA at batch 1 and 16 against 64; also the split-KV path's own work)":
             lambda model, site: site == "sdpa"}


def _rows(name: str) -> list[dict]:
    with (HERE / name).open() as f:
        return list(csv.DictReader(f))


def device_ops(gpu: str) -> dict[tuple[str, str, int], tuple[int, str]]:
    """(model, site, m) -> (device operations per call, their short names), from the profiles."""
    small, kernels = KERNELS[gpu]
    calls: dict[str, list[str]] = defaultdict(list)
    for r in _rows(small):
        if "spin_kernel" not in r["kernel"]:
            calls[r["row"]].append(r["kernel"])
    if kernels:
        for r in _rows(kernels):
            if "_tp1_" in r["row"] and r["row"].endswith("_m128"):
                calls[r["row"].replace("_tp1_", "_").replace("_m128", "_m128_graph")].append(r["kernel"])
    out = {}
    for row, names in calls.items():
        parts = row.split("_")
        if row.endswith("_graph") and parts[-2].startswith("m"):
            key = (parts[0], "_".join(parts[1:-2]), int(parts[-2][1:]))
        elif row.endswith("_sdpa_cold"):
            key = (parts[0], "sdpa", int(parts[1][1:]))
        else:
            continue
        out[key] = (len(names), " + ".join(_short(n) for n in names))
    return out


def _short(name: str) -> str:
    for word in ("splitKreduce", "splitkv_combine", "splitkv", "flash_fwd", "Memset"):
        if word in name:
            return {"splitkv": "fa2_splitkv", "flash_fwd": "fa2_fwd"}.get(word, word)
    return "splitK_gemm" if "splitK" in name else ("gemm" if name.startswith("nvjet") else name[:20])


def site_groups(rows: list[dict]) -> dict[tuple, dict[str, dict[str, float]]]:
    """(model, batch, KV, round or pair) -> mode -> site -> host us per call."""
    out: dict[tuple, dict[str, dict[str, float]]] = {}
    for r in rows:
        if r["set"] != "host" or r["kind"] not in ("site", "site_paired"):
            continue
        e = row_extra(r)
        site = SITES.get((e.get("where"), int(e.get("site", -1))))
        if site is None:
            continue
        key = (e["family"], int(r["batch"]), int(r["kv_len"]), e.get("round", e.get("pair")))
        cost = float(r["median_us"])
        gpu_us = float(e.get("gpu_us", "nan"))
        if r["mode"] == "idle" and not gpu_us < 0.9 * cost:  # GPU-paced, or no GPU time recorded
            continue
        out.setdefault(key, {}).setdefault(r["mode"], {})[site] = cost
    return out


def contrasts(groups: dict, ops: dict, mode: str) -> list[tuple[str, str, float, int, int, list[int]]]:
    """(model, site, us per added device operation, groups with more, groups with fewer, the two
    counts) for every site whose device operations per call change across the groups' batches,
    against the group's one-kernel GEMM sites."""
    by: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (model, batch, kv, _), modes in groups.items():
        costs = modes.get(mode, {})
        refs = [costs[s] for s in ("qkv", "gate_up") if s in costs and ops.get((model, s, batch), (0,))[0] == 1]
        if len(refs) < 2:
            continue
        ref = sum(refs) / len(refs)
        for site in ("o", "down", "lm_head", "sdpa"):
            n = ops.get((model, site, batch), (None,))[0]
            if site == "sdpa" and kv != SDPA_KV.get(batch):
                n = None  # SDPA's kernels were profiled at these shapes only
            if n is None or site not in costs:
                continue
            by[(model, site)][n].append(costs[site] - ref)
    out = []
    for (model, site), per_n in sorted(by.items()):
        if len(per_n) < 2:
            continue
        lo, hi = min(per_n), max(per_n)
        est = (statistics.median(per_n[hi]) - statistics.median(per_n[lo])) / (hi - lo)
        out.append((model, site, est, len(per_n[hi]), len(per_n[lo]), [lo, hi]))
    return out


def call_excess(rows: list[dict], ops: dict) -> dict[str, list[float]]:
    """What a call that launches more than one device operation costs beyond the per-kind cost the
    engine charges it (``site_host_costs``: a GEMM call the mean of the group's GEMM sites, one and
    two operations alike; SDPA its one site, pooled over groups as ``pooled_host_costs`` does),
    GPU behind, us: "gemm" one value per (group, split GEMM site), "sdpa" the median over the
    groups where SDPA launched two kernels less the median over all groups."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["set"] == "host" and r["kind"] in ("site", "site_paired"):
            e = row_extra(r)
            groups[(e["family"], int(r["batch"]), int(r["kv_len"]), e.get("round", e.get("pair")))].append(r)
    out: dict[str, list[float]] = {"gemm": [], "sdpa": []}
    sdpa_all, sdpa_two = [], []
    for (model, batch, kv, _), g in groups.items():
        kind = site_host_costs(g)["eager_ops"]
        for r in g:
            e = row_extra(r)
            site = SITES.get((e["where"], int(e["site"])))
            if r["mode"] != "behind" or site is None:
                continue
            n = ops.get((model, site, batch), (None,))[0]
            if site == "sdpa":
                sdpa_all.append(float(r["median_us"]))
                if kv == SDPA_KV.get(batch) and n == 2:
                    sdpa_two.append(float(r["median_us"]))
            elif n is not None and n > 1:
                out["gemm"].append(float(r["median_us"]) - kind["gemm"] * 1e6)
    if sdpa_two:
        out["sdpa"] = [statistics.median(sdpa_two) - statistics.median(sdpa_all)]
    return out


def engine_extras(gpu: Gpu, model: str, batch: int, kv: int, dims: dict) -> dict[str, int]:
    """Library call -> kernels the engine launches after the call's first (each paying
    ``launch.eager_host`` in an eager step), for one decode layer and the head."""
    shape = LayerShape(batch=batch, tokens=1, kv_len=kv, **dims)
    out = {}
    for name in [*MEASURED_LAYER, "lm_head"]:
        extra = len(layer_kernels([name], shape, gpu, phase="decode")) - 1
        if extra and host_ops(name):
            out[name] = out.get(name, 0) + extra
    return out


def site_shapes(gpu_name: str) -> tuple[dict[str, dict], set[tuple[str, int, int]]]:
    """The site runs' models (their layer dimensions) and (model, batch, KV) shapes."""
    dims_of: dict[str, dict] = {}
    shapes = set()
    for name in RUNS[gpu_name].values():
        for r in _rows(name):
            if r["set"] == "host" and r["kind"] in ("site", "site_paired"):
                e = row_extra(r)
                dims_of[e["family"]] = dict(hidden=int(e["hidden"]), q_heads=int(r["q_heads"]),
                                            kv_heads=int(r["kv_heads"]), head_dim=int(r["head_dim"]),
                                            ffn=int(e["ffn"]), vocab=int(e["vocab"]))
                shapes.add((e["family"], int(r["batch"]), int(r["kv_len"])))
    return dims_of, shapes


def print_ops(gpu_name: str, ops: dict, models: list[str]) -> None:
    print(f"## Device operations per call ({KERNELS[gpu_name][0]}"
          + (f"; m = 128: {KERNELS[gpu_name][1]}" if KERNELS[gpu_name][1] else "") + ")\n")
    ms = sorted({k[2] for k in ops if k[1] != "sdpa"})
    print("| model | call | " + " | ".join(f"m={m}" for m in ms) + " |")
    print("|---|---|" + "---:|" * len(ms))
    for model in models:
        for site in (*GEMMS, "sdpa"):
            cells = [ops.get((model, site, m)) for m in ms]
            if any(cells):
                print(f"| {model} | {site} | " + " | ".join(f"{c[0]} ({c[1]})" if c else "" for c in cells) + " |")
    print("\n(GEMMs: one call of a graph of 24; sdpa: batch 1 and 16 at KV 2048, batch 64 at KV 1024;"
          " on the H100 run l's eager steps of three models launch the same kernels)\n")


def print_engine(gpu_name: str, ops: dict, dims_of: dict, shapes: set) -> None:
    gpu = Gpu(load_spec(ROOT / f"hw_configs/{gpu_name}.yaml", GpuSpec))
    print("## What the engine charges: kernels after a call's first, one decode layer + head "
          f"({gpu_name}.yaml, `launch.eager_host` each before this change)\n")
    print("| model | batch | KV | engine: extra kernels (call: count) | profiled extra device ops |")
    print("|---|---:|---:|---|---|")
    for model, batch, kv in sorted(shapes):
        eng = engine_extras(gpu, model, batch, kv, dims_of[model])
        prof = []
        for site in (*GEMMS, "sdpa"):
            c = ops.get((model, site, batch)) if site != "sdpa" or kv == SDPA_KV.get(batch) else None
            prof.append(f"{site} ?" if c is None else (f"{site} {c[0] - 1}" if c[0] > 1 else ""))
        print(f"| {model} | {batch} | {kv} | {', '.join(f'{k} {v}' for k, v in eng.items()) or '0'} | "
              f"{', '.join(p for p in prof if p) or '0'} |")


def print_excess(gpu_name: str, ops: dict) -> None:
    print("\n## A call that launches two or more device operations against the per-kind cost the engine"
          " charges it (GPU behind)\n")
    print("| run | GEMM calls with 2-3 ops: site cost less its group's `gemm` cost, median (n) |"
          " SDPA with 2 kernels: median less the run's median `sdpa` |")
    print("|---|---:|---:|")
    for run, name in RUNS[gpu_name].items():
        ex = call_excess(_rows(name), ops)
        g = f"{statistics.median(ex['gemm']):+.1f} us ({len(ex['gemm'])})" if ex["gemm"] else ""
        a = f"{ex['sdpa'][0]:+.1f} us" if ex["sdpa"] else ""
        print(f"| {run} | {g} | {a} |")
    print("\n(before this change the engine charged such a call its kind's cost plus `launch.eager_host`,"
          " 8 us, per kernel after the first it models)")


def print_contrasts(gpu_name: str, ops: dict, mode: str) -> None:
    print(f"\n## Host us per added device operation, GPU {mode} (difference in differences against the"
          " group's one-kernel QKV and gate-up sites)\n")
    print("| run | model | call | device ops (fewer, more) | groups (more / fewer) | us per added op |")
    print("|---|---|---|---|---:|---:|")
    kinds = []
    for run, name in RUNS[gpu_name].items():
        for model, site, est, n_hi, n_lo, (lo, hi) in contrasts(site_groups(_rows(name)), ops, mode):
            kinds.append((model, site, est))
            print(f"| {run} | {model} | {site} | {lo}, {hi} | {n_hi} / {n_lo} | {est:+.1f} |")
    if not kinds:
        print("\nno contrast (no site's idle cost was timed by the host)")
        return
    pooled = [e for _, _, e in kinds]
    print(f"\nmedian over the {len(pooled)} contrasts: {statistics.median(pooled):+.1f} us; "
          f"range {min(pooled):+.1f} to {max(pooled):+.1f} us")
    for label, test in ADDED.items():
        vals = [e for m, s_, e in kinds if test(m, s_)]
        if vals:
            print(f"- {label}: median {statistics.median(vals):+.1f} us over {len(vals)} contrasts "
                  f"({min(vals):+.1f} to {max(vals):+.1f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=sorted(RUNS), default="h100")
    gpu_name = ap.parse_args(argv).gpu
    ops = device_ops(gpu_name)
    dims_of, shapes = site_shapes(gpu_name)
    print_ops(gpu_name, ops, sorted(dims_of))
    print_engine(gpu_name, ops, dims_of, shapes)
    print_excess(gpu_name, ops)
    for mode in ("behind", "idle"):
        print_contrasts(gpu_name, ops, mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
