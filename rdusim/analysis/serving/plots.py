"""Figures of serving runs: latency CDFs and goodput against offered rate.

Owns: ``plot_latency_cdf``, ``plot_goodput_vs_rate``. Imports: metrics (``cdf_points``), matplotlib,
numpy, pandas.
Kept apart from ``rdusim.analysis.plots`` (the kernel-level figures) with the same rules:
each function draws on ``ax`` (or on a new ``Figure``), returns the Axes, never writes a
file and never touches matplotlib's global state.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rdusim.analysis.serving.metrics import CDF_POINTS, cdf_points

_LABELS = {"ttft_s": ("time to first token (s)", 1.0, "slo_ttft_s"),
           "tpot_s": ("time per output token (ms)", 1e3, "slo_tpot_s")}


def _new_axes(ax: Axes | None, size: tuple[float, float] = (5.0, 3.5)) -> Axes:
    if ax is not None:
        return ax
    return Figure(figsize=size, layout="constrained").add_subplot()


def plot_latency_cdf(curves: Mapping[str, pd.DataFrame | tuple[np.ndarray, np.ndarray]], metric: str = "ttft_s",
                     ax: Axes | None = None, slo_s: float | None = None) -> Axes:
    """Empirical CDF of ``metric`` (``ttft_s`` or ``tpot_s``) of finished requests, one line per
    label: a ``ServingResult.requests`` frame, or its ``latency[metric]`` points; a dashed line marks
    the SLO if given. Drawn through the exact quantiles at ``CDF_POINTS`` evenly spaced ranks (every
    request when there are fewer), so a million requests draw a line of a thousand steps."""
    ax = _new_axes(ax)
    label, scale, _ = _LABELS[metric]
    for name, curve in curves.items():
        if isinstance(curve, pd.DataFrame):
            curve = cdf_points(curve.loc[curve["status"] == "done", metric].to_numpy(), CDF_POINTS)
        values, fraction = curve
        if len(values):
            ax.step(values * scale, fraction, where="post", label=name)
    if slo_s is not None:
        ax.axvline(slo_s * scale, color="0.3", linestyle="--", linewidth=1, label="SLO")
    ax.set_xlabel(label)
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def plot_goodput_vs_rate(frame: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Goodput (requests/s within both SLOs) against offered rate, one line per deployment
    (``serve_sweep`` rows); the diagonal is every request on time."""
    ax = _new_axes(ax)
    for name, group in frame.groupby("deployment", sort=False):
        group = group.sort_values("rate")
        ax.plot(group["rate"], group["request_goodput"], marker="o", label=name)
    top = float(frame["rate"].max()) if len(frame) else 1.0
    ax.plot([0, top], [0, top], color="0.6", linestyle=":", linewidth=1, label="offered rate")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("goodput (requests/s within SLO)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax
