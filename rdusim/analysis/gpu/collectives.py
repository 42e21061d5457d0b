"""Measured NCCL collectives against the model: one row of ``benchmarks/gpu/collectives.py``
predicted as that script times it, the bus fit on a run's calibration rows, and the figures
issue 17 quotes from independent 8 x H100 measurements.

Owns: ``CALLS_PER_ROW``, ``predict_us``, ``fit_bus_bandwidth``, ``fit_ring_link``, ``fitted_fabric``,
``median_worst``, ``compare_collective_rows``, ``issue17_figures``, ``collective_runs``, ``run_label``,
``tp_layer``, ``predict_tp_step``, ``compare_tp_steps``, ``CUSTOM_AR_CALIBRATION``, ``custom_ar_row_us``,
``compare_custom_ar_rows``. Imports: analysis.gpu.predict, hw.collectives, hw.custom_all_reduce, hw.gpu,
mapping.gpu, sim.gpu, sim.ring.

``benchmarks/gpu/collectives.py`` (and the scripts beside it) compare with these; it keeps its
own ``PER`` literal because a measurement run imports torch only, never rdusim
(tests/gpu/test_collectives.py checks the two agree).
"""

from __future__ import annotations

import csv
import dataclasses
import re
from pathlib import Path

from rdusim.analysis.gpu.measured import error_stats
from rdusim.analysis.gpu.predict import MEASURED_LAYER, simulate_gpu_step
from rdusim.config.schema import ModelSpec
from rdusim.hw import collectives as nccl
from rdusim.hw.custom_all_reduce import CustomArLink
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import collective
from rdusim.sim.gpu import elapsed_s, simulate_gpu
from rdusim.sim.ring import collective_time_s, ring_transfer_s

#: collectives timed back to back per row (stream: that many launches; graph: one graph of that
#: many), as nccl-tests does: ``PER`` of benchmarks/gpu/collectives.py
CALLS_PER_ROW = 20


def predict_us(
    gpu: Gpu,
    op: str,
    size: int,
    ranks: int,
    mode: str,
    fabric=None,
    queued: bool = False,
) -> tuple[float, object]:
    """What the timing loop of ``collectives.py`` measures for one collective row, simulated:
    ``CALLS_PER_ROW`` calls back to back (``rdusim.sim.gpu``), divided by that. A ``stream`` row is
    Python issuing the torch.distributed calls: the engine's eager mode, where each call costs the
    host its ``launch.collective_host`` and the GPU runs NCCL's time, so the row comes out as the
    slower of host and device; a ``graph`` row is one graph of them (per collective the graph
    node, NCCL's event pair ``launch.graph_event_pair`` and NCCL's time). ``fabric``: a fitted
    one instead of the document's. ``queued`` (a ``--host-ahead`` row, the calls queued before the
    GPU reaches them): NCCL's own time, no launch. Returns (us, the collective's cost)."""
    cost = nccl.collective_cost(
        op, size, ranks, fabric or gpu.fabric
    )  # looked up now: the experiment
    # scripts (collectives_llfit.py, collectives_channels.py) swap in their variants of NCCL's model
    if queued:
        return collective_time_s(cost) * 1e6, cost
    kernel = dataclasses.replace(collective(op, op, size, ranks, gpu)[0], collective=cost)
    trace = simulate_gpu(
        [(kernel, 0)] * CALLS_PER_ROW, gpu, mode="eager" if mode == "stream" else "graph"
    )
    return elapsed_s(trace) / CALLS_PER_ROW * 1e6, cost


#: run cx's calibration rows of vLLM's custom all-reduce (``benchmarks/gpu/custom_ar.py``'s ``CALIBRATION``,
#: which keeps its own copy: a measurement run never imports rdusim; tests check the two agree): the
#: empty kernel at 36 blocks, 4 blocks through 16 MiB, 132 through 64 MiB (variant, bytes)
CUSTOM_AR_CALIBRATION = frozenset({("empty-b36", 0), ("1stage-b4", 16 << 20), ("1stage-b132", 64 << 20)})


def custom_ar_row_us(row: dict, link: CustomArLink) -> float:
    """One row of ``benchmarks/gpu/custom_ar.py`` (calls queued back to back: the kernel's own time, no
    launch) as the model has it: an all-reduce row on its ranks (two where the CSV has no ``ranks``, runs
    cw-cy) at its forced stages and block limit through
    ``rdusim.sim.custom_ar``; an empty kernel (nothing to sum) its fixed time and two barriers (two
    stages: its middle one's fence)."""
    if row["kind"] == "empty":
        fence = link.fence_at(int(row["blocks"])) if str(row["stages"]) == "2" else 0.0
        return (link.kernel_s + 2 * link.flag_s + fence) * 1e6
    cost = nccl.custom_ar_cost(int(row["bytes"]), int(row.get("ranks") or 2), nccl.Fabric(1.0, custom=link),
                               max_bytes=1 << 62, stages=int(row["stages"]), block_limit=int(row["limit"]))
    return collective_time_s(cost) * 1e6


def compare_custom_ar_rows(rows: list[dict], link: CustomArLink,
                           calibration: frozenset[tuple[str, int]] = frozenset()) -> list[dict]:
    """The timed rows of a ``custom_ar.py`` CSV against the model: each with its kind (one stage, two
    stages, the kernel alone), ``set`` (calibration where ``calibration`` names it: run cx's
    ``CUSTOM_AR_CALIBRATION`` for run cx's CSV, none for a run nothing was fitted to) and ``err``
    (predicted / measured - 1)."""
    out = []
    for r in rows:
        if r["kind"] not in ("ar", "empty"):
            continue
        kind = "the kernel alone" if r["kind"] == "empty" else ("one stage" if str(r["stages"]) == "1" else "two stages")
        fitted = (r["variant"], int(r["bytes"])) in calibration
        out.append({"variant": r["variant"], "bytes": int(r["bytes"]), "kind": kind,
                    "set": "calibration" if fitted else "prediction",
                    "err": custom_ar_row_us(r, link) / float(r["median_us"]) - 1})
    return out


def median_worst(errs: list[float]) -> tuple[float, float]:
    """The median absolute and the worst (signed) of relative errors (``error_stats``), in percent:
    every comparison table of the collective scripts reports these two."""
    _, median, worst = error_stats(errs)
    return median * 100, worst * 100


def _calibration_ends(rows: list[dict]) -> tuple[tuple[int, float, int], tuple[int, float, int]]:
    """The smallest and largest calibration all-reduce rows of 256 MB and up: (bytes, seconds,
    ranks) each, the two ends of the slope both link fits take."""
    big = sorted(
        (int(r["bytes"]), float(r["median_us"]) * 1e-6, int(r["ranks"]))
        for r in rows
        if r["set"] == "calibration" and r["op"] == "all_reduce" and int(r["bytes"]) >= 1 << 28
    )
    return big[0], big[-1]


def fit_bus_bandwidth(rows: list[dict]) -> float:
    """``nvlink.bus_bandwidth`` from the calibration rows: the slope of the stream-launched
    all-reduce between 256 MB and 1 GB (ring Simple on two GPUs: each GPU puts 2(n-1)/n S on
    NVLink, all of it at the bus rate)."""
    (s0, t0, n), (s1, t1, _) = _calibration_ends(rows)
    return 2 * (n - 1) / n * (s1 - s0) / (t1 - t0)


def fit_ring_link(rows: list[dict], ring: nccl.RingChannels) -> float:
    """``nvlink.ring.link_bandwidth`` from the calibration rows: the link at which the ring's
    channels (``rdusim.sim.ring``) take the stream-launched all-reduce's measured time between
    256 MB and 1 GB (``fit_bus_bandwidth``'s rows and slope, through the channels instead of a
    closed form). Geometric bisection between 1/10 and 10x the document's link, to a part in 10^9
    (a hundredth of a byte a second at these rates; about 33 halvings)."""
    (s0, t0, n), (s1, t1, _) = _calibration_ends(rows)

    def slope(link: float) -> float:
        at = dataclasses.replace(ring, link_bytes_per_s=link)
        return sum(
            sign * ring_transfer_s(nccl.ring_plan("all_reduce", size, n, at)) for sign, size in ((1, s1), (-1, s0))
        )

    lo, hi = ring.link_bytes_per_s / 10, ring.link_bytes_per_s * 10
    while hi > lo * (1 + 1e-9):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if slope(mid) > t1 - t0 else (lo, mid)
    return (lo * hi) ** 0.5


def fitted_fabric(gpu: Gpu, rows: list[dict]) -> tuple[nccl.Fabric, bool]:
    """The fabric a measured CSV's rows are compared on: the document's, with ``bus_bandwidth``
    fitted to the CSV's calibration rows (``fit_bus_bandwidth``) where it has any, and the ring
    channels' link (``fit_ring_link``) where the document has them. Returns (fabric, fitted)."""
    fabric = gpu.fabric
    fitted = any(r["set"] == "calibration" for r in rows)
    if not fitted:
        return fabric, False
    ring = fabric.ring
    if ring is not None:
        ring = dataclasses.replace(ring, link_bytes_per_s=fit_ring_link(rows, ring))
    return dataclasses.replace(fabric, bus_bytes_per_s=fit_bus_bandwidth(rows), ring=ring), True


def is_queued(row: dict) -> bool:
    """A stream row timed with the host ahead (``*_stream_queued``): predicted as NCCL's own time."""
    return row["mode"] == "stream" and row["name"].endswith("_queued")


def compare_collective_rows(rows: list[dict], gpu: Gpu, fabric: nccl.Fabric | None = None) -> list[dict]:
    """Every collective row of one ``collectives.py`` CSV against the model on ``fabric``, by
    default the run's fitted fabric (``fitted_fabric``; a caller that has it passes it): the row
    with ``ranks``, ``launch`` (stream, graph or queued), ``pred`` (us), ``err`` (signed) and
    ``cost`` (the collective's algorithm and protocol)."""
    if fabric is None:
        fabric, _ = fitted_fabric(gpu, rows)
    out = []
    for r in rows:
        if r["kind"] != "collective":
            continue
        ranks = int(r.get("ranks") or 2)
        queued = is_queued(r)
        pred, cost = predict_us(
            gpu, r["op"], int(r["bytes"]), ranks, r["mode"], fabric, queued=queued
        )
        out.append(
            {
                **r,
                "ranks": ranks,
                "launch": "queued" if queued else r["mode"],
                "pred": pred,
                "err": pred / float(r["median_us"]) - 1,
                "cost": cost,
            }
        )
    return out


@dataclasses.dataclass(frozen=True)
class Issue17Figures:
    """The model's values for the figures issue 17 quotes (8 x H100, independent measurements)."""

    floor_2: float  # all-reduce of 4 KB on 2 GPUs, seconds
    floor_4: float
    floor_8: float
    large: tuple[
        tuple[int, float, float], ...
    ]  # (bytes, NCCL model s, plain ring at the line rate s), 8 GPUs

    def speedup(self, size: int) -> float:
        """How much faster than the plain ring the modelled NCCL all-reduce is at ``size`` (0.4: 40%)."""
        _, nccl, ring = next(x for x in self.large if x[0] == size)
        return ring / nccl - 1


#: the sizes of issue 17's ">= 100 MB on 8 GPUs" figure the model is checked at
ISSUE17_LARGE = (1 << 27, 1 << 30)


def issue17_figures(fabric: object, line_rate: float) -> Issue17Figures:
    """The all-reduce floors (4 KB) at 2, 4 and 8 GPUs, and at ``ISSUE17_LARGE`` on 8 GPUs NCCL's
    time against the model it replaced: a ring at the NVLink line rate plus 2 us."""
    floors = [collective_time_s(nccl.collective_cost("all_reduce", 4096, n, fabric)) for n in (2, 4, 8)]
    large = tuple(
        (
            size,
            collective_time_s(nccl.collective_cost("all_reduce", size, 8, fabric)),
            2 * 7 / 8 * size / line_rate + 2e-6,
        )
        for size in ISSUE17_LARGE
    )
    return Issue17Figures(*floors, large)


def run_prefix(csv_path: Path) -> str | None:
    """``h100x4-20261128w-x3-floors.csv`` -> ``h100x4-20261128w``; None for other names."""
    m = re.match(r"([a-z0-9]+x\d+-\d{8}[a-z]+\d*)-", csv_path.name)
    return m[1] if m else None


def run_label(csv_path: Path) -> str:
    """``h100x2-20261125t-collectives.csv`` -> ``run t``; other names: the file's stem."""
    prefix = run_prefix(csv_path)
    return f"run {prefix.split('-')[1][8:]}" if prefix else csv_path.stem


def collective_runs(directory: Path) -> list[Path]:
    """Every committed measurement of collectives in ``directory`` (a ``collectives.py`` CSV of a
    run), leaving out the diagnostics that time another thing (``percall``: one call alone;
    ``nomix``: NCCL's event nodes off; ``micro``; run dk: NCCL's p2p channels and protocol forced by
    the environment, ``benchmarks/gpu/a2a_ll.py``'s calibration; run do's ring Simple forced,
    ``benchmarks/gpu/ring_intercept.py``'s)."""
    out = []
    for path in sorted(directory.glob("*x[0-9]-2026*.csv")):
        if run_prefix(path) is None or any(k in path.name for k in ("percall", "nomix", "micro", "20261130dk-",
                                                                    "20261130do-simple")):
            continue
        with open(path, newline="") as fh:
            if any(r.get("kind") == "collective" for r in csv.DictReader(fh)):
                out.append(path)
    return out


def tp_layer() -> list[str]:
    """A tensor-parallel Llama layer as ``collectives.py`` runs it: ``MEASURED_LAYER`` with an
    all-reduce after the attention output and after the FFN down projection (the LM head split by
    vocabulary, its logits gathered after it: ``TP_HEAD``)."""
    layer = list(MEASURED_LAYER)
    layer.insert(layer.index("o_gemm") + 1, "all_reduce")
    layer.insert(layer.index("down_gemm") + 1, "all_reduce")
    return layer


#: the model head of ``collectives.py``'s TP step: the embedding, the vocabulary-split LM head and
#: the all-gather of its logits (``rdusim.mapping.gpu``'s ``logits_gather``)
TP_HEAD = ("embedding", "lm_head", "logits_gather")
#: the same head without the gather: a step timed without it (run cp)
TP_HEAD_WITHOUT_GATHER = tuple(k for k in TP_HEAD if k != "logits_gather")
#: a TP step row timed without its logits' all-gather (``collectives.py --without-gather``, run cp)
#: ends its name with this; it is predicted with ``TP_HEAD_WITHOUT_GATHER``
NO_GATHER_SUFFIX = "_nogather"


def predict_tp_step(
    model: ModelSpec, gpu: Gpu, *, phase: str, batch: int, length: int, mode: str, tp: int,
    head: tuple[str, ...] = TP_HEAD,
):
    """One TP step of ``collectives.py`` (decode at KV ``length``, or a prefill of ``length``
    tokens) on one GPU of ``tp``, on the document as it is (no bus fit): a ``GpuStep``. ``head``:
    the model head's kernels (``TP_HEAD``, or ``TP_HEAD_WITHOUT_GATHER`` for a step timed without
    its logits' gather)."""
    return simulate_gpu_step(
        model,
        gpu,
        layer=tp_layer(),
        head=list(head),
        phase=phase,
        batch=batch,
        seq_len=length,
        mode=mode,
        tp=tp,
    )


def compare_tp_steps(rows: list[dict], gpu: Gpu, model: ModelSpec) -> list[dict]:
    """A ``collectives.py`` CSV's TP step rows (``e2e_decode_tp<n>``, ``e2e_prefill_tp<n>``; the
    degree is the row's ``ranks``) against ``predict_tp_step``: the row with ``phase``, ``pred``
    (seconds) and ``err``. A row timed without its logits' gather (``NO_GATHER_SUFFIX``) is
    predicted without it."""
    out = []
    for r in rows:
        if not r["kind"].startswith(("e2e_decode_tp", "e2e_prefill_tp")):
            continue
        phase = "decode" if r["kind"].startswith("e2e_decode") else "prefill"
        length = int(float(r["kv_len"] if phase == "decode" else r["seq_len"]))
        step = predict_tp_step(
            model,
            gpu,
            phase=phase,
            batch=int(float(r["batch"])),
            length=length,
            mode=r["mode"],
            tp=int(r["ranks"]),
            head=TP_HEAD_WITHOUT_GATHER if r["name"].endswith(NO_GATHER_SUFFIX) else TP_HEAD,
        )
        t = float(r["median_us"]) * 1e-6
        out.append({**r, "phase": phase, "pred": step.seconds, "err": (step.seconds - t) / t})
    return out
