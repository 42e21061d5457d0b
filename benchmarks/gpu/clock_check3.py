"""Run al (P12, issue 17, p12clock3): a new clock check on rows never timed before, same flow as
``clock_check.py`` (cold calls after 1.2 s idle, a burst after 1.2 s idle, 0.3 s of probes; the
probe and the 5 ms NVML poll of run v).

    python benchmarks/gpu/clock_check3.py OUT_DIR              # on the GPU (about 1.5 minutes)
    python benchmarks/gpu/clock_check3.py --predict CSV [--controller slew]  # frozen predictions (CPU)
    python benchmarks/gpu/clock_check3.py --against CSV PREFIX # measured against them

Rows: Llama-3.1-8B prefill steps (eager, 32 layers) at 2K and 8K tokens, 20 back to back; bf16
GEMMs 12288^3 and 6144^3 (square shapes no sweep timed); FA2 prefill 8K right after the 12288^3
burst (20 calls: how fast the clock comes back under light load); GEMM 8192^3 in ``time_fn``'s
structure (the calibration row, item (c)). ``--controller slew``: the candidate controller
(``rdusim.hw.gpu_clock.SlewSmClock``) instead of the frozen one.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import clock_check as cc  # noqa: E402

cc.SUSTAINED = (
    cc.Row("prefill_step_2k", "step", "sustained", tokens=2048),
    cc.Row("prefill_step_8k", "step", "sustained", tokens=8192),
    cc.Row("gemm_12288x12288x12288", "gemm", "sustained", m=12288, n=12288, k=12288),
    cc.Row("gemm_6144x6144x6144", "gemm", "sustained", m=6144, n=6144, k=6144),
)
cc.CROSS = (cc.Row("fa2_prefill_8k", "attention", "cross", tokens=8192), "gemm_12288x12288x12288")
cc.CALIBRATION = (
    cc.Row(
        "cal_gemm_square8192", "gemm", "cal", m=8192, n=8192, k=8192, cold=True, after_idle=True
    ),
)


def main() -> int:
    return cc.main()


if __name__ == "__main__":
    sys.exit(main())
