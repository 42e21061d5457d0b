"""The acceptance model: its closed form, its edge cases, and a Monte Carlo draw of the process."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rdusim.model.speculative import draw_accepted, expected_accepted


@pytest.mark.parametrize(("rate", "k", "expected"), [
    (0.0, 9, 1.0), (1.0, 9, 10.0), (1.0, 0, 1.0), (0.5, 0, 1.0),
    (0.5, 1, 1.5), (0.5, 2, 1.75), (0.8, 9, (1 - 0.8 ** 10) / 0.2), (0.9, 4, (1 - 0.9 ** 5) / 0.1),
])
def test_closed_form(rate, k, expected):
    assert expected_accepted(rate, k) == pytest.approx(expected, rel=1e-14)


@given(rate=st.floats(0.0, 0.999), k=st.integers(0, 64))
@settings(max_examples=200, deadline=None)
def test_matches_the_geometric_series(rate, k):
    closed = (1 - rate ** (k + 1)) / (1 - rate)
    got = expected_accepted(rate, k)
    assert got == pytest.approx(closed, rel=1e-9)
    assert 1.0 <= got <= k + 1


@given(rate=st.floats(0.0, 1.0), k=st.integers(0, 32))
@settings(max_examples=100, deadline=None)
def test_more_draft_tokens_or_a_higher_rate_never_yield_fewer(rate, k):
    assert expected_accepted(rate, k + 1) >= expected_accepted(rate, k)
    assert expected_accepted(min(1.0, rate + 0.01), k) >= expected_accepted(rate, k)


@pytest.mark.parametrize(("rate", "k"), [(0.6, 4), (0.8, 9), (0.9, 9), (0.3, 2)])
def test_monte_carlo_mean_agrees_with_the_closed_form(rate, k):
    rng = random.Random(1234)
    n = 200_000
    draws = [draw_accepted(rate, k, rng.random) for _ in range(n)]
    mean = sum(draws) / n
    variance = sum((d - mean) ** 2 for d in draws) / (n - 1)
    # 5 standard errors: fails with probability < 1e-6 if the closed form were the true mean
    assert abs(mean - expected_accepted(rate, k)) < 5 * (variance / n) ** 0.5
    assert min(draws) >= 1 and max(draws) <= k + 1


def test_monte_carlo_distribution_is_truncated_geometric():
    rate, k, n = 0.7, 3, 100_000
    rng = random.Random(7)
    counts = [0] * (k + 2)
    for _ in range(n):
        counts[draw_accepted(rate, k, rng.random)] += 1
    # P(tokens = j) = a^(j-1) (1 - a) for j <= k, a^k for j = k + 1
    for j in range(1, k + 2):
        p = rate ** (j - 1) * (1 - rate) if j <= k else rate ** k
        assert abs(counts[j] / n - p) < 5 * (p * (1 - p) / n) ** 0.5


@pytest.mark.parametrize(("rate", "k"), [(-0.1, 3), (1.1, 3), (0.5, -1)])
def test_out_of_range_inputs_are_refused(rate, k):
    with pytest.raises(ValueError):
        expected_accepted(rate, k)
