"""Baseline vs SnapStream prefill at several prompt lengths, as tidy tables.

Owns: ``SNAPSTREAM_KERNELS``, ``drop_kernels``, ``snapstream_overhead``, ``compare_prefill``,
``prefill_overhead``.
Imports: analysis.result, pandas.

The baseline is a mapping without the SnapStream kernels. Until a separate baseline mapping
is given, it is derived from the SnapStream run by dropping the two SnapStream kernels:
at prefill they are the only difference (attention still covers the whole prompt).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from rdusim.analysis.result import simulate

#: the fused kernels SnapStream adds to each prefill layer
SNAPSTREAM_KERNELS: tuple[str, ...] = ("SnapKV Compression", "Streaming Ring Buffer")


def drop_kernels(frame: pd.DataFrame, kernels: Iterable[str] = SNAPSTREAM_KERNELS) -> pd.DataFrame:
    """``frame`` without the rows of ``kernels``; ``share`` recomputed per layer type."""
    kept = frame[~frame["kernel"].isin(list(kernels))].copy()
    kept["share"] = kept["latency_s"] / kept.groupby("layer_type")["latency_s"].transform("sum")
    return kept.reset_index(drop=True)


def snapstream_overhead(frame: pd.DataFrame) -> float:
    """Prefill time the SnapStream kernels add to a run's breakdown, as a fraction of the time
    without them (the published "about 2-5%" figure, methods.md section 1)."""
    extra = float(frame[frame["kernel"].isin(list(SNAPSTREAM_KERNELS))]["latency_s"].sum())
    return extra / (float(frame["latency_s"].sum()) - extra)


def length_label(seq_len: int) -> str:
    """32768 -> '32K'; lengths that are not whole KiB of tokens stay as they are."""
    return f"{seq_len // 1024}K" if seq_len % 1024 == 0 else str(seq_len)


def compare_prefill(snapstream: str | Path, seq_lens: Iterable[int], *,
                    baseline: str | Path | None = None) -> pd.DataFrame:
    """Per-kernel breakdown of baseline and SnapStream prefill at each prompt length.

    Returns the ``SimulationResult.kernels`` rows with three columns in front:
    ``config`` ('baseline' or 'SnapStream'), ``seq_len`` (tokens) and ``label``
    (e.g. 'SnapStream 32K'). ``baseline=None`` derives it with ``drop_kernels``.
    """
    parts = []
    for seq_len in seq_lens:
        snap = simulate(snapstream, seq_len=seq_len, record_events=False).kernels
        if baseline is None:
            base = drop_kernels(snap)
        else:
            base = simulate(baseline, seq_len=seq_len, record_events=False).kernels
        for config, frame in (("baseline", base), ("SnapStream", snap)):
            frame = frame.copy()
            frame.insert(0, "label", f"{config} {length_label(seq_len)}")
            frame.insert(0, "seq_len", seq_len)
            frame.insert(0, "config", config)
            parts.append(frame)
    return pd.concat(parts, ignore_index=True)


def prefill_overhead(comparison: pd.DataFrame) -> pd.DataFrame:
    """Time to first token of both configs per length, and SnapStream's overhead.

    Columns: ``seq_len``, ``baseline_s``, ``snapstream_s``, ``overhead`` (a fraction of
    the baseline time to first token).
    """
    totals = comparison.pivot_table(index="seq_len", columns="config", values="latency_s", aggfunc="sum")
    table = pd.DataFrame({"baseline_s": totals["baseline"], "snapstream_s": totals["SnapStream"]})
    table["overhead"] = table["snapstream_s"] / table["baseline_s"] - 1.0
    return table.reset_index()


def breakdown_frames(comparison: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """label -> that run's kernel rows, in the order of ``comparison`` (for ``plot_breakdown``)."""
    return {str(label): frame for label, frame in comparison.groupby("label", sort=False)}
