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


def test_speed_throughput_draws_a_line_per_configuration_and_the_published_marks() -> None:
    from rdusim.analysis.frontier import published_points  # noqa: PLC0415
    from rdusim.analysis.plots import plot_speed_throughput  # noqa: PLC0415

    frame = pd.DataFrame({"model": ["A", "A", "B"], "configuration": ["a", "a", "b"], "batch": [2, 1, 1],
                          "tokens_per_s_per_user": [80.0, 100.0, 50.0], "tokens_per_s": [160.0, 100.0, 50.0]})
    backend = matplotlib.get_backend()
    ax = plot_speed_throughput(frame, published_points())
    assert matplotlib.get_backend() == backend and ax.get_xscale() == ax.get_yscale() == "log"
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["a"].get_xdata()) == [100.0, 80.0]          # in batch order
    assert list(lines["a"].get_ydata()) == [100.0, 160.0]
    # per-user-only figures are vertical lines; R7's aggregate with its users is a point
    vertical = [line for label, line in lines.items() if "tok/s/user" in label]
    assert sorted(line.get_xdata()[0] for line in vertical) == [198.0, 250.0, 457.0]
    star = ax.collections[0].get_offsets()[0]
    assert tuple(star) == pytest.approx((4500.0 / 256, 4500.0))
