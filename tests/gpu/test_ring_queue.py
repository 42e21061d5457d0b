"""benchmarks/gpu/ring_queue.py (run cq, after it): the contended channels against closed forms and
the engine, and run cq's shape as committed."""

from __future__ import annotations

import pytest
import simpy

from rdusim.hw import collectives as nccl
from rdusim.sim.ring import ring_transfer_s

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"
CQ = [str(GPU / f"h200x2-20261130cq-{v}.csv") for v in ("ch1", "ch2", "ch4", "ch8", "ch12", "ch16", "def")]
MIB = 1 << 20


@pytest.mark.parametrize("form", [(0.0, 1e12, 1.0), (0.4, 120e9, 1.7), (2.0, 50e9, 3.0)])
def test_one_local_call_runs_at_the_fixed_point(form) -> None:
    """One local call of ``ops`` operations and ``loads`` loads a byte at a channel rate R: its rate r
    solves r = R / (ops + loads a (1 / (1 - U^k) - 1)) with U = r ops / peak, and the call takes its
    bytes over r (with a = 0: bytes x ops / R)."""
    queue = bench_script("ring_queue")
    a, peak, k = form
    rate, ops, loads, nbytes = 84e9, 3.0, 2, 8 * MIB
    env = simpy.Environment()
    pool = queue.ContendedChannels(env, 1e13, rate, form)
    done = pool.call(nbytes, ops, loads, on_link=False)
    env.run(done)
    r = nbytes / env.now
    u = r * ops / peak
    assert r == pytest.approx(rate / (ops + loads * a * (1 / (1 - u**k) - 1)), rel=1e-9)
    if a == 0:
        assert env.now == pytest.approx(nbytes * ops / rate, rel=1e-12)


@pytest.mark.parametrize(("op", "mib", "channels"), [("all_reduce", 64, 24), ("all_gather", 16, 12),
                                                     ("reduce_scatter", 256, 16), ("all_reduce", 4, 8)])
def test_without_the_form_the_channels_are_the_engines(op: str, mib: int, channels: int) -> None:
    """With no contention (a = 0) a ring's channels in ContendedChannels take what rdusim.sim.ring's
    take: the link max-min fair, the local calls at the channel's rate, the same launch skew."""
    queue = bench_script("ring_queue")
    ring = nccl.RingChannels(channels, 84e9, queue.LINK, queue.SKEW)
    plan = nccl.ring_plan(op, mib * MIB, 2, ring)
    calls = tuple((on, float(ops), loads) for (on, ops), loads in
                  zip(plan.primitives, queue._loads_by_loop()[plan.primitives], strict=True))
    assert queue.transfer_s(ring, plan.chunks, calls, (0.0, 1e12, 1.0)) == pytest.approx(ring_transfer_s(plan),
                                                                                          rel=1e-9)


def test_each_loops_loads_are_its_calls() -> None:
    """The engine's loops (ring_primitives) and ring_calls' carry the same calls: every call's loads at
    most its operations, at least one, on 2-8 GPUs."""
    queue = bench_script("ring_queue")
    loops = queue._loads_by_loop()
    assert len(loops) == 3 * 7
    for prims, loads in loops.items():
        assert len(prims) == len(loads) and all(1 <= ld < ops for (_, ops), ld in zip(prims, loads, strict=True))


def test_one_channel_costs_its_priced_loop() -> None:
    """--joint's engine at one channel, no contention: a channel's operations a wire byte are its loop's
    prices over the loop's wire calls (the link far from full)."""
    queue = bench_script("ring_queue")
    calls = bench_script("ring_calls")
    price = calls.price_cost(calls.fit_prices(calls.one_channel_loops()))
    for op in queue.OPS:
        loop = queue.loop_calls(op, 2, price)
        closed = sum(ops for _, ops, _ in loop) / sum(on for on, _, _ in loop)
        assert queue.steady_cost(op, 1, price, (0.0, 1e12, 1.0)) == pytest.approx(closed, rel=1e-9)


def test_run_cq_shape_as_committed(tmp_path) -> None:
    """--shape: to eight channels every op's time is within 15 us of the line through 64 MiB and its
    largest size, and the engine's a line; from twelve 256 MiB runs 10-51 us above it, and the engine
    bends there too (its channels' sends in step fill the link), except the out-of-place all-gather
    at twelve, a line in both (its first call copySend, three operations a byte)."""
    queue = bench_script("ring_queue")
    lines = queue.shape_report(CQ)
    assert "\n".join(lines) + "\n" == (GPU / "h200x2-20261130cq-queue-shape.txt").read_text()
    for channels, op, off, engine in queue.shape_rows(CQ):
        if channels <= 8:
            assert max(abs(v) for v in off.values()) <= 15 and max(abs(v) for v in engine.values()) < 1
        elif (channels, op) == (12, "all_gather"):
            assert abs(off[256]) <= 5 and abs(engine[256]) < 1
        else:
            assert 10 <= off[256] <= 51
            if op != "all_gather":
                assert engine[256] >= 4
    titles = queue.shape_plot(CQ, tmp_path / "bends.png")  # --plot: an op a panel
    assert titles == [op.replace("_", " ") for op in queue.OPS] and (tmp_path / "bends.png").stat().st_size > 0
