"""benchmarks/gpu/ring_budget.py: a ring's channels under a budget of loads and stores beside the link
(analysis, not adopted): its shares against closed forms, the engine where no call reaches the
budget, and its committed table as it regenerates."""

from __future__ import annotations

import math

import pytest

from rdusim.hw import collectives as nccl
from rdusim.sim.ring import ring_transfer_s

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"
MIB = 1 << 20


@pytest.fixture(scope="module")
def budget():
    return bench_script("ring_budget")


def test_shares_closed_forms(budget) -> None:
    """Three local calls of 3 operations a byte (caps 28 GB/s) under a 60 GB/s budget: 60 / 9 each.
    A call on NVLink (2 operations, cap 42) beside two local ones (3, cap 28) under a 120 GB/s budget
    and a 369 GB/s link: the budget binds first, 120 / 8 each. With the local calls' budget alone the
    call on NVLink reaches its cap and the local ones share the budget. With no budget, the link
    shared max-min among the calls on it, the local calls at their caps."""
    g = 1e9
    assert budget.budget_shares([28 * g] * 3, [3.0] * 3, [False] * 3, 60 * g, 369 * g) == pytest.approx(
        [60 / 9 * g] * 3)
    caps, ops, link = [42 * g, 28 * g, 28 * g], [2.0, 3.0, 3.0], [True, False, False]
    assert budget.budget_shares(caps, ops, link, 120 * g, 369 * g) == pytest.approx([15 * g] * 3)
    assert budget.budget_shares(caps, ops, link, 120 * g, 369 * g, local_only=True) == pytest.approx(
        [42 * g, 20 * g, 20 * g])
    sends = budget.budget_shares([42 * g] * 10 + [28 * g], [2.0] * 10 + [3.0], [True] * 10 + [False],
                                 math.inf, 369 * g)
    assert sends == pytest.approx([36.9 * g] * 10 + [28 * g])


@pytest.mark.parametrize(("op", "mib"), [("all_reduce", 64), ("all_reduce", 1024), ("reduce_scatter", 256),
                                         ("all_gather", 16)])
def test_a_budget_no_call_reaches_is_the_engine(budget, op: str, mib: int) -> None:
    """With an unbounded budget every call's share is the engine's (the link max-min among the calls on
    it, each local call at its cap), so the transfer is ``rdusim.sim.ring``'s."""
    ring = budget.document_ring()
    plan = nccl.ring_plan(op, mib * MIB, 2, ring)
    assert budget.transfer_s(plan, math.inf) == pytest.approx(ring_transfer_s(plan), rel=1e-9)


def test_the_committed_table_regenerates(budget, capsys) -> None:
    """``--table`` on run an's second two-GPU sweep and ``--spread``, as committed
    (h200x2-20261201-ring-budget.txt): the one-loop all-reduce and reduce-scatter at 16-64 MiB within
    a few percent under the budget, the 1 GiB rows long, the all-reduce's channels in step to the end."""
    sweep = GPU / "h200x2-20261128an-x2-sweep2.csv"
    assert budget.main(["--table", str(sweep), "--spread"]) == 0
    out = capsys.readouterr().out
    assert out == (GPU / "h200x2-20261201-ring-budget.txt").read_text()
    rows = [line.split(" | ") for line in out.splitlines()[:32] if line.startswith("| all_") or line.startswith("| red")]
    under = {(r[0].strip("| "), int(r[1])): float(r[5].strip(" |%")) for r in rows}
    assert all(abs(under["all_reduce", m]) < 3 and abs(under["reduce_scatter", m]) < 5 for m in (16, 32, 64))
    assert under["all_reduce", 1024] > 10 and under["reduce_scatter", 1024] > 10


@pytest.mark.parametrize("argv", [[], ["--spread", "--budget", "0"], ["--table", "no-such.csv"]])
def test_bad_arguments_exit_2(budget, argv, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        budget.main(argv)
    assert e.value.code == 2 and "Traceback" not in capsys.readouterr().err
