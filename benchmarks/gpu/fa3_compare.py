"""Run bn (issue 17, P12): FlashAttention-3's forward on one H200 against the model, frozen first.

    PYTHONPATH=. python benchmarks/gpu/fa3_compare.py --frozen benchmarks/gpu/h200-20261129bn-fa3-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_compare.py --compare benchmarks/gpu/h200-20261129bn-fa3.csv \\
        --kernels benchmarks/gpu/h200-20261129bn-fa3-kernels.csv.gz --predicted benchmarks/gpu/h200-20261129bn-fa3-predicted.txt

``--frozen``: the model's time for every point of ``fa3_points`` on ``hw_configs/h200.yaml``
(``predict_row``: ``flash3_prefill`` timed alone, as ``sweep.py`` times it), a Markdown table read
back by ``measured.read_frozen``. ``--compare``: each measured row against the model now and the
frozen prediction, by group (the paper's four columns, the MLA shape, its varlen calls, GQA), the
H200's TFLOP/s beside the paper's H100 figures (G4 Fig. 5), and the tiles the profiled kernels ran.
``--refit``: ``fit_fa3``'s two constants refitted to run bn's paper-shape causal rows at head_dim 128
and 64 (``REFIT_CALIBRATION``, chosen after the run: the columns the H100 fit used), every row
against the refit, and the paper's H100 figures against it (not adopted: docs/gpu.md, "Run bn").
"""

from __future__ import annotations

import argparse
import csv
import gzip
import re
import statistics
import sys
from pathlib import Path

from rdusim.analysis.gpu.measured import compare_fa3_published, read_csv, read_frozen
from rdusim.analysis.gpu.predict import FA3_PUBLISHED_CSV, fa3_spec, fit_fa3, predict_row, row_extra
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import fa3_fwd_tile

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (the points, beside this file)

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "hw_configs/h200.yaml"


def point_row(point: tuple) -> dict:
    """The CSV row ``sweep.py`` records for one point, before its time is known."""
    b, h, hkv, hd, hdv, n, causal, api = point
    return {"set": "prediction", "kind": "fa3_prefill", "name": f3.name(point), "batch": b, "q_heads": h,
            "kv_heads": hkv, "head_dim": hd, "seq_len": n, "mode": "causal" if causal else "noncausal",
            "extra": f"head_dim_v={hdv};api={api}"}


def group(row: dict) -> str:
    extra = row_extra(row)
    if row["name"].startswith("fa3_varlen"):
        return "MLA 192 / 128, varlen"
    if extra.get("head_dim_v") == "128" and row["head_dim"] == "192":
        return "MLA 192 / 128"
    if row["q_heads"] != row["kv_heads"]:
        return "GQA"
    return f"paper hd{row['head_dim']} {row['mode']}"


def frozen(out: Path) -> None:
    gpu = Gpu(load_spec(H200, GpuSpec))
    lines = ["| row | predicted us |", "|---|---:|"]
    lines += [f"| {f3.name(p)} | {predict_row(point_row(p), gpu) * 1e6:.1f} |" for p in f3.POINTS]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(f3.POINTS)} rows)")


def compare(csv_path: Path, kernels: Path | None, predicted: Path | None) -> None:
    gpu = Gpu(load_spec(H200, GpuSpec))
    rows = [r for r in read_csv(csv_path) if r["kind"] == "fa3_prefill"]
    fro = read_frozen(predicted) if predicted else {}
    paper = {(r["head_dim"], r["mode"], r["seq_len"]): float(r["tflops"])
             for r in read_csv(ROOT / "benchmarks/gpu" / FA3_PUBLISHED_CSV)}
    print("| row | measured us | TFLOP/s | G4 H100 TFLOP/s | model now us | error | frozen us | frozen error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    by: dict[str, list[float]] = {}
    for r in rows:
        t = float(r["median_us"])
        now = predict_row(r, gpu) * 1e6
        f = fro.get(r["name"])
        tf = float(r["flops"]) / t / 1e6
        pub = paper.get((r["head_dim"], r["mode"], r["seq_len"])) if group(r).startswith("paper") else None
        by.setdefault(group(r), []).append(now / t - 1)
        print(f"| {r['name']} | {t:.1f} | {tf:.0f} | {pub if pub else ''} | {now:.1f} | {now / t - 1:+.1%} | "
              + (f"{f:.1f} | {f / t - 1:+.1%} |" if f else " | |"))
    print()
    for name, errs in by.items():
        print(f"{name}: {len(errs)} rows, median |error| {statistics.median(map(abs, errs)):.1%}, "
              f"worst {max(errs, key=abs):+.1%}")
    errs = [e for v in by.values() for e in v]
    print(f"all: {len(errs)} rows, median |error| {statistics.median(map(abs, errs)):.1%}, worst {max(errs, key=abs):+.1%}")
    if kernels:
        print("\n# profiled kernels (name's tile, device us) and the model's tile")
        opener = gzip.open if kernels.suffix == ".gz" else open
        with opener(kernels, "rt") as fh:
            for k in csv.DictReader(fh):
                shape = re.findall(r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)>", k["kernel"])
                r = next(x for x in rows if x["name"] == k["row"])
                hd, hdv = int(r["head_dim"]), int(row_extra(r).get("head_dim_v", r["head_dim"]))
                print(f"{k['row']}: {k['kernel'][:160]} ... tiles {shape[:2]} {k['device_us']} us; "
                      f"model {fa3_fwd_tile(hd, hdv, r['mode'] == 'causal')}")


#: run bn's rows at the paper's causal head_dim-128 and -64 shapes (``--refit``'s calibration)
REFIT_CALIBRATION = tuple(f3.name(p) for p in f3.PAPER_POINTS if p[6] and p[3] in (64, 128))


def refit(csv_path: Path) -> None:
    spec = load_spec(H200, GpuSpec)
    rows = [r for r in read_csv(csv_path) if r["kind"] == "fa3_prefill"]
    cal = [r for r in rows if r["name"] in REFIT_CALIBRATION]
    fit = fit_fa3(cal, spec, time_s=lambda r: float(r["median_us"]) * 1e-6, predict=predict_row)
    overlap, tile_us = fit["fa3_overlap"], fit["fa3_tile_us"]
    print(f"refit on {len(cal)} rows: fa3_overlap {overlap}, fa3_tile {tile_us} us (loss {fit['loss']:.4f})")
    gpu = Gpu(fa3_spec(spec, overlap, tile_us * 1e-6))
    by: dict[str, list[float]] = {}
    for r in rows:
        err = predict_row(r, gpu) / (float(r["median_us"]) * 1e-6) - 1
        by.setdefault(("calibration: " if r["name"] in REFIT_CALIBRATION else "") + group(r), []).append(err)
    for name, errs in by.items():
        print(f"{name}: {len(errs)} rows, {' '.join(f'{e:+.1%}' for e in errs)}")
    h100 = Gpu(fa3_spec(load_spec(ROOT / "hw_configs/h100.yaml", GpuSpec), overlap, tile_us * 1e-6))
    errs = [c["err"] for c in compare_fa3_published(read_csv(ROOT / "benchmarks/gpu" / FA3_PUBLISHED_CSV), h100)]
    print(f"G4 Fig. 5 (H100) with the refit: median |error| {statistics.median(map(abs, errs)):.1%}, "
          f"worst {max(errs, key=abs):+.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", type=Path, help="write the model's predictions here")
    ap.add_argument("--compare", type=Path, help="the run's CSV")
    ap.add_argument("--kernels", type=Path)
    ap.add_argument("--predicted", type=Path)
    ap.add_argument("--refit", type=Path, help="refit the two constants on this run's CSV (not adopted)")
    args = ap.parse_args()
    if args.refit:
        refit(args.refit)
    if args.frozen:
        frozen(args.frozen)
    if args.compare:
        compare(args.compare, args.kernels, args.predicted)


if __name__ == "__main__":
    main()
