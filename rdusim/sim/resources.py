"""Shared bandwidth as a SimPy resource: concurrent transfers split it fairly.

Owns: ``BandwidthPool``, ``WeightedPool``, ``transfer_all`` (transfers that start together, one
event when the last lands), ``delay`` (every timeout of the simulation, bounded by ``HORIZON_S``).
Imports: simpy, errors.

A pool serves its active transfers by processor sharing: with n transfers in flight each
progresses at rate/n, and every arrival or completion re-divides the rate. A lone stream
gets the whole bandwidth; two streams on one HBM each get half. This is how contention
between a kernel's weight stream, its activation stream and its write-back comes out of
the simulation instead of being assumed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import simpy

from rdusim.errors import HorizonError

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
        raise HorizonError(f"an event would end at t={env.now + seconds:.3g} s, past the simulator's horizon "
                              f"of {HORIZON_S:.0e} s: a rate or efficiency in the hardware is too small (or a "
                              "duration too large) for a meaningful simulation")
    return env.timeout(seconds)


class BandwidthPool:
    """A link or memory port of ``rate_bytes_per_s`` shared by processor sharing."""

    def __init__(self, env: simpy.Environment, name: str, rate_bytes_per_s: float) -> None:
        if rate_bytes_per_s <= 0:
            raise ValueError(f"{name}: rate_bytes_per_s must be > 0, got {rate_bytes_per_s}")
        self.env = env
        self.name = name
        self.rate_bytes_per_s = rate_bytes_per_s
        self.bytes_total = 0.0
        self.busy_s = 0.0
        self._flows: dict[int, list] = {}
        self._ids = itertools.count()
        self._updated_s = env.now
        self._generation = 0

    def transfer(self, nbytes: float) -> simpy.Event:
        """An event that fires once ``nbytes`` have crossed the pool."""
        done = self.env.event()
        if nbytes <= _EPSILON_BYTES:
            done.succeed()
            return done
        self._add(nbytes, done)
        return done

    def _add(self, nbytes: float, waiter: simpy.Event | _Part) -> None:
        self._advance()
        self._flows[next(self._ids)] = [float(nbytes), waiter]
        self.bytes_total += nbytes
        self._reschedule()

    def _advance(self) -> None:
        now = self.env.now
        elapsed = now - self._updated_s
        if elapsed > 0 and self._flows:
            served = self.rate_bytes_per_s / len(self._flows) * elapsed
            for flow in self._flows.values():
                flow[0] -= served
            self.busy_s += elapsed
        self._updated_s = now

    def _reschedule(self) -> None:
        self._generation += 1
        flows, now = self._flows, self.env.now
        while flows:
            share = self.rate_bytes_per_s / len(flows)
            # done: under the byte epsilon, or so little left that the clock cannot advance by it
            # (late in a long run a float's resolution in seconds can exceed that time; waiting
            # would re-plan forever without progress)
            done = [k for k, f in flows.items() if f[0] <= _EPSILON_BYTES or now + f[0] / share <= now]
            if not done:
                break
            for key in done:
                flows.pop(key)[1].succeed()   # an Event, or a _Part of transfer_all
        if not flows:
            return
        generation = self._generation
        timer = delay(self.env, min(f[0] for f in flows.values()) / share)
        timer.callbacks.append(lambda _event: self._on_timer(generation))

    def _on_timer(self, generation: int) -> None:
        if generation != self._generation:
            return  # a newer arrival or completion re-planned the pool
        self._advance()
        self._reschedule()


class _Part:
    """One transfer of a ``transfer_all`` group: its landing counts the group down (no event of its own)."""

    __slots__ = ("group", "index")

    def __init__(self, group: _Group, index: int) -> None:
        self.group, self.index = group, index

    def succeed(self) -> None:
        self.group.landed(self.index)


class _Group:
    __slots__ = ("done", "left", "on_landed")

    def __init__(self, done: simpy.Event, left: int, on_landed: Callable[[int, float], None] | None) -> None:
        self.done, self.left, self.on_landed = done, left, on_landed

    def landed(self, index: int) -> None:
        if self.on_landed is not None:
            self.on_landed(index, self.done.env.now)
        self.left -= 1
        if self.left == 0:
            self.done.succeed()


def transfer_all(env: simpy.Environment, parts: list[tuple[BandwidthPool, float]],
                 on_landed: Callable[[int, float], None] | None = None) -> simpy.Event:
    """Transfers that start together (each its own flow in its pool, sharing it as ``transfer``
    does): one event that fires when the last has landed, instead of one per transfer and a
    condition over them. ``on_landed(i, t)`` is told when part ``i`` lands (trace records)."""
    done = env.event()
    group = _Group(done, len(parts), on_landed)
    for index, (pool, nbytes) in enumerate(parts):
        if nbytes <= _EPSILON_BYTES:
            group.landed(index)
        else:
            pool._add(nbytes, _Part(group, index))
    if not parts:
        done.succeed()
    return done


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
