"""Run cq, after it: is the queueing form a mechanism the engine lacks? (analysis, not built)

``ring_calls.py --queue`` fits a queueing form of a ring channel's cost on run cq's forced channel
counts (1-16): each load dearer by ``a (1 / (1 - U^k) - 1)`` operations, U the GPU's loads and stores
a second over a peak. That fit takes a channel's cost alone, as if nothing else slowed the channels.
The engine (``rdusim.sim.ring``) already has something that does: the channels share the link and
start in step, so their cheap sends (the all-reduce's and reduce-scatter's ``send``, two operations
a byte: 42 GB/s a channel at 84, against a 369 GB/s link) fill it while the channels stay together. Three
looks at which of the two the measurements carry (docs/gpu.md, "Run co": "The queueing form in the
engine"):

- ``--shape``: run cq's time against size at each forced channel count, off the line through 64
  MiB and the largest size, beside the engine's. A link the channels fill while in step and leave
  as they drift apart gives a curve, cheaper a byte at larger sizes (the engine's mid-size ramp);
  memory contention alone a line at any channel count.
- ``--joint``: the queueing form fitted again with the engine around it (its link at the document's
  369.2 GB/s, its launch skew), each call at run co's per-call prices (``ring_calls.fit_prices``),
  on the same 1-16 channel costs: how much contention is left once the link is there.
- ``--evaluate``: ``rdusim fidelity --gpu``'s collectives groups with the engine as it is, with the
  form in it (the link still fitted to each run's calibration rows), and with the form and no link
  (about three minutes).

    PYTHONPATH=. python benchmarks/gpu/ring_queue.py --shape benchmarks/gpu/h200x2-20261130cq-*.csv \
        --plot docs/img/gpu-ring-bends.png
    PYTHONPATH=. python benchmarks/gpu/ring_queue.py --joint benchmarks/gpu/h200x2-20261130cq-*.csv
    PYTHONPATH=. python benchmarks/gpu/ring_queue.py --evaluate benchmarks/gpu/h200x2-20261130cq-*.csv
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import functools
import io
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ring_calls import (  # noqa: E402  (beside this file)
    CHANNEL_OPS_PER_S,
    MIB,
    QUEUE_FIT_CHANNELS,
    ROOT,
    WIRE_SHARE,
    _evaluation,
    channel_costs,
    fit_prices,
    fit_queue,
    hypothesis_cost,
    one_channel_loops,
    plain_rows,
    price_cost,
    ring_calls,
)

from rdusim.hw import collectives as nccl
from rdusim.sim import ring as engine
from rdusim.sim.resources import CappedPool, delay, max_min_shares

#: the document's link and launch skew (hw_configs/h200.yaml nvlink.ring)
LINK, SKEW = 369.2e9, 3.5e-6
#: the sizes a steady-state cost is taken between (MiB): run cq's line from 64 MiB
STEADY = (64, 256)
OPS = ("all_reduce", "all_gather", "all_gather_inplace", "reduce_scatter")
Form = tuple[float, float, float]  # (a: operations a load at an idle GPU, peak loads + stores a second, k)
NO_FORM: Form = (0.0, 1.0e12, 1.0)  # no contention: the engine's channels


class ContendedChannels(CappedPool):
    """A ring's channels' calls, each a flow of its chunk (``CappedPool``'s flows, re-divided at every
    arrival and landing): a call on NVLink shares the link (max-min fair), a local one does not; every
    call runs at most at ``rate`` over its operations a byte plus ``loads x a (1 / (1 - U^k) - 1)``, U
    the calls' loads and stores a second together over ``peak``, a fixed point (bisection on U: the
    calls' rates fall as U rises)."""

    def __init__(self, env: simpy.Environment, link: float, rate: float, form: Form) -> None:
        super().__init__(env, link)
        self.channel_rate, self.form = rate, form

    def call(self, nbytes: float, ops: float, loads: int, on_link: bool) -> simpy.Event:
        """A call of ``nbytes`` at ``ops`` operations and ``loads`` loads a byte."""
        return self.transfer(nbytes, self.channel_rate / ops, (ops, loads, on_link))

    def _shares(self, flows: list[list]) -> list[float]:
        calls = [f[4] for f in flows]  # (ops, loads, on link)
        a, peak, k = self.form
        on_link = [i for i, (_, _, link) in enumerate(calls) if link]

        def at(u: float) -> tuple[list[float], float]:
            extra = a * (1 / (1 - u**k) - 1) if u > 0 else 0.0
            rates = [self.channel_rate / (ops + loads * extra) for ops, loads, _ in calls]
            for i, share in zip(on_link, max_min_shares([rates[i] for i in on_link], self.rate), strict=True):
                rates[i] = share
            return rates, sum(r * ops for r, (ops, _, _) in zip(rates, calls, strict=True)) / peak

        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if at(mid)[1] > mid else (lo, mid)
        return at(lo)[0]


Calls = tuple[tuple[bool, float, int], ...]  # a loop's calls: (on NVLink, operations a byte, loads a byte)


def transfer_s(ring: nccl.RingChannels, chunks: tuple[float, ...], calls: Calls, form: Form,
               calls_seen: list[list[tuple[float, float]]] | None = None) -> float:
    """``rdusim.sim.ring.ring_transfer_s`` with the channels' calls in a ``ContendedChannels``;
    ``calls_seen`` (a list a channel), when given, gets each call's (start, end) in seconds."""
    env = simpy.Environment()
    pool = ContendedChannels(env, ring.link_bytes_per_s, ring.channel_bytes_per_s, form)

    def channel(c: int) -> Generator:
        start = ring.start_s(c, ring.channels)
        if start:
            yield delay(env, start)
        for chunk in chunks:
            for on_link, ops, loads in calls:
                began = env.now
                yield pool.call(chunk, ops, loads, on_link)
                if calls_seen is not None:
                    calls_seen[c].append((began, env.now))

    for c in range(ring.channels):
        env.process(channel(c))
    env.run()
    return env.now


def loop_calls(op: str, ranks: int, cost: Callable[[int, int], float]) -> Calls:
    """``ring_calls``' loop with each call at ``cost(loads, stores)`` operations a byte."""
    return tuple((on_link, cost(loads, stores), loads) for on_link, loads, stores in ring_calls(op, ranks))


def steady_cost(op: str, channels: int, cost: Callable[[int, int], float], form: Form, link: float = LINK) -> float:
    """A channel's operations a wire byte in the engine with ``form``: the simulated time a byte between
    ``STEADY``'s sizes, as ``ring_calls.channel_costs`` takes run cq's (two GPUs)."""
    ring = nccl.RingChannels(channels, CHANNEL_OPS_PER_S, link, SKEW)
    calls = loop_calls(op, 2, cost)
    chunks_op = "all_gather" if op == "all_gather_inplace" else op

    def t(mib: int) -> float:
        return transfer_s(ring, nccl.ring_loop_chunks(chunks_op, mib * MIB, 2, channels), calls, form)

    per_byte = (t(STEADY[1]) - t(STEADY[0])) / ((STEADY[1] - STEADY[0]) * MIB * WIRE_SHARE[op])
    return per_byte * CHANNEL_OPS_PER_S * channels


def off_line(times: dict[int, float]) -> dict[int, float]:
    """{MiB: microseconds off the line through 64 MiB and the largest size} of ``times`` (MiB -> us)."""
    top = max(times)
    slope = (times[top] - times[64]) / (top - 64)
    return {m: us - (times[64] + slope * (m - 64)) for m, us in sorted(times.items())}


@functools.cache
def engine_times(op: str, channels: int, sizes: tuple[int, ...], pricing: str = "count") -> dict[int, float]:
    """{MiB: microseconds} of the engine's ring transfer (the document's link and skew, no form; two
    GPUs), each call at its count (``pricing`` "count", the engine) or at run co's per-call prices
    ("prices", ``ring_calls.fit_prices``), the in-place all-gather's loop from ``ring_calls``."""
    ring = nccl.RingChannels(channels, CHANNEL_OPS_PER_S, LINK, SKEW)
    cost = hypothesis_cost("count", 0.0) if pricing == "count" else price_cost(fit_prices(one_channel_loops()))
    calls = loop_calls(op, 2, cost)
    chunks_op = "all_gather" if op == "all_gather_inplace" else op
    return {m: 1e6 * transfer_s(ring, nccl.ring_loop_chunks(chunks_op, m * MIB, 2, channels), calls, NO_FORM)
            for m in sizes}


def shape_rows(paths: list[str]) -> list[tuple[int, str, dict[int, float], dict[int, float]]]:
    """(channels, op, measured, engine) of run cq's rows where a channel count has 64 MiB and a larger
    size: each {MiB: microseconds off the line through 64 MiB and the largest size} (``off_line``; the
    measured rows' median where a size repeats, the engine's at the same sizes)."""
    def key(r: dict) -> tuple[str, int]:
        env = dict(kv.split("=", 1) for kv in r["env"].split() if "=" in kv)
        return r["op"], int(env.get("NCCL_MAX_NCHANNELS", 24))

    out = []
    for (op, channels), pts in sorted(plain_rows(paths, key).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        by_size: dict[int, list[float]] = {}
        for mib, us in pts:
            by_size.setdefault(mib, []).append(us)
        med = {m: sorted(v)[len(v) // 2] for m, v in by_size.items()}
        if 64 not in med or max(med) <= 64:
            continue
        out.append((channels, op, off_line(med), off_line(engine_times(op, channels, tuple(sorted(med))))))
    return out


def shape_report(paths: list[str]) -> list[str]:
    rows = shape_rows(paths)
    sizes = sorted({m for _, _, off, _ in rows for m in off})
    lines = ["Run cq: microseconds off the line through 64 MiB and the largest size, by forced ring channels: "
             "measured / the engine (the count, the document's link and launch skew)",
             "| channels | op | " + " | ".join(f"{m} MiB" for m in sizes) + " |", "|---:|---|" + "---:|" * len(sizes)]
    for channels, op, off, eng in rows:
        lines.append(f"| {channels} | {op} | " + " | ".join(
            f"{off[m]:+.0f} / {eng[m]:+.0f}" if m in off else "-" for m in sizes) + " |")
    return lines


def joint_report(paths: list[str]) -> list[str]:
    """The queueing form fitted with the engine's link around it, calls at run co's prices."""
    from scipy.optimize import least_squares

    costs = channel_costs(paths)
    price = price_cost(fit_prices(one_channel_loops()))

    def residuals(p) -> list[float]:
        form = (p[0], p[1] * 1e9, p[2])
        return [steady_cost(op, c, price, form) / costs[op, c] - 1 for op in OPS for c in QUEUE_FIT_CHANNELS]

    fit = least_squares(residuals, [0.3, 1700.0, 2.0], bounds=([0.0, 500.0, 0.5], [10.0, 5000.0, 8.0]),
                        diff_step=1e-3)
    joint = (float(fit.x[0]), float(fit.x[1]) * 1e9, float(fit.x[2]))
    alone = fit_queue(paths)
    counts = (*QUEUE_FIT_CHANNELS, 24)
    lines = [
        f"The form alone (ring_calls.py --queue): a = {alone[0]:.3f}, peak {alone[1] / 1e9:.0f} GB/s, k = {alone[2]:.2f}",
        f"Fitted with the engine's link ({LINK / 1e9:.1f} GB/s) and run co's per-call prices, 1-16 channels: "
        f"a = {joint[0]:.3f}, peak {joint[1] / 1e9:.0f} GB/s, k = {joint[2]:.2f}; worst fitted row "
        f"{100 * max(abs(r) for r in fit.fun):.1f}%",
        "",
        "A channel's operations a wire byte: measured / the engine (link, prices, no contention) / the engine with "
        "the jointly fitted form (24 channels not fitted)",
        "| op | " + " | ".join(str(c) for c in counts) + " |", "|---|" + "---:|" * len(counts)]
    for op in OPS:
        lines.append(f"| {op} | " + " | ".join(
            f"{costs[op, c]:.2f} / {steady_cost(op, c, price, NO_FORM):.2f} / {steady_cost(op, c, price, joint):.2f}"
            for c in counts) + " |")
    return lines


#: the engine's primitive calls (``ring_primitives``) -> the same loop's loads a byte (``ring_calls``)
def _loads_by_loop(max_ranks: int = 8) -> dict[tuple, tuple[int, ...]]:
    return {nccl.ring_primitives(op, n): tuple(loads for _, loads, _ in ring_calls(op, n))
            for op in ("all_reduce", "all_gather", "reduce_scatter") for n in range(2, max_ranks + 1)}


@contextlib.contextmanager
def form_in_engine(form: Form, link: bool = True) -> Iterator[None]:
    """The engine's ring transfers with ``form`` (the count's operations, each call's loads from
    ``ring_calls``); with ``link`` False the link is left out (as wide as 10^13 bytes a second, and
    not fitted)."""
    from rdusim.analysis.gpu import collectives

    loads = _loads_by_loop()
    saved = engine.ring_transfer_s, collectives.fit_ring_link

    @functools.lru_cache(maxsize=4096)  # as the engine's: a plan's transfer depends on the plan alone
    def transfer(plan: nccl.RingPlan) -> float:
        ring = plan.ring if link else dataclasses.replace(plan.ring, link_bytes_per_s=1e13)
        calls = tuple((on, float(ops), ld) for (on, ops), ld in zip(plan.primitives, loads[plan.primitives],
                                                                    strict=True))
        return transfer_s(ring, plan.chunks, calls, form)

    engine.ring_transfer_s = transfer
    if not link:
        collectives.fit_ring_link = lambda rows, ring: 1e13
    try:
        yield
    finally:
        engine.ring_transfer_s, collectives.fit_ring_link = saved


def shape_plot(paths: list[str], out: Path) -> list[str]:
    """``--shape``'s rows as a figure, an op a panel: each forced channel count's time off its line,
    measured (solid) and the engine's (dashed). Returns the panels' titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    rows = shape_rows(paths)
    counts = sorted({c for c, *_ in rows if c >= 8})
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True, sharey=True)
    for ax, op in zip(axes.flat, OPS, strict=True):
        for channels, row_op, off, sim in rows:
            if row_op != op or channels not in counts:
                continue
            colour = f"C{counts.index(channels)}"
            ax.plot(list(off), list(off.values()), "-o", color=colour, ms=4)
            ax.plot(list(sim), list(sim.values()), "--", color=colour)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xscale("log", base=2)
        sizes = sorted({m for _, _, off, _ in rows for m in off})
        ax.set_xticks(sizes, [str(m) for m in sizes])
        ax.set_title(op.replace("_", " "))
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("size (MiB)")
    for ax in axes[:, 0]:
        ax.set_ylabel("us off the line from 64 MiB to the largest size")
    handles = [Line2D([], [], color=f"C{i}", label=f"{c} channels") for i, c in enumerate(counts)]
    handles += [Line2D([], [], color="k", marker="o", ms=4, label="measured (run cq)"),
                Line2D([], [], color="k", ls="--", label="the engine (its link, in step until they drift)")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle("NCCL ring channels on two H200s: time against size off a line, by forced channel count")
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return [ax.get_title() for ax in axes.flat]


def _fidelity_rows(patch: contextlib.AbstractContextManager) -> list[dict]:
    from rdusim.cli import main as rdusim

    with tempfile.TemporaryDirectory() as tmp, patch:
        with contextlib.redirect_stdout(io.StringIO()):
            rdusim(["fidelity", "--gpu", "-q", "--root", str(ROOT), "--out", f"{tmp}/t.csv"])
        with open(f"{tmp}/t.csv", newline="") as fh:
            return list(csv.DictReader(fh))


def evaluate(paths: list[str]) -> list[str]:
    form = fit_queue(paths)
    now = _fidelity_rows(contextlib.nullcontext())
    lines = [f"The form of ring_calls.py --queue (a = {form[0]:.3f}, peak {form[1] / 1e9:.0f} GB/s, k = {form[2]:.2f}) "
             "in the engine: rdusim fidelity --gpu's collectives groups", ""]
    for title, link in (("With the link, fitted to each run's calibration rows", True), ("Without the link", False)):
        lines += [f"{title}: the engine now -> with the form", "",
                  *_evaluation(now, _fidelity_rows(form_in_engine(form, link)), ("now", "form")), ""]
    return lines[:-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--shape", action="store_true", help="time against size off a line, by channel count")
    group.add_argument("--joint", action="store_true", help="the form fitted with the engine's link around it")
    group.add_argument("--evaluate", action="store_true", help="rdusim fidelity --gpu with the form in the engine")
    ap.add_argument("csv", nargs="+", help="run cq's CSVs (benchmarks/gpu/h200x2-20261130cq-*.csv)")
    ap.add_argument("--plot", type=Path, metavar="PNG", help="with --shape: also draw it here")
    args = ap.parse_args(argv)
    if args.plot is not None and not args.shape:
        ap.error("--plot goes with --shape")
    if args.plot is not None:
        shape_plot(args.csv, args.plot)
    report = shape_report if args.shape else joint_report if args.joint else evaluate
    print("\n".join(report(args.csv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
