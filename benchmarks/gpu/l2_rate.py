"""Strided elementwise kernels whose operands sit in L2: the Little's-law rate at L2's latency,
tested against the committed profiles (issue 17, P12; analysis only, the model is unchanged).

The model charges PyTorch's non-vectorised elementwise path (``elementwise_kernel<128, 4>``) its
bytes at ``strided_stream`` of HBM peak, 1.81 TB/s on both GPUs, read as Little's law: the bytes
its threads keep in flight over the DRAM round trip (``memory.hbm_latency``, 352 ns). The
hypothesis tested here: a kernel whose operands were just written by the kernel before it, and
whose bytes fit in L2, runs at the same bytes in flight over an L2 hit, i.e.
``strided rate x hbm_latency / L2 hit latency``. The L2 hit latency is the committed warm pointer
chase (8 MiB, one thread: 142.6 ns on the H100, run o; 146.7 ns on the H200, run m); a public
cross-check, ``te42kyfo/gpu-benches`` ``gpu-latency/h100_pcie.txt`` (commit a7dc559), gives an
H100 PCIe at 1755 MHz 265.5 cycles a hop up to about 20 MB and about 475 past 30 MB (the far L2
partition), DRAM about 650.

Tables, all from committed files (``PYTHONPATH=. python benchmarks/gpu/l2_rate.py``):

1. the latencies and the two rates;
2. the FFN's SiLU and product timed alone, repeated (``small_kernels.py``'s site rows, runs l
   and m: the call before touched the same operands), beside the same kernels in the profiled
   decode steps (runs l and m, eager), where the kernel before wrote them;
3. the strided negation of ``small_kernels.py``'s size sweep (alone, repeated), in and out of L2;
4. every strided kernel of the profiled decode steps, summed a step (runs l, m eager; runs aw and
   ap, graph shards on an H200), and by type where its bytes matter (batch 64-128);
5. run ax's TP2 prefill SiLU and product (29-705 MB a kernel): in L2 by their bytes at 1K, the
   rest counter-cases past L2, as is the sweep past L2 (Table 3);
6. the median error of each set, the model now and the hypothesis.

Each model figure is the engine's device time of the one launch (``kernels_device_s``): its
``kernel_fixed``, its round trips at ``l2_latency``, its bytes at the rate; the hypothesis is
the same kernel on the document with ``strided_stream`` scaled by ``hbm_latency`` / the chase.
"""

from __future__ import annotations

import collections
import csv
import gzip
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tp_shard as T  # noqa: E402

from rdusim.analysis.gpu.predict import kernels_device_s, micro_device_us, row_extra  # noqa: E402
from rdusim.hw.gpu import Gpu, load_gpu_node  # noqa: E402
from rdusim.mapping.gpu import BF16, RT_CAT, RT_INDEX, RT_STRIDED, RT_VECTORIZED, streaming  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ROOT / "benchmarks/gpu"
#: small_kernels.py runs: (GPU document, file prefix)
SMALL_RUNS = (("h100", "h100-20261125l"), ("h200", "h200-20261125m"))
#: the committed pointer chases: (GPU, CSV, kind of the L2 rows); a hop = (8000-hop - 1000-hop) / 7000
CHASES = (("h100", "h100-20261125o-chase.csv"), ("h200", "h200-20261125m-small.csv"))
#: te42kyfo/gpu-benches gpu-latency/h100_pcie.txt (commit a7dc559cc5a1): cycles a hop at 1755 MHz,
#: one thread, L2 near (1-20 MB), L2 far (35-47 MB: the other partition), DRAM (0.5-1.5 GB)
GPU_BENCHES_CYCLES = {"L2 near": 265.5, "L2 far": 475.0, "DRAM": 650.0}
CLOCK_HZ = 1.98e9  # hw_configs/h100.yaml and h200.yaml compute.clock
#: tp_shard.py runs profiled as CUDA graphs on an H200: (tp_shard model, kernels CSV)
SHARDS = (("llama-3.1-8b-tp4", "h200-20261128aw-tpshard8tp4-kernels.csv.gz"),
          ("llama-3.1-70b", "h200-20261128ap-tpshard70-kernels.csv.gz"))
AX = "h200x2-20261128ax"  # tp_prof.py, TP2 prefill on two H200s (rank 0's profile)
AX_SHAPES = {"llama-3.1-8b": (32, 14336 // 2), "llama-3.1-70b": (80, 28672 // 2)}  # layers, FFN a GPU


def chase_s(gpu_name: str) -> dict[str, float]:
    """The committed pointer chase's seconds a hop: ``L2`` (8 MiB warm) and ``DRAM`` (1 GiB)."""
    path = dict(CHASES)[gpu_name]
    t = {r["name"]: float(r["median_us"]) for r in csv.DictReader(open(GPU_DIR / path))}
    hop = {kind: (t[f"pointer_chase{tag}_8000"] - t[f"pointer_chase{tag}_1000"]) / 7000 * 1e-6
           for kind, tag in (("L2", "_l2"), ("DRAM", ""))}
    return hop


def gpus(gpu_name: str, hit: str = "chase") -> tuple[Gpu, Gpu]:
    """The GPU document as it is, and with ``strided_stream`` x ``hbm_latency`` / the L2 hit
    latency: ``chase``, the committed chase (the hypothesis); ``far``, gpu-benches' far-partition
    hit at the document's clock (a variant, Table 6 only)."""
    g = load_gpu_node(ROOT / f"hw_configs/{gpu_name}.yaml").gpu
    eff = g.spec.efficiency
    lat = chase_s(gpu_name)["L2"] if hit == "chase" else GPU_BENCHES_CYCLES["L2 far"] / CLOCK_HZ
    hyp = Gpu(g.spec.model_copy(update={"efficiency": eff.model_copy(
        update={"strided_stream": eff.strided_stream * g.hbm_latency_s / lat})}))
    return g, hyp


def strided_rate(g: Gpu) -> float:
    return g.spec.memory.hbm_bytes_per_s * g.spec.efficiency.strided_stream


def launch_us(g: Gpu, nbytes: float, rt: int, strided: bool) -> float:
    """One resident launch's device time on ``g`` (what the profiler times)."""
    k = streaming("k", nbytes, g, strided=strided, round_trips=(rt,), resident=True)
    return kernels_device_s([k], g) * 1e6


def type_kernel(label: str, rows: int, hidden: int, hq: int, hkv: int, hd: int, ffn: int):
    """(bytes read + written, round trips, strided path) of one launch of ``tp_shard``'s kernel
    type ``label``, as the model prices that class (RoPE's launches all at the strided rate, as
    ``layer_kernels``' ``rope``); None for the types this analysis leaves out."""
    cls, kind = label.split(": ")
    if cls == "rope":
        unit = rows * (hq if kind.endswith("q") or " q " in kind else hkv) * hd * BF16
        return {"neg": (unit, RT_STRIDED), "cat": (2 * unit, RT_CAT), "mul": (2 * unit, RT_STRIDED),
                "add": (3 * unit, RT_VECTORIZED)}[kind.split()[0]] + (True,)
    if cls == "silu_mul":
        unit = rows * ffn * BF16
        return ((2 if kind == "silu" else 3) * unit, RT_STRIDED if rows > 1 else RT_VECTORIZED, rows > 1)
    if cls == "kv_append":
        return 2 * rows * hkv * hd * BF16, RT_INDEX, False
    if cls == "residual_add":
        return 3 * rows * hidden * BF16, RT_VECTORIZED, False
    return None


def err(model: float, meas: float) -> float:
    return (model / meas - 1) * 100


def table_latencies() -> None:
    print("Table 1. Latencies and the strided rate (now: strided_stream x HBM peak; hypothesis: x "
          "hbm_latency / L2 chase)")
    print("| GPU | DRAM chase (ns) | L2 chase (ns) | hbm_latency (ns) | l2_latency, fitted (ns) | rate now (TB/s) |"
          " hypothesis (TB/s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, _ in SMALL_RUNS:
        g, h = gpus(name)
        c = chase_s(name)
        print(f"| {name} | {c['DRAM'] * 1e9:.1f} | {c['L2'] * 1e9:.1f} | {g.hbm_latency_s * 1e9:.0f} |"
              f" {g.l2_latency_s * 1e9:.0f} | {strided_rate(g) / 1e12:.2f} | {strided_rate(h) / 1e12:.2f} |")
    near, far, dram = (GPU_BENCHES_CYCLES[k] for k in ("L2 near", "L2 far", "DRAM"))
    print(f"gpu-benches (H100 PCIe, cycles): L2 near {near}, far {far}, DRAM {dram}; at {CLOCK_HZ / 1e9} GHz "
          f"{near / CLOCK_HZ * 1e9:.0f} / {far / CLOCK_HZ * 1e9:.0f} / {dram / CLOCK_HZ * 1e9:.0f} ns; "
          f"DRAM / L2 near {dram / near:.2f} (the chases here: "
          + ", ".join(f"{n} {chase_s(n)['DRAM'] / chase_s(n)['L2']:.2f}" for n, _ in SMALL_RUNS) + ")")
    print()


def _small(prefix: str) -> tuple[list[dict], dict[str, float], dict[str, list[tuple]]]:
    rows = list(csv.DictReader(open(GPU_DIR / f"{prefix}-small.csv")))
    kernel_rows = list(csv.DictReader(open(GPU_DIR / f"{prefix}-small-kernels.csv")))
    steps: dict[str, list[tuple]] = collections.defaultdict(list)
    for k in kernel_rows:
        if "_decode_" in k["row"]:
            steps[k["row"]].append((int(k["index"]), k["kernel"], float(k["device_us"])))
    return rows, micro_device_us(kernel_rows), steps


def _step_types(steps: dict[str, list[tuple]], rows: list[dict]) -> dict[str, tuple[dict, dict[str, list[float]]]]:
    """{step: (its shape, {type: [device us of each kernel]})} of the eager decode steps."""
    shapes = {r["name"].rsplit("_", 1)[0]: r for r in rows if r["kind"] == "e2e_decode"}
    out = {}
    for name, ks in steps.items():
        ks.sort()
        r = shapes[name.rsplit("_", 1)[0]]
        ex = row_extra(r)
        shape = dict(rows=int(r["batch"]), hidden=int(ex["hidden"]), hq=int(r["q_heads"]), hkv=int(r["kv_heads"]),
                     hd=int(r["head_dim"]), ffn=int(ex["ffn"]))
        by: dict[str, list[float]] = collections.defaultdict(list)
        for label, k in zip(T.kernel_types([k[1] for k in ks], int(ex["layers"])), ks, strict=True):
            by[label].append(k[2])
        out[name.rsplit("_", 1)[0]] = (shape, by)
    return out


#: set -> [(measured, model now, hypothesis, far variant)], filled by the tables, summarised by Table 6
SETS: dict[str, list[tuple[float, float, float, float]]] = collections.defaultdict(list)


def _far(gpu_name: str, nbytes: float, rt: int, strided: bool) -> float:
    return launch_us(gpus(gpu_name, "far")[1], nbytes, rt, strided)


def table_ffn() -> None:
    print("Table 2. The FFN's SiLU and product (strided halves, batch > 1): timed alone, repeated (site "
          "rows), and in the profiled eager decode steps (median of the step's kernels); us")
    print("| GPU | model | batch | kernel | MB | alone | in step | model now | error alone / in step |"
          " hypothesis | error alone / in step |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for gpu_name, prefix in SMALL_RUNS:
        g, h = gpus(gpu_name)
        rows, device, steps = _small(prefix)
        typed = _step_types(steps, rows)
        for r in rows:
            if r["kind"] != "sk_site" or r["mode"] not in ("silu", "elementwise_mul") or r["batch"] == "1":
                continue
            site = int(r["name"].split("_site")[1].split("_")[0])
            if r["mode"] == "elementwise_mul" and site < 24:  # RoPE's products
                continue
            family, batch = row_extra(r)["family"], int(r["batch"])
            step = next((s for s in typed if s.startswith(f"{family}_decode_b{batch}_")), None)
            shape, by = typed[step]
            label = "silu_mul: " + ("silu" if r["mode"] == "silu" else "mul")
            nbytes, rt, strided = type_kernel(label, **shape)
            alone, in_step = device[r["name"]], statistics.median(by[label])
            now, hyp = launch_us(g, nbytes, rt, strided), launch_us(h, nbytes, rt, strided)
            SETS["alone, in L2: SiLU and product (sites, b16 / b64)"].append(
                (alone, now, hyp, _far(gpu_name, nbytes, rt, strided)))
            print(f"| {gpu_name} | {family} | {batch} | {label.split(': ')[1]} | {nbytes / 1e6:.2f} | {alone:.2f} |"
                  f" {in_step:.2f} | {now:.2f} | {err(now, alone):+.0f}% / {err(now, in_step):+.0f}% | {hyp:.2f} |"
                  f" {err(hyp, alone):+.0f}% / {err(hyp, in_step):+.0f}% |")
    print()


def table_sweep() -> None:
    print("Table 3. The strided negation of small_kernels.py's size sweep (timed alone, repeated); implied "
          "rate = bytes / (measured - kernel_fixed - 4 x l2_latency)")
    print("| GPU | MB | in L2 | measured (us) | implied (TB/s) | model now | error | hypothesis | error |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for gpu_name, prefix in SMALL_RUNS:
        g, h = gpus(gpu_name)
        rows, device, _ = _small(prefix)
        floor = (g.kernel_fixed_s + RT_STRIDED * g.l2_latency_s) * 1e6
        for r in rows:
            if r["kind"] != "sk_neg_strided" or r["name"] not in device:
                continue
            nbytes, meas = float(r["bytes"]), device[r["name"]]
            fits = nbytes <= g.spec.memory.l2_bytes
            now = launch_us(g, nbytes, RT_STRIDED, True)
            hyp = launch_us(h, nbytes, RT_STRIDED, True) if fits else now
            implied = nbytes / (meas - floor) / 1e6 if meas - floor > 0.2 else float("nan")
            if nbytes >= 1e6:
                far = _far(gpu_name, nbytes, RT_STRIDED, True) if fits else now
                SETS["alone, in L2: strided negation, 1-34 MB" if fits else "out of L2: strided negation, 67-268 MB"
                     ].append((meas, now, hyp, far))
            print(f"| {gpu_name} | {nbytes / 1e6:.2f} | {'yes' if fits else 'no'} | {meas:.2f} | {implied:.2f} |"
                  f" {now:.2f} | {err(now, meas):+.0f}% | {hyp:.2f} | {err(hyp, meas):+.0f}% |")
    print()


def _shard_types() -> list[tuple[str, str, dict, dict[str, list[float]], int]]:
    """(model, row, shape, {type: [device us]}, replays) of every graph row of runs aw and ap."""
    out = []
    for model, path in SHARDS:
        full, points = T.MODELS[model][0], {n: (tp, b) for n, tp, b, _ in T.MODELS[model][1]}
        for key, replays in T.read_kernels(str(GPU_DIR / path)).items():
            name, *_, mode = key.split(":")
            if mode != "graph" or name not in points:
                continue
            tp, batch = points[name]
            sh = T.shard_shape(full, tp)
            shape = dict(rows=batch, hidden=sh["hidden"], hq=sh["heads"], hkv=sh["kv_heads"], hd=sh["head_dim"],
                         ffn=sh["ffn"])
            by: dict[str, list[float]] = collections.defaultdict(list)
            for rep in replays.values():
                rep.sort()
                for label, k in zip(T.kernel_types([k[1] for k in rep], full["layers"]), rep, strict=True):
                    by[label].append(k[2])
            out.append((model, name, shape, dict(by), len(replays)))
    return out


def table_steps() -> None:
    print("Table 4a. Every strided kernel of a profiled decode step (RoPE's ten launches, SiLU and product at "
          "batch > 1), summed a step (graph shards: a replay's median); us")
    print("| run | GPU | step | kernels | MB a step | measured | model now | error | hypothesis | error |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    entries = []
    for (gpu_name, prefix), run in zip(SMALL_RUNS, ("l (eager)", "m (eager)"), strict=True):
        rows, _, steps = _small(prefix)
        for step, (shape, by) in _step_types(steps, rows).items():
            entries.append((run, gpu_name, step, shape, by, 1))
    for model, name, shape, by, replays in _shard_types():
        entries.append(("aw (graph)" if "8b" in model else "ap (graph)", "h200", f"{model} {name}", shape, by,
                        replays))
    big = []
    for run, gpu_name, step, shape, by, replays in entries:
        g, h = gpus(gpu_name)
        n = meas = now = hyp = far = mb = 0.0
        for label, times in by.items():
            tk = type_kernel(label, **shape)
            if tk is None or not tk[2]:
                continue
            nbytes, rt, _ = tk
            per = len(times) / replays  # kernels of this type a step
            k_meas = statistics.median(times)
            k_now, k_hyp = launch_us(g, nbytes, rt, True), launch_us(h, nbytes, rt, True)
            k_far = _far(gpu_name, nbytes, rt, True)
            n, meas, now, hyp, mb = n + per, meas + per * k_meas, now + per * k_now, hyp + per * k_hyp, mb + per * nbytes
            far += per * k_far
            if nbytes >= 1.5e6:
                big.append((run, gpu_name, step, label, nbytes, k_meas, k_now, k_hyp, k_far))
        SETS["in step: strided kernels, summed a step"].append((meas, now, hyp, far))
        print(f"| {run} | {gpu_name} | {step} | {n:.0f} | {mb / 1e6:.1f} | {meas:.0f} | {now:.0f} |"
              f" {err(now, meas):+.0f}% | {hyp:.0f} | {err(hyp, meas):+.0f}% |")
    print()
    print("Table 4b. The in-step strided kernels of 1.5 MB or more (median of the step's kernels); us")
    print("| run | GPU | step | kernel | MB | measured | model now | error | hypothesis | error |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for run, gpu_name, step, label, nbytes, k_meas, k_now, k_hyp, k_far in big:
        SETS["in step: strided kernels of 1.5 MB or more"].append((k_meas, k_now, k_hyp, k_far))
        print(f"| {run} | {gpu_name} | {step} | {label} | {nbytes / 1e6:.2f} | {k_meas:.2f} | {k_now:.2f} |"
              f" {err(k_now, k_meas):+.0f}% | {k_hyp:.2f} | {err(k_hyp, k_meas):+.0f}% |")
    print()


def table_prefill() -> None:
    print("Table 5. Run ax's TP2 prefill (rank 0's profiled step), SiLU and product just after their producer: "
          "in L2 by the rule (bytes <= L2) at 1K (8B SiLU and product, 70B SiLU); past it, a counter-case ('if applied' shows the "
          "hypothesis anyway); us, median over the layers")
    print("| row | kernel | MB | in L2 | measured | rate (TB/s, bytes / (measured - floor)) | model now | error |"
          " hypothesis (if applied) | error |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    g, h = gpus("h200")
    floor = (g.kernel_fixed_s + RT_STRIDED * g.l2_latency_s) * 1e6
    models = {r["row"]: (r["model"], int(r["seq_len"])) for r in csv.DictReader(open(GPU_DIR / f"{AX}-steps.csv"))}
    with gzip.open(GPU_DIR / f"{AX}-kernels-r0.csv.gz", "rt") as fh:
        rows = [r for r in csv.DictReader(fh) if r["cat"] == "kernel"]
    for row, (model, tokens) in models.items():
        ks = sorted((r for r in rows if r["row"] == row), key=lambda r: float(r["ts_us"]))
        silu, mul = [], []
        for i, k in enumerate(ks):
            if "silu_kernel" in k["kernel" if "kernel" in k else "name"]:
                silu.append(float(k["dur_us"]))
                mul.append(float(ks[i + 1]["dur_us"]))
        ffn = AX_SHAPES[model][1]
        for label, times, units in (("silu", silu, 2), ("mul", mul, 3)):
            if not times:
                continue
            nbytes, meas = units * tokens * ffn * BF16, statistics.median(times)
            now, hyp = launch_us(g, nbytes, RT_STRIDED, True), launch_us(h, nbytes, RT_STRIDED, True)
            fits = nbytes <= g.spec.memory.l2_bytes
            if fits:
                SETS["in step, in L2 by bytes: run ax 1K prefill (29-59 MB)"].append(
                    (meas, now, hyp, _far("h200", nbytes, RT_STRIDED, True)))
            else:
                SETS["out of L2: run ax prefill (88-705 MB)"].append((meas, now, now, now))
            print(f"| {row} | {label} | {nbytes / 1e6:.0f} | {'yes' if fits else 'no'} | {meas:.1f} |"
                  f" {nbytes / (meas - floor) / 1e6:.2f} |"
                  f" {now:.1f} | {err(now, meas):+.0f}% | {hyp:.1f} | {err(hyp, meas):+.0f}% |")
    print()


def table_summary() -> None:
    print("Table 6. Median error by set, median abs / median signed (the L2 rate applied only where the bytes fit "
          "in L2); the variant takes gpu-benches' far-partition hit (475 cycles, 240 ns) for the chase")
    print("| set | rows | model now | hypothesis (L2 chase) | variant (L2 far) |")
    print("|---|---:|---:|---:|---:|")
    for name, vals in SETS.items():
        cells = []
        for i in (1, 2, 3):
            e = [err(v[i], v[0]) for v in vals]
            cells.append(f"{statistics.median(map(abs, e)):.0f}% / {statistics.median(e):+.0f}%")
        print(f"| {name} | {len(vals)} | " + " | ".join(cells) + " |")
    print()


def main() -> int:
    SETS.clear()
    table_latencies()
    table_ffn()
    table_sweep()
    table_steps()
    table_prefill()
    table_summary()
    return 0


if __name__ == "__main__":
    sys.exit(main())
