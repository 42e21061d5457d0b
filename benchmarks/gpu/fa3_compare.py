"""Runs bn and bq (issue 17, P12): FlashAttention-3's forward on one H200 against the model, frozen first.

    PYTHONPATH=. python benchmarks/gpu/fa3_compare.py --points bq --frozen benchmarks/gpu/h200-20261129bq-fa3-predicted.txt
    PYTHONPATH=. python benchmarks/gpu/fa3_compare.py --compare benchmarks/gpu/h200-20261129bn-fa3.csv \\
        --kernels benchmarks/gpu/h200-20261129bn-fa3-kernels.csv.gz --predicted benchmarks/gpu/h200-20261129bn-fa3-predicted.txt

``--frozen``: the model's time for every point of ``fa3_points`` (``--points``: run bn's ``POINTS``
or run bq's ``BQ_POINTS``, whose ``_idle`` rows get the same prediction: the model runs every
kernel at full clock) on ``hw_configs/h200.yaml`` (``predict_row``: ``flash3_prefill`` timed alone,
as ``sweep.py`` times it), a Markdown table read back by ``measured.read_frozen``. ``--compare``:
each measured row against the model now and the frozen prediction, by group (the paper's four
columns, the MLA shape, its varlen calls, GQA; run bn's 12 rows ``fit_fa3_tile`` read, named), the
H200's TFLOP/s beside the paper's H100 figures (G4 Fig. 5), and the tiles the profiled kernels ran.
``--clock``: the run's rows as ``sweep.py`` timed them (two warm-ups, one call, the repetitions; a
call after idle after its idle), in the run's order on one opt-in SM clock (``SmClock``, the H200
document's ``clock`` section), the median of the repetitions against the measured median, beside
the full-clock model, for the rows over ``CLOCK_REPORT_US`` (explained after measurement: FA3 in
the clock model's GEMM class, docs/gpu.md "Run bq").
``--varlen``: run br's pairs, ``flash_attn_varlen_func`` over ``flash_attn_func`` at each point, beside
the list schedule of the two schedulers' tile orders (``order_ratio``; the check registered in
``h200-20261129br-fa3-hypotheses.md``).
(Run bn's ``h200-20261129bn-fa3-refit.txt`` was written by this script's ``--refit`` before the
pipe law, at 17b1fab: the old structure refitted, not adopted.)
"""

from __future__ import annotations

import argparse
import csv
import gzip
import heapq
import math
import re
import statistics
import sys
from pathlib import Path

from rdusim.analysis.gpu.measured import read_csv, read_frozen
from rdusim.analysis.gpu.predict import (
    FA3_PUBLISHED_CSV,
    is_fa3_calibration,
    predict_row,
    row_extra,
    row_kernels,
)
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu
from rdusim.hw.gpu_clock import SmClock
from rdusim.mapping.gpu import fa3_fwd_tile
from rdusim.sim.gpu import elapsed_s, simulate_gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fa3_points as f3  # noqa: E402  (the points, beside this file)

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "hw_configs/h200.yaml"
POINTS = {"bn": f3.POINTS, "bq": f3.BQ_POINTS, "by": f3.BY_PREFILL}


def point_row(point: tuple) -> dict:
    """The CSV row ``sweep.py`` records for one point, before its time is known."""
    b, h, hkv, hd, hdv, n, causal, api = point
    return {"set": "prediction", "kind": "fa3_prefill", "name": f3.name(point), "batch": b, "q_heads": h,
            "kv_heads": hkv, "head_dim": hd, "seq_len": n, "mode": "causal" if causal else "noncausal",
            "extra": f"head_dim_v={hdv};api={api}"}


#: run bn's rows, by name: run bq repeats three of its shapes (the paper's at 4 x 4K, head_dim 64 and
#: 256 causal, 128 non-causal), compared apart from the new ones
RUN_BN_NAMES = frozenset(f3.name(p) for p in f3.POINTS)


def group(row: dict, run_bq: bool = False) -> str:
    extra = row_extra(row)
    if "after_idle_s" in extra:
        return "one call after idle"
    if run_bq and row["name"] in RUN_BN_NAMES:
        return "a run bn shape again"
    if is_fa3_calibration(row):
        return f"paper hd{row['head_dim']} causal (calibration: fa3_tile)"
    if row["name"].startswith("fa3_varlen"):
        return "MLA 192 / 128, varlen"
    if extra.get("head_dim_v") == "128" and row["head_dim"] == "192":
        return "MLA 192 / 128"
    if row["q_heads"] != row["kv_heads"]:
        return "GQA"
    return f"paper hd{row['head_dim']} {row['mode']}"


def frozen(out: Path, run: str) -> None:
    gpu = Gpu(load_spec(H200, GpuSpec))
    lines = ["| row | predicted us |", "|---|---:|"]
    for p in POINTS[run]:
        us = predict_row(point_row(p), gpu) * 1e6
        lines.append(f"| {f3.name(p)} | {us:.1f} |")
        if run == "bq":
            lines.append(f"| {f3.name(p)}_idle | {us:.1f} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(lines) - 2} rows)")


def compare(csv_path: Path, kernels: Path | None, predicted: Path | None) -> None:
    gpu = Gpu(load_spec(H200, GpuSpec))
    rows = [r for r in read_csv(csv_path) if r["kind"] == "fa3_prefill"]
    fro = read_frozen(predicted) if predicted else {}
    paper = {(r["head_dim"], r["mode"], r["seq_len"]): float(r["tflops"])
             for r in read_csv(ROOT / "benchmarks/gpu" / FA3_PUBLISHED_CSV)}
    print("| row | measured us | TFLOP/s | G4 H100 TFLOP/s | model now us | error | frozen us | frozen error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    by: dict[str, list[float]] = {}
    run_bq = any("after_idle_s" in row_extra(r) for r in rows)
    for r in rows:
        t = float(r["median_us"])
        now = predict_row(r, gpu) * 1e6
        f = fro.get(r["name"])
        tf = float(r["flops"]) / t / 1e6
        pub = paper.get((r["head_dim"], r["mode"], r["seq_len"])) if group(r).startswith("paper") else None
        by.setdefault(group(r, run_bq), []).append(now / t - 1)
        print(f"| {r['name']} | {t:.1f} | {tf:.0f} | {pub if pub else ''} | {now:.1f} | {now / t - 1:+.1%} | "
              + (f"{f:.1f} | {f / t - 1:+.1%} |" if f else " | |"))
    print()
    for name, errs in by.items():
        print(f"{name}: {len(errs)} rows, median |error| {statistics.median(map(abs, errs)):.1%}, "
              f"worst {max(errs, key=abs):+.1%}")
    errs = [e for v in by.values() for e in v]
    print(f"all: {len(errs)} rows, median |error| {statistics.median(map(abs, errs)):.1%}, worst {max(errs, key=abs):+.1%}")
    if run_bq:
        bq_checks(rows, fro)
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


#: run bq's registered split: a kernel under this long ran at full clock, a longer one sustained
BQ_LONG_US = 5000.0


def bq_checks(rows: list[dict], fro: dict[str, float]) -> None:
    """Run bq's registered checks 2-5 (``h200-20261129bq-fa3-hypotheses.md``) on its frozen predictions,
    the three repeats of run bn's shapes aside."""
    t = {r["name"]: float(r["median_us"]) for r in rows}
    err = {n: fro[n] / us - 1 for n, us in t.items()}
    new = [r for r in rows if "after_idle_s" not in row_extra(r) and r["name"] not in RUN_BN_NAMES]
    hd64 = [r["name"] for r in new if r["head_dim"] == "64"]
    short = [r["name"] for r in new if t[r["name"]] < BQ_LONG_US and r["head_dim"] != "64"]
    long = [r["name"] for r in new if t[r["name"]] >= BQ_LONG_US]

    def stats(names: list[str]) -> str:
        e = [err[n] for n in names]
        return f"{len(e)} rows, median |error| {statistics.median(map(abs, e)):.1%}, worst {max(e, key=abs):+.1%}"

    print(f"\n# run bq's checks (frozen predictions; {len(new)} new shapes, "
          f"{len(rows) // 2 - len(new)} of run bn's again)")
    e2 = [err[n] for n in short]
    ok2 = statistics.median(map(abs, e2)) <= 0.10 and max(map(abs, e2)) <= 0.15
    print(f"2. under {BQ_LONG_US / 1000:.0f} ms, head_dim 64 aside: {stats(short)}: {'passes' if ok2 else 'misses'}")
    ok3 = all(-0.15 <= err[n] <= -0.03 for n in long)
    print(f"3. over {BQ_LONG_US / 1000:.0f} ms, each -15% to -3%: " + ", ".join(f"{n} {err[n]:+.1%}" for n in long)
          + f": {'passes' if ok3 else 'misses'}")
    idle = statistics.median(abs(err[n + '_idle']) for n in long)
    back = statistics.median(abs(err[n]) for n in long)
    print(f"4. over {BQ_LONG_US / 1000:.0f} ms, one call after idle against back to back: median |error| "
          f"{idle:.1%} against {back:.1%} (" + ", ".join(f"{err[n + '_idle']:+.1%}" for n in long)
          + f"): {'passes' if idle < back else 'misses'}")
    ok5 = all(0.03 <= err[n] <= 0.15 for n in hd64)
    print("5. head_dim 64, each +3% to +15%: " + ", ".join(f"{n} {err[n]:+.1%}" for n in hd64)
          + f": {'passes' if ok5 else 'misses'}")


#: ``--clock`` reports the rows measured this long or longer (shorter ones finish inside a fall window)
CLOCK_REPORT_US = 3000.0


def clocked_rows(rows: list[dict], gpu: Gpu) -> list[tuple[dict, float, float]]:
    """(row, full-clock model us, model us on one ``SmClock`` timed as ``sweep.py`` times it) for
    ``rows`` in their order; a call after idle: one call after ``after_idle_s`` of idle."""
    clock = SmClock(gpu.spec.clock)
    out = []
    for r in rows:
        kernels = [(k, 0) for k in row_kernels(r, gpu)]
        full = elapsed_s(simulate_gpu(kernels, gpu, mode="stream")) * 1e6
        extra = row_extra(r)
        if "after_idle_s" in extra:
            clock.idle(float(extra["after_idle_s"]))
            out.append((r, full, elapsed_s(simulate_gpu(kernels, gpu, mode="stream", clock=clock)) * 1e6))
            continue
        calls = [elapsed_s(simulate_gpu(kernels, gpu, mode="stream", clock=clock)) for _ in range(3 + int(r["reps"]))]
        out.append((r, full, statistics.median(calls[3:]) * 1e6))
    return out


def clock(csv_path: Path) -> None:
    gpu = Gpu(load_spec(H200, GpuSpec))
    rows = [r for r in read_csv(csv_path) if r["kind"] == "fa3_prefill"]
    print("| row | measured us | full clock us | error | sustained clock us | error |")
    print("|---|---:|---:|---:|---:|---:|")
    back: list[tuple[float, float]] = []
    for r, full, at_clock in clocked_rows(rows, gpu):
        t = float(r["median_us"])
        if t < CLOCK_REPORT_US:
            continue
        if "after_idle_s" not in row_extra(r):
            back.append((full / t - 1, at_clock / t - 1))
        print(f"| {r['name']} | {t:.0f} | {full:.0f} | {full / t - 1:+.1%} | {at_clock:.0f} | {at_clock / t - 1:+.1%} |")
    for i, label in enumerate(("full clock", "sustained clock")):
        e = [b[i] for b in back]
        print(f"\nback to back, {len(e)} rows, {label}: median |error| {statistics.median(map(abs, e)):.1%}, "
              f"worst {max(e, key=abs):+.1%}", end="")
    print()


def _list_schedule(costs: list[float], sms: int, fixed: float) -> float:
    """The makespan of tiles handed out in order, each to the SM that frees first."""
    free = [0.0] * sms
    heapq.heapify(free)
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + c + fixed)
    return max(free)


def _section_order(heads: int, blocks: int, section: int) -> list[float]:
    """Key blocks of each tile in the order the schedulers hand them out: sections of ``section``
    heads, in each the longest query block of every head first (block-major, LPT)."""
    return [float(blocks - b) for s0 in range(0, heads, section) for b in range(blocks)
            for _ in range(min(section, heads - s0))]


def order_ratio(heads: int, n: int, d: int = 192, dv: int = 128, rows: int = 128, cols: int = 128,
                sms: int = 132, fixed_blocks: float = 0.5) -> float:
    """varlen / func makespan of a batch-1 causal call from the tile orders alone (vllm-project/
    flash-attention hopper/tile_scheduler.hpp and flash_prepare_scheduler.cu): func's sections of the
    largest power of 2 of heads whose K and V fit 32 MB; varlen's of 16, 8, 4, 2 or 1 heads whose key
    blocks fit 8 MB; a tile's time its key blocks plus ``fixed_blocks``."""
    blocks = n // rows
    kv_head = n * (d + dv) * 2
    swizzle = 1 if kv_head > 32 << 20 else 1 << int(math.log2((32 << 20) // kv_head))
    max_blocks = (8 << 20) // (cols * (d + dv) * 2)
    in_l2 = next((k for k in (16, 8, 4, 2) if blocks * k <= max_blocks), 1)
    func = _list_schedule(_section_order(heads, blocks, swizzle), sms, fixed_blocks)
    return _list_schedule(_section_order(heads, blocks, in_l2), sms, fixed_blocks) / func


def varlen(csv_path: Path) -> None:
    rows = {r["name"]: r for r in read_csv(csv_path) if r["kind"] == "fa3_prefill"}
    print("| heads | tokens | func us | varlen us | varlen / func | the orders' list schedule |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows.values():
        if not r["name"].startswith("fa3_func"):
            continue
        v = rows[r["name"].replace("fa3_func", "fa3_varlen")]
        h, n = int(r["q_heads"]), int(r["seq_len"])
        tf, tv = float(r["median_us"]), float(v["median_us"])
        print(f"| {h} | {n} | {tf:.1f} | {tv:.1f} | {tv / tf:.3f} | {order_ratio(h, n):.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frozen", type=Path, help="write the model's predictions here")
    ap.add_argument("--compare", type=Path, help="the run's CSV")
    ap.add_argument("--kernels", type=Path)
    ap.add_argument("--predicted", type=Path)
    ap.add_argument("--points", choices=sorted(POINTS), default="bn", help="--frozen: whose points")
    ap.add_argument("--clock", type=Path, help="the run's CSV on the opt-in SM clock")
    ap.add_argument("--varlen", type=Path, help="run br's CSV: varlen over func by point")
    args = ap.parse_args()
    if args.varlen:
        varlen(args.varlen)
    if args.clock:
        clock(args.clock)
    if args.frozen:
        frozen(args.frozen, args.points)
    if args.compare:
        compare(args.compare, args.kernels, args.predicted)


if __name__ == "__main__":
    main()
