"""Every speculative-decoding figure against the acceptance rate (docs/speculative.md, "Sensitivity").

Prints a markdown table: one row per SD figure of ``rdusim fidelity``, one column per rate, the
shipped SD mappings with ``speculative.acceptance.rate`` replaced (nothing else changes):

    python benchmarks/speculative_sensitivity.py [--rates 0.6,0.7,0.777,0.8,0.9]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from rdusim.analysis.calibration.speculative import sensitivity

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.6,0.7,0.777,0.8,0.9")
    args = parser.parse_args()
    rates = tuple(float(r) for r in args.rates.split(","))
    frame = sensitivity(ROOT, rates)
    rate_columns = [c for c in frame.columns if c.startswith("a=")]
    lines = ["| figure | published | " + " | ".join(rate_columns) + " |",
             "|---|---:|" + "---:|" * len(rate_columns)]
    for row in frame.itertuples(index=False):
        cells = [f"{v:.3g}" if isinstance(v, float) and math.isfinite(v) else str(v) for v in row[2:]]
        lines.append(f"| {row[0]} | {row[1]} | " + " | ".join(cells) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
