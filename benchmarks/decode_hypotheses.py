"""Each decode cost-structure hypothesis against each visible figure (docs/calibration.md).

For every combination of the model choices the sources do not settle (``expert_weights``,
``attention_split``), the one decode constant (``kernel_launch.software``) is refitted to the
128K row exactly as ``rdusim calibrate --phase decode`` does, and the result is compared with
the published 128K row (both points and their ordering). The Llama-3.1-8B check (hardware
orchestration, so independent of that constant) is run under each ``kernel_looping`` and
``attention_split`` choice. Prints markdown:

    python benchmarks/decode_hypotheses.py
"""

from __future__ import annotations

import itertools
from pathlib import Path

from rdusim.analysis.calibration.fit import fit_decode_overhead
from rdusim.analysis.calibration.published import (
    DECODE_128K,
    LLAMA_8B_DECODE_8K_TOKENS_PER_S_PER_USER,
)
from rdusim.analysis.result import simulate
from rdusim.mapping.bundle import load_mapping

ROOT = Path(__file__).resolve().parents[1]
DECODE = {"full": ROOT / "mappings/deepseek-r1/decode.yaml", "snapstream": ROOT / "mappings/deepseek-r1/decode-snapstream.yaml"}
LLAMA = ROOT / "mappings/llama-3.1-8b/decode.yaml"
SHIPPED = ("all", "sequence")


def deepseek_rows() -> list[str]:
    lines = ["| expert_weights | attention_split | fitted software call | full b16 tok/s (434) | SnapStream b64 tok/s (1832) "
             "| step b16 / b64 (88.5 / 83.8 ms) | b64 step <= b16 step | verdict |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for experts, split in itertools.product(("routed", "all"), ("keys", "sequence", "heads")):
        overrides = [f"defaults.expert_weights={experts}", f"defaults.attention_split={split}"]
        points = {p: (load_mapping(path, overrides=overrides), DECODE_128K[p]["tokens_per_s"]) for p, path in DECODE.items()}
        fit = fit_decode_overhead(points)
        full, snap = fit.fitted["full"], fit.fitted["snapstream"]
        step16, step64 = 16 * 2.4 / full * 1e3, 64 * 2.4 / snap * 1e3
        ok = fit.worst_error <= 0.07 and step64 <= step16
        mark = " (shipped)" if (experts, split) == SHIPPED else ""
        lines.append(f"| {experts}{mark} | {split} | {fit.overhead_s * 1e6:.1f} us | {full:.0f} ({full / 434 - 1:+.1%}) "
                     f"| {snap:.0f} ({snap / 1832 - 1:+.1%}) | {step16:.1f} / {step64:.1f} ms | {'yes' if step64 <= step16 else 'no'} "
                     f"| {'explains both' if ok else 'rejected'} |")
    return lines


def llama_rows() -> list[str]:
    lines = ["| kernel_looping | attention_split | step | tok/s/user (1042) | error |", "|---|---|---:|---:|---:|"]
    for looping, split in itertools.product(("false", "true"), ("keys", "sequence")):
        result = simulate(LLAMA, hw=ROOT / "hw_configs/sn40l-16.yaml", batch=1, record_events=False,
                          overrides=["defaults.tp=16", f"defaults.kernel_looping={looping}", f"defaults.attention_split={split}"])
        tps = 1 / result.total_s
        mark = " (shipped)" if (looping, split) == ("false", "sequence") else ""
        lines.append(f"| {looping}{mark} | {split} | {result.total_s * 1e3:.3f} ms | {tps:.0f} "
                     f"| {tps / LLAMA_8B_DECODE_8K_TOKENS_PER_S_PER_USER - 1:+.1%} |")
    return lines


def main() -> int:
    print("DeepSeek-R1 128K decode row (kernel_launch.software refitted per hypothesis)\n")
    print("\n".join(deepseek_rows()))
    print("\nLlama-3.1-8B, SN40L-16 TP16, 8K, batch 1 (prediction: nothing fitted to it)\n")
    print("\n".join(llama_rows()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
