"""Device time of the small kernels of a decode step, and of the decode GEMMs, kernel by kernel.

Run on the GPU machine (bf16; sweep.py's and measure.py's helpers):

    python benchmarks/gpu/small_kernels.py --out small.csv --kernels kernels.csv [--only size,rmsnorm,...]

Two timings per row, neither of which includes a host launch:

- ``median_us``: one call's share of a CUDA graph that holds ``GRAPH_CALLS`` calls back to back
  (replayed, CUDA events around the replay, divided by the calls): the kernel's device time plus
  the graph's gap between kernels, what a graph-captured decode step pays per kernel;
- ``device_us`` (in ``extra``): the median device duration of the call's kernels as the profiler
  records them (start to end of each kernel, no gap), the calls issued back to back behind a
  sleep kernel so none waits on the host.

Sections:

- ``latency``, ``latency_l2``: the pointer chase of measure.py over 1 GiB (DRAM) and over 8 MiB
  warm (L2; set ``hardware``).
- ``size``: a contiguous copy, an out-of-place add and a negation of a strided half (``-x[..., 64:]``
  of a 128-wide row, the rotary embedding's operand) at 4 KB to 256 MB of traffic, the same
  buffers every call (under L2's size they stay in L2, as a decode step's activations do).
- ``rmsnorm``: ``F.rms_norm`` at 1 to 4096 rows x width 2048-8192.
- ``sites``: every kernel-launching call of one decode layer of the four models of sweep.py's
  ``e2e`` section at batch 1, 16, 64, with the forward's own operands (``sweep.layer_sites``),
  GEMMs excepted; the SDPA call cycles through as many KV caches as keep 2x L2 in flight, so
  its K/V come from HBM as in a step.
- ``gemm``: the decode GEMMs (qkv, o, gate_up, down, lm_head) of the four models at m = 1 ... 64,
  three ways: CUDA events around one call after measure.py's flush (``flush_buf.add_(1)``: L2
  left full of dirty lines, as sweep.py's ``gemm`` rows), the same after a read-only flush
  (``flush_buf.sum()``: L2 left clean), and in a graph cycling through weight copies (2x L2).
- ``fa2``: FA2 decode through SDPA at serving shapes (``FA2_SHAPES``: one KV split at large batch,
  split-KV at small), KV caches cycled through 2x L2.
- ``e2e``: the decode steps of sweep.py's ``e2e`` section, graph-replayed, and the device
  duration of every kernel of one eager step (``--kernels``), all twelve (model, batch) cases.

Every row is set ``micro`` (a microbenchmark of the kernels, not a model prediction), except
the pointer chase (``hardware``) and the steps (``prediction``).
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure as M  # noqa: E402
import sweep as S  # noqa: E402

BF16 = torch.bfloat16
GRAPH_CALLS = 64
SIZES = [1 << p for p in range(12, 29)]  # 4 KB ... 256 MB of traffic
RMS_ROWS = [1, 4, 16, 64, 256, 1024, 4096]
RMS_WIDTHS = [2048, 3072, 3584, 4096, 8192]
GEMM_MS = [1, 2, 4, 8, 16, 32, 64]
KERNEL_ROWS: list[dict] = []


def graph_per_call(fns: list, calls: int = GRAPH_CALLS, reps: int = 15) -> float:
    """Seconds per call of ``fns`` (cycled) captured ``calls`` times into one graph."""
    def body() -> None:
        for i in range(calls):
            fns[i % len(fns)]()

    g = M.capture(M.Ctx(device=torch.device("cuda"), tiny=False), body)
    times = M.replay_times(g, reps, warmup=0)
    del g
    return statistics.median(times) / calls


def device_durations(fns: list, calls: int = 24) -> list[tuple[str, float]]:
    """(kernel name, device us) of ``calls`` calls of ``fns`` (cycled), issued behind a sleep."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(int(2e-3 * 1.98e9))
        for i in range(calls):
            fns[i % len(fns)]()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "spin_kernel" not in e.name:
            out.append((e.time_range.start, e.name, e.time_range.elapsed_us()))
    return [(n, d) for _, n, d in sorted(out)]


def measure(ctx: M.Ctx, kind: str, name: str, fns: list, calls_per_fn: int = 1, **shape) -> None:
    """Record the graph share and the profiled device time of one call (its kernels summed)."""
    t = graph_per_call(fns)
    kernels = device_durations(fns)
    per_call = len(kernels) / 24 if kernels else 0
    by_name: dict[str, list[float]] = {}
    for kn, d in kernels:
        by_name.setdefault(kn, []).append(d)
    device = sum(statistics.median(v) * len(v) / 24 for v in by_name.values())
    for i, (kn, v) in enumerate(by_name.items()):
        KERNEL_ROWS.append({"row": name, "index": i, "kernel": kn[:300], "calls": len(v),
                            "device_us": round(statistics.median(v), 3), "min_us": round(min(v), 3)})
    M.record(ctx, shape.pop("set_", "micro"), kind, name, t, GRAPH_CALLS, device_us=round(device, 3),
             kernels_per_call=round(per_call, 2), **shape)


def l2_latency_rows(ctx: M.Ctx) -> None:
    """measure.py's pointer chase over an 8 MiB span (8192 lines 1 KiB apart: past L1, inside L2),
    timed warm (no flush), so every hop after the first pass hits L2 (set ``hardware``)."""
    M.chase_rows(ctx, "latency_l2", "pointer_chase_l2", 1 << 20, 1 << 13, cold=False)


def size_rows(ctx: M.Ctx) -> None:
    dev = ctx.device
    for nbytes in SIZES:
        n = nbytes // 4
        src = torch.randn(n, dtype=BF16, device=dev)
        dst = torch.empty_like(src)
        measure(ctx, "sk_copy", f"copy_{nbytes}", [lambda dst=dst, src=src: dst.copy_(src)], bytes=nbytes)
        n = nbytes // 6
        a = torch.randn(n, dtype=BF16, device=dev)
        b = torch.randn(n, dtype=BF16, device=dev)
        measure(ctx, "sk_add", f"add_{nbytes}", [lambda a=a, b=b: a + b], bytes=3 * n * 2)
        rows = max(1, nbytes // 4 // 64)
        x = torch.randn(rows, 128, dtype=BF16, device=dev)
        half = x[:, 64:]
        measure(ctx, "sk_neg_strided", f"neg_strided_{nbytes}", [lambda half=half: -half], bytes=rows * 64 * 4, m=rows)
        del src, dst, a, b, x, half
    torch.cuda.empty_cache()


def rmsnorm_rows(ctx: M.Ctx) -> None:
    for width in RMS_WIDTHS:
        w = torch.randn(width, dtype=BF16, device=ctx.device)
        for rows in RMS_ROWS:
            x = torch.randn(rows, width, dtype=BF16, device=ctx.device)
            measure(ctx, "sk_rmsnorm", f"rmsnorm_{rows}x{width}", [lambda x=x, width=width, w=w: F.rms_norm(x, (width,), w, 1e-5)],
                    m=rows, n=width, bytes=(2 * rows * width + width) * 2)
    torch.cuda.empty_cache()


def l2_bytes() -> int:
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))


def cold_sdpa(ctx: M.Ctx, batch: int, hq: int, hkv: int, kv_len: int, hd: int) -> tuple[list, int]:
    """Decode SDPA calls (one query a sequence) over KV caches that come from HBM: enough distinct
    caches to fill twice L2, one call each; (the calls, one cache's bytes)."""
    cache = 2 * batch * hkv * kv_len * hd * 2
    copies = max(2, math.ceil(2 * l2_bytes() / cache))
    q = torch.randn(batch, hq, 1, hd, dtype=BF16, device=ctx.device)
    kvs = [(torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device),
            torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device)) for _ in range(copies)]
    return [lambda k=k, v=v: M.sdpa(q, k, v, False) for k, v in kvs], cache


def gpu_ctx(script: str, env_path: str | None, *, reduced_precision: bool) -> M.Ctx | None:
    """The CUDA context a device script measures in (None, after saying so, without a GPU): seeded,
    its environment printed (and the host report written to ``env_path``), the flush buffer made;
    ``reduced_precision`` lets bf16 GEMMs reduce in bf16, as PyTorch's default serving stacks do."""
    if not torch.cuda.is_available():
        print(f"{script} needs a CUDA GPU", file=sys.stderr)
        return None
    if env_path:
        Path(env_path).write_text(S.host_report())
    ctx = M.Ctx(device=torch.device("cuda"), tiny=False)
    torch.manual_seed(0)
    ctx.env = M.environment(ctx)
    ctx.env["sdpa_backend"] = M.pick_sdpa_backend(ctx)
    print(ctx.env, flush=True)
    if reduced_precision:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    ctx.flush_buf = torch.zeros(64 << 20, dtype=torch.float32, device=ctx.device)
    return ctx


def site_rows(ctx: M.Ctx) -> None:
    for fam, (_layers, hidden, hq, hkv, hd, ffn, vocab) in S.DECODE_MODELS.items():
        s = M.LlamaShape(layers=2, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
        model = M.Llama(s, ctx.device)
        for batch, kv_len in ((1, 2048), (16, 2048), (64, 1024)):
            sites, keep = S.layer_sites(model, batch, kv_len, ctx.device)
            common = dict(batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam,
                          hidden=hidden, ffn=ffn)
            for i, (op, fn) in enumerate(sites):
                if op in ("gemm", "view", "transpose", "slice", "reshape_view", "sdpa"):
                    continue
                measure(ctx, "sk_site", f"{fam}_b{batch}_site{i}_{op}", [fn], mode=op, **common)
            fns, cache = cold_sdpa(ctx, batch, hq, hkv, kv_len, hd)
            measure(ctx, "sk_sdpa", f"{fam}_b{batch}_sdpa_cold", fns, mode="sdpa", bytes=cache, **common)
            del sites, keep, fns
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


#: FA2 decode (SDPA, one query a sequence) at serving shapes: (batch, q heads, KV heads, keys). One
#: KV split (FA2's forward kernel) at large batch: Llama-3.1-70B TP8 on one GPU (8 x 1 heads) at
#: compare-hw's batches, Llama-3.1-8B at SnapStream-like batches; split-KV at small batch.
FA2_SHAPES = [(367, 8, 1, 8192), (185, 8, 1, 8192), (64, 8, 1, 8192), (472, 32, 8, 2048), (256, 32, 8, 2048),
              (128, 32, 8, 4096), (64, 32, 8, 8192), (64, 32, 8, 32768), (32, 32, 8, 8192), (16, 32, 8, 8192),
              (4, 32, 8, 32768), (1, 32, 8, 32768), (64, 24, 8, 4096), (64, 32, 8, 1024)]


def fa2_rows(ctx: M.Ctx) -> None:
    hd = 128
    for batch, hq, hkv, kv_len in FA2_SHAPES:
        fns, cache = cold_sdpa(ctx, batch, hq, hkv, kv_len, hd)
        measure(ctx, "sk_fa2", f"fa2_b{batch}_h{hq}x{hkv}_l{kv_len}", fns, batch=batch, q_heads=hq, kv_heads=hkv,
                head_dim=hd, kv_len=kv_len, bytes=cache)
        del fns
        torch.cuda.empty_cache()


def gemm_rows(ctx: M.Ctx) -> None:
    clean = ctx.flush_buf
    for fam, (_layers, hidden, hq, hkv, hd, ffn, vocab) in S.DECODE_MODELS.items():
        shapes = [("qkv", (hq + 2 * hkv) * hd, hidden), ("o", hidden, hq * hd), ("gate_up", 2 * ffn, hidden),
                  ("down", hidden, ffn), ("lm_head", vocab, hidden)]
        for op, n, k in shapes:
            wbytes = n * k * 2
            copies = max(2, math.ceil(2 * l2_bytes() / wbytes))
            ws = [torch.randn(n, k, dtype=BF16, device=ctx.device) for _ in range(copies)]
            for m in GEMM_MS:
                x = torch.randn(m, k, dtype=BF16, device=ctx.device)
                shape = dict(m=m, n=n, k=k, bytes=2 * (m * k + n * k + m * n), flops=2 * m * n * k, family=fam, op=op)
                t, reps = M.time_fn(ctx, lambda x=x, w=ws[0]: F.linear(x, w), budget_s=0.02, min_reps=5, max_reps=20)
                M.record(ctx, "micro", "sk_gemm_dirty", f"{fam}_{op}_m{m}_dirty", t, reps, **shape)
                times = []
                for _ in range(9):
                    clean.sum()
                    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    st.record()
                    F.linear(x, ws[0])
                    en.record()
                    torch.cuda.synchronize()
                    times.append(st.elapsed_time(en) * 1e-3)
                M.record(ctx, "micro", "sk_gemm_clean", f"{fam}_{op}_m{m}_clean", statistics.median(times), 9, **shape)
                measure(ctx, "sk_gemm_graph", f"{fam}_{op}_m{m}_graph", [lambda x=x, w=w: F.linear(x, w) for w in ws],
                        **shape)
            del ws
            torch.cuda.empty_cache()


def e2e_rows(ctx: M.Ctx) -> None:
    for fam, (layers, hidden, hq, hkv, hd, ffn, vocab) in S.DECODE_MODELS.items():
        s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
        model = M.Llama(s, ctx.device)
        for batch, kv_len in ((1, 2048), (16, 2048), (64, 1024)):
            step = M.decode_step(ctx, model, batch, kv_len)
            name = f"{fam}_decode_b{batch}_l{kv_len}"
            common = dict(batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam,
                          layers=layers, hidden=hidden, ffn=ffn, vocab=vocab)
            g = M.capture(ctx, step)
            t, reps = M.time_fn(ctx, g.replay, cold=False, budget_s=0.3, max_reps=30)
            del g
            total = 0.0
            for i, (kn, dur) in enumerate(S.kernel_names(step)):
                total += dur
                KERNEL_ROWS.append({"row": f"{name}_eager", "index": i, "kernel": kn[:300], "calls": 1,
                                    "device_us": round(dur, 3), "min_us": round(dur, 3)})
            M.record(ctx, "prediction", "e2e_decode", f"{name}_graph", t, reps, mode="graph",
                     kernel_sum_us=round(total, 1), **common)
            del step
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


SECTIONS = {"latency": M.latency_rows, "latency_l2": l2_latency_rows, "size": size_rows, "rmsnorm": rmsnorm_rows, "sites": site_rows,
            "gemm": gemm_rows, "e2e": e2e_rows, "fa2": fa2_rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--env")
    ap.add_argument("--only", default=",".join(SECTIONS))
    args = ap.parse_args(argv)
    ctx = gpu_ctx("small_kernels.py", args.env, reduced_precision=True)
    if ctx is None:
        return 2
    M.run_sections({name: functools.partial(fn, ctx) for name, fn in SECTIONS.items()}, args.only,
                   lambda: (M.write(args.out, ctx), write_kernels(args.kernels)))
    return 0


def write_kernels(path: str) -> None:
    """The profiled kernels of every row so far (``KERNEL_ROWS``)."""
    with open(path, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=["row", "index", "kernel", "calls", "device_us", "min_us"])
        wr.writeheader()
        wr.writerows(KERNEL_ROWS)


if __name__ == "__main__":
    sys.exit(main())
