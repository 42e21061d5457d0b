"""Time and allocation of one SnapStream decode step (append + attend): ring buffer vs naive.

The ring buffer writes the new token with one in-place scatter; the naive cache rebuilds
``[sink | recent | top-K]`` by concatenation every step. Both attend over the same C slots.

Shapes (``--shape``):
  mla  B=4, one latent KV head, Dk=576 (512 latent + 64 RoPE), Dv=512, 16 query heads
       (DeepSeek-style MLA decode, one socket's share of the heads)
  gqa  B=4, 8 KV heads, 32 query heads, head dim 128 (Llama-3-8B-like)

Slots C (``--slots``, default 8K, 16K, 32K) split as sink 4, top-K C/2, ring the rest. The
prompt holds exactly C tokens, so every slot is filled.

Allocation: on CPU, the bytes of every tensor storage allocated during a step, from
``torch.profiler`` memory events; on CUDA, the caching allocator's ``allocated_bytes`` counter
(gross) and the peak above the step's starting point.

Usage: python benchmarks/kv_update.py [--device cuda] [--out results.csv]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import time
from collections.abc import Callable

import torch

from rdusim.kernels import NaiveSnapStreamCache, SlotCache, SnapStreamCache
from rdusim.units import MiB

SHAPES = {  # kv_heads, q_heads, key_dim, value_dim
    "mla": (1, 16, 576, 512),
    "gqa": (8, 32, 128, 128),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="mla")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--slots", type=int, nargs="+", default=[8192, 16384, 32768])
    parser.add_argument(
        "--dtype", choices=sorted(DTYPES), help="default float32 on CPU, bfloat16 on CUDA"
    )
    parser.add_argument("--steps", type=int, help="timed steps (default 10 CPU, 100 CUDA)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", help="write the table as CSV to this path")
    return parser.parse_args()


def build_cache(
    cls: type[SnapStreamCache] | type[NaiveSnapStreamCache],
    args: argparse.Namespace,
    slots: int,
    dtype: torch.dtype,
) -> SlotCache:
    """A SnapStream cache (ring or naive) over a random prompt of ``slots`` tokens, seeded by
    ``slots`` so both implementations see the same prompt."""
    hkv, hq, dk, dv = SHAPES[args.shape]
    gen = torch.Generator(device=args.device).manual_seed(slots)
    like = {"device": args.device, "dtype": dtype, "generator": gen}
    keys = torch.randn(args.batch, hkv, slots, dk, **like)
    values = torch.randn(args.batch, hkv, slots, dv, **like)
    # Only the last `window` query rows are read at prefill: a broadcast view saves memory.
    queries = torch.randn(args.batch, hq, 1, dk, **like).expand(args.batch, hq, slots, dk)
    lengths = torch.full((args.batch,), slots, dtype=torch.int64, device=args.device)
    topk = slots // 2
    params = {"sink": 4, "recent": slots - 4 - topk, "topk": topk, "window": 32, "pool": 7}
    return cls.from_prefill(keys, values, queries, lengths, **params)


def new_token(cache: SlotCache, q_heads: int) -> tuple[torch.Tensor, ...]:
    b, hkv, _, dk = cache.keys.shape
    like = {"device": cache.keys.device, "dtype": cache.keys.dtype}
    return (
        torch.randn(b, hkv, 1, dk, **like),
        torch.randn(b, hkv, 1, cache.values.shape[3], **like),
        torch.randn(b, q_heads, 1, dk, **like),
    )


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Seconds one call of ``fn`` takes, synchronized on CUDA."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def allocated(fn: Callable[[], object], device: torch.device) -> tuple[int, int]:
    """(gross bytes allocated, peak bytes above the start) during one call of ``fn``."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        gross = torch.cuda.memory_stats(device)["allocated_bytes.all.allocated"]
        fn()
        torch.cuda.synchronize(device)
        stats = torch.cuda.memory_stats(device)
        return stats["allocated_bytes.all.allocated"] - gross, stats[
            "allocated_bytes.all.peak"
        ] - start
    with torch.profiler.profile(profile_memory=True) as prof:
        fn()
    # Self usage: an op's own allocations (minus its frees), children excluded, so nested
    # events (matmul -> bmm) are not counted twice; frees outside ops appear as negatives.
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    sizes = [e.self_cpu_memory_usage for e in events if e.self_cpu_memory_usage != 0]
    return sum(s for s in sizes if s > 0), max([0, *itertools.accumulate(sizes)])


def measure(cache: SlotCache, args: argparse.Namespace) -> dict[str, float]:
    """Median append / attend / step seconds and per-step bytes of one cache."""
    device, hq = torch.device(args.device), SHAPES[args.shape][1]
    steps = args.steps or (100 if device.type == "cuda" else 10)
    times: dict[str, list[float]] = {"append": [], "attend": []}
    for i in range(args.warmup + steps):
        k_new, v_new, q_new = new_token(cache, hq)
        append_s = timed(lambda: cache.append(k_new, v_new), device)  # noqa: B023
        attend_s = timed(lambda: cache.attend(q_new), device)  # noqa: B023
        if i >= args.warmup:
            times["append"].append(append_s)
            times["attend"].append(attend_s)
    k_new, v_new, q_new = new_token(cache, hq)
    append_bytes, append_peak = allocated(lambda: cache.append(k_new, v_new), device)
    attend_bytes, attend_peak = allocated(lambda: cache.attend(q_new), device)
    row = {f"{part}_ms": 1e3 * statistics.median(times[part]) for part in times}
    row["step_ms"] = row["append_ms"] + row["attend_ms"]
    row |= {"append_bytes": append_bytes, "attend_bytes": attend_bytes}
    row |= {"step_bytes": append_bytes + attend_bytes, "peak_bytes": max(append_peak, attend_peak)}
    return row


def run(args: argparse.Namespace) -> list[dict[str, object]]:
    dtype = DTYPES[args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")]
    rows: list[dict[str, object]] = []
    for slots in args.slots:
        for impl, cls in (("ring", SnapStreamCache), ("naive", NaiveSnapStreamCache)):
            cache = build_cache(cls, args, slots, dtype)
            head = {"device": args.device, "shape": args.shape, "dtype": str(dtype)[6:]}
            head |= {"batch": args.batch, "slots": slots, "impl": impl}
            rows.append(head | measure(cache, args))
            del cache  # free this cache before the next one is built
    return rows


def print_table(rows: list[dict[str, object]]) -> None:
    print(
        f"{'slots':>6} {'impl':>5} {'append ms':>10} {'attend ms':>10} {'step ms':>9} "
        f"{'append MiB':>11} {'attend MiB':>11} {'step MiB':>9} {'peak MiB':>9}"
    )
    for r in rows:
        print(
            f"{r['slots']:>6} {r['impl']:>5} {r['append_ms']:>10.3f} {r['attend_ms']:>10.3f} "
            f"{r['step_ms']:>9.3f} {r['append_bytes'] / MiB:>11.3f} "
            f"{r['attend_bytes'] / MiB:>11.3f} {r['step_bytes'] / MiB:>9.3f} "
            f"{r['peak_bytes'] / MiB:>9.3f}"
        )
    for ring, naive in zip(rows[::2], rows[1::2], strict=True):
        print(
            f"ring/naive at {ring['slots']} slots: time {ring['step_ms'] / naive['step_ms']:.3f}, "
            f"bytes {ring['step_bytes'] / max(naive['step_bytes'], 1):.4f}"
        )


def main() -> None:
    args = parse_args()
    rows = run(args)
    print_table(rows)
    if args.out:
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
