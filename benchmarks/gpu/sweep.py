"""Measure what P10's run did not cover: GEMMs that do not fill the GPU, long-context prefill
attention, eager host dispatch per op kind, and decode steps of several Llama-shaped models.

Run on the GPU machine (bf16, CUDA events, medians after warm-up; same timing and cold-L2
rules as ``measure.py``, whose helpers it imports):

    python benchmarks/gpu/sweep.py --out sweep.csv --kernels kernels.csv [--quick]

Sections (``--only``):

- ``gemm``: y = x W^T for the layer shapes of several model families (Llama-3.1-8B/70B,
  Qwen2.5-7B/72B, Mistral-Nemo-12B, Mixtral-8x22B, Llama-3.2-1B and gpt-oss-20b (head_dim 64),
  DeepSeek-V3 MLA projections and experts) at tensor-parallel slices TP 1, 2, 4, 8 and
  m = 1 ... 8192 rows. Kernel time only, a cold L2 before every repetition. The kernels cuBLAS
  launched for each shape (names carry the tile and split-K choice) go to ``--kernels``.
- ``gemm_holdout``: the same for the layer GEMMs of ten families the GEMM model never saw
  (Llama-2-7B/70B, CodeLlama-34B, Qwen-72B, Gemma-2-27B, Qwen3-32B, Mistral-Large-2, Phi-3-medium,
  Qwen3-30B-A3B and Qwen3-235B-A22B experts; ``gemm_shapes.HOLDOUT_FAMILIES``), m between the
  swept ones, set ``holdout``; predicted and frozen first (``gemm_holdout.py``).
- ``prefill``: causal SDPA at batch 1, 4K-128K tokens, five head shapes (GQA, head_dim 64 and
  128), on the FlashAttention backend, and cuDNN's where it runs; two non-causal rows.
- ``dispatch``: host cost of one eager PyTorch op by kind (F.linear, a view, an elementwise op,
  torch.cat, index_copy_, F.rms_norm, F.embedding, SDPA, the rotary embedding as measure.py
  writes it), with the GPU behind the host (a sleep kernel queued first, so only the host is
  timed) and with the GPU idle (tiny kernels, wall time per op); and the depth of the launch
  queue (ops the host can queue before it blocks).
- ``e2e``: decode steps, eager and CUDA-graph replayed, of Llama-3.1-8B, Llama-3.2-3B,
  Llama-3.2-1B (head_dim 64) and Qwen2.5-7B shapes at batch 1, 16, 64; also the host time to
  issue one eager step (set ``host``).
- ``p10``: P10's copy, calibration GEMMs and pointer chase, to tie this machine to P10's.
- ``qk_norm`` (run bk): decode steps and prefills of Qwen3-8B with its per-head QK-RMSNorm and without
  it, and the kernels of profiled graph replays; ``qk_norm_bl`` (run bl): the same for Qwen3-1.7B
  (the points: ``qk_norm_compare.QK_RUNS``).
- ``mla_prefill`` (run bm): DeepSeek-V3/R1 MLA prefill attention: causal batch-1 SDPA at head_dim 192
  (V zero-padded as vLLM does for FA2), 16 and 128 heads, on FlashAttention and cuDNN; and the whole
  vLLM prefill attention block (projections, norms, rotary embedding, K/V assembly, FA2, output
  projection), timed and its kernels profiled (the points: ``mla_prefill_points``).
- ``fa3_prefill`` (run bn), ``fa3_prefill_bq`` (run bq: ``fa3_points.BQ_POINTS``), ``fa3_varlen`` (run br:
  ``VARLEN_POINTS``), ``fa3_e2e`` (run bs: Llama-3.1-8B's prefill step with FA3, FA2 beside it),
  ``fa3_decode`` (run bt: FA3's decode call beside FA2's, and Llama-3.1-8B's graph decode step with each),
  ``fa3_decode_shard`` (run bu: Llama-3.1-70B's TP8 shard's graph decode step with each),
  ``fa3_decode_bw`` (run bw, held out: ``fa3_points.RUN_BW``'s calls, Llama-3.1-8B steps and 70B TP4 shard steps),
  ``fa3_decode_bx`` (run bx: ``RUN_BX``, run bw's batch-256 step profiled and FA3's calls at 256-512 keys),
  ``fa3_decode_by`` and ``fa3_prefill_by`` (run by: ``RUN_BY``, ``BY_PREFILL``: several tiles an SM),
  ``fa3_decode_cb`` (run cb: ``RUN_CB``, one key either side of a key-block edge):
  FlashAttention-3's forward (the ``fa3-fwd`` wheel, carried) at the
  FlashAttention-3 paper's Fig. 5 shapes, DeepSeek-R1's MLA prefill shape (192 / 128) and two GQA
  shapes (the points: ``fa3_points``).

Sets: ``calibration`` rows are the only ones a model may be fitted to (named here, before any
measurement: the GEMMs of Llama-3.1-8B at TP 1 with m in {16, 256, 4096}); ``host`` rows are
inputs measured on the host (dispatch per op kind, queue depth); everything else is
``prediction``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (run bn: its points)
import measure as M  # noqa: E402  (measure.py beside this file)
import mla_prefill_points as mp  # noqa: E402  (run bm: its points)
from gemm_shapes import gemm_plan, holdout_shapes, plan_shapes  # noqa: E402  (shapes: gemm_shapes.py)
from qk_norm_compare import FAMILIES, QK_RUNS  # noqa: E402  (runs bk and bl: their points)

BF16 = torch.bfloat16

CALIBRATION = {("llama3.1-8b", 1, m) for m in (16, 256, 4096)}


def kernel_names(fn) -> list[tuple[str, float]]:
    """(name, device microseconds) of the GPU kernels one call of ``fn`` launched."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out.append((e.time_range.start, e.name, e.time_range.elapsed_us()))
    return [(n, d) for _, n, d in sorted(out)]


def profile_into(kernels: list[dict], fn, row: str, m: int, n: int, k: int) -> None:
    """Append the kernels one call of ``fn`` launched to ``kernels`` as ``row``'s (a profiler that
    fails is reported, not fatal)."""
    try:
        for i, (kn, dur) in enumerate(kernel_names(fn)):
            kernels.append({"row": row, "m": m, "n": n, "k": k, "index": i, "kernel": kn, "device_us": round(dur, 3)})
    except Exception as exc:
        print(f"profiler failed: {exc}", file=sys.stderr)


def gemm_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    quick_families = {"llama3.1-8b", "llama3.1-70b", "qwen2.5-7b", "llama3.2-1b", "deepseek-v3"}
    plan = [p for p in gemm_plan() if not quick or p[0] in quick_families]
    _gemm_pass(ctx, plan_shapes(plan), lambda fam, tp, m: "calibration" if (fam, tp, m) in CALIBRATION
               else "prediction", kernels)


def gemm_holdout_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Layer GEMMs of families the GEMM model never saw (``gemm_shapes.HOLDOUT_FAMILIES``, set
    ``holdout``), predicted and frozen before they ran (``gemm_holdout.py``)."""
    _gemm_pass(ctx, holdout_shapes(), lambda fam, tp, m: "holdout", kernels)


def _gemm_pass(ctx: M.Ctx, shapes: list[tuple[str, int, str, int, int, int]], set_of, kernels: list[dict]) -> None:
    """Time y = x W^T for each (family, tp, op, n, k, m) after a cold L2, then name the kernels of
    every third shape (a second pass, 90 s at most)."""
    order: list[tuple[str, int, int, int]] = []
    w, wkey = None, None
    for fam, tp, op, n, k, m in shapes:
        if (n, k) != wkey:
            del w
            torch.cuda.empty_cache()
            w, wkey = torch.randn(n, k, dtype=BF16, device=ctx.device), (n, k)
        x = torch.randn(m, k, dtype=BF16, device=ctx.device)
        t, reps = M.time_fn(ctx, lambda x=x, w=w: F.linear(x, w), budget_s=0.04, min_reps=5, max_reps=30)
        name = f"{fam}_tp{tp}_{op}_m{m}"
        M.record(ctx, set_of(fam, tp, m), "gemm", name, t, reps, m=m, n=n, k=k, flops=2 * m * n * k,
                 bytes=2 * (m * k + n * k + m * n), family=fam, tp=tp, op=op)
        order.append((name, m, n, k))
        del x
    del w
    torch.cuda.empty_cache()
    # which kernels cuBLAS chose: a second pass, every 3rd shape in a spread order, 90 s at most
    deadline = time.perf_counter() + 90.0
    named = 0
    for name, m, n, k in order[::3] + order[1::3] + order[2::3]:
        if time.perf_counter() > deadline:
            break
        x = torch.randn(m, k, dtype=BF16, device=ctx.device)
        w = torch.randn(n, k, dtype=BF16, device=ctx.device)
        try:
            names = kernel_names(lambda x=x, w=w: F.linear(x, w))
        except Exception as exc:  # keep the timing rows even if the profiler fails
            print(f"profiler failed: {exc}", file=sys.stderr)
            break
        named += 1
        for i, (kn, dur) in enumerate(names):
            kernels.append({"row": name, "m": m, "n": n, "k": k, "index": i, "kernel": kn,
                            "device_us": round(dur, 3)})
    print(f"gemm kernels named for {named} shapes", flush=True)


HEADS = [(32, 8, 128), (64, 8, 128), (28, 4, 128), (32, 8, 64), (8, 1, 128)]
LENGTHS = [4096, 8192, 16384, 32768, 65536, 131072]


def sdpa_fn(ctx: M.Ctx, batch: int, hq: int, hkv: int, hd: int, length: int, backend):
    """``fn(causal=True)``: one SDPA prefill on random BF16 inputs of this shape, on one backend
    (``del`` it, then ``torch.cuda.empty_cache()``, to free its inputs)."""
    from torch.nn.attention import sdpa_kernel

    q = torch.randn(batch, hq, length, hd, dtype=BF16, device=ctx.device)
    k = torch.randn(batch, hkv, length, hd, dtype=BF16, device=ctx.device)
    v = torch.randn_like(k)

    def fn(causal: bool = True):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)
    return fn


def prefill_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    from torch.nn.attention import SDPBackend

    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    try:  # PyTorch's pluggable FlashAttention implementations (FA3 where registered)
        from torch.nn.attention import list_flash_attention_impls

        print("flash attention impls:", list_flash_attention_impls(), flush=True)
    except Exception as exc:
        print("no list_flash_attention_impls:", exc, flush=True)
    try:
        import flash_attn_interface  # noqa: F401  FlashAttention-3 (hopper/) if installed
        print("flash_attn_interface (FA3) importable", flush=True)
    except Exception as exc:
        print("FA3 not importable:", exc, flush=True)
    heads = HEADS[:3] if quick else HEADS
    for bname, backend in backends:
        for hq, hkv, hd in heads:
            for length in LENGTHS:
                fn = sdpa_fn(ctx, 1, hq, hkv, hd, length, backend)
                try:
                    t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
                except RuntimeError as exc:
                    print(f"{bname} refused {hq}x{hkv}x{hd} l{length}: {exc}", file=sys.stderr)
                    break
                flops = 4 * hq * hd * length * (length + 1) // 2
                name = f"{bname}_prefill_h{hq}x{hkv}x{hd}_l{length}"
                M.record(ctx, "prediction", "attn_prefill", name, t, reps, batch=1, seq_len=length,
                         kv_len=length, q_heads=hq, kv_heads=hkv, head_dim=hd, flops=flops,
                         bytes=2 * length * hd * (2 * hq + 2 * hkv), backend=bname)
                if length in (8192, 65536) and (hq, hkv, hd) == (32, 8, 128):
                    try:
                        for kn, dur in kernel_names(fn):
                            kernels.append({"row": name, "m": length, "n": hq, "k": hd, "index": 0,
                                            "kernel": kn, "device_us": round(dur, 3)})
                    except Exception as exc:
                        print(f"profiler failed: {exc}", file=sys.stderr)
                    if bname == "flash" and length <= 65536:
                        t, reps = M.time_fn(ctx, lambda fn=fn: fn(causal=False), budget_s=0.3,
                                            min_reps=3, max_reps=20)
                        M.record(ctx, "prediction", "attn_prefill_full", f"{bname}_full_h{hq}x{hkv}x{hd}_l{length}",
                                 t, reps, batch=1, seq_len=length, kv_len=length, q_heads=hq,
                                 kv_heads=hkv, head_dim=hd, flops=4 * hq * hd * length * length,
                                 backend=bname, mode="noncausal")
                del fn
                torch.cuda.empty_cache()


def dispatch_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Host seconds per eager op by kind (GPU behind: a sleep kernel queued first; GPU idle)."""
    dev = ctx.device
    x1 = torch.randn(1, 4096, dtype=BF16, device=dev)
    x32 = torch.randn(32, 4096, dtype=BF16, device=dev)
    w = torch.randn(4096, 4096, dtype=BF16, device=dev)
    wt = torch.randn(64, 64, dtype=BF16, device=dev)
    xt = torch.randn(1, 64, dtype=BF16, device=dev)
    a = torch.randn(1, 1, 32, 128, dtype=BF16, device=dev)
    b = torch.randn_like(a)
    norm_w = torch.ones(4096, dtype=BF16, device=dev)
    table = torch.randn(128256, 4096, dtype=BF16, device=dev)
    tok = torch.randint(0, 128256, (1, 1), device=dev)
    q = torch.randn(1, 32, 1, 128, dtype=BF16, device=dev)
    kc = torch.randn(1, 8, 1024, 128, dtype=BF16, device=dev)
    vc = torch.randn_like(kc)
    knew = torch.randn(1, 8, 1, 128, dtype=BF16, device=dev)
    pos = torch.tensor([1000], device=dev)
    qkv = torch.randn(1, 1, 6144, dtype=BF16, device=dev)
    cos = torch.randn(1, 128, dtype=BF16, device=dev)
    sin = torch.randn(1, 128, dtype=BF16, device=dev)
    model = M.Llama(M.TINY_LLAMA, dev)
    qh = torch.randn(1, 32, 1, 128, dtype=BF16, device=dev)
    ops = {
        "gemm": lambda: F.linear(x1, w),
        "gemm_m32": lambda: F.linear(x32, w),
        "gemm_tiny": lambda: F.linear(xt, wt),
        "view": lambda: qkv.view(1, 1, 48, 128),
        "transpose": lambda: a.transpose(1, 2),
        "slice": lambda: qkv[..., :4096],
        "reshape_view": lambda: a.reshape(1, 1, 4096),
        "elementwise_add": lambda: a + b,
        "elementwise_mul": lambda: a * b,
        "elementwise_neg": lambda: -a,
        "silu": lambda: F.silu(a),
        "cat": lambda: torch.cat((a, b), dim=-1),
        "index_copy": lambda: kc.index_copy_(2, pos, knew),
        "rms_norm": lambda: F.rms_norm(x1, (4096,), norm_w, 1e-5),
        "embedding": lambda: F.embedding(tok, table),
        "sdpa": lambda: M.sdpa(q, kc, vc, False),
        "rope": lambda: model.rope(qh, cos, sin),
    }
    n, trials = (100, 7) if not quick else (100, 5)
    sleep_cycles = int(20e-3 * 1.98e9)  # 20 ms at the boost clock: more than 100 ops take on the host
    for name, fn in ops.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        behind, idle = [], []
        for _ in range(trials):
            torch.cuda._sleep(sleep_cycles)
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            behind.append((time.perf_counter() - t0) / n)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            torch.cuda.synchronize()
            idle.append((time.perf_counter() - t0) / n)
        M.record(ctx, "host", "dispatch", f"dispatch_{name}_behind", statistics.median(behind), trials,
                 mode="behind", op=name)
        M.record(ctx, "host", "dispatch", f"dispatch_{name}_idle", statistics.median(idle), trials,
                 mode="idle", op=name)
    # launch queue depth: ops queued behind a long sleep until the host blocks
    y = torch.zeros(16, device=dev)
    torch.cuda.synchronize()
    torch.cuda._sleep(int(300e-3 * 1.98e9))
    stamps = []
    for _ in range(4000):
        t0 = time.perf_counter()
        y.add_(1.0)
        stamps.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    depth = next((i for i, s in enumerate(stamps) if s > 1e-3), len(stamps))
    M.record(ctx, "host", "queue", "launch_queue_depth", stamps[depth] if depth < len(stamps) else 0.0, 1,
             n=depth)


INSITU_KINDS = {  # torch function name -> the HOST_OPS kind rdusim's kernels name
    "linear": "gemm", "view": "view", "transpose": "transpose", "__getitem__": "slice",
    "reshape": "reshape_view", "__add__": "elementwise_add", "add": "elementwise_add",
    "__mul__": "elementwise_mul", "mul": "elementwise_mul", "__neg__": "elementwise_neg", "neg": "elementwise_neg",
    "silu": "silu", "cat": "cat", "index_copy_": "index_copy", "rms_norm": "rms_norm", "embedding": "embedding",
    "scaled_dot_product_attention": "sdpa",
}


def insitu_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Host cost of each op kind inside Llama-3.1-8B's eager decode forward (batch 1, 2K keys):
    a TorchFunctionMode times every torch call the forward makes (set ``host``, mode ``insitu``);
    the mode's own cost per call (the same forward timed with and without it, over the number of
    calls) is subtracted; ``glue`` is what the forward's host time holds beyond its ops (Python,
    the SDPA backend context), per layer. Calibration input for the eager host (Llama-3.1-8B
    only); the other models' eager rows stay predictions."""
    from torch.overrides import TorchFunctionMode

    layers, hidden, hq, hkv, hd, ffn, vocab = DECODE_MODELS["llama3.1-8b"]
    s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
    model = M.Llama(s, ctx.device)
    batch, kv_len = 1, 2048
    ck = [torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device) for _ in range(layers)]
    cv = [torch.randn_like(c) for c in ck]
    tokens = torch.randint(0, vocab, (batch, 1), device=ctx.device)
    pos = torch.tensor([kv_len - 1], device=ctx.device)
    cos, sin = M.rope_tables(s, pos)
    times: dict[str, list[float]] = {}
    calls = [0]

    class Timer(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            t0 = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", str(func))
            times.setdefault(name, []).append(time.perf_counter() - t0)
            calls[0] += 1
            return out

    def step() -> torch.Tensor:
        return model.forward(tokens, ck, cv, pos, cos, sin, prefill=False)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    plain = []
    for _ in range(9):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        plain.append(time.perf_counter() - t0)
    timed = []
    for _ in range(9):
        times.clear()
        calls[0] = 0
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with Timer():
            step()
        timed.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    n_calls = calls[0]
    overhead = max(0.0, (statistics.median(timed) - statistics.median(plain)) / n_calls)
    inside = 0.0
    for name, ts in sorted(times.items()):
        kind = INSITU_KINDS.get(name, name)
        cost = statistics.median(ts)
        inside += sum(ts)
        M.record(ctx, "host", "insitu", f"insitu_{name}", cost, len(ts), mode="insitu", op=kind,
                 calls_per_step=len(ts))
    glue = (statistics.median(plain) - inside) / layers
    M.record(ctx, "host", "insitu", "insitu_glue_per_layer", glue, 9, mode="insitu", op="glue",
             calls_per_step=layers, timer_overhead_us=round(overhead * 1e6, 3), plain_us=round(statistics.median(plain) * 1e6, 1))
    torch.cuda.empty_cache()


DECODE_MODELS = {  # layers, hidden, q_heads, kv_heads, head_dim, ffn, vocab (config.json)
    "llama3.1-8b": (32, 4096, 32, 8, 128, 14336, 128256),
    "llama3.2-3b": (28, 3072, 24, 8, 128, 8192, 128256),
    "llama3.2-1b": (16, 2048, 32, 8, 64, 8192, 128256),
    "qwen2.5-7b": (28, 3584, 28, 4, 128, 18944, 152064),
}


def e2e_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    cases = [(1, 2048), (16, 2048), (64, 1024)]
    models = list(DECODE_MODELS) if not quick else ["llama3.1-8b", "llama3.2-1b"]
    for name in models:
        layers, hidden, hq, hkv, hd, ffn, vocab = DECODE_MODELS[name]
        s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd,
                         ffn=ffn, vocab=vocab)
        model = M.Llama(s, ctx.device)
        for batch, kv_len in cases:
            decode_case(ctx, model, name, batch, kv_len, kernels)
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


def host_issue_s(step, n: int = 7) -> float:
    """Median host seconds to issue one eager step from an idle GPU (nothing awaited)."""
    hosts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        hosts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(hosts)


def graph_step_row(ctx: M.Ctx, step, name: str, budget_s: float, max_reps: int, **shape) -> None:
    """Capture ``step`` into a CUDA graph, time its replays and record the ``e2e_decode`` row."""
    g = M.capture(ctx, step)
    t, reps = M.time_fn(ctx, g.replay, cold=False, budget_s=budget_s, max_reps=max_reps)
    M.record(ctx, "prediction", "e2e_decode", name, t, reps, mode="graph", **shape)
    del g
    torch.cuda.synchronize()


def model_extra(s: M.LlamaShape, fam: str) -> dict:
    """The model's shape in a row's extra column (``predict.sweep_model`` reads it back)."""
    return dict(family=fam, layers=s.layers, hidden=s.hidden, ffn=s.ffn, vocab=s.vocab,
                **({"qk_norm": 1} if s.qk_norm else {}))


def decode_case(ctx: M.Ctx, model: M.Llama, fam: str, batch: int, kv_len: int, kernels: list[dict]) -> None:
    s = model.s
    step = M.decode_step(ctx, model, batch, kv_len)
    common = dict(batch=batch, kv_len=kv_len, q_heads=s.q_heads, kv_heads=s.kv_heads,
                  head_dim=s.head_dim, **model_extra(s, fam))
    t, reps = M.time_fn(ctx, step, cold=False, budget_s=0.4, max_reps=40)
    M.record(ctx, "prediction", "e2e_decode", f"{fam}_decode_b{batch}_l{kv_len}_eager", t, reps,
             mode="eager", **common)
    M.record(ctx, "host", "e2e_host", f"{fam}_decode_b{batch}_l{kv_len}_host_issue", host_issue_s(step),
             7, mode="eager", **common)
    if batch == 1 and fam == "llama3.1-8b":
        try:
            for i, (kn, dur) in enumerate(kernel_names(step)):
                kernels.append({"row": f"{fam}_decode_b{batch}_l{kv_len}_eager", "m": batch, "n": kv_len,
                                "k": 0, "index": i, "kernel": kn, "device_us": round(dur, 3)})
        except Exception as exc:
            print(f"profiler failed: {exc}", file=sys.stderr)
    graph_step_row(ctx, step, f"{fam}_decode_b{batch}_l{kv_len}_graph", 0.4, 40, **common)


def p10_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    M.latency_rows(ctx)
    M.copy_rows(ctx)
    for name, m, n, k in M.CALIBRATION_GEMMS:
        x = torch.randn(m, k, dtype=BF16, device=ctx.device)
        w = torch.randn(n, k, dtype=BF16, device=ctx.device)
        t, reps = M.time_fn(ctx, lambda x=x, w=w: F.linear(x, w))
        M.record(ctx, "p10", "gemm", f"p10_{name}", t, reps, m=m, n=n, k=k, flops=2 * m * n * k)



# --------------------------------------------------------------------------- P12 follow-up (run d)
def prefill_l2_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Does K/V falling out of L2 slow FA2's causal prefill? One KV head's K and V are
    ``L x hd x 4`` bytes; FA2's grid (query blocks fastest, then batch, then head) keeps the CTAs
    in flight on one head, each walking its keys from its diagonal down to 0, so that head's
    whole K/V is the working set. Vary it across the 50 MB L2 at fixed head shape (L for
    hd 64/128/256), at fixed working set (hd 64 at 256K vs hd 128 at 128K vs hd 256 at 64K),
    with MHA vs GQA and batch 2, and without the causal mask (CTAs in lockstep: K/V reused
    while in L2 at any length)."""
    from torch.nn.attention import SDPBackend

    K = 1024
    cases = []  # (batch, hq, hkv, hd, L, causal)
    for L in (16, 32, 64, 96, 112, 128, 160, 192):
        cases.append((1, 8, 1, 128, L * K, True))
    for L in (32, 64, 128, 192, 224, 256):
        cases.append((1, 8, 1, 64, L * K, True))
    for L in (8, 16, 32, 48, 64, 96):
        cases.append((1, 8, 1, 256, L * K, True))
    cases += [(1, 8, 8, 128, 32 * K, True), (1, 8, 8, 128, 128 * K, True), (2, 8, 1, 128, 128 * K, True),
              (1, 32, 8, 128, 32 * K, True), (1, 32, 8, 128, 128 * K, True),
              (1, 8, 1, 128, 32 * K, False), (1, 8, 1, 128, 128 * K, False), (1, 8, 1, 64, 256 * K, False)]
    profiled = set()
    for backend_name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for batch, hq, hkv, hd, length, causal in cases:
            if backend_name == "cudnn" and (not causal or hd == 256):
                continue
            fn = functools.partial(sdpa_fn(ctx, batch, hq, hkv, hd, length, backend), causal)
            try:
                t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
            except RuntimeError as exc:
                print(f"{backend_name} refused b{batch} {hq}x{hkv}x{hd} l{length}: {exc}", file=sys.stderr)
                continue
            pairs = length * (length + 1) // 2 if causal else length * length
            name = f"{backend_name}_l2_b{batch}_h{hq}x{hkv}x{hd}_l{length}" + ("" if causal else "_full")
            M.record(ctx, "prediction", "attn_prefill_l2", name, t, reps, batch=batch, seq_len=length,
                     kv_len=length, q_heads=hq, kv_heads=hkv, head_dim=hd, flops=4 * batch * hq * hd * pairs,
                     bytes=2 * batch * length * hd * (2 * hq + 2 * hkv), backend=backend_name,
                     mode="causal" if causal else "noncausal", kv_head_mb=round(4 * length * hd / 1e6, 1))
            if backend_name == "flash" and hd not in profiled:
                profiled.add(hd)
                try:
                    for kn, dur in kernel_names(fn):
                        kernels.append({"row": name, "m": length, "n": hq, "k": hd, "index": 0, "kernel": kn,
                                        "device_us": round(dur, 3)})
                except Exception as exc:
                    print(f"profiler failed: {exc}", file=sys.stderr)
            del fn
            torch.cuda.empty_cache()


def gemm_cliff_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """DeepSeek-V3 kv_a (n = 576, k = 7168) around m = 2048, and n = 576 at other k: is the slow
    m = 2048 a cliff of cuBLAS's heuristic (its neighbours run another tile) or a trend?"""
    shapes = [(m, 576, 7168) for m in (1536, 1792, 1920, 2048, 2176, 2304, 2560, 3072, 4096)]
    shapes += [(2048, 576, k) for k in (2048, 4096, 8192)] + [(2048, n, 7168) for n in (512, 640, 768)]
    for m, n, k in shapes:
        x = torch.randn(m, k, dtype=BF16, device=ctx.device)
        w = torch.randn(n, k, dtype=BF16, device=ctx.device)
        t, reps = M.time_fn(ctx, lambda x=x, w=w: F.linear(x, w), budget_s=0.05, min_reps=10, max_reps=40)
        name = f"cliff_m{m}_n{n}_k{k}"
        M.record(ctx, "prediction", "gemm_cliff", name, t, reps, m=m, n=n, k=k, flops=2 * m * n * k,
                 bytes=2 * (m * k + n * k + m * n))
        try:
            for i, (kn, dur) in enumerate(kernel_names(lambda x=x, w=w: F.linear(x, w))):
                kernels.append({"row": name, "m": m, "n": n, "k": k, "index": i, "kernel": kn, "device_us": round(dur, 3)})
        except Exception as exc:
            print(f"profiler failed: {exc}", file=sys.stderr)


def layer_sites(model: M.Llama, batch: int, kv_len: int, device) -> tuple[list[tuple[str, object]], dict]:
    """The eager PyTorch calls of one decode layer of ``measure.Llama.forward`` (and of its head),
    in order, each with the operands the forward gives it (ranks, strides, broadcasts): (HOST_OPS
    kind, zero-argument call). Operands are the forward's own intermediate tensors of one step."""
    s = model.s
    b, t = batch, 1
    L = model.layers[0]
    x = torch.randn(b, t, s.hidden, dtype=BF16, device=device)
    ck = torch.randn(b, s.kv_heads, kv_len, s.head_dim, dtype=BF16, device=device)
    cv = torch.randn_like(ck)
    pos = torch.tensor([kv_len - 1], device=device)
    cos, sin = M.rope_tables(s, pos)
    tokens = torch.randint(0, s.vocab, (b, 1), device=device)
    half = s.head_dim // 2
    h = F.rms_norm(x, (s.hidden,), L["norm1"], 1e-5)
    y = F.linear(h, L["wqkv"])
    yv = y.view(b, t, s.q_heads + 2 * s.kv_heads, s.head_dim)
    qkv = yv.transpose(1, 2)
    hq, hkv = s.q_heads, s.kv_heads
    qs, ks, vs = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    sites: list[tuple[str, object]] = [
        ("rms_norm", lambda: F.rms_norm(x, (s.hidden,), L["norm1"], 1e-5)),
        ("gemm", lambda: F.linear(h, L["wqkv"])),
        ("view", lambda: y.view(b, t, hq + 2 * hkv, s.head_dim)),
        ("transpose", lambda: yv.transpose(1, 2)),
    ]
    rot = {}
    for tag, src, lo, hi in (("q", qs, 0, hq), ("k", ks, hq, hq + hkv)):
        hi_half, lo_half = src[..., half:], src[..., :half]
        neg = -hi_half
        cat = torch.cat((neg, lo_half), dim=-1)
        xc = src * cos
        rs = cat * sin
        rot[tag] = xc + rs
        sites += [
            ("slice", (lambda lo=lo, hi=hi: qkv[:, lo:hi])),
            ("slice", (lambda src=src: src[..., half:])),
            ("elementwise_neg", (lambda a=hi_half: -a)),
            ("slice", (lambda src=src: src[..., :half])),
            ("cat", (lambda a=neg, c=lo_half: torch.cat((a, c), dim=-1))),
            ("elementwise_mul", (lambda src=src: src * cos)),
            ("elementwise_mul", (lambda c=cat: c * sin)),
            ("elementwise_add", (lambda a=xc, c=rs: a + c)),
        ]
    sites.append(("slice", lambda: qkv[:, hq + hkv:]))
    sites += [("index_copy", lambda: ck.index_copy_(2, pos, rot["k"])),
              ("index_copy", lambda: cv.index_copy_(2, pos, vs))]
    o = M.sdpa(rot["q"], ck, cv, False)
    ot = o.transpose(1, 2)
    o2 = ot.reshape(b, t, hq * s.head_dim)
    ya = F.linear(o2, L["wo"])
    gu = F.linear(h, L["wgu"])
    gate, up = gu[..., : s.ffn], gu[..., s.ffn:]
    sl = F.silu(gate)
    prod = sl * up
    last, h_last = x[:, -1:], h[:, -1:]
    sites += [
        ("sdpa", lambda: M.sdpa(rot["q"], ck, cv, False)),
        ("transpose", lambda: o.transpose(1, 2)),
        ("reshape_view", lambda: ot.reshape(b, t, hq * s.head_dim)),
        ("gemm", lambda: F.linear(o2, L["wo"])),
        ("elementwise_add", lambda: x + ya),
        ("rms_norm", lambda: F.rms_norm(x, (s.hidden,), L["norm2"], 1e-5)),
        ("gemm", lambda: F.linear(h, L["wgu"])),
        ("slice", lambda: gu[..., : s.ffn]),
        ("silu", lambda: F.silu(gate)),
        ("slice", lambda: gu[..., s.ffn:]),
        ("elementwise_mul", lambda: sl * up),
        ("gemm", lambda: F.linear(prod, L["wd"])),
        ("elementwise_add", lambda: x + ya),
    ]
    head = [("embedding", lambda: F.embedding(tokens, model.embed)),
            ("slice", lambda: x[:, -1:]),
            ("rms_norm", lambda: F.rms_norm(last, (s.hidden,), model.norm, 1e-5)),
            ("gemm", lambda: F.linear(h_last, model.lm_head))]
    return sites, {"head": head, "keep": (ck, cv, qkv, rot, o, gu)}


def _time_site(fn, n: int, trials: int, behind: bool) -> float:
    sleep_cycles = int(6e-3 * 1.98e9)  # 6 ms: more than n calls of any site take on the host
    out = []
    for _ in range(trials):
        torch.cuda.synchronize()
        if behind:
            torch.cuda._sleep(sleep_cycles)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if not behind:
            torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / n)
    torch.cuda.synchronize()
    return statistics.median(out)


def eager_rounds_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Eager decode steps and the host microbenchmark interleaved on the same host, round by
    round (host drift cancels within a round). Each round, for each (model, batch): every call
    site of one decode layer and of the head timed alone in a loop with the forward's own
    operands (``layer_sites``; GPU behind and idle), the same sites run once each in forward
    order over 16 layers (a sequence: what a loop's warm caches hide), the host time to issue
    one eager step, and the eager step itself."""
    cases = [(1, 2048), (16, 2048), (64, 1024)]
    rounds = 2 if quick else 3
    models = list(DECODE_MODELS) if not quick else ["llama3.1-8b", "llama3.2-1b"]
    for fam in models:
        layers, hidden, hq, hkv, hd, ffn, vocab = DECODE_MODELS[fam]
        s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
        model = M.Llama(s, ctx.device)
        steps = {c: M.decode_step(ctx, model, *c) for c in cases}
        sites = {c: layer_sites(model, c[0], c[1], ctx.device) for c in cases}
        for rnd in range(rounds):
            for batch, kv_len in cases:
                common = dict(batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam,
                              layers=layers, hidden=hidden, ffn=ffn, vocab=vocab, round=rnd)
                _eager_round(ctx, fam, rnd, sites[(batch, kv_len)], steps[(batch, kv_len)], common)
        if fam == models[0]:  # the graph step once (ties this run's GPU to runs 1-3)
            for c in cases:
                graph_step_row(ctx, steps[c], f"{fam}_decode_b{c[0]}_l{c[1]}_graph", 0.2, 20, batch=c[0], kv_len=c[1],
                               q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam, layers=layers, hidden=hidden,
                               ffn=ffn, vocab=vocab)
        del model, steps, sites
        torch.cuda.empty_cache()


def host_state() -> dict:
    """CPU time stolen by the hypervisor so far (jiffies, /proc/stat) and the mean clock of the
    host's cores now (MHz, /proc/cpuinfo): what a host that drifts within a run changes."""
    out = {"steal": -1, "mhz": -1.0}
    try:
        fields = open("/proc/stat").readline().split()
        out["steal"] = int(fields[8]) if len(fields) > 8 else -1
        mhz = [float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz")]
        out["mhz"] = round(sum(mhz) / len(mhz), 1) if mhz else -1.0
    except (OSError, ValueError, IndexError):
        pass
    return out


P10_DECODE = [(1, 1024), (1, 8192), (8, 8192), (32, 4096), (64, 2048), (128, 1024)]


def p10_eager_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """P10's decode shapes (Llama-3.1-8B, measure.py's e2e list) eager and graph, each eager step
    in rounds beside the forward-operand host microbenchmark of its batch: the balanced middle
    batches, where host and GPU times are close, on the same host as their per-op costs."""
    fam = "llama3.1-8b"
    layers, hidden, hq, hkv, hd, ffn, vocab = DECODE_MODELS[fam]
    s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
    model = M.Llama(s, ctx.device)
    for batch, kv_len in P10_DECODE:
        step = M.decode_step(ctx, model, batch, kv_len)
        sites = layer_sites(model, batch, kv_len, ctx.device)
        for rnd in range(2):
            common = dict(batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam,
                          layers=layers, hidden=hidden, ffn=ffn, vocab=vocab, round=rnd, p10=1)
            _eager_round(ctx, fam, rnd, sites, step, common)
        graph_step_row(ctx, step, f"p10_{fam}_decode_b{batch}_l{kv_len}_graph", 0.2, 20, batch=batch, kv_len=kv_len,
                       q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam, layers=layers, hidden=hidden, ffn=ffn,
                       vocab=vocab, p10=1)
        del step, sites
        torch.cuda.empty_cache()


def prefill_repeat_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Run-to-run spread of FA2 prefill: the rows run a and d disagree on (4K with 28/32/64
    heads, one KV head at 64K-128K), three times each, interleaved."""
    from torch.nn.attention import SDPBackend

    K = 1024
    cases = [(32, 8, 128, 4 * K), (64, 8, 128, 4 * K), (28, 4, 128, 4 * K), (32, 8, 64, 4 * K),
             (8, 1, 128, 64 * K), (8, 1, 128, 96 * K), (8, 1, 128, 128 * K)]
    for rep in range(3):
        for hq, hkv, hd, length in cases:
            fn = sdpa_fn(ctx, 1, hq, hkv, hd, length, SDPBackend.FLASH_ATTENTION)
            t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
            M.record(ctx, "prediction", "attn_prefill_l2", f"flash_rep{rep}_b1_h{hq}x{hkv}x{hd}_l{length}", t, reps,
                     batch=1, seq_len=length, kv_len=length, q_heads=hq, kv_heads=hkv, head_dim=hd,
                     flops=4 * hq * hd * length * (length + 1) // 2, backend="flash", mode="causal", rep=rep)
            del fn
            torch.cuda.empty_cache()


def _site_pass(sites: list, n: int, behind: bool) -> tuple[list[float], list[float]]:
    """Host seconds per call of every site, ``n`` calls each, in one pass: GPU behind (one sleep
    kernel queued ahead of the whole pass) or idle (each site's calls waited for); and, behind,
    the GPU seconds per call of each site's kernels (CUDA events around its calls, which run back
    to back once the sleep ends). Idle, a site whose kernels outlast its host calls is timed at
    the GPU's pace, which the GPU seconds reveal."""
    out, events = [], []
    torch.cuda.synchronize()
    if behind:
        torch.cuda._sleep(int(80e-3 * 1.98e9))  # 80 ms: more than the pass takes on the host
    for _, fn in sites:
        if behind:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if not behind:
            torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / n)
        if behind:
            e1.record()
            events.append((e0, e1))
    torch.cuda.synchronize()
    return out, [e0.elapsed_time(e1) * 1e-3 / n for e0, e1 in events]


def eager_paired_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Host drift at the scale of one step: for each (model, batch), 12 pairs of (every call site
    of one layer and the head, 10 calls each, GPU behind then idle: about 60 ms) and one eager step
    timed on its own (wall time to the GPU's end, from an idle GPU). Each step is predicted from
    the site pass just before it, about 0.1 s earlier."""
    models = list(DECODE_MODELS) if not quick else ["llama3.1-8b", "llama3.2-1b"]
    _paired(ctx, models, [(1, 2048), (16, 2048), (64, 1024)])


def p10_paired_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """``eager_paired`` at P10's decode shapes of Llama-3.1-8B (batch 1-128: the balanced middle)."""
    _paired(ctx, ["llama3.1-8b"], P10_DECODE)


def _paired(ctx: M.Ctx, models: list[str], cases: list[tuple[int, int]]) -> None:
    for fam in models:
        layers, hidden, hq, hkv, hd, ffn, vocab = DECODE_MODELS[fam]
        s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab)
        model = M.Llama(s, ctx.device)
        for batch, kv_len in cases:
            step = M.decode_step(ctx, model, batch, kv_len)
            layer, extra = layer_sites(model, batch, kv_len, ctx.device)
            sites = layer + extra["head"]
            for _ in range(3):
                step()
                _site_pass(sites, 2, False)
            gpu_s: list[float] = []
            torch.cuda.synchronize()
            for pair in range(12):
                common = dict(batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd, family=fam,
                              layers=layers, hidden=hidden, ffn=ffn, vocab=vocab, pair=pair)
                for mode in ("behind", "idle"):
                    costs, gpu = _site_pass(sites, 10, mode == "behind")
                    gpu_s = gpu or gpu_s
                    for i, ((kind, _), cost) in enumerate(zip(sites, costs, strict=True)):
                        where = "layer" if i < len(layer) else "head"
                        M.record(ctx, "host", "site_paired", f"{fam}_b{batch}_p{pair}_{where}{i}_{kind}_{mode}", cost, 10,
                                 mode=mode, op=kind, site=i, where=where, gpu_us=round(gpu_s[i] * 1e6, 3), **common)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                M.record(ctx, "prediction", "e2e_decode", f"{fam}_decode_b{batch}_l{kv_len}_p{pair}_eager_paired",
                         time.perf_counter() - t0, 1, mode="eager", **common)
            del step, layer, extra, sites
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


def prefill_holdout_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """FA2 prefill shapes measured after the P12 attention model was frozen (set ``holdout``):
    other head counts, GQA groups, head_dim 96, batch 2-4, lengths between the swept ones."""
    from torch.nn.attention import SDPBackend

    K = 1024
    cases = [(1, 24, 8, 128, 8 * K), (1, 24, 8, 128, 24 * K), (1, 24, 8, 128, 48 * K),
             (1, 24, 8, 128, 96 * K), (1, 24, 8, 128, 160 * K),
             (2, 40, 8, 128, 12 * K), (2, 40, 8, 128, 40 * K), (4, 16, 4, 128, 6 * K),
             (1, 32, 8, 96, 16 * K), (1, 32, 8, 96, 64 * K), (1, 32, 8, 96, 144 * K),
             (1, 12, 2, 64, 80 * K), (1, 12, 2, 64, 200 * K), (1, 16, 2, 128, 100 * K)]
    for batch, hq, hkv, hd, length in cases:
        fn = sdpa_fn(ctx, batch, hq, hkv, hd, length, SDPBackend.FLASH_ATTENTION)
        try:
            t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
        except RuntimeError as exc:
            print(f"flash refused {hq}x{hkv}x{hd} l{length}: {exc}", file=sys.stderr)
            continue
        M.record(ctx, "holdout", "attn_prefill_l2", f"flash_holdout_b{batch}_h{hq}x{hkv}x{hd}_l{length}", t, reps,
                 batch=batch, seq_len=length, kv_len=length, q_heads=hq, kv_heads=hkv, head_dim=hd,
                 flops=4 * batch * hq * hd * length * (length + 1) // 2, backend="flash", mode="causal")
        del fn
        torch.cuda.empty_cache()


def _eager_round(ctx: M.Ctx, fam: str, rnd: int, sites: tuple, step, common: dict) -> None:
    """One round of one (model, batch): sites alone (behind, idle), the sites in sequence, the
    host issue time and the eager step."""
    batch, kv_len = common["batch"], common["kv_len"]
    layer, extra = sites
    for fn in [f for _, f in layer + extra["head"]]:
        fn()
    for mode in ("behind", "idle"):
        for i, (kind, fn) in enumerate(layer + extra["head"]):
            where = "layer" if i < len(layer) else "head"
            cost = _time_site(fn, 40, 5, mode == "behind")
            M.record(ctx, "host", "site", f"{fam}_b{batch}_r{rnd}_{where}{i}_{kind}_{mode}", cost, 5,
                     mode=mode, op=kind, site=i, where=where, **common)
    # the layer's sites once each, in order, 16 layers, GPU behind
    seq = []
    for _ in range(5):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(60e-3 * 1.98e9))
        t0 = time.perf_counter()
        for _ in range(16):
            for _, fn in layer:
                fn()
        seq.append((time.perf_counter() - t0) / 16)
        torch.cuda.synchronize()
    M.record(ctx, "host", "site_sequence", f"{fam}_b{batch}_r{rnd}_sequence", statistics.median(seq), 5,
             mode="behind", **common)
    before = host_state()
    M.record(ctx, "host", "e2e_host", f"{'p10_' if common.get('p10') else ''}{fam}_decode_b{batch}_l{kv_len}_r{rnd}_host_issue",
             host_issue_s(step), 7, mode="eager", **common)
    t, reps = M.time_fn(ctx, step, cold=False, budget_s=0.25, max_reps=20)
    after = host_state()
    prefix = "p10_" if common.get("p10") else ""
    M.record(ctx, "prediction", "e2e_decode", f"{prefix}{fam}_decode_b{batch}_l{kv_len}_r{rnd}_eager", t, reps,
             mode="eager", steal=after["steal"] - before["steal"], mhz=after["mhz"], **common)


def qk_norm_rows(ctx: M.Ctx, quick: bool, kernels: list[dict], run: str = "bk") -> None:
    """Runs bk, bl: decode steps (eager and CUDA graph) and prefills (eager, batch 1) of each of a run's
    families (``qk_norm_compare.QK_RUNS``, ``FAMILIES``: config.json's shapes, with or without the QK norm);
    the kernels of its first family's profiled graph replays (``kernels``: row, index, kernel, device_us)."""
    points = QK_RUNS[run]
    for fam in points.families:
        layers, hidden, hq, hkv, hd, ffn, vocab, qk = FAMILIES[fam]
        s = M.LlamaShape(layers=layers, hidden=hidden, q_heads=hq, kv_heads=hkv, head_dim=hd, ffn=ffn, vocab=vocab,
                         qk_norm=qk)
        model = M.Llama(s, ctx.device)
        for batch, kv_len in points.decode:
            decode_case(ctx, model, fam, batch, kv_len, kernels)
            if fam == points.families[0] and (batch, kv_len) in points.profiled:
                _profile_graph(ctx, model, f"{fam}_decode_b{batch}_l{kv_len}_graph", batch, kv_len, kernels)
            torch.cuda.empty_cache()
        for length in points.prefill:
            M.e2e_prefill_case(ctx, model, length, name=f"{fam}_prefill_b1_l{length}", **model_extra(s, fam))
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


def _profile_graph(ctx: M.Ctx, model: M.Llama, row: str, batch: int, kv_len: int, kernels: list[dict]) -> None:
    """The kernels of three graph replays of one decode step, under the profiler."""
    g = M.capture(ctx, M.decode_step(ctx, model, batch, kv_len))
    for _ in range(3):
        g.replay()
    try:
        for rep in range(3):
            for i, (kn, dur) in enumerate(kernel_names(g.replay)):
                kernels.append({"row": f"{row}_r{rep}", "m": batch, "n": kv_len, "k": 0, "index": i,
                                "kernel": kn, "device_us": round(dur, 3)})
    except Exception as exc:
        print(f"profiler failed: {exc}", file=sys.stderr)
    del g
    torch.cuda.synchronize()


def mla_prefill_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Run bm: DeepSeek-V3/R1 MLA prefill attention on one GPU (``mla_prefill_points``): causal batch-1
    SDPA at head_dim 192 on FlashAttention and cuDNN (kind ``attn_prefill``), and the whole vLLM prefill
    attention block, timed (kind ``mla_prefill_block``) and one call profiled (its kernels, and their
    summed device time: kind ``mla_prefill_block_kernels``)."""
    for heads, length in mp.FLASH_POINTS[:2] if quick else mp.FLASH_POINTS:
        _mla_flash_point(ctx, heads, length, kernels)
        torch.cuda.empty_cache()
    for heads, tokens in mp.BLOCK_POINTS[:1] if quick else mp.BLOCK_POINTS:
        _mla_block_point(ctx, heads, tokens, kernels)
        torch.cuda.empty_cache()


def _mla_flash_point(ctx: M.Ctx, heads: int, length: int, kernels: list[dict]) -> None:
    """One (heads, length) at head_dim 192, FLASH_ATTENTION then CUDNN_ATTENTION (skipped if refused)."""
    from torch.nn.attention import SDPBackend

    hd = mp.HEAD_DIM
    name = mp.flash_name(heads, length)
    for bname, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        row = name if bname == "flash" else name.replace("mla_flash_", "mla_cudnn_", 1)
        fn = sdpa_fn(ctx, 1, heads, heads, hd, length, backend)
        try:
            t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
        except RuntimeError as exc:
            print(f"{bname} refused {heads}x{heads}x{hd} l{length}: {exc}", file=sys.stderr)
            del fn
            torch.cuda.empty_cache()
            continue
        M.record(ctx, "prediction", "attn_prefill", row, t, reps, batch=1, seq_len=length, kv_len=length,
                 q_heads=heads, kv_heads=heads, head_dim=hd, flops=4 * heads * hd * length * (length + 1) // 2,
                 backend=bname)
        if bname == "flash" and (heads, length) in mp.FLASH_PROFILED:
            profile_into(kernels, fn, row, length, heads, hd)
        del fn
        torch.cuda.empty_cache()


def _mla_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotate-half rotary embedding over the last dim (64): x * cos + rotate_half(x) * sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def mla_block_fn(ctx: M.Ctx, heads: int, tokens: int, backend=None):
    """``fn()``: DeepSeek-V3/R1's MLA prefill attention block for ``tokens`` tokens at batch 1 with
    ``heads`` heads, as vLLM's MLA ``_forward_prefill`` (compute-friendly path) runs it, eager PyTorch
    on fixed random BF16 tensors; SDPA on ``backend`` (default FLASH_ATTENTION; ``del`` it, then
    ``torch.cuda.empty_cache()``, to free its tensors). Returns the output (tokens, hidden)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = SDPBackend.FLASH_ATTENTION if backend is None else backend
    dev, H, T = ctx.device, heads, tokens
    d, rq, rkv = mp.MLA["hidden"], mp.MLA["q_lora_rank"], mp.MLA["kv_lora_rank"]
    nope, rope, dv = mp.MLA["qk_nope"], mp.MLA["qk_rope"], mp.MLA["v_head_dim"]
    hd = nope + rope

    def w(n: int, k: int) -> torch.Tensor:
        return torch.randn(n, k, dtype=BF16, device=dev) * 0.02

    w_dq, w_uq_qr = w(rq, d), w(H * hd, rq)  # q down; q up (nope + rope per head)
    w_dkv_kr, w_ukv = w(rkv + rope, d), w(H * (nope + dv), rkv)  # latent KV + rope key; K nope and V up
    w_o = w(d, H * dv)
    w_attn, w_q, w_kv = (torch.ones(n, dtype=BF16, device=dev) for n in (d, rq, rkv))
    inv = 10000.0 ** (-torch.arange(0, rope, 2, device=dev, dtype=torch.float32) / rope)
    ang = torch.arange(T, device=dev, dtype=torch.float32)[:, None] * inv[None]
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos().to(BF16), ang.sin().to(BF16)  # (T, 64)
    x = torch.randn(T, d, dtype=BF16, device=dev)

    def fn() -> torch.Tensor:
        h = F.rms_norm(x, (d,), w_attn)
        q_c = F.rms_norm(F.linear(h, w_dq), (rq,), w_q)
        q = F.linear(q_c, w_uq_qr).view(T, H, hd)
        kv = F.linear(h, w_dkv_kr)  # (T, 576)
        kv_c, k_pe = kv.split([rkv, rope], dim=-1)
        kv_c = F.rms_norm(kv_c, (rkv,), w_kv)
        q[..., nope:] = _mla_rope(q[..., nope:], cos.unsqueeze(1), sin.unsqueeze(1))  # into q's rope slice
        k_pe = _mla_rope(k_pe, cos, sin)  # (T, 64): one rope key shared by every head
        kv_up = F.linear(kv_c, w_ukv).view(T, H, nope + dv)
        k_nope, v = kv_up.split([nope, dv], dim=-1)
        k = torch.cat([k_nope, k_pe.unsqueeze(1).expand(-1, H, -1)], dim=-1)  # (T, H, 192)
        v = F.pad(v, [0, hd - dv])  # (T, H, 192): vLLM pads V for FA2
        with sdpa_kernel([backend]):
            o = F.scaled_dot_product_attention(q.view(1, T, H, hd).transpose(1, 2), k.view(1, T, H, hd).transpose(1, 2),
                                               v.view(1, T, H, hd).transpose(1, 2), is_causal=True)
        o = o.transpose(1, 2)[..., :dv].reshape(T, H * dv)
        return F.linear(o, w_o)

    return fn


def _mla_block_point(ctx: M.Ctx, heads: int, tokens: int, kernels: list[dict]) -> None:
    """The MLA prefill block at (heads, tokens): timed (cold), then one call profiled kernel by kernel."""
    hd = mp.HEAD_DIM
    name = mp.block_name(heads, tokens)
    shape = dict(batch=1, seq_len=tokens, kv_len=tokens, q_heads=heads, kv_heads=heads, head_dim=hd)
    fn = mla_block_fn(ctx, heads, tokens)
    t, reps = M.time_fn(ctx, fn, budget_s=0.5, min_reps=3, max_reps=20)
    M.record(ctx, "prediction", "mla_prefill_block", name, t, reps, **shape)
    try:
        names = kernel_names(fn)
    except Exception as exc:
        print(f"profiler failed: {exc}", file=sys.stderr)
        names = []
    for i, (kn, dur) in enumerate(names):
        kernels.append({"row": name, "m": tokens, "n": heads, "k": hd, "index": i, "kernel": kn,
                        "device_us": round(dur, 3)})
    if names:
        M.record(ctx, "prediction", "mla_prefill_block_kernels", f"{name}_ksum",
                 sum(dur for _, dur in names) * 1e-6, 1, **shape)
    del fn
    torch.cuda.empty_cache()


def _fa3_interface():
    """The carried ``fa3-fwd`` wheel's ``fa3_fwd_interface`` module (its interface reads the wheel's
    build flags as ``flash_attn_config``)."""
    import fa3_fwd_config
    sys.modules.setdefault("flash_attn_config", fa3_fwd_config)
    import fa3_fwd_interface
    return fa3_fwd_interface


def fa3_prefill_rows(ctx: M.Ctx, quick: bool, kernels: list[dict], points: tuple = f3.POINTS,
                     profiled: tuple = f3.PROFILED, idle_s: float = 0.0) -> None:
    """Run bn: FlashAttention-3's forward (``fa3_fwd_interface``, the carried ``fa3-fwd`` wheel) at the
    points of ``fa3_points`` (kind ``fa3_prefill``), timed cold; the kernels of ``profiled`` named
    (run bq: its own ``points`` and ``profiled``). ``idle_s`` > 0 (run bq): each point is timed once
    more, one cold call after ``idle_s`` of an idle GPU (row ``<name>_idle``, ``after_idle_s`` in its
    extra): the SM clock recovered from the back-to-back calls before it."""
    fa3 = _fa3_interface()
    flash_attn_func, flash_attn_varlen_func = fa3.flash_attn_func, fa3.flash_attn_varlen_func

    for point in points[:3] if quick else points:
        b, h, hkv, hd, hdv, n, causal, api = point
        q = torch.randn(b, n, h, hd, dtype=BF16, device=ctx.device)
        k = torch.randn(b, n, hkv, hd, dtype=BF16, device=ctx.device)
        v = torch.randn(b, n, hkv, hdv, dtype=BF16, device=ctx.device)
        if api == "varlen":
            cu = torch.arange(0, (b + 1) * n, n, dtype=torch.int32, device=ctx.device)
            q, k, v = (x.reshape(b * n, *x.shape[2:]) for x in (q, k, v))

            def fn(q=q, k=k, v=v, cu=cu, n=n, causal=causal):
                return flash_attn_varlen_func(q, k, v, cu, cu, n, n, causal=causal)
        else:
            def fn(q=q, k=k, v=v, causal=causal):
                return flash_attn_func(q, k, v, causal=causal)
        row = f3.name(point)
        t, reps = M.time_fn(ctx, fn, budget_s=0.3, min_reps=3, max_reps=20)
        M.record(ctx, "prediction", "fa3_prefill", row, t, reps, batch=b, seq_len=n, kv_len=n, q_heads=h,
                 kv_heads=hkv, head_dim=hd, flops=f3.flops(point), mode="causal" if causal else "noncausal",
                 head_dim_v=hdv, api=api)
        if idle_s > 0 and ctx.cuda:
            ctx.sync()
            time.sleep(idle_s)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            M.flush(ctx)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            M.record(ctx, "prediction", "fa3_prefill", f"{row}_idle", start.elapsed_time(end) * 1e-3, 1, batch=b,
                     seq_len=n, kv_len=n, q_heads=h, kv_heads=hkv, head_dim=hd, flops=f3.flops(point),
                     mode="causal" if causal else "noncausal", head_dim_v=hdv, api=api, after_idle_s=idle_s)
        if point in profiled:
            profile_into(kernels, fn, row, n, h, hd)
        del q, k, v, fn
        torch.cuda.empty_cache()


def fa3_e2e_rows(ctx: M.Ctx, quick: bool, kernels: list[dict]) -> None:
    """Run bs: Llama-3.1-8B's prefill step (``measure.Llama``, batch 1, eager, random weights) with
    its attention FA3's ``flash_attn_func`` (q, k, v passed as (batch, tokens, heads, head_dim) views of
    the harness's tensors, its output viewed back: no copies), then with SDPA's FA2. For each length
    (``fa3_points.E2E_LENGTHS``) and kernel: one warm-up step, 1 s idle, then ``E2E_STEPS`` steps
    back to back, each between CUDA events; rows ``<name>_first`` (the first after the idle) and
    ``<name>_last5`` (the median of the last five), kind ``e2e_prefill``."""
    flash_attn_func = _fa3_interface().flash_attn_func

    def fa3(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        return flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal).transpose(1, 2)

    s = M.TINY_LLAMA if ctx.tiny else M.LlamaShape()
    model = M.Llama(s, ctx.device)
    for length in ((256,) if quick or ctx.tiny else f3.E2E_LENGTHS):
        ck = [torch.empty(1, s.kv_heads, length, s.head_dim, dtype=BF16, device=ctx.device) for _ in range(s.layers)]
        cv = [torch.empty_like(c) for c in ck]
        tokens = torch.randint(0, s.vocab, (1, length), device=ctx.device)
        pos = torch.arange(length, device=ctx.device)
        cos, sin = M.rope_tables(s, pos)
        for label, attention in (("fa3", fa3), ("fa2", M.sdpa)):
            model.attention = attention

            def fwd() -> torch.Tensor:
                return model.forward(tokens, ck, cv, pos, cos, sin, prefill=True)  # noqa: B023

            fwd()
            ctx.sync()
            time.sleep(1.0)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(f3.E2E_STEPS)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(f3.E2E_STEPS)]
            for start, end in zip(starts, ends, strict=True):
                start.record()
                fwd()
                end.record()
            torch.cuda.synchronize()
            times = [a.elapsed_time(b) * 1e-3 for a, b in zip(starts, ends, strict=True)]
            shape = dict(batch=1, seq_len=length, q_heads=s.q_heads, kv_heads=s.kv_heads, head_dim=s.head_dim,
                         mode="eager", attention_kernel=label, steps=f3.E2E_STEPS)
            M.record(ctx, "prediction", "e2e_prefill", f"prefill_{label}_b1_l{length}_first", times[0], 1,
                     part="first", **shape)
            M.record(ctx, "prediction", "e2e_prefill", f"prefill_{label}_b1_l{length}_last5",
                     statistics.median(times[-5:]), 5, part="last5", **shape)
        torch.cuda.empty_cache()


def _fa3_decode_attention(kvcache, seqlens: torch.Tensor):
    """``measure.Llama``'s attention callable at decode on FA3's ``flash_attn_with_kvcache``: q and the
    caches passed as (batch, tokens, heads, head_dim) views, ``seqlens`` as ``cache_seqlens``, the
    output viewed back (no copies)."""
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        return kvcache(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), cache_seqlens=seqlens).transpose(1, 2)
    return attention


def fa3_decode_rows(ctx: M.Ctx, quick: bool, kernels: list[dict], run: f3.DecodeRun = f3.RUN_BT) -> None:
    """Runs bt, bu and bw: FlashAttention-3 at decode (``run``: a ``fa3_points.DecodeRun``). (1) At
    each of ``run.calls``, one query a sequence over a cache of ``kv_len`` keys (K and V allocated
    (batch, kv_heads, kv_len, head_dim) as ``measure.Llama``'s caches; FA3 gets (batch, kv_len,
    kv_heads, head_dim) views, ``cache_seqlens`` an int32 tensor made once): FA3's call and SDPA's FA2
    on the same tensors, each timed cold (kind ``fa3_decode`` / ``attn_decode``, ``measure.time_fn``),
    then one call of each after an L2 flush profiled (every kernel named: the flush's too). (2)
    Llama-3.1-8B's decode step (``measure.decode_step``) at ``run.steps`` with each attention,
    CUDA-graph replayed (kind ``e2e_decode``, ``attention_kernel`` in the extra); the graphs of
    ``run.steps_profiled`` profiled. (3) One GPU's share of Llama-3.1-70B (``run.shard``, random
    weights, no NCCL) at ``run.shard_points`` with each attention, CUDA-graph replayed (``model`` and
    ``tp`` in the extra too)."""
    kvcache = _fa3_interface().flash_attn_with_kvcache
    for point in run.calls[:2] if quick else run.calls:
        b, h, hkv, hd, n = point
        q = torch.randn(b, h, 1, hd, dtype=BF16, device=ctx.device)
        k = torch.randn(b, hkv, n, hd, dtype=BF16, device=ctx.device)
        v = torch.randn_like(k)
        seqlens = torch.full((b,), n, dtype=torch.int32, device=ctx.device)
        calls = {"fa3": lambda q=q, k=k, v=v, seqlens=seqlens: kvcache(
                     q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), cache_seqlens=seqlens),
                 "fa2": lambda q=q, k=k, v=v: M.sdpa(q, k, v, False)}
        shape = dict(batch=b, kv_len=n, q_heads=h, kv_heads=hkv, head_dim=hd)
        for label, fn in calls.items():
            row = f3.decode_name(point, label)
            t, reps = M.time_fn(ctx, fn, budget_s=0.2, min_reps=10, max_reps=50)
            M.record(ctx, "prediction", "fa3_decode" if label == "fa3" else "attn_decode", row, t, reps, **shape)

            def cold(fn=fn) -> object:
                M.flush(ctx)
                return fn()
            profile_into(kernels, cold, row, b, n, hd)
        del q, k, v, seqlens, calls
        torch.cuda.empty_cache()
    if run.steps:
        s = M.TINY_LLAMA if ctx.tiny else M.LlamaShape()
        _fa3_decode_steps(ctx, kvcache, M.Llama(s, ctx.device), s, run.steps[:1] if quick else run.steps, kernels,
                          lambda batch, kv_len, label: f"llama3.1-8b_decode_{label}_b{batch}_l{kv_len}_graph",
                          (0.4, 40), {}, run.steps_profiled)
    if run.shard:
        s = M.TINY_LLAMA if ctx.tiny else M.LlamaShape(**run.shard)
        _fa3_decode_steps(ctx, kvcache, M.Llama(s, ctx.device), s, run.shard_points[:1] if quick else run.shard_points,
                          kernels, lambda batch, kv_len, label: f3.shard_name(batch, kv_len, label, run.shard_tp),
                          (0.6, 20), dict(model="llama-3.1-70b", tp=run.shard_tp), ())
    torch.cuda.empty_cache()


def _fa3_decode_steps(ctx: M.Ctx, kvcache, model, s, points, kernels: list[dict], name, timing: tuple[float, int],
                      extra: dict, profiled: tuple) -> None:
    """``model``'s decode step at each (batch, kv_len) of ``points``, CUDA-graph replayed with FA3's
    decode call and with SDPA's FA2 (``graph_step_row``: ``timing`` its budget and replays); the
    graphs of ``profiled`` profiled."""
    for batch, kv_len in points:
        seqlens = torch.full((batch,), kv_len, dtype=torch.int32, device=ctx.device)
        step = M.decode_step(ctx, model, batch, kv_len)
        for label, attention in (("fa3", _fa3_decode_attention(kvcache, seqlens)), ("fa2", M.sdpa)):
            model.attention = attention
            row = name(batch, kv_len, label)
            graph_step_row(ctx, step, row, *timing, batch=batch, kv_len=kv_len, q_heads=s.q_heads,
                           kv_heads=s.kv_heads, head_dim=s.head_dim, attention_kernel=label, **extra)
            if (batch, kv_len) in profiled:
                g = M.capture(ctx, step)
                for _ in range(3):
                    g.replay()
                profile_into(kernels, g.replay, row, batch, kv_len, 0)
                del g
        model.attention = M.sdpa
        del step, seqlens
        torch.cuda.empty_cache()


SECTIONS = {"p10": p10_rows, "gemm": gemm_rows, "dispatch": dispatch_rows, "prefill": prefill_rows,
            "e2e": e2e_rows, "insitu": insitu_rows, "prefill_l2": prefill_l2_rows, "gemm_cliff": gemm_cliff_rows,
            "eager_rounds": eager_rounds_rows, "p10_eager": p10_eager_rows, "prefill_repeat": prefill_repeat_rows,
            "eager_paired": eager_paired_rows, "prefill_holdout": prefill_holdout_rows, "p10_paired": p10_paired_rows,
            "gemm_holdout": gemm_holdout_rows, "qk_norm": qk_norm_rows,
            "qk_norm_bl": functools.partial(qk_norm_rows, run="bl"), "mla_prefill": mla_prefill_rows,
            "fa3_prefill": fa3_prefill_rows,
            "fa3_prefill_bq": functools.partial(fa3_prefill_rows, points=f3.BQ_POINTS, profiled=f3.BQ_PROFILED,
                                                idle_s=f3.BQ_IDLE_S),
            "fa3_varlen": functools.partial(fa3_prefill_rows, points=f3.VARLEN_POINTS, profiled=()),
            "fa3_e2e": fa3_e2e_rows, "fa3_decode": fa3_decode_rows,
            "fa3_decode_shard": functools.partial(fa3_decode_rows, run=f3.RUN_BU),
            "fa3_decode_bw": functools.partial(fa3_decode_rows, run=f3.RUN_BW),
            "fa3_decode_bx": functools.partial(fa3_decode_rows, run=f3.RUN_BX),
            "fa3_decode_by": functools.partial(fa3_decode_rows, run=f3.RUN_BY),
            "fa3_decode_cb": functools.partial(fa3_decode_rows, run=f3.RUN_CB),
            "fa3_prefill_by": functools.partial(fa3_prefill_rows, points=f3.BY_PREFILL, profiled=())}


def host_report() -> str:
    out = [f"python {sys.version.split()[0]} torch {torch.__version__} cuda {torch.version.cuda}",
           f"platform {platform.platform()} cpus {os.cpu_count()}"]
    for cmd in (["nvidia-smi"], ["nvidia-smi", "-q", "-d", "CLOCK,PERFORMANCE,POWER"], ["lscpu"]):
        try:
            out.append("$ " + " ".join(cmd))
            out.append(subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout)
        except (OSError, subprocess.SubprocessError) as exc:
            out.append(f"failed: {exc}")
    if torch.cuda.is_available():
        out.append(f"cudnn {torch.backends.cudnn.version()}")
        out.append(str(torch.cuda.get_device_properties(0)))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", required=True, help="CSV of the kernels each profiled row launched")
    ap.add_argument("--env", help="write nvidia-smi, lscpu and versions here")
    ap.add_argument("--quick", action="store_true", help="fewer families, heads and models (a second GPU)")
    ap.add_argument("--only", default=",".join(SECTIONS))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("sweep.py needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.env:
        Path(args.env).write_text(host_report())
    ctx = M.Ctx(device=torch.device("cuda"), tiny=False)
    torch.manual_seed(0)
    ctx.env = M.environment(ctx)
    ctx.env["sdpa_backend"] = M.pick_sdpa_backend(ctx)
    ctx.env["cpu"] = platform.processor() or _cpu_model()
    print(ctx.env, flush=True)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    ctx.flush_buf = torch.zeros(64 << 20, dtype=torch.float32, device=ctx.device)
    kernels: list[dict] = []

    def write_all() -> None:
        write(args.out, ctx)
        with open(args.kernels, "w", newline="") as fh:
            wr = csv.DictWriter(fh, fieldnames=["row", "m", "n", "k", "index", "kernel", "device_us"])
            wr.writeheader()
            wr.writerows(kernels)

    M.run_sections({name: functools.partial(fn, ctx, args.quick, kernels) for name, fn in SECTIONS.items()},
                   args.only, write_all)
    return 0


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def write(path: str, ctx: M.Ctx) -> None:
    M.write(path, ctx)


if __name__ == "__main__":
    sys.exit(main())
