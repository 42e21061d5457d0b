"""Run be: a decode step's small kernels after idle and at the SM clock a step sustains (P12).

Run aw's profiled TP4 shard has PyTorch's small kernels 0.3-0.56 us longer inside a graph step than
the model, fitted on the same kernels timed alone at full clock; runs bc and bd found no cause in
their code, producer, freshly written lines or address translations. A latency-bound kernel's time
follows the SM clock, and a step run back to back draws more power than one kernel repeated. This
script profiles Llama-3.1-8B's TP4 shard step (tp_shard.py's, batch 1 and 8 x 8192 keys, as a CUDA
graph) in two conditions, twice each, in turn:

- ``idle``: after 1 s with the GPU idle (the clock at its maximum when the step starts);
- ``sustained``: right after 3 s of the step's graph replayed back to back.

Each profiled window is three replays (tp_shard.py's ``_profiled``); its epoch start and end go to
``$OUT/stepclock-marks.csv``, the kernels to ``$OUT/stepclock-<condition><k>-kernels.csv`` (the
format of tp_shard.py, so ``tp_shard.py --model llama-3.1-8b-tp4 --types`` reads each);
``step_clock_run_be.sh`` samples nvidia-smi's SM clock and power every 20 ms beside it.

Measure (one GPU; torch only): ``OUT=dir python benchmarks/gpu/step_clock.py``.
Analyse (CPU): ``python benchmarks/gpu/step_clock.py --clock SMI_CSV MARKS_CSV``: the SM clock
sampled in each profiled window (median, min, max).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tp_shard  # noqa: E402  (beside this file; rdusim only in its CPU modes)

ROWS = [("tp4_b1_l8192", 4, 1, 8192), ("tp4_b8_l8192", 4, 8, 8192)]
CONDITIONS = ("idle", "sustained", "idle", "sustained")
IDLE_S, SUSTAIN_S = 1.0, 3.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clock", nargs=2, metavar=("SMI_CSV", "MARKS_CSV"))
    args = ap.parse_args(argv)
    if args.clock:
        return clock_table(*args.clock)
    return _run()


def _run() -> int:  # pragma: no cover - needs a GPU
    import measure as M  # noqa: N812
    import torch
    from torch.nn.attention import SDPBackend

    out = Path(os.environ.get("OUT", "."))
    M.SDPA_BACKENDS[:] = [SDPBackend.FLASH_ATTENTION]
    full = tp_shard.LLAMA_8B
    models: dict[int, object] = {}
    graphs = {}
    with torch.no_grad():
        for name, tp, batch, kv in ROWS:
            step = tp_shard._shard_step(M, tp_shard._model(torch, M, full, tp, models), batch, kv)
            graphs[name] = (M.capture(None, step), step)
        with open(out / "stepclock-marks.csv", "w", newline="") as marks_fh:
            marks = csv.writer(marks_fh)
            marks.writerow(["condition", "row", "start_s", "end_s"])
            for k, condition in enumerate(CONDITIONS):
                label = f"{condition}{k // 2}"
                with open(out / f"stepclock-{label}-kernels.csv", "w", newline="") as fh:
                    kern = csv.writer(fh)
                    kern.writerow(["row", "replay", "index", "kernel", "device_us", "grid", "block"])
                    for name, *_ in ROWS:
                        g = graphs[name][0]
                        if condition == "idle":
                            torch.cuda.synchronize()
                            time.sleep(IDLE_S)
                        else:
                            end = time.time() + SUSTAIN_S
                            while time.time() < end:
                                for _ in range(20):
                                    g.replay()
                                torch.cuda.synchronize()
                        a = time.time()
                        ev = tp_shard._profiled(torch, g.replay)
                        marks.writerow([label, name, f"{a:.3f}", f"{time.time():.3f}"])
                        per = len(ev) // 3 or 1
                        for i, (kn, d, grid, block) in enumerate(ev):
                            kern.writerow([f"{name}:flash:graph", i // per, i % per, kn, round(d, 3), grid, block])
                        print(f"{label} {name}: {len(ev)} kernels, {sum(e[1] for e in ev) / 3:.1f} us a replay", flush=True)
                marks_fh.flush()
    sys.stdout.flush()
    os._exit(0)


def clock_table(smi_csv: str, marks_csv: str) -> int:
    """The SM clock (MHz) nvidia-smi sampled inside each profiled window."""
    samples = []
    with open(smi_csv, newline="") as fh:
        for r in csv.reader(fh):
            try:
                samples.append((float(r[0]), float(r[1].split()[0]), float(r[2].split()[0])))
            except (ValueError, IndexError):
                continue
    print("| window | row | samples | SM clock median (MHz) | min-max | power median (W) |")
    print("|---|---|---:|---:|---|---:|")
    with open(marks_csv, newline="") as fh:
        for m in csv.DictReader(fh):
            a, b = float(m["start_s"]) - 0.05, float(m["end_s"]) + 0.05
            inside = [s for s in samples if a <= s[0] <= b]
            if not inside:
                print(f"| {m['condition']} | {m['row']} | 0 | - | - | - |")
                continue
            clk = [s[1] for s in inside]
            print(f"| {m['condition']} | {m['row']} | {len(inside)} | {statistics.median(clk):.0f} | "
                  f"{min(clk):.0f}-{max(clk):.0f} | {statistics.median(s[2] for s in inside):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
