"""Tables and plots of the real-model checks: passkey retrieval and divergence from full.

Owns: ``passkey_table``, ``divergence_tables``, ``plot_passkey``, ``plot_divergence``,
``plot_recall``. Imports: pandas, matplotlib, numpy (no torch: it takes the plain records of
``rdusim.kernels.lm``). No file writes: the CLI does those.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

PASSKEY_KEYS = ["policy", "context", "depth"]


def passkey_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (policy, context, depth) from ``run_passkey`` records.

    Columns: policy, context, depth, trials, correct, accuracy, cache_slots (max over trials),
    prompt_tokens (mean), compression_ratio (cache_slots / prompt_tokens), key_held (mean).
    Policies keep the order they first appear in.
    """
    frame = pd.DataFrame.from_records(records)
    order = list(dict.fromkeys(frame["policy"]))
    table = (
        frame.groupby(PASSKEY_KEYS, sort=False)
        .agg(
            trials=("correct", "size"),
            correct=("correct", "sum"),
            cache_slots=("cache_slots", "max"),
            prompt_tokens=("prompt_tokens", "mean"),
            key_held=("key_held", "mean"),
        )
        .reset_index()
    )
    table["correct"] = table["correct"].astype(int)
    table["accuracy"] = table["correct"] / table["trials"]
    table["compression_ratio"] = table["cache_slots"] / table["prompt_tokens"]
    table["policy"] = pd.Categorical(table["policy"], categories=order, ordered=True)
    table = table.sort_values(PASSKEY_KEYS, ignore_index=True)
    table["policy"] = table["policy"].astype(str)
    columns = [*PASSKEY_KEYS, "trials", "correct", "accuracy", "cache_slots", "prompt_tokens",
               "compression_ratio", "key_held"]  # fmt: skip
    return table[columns]


def divergence_tables(
    steps: Sequence[Mapping[str, Any]], recall: Mapping[str, np.ndarray]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-step table and the per-(policy, layer, head) recall table of ``run_divergence``.

    The recall table holds the mean, minimum and maximum over the steps.
    """
    step_table = pd.DataFrame.from_records(steps)
    rows = []
    for policy, values in recall.items():  # values: (steps, layers, Hq)
        for layer in range(values.shape[1]):
            for head in range(values.shape[2]):
                series = values[:, layer, head]
                rows.append((policy, layer, head, series.mean(), series.min(), series.max()))
    columns = ["policy", "layer", "head", "recall", "recall_min", "recall_max"]
    return step_table, pd.DataFrame(rows, columns=columns)


def divergence_summary(step_table: pd.DataFrame) -> pd.DataFrame:
    """Per policy: mean KL, top-1 agreement, and perplexity of the policy and of the full cache."""
    summary = step_table.groupby("policy", sort=False).agg(
        steps=("step", "size"),
        kl_mean=("kl", "mean"),
        kl_max=("kl", "max"),
        top1_agreement=("top1_agree", "mean"),
        nll=("nll", "mean"),
        nll_full=("nll_full", "mean"),
    )
    summary["perplexity"] = np.exp(summary.pop("nll"))
    summary["perplexity_full"] = np.exp(summary.pop("nll_full"))
    return summary.reset_index()


def plot_passkey(table: pd.DataFrame, context: int, ax: Axes | None = None) -> Axes:
    """Heat map of accuracy, policy x depth, at one context length, annotated in percent."""
    ax = _axes(ax)
    cell = table[table["context"] == context]
    grid = cell.pivot(index="policy", columns="depth", values="accuracy")
    grid = grid.reindex(list(dict.fromkeys(cell["policy"])))
    image = ax.imshow(grid.to_numpy(), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [f"{d:g}" for d in grid.columns])
    ax.set_yticks(range(grid.shape[0]), grid.index)
    for (row, col), value in np.ndenumerate(grid.to_numpy()):
        color = "black" if value > 0.6 else "white"
        ax.text(col, row, f"{100 * value:.0f}", ha="center", va="center", color=color)
    ax.set_xlabel("key depth (fraction of the filler before it)")
    ax.set_title(f"passkey accuracy (%), {context} tokens")
    ax.figure.colorbar(image, ax=ax, label="accuracy")
    return ax


def plot_divergence(step_table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """KL(full || policy) of the next-token distribution per decode step, one line per policy."""
    ax = _axes(ax)
    for policy, rows in step_table.groupby("policy", sort=False):
        if (rows["kl"] > 0).any():
            ax.plot(rows["step"], rows["kl"], label=str(policy))
    ax.set_yscale("log")
    ax.set_xlabel("decode step")
    ax.set_ylabel("KL(full || policy) [nats]")
    ax.legend()
    return ax


def plot_recall(recall_table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Attention recall per layer (mean over heads and steps), one line per policy."""
    ax = _axes(ax)
    per_layer = recall_table.groupby(["policy", "layer"], sort=False)["recall"].mean()
    for policy, series in per_layer.groupby(level="policy", sort=False):
        ax.plot(series.index.get_level_values("layer"), series.to_numpy(), label=str(policy))
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("layer")
    ax.set_ylabel("attention mass recall")
    ax.legend()
    return ax


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    figure = Figure(figsize=(7, 4))
    return figure.add_subplot()
