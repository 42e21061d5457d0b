"""How fast rdusim sweeps decode: the issue's sweep (3 prompts x 7 KV policies, batch auto).

Times ``rdusim.analysis.sweep.sweep`` end to end on ``mappings/deepseek-r1/decode.yaml``:
YAML loading, plan building, the HBM fit of every candidate batch, a SimPy run per batch
that fits, and the tidy table. Each repeat starts with the parsed-YAML and prefill-footprint
caches cleared, as a fresh ``rdusim sweep`` process would (modules are already imported, so
interpreter start-up, about 1 s here, is not counted). The default worker count (one
process per core) is timed, then ``workers=1`` for comparison.

    python benchmarks/sweep_speed.py [--repeats 3] [--out sweep-speed.csv]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path

from rdusim.analysis.sweep import sweep
from rdusim.config.loader import _read_cached
from rdusim.mapping.capacity import _prefill_footprint

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MAPPING = ROOT / "mappings/deepseek-r1/decode.yaml"
SEQ_LENS = [8192, 32768, 131072]
POLICIES = ["none", "streamingllm", "snapkv", "snapstream", "h2o", "longflow", "kascade"]
FIELDS = ["workers", "repeats", "configs", "points", "simulated", "min_wall_s", "median_wall_s",
          "points_per_s"]


def clear_caches() -> None:
    """Forget parsed YAML and prefill footprints (module-level caches that speed up sweeps)."""
    _read_cached.cache_clear()
    _prefill_footprint.cache_clear()


def time_sweeps(mapping: Path, repeats: int, workers: int | None) -> dict:
    """Wall time of ``repeats`` cold sweeps; points/s uses the fastest."""
    walls = []
    for _ in range(repeats):
        clear_caches()
        start = time.perf_counter()
        frame = sweep(mapping, SEQ_LENS, POLICIES, "auto", workers=workers)
        walls.append(time.perf_counter() - start)
    resolved = max(1, min(workers or os.cpu_count() or 1, len(SEQ_LENS) * len(POLICIES)))
    return {
        "workers": resolved, "repeats": repeats, "configs": len(SEQ_LENS) * len(POLICIES),
        "points": len(frame), "simulated": int(frame["fits"].sum()),
        "min_wall_s": min(walls), "median_wall_s": statistics.median(walls),
        "points_per_s": len(frame) / min(walls),
    }


def format_rows(rows: list[dict]) -> str:
    header = (f"{'workers':>7} {'runs':>4} {'configs':>7} {'points':>6} {'simulated':>9} {'min s':>7} "
              f"{'median s':>8} {'points/s':>8}")
    lines = [header]
    for r in rows:
        lines.append(f"{r['workers']:>7} {r['repeats']:>4} {r['configs']:>7} {r['points']:>6} {r['simulated']:>9} "
                     f"{r['min_wall_s']:>7.2f} {r['median_wall_s']:>8.2f} {r['points_per_s']:>8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mapping", type=Path, default=DEFAULT_MAPPING)
    parser.add_argument("--repeats", type=int, default=3, help="repeats per worker count (min and median reported)")
    parser.add_argument("--serial-repeats", type=int, default=None,
                        help="repeats of the workers=1 run (default: --repeats; 0 skips it)")
    parser.add_argument("--out", type=Path, help="also write the table as CSV here")
    args = parser.parse_args(argv)

    rows = [time_sweeps(args.mapping, args.repeats, workers=None)]
    serial = args.repeats if args.serial_repeats is None else args.serial_repeats
    if serial:
        rows.append(time_sweeps(args.mapping, serial, workers=1))
    print(format_rows(rows))
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
