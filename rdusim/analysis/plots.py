"""Figures of simulation results (the KV-policy numerics have theirs in ``analysis.numerics``).

Owns: ``plot_breakdown``, ``plot_shares``, ``plot_sweep``, ``plot_pareto``, ``plot_speed_throughput``,
``kernel_color`` and
the PNG helpers ``figure_png``, ``sweep_figure_png``, ``pareto_figure_png``. Imports:
matplotlib, pandas, numpy.

Every function takes tidy frames (``SimulationResult.kernels`` rows), draws on ``ax`` (or on
a new ``Figure`` when ``ax`` is None) and returns the Axes. No simulation, no file writes, no
pyplot and no change to matplotlib's global state: callers save or show the figure.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Patch

#: fixed colours for the kernels of the shipped mappings, so a kernel looks the same in
#: every figure; other kernels take the remaining colours of the palette in order of appearance
_PALETTE = [to_hex(c) for c in (
    "#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#86bcb6", "#d37295")]
KERNEL_COLORS: dict[str, str] = {
    "QKV": _PALETTE[0], "MHA": _PALETTE[3], "Output Proj": _PALETTE[2], "Output Proj + FFN": _PALETTE[8],
    "Router": _PALETTE[5], "MoE FFN": _PALETTE[4], "SnapKV Compression": _PALETTE[1],
    "Streaming Ring Buffer": _PALETTE[6],
}


def kernel_color(kernel: str, kernels: list[str] | None = None) -> str:
    """The colour of ``kernel``: fixed for known kernels, else by its index in ``kernels``."""
    if kernel in KERNEL_COLORS:
        return KERNEL_COLORS[kernel]
    spare = [c for c in _PALETTE if c not in KERNEL_COLORS.values()] or _PALETTE
    index = (kernels or [kernel]).index(kernel) if kernels and kernel in kernels else 0
    return spare[index % len(spare)]


def _new_axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    return Figure(figsize=size, layout="constrained").add_subplot()


def _per_kernel_ms(frame: pd.DataFrame, layer_type: str | None) -> pd.Series:
    rows = frame if layer_type is None else frame[frame["layer_type"] == layer_type]
    return rows.groupby("kernel", sort=False)["latency_s"].sum() * 1e3


def plot_breakdown(frames: Mapping[str, pd.DataFrame], ax: Axes | None = None,
                   layer_type: str | None = "moe") -> Axes:
    """Stacked horizontal bars: one bar per label, one segment per kernel (latency, ms).

    ``frames`` maps a label (e.g. 'SnapStream 32K') to ``SimulationResult.kernels`` rows.
    ``layer_type`` keeps one layer type (all its layers together); None sums every layer.
    The first label is drawn at the top.
    """
    ax = _new_axes(ax, (9.0, 0.55 * len(frames) + 1.8))
    series = {label: _per_kernel_ms(frame, layer_type) for label, frame in frames.items()}
    kernels = list(dict.fromkeys(k for s in series.values() for k in s.index))
    labels = list(series)
    y = np.arange(len(labels))[::-1]
    left = np.zeros(len(labels))
    for kernel in kernels:
        widths = np.array([series[label].get(kernel, 0.0) for label in labels])
        ax.barh(y, widths, left=left, height=0.7, label=kernel, color=kernel_color(kernel, kernels),
                edgecolor="white", linewidth=0.5)
        left += widths
    for yi, total in zip(y, left, strict=True):
        ax.text(total, yi, f" {total:,.0f}", va="center", fontsize=8)
    ax.set_yticks(y, labels)
    ax.set_xlim(0, left.max() * 1.12 if len(left) else 1)
    scope = "all layers" if layer_type is None else f"{layer_type} layers"
    ax.set_xlabel(f"prefill latency, {scope} (ms)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(labels) < 4 else -0.12),
              ncols=min(4, len(kernels)), fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    return ax


def plot_shares(frame: pd.DataFrame, published: Mapping[str, float] | None = None,
                ax: Axes | None = None, layer_type: str | None = "moe") -> Axes:
    """Grouped bars per kernel: simulated share of the layer's time, and published share.

    ``frame`` is one run's ``SimulationResult.kernels``; shares are recomputed within
    ``layer_type`` (None: all layers). Kernels only in ``published`` show simulated 0.
    """
    ax = _new_axes(ax, (9.0, 4.0))
    simulated = _per_kernel_ms(frame, layer_type)
    simulated = simulated / simulated.sum()
    kernels = list(dict.fromkeys([*simulated.index, *(published or {})]))
    x = np.arange(len(kernels))
    width = 0.4 if published else 0.7
    sim_values = [100 * simulated.get(k, 0.0) for k in kernels]
    ax.bar(x - (width / 2 if published else 0), sim_values, width, label="simulated",
           color=[kernel_color(k, kernels) for k in kernels])
    if published:
        ax.bar(x + width / 2, [100 * published.get(k, 0.0) for k in kernels], width, label="published",
               color="white", edgecolor=[kernel_color(k, kernels) for k in kernels], hatch="//")
    for xi, value in zip(x, sim_values, strict=True):
        ax.text(xi - (width / 2 if published else 0), value, f"{value:.1f}", ha="center", va="bottom",
                fontsize=7)
    ax.set_xticks(x, kernels, rotation=20, ha="right")
    ax.set_ylabel("share of layer time (%)")
    handles = [Patch(facecolor="0.45", label="simulated")]  # neutral: bar colours are per kernel
    if published:
        handles.append(Patch(facecolor="white", edgecolor="0.45", hatch="//", label="published"))
    ax.legend(handles=handles, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    return ax


def plot_sweep(frame: pd.DataFrame, axes: np.ndarray | None = None) -> np.ndarray:
    """Throughput (top row) and time per output token (bottom row) against batch; one
    column per prompt length, one line per policy (and draft length ``k``, when the sweep has
    several: ``sweep --draft-k``).

    Each line ends at its largest batch that fits; an ``x`` on the x-axis marks the first
    batch that does not (the table says why). Policies that keep the same number of
    tokens coincide: their lines overlap.
    """
    seq_lens = sorted(frame["seq_len"].unique())
    ks = frame["draft_k"].dropna().unique() if "draft_k" in frame else []
    if len(ks) > 1:  # one line per (policy, k)
        frame = frame.assign(policy=[f"{p} k={int(k)}" for p, k in zip(frame["policy"], frame["draft_k"], strict=True)])
    if axes is None:
        figure = Figure(figsize=(4.2 * len(seq_lens), 7), layout="constrained")
        axes = np.asarray(figure.subplots(2, len(seq_lens), squeeze=False, sharex="col"))
    colors = {p: to_hex(f"C{i}") for i, p in enumerate(dict.fromkeys(frame["policy"]))}
    widths = {p: 3.5 - 0.35 * i for i, p in enumerate(colors)}  # thinner on top: overlaps stay visible
    for column, seq_len in enumerate(seq_lens):
        tput_ax, tpot_ax = axes[0, column], axes[1, column]
        for policy, group in frame[frame["seq_len"] == seq_len].groupby("policy", sort=False):
            ok, limit = group[group["fits"]], group[~group["fits"]]
            style = {"color": colors[policy], "linewidth": widths[policy], "marker": "o", "markersize": 3}
            tput_ax.plot(ok["batch"], ok["tokens_per_s"], label=policy, **style)
            tpot_ax.plot(ok["batch"], ok["tpot_s"] * 1e3, label=policy, **style)
            for ax in (tput_ax, tpot_ax):
                ax.plot(limit["batch"], [0] * len(limit), "x", color=colors[policy], markersize=8, clip_on=False)
        tput_ax.set_title(f"prompt {seq_len // 1024}K tokens")
        tpot_ax.set_xlabel("batch (x: first batch that does not fit)")
        for ax in (tput_ax, tpot_ax):
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("tokens / s (node)")
    axes[1, 0].set_ylabel("time per output token (ms)")
    axes[0, 0].legend(fontsize=8)
    return axes


def figure_png(figure: Figure) -> bytes:
    """Render a figure to PNG bytes (the caller decides where they go)."""
    import io  # noqa: PLC0415

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


def sweep_figure_png(frame: pd.DataFrame) -> bytes:
    axes = plot_sweep(frame)
    return figure_png(axes[0, 0].figure)


def plot_pareto(estimates: pd.DataFrame, front: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Throughput against latency (TPOT at decode, TTFT at prefill); colour is HBM per socket;
    the frontier is joined."""
    ax = _new_axes(ax, (7.0, 4.5))
    feasible = estimates[estimates["fits"]]
    points = ax.scatter(feasible["latency_s"] * 1e3, feasible["tokens_per_s"], c=feasible["hbm_used_bytes"] / 2**30,
                        s=8, cmap="viridis", alpha=0.5, label="candidates (estimator)")
    ax.plot(front["latency_s"] * 1e3, front["tokens_per_s"], "o-", color="black", ms=4, lw=1, label="Pareto frontier")
    seed = feasible[feasible["is_seed"]]
    if not seed.empty:
        ax.scatter(seed["latency_s"] * 1e3, seed["tokens_per_s"], marker="*", s=160, color="red", label="shipped mapping")
    ax.figure.colorbar(points, ax=ax, label="HBM per socket (GiB)")
    decode = bool(feasible["ttft_s"].isna().all()) if "ttft_s" in feasible else True
    ax.set_xlabel("time per output token (ms)" if decode else "time to first token (ms)")
    ax.set_ylabel("throughput (tokens/s)")
    ax.legend(loc="best", fontsize=8)
    return ax


def pareto_figure_png(estimates: pd.DataFrame, front: pd.DataFrame) -> bytes:
    ax = plot_pareto(estimates, front)
    return figure_png(ax.figure)


def plot_speed_throughput(frame: pd.DataFrame, published: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Tokens/s per user (x) against aggregate tokens/s (y), log-log: one line per
    configuration through its batches (labelled at the ends), the published figures on the
    same axes: a point where the aggregate is stated, a dashed vertical line where only the
    per-user speed is (``rdusim.analysis.frontier``). Colours follow the model."""
    ax = _new_axes(ax, (9.0, 6.0))
    models = list(dict.fromkeys([*frame["model"], *published["model"]]))
    colors = {m: _PALETTE[i % len(_PALETTE)] for i, m in enumerate(models)}
    markers = ["o", "s", "^", "D", "v", "P"]
    for i, (label, group) in enumerate(frame.groupby("configuration", sort=False)):
        group = group.sort_values("batch")
        ax.plot(group["tokens_per_s_per_user"], group["tokens_per_s"], marker=markers[i % len(markers)],
                color=colors[group["model"].iloc[0]], label=label, alpha=0.85)
        for end in (group.iloc[0], group.iloc[-1]):
            ax.annotate(f"b{int(end['batch'])}", (end["tokens_per_s_per_user"], end["tokens_per_s"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7)
    for row in published.itertuples():
        if np.isnan(row.tokens_per_s):
            ax.axvline(row.tokens_per_s_per_user, color=colors[row.model], linestyle="--", linewidth=1.0,
                       label=f"{row.model}, {row.label}")
        else:
            ax.scatter([row.tokens_per_s_per_user], [row.tokens_per_s], marker="*", s=220, color=colors[row.model],
                       edgecolor="black", zorder=5, label=f"{row.model}, {row.label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("output tokens/s, aggregate")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return ax
