"""Why a small kernel runs longer inside a step than timed alone: its code or its data (run bc).

Run aw's profiled TP4 shard (docs/gpu.md, "Run aw by kernel type") has PyTorch's non-vectorised
elementwise kernels 0.3-0.56 us longer inside a graph step than the model, which was fitted on the
same kernels timed alone, repeated; the longer the kernel's chain (min(4, ceil(N / 128)) elements a
thread), the larger the excess, and a one-element chain is at or under the model. This script times
test kernels (CUPTI kernel durations under torch.profiler, inside CUDA graphs) after different
predecessors, each a way a step differs from a repeated call:

- ``alone``: the test kernel repeated (the calibration's condition);
- ``code``: 41 unary ops (35 torch functions, 6 functional ones and their copies) on a 16 KB tensor before each call (other kernels' code through
  the SMs' instruction caches; almost no data);
- ``data``: a 256 MiB write before each call (L2's lines replaced, the test's input among them;
  one small kernel's code);
- ``code_data``: both;
- ``fresh``: a copy that writes the test's input just before it (as a step's producer does);
- ``gemm``: Llama-3.1-8B's TP4 QKV GEMM at batch 1 before each call (a real predecessor);
- ``pages_1g``, ``pages_16g`` (run bd): one byte read from every 2 MiB page of a 1 GiB or 16 GiB buffer
  (512 or 8192 pages: the GPU's address translations replaced, a few hundred KB of data);
- ``cold_all``, ``cold_dst`` (run bg): a 256 MiB read before each call (L2's lines replaced, none
  left dirty), then for ``cold_dst`` a copy that writes the test's input again: the input in L2,
  the output not (a step's activations are written into buffers last used a layer earlier);
- ``fresh_kernel``, ``producer_gemm`` (runs bh, bi; run bi's views: ``VIEW_TESTS``): the test's input written just before it by a kernel
  (an elementwise add of zero into it), or, for the step's RoPE tests, by the QKV GEMM itself
  (batch 8 x 4096 against 1536 x 4096, into the QKV buffer the test reads);
- ``l1_flush`` (run bj): a reduction in which every one of 2640 rows reads the same 256 KB buffer
  (a stride-0 view), so every SM streams it through its L1; 256 KB of L2 touched.

Measure (one GPU; torch only): ``python benchmarks/gpu/code_fetch.py --out bc.csv [--contexts alone,code,...]``.
Analyse (CPU, the standard library only): ``--analyse CSV`` prints the median duration a test and
context, and each context minus ``alone``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import gzip
import statistics
import sys

CONTEXTS = ("alone", "code", "data", "code_data", "fresh", "gemm", "pages_1g", "pages_16g", "cold_all", "cold_dst",
            "fresh_kernel", "producer_gemm", "l1_flush")
#: (name, elements a call): the negation of a strided half (the rotary embedding's operand,
#: elementwise_kernel<128, 4>: a thread runs min(4, ceil(N / 128)) elements), a vectorised add, RMSNorm
TESTS = (
    ("neg_strided_128", 128),
    ("neg_strided_256", 256),
    ("neg_strided_512", 512),
    ("neg_strided_4096", 4096),
    ("add_vectorised_4096", 4096),
    ("rms_norm_4096", 4096),
)
#: run bf: the negation at 512 elements (4 a thread) on strided views of 2, 3 and 4 dimensions that
#: TensorIterator cannot coalesce, and the step's own operands at Llama-3.1-8B TP4 batch 8 (12 heads
#: of 128 in the QKV output; q's 8 heads as a view): the negation of q's strided half and q * cos
DIM_TESTS = (
    ("neg_dims2_512", 512),
    ("neg_dims3_512", 512),
    ("neg_dims4_512", 512),
    ("neg_step_q_b8", 4096),
    ("mul_step_q_cos_b8", 8192),
)
#: run bi: the negation of the second halves of ``heads`` of 128 at batch 8, taken from a buffer of
#: ``of`` heads a row (the step's q: 8 of 12), with the producer fixed (``fresh_kernel``)
VIEW_TESTS = (
    ("neg_heads8_of8_b8", 4096),
    ("neg_heads8_of12_b8", 4096),
    ("neg_heads8_of16_b8", 4096),
    ("neg_heads12_of12_b8", 6144),
    ("neg_heads8_of12_b1", 512),
)
GROUPS = 60
REPS = 3
FIELDS = ["context", "test", "elements", "rep", "group", "kernel", "dur_us", "gap_us", "gpu"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--analyse", metavar="CSV")
    ap.add_argument("--contexts", default=",".join(CONTEXTS[:6]), help="comma-separated: " + ", ".join(CONTEXTS))
    ap.add_argument("--dims", action="store_true", help="run bf's tests (DIM_TESTS) instead of TESTS")
    ap.add_argument("--tests", help="comma-separated names of TESTS, DIM_TESTS and VIEW_TESTS (run bi's views), "
                    "instead of --dims / TESTS")
    args = ap.parse_args(argv)
    if args.analyse:
        return analyse(args.analyse)
    if not args.out:
        ap.error("--out is required (or --analyse)")
    contexts = [c for c in args.contexts.split(",") if c]
    if not contexts or any(c not in CONTEXTS for c in contexts):
        ap.error(f"--contexts: {args.contexts!r} (known: {', '.join(CONTEXTS)})")
    tests = DIM_TESTS if args.dims else TESTS
    if args.tests:
        known = dict(TESTS + DIM_TESTS + VIEW_TESTS)
        names = [t for t in args.tests.split(",") if t]
        if not names or any(t not in known for t in names):
            ap.error(f"--tests: {args.tests!r} (known: {', '.join(known)})")
        tests = tuple((t, known[t]) for t in names)
    return _run(args.out, contexts, tests)


def _run(out: str, contexts: list[str], tests: tuple) -> int:  # pragma: no cover - needs a GPU
    import torch

    before, made = _setup(torch)
    gpu = torch.cuda.get_device_name()
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        for name, n in tests:
            call, operand = made[name]
            for context in contexts:
                fns = before(context, operand)
                for rep, kernels in enumerate(_profiled_replays(torch, fns + [call])):
                    _write_group_rows(writer, kernels, context=context, test=name, elements=n, rep=rep, gpu=gpu)
                fh.flush()
                print(f"{name:22s} {context:10s} done", flush=True)
    return 0


def _setup(torch):  # pragma: no cover - needs a GPU
    """(before(context, operand) -> the predecessors' callables, {test: (call, its input)})."""
    import torch.nn.functional as F

    dev, bf16 = torch.device("cuda"), torch.bfloat16
    small = torch.rand(4096, device=dev) * 0.5 + 0.25  # fp32, 16 KB, values in every op's domain
    unary = [torch.sin, torch.cos, torch.tan, torch.exp, torch.exp2, torch.expm1, torch.log, torch.log2,
             torch.log10, torch.log1p, torch.sqrt, torch.rsqrt, torch.abs, torch.sigmoid, torch.tanh,
             torch.erf, torch.erfc, torch.erfinv, torch.lgamma, torch.digamma, torch.sinh, torch.cosh,
             torch.asin, torch.acos, torch.atan, torch.asinh, torch.atanh, torch.reciprocal, torch.ceil,
             torch.floor, torch.round, torch.trunc, torch.frac, torch.sign, torch.sgn]
    functional = [F.gelu, F.silu, F.mish, F.softplus, F.hardswish, torch.relu]
    sink = [torch.empty_like(small) for _ in unary + functional]
    big = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    w_qkv = torch.randn(1536, 4096, dtype=bf16, device=dev)  # Llama-3.1-8B qkv at TP4: (32 + 16) / 4 x 128
    h = torch.randn(1, 4096, dtype=bf16, device=dev)
    h8 = torch.randn(8, 4096, dtype=bf16, device=dev)
    l1_src = torch.ones(128 << 10, dtype=bf16, device=dev)  # 256 KB, every SM's L1 or more
    l1_sum = torch.empty(2640, dtype=bf16, device=dev)
    qkv_out = torch.empty(1, 1536, dtype=bf16, device=dev)
    pages = {c: torch.ones(size << 30, dtype=torch.uint8, device=dev) for c, size in (("pages_1g", 1), ("pages_16g", 16))}
    page_sum = torch.empty((), dtype=torch.int64, device=dev)

    def code() -> None:
        for fn, s in zip(unary, sink, strict=False):
            fn(small, out=s)
        for fn, s in zip(functional, sink[len(unary):], strict=True):
            s.copy_(fn(small))

    def before(context: str, operand) -> list:
        src = operand.clone()
        return {
            "alone": [],
            "code": [code],
            "data": [lambda: big.fill_(1)],
            "code_data": [code, lambda: big.fill_(1)],
            "fresh": [lambda: operand.copy_(src)],
            "gemm": [lambda: torch.matmul(h, w_qkv.t(), out=qkv_out)],
            # one byte every 2 MiB: a strided reduction of 512 or 8192 elements
            "pages_1g": [lambda: torch.sum(pages["pages_1g"][:: 2 << 20], 0, dtype=torch.int64, out=page_sum)],
            "pages_16g": [lambda: torch.sum(pages["pages_16g"][:: 2 << 20], 0, dtype=torch.int64, out=page_sum)],
            # a read of 256 MiB (no dirty lines left), then for cold_dst the input written again
            "cold_all": [lambda: torch.sum(big, 0, dtype=torch.int64, out=page_sum)],
            "cold_dst": [lambda: torch.sum(big, 0, dtype=torch.int64, out=page_sum), lambda: operand.copy_(src)],
            "fresh_kernel": [lambda: torch.add(src, 0, out=operand)],
            "l1_flush": [lambda: torch.sum(l1_src.expand(2640, l1_src.numel()), 1, out=l1_sum)],
            "producer_gemm": [lambda: torch.matmul(h8, w_qkv.t(), out=operand.view(8, 1536))]
            if operand.numel() == 8 * 1536 else [lambda: torch.add(src, 0, out=operand)],
        }[context]

    made = _dim_tests(torch, dev, bf16)
    for name, n in TESTS:
        if name.startswith("neg"):
            base = torch.randn(n // 64, 128, dtype=bf16, device=dev)
            dst = torch.empty(n // 64, 64, dtype=bf16, device=dev)
            made[name] = (functools.partial(torch.neg, base[..., 64:], out=dst), base)
        elif name.startswith("add"):
            a, b = (torch.randn(n, dtype=bf16, device=dev) for _ in range(2))
            made[name] = (functools.partial(torch.add, a, b, out=torch.empty_like(a)), a)
        else:
            xn = torch.randn(1, n, dtype=bf16, device=dev)
            made[name] = (functools.partial(F.rms_norm, xn, (n,), torch.randn(n, dtype=bf16, device=dev), 1e-5), xn)
    return before, made


def _dim_tests(torch, dev, bf16) -> dict:  # pragma: no cover - needs a GPU
    """Run bf's tests: {name: (call, its input)} (``DIM_TESTS``)."""
    made = {}
    for name, base, view in (
        ("neg_dims2_512", (8, 128), lambda b: b[..., 64:]),
        ("neg_dims3_512", (2, 12, 128), lambda b: b[:, :4, 64:]),
        ("neg_dims4_512", (2, 3, 3, 128), lambda b: b[:, :2, :2, 64:]),
    ):
        b = torch.randn(*base, dtype=bf16, device=dev)
        x = view(b)
        made[name] = (functools.partial(torch.neg, x, out=torch.empty(x.shape, dtype=bf16, device=dev)), b)
    qkv = torch.randn(8, 1, 12 * 128, dtype=bf16, device=dev)  # (batch, 1, (8 + 2 + 2) x 128)
    q = qkv.view(8, 1, 12, 128).transpose(1, 2)[:, :8]  # (8, 8, 1, 128), a view
    half = q[..., 64:]
    made["neg_step_q_b8"] = (functools.partial(torch.neg, half, out=torch.empty(half.shape, dtype=bf16, device=dev)),
                             qkv)
    for name, _ in VIEW_TESTS:
        heads, of, batch = (int(v) for v in name.removeprefix("neg_heads").replace("_of", " ").replace("_b", " ").split())
        buf = torch.randn(batch, of, 128, dtype=bf16, device=dev)
        x = buf[:, :heads, 64:]
        made[name] = (functools.partial(torch.neg, x, out=torch.empty(x.shape, dtype=bf16, device=dev)), buf)
    cos = torch.randn(1, 1, 1, 128, dtype=bf16, device=dev)
    made["mul_step_q_cos_b8"] = (functools.partial(torch.mul, q, cos, out=torch.empty(q.shape, dtype=bf16, device=dev)),
                                 qkv)
    return made


def _profiled_replays(torch, fns: list) -> list[list[dict]]:  # pragma: no cover - needs a GPU
    """``GROUPS`` x ``fns`` (the test last) captured to one graph; ``REPS`` replays under the profiler:
    each replay's kernels."""
    from torch.profiler import ProfilerActivity, profile

    def group() -> None:
        for fn in fns:
            fn()

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            group()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GROUPS):
            group()
    graph.replay()
    torch.cuda.synchronize()
    out = []
    for rep in range(REPS):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            graph.replay()
            torch.cuda.synchronize()
        out.append(_kernels(prof, f"/tmp/bc-{rep}.json"))
    del graph
    return out


def _write_group_rows(writer, kernels: list[dict], **row) -> None:
    """One row a group: its last kernel (the test), its duration and the gap after the kernel before."""
    per = len(kernels) // GROUPS
    if per == 0 or per * GROUPS != len(kernels):
        print(f"{row['test']} {row['context']}: {len(kernels)} kernels for {GROUPS} groups", flush=True)
        return
    for g in range(GROUPS):
        i = g * per + per - 1
        k = kernels[i]
        gap = k["ts"] - (kernels[i - 1]["ts"] + kernels[i - 1]["dur"]) if i > 0 else float("nan")
        writer.writerow({**row, "group": g, "kernel": k["name"][:120], "dur_us": round(k["dur"], 3),
                         "gap_us": round(gap, 3)})


def _kernels(prof, path: str) -> list[dict]:  # pragma: no cover - needs a GPU
    """The kernels of a profiled replay, in start order (the Chrome trace's ``kernel`` events)."""
    import json
    import os

    prof.export_chrome_trace(path)
    with open(path) as fh:
        events = json.load(fh)["traceEvents"]
    os.remove(path)
    return sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])


def analyse(path: str) -> int:
    rows: dict[tuple[str, str], list[float]] = {}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as fh:
        for r in csv.DictReader(fh):
            rows.setdefault((r["test"], r["context"]), []).append(float(r["dur_us"]))
    tests = list(dict.fromkeys(t for t, _ in rows))
    print("| test | " + " | ".join(CONTEXTS) + " |")
    print("|---|" + "---:|" * len(CONTEXTS))
    for t in tests:
        base = statistics.median(rows[(t, "alone")]) if (t, "alone") in rows else float("nan")
        cells = []
        for c in CONTEXTS:
            if (t, c) not in rows:
                cells.append("-")
                continue
            m = statistics.median(rows[(t, c)])
            cells.append(f"{m:.2f}" if c == "alone" else f"{m:.2f} ({m - base:+.2f})")
        print(f"| {t} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
