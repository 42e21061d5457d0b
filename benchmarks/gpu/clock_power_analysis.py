"""Tables and the plot of ``clock_power.py``'s run (CPU only).

    python benchmarks/gpu/clock_power_analysis.py benchmarks/gpu/h100-20261125v-clock [--plot docs/img/gpu-clock-power.png]

Reads PREFIX-events.csv(.gz), PREFIX-nvml.csv and PREFIX-summary.csv; prints markdown tables:
per workload (kernel class) the cold call and clock, the burst's steady clock, power, temperature
and clock-event reasons, the burst's call time against the cold one and the exponent of the clock
ratio that explains it (1: the time scales as 1/f; 0: it does not move with the clock), the
within-burst fit of call time against 1/f, the recovery after the burst, and the crossed rows.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import statistics
import sys
from pathlib import Path

STEADY_S = 1.0          # the burst's last second is its steady state
FULL_MHZ = 1980.0       # the H100 SXM's boost clock (../shared/reference/hardware-and-models.md D.1)
SW_POWER_CAP, HW_SLOWDOWN, THERMAL = 0x4, 0x8 | 0x80, 0x20 | 0x40   # nvml.h clock-event reasons


def _open(path: Path):  # type: ignore[no-untyped-def]
    if path.exists():
        return path.open()
    gz = path.with_name(path.name + ".gz")
    return gzip.open(gz, "rt")


def load(prefix: str) -> tuple[list[dict[str, str]], list[dict[str, str]], list[dict[str, str]]]:
    p = Path(prefix)
    with _open(p.with_name(p.name + "-events.csv")) as fh:
        events = list(csv.DictReader(fh))
    with _open(p.with_name(p.name + "-nvml.csv")) as fh:
        nvml = list(csv.DictReader(fh))
    with _open(p.with_name(p.name + "-summary.csv")) as fh:
        summary = list(csv.DictReader(fh))
    return events, nvml, summary


def _phase(events: list[dict[str, str]], workload: str, phase: str) -> list[dict[str, str]]:
    return [e for e in events if e["workload"] == workload and e["phase"] == phase]


def _window(nvml: list[dict[str, str]], t0: float, t1: float) -> list[dict[str, str]]:
    return [s for s in nvml if t0 <= float(s["t"]) <= t1]


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def calls_with_clock(rows: list[dict[str, str]]) -> list[tuple[float, float, float]]:
    """(start s, call us, clock MHz): the clock the mean of the probes just before and after."""
    out = []
    for i, r in enumerate(rows):
        if r["kind"] != "call":
            continue
        around = [float(rows[j]["probe_mhz"]) for j in (i - 1, i + 1)
                  if 0 <= j < len(rows) and rows[j]["probe_mhz"] and rows[j]["kind"] != "probe2000000"]
        if around:
            out.append((float(r["t"]), float(r["us"]), sum(around) / len(around)))
    return out


def fit_inverse_clock(pts: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares t = a + b * (FULL_MHZ / f); returns (a, b) in us."""
    xs = [FULL_MHZ / f for _, _, f in pts]
    ys = [t for _, t, _ in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return my, 0.0
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - b * mx, b


def workload_row(events: list[dict[str, str]], nvml: list[dict[str, str]], name: str,
                 burst_phase: str = "burst") -> dict[str, float]:
    cold = _phase(events, name, "cold")
    burst = _phase(events, name, burst_phase)
    cold_calls = calls_with_clock(cold)
    pts = calls_with_clock(burst)
    t_start = float(burst[0]["t"])
    t_end = float(burst[-1]["t"]) + float(burst[-1]["us"]) * 1e-6
    steady = [p for p in pts if p[0] >= t_end - STEADY_S]
    probes = [(float(e["t"]), float(e["probe_mhz"])) for e in burst if e["probe_mhz"] and e["kind"] == "probe40000"]
    drop = next((t - t_start for t, f in probes if f < 0.97 * FULL_MHZ), float("nan"))
    win = _window(nvml, t_end - STEADY_S, t_end)
    whole = _window(nvml, t_start, t_end)
    r: dict[str, float] = {
        "cold_us": _med([c[1] for c in cold_calls]), "cold_mhz": _med([c[2] for c in cold_calls]),
        "burst_s": t_end - t_start, "burst_us": _med([p[1] for p in steady]), "burst_mhz": _med([p[2] for p in steady]),
        "burst_mhz_min": min((p[2] for p in pts), default=float("nan")),
        "drop_ms": drop * 1e3,
        "p_inst": _med([float(s["power_instant_w"]) for s in win]),
        "p_inst_max": max((float(s["power_instant_w"]) for s in whole), default=float("nan")),
        "p_avg": _med([float(s["power_avg_w"]) for s in win]),
        "nvml_mhz": _med([float(s["sm_mhz"]) for s in win]),
        "temp_max": max((float(s["temp_c"]) for s in whole), default=float("nan")),
        "power_cap_share": (sum(1 for s in whole if int(s["reasons"]) & SW_POWER_CAP) / len(whole)) if whole else float("nan"),
        "hw_share": (sum(1 for s in whole if int(s["reasons"]) & HW_SLOWDOWN) / len(whole)) if whole else float("nan"),
        "thermal_share": (sum(1 for s in whole if int(s["reasons"]) & THERMAL) / len(whole)) if whole else float("nan"),
    }
    tr, fr = r["burst_us"] / r["cold_us"], r["cold_mhz"] / r["burst_mhz"]
    r["time_ratio"], r["clock_ratio"] = tr, fr
    r["alpha"] = math.log(tr) / math.log(fr) if fr > 1.01 else float("nan")
    a, b = fit_inverse_clock(pts)
    r["fit_share"] = b / (a + b) if a + b else float("nan")   # share of a full-clock call that scales as 1/f
    r["fit_a"], r["fit_b"] = a, b
    rec = _phase(events, name, "recovery")
    if rec:
        t0 = float(rec[0]["t"])
        clocks = [(float(e["t"]) - t0, float(e["probe_mhz"])) for e in rec if e["probe_mhz"]]
        target = 0.98 * r["cold_mhz"]
        r["recover_ms"] = next((t for t, f in clocks if f >= target), float("nan")) * 1e3
        r["recover_first_mhz"] = clocks[0][1] if clocks else float("nan")
    return r


def tables(events: list[dict[str, str]], nvml: list[dict[str, str]]) -> list[str]:
    names = list(dict.fromkeys(e["workload"] for e in events if e["phase"] == "burst"))
    out = ["| workload | cold call (us) | clock around it (MHz) | burst, steady clock (probe, MHz) | NVML clock (MHz) | "
           "power, instantaneous (W) | max (W) | max temp (C) | power-cap reason | burst call (us) | burst / cold | "
           "cold clock / steady clock | back to 0.98 x cold clock (ms) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in names:
        r = workload_row(events, nvml, n)
        out.append(f"| `{n}` | {r['cold_us']:.0f} | {r['cold_mhz']:.0f} | {r['burst_mhz']:.0f} | {r['nvml_mhz']:.0f} | "
                   f"{r['p_inst']:.0f} | {r['p_inst_max']:.0f} | {r['temp_max']:.0f} | {r['power_cap_share'] * 100:.0f}% | "
                   f"{r['burst_us']:.0f} | {r['time_ratio']:.3f} | {r['clock_ratio']:.3f} | {r.get('recover_ms', float('nan')):.0f} |")
    thermal = max(workload_row(events, nvml, n)["thermal_share"] + workload_row(events, nvml, n)["hw_share"] for n in names)
    out.append(f"\n(steady: the burst's last {STEADY_S:.0f} s; thermal or HW-slowdown reason in any burst's samples: "
               f"{thermal * 100:.0f}%)")
    out += ["", "| row | after | calls | first 5 (us) | first 5: clock (MHz) | last 10 (us) | last 10: clock (MHz) | "
            "cold (us) | first 5 / cold | cold clock / first-5 clock (1/f) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e_phase in dict.fromkeys(e["phase"] for e in events if e["phase"].startswith("after_")):
        short = next(e["workload"] for e in events if e["phase"] == e_phase)
        pts = calls_with_clock(_phase(events, short, e_phase))
        base = workload_row(events, nvml, short)
        f5, l10 = pts[:5], pts[-10:]
        t5, c5 = _med([p[1] for p in f5]), _med([p[2] for p in f5])
        pred = base["cold_mhz"] / c5
        out.append(f"| `{short}` | `{e_phase[6:]}` burst | {len(pts)} | {t5:.0f} | {c5:.0f} | {_med([p[1] for p in l10]):.0f} | "
                   f"{_med([p[2] for p in l10]):.0f} | {base['cold_us']:.0f} | {t5 / base['cold_us']:.3f} | {pred:.3f} |")
    out += ["", "| workload: call time / cold call, by the probe clock around the call (MHz) | >= 1900 | 1800-1900 | "
            "1700-1800 | 1600-1700 | 1500-1600 | 1400-1500 | < 1400 |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    edges = (1900, 1800, 1700, 1600, 1500, 1400, 0)
    for n in names:
        base = workload_row(events, nvml, n)["cold_us"]
        pts = [p for e_phase in ("burst", "long_burst") + tuple(f"after_{m}" for m in names)
               for p in calls_with_clock(_phase(events, n, e_phase))]
        cells = []
        for i, lo in enumerate(edges):
            hi = edges[i - 1] if i else 1e9
            seg = [p[1] for p in pts if lo <= p[2] < hi]
            cells.append(f"{_med(seg) / base:.3f} ({len(seg)})" if len(seg) >= 3 else "")
        out.append(f"| `{n}` | " + " | ".join(cells) + " |")
    long_ = [e for e in events if e["phase"] == "long_burst"]
    if long_:
        name = long_[0]["workload"]
        pts = calls_with_clock(long_)
        t0 = pts[0][0]
        out += ["", f"| `{name}`, one {pts[-1][0] - t0:.0f} s burst | calls | call (us) | clock (MHz) | power, inst. (W) | temp (C) |",
                "|---|---:|---:|---:|---:|---:|"]
        for lo, hi in ((0, 0.1), (0.1, 0.5), (0.5, 1), (1, 2), (2, 4), (4, 6), (6, 9)):
            seg = [p for p in pts if lo <= p[0] - t0 < hi]
            if not seg:
                continue
            w = _window(nvml, t0 + lo, t0 + hi)
            out.append(f"| {lo}-{hi} s | {len(seg)} | {_med([p[1] for p in seg]):.0f} | {_med([p[2] for p in seg]):.0f} | "
                       f"{_med([float(s['power_instant_w']) for s in w]):.0f} | {_med([float(s['temp_c']) for s in w]):.0f} |")
    return out


def plot(events: list[dict[str, str]], nvml: list[dict[str, str]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(e["workload"] for e in events if e["phase"] == "burst"))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True)
    for n in names:
        burst = _phase(events, n, "burst") + _phase(events, n, "recovery")
        t0 = float(burst[0]["t"])
        t_end = float(burst[-1]["t"])
        pr = [(float(e["t"]) - t0, float(e["probe_mhz"])) for e in burst if e["probe_mhz"]]
        # 10 ms bins of the probe clock
        bins: dict[int, list[float]] = {}
        for t, f in pr:
            bins.setdefault(int(t / 0.01), []).append(f)
        xs = sorted(bins)
        (line,) = ax1.plot([x * 0.01 for x in xs], [statistics.median(bins[x]) for x in xs], label=n, lw=1.2)
        w = _window(nvml, t0 - 0.2, t_end)
        ax2.plot([float(s["t"]) - t0 for s in w], [float(s["power_instant_w"]) for s in w], color=line.get_color(), lw=0.8)
        rec = _phase(events, n, "recovery")
        if rec:
            ax1.axvline(float(rec[0]["t"]) - t0, color=line.get_color(), ls=":", lw=0.8)
    ax1.set_ylabel("SM clock from the probe (MHz, 10 ms bins)")
    ax1.axhline(FULL_MHZ, color="grey", lw=0.5)
    ax1.legend(fontsize=8, loc="lower left")
    ax1.set_title("H100 SXM, run v: each burst starts after 1.2 s idle (t = 0); dotted: burst ends, probes only")
    limit = _med([float(s["power_limit_w"]) for s in nvml])
    ax2.axhline(limit, color="grey", lw=0.5, ls="--")
    ax2.set_ylabel("board power, NVML instantaneous (W)")
    ax2.set_xlabel("seconds after the burst's first call")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run_s_table(root: Path) -> list[str]:
    """Run s (``h100-20261125s-*``, fa2_clock.py): nvidia-smi's 20 ms log aligned with each phase."""
    import datetime as dt

    log = []
    for line in (root / "h100-20261125s-clocks.csv").open():
        ts, clk, pw, temp = (x.strip() for x in line.split(","))
        t = dt.datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()
        log.append((t, int(clk.split()[0]), float(pw.split()[0]), int(temp)))
    changes = sum(1 for a, b in zip(log, log[1:], strict=False) if (a[1], a[2]) != (b[1], b[2]))
    with (root / "h100-20261125s-phases.csv").open() as fh:
        phases = list(csv.DictReader(fh))
    with (root / "h100-20261125s-fa2clock.csv").open() as fh:
        calls = list(csv.DictReader(fh))
    out = [f"nvidia-smi samples: {len(log)}, of which {changes} differ from the one before "
           f"(readings refresh about every {(log[-1][0] - log[0][0]) / max(changes, 1) * 1e3:.0f} ms)", "",
           "| keys | phase | span (s) | samples | SM clock median (MHz) | min-max | power.draw, 1 s average (W) | temp (C) | "
           "call median (us) | first 20 | last 20 |", "|---:|---|---:|---:|---:|---|---|---|---:|---:|---:|"]
    for p, c in zip(phases, calls, strict=True):
        t0, t1 = float(p["start"]), float(p["end"])
        xs = [x for x in log if t0 <= x[0] <= t1]
        out.append(f"| {p['kv_len']} | {p['mode']} | {t1 - t0:.3f} | {len(xs)} | {_med([x[1] for x in xs]):.0f} | "
                   f"{min(x[1] for x in xs)}-{max(x[1] for x in xs)} | {min(x[2] for x in xs):.0f}-{max(x[2] for x in xs):.0f} | "
                   f"{min(x[3] for x in xs)}-{max(x[3] for x in xs)} | {c['median_us']} | {c['first20_us']} | {c['last20_us']} |")
    return out


def heldout(factor: float, only_hd128: bool = False) -> list[str]:
    """The 4K-8K FA2 prefill rows of the earlier runs (compare_sweep.clock_section's rule: the
    previous CSV row is >= CLOCK_BURST_S of back-to-back attention) with the model's prediction
    multiplied by ``factor`` (the run-v slow-down of a short FA2 prefill right after an FA2 burst:
    measured, not fitted on these rows); the other rows unchanged."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import compare_sweep as cs

    groups: dict[str, list[tuple[float, float]]] = {"after": [], "after128": [], "other": []}
    for _run, path in (("a", cs.RUNS[0]), ("d", cs.RUN_D), ("e", cs.RUN_E[0]), ("g", cs.RUN_G), ("i", cs.RUN_I),
                       ("k", cs.RUN_K), ("p", cs.RUN_P), ("q", cs.RUN_Q), ("r", cs.RUN_R)):
        with (cs.ROOT / path).open() as fh:
            rows = list(csv.DictReader(fh))
        gpu = cs.Gpu(cs.run_spec(rows))
        for i, r in enumerate(rows):
            if not (r["kind"].startswith("attn_prefill") and r["name"].startswith("flash_") and int(float(r["seq_len"])) <= 8192):
                continue
            prev = rows[i - 1] if i else None
            burst = (float(prev["median_us"]) * int(prev["reps"]) * 1e-6
                     if prev is not None and prev["name"].startswith(cs.ATTENTION_ROW) else 0.0)
            t, pred = float(r["median_us"]), cs.predict_row(r, gpu) * 1e6
            after = burst >= cs.CLOCK_BURST_S
            hd128 = after and bool(prev["head_dim"]) and int(float(prev["head_dim"])) == 128
            pair = (pred / t - 1, pred * (factor if after and (hd128 or not only_hd128) else 1.0) / t - 1)
            groups["after" if after else "other"].append(pair)
            if after and prev["head_dim"] and int(float(prev["head_dim"])) == 128:
                groups["after128"].append(pair)
    out = [f"| rows (runs a d e g i k p q r) | n | model: median abs | worst | median signed | "
           f"x {factor:.3f} after a{' head_dim-128' if only_hd128 else 'ny'} burst: median abs | worst | median signed |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, key in (("right after >= 0.25 s of attention", "after"), ("of which after head_dim 128", "after128"),
                       ("the others (unchanged)", "other")):
        g = groups[key]

        def st(e: list[float]) -> str:
            return (f"{statistics.median(abs(x) for x in e) * 100:.1f}% | {max(abs(x) for x in e) * 100:.1f}% | "
                    f"{statistics.median(e) * 100:+.1f}%")
        out.append(f"| {label} | {len(g)} | {st([x[0] for x in g])} | {st([x[1] for x in g])} |")
    return out


def analyse(prefix: str, plot_path: str | None = None) -> int:
    events, nvml, _summary = load(prefix)
    print("\n".join(tables(events, nvml)))
    if plot_path:
        plot(events, nvml, plot_path)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prefix", nargs="?")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--run-s", action="store_true", help="run s's nvidia-smi log by phase")
    ap.add_argument("--heldout", type=float, metavar="FACTOR", help="the earlier 4K-8K rows, after-burst ones x FACTOR")
    ap.add_argument("--only-hd128", action="store_true", help="with --heldout: only rows after a head_dim-128 burst")
    args = ap.parse_args()
    if args.heldout:
        print("\n".join(heldout(args.heldout, args.only_hd128)))
        return 0
    if args.run_s:
        print("\n".join(run_s_table(Path(__file__).resolve().parent)))
        return 0
    if not args.prefix:
        ap.error("PREFIX is required unless --run-s")
    return analyse(args.prefix, args.plot)


if __name__ == "__main__":
    sys.exit(main())
