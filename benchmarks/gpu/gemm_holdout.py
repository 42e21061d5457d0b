"""Held-out GEMMs (``sweep.py --only gemm_holdout``, run ag): freeze the model's predictions before
the run, then compare the run with the frozen file (never refitted on these rows).

    PYTHONPATH=. python benchmarks/gpu/gemm_holdout.py predict > benchmarks/gpu/h100-20261128ag-gemm-holdout-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/gemm_holdout.py compare > benchmarks/gpu/h100-20261128ag-gemm-holdout-compare.txt

``--gpu h100-repeat``: run ai, run ag's shapes again on another H100 lease (asked for an H200, got
an H100), against run ag's frozen file. ``--gpu h200``: the same shapes frozen for the H200 by
hw_configs/h200.yaml (never fitted on an H200), for run aj (measured on an H200 2026-11-28 06:05
UTC, ``gemm_holdout_run_aj.sh``; run k's sweep is the earlier sweep of the swept shapes).

``predict``: every row of ``gemm_shapes.holdout_shapes()`` (nothing measured is read) by
hw_configs/h100.yaml in the mode compare_sweep.py compares sweep.py's GEMM rows in
(``predict_row``: one call timed alone after the 256 MB flush), with the tile and split-K the
model picks (``gemm_plan``). ``compare``: the run's CSV against the frozen file by family, m
band, TP and call length, and against the one call the second pass profiled (``-kernels.csv``).
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemm_shapes import holdout_shapes  # noqa: E402

from rdusim.analysis.gpu.predict import predict_row  # noqa: E402
from rdusim.config.loader import load_spec  # noqa: E402
from rdusim.config.schema import GpuSpec  # noqa: E402
from rdusim.hw.gpu import Gpu  # noqa: E402
from rdusim.mapping.gpu import gemm_plan  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPEC = "hw_configs/h100.yaml"
RUN = "benchmarks/gpu/h100-20261128ag-gemm-holdout.csv"
KERNELS = "benchmarks/gpu/h100-20261128ag-gemm-holdout-kernels.csv"
FROZEN = "benchmarks/gpu/h100-20261128ag-gemm-holdout-predicted.txt"
RUN_A = "benchmarks/gpu/h100-20261125-sweep.csv"


@dataclass(frozen=True)
class HoldoutRun:
    """One GPU's held-out run: its document, its run's files and the earlier sweep of the swept shapes."""

    label: str
    spec: str
    run: str
    kernels: str
    frozen: str
    baseline: str
    baseline_label: str


RUNS = {
    "h100": HoldoutRun("run ag", SPEC, RUN, KERNELS, FROZEN, RUN_A, "run a"),
    "h100-repeat": HoldoutRun(
        "run ai",
        SPEC,
        "benchmarks/gpu/h100-20261128ai-gemm-holdout.csv",
        "benchmarks/gpu/h100-20261128ai-gemm-holdout-kernels.csv",
        FROZEN,
        RUN_A,
        "run a",
    ),
    "h200": HoldoutRun(
        "run aj",
        "hw_configs/h200.yaml",
        "benchmarks/gpu/h200-20261128aj-gemm-holdout.csv",
        "benchmarks/gpu/h200-20261128aj-gemm-holdout-kernels.csv",
        "benchmarks/gpu/h200-20261128aj-gemm-holdout-predicted.txt",
        "benchmarks/gpu/h200-20261125k-sweep.csv",
        "run k",
    ),
}
FIELDS = ["name", "family", "tp", "op", "m", "n", "k", "bn", "bm", "splits", "predicted_us"]
#: m bands and call lengths (measured median, us) the comparison is split by
M_BANDS = ((1, 16), (17, 128), (129, 1024), (1025, 8192))
LENGTHS = (
    ("under 0.1 ms", 0, 100),
    ("0.1-0.5 ms", 100, 500),
    ("0.5-2 ms", 500, 2000),
    ("over 2 ms", 2000, 1e12),
)


def predicted_rows(gpu: Gpu) -> list[dict]:
    out = []
    for fam, tp, op, n, k, m in holdout_shapes():
        row = {"set": "holdout", "kind": "gemm", "m": str(m), "n": str(n), "k": str(k)}
        p = gemm_plan(m, n, k, gpu)
        out.append(
            {
                "name": f"{fam}_tp{tp}_{op}_m{m}",
                "family": fam,
                "tp": tp,
                "op": op,
                "m": m,
                "n": n,
                "k": k,
                "bn": p.bn,
                "bm": p.bm,
                "splits": p.splits,
                "predicted_us": f"{predict_row(row, gpu) * 1e6:.3f}",
            }
        )
    return out


def predict(which: HoldoutRun = RUNS["h100"]) -> list[str]:
    gpu = Gpu(load_spec(ROOT / which.spec, GpuSpec))
    lines = [
        f"# GEMM predictions of rdusim's GPU model ({which.spec}; stream mode: one call timed alone after the 256 MB "
        f"flush, compare_sweep.py's predict_row), frozen before {which.label} measured these shapes "
        "(sweep.py --only gemm_holdout); bn x bm, splits: the model's tile and split-K",
        ",".join(FIELDS),
    ]
    for r in predicted_rows(gpu):
        lines.append(",".join(str(r[f]) for f in FIELDS))
    return lines


def read_frozen(path: Path) -> dict[str, dict]:
    lines = [line for line in path.open() if not line.startswith("#")]
    return {r["name"]: r for r in csv.DictReader(lines)}


def _stats(errs: list[float]) -> str:
    if not errs:
        return "| 0 | — | — | — |"
    a = [abs(e) for e in errs]
    return (
        f"| {len(a)} | {statistics.median(a) * 100:.1f}% | {max(a) * 100:.1f}% | "
        f"{statistics.median(errs) * 100:+.1f}% |"
    )


def _tile(kernel: str) -> tuple[int, int] | None:
    """(BN, BM) of an nvjet kernel name ``nvjet_sm90_tst_AxB_...``: A along n, B along m, for
    ``TNT`` and ``TNN`` kernels alike (run aj: Nsight's DRAM bytes of ``448x64 TNN`` at m = 192,
    1.75x the unique operands, are three m blocks of 64 re-reading the weight; of run aj's
    diagnostic launch grids, 74 TNN and 133 TNT equal this reading's tile count, clusters
    padded, and none only the other's; docs/gpu.md, run aj)."""
    hit = re.search(r"nvjet_sm\d+_\w*?_(\d+)x(\d+)_", kernel)
    if not hit:
        return None
    return int(hit[1]), int(hit[2])


def compare(
    run: Path, kernels_path: Path, frozen_path: Path, which: HoldoutRun = RUNS["h100"]
) -> list[str]:
    frozen = read_frozen(frozen_path)
    rows = [r for r in csv.DictReader(run.open()) if r["kind"] == "gemm" and r["set"] == "holdout"]
    missing = sorted(set(frozen) - {r["name"] for r in rows})
    c = []
    for r in rows:
        f = frozen[r["name"]]  # a measured row the frozen file lacks is an error: KeyError
        t, p = float(r["median_us"]), float(f["predicted_us"])
        c.append({**f, "t": t, "p": p, "err": p / t - 1})
    head = "| rows | median abs error | worst | median signed |"
    out = [
        f"# {which.label} (held-out GEMMs) against the frozen predictions ({frozen_path.name}); measured: {run.name}",
        f"# {len(c)} rows measured, {len(missing)} frozen rows not measured",
        "",
        f"| all held-out rows {head}",
        "|---|---:|---:|---:|---:|",
        f"| all {_stats([x['err'] for x in c])}",
    ]
    for label, lo, hi in LENGTHS:
        out.append(f"| measured call {label} {_stats([x['err'] for x in c if lo <= x['t'] < hi])}")
    out.append(f"| all but the calls over 2 ms {_stats([x['err'] for x in c if x['t'] < 2000])}")
    device, names = _profiled(kernels_path)
    off = [
        x
        for x in c
        if x["name"] in device
        and x["t"] > 2 * device[x["name"]]
        and x["t"] - device[x["name"]] > 20
    ]
    out.append(
        f"| all but the {len(off)} rows timed over 2x (and 20 us over) their profiled call "
        f"{_stats([x['err'] for x in c if x not in off])}"
    )
    out += _grouped(c, head)
    out += _baseline_lines(run, which)
    out += _profiled_lines(c, device, names)
    out += [
        "",
        "| worst rows | m | n | k | measured (us) | predicted (us) | error | model tile, splits | cuBLAS kernel |",
        "|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for x in sorted(c, key=lambda x: -abs(x["err"]))[:15]:
        kern = next(
            (n for n in names.get(x["name"], []) if n.startswith("nvjet")), "(not profiled)"
        )
        out.append(
            f"| {x['name']} | {x['m']} | {x['n']} | {x['k']} | {x['t']:.1f} | {x['p']:.1f} | "
            f"{x['err'] * 100:+.1f}% | {x['bn']} x {x['bm']}, {x['splits']} | {kern} |"
        )
    if missing:
        out += [
            "",
            "Frozen rows not measured: "
            + ", ".join(missing[:40])
            + (" ..." if len(missing) > 40 else ""),
        ]
    return out


def _grouped(c: list[dict], head: str) -> list[str]:
    """The rows by family, m band, TP and op."""
    out: list[str] = []
    out += ["", f"| family {head}", "|---|---:|---:|---:|---:|"]
    for fam in dict.fromkeys(x["family"] for x in c):
        out.append(f"| {fam} {_stats([x['err'] for x in c if x['family'] == fam])}")
    out += ["", f"| m {head}", "|---|---:|---:|---:|---:|"]
    for lo, hi in M_BANDS:
        out.append(f"| {lo}-{hi} {_stats([x['err'] for x in c if lo <= int(x['m']) <= hi])}")
    out += ["", f"| TP {head}", "|---|---:|---:|---:|---:|"]
    for tp in sorted({int(x["tp"]) for x in c}):
        out.append(f"| {tp} {_stats([x['err'] for x in c if int(x['tp']) == tp])}")
    out += ["", f"| op {head}", "|---|---:|---:|---:|---:|"]
    for op in dict.fromkeys(x["op"] for x in c):
        out.append(f"| {op} {_stats([x['err'] for x in c if x['op'] == op])}")
    return out


def _baseline_lines(run: Path, which: HoldoutRun) -> list[str]:
    """The ``gemm`` section's shapes measured again in the same call (if the run has them): today's
    model on them (explained after measurement: it was refitted after runs a/b) and the time
    against the earlier sweep's (run a on the H100, run k on the H200), to tell this machine from that one."""
    rows = [
        r
        for r in csv.DictReader(run.open())
        if r["kind"] == "gemm" and r["set"] in ("calibration", "prediction")
    ]
    if not rows:
        return []
    gpu = Gpu(load_spec(ROOT / which.spec, GpuSpec))
    run_a = {
        r["name"]: float(r["median_us"])
        for r in csv.DictReader((ROOT / which.baseline).open())
        if r["kind"] == "gemm"
    }
    errs = [predict_row(r, gpu) / (float(r["median_us"]) * 1e-6) - 1 for r in rows]
    ratio = [float(r["median_us"]) / run_a[r["name"]] for r in rows if r["name"] in run_a]
    return [
        "",
        "| the gemm section again, same call (swept shapes, not held out) | rows | median abs error | worst | median signed |",
        "|---|---:|---:|---:|---:|",
        f"| today's model {_stats(errs)}",
        "",
        f"Measured / {which.baseline_label}'s measurement, same shape: median {statistics.median(ratio):.3f} over {len(ratio)} rows "
        f"(middle half {sorted(ratio)[len(ratio) // 4]:.3f}-{sorted(ratio)[3 * len(ratio) // 4]:.3f}).",
    ]


def _profiled(kernels_path: Path) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each profiled row's device time (every kernel of the call summed, as compare_sweep's
    gemm_clock_section) and kernel names."""
    device: dict[str, float] = {}
    names: dict[str, list[str]] = {}
    if kernels_path.exists():
        for k in csv.DictReader(kernels_path.open()):
            device[k["row"]] = device.get(k["row"], 0.0) + float(k["device_us"])
            names.setdefault(k["row"], []).append(k["kernel"])
    return device, names


def _profiled_lines(
    c: list[dict], device: dict[str, float], names: dict[str, list[str]]
) -> list[str]:
    """The model against the one call the second pass profiled, and its tile and split-K against
    the kernel cuBLAS ran."""
    out: list[str] = []
    prof = [x for x in c if x["name"] in device]
    out += [
        "",
        "| profiled call (second pass) | rows | timed / profiled (median) | model vs profiled: median abs | "
        "worst | median signed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, lo, hi in (("all", 0, 1e12), *LENGTHS):
        g = [x for x in prof if lo <= device[x["name"]] < hi]
        if g:
            ratio = statistics.median(x["t"] / device[x["name"]] for x in g)
            rest = _stats([x["p"] / device[x["name"]] - 1 for x in g]).split("|", 2)[2]
            out.append(f"| {label} | {len(g)} | {ratio:.3f} |{rest}")
    # the model's tile and split-K against the kernel cuBLAS ran
    same_tile = either = same_split = tiled = 0
    for x in prof:
        main = next((n for n in names[x["name"]] if n.startswith("nvjet")), None)
        if main is None:
            continue
        tiled += 1
        tile, mine = _tile(main), (int(x["bn"]), int(x["bm"]))
        same_tile += tile == mine
        either += tile in (mine, mine[::-1])
        same_split += ("splitK" in main) == (int(x["splits"]) > 1)
    if tiled:
        out += [
            "",
            f"Profiled rows with an nvjet kernel: {tiled}; the model's tile (BN along n x BM along m) is "
            f"cuBLAS's in {same_tile} ({either} with the two sides in either orientation), its split-K "
            f"choice (split or not) in {same_split}. Under 0.1 ms the timed median also holds the flush's "
            "write-backs and the launch, which the profiled kernel does not.",
        ]
    return out


def main(argv: list[str]) -> int:
    gpu = "h100"
    if argv[1:2] == ["--gpu"] and len(argv) == 3 and argv[2] in RUNS:
        gpu, argv = argv[2], argv[:1]
    which = RUNS[gpu]
    if argv == ["predict"]:
        print("\n".join(predict(which)))
        return 0
    if argv == ["compare"]:
        print(
            "\n".join(compare(ROOT / which.run, ROOT / which.kernels, ROOT / which.frozen, which))
        )
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
