"""Shared bandwidth as a SimPy resource: concurrent transfers split it fairly.

Owns: ``BandwidthPool`` (with lazy landings: ``add``, ``catch_up``, ``make_urgent``),
``WeightedPool``, ``CappedPool``, ``delay`` (every timeout of the simulation, bounded by ``HORIZON_S``).
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
from typing import Protocol

import simpy

from rdusim.errors import HorizonError

#: bytes below which a transfer counts as complete (guards float rounding)
EPSILON_BYTES = 1e-3
#: simulated seconds no event may pass: no real prefill or decode step comes near (DeepSeek-R1
#: at 128K streaming its weights from DDR is minutes), while absurd hardware values (a bandwidth
#: of 1e-300 B/s, an efficiency of 1e-320) would otherwise schedule events at float precision's
#: limit and crawl on forever, or at infinity
HORIZON_S = 1e7


def delay(env: simpy.Environment, seconds: float) -> simpy.Timeout:
    """``env.timeout(seconds)``, refused when it would end past the horizon (or is not a number)."""
    if not env._now + seconds <= HORIZON_S:   # noqa: SLF001 (env.now without the property call)
        raise past_horizon(env.now + seconds)
    return env.timeout(seconds)


def past_horizon(end_s: float) -> HorizonError:
    """The error for an event that would end at ``end_s``, past ``HORIZON_S`` (or not a number)."""
    return HorizonError(f"an event would end at t={end_s:.3g} s, past the simulator's horizon of {HORIZON_S:.0e} s: "
                        "a rate or efficiency in the hardware is too small (or a duration too large) for a "
                        "meaningful simulation")


class Waiter(Protocol):
    """What a flow tells when it lands: a SimPy event, or anything with ``succeed()``."""

    def succeed(self) -> object: ...


class BandwidthPool:
    """A link or memory port of ``rate_bytes_per_s`` shared by processor sharing.

    Landings nobody reacts to at their instant are not events: a flow added with
    ``urgent=False`` (an item's load whose landing starts nothing until someone next looks)
    lands when the pool is next touched (``catch_up``: a new flow, a query, the end of a kernel),
    by the very arithmetic the timer would have run at its time. While any urgent flow is in
    flight the pool arms a SimPy timer for every landing, as the reference engine does, so
    urgent waiters wake at the exact time.
    """

    def __init__(self, env: simpy.Environment, name: str, rate_bytes_per_s: float, *, direct: bool = False) -> None:
        """``direct``: the pool's timers are the pool itself in SimPy's queue (no event object; the
        engine's own loop, which alone may run ``env`` then, calls ``on_timer`` with the entry's
        event number)."""
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
        self._timer: simpy.Event | int | None = None   # the armed timer (its event number if ``direct``)
        self._direct = direct

    def transfer(self, nbytes: float) -> simpy.Event:
        """An event that fires once ``nbytes`` have crossed the pool."""
        done = self.env.event()
        if self.add(nbytes, done, True) is None:
            done.succeed()
        return done

    def add(self, nbytes: float, waiter: Waiter, urgent: bool) -> list | None:
        """A flow of ``nbytes``: ``waiter.succeed()`` is called when it lands, at its time if
        ``urgent`` (a timer), else at the pool's next ``catch_up`` at the latest (the pool's clock
        then reads the landing's time). Returns the flow's handle (for ``make_urgent``), or
        ``None`` when there is nothing to transfer (below the byte epsilon: not a flow, and the
        waiter is not called)."""
        if nbytes <= EPSILON_BYTES:
            return None
        now = self.env._now   # noqa: SLF001 (env.now without the property call)
        if self._next_s <= now:
            self.catch_up()
        flows = self._flows
        rate = self.rate_bytes_per_s
        count = len(flows)
        elapsed = now - self._updated_s   # every flow served alike up to now
        if elapsed > 0 and count:
            served = rate / count * elapsed
            for flow in flows:
                flow[0] -= served
            self.busy_s += elapsed
        self._updated_s = now
        flow = [float(nbytes), self._arrivals, waiter, urgent]
        self._arrivals += 1
        at = count
        while at and flows[at - 1][0] > flow[0]:
            at -= 1
        flows.insert(at, flow)
        self._urgent += urgent
        self.bytes_total += nbytes
        # ``_reschedule(now)``, its common case inline: the first flow does not land at once
        self._timer = None
        least = flows[0][0]
        end = now + least / (rate / (count + 1))
        if least > EPSILON_BYTES and end > now and end <= HORIZON_S:
            self._next_s = end
            if self._urgent:
                self._arm()
        else:
            self._reschedule(now)
        return flow

    def catch_up(self) -> None:
        """Land every flow due by now (the landings no timer was armed for)."""
        now = self.env._now   # noqa: SLF001 (env.now without the property call)
        while self._next_s <= now:
            self._land_next()

    def make_urgent(self, flow: list) -> None:
        """``flow`` lands by a timer, at its exact time (at once if it is due by now; nothing if
        it has landed)."""
        self.catch_up()   # no timer in the past
        if flow[2] is not None and not flow[3]:
            flow[3] = True
            self._urgent += 1
            if self._timer is None:
                self._arm()

    def _reschedule(self, now: float) -> None:
        self._timer = None   # an armed timer is stale now
        flows = self._flows
        while flows:
            share = self.rate_bytes_per_s / len(flows)
            least = flows[0][0]
            wait = least / share
            # done: under the byte epsilon, or so little left that the clock cannot advance by it
            # (late in a long run a float's resolution in seconds can exceed that time; waiting
            # would re-plan forever without progress)
            if least > EPSILON_BYTES and now + wait > now:
                break
            count = 1
            while count < len(flows) and (flows[count][0] <= EPSILON_BYTES or now + flows[count][0] / share <= now):
                count += 1
            done = sorted(flows[:count], key=_arrival) if count > 1 else flows[:1]
            del flows[:count]
            for flow in done:   # in arrival order
                self._urgent -= flow[3]
                waiter, flow[2] = flow[2], None   # None: landed
                waiter.succeed()
        if not flows:
            self._next_s = math.inf
            return
        if not now + wait <= HORIZON_S:
            raise past_horizon(now + wait)
        self._next_s = now + wait   # the time SimPy gives a timeout of ``wait`` from ``now``
        if self._urgent:
            self._arm()

    def _arm(self) -> None:
        """A timer at ``_next_s`` exactly (SimPy's own schedule, at an absolute time)."""
        env = self.env
        if self._direct:
            number = self._timer = next(env._eid)   # noqa: SLF001
            heapq.heappush(env._queue, (self._next_s, simpy.events.NORMAL, number, self))   # noqa: SLF001
            return
        timer = self._timer = simpy.Event(env)
        timer._ok = True   # noqa: SLF001 (a triggered event, as a Timeout is)
        timer.callbacks.append(self._on_timer)
        heapq.heappush(env._queue, (self._next_s, simpy.events.NORMAL, next(env._eid), timer))   # noqa: SLF001

    def _on_timer(self, timer: simpy.Event) -> None:
        if timer is self._timer:   # else a newer arrival or landing re-planned the pool
            self._land_next()

    def on_timer(self, number: int) -> None:
        """The timer of event number ``number`` fired (a ``direct`` pool)."""
        if number == self._timer:   # else a newer arrival or landing re-planned the pool
            self._land_next()

    def _land_next(self) -> None:
        """Serve every flow up to the next landing, then ``_reschedule`` (its common case inline:
        the first flow lands alone and the next does not land at once)."""
        now = self._next_s
        flows = self._flows
        rate = self.rate_bytes_per_s
        count = len(flows)
        share = rate / count
        elapsed = now - self._updated_s   # every flow served alike up to now
        if elapsed > 0:
            served = share * elapsed
            for flow in flows:
                flow[0] -= served
            self.busy_s += elapsed
        self._updated_s = now
        first = flows[0]
        least = first[0]
        if not (least <= EPSILON_BYTES or now + least / share <= now) or \
                (count > 1 and (flows[1][0] <= EPSILON_BYTES or now + flows[1][0] / share <= now)):
            self._reschedule(now)   # the first does not land, or several land together
            return
        self._timer = None
        del flows[0]
        self._urgent -= first[3]
        waiter, first[2] = first[2], None   # None: landed
        waiter.succeed()
        if count == 1:
            self._next_s = math.inf
            return
        least = flows[0][0]
        end = now + least / (rate / (count - 1))
        if least > EPSILON_BYTES and end > now and end <= HORIZON_S:
            self._next_s = end
            if self._urgent:
                self._arm()
        else:
            self._reschedule(now)


def _arrival(flow: list) -> int:
    return flow[1]


class _Replanned:
    """A pool re-planned at every arrival and landing (``_reschedule``): each plan arms a timer
    for its next landing, and only the latest plan's timer acts."""

    env: simpy.Environment
    _generation: int

    def _advance(self) -> None: ...

    def _reschedule(self) -> None: ...

    def _arm_after(self, wait: float) -> None:
        generation = self._generation
        delay(self.env, wait).callbacks.append(lambda _e: self._on_timer(generation))

    def _on_timer(self, generation: int) -> None:
        if generation == self._generation:
            self._advance()
            self._reschedule()


class WeightedPool(_Replanned):
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
        if nbytes <= EPSILON_BYTES:
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
        flows = self._flows
        now = self.env.now
        for key in [k for k, f in flows.items() if f[0] <= EPSILON_BYTES]:
            flows.pop(key)[2].succeed()
        while flows:
            total = sum(f[1] for f in flows.values())
            wait = min(f[0] / f[1] for f in flows.values()) * total / self.rate
            if now + wait > now:
                break
            # so little left that the clock cannot advance by it (``wait`` under half a float ulp
            # of ``now``, as ``BandwidthPool._reschedule``): those flows land now, in arrival
            # order; a timer at ``now`` would advance nothing and re-arm forever
            for key in [k for k, f in flows.items() if not now + f[0] / f[1] * total / self.rate > now]:
                flows.pop(key)[2].succeed()
        if flows:
            self._arm_after(wait)


def max_min_shares(caps: list[float], rate: float) -> list[float]:
    """Max-min fair shares of ``rate`` among flows that can each take at most its cap (water
    filling): the flows under an equal share get their cap, the rest split what is left equally."""
    shares = [0.0] * len(caps)
    left, count = rate, len(caps)
    for index in sorted(range(len(caps)), key=caps.__getitem__):
        shares[index] = min(caps[index], left / count)
        left -= shares[index]
        count -= 1
    return shares


class CappedPool(_Replanned):
    """Bandwidth shared by flows that each move at most at their own rate (a CTA's loads and
    stores): max-min fair (``max_min_shares``), so while the caps together stay under ``rate``
    every flow runs at its cap, and past it the link is full and split evenly among the flows
    it limits; every arrival or completion re-divides the rate."""

    def __init__(self, env: simpy.Environment, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0, got {rate}")
        self.env, self.rate = env, rate
        self._flows: dict[int, list] = {}  # id -> [bytes left, cap, done event, share, tag]
        self._ids = itertools.count()
        self._updated = env.now
        self._generation = 0

    def transfer(self, nbytes: float, cap: float, tag: object = None) -> simpy.Event:
        """An event that fires once ``nbytes`` have crossed at no more than ``cap`` bytes/s
        (``tag``: what a subclass's ``_shares`` reads of the flow; unused here)."""
        if cap <= 0:
            raise ValueError(f"cap must be > 0, got {cap}")
        done = self.env.event()
        if nbytes <= EPSILON_BYTES:
            done.succeed()
            return done
        self._advance()
        self._flows[next(self._ids)] = [float(nbytes), float(cap), done, 0.0, tag]
        self._reschedule()
        return done

    def _shares(self, flows: list[list]) -> list[float]:
        """Each flow's rate now (bytes/s), in arrival order: max-min fair under ``rate``."""
        return max_min_shares([f[1] for f in flows], self.rate)

    def _advance(self) -> None:
        elapsed = self.env.now - self._updated
        if elapsed > 0:
            for flow in self._flows.values():
                flow[0] -= flow[3] * elapsed
        self._updated = self.env.now

    def _reschedule(self) -> None:
        self._generation += 1
        flows = self._flows
        now = self.env.now
        while flows:
            for flow, share in zip(flows.values(), self._shares(list(flows.values())), strict=True):
                flow[3] = share
            wait = min(f[0] / f[3] for f in flows.values())
            if now + wait > now and min(f[0] for f in flows.values()) > EPSILON_BYTES:
                break
            # landed, or so little left that the clock cannot advance by it: in arrival order
            for key in [k for k, f in flows.items() if f[0] <= EPSILON_BYTES or not now + f[0] / f[3] > now]:
                flows.pop(key)[2].succeed()
        if flows:
            self._arm_after(wait)
