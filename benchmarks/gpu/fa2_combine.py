"""FA2's split-KV decode and its combine kernel, one SDPA call at a time (P12, run as).

Run ap (Llama-3.1-70B's TP8 shard, 8 query heads and 1 KV head a GPU) found FA2's combine kernel
taking 14.3 us a call at batch 1 (64 KV splits), 9.3 at batch 8 (32) and 4.7 at batch 32 (7),
where the model charged it one DRAM round trip. This script times FA2 decode through SDPA
(FlashAttention forced, native GQA) at batch 1, 8, 32 and 64 x 1K-32K keys, for 8 x 1 and 32 x 8
heads (head_dim 128): each row a CUDA graph of ``calls`` SDPA calls over K/V copies that span 2x
L2 (as a decode step reads a layer's cache from DRAM), the graph's median replay per call, and
every kernel of 3 profiled replays (the split kernel, the combine and its ``Log_max_splits``).

- ``--predict``: the model's per-kernel times of every row (rdusim; CPU), frozen before the run in
  ``h200-20261128as-fa2combine-predicted.txt``.
- default: the measurement (torch only): ``$OUT/fa2combine.csv`` (per-call graph time) and
  ``$OUT/fa2combine-kernels.csv`` (each profiled kernel).
- ``--compare KERNELS_CSV STEPS_CSV``: measured against the model now (rdusim; CPU).
- ``--fit KERNELS_CSV``: the H200's ``launch.fa2_split_fixed`` and ``launch.fa2_combine_fixed``
  (rdusim; CPU), output committed as ``h200-20261128as-fa2combine-fit.txt``; with ``--gpu h100
  --shapes STEPS_CSV`` the H100's, on run l's split-KV rows (``CALIBRATION_H100``; shapes from run
  l's small_kernels.py CSV), output ``h100-20261125l-fa2combine-fit.txt``.

The fit, named before it was run (fa2fix, 2026-11-28; explained after measurement: runs ap, as and
aw were seen). Calibration rows: run as's rows whose FA2 call splits the keys (``CALIBRATION``,
the 24 rows of 2-128 splits; the 8 one-split rows run the forward kernel, no combine, and are not
priced by either constant). Per row, the measured kernel is the median of its profiled device
times (``measured``); the model's is its device time in a graph with both constants at 0
(``base_rows``: the split kernel's grid alone; the combine's ``kernel_fixed``, its
``1 + splits`` L2 round trips and its bytes). Each constant is the weighted least-squares constant
``c`` minimising ``sum(((base + c - measured) / measured)^2)``: relative errors, as the fidelity
tables score rows, so the 5-10 us kernels where a fixed time matters are not outweighed by the
model's error on 40-250 us split kernels. The plain least-squares constant is printed beside it
(a sensitivity figure, not used).

The H100's pair (h100fa2, 2026-11-28; rows named before the fit in ``CALIBRATION_H100``; every H100
set was measured long before, so what it moves is explained after measurement): the same fit on
run l's 8 split-KV ``sk_sdpa`` rows (``--gpu h100 --shapes``), 2.27 / 1.63 us against the H200's
2.05 / 1.57, output ``h100-20261125l-fa2combine-fit.txt``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import os
import statistics
import sys
from pathlib import Path

HEAD_DIM = 128
#: (query heads, KV heads): Llama-3.1-70B's TP8 shard, and Llama-3.1-8B on one GPU
HEADS = [(8, 1), (32, 8)]
BATCHES = [1, 8, 32, 64]
KEYS = [1024, 4096, 8192, 32768]
L2_BYTES = 50 * 2**20  # H200 (hw_configs/h200.yaml); K/V copies span twice this
GRAPH_REPS = 20
MAX_CALLS = 256


def rows() -> list[tuple[str, int, int, int, int]]:
    """(name, batch, query heads, KV heads, keys) of every row."""
    return [
        (f"b{b}_h{hq}x{hkv}_l{kv}", b, hq, hkv, kv)
        for hq, hkv in HEADS
        for b in BATCHES
        for kv in KEYS
    ]


def copies_for(batch: int, kv_heads: int, keys: int) -> int:
    """K/V copies a row cycles through: enough to span 2x L2, at most ``MAX_CALLS``."""
    kv_bytes = 2 * batch * kv_heads * keys * HEAD_DIM * 2
    return max(1, min(MAX_CALLS, math.ceil(2 * L2_BYTES / kv_bytes)))


def calls_for(batch: int, kv_heads: int, keys: int) -> int:
    """SDPA calls a graph holds: one per copy, at least 4."""
    return max(4, copies_for(batch, kv_heads, keys))


#: run as's rows the H200's FA2 fixed times are fitted on (``--fit``): every row with more than one
#: KV split (named before the fit; the one-split rows have no combine)
CALIBRATION = [name for name, b, hq, hkv, kv in rows()
               if not (hkv == 8 and b >= 32)]

#: run l's rows the H100's pair is fitted on (named before that fit, h100fa2, 2026-11-28): the eight
#: ``sk_sdpa`` rows of benchmarks/gpu/h100-20261125l-small.csv where FA2 ran split-KV (a profiled
#: ``flash_fwd_splitkv_kernel`` and its ``flash_fwd_splitkv_combine_kernel`` in
#: h100-20261125l-small-kernels.csv): batch 1 and 16 x 2048 keys of Llama-3.1-8B, Llama-3.2-3B,
#: Llama-3.2-1B (head_dim 64) and Qwen2.5-7B, K/V caches cycled through 2x L2. Their batch-64 x 1024
#: rows run one split (the forward kernel, no combine) and are not priced by either constant.
CALIBRATION_H100 = [f"{fam}_b{b}_sdpa_cold" for fam in ("llama3.1-8b", "llama3.2-3b", "llama3.2-1b", "qwen2.5-7b")
                    for b in (1, 16)]


# ---------------------------------------------------------------------------------- model
def base_gpu(gpu_name: str = "h200"):
    """The GPU document with FA2's split-KV pair at zero fixed times (``--fit``'s model)."""
    from dataclasses import replace

    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(f"hw_configs/{gpu_name}.yaml").gpu
    launch = gpu.spec.launch.model_copy(update={"fa2_split_fixed_s": 0.0, "fa2_combine_fixed_s": 0.0})
    return replace(gpu, spec=gpu.spec.model_copy(update={"launch": launch}))


def shapes() -> list[tuple[str, int, int, int, int, int]]:
    """(name, batch, query heads, KV heads, keys, head_dim) of run as's rows."""
    return [(name, b, hq, hkv, kv, HEAD_DIM) for name, b, hq, hkv, kv in rows()]


def csv_shapes(steps_csv: str, names: list[str]) -> list[tuple[str, int, int, int, int, int]]:
    """The same for the rows ``names`` of a small_kernels.py CSV (run l: its ``batch``, ``q_heads``,
    ``kv_heads``, ``kv_len`` and ``head_dim`` columns)."""
    with open(steps_csv, newline="") as f:
        by = {r["name"]: r for r in csv.DictReader(f) if r["name"] in names}
    return [(n, *(int(by[n][c]) for c in ("batch", "q_heads", "kv_heads", "kv_len", "head_dim"))) for n in names]


def predict_rows(gpu_name: str = "h200", gpu=None, row_shapes: list | None = None) -> list[dict]:
    """The model's kernels of each row in a graph: name, device us (the graph node's launch
    taken off), and the pair's graph time per call (``gpu``: a loaded GPU in place of the document;
    ``row_shapes``: ``shapes()``'s tuples, run as's rows by default)."""
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import (
        fa2_combine_chain_s,
        fa2_decode_splits,
        flash_decode,
    )
    from rdusim.sim.gpu import simulate_gpu

    gpu = gpu or load_gpu_node(f"hw_configs/{gpu_name}.yaml").gpu
    graph = gpu.launch_s("graph")
    out = []
    for name, b, hq, hkv, kv, hd in row_shapes or shapes():
        kernels = flash_decode("attn", b, hq, hkv, kv, hd, gpu)
        trace = simulate_gpu([(k, 0) for k in kernels], gpu, mode="graph")
        recs = [(r.kernel, (r.end_s - r.start_s - graph) * 1e6) for r in trace.kernels]
        main = recs[0][1]
        combine = recs[1][1] if len(recs) > 1 else 0.0
        splits = fa2_decode_splits(b, hq, hkv, kv, hd, gpu)[1]
        chain = fa2_combine_chain_s(splits, gpu) * 1e6 if splits > 1 else 0.0
        out.append(dict(row=name, splits=splits, main_us=main, combine_us=combine, chain_us=chain,
                        call_us=trace.kernels[-1].end_s * 1e6))
    return out


def print_predictions() -> int:
    print("# benchmarks/gpu/fa2_combine.py --predict: FA2 decode, the model's kernels per SDPA call")
    print("# (H200; device us = the kernel's time less the graph node launch; call = both kernels in a graph)")
    print("# combine chain: kernel_fixed + (1 + splits) x l2_latency (fa2_combine_chain_s), FA2's source")
    print("| row | splits | main kernel (us) | combine (us) | call (us) | combine chain (us) |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in predict_rows():
        print(f"| {r['row']} | {r['splits']} | {r['main_us']:.2f} | {r['combine_us']:.2f} | {r['call_us']:.2f} | "
              f"{r['chain_us']:.2f} |")
    return 0


# ---------------------------------------------------------------------------- measurement
def _measure_row(torch, writers, name: str, b: int, hq: int, hkv: int, kv: int) -> None:  # pragma: no cover
    import torch.nn.functional as F  # noqa: N812
    from measure import capture, replay_times  # noqa: PLC0415  (benchmarks/gpu or .gpudev, as collectives.py)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.profiler import ProfilerActivity, profile

    steps, kern = writers
    dev, bf16 = torch.device("cuda"), torch.bfloat16
    calls, copies = calls_for(b, hkv, kv), copies_for(b, hkv, kv)
    q = torch.randn(b, hq, 1, HEAD_DIM, dtype=bf16, device=dev)
    ks = [torch.randn(b, hkv, kv, HEAD_DIM, dtype=bf16, device=dev) for _ in range(copies)]
    vs = [torch.randn_like(k) for k in ks]
    outs = [None] * calls

    def fn() -> None:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            for i in range(calls):
                outs[i] = F.scaled_dot_product_attention(q, ks[i % copies], vs[i % copies], enable_gqa=hq != hkv)

    g = capture(None, fn)  # measure.py beside this file: warm-up on a side stream, then the capture
    times = [t * 1e6 / calls for t in replay_times(g, GRAPH_REPS, warmup=3)]
    steps.writerow([name, b, hq, hkv, kv, calls, f"{statistics.median(times):.3f}", f"{min(times):.3f}",
                    GRAPH_REPS])
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.name, e.time_range.elapsed_us()) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA)
    per = max(1, len(ev) // 3)
    for i, (_, n, d) in enumerate(ev):
        kern.writerow([name, i // per, i % per, n, f"{d:.3f}"])
    print(f"{name}: {statistics.median(times):.2f} us a call, {per / calls:.1f} kernels a call", flush=True)


def measure() -> int:  # pragma: no cover - needs a GPU
    import torch

    out = Path(os.environ.get("OUT", "."))
    steps_fh = open(out / "fa2combine.csv", "w", newline="")  # noqa: SIM115
    kern_fh = open(out / "fa2combine-kernels.csv", "w", newline="")  # noqa: SIM115
    steps, kern = csv.writer(steps_fh), csv.writer(kern_fh)
    steps.writerow(["row", "batch", "q_heads", "kv_heads", "keys", "calls", "graph_median_us_per_call",
                    "graph_min_us_per_call", "reps"])
    kern.writerow(["row", "replay", "index", "kernel", "device_us"])
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    for name, b, hq, hkv, kv in rows():
        _measure_row(torch, (steps, kern), name, b, hq, hkv, kv)
        steps_fh.flush()
        kern_fh.flush()
        torch.cuda.empty_cache()
    steps_fh.close()
    kern_fh.close()
    return 0


# -------------------------------------------------------------------------------- compare
def measured(kernels_csv: str) -> dict[str, dict[str, float]]:
    """{row: {"main": us, "combine": us, "log_max_splits": n}} per call, from the profiled replays."""
    import re

    acc: dict[str, dict[str, list[float]]] = {}
    logs: dict[str, int] = {}
    opener = gzip.open if kernels_csv.endswith(".gz") else open
    for r in csv.DictReader(opener(kernels_csv, "rt")):
        k = r["kernel"]
        if "flash" not in k:
            continue
        kind = "combine" if "combine" in k else "main"
        acc.setdefault(r["row"], {"main": [], "combine": []})[kind].append(float(r["device_us"]))
        m = re.search(r", (\d+), (\d+), (true|false)>\(", k)
        if kind == "combine" and m:
            logs[r["row"]] = int(m.group(2))
    return {row: {"main": statistics.median(v["main"]) if v["main"] else 0.0,
                  "combine": statistics.median(v["combine"]) if v["combine"] else 0.0,
                  "log_max_splits": logs.get(row, 0)} for row, v in acc.items()}


def graph_calls(steps_csv: str) -> dict[str, float]:
    """Row -> its median graph time a call (us), from the measurement's steps CSV."""
    with open(steps_csv, newline="") as f:
        return {r["row"]: float(r["graph_median_us_per_call"]) for r in csv.DictReader(f)}


def compare(kernels_csv: str, steps_csv: str) -> int:
    meas = measured(kernels_csv)
    call = graph_calls(steps_csv)
    print("| row | splits (model) | Log_max_splits | main meas / model (us) | combine meas / model (us) | "
          "combine chain (us) | pair meas / model | error | call (graph, us) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in predict_rows():
        m = meas.get(p["row"])
        if m is None:
            continue
        pair_m, pair_p = m["main"] + m["combine"], p["main_us"] + p["combine_us"]
        print(f"| {p['row']} | {p['splits']} | {m['log_max_splits']} | {m['main']:.2f} / {p['main_us']:.2f} | "
              f"{m['combine']:.2f} / {p['combine_us']:.2f} | {p['chain_us']:.2f} | {pair_m:.2f} / {pair_p:.2f} | "
              f"{(pair_p - pair_m) / pair_m * 100:+.1f}% | {call.get(p['row'], 0.0):.2f} |")
    return 0


def frozen_sections(path: str) -> dict[str, dict[str, dict[str, float]]]:
    """Section title (``## (2) candidate A``) -> row -> its frozen ``combine (us)`` and ``call (us)``."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    title, cols = "", []
    for line in Path(path).read_text().splitlines():
        if line.startswith("## "):
            title, cols = line[3:].strip(), []
        elif line.startswith("| row "):
            cols = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith("| ") and cols and not line.startswith("|--"):
            cells = dict(zip(cols, (c.strip() for c in line.strip("|").split("|")), strict=True))
            out.setdefault(title, {})[cells["row"]] = {"combine": float(cells["combine (us)"]),
                                                       "call": float(cells["call (us)"])}
    return out


def against(frozen: str, kernels_csv: str, steps_csv: str) -> int:
    """Each frozen section's combine kernel and graph call against the measured ones (rows with a combine)."""
    meas = measured(kernels_csv)
    call = graph_calls(steps_csv)
    for title, rows in frozen_sections(frozen).items():
        print(f"## {title} (frozen: {Path(frozen).name})")
        print("| row | combine meas / frozen (us) | call meas / frozen (us) | call error |")
        print("|---|---:|---:|---:|")
        errs = []
        for row, f in rows.items():
            if row not in call:
                continue
            err = (f["call"] - call[row]) / call[row] * 100
            errs.append(err)
            comb = meas[row]["combine"] if row in meas else 0.0
            print(f"| {row} | {comb:.2f} / {f['combine']:.2f} | {call[row]:.2f} / {f['call']:.2f} | {err:+.1f}% |")
        worst = max(errs, key=abs)
        print(f"# {len(errs)} calls: median abs {statistics.median(map(abs, errs)):.1f}%, worst {worst:+.1f}%\n")
    return 0


def weighted_constant(base: list[float], meas: list[float]) -> float:
    """The constant ``c`` minimising ``sum(((b + c - m) / m)^2)`` (relative least squares)."""
    return sum((m - b) / m**2 for b, m in zip(base, meas, strict=True)) / sum(1 / m**2 for m in meas)


#: the GPU documents ``--fit`` calibrates: (calibration rows, what they are, in print_fit's header)
FIT_SETS = {
    "h200": (CALIBRATION, "the {n} rows of run as with more than one KV split"),
    "h100": (CALIBRATION_H100, "the {n} sk_sdpa rows of run l where FA2 ran split-KV"),
}


def fit_inputs(kernels_csv: str, gpu_name: str = "h200", steps_csv: str | None = None,
               ) -> tuple[dict[str, dict[str, float]], dict[str, dict]]:
    """The fit's two sides: the profiled kernels by row (run as's, or run l's for ``gpu_name``
    "h100", whose row shapes come from ``steps_csv``), and the model's calibration rows with both
    constants at 0."""
    calibration = FIT_SETS[gpu_name][0]
    row_shapes = csv_shapes(steps_csv, calibration) if steps_csv else None
    base = predict_rows(gpu=base_gpu(gpu_name), row_shapes=row_shapes)
    return measured(kernels_csv), {p["row"]: p for p in base if p["row"] in calibration}


def fit(kernels_csv: str, inputs: tuple[dict, dict] | None = None, gpu_name: str = "h200",
        steps_csv: str | None = None) -> dict[str, float]:
    """``launch.fa2_split_fixed`` and ``launch.fa2_combine_fixed`` (us) from ``gpu_name``'s
    calibration rows (``inputs``: ``fit_inputs`` already read)."""
    meas, base = inputs or fit_inputs(kernels_csv, gpu_name, steps_csv)
    calibration = FIT_SETS[gpu_name][0]
    out = {}
    for key, kind in (("fa2_split_fixed", "main"), ("fa2_combine_fixed", "combine")):
        b = [base[r][f"{kind}_us"] for r in calibration]
        m = [meas[r][kind] for r in calibration]
        out[key] = weighted_constant(b, m)
        out[f"{key}_plain"] = statistics.fmean(mi - bi for bi, mi in zip(b, m, strict=True))
    return out


def print_fit(kernels_csv: str, gpu_name: str = "h200", steps_csv: str | None = None) -> int:
    meas, base = inputs = fit_inputs(kernels_csv, gpu_name, steps_csv)
    f = fit(kernels_csv, inputs, gpu_name)
    calibration, what = FIT_SETS[gpu_name]
    args = "" if gpu_name == "h200" else f" --gpu {gpu_name} --shapes {Path(steps_csv).name}"
    print(f"# benchmarks/gpu/fa2_combine.py --fit {Path(kernels_csv).name}{args}: FA2's split-KV pair's fixed times "
          f"({gpu_name.upper()})")
    print(f"# calibration rows: {what.format(n=len(calibration))}; relative least")
    print("# squares of a constant on measured - model (the model's kernel with both constants at 0)")
    print("| row | splits | split meas / base (us) | combine meas / base (us) | split fitted err | combine fitted err |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in calibration:
        m, p = meas[r], base[r]
        es = (p["main_us"] + f["fa2_split_fixed"] - m["main"]) / m["main"] * 100
        ec = (p["combine_us"] + f["fa2_combine_fixed"] - m["combine"]) / m["combine"] * 100
        print(f"| {r} | {p['splits']} | {m['main']:.2f} / {p['main_us']:.2f} | {m['combine']:.2f} / "
              f"{p['combine_us']:.2f} | {es:+.1f}% | {ec:+.1f}% |")
    print(f"fa2_split_fixed: {f['fa2_split_fixed']:.3f} us (plain least squares {f['fa2_split_fixed_plain']:.3f})")
    print(f"fa2_combine_fixed: {f['fa2_combine_fixed']:.3f} us (plain least squares {f['fa2_combine_fixed_plain']:.3f})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predict", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar=("KERNELS_CSV", "STEPS_CSV"))
    ap.add_argument("--against", metavar="FROZEN_TXT", help="with --compare: every section of a committed frozen "
                    "table (the model then, candidates) against the measured combine and call instead")
    ap.add_argument("--fit", metavar="KERNELS_CSV", help="a GPU's launch.fa2_split_fixed and fa2_combine_fixed "
                    "from its calibration rows (FIT_SETS: the H200's run as, CALIBRATION; the H100's run l, "
                    "CALIBRATION_H100)")
    ap.add_argument("--gpu", choices=sorted(FIT_SETS), default="h200", help="with --fit: the GPU document")
    ap.add_argument("--shapes", metavar="STEPS_CSV", help="with --fit --gpu h100: run l's small_kernels.py CSV "
                    "(the calibration rows' shapes)")
    args = ap.parse_args(argv)
    if args.fit:
        if args.gpu != "h200" and not args.shapes:
            ap.error("--fit --gpu h100 needs --shapes (run l's small_kernels.py CSV)")
        return print_fit(args.fit, args.gpu, args.shapes)
    if args.predict:
        return print_predictions()
    if args.compare and args.against:
        return against(args.against, *args.compare)
    if args.compare:
        return compare(*args.compare)
    return measure()


if __name__ == "__main__":
    sys.exit(main())
