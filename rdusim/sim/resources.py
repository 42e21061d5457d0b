"""Shared bandwidth as a SimPy resource: concurrent transfers split it fairly.

Owns: ``BandwidthPool``, ``WeightedPool``, ``TransferGroup`` (transfers that start together, done
when the last lands), ``delay`` (every timeout of the simulation, bounded by ``HORIZON_S``).
Imports: simpy, errors.

A pool serves its active transfers by processor sharing: with n transfers in flight each
progresses at rate/n, and every arrival or completion re-divides the rate. A lone stream
gets the whole bandwidth; two streams on one HBM each get half. This is how contention
between a kernel's weight stream, its activation stream and its write-back comes out of
the simulation instead of being assumed.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable

import simpy

from rdusim.errors import SimulationError

#: bytes below which a transfer counts as complete (guards float rounding)
_EPSILON_BYTES = 1e-3
#: simulated seconds no event may pass: no real prefill or decode step comes near (DeepSeek-R1
#: at 128K streaming its weights from DDR is minutes), while absurd hardware values (a bandwidth
#: of 1e-300 B/s, an efficiency of 1e-320) would otherwise schedule events at float precision's
#: limit and crawl on forever, or at infinity
HORIZON_S = 1e7


def delay(env: simpy.Environment, seconds: float) -> simpy.Timeout:
    """``env.timeout(seconds)``, refused when it would end past the horizon (or is not a number)."""
    if not env._now + seconds <= HORIZON_S:   # noqa: SLF001 (env.now without the property call)
        raise SimulationError(f"an event would end at t={env.now + seconds:.3g} s, past the simulator's horizon "
                              f"of {HORIZON_S:.0e} s: a rate or efficiency in the hardware is too small (or a "
                              "duration too large) for a meaningful simulation")
    return env.timeout(seconds)


class BandwidthPool:
    """A link or memory port of ``rate_bytes_per_s`` shared by processor sharing.

    Landings nobody reacts to at their instant are not events: a flow added with
    ``urgent=False`` (a ``TransferGroup`` whose landing starts nothing until someone next looks)
    lands when the pool is next touched (``catch_up``: a new flow, a query, the end of a kernel),
    by the very arithmetic the timer would have run at its time. While any urgent flow is in
    flight the pool arms a SimPy timer for every landing, as the reference engine does, so
    urgent waiters wake at the exact time.
    """

    def __init__(self, env: simpy.Environment, name: str, rate_bytes_per_s: float) -> None:
        if rate_bytes_per_s <= 0:
            raise ValueError(f"{name}: rate_bytes_per_s must be > 0, got {rate_bytes_per_s}")
        self.env = env
        self.name = name
        self.rate_bytes_per_s = rate_bytes_per_s
        self.bytes_total = 0.0
        self.busy_s = 0.0
        # [bytes left, arrival number, waiter, urgent] in ascending bytes left: every flow is
        # served alike, so the order never changes (float subtraction of one amount is
        # monotonic) and the next to land is the first
        self._flows: list[list] = []
        self._arrivals = 0
        self._updated_s = env.now
        self._next_s = math.inf             # when the next flow lands (where the timer would fire)
        self._urgent = 0                    # urgent flows in flight
        self._timer: simpy.Event | None = None

    def transfer(self, nbytes: float) -> simpy.Event:
        """An event that fires once ``nbytes`` have crossed the pool."""
        done = self.env.event()
        if nbytes <= _EPSILON_BYTES:
            done.succeed()
            return done
        self._add(nbytes, done, True)
        return done

    def catch_up(self) -> None:
        """Land every flow due by now (the landings no timer was armed for)."""
        now = self.env._now   # noqa: SLF001 (env.now without the property call)
        while self._next_s <= now:
            self._land_next()

    def make_urgent(self, flow: list) -> None:
        """``flow`` (still in flight after ``catch_up``) lands by a timer, at its exact time."""
        if not flow[3]:
            flow[3] = True
            self._urgent += 1
            if self._timer is None:
                self._arm()

    def _add(self, nbytes: float, waiter: simpy.Event | TransferGroup | _Part, urgent: bool) -> list:
        now = self.env._now   # noqa: SLF001
        if self._next_s <= now:
            self.catch_up()
        flows = self._flows
        elapsed = now - self._updated_s   # every flow served alike up to now
        if elapsed > 0 and flows:
            served = self.rate_bytes_per_s / len(flows) * elapsed
            for flow in flows:
                flow[0] -= served
            self.busy_s += elapsed
        self._updated_s = now
        flow = [float(nbytes), self._arrivals, waiter, urgent]
        self._arrivals += 1
        at = len(flows)
        while at and flows[at - 1][0] > flow[0]:
            at -= 1
        flows.insert(at, flow)
        self._urgent += urgent
        self.bytes_total += nbytes
        self._reschedule(now)
        return flow

    def _reschedule(self, now: float) -> None:
        self._timer = None   # an armed timer is stale now
        flows = self._flows
        while flows:
            share = self.rate_bytes_per_s / len(flows)
            least = flows[0][0]
            # done: under the byte epsilon, or so little left that the clock cannot advance by it
            # (late in a long run a float's resolution in seconds can exceed that time; waiting
            # would re-plan forever without progress)
            if least > _EPSILON_BYTES and now + least / share > now:
                break
            count = 1
            while count < len(flows) and (flows[count][0] <= _EPSILON_BYTES or now + flows[count][0] / share <= now):
                count += 1
            done = sorted(flows[:count], key=_arrival) if count > 1 else flows[:1]
            del flows[:count]
            for flow in done:   # in arrival order
                self._urgent -= flow[3]
                waiter, flow[2] = flow[2], None   # None: landed
                waiter.succeed()   # an Event, a TransferGroup of one, or a _Part of one of several
        if not flows:
            self._next_s = math.inf
            return
        wait = least / share
        if not now + wait <= HORIZON_S:
            raise SimulationError(f"an event would end at t={now + wait:.3g} s, past the simulator's horizon "
                                  f"of {HORIZON_S:.0e} s: a rate or efficiency in the hardware is too small (or a "
                                  "duration too large) for a meaningful simulation")
        self._next_s = now + wait   # the time SimPy gives a timeout of ``wait`` from ``now``
        if self._urgent:
            self._arm()

    def _arm(self) -> None:
        """A timer at ``_next_s`` exactly (SimPy's own schedule, at an absolute time)."""
        env = self.env
        timer = self._timer = simpy.Event(env)
        timer._ok = True   # noqa: SLF001 (a triggered event, as a Timeout is)
        timer.callbacks.append(self._on_timer)
        heapq.heappush(env._queue, (self._next_s, simpy.events.NORMAL, next(env._eid), timer))   # noqa: SLF001

    def _on_timer(self, timer: simpy.Event) -> None:
        if timer is self._timer:   # else a newer arrival or landing re-planned the pool
            self._land_next()

    def _land_next(self) -> None:
        now = self._next_s
        flows = self._flows
        elapsed = now - self._updated_s   # every flow served alike up to now
        if elapsed > 0:
            served = self.rate_bytes_per_s / len(flows) * elapsed
            for flow in flows:
                flow[0] -= served
            self.busy_s += elapsed
        self._updated_s = now
        self._reschedule(now)


def _arrival(flow: list) -> int:
    return flow[1]


class _Part:
    """One transfer of a ``TransferGroup`` of several: its landing counts the group down (no
    event of its own; a group of one is its own transfer's waiter)."""

    __slots__ = ("group", "index")

    def __init__(self, group: TransferGroup, index: int) -> None:
        self.group, self.index = group, index

    def succeed(self) -> None:
        self.group.landed(self.index)


class TransferGroup:
    """Transfers that start together (each its own flow in its pool, sharing it as ``transfer``
    does), done when the last has landed, instead of one event per transfer and a condition
    over them. ``on_landed(i, t)`` is told when part ``i`` lands (trace records: urgent groups,
    whose landings are processed at their time).

    Urgent (``urgent=True``, or after ``event()``): the group's ``event()`` fires when the last
    part lands, and its pools wake at that time. Otherwise ``on_done(tag)`` is called when the
    pools find the last landing (at a later ``catch_up``, or at once): for a landing nobody
    reacts to at its instant; ``settle()`` catches the group's pools up to now."""

    __slots__ = ("_event", "env", "left", "on_done", "on_landed", "pending", "tag")

    def __init__(self, env: simpy.Environment, parts: list[tuple[BandwidthPool, float]],
                 on_landed: Callable[[int, float], None] | None = None,
                 on_done: Callable[[int], None] | None = None, tag: int = 0, urgent: bool = True) -> None:
        self.env, self.left, self.on_landed, self.on_done, self.tag = env, len(parts), on_landed, on_done, tag
        self._event: simpy.Event | None = env.event() if urgent or on_done is None else None
        # (pool, flow) of every part sent to a pool: in flight until the pool clears flow[2]
        self.pending: list[tuple[BandwidthPool, list]] | None = []
        if len(parts) == 1 and parts[0][1] > _EPSILON_BYTES:   # the common case: the group is the waiter
            pool = parts[0][0]
            flow = pool._add(parts[0][1], self, urgent)   # noqa: SLF001 (the pool's own flow)
            if self.pending is not None:   # else landed at once
                self.pending.append((pool, flow))
            return
        for index, (pool, nbytes) in enumerate(parts):
            if nbytes <= _EPSILON_BYTES:
                self.landed(index)
            else:
                flow = pool._add(nbytes, _Part(self, index), urgent)   # noqa: SLF001
                if self.pending is not None:
                    self.pending.append((pool, flow))
        if not parts:
            self._finish()

    @property
    def done(self) -> bool:
        return self.left == 0

    def succeed(self) -> None:
        """The pool's call when the transfer of a group of one lands."""
        self.landed(0)

    def landed(self, index: int) -> None:
        if self.on_landed is not None:
            self.on_landed(index, self.env._now)   # noqa: SLF001 (urgent: a timer's time)
        self.left -= 1
        if self.left == 0:
            self._finish()

    def _finish(self) -> None:
        on_done, self.on_done, self.on_landed, self.pending = self.on_done, None, None, None
        if self._event is not None:
            self._event.succeed()
        elif on_done is not None:
            on_done(self.tag)

    def settle(self) -> None:
        """Catch this group's pools up to now (its landings that are due)."""
        for pool, flow in self.pending or ():
            if flow[2] is not None:
                pool.catch_up()

    def event(self) -> simpy.Event:
        """The event of the last landing (after ``settle``, with parts in flight): the pools
        land this group's parts by timers from now on."""
        if self._event is None:
            self._event = self.env.event()
            for pool, flow in self.pending or ():
                if flow[2] is not None:
                    pool.make_urgent(flow)
        return self._event


class WeightedPool:
    """Bandwidth shared by weighted processor sharing: a flow of weight w (w CTAs) gets
    ``rate * w / sum(weights)``; every arrival or completion re-divides the rate."""

    def __init__(self, env: simpy.Environment, rate: float) -> None:
        self.env, self.rate = env, rate
        self._flows: dict[int, list] = {}  # id -> [bytes left, weight, done event]
        self._ids = itertools.count()
        self._updated = env.now
        self._generation = 0

    def transfer(self, nbytes: float, weight: float) -> simpy.Event:
        done = self.env.event()
        if nbytes <= _EPSILON_BYTES:
            done.succeed()
            return done
        self._advance()
        self._flows[next(self._ids)] = [float(nbytes), float(weight), done]
        self._reschedule()
        return done

    def _advance(self) -> None:
        elapsed = self.env.now - self._updated
        if elapsed > 0 and self._flows:
            per_weight = self.rate / sum(f[1] for f in self._flows.values()) * elapsed
            for flow in self._flows.values():
                flow[0] -= per_weight * flow[1]
        self._updated = self.env.now

    def _reschedule(self) -> None:
        self._generation += 1
        for key in [k for k, f in self._flows.items() if f[0] <= _EPSILON_BYTES]:
            self._flows.pop(key)[2].succeed()
        if not self._flows:
            return
        total = sum(f[1] for f in self._flows.values())
        wait = min(f[0] / f[1] for f in self._flows.values()) * total / self.rate
        generation = self._generation
        delay(self.env, wait).callbacks.append(lambda _e: self._on_timer(generation))

    def _on_timer(self, generation: int) -> None:
        if generation == self._generation:
            self._advance()
            self._reschedule()
