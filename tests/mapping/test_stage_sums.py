"""A stage's work is its items' works added one after another in plan order, left to right (not
``sum``, which compensates its rounding since Python 3.12), by the loop over a few items and by
``np.add.accumulate`` over many: chunks repeated as the same objects, works of any size and sign
(hypothesis), and a case where the order shows."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.mapping import plan
from rdusim.mapping.plan import Chunk, Item, Stage
from rdusim.mapping.stages import _Draft

WORKS = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False) | \
    st.floats(min_value=0.0, max_value=1e-3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(WORKS, min_size=1, max_size=6), min_size=1, max_size=5),
       st.lists(st.integers(0, 4), min_size=1, max_size=30))
def test_stage_work_adds_item_after_item(chunks: list[list[float]], order: list[int]) -> None:
    made = [Chunk(tuple(Item(w) for w in works)) for works in chunks]
    sequence = tuple(made[i % len(made)] for i in order)   # chunk objects repeat, in runs or not
    running = np.add.accumulate([0.0] + [i.work for c in sequence for i in c.items])  # one add at a time
    total = float(running[-1])
    before = plan._FEW_ITEMS
    for few in (before, 0):  # a loop over few items, ``np.add.accumulate`` over many
        plan._FEW_ITEMS = few
        try:
            assert repr(_Draft("s", "gemm", [], sequence).work) == repr(total)
            assert repr(Stage("s", "gemm", 1, 1.0, (), sequence).work) == repr(total)
        finally:
            plan._FEW_ITEMS = before


def test_stage_work_is_not_compensated() -> None:
    """1e16 + 1 rounds to 1e16, so left to right the 1 is lost; a compensated sum (``sum`` on
    Python 3.12+, ``math.fsum``) would give 1."""
    chunks = (Chunk((Item(1e16), Item(1.0))), Chunk((Item(-1e16),)))
    before = plan._FEW_ITEMS
    for few in (before, 0):
        plan._FEW_ITEMS = few
        try:
            assert _Draft("s", "gemm", [], chunks).work == 0.0
            assert Stage("s", "gemm", 1, 1.0, (), chunks).work == 0.0
        finally:
            plan._FEW_ITEMS = before
    assert _Draft("s", "gemm", [], ()).work == 0.0
