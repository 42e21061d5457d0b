"""Where an eager TP prefill step's host time goes, call by call (runs cl, cm and cn).

``collectives.py``'s eager TP prefill of 1K-2K tokens runs host-paced at 1.16-1.25 ms a layer on
two and four H200s (Llama-3.1-8B TP2 / TP4, Llama-3.1-70B TP4: runs ac, an, az), about twice what
the GPU document's per-op host costs give (``launch.eager_ops``, measured with ``measure.py``'s
single-GPU forward; single-GPU prefills of 1K-2K are host-paced within 3-10% of them). This script
runs the same step (``collectives._tp_step``'s calls, one for one) with a host timer around every
call site, in three variants:

- ``tp``: as ``collectives.py`` runs it (two ``torch.distributed.all_reduce`` a layer);
- ``noar``: the same process and process group, the two all-reduces left out;
- ``single``: one GPU, no process group at all (``--single``, run alone: ``python tp_host.py``).

Each trial is ``collectives._timed``'s: a barrier (``tp`` / ``noar``), a synchronize, CUDA events
around one step; besides the GPU time it records the host's time from the step's first call to its
last (``host_us``), per call site the host time summed over the layers, and its slowest layer. One
CSV row a trial. ``--ahead-ms`` puts a GPU sleep that long before each step's start event, so every call
of the step is made with the GPU behind (variants ``<kind>-ahead``, run cm); with ``--alternate`` the
trials alternate between no sleep and the sleep, so the host's drift lands on both states alike (run cn).
What the three runs found: docs/gpu.md, "Runs cl, cm and cn" (the 1K step's pace is the lent host's speed
on the day, not the GPU's state).

Measure (two H200s)::

    torchrun --standalone --nproc_per_node 2 benchmarks/gpu/tp_host.py --out cl-tp2.csv
    python benchmarks/gpu/tp_host.py --single --world 2 --out cl-single.csv

``--analyse CSV...`` (CPU) prints each variant's median GPU and host time a layer and its sites'
host times a layer; ``--verdict`` adds the checks registered before run cl
(``h200x2-20261130cl-tp-host-hypotheses.md``), ``--verdict-cm`` those of runs cm and cn (``-cm-``,
``-cn-host-state-hypotheses.md``). ``--tiny`` runs a two-layer model on the CPU (gloo) to smoke-test
the script.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

#: the call sites of one layer (``collectives._tp_step``), then the step's head
SITES = ("rms_norm1", "qkv", "rope_q", "rope_k", "index_copy", "sdpa", "o_proj", "all_reduce1", "add1",
         "rms_norm2", "gate_up", "silu_mul_down", "all_reduce2", "add2")
FIELDS = ["variant", "ranks", "layers", "seq_len", "trial", "gpu_us", "host_us", *SITES, "embedding", "head",
          "slowest_layer"]
LENGTHS = (1024, 2048, 4096)
SM_HZ = 1.98e9  # the H200's SM clock (h200-20261130cl-env.txt: clocks.max.sm), for --ahead's sleep
REPS = 10


def step_fn(model, length, world, device, dist, torch, *, F, BF16, rope_tables, sdpa,  # noqa: PLR0915 (one
            all_reduce: bool):  # straight sequence of calls, collectives._tp_step's, a stamp after each)
    """``collectives._tp_step``'s prefill of ``length`` tokens, each call site timed on the host:
    returns ``step() -> {site: ns summed over the layers}``."""
    s = model.s
    batch, t = 1, length
    ck = [torch.randn(batch, s.kv_heads, length, s.head_dim, dtype=BF16, device=device) for _ in range(s.layers)]
    cv = [torch.randn_like(c) for c in ck]
    tokens = torch.randint(0, s.vocab, (batch, t), device=device)
    pos = torch.arange(length, device=device)
    cos, sin = rope_tables(s, pos)
    logits = torch.empty(batch, 1, s.vocab * world, dtype=BF16, device=device)
    clock = time.perf_counter_ns

    def step() -> dict[str, int]:
        spent = dict.fromkeys((*SITES, "embedding", "head", "slowest_layer"), 0)
        t0 = clock()
        x = F.embedding(tokens, model.embed)
        t1 = clock()
        spent["embedding"] += t1 - t0
        for layer, k_cache, v_cache in zip(model.layers, ck, cv, strict=True):
            t0 = clock()
            h = F.rms_norm(x, (s.hidden,), layer["norm1"], 1e-5)
            t1 = clock()
            qkv = F.linear(h, layer["wqkv"]).view(batch, t, s.q_heads + 2 * s.kv_heads, s.head_dim).transpose(1, 2)
            t2 = clock()
            q = model.rope(qkv[:, : s.q_heads], cos, sin)
            t3 = clock()
            k = model.rope(qkv[:, s.q_heads : s.q_heads + s.kv_heads], cos, sin)
            t4 = clock()
            v = qkv[:, s.q_heads + s.kv_heads :]
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            t5 = clock()
            o = sdpa(q, k, v, True)
            t6 = clock()
            o = F.linear(o.transpose(1, 2).reshape(batch, t, s.q_heads * s.head_dim), layer["wo"])
            t7 = clock()
            if all_reduce:
                dist.all_reduce(o)
            t8 = clock()
            x = x + o
            t9 = clock()
            h = F.rms_norm(x, (s.hidden,), layer["norm2"], 1e-5)
            t10 = clock()
            gu = F.linear(h, layer["wgu"])
            t11 = clock()
            d = F.linear(F.silu(gu[..., : s.ffn]) * gu[..., s.ffn :], layer["wd"])
            t12 = clock()
            if all_reduce:
                dist.all_reduce(d)
            t13 = clock()
            x = x + d
            t14 = clock()
            for site, a, b in zip(SITES, (t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13),
                                  (t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14), strict=True):
                spent[site] += b - a
            spent["slowest_layer"] = max(spent["slowest_layer"], t14 - t0)
        t0 = clock()
        h = F.rms_norm(x[:, -1:], (s.hidden,), model.norm, 1e-5)
        part = F.linear(h, model.lm_head).contiguous().view(-1)
        if dist is not None:
            dist.all_gather_into_tensor(logits.view(-1), part)
        spent["head"] += clock() - t0
        return spent

    return step


def timed_trials(torch, dist, step, reps: int, cuda: bool, ahead_ms: float = 0.0,
                 alternate: bool = False) -> list[tuple[float, float, float, dict[str, int]]]:
    """``collectives._timed``'s trials, each (its sleep in ms, GPU us, host us, sites' ns): a barrier
    (with a process group), a synchronize, events around one step; three warm-up steps first. With
    ``ahead_ms`` a GPU sleep that long (at 1.98 GHz) before the start event: the host calls the
    whole step with the GPU behind it (run cm); with ``alternate`` too, the trials alternate between
    no sleep and that sleep, ``reps`` of each (run cn: the host's drift lands on both alike)."""
    for _ in range(3):
        step()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    out = []
    sleeps = [0.0, ahead_ms] * reps if alternate else [ahead_ms] * reps
    for sleep_ms in sleeps:
        if dist is not None:
            dist.barrier()
        sync()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if sleep_ms:
                torch.cuda._sleep(int(sleep_ms * 1e-3 * SM_HZ))
            start.record()
        h0 = time.perf_counter_ns()
        spent = step()
        h1 = time.perf_counter_ns()
        if cuda:
            end.record()
        sync()
        gpu = start.elapsed_time(end) * 1e3 if cuda else (h1 - h0) / 1e3
        out.append((sleep_ms, gpu, (h1 - h0) / 1e3, spent))
    return out


def _setup(args: argparse.Namespace, torch):  # pragma: no cover - needs GPUs (or --tiny on a CPU)
    """The process: (torch.distributed or None, world, rank, device)."""
    cuda = not args.tiny
    if args.single:
        if cuda:
            torch.cuda.set_device(0)
        return None, args.world, 0, torch.device("cuda" if cuda else "cpu")
    import torch.distributed as dist  # noqa: PLC0415

    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if cuda else "gloo")
    return dist, dist.get_world_size(), int(os.environ.get("RANK", "0")), torch.device("cuda" if cuda else "cpu")


def run(args: argparse.Namespace) -> int:  # pragma: no cover - needs GPUs (or --tiny on a CPU)
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from collectives import LLAMA_8B_SPLITS  # noqa: PLC0415
    from measure import (  # noqa: PLC0415
        BF16,
        TINY_LLAMA,
        Ctx,
        Llama,
        LlamaShape,
        pick_sdpa_backend,
        rope_tables,
        sdpa,
    )

    cuda = not args.tiny
    dist, world, rank, device = _setup(args, torch)
    if cuda:
        pick_sdpa_backend(Ctx(device, tiny=False))
        split = {k: v // world for k, v in LLAMA_8B_SPLITS.items()}
        shape = LlamaShape(layers=32, hidden=4096, q_heads=split["heads"], kv_heads=split["KV heads"],
                           ffn=split["FFN"], vocab=split["vocabulary"])
        lengths = tuple(int(v) for v in args.lengths.split(","))
    else:
        s = TINY_LLAMA
        shape = LlamaShape(layers=s.layers, hidden=s.hidden, q_heads=s.q_heads // world, kv_heads=s.kv_heads // world,
                           head_dim=s.head_dim, ffn=s.ffn // world, vocab=s.vocab // world)
        lengths = (16, 32)
    model = Llama(shape, device)
    fh = open(args.out, "w", newline="") if rank == 0 else None  # closed below; flushed a row at a time
    out = csv.DictWriter(fh, fieldnames=FIELDS) if fh else None
    if out:
        out.writeheader()
    with torch.no_grad():
        for length in lengths:
            for kind in ("single",) if args.single else ("tp", "noar"):
                step = step_fn(model, length, world, device, dist, torch, F=torch.nn.functional, BF16=BF16,
                               rope_tables=rope_tables, sdpa=sdpa, all_reduce=kind == "tp")
                trials = timed_trials(torch, dist, step, args.reps, cuda, args.ahead_ms, args.alternate)
                for trial, (ahead, gpu, host, spent) in enumerate(trials):
                    variant = f"{kind}-ahead" if ahead else kind
                    if out:
                        out.writerow({"variant": variant, "ranks": world, "layers": shape.layers, "seq_len": length,
                                      "trial": trial, "gpu_us": round(gpu, 1), "host_us": round(host, 1),
                                      **{k: round(v / 1e3, 1) for k, v in spent.items()}})
                        fh.flush()
                if rank == 0:
                    print(f"{kind:6s} L{length:6d} done", flush=True)
                if cuda:
                    torch.cuda.empty_cache()
    if fh:
        fh.close()
    if cuda:
        torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)  # as collectives._exit: no destroy_process_group


def read(paths: list[Path]) -> dict[tuple[str, int, int], list[dict]]:
    """(variant, ranks, seq_len) -> its trials, each a dict of floats (a layer's sites in us)."""
    out: dict[tuple[str, int, int], list[dict]] = {}
    for path in paths:
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                key = (row["variant"], int(row["ranks"]), int(row["seq_len"]))
                # run cl's files have no slowest_layer (added for run cm): 0
                out.setdefault(key, []).append({k: float(row.get(k) or 0) for k in FIELDS[4:]}
                                               | {"layers": int(row["layers"])})
    return out


def analyse(paths: list[Path]) -> list[str]:
    """Each variant's medians a layer: GPU, host, and every site's host time."""
    data = read(paths)
    lines = ["| variant | GPUs | tokens | trials | GPU ms | host ms | GPU us a layer | host us a layer | "
             + " | ".join(SITES) + " | slowest layer us |", "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(SITES) + 1)]
    for (variant, ranks, length), trials in sorted(data.items(), key=lambda kv: (kv[0][2], kv[0][0])):
        n = trials[0]["layers"]
        med = {k: statistics.median(t[k] for t in trials) for k in FIELDS[4:]}
        lines.append(f"| {variant} | {ranks} | {length} | {len(trials)} | {med['gpu_us'] / 1e3:.2f} | "
                     f"{med['host_us'] / 1e3:.2f} | {med['gpu_us'] / n:.0f} | {med['host_us'] / n:.0f} | "
                     + " | ".join(f"{med[s] / n:.1f}" for s in SITES) + f" | {med['slowest_layer']:.0f} |")
    return lines


def a_layer(data: dict[tuple[str, int, int], list[dict]], variant: str, ranks: int, length: int, key: str) -> float:
    """The median over a row's trials of ``key`` (a sum over the layers), a layer."""
    trials = data[(variant, ranks, length)]
    return statistics.median(t[key] for t in trials) / trials[0]["layers"]


#: the GPU document's host costs of one layer's call sites (h200.yaml as it was before run dq: ``launch.eager_ops``
#: with the GPU behind, its idle table idle, ``collective_host`` for the all-reduces; ``rdusim.mapping.gpu.host_ops``):
#: 549.4 us behind, 646.8 us idle (registered before run cl)
MODEL_LAYER_US = (549.4, 646.8)
#: run an's Llama-3.1-8B TP2 1K prefill (h200x2-20261128an-tp2.csv), a layer
RUN_AN_1K_US = 35918.367 / 32


def verdict(paths: list[Path], length: int = 1024) -> list[str]:
    """The checks registered before run cl (``h200x2-20261130cl-tp-host-hypotheses.md``) on the
    ``length``-token rows."""
    data = read(paths)

    def med(variant: str, key: str) -> float:
        return a_layer(data, variant, 2, length, key)

    tp_gpu, tp_host, noar, single = med("tp", "gpu_us"), med("tp", "host_us"), med("noar", "host_us"), \
        med("single", "host_us")
    ar = med("tp", "all_reduce1") + med("tp", "all_reduce2")
    lo, hi = MODEL_LAYER_US
    return [
        f"P (the harness's pace: tp's GPU time a layer >= 900 us, run an's {RUN_AN_1K_US:.0f}): {tp_gpu:.0f} us -> "
        f"{'pass' if tp_gpu >= 900 else 'fail'}",
        f"A (the all-reduce calls: their host a layer >= 300 us, the document's 2 x 44.9): {ar:.0f} us -> "
        f"{'pass' if ar >= 300 else 'fail'}",
        f"R (the process group: noar's host a layer >= 1.3 x single's): {noar:.0f} against {single:.0f} us "
        f"({noar / single:.2f}) -> {'pass' if noar >= 1.3 * single else 'fail'}",
        f"G (the GPUs set the pace: tp's GPU time a layer >= 1.3 x its host's): {tp_gpu:.0f} against {tp_host:.0f} us "
        f"({tp_gpu / tp_host:.2f}) -> {'pass' if tp_gpu >= 1.3 * tp_host else 'fail'}",
        f"M (single's host a layer within 25% of the document's {lo:.0f}-{hi:.0f} us): {single:.0f} us -> "
        f"{'pass' if 0.75 * lo <= single <= 1.25 * hi else 'fail'}",
    ]


def verdict_cm(paths: list[Path], length: int = 1024) -> list[str]:
    """The checks registered before run cm (``h200x2-20261130cm-host-state-hypotheses.md``) on the
    ``length``-token rows: each process kind's host a layer with the GPU waiting on the host over the
    same calls with the GPU behind (``--ahead-ms``)."""
    data = read(paths)

    def med(variant: str, ranks: int, key: str) -> float:
        return a_layer(data, variant, ranks, length, key)

    idle_ratio = MODEL_LAYER_US[1] / MODEL_LAYER_US[0]
    tp = med("tp", 2, "host_us") / med("tp-ahead", 2, "host_us")
    s8 = med("single", 8, "host_us") / med("single-ahead", 8, "host_us")
    paced = med("single", 8, "gpu_us") / med("single", 8, "host_us")
    # a step's slowest layer (us, not a sum over the layers) over its median layer
    valid = max(statistics.median(t["slowest_layer"] for t in data[(v, r, length)]) / med(v, r, "host_us")
                for v, r in (("tp-ahead", 2), ("noar-ahead", 2), ("single-ahead", 8), ("single-ahead", 2))
                if (v, r, length) in data)
    return [
        f"V (the host stays ahead: no layer of an --ahead step over 3x its median layer): worst {valid:.2f} -> "
        f"{'pass' if valid <= 3 else 'fail'}",
        f"H (the TP8 shard alone is host-paced: GPU within 10% of host): {paced:.2f} -> "
        f"{'pass' if abs(paced - 1) <= 0.10 else 'fail'}",
        f"S (TP2: host a layer, GPU waiting over GPU behind, >= 1.3): {tp:.2f} -> {'pass' if tp >= 1.3 else 'fail'}",
        f"D (the TP8 shard alone: the same ratio within 0.10 of the document's idle over behind, {idle_ratio:.2f}): "
        f"{s8:.2f} -> {'pass' if abs(s8 - idle_ratio) <= 0.10 else 'fail'}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write (rank 0)")
    ap.add_argument("--single", action="store_true", help="one GPU, no process group (the shard of --world)")
    ap.add_argument("--world", type=int, default=2, help="--single: the TP degree whose shard runs")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="prompt lengths, comma-separated")
    ap.add_argument("--reps", type=int, default=REPS)
    ap.add_argument("--tiny", action="store_true", help="a two-layer model on the CPU (gloo): a smoke test")
    ap.add_argument("--ahead-ms", type=float, default=0.0,
                    help="a GPU sleep this long before each step: the host calls it with the GPU behind (run cm)")
    ap.add_argument("--alternate", action="store_true",
                    help="with --ahead-ms: trials alternate between no sleep and the sleep (run cn)")
    ap.add_argument("--analyse", nargs="+", type=Path, metavar="CSV", help="the tables of these CSVs (CPU)")
    ap.add_argument("--verdict", action="store_true", help="with --analyse: run cl's registered checks")
    ap.add_argument("--verdict-cm", action="store_true", help="with --analyse: run cm's registered checks")
    args = ap.parse_args(argv)
    if args.analyse:
        missing = [p for p in args.analyse if not p.is_file()]
        if missing:
            print(f"tp_host.py: no such file: {', '.join(map(str, missing))}", file=sys.stderr)
            return 2
        print("\n".join(analyse(args.analyse) + ([""] + verdict(args.analyse) if args.verdict else [])
                         + ([""] + verdict_cm(args.analyse) if args.verdict_cm else [])))
        return 0
    if not args.out:
        ap.error("--out is required (or --analyse)")
    if args.world < 1 or args.reps < 1 or args.ahead_ms < 0:
        ap.error("--world and --reps must be positive, --ahead-ms not negative")
    if args.alternate and not args.ahead_ms:
        ap.error("--alternate needs --ahead-ms")
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
