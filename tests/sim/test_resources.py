"""Processor-sharing bandwidth: exact completion times on tiny cases."""

import contextlib
import math
import signal

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from rdusim.errors import SimulationError
from rdusim.sim.resources import (
    EPSILON_BYTES,
    HORIZON_S,
    BandwidthPool,
    CappedPool,
    WeightedPool,
    delay,
    max_min_shares,
)


def _times(arrivals):
    env = simpy.Environment()
    pool = BandwidthPool(env, "hbm", 100.0)  # 100 B/s
    done = {}

    def flow(name, at, nbytes):
        yield env.timeout(at)
        yield pool.transfer(nbytes)
        done[name] = env.now

    for name, at, nbytes in arrivals:
        env.process(flow(name, at, nbytes))
    env.run()
    return done, pool


def test_lone_transfer_gets_the_whole_bandwidth():
    done, pool = _times([("a", 0.0, 100.0)])
    assert done == {"a": pytest.approx(1.0)}
    assert pool.busy_s == pytest.approx(1.0) and pool.bytes_total == 100.0


def test_two_transfers_share_then_the_survivor_speeds_up():
    # a: 100 B from t=0; b: 50 B from t=0.5. Until 0.5 a moves 50 B alone; then both at 50 B/s:
    # b finishes at 1.5 (50 B), a has 0 left at 1.5 too.
    done, _ = _times([("a", 0.0, 100.0), ("b", 0.5, 50.0)])
    assert done["a"] == pytest.approx(1.5) and done["b"] == pytest.approx(1.5)


def test_three_way_sharing():
    done, pool = _times([("a", 0.0, 30.0), ("b", 0.0, 60.0), ("c", 0.0, 90.0)])
    # 3 flows at 33.3 B/s: a done at 0.9; then 2 at 50 B/s: b (30 left) at 1.5; c (30 left) alone at 1.8
    assert (done["a"], done["b"], done["c"]) == (pytest.approx(0.9), pytest.approx(1.5), pytest.approx(1.8))
    assert pool.busy_s == pytest.approx(1.8)


def test_rejects_non_positive_rate():
    with pytest.raises(ValueError, match="rate_bytes_per_s must be > 0"):
        BandwidthPool(simpy.Environment(), "x", 0.0)


def test_a_transfer_below_the_clock_resolution_completes():
    """Late in a long run a few bytes take less than one float step of the clock; the pool
    completes them instead of re-planning forever (issue 11, class 6)."""
    env = simpy.Environment(initial_time=1e6)  # ulp(1e6 s) ~ 1.2e-10 s: 0.1 B at 1.6 TB/s is below it
    pool = BandwidthPool(env, "hbm", 1.6e12)
    finished = []
    pool.transfer(0.1).callbacks.append(lambda _event: finished.append(env.now))
    env.run(until=env.now + 1.0)
    assert finished == [1e6]


def test_an_event_past_the_horizon_is_an_error():
    env = simpy.Environment()
    pool = BandwidthPool(env, "hbm", 1e-300)  # absurdly slow: the transfer would end at 1e303 s
    with pytest.raises(SimulationError, match="past the simulator's horizon"):
        pool.transfer(1e3)
    with pytest.raises(SimulationError, match="horizon"):
        delay(env, HORIZON_S * 2)


class _Waiter:
    """Records the simulated time (and the pool's clock) at which its flow is said to land."""

    def __init__(self, env: simpy.Environment, pool: BandwidthPool) -> None:
        self.env, self.pool, self.calls = env, pool, []

    def succeed(self) -> None:
        self.calls.append((self.env.now, self.pool._updated_s))


def test_a_lazy_transfer_lands_when_the_pool_is_next_touched_by_the_same_arithmetic():
    """A flow nobody waits for at its instant (``urgent=False``) arms no timer: the pool lands it
    when next touched, its clock at the landing's time, with the busy time a timer would give."""
    env = simpy.Environment()
    pool = BandwidthPool(env, "hbm", 100.0)
    waiter = _Waiter(env, pool)
    pool.add(100.0, waiter, urgent=False)   # alone: lands at 1.0
    env.run()
    assert env.now == 0.0 and waiter.calls == [] and next(env._eid) == 0   # no event at all
    done = []

    def later():
        yield env.timeout(3.0)
        pool.catch_up()
        done.append(env.now)
        yield pool.transfer(50.0)   # the pool is idle again: the whole rate, 0.5 s
        done.append(env.now)

    env.process(later())
    env.run()
    assert waiter.calls == [(3.0, 1.0)] and done == [3.0, 3.5]
    assert pool.busy_s == 1.5 and pool.bytes_total == 150.0


def test_a_lazy_transfer_made_urgent_lands_at_its_exact_time():
    # a: 100 B lazy from t=0; b: 50 B from t=0.5 (a has 50 B left: both at 50 B/s, land at 1.5);
    # at t=1.0 someone needs a's landing: a timer lands it at 1.5, as one armed from the start would
    env = simpy.Environment()
    pool = BandwidthPool(env, "hbm", 100.0)
    waiter = _Waiter(env, pool)
    flow = pool.add(100.0, waiter, urgent=False)
    woken = {}

    def b():
        yield env.timeout(0.5)
        yield pool.transfer(50.0)
        woken["b"] = env.now

    def needs_a():
        yield env.timeout(1.0)
        pool.catch_up()
        assert waiter.calls == []
        pool.make_urgent(flow)

    env.process(b())
    env.process(needs_a())
    env.run()
    assert waiter.calls == [(1.5, 1.5)] and woken == {"b": 1.5} and pool.busy_s == 1.5
    pool.make_urgent(flow)   # landed: nothing to do
    assert pool._urgent == 0


def test_nothing_to_transfer_is_not_a_flow():
    env = simpy.Environment()
    pool = BandwidthPool(env, "hbm", 100.0)
    assert pool.add(1e-4, _Waiter(env, pool), urgent=True) is None   # below the byte epsilon
    assert pool.bytes_total == 0.0 and pool.transfer(0.0).triggered


@contextlib.contextmanager
def _hang_guard(seconds: int):
    """Fail instead of hanging the suite (no pytest-timeout here): SIGALRM after ``seconds``."""
    def _fail(_signum, _frame):
        raise AssertionError(f"the simulation still ran after {seconds} s: a timer re-arms without progress")

    previous = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_weighted_transfer_below_the_clock_resolution_completes():
    """The GPU model's pools (WeightedPool) at ~1 s simulated: 1.1e-3 B at 11 TB/s takes 1e-16 s,
    under half an ulp of 1.0 s, so a timer at now + wait is at now and re-armed forever (the
    Llama-3.1-70B TP4 16K prefill on H200 never finished). It lands now instead."""
    env = simpy.Environment(initial_time=1.0)
    pool = WeightedPool(env, 11e12)
    nbytes = 1.1e-3
    assert nbytes > EPSILON_BYTES and 1.0 + nbytes / 11e12 == 1.0   # the case: above the epsilon, below the clock
    finished = []
    pool.transfer(nbytes, 132.0).callbacks.append(lambda _event: finished.append(env.now))
    with _hang_guard(10):
        env.run(until=2.0)
    assert finished == [1.0]


def test_a_weighted_residue_lands_and_the_others_keep_their_share():
    """Beside a residue that lands at once (weight 1000 of 1001: still under the clock's
    resolution while shared), a real flow still gets the whole rate after it."""
    env = simpy.Environment(initial_time=1.0)
    pool = WeightedPool(env, 11e12)
    finished = {}
    pool.transfer(11e6, 1.0).callbacks.append(lambda _event: finished.setdefault("big", env.now))
    pool.transfer(1.1e-3, 1000.0).callbacks.append(lambda _event: finished.setdefault("tiny", env.now))
    with _hang_guard(10):
        env.run(until=2.0)
    assert finished["tiny"] == 1.0
    assert math.isclose(finished["big"], 1.0 + 11e6 / 11e12, rel_tol=1e-12)


# --- CappedPool: max-min fair sharing with per-flow caps ---------------------------------------


def test_max_min_shares_closed_forms():
    """Water filling: under the rate every flow gets its cap; past it the capped-low flows keep
    their caps and the rest split what is left equally; the shares never exceed the rate."""

    assert max_min_shares([10.0, 20.0], 100.0) == [10.0, 20.0]
    assert max_min_shares([10.0, 50.0, 50.0], 70.0) == [10.0, 30.0, 30.0]
    assert max_min_shares([40.0, 40.0, 40.0], 60.0) == [20.0, 20.0, 20.0]
    assert max_min_shares([], 5.0) == []


@given(caps=st.lists(st.floats(0.01, 1e3), min_size=1, max_size=30), rate=st.floats(0.01, 1e4))
def test_max_min_shares_invariants(caps, rate):
    """Shares are within their caps, never exceed the rate, fill it whenever the caps could, and
    a flow below another's share is at its own cap (max-min fairness)."""

    shares = max_min_shares(caps, rate)
    assert all(0 <= s <= c * (1 + 1e-12) for s, c in zip(shares, caps, strict=True))
    assert sum(shares) <= rate * (1 + 1e-9)
    assert math.isclose(sum(shares), min(rate, sum(caps)), rel_tol=1e-9)
    top = max(shares)
    assert all(math.isclose(s, c, rel_tol=1e-9) or math.isclose(s, top, rel_tol=1e-9)
               for s, c in zip(shares, caps, strict=True))


def test_capped_pool_event_times():
    """Two flows on a 100 B/s link, caps 30 and 100: both run at their shares (30, 70) until the
    second lands at 700/70 = 10 s; the first then has 1000 - 300 left at its cap: 10 + 700/30 s."""

    env = simpy.Environment()
    pool = CappedPool(env, 100.0)
    ends = {}
    pool.transfer(1000.0, 30.0).callbacks.append(lambda _e: ends.setdefault("slow", env.now))
    pool.transfer(700.0, 100.0).callbacks.append(lambda _e: ends.setdefault("fast", env.now))
    env.run()
    assert math.isclose(ends["fast"], 10.0, rel_tol=1e-12)
    assert math.isclose(ends["slow"], 10.0 + 700.0 / 30.0, rel_tol=1e-12)


@given(flows=st.lists(st.tuples(st.floats(1.0, 1e6), st.floats(1.0, 1e3), st.floats(0.0, 5.0)),
                      min_size=1, max_size=12), rate=st.floats(1.0, 1e4))
def test_capped_pool_conserves_bytes_and_bounds(flows, rate):
    """Flows of (bytes, cap, arrival): the last lands no sooner than the bytes over the rate after
    the first arrival, and no flow beats its own cap (its bytes over its cap)."""

    env = simpy.Environment()
    pool = CappedPool(env, rate)
    ends = [None] * len(flows)

    def flow(index, nbytes, cap, arrival):
        yield env.timeout(arrival)
        yield pool.transfer(nbytes, cap)
        ends[index] = env.now

    for index, (nbytes, cap, arrival) in enumerate(flows):
        env.process(flow(index, nbytes, cap, arrival))
    env.run()
    first = min(a for _, _, a in flows)
    assert max(ends) >= first + sum(b for b, _, _ in flows) / rate * (1 - 1e-9)
    assert all(end >= arrival + nbytes / cap * (1 - 1e-9) for end, (nbytes, cap, arrival) in zip(ends, flows, strict=True))
