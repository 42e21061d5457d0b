"""How fast rdusim simulates: a full DeepSeek-R1 prefill (61 layers, TP16) end to end.

Times ``simulate()`` (load YAML, build the plan, run SimPy, build the breakdown) with
``record_events=False``: the fast path (one socket, one layer per layer type, scaled) at
the long prompt over several repeats, and the general path (``fast=False``: every layer on
every socket) once at a shorter prompt for comparison.

    python benchmarks/simulate_speed.py [--repeats 5] [--seq-len 131072] [--out speed.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

from rdusim.analysis.result import simulate

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MAPPING = ROOT / "mappings/deepseek-r1/prefill-snapstream.yaml"
FIELDS = ["path", "seq_len", "repeats", "min_wall_s", "median_wall_s", "events", "events_per_s",
          "sockets_simulated", "layers_simulated", "simulated_ttft_s"]


def time_runs(mapping: Path, seq_len: int, repeats: int, *, fast: bool) -> dict:
    """Wall time of ``repeats`` calls of ``simulate``; events/s uses the fastest call."""
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = simulate(mapping, seq_len=seq_len, fast=fast, record_events=False)
        walls.append(time.perf_counter() - start)
    trace = result.trace
    return {
        "path": "fast" if fast else "general", "seq_len": seq_len, "repeats": repeats,
        "min_wall_s": min(walls), "median_wall_s": statistics.median(walls),
        "events": trace.event_count, "events_per_s": trace.event_count / min(walls),
        "sockets_simulated": trace.sockets_simulated, "layers_simulated": trace.layers_simulated,
        "simulated_ttft_s": result.total_s,
    }


def format_rows(rows: list[dict]) -> str:
    header = (f"{'path':<8} {'seq_len':>8} {'runs':>4} {'min s':>8} {'median s':>9} {'events':>9} "
              f"{'events/s':>10} {'sockets':>7} {'layers':>6} {'TTFT s':>8}")
    lines = [header]
    for r in rows:
        lines.append(
            f"{r['path']:<8} {r['seq_len']:>8} {r['repeats']:>4} {r['min_wall_s']:>8.3f} "
            f"{r['median_wall_s']:>9.3f} {r['events']:>9,} {r['events_per_s']:>10,.0f} "
            f"{r['sockets_simulated']:>7} {r['layers_simulated']:>6} {r['simulated_ttft_s']:>8.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mapping", type=Path, default=DEFAULT_MAPPING)
    parser.add_argument("--seq-len", type=int, default=131072, help="prompt length of the fast-path runs")
    parser.add_argument("--repeats", type=int, default=5, help="fast-path repeats (min and median reported)")
    parser.add_argument("--general-seq-len", type=int, default=8192,
                        help="prompt length of the single fast=False run (0 skips it)")
    parser.add_argument("--out", type=Path, help="also write the table as CSV here")
    args = parser.parse_args(argv)

    simulate(args.mapping, seq_len=args.seq_len, record_events=False)  # warm-up: imports, caches
    rows = [time_runs(args.mapping, args.seq_len, args.repeats, fast=True)]
    if args.general_seq_len:
        rows.append(time_runs(args.mapping, args.general_seq_len, 1, fast=False))
    print(format_rows(rows))
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
