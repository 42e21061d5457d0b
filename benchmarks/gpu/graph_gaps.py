"""The gap between kernels of a replayed CUDA graph, before and after a profiler session (run at).

Runs ab, ap and aq (``tp_shard.py``) measured a graph step's gap over its kernels' sum at
0.33-0.36 us a kernel for the first row of each process and 0.6-1.0 us a kernel for every later
row (docs/gpu.md, "Llama-3.1-70B's TP8 shard on one H200"). ``tp_shard.py`` times each row's
graph and then profiles it (``torch.profiler``, CUPTI): the first row is the only one timed
before any profiler session in the process. Kineto tears CUPTI down after a session only when
``TEARDOWN_CUPTI=1`` (pytorch/kineto ``CuptiActivityApi.cpp``, ``cuptiTearDown_``; pytorch/pytorch
issue 144455: the profiler keeps slowing a program after it stopped). This script tests that and
the other candidates, each graph timed in the same process before and after one profiler session:

- graphs: one GPU's share of Llama-3.1-70B's TP8 decode step (``tp_shard.py``'s shard, b1 x 8192
  and b32 x 8192; 2083 and 2003 kernels), and synthetic graphs of N tiny kernels (a 4 KB
  ``add_``, N = 1, 64, 512, 2048), 512 alternating with an RMSNorm (kernel type changes), 512 on
  4 KB slices 32 MB apart over 16 GB (footprint, TLB), 512 alternating with a 16 MB ``add_``
  (a wide kernel's tail before each tiny one);
- timings: ``sync`` (``measure.replay_times``: 3 warm-up replays, then CUDA events around each
  replay and a synchronize after it, as ``tp_shard.py``), ``queued`` (20 replays back to back,
  events around each, no synchronize between: the host is ahead, as ``measure.time_fn``),
  ``host`` (the host's time inside ``g.replay()``), ``idle`` (one replay after 0.5 s idle);
- phases: ``pre`` (no profiler yet), ``prof`` (one profiler session: one replay of each graph,
  every kernel's start and end kept), ``post`` (the same graphs again), ``recap`` (graphs
  captured after the session).

Run twice, as is and with ``TEARDOWN_CUPTI=1``; torch only (the device has no rdusim):

    python graph_gaps.py --out DIR

``--summary DIR [DIR ...]`` (CPU): per graph and phase, the kernels' sum and the device-side gaps
of the profiled replay, each timing's step and its gap over the kernels' sum a kernel, and the
tiny graphs' per-node slope; ``--committed``: the same gap a kernel for the committed
``tp_shard.py`` runs (ab, ap, aq, am), by row order.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

#: the 70B shard rows timed: (name, batch, kv_len), TP8 (tp_shard.py's ROWS_70B)
SHARD_ROWS = [("b1_l8192", 1, 8192), ("b32_l8192", 32, 8192)]
TINY_NS = [1, 64, 512, 2048]
REPS = 20
IDLE_S = 0.5
IDLE_REPS = 3


def _graphs(torch, M, T):  # pragma: no cover - needs a GPU  # noqa: N803
    """{name: (capture fn, kernels a replay expected or 0)}: the shard steps, then the synthetic."""
    import torch.nn.functional as F

    dev = torch.device("cuda")
    sh = T.shard_shape(T.LLAMA_70B, 8)
    shape = M.LlamaShape(layers=sh["layers"], hidden=sh["hidden"], q_heads=sh["heads"],
                         kv_heads=sh["kv_heads"], head_dim=sh["head_dim"], ffn=sh["ffn"],
                         vocab=sh["vocab"])
    model = M.Llama(shape, dev)
    out = {}
    for name, batch, kv in SHARD_ROWS:
        out[f"70b_tp8_{name}"] = T._shard_step(M, model, batch, kv)
    x = torch.zeros(2048, dtype=M.BF16, device=dev)  # 4 KB: one CTA
    for n in TINY_NS:
        out[f"tiny_{n}"] = (lambda n=n: [x.add_(1.0) for _ in range(n)])
    h = torch.randn(1, 8192, dtype=M.BF16, device=dev)
    w = torch.ones(8192, dtype=M.BF16, device=dev)

    def alt():
        for _ in range(256):
            x.add_(1.0)
            F.rms_norm(h, (8192,), w, 1e-5)

    out["alt_norm_512"] = alt
    big = torch.zeros(16 << 30 >> 1, dtype=M.BF16, device=dev)  # 16 GB
    stride = (32 << 20) >> 1  # 32 MB apart
    slices = [big[i * stride : i * stride + 2048] for i in range(512)]
    out["spread_512"] = lambda: [s.add_(1.0) for s in slices]
    wide = torch.zeros(8 << 20, dtype=M.BF16, device=dev)  # 16 MB

    def alt_wide():
        for _ in range(256):
            wide.add_(1.0)
            x.add_(1.0)

    out["alt_wide_512"] = alt_wide
    return out


def _time(torch, M, g, how: str) -> list[float]:  # pragma: no cover - needs a GPU  # noqa: N803
    """Microseconds of each timed replay of ``g`` (``how``: sync, queued, host, idle)."""
    if how == "sync":
        return [t * 1e6 for t in M.replay_times(g, REPS, warmup=3)]
    if how == "queued":
        g.replay()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(REPS)]
        for s, e in ev:
            s.record()
            g.replay()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1e3 for s, e in ev]
    if how == "host":
        out = []
        for _ in range(REPS):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            g.replay()
            out.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        return out
    out = []  # idle
    for _ in range(IDLE_REPS):
        torch.cuda.synchronize()
        time.sleep(IDLE_S)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        torch.cuda.synchronize()
        out.append(s.elapsed_time(e) * 1e3)
    return out


def _profile(torch, graphs: dict, kern) -> None:  # pragma: no cover - needs a GPU
    """One profiler session: one replay of each graph, every kernel's start and end (us from
    the graph's first kernel) written to ``kern``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for g in graphs.values():  # a spin kernel after each replay separates the graphs
            g.replay()
            torch.cuda.synchronize()
            torch.cuda._sleep(1000)
            torch.cuda.synchronize()
    ev = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA)
    runs: list[list] = [[]]
    for e in ev:
        if "spin" in e[2]:
            runs.append([])
        else:
            runs[-1].append(e)
    print("profiled kernels a graph:", [len(r) for r in runs], flush=True)
    for name, r in zip(graphs, runs, strict=False):
        t0 = r[0][0] if r else 0.0
        for k, (s0, s1, kn) in enumerate(r):
            kern.writerow(["prof", name, k, kn[:200], round(s0 - t0, 3), round(s1 - t0, 3)])


def _read_kernels(path: Path) -> dict[str, list[tuple[str, float, float]]]:
    """{graph: [(kernel, start_us, end_us)]} of the profiled replays, in order."""
    out: dict[str, list[tuple[str, float, float]]] = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            out.setdefault(r["graph"], []).append(
                (r["kernel"], float(r["start_us"]), float(r["end_us"]))
            )
    return out


def gap_stats(kernels: list[tuple[str, float, float]]) -> dict[str, float]:
    """Kernels, their durations' sum, the profiled device-side gaps between them (summed, median)
    and the span first start to last end, us."""
    durs = [e - s for _, s, e in kernels]
    gaps = [kernels[i + 1][1] - kernels[i][2] for i in range(len(kernels) - 1)]
    return {
        "n": len(kernels),
        "sum": sum(durs),
        "gaps": sum(gaps),
        "gap_median": statistics.median(gaps) if gaps else 0.0,
        "span": kernels[-1][2] - kernels[0][1] if kernels else 0.0,
    }


def pair_gaps(kernels: list[tuple[str, float, float]], classes: list[str]) -> dict[str, list[float]]:
    """{"class -> next class": [device-side gap us]} of one profiled replay."""
    out: dict[str, list[float]] = {}
    for i in range(len(kernels) - 1):
        key = f"{classes[i]} -> {classes[i + 1]}"
        out.setdefault(key, []).append(kernels[i + 1][1] - kernels[i][2])
    return out


def summary(dirs: list[str]) -> int:
    """Print, per run directory, each graph's gap a kernel by phase and timing."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import tp_shard as T  # noqa: N812, PLC0415

    for d in dirs:
        kern = _read_kernels(Path(d) / "kernels.csv")
        with open(Path(d) / "steps.csv") as fh:
            steps = list(csv.DictReader(fh))
        print(f"## {d}")
        print("| graph | kernels | kernels' sum | profiled gaps a kernel | phase | timing | step "
              "| gap a kernel |")
        print("|---|---:|---:|---:|---|---|---:|---:|")
        for r in steps:
            st = gap_stats(kern.get(r["graph"], []))
            step = float(r["median_us"])
            n = st["n"] or 1
            gap = "" if r["timing"] == "host" else f"{(step - st['sum']) / n:.3f}"
            print(f"| {r['graph']} | {st['n']} | {st['sum']:.0f} | {st['gaps'] / n:.3f} | "
                  f"{r['phase']} | {r['timing']} | {step:.1f} | {gap} |")
        for phase in ("pre", "post", "recap"):
            pts = [(int(r["graph"].split("_")[1]), float(r["median_us"])) for r in steps
                   if r["graph"].startswith("tiny_") and r["phase"] == phase
                   and r["timing"] == "sync" and int(r["graph"].split("_")[1]) >= 64]
            if len(pts) >= 2:
                (n0, t0), (n1, t1) = min(pts), max(pts)
                tiny = gap_stats(kern.get(f"tiny_{n1}", []))
                per = tiny["sum"] / max(tiny["n"], 1)
                print(f"- tiny graphs, {phase}, sync: {(t1 - t0) / (n1 - n0):.3f} us a node "
                      f"(kernel {per:.3f} us profiled)")
        for g, ks in kern.items():
            if g.startswith("70b"):
                cls = T.classify([k for k, _, _ in ks], 80)
                print(f"- {g}: profiled device-side gap by kernel pair (median us, count):")
                for key, v in sorted(pair_gaps(ks, cls).items(), key=lambda kv: -len(kv[1])):
                    print(f"  {key}: {statistics.median(v):.3f} ({len(v)})")
    return 0


def committed() -> int:
    """Gap a kernel (graph step minus the profiled kernels' sum) of the committed tp_shard.py
    runs, rows in the order each process ran them."""
    import gzip

    root = Path(__file__).resolve().parent
    for tag in ("ab-tpshard", "ap-tpshard70", "aq-tpshard70"):
        base = root / f"h200-20261128{tag}"
        path = base.with_name(base.name + "-kernels.csv")
        opener = gzip.open if not path.exists() else open
        path = path if path.exists() else path.with_name(path.name + ".gz")
        reps: dict[str, dict[str, list[float]]] = {}
        with opener(path, "rt") as fh:
            for r in csv.DictReader(fh):
                if r["row"].endswith(":graph"):
                    reps.setdefault(r["row"][: -len(":graph")], {}).setdefault(
                        r["replay"], []).append(float(r["device_us"]))
        with open(base.with_name(base.name + ".csv")) as fh:
            for i, r in enumerate(csv.DictReader(fh)):
                ks = reps[r["row"]]
                total = statistics.median(sum(v) for v in ks.values())
                n = len(next(iter(ks.values())))
                gap = float(r["graph_median_us"]) - total
                print(f"| {tag} | {i + 1} | {r['row']} | {n} | {total:.0f} | "
                      f"{float(r['graph_median_us']):.0f} | {gap:.0f} | {gap / n:.3f} |")
    return 0


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - needs a GPU
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--summary", nargs="+", metavar="DIR")
    ap.add_argument("--committed", action="store_true")
    args = ap.parse_args(argv)
    if args.summary:
        return summary(args.summary)
    if args.committed:
        return committed()
    return measure(args.out)


def measure(out_dir: str) -> int:  # pragma: no cover - needs a GPU
    import torch
    from torch.nn.attention import SDPBackend

    here = Path(__file__).resolve().parent
    for p in (here, here.parent / "benchmarks" / "gpu"):
        sys.path.insert(0, str(p))
    import measure as M  # noqa: N812, PLC0415
    import tp_shard as T  # noqa: N812, PLC0415

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(torch.cuda.get_device_name(), torch.__version__, "TEARDOWN_CUPTI =",
          os.environ.get("TEARDOWN_CUPTI"), flush=True)
    M.SDPA_BACKENDS[:] = [SDPBackend.FLASH_ATTENTION]
    steps_fh = open(out / "steps.csv", "w", newline="")  # noqa: SIM115
    steps = csv.writer(steps_fh)
    steps.writerow(["phase", "graph", "timing", "median_us", "min_us", "reps", "order"])
    kern_fh = open(out / "kernels.csv", "w", newline="")  # noqa: SIM115
    kern = csv.writer(kern_fh)
    kern.writerow(["phase", "graph", "index", "kernel", "start_us", "end_us"])
    order = 0

    def timed(phase: str, name: str, g, hows=("sync", "queued", "host")) -> None:
        nonlocal order
        for how in hows:
            ts = _time(torch, M, g, how)
            order += 1
            steps.writerow([phase, name, how, round(statistics.median(ts), 2), round(min(ts), 2),
                            len(ts), order])
            print(f"{phase:6s} {name:18s} {how:7s} {statistics.median(ts):10.1f} us", flush=True)
        steps_fh.flush()

    with torch.no_grad():
        fns = _graphs(torch, M, T)
        graphs = {name: M.capture(None, fn) for name, fn in fns.items()}
        for name, g in graphs.items():
            timed("pre", name, g)
        for name in graphs:
            if name.startswith("70b"):
                timed("pre", name, graphs[name], ("idle",))
        _profile(torch, graphs, kern)
        kern_fh.flush()
        time.sleep(2.0)  # Kineto's CUPTI teardown (TEARDOWN_CUPTI=1) may finish on its own thread
        for name, g in graphs.items():
            timed("post", name, g)
        for name in graphs:
            if name.startswith("70b"):
                timed("post", name, graphs[name], ("idle",))
        for name in ("70b_tp8_b32_l8192", "tiny_2048"):
            g2 = M.capture(None, fns[name])
            timed("recap", name, g2, ("sync", "host"))
            del g2
    steps_fh.close()
    kern_fh.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
