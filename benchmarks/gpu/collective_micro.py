"""Microbenchmarks behind rdusim's collective launch model (docs/gpu.md, "Collectives").

Run on a node of (at least) two NVLink-connected GPUs, one process per GPU:

    torchrun --nproc_per_node 2 benchmarks/gpu/collective_micro.py --out micro.csv

Rows (``kind``), none compared with the model, each the source of one constant:

- ``host_busy`` (every op and size, ``ROUNDS`` rounds): host time of one ``torch.distributed`` collective call (all-reduce, all-gather,
  reduce-scatter, all-to-all; bf16; 1 KiB, 1 MiB, 64 MiB) while the GPU is busy: a ~5 ms
  ``torch.cuda._sleep`` is queued first, then 20 calls are issued and the host clock
  (``time.perf_counter``) read around them, divided by 20; median of 10 trials. The calls
  queue behind the sleep, so this is the host's cost alone (``launch.collective_host``).
- ``host_idle``: the same call timed alone on the host with the GPU idle (synchronised before
  it), median of 30: recorded and printed by ``--constants``, no model constant (docs/gpu.md).
- ``graph_events``: one CUDA graph of 20 tiny kernels (``x.add_(1)`` on one element) with, per
  kernel, an external event wait before and an external event record after it (what NCCL's
  ``ncclStrongStreamAcquire``/``Release`` add to a captured launch when graph mixing support is
  on: NVIDIA/nccl src/misc/strongstream.cc), and the same graph without them
  (``graph_plain``); CUDA events around each replay, queued behind a sleep, median of 20, / 20.
  The difference is the cost of one wait + record pair in a graph (``launch.graph_event_pair``).
- ``graph_coll``: the collectives of 1 KiB-1 MiB captured 20 to a graph, as collectives.py's
  graph rows, with whatever ``NCCL_GRAPH_MIXING_SUPPORT`` the environment sets (a check of the
  mechanism: with 0 NCCL adds no event nodes).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
HOST_SIZES = (1 << 10, 1 << 20, 1 << 26)
GRAPH_SIZES = (1 << 10, 1 << 14, 1 << 17, 1 << 20)
PER = 20
ROUNDS = 2  # the host-cost rows twice over every op and size (the first op timed ran slow in the first run)
SLEEP = 10_000_000  # ~5 ms at ~2 GHz: longer than the host takes to issue PER calls
FIELDS = ["kind", "name", "op", "bytes", "median_us", "reps", "mixing", "nccl", "gpu"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write (rank 0)")
    ap.add_argument("--only", default="host,events,graph", help="comma-separated: host, events, graph")
    ap.add_argument("--constants", nargs="+", metavar="CSV", help="print the constants these measured CSVs give "
                    "(launch.collective_host, launch.graph_event_pair in hw_configs/h100.yaml); no GPU")
    args = ap.parse_args(argv)
    if args.constants:
        return print_constants(args.constants)
    if not args.out:
        ap.error("--out is required (or --constants)")
    return _run(args)


def constants(rows: list[dict]) -> tuple[dict[str, float], float]:
    """(per collective, the median of its ``host_busy`` rows over every size, round and file, in
    us; the median over files of ``graph_events - graph_plain``, one wait + record pair, in us)."""
    host = {op: statistics.median(float(r["median_us"]) for r in rows if r["kind"] == "host_busy" and r["op"] == op)
            for op in OPS}
    pairs = []
    for source in sorted({r["source"] for r in rows}):
        mine = {r["kind"]: float(r["median_us"]) for r in rows if r["source"] == source}
        if "graph_events" in mine and "graph_plain" in mine:
            pairs.append(mine["graph_events"] - mine["graph_plain"])
    return host, statistics.median(pairs)


def print_constants(paths: list[str]) -> int:
    rows = []
    for path in paths:
        with open(path, newline="") as fh:
            rows += [{**r, "source": path} for r in csv.DictReader(fh)]
    host, pair = constants(rows)
    for op, us in host.items():
        n = sum(r["kind"] == "host_busy" and r["op"] == op for r in rows)
        print(f"collective_host.{op}: {us:.1f} us   (median of {n} host_busy rows)")
    idle = {op: statistics.median(float(r["median_us"]) for r in rows if r["kind"] == "host_idle" and r["op"] == op)
            for op in OPS}
    print("host_idle (recorded, not used: docs/gpu.md): " + ", ".join(f"{op} {us:.1f}" for op, us in idle.items()))
    print(f"graph_event_pair: {pair:.3f} us   (median over files of graph_events - graph_plain)")
    return 0


def _run(args: argparse.Namespace) -> int:  # pragma: no cover - needs two GPUs
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from collectives import _collective  # noqa: PLC0415

    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    world = dist.get_world_size()
    device = torch.device("cuda")
    env = {"nccl": ".".join(map(str, torch.cuda.nccl.version())), "gpu": torch.cuda.get_device_name(),
           "mixing": os.environ.get("NCCL_GRAPH_MIXING_SUPPORT", "")}
    out: list[dict] = []

    def keep(kind: str, name: str, us: float, reps: int, **extra) -> None:
        out.append({"kind": kind, "name": name, "median_us": round(us, 3), "reps": reps, **env, **extra})
        if rank == 0:
            print(f"{kind:13s} {name:40s} {us:10.2f} us", flush=True)

    with torch.no_grad():
        make = lambda op, size: _collective(op, size, world, device, dist, torch)  # noqa: E731
        if "host" in args.only:
            _host_rows(torch, dist, make, keep)
        if "events" in args.only:
            _event_rows(torch, device, keep)
        if "graph" in args.only:
            _graph_rows(torch, dist, make, keep)
    if rank == 0:
        with open(args.out, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(out)
    torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)  # destroy_process_group hung after the captured graphs (run of 2026-11-25 18:42 UTC)


def _host_rows(torch, dist, make, keep) -> None:  # pragma: no cover - needs two GPUs
    """``host_busy`` and ``host_idle`` rows (module docstring)."""
    for op, size, round_ in ((o, z, r) for r in range(ROUNDS) for o in OPS for z in HOST_SIZES):
        fn = make(op, size)
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        busy = []
        for _ in range(10):
            dist.barrier()
            torch.cuda.synchronize()
            torch.cuda._sleep(SLEEP)
            t0 = time.perf_counter()
            for _ in range(PER):
                fn()
            busy.append((time.perf_counter() - t0) / PER)
            torch.cuda.synchronize()
        keep("host_busy", f"host_busy_{op}_{size}_r{round_}", statistics.median(busy) * 1e6, 10 * PER,
             op=op, bytes=size)
        idle = []
        for _ in range(30):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            idle.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
        keep("host_idle", f"host_idle_{op}_{size}_r{round_}", statistics.median(idle) * 1e6, 30, op=op, bytes=size)
        del fn
        torch.cuda.empty_cache()


def _event_rows(torch, device, keep) -> None:  # pragma: no cover - needs a GPU
    """``graph_plain`` and ``graph_events`` rows (module docstring)."""
    x = torch.zeros(1, device=device)
    ext = torch.cuda.Event(external=True)
    ext.record()
    torch.cuda.synchronize()
    stream = torch.cuda.current_stream

    def plain() -> None:
        for _ in range(PER):
            x.add_(1)

    def evented() -> None:
        for _ in range(PER):
            stream().wait_event(ext)
            x.add_(1)
            ext.record()

    for name, fn in (("graph_plain", plain), ("graph_events", evented)):
        graph = _capture(torch, fn)
        keep(name, f"{name}_add", _replay_us(torch, graph) / PER, 20 * PER)
        keep(name + "_unqueued", f"{name}_add_unqueued", _replay_us(torch, graph, queued=False) / PER, 20 * PER)


def _graph_rows(torch, dist, make, keep) -> None:  # pragma: no cover - needs two GPUs
    """``graph_coll`` rows: ``PER`` collectives in one graph, queued and not (module docstring)."""
    for op in OPS:
        for size in GRAPH_SIZES:
            fn = make(op, size)

            def batch(fn=fn) -> None:
                for _ in range(PER):
                    fn()

            graph = _capture(torch, batch)
            dist.barrier()
            keep("graph_coll", f"graph_coll_{op}_{size}", _replay_us(torch, graph, dist) / PER, 20 * PER,
                 op=op, bytes=size)
            keep("graph_coll_unqueued", f"graph_coll_{op}_{size}_unqueued",
                 _replay_us(torch, graph, dist, queued=False) / PER, 20 * PER, op=op, bytes=size)


def _capture(torch, fn):  # pragma: no cover - needs a GPU
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def _replay_us(torch, graph, dist=None, reps: int = 20, queued: bool = True) -> float:  # pragma: no cover
    """Median replay time (us) with the replay queued behind a sleep (its launch hidden), or
    (``queued=False``) launched on an idle GPU as collectives.py's graph rows are (its launch
    latency in the time)."""
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if dist is not None:
            dist.barrier()
        torch.cuda.synchronize()
        if queued:
            torch.cuda._sleep(SLEEP // 5)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
