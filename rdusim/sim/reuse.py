"""Kernel calls simulated once and taken again: a later call of the same kernel on the same node,
from the same drained state, is the first call shifted in time, bit for bit.

Owns: ``KernelReuse`` (``simulate_plan(reuse=...)``; the mapping explorer's re-scores keep one
per process in their ``LayerCache``). Imports: mapping.plan, resources (the horizon), trace.

A kernel call that starts from a drained, synchronised node (no looped iteration loading before it
or during it) and ends with the node's barrier depends only on its kernel plan, the node (pool
rates, P2P latency, launch and sync times) and its start time: nothing else is in flight, and what
earlier calls left in SimPy's queue are stale pool timers, which do nothing when they fire.

**Why a shifted call is exact.** Every time the engine computes during a call is a time it reached
plus a non-negative duration (``now + d``: launch, item delays, a landing's time, sync) or a
difference of two times it reached (``now - updated``: a pool's service), and times are only
compared with each other and with the horizon (``HORIZON_S``). In one binade
[2^(E-1), 2^E) the doubles are the multiples of u = 2^(E-53), and rounding to nearest, ties to
even (the even multiples of u), commutes with a shift by an even multiple of u: RN(x + delta) =
RN(x) + delta while x and x + delta lie in the binade. So a call starting at ``s2 = s1 + delta``,
``delta`` an even multiple of u, with both calls inside the binade, computes the first call's times
plus ``delta`` exactly, makes the same comparisons, runs the same events in the same order, and its
differences (latency, service, busy intervals) are the same doubles. A time a call computes but
never reaches (a landing re-planned by an arrival, a superseded timer) can leave the binade; with
``MARGIN`` spacings between each call's end and the binade's top, such a time lies past the call's
end in both calls, so every comparison still agrees. The same start (``delta = 0``) needs no binade.
The horizon: a shifted call ending past it is simulated instead (which stops with the horizon's
error); a time computed but never reached within ``delta`` below the horizon (10^7 s, a landing
projected months ahead) would stop a fresh simulation of the later call and does not stop the
shifted one, the one case where the two differ: only absurd hardware numbers come near it.
tests/sim/test_reuse.py checks reused calls against fresh simulations, and the explorer's tests
its re-scores against ``simulate``.

**What is not shifted:** running totals. A stage's busy time is summed as ``total + end - start``
and a pool's busy time and bytes as ``total + increment``, onto the node's totals so far, which
differ between calls; the totals never feed back into a time. A reused call reports the first
call's increments (``KernelRecord.stage_busy_s``, ``pool_busy_s``, ``pool_bytes``; equal to a fresh
simulation's to the last bits, as ``LayerCache``'s layer types already are) and adds them to the
node's totals.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Hashable
from dataclasses import dataclass, field

from rdusim.mapping.plan import KernelPlan
from rdusim.sim.resources import HORIZON_S
from rdusim.sim.trace import KernelRecord

#: spacings (units in the last place of the binade) kept free between a shifted call's end and
#: its binade's top: a time computed but never reached lies past the end in both calls (one is
#: enough by the argument above)
MARGIN = 4


@dataclass
class KernelReuse:
    """Kernel calls by kernel plan (its identity) and node, each kept at its start time and, when it
    ends ``MARGIN`` spacings below its binade's top, as its binade's representative for its parity
    (so calls of a kernel anywhere in a binade that end that far below its top are simulated at
    most twice, once per parity; a call ending nearer the top is simulated at each new start)."""

    calls: dict[tuple[int, Hashable], dict[tuple, tuple[KernelPlan, KernelRecord]]] = field(default_factory=dict)
    hits: int = 0

    def find(self, node: Hashable, kernel: KernelPlan, start: float) -> tuple[KernelRecord, float] | None:
        """A kept call of ``kernel`` on ``node`` that shifts exactly to ``start``, and its end there."""
        kept = self.calls.get((id(kernel), node))
        if not kept:
            return None
        found = kept.get(("at", start))
        end = None
        if found is not None:
            end = found[1].end_s
        elif (lattice := _lattice(start)) is not None and (found := kept.get(lattice)) is not None:
            record = found[1]
            end = record.end_s + (start - record.start_s)   # exact: one binade
            if _lattice(start, end) != lattice:
                return None
        if found is None or end is None or found[0] is not kernel or not end <= HORIZON_S:
            return None   # (a kept plan stays alive, so an id names one plan)
        self.hits += 1
        return found[1], end

    def keep(self, node: Hashable, kernel: KernelPlan, record: KernelRecord) -> None:
        """Keep a simulated call (its record) for later calls of ``kernel`` on ``node``."""
        kept = self.calls.setdefault((id(kernel), node), {})
        kept.setdefault(("at", record.start_s), (kernel, record))
        if (lattice := _lattice(record.start_s, record.end_s)) is not None:
            kept.setdefault(lattice, (kernel, record))


def shifted(record: KernelRecord, layer: int, start: float, end: float) -> KernelRecord:
    """``record`` as the call of ``layer`` from ``start`` to ``end``."""
    # shares the kept record's dicts (busy times, PCUs, bytes): nothing mutates a record's dicts
    # once it is made (the engine's ``_add_totals`` and rdusim.analysis.breakdown only read them)
    return dataclasses.replace(record, layer=layer, start_s=start, end_s=end)


def _lattice(start: float, end: float | None = None) -> tuple[str, int, int] | None:
    """``start``'s binade (its exponent) and parity in multiples of the binade's spacing, when
    ``start`` is a normal positive double and ``end`` (if given) stays ``MARGIN`` spacings below
    the binade's top; None otherwise."""
    if not start >= sys.float_info.min:   # zero, subnormal or negative
        return None
    exponent = math.frexp(start)[1]   # start in [2^(exponent-1), 2^exponent)
    spacing = math.ldexp(1.0, exponent - 53)
    if end is not None and not end + MARGIN * spacing < math.ldexp(1.0, exponent):
        return None
    return ("shift", exponent, int(start / spacing) & 1)
