"""The GPU model's prediction errors at a glance: ``rdusim fidelity --gpu --plot``.

Owns: ``item_of`` (which row of the figure a group of the table falls on), ``fidelity_items``,
``plot_fidelity``, ``fidelity_figure_png``. Imports: analysis.gpu.fidelity (its ``Group`` and
table), analysis.plots (``figure_png``), matplotlib, pandas, numpy.

One row per item: an acceptance item of the table (``fidelity.ACCEPTANCE``'s key; the
collectives split by op, the TP steps by kind), or a kind no acceptance item gates. Each
prediction row's signed error is a point (H100 above the row's middle, H200 below), the box
spans the item's prediction errors (quartiles, whiskers 5-95%), the bands are the tolerance
(light: worst, dark: median). Calibration rows, fitted and never gated, are drawn apart: grey
crosses on their item's row. The x axis is symlog (linear within +-10%); an error past its
end is drawn at the end as a triangle. Nothing is computed here that the table does not hold:
the points are the groups' ``errors``, the bands and verdicts the table's columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from rdusim.analysis.gpu.fidelity import Group
from rdusim.analysis.plots import figure_png

#: the colours of the two GPUs (a group's ``gpu`` names one: "H100", "2 x H200", ...); a GPU
#: not named here is drawn in ``OTHER_GPU_COLOR``, on its own line of the row
GPU_COLORS = {"H100": "#4e79a7", "H200": "#f28e2b"}
OTHER_GPU_COLOR = "#b07aa1"
#: the x axis's ends (relative error); a point past them is drawn at the end, as a triangle
X_LIMITS = (-1.0, 1.5)
#: the symlog axis is linear within this (relative error)
LINEAR_WITHIN = 0.10


@dataclass
class Item:
    """One row of the figure: its prediction and calibration errors by GPU, the tolerance
    (median, worst; None: not gated) and its prediction groups' verdicts (``within`` of the
    table, one per group)."""

    name: str
    tolerance: tuple[float, float] | None = None
    prediction: dict[str, list[float]] = field(default_factory=dict)
    calibration: dict[str, list[float]] = field(default_factory=dict)
    verdicts: list[str] = field(default_factory=list)

    def errors(self) -> list[float]:
        return [e for errors in self.prediction.values() for e in errors]


def gpu_family(gpu: str) -> str:
    """The GPU a group's ``gpu`` names ("2 x H100" -> "H100")."""
    return next((name for name in GPU_COLORS if name in gpu), gpu)


#: P10's sets (``fidelity.SOURCES``'s first two) as a row's prefix, for the kinds no item gates
_P10_SETS = (("P10 held out", "P10 held-out "), ("P10", "P10 "))


def item_of(group: Group) -> str:
    """The figure row of a prediction group: the collectives by op, the TP steps by kind, the
    other gated kinds by acceptance item, an ungated kind by its name (P10's prefixed)."""
    if group.kind.startswith("collectives: "):
        return group.kind.split(",")[0]
    if group.kind.startswith("TP"):
        return group.kind
    if group.acceptance:
        return group.acceptance
    prefix = next((p for label, p in _P10_SETS if group.set.startswith(label)), "")
    return f"{prefix}{group.kind} (not gated)"


def _order(item: Item) -> tuple[int, int]:
    """Rows in three blocks, the gated items first in each: issue 17's, P10's (no worse than
    P10's model), the other kinds no item gates."""
    block = 1 if item.name.startswith("P10 ") else (0 if item.tolerance is not None else 2)
    return block, 0 if item.tolerance is not None else 1


def fidelity_items(gs: Sequence[Group], frame: pd.DataFrame) -> list[Item]:
    """The figure's rows from the groups ``gs`` and their table ``frame`` (``fidelity_table(gs)``,
    one row per group in order). A calibration group falls on the row of the prediction group
    of its set and kind (a set's calibration rows with no prediction rows of their kind get a
    row of their own, "kind (calibration only)"). In first-seen order within each block."""
    if len(gs) != len(frame):
        raise ValueError(f"{len(gs)} groups but {len(frame)} table rows: the table must be of these groups")
    names = {(g.csv, g.kind): item_of(g) for g in gs if g.role == "prediction"}
    items: dict[str, Item] = {}
    for g, row in zip(gs, frame.itertuples(), strict=True):
        if g.role == "prediction":
            name = names[(g.csv, g.kind)]
        else:
            name = names.get((g.csv, g.kind), item_of(g).replace("(not gated)", "(calibration only)"))
        item = items.setdefault(name, Item(name))
        gpu = gpu_family(g.gpu)
        if g.role != "prediction":
            item.calibration.setdefault(gpu, []).extend(g.errors)
            continue
        item.prediction.setdefault(gpu, []).extend(g.errors)
        if row.within:
            item.verdicts.append(row.within)
        if not np.isnan(row.tolerance_median):
            item.tolerance = (row.tolerance_median, row.tolerance_worst)
    ordered = list(items.values())
    return sorted(ordered, key=lambda item: (*_order(item), ordered.index(item)))


def _summary(item: Item) -> str:
    """The text right of a row: its prediction rows (and calibration rows), then for a gated item
    its groups (a set, GPU and kind each: the table's rows) by verdict."""
    n = len(item.errors())
    cal = sum(len(e) for e in item.calibration.values())
    text = f"{n} rows" + (f" (+{cal} cal.)" if cal else "")
    if item.tolerance is None:
        return text + ", not gated"
    counts = {v: item.verdicts.count(v) for v in ("yes", "known miss", "no")}
    verdicts = ", ".join(f"{c} {v}" for v, c in counts.items() if c)
    return f"{text}; {len(item.verdicts)} group{'s' if len(item.verdicts) != 1 else ''}: {verdicts}"


def _clipped(values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Percent errors inside the axis, and the ones past its ends (drawn at the end)."""
    x = np.asarray(values) * 100
    lo, hi = X_LIMITS[0] * 100, X_LIMITS[1] * 100
    return x[(x >= lo) & (x <= hi)], np.clip(x[(x < lo) | (x > hi)], lo, hi)


def _box(ax: Axes, y: float, x: np.ndarray) -> None:
    """A box at ``y``: quartiles, median, whiskers at the 5th and 95th percentiles (drawn by hand:
    the same on every matplotlib the project supports)."""
    p5, q1, median, q3, p95 = np.percentile(x, [5, 25, 50, 75, 95])
    style = {"color": "black", "lw": 0.8, "zorder": 5}
    ax.add_patch(Rectangle((q1, y - 0.3), q3 - q1, 0.6, fill=False, **style))
    ax.plot([median, median], [y - 0.3, y + 0.3], **{**style, "lw": 1.6})
    ax.plot([p5, q1], [y, y], **style)
    ax.plot([q3, p95], [y, y], **style)
    ax.plot([p5, p5], [y - 0.15, y + 0.15], **style)
    ax.plot([p95, p95], [y - 0.15, y + 0.15], **style)


def plot_fidelity(items: Sequence[Item], ax: Axes | None = None) -> Axes:
    """One row per item, top to bottom in ``items`` order (see the module's docstring)."""
    if ax is None:
        ax = Figure(figsize=(11.0, 0.36 * len(items) + 1.4), layout="constrained").add_subplot()
    rng = np.random.default_rng(0)  # the points' jitter: the same figure every time
    y = np.arange(len(items))[::-1]
    seen = {gpu for item in items for gpu in (*item.prediction, *item.calibration)}
    gpus = [*GPU_COLORS, *sorted(seen - set(GPU_COLORS))]
    offsets = np.linspace(0.18, -0.18, len(gpus))  # each GPU on its own line of the row, H100 on top
    clipped = False
    for yi, item in zip(y, items, strict=True):
        size = 8 if len(item.errors()) > 100 else 20  # a few rows: larger points
        if item.tolerance is not None:
            median, worst = item.tolerance
            ax.fill_betweenx([yi - 0.45, yi + 0.45], -worst * 100, worst * 100, color="#59a14f", alpha=0.12, lw=0)
            ax.fill_betweenx([yi - 0.45, yi + 0.45], -median * 100, median * 100, color="#59a14f", alpha=0.25, lw=0)
        for offset, gpu in zip(offsets, gpus, strict=True):
            for values, marker, color in ((item.prediction.get(gpu, []), "o", GPU_COLORS.get(gpu, OTHER_GPU_COLOR)),
                                          (item.calibration.get(gpu, []), "x", "0.45")):
                inside, outside = _clipped(values)
                clipped = clipped or len(outside) > 0
                jitter = rng.uniform(-0.26, 0.26, len(inside)) / len(gpus)
                ax.scatter(inside, yi + offset + jitter, s=size, marker=marker, color=color, alpha=0.45,
                           linewidths=0.8 if marker == "x" else 0, zorder=3)
                for end, arrow in ((outside[outside > 0], ">"), (outside[outside < 0], "<")):
                    ax.scatter(end, np.full(len(end), yi + offset), marker=arrow, s=28, color=color,
                               edgecolor="black", linewidths=0.6, zorder=4)
        errors = item.errors()
        if errors:
            _box(ax, yi, np.clip(np.asarray(errors) * 100, X_LIMITS[0] * 100, X_LIMITS[1] * 100))
        ax.annotate(_summary(item), (1.0, yi), xycoords=("axes fraction", "data"), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=7, annotation_clip=False)
    ax.set_xscale("symlog", linthresh=LINEAR_WITHIN * 100, linscale=1.0)
    ax.set_xlim(X_LIMITS[0] * 100, X_LIMITS[1] * 100)
    ticks = [-100, -25, -10, -5, 0, 5, 10, 25, 100]
    ax.set_xticks(ticks, [f"{t:+d}%" if t else "0" for t in ticks])
    ax.set_xticks([-50, 50, 150], minor=True)
    ax.set_yticks(y, [item.name for item in items])
    ax.set_ylim(-0.6, len(items) - 0.4)
    ax.axvline(0, color="black", lw=0.6, zorder=2)
    for yi, (a, b) in zip(y[1:], zip(items, items[1:], strict=False), strict=True):
        if _order(a)[0] != _order(b)[0]:
            ax.axhline(yi + 0.5, color="0.3", lw=0.8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_xlabel("signed error of each row, model / measured - 1 (symlog: linear within \u00b110%)")
    handles = [
        *(Line2D([], [], marker="o", ls="", color=color, label=f"{gpu} prediction row")
          for gpu, color in GPU_COLORS.items()),
        *([Line2D([], [], marker="o", ls="", color=OTHER_GPU_COLOR, label="other GPU")] if len(gpus) > 2 else []),
        Line2D([], [], marker="x", ls="", color="0.55", label="calibration row (fitted, not gated)"),
        *([Line2D([], [], marker=">", ls="", color="0.6", markeredgecolor="black", label="past the axis's end")]
          if clipped else []),
        Patch(color="#59a14f", alpha=0.25, label="tolerance: median"),
        Patch(color="#59a14f", alpha=0.12, label="tolerance: worst"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.05), ncols=len(handles), fontsize=7,
              frameon=False)
    ax.set_title("rdusim fidelity --gpu: the GPU model's error on every row the table compares "
                 "(box: prediction rows, quartiles and 5-95%)", fontsize=9)
    return ax


def fidelity_figure_png(gs: Sequence[Group], frame: pd.DataFrame) -> bytes:
    """The figure of the groups ``gs`` and their table ``frame``, as PNG bytes."""
    return figure_png(plot_fidelity(fidelity_items(gs, frame)).figure)
