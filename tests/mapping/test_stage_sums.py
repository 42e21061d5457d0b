"""A stage's work by ``np.cumsum`` over each chunk object's works against adding the floats one
after another (hypothesis: chunks repeated as the same objects, works of any size and sign)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.mapping import stages
from rdusim.mapping.plan import Chunk, Item
from rdusim.mapping.stages import _Draft

WORKS = st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False) | \
    st.floats(min_value=0.0, max_value=1e-3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(WORKS, min_size=1, max_size=6), min_size=1, max_size=5),
       st.lists(st.integers(0, 4), min_size=1, max_size=30))
def test_stage_work_adds_item_after_item(chunks: list[list[float]], order: list[int]) -> None:
    made = [Chunk(tuple(Item(w) for w in works)) for works in chunks]
    sequence = [made[i % len(made)] for i in order]   # chunk objects repeat, in runs or not
    total = 0.0
    for chunk in sequence:
        for item in chunk.items:
            total += item.work
    before = stages._FEW_ITEMS
    for few in (before, 0):  # ``sum`` over few items, ``np.cumsum`` over many
        stages._FEW_ITEMS = few
        try:
            work = _Draft("s", "gemm", [], tuple(sequence)).work
        finally:
            stages._FEW_ITEMS = before
        assert repr(work) == repr(total)
        assert repr(work) == repr(sum(i.work for c in sequence for i in c.items))  # the plan builder's before
