"""Does FA2's forward kernel at one-split decode run slower back to back than between other work?

    python benchmarks/gpu/fa2_clock.py OUT_DIR

For three one-split decode shapes (batch 64, 32 x 8 heads, hd 128, 1024/4096/16384 keys; KV
cycled through 2x L2): each call timed between CUDA events (a) back to back, 200 calls, and (b)
each after a 256 MB flush (measure.py's time_fn, as P10's decode rows), (c) each after an
idle gap of 1 ms (a sleep kernel). nvidia-smi logs the SM clock, power and temperature every
20 ms meanwhile (``clocks.csv``); ``phases.csv`` gives each phase's wall-clock span.
"""

from __future__ import annotations

import csv
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure as M  # noqa: E402
import sweep as S  # noqa: E402

BF16 = torch.bfloat16


def main(out: str) -> int:
    d = Path(out)
    log = (d / "clocks.csv").open("w")
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu",
                            "--format=csv,noheader", "-lms", "20"], stdout=log)
    ctx = M.Ctx(device=torch.device("cuda"), tiny=False)
    ctx.flush_buf = torch.zeros(64 << 20, dtype=torch.float32, device=ctx.device)
    print("sdpa backend:", M.pick_sdpa_backend(ctx), flush=True)  # FlashAttention, as every FA2 row
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows, phases = [], []
    for kv in (1024, 4096, 16384):
        b, hq, hkv, hd = 64, 32, 8, 128
        cache = 2 * b * hkv * kv * hd * 2
        copies = max(2, math.ceil(2 * l2 / cache))
        q = torch.randn(b, hq, 1, hd, dtype=BF16, device=ctx.device)
        kvs = [(torch.randn(b, hkv, kv, hd, dtype=BF16, device=ctx.device),
                torch.randn(b, hkv, kv, hd, dtype=BF16, device=ctx.device)) for _ in range(copies)]
        fns = [lambda k=k, v=v, q=q: M.sdpa(q, k, v, False) for k, v in kvs]
        for f in fns:
            f()
        torch.cuda.synchronize()
        names = sorted({n for n, _ in S.kernel_names(fns[0])})
        print(kv, names, flush=True)
        for mode in ("back_to_back", "after_flush", "after_idle", "back_to_back"):
            n = 200
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
            t0 = time.time()
            for i in range(n):
                if mode == "after_flush":
                    M.flush(ctx)
                elif mode == "after_idle":
                    torch.cuda._sleep(int(1e-3 * 1.98e9))
                ev[i][0].record()
                fns[i % len(fns)]()
                ev[i][1].record()
            torch.cuda.synchronize()
            t1 = time.time()
            us = [s.elapsed_time(e) * 1e3 for s, e in ev]
            rows.append({"kv_len": kv, "mode": mode, "median_us": round(statistics.median(us), 2),
                         "min_us": round(min(us), 2), "first20_us": round(statistics.median(us[:20]), 2),
                         "last20_us": round(statistics.median(us[-20:]), 2)})
            phases.append({"kv_len": kv, "mode": mode, "start": t0, "end": t1})
            print(rows[-1], flush=True)
        del kvs, fns
        torch.cuda.empty_cache()
    smi.terminate()
    for name, data in (("fa2clock.csv", rows), ("phases.csv", phases)):
        with (d / name).open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
