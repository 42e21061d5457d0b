"""Measure an NVIDIA GPU for rdusim's GPU model: kernels and Llama-3.1-8B-shaped forward passes.

Run on the GPU machine (bf16, CUDA events, medians after warm-up):

    python benchmarks/gpu/measure.py --out h100.csv

Every row has a ``set`` column: ``calibration`` (copy bandwidth and three GEMM shapes, the only
rows the GPU model may be fitted to), ``hardware`` (a constant read off the device: the
dependent-load latency of HBM) or ``prediction`` (everything else: more GEMMs, fused norms,
prefill and decode attention, Kascade sparse decode, the project's ``rdusim.kernels`` sparse
decode, launch cost, end-to-end decode steps eager and CUDA-graph captured, end-to-end prefill).

Kernel rows run cold: a 256 MiB buffer is overwritten before every timed repetition so the
inputs never sit in the 50 MB L2 (an end-to-end forward streams far more than L2 between two
uses of a weight). End-to-end rows are timed back to back with no flush.

``--tiny`` shrinks every shape so the script can be smoke-tested on a CPU in seconds.
Imports: torch (and ``rdusim.kernels`` for the project's sparse decode rows).
"""

from __future__ import annotations

import argparse
import csv
import functools
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


@dataclass
class Ctx:
    """Device, shape scale and the rows measured so far."""

    device: torch.device
    tiny: bool
    rows: list[dict] = field(default_factory=list)
    set_name: str = "prediction"  # the set end-to-end rows are recorded under
    env: dict = field(default_factory=dict)
    flush_buf: torch.Tensor | None = None

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def flush(ctx: Ctx) -> None:
    """Overwrite a 256 MiB buffer so the next kernel finds nothing of its inputs in L2."""
    if ctx.flush_buf is not None:
        ctx.flush_buf.add_(1)


def time_fn(ctx: Ctx, fn: Callable[[], object], *, cold: bool = True, budget_s: float = 0.25,
            min_reps: int = 5, max_reps: int = 100) -> tuple[float, int]:
    """Median seconds of ``fn`` over repetitions after warm-up; (median_s, reps)."""
    for _ in range(2):
        fn()
    ctx.sync()
    t0 = time.perf_counter()
    fn()
    ctx.sync()
    one = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(max_reps, max(min_reps, budget_s / one)))
    if not ctx.cuda:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times), reps
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends, strict=True):
        if cold:
            flush(ctx)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends, strict=True)), reps


def record(ctx: Ctx, set_: str, kind: str, name: str, seconds: float, reps: int, **shape) -> None:
    row = {"set": set_, "kind": kind, "name": name, "median_us": round(seconds * 1e6, 3),
           "reps": reps}
    row.update({k: shape.get(k, "") for k in SHAPE_KEYS})
    row["extra"] = ";".join(f"{k}={v}" for k, v in shape.items() if k not in SHAPE_KEYS)
    ctx.rows.append(row)
    print(f"{set_:11s} {kind:16s} {name:44s} {seconds * 1e6:12.1f} us", flush=True)


SHAPE_KEYS = ("batch", "m", "n", "k", "seq_len", "kv_len", "q_heads", "kv_heads", "head_dim",
              "bytes", "flops", "top_k", "mode")


# ---------------------------------------------------------------- calibration + kernels


def copy_rows(ctx: Ctx) -> None:
    """Device-to-device copy: bytes read + written per second (calibration)."""
    sizes = [1 << 16] if ctx.tiny else [64 << 20, 256 << 20, 1 << 30]
    for size in sizes:
        src = torch.empty(size // 2, dtype=BF16, device=ctx.device).normal_()
        dst = torch.empty_like(src)
        t, reps = time_fn(ctx, lambda: dst.copy_(src))  # noqa: B023
        record(ctx, "calibration", "copy", f"copy_{size >> 20}MiB", t, reps, bytes=2 * size)


LLAMA_GEMMS = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096),
               "down": (4096, 14336), "lm_head": (128256, 4096)}
CALIBRATION_GEMMS = [("square8192", 8192, 8192, 8192), ("square4096", 4096, 4096, 4096),
                     ("down_m16", 16, 4096, 14336)]


def gemm_rows(ctx: Ctx) -> None:
    """y (M, N) = x (M, K) @ W^T (W is (N, K), row-major as nn.Linear keeps it)."""
    shapes = [("calibration", *s) for s in CALIBRATION_GEMMS]
    ms = [1, 8, 32, 128, 512, 2048, 8192]
    for name, (n, k) in LLAMA_GEMMS.items():
        for m in ms:
            shapes.append(("prediction", f"{name}_m{m}", m, n, k))
    shapes += [("prediction", "odd_1000x3000x5000", 1000, 3000, 5000),
               ("prediction", "square2048", 2048, 2048, 2048),
               ("prediction", "wave_132x1_tiles", 128 * 132 // 4, 256, 8192)]
    for set_, name, m, n, k in shapes:
        if ctx.tiny:
            m, n, k = max(1, m // 64), max(8, n // 64), max(8, k // 64)
        x = torch.randn(m, k, dtype=BF16, device=ctx.device)
        w = torch.randn(n, k, dtype=BF16, device=ctx.device)
        t, reps = time_fn(ctx, lambda: F.linear(x, w))  # noqa: B023
        record(ctx, set_, "gemm", name, t, reps, m=m, n=n, k=k, flops=2 * m * n * k,
               bytes=2 * (m * k + n * k + m * n))


def norm_rows(ctx: Ctx) -> None:
    """Fused RMSNorm and SiLU-and-multiply (elementwise) at decode and prefill token counts."""
    for tokens in ([4, 16] if ctx.tiny else [1, 64, 4096, 16384]):
        d = 64 if ctx.tiny else 4096
        x = torch.randn(tokens, d, dtype=BF16, device=ctx.device)
        w = torch.ones(d, dtype=BF16, device=ctx.device)
        t, reps = time_fn(ctx, lambda: F.rms_norm(x, (d,), w, 1e-5))  # noqa: B023
        record(ctx, "prediction", "rmsnorm", f"rmsnorm_t{tokens}", t, reps, m=tokens, n=d,
               bytes=4 * tokens * d)
        f = 224 if ctx.tiny else 14336
        gu = torch.randn(tokens, 2 * f, dtype=BF16, device=ctx.device)
        t, reps = time_fn(ctx, lambda: F.silu(gu[:, :f]) * gu[:, f:])  # noqa: B023
        record(ctx, "prediction", "silu_mul", f"silu_mul_t{tokens}", t, reps, m=tokens, n=f,
               bytes=6 * tokens * f)


def launch_rows(ctx: Ctx) -> None:
    """Per-kernel cost of back-to-back tiny kernels: eager launches vs one CUDA graph replay."""
    x = torch.zeros(256, device=ctx.device)
    n = 200

    def burst() -> None:
        for _ in range(n):
            x.add_(1.0)

    t, reps = time_fn(ctx, burst, cold=False)
    record(ctx, "prediction", "launch", "tiny_kernel_eager", t / n, reps, mode="eager")
    if ctx.cuda:
        g = capture(ctx, burst)
        t, reps = time_fn(ctx, g.replay, cold=False)
        record(ctx, "prediction", "launch", "tiny_kernel_graph", t / n, reps, mode="graph")


def capture(ctx: Ctx, fn: Callable[[], object]) -> torch.cuda.CUDAGraph:
    """Warm ``fn`` up on a side stream, then capture it into a CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def replay_times(g: torch.cuda.CUDAGraph, reps: int, *, warmup: int) -> list[float]:
    """Seconds of each of ``reps`` replays of ``g``, after ``warmup`` untimed ones (then a
    synchronize): CUDA events around each replay, the GPU synchronized after each. Without a
    warm-up there is no synchronize before the first replay, as small_kernels.py always timed
    (adding one moved its per-call times by -4 to -5% on one H200, run am: see
    benchmarks/gpu/h200-20261128am-timing-loop-check.txt)."""
    if warmup:
        for _ in range(warmup):
            g.replay()
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return times


CHASE_SRC = r"""
extern "C" __global__ void chase(const long long* next, long long* out, int steps) {
    long long i = 0;
    for (int s = 0; s < steps; ++s) i = next[i];
    out[0] = i;
}
"""


def chase_rows(ctx: Ctx, kind: str, prefix: str, span: int, entries: int, *, cold: bool) -> None:
    """One thread's dependent loads over ``span`` int64 elements, ``entries`` of them 1 KiB or more
    apart (every hop a new line), in random order; rows ``{prefix}_1000`` and ``_8000`` (set
    ``hardware``: a constant of the device, not a kernel row)."""
    import cupy

    kernel = cupy.RawKernel(CHASE_SRC, "chase")
    stride = span // entries
    order = torch.randperm(entries, device=ctx.device) * stride
    nxt = torch.zeros(span, dtype=torch.int64, device=ctx.device)
    nxt[order] = torch.roll(order, -1)
    out = torch.zeros(1, dtype=torch.int64, device=ctx.device)
    stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    for steps in (1000, 8000):
        def run(steps: int = steps) -> None:
            with stream:
                kernel((1,), (1,), (cupy.asarray(nxt), cupy.asarray(out), cupy.int32(steps)))

        t, reps = time_fn(ctx, run, cold=cold)
        record(ctx, "hardware", kind, f"{prefix}_{steps}", t, reps, n=steps, bytes=8 * steps)


def latency_rows(ctx: Ctx) -> None:
    """Dependent-load (pointer-chase) latency of HBM over a 1 GiB span (1M entries 1 KiB apart),
    timed after a flush."""
    if ctx.cuda:
        chase_rows(ctx, "latency", "pointer_chase", 1 << 27, 1 << 20, cold=True)


# ---------------------------------------------------------------- attention


SDPA_BACKENDS: list = []  # set in main(): FlashAttention when it runs GQA on this device


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """SDPA with native GQA (no repeat_kv), on the FlashAttention backend where available."""
    gqa = q.shape[1] != k.shape[1]
    if not SDPA_BACKENDS:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(SDPA_BACKENDS):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)


def pick_sdpa_backend(ctx: Ctx) -> str:
    """Use FlashAttention if it accepts GQA decode and prefill here; else PyTorch's default."""
    if not ctx.cuda:
        return "default"
    from torch.nn.attention import SDPBackend

    q = torch.randn(2, 32, 1, 128, dtype=BF16, device=ctx.device)
    k = torch.randn(2, 8, 300, 128, dtype=BF16, device=ctx.device)
    try:
        SDPA_BACKENDS[:] = [SDPBackend.FLASH_ATTENTION]
        sdpa(q, k, k, False)
        sdpa(torch.randn(1, 32, 300, 128, dtype=BF16, device=ctx.device), k[:1], k[:1], True)
        torch.cuda.synchronize()
        return "flash"
    except RuntimeError as exc:
        print(f"flash backend refused GQA ({exc}); using the default", file=sys.stderr)
        SDPA_BACKENDS.clear()
        return "default"


def prefill_attention_rows(ctx: Ctx) -> None:
    """Causal SDPA, batch 1, Llama-8B heads (32 q, 8 kv, hd 128), FlashAttention backend."""
    lengths = [64, 128] if ctx.tiny else [1024, 2048, 4096, 8192, 16384, 32768]
    hq, hkv, hd = (4, 2, 16) if ctx.tiny else (32, 8, 128)
    for length in lengths:
        for batch in ([1] if length > 8192 or ctx.tiny else [1, 4]):
            q = torch.randn(batch, hq, length, hd, dtype=BF16, device=ctx.device)
            k = torch.randn(batch, hkv, length, hd, dtype=BF16, device=ctx.device)
            v = torch.randn_like(k)
            t, reps = time_fn(ctx, lambda: sdpa(q, k, v, True))  # noqa: B023
            flops = 4 * batch * hq * hd * length * (length + 1) // 2
            record(ctx, "prediction", "attn_prefill", f"prefill_attn_b{batch}_l{length}", t, reps,
                   batch=batch, seq_len=length, kv_len=length, q_heads=hq, kv_heads=hkv,
                   head_dim=hd, flops=flops, bytes=2 * batch * length * hd * (2 * hq + 2 * hkv))


def decode_attention_rows(ctx: Ctx) -> None:
    """One query token per sequence against a KV cache of kv_len tokens (SDPA)."""
    if ctx.tiny:
        grid, heads = [(2, 64)], [(4, 2, 16)]
    else:
        grid = [(b, n) for b in (1, 4, 16, 64) for n in (2048, 8192, 32768, 131072)
                if b * n <= (1 << 21)]
        heads = [(32, 8, 128)]
    for hq, hkv, hd in heads:
        for batch, kv_len in grid:
            decode_case(ctx, batch, kv_len, hq, hkv, hd)
    if not ctx.tiny:  # multi-head (no GQA): four times the KV bytes per query head group
        for batch, kv_len in [(1, 8192), (8, 8192), (1, 32768)]:
            decode_case(ctx, batch, kv_len, 32, 32, 128)


def decode_case(ctx: Ctx, batch: int, kv_len: int, hq: int, hkv: int, hd: int) -> None:
    q = torch.randn(batch, hq, 1, hd, dtype=BF16, device=ctx.device)
    k = torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device)
    v = torch.randn_like(k)
    t, reps = time_fn(ctx, lambda: sdpa(q, k, v, False))
    record(ctx, "prediction", "attn_decode", f"decode_attn_b{batch}_l{kv_len}_h{hq}x{hkv}", t,
           reps, batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd,
           flops=4 * batch * hq * hd * kv_len, bytes=4 * batch * hkv * kv_len * hd)


def kascade_rows(ctx: Ctx) -> None:
    """Kascade-style sparse decode (10% top-k) vs dense, and the project's own kernels.

    Dense: SDPA over the whole cache. Reuse layer: gather the top-k keys and values
    (indices given by the anchor) then SDPA over them; ``gather`` per element (``reuse``) or
    whole rows through ``index_select`` (``reuse_rows``). Anchor layer: q.K^T scores, softmax
    summed over the group's query heads, top-k, gather, SDPA. Project: ``rdusim.kernels``'
    ``topk_indices`` + ``sparse_attention`` (anchor) and ``sparse_attention`` (reuse), the masked
    reference kernels, and ``sparse_decode`` (the gathered decode path ``KascadeCache`` uses).
    """
    lengths = [256] if ctx.tiny else [8192, 16384, 32768, 65536, 131072]
    for batch in [1] if ctx.tiny else [1, 8]:
        for kv_len in lengths:
            kascade_case(ctx, batch, kv_len)


def kascade_case(ctx: Ctx, batch: int, kv_len: int) -> None:
    """Every Kascade variant at one (batch, KV length); see ``kascade_rows``."""
    from rdusim.kernels.kascade import sparse_attention, sparse_decode, topk_indices

    hq, hkv, hd = (4, 2, 16) if ctx.tiny else (32, 8, 128)
    g, top = hq // hkv, max(kv_len // 10, 128)
    q = torch.randn(batch, hq, 1, hd, dtype=BF16, device=ctx.device)
    k = torch.randn(batch, hkv, kv_len, hd, dtype=BF16, device=ctx.device)
    v = torch.randn_like(k)
    idx = torch.sort(torch.randperm(kv_len, device=ctx.device)[:top]).values
    idx = idx.expand(batch, hkv, top).contiguous()  # (B, Hkv, k)
    base = (torch.arange(batch * hkv, device=ctx.device) * kv_len).view(batch, hkv, 1)
    k_rows, v_rows = k.view(-1, hd), v.view(-1, hd)
    lengths = torch.full((batch,), kv_len, dtype=torch.int64, device=ctx.device)
    qpos = (lengths - 1)[:, None]

    def reuse(idx: torch.Tensor = idx) -> torch.Tensor:
        gi = idx[..., None].expand(-1, -1, -1, hd)
        return sdpa(q, k.gather(2, gi), v.gather(2, gi), False)

    def reuse_rows(idx: torch.Tensor = idx) -> torch.Tensor:
        flat = (idx + base).view(-1)  # whole 256-byte rows, one index each
        kk = k_rows.index_select(0, flat).view(batch, hkv, -1, hd)
        vv = v_rows.index_select(0, flat).view(batch, hkv, -1, hd)
        return sdpa(q, kk, vv, False)

    def select() -> torch.Tensor:
        scores = torch.matmul(q.view(batch, hkv, g, hd), k.transpose(-1, -2))
        probs = torch.softmax(scores.float() * hd ** -0.5, dim=-1).sum(dim=2)
        return torch.topk(probs, top, dim=-1, sorted=False).indices

    def project_topk() -> torch.Tensor:
        return topk_indices(q, k, top, 1, lengths=lengths, q_positions=qpos)

    cases = {
        "dense": lambda: sdpa(q, k, v, False),
        "reuse": reuse,
        "anchor": lambda: reuse(select()),
        "reuse_rows": reuse_rows,
        "anchor_rows": lambda: reuse_rows(select()),
        "project_decode_reuse": lambda: sparse_decode(q, k, v, idx[:, :, None], lengths),
        "project_decode_anchor": lambda: sparse_decode(q, k, v, project_topk(), lengths),
    }
    if batch == 1:  # the masked reference path: a dense pass per call
        cases["project_reuse"] = lambda: sparse_attention(q, k, v, idx[:, :, None], lengths=lengths,
                                                          q_positions=qpos)
        cases["project_anchor"] = lambda: sparse_attention(q, k, v, project_topk(), lengths=lengths,
                                                           q_positions=qpos)
    common = dict(batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=hd, top_k=top)
    for mode, fn in cases.items():
        t, reps = time_fn(ctx, fn, budget_s=0.15 if mode.startswith("project") else 0.25)
        record(ctx, "prediction", "kascade", f"kascade_{mode}_b{batch}_l{kv_len}", t, reps,
               mode=mode, **common)


# ---------------------------------------------------------------- end-to-end Llama-3.1-8B


@dataclass(frozen=True)
class LlamaShape:
    layers: int = 32
    hidden: int = 4096
    q_heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    ffn: int = 14336
    vocab: int = 128256
    qk_norm: bool = False  # Qwen3: an RMSNorm over head_dim on each q and k head before the rotary embedding


TINY_LLAMA = LlamaShape(layers=2, hidden=64, q_heads=4, kv_heads=2, head_dim=16, ffn=160,
                        vocab=256)


class Llama:
    """Random bf16 weights in the Llama-3.1-8B shapes; fused QKV and gate-up projections. Its
    attention is ``sdpa`` (FA2 through SDPA) unless ``attention`` is set to another callable of the
    same signature (run bs: FlashAttention-3's)."""

    def __init__(self, s: LlamaShape, device: torch.device) -> None:
        self.s = s
        self.attention: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor] = sdpa
        qkv = (s.q_heads + 2 * s.kv_heads) * s.head_dim

        def w(n: int, k: int) -> torch.Tensor:
            return torch.randn(n, k, dtype=BF16, device=device) * k ** -0.5

        self.layers = [dict(norm1=torch.ones(s.hidden, dtype=BF16, device=device),
                            wqkv=w(qkv, s.hidden), wo=w(s.hidden, s.q_heads * s.head_dim),
                            norm2=torch.ones(s.hidden, dtype=BF16, device=device),
                            wgu=w(2 * s.ffn, s.hidden), wd=w(s.hidden, s.ffn),
                            **({"q_norm": torch.ones(s.head_dim, dtype=BF16, device=device),
                                "k_norm": torch.ones(s.head_dim, dtype=BF16, device=device)} if s.qk_norm else {}))
                       for _ in range(s.layers)]
        self.norm = torch.ones(s.hidden, dtype=BF16, device=device)
        self.lm_head = w(s.vocab, s.hidden)
        self.embed = w(s.vocab, s.hidden)

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, tokens: torch.Tensor, cache_k: list[torch.Tensor],
                cache_v: list[torch.Tensor], pos: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor, prefill: bool) -> torch.Tensor:
        """tokens (B, T); caches (B, Hkv, L, hd); writes T tokens at ``pos`` (T,) slots."""
        s = self.s
        b, t = tokens.shape
        x = F.embedding(tokens, self.embed)  # (B, T, hidden)
        for layer, ck, cv in zip(self.layers, cache_k, cache_v, strict=True):
            h = F.rms_norm(x, (s.hidden,), layer["norm1"], 1e-5)
            qkv = F.linear(h, layer["wqkv"]).view(b, t, s.q_heads + 2 * s.kv_heads, s.head_dim)
            if s.qk_norm:  # as Qwen3Attention: each head normalised before the transpose (eps 1e-6)
                q = F.rms_norm(qkv[:, :, : s.q_heads], (s.head_dim,), layer["q_norm"], 1e-6).transpose(1, 2)
                k = F.rms_norm(qkv[:, :, s.q_heads : s.q_heads + s.kv_heads], (s.head_dim,), layer["k_norm"],
                               1e-6).transpose(1, 2)
                v = qkv[:, :, s.q_heads + s.kv_heads :].transpose(1, 2)
                q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            else:
                qkv = qkv.transpose(1, 2)  # (B, heads, T, hd)
                q = self.rope(qkv[:, : s.q_heads], cos, sin)
                k = self.rope(qkv[:, s.q_heads : s.q_heads + s.kv_heads], cos, sin)
                v = qkv[:, s.q_heads + s.kv_heads :]
            ck.index_copy_(2, pos, k)
            cv.index_copy_(2, pos, v)
            if prefill:
                o = self.attention(q, k, v, True)
            else:
                o = self.attention(q, ck, cv, False)
            o = o.transpose(1, 2).reshape(b, t, s.q_heads * s.head_dim)
            x = x + F.linear(o, layer["wo"])
            h = F.rms_norm(x, (s.hidden,), layer["norm2"], 1e-5)
            gu = F.linear(h, layer["wgu"])
            x = x + F.linear(F.silu(gu[..., : s.ffn]) * gu[..., s.ffn :], layer["wd"])
        h = F.rms_norm(x[:, -1:], (s.hidden,), self.norm, 1e-5)
        return F.linear(h, self.lm_head)  # logits of the last position only


def rope_tables(s: LlamaShape, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 500000.0 ** (-torch.arange(0, s.head_dim, 2, device=positions.device) / s.head_dim)
    ang = positions.float()[:, None] * inv[None]
    ang = torch.cat((ang, ang), dim=-1)
    return ang.cos().to(BF16), ang.sin().to(BF16)  # (T, hd)


def e2e_rows(ctx: Ctx) -> None:
    """Decode steps over a preallocated KV cache (eager and graph) and prefill at batch 1."""
    s = TINY_LLAMA if ctx.tiny else LlamaShape()
    model = Llama(s, ctx.device)
    decode = [(2, 64)] if ctx.tiny else [(1, 1024), (1, 8192), (1, 32768), (8, 8192),
                                         (32, 4096), (32, 8192), (64, 2048), (128, 1024)]
    for batch, kv_len in decode:
        e2e_decode_case(ctx, model, batch, kv_len)
        if ctx.cuda:
            torch.cuda.empty_cache()
    for length in ([64] if ctx.tiny else [1024, 4096, 16384]):
        e2e_prefill_case(ctx, model, length)
        if ctx.cuda:
            torch.cuda.empty_cache()


def decode_step(ctx: Ctx, model: Llama, batch: int, kv_len: int) -> Callable[[], torch.Tensor]:
    """One decode step of ``model`` (the token at position kv_len - 1) over random KV caches,
    as a closure to time or capture (also used by sweep.py)."""
    s = model.s
    ck = [torch.randn(batch, s.kv_heads, kv_len, s.head_dim, dtype=BF16, device=ctx.device)
          for _ in range(s.layers)]
    cv = [torch.randn_like(c) for c in ck]
    tokens = torch.randint(0, s.vocab, (batch, 1), device=ctx.device)
    pos = torch.tensor([kv_len - 1], device=ctx.device)
    cos, sin = rope_tables(s, pos)

    def step() -> torch.Tensor:
        return model.forward(tokens, ck, cv, pos, cos, sin, prefill=False)

    return step


def e2e_decode_case(ctx: Ctx, model: Llama, batch: int, kv_len: int) -> None:
    """One decode step (the token at position kv_len - 1), eager and CUDA-graph replayed."""
    s = model.s
    step = decode_step(ctx, model, batch, kv_len)
    common = dict(batch=batch, kv_len=kv_len, q_heads=s.q_heads, kv_heads=s.kv_heads,
                  head_dim=s.head_dim)
    t, reps = time_fn(ctx, step, cold=False, budget_s=0.4, max_reps=50)
    record(ctx, ctx.set_name, "e2e_decode", f"decode_step_b{batch}_l{kv_len}_eager", t, reps,
           mode="eager", **common)
    if ctx.cuda:
        g = capture(ctx, step)
        t, reps = time_fn(ctx, g.replay, cold=False, budget_s=0.4, max_reps=50)
        record(ctx, ctx.set_name, "e2e_decode", f"decode_step_b{batch}_l{kv_len}_graph", t,
               reps, mode="graph", **common)
    ctx.sync()


def e2e_prefill_case(ctx: Ctx, model: Llama, length: int, *, name: str | None = None, **extra) -> None:
    """One prompt of ``length`` tokens at batch 1 (eager), logits of the last position; the row named
    ``name`` (default ``prefill_b1_l{length}``), ``extra`` in its extra column (sweep.py: the model's shape)."""
    s = model.s
    ck = [torch.empty(1, s.kv_heads, length, s.head_dim, dtype=BF16, device=ctx.device)
          for _ in range(s.layers)]
    cv = [torch.empty_like(c) for c in ck]
    tokens = torch.randint(0, s.vocab, (1, length), device=ctx.device)
    pos = torch.arange(length, device=ctx.device)
    cos, sin = rope_tables(s, pos)

    def fwd() -> torch.Tensor:
        return model.forward(tokens, ck, cv, pos, cos, sin, prefill=True)

    t, reps = time_fn(ctx, fwd, cold=False, budget_s=1.0, min_reps=3, max_reps=20)
    record(ctx, ctx.set_name, "e2e_prefill", name or f"prefill_b1_l{length}", t, reps, batch=1,
           seq_len=length, q_heads=s.q_heads, kv_heads=s.kv_heads, head_dim=s.head_dim,
           mode="eager", **extra)


# ---------------------------------------------------------------- driver


def environment(ctx: Ctx) -> dict:
    env = {"torch": torch.__version__, "cuda": str(torch.version.cuda), "device": "cpu",
           "driver": "", "sms": "", "l2_bytes": "", "memory_bytes": "",
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if ctx.cuda:
        p = torch.cuda.get_device_properties(ctx.device)
        env.update(device=p.name, sms=p.multi_processor_count,
                   l2_bytes=getattr(p, "L2_cache_size", ""), memory_bytes=p.total_memory)
        try:
            env["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem",
                 "--format=csv,noheader"], capture_output=True, text=True, timeout=20,
            ).stdout.strip().replace(",", " /")
        except (OSError, subprocess.SubprocessError):
            env["driver"] = "unknown"
    return env


def holdout_rows(ctx: Ctx) -> None:
    """Shapes measured after the GPU model was frozen (set ``holdout``): a check on shapes
    nobody looked at while building it. Same kernels as the prediction set."""
    if ctx.tiny:
        return
    ctx.set_name = "holdout"
    for m, n, k in [(1, 8192, 8192), (64, 28672, 8192), (1000, 8192, 8192), (3000, 1024, 4096),
                    (4096, 8192, 28672), (256, 57344, 8192)]:
        x = torch.randn(m, k, dtype=BF16, device=ctx.device)
        w = torch.randn(n, k, dtype=BF16, device=ctx.device)
        t, reps = time_fn(ctx, lambda x=x, w=w: F.linear(x, w))
        record(ctx, "holdout", "gemm", f"holdout_gemm_{m}x{n}x{k}", t, reps, m=m, n=n, k=k,
               flops=2 * m * n * k, bytes=2 * (m * k + n * k + m * n))
    for batch, kv_len, hq, hkv in [(2, 16384, 32, 8), (8, 65536, 32, 8), (32, 16384, 32, 8),
                                   (128, 4096, 32, 8), (3, 50000, 32, 8), (1, 32768, 64, 8),
                                   (16, 8192, 64, 8), (4, 8192, 8, 1)]:
        holdout_decode(ctx, batch, kv_len, hq, hkv)
    for batch, length, hq, hkv in [(2, 3000, 32, 8), (1, 12288, 32, 8), (8, 2048, 32, 8),
                                   (1, 8192, 64, 8)]:
        q = torch.randn(batch, hq, length, 128, dtype=BF16, device=ctx.device)
        k = torch.randn(batch, hkv, length, 128, dtype=BF16, device=ctx.device)
        t, reps = time_fn(ctx, lambda q=q, k=k: sdpa(q, k, k, True))
        record(ctx, "holdout", "attn_prefill", f"holdout_prefill_attn_b{batch}_l{length}_h{hq}x{hkv}", t, reps,
               batch=batch, seq_len=length, kv_len=length, q_heads=hq, kv_heads=hkv, head_dim=128)
    model = Llama(LlamaShape(), ctx.device)
    for batch, kv_len in [(16, 16384), (4, 65536), (256, 512)]:
        e2e_decode_case(ctx, model, batch, kv_len)
        torch.cuda.empty_cache()
    for length in (2048, 8192):
        e2e_prefill_case(ctx, model, length)
        torch.cuda.empty_cache()
    ctx.set_name = "prediction"


def holdout_decode(ctx: Ctx, batch: int, kv_len: int, hq: int, hkv: int) -> None:
    q = torch.randn(batch, hq, 1, 128, dtype=BF16, device=ctx.device)
    k = torch.randn(batch, hkv, kv_len, 128, dtype=BF16, device=ctx.device)
    v = torch.randn_like(k)
    t, reps = time_fn(ctx, lambda: sdpa(q, k, v, False))
    record(ctx, "holdout", "attn_decode", f"holdout_decode_attn_b{batch}_l{kv_len}_h{hq}x{hkv}", t, reps,
           batch=batch, kv_len=kv_len, q_heads=hq, kv_heads=hkv, head_dim=128)


SECTIONS = {"latency": latency_rows, "copy": copy_rows, "gemm": gemm_rows, "norm": norm_rows, "launch": launch_rows,
            "prefill": prefill_attention_rows, "decode": decode_attention_rows,
            "kascade": kascade_rows, "e2e": e2e_rows, "holdout": holdout_rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (CPU smoke test)")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = ap.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ctx = Ctx(device=device, tiny=args.tiny)
    torch.manual_seed(0)
    ctx.env = environment(ctx)
    ctx.env["sdpa_backend"] = pick_sdpa_backend(ctx)
    print(ctx.env, flush=True)
    if ctx.cuda:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        ctx.flush_buf = torch.zeros(64 << 20, dtype=torch.float32, device=device)
    run_sections({name: functools.partial(fn, ctx) for name, fn in SECTIONS.items()}, args.only,
                 lambda: write(args.out, ctx))
    return 0


def run_sections(sections: dict[str, Callable[[], None]], only: str, after: Callable[[], None]) -> None:
    """Run the comma-separated ``only`` sections in order without autograd; a failing section is
    reported and the others still run. ``after`` (writing the rows so far) follows each section."""
    for name in only.split(","):
        start = time.perf_counter()
        try:
            with torch.no_grad():
                sections[name]()
        except Exception as exc:  # keep every other section's rows
            print(f"section {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"# section {name}: {time.perf_counter() - start:.1f} s", flush=True)
        after()


def write(path: str, ctx: Ctx) -> None:
    env_keys = list(ctx.env)
    fields = ["set", "kind", "name", "median_us", "reps", *SHAPE_KEYS, "extra", *env_keys]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for row in ctx.rows:
            w.writerow({**row, **ctx.env})


if __name__ == "__main__":
    sys.exit(main())
