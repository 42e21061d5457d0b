"""Parity plot of the NCCL collectives: rdusim's prediction against every measured collective row.

    PYTHONPATH=. python benchmarks/gpu/collectives_parity.py [CSV ...] [--out PNG]

CSVs: ``collectives.py`` measurements (default: every ``benchmarks/gpu/*-collectives.csv``).
Each row is predicted as ``collectives.py --model DOC --compare CSV`` does (``fitted_fabric``,
``predict_us``), on the GPU document of the device the CSV names (``compare_sweep.GPU_DOCS``)
and at the row's ``ranks``. One panel per collective; graph-replayed rows are circles,
stream-launched rows triangles, one colour per run and GPU count.

A point is a **frozen prediction** (filled) only where the run's ``-predicted.txt`` (committed
before the run: ``collectives.py --model DOC --sizes ...``) holds the row and today's model still
gives that figure (to its 0.01 us). Every other prediction row is **explained after
measurement** (hollow): the run the model was built on (run t: its frozen file predates the fit),
and rows whose prediction changed after the run was seen (run u's LL and all-to-all rows).
Calibration rows are black crosses. ``--out`` defaults to docs/img/gpu-collectives-parity.png.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collectives import OPS, fitted_fabric, predict_us  # noqa: E402  (beside this file)
from compare import parity_axes  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs/img/gpu-collectives-parity.png"
MARKERS = {"graph": "o", "stream": "^"}
TOLERANCE_US = 0.0051  # frozen tables print 2 decimals


def frozen_predictions(csv_path: Path) -> dict[tuple[str, int | None], float]:
    """The run's frozen table (``X-collectives.csv`` -> ``X-collectives-predicted.txt``): row name
    (and GPU count where the table has a ``ranks`` or ``GPUs`` column) -> predicted us."""
    path = csv_path.with_name(csv_path.stem + "-predicted.txt")
    if not path.exists():
        return {}
    out: dict[tuple[str, int | None], float] = {}
    header: list[str] = []
    table = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in path.read_text().splitlines()
        if line.startswith("|")
    ]
    for i, cells in enumerate(table):
        if set(cells[0]) <= set("-: "):
            continue
        if i + 1 < len(table) and set(table[i + 1][0]) <= set(
            "-: "
        ):  # a header: the next line rules it
            header = cells
        elif header[:1] == ["row"] and "predicted (us)" in header and len(cells) == len(header):
            ranks = next(
                (int(cells[header.index(k)]) for k in ("ranks", "GPUs") if k in header), None
            )
            out[(cells[0], ranks)] = float(cells[header.index("predicted (us)")])
    return out


def run_label(csv_path: Path) -> str:
    """``h100x2-20261125t-collectives.csv`` -> ``run t``; other names: the file's stem."""
    m = re.match(r"[a-z0-9]+x\d+-\d{8}([a-z0-9]+)-collectives$", csv_path.stem)
    return f"run {m[1]}" if m else csv_path.stem


def points(csv_paths: list[Path]) -> list[dict]:
    """Every collective row of the CSVs with its prediction and status (calibration, frozen
    prediction, explained after measurement)."""
    from compare_sweep import GPU_DOCS

    from rdusim.hw.gpu import load_gpu_node

    out = []
    for csv_path in csv_paths:
        with open(csv_path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        devices = {r["gpu"] for r in rows}
        if len(devices) != 1 or not devices <= GPU_DOCS.keys():
            raise SystemExit(
                f"{csv_path}: devices {sorted(devices)}; compare_sweep.GPU_DOCS knows {sorted(GPU_DOCS)}"
            )
        device = devices.pop()
        gpu = load_gpu_node(str(ROOT / GPU_DOCS[device])).gpu
        fabric, _ = fitted_fabric(gpu, rows)
        frozen = frozen_predictions(csv_path)
        for r in rows:
            if r["kind"] != "collective":
                continue
            ranks = int(r.get("ranks") or 2)
            pred, cost = predict_us(gpu, r["op"], int(r["bytes"]), ranks, r["mode"], fabric)
            before = frozen.get((r["name"], ranks), frozen.get((r["name"], None)))
            if r["set"] == "calibration":
                status = "calibration"
            elif before is not None and abs(pred - before) <= TOLERANCE_US:
                status = "frozen"
            else:
                status = "explained"
            out.append(
                {
                    "run": run_label(csv_path),
                    "gpu": device.replace("NVIDIA ", "").split()[0],
                    "ranks": ranks,
                    "op": r["op"],
                    "mode": r["mode"],
                    "bytes": int(r["bytes"]),
                    "measured": float(r["median_us"]),
                    "predicted": pred,
                    "status": status,
                    "algorithm": f"{cost.algorithm}/{cost.protocol}",
                }
            )
    return out


def summary(pts: list[dict]) -> list[str]:
    """Median abs error / worst per run, GPU count, op, mode and status (prediction rows)."""
    groups: dict[tuple, list[float]] = {}
    for p in pts:
        if p["status"] != "calibration":
            key = (p["run"], p["ranks"], p["op"], p["mode"], p["status"])
            groups.setdefault(key, []).append(p["predicted"] / p["measured"] - 1)
    lines = [
        "| run | GPUs | op | mode | status | rows | median abs error | worst |",
        "|---|---:|---|---|---|---:|---:|---:|",
    ]
    for (run, ranks, op, mode, status), errs in sorted(groups.items()):
        worst = max(errs, key=abs)
        lines.append(
            f"| {run} | {ranks} | {op} | {mode} | {status} | {len(errs)} | "
            f"{statistics.median(map(abs, errs)) * 100:.0f}% | {worst * 100:+.0f}% |"
        )
    return lines


def plot(pts: list[dict], out: Path) -> list[str]:
    """Write the figure; returns the panels' titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    series = sorted({(p["run"], p["gpu"], p["ranks"]) for p in pts})
    colour = {s: f"C{i % 10}" for i, s in enumerate(series)}
    values = [v for p in pts for v in (p["measured"], p["predicted"])]
    lo, hi = (
        10 ** (f(2 * math.log10(v)) / 2)
        for f, v in ((math.floor, min(values)), (math.ceil, max(values)))
    )
    fig, axes = plt.subplots(2, 2, figsize=(12, 11))
    for ax, op in zip(axes.flat, OPS, strict=True):
        mine = [p for p in pts if p["op"] == op]
        for p in mine:
            c = colour[(p["run"], p["gpu"], p["ranks"])]
            if p["status"] == "calibration":
                ax.scatter(p["measured"], p["predicted"], marker="x", color="k", s=40, zorder=3)
            else:
                ax.scatter(
                    p["measured"],
                    p["predicted"],
                    marker=MARKERS[p["mode"]],
                    s=34,
                    edgecolors=c,
                    facecolors=c if p["status"] == "frozen" else "none",
                    linewidths=1.0,
                )
        note = []
        for mode in MARKERS:
            errs = [
                p["predicted"] / p["measured"] - 1
                for p in mine
                if p["status"] == "frozen" and p["mode"] == mode
            ]
            if errs:
                note.append(
                    f"{mode} {len(errs)}: {statistics.median(map(abs, errs)) * 100:.0f}% / "
                    f"{max(errs, key=abs) * 100:+.0f}%"
                )
        note_text = "frozen predictions, median / worst: " + ("; ".join(note) or "none")
        parity_axes(
            ax,
            lo,
            hi,
            f"{op.replace('_', '-')}\n{note_text}\n",
            title_size=9,
            legend_size=None,
            bands=(0.10, 0.25),
        )
    handles = [
        Line2D(
            [],
            [],
            linestyle="",
            marker="s",
            color=colour[(run, gpu, n)],
            label=f"{run}, {n} x {gpu}",
        )
        for run, gpu, n in series
    ]
    handles += [
        Line2D([], [], linestyle="", marker=MARKERS["graph"], color="grey", label="CUDA graph"),
        Line2D(
            [],
            [],
            linestyle="",
            marker=MARKERS["stream"],
            color="grey",
            label="stream (eager calls)",
        ),
        Line2D([], [], linestyle="", marker="o", color="grey", label="filled: frozen prediction"),
        Line2D(
            [],
            [],
            linestyle="",
            marker="o",
            markerfacecolor="none",
            color="grey",
            label="hollow: explained after measurement",
        ),
        Line2D([], [], linestyle="", marker="x", color="k", label="calibration (fitted)"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=min(5, len(handles)), fontsize=8)
    fig.suptitle(
        "NCCL collectives, rdusim predicted vs measured (bf16, 20 calls back to back a trial)"
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return [ax.get_title() for ax in axes.flat]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "csv", nargs="*", help="collectives.py CSVs (default: benchmarks/gpu/*-collectives.csv)"
    )
    ap.add_argument("--out", default=str(OUT), help="the PNG to write")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.csv] or sorted(
        (ROOT / "benchmarks/gpu").glob("*-collectives.csv")
    )
    pts = points(paths)
    print("\n".join(summary(pts)))
    plot(pts, Path(args.out))
    print(f"wrote {args.out}: {len(pts)} rows from {len(paths)} CSVs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
