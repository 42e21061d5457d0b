"""Predicted vs measured on the committed H100 CSV: docs/gpu.md's table and parity plot.

    PYTHONPATH=. python benchmarks/gpu/compare.py [--csv benchmarks/gpu/h100-20261123b.csv]

Prints the calibration fit (from the ``calibration`` rows only; the constants in
hw_configs/h100.yaml come from it) and rewrites the generated sections of docs/gpu.md (summary,
Kascade speedups, per-row table, repeatability) and docs/img/gpu-parity.png.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from rdusim.analysis.gpu.fidelity import P10_GROUPS, p10_kind
from rdusim.analysis.gpu.predict import compare_rows, fit_calibration, fit_pipeline, summary
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu

ROOT = Path(__file__).resolve().parents[2]
GROUPS = P10_GROUPS  # rdusim.analysis.gpu.fidelity: the same groups as ``rdusim fidelity --gpu``


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default=str(ROOT / "benchmarks/gpu/h100-20261123b.csv"))
    ap.add_argument("--hw", default=str(ROOT / "hw_configs/h100.yaml"))
    ap.add_argument("--repeat", default=str(ROOT / "benchmarks/gpu/h100-20261123.csv"),
                    help="an earlier run of the same rows, for run-to-run spread")
    ap.add_argument("--holdout", default=str(ROOT / "benchmarks/gpu/h100-20261123-holdout.csv"),
                    help="rows measured after the model was frozen (set=holdout)")
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.csv)))
    spec = load_spec(args.hw, GpuSpec)
    print("calibration fit (calibration rows only):", fit_calibration(rows, spec))
    print("launch.pipeline (P10's fit, calibration GEMMs square8192 and down_m16):", fit_pipeline(rows, spec))
    model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    compared = compare_rows(rows, Gpu(spec), model)
    table = ["| set | row | measured (us) | predicted (us) | error |", "|---|---|---:|---:|---:|"]
    for r in compared:
        err = "n/a" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        pred = "—" if r["predicted_us"] is None else f"{r['predicted_us']:.1f}"
        table.append(f"| {r['set']} | {r['name']} | {float(r['median_us']):.1f} | {pred} | {err} |")
    summary_lines = ["| prediction group | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    for label, kinds in GROUPS.items():
        for mode in ((None, "graph", "eager") if label == "e2e decode" else (None,)):
            s = summary(compared, kinds, mode)
            name = label + (f" ({mode})" if mode else "")
            summary_lines.append(f"| {name} | {s['n']} | {s['median'] * 100:.1f}% | {s['worst'] * 100:.1f}% |")
        if label == "attention (SDPA)":
            for sub in kinds:
                s = summary(compared, (sub,))
                summary_lines.append(f"| &nbsp; {sub} | {s['n']} | {s['median'] * 100:.1f}% | {s['worst'] * 100:.1f}% |")
    doc = ROOT / "docs/gpu.md"
    text = doc.read_text()
    held = [r for r in csv.DictReader(open(args.holdout)) if r["set"] == "holdout"]
    held_rows = compare_rows(held, Gpu(spec), model)
    for marker, lines in (("summary", summary_lines), ("kascade", kascade_table(compared)),
                          ("holdout", holdout_table(held_rows)),
                          ("table", table), ("repeat", repeatability(args.csv, args.repeat))):
        text = _between(text, marker, lines)
    doc.write_text(text)
    print("\n".join(summary_lines))
    _plot(compared, held_rows, ROOT / "docs/img/gpu-parity.png")
    return 0


def holdout_table(rows: list[dict]) -> list[str]:
    """Per-row errors on the held-out shapes, then medians and worst per group."""
    import statistics

    out = ["| row | measured (us) | predicted (us) | error |", "|---|---:|---:|---:|"]
    out += [f"| {r['name']} | {float(r['median_us']):.1f} | {r['predicted_us']:.1f} | {r['error'] * 100:+.1f}% |"
            for r in rows]
    out += ["", "| held-out group | rows | median abs error | worst |", "|---|---:|---:|---:|"]
    groups = {"attention (SDPA)": "attention", "gemm": "GEMMs", "e2e decode (graph)": "graph decode",
              "e2e decode (eager)": "eager decode", "e2e prefill": "e2e prefill"}  # p10_kind's names
    for label, kind in groups.items():
        errs = [abs(r["error"]) for r in rows if p10_kind(r) == kind]
        out.append(f"| {label} | {len(errs)} | {statistics.median(errs) * 100:.1f}% | {max(errs) * 100:.1f}% |")
    return out


def repeatability(path: str, other: str) -> list[str]:
    """Run-to-run spread of the rows both CSVs hold (same script, two machine starts)."""
    import statistics

    a = {r["name"]: float(r["median_us"]) for r in csv.DictReader(open(path))}
    b = {r["name"]: (r["kind"], float(r["median_us"])) for r in csv.DictReader(open(other))}
    out = ["| kind | rows in both runs | median abs difference | worst |", "|---|---:|---:|---:|"]
    kinds = sorted({kind for kind, _ in b.values()})
    for kind in kinds:
        diffs = [abs(a[n] - t) / t for n, (k, t) in b.items() if k == kind and n in a]
        if diffs:
            out.append(f"| {kind} | {len(diffs)} | {statistics.median(diffs) * 100:.1f}% | {max(diffs) * 100:.1f}% |")
    return out


def _between(text: str, marker: str, lines: list[str]) -> str:
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return head + start + "\n" + "\n".join(lines) + "\n" + end + tail


def kascade_table(compared: list[dict]) -> list[str]:
    """Decode-attention speedup of Kascade over dense per layer kind, and over a 32-layer step
    (1 dense anchor + 4 anchors + 27 reuse layers, the published Llama-3.1-8B split)."""
    by = {(r["mode"], r["batch"], r["kv_len"]): r for r in compared if r["kind"] == "kascade"}
    out = ["| batch | KV | dense (us) | reuse layer: measured torch gather / project sparse_decode / predicted "
           "| 32-layer mix: measured / project / predicted |", "|---:|---:|---:|---|---|"]
    for (mode, b, kv), dense in sorted(by.items(), key=lambda kv: (int(kv[0][1]), int(kv[0][2]))):
        if mode != "dense":
            continue
        reuse, anchor = by[("reuse", b, kv)], by[("anchor", b, kv)]
        proj_r, proj_a = by.get(("project_decode_reuse", b, kv)), by.get(("project_decode_anchor", b, kv))
        meas = float(dense["median_us"])

        def mix(d: float, a: float, r: float) -> float:
            return 32 * d / (d + 4 * a + 27 * r)

        pd, pr, pa = (float(x["predicted_us"]) for x in (dense, reuse, anchor))
        proj = ("—" if proj_r is None else f"{meas / float(proj_r['median_us']):.2f}x",
                "—" if proj_a is None else f"{mix(meas, float(proj_a['median_us']), float(proj_r['median_us'])):.2f}x")
        out.append(f"| {b} | {kv} | {meas:.0f} | {meas / float(reuse['median_us']):.2f}x / {proj[0]} / {pd / pr:.2f}x "
                   f"| {mix(meas, float(anchor['median_us']), float(reuse['median_us'])):.2f}x / {proj[1]} / "
                   f"{mix(pd, pa, pr):.2f}x |")
    return out


def _plot(compared: list[dict], held: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6.5))
    for i, (label, kinds) in enumerate(GROUPS.items()):
        pts = [(float(r["median_us"]), r["predicted_us"]) for r in compared
               if r["kind"] in kinds and r["predicted_us"] is not None and r["set"] == "prediction"]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=14, label=label, color=f"C{i}")
    cal = [(float(r["median_us"]), r["predicted_us"]) for r in compared
           if r["set"] == "calibration" and r["predicted_us"] is not None]
    ax.scatter(*zip(*cal, strict=True), s=30, marker="x", color="k", label="calibration (fitted)")
    pts = [(float(r["median_us"]), r["predicted_us"]) for r in held if r["predicted_us"] is not None]
    ax.scatter(*zip(*pts, strict=True), s=40, facecolors="none", edgecolors="r", label="held-out run (all kinds)")
    parity_axes(ax, 1.0, 1e6, "H100: predicted vs measured", xlabel="measured on H100 (us)", legend_size=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parity_axes(ax, lo: float, hi: float, title: str, *, xlabel: str = "measured (us)",
                title_size: float | None = None, legend_size: float | None = 7,
                bands: tuple[float, ...] = (0.15,)) -> None:
    """A log-log parity plot's frame: y = x and the ±``bands`` lines, the first dotted, the next
    dashed (also used by compare_sweep.py and collectives_parity.py); ``legend_size`` None: no
    legend."""
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    styles = ("dotted", "dashed")
    for band, style in zip(bands, styles, strict=False):
        for f in (1 - band, 1 + band):
            ax.plot([lo, hi], [lo * f, hi * f], color="k", linestyle=style, lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rdusim predicted (us)")
    lines = ", ".join(f"{style}: ±{band * 100:.0f}%" for band, style in zip(bands, styles, strict=False))
    ax.set_title(f"{title} ({lines})", fontsize=title_size)
    if legend_size is not None:
        ax.legend(fontsize=legend_size)


if __name__ == "__main__":
    raise SystemExit(main())
