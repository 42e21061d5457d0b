"""How fast the serving layer runs, and how far its interpolated step times are from simulation.

1. Builds the shipped SnapStream deployment (step-time tables from the kernel simulator).
2. Runs 100,000 requests (Poisson at 1.5 req/s, prompts lognormal:32768,0.5, outputs
   lognormal:1024,0.6, seed 0) through it: ``run_serving`` with the per-request frame and
   summary, no event log.
3. Runs the README's ``rdusim serve-sweep`` (2 deployments x 5 rates) as a subprocess.
4. Prints the interpolation error of both deployments' tables against direct simulation at
   the midpoints of their grids (``rdusim.analysis.serving.deployment.interpolation_error``).

    python benchmarks/serve_speed.py [--requests 100000] [--skip-sweep] [--out interp.csv]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from rdusim.analysis.serving.deployment import interpolation_error, load_deployment
from rdusim.analysis.serving.run import run_serving
from rdusim.analysis.serving.workload import generate_workload, parse_distribution

ROOT = Path(__file__).resolve().parents[1]
DEPLOYMENTS = [ROOT / "mappings/deepseek-r1/serve.yaml", ROOT / "mappings/deepseek-r1/serve-snapstream.yaml"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rate", type=float, default=1.5)
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--out", help="CSV of the interpolation errors")
    args = parser.parse_args()

    start = time.perf_counter()
    deployment = load_deployment(DEPLOYMENTS[1])
    print(f"tables for {deployment.name}: {time.perf_counter() - start:.1f} s "
          f"(buckets {deployment.model.batch_buckets})")
    workload = generate_workload(args.rate, parse_distribution("lognormal:32768,0.5", "p"),
                                 parse_distribution("lognormal:1024,0.6", "o"), seed=0, requests=args.requests)
    start = time.perf_counter()
    result = run_serving(deployment, workload, record_events=False)
    wall = time.perf_counter() - start
    s = result.summary
    print(f"{len(workload)} requests, {s['duration_s']:.0f} simulated s, {len(result.run.steps['start_s'])} decode "
          f"steps: {wall:.1f} s wall ({len(workload) / wall:,.0f} requests/s); goodput {s['request_goodput']:.3f} "
          f"req/s, completed {s['completed']}, rejected {s['rejected']}")

    if not args.skip_sweep:
        with tempfile.TemporaryDirectory() as tmp:
            command = [str(Path(sys.executable).with_name("rdusim")), "serve-sweep", ",".join(str(p) for p in DEPLOYMENTS),
                       "--rate", "0.1,0.2,0.5,1,2", "--slo-ttft-s", "10", "--slo-tpot-ms", "100",
                       "--out", f"{tmp}/plan", "--plot", f"{tmp}/plan.png"]
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
            print(f"README serve-sweep (2 deployments x 5 rates, 600 s each): {time.perf_counter() - start:.1f} s wall")

    frames = []
    for path in DEPLOYMENTS:
        frame = interpolation_error(load_deployment(path))
        frame.insert(0, "deployment", path.stem)
        frames.append(frame)
    errors = pd.concat(frames, ignore_index=True)
    pd.set_option("display.width", 160)
    print(errors.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    for (name, phase), group in errors.groupby(["deployment", "phase"], sort=False):
        print(f"{name} {phase}: max |error| {group['error'].abs().max() * 100:.2f}%, "
              f"mean |error| {group['error'].abs().mean() * 100:.2f}% over {len(group)} midpoints")
    if args.out:
        errors.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
