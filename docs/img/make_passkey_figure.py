"""Redraw docs/figures/passkey-all.png from the measured CSVs in docs/figures/ (no model run).

    python docs/img/make_passkey_figure.py
"""

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from rdusim.analysis.numerics import plot_passkey
from rdusim.analysis.plots import figure_png

FIGURES = Path(__file__).resolve().parents[1] / "figures"


def main() -> None:
    table = pd.concat([pd.read_csv(FIGURES / name) for name in ("passkey-2k.csv", "passkey-other.csv")])
    contexts = sorted(table["context"].unique())
    figure = Figure(figsize=(5.2 * len(contexts), 3.6), layout="constrained")
    for ax, context in zip(figure.subplots(1, len(contexts)), contexts, strict=True):
        plot_passkey(table, context, ax=ax)
    (FIGURES / "passkey-all.png").write_bytes(figure_png(figure))


if __name__ == "__main__":
    main()
