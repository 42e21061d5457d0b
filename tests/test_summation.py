"""``add_in_order`` adds left to right on every Python: as ``np.add.accumulate`` (one addition
after another) over any floats, not compensated where the order shows, integers kept exact."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rdusim.summation import add_in_order

FLOATS = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(st.lists(FLOATS, max_size=40))
def test_adds_one_after_another(values: list[float]) -> None:
    expected = float(np.add.accumulate([0.0, *values])[-1])
    assert repr(float(add_in_order(values))) == repr(expected)
    assert repr(float(add_in_order(iter(values)))) == repr(expected)   # any iterable


def test_is_not_compensated() -> None:
    """1e16 + 1 rounds to 1e16, so left to right the 1 is lost (``sum`` on Python 3.12+ and
    ``math.fsum`` give 1); 0.1 + 0.2 + 0.3 left to right is 0.6000000000000001."""
    assert add_in_order([1e16, 1.0, -1e16]) == 0.0
    assert repr(add_in_order([0.1, 0.2, 0.3])) == "0.6000000000000001"


def test_integers_stay_integers() -> None:
    assert add_in_order([]) == 0 and isinstance(add_in_order([]), int)
    big = [2**70, 1, -(2**70)]
    assert add_in_order(big) == 1 and isinstance(add_in_order(big), int)
