"""Plots draw what they are given, on the given Axes, and touch no global state."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest
from matplotlib.figure import Figure

from rdusim.analysis.calibration.prefill_compare import drop_kernels, prefill_overhead
from rdusim.analysis.plots import kernel_color, plot_breakdown, plot_shares


def frame(snapkv_s: float = 0.1) -> pd.DataFrame:
    rows = [("QKV", "moe", 1.0), ("MHA", "moe", 3.0), ("SnapKV Compression", "moe", snapkv_s),
            ("QKV", "dense", 0.5)]
    out = pd.DataFrame(rows, columns=["kernel", "layer_type", "latency_s"])
    out["share"] = out["latency_s"] / out.groupby("layer_type")["latency_s"].transform("sum")
    return out


def test_breakdown_bars_stack_per_kernel_in_ms() -> None:
    backend = matplotlib.get_backend()
    ax = plot_breakdown({"baseline": drop_kernels(frame()), "SnapStream": frame()}, layer_type="moe")
    assert isinstance(ax.figure, Figure) and matplotlib.get_backend() == backend
    assert [t.get_text() for t in ax.get_yticklabels()] == ["baseline", "SnapStream"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["QKV", "MHA", "SnapKV Compression"]
    widths = {(c.get_label(), round(p.get_y() + p.get_height() / 2)): p.get_width()
              for c in ax.containers for p in c.patches}
    assert widths[("MHA", 0)] == pytest.approx(3000.0)  # SnapStream is the bottom bar (y = 0)
    assert widths[("SnapKV Compression", 1)] == 0.0
    assert ax.containers[0].patches[0].get_facecolor()[:3] == pytest.approx(
        matplotlib.colors.to_rgb(kernel_color("QKV")))


def test_breakdown_draws_on_given_axes() -> None:
    ax = Figure().add_subplot()
    assert plot_breakdown({"all": frame()}, ax=ax, layer_type=None) is ax
    assert sum(p.get_width() for c in ax.containers for p in c.patches) == pytest.approx(4600.0)


def test_shares_simulated_next_to_published() -> None:
    ax = plot_shares(frame(snapkv_s=0.0), {"MHA": 0.7, "Router": 0.1})
    simulated, published = ax.containers
    assert [t.get_text() for t in ax.get_xticklabels()] == ["QKV", "MHA", "SnapKV Compression", "Router"]
    assert [p.get_height() for p in simulated.patches] == pytest.approx([25.0, 75.0, 0.0, 0.0])
    assert [p.get_height() for p in published.patches] == pytest.approx([0.0, 70.0, 0.0, 10.0])


def test_overhead_is_relative_to_baseline() -> None:
    snap = frame()
    parts = [f.assign(config=c, seq_len=8192) for c, f in (("baseline", drop_kernels(snap)), ("SnapStream", snap))]
    table = prefill_overhead(pd.concat(parts))
    assert table["overhead"].item() == pytest.approx(0.1 / 4.5)
