"""A ring's channels under a GPU-wide budget of loads and stores beside the link (analysis, not adopted).

Run cr left a lead: from 256 MB the three ring ops move one figure of loads and stores a GPU
(1345-1424 GB/s by the count's operations, every committed two-GPU sweep), and run cq saw every
op's channel slow from eight channels on while the link was not full. This asks what such a
budget does inside the engine's channels (``rdusim.sim.ring``), with the link as the document has
it (369.2 GB/s) and nothing fitted:

- ``BudgetChannels``: every call of every channel is a flow (a local call too, where the engine
  has it a fixed delay): at most its channel's rate over its operations a byte (the count's,
  ``ring_primitives``), the calls on NVLink together at most the link, and every call's
  operations together at most the budget (``local_only``: the local calls' alone). Shares by
  progressive filling, in bytes a second, max-min fair under both limits (``budget_shares``); with
  a budget no call reaches, the engine's channels exactly.
- ``--table CSV``: a collectives.py run's two-GPU graph rows of the three ring ops at 4 MiB and up,
  measured, the engine as ``rdusim fidelity --gpu`` compares it (the link fitted to the run's
  calibration rows), and the channels under a budget.
- ``--spread``: the loops' ends across the 24 channels of a 1 GiB all-reduce and reduce-scatter
  (max - min, us), the engine and under the budget.

    PYTHONPATH=. python benchmarks/gpu/ring_budget.py --table benchmarks/gpu/h200x2-20261128an-x2-sweep2.csv \\
        --spread > benchmarks/gpu/h200x2-20261201-ring-budget.txt

What it showed (docs/gpu.md, "Run dn", "A budget of loads and stores, in step"): at 1.4 TB/s the
one-loop sizes (all 24 channels in step, the all-reduce to 96 MiB, the reduce-scatter's rank part to
48 MiB) come within a few percent where the engine is 5-12% short, the all-gather's excess stays;
from two loops on the channels no longer drift apart (a fair budget gives a channel ahead no
advantage), and the larger sizes come out 12-25% long. Not adopted.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Generator
from pathlib import Path

import simpy

from rdusim.analysis.gpu.collectives import compare_collective_rows, fitted_fabric
from rdusim.analysis.gpu.fidelity import _gpu, read_csv
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw import collectives as nccl
from rdusim.hw.gpu import Gpu
from rdusim.sim.resources import CappedPool, delay

ROOT = Path(__file__).resolve().parents[2]
#: the budget the table and the spread are shown at (loads and stores a second, the count's operations):
#: run cr's 1345-1424 GB/s from 256 MB, rounded
BUDGET = 1.4e12
RING_OPS = ("all_reduce", "all_gather", "reduce_scatter")
MIB = 1 << 20
#: the document ``--spread`` runs on
H200_DOC = ROOT / "hw_configs/h200.yaml"


def budget_shares(caps: list[float], ops: list[float], on_link: list[bool], budget: float, link: float,
                  local_only: bool = False) -> list[float]:
    """Each call's rate (bytes a second) by progressive filling: every call's rate rises together until
    it reaches its cap, or the calls on NVLink reach ``link`` together (those then stop), or the calls'
    operations (rate x operations a byte; ``local_only``: the local calls' alone) reach ``budget``
    (the calls it counts then stop)."""
    n = len(caps)
    rate = [0.0] * n
    counted = [not (local_only and on_link[i]) for i in range(n)]
    active = set(range(n))
    while active:
        step = min(caps[i] - rate[i] for i in active)
        weight = sum(ops[i] for i in active if counted[i])
        if weight:
            step = min(step, (budget - sum(ops[i] * rate[i] for i in range(n) if counted[i])) / weight)
        linked = [i for i in active if on_link[i]]
        if linked:
            step = min(step, (link - sum(rate[i] for i in range(n) if on_link[i])) / len(linked))
        step = max(step, 0.0)
        for i in active:
            rate[i] += step
        done = {i for i in active if caps[i] - rate[i] <= 1e-12 * caps[i]}
        if math.isfinite(budget) and budget - sum(ops[i] * rate[i] for i in range(n) if counted[i]) <= 1e-12 * budget:
            done |= {i for i in active if counted[i]}
        if linked and link - sum(rate[i] for i in range(n) if on_link[i]) <= 1e-12 * link:
            done |= set(linked)
        active -= done
    return rate


class BudgetChannels(CappedPool):
    """A ring's calls as flows (``CappedPool``'s, re-divided at every arrival and landing) shared by
    ``budget_shares``; a flow's tag is (operations a byte, on NVLink)."""

    def __init__(self, env: simpy.Environment, budget: float, link: float, local_only: bool = False) -> None:
        super().__init__(env, budget)
        self.budget, self.link, self.local_only = budget, link, local_only

    def _shares(self, flows: list[list]) -> list[float]:
        return budget_shares([f[1] for f in flows], [f[4][0] for f in flows], [f[4][1] for f in flows],
                             self.budget, self.link, self.local_only)


def transfer_s(plan: nccl.RingPlan, budget: float, local_only: bool = False,
               loop_ends: list[list[float]] | None = None) -> float:
    """``rdusim.sim.ring.ring_transfer_s`` of ``plan`` with its channels' calls in a ``BudgetChannels``
    (the link ``plan.ring``'s); ``loop_ends`` (a list a loop), when given, gets each channel's end of
    each loop (s)."""
    ring = plan.ring
    env = simpy.Environment()
    pool = BudgetChannels(env, budget, ring.link_bytes_per_s, local_only)

    def channel(c: int) -> Generator:
        start = ring.start_s(c, ring.channels)
        if start:
            yield delay(env, start)
        for loop, chunk in enumerate(plan.chunks):
            for on_link, ops in plan.primitives:
                yield pool.transfer(chunk, ring.channel_bytes_per_s / ops, (float(ops), on_link))
            if loop_ends is not None:
                loop_ends[loop].append(env.now)

    for c in range(ring.channels):
        env.process(channel(c))
    env.run()
    return env.now


def table(csv_path: str, budget: float = BUDGET, local_only: bool = False) -> list[str]:
    """``--table``'s rows (module docstring): the engine's error on its fitted link, and the budget's on
    the document's link, each with NCCL's latency."""
    rows = read_csv(Path(csv_path))
    spec, _ = _gpu(ROOT, rows, "gpu")
    gpu = Gpu(spec)
    fabric, _ = fitted_fabric(gpu, rows)
    ring = gpu.fabric.ring
    which = "local calls'" if local_only else "every call's"
    lines = [f"{Path(csv_path).name}: two-GPU graph rows, ring ops from 4 MiB; the engine on its fitted link "
             f"({fabric.ring.link_bytes_per_s / 1e9:.1f} GB/s), the channels under a budget of {budget / 1e12:g} TB/s "
             f"({which} loads and stores) beside the document's link ({ring.link_bytes_per_s / 1e9:.1f} GB/s)", "",
             "| op | MiB | loops | measured us | engine | budget |", "|---|---:|---:|---:|---:|---:|"]
    for c in compare_collective_rows(rows, gpu, fabric):
        size = int(c["bytes"])
        if c["launch"] != "graph" or c["ranks"] != 2 or c["op"] not in RING_OPS or size < 4 * MIB:
            continue
        if c["cost"].ring is None:  # an LL size: no channels
            continue
        plan = nccl.ring_plan(c["op"], size, 2, ring)
        measured = float(c["median_us"])
        under = (c["cost"].latency_s + transfer_s(plan, budget, local_only)) * 1e6
        lines.append(f"| {c['op']} | {size // MIB} | {len(plan.chunks)} | {measured:.1f} | {c['err'] * 100:+.1f}% "
                     f"| {(under / measured - 1) * 100:+.1f}% |")
    return lines


def document_ring(path: Path = H200_DOC) -> nccl.RingChannels:
    """The ring channels (``nvlink.ring``) of the GPU document at ``path``."""
    return Gpu(load_spec(path, GpuSpec)).fabric.ring


def spread(budget: float = BUDGET, size: int = 1 << 30) -> list[str]:
    """``--spread``'s rows: the loops' ends across the channels (us, max - min), the engine's channels
    (a budget no call reaches) and under ``budget``."""
    ring = document_ring()
    lines = [f"Loops' ends across the {ring.channels} channels of a {size // MIB} MiB collective on two GPUs "
             "(us, latest - earliest), by loop", ""]
    for op in ("all_reduce", "reduce_scatter"):
        plan = nccl.ring_plan(op, size, 2, ring)
        for name, b in (("engine", float("inf")), (f"budget {budget / 1e12:g} TB/s", budget)):
            ends: list[list[float]] = [[] for _ in plan.chunks]
            total = transfer_s(plan, b, loop_ends=ends)
            lines.append(f"- {op}, {name}: {total * 1e6:.0f} us; " + ", ".join(f"{(max(e) - min(e)) * 1e6:.0f}"
                                                                               for e in ends))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", metavar="CSV", help="a collectives.py run's two-GPU ring rows (module docstring)")
    ap.add_argument("--spread", action="store_true", help="the loops' ends across the channels at 1 GiB")
    ap.add_argument("--budget", type=float, default=BUDGET, help="loads and stores a second (default 1.4e12)")
    args = ap.parse_args(argv)
    if not (args.table or args.spread):
        ap.error("give --table CSV, --spread or both")
    if not args.budget > 0:
        ap.error(f"--budget must be > 0, got {args.budget}")
    if args.table and not Path(args.table).is_file():
        ap.error(f"--table: no such file: {args.table}")
    lines: list[str] = []
    if args.table:
        for local_only in (False, True):
            lines += [*table(args.table, args.budget, local_only), ""]
    if args.spread:
        lines += spread(args.budget)
    sys.stdout.write("\n".join(lines).rstrip("\n") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
