"""The two SM-clock controllers on run v's own workloads (the calibration set; p12clock3).

    python benchmarks/gpu/clock_controller.py

For the frozen controller (``SmClock``) and the second one (``SlewSmClock``): the steady clock of
run v's GEMM 8192^3 and FA2 128K bursts, the time back to 0.98 of full with only probes running
(run v: 65 and 22 ms), and run v's crossed rows (FA2 4K right after each burst: first 5 / cold;
run v: 1.080 after the 128K burst, 1.262 after the GEMM).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    from clock_check import PROBE_S, Model, Row

    from rdusim.hw.gpu_clock import SlewSmClock, SmClock

    m = Model()
    spec = m.gpu.spec.clock
    gemm = Row("gemm_8192", "gemm", "x", m=8192, n=8192, k=8192)
    fa128 = Row("fa2_128k", "attention", "x", tokens=131072)
    fa4 = Row("fa2_4k", "attention", "x", tokens=4096)
    measured = {"gemm_8192": (1470 / 1947, 65, 1.262), "fa2_128k": (1689 / 1867, 22, 1.080)}
    print(
        "| controller | burst | steady clock (run v) | back to 0.98, ms (run v) | "
        "FA2 4K after it: first 5 / cold (run v) |"
    )
    print("|---|---|---:|---:|---:|")
    for name, make in (
        ("frozen (SmClock)", SmClock),
        ("second (SlewSmClock)", SlewSmClock),
    ):
        cold4 = m.call_s(fa4, make(spec))
        for row, seconds in ((gemm, 3.0), (fa128, 3.0)):
            clk = make(spec)
            t = 0.0
            while t < seconds:
                t += m.call_s(row, clk) + PROBE_S
                clk.idle(PROBE_S)
            steady = clk.share
            after = m.sequence(fa4, 30, clk)
            rec = make(spec)
            t = 0.0
            while t < seconds:
                t += m.call_s(row, rec) + PROBE_S
                rec.idle(PROBE_S)
            ms = 0
            while rec.share < 0.98 and ms < 2000:
                rec.idle(1e-3)
                ms += 1
            c, r, x = measured[row.name]
            print(
                f"| {name} | {row.name} | {steady:.3f} ({c:.3f}) | {ms} ({r}) | "
                f"{statistics.median(after[:5]) / cold4:.3f} ({x:.3f}) |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
