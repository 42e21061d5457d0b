"""How fast rdusim simulates GPU targets: shipped GPU mappings and the GPU fidelity table.

Times ``rdusim`` commands in this process (output discarded), each the fastest of ``--repeats``
after one warm-up call (the parsed-document and kernel-plan caches filled): ``simulate`` of the
Llama-3.1-70B TP8 decode and prefill mappings on 8 x H200, of Llama-3.1-8B's prefill on the
sustained SM clock (every layer in order, steps back to back until the clock settles), and
the README's ``compare-hw`` of DeepSeek-R1 (SN40L-16 against 8 x H200, three policies, the
largest batch that fits); ``--fidelity`` also times one
``rdusim fidelity --gpu`` (every committed GPU CSV compared, once: no warm-up).

    PYTHONPATH=. python benchmarks/gpu_simulate_speed.py [--repeats 3] [--fidelity]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

from rdusim.cli import main as rdusim

#: (label, rdusim's arguments)
COMMANDS = (
    ("70B TP8 decode, graph", ["simulate", "mappings/llama-3.1-70b/decode-h200x8.yaml"]),
    ("70B TP8 prefill", ["simulate", "mappings/llama-3.1-70b/prefill-h200x8.yaml"]),
    ("8B prefill, sustained clock", ["simulate", "mappings/llama-3.1-8b/prefill-h100-sustained.yaml"]),
    ("compare-hw DeepSeek-R1 (README)", ["compare-hw", "mappings/deepseek-r1/decode.yaml", "--hw",
                                        "hw_configs/sn40l-16.yaml,mappings/deepseek-r1/decode-h200x8.yaml",
                                        "--seq-len", "32768", "--policy", "none,snapstream,kascade",
                                        "--batch", "auto"]),
)


def wall_s(args: list[str]) -> float:
    """Seconds one ``rdusim args`` takes in this process (its output discarded; exit 0 required)."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        code = rdusim(args)
    if code not in (0, None):
        raise SystemExit(f"rdusim {' '.join(args)} exited {code}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fidelity", action="store_true", help="also time one `rdusim fidelity --gpu`")
    args = parser.parse_args(argv)
    print(f"{'command':<32} {'first s':>8} {'best s':>8}")
    for label, command in COMMANDS:
        first = wall_s(command)
        best = min(wall_s(command) for _ in range(args.repeats))
        print(f"{label:<32} {first:>8.3f} {best:>8.3f}")
    if args.fidelity:
        print(f"{'rdusim fidelity --gpu':<32} {wall_s(['fidelity', '--gpu']):>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
