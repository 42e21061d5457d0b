"""The prefill efficiency fit under two Nelder-Mead implementations (docs/calibration.md,
"Optimisers"): the hand-written one ``rdusim calibrate`` ships (``fit.nelder_mead``, inside
contraction only) and scipy's, each from the same 18-point grid start and the same initial
simplex, once with the shipped settings (at most 220 calls, stop when the simplex's values span
< 1e-4 pp^2) and once to convergence (restarted from the best point with a fresh simplex until
a restart gains < 0.001 pp^2, five restarts). Prints one markdown row per run:

    python benchmarks/calibration_optimisers.py [--cache FILE.json]
    python benchmarks/calibration_optimisers.py --unrounded

The objective depends only on the efficiencies rounded to 4 digits (what the socket YAML
holds), so it is memoised on them; ``--cache`` keeps the simulated values between runs (each
new point simulates a 128K MoE layer, about 0.2-0.5 s). A full run simulates about 900 points.

``--unrounded`` runs three scipy optimisers on the objective with the efficiencies simulated
unrounded (is the minimum then unique to the printed 4 digits?), each from the grid's best point
and restarted from its best point while a restart gains more than 1e-6 pp^2 (at most 8
restarts): Nelder-Mead (initial simplex edge 0.2, ``fatol`` 1e-9, ``xatol`` 1e-7), Powell
(bounded at efficiency 1, ``xtol`` 1e-7, ``ftol`` 1e-10) and ``least_squares`` on the seven
residuals (trust region, bounded, ``diff_step`` 1e-3); then three fresh Nelder-Mead simplexes
(at most 4,000 calls each) from Powell's best point. About 10,300 points simulated (40 min on
the 2-core machine at load 1-4, 2026-11-25; Nelder-Mead alone 16 min). Where each run ends
depends on the last bits of the rates: the same runs with ``math.exp`` for ``numpy.exp`` end
elsewhere (docs/calibration.md, "Without rounding").
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import optimize

from rdusim.analysis.calibration import fit
from rdusim.analysis.calibration.published import PREFILL_128K_MOE_SHARES
from rdusim.mapping.bundle import load_mapping

ROOT = Path(__file__).resolve().parents[1]
MAPPING = ROOT / "mappings/deepseek-r1/prefill-snapstream.yaml"


def hand_written(f: Callable[[np.ndarray], float], x0: np.ndarray, *, step: float, max_evaluations: int,
                 tolerance: float) -> tuple[np.ndarray, float, int]:
    """``fit.nelder_mead`` (the shipped fit's simplex), counting its calls."""
    calls = []

    def counted(x: np.ndarray) -> float:
        calls.append(1)
        return f(x)

    x = fit.nelder_mead(counted, x0, step=step, max_evaluations=max_evaluations, tolerance=tolerance)
    return x, f(x), len(calls)


def scipy_run(f: Callable[[np.ndarray], float], x0: np.ndarray, *, step: float, max_evaluations: int,
              fatol: float, xatol: float) -> tuple[np.ndarray, float, int]:
    simplex = np.vstack([x0, x0 + step * np.eye(len(x0))])
    found = optimize.minimize(f, x0, method="Nelder-Mead", options={
        "initial_simplex": simplex, "maxfev": max_evaluations, "fatol": fatol, "xatol": xatol, "adaptive": False})
    return found.x, float(found.fun), int(found.nfev)


def restarted(run: Callable[[np.ndarray], tuple[np.ndarray, float, int]], x0: np.ndarray, *,
              gain: float = 0.0, max_restarts: int = 5) -> tuple[np.ndarray, float, int, list[float]]:
    """Restart ``run`` from its best point until a restart lowers the minimum by no more than
    ``gain``, at most ``max_restarts`` times (the fifth gains < 0.001 pp^2 in every run here)."""
    x, fx, calls = run(x0)
    history = [fx]
    for _ in range(max_restarts):
        y, fy, n = run(x)
        calls += n
        history.append(fy)
        improved = fy < fx - gain
        if fy < fx:
            x, fx = y, fy
        if not improved:
            break
    return x, fx, calls, history


def unrounded() -> None:
    """scipy's Nelder-Mead, Powell and least_squares on the unrounded objective (module docstring)."""
    loaded = load_mapping(MAPPING)
    published = np.array(list(PREFILL_128K_MOE_SHARES.values()))
    cache: dict[tuple[float, ...], np.ndarray] = {}

    def residuals(theta: np.ndarray) -> np.ndarray:
        key = tuple(np.asarray(theta, float))
        if key not in cache:
            efficiency = {n: min(1.0, float(np.exp(v))) for n, v in zip(fit.PARAMETERS, key, strict=True)}
            shares = fit.layer_shares(loaded, efficiency)
            cache[key] = (np.array([shares.get(k, 0.0) for k in PREFILL_128K_MOE_SHARES]) - published) * 100
        return cache[key]

    def objective(theta: np.ndarray) -> float:
        r = residuals(theta)
        return float(r @ r)

    grid = [np.log(np.array([g, a, 0.5, s, 0.9]))
            for g in (0.3, 0.45, 0.6) for a in (0.35, 0.45, 0.6) for s in (0.1, 0.3)]
    x0 = min(grid, key=objective)
    upper = [(None, 0.0)] * len(x0)

    def nelder_mead(x: np.ndarray) -> tuple[np.ndarray, float, int]:
        simplex = np.vstack([x, x + fit.SIMPLEX_STEP * np.eye(len(x))])
        found = optimize.minimize(objective, x, method="Nelder-Mead", options={
            "initial_simplex": simplex, "maxfev": 20000, "fatol": 1e-9, "xatol": 1e-7})
        return found.x, float(found.fun), int(found.nfev)

    def powell(x: np.ndarray) -> tuple[np.ndarray, float, int]:
        found = optimize.minimize(objective, x, method="Powell", bounds=upper,
                                  options={"xtol": 1e-7, "ftol": 1e-10, "maxfev": 20000})
        return found.x, float(found.fun), int(found.nfev)

    def least_squares(x: np.ndarray) -> tuple[np.ndarray, float, int]:
        found = optimize.least_squares(residuals, x, bounds=(-np.inf, 0.0), diff_step=1e-3, xtol=1e-10,
                                       ftol=1e-12, gtol=1e-12, max_nfev=2000)
        return found.x, 2 * float(found.cost), int(found.nfev) + int(found.njev) * len(x)  # + forward differences

    print("| optimiser (unrounded objective) | squared error (pp^2) | calls | restarts: minimum after each | "
          + " | ".join(fit.PARAMETERS) + " | the same, to 4 digits |")
    print("|---|---:|---:|---|" + "---:|" * len(fit.PARAMETERS) + "---|")
    found = {}
    for name, run in (("scipy Nelder-Mead", nelder_mead), ("scipy Powell", powell),
                      ("scipy least_squares", least_squares), ("scipy Nelder-Mead from Powell's point", None)):
        started = time.perf_counter()
        if run is None:  # three fresh simplexes (at most 4,000 calls each) from Powell's best point
            x, fx, calls, history = found["scipy Powell"], objective(found["scipy Powell"]), 0, []
            for _ in range(3):
                simplex = np.vstack([x, x + fit.SIMPLEX_STEP * np.eye(len(x))])
                step = optimize.minimize(objective, x, method="Nelder-Mead", options={
                    "initial_simplex": simplex, "maxfev": 4000, "fatol": 1e-9, "xatol": 1e-7})
                calls += int(step.nfev)
                history.append(float(step.fun))
                if step.fun < fx:
                    x, fx = step.x, float(step.fun)
        else:
            x, fx, calls, history = restarted(run, x0, gain=1e-6, max_restarts=8)
        found[name] = x
        efficiency = np.minimum(1.0, np.exp(x))
        print(f"| {name} | {fx:.5f} | {calls} | " + ", ".join(f"{h:.5f}" for h in history) + " | "
              + " | ".join(f"{v:.6f}" for v in efficiency) + " | " + ", ".join(f"{v:.4f}" for v in efficiency)
              + f" |  <!-- {time.perf_counter() - started:.0f} s, {len(cache)} points simulated so far -->", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="JSON file of simulated points, read and extended")
    parser.add_argument("--unrounded", action="store_true", help="scipy optimisers on the unrounded objective")
    args = parser.parse_args()
    if args.unrounded:
        unrounded()
        return
    cache: dict[tuple[float, ...], float] = {}
    if args.cache and args.cache.exists():
        cache = {tuple(json.loads(k)): v for k, v in json.loads(args.cache.read_text()).items()}
    loaded = load_mapping(MAPPING)

    def objective(theta: np.ndarray) -> float:
        efficiency = fit._efficiency(np.asarray(theta))  # noqa: SLF001 (the fit's own parametrisation)
        key = tuple(efficiency.values())
        if key not in cache:
            shares = fit.layer_shares(loaded, efficiency)
            cache[key] = sum(((shares.get(k, 0.0) - v) * 100) ** 2 for k, v in PREFILL_128K_MOE_SHARES.items())
        return cache[key]

    grid = [np.log(np.array([g, a, 0.5, s, 0.9]))
            for g in (0.3, 0.45, 0.6) for a in (0.35, 0.45, 0.6) for s in (0.1, 0.3)]
    x0 = min(grid, key=objective)
    step = fit.SIMPLEX_STEP
    runs = {
        "hand-written, 220 calls, span < 1e-4 (shipped)":
            lambda: hand_written(objective, x0, step=step, max_evaluations=220, tolerance=1e-4) + ([],),
        "scipy, 220 calls, fatol 1e-4":
            lambda: scipy_run(objective, x0, step=step, max_evaluations=220, fatol=1e-4, xatol=np.inf) + ([],),
        "hand-written, converged (span < 1e-12, 5 restarts)":
            lambda: restarted(lambda x: hand_written(objective, x, step=step, max_evaluations=5000,
                                                     tolerance=1e-12), x0),
        "scipy, converged (fatol 0, xatol 1e-6, 5 restarts)":
            lambda: restarted(lambda x: scipy_run(objective, x, step=step, max_evaluations=5000, fatol=0.0,
                                                  xatol=1e-6), x0),
        "scipy, fatol 1e-4, restarts while one gains > 0.001 pp^2":
            lambda: restarted(lambda x: scipy_run(objective, x, step=step, max_evaluations=5000, fatol=1e-4,
                                                  xatol=np.inf), x0, gain=1e-3),
    }
    print("| run | squared error (pp^2) | calls | restarts: minimum after each | "
          + " | ".join(fit.PARAMETERS) + " |")
    print("|---|---:|---:|---|" + "---:|" * len(fit.PARAMETERS))
    for name, run in runs.items():
        started = time.perf_counter()
        x, fx, calls, history = run()
        efficiency = fit._efficiency(x)  # noqa: SLF001
        trail = ", ".join(f"{h:.4f}" for h in history) or "-"
        print(f"| {name} | {fx:.4f} | {calls} | {trail} | " + " | ".join(str(v) for v in efficiency.values())
              + f" |  <!-- {time.perf_counter() - started:.0f} s, {len(cache)} points simulated so far -->",
              flush=True)
        if args.cache:
            args.cache.write_text(json.dumps({json.dumps(list(k)): v for k, v in cache.items()}))


if __name__ == "__main__":
    main()
