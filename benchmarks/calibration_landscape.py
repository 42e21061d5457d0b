"""The prefill calibration's objective without rounding (docs/calibration.md, "Optimisers"):
is it smooth enough near the fit for its minimum to be unique to the 4 printed digits?

The objective is the squared error (pp^2) of the seven simulated 128K MoE-layer shares against
``published.PREFILL_128K_MOE_SHARES``, here with the efficiencies simulated unrounded (the
shipped fit rounds them to the socket YAML's 4 digits before simulating). At one point
(default: the converged scipy fit of docs/calibration.md) it prints:

1. line scans along each log-efficiency, coarse (+-3%, 0.2% steps) and fine (+-0.03%, 0.005%
   steps: finer than the 4th digit of every constant): the objective's range, the largest
   change between neighbouring fine points, how often the slope changes sign, and which whole-PCU
   allocations (``mapping.stages.balance_pcus``) change inside the fine scan;
2. the Gauss-Newton Hessian 2 J^T J in log-efficiency (J: the shares' Jacobian, central
   differences at two steps), its eigenvalues and eigenvectors, and for each the distance along
   the eigenvector over which the objective rises by 0.01 pp^2 (the size of the steps in 1.);
3. the full finite-difference Hessian's eigenvalues at the same two steps (they disagree where
   the objective is not smooth);
4. the objective along each Gauss-Newton eigenvector (step 0.02), +-0.1 in log-efficiency.

    python benchmarks/calibration_landscape.py [--at gemm,attention,elementwise,sort,collective]

About 500 simulations of one 128K MoE layer (0.2-0.5 s each on the 2-core machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import numpy as np

from rdusim.analysis.calibration import fit
from rdusim.analysis.calibration.published import PREFILL_128K_MOE_SHARES
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping

ROOT = Path(__file__).resolve().parents[1]
MAPPING = ROOT / "mappings/deepseek-r1/prefill-snapstream.yaml"
#: scipy Nelder-Mead run to convergence on the rounded objective (docs/calibration.md, Optimisers)
CONVERGED = "0.2832,0.3862,0.5504,0.0723,0.9037"
COARSE = np.linspace(-0.03, 0.03, 31)
FINE = np.linspace(-3e-4, 3e-4, 13)
JUMP = 0.01  # pp^2: the order of the steps the fine scans find
EIGEN_SCAN = np.linspace(-0.1, 0.1, 21)


class Landscape:
    """The unrounded objective around one point ``x0`` (log-efficiencies)."""

    def __init__(self, x0: np.ndarray) -> None:
        self.loaded = load_mapping(MAPPING)
        self.published = np.array(list(PREFILL_128K_MOE_SHARES.values()))
        self.x0 = x0

    def efficiency(self, theta: np.ndarray) -> dict[str, float]:
        return {n: min(1.0, math.exp(v)) for n, v in zip(fit.PARAMETERS, theta, strict=True)}

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        shares = fit.layer_shares(self.loaded, self.efficiency(theta))
        return (np.array([shares.get(k, 0.0) for k in PREFILL_128K_MOE_SHARES]) - self.published) * 100

    def objective(self, theta: np.ndarray) -> float:
        r = self.residuals(theta)
        return float(r @ r)

    def allocation(self, theta: np.ndarray) -> dict[tuple[str, str], int]:
        system = self.loaded.system.with_efficiency(**self.efficiency(theta))
        plan = build_plan(dataclasses.replace(self.loaded, system=system))
        return {(k.name, s.name): s.pcus for k in plan.kernels["moe"] for s in k.stages}

    def along(self, i: int, d: float) -> np.ndarray:
        x = self.x0.copy()
        x[i] += d
        return x


def line_scans(land: Landscape) -> None:
    print("| parameter | coarse +-3%: min / max (pp^2) | fine +-0.03%: min / max | largest step between "
          "fine neighbours | slope sign changes (fine) | PCU allocations changed inside the fine scan |")
    print("|---|---|---|---:|---:|---|")
    for i, name in enumerate(fit.PARAMETERS):
        coarse = [land.objective(land.along(i, d)) for d in COARSE]
        fine = [land.objective(land.along(i, d)) for d in FINE]
        steps = np.diff(fine)
        flips = int(np.sum(np.diff(np.sign(steps[steps != 0])) != 0))
        changed: set[str] = set()
        before = land.allocation(land.along(i, FINE[0]))
        for d in FINE[1:]:
            now = land.allocation(land.along(i, d))
            changed |= {f"{k}/{s} {before[(k, s)]}->{n}" for (k, s), n in now.items() if before[(k, s)] != n}
            before = now
        print(f"| {name} | {min(coarse):.4f} / {max(coarse):.4f} | {min(fine):.5f} / {max(fine):.5f} | "
              f"{np.max(np.abs(steps)):.5f} | {flips} | {'; '.join(sorted(changed)) or '-'} |", flush=True)


def gauss_newton(land: Landscape, h: float) -> np.ndarray:
    n = len(fit.PARAMETERS)
    jacobian = np.zeros((len(land.published), n))
    for i in range(n):
        jacobian[:, i] = (land.residuals(land.along(i, h)) - land.residuals(land.along(i, -h))) / (2 * h)
    values, vectors = np.linalg.eigh(2 * jacobian.T @ jacobian)
    print(f"\nGauss-Newton Hessian 2 J^T J (pp^2 per log-unit^2), J by central differences at h = {h}:\n")
    print("| eigenvalue | " + " | ".join(fit.PARAMETERS) + f" | distance for +{JUMP} pp^2 (log) |")
    print("|---:|" + "---:|" * n + "---:|")
    for k in range(n):
        reach = math.sqrt(2 * JUMP / values[k]) if values[k] > 0 else math.inf
        print(f"| {values[k]:.3f} | " + " | ".join(f"{v:+.3f}" for v in vectors[:, k]) + f" | {reach:.4f} |")
    return vectors


def eigenvector_scans(land: Landscape, vectors: np.ndarray) -> None:
    """The objective along each Gauss-Newton eigenvector, +-10% in 1% steps (log-efficiency)."""
    print("\nthe objective along each eigenvector (softest first), steps of 0.01 in log-efficiency:\n")
    print("| eigenvector | " + " | ".join(f"{d:+.2f}" for d in EIGEN_SCAN) + " |")
    print("|---|" + "---:|" * len(EIGEN_SCAN))
    for k in range(vectors.shape[1]):
        values = [land.objective(land.x0 + d * vectors[:, k]) for d in EIGEN_SCAN]
        print(f"| {k + 1} | " + " | ".join(f"{v:.4f}" for v in values) + " |", flush=True)


def finite_difference_hessian(land: Landscape, h: float) -> None:
    n = len(fit.PARAMETERS)
    f0 = land.objective(land.x0)
    hessian = np.zeros((n, n))
    for i in range(n):
        ei = np.eye(n)[i] * h
        hessian[i, i] = (land.objective(land.x0 + ei) - 2 * f0 + land.objective(land.x0 - ei)) / h ** 2
        for j in range(i + 1, n):
            ej = np.eye(n)[j] * h
            x = land.x0
            hessian[i, j] = hessian[j, i] = (land.objective(x + ei + ej) - land.objective(x + ei - ej)
                                             - land.objective(x - ei + ej) + land.objective(x - ei - ej)) / (4 * h * h)
    print(f"\nfull finite-difference Hessian at h = {h}, eigenvalues: "
          + ", ".join(f"{v:.1f}" for v in np.linalg.eigvalsh(hessian)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", default=CONVERGED, help="efficiencies, comma-separated, in the order of fit.PARAMETERS")
    args = parser.parse_args()
    land = Landscape(np.log([float(v) for v in args.at.split(",")]))
    print(f"at {dict(zip(fit.PARAMETERS, (round(float(v), 6) for v in np.exp(land.x0)), strict=True))}: squared error "
          f"{land.objective(land.x0):.5f} pp^2 (efficiencies unrounded)\n")
    line_scans(land)
    for h in (0.02, 0.005):
        vectors = gauss_newton(land, h)
        finite_difference_hessian(land, h)
        if h == 0.02:
            eigenvector_scans(land, vectors)


if __name__ == "__main__":
    main()
