"""Run aj's diagnostics (p12gemm3): the m = 64-768 neighbourhood of the held-out misses at m steps
of 16, and every held-out row of m = 129-1024, each timed as sweep.py times it (cold L2) and
profiled once with the kernel's grid, block and cluster (torch profiler's trace args).
    python benchmarks/gpu/gemm_holdout_diag.py OUTPREFIX DEADLINE_EPOCH_S   (run aj: as .gpudev/p12gemm3/diag.py)
"""

import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, "benchmarks/gpu")
import measure as M  # noqa: E402
from gemm_shapes import holdout_shapes  # noqa: E402

BF16 = torch.bfloat16
OUT, DEADLINE = sys.argv[1], float(sys.argv[2])
PAIRS = [  # (label, n, k)
    ("phi3-medium_tp1_gate_up", 35840, 5120),
    ("phi3-medium_tp2_gate_up", 17920, 5120),
    ("llama2-7b_tp1_down", 4096, 11008),
    ("llama2-7b_tp1_gate_up", 22016, 4096),
    ("mistral-large-2_tp2_o", 12288, 6144),
    ("qwen-72b_tp2_qkv", 12288, 8192),
    ("llama3.1-8b_tp1_gate_up", 28672, 4096),
    ("qwen2.5-72b_tp2_gate_up", 29568, 8192),
]
MS = [64, 96] + list(range(128, 513, 16)) + [640, 768]
shapes = [("fine", lab, n, k, m) for lab, n, k in PAIRS for m in MS]
shapes[2 * len(MS) : 2 * len(MS)] = [
    ("nsweep", "phi3-like_n", 4480 * i, 5120, 192) for i in (1, 2, 3, 4, 5, 6, 7, 8)
] + [("ksweep", "phi3-like_k", 35840, kk, 192) for kk in (1024, 2048, 3072, 4096)]
shapes = [
    (
        s,
        f"{lab}{n if s == 'nsweep' else kk if s == 'ksweep' else ''}" if s != "fine" else lab,
        n,
        kk,
        m,
    )
    for s, lab, n, kk, m in shapes
]
shapes += [
    ("holdout", f"{f}_tp{tp}_{op}", n, k, m)
    for f, tp, op, n, k, m in holdout_shapes()
    if 129 <= m <= 1024
]

ctx = M.Ctx(device=torch.device("cuda"), tiny=False)
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
ctx.flush_buf = torch.zeros(64 << 20, dtype=torch.float32, device=ctx.device)
tmp = Path(tempfile.mkdtemp())


def trace_kernels(fn):
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    p = tmp / "t.json"
    prof.export_chrome_trace(str(p))
    ev = [
        e for e in json.load(p.open())["traceEvents"] if str(e.get("cat", "")).lower() == "kernel"
    ]
    if not ev:  # fall back to sweep.py's names (no grid)
        ev = [
            {"ts": e.time_range.start, "name": e.name, "dur": e.time_range.elapsed_us(), "args": {}}
            for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA
        ]
    return sorted(ev, key=lambda e: e["ts"])


rows, kern = [], []
w, wkey = None, None
t0 = time.time()
for i, (set_, lab, n, k, m) in enumerate(shapes):
    if time.time() > DEADLINE:
        print(f"deadline at shape {i} of {len(shapes)}", flush=True)
        break
    if (n, k) != wkey:
        del w
        torch.cuda.empty_cache()
        w, wkey = torch.randn(n, k, dtype=BF16, device=ctx.device), (n, k)
    x = torch.randn(m, k, dtype=BF16, device=ctx.device)
    fn = lambda x=x, w=w: F.linear(x, w)  # noqa: E731
    t, reps = M.time_fn(ctx, fn, budget_s=0.04, min_reps=5, max_reps=30)
    tw, _ = M.time_fn(ctx, fn, cold=False, budget_s=0.02, min_reps=5, max_reps=20)
    name = f"{lab}_m{m}"
    rows.append(
        {
            "set": set_,
            "name": name,
            "m": m,
            "n": n,
            "k": k,
            "median_us": round(t * 1e6, 3),
            "warm_us": round(tw * 1e6, 3),
            "reps": reps,
        }
    )
    try:
        for j, e in enumerate(trace_kernels(fn)):
            a = e.get("args", {})
            kern.append(
                {
                    "row": name,
                    "m": m,
                    "n": n,
                    "k": k,
                    "index": j,
                    "kernel": e["name"],
                    "device_us": e.get("dur"),
                    "grid": a.get("grid"),
                    "block": a.get("block"),
                    "smem": a.get("shared memory"),
                    "regs": a.get("registers per thread"),
                    "blocks_per_sm": a.get("blocks per SM"),
                    "args": json.dumps(a),
                }
            )
    except Exception as exc:
        print("profile failed", name, exc, flush=True)
    del x
print(f"{len(rows)} shapes in {time.time() - t0:.0f} s", flush=True)
for path, data in ((OUT + "-diag.csv", rows), (OUT + "-diag-kernels.csv", kern)):
    if data:
        with open(path, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=list(data[0]))
            wr.writeheader()
            wr.writerows(data)
os._exit(0)
