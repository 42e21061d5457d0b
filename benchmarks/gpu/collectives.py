"""Measure NCCL collectives and Llama-3.1-8B TP steps on one NVLink node for rdusim's collective model.

Run on a machine with (at least) two NVLink-connected GPUs, one process per GPU; the world size
torchrun gives (2, 3, 4, ... ranks) is the ``ranks`` of every row and the TP degree of the steps:

    torchrun --nproc_per_node 2 benchmarks/gpu/collectives.py --out h200x2-collectives.csv
    torchrun --nproc_per_node 4 benchmarks/gpu/collectives.py --out h100x4-collectives.csv

What it measures (bf16 buffers, CUDA events on rank 0 after a barrier, medians after warm-up;
every collective both launched on a stream and replayed from a CUDA graph):

- ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all`` (torch.distributed on the
  NCCL backend) of 1 KB to 1 GB, every power of two. ``size`` is nccl-tests' S: the all-reduce
  buffer, the whole all-gather output, the whole reduce-scatter input, the whole all-to-all
  send buffer.
- end-to-end Llama-3.1-8B TP-n steps, n the world size (random bf16 weights; heads, KV heads and
  FFN split over the n GPUs: TP4 has 8 heads, 2 KV heads and an FFN of 3584 a GPU; an all-reduce
  after the attention output and the FFN down projection, the LM head vocabulary-parallel with an
  all-gather of the logits): decode steps CUDA-graph captured at several batch and KV lengths
  (rows ``tp<n>_decode_*``), prefill of one prompt at 1K-16K tokens (eager; ``tp<n>_prefill_*``).
  ``--e2e decode`` keeps the decode steps only. ``--tp-model llama-3.1-70b``: the same steps of
  Llama-3.1-70B (TP4: 16 heads, 2 KV heads, an FFN of 7168 a GPU, 80 layers of hidden 8192;
  rows ``tp<n>_70b_*``, column ``model``).

Every row has a ``set``: ``calibration`` (the few sizes the two "to calibrate" quantities of
``hw_configs/h200.yaml`` are fitted to: the all-reduce latency floor at 1 KB and 4 KB, and
the bus bandwidth at 256 MB and 1 GB, stream-launched; never a host-ahead or busy copy of them)
or ``prediction`` (every other row: never fitted). docs/gpu.md ("Collectives") says how the fit and the comparison are run.
The NCCL version, the GPU names and ``NCCL_ALGO``/``NCCL_PROTO`` (if set) go into every row.
Run with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING`` to log the algorithm NCCL chose.

``--dry-run`` prints the rows a run at ``--ranks`` (2 by default) writes under the other flags,
without touching a GPU or torch.distributed (``planned_rows``: the run, the dry run and the
frozen table take their rows from it; bad flags exit 2 before anything runs);
``--model HW.yaml`` prints rdusim's predictions for the same collectives at 2, 4 and 8 GPUs and
the sanity table of docs/gpu.md; ``--model HW.yaml --sizes ...`` (or ``--frozen``) the frozen
predictions of the exact rows one run will write, at ``--ranks`` (2 by default), for
``--modes``, with ``--host-ahead`` and ``--e2e`` as the run is given them;
``--model HW.yaml --compare CSV`` fits ``bus_bandwidth`` from a measured CSV's calibration rows
and compares every prediction row with the model (docs/gpu.md, "Measured on two H100s");
``--help`` imports nothing heavy.

Timing: every trial times ``PER`` collectives back to back (stream: ``PER`` launches; graph: one
graph of ``PER``) after a barrier and divides by ``PER`` (nccl-tests' method); a TP2 step is
timed alone. Stream rows timed with the host ahead (``--host-ahead`` or ``--modes queued``: ``*_stream_queued``)
are compared with NCCL's own time (the tuning model's latency + bytes / bandwidth, no launch):
the host has queued every call before the GPU reaches them, so what is left is the device's.
(Until run w, 2026-11-28, they were predicted as host-bound stream rows, which they are built
not to be; graph rows with the host ahead are still predicted as graph rows.)
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
from pathlib import Path
from typing import NamedTuple

SIZES = [1 << k for k in range(10, 31)]  # 1 KiB .. 1 GiB
#: run u (the frozen prediction set of docs/gpu.md): 1 KiB (run t's too) and 13 sizes run t never had, to 768 MiB
RUN_U_SIZES = [1 << 10, 3 << 10, 12 << 10, 48 << 10, 192 << 10, 768 << 10, 3 << 20, 6 << 20, 12 << 20, 24 << 20,
               48 << 20, 96 << 20, 384 << 20, 768 << 20]
#: run v (a second frozen set, after the LL rate was taken from NCCL 2.28.9): sizes neither run had
RUN_V_SIZES = [2 << 10, 6 << 10, 24 << 10, 96 << 10, 320 << 10, 1536 << 10, 5 << 20, 20 << 20, 80 << 20, 160 << 20,
               640 << 20]
#: run w's floors at 2, 3 and 4 ranks (1-64 KiB: NCCL's latency, ring LL) and three larger sizes (LL, Simple)
RUN_W_SIZES = [1 << k for k in range(10, 17)] + [1 << 20, 16 << 20, 256 << 20]
#: run y (frozen after the ring LL latency fit): sizes none of runs t-w had at 4 ranks, 1.5 KiB-768 MiB
#: (``ys``: the KiB ones, for 2 and 3 ranks; every one a multiple of 3 x 512 B, so no rank's slice is
#: misaligned at 3 ranks); ``y3``: 3-rank all-gather / all-to-all sizes a multiple of 3 (12, 48 MiB)
#: beside run w's 16 and 64 MiB, whose slices are not 16-byte multiples at 3 ranks
RUN_Y_SMALL = [3 << 9, 3 << 10, 6 << 10, 12 << 10, 48 << 10, 192 << 10, 768 << 10]
RUN_Y_SIZES = RUN_Y_SMALL + [3 << 20, 12 << 20, 48 << 20, 192 << 20, 768 << 20]
RUN_Y3_SIZES = [12 << 20, 16 << 20, 48 << 20, 64 << 20]
#: --sizes by name
NAMED_SIZES = {"u": RUN_U_SIZES, "v": RUN_V_SIZES, "w": RUN_W_SIZES, "y": RUN_Y_SIZES, "ys": RUN_Y_SMALL,
               "y3": RUN_Y3_SIZES}
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
CALIBRATION = {("all_reduce", 1 << 10), ("all_reduce", 1 << 12), ("all_reduce", 1 << 28), ("all_reduce", 1 << 30)}
DECODE = [(1, 1024), (1, 8192), (8, 8192), (32, 4096), (64, 2048), (128, 1024)]
PREFILL = [1024, 4096, 16384]
#: what a TP-n step splits over the GPUs: Llama-3.1-8B's query heads, KV heads, FFN width and
#: vocabulary (rdusim/config/models/llama-3.1-8b.yaml; tests/gpu/test_collectives.py checks they
#: agree). Literal so that a measurement run needs torch only, not rdusim's dependencies (run aa's
#: first call failed importing rdusim on the device).
LLAMA_8B_SPLITS = {"heads": 32, "KV heads": 8, "FFN": 14336, "vocabulary": 128256}
#: Llama-3.1-70B's (rdusim/config/models/llama-3.1-70b.yaml, the same test): ``--tp-model
#: llama-3.1-70b``, run an (4 x H200: 35 GB of bf16 weights a GPU at TP4)
LLAMA_70B_SPLITS = {"heads": 64, "KV heads": 8, "FFN": 28672, "vocabulary": 128256}
#: the TP steps' models by ``--tp-model``: (splits, what every GPU keeps whole: layers and hidden
#: width, the model documents' ``layers`` and ``hidden``), and the tag in their rows' names
#: (``tp4_70b_decode_b1_l1024_graph``; Llama-3.1-8B's rows keep the names of runs t-ac)
TP_MODELS = {"llama-3.1-8b": (LLAMA_8B_SPLITS, {"layers": 32, "hidden": 4096}, ""),
             "llama-3.1-70b": (LLAMA_70B_SPLITS, {"layers": 80, "hidden": 8192}, "70b_")}
SLEEP_CYCLES = 6_000_000  # --host-ahead: ~3 ms at the H100's ~2 GHz, longer than the host takes to queue PER calls
PER = 20  # collectives timed back to back (and captured together in graph mode), as nccl-tests does
FIELDS = ["set", "kind", "name", "median_us", "reps", "op", "bytes", "ranks", "mode", "batch", "kv_len",
          "seq_len", "nccl", "gpu", "nccl_algo", "nccl_proto", "model"]


#: the comparison functions, moved to rdusim.analysis.gpu.collectives (one place for ``rdusim
#: fidelity --gpu`` and these scripts); still reachable as ``collectives.NAME`` for the scripts beside
#: this one, imported only when asked for (a measurement run imports torch only)
MOVED = ("predict_us", "median_worst", "fit_bus_bandwidth", "fit_ring_link", "fitted_fabric")


def __getattr__(name: str):  # noqa: ANN202 - PEP 562: the moved functions, imported on first use
    if name in MOVED:
        from rdusim.analysis.gpu import collectives as model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plan(sizes: list[int] | None = None, ranks: int = 2, e2e: tuple[str, ...] = ("decode", "prefill"),
         decode: list[tuple[int, int]] | None = None, tp_model: str = "llama-3.1-8b",
         prefill: list[int] | None = None) -> list[dict]:
    """The rows one run writes: every collective at ``sizes`` (the powers of two when None: then
    the four ``CALIBRATION`` rows are calibration) in both modes, then the TP-``ranks`` steps of
    ``tp_model`` (a ``TP_MODELS`` key) of the phases in ``e2e`` (decode at ``decode``'s (batch, KV)
    points, ``DECODE`` when None; prefill at ``prefill``'s lengths, ``PREFILL`` when None)."""
    rows = []
    for op in OPS:
        for size in sizes or SIZES:
            for mode in ("stream", "graph"):
                set_ = "calibration" if (op, size) in CALIBRATION and mode == "stream" and not sizes else "prediction"
                rows.append({"set": set_, "kind": "collective", "name": f"{op}_{size}_{mode}", "op": op,
                             "bytes": size, "mode": mode})
    tp, tag = f"tp{ranks}", TP_MODELS[tp_model][2]
    for batch, kv_len in (decode or DECODE) if "decode" in e2e else ():
        rows.append({"set": "prediction", "kind": f"e2e_decode_{tp}", "name": f"{tp}_{tag}decode_b{batch}_l{kv_len}_graph",
                     "batch": batch, "kv_len": kv_len, "mode": "graph", "model": tp_model})
    for length in (prefill or PREFILL) if "prefill" in e2e else ():
        rows.append({"set": "prediction", "kind": f"e2e_prefill_{tp}", "name": f"{tp}_{tag}prefill_b1_l{length}",
                     "batch": 1, "seq_len": length, "mode": "eager", "model": tp_model})
    return rows


def planned_rows(args: argparse.Namespace, ranks: int) -> list[dict]:
    """Every row a run at ``ranks`` GPUs writes, in its order, named and set as it writes them (the
    run, ``--dry-run`` and the frozen table all take their rows from here): the collectives of
    ``plan`` kept by ``--only``, ``--ops``, ``--max-bytes`` and ``--modes`` (with ``queued``, a
    stream row once more with the host ahead, ``*_queued``), then the TP steps. Each row adds
    ``ahead`` (timed with the host ahead), ``queued`` (predicted as NCCL's own time: a stream row
    timed host-ahead) and ``step`` (the plan's name of a TP step). A row timed host-ahead or busy
    is never calibration: ``CALIBRATION`` is the plain stream rows."""
    only = args.only.split(",")
    suffix = "_busy" if args.busy_ms else "_queued" if args.host_ahead else ""
    rows = []
    for row in plan(_sizes(args.sizes), ranks, _phases(args.e2e), args.decode, args.tp_model, args.prefill):
        if row["kind"] != "collective":
            if "e2e" in only:
                rows.append({**row, "name": row["name"] + suffix, "ahead": args.host_ahead, "queued": False,
                             "step": row["name"]})
            continue
        if "collectives" not in only or row["op"] not in args.ops.split(",") or row["bytes"] > args.max_bytes:
            continue
        modes = args.modes.split(",")
        copies = [(args.host_ahead, suffix)] if row["mode"] in modes else []
        copies += [(True, "_queued")] if row["mode"] == "stream" and "queued" in modes else []
        for ahead, tail in copies:
            rows.append({**row, "set": "prediction" if tail else row["set"], "name": row["name"] + tail,
                         "ahead": ahead, "queued": ahead and row["mode"] == "stream"})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="CSV to write (rank 0)")
    ap.add_argument("--dry-run", action="store_true", help="print the rows a run at --ranks writes (names, "
                    "sets) under the other flags; no GPU, no torch")
    ap.add_argument("--only", default="collectives,e2e", help="comma-separated: collectives, e2e")
    ap.add_argument("--max-bytes", type=int, default=SIZES[-1], help="largest collective size")
    ap.add_argument("--sizes", help="comma-separated collective sizes in bytes instead of the powers of two "
                    "('u', 'v', 'w', 'y', 'ys', 'y3': a run's set, RUN_U_SIZES ... RUN_Y3_SIZES)")
    ap.add_argument("--ops", default=",".join(OPS), help="comma-separated collectives to time")
    ap.add_argument("--modes", default="stream,graph", help="comma-separated launch modes to time: stream, graph, "
                    "queued (each stream row again with the host ahead, as --host-ahead: rows *_queued)")
    ap.add_argument("--host-ahead", action="store_true", help="diagnostic: before every trial keep the GPU busy "
                    "for ~3 ms (torch.cuda._sleep), so the host has queued the trial's launches before they run "
                    "(the time is the GPU's, not the host's); rows named *_queued")
    ap.add_argument("--busy-ms", type=float, default=0.0, help="diagnostic: before every trial run bf16 matrix "
                    "products for about this many ms (the SMs at full clock, the launches queued); rows *_busy")
    ap.add_argument("--e2e", default="decode,prefill", help="comma-separated TP step phases: decode, prefill")
    ap.add_argument("--without-gather", action="store_true", help="diagnostic: time each TP step again "
                    "right after it without the all-gather of its logits after the LM head (rows *_nogather: "
                    "the gather's cost in the step is the difference; logits_gather.py; rdusim.analysis.gpu.collectives "
                    "NO_GATHER_SUFFIX)")
    ap.add_argument("--ranks", help="with --dry-run, or --model and --sizes/--frozen: comma-separated world "
                    "sizes (2 by default) to plan or predict the rows at (a run gets its own from torchrun)")
    ap.add_argument("--frozen", action="store_true", help="with --model: the frozen predictions of the full "
                    "plan (the powers of two) at --ranks")
    ap.add_argument("--model", metavar="HW_YAML", help="print rdusim's predictions for a gpu_node document")
    ap.add_argument("--compare", metavar="CSV", help="with --model: fit the calibration rows of a measured CSV "
                    "and compare every prediction row with the model")
    ap.add_argument("--tp-model", default="llama-3.1-8b", help="the TP steps' model: "
                    f"{', '.join(TP_MODELS)} (random bf16 weights; 70B rows named tp<n>_70b_...)")
    ap.add_argument("--decode", help="TP decode points instead of the default ones: comma-separated BATCHxKV "
                    "(e.g. 2x2048,16x4096)")
    ap.add_argument("--prefill", help="TP prefill prompt lengths instead of 1024,4096,16384: comma-separated")
    ap.add_argument("--against", metavar="FROZEN_TXT", help="with --compare: compare with a committed frozen table "
                    "(--frozen's output, made before the run) instead of the model now; nothing fitted")
    args = ap.parse_args(argv)
    ranks = _check_args(ap, args)
    if args.decode:  # the (batch, KV) points from here on; a malformed one exits 2
        args.decode = _decode_points(ap, args.decode)
    if args.prefill:  # the prefill lengths; a malformed one exits 2
        if not all(w.isdigit() and int(w) > 0 for w in args.prefill.split(",")):
            ap.error(f"--prefill: {args.prefill!r} is not comma-separated positive prompt lengths (e.g. 1024,4096)")
        args.prefill = [int(w) for w in args.prefill.split(",")]
    if args.model:
        return _model_paths(args, ranks)
    if args.dry_run:
        for n in ranks:
            rows = planned_rows(args, n)
            for row in rows:
                print(f"{row['set']:11s} {row['kind']:16s} {row['name']}")
            print(f"# {len(rows)} rows at {n} ranks, {sum(r['set'] == 'calibration' for r in rows)} calibration")
        return 0
    if not args.out:
        ap.error("--out is required (or --dry-run)")
    return _run(args)


def _model_paths(args: argparse.Namespace, ranks: list[int]) -> int:
    """``--model`` with ``--compare``, ``--sizes`` / ``--frozen`` or alone; a document, CSV or frozen
    table that is missing or does not parse exits 2 with its message, not a traceback."""
    from rdusim.errors import ConfigError  # the model's paths need rdusim; a measurement does not

    try:
        if args.compare:
            return compare(args.model, args.compare, args.against)
        if args.sizes or args.frozen:
            return frozen_table(args.model, args, ranks)
        return model_table(args.model)
    except (ConfigError, FileNotFoundError, IsADirectoryError, PermissionError) as error:
        print(f"collectives.py: {error}", file=sys.stderr)
        return 2


#: the choices of the comma-separated flags
CHOICES = {"--ops": OPS, "--modes": ("stream", "graph", "queued"), "--only": ("collectives", "e2e"),
           "--e2e": ("decode", "prefill"), "--tp-model": tuple(TP_MODELS)}


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[int]:
    """Every flag's values checked before anything runs (``ap.error``: exit 2, what was expected,
    the closest choice for a misspelling); returns the world sizes to plan or predict at."""
    import difflib

    for flag, choices in CHOICES.items():
        for word in getattr(args, flag[2:].replace("-", "_")).split(","):
            if word not in choices and (word or flag != "--e2e"):
                close = difflib.get_close_matches(word, choices, n=1)
                ap.error(f"{flag}: {word!r} is not one of {', '.join(choices)}"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    if args.sizes and args.sizes not in NAMED_SIZES:
        for word in args.sizes.split(","):
            if not word.isdigit() or int(word) < 1:
                ap.error(f"--sizes: {word!r} is not a size in bytes; expected comma-separated positive integers "
                         f"or one of {', '.join(NAMED_SIZES)}")
    if args.max_bytes < 1:
        ap.error(f"--max-bytes: expected a positive size in bytes, got {args.max_bytes}")
    if args.frozen and not args.model:
        ap.error("--frozen needs --model")
    if args.against and not args.compare:
        ap.error("--against needs --model and --compare")
    if args.against and not Path(args.against).is_file():
        ap.error(f"--against: no such file {args.against!r} (a frozen table committed before the run)")
    if args.compare and not args.model:
        ap.error("--compare needs --model HW_YAML (the GPU document the run is compared on)")
    return _check_ranks(ap, args)


def _check_ranks(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[int]:
    """``--ranks`` where it applies (2 by default), and every TP degree that will be planned
    (``--ranks``, or torchrun's world size for a run) dividing ``--tp-model``'s splits."""
    planning = args.dry_run or (args.model and not args.compare and (args.sizes or args.frozen))
    if args.ranks is not None and not planning:
        ap.error("--ranks applies to --dry-run and to --model with --sizes or --frozen; "
                 "a run takes its world size from torchrun, --compare from the CSV")
    ranks = []
    for word in (args.ranks or "2").split(","):
        if not word.isdigit() or int(word) < 2:
            ap.error(f"--ranks: {word!r} is not a world size; expected comma-separated integers >= 2")
        ranks.append(int(word))
    world = os.environ.get("WORLD_SIZE", "") if not (planning or args.model) else ""
    steps = "e2e" in args.only.split(",") and _phases(args.e2e)
    for n in (ranks if planning else [int(world)] if world.isdigit() else []) if steps else []:
        if bad := _tp_split(n, args.tp_model):
            ap.error(f"TP-{n} steps: {n} does not divide {_title(args.tp_model)}'s {bad}; "
                     "leave them out with --only collectives (or --e2e '')")
    return ranks


def _tp_split(n: int, tp_model: str = "llama-3.1-8b") -> str:
    """What of ``tp_model``'s splits (``LLAMA_8B_SPLITS``, ...) ``n`` GPUs cannot split evenly, or ''."""
    return ", ".join(f"{v} {k}" for k, v in TP_MODELS[tp_model][0].items() if v % n)


def _title(tp_model: str) -> str:
    """``llama-3.1-70b``: ``Llama-3.1-70B`` (table headers, messages)."""
    return tp_model.replace("llama", "Llama").upper().replace("LLAMA", "Llama")


def _tp_model(name: str) -> str:
    """The model of a TP step row's name (the ``TP_MODELS`` key whose tag it carries)."""
    tag = name.split("_")[1] + "_"
    return next((m for m, (_, _, t) in TP_MODELS.items() if t == tag), "llama-3.1-8b")


def model_table(path: str) -> int:
    """rdusim's NCCL model on a node document: per-collective predictions at 2/4/8 GPUs, and
    the figures the issue quotes (a sanity check, nothing fitted to them)."""
    from rdusim.analysis.gpu.collectives import issue17_figures
    from rdusim.hw.collectives import collective_cost
    from rdusim.hw.gpu import load_gpu_node

    node = load_gpu_node(path)
    fabric = node.gpu.fabric
    line_rate = node.gpu.spec.nvlink.bandwidth_bytes_per_s
    print(f"# {node.name}: bus {fabric.bus_bytes_per_s / 1e9:.1f} GB/s, latency x{fabric.latency_scale:g}, "
          f"NVLS {'on' if fabric.nvls else 'off'}")
    print("| op | GPUs | size | algorithm/protocol | predicted (us) | busbw (GB/s) |")
    print("|---|---:|---:|---|---:|---:|")
    for op in OPS:
        for n in (2, 4, 8):
            for size in (1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 27, 1 << 30):
                c = collective_cost(op, size, n, fabric)
                print(f"| {op} | {n} | {_size(size)} | {c.algorithm}/{c.protocol} | {c.time_s * 1e6:.1f} | "
                      f"{c.busbw / 1e9:.0f} |")
    print()
    _e2e_predictions(node)
    print()
    print("| figure quoted by issue 17 (independent measurement, 8 x H100) | rdusim (this model) |")
    print("|---|---|")
    fig = issue17_figures(fabric, line_rate)  # the replaced model: a ring at the line rate, 2 us
    print(f"| all-reduce floor, 2 GPUs: ~7 us | {fig.floor_2 * 1e6:.1f} us (4 KB) |")
    print(f"| all-reduce floor, 4-8 GPUs: 30-40 us | {fig.floor_4 * 1e6:.1f}-{fig.floor_8 * 1e6:.1f} us (4 KB) |")
    for size, nccl, ring in fig.large:
        print(f"| 8 GPUs, {_size(size)}: NCCL 40-60% faster than a plain ring at the NVLink rate | "
              f"{fig.speedup(size) * 100:.0f}% faster ({nccl * 1e6:.0f} vs {ring * 1e6:.0f} us) |")
    return 0


def frozen_table(path: str, args: argparse.Namespace, ranks: list[int]) -> int:
    """rdusim's prediction of every row a run at each of ``ranks`` writes (``planned_rows``: the
    frozen predictions a later measurement is compared with), on the document as it is (no fit)."""
    from rdusim.analysis.gpu.collectives import predict_us
    from rdusim.hw.gpu import load_gpu_node

    node = load_gpu_node(path)
    gpu = node.gpu
    for n in ranks:
        print(f"# frozen predictions: {path}, bus {gpu.fabric.bus_bytes_per_s / 1e9:.1f} GB/s, {n} GPUs, "
              f"NVLS {'on' if gpu.fabric.nvls else 'off'}, {PER} calls back to back per row"
              + (", host ahead (*_queued: NCCL's own time)" if args.host_ahead else ""))
        rows = planned_rows(args, n)
        if "collectives" in args.only.split(","):
            print("| row | predicted (us) | algorithm/protocol |")
            print("|---|---:|---|")
            for row in rows:
                if row["kind"] == "collective":
                    us, cost = predict_us(gpu, row["op"], row["bytes"], n, row["mode"], queued=row["queued"])
                    print(f"| {row['name']} | {us:.2f} | {cost.algorithm}/{cost.protocol} |")
            print()
        steps = [row["step"] for row in rows if row["kind"].startswith("e2e")]
        if steps:
            _e2e_predictions(node, steps)
            print()
    return 0


class FrozenRow(NamedTuple):
    """One prediction of a frozen table: the row's name, its GPU count (None: not given), the
    predicted time (us) and the collective's algorithm/protocol ('' for a TP step)."""

    name: str
    ranks: int | None
    us: float
    how: str
    step: bool  # a TP step row (a ``TP<n> row`` table), not a collective


def frozen_rows(path: str | Path) -> list[FrozenRow]:
    """Every prediction of a committed frozen table (``--frozen``'s output, or a table of its form),
    in file order: the one parser of these files (``read_frozen``, collectives_parity.py). A table
    is a header line ruled by the next; a collective table's header starts ``row`` and has
    ``predicted (us)`` (an ``algorithm/protocol`` column and a ``ranks`` or ``GPUs`` one where
    given), a TP step table's starts ``TP<n> row`` with ``predicted step (us)`` second; other
    tables (the sanity figures, run t's table by op) are not read. A row's GPU count is its
    ``ranks`` or ``GPUs`` column, else its section's ``# frozen predictions: ..., N GPUs`` line,
    else None."""
    lines = Path(path).read_text().splitlines()
    cells = [[c.strip() for c in t.strip().strip("|").split("|")] if t.startswith("|") else None for t in lines]
    ruled = [c is not None and set(c[0]) <= set("-: ") for c in cells]
    out = []
    header: list[str] = []
    section = None
    for i, (text, row) in enumerate(zip(lines, cells, strict=True)):
        if m := re.match(r"# frozen predictions: .*?, (\d+) GPUs", text):
            section = int(m[1])
        if row is None or ruled[i]:
            continue
        if i + 1 < len(lines) and ruled[i + 1]:  # a header: the next line rules it
            header = row
        elif len(row) != len(header):
            continue
        elif header[0] == "row" and "predicted (us)" in header:
            ranks = next((int(row[header.index(c)]) for c in ("ranks", "GPUs") if c in header), section)
            how = row[header.index("algorithm/protocol")] if "algorithm/protocol" in header else ""
            out.append(FrozenRow(row[0], ranks, float(row[header.index("predicted (us)")]), how, False))
        elif re.fullmatch(r"TP\d+ row\b.*", header[0]) and header[1:2] == ["predicted step (us)"]:
            out.append(FrozenRow(row[0], section, float(row[1]), "", True))
    return out


def read_frozen(path: str) -> dict[tuple[str, int | None], tuple[float, str]]:
    """A committed frozen table's predictions (``frozen_rows``) by row name and GPU count: (us, the
    collective's algorithm/protocol, '' for a TP step). A table of several sections (run y's: 4, 3
    and 2 GPUs) repeats row names, so the count is part of the key; a row given twice at one count
    keeps its last figure."""
    return {(r.name, r.ranks): (r.us, r.how) for r in frozen_rows(path)}


def _frozen_row(frozen: dict, name: str, ranks: int, against: str) -> tuple[float, str]:
    """A row's frozen prediction at its GPU count; a row the table lacks exits 2 naming it."""
    for key in ((name, ranks), (name, None)):
        if key in frozen:
            return frozen[key]
    print(f"collectives.py: --against {against}: no frozen prediction for {name} at {ranks} GPUs "
          "(was the table frozen for this run?)", file=sys.stderr)
    raise SystemExit(2)


def _compare_header(gpu, rows: list[dict], csv_path: str, fabric, fitted: bool, against: str | None) -> None:
    """The comparison's header: the run, the fitted bus (or the frozen table compared with) and the
    latency_scale each floor calibration row would imply (reported, never written)."""
    from rdusim.hw.collectives import collective_cost

    bus = fabric.bus_bytes_per_s
    print(f"# {csv_path}: NCCL {rows[0]['nccl']}, {rows[0]['gpu']}, {rows[0]['ranks']} ranks")
    if against:
        print(f"# against the frozen predictions {against} (nothing fitted)")
    else:
        print(f"# {'fitted' if fitted else 'no calibration rows: the document'}'s bus_bandwidth {bus / 1e9:.1f} GB/s "
              f"(document: {gpu.fabric.bus_bytes_per_s / 1e9:.1f}); NVLS {'on' if fabric.nvls else 'off'}")
        if fabric.ring is not None:
            print(f"# {'fitted' if fitted else 'the document'}'s ring.link_bandwidth {fabric.ring.link_bytes_per_s / 1e9:.1f} "
                  f"GB/s (document: {gpu.fabric.ring.link_bytes_per_s / 1e9:.1f}): the ring channels' link")
    for r in rows if not against else ():
        if r["set"] == "calibration" and int(r["bytes"]) < 1 << 20:
            floor = collective_cost("all_reduce", int(r["bytes"]), int(r["ranks"]), fabric).latency_s
            scale = (float(r["median_us"]) * 1e-6 - gpu.launch_s("stream")) / floor
            print(f"# floor row {r['name']}: {float(r['median_us']):.1f} us; latency_scale it would imply "
                  f"{scale:.2f} (not written: docs/gpu.md)")


def compare(path: str, csv_path: str, against: str | None = None) -> int:
    """Fit ``bus_bandwidth`` (calibration rows only), then every prediction row of the measured CSV
    against the model: a collective row is its mode's launch gap plus NCCL's time on the fitted
    fabric; a TP2 row is ``simulate_gpu_step`` on the document as it is (so run it after the fitted
    value is written there). ``latency_scale`` is reported, not fitted: docs/gpu.md says why.
    ``against``: every row's prediction from that committed frozen table instead (``read_frozen``;
    no fit, the model as it was frozen)."""

    from rdusim.analysis.gpu.collectives import (
        compare_collective_rows,
        fitted_fabric,
        is_queued,
        median_worst,
    )
    from rdusim.hw.gpu import load_gpu_node

    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    node = load_gpu_node(path)
    gpu = node.gpu
    frozen = read_frozen(against) if against else None
    fabric, fitted = (gpu.fabric, False) if frozen else fitted_fabric(gpu, rows)
    _compare_header(gpu, rows, csv_path, fabric, fitted, against)
    errors: dict[tuple[str, str], list[float]] = {}
    print("| row | set | measured (us) | predicted (us) | algorithm/protocol | error |")
    print("|---|---|---:|---:|---|---:|")
    # the model's comparison (the same fitted fabric), one compared row per collective row, in order
    compared = iter(()) if frozen else iter(compare_collective_rows(rows, gpu, fabric))
    for r in rows:
        if r["kind"] != "collective":
            continue
        meas = float(r["median_us"])
        queued = is_queued(r)
        if frozen:
            pred, how = _frozen_row(frozen, r["name"], int(r["ranks"]), against)
        else:
            c = next(compared)
            pred, how = c["pred"], f"{c['cost'].algorithm}/{c['cost'].protocol}"
        err = pred / meas - 1
        if r["set"] == "prediction":
            errors.setdefault((r["op"], "queued" if queued else r["mode"]), []).append(err)
        print(f"| {r['name']} | {r['set']} | {meas:.1f} | {pred:.1f} | {how} | {err * 100:+.0f}% |")
    print()
    print("| op | mode | rows | median abs error | worst error |")
    print("|---|---|---:|---:|---:|")
    for (op, mode), errs in sorted(errors.items()):
        median, worst = median_worst(errs)
        print(f"| {op} | {mode} | {len(errs)} | {median:.0f}% | {worst:+.0f}% |")
    steps = [r for r in rows if r["kind"].startswith("e2e")]
    if frozen:
        predicted = {r["name"]: _frozen_row(frozen, r["name"], _tp(r["name"]), against)[0] for r in steps}
    else:
        predicted = {name: us for name, us, _ in _e2e_rows(node, [r["name"] for r in steps])}
    for tp, tp_model in _step_tables([r["name"] for r in steps]) or [(2, "llama-3.1-8b")]:
        print()
        print(f"| TP{tp} row ({_title(tp_model)}) | measured (us) | predicted (us) | error |")
        print("|---|---:|---:|---:|")
        for r in steps:
            if _tp(r["name"]) == tp and _tp_model(r["name"]) == tp_model:
                pred, meas = predicted[r["name"]], float(r["median_us"])
                print(f"| {r['name']} | {meas:.0f} | {pred:.0f} | {(pred / meas - 1) * 100:+.0f}% |")
    return 0


def _tp(name: str) -> int:
    """The TP degree of a step row's name (``tp4_decode_...``: 4)."""
    return int(name.split("_")[0][2:])


def _step_tables(names) -> list[tuple[int, str]]:
    """The (TP degree, model) of each table of step rows ``names``: by degree, then ``TP_MODELS``' order."""
    present = {(_tp(name), _tp_model(name)) for name in names}
    return [(tp, m) for tp in sorted({tp for tp, _ in present}) for m in TP_MODELS if (tp, m) in present]


def _e2e_predictions(node, names: list[str] | None = None) -> None:
    """The TP step rows ``names`` (the TP2 rows of the full plan when None), one table per degree."""
    rows = _e2e_rows(node, names)
    for tp, tp_model in _step_tables([name for name, _, _ in rows]):
        print(f"| TP{tp} row ({_title(tp_model)}) | predicted step (us) | of which all-reduce (us) |")
        print("|---|---:|---:|")
        for name, step_us, ar_us in rows:
            if _tp(name) == tp and _tp_model(name) == tp_model:
                print(f"| {name} | {step_us:.1f} | {ar_us:.1f} |")


def _e2e_rows(node, names: list[str] | None = None) -> list[tuple[str, float, float]]:
    """The TP step rows ``names`` (the TP2 rows of the full plan when None) as rdusim predicts
    them (``rdusim.analysis.gpu.collectives.predict_tp_step``)."""
    from rdusim.analysis.gpu.collectives import predict_tp_step
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec

    models = {}
    out = []
    tps = sorted({_tp(name) for name in names}) if names else [2]
    rows = [r for tp in tps for r in plan(ranks=tp) if r["kind"].startswith("e2e")]
    known = {r["name"] for r in rows}
    rows += [_step_row(name) for name in names or () if name not in known]  # a run's own --decode points
    for row in rows:
        if names is not None and row["name"] not in names:
            continue
        phase = "decode" if row["kind"].startswith("e2e_decode") else "prefill"
        seq = row["kv_len"] if phase == "decode" else row["seq_len"]
        tp_model = _tp_model(row["name"])
        if tp_model not in models:
            models[tp_model] = load_spec(model_path(tp_model), ModelSpec)
        step = predict_tp_step(models[tp_model], node.gpu, phase=phase, batch=row["batch"], length=seq, mode=row["mode"],
                               tp=_tp(row["name"]))
        out.append((row["name"], step.seconds * 1e6, step.kernels.get("all_reduce", 0.0) * 1e6))
    return out


def _step_row(name: str) -> dict:
    """A TP step row from its name (``tp4_decode_b48_l4096_graph``, ``tp4_70b_prefill_b1_l1024``)."""
    import re

    m = re.fullmatch(r"tp(\d+)_(?:70b_)?(decode|prefill)_b(\d+)_l(\d+)(_graph)?", name)
    if m is None:
        raise ValueError(f"not a TP step row: {name!r}")
    tp, phase, batch, length = m[1], m[2], int(m[3]), int(m[4])
    if phase == "decode":
        return {"kind": f"e2e_decode_tp{tp}", "name": name, "batch": batch, "kv_len": length, "mode": "graph"}
    return {"kind": f"e2e_prefill_tp{tp}", "name": name, "batch": batch, "seq_len": length, "mode": "eager"}


def _size(size: int) -> str:
    return f"{size >> 30} GiB" if size >= 1 << 30 else f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def _run(args: argparse.Namespace) -> int:  # pragma: no cover - needs two GPUs
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from measure import BF16, Ctx, Llama, LlamaShape, capture, pick_sdpa_backend, rope_tables, sdpa  # noqa: PLC0415

    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    device = torch.device("cuda")
    env = {"nccl": ".".join(map(str, torch.cuda.nccl.version())), "gpu": torch.cuda.get_device_name(),
           "nccl_algo": os.environ.get("NCCL_ALGO", ""), "nccl_proto": os.environ.get("NCCL_PROTO", "")}
    # the TP steps' attention on FlashAttention, the kernel the model prices (and the single-GPU
    # sweeps ran): SDPA's own choice was cuDNN's attention on the H200 (run ab,
    # benchmarks/gpu/h200-20261128ab-tpshard-kernels.csv), its kernels 38% shorter at batch 64-128, so runs
    # t, u, x and aa timed their TP steps on a kernel the model does not price
    sdpa_backend = pick_sdpa_backend(Ctx(device, tiny=False))
    if rank == 0:
        print(f"sdpa backend: {sdpa_backend}", flush=True)
    sink = None
    if rank == 0:  # every row written as it is measured: a run cut short keeps what it measured
        fh = open(args.out, "w", newline="")  # closed below; every row flushed as written
        sink = (fh, csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore"))
        sink[1].writeheader()
        fh.flush()
    warm = None
    if args.busy_ms:
        a = torch.randn(4096, 4096, dtype=torch.bfloat16, device=device)
        warm = (a, max(1, int(args.busy_ms / 0.2)))  # ~0.2 ms per 4096^3 bf16 product on an H100

    def measure(row: dict, fn, reps: int, per: int) -> None:
        """Time ``fn`` ``per`` times back to back (one graph of ``per`` for a graph row), write the row."""
        batch = _repeat(fn, per)
        run = capture(None, batch).replay if row["mode"] == "graph" else batch
        seconds = _timed(torch, dist, run, reps, per, SLEEP_CYCLES if row["ahead"] else 0, warm)
        if sink is not None:
            sink[1].writerow({**row, **env, "reps": reps * per, "ranks": world, "median_us": round(seconds * 1e6, 3)})
            sink[0].flush()
            print(f"{row['set']:11s} {row['name']:40s} {seconds * 1e6:12.1f} us", flush=True)
        torch.cuda.empty_cache()

    rows = planned_rows(args, world)
    steps = [r for r in rows if r["kind"].startswith("e2e")]
    with torch.no_grad():
        for row in (r for r in rows if r["kind"] == "collective"):
            measure(row, _collective(row["op"], row["bytes"], world, device, dist, torch), 10, PER)
        if steps:  # _check_args: world divides every split
            splits, whole, _ = TP_MODELS[args.tp_model]
            split = {k: v // world for k, v in splits.items()}
            shard = LlamaShape(layers=whole["layers"], hidden=whole["hidden"], q_heads=split["heads"],
                               kv_heads=split["KV heads"], ffn=split["FFN"], vocab=split["vocabulary"])
            model = Llama(shard, device)
            for row in steps:
                for gather in (True, False) if args.without_gather else (True,):
                    measure(row if gather else {**row, "name": row["name"] + "_nogather"},
                            _tp_step(model, row, world, device, dist, torch, F=torch.nn.functional, BF16=BF16,
                                     rope_tables=rope_tables, sdpa=sdpa, gather=gather), 20, 1)
    if sink is not None:
        sink[0].close()
    _exit(torch)
    return 0


def _timed(torch, dist, fn, reps: int, per: int, sleep: int, warm) -> float:  # pragma: no cover - needs a GPU
    """Median over ``reps`` trials of one ``fn()`` (``per`` back-to-back operations) divided by
    ``per``; a barrier before every trial lines the two ranks up (nccl-tests' method: launch
    cost and rank skew are spread over ``per`` operations instead of landing on each).
    ``sleep`` (--host-ahead) and ``warm`` (--busy-ms: a matrix and a count of products) keep the
    GPU busy before the trial."""
    import statistics

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep)
        if warm is not None:
            for _ in range(warm[1]):
                warm[0] @ warm[0]
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / per)
    return statistics.median(times)


def _exit(torch) -> None:  # pragma: no cover - needs a GPU
    """End the process without destroy_process_group: it hung after captured graphs
    (collective_micro.py, 2026-11-25 18:42 UTC)."""
    torch.cuda.synchronize()
    sys.stdout.flush()
    os._exit(0)


def _sizes(text: str | None) -> list[int] | None:
    if not text:
        return None
    return NAMED_SIZES[text] if text in NAMED_SIZES else [int(v) for v in text.split(",")]


def _decode_points(ap: argparse.ArgumentParser, text: str) -> list[tuple[int, int]]:
    """``--decode 2x2048,16x4096``: the TP decode points (batch, KV length); a malformed one exits 2."""
    points = []
    for point in text.split(","):
        batch, _, kv = point.partition("x")
        if not (batch.isdigit() and kv.isdigit() and int(batch) > 0 and int(kv) > 0):
            ap.error(f"--decode: {point!r} is not BATCHxKV with two positive integers (e.g. 2x2048)")
        points.append((int(batch), int(kv)))
    return points


def _phases(text: str) -> tuple[str, ...]:
    return tuple(p for p in text.split(",") if p)


def _repeat(fn, per: int):
    """``fn`` ``per`` times back to back, as one callable (one CUDA graph in graph mode)."""

    def batch() -> None:
        for _ in range(per):
            fn()

    return batch


def _collective(op, size, world, device, dist, torch):  # pragma: no cover - needs two GPUs
    elems = max(world, size // 2)
    elems -= elems % world
    if op == "all_reduce":
        buf = torch.randn(elems, dtype=torch.bfloat16, device=device)
        return lambda: dist.all_reduce(buf)
    if op == "all_gather":
        part = torch.randn(elems // world, dtype=torch.bfloat16, device=device)
        whole = torch.empty(elems, dtype=torch.bfloat16, device=device)
        return lambda: dist.all_gather_into_tensor(whole, part)
    if op == "reduce_scatter":
        whole = torch.randn(elems, dtype=torch.bfloat16, device=device)
        part = torch.empty(elems // world, dtype=torch.bfloat16, device=device)
        return lambda: dist.reduce_scatter_tensor(part, whole)
    send = torch.randn(elems, dtype=torch.bfloat16, device=device)
    recv = torch.empty_like(send)
    return lambda: dist.all_to_all_single(recv, send)


def _tp_step(model, row, world, device, dist, torch, *, F, BF16, rope_tables, sdpa, gather=True):  # pragma: no cover
    """One TP step of the shard ``model`` (its heads, KV heads, FFN and vocabulary slice); ``gather``:
    the LM head's logits all-gathered at the end (``--without-gather`` times the step without it too)."""
    s = model.s
    batch = row["batch"]
    prefill = row["kind"].startswith("e2e_prefill")
    length = row["seq_len"] if prefill else row["kv_len"]
    ck = [torch.randn(batch, s.kv_heads, length, s.head_dim, dtype=BF16, device=device) for _ in range(s.layers)]
    cv = [torch.randn_like(c) for c in ck]
    t = length if prefill else 1
    tokens = torch.randint(0, s.vocab, (batch, t), device=device)
    pos = torch.arange(length, device=device) if prefill else torch.tensor([length - 1], device=device)
    cos, sin = rope_tables(s, pos)
    logits = torch.empty(batch, 1, s.vocab * world, dtype=BF16, device=device)

    def step():
        x = F.embedding(tokens, model.embed)
        for layer, k_cache, v_cache in zip(model.layers, ck, cv, strict=True):
            h = F.rms_norm(x, (s.hidden,), layer["norm1"], 1e-5)
            qkv = F.linear(h, layer["wqkv"]).view(batch, t, s.q_heads + 2 * s.kv_heads, s.head_dim).transpose(1, 2)
            q = model.rope(qkv[:, : s.q_heads], cos, sin)
            k = model.rope(qkv[:, s.q_heads : s.q_heads + s.kv_heads], cos, sin)
            v = qkv[:, s.q_heads + s.kv_heads :]
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            o = sdpa(q, k, v, True) if prefill else sdpa(q, k_cache, v_cache, False)
            o = F.linear(o.transpose(1, 2).reshape(batch, t, s.q_heads * s.head_dim), layer["wo"])
            dist.all_reduce(o)
            x = x + o
            h = F.rms_norm(x, (s.hidden,), layer["norm2"], 1e-5)
            gu = F.linear(h, layer["wgu"])
            d = F.linear(F.silu(gu[..., : s.ffn]) * gu[..., s.ffn :], layer["wd"])
            dist.all_reduce(d)
            x = x + d
        h = F.rms_norm(x[:, -1:], (s.hidden,), model.norm, 1e-5)
        if not gather:
            return F.linear(h, model.lm_head)
        dist.all_gather_into_tensor(logits.view(-1), F.linear(h, model.lm_head).contiguous().view(-1))
        return logits

    return step


if __name__ == "__main__":
    sys.exit(main())
