"""Run ax: one TP2 prefill step kernel by kernel on two H200s, against the model's kernel classes.

Run an's eager TP2 prefill steps (Llama-3.1-8B 4K, 16K; Llama-3.1-70B 1K, 4K) come out 10-15%
under the model, and 5-6% of that stays with the right SM clock (docs/gpu.md, run au). This script
times the same rows as ``collectives.py`` does (its ``_tp_step`` and ``_timed``: 3 + 20 steps,
a barrier before each) and then runs one more step under ``torch.profiler`` (CPU and CUDA, one
warm-up step under the profiler first) on both ranks.

- ``--predict``: the model's step by kernel class for the same rows (rdusim; CPU): on the
  document as it is (the default, no clock) and with the opt-in ``SlewSmClock`` (the median of
  3 + 20 steps from an idle GPU, as the row is timed), and the all-reduce's call at its size
  (``collective_cost``); frozen before the run in ``h200x2-20261128ax-tp2prof-predicted.txt``.
- ``--measure`` (under torchrun, torch only: the device has no rdusim): ``$OUT/tpprof-steps.csv``
  (the clean median and the profiled step, epoch stamps for the clock samples) and
  ``$OUT/tpprof-kernels-r<rank>.csv.gz`` (every GPU activity of the profiled step: kernel, start,
  duration, stream; and the step's top-level CPU ops). ``tp_prof_run_ax.sh`` runs it with
  ``nvidia-smi`` sampling the clock every 50 ms.
- ``--compare PREFIX``: measured against the frozen classes (rdusim; CPU), from the committed
  files ``PREFIX-steps.csv``, ``PREFIX-kernels-r{0,1}.csv.gz``, ``PREFIX-clock.csv.gz``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import collectives as C  # noqa: E402
import tp_shard  # noqa: E402

#: (model, prompt length) of run ax, in the order run: run au's four rows, then the host-bound 8B 1K
ROWS = [("llama-3.1-70b", 1024), ("llama-3.1-70b", 4096), ("llama-3.1-8b", 4096), ("llama-3.1-8b", 16384),
        ("llama-3.1-8b", 1024)]
#: the classes compared (tp_shard.py's, with the O transpose, the all-reduce and the logits gather)
CLASSES = ["gemm_qkv", "gemm_o", "gemm_gate_up", "gemm_down", "lm_head", "attention", "all_reduce", "rms_norm",
           "rope", "kv_append", "o_transpose", "silu_mul", "residual_add", "all_gather", "other"]
#: the summary groups of the comparison
GROUPS = {"GEMMs": ["gemm_qkv", "gemm_o", "gemm_gate_up", "gemm_down", "lm_head"], "attention": ["attention"],
          "all-reduce": ["all_reduce"],
          "elementwise/norm/rope": ["rms_norm", "rope", "kv_append", "o_transpose", "silu_mul", "residual_add",
                                    "all_gather", "other"]}
HW = "hw_configs/h200.yaml"
TP = 2
FROZEN = "benchmarks/gpu/h200x2-20261128ax-tp2prof-predicted.txt"
SWEEP = "benchmarks/gpu/h200x2-20261128an-x2-sweep.csv"
FULL_MHZ = 1980.0  # hw_configs/h200.yaml clock (D.1, H100 SXM5 boost; same die)


def row_name(tp_model: str, length: int) -> str:
    """collectives.py's name of the prefill row (``tp2_70b_prefill_b1_l1024``)."""
    return prefill_row(TP, tp_model, length)["name"]


def prefill_row(ranks: int, tp_model: str, length: int) -> dict:
    """collectives.py's plan row of the TP prefill of ``length`` tokens at ``ranks`` GPUs."""
    rows = C.plan(sizes=[], ranks=ranks, e2e=("prefill",), tp_model=tp_model, prefill=[length])
    return next(r for r in rows if r["kind"].startswith("e2e_prefill"))


def ar_bytes(tp_model: str, length: int) -> int:
    """One all-reduce of the step: the layer's output, ``length`` x hidden bf16 values."""
    return length * C.TP_MODELS[tp_model][1]["hidden"] * 2


# --------------------------------------------------------------------------- the model (CPU)
def predict() -> dict[str, dict[str, float]]:
    """{row: {class: us, 'kernels': us, 'gaps': us, 'step': us, 'ar_call': us, 'ar_nccl': us,
    'slew:<class>': us, 'slew:step': us, 'slew:clock': fraction}} of every row."""
    from rdusim.analysis.gpu.collectives import TP_HEAD, predict_tp_step, tp_layer
    from rdusim.analysis.gpu.predict import simulate_gpu_step
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.collectives import collective_cost
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.hw.gpu_clock import SlewSmClock

    gpu = load_gpu_node(HW).gpu
    out = {}
    for tp_model, length in ROWS:
        spec = load_spec(model_path(tp_model), ModelSpec)
        step = predict_tp_step(spec, gpu, phase="prefill", batch=1, length=length, mode="eager", tp=TP)
        cls = tp_shard.model_classes(step.kernels)
        cls["kernels"] = sum(step.kernels.values()) * 1e6
        cls["step"] = step.seconds * 1e6
        cls["gaps"] = cls["step"] - cls["kernels"]
        cls["ar_call"] = cls["all_reduce"] / (2 * spec.layers)
        cls["ar_nccl"] = collective_cost("all_reduce", ar_bytes(tp_model, length), TP, gpu.fabric).time_s * 1e6
        clock = SlewSmClock(gpu.spec.clock)  # the row as timed: 3 + 20 steps back to back from an idle GPU
        seq = [simulate_gpu_step(spec, gpu, layer=tp_layer(), head=list(TP_HEAD), phase="prefill",
                                 batch=1, seq_len=length, mode="eager", tp=TP, clock=clock) for _ in range(23)]
        timed = sorted(seq[3:], key=lambda s: s.seconds)
        mid = timed[len(timed) // 2]
        cls.update({f"slew:{c}": v for c, v in tp_shard.model_classes(mid.kernels).items()})
        cls["slew:step"] = statistics.median(s.seconds for s in seq[3:]) * 1e6
        cls["slew:clock"] = clock.share
        out[row_name(tp_model, length)] = cls
    return out


def print_predictions() -> int:
    pred = predict()
    print(f"# benchmarks/gpu/tp_prof.py --predict: the model's TP2 prefill step by kernel class ({HW}, us a step,")
    print("# one GPU of two); frozen before run ax. 'model': the document as it is (no clock, the default);")
    print("# 'slew': the opt-in SlewSmClock, the median of 3 + 20 steps from an idle GPU (its clock at the end).")
    print("# gaps: the step less its kernels' sum (the GPU idle, waiting for the host).")
    print("| row | column | " + " | ".join(CLASSES) + " | kernels | gaps | step |")
    print("|---|---|" + "---:|" * (len(CLASSES) + 3))
    for name, cls in pred.items():
        print(f"| {name} | model | " + " | ".join(f"{cls.get(c, 0.0):.0f}" for c in CLASSES)
              + f" | {cls['kernels']:.0f} | {cls['gaps']:.0f} | {cls['step']:.0f} |")
        sk = sum(cls.get(f"slew:{c}", 0.0) for c in CLASSES)
        print(f"| {name} | slew ({cls['slew:clock']:.3f}) | "
              + " | ".join(f"{cls.get(f'slew:{c}', 0.0):.0f}" for c in CLASSES)
              + f" | {sk:.0f} | {cls['slew:step'] - sk:.0f} | {cls['slew:step']:.0f} |")
    print()
    print("| row | all-reduce size | calls a step | model: a call in the step (us) | NCCL's time at the size (us) |")
    print("|---|---:|---:|---:|---:|")
    for tp_model, length in ROWS:
        name = row_name(tp_model, length)
        layers = C.TP_MODELS[tp_model][1]["layers"]
        print(f"| {name} | {C._size(ar_bytes(tp_model, length))} | {2 * layers} | {pred[name]['ar_call']:.1f} | "
              f"{pred[name]['ar_nccl']:.1f} |")
    return 0


def read_predicted(path: str | Path = FROZEN) -> dict[tuple[str, str], dict[str, float]]:
    """The frozen table: {(row, 'model' or 'slew'): {class: us, 'kernels', 'gaps', 'step', 'clock'}};
    and {(row, 'ar'): {'size', 'calls', 'call', 'nccl'}}."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    header: list[str] = []
    for line in Path(path).read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "row":
            header = cells
        elif not cells[0].startswith("tp"):
            continue
        elif header[1] == "column":
            col = cells[1].split()[0]
            vals = {h: float(v) for h, v in zip(header[2:], cells[2:], strict=True)}
            if col == "slew":
                vals["clock"] = float(cells[1].split("(")[1].rstrip(")"))
            out[(cells[0], col)] = vals
        else:
            out[(cells[0], "ar")] = {"calls": float(cells[2]), "call": float(cells[3]), "nccl": float(cells[4])}
    return out


# --------------------------------------------------------------------------- the measurement (device)
STEP_FIELDS = ["row", "model", "seq_len", "rank", "gpu", "median_us", "reps", "clean_t0", "clean_t1", "prof_t0",
               "prof_t1", "prof_host_us", "kernels"]
KERNEL_FIELDS = ["row", "rank", "cat", "name", "ts_us", "dur_us", "stream", "correlation", "launch_ts_us"]


def run(args: argparse.Namespace) -> int:  # pragma: no cover - needs two GPUs
    import torch
    import torch.distributed as dist
    from measure import BF16, Ctx, Llama, LlamaShape, pick_sdpa_backend, rope_tables, sdpa  # noqa: PLC0415

    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    device = torch.device("cuda")
    backend = pick_sdpa_backend(Ctx(device, tiny=False))
    out = Path(os.environ.get("OUT", "."))
    gpu = torch.cuda.get_device_name()
    print(f"rank {rank}: {gpu}, sdpa backend {backend}, torch {torch.__version__}", flush=True)
    splits, whole, _ = C.TP_MODELS[args.tp_model]
    split = {k: v // world for k, v in splits.items()}
    shard = LlamaShape(layers=whole["layers"], hidden=whole["hidden"], q_heads=split["heads"],
                       kv_heads=split["KV heads"], ffn=split["FFN"], vocab=split["vocabulary"])
    model = Llama(shard, device)
    (sfh, steps), (kfh, kern) = _sinks(out, rank)
    with torch.no_grad():
        for length in args.prefill:
            row = prefill_row(world, args.tp_model, length)
            fn = C._tp_step(model, row, world, device, dist, torch, F=torch.nn.functional, BF16=BF16,
                            rope_tables=rope_tables, sdpa=sdpa)
            t0 = time.time()
            seconds = C._timed(torch, dist, fn, 20, 1, 0, None)  # as collectives.py times the row
            t1 = time.time()
            if rank == 0:
                print(f"{t1:.3f} prediction {row['name']:40s} {seconds * 1e6:12.1f} us", flush=True)
            events, mark = _profiled(torch, dist, fn, row["name"], rank)
            kern.writerows(events)
            kfh.flush()
            gpu_ev = [e for e in events if e["cat"] not in ("cpu_op", "annotation")]
            if steps:
                steps.writerow({"row": row["name"], "model": args.tp_model, "seq_len": length, "rank": rank,
                                "gpu": gpu, "median_us": round(seconds * 1e6, 3), "reps": 20,
                                "clean_t0": round(t0, 3), "clean_t1": round(t1, 3), "prof_t0": round(mark[0], 3),
                                "prof_t1": round(mark[1], 3), "prof_host_us": round((mark[1] - mark[0]) * 1e6, 1),
                                "kernels": len(gpu_ev)})
                sfh.flush()
            print(f"{time.time():.3f} rank {rank} profiled {row['name']}: {len(gpu_ev)} GPU activities, "
                  f"{len(events) - len(gpu_ev)} CPU ops", flush=True)
            del fn
            torch.cuda.empty_cache()
    if sfh:
        sfh.close()
    kfh.close()
    torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)  # no destroy_process_group: it hung once (collective_micro.py)


def _sinks(out: Path, rank: int):  # pragma: no cover - the device's files
    """(file, writer) of the steps CSV (rank 0's; (None, None) on the others) and of this rank's
    kernels CSV, each appended to by every torchrun of the run (70B, then 8B), headed once."""
    steps_path = out / "tpprof-steps.csv"
    new = not steps_path.exists()
    sfh = open(steps_path, "a", newline="") if rank == 0 else None  # noqa: SIM115
    steps = csv.DictWriter(sfh, fieldnames=STEP_FIELDS) if sfh else None
    if steps and new:
        steps.writeheader()
    kpath = out / f"tpprof-kernels-r{rank}.csv.gz"
    new = not kpath.exists()
    kfh = gzip.open(kpath, "at", newline="")  # a gzip member per torchrun; gzip reads them as one
    kern = csv.DictWriter(kfh, fieldnames=KERNEL_FIELDS)
    if new:
        kern.writeheader()
    return (sfh, steps), (kfh, kern)


def _profiled(torch, dist, fn, name: str, rank: int):  # pragma: no cover - needs a GPU
    """One step of ``fn`` under torch.profiler (CPU and CUDA), after one warm-up step under it, a
    barrier before each: the recorded step's rows (``_trace_rows``) and its host (start, end) in
    epoch seconds. The profiler is gone after (``TEARDOWN_CUPTI=1`` in the environment detaches
    CUPTI too: run at)."""
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    traces: list[str] = []

    def keep(p) -> None:
        path = f"/tmp/tpprof-{name}-r{rank}.json"
        p.export_chrome_trace(path)
        traces.append(path)

    marks = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=keep) as prof:
        for _ in range(2):  # a warm-up step under the profiler, then the recorded one
            dist.barrier()
            torch.cuda.synchronize()
            a = time.time()
            with record_function("tp_step"):
                fn()
            torch.cuda.synchronize()
            marks.append((a, time.time()))
            prof.step()
    try:
        events = _trace_rows(traces[0], name, rank)
        os.remove(traces[0])
    except Exception as e:  # noqa: BLE001 - keep the raw trace (gzipped beside the CSVs) and go on
        print(f"rank {rank}: {name}: trace not parsed ({e!r}); raw trace kept", flush=True)
        os.system(f"gzip -c {traces[0]} > {os.environ.get('OUT', '.')}/tpprof-{name}-r{rank}.json.gz")  # noqa: S605
        events = []
    return events, marks[1]


def _trace_rows(path: str, name: str, rank: int) -> list[dict]:
    """The recorded step's events of a Chrome trace: every GPU activity launched inside the
    ``tp_step`` annotation (kernels, copies, sets: start, duration, stream, the launch's start) and
    the top-level CPU ops inside it."""
    import json

    with open(path) as fh:
        ev = json.load(fh)["traceEvents"]
    ann = [e for e in ev if e.get("cat") == "user_annotation" and e.get("name") == "tp_step"]
    lo, hi = ann[-1]["ts"], ann[-1]["ts"] + ann[-1]["dur"]
    launch = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    ours = [e for e in gpu if e.get("args", {}).get("correlation") in launch
            and lo <= launch[e["args"]["correlation"]]["ts"] <= hi]
    first, last = min(e["ts"] for e in ours), max(e["ts"] + e["dur"] for e in ours)
    # a kernel whose launch the trace lacks (a library's own launch API) is the step's when it starts inside it
    ours += [e for e in gpu if e.get("args", {}).get("correlation") not in launch and first <= e["ts"] <= last]
    rows = []
    for e in sorted(ours, key=lambda e: e["ts"]):
        corr = e.get("args", {}).get("correlation", "")
        rows.append({"row": name, "rank": rank, "cat": e["cat"], "name": e["name"], "ts_us": e["ts"], "dur_us": e["dur"],
                     "stream": e.get("args", {}).get("stream", ""), "correlation": corr,
                     "launch_ts_us": launch[corr]["ts"] if corr in launch else ""})
    ops = sorted((e for e in ev if e.get("cat") == "cpu_op" and lo <= e["ts"] <= hi), key=lambda e: (e["ts"], -e["dur"]))
    end = lo
    for e in ops:  # top level: not inside the op before
        if e["ts"] >= end:
            rows.append({"row": name, "rank": rank, "cat": "cpu_op", "name": e["name"], "ts_us": e["ts"],
                         "dur_us": e["dur"], "stream": "", "correlation": "", "launch_ts_us": ""})
            end = e["ts"] + e["dur"]
    rows.append({"row": name, "rank": rank, "cat": "annotation", "name": "tp_step", "ts_us": lo, "dur_us": hi - lo,
                 "stream": "", "correlation": "", "launch_ts_us": ""})
    return rows


# --------------------------------------------------------------------------- the comparison (CPU)
def classify(names: list[str], layers: int) -> list[str]:
    """The class of each GPU activity of one step, in start order: NCCL's kernels by their
    collective, the rest as ``tp_shard.classify`` places them, an elementwise copy between the
    attention kernel and the O projection being the O transpose."""
    out = tp_shard.classify(names, layers)
    attn = False
    for i, n in enumerate(names):
        low = n.lower()
        if "nccl" in low:
            out[i] = "all_reduce" if "allreduce" in low else "all_gather" if "allgather" in low else "other"
        elif out[i] == "attention":
            attn = True
        elif out[i].startswith("gemm") or out[i] == "rms_norm":
            attn = False
        elif attn and out[i] == "rope":
            out[i] = "o_transpose"
    return out


def _union_us(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def measured(prefix: str) -> dict[str, dict]:
    """{row: {'ranks': {rank: {class: us, 'kernels', 'span', 'gaps', 'host'}}, 'ar': [(d0, d1), ...],
    'median_us', 'prof_t0', 'prof_t1', 'clean_t0', 'clean_t1'}} from the committed files."""
    out: dict[str, dict] = {}
    with open(f"{prefix}-steps.csv") as fh:
        for r in csv.DictReader(fh):
            d = out.setdefault(r["row"], {"ranks": {}, "model": r["model"]})
            if r["rank"] == "0":
                d.update({k: float(r[k]) for k in ("median_us", "clean_t0", "clean_t1", "prof_t0", "prof_t1")})
    for rank in (0, 1):
        with gzip.open(f"{prefix}-kernels-r{rank}.csv.gz", "rt") as fh:
            rows = list(csv.DictReader(fh))
        for name, d in out.items():
            ev = [r for r in rows if r["row"] == name]
            gpu = sorted((r for r in ev if r["cat"] != "cpu_op" and r["cat"] != "annotation"),
                         key=lambda r: float(r["ts_us"]))
            layers = C.TP_MODELS[d["model"]][1]["layers"]
            cls = classify([r["name"] for r in gpu], layers)
            per: dict[str, float] = {}
            for c, r in zip(cls, gpu, strict=True):
                per[c] = per.get(c, 0.0) + float(r["dur_us"])
            spans = [(float(r["ts_us"]), float(r["ts_us"]) + float(r["dur_us"])) for r in gpu]
            per["kernels"] = sum(b - a for a, b in spans)
            per["span"] = max(b for _, b in spans) - min(a for a, _ in spans)
            per["gaps"] = per["span"] - _union_us(spans)
            per["host"] = next(float(r["dur_us"]) for r in ev if r["cat"] == "annotation")
            per["launches"] = len(gpu)
            d["ranks"][rank] = per
            d.setdefault("ops", []).append([(r["name"], float(r["dur_us"])) for r in ev if r["cat"] == "cpu_op"])
            d.setdefault("ar", []).append([float(r["dur_us"]) for c, r in zip(cls, gpu, strict=True)
                                           if c == "all_reduce"])
            d.setdefault("ar_end", []).append([float(r["ts_us"]) + float(r["dur_us"])
                                               for c, r in zip(cls, gpu, strict=True) if c == "all_reduce"])
    return out


def _sweep_us(size: int) -> dict[str, float]:
    """Run an's 2-rank sweep (first and repeat): the all-reduce at ``size`` by mode (us)."""
    out: dict[str, list[float]] = {}
    for path in (SWEEP, SWEEP.replace("-x2-sweep", "-x2-sweep2")):
        with open(path) as fh:
            for r in csv.DictReader(fh):
                if r["op"] == "all_reduce" and int(r["bytes"]) == size:
                    mode = "queued" if r["name"].endswith("_queued") else r["mode"]
                    out.setdefault(mode, []).append(float(r["median_us"]))
    return {m: statistics.mean(v) for m, v in out.items()}


def _clock(prefix: str, a: float, b: float) -> list[float]:
    """GPU 0's and GPU 1's median SM clock (fraction of full) over [a, b] (epoch s), widened to
    one sample either side when the span is shorter than the 50 ms sampling."""
    from clock_run_au_read import samples  # noqa: PLC0415

    clock = samples(Path(f"{prefix}-clock.csv.gz"))
    if b - a < 0.1:
        a, b = a - 0.05, b + 0.05
    return [statistics.median(s[2] for s in clock if s[1] == g and a <= s[0] <= b) / FULL_MHZ for g in (0, 1)]


def compare(prefix: str, frozen: str = FROZEN) -> int:
    """Each row's classes (both ranks) against the frozen model, the all-reduce's calls against the
    collective model and run an's sweep, the host where the GPU waits; then the summary by group."""
    pred = read_predicted(frozen)
    meas = measured(prefix)
    print(f"# {prefix}: one profiled TP2 prefill step a row against the frozen model ({Path(frozen).name});")
    print("# us a step. measured: rank 0 / rank 1 (each GPU's own kernels); err: the model (no clock) against")
    print("# rank 0; share: the class's measured - model over the profiled step's measured - model. NCCL's")
    print("# all-reduce kernel runs from its launch, so it holds the wait for the other rank: 'transfer' is the")
    print("# shorter rank's kernel a call (the two end together), 'wait' rank 0's rest.")
    summary = [_row_report(prefix, name, d, pred) for name, d in meas.items()]
    print()
    print("## Summary: where the profiled step's shortfall goes (rank 0, measured - model, us; share of the total)")
    print()
    cols = ["GEMMs", "attention", "all-reduce transfer", "all-reduce wait", "elementwise/norm/rope", "gaps"]
    print("| row | clean step (us) | model | error | profiled span | span - model | " + " | ".join(cols)
          + " | SM clock (GPU 0) | GEMMs measured / model |")
    print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(cols) + "---:|---:|")
    for r in summary:
        short = r["span"] - r["model"]
        cells = " | ".join(f"{r[c]:+.0f} ({r[c] / short * 100:.0f}%)" if short else f"{r[c]:+.0f}" for c in cols)
        print(f"| {r['row']} | {r['clean']:.0f} | {r['model']:.0f} | {(r['model'] / r['clean'] - 1) * 100:+.1f}% | "
              f"{r['span']:.0f} | {short:+.0f} | {cells} | {r['clock']:.3f} | {r['gemm_ratio']:.3f} |")
    return 0


def _row_report(prefix: str, name: str, d: dict, pred: dict) -> dict:
    """Print one row's tables; its summary (us, rank 0, measured - model by group)."""
    m0, m1 = d["ranks"][0], d["ranks"][1]
    mod, slew = pred[(name, "model")], pred[(name, "slew")]
    f0, f1 = _clock(prefix, d["prof_t0"], d["prof_t1"])
    c0, c1 = _clock(prefix, d["clean_t0"] + 0.75 * (d["clean_t1"] - d["clean_t0"]), d["clean_t1"])
    print()
    print(f"## {name}: clean median {d['median_us']:.0f} us (model {mod['step']:.0f}, "
          f"{(mod['step'] / d['median_us'] - 1) * 100:+.1f}%; slew {slew['step']:.0f}, "
          f"{(slew['step'] / d['median_us'] - 1) * 100:+.1f}%); profiled step span {m0['span']:.0f} / "
          f"{m1['span']:.0f} us")
    print(f"SM clock (fraction of {FULL_MHZ:.0f} MHz): profiled step {f0:.3f} / {f1:.3f}; clean timing's last "
          f"quarter {c0:.3f} / {c1:.3f}; slew model at the end {slew['clock']:.3f}")
    print()
    print("| class | measured r0 | measured r1 | model | err | slew model | err | share |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    gap = m0["span"] - mod["step"]
    lines = [(c, m0.get(c, 0.0), m1.get(c, 0.0), mod.get(c, 0.0), slew.get(c, 0.0)) for c in CLASSES
             if m0.get(c) or mod.get(c)]
    lines += [(g, *(sum(x.get(c, 0.0) for c in cs) for x in (m0, m1, mod, slew))) for g, cs in GROUPS.items()]
    lines += [("kernels summed", m0["kernels"], m1["kernels"], mod["kernels"], slew["kernels"]),
              ("gaps (GPU idle)", m0["gaps"], m1["gaps"], mod["gaps"], slew["gaps"]),
              ("step", m0["span"], m1["span"], mod["step"], slew["step"])]
    for c, a, b, p, s in lines:
        bold = "**" if c in GROUPS or c in ("kernels summed", "gaps (GPU idle)", "step") else ""
        e = f"{(p / a - 1) * 100:+.0f}%" if a else ""
        es = f"{(s / a - 1) * 100:+.0f}%" if a else ""
        share = f"{(a - p) / gap * 100:.0f}%" if gap and c != "step" else ""
        print(f"| {bold}{c}{bold} | {a:.0f} | {b:.0f} | {p:.0f} | {e} | {s:.0f} | {es} | {share} |")
    ar = pred[(name, "ar")]
    pairs = list(zip(*d["ar"], strict=True))
    eff = [min(a, b) for a, b in pairs]
    size = ar_bytes(d["model"], int(re.search(r"_l(\d+)", name)[1]))
    sw = _sweep_us(size)
    print()
    print(f"All-reduce, {C._size(size)}, {len(pairs)} calls: rank 0 median {statistics.median(d['ar'][0]):.1f} us, "
          f"rank 1 {statistics.median(d['ar'][1]):.1f}; transfer (the shorter rank's) median "
          f"{statistics.median(eff):.1f} (min {min(eff):.1f}, max {max(eff):.1f}); rank skew median "
          f"{statistics.median(abs(a - b) for a, b in pairs):.1f} us. Model: {ar['call']:.1f} a call in the step "
          f"(NCCL's time {ar['nccl']:.1f}); run an's sweep at {C._size(size)} (mean of its two sweeps): "
          + ", ".join(f"{m} {v:.1f}" for m, v in sorted(sw.items())) + " us.")
    ends = [b - a for a, b in zip(*d["ar_end"], strict=True)]
    print(f"The two ranks' all-reduce kernels end apart by (rank 1 - rank 0, the trace's host timebase) median "
          f"{statistics.median(ends):+.1f} us, |max| {max(abs(x) for x in ends):.1f} us (the transfer above assumes "
          "they end together).")
    print(f"Host: the step's CPU span {m0['host']:.0f} / {m1['host']:.0f} us for {m0['launches']:.0f} GPU "
          f"activities ({m0['host'] / m0['launches']:.1f} us each on rank 0).")
    if m0["gaps"] > 0.1 * m0["span"]:
        _host_ops(d["ops"][0])
    gemms = GROUPS["GEMMs"]
    transfer = sum(eff)
    return {"row": name, "clean": d["median_us"], "model": mod["step"], "span": m0["span"],
            "GEMMs": sum(m0.get(c, 0.0) - mod.get(c, 0.0) for c in gemms),
            "attention": m0.get("attention", 0.0) - mod.get("attention", 0.0),
            "all-reduce transfer": transfer - mod.get("all_reduce", 0.0),
            "all-reduce wait": m0.get("all_reduce", 0.0) - transfer,
            "elementwise/norm/rope": sum(m0.get(c, 0.0) - mod.get(c, 0.0) for c in GROUPS["elementwise/norm/rope"]),
            "gaps": m0["gaps"] - mod["gaps"], "clock": f0,
            "gemm_ratio": sum(m0.get(c, 0.0) for c in gemms) / sum(mod.get(c, 0.0) for c in gemms)}


def _host_ops(ops: list[tuple[str, float]]) -> None:
    """The step's top-level CPU ops on rank 0 by name: calls, us, us a call (the ten costliest)."""
    by: dict[str, list[float]] = {}
    for n, us in ops:
        by.setdefault(n, []).append(us)
    print()
    print("| host op (rank 0, top level) | calls | us | us a call |")
    print("|---|---:|---:|---:|")
    for n, v in sorted(by.items(), key=lambda kv: -sum(kv[1]))[:10]:
        print(f"| {n} | {len(v)} | {sum(v):.0f} | {sum(v) / len(v):.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--predict", action="store_true", help="the model's classes (CPU; the frozen table)")
    ap.add_argument("--measure", action="store_true", help="measure (under torchrun, two GPUs; not --run: torchrun takes that for its own --run-path)")
    ap.add_argument("--compare", metavar="PREFIX", help="measured files PREFIX-* against the frozen table")
    ap.add_argument("--tp-model", default="llama-3.1-8b", choices=sorted(C.TP_MODELS))
    ap.add_argument("--prefill", default="4096,16384,1024", help="prompt lengths (--measure)")
    args = ap.parse_args(argv)
    if args.predict:
        return print_predictions()
    if args.compare:
        return compare(args.compare)
    if args.measure:
        args.prefill = [int(w) for w in args.prefill.split(",")]
        return run(args)
    ap.error("one of --predict, --measure, --compare")
    return 2


if __name__ == "__main__":
    sys.exit(main())
