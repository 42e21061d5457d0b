"""Parity plot of the NCCL collectives: rdusim's prediction against every measured collective row.

    PYTHONPATH=. python benchmarks/gpu/collectives_parity.py [CSV ...] [--out PNG]

CSVs: ``collectives.py`` measurements (default: every run's, ``default_csvs``).
Each row is predicted as ``collectives.py --model DOC --compare CSV`` does
(``rdusim.analysis.gpu.collectives.compare_collective_rows``), on the GPU document of the device
the CSV names (``rdusim.analysis.gpu.measured.GPU_DOCS``) and at the row's ``ranks``. One panel per collective; graph-replayed rows are circles,
stream-launched rows triangles, one colour per run and GPU count.

A point is a **frozen prediction** (filled) only where one of the run's frozen tables (every
``<run>-*predicted*.txt`` beside the CSV, committed before the run: ``collectives.py --model DOC
--sizes ...``; a table's GPU count is its ``ranks``/``GPUs`` column or its ``# frozen
predictions: ..., N GPUs`` line) holds the row and today's model still gives that figure (to its
0.01 us). A run whose frozen tables were made for another device (run x: frozen on h200.yaml, lent
H100s) has none for its rows: they are **unchanged since before the run** (filled grey edge) where
git shows neither ``rdusim/`` nor the row's GPU document changed since the commit of that table,
else explained. Every other prediction row is **explained after measurement** (hollow): the run
the model was built on (run t), and rows whose prediction changed after the run was seen.
Calibration rows are black crosses. Host-ahead rows (``*_stream_queued``) are predicted as
NCCL's own time, as ``--compare`` does. ``--out`` defaults to docs/img/gpu-collectives-parity.png.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collectives import OPS, frozen_rows  # noqa: E402  (beside this file)
from compare import parity_axes  # noqa: E402

from rdusim.analysis.gpu.collectives import (  # noqa: E402
    collective_runs,
    compare_collective_rows,
    median_worst,
    run_label,
    run_prefix,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs/img/gpu-collectives-parity.png"
MARKERS = {"graph": "o", "stream": "^", "queued": "s"}
TOLERANCE_US = 0.0051  # frozen tables print 2 decimals


def frozen_files(csv_path: Path, any_device: bool = False) -> list[Path]:
    """The run's frozen tables beside the CSV (``<prefix>-*predicted*.txt``); ``any_device``:
    those of the same run made for another device (``h200x2-20261128x-...`` for an ``h100x2``
    CSV)."""
    prefix = run_prefix(csv_path)
    if prefix is None:
        return []
    if any_device:
        run = prefix.split("-", 1)[1]
        return sorted(
            p
            for p in csv_path.parent.glob(f"*-{run}-*predicted*.txt")
            if not p.name.startswith(prefix)
        )
    return sorted(csv_path.parent.glob(f"{prefix}-*predicted*.txt"))


def frozen_predictions(csv_path: Path) -> dict[tuple[str, int | None], set[float]]:
    """Every frozen table of the CSV's run (``frozen_files``), read by ``collectives.frozen_rows``:
    row name and GPU count (a ``ranks`` or ``GPUs`` column, else the section's ``# frozen
    predictions: ..., N GPUs`` line, else None) -> the predicted figures (us) it was frozen at (the
    collectives only; the TP steps' tables are left out)."""
    out: dict[tuple[str, int | None], set[float]] = {}
    for path in frozen_files(csv_path):
        for row in frozen_rows(path):
            if not row.step:
                out.setdefault((row.name, row.ranks), set()).add(row.us)
    return out


def model_unchanged_since(path: Path, doc: str) -> bool:
    """True when git shows no change to ``rdusim/`` or ``doc`` since the commit that added
    ``path`` (committed or not); False when it does or git cannot tell."""
    import subprocess

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        )

    added = git("log", "--diff-filter=A", "--format=%H", "-1", "--", str(path.relative_to(ROOT)))
    commit = added.stdout.strip()
    if added.returncode or not commit:
        return False
    changed = git("log", "--format=%H", f"{commit}..HEAD", "--", "rdusim", doc)
    dirty = git("diff", "--quiet", "HEAD", "--", "rdusim", doc)
    return changed.returncode == 0 and not changed.stdout.strip() and dirty.returncode == 0


def default_csvs() -> list[Path]:
    """Every committed measurement of collectives (``collective_runs``: a ``collectives.py`` CSV
    of a run, the diagnostics that time another thing left out)."""
    return collective_runs(ROOT / "benchmarks/gpu")


def points(csv_paths: list[Path]) -> list[dict]:
    """Every collective row of the CSVs with its prediction and status (calibration, frozen
    prediction, explained after measurement)."""
    from rdusim.analysis.gpu.measured import run_doc
    from rdusim.hw.gpu import load_gpu_node

    out = []
    for csv_path in csv_paths:
        with open(csv_path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        try:
            doc = run_doc(rows, "gpu")
        except ValueError as error:
            raise SystemExit(f"{csv_path}: {error}") from None
        device = rows[0]["gpu"]
        gpu = load_gpu_node(str(ROOT / doc)).gpu
        frozen = frozen_predictions(csv_path)
        other = frozen_files(csv_path, any_device=True)
        unchanged = not frozen and bool(other) and all(model_unchanged_since(p, doc) for p in other)
        for c in compare_collective_rows(rows, gpu):
            ranks, pred, cost = c["ranks"], c["pred"], c["cost"]
            before = frozen.get((c["name"], ranks), set()) | frozen.get((c["name"], None), set())
            if c["set"] == "calibration":
                status = "calibration"
            elif any(abs(pred - b) <= TOLERANCE_US for b in before):
                status = "frozen"
            elif unchanged:
                status = "unchanged"
            else:
                status = "explained"
            out.append(
                {
                    "run": run_label(csv_path),
                    "gpu": device.replace("NVIDIA ", "").split()[0],
                    "ranks": ranks,
                    "op": c["op"],
                    "mode": c["launch"],
                    "bytes": int(c["bytes"]),
                    "measured": float(c["median_us"]),
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
        median, worst = median_worst(errs)
        lines.append(
            f"| {run} | {ranks} | {op} | {mode} | {status} | {len(errs)} | {median:.0f}% | {worst:+.0f}% |"
        )
    return lines


def plot(pts: list[dict], out: Path) -> list[str]:
    """Write the figure; returns the panels' titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    series = sorted({(p["run"], p["gpu"], p["ranks"]) for p in pts})
    palette = plt.get_cmap("tab20").colors if len(series) > 10 else [f"C{i}" for i in range(10)]
    colour = {s: palette[i % len(palette)] for i, s in enumerate(series)}
    values = [v for p in pts for v in (p["measured"], p["predicted"])]
    lo, hi = (
        10 ** (f(2 * math.log10(v)) / 2)
        for f, v in ((math.floor, min(values)), (math.ceil, max(values)))
    )
    fig, axes = plt.subplots(2, 2, figsize=(12, 12))
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
                    facecolors=c if p["status"] in ("frozen", "unchanged") else "none",
                    alpha=0.45 if p["status"] == "unchanged" else 1.0,
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
                    "{} {}: {:.0f}% / {:+.0f}%".format(mode, len(errs), *median_worst(errs))
                )
        note_text = "frozen predictions, median / worst:\n" + ("; ".join(note) or "none")
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
        Line2D(
            [], [], linestyle="", marker=MARKERS["queued"], color="grey", label="stream, host ahead"
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
        Line2D(
            [],
            [],
            linestyle="",
            marker="o",
            color="grey",
            alpha=0.45,
            label="faint: model unchanged since the run (frozen for another GPU)",
        ),
        Line2D([], [], linestyle="", marker="x", color="k", label="calibration (fitted)"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=min(5, len(handles)), fontsize=8)
    fig.suptitle(
        "NCCL collectives, rdusim predicted vs measured (bf16, 20 calls back to back a trial)"
    )
    fig.tight_layout(rect=(0, 0.1, 1, 0.97))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return [ax.get_title() for ax in axes.flat]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "csv", nargs="*", help="collectives.py CSVs (default: every run's, default_csvs)"
    )
    ap.add_argument("--out", default=str(OUT), help="the PNG to write")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.csv] or default_csvs()
    pts = points(paths)
    print("\n".join(summary(pts)))
    plot(pts, Path(args.out))
    print(f"wrote {args.out}: {len(pts)} rows from {len(paths)} CSVs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
