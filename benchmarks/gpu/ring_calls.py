"""Run co: what a ring channel's primitive calls cost, one by one (frozen before the run).

The engine prices a ring channel's call by its loads plus stores a byte at one rate
(``rdusim.hw.collectives.ring_primitives``, ``nvlink.ring.channel_bandwidth``). On one channel
(run ad, two H100s, ``h100x2-20261128ad-ch1.csv``) that count gives NCCL's all-reduce within
0.3% from 16 MiB but its all-gather 10% short at every size: the all-gather's loop (``copySend``,
``recv``) costs more than its five operations a byte. Run co measures on two H200s the calls
that tell where:

- ``all_gather_inplace`` (``collective_ramp_diag.py``): NCCL's in-place all-gather sends where
  the out-of-place one copies as it sends (``directSend`` against ``directCopySend``), its loop
  ``send`` + ``recv``, the all-reduce's own calls;
- ``reduce_scatter``: ``send`` + ``recvReduceCopy`` (two loads, one store), the same five
  operations as the all-gather's loop with the loads and stores the other way round.

Hypotheses (each fitted on run ad's one-channel rows, nothing from run co; ``u`` the time of one
operation at ``channel_bandwidth``):

- ``count``: the engine now, every load and store ``u``.
- ``copy``: ``copySend`` costs ``c`` where the count has 3 (c fitted), every other call as counted.
- ``store``: a load costs ``l`` and a store ``s`` with ``l + s = 2`` (the all-reduce, exact on the
  count), fitted on the all-gather: every call priced by its loads and stores.

    PYTHONPATH=. python benchmarks/gpu/ring_calls.py --frozen h200x2-20261130co-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/ring_calls.py --compare h200x2-20261130co-predicted.txt <csv>...

Variants (``ring_run_co.sh``; the CSV's ``variant`` column): ``def`` (NCCL's defaults, 24 ring
channels), ``ch8`` and ``ch1`` (the channels forced to 8 and 1), ``def2`` (the defaults again). Checks:
``h200x2-20261130co-calls-hypotheses.md`` (committed before the run).

After the run (docs/gpu.md, "Run co"): ``--prices`` fits per-call prices on run co's one-channel
loops (a load and a store, a further store, a further load) and checks them on the all-reduce's loop
and run ad's H100 all-gather; ``--evaluate`` runs ``rdusim fidelity --gpu`` with the engine's count
and with those prices (not adopted: the reduce-scatter's groups regress); ``--channels`` reads run
cq's rows (``ring_run_cq.sh``: the channels forced to 1-16, and 24) as a channel's operations a wire
byte by op and channel count, and the GPU's loads and stores a second.

    PYTHONPATH=. python benchmarks/gpu/ring_calls.py --prices
    PYTHONPATH=. python benchmarks/gpu/ring_calls.py --evaluate
    PYTHONPATH=. python benchmarks/gpu/ring_calls.py --channels benchmarks/gpu/h200x2-20261130cq-*.csv
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ring_predict import frozen_arguments, frozen_or_compare, frozen_rows, read_measured  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
DOC = "hw_configs/h200.yaml"
RUN_AD_CH1 = ROOT / "benchmarks/gpu/h100x2-20261128ad-ch1.csv"
FIT_FROM = 16  # MiB: run ad's one-channel rows the slopes are fitted on (the fixed cost aside)
CALLS = 20  # a graph of calls, as collectives.py's CALLS_PER_ROW
OPS = ("all_reduce", "all_gather", "all_gather_inplace", "reduce_scatter")
#: variant -> (ring channels, sizes in MiB)
VARIANTS = {
    "ch1": (1, (4, 16, 64)),
    "ch8": (8, (4, 16, 64, 256)),
    "def": (24, (2, 4, 8, 16, 32, 64, 128, 256, 1024)),
    "def2": (24, (2, 4, 8, 16, 32, 64, 128, 256, 1024)),  # the defaults again, after the forced channels
}
HYPOTHESES = ("count", "copy", "store")


def slope(rows: list[tuple[int, float]]) -> float:
    """Least-squares us per MiB of (MiB, us) rows."""
    xs, ys = [x for x, _ in rows], [y for _, y in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in rows) / sum((x - mx) ** 2 for x in xs)


def plain_rows(paths, key=lambda r: r["op"], from_mib: int = 0) -> dict:
    """{key(row): [(MiB, us), ...]} of collective_ramp_diag.py CSVs' plain rows from ``from_mib`` MiB."""
    rows: dict = {}
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        with open(path, newline="") as fh:
            for r in csv.DictReader(fh):
                mib = int(r["bytes"]) // MIB
                if r["case"] == "plain" and mib >= from_mib:
                    rows.setdefault(key(r), []).append((mib, float(r["median_us"])))
    return rows


def run_ad_ratio() -> float:
    """The all-gather's time a byte of output over the all-reduce's a byte of buffer, one channel (run ad)."""
    rows = plain_rows(RUN_AD_CH1, from_mib=FIT_FROM)
    return slope(rows["all_gather"]) / slope(rows["all_reduce"])


def ring_calls(op: str, ranks: int) -> tuple[tuple[bool, int, int], ...]:
    """A ring loop's primitive calls as (on NVLink, loads a byte, stores a byte), ``ring_primitives``'
    order, with the in-place all-gather (its first call a send, not a copySend)."""
    n = ranks
    if n < 2:
        raise ValueError(f"a ring needs at least 2 GPUs, got {ranks}")
    if op == "all_reduce":  # send, recvReduceSend, recvReduceCopySend, recvCopySend, recv
        return ((True, 1, 1),) + ((True, 2, 1),) * (n - 2) + ((True, 2, 2),) + ((True, 1, 2),) * (n - 2) \
            + ((False, 1, 1),)
    if op in ("all_gather", "all_gather_inplace"):  # copySend (send in place), recvCopySend, recv
        first = (True, 1, 1) if op == "all_gather_inplace" else (True, 1, 2)
        return (first,) + ((True, 1, 2),) * (n - 2) + ((False, 1, 1),)
    if op == "reduce_scatter":  # send, recvReduceSend, recvReduceCopy
        return ((True, 1, 1),) + ((True, 2, 1),) * (n - 2) + ((False, 2, 1),)
    raise ValueError(f"no ring for {op!r}")


def priced(cost):
    """``ring_primitives`` with each call at ``cost(loads, stores)`` operations a byte, any ring size."""

    def primitives(op: str, ranks: int) -> tuple[tuple[bool, float], ...]:
        return tuple((on_link, cost(loads, stores)) for on_link, loads, stores in ring_calls(op, ranks))

    return primitives


def hypothesis_cost(hypothesis: str, ratio: float):
    """A call's operations a byte, ``cost(loads, stores)``, under ``hypothesis`` (two GPUs).

    On two GPUs the all-reduce's loop (send, recvReduceCopySend, recv) is 8 operations over 2 wire
    chunks, the all-gather's (copySend, recv) one wire chunk: its time a byte of output over the
    all-reduce's a byte of buffer is ``ops / 2 / 4``, so run ad's ``ratio`` gives the all-gather's
    loop ``8 x ratio`` operations."""
    ag_loop = 8 * ratio
    if hypothesis == "count":
        return lambda loads, stores: loads + stores
    if hypothesis == "copy":  # copySend (one load, two stores) the all-gather's loop less recv's 2
        return lambda loads, stores: ag_loop - 2 if (loads, stores) == (1, 2) else loads + stores
    if hypothesis == "store":
        store = ag_loop - 4  # copySend + recv = 2 loads + 3 stores = 2 (l + s) + s, with l + s = 2
        return lambda loads, stores: (2 - store) * loads + store * stores
    raise ValueError(f"no hypothesis {hypothesis!r}")


def primitives(hypothesis: str, op: str, ratio: float) -> tuple[tuple[bool, float], ...]:
    """A two-GPU ring loop's calls as (on NVLink, cost in operations) under ``hypothesis``."""
    return priced(hypothesis_cost(hypothesis, ratio))(op, 2)


def predict(hypothesis: str, op: str, mib: int, channels: int, ratio: float) -> float:
    """Us a call of one graph row on two GPUs, the document's fabric at ``channels`` ring channels."""
    from rdusim.hw import collectives as nccl
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import collective
    from rdusim.sim.gpu import elapsed_s, simulate_gpu

    base = "all_gather" if op == "all_gather_inplace" else op
    size = mib * MIB
    gpu = load_gpu_node(ROOT / DOC).gpu
    ring = dataclasses.replace(gpu.fabric.ring, channels=channels)
    cost = nccl.collective_cost(base, size, 2, dataclasses.replace(gpu.fabric, ring=ring))
    if cost.ring is not None:
        plan = nccl.ring_plan(base, size, 2, ring)
        cost = dataclasses.replace(cost, ring=dataclasses.replace(plan, primitives=primitives(hypothesis, op, ratio)))
    kernel = dataclasses.replace(collective(base, base, size, 2, gpu)[0], collective=cost)
    return elapsed_s(simulate_gpu([(kernel, 0)] * CALLS, gpu, mode="graph")) / CALLS * 1e6


def frozen_table() -> list[str]:
    ratio = run_ad_ratio()
    lines = [
        f"# Run co, frozen before the run: NCCL's graph rows on two H200s, {DOC} as committed; run ad's",
        f"# one-channel all-gather / all-reduce time a byte: {ratio:.4f} (the count's 0.625).",
        "| variant | op | MiB | " + " | ".join(f"{h} (us)" for h in HYPOTHESES) + " |",
        "|---|---|---:|" + "---:|" * len(HYPOTHESES),
    ]
    for variant, (channels, sizes) in VARIANTS.items():
        for op in OPS:
            for mib in sizes:
                cells = " | ".join(f"{predict(h, op, mib, channels, ratio):.1f}" for h in HYPOTHESES)
                lines.append(f"| {variant} | {op} | {mib} | {cells} |")
    return lines


def read_frozen(path: str) -> dict[tuple[str, str, int], dict[str, float]]:
    return {key: dict(zip(HYPOTHESES, values, strict=True))
            for key, values in frozen_rows(path, len(HYPOTHESES)).items()}


def _errors(frozen, measured, keys, hypothesis: str) -> list[float]:
    return [frozen[k][hypothesis] / measured[k] - 1 for k in keys]


def _med_worst(errs: list[float]) -> str:
    return f"{100 * statistics.median(abs(e) for e in errs):.1f}% / {100 * max(errs, key=abs):+.1f}%"


def compare(frozen_path: str, csv_paths: list[str]) -> list[str]:
    frozen, measured = read_frozen(frozen_path), read_measured(csv_paths)
    lines = ["| variant | op | rows | " + " | ".join(f"{h}: median / worst" for h in HYPOTHESES) + " |",
             "|---|---|---:|" + "---|" * len(HYPOTHESES)]
    for variant in VARIANTS:
        for op in OPS:
            keys = sorted(k for k in frozen if k[:2] == (variant, op) and k in measured)
            if keys:
                cells = " | ".join(_med_worst(_errors(frozen, measured, keys, h)) for h in HYPOTHESES)
                lines.append(f"| {variant} | {op} | {len(keys)} | {cells} |")
    lines += ["", "Checks (h200x2-20261130co-calls-hypotheses.md):"]
    lines += checks(frozen, measured)
    lines += ["", "Rows (us): measured, then each hypothesis (error)"]
    for k in sorted(measured):
        if k in frozen:
            cells = ", ".join(f"{h} {frozen[k][h]:.1f} ({100 * (frozen[k][h] / measured[k] - 1):+.1f}%)"
                              for h in HYPOTHESES)
            lines.append(f"- {k[0]} {k[1]} {k[2]} MiB: {measured[k]:.1f}; {cells}")
    return lines


def _within(frozen, measured, variant: str, op: str, hypothesis: str, bound: float) -> tuple[bool, str]:
    keys = sorted(k for k in frozen if k[:2] == (variant, op) and k in measured and k[2] >= FIT_FROM)
    if not keys:
        return False, "not measured"
    errs = _errors(frozen, measured, keys, hypothesis)
    return all(abs(e) <= bound for e in errs), ", ".join(f"{k[2]}: {100 * e:+.1f}%" for k, e in zip(keys, errs, strict=True))


def checks(frozen, measured) -> list[str]:
    out = []
    for name, variant, op, hypothesis, bound in (
        ("C1 one channel, all-gather: run ad's excess on the H200 (copy = store there)", "ch1", "all_gather", "copy", 0.03),
        ("C2 one channel, in-place all-gather: send + recv as counted", "ch1", "all_gather_inplace", "count", 0.03),
        ("C3a one channel, reduce-scatter: as counted (count, copy)", "ch1", "reduce_scatter", "count", 0.03),
        ("C3b one channel, reduce-scatter: loads cheaper than stores (store)", "ch1", "reduce_scatter", "store", 0.03),
    ):
        ok, detail = _within(frozen, measured, variant, op, hypothesis, bound)
        out.append(f"- {name}: {'yes' if ok else 'no'} (16 MiB up: {detail}; bound {100 * bound:.0f}%)")
    keys_ip = sorted(k for k in frozen if k[:2] == ("def", "all_gather_inplace") and k in measured and 4 <= k[2] <= 64)
    keys_op = sorted(k for k in frozen if k[:2] == ("def", "all_gather") and k in measured and 4 <= k[2] <= 64)
    if keys_ip and keys_op:
        med_ip = statistics.median(abs(e) for e in _errors(frozen, measured, keys_ip, "count"))
        med_op = statistics.median(abs(e) for e in _errors(frozen, measured, keys_op, "count"))
        ok = med_ip <= 0.10 and med_op >= 0.15
        out.append(f"- C4 24 channels, 4-64 MiB: the all-gather's mid-size excess is its copy (in place "
                   f"<= 10%, out of place >= 15%, as counted): {'yes' if ok else 'no'} (in place "
                   f"{100 * med_ip:.1f}%, out of place {100 * med_op:.1f}%)")
    else:
        out.append("- C4: not measured")
    return out


#: run co's one-channel rows: the loops' costs the per-call prices are fitted on
RUN_CO_CH1 = ROOT / "benchmarks/gpu/h200x2-20261130co-ch1.csv"


def one_channel_loops(path: Path = RUN_CO_CH1) -> dict[str, float]:
    """Operations a loop of each op on one ring channel of two GPUs: its time a byte (the slope over
    the file's sizes) against the all-reduce's, whose loop is 8 (module docstring: 4 a wire byte, 2
    wire chunks a loop; the all-gather and reduce-scatter loops one wire chunk of S / 2)."""
    rows = plain_rows(path)
    per_op = slope(rows.pop("all_reduce")) / 8  # a byte of S: the all-reduce's loop over its 8 operations
    # a byte of S is half a wire byte of the all-gather's and reduce-scatter's loops: the same unit
    return {"all_reduce": 8.0, **{op: slope(pts) / per_op for op, pts in rows.items()}}


def fit_prices(loops: dict[str, float]) -> tuple[float, float, float]:
    """Per-call prices from the one-channel loops (explained after run co, not adopted: docs/gpu.md,
    "Run co"): a call that loads and stores each byte once costs ``pair`` operations (the in-place
    all-gather's send and recv), a further store ``store`` (the copy of copySend), a further load
    ``load`` (recvReduceCopy's second source). The all-reduce's loop, 3 pair + store + load, is left
    to check them."""
    pair = loops["all_gather_inplace"] / 2
    return pair, loops["all_gather"] - 2 * pair, loops["reduce_scatter"] - 2 * pair


def price_cost(prices: tuple[float, float, float]):
    """A call's operations a byte, ``cost(loads, stores)``, at the per-call prices (``fit_prices``)."""
    pair, store, load = prices
    return lambda loads, stores: pair + store * (stores - 1) + load * (loads - 1)


def priced_primitives(prices: tuple[float, float, float]):
    """``ring_primitives`` with each call at its per-call price (``fit_prices``), any ring size."""
    return priced(price_cost(prices))


def prices_report() -> list[str]:
    loops = one_channel_loops()
    pair, store, load = fit_prices(loops)
    h100_ag = 8 * run_ad_ratio()
    return [
        "One ring channel, two H200s (run co, h200x2-20261130co-ch1.csv): operations a loop, the all-reduce's 8",
        *(f"- {op}: {v:.3f}" for op, v in loops.items()),
        f"Per-call prices: a load and a store {pair:.3f}, a further store {store:.3f}, a further load {load:.3f}",
        f"Check, the all-reduce's loop (3 x pair + store + load): {3 * pair + store + load:.3f} against 8",
        f"Check, run ad's one-channel all-gather on two H100s: {h100_ag:.3f} against {2 * pair + store:.3f} "
        f"({100 * ((2 * pair + store) / h100_ag - 1):+.1f}%)",
    ]


def evaluate() -> list[str]:
    """``rdusim fidelity --gpu`` with the engine's count and with the per-call prices (the engine's
    ``ring_primitives`` replaced for the run): each gated collectives group's median, and the totals."""
    import contextlib
    import io
    import tempfile

    from rdusim.cli import main as rdusim
    from rdusim.hw import collectives as nccl

    count = nccl.ring_primitives
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, prims in (("count", count), ("prices", priced_primitives(fit_prices(one_channel_loops())))):
            nccl.ring_primitives = prims
            try:
                with contextlib.redirect_stdout(io.StringIO()):  # the table: only its CSV is read
                    rdusim(["fidelity", "--gpu", "-q", "--root", str(ROOT), "--out", f"{tmp}/{name}.csv"])
            finally:
                nccl.ring_primitives = count
            with open(f"{tmp}/{name}.csv", newline="") as fh:
                out[name] = list(csv.DictReader(fh))
    return _evaluation(out["count"], out["prices"])


def _evaluation(before: list[dict], after: list[dict], names: tuple[str, str] = ("count", "prices")) -> list[str]:
    """The gated collectives groups of two ``rdusim fidelity --gpu`` tables, ``names`` their columns."""
    def groups(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
        return {(r["set"], r["gpu"], r["kind"]): r for r in rows
                if r["role"] == "prediction" and r["kind"].startswith("collectives")}

    a, b = groups(before), groups(after)
    pair = " -> ".join(names)
    lines = [f"| op, launch | GPUs | groups | median of the groups' medians: {pair} | within: {pair} |",
             "|---|---|---:|---|---|"]
    by: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for key, row in a.items():
        by.setdefault((row["kind"].split(": ", 1)[1], row["gpu"]), []).append((row, b[key]))
    for (kind, gpu), pairs in sorted(by.items()):
        med = [statistics.median(float(p[i]["median_abs_error"]) for p in pairs) for i in (0, 1)]
        within = [sum(p[i]["within"] == "yes" for p in pairs) for i in (0, 1)]
        lines.append(f"| {kind} | {gpu} | {len(pairs)} | {100 * med[0]:.1f}% -> {100 * med[1]:.1f}% | "
                     f"{within[0]} -> {within[1]} |")
    verdicts = {v: [sum(r["within"] == v for r in g.values()) for g in (a, b)] for v in ("yes", "known miss", "no")}
    lines.append("")
    lines.append(f"Gated collectives groups, {pair}: " + ", ".join(
        f"{v} {n[0]} -> {n[1]}" for v, n in verdicts.items()))
    return lines


def _moved(before: list[dict], after: list[dict], name: str) -> list[str]:
    """Every group of two ``rdusim fidelity --gpu`` tables whose verdict moved: median / worst, ``now`` ->
    ``name`` (ring_intercept.py's and ring_post.py's offline trials)."""
    lines = [f"Groups whose verdict moved: median / worst, now -> {name}",
             f"| set | GPUs | kind | now | {name} | verdict |", "|---|---|---|---|---|---|"]
    old = {(r["set"], r["gpu"], r["kind"], r["role"]): r for r in before}
    for r in after:
        o = old[r["set"], r["gpu"], r["kind"], r["role"]]
        if o["within"] != r["within"]:
            cells = [f"{100 * float(x['median_abs_error']):.1f}% / {100 * float(x['worst_error']):+.1f}%" for x in (o, r)]
            lines.append(f"| {r['set']} | {r['gpu']} | {r['kind']} | {cells[0]} | {cells[1]} | "
                         f"{o['within']} -> {r['within']} |")
    return lines


#: the channels' document rate a channel's operations are counted in (hw_configs/h200.yaml nvlink.ring)
CHANNEL_OPS_PER_S = 84.0e9
#: the count's loads and stores a wire byte on two GPUs (``ring_primitives``)
COUNT_OPS = {"all_reduce": 4, "all_gather": 5, "all_gather_inplace": 4, "reduce_scatter": 5}
#: wire bytes a byte of S, two GPUs: the all-reduce's S, the others' S / 2
WIRE_SHARE = {"all_reduce": 1.0, "all_gather": 0.5, "all_gather_inplace": 0.5, "reduce_scatter": 0.5}


def channel_costs(paths: list[str], from_mib: int = 16) -> dict[tuple[str, int], float]:
    """{(op, ring channels): a channel's operations a wire byte} of collective_ramp_diag.py graph rows
    (run cq: the channels forced, ``NCCL_MIN/MAX_NCHANNELS`` in the row's ``env``; 24 where unset,
    NCCL's default on two H200s): the slope over the sizes from ``from_mib`` MiB (the fixed cost
    aside) times the channels, in operations at ``CHANNEL_OPS_PER_S``."""
    def op_channels(r: dict) -> tuple[str, int]:
        env = dict(kv.split("=", 1) for kv in r["env"].split() if "=" in kv)
        return r["op"], int(env.get("NCCL_MAX_NCHANNELS", 24))

    rows = plain_rows(paths, op_channels, from_mib)
    out = {}
    for (op, channels), pts in sorted(rows.items()):
        if len({m for m, _ in pts}) >= 2:
            us_per_wire_mib = slope(pts) / WIRE_SHARE[op]
            out[op, channels] = us_per_wire_mib * 1e-6 / MIB * CHANNEL_OPS_PER_S * channels
    return out


def channels_report(paths: list[str]) -> list[str]:
    costs = channel_costs(paths)
    counts = sorted({c for _, c in costs})
    ops = [op for op in WIRE_SHARE if any(k[0] == op for k in costs)]
    lines = ["A channel's operations a wire byte (slope from 16 MiB x channels, at 84 GB/s a channel), by ring channels",
             "| op | " + " | ".join(str(c) for c in counts) + " |", "|---|" + "---:|" * len(counts)]
    for op in ops:
        lines.append(f"| {op} | " + " | ".join(f"{costs[op, c]:.2f}" if (op, c) in costs else "-" for c in counts) + " |")
    lines += ["", "The GPU's loads and stores a second, GB/s (the count's operations a wire byte x the wire rate: "
              "channels x 84 GB/s over the cost above)", lines[1], lines[2]]
    for op in ops:
        lines.append(f"| {op} | " + " | ".join(
            f"{COUNT_OPS[op] * c * CHANNEL_OPS_PER_S / 1e9 / costs[op, c]:.0f}" if (op, c) in costs else "-"
            for c in counts) + " |")
    return lines


#: loads a wire byte of each op's loop on two GPUs (``ring_primitives``: the reduce-scatter's
#: recvReduceCopy reads its input and the FIFO)
COUNT_LOADS = {"all_reduce": 2, "all_gather": 2, "all_gather_inplace": 2, "reduce_scatter": 3}
#: run cq's channel counts the queueing form is fitted on; 24 (NCCL's default, the link in play) is
#: left to check it
QUEUE_FIT_CHANNELS = (1, 2, 4, 8, 12, 16)


def queue_cost(costs: dict[tuple[str, int], float], params: tuple[float, float, float], op: str,
               channels: int) -> float:
    """A channel's operations a wire byte under the queueing form (analysis, not built): its
    one-channel cost plus, for each load a wire byte, ``load x (1 / (1 - U^k) - 1)``, U the GPU's
    loads and stores a second over ``peak`` (the channels' own rate, so solved as a fixed point)."""
    load, peak, k = params
    base = cost = costs[op, 1]
    for _ in range(200):
        u = min(channels * CHANNEL_OPS_PER_S / 1e9 / cost * COUNT_OPS[op] / peak, 0.999)
        cost = 0.5 * cost + 0.5 * (base + COUNT_LOADS[op] * load * (1 / (1 - u**k) - 1))
    return cost


def _queue_fit(costs: dict[tuple[str, int], float]):
    """Least squares of the queueing form on ``costs`` at ``QUEUE_FIT_CHANNELS``, every op."""
    from scipy.optimize import least_squares

    def residuals(params) -> list[float]:
        return [queue_cost(costs, tuple(params), op, c) / costs[op, c] - 1
                for op in COUNT_OPS for c in QUEUE_FIT_CHANNELS]

    return least_squares(residuals, [0.5, 1600.0, 2.0], bounds=([0.0, 500.0, 0.5], [10.0, 5000.0, 8.0]))


def fit_queue(paths: list[str]) -> tuple[float, float, float]:
    """The queueing form fitted on run cq's ``paths``: (a load's operations at an idle GPU, the peak
    loads and stores in bytes a second, the exponent)."""
    a, peak, k = (float(x) for x in _queue_fit(channel_costs(paths)).x)
    return a, peak * 1e9, k


def queue_report(paths: list[str]) -> list[str]:
    """The queueing form fitted (least squares) on run cq's costs at 1-16 channels, every op, and its
    24-channel costs as a check (docs/gpu.md, "Run co": run cq)."""
    costs = channel_costs(paths)
    fit = _queue_fit(costs)
    params = tuple(float(x) for x in fit.x)
    counts = sorted({c for _, c in costs})
    lines = [f"Queueing form fitted on {', '.join(map(str, QUEUE_FIT_CHANNELS))} channels: a load "
             f"{params[0]:.3f} operations at an idle GPU, loads and stores at most {params[1]:.0f} GB/s, "
             f"exponent {params[2]:.2f}; worst fitted row {100 * max(abs(r) for r in fit.fun):.1f}%",
             "| op | " + " | ".join(str(c) for c in counts) + " |", "|---|" + "---:|" * len(counts)]
    for op in COUNT_OPS:
        lines.append(f"| {op} | " + " | ".join(
            f"{costs[op, c]:.2f} / {queue_cost(costs, params, op, c):.2f}" for c in counts) + " |")
    lines.append("(measured / the form; 24 channels not fitted)")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    frozen_arguments(ap)
    ap.add_argument("--prices", action="store_true", help="the per-call prices fitted on run co's one-channel "
                    "rows and their checks (explained after the run)")
    ap.add_argument("--channels", nargs="+", metavar="CSV", help="run cq: a channel's operations a wire byte "
                    "by op and ring channel count")
    ap.add_argument("--queue", nargs="+", metavar="CSV", help="run cq: the queueing form of a channel's cost "
                    "(loads dearer as the GPU's loads and stores approach a peak) fitted at 1-16 channels")
    ap.add_argument("--evaluate", action="store_true", help="rdusim fidelity --gpu's collectives groups with the "
                    "count and with the per-call prices (two runs of the table, about two minutes)")
    args = ap.parse_args(argv)
    if args.channels or args.queue:
        print("\n".join(channels_report(args.channels) if args.channels else queue_report(args.queue)))
        return 0
    if args.prices or args.evaluate:
        print("\n".join(prices_report() if args.prices else evaluate()))
        return 0
    return frozen_or_compare(ap, args, frozen_table, compare)


if __name__ == "__main__":
    sys.exit(main())
