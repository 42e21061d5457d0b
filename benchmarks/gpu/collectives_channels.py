"""NCCL's channel count for small ring collectives: the rule, its check against NCCL's logs, and
what charging it does to the predictions (P12, 2026-11-28; docs/gpu.md, "Fewer channels").

    PYTHONPATH=. python benchmarks/gpu/collectives_channels.py --logs   # the rule against every logged call
    PYTHONPATH=. python benchmarks/gpu/collectives_channels.py --eval   # runs t-y: tuning.cc vs channels

**The rule** (NVIDIA/nccl ``src/enqueue.cc`` at commit 01e6dd915fdd2627a7205f5aa1c7f14d46990226,
the closest stored version to v2.28.9, topoGetAlgoInfo, "Ring/Tree channel tuning"): NCCL starts
from the communicator's ``nChannels`` and ``while (nBytes < nc * nt * threadThreshold) { if (nc
>= 2) nc--; else break; }``, nBytes being the whole buffer (``ncclFuncMaxSendRecvCount``: the
all-reduce's S, the all-gather's output, the reduce-scatter's input), ``nt`` the protocol's
``maxThreads`` (``src/graph/tuning.cc`` ncclTopoTuneModel: NCCL_LL_MAX_NTHREADS 512,
NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512 on NVLink) and ``threadThreshold``
tuning.cc's NCCL_LL_THREAD_THRESHOLD 8 x nRanks for the ring's LL, NCCL_LL128_THREAD_THRESHOLD 8,
NCCL_SIMPLE_THREAD_THRESHOLD 64 (NCCL's INIT log prints them: "threadThresholds 8/8/64 |
16/8/64" on 2 ranks, 24/8/64 on 3, 32/8/64 on 4). So nc = min(nChannels, max(1, nBytes // (nt x
threshold))) (``ring_channels``): on 24 channels (the INIT log's "24 coll channels", 2-4 H100s)
the ring's LL may use one channel below 8 KiB a buffer on 2 ranks, 12 KiB on 3, 16 KiB on 4, and
all 24 from 192, 288, 384 KiB. scheduleCollTasksToPlan then splits the work over at most nc
channels in cells of 16 KiB of traffic, which may leave the last ones empty (``channels_used``:
e.g. a 256 KiB all-reduce on 2 ranks, LL, runs on 22). ``--logs`` checks ``channels_used``
against every ring call NCCL logged (``channel{Lo..Hi}``) in the committed ``*-nccl-tuning.txt``.

**The charge** (explained after measurement; evaluated here before any model change): a ring
collective on ``channels_used`` of the N channels moves its wire bytes at the protocol's rate x used / N, each
channel being one CTA that carries its share (the memory-operations mechanism, docs/gpu.md). NCCL's
own time model does the same when a channel count is given (``src/graph/tuning.cc``
ncclTopoGetAlgoTime: ``bw = bw / comm->nChannels * info->nChannels``); its tuner chooses with the
full count, so the model's choice of algorithm and protocol does not move.

Variants (``--eval``), every prediction row of runs t, u, v (2 H100s), w (2, 3, 4), x (2), y
(2, 3, 4) as ``collectives.py --compare`` predicts them on the document's bus (no refit), the
ring LL latency's floor rows (run w's host-ahead all-reduce at 1, 2, 4 KiB:
``collectives_llfit.is_floor_row``) left out of every variant:

- ``tuning.cc``: the model (tuning.cc's latency, every channel);
- ``channels``: the channel count charged, tuning.cc's latency;
- ``channels + refit``: the channel count charged and the ring LL latency refitted (base + steps
  x step, least squares, ``collectives_llfit.fit_ll_latency``) to the floor rows less their
  transfer at the logged channel count, on every ring LL (all-reduce 2(n-1) steps, all-gather
  and reduce-scatter n-1: tuning.cc's structure).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import collectives as bench  # noqa: E402  (beside this file)
import collectives_llfit as llfit  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
G = ROOT / "benchmarks/gpu"
#: NCCL's collective channels on 2-4 H100 SXM (NV18, NCCL 2.28.9, NVLS off): the INIT log's
#: "24 coll channels" (e.g. h100x4-20261128y-y4-nccl-init.txt, h100x2-20261125t-nccl-init.txt)
CHANNELS = 24
#: tuning.cc ncclTopoTuneModel: maxThreads of the ring by protocol on NVLink
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
LOG_PROTO = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}
LOG_OP = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter"}
CALL = re.compile(
    r"(\d+) NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)
SETS = {
    "t 2 ranks": ["h100x2-20261125t-collectives.csv"],
    "u 2 ranks": ["h100x2-20261125u-collectives.csv"],
    "v 2 ranks": ["h100x2-20261125v-collectives.csv"],
    **llfit.SETS,
}


def thread_threshold(protocol: str, ranks: int) -> int:
    """tuning.cc's ring threadThresholds: LL 8 x nRanks, LL128 8, Simple 64."""
    return {"LL": 8 * ranks, "LL128": 8, "Simple": 64}[protocol]


def ring_channels(protocol: str, nbytes: float, ranks: int, channels: int = CHANNELS) -> int:
    """The most channels NCCL gives a ring collective of ``nbytes`` (the whole buffer):
    topoGetAlgoInfo's "Ring/Tree channel tuning" (module docstring)."""
    per_channel = MAX_THREADS[protocol] * thread_threshold(protocol, ranks)
    return min(channels, max(1, int(nbytes // per_channel)))


def channels_used(
    op: str, protocol: str, nbytes: float, ranks: int, channels: int = CHANNELS
) -> int:
    """The channels a lone ring collective's work is split over, the count NCCL logs
    (``channel{Lo..Hi}``) and launches CTAs for: ``src/enqueue.cc`` scheduleCollTasksToPlan (same
    commit) cuts the rank's ``count`` into cells of 16 KiB of traffic (``MinTrafficPerChannel``
    over ``ncclFuncTrafficPerByte``: 2 for the all-reduce, nRanks for all-gather and
    reduce-scatter, x4 for LL, rounded to 16 bytes) and gives each channel the cells of
    max(16 KiB, traffic / ``ring_channels``), so the last channels of that count may stay empty."""
    import math

    cap = ring_channels(protocol, nbytes, ranks, channels)
    count = nbytes if op == "all_reduce" else nbytes / ranks  # the rank's count, bytes
    per_byte = (2 if op == "all_reduce" else ranks) * (4 if protocol == "LL" else 1)
    min_traffic = 16 << 10
    per_channel = max(min_traffic, max(min_traffic, per_byte * count) / cap)
    cell = math.ceil(math.ceil(min_traffic / per_byte) / 16) * 16
    cells = math.ceil(count / cell)
    per_cell = cell * per_byte
    cells_per_channel = min(cells, math.ceil(per_channel / per_cell))
    lo = cells if channels == 1 else cells_per_channel
    mid, hi = (cells - lo) // cells_per_channel, (cells - lo) % cells_per_channel
    n = (lo != 0) + mid + (hi != 0)
    return min(n, channels)


def log_ranks(name: str) -> int:
    """The rank count of a committed run's tuning log, from its name."""
    if name.startswith(("h100x2", "h200x2")) or "-x2-" in name or "-y2-" in name:
        return 2
    if "-x3-" in name or "-y3" in name:
        return 3
    return 4


def check_logs() -> int:
    """Every logged ring call of every committed ``*-nccl-tuning.txt`` against ``ring_channels``."""
    print("| log | ranks | distinct calls | calls | agree | disagree |")
    print("|---|---:|---:|---:|---:|---|")
    total = agree_total = 0
    for path in sorted(G.glob("*-nccl-tuning.txt")):
        ranks = log_ranks(path.name)
        rows = [m for m in map(CALL.search, path.read_text().splitlines()) if m]
        if not rows:
            continue
        calls = agree = 0
        misses = []
        for m in rows:
            count, op, nbytes, algo, proto, lo, hi = m.groups()
            assert algo == "RING" and lo == "0", m[0]
            whole = int(nbytes) * (ranks if op in ("AllGather", "ReduceScatter") else 1)
            want = channels_used(LOG_OP.get(op, "all_reduce"), LOG_PROTO[proto], whole, ranks)
            calls += int(count)
            if want == int(hi) + 1:
                agree += int(count)
            else:
                misses.append(f"{op} {nbytes} B {proto}: logged {int(hi) + 1}, rule {want}")
        total += calls
        agree_total += agree
        print(
            f"| {path.name} | {ranks} | {len(rows)} | {calls} | {agree} | {'; '.join(misses) or '-'} |"
        )
    print(f"# {agree_total} of {total} logged calls agree")
    return 0 if agree_total == total else 1


def variants(gpu):
    """(label, collective_cost) of the three models (module docstring)."""
    import rdusim.hw.collectives as nccl

    tuning = nccl.collective_cost

    def channels(op, nbytes, ranks, fabric):
        cost = tuning(op, nbytes, ranks, fabric)
        if cost.algorithm != "ring":
            return cost
        nc = channels_used(op, cost.protocol, nbytes, ranks)
        return dataclasses.replace(cost, bus_bytes_per_s=cost.bus_bytes_per_s * nc / CHANNELS)

    def transfer(c):
        return c.wire_bytes / (
            c.bus_bytes_per_s * channels_used(c.op, c.protocol, c.nbytes, c.ranks) / CHANNELS
        )

    base, step, n = llfit.fit_ll_latency(gpu.fabric, llfit.read_rows(llfit.FLOOR_FILES), transfer)

    def refit(op, nbytes, ranks, fabric):
        cost = channels(op, nbytes, ranks, fabric)
        if (cost.algorithm, cost.protocol) == ("ring", "LL"):
            steps = 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
            cost = dataclasses.replace(cost, latency_s=base + steps * step)
        return cost

    print(
        f"# refit on {n} floor rows less their transfer: base {base * 1e6:.2f} us + {step * 1e6:.3f} us a ring step"
    )
    return (("tuning.cc", tuning), ("channels", channels), ("channels + refit", refit))


def evaluate() -> int:
    """Median abs error / worst per run, ranks, op and mode for each variant, then the pooled
    figures the adoption rule reads."""
    import rdusim.hw.collectives as nccl
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h100.yaml").gpu
    tuning = nccl.collective_cost
    models = variants(gpu)
    errors: dict[tuple[str, str, str], list[list[float]]] = {}
    try:
        for label, files in SETS.items():
            for r in llfit.read_rows(files):
                if r["kind"] != "collective" or r["set"] == "calibration" or llfit.is_floor_row(r):
                    continue
                queued = r["name"].endswith("_stream_queued")
                key = (label, r["op"], "queued" if queued else r["mode"])
                errs = errors.setdefault(key, [[] for _ in models])
                for i, (_, cost_fn) in enumerate(models):
                    nccl.collective_cost = cost_fn
                    us, _ = bench.predict_us(
                        gpu, r["op"], int(r["bytes"]), int(r["ranks"]), r["mode"], queued=queued
                    )
                    errs[i].append(us / float(r["median_us"]) - 1)
    finally:
        nccl.collective_cost = tuning
    print("| set | op | mode | rows | " + " | ".join(m[0] for m in models) + " |")
    print("|---|---|---|---:|" + "---:|" * len(models))
    for (label, op, mode), errs in errors.items():
        cells = ["{:.0f}% / {:+.0f}%".format(*bench.median_worst(e)) for e in errs]
        print(f"| {label} | {op} | {mode} | {len(errs[0])} | " + " | ".join(cells) + " |")
    # the adoption rule (declared before this was run)
    print()
    print("| pooled rows | rows | " + " | ".join(m[0] for m in models) + " |")
    print("|---|---:|" + "---:|" * len(models))
    pools = {
        "runs t-v, 2 ranks": lambda k: k[0][0] in "tuv",
        "runs w, x, y, 2 ranks": lambda k: k[0][0] in "wxy" and "2 ranks" in k[0],
        "runs w, y, 3-4 ranks": lambda k: k[0][0] in "wy" and "2 ranks" not in k[0],
    }
    for name, pick in pools.items():
        cols = [
            [e for k, errs in errors.items() if pick(k) for e in errs[i]]
            for i in range(len(models))
        ]
        cells = [f"{statistics.median(map(abs, c)) * 100:.1f}%" for c in cols]
        print(f"| {name} | {len(cols[0])} | " + " | ".join(cells) + " |")
    print()
    for i, (label, _) in enumerate(models[1:], 1):
        two = [
            k
            for k, errs in errors.items()
            if k[0][0] in "wxy"
            and "2 ranks" in k[0]
            and round(statistics.median(map(abs, errs[i])) * 100)
            > round(statistics.median(map(abs, errs[0])) * 100)
        ]
        big = [
            e
            for k, errs in errors.items()
            if k[0][0] in "wy" and "2 ranks" not in k[0]
            for e in errs[i]
        ]
        ref = [
            e
            for k, errs in errors.items()
            if k[0][0] in "wy" and "2 ranks" not in k[0]
            for e in errs[0]
        ]
        better = statistics.median(map(abs, big)) < statistics.median(map(abs, ref))
        verdict = "adopt" if not two and better else "keep tuning.cc"
        print(
            f"# {label}: 2-rank groups of runs w, x, y worse than tuning.cc: {len(two)} "
            f"({', '.join(' '.join(k) for k in two) or 'none'}); 3-4 ranks pooled better: {better} -> {verdict}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--logs",
        action="store_true",
        help="check the channel rule against every committed tuning log",
    )
    ap.add_argument("--eval", action="store_true", help="the three variants on runs t-y")
    args = ap.parse_args(argv)
    rc = 0
    if args.logs:
        rc |= check_logs()
    if args.eval:
        rc |= evaluate()
    return rc


if __name__ == "__main__":
    sys.exit(main())
