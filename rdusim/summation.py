"""Adding numbers one after another: the same bits on every Python.

Owns: ``add_in_order``. Imports: nothing.

The built-in ``sum`` of floats compensates its rounding since Python 3.12 (Neumaier), so its
last bits differ from Python 3.11's, which adds one value after another; ``pyproject.toml``
allows both, and the same inputs must give the same outputs bit for bit. Sums whose bits reach
a result add left to right here (a stage's work over its items has its own, faster loop:
``rdusim.mapping.plan.chunks_work``). numpy's sums (pairwise) do not depend on the Python.
"""

from __future__ import annotations

from collections.abc import Iterable


def add_in_order(values: Iterable[float]) -> float:
    """``values`` added left to right from 0, as ``sum`` did up to Python 3.11 (integers stay
    integers; no values: 0)."""
    total: float = 0
    for value in values:
        total += value
    return total
