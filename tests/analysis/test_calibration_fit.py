"""The prefill calibration's simplex (``rdusim.analysis.calibration.fit.nelder_mead``) against
scipy's Nelder-Mead on closed-form functions (same minimum to tolerance), and the shipped fit
reproduced from scratch (slow: each objective call simulates a 128K MoE layer, about 0.5 s)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from rdusim.analysis.calibration.fit import MAX_EVALUATIONS, fit_efficiencies, nelder_mead
from rdusim.analysis.calibration.published import PREFILL_128K_MOE_SHARES
from rdusim.config.loader import load_spec
from rdusim.config.schema import SocketSpec
from rdusim.mapping.bundle import load_mapping
from tests.hardening.conftest import ROOT

CENTRE = np.array([0.3, -1.2, 2.0, 0.05, -0.7])
WEIGHTS = np.array([1.0, 4.0, 0.5, 10.0, 2.0])


def quadratic(x: np.ndarray) -> float:
    return float(np.sum(WEIGHTS * (x - CENTRE) ** 2)) + 3.0


def scipy_from_the_same_simplex(f, x0: np.ndarray, step: float) -> optimize.OptimizeResult:
    simplex = np.vstack([x0, x0 + step * np.eye(len(x0))])
    return optimize.minimize(f, x0, method="Nelder-Mead", options={
        "initial_simplex": simplex, "maxfev": 20000, "fatol": 1e-14, "xatol": 1e-9})


def test_a_quadratic_ends_at_its_minimum_as_with_scipy():
    ours = nelder_mead(quadratic, np.zeros(5), step=0.2, max_evaluations=20000, tolerance=1e-14)
    theirs = scipy_from_the_same_simplex(quadratic, np.zeros(5), 0.2)
    np.testing.assert_allclose(ours, CENTRE, atol=1e-5)
    np.testing.assert_allclose(theirs.x, CENTRE, atol=1e-5)
    assert quadratic(ours) == pytest.approx(3.0, abs=1e-9)


def test_rosenbrock_ends_at_its_minimum_as_with_scipy():
    x0 = np.array([-1.2, 1.0, 0.5])
    ours = nelder_mead(optimize.rosen, x0, step=0.2, max_evaluations=20000, tolerance=1e-14)
    theirs = scipy_from_the_same_simplex(optimize.rosen, x0, 0.2)
    np.testing.assert_allclose(ours, np.ones(3), atol=1e-4)
    np.testing.assert_allclose(theirs.x, np.ones(3), atol=1e-4)


def test_the_budget_and_the_tolerance_stop_it():
    calls = []

    def f(x):
        calls.append(1)
        return optimize.rosen(x)

    nelder_mead(f, np.zeros(4), step=0.2, max_evaluations=50, tolerance=0.0)
    assert 50 <= len(calls) <= 49 + 2 + 4  # checked before each step, which costs at most 2 + n calls
    calls.clear()
    nelder_mead(f, np.zeros(4), step=0.2, max_evaluations=20000, tolerance=1.0)
    assert len(calls) < 200  # the values span less than 1 long before the minimum


@pytest.mark.slow
def test_the_shipped_efficiencies_are_the_fit_reproduced():
    """``rdusim calibrate --phase prefill`` from scratch gives the constants in hw_configs/sn40l.yaml
    (206 calls, 192 points simulated: about 2 minutes on the 2-core machine)."""
    loaded = load_mapping(ROOT / "mappings/deepseek-r1/prefill-snapstream.yaml")
    result = fit_efficiencies(loaded, PREFILL_128K_MOE_SHARES, max_evaluations=MAX_EVALUATIONS)
    shipped = load_spec(ROOT / "hw_configs/sn40l.yaml", SocketSpec).efficiency
    assert result.efficiency == {k: getattr(shipped, k) for k in result.efficiency}
    assert (result.evaluations, result.simulations) == (206, 192)
    assert result.squared_error_pp2 == pytest.approx(4.6135, abs=1e-4)
