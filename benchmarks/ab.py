"""A/B speed of the issue-20 figures: this tree against another commit, in the same run.

    python benchmarks/ab.py [--base HEAD~1] [--figures prefill128k,full8k,explore,serve,moe128k]
                            [--repeats 3] [--serve-requests 100000] [--out ab.csv]

The base commit is unpacked (``git archive``) into a temporary folder; every figure runs in a fresh
Python process per side (``--runner``), sides alternating (A B A B ...) so load drifts hit
both. Reported per figure: each side's minimum over the repeats (the absolute figure on this
machine at this load), the ratio base / this (speed-up, > 1 is faster), and the 1-minute load
average before and after. Results are identical across sides where the issue requires it
(``result`` column: the simulated figure each side computed).

Figures (issue 20): ``prefill128k``: DeepSeek-R1 SnapStream prefill at 128K, fast path,
``simulate(..., record_events=False)`` in process (min of 5 calls after a warm-up; ``cpu_s``: the
min of their process times, much less sensitive to a loaded machine than the wall time);
``full8k``: the same at 8K with ``fast=False`` (every layer on every socket), one call;
``explore``: ``rdusim explore``'s estimator (cold caches, 2 workers) and re-simulation rates,
DeepSeek-R1 decode (budget 2000, 20 re-scores) and prefill (budget 200, 20 re-scores) at 128K;
``serve``: requests through the disaggregated SnapStream deployment (Poisson 1.5 req/s, prompts
lognormal:32768,0.5, outputs lognormal:1024,0.6, seed 0), ``run_serving`` wall time after the
step tables are built (and its CPU time: on a shared machine the steadier figure), and the peak
resident memory of the process (and its peak before the run: the step tables); a tree whose
``run_serving`` can measure the run as it goes (``stream=True``, what ``rdusim serve`` does) runs
that way (``streamed`` in the row); ``moe128k`` (not in the issue's table, not run by default): the
MoE layer type of the DeepSeek-R1 prefill at 128K alone on its built plan (``simulate_plan(...,
layer_types=("moe",), record_events=False)``, min of 5 after a warm-up), the unit of work of the
explorer's prefill re-scores.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ("prefill128k", "full8k", "explore", "serve", "moe128k")
PREFILL = "mappings/deepseek-r1/prefill-snapstream.yaml"


# ------------------------------------------------------------------------ runner (one side, one figure)
def _prefill128k(_: argparse.Namespace) -> dict:
    from rdusim.analysis.result import simulate  # noqa: PLC0415 (the side's own tree)

    simulate(PREFILL, seq_len=8192, record_events=False)   # warm-up: imports, YAML caches
    walls, cpus = [], []
    for _ in range(5):
        start, cpu = time.perf_counter(), time.process_time()
        result = simulate(PREFILL, seq_len=131072, record_events=False)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return {"wall_s": min(walls), "cpu_s": min(cpus), "events": result.trace.event_count, "result": result.total_s}


def _moe128k(_: argparse.Namespace) -> dict:
    from rdusim.mapping.build import build_plan  # noqa: PLC0415
    from rdusim.mapping.bundle import load_mapping  # noqa: PLC0415
    from rdusim.sim.engine import simulate_plan  # noqa: PLC0415

    plan = build_plan(load_mapping("mappings/deepseek-r1/prefill.yaml", seq_len=131072))
    walls, cpus = [], []
    for _ in range(6):   # the first a warm-up
        start, cpu = time.perf_counter(), time.process_time()
        trace = simulate_plan(plan, record_events=False, layer_types=("moe",))
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return {"wall_s": min(walls[1:]), "cpu_s": min(cpus[1:]), "events": trace.event_count,
            "result": trace.kernels[-1].end_s}


def _full8k(_: argparse.Namespace) -> dict:
    from rdusim.analysis.result import simulate  # noqa: PLC0415

    simulate(PREFILL, seq_len=8192, record_events=False)
    start = time.perf_counter()
    result = simulate(PREFILL, seq_len=8192, fast=False, record_events=False)
    return {"wall_s": time.perf_counter() - start, "events": result.trace.event_count, "result": result.total_s}


def _explore(_: argparse.Namespace) -> dict:
    from rdusim.analysis.execution import LocalExecutor  # noqa: PLC0415
    from rdusim.analysis.explore.estimate import Problem  # noqa: PLC0415
    from rdusim.analysis.explore.search import explore  # noqa: PLC0415

    out: dict = {}
    start = time.perf_counter()
    for name, path, objective, slo, budget in (
            ("decode", "mappings/deepseek-r1/decode.yaml", "throughput", 0.1, 2000),
            ("prefill", "mappings/deepseek-r1/prefill.yaml", "latency", None, 200)):
        executor = LocalExecutor(2)
        result = explore(Problem(path, ("workload.seq_len=131072",), objective, slo), budget=budget, rescore=20,
                         seed=0, executor=executor)
        executor.close()
        out[f"{name}_estimator_per_s"] = result.rates["estimator"]
        out[f"{name}_simulator_per_s"] = result.rates["simulator"]
        out[f"{name}_best"] = float(result.ranking["sim_step_s"].iloc[0])
    out["wall_s"] = time.perf_counter() - start
    out["result"] = (out["decode_best"], out["prefill_best"])
    return out


def _serve(args: argparse.Namespace) -> dict:
    from rdusim.analysis.serving.deployment import load_deployment  # noqa: PLC0415
    from rdusim.analysis.serving.workload import generate_workload, parse_distribution  # noqa: PLC0415
    try:
        from rdusim.analysis.serving.run import run_serving  # noqa: PLC0415
    except ImportError:   # before deployment.py was split
        from rdusim.analysis.serving.deployment import run_serving  # noqa: PLC0415

    deployment = load_deployment("mappings/deepseek-r1/serve-snapstream.yaml")
    workload = generate_workload(1.5, parse_distribution("lognormal:32768,0.5", "p"),
                                 parse_distribution("lognormal:1024,0.6", "o"), seed=0, requests=args.serve_requests)
    import inspect  # noqa: PLC0415

    # measured as the run goes where the tree can (issue 20 item 3: ``rdusim serve`` and the sweep do)
    streamed = {"stream": True} if "stream" in inspect.signature(run_serving).parameters else {}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start, cpu = time.perf_counter(), time.process_time()
    result = run_serving(deployment, workload, record_events=False, **streamed)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    s = result.summary
    return {"wall_s": wall, "cpu_s": cpu, "requests": len(workload), "requests_per_s": len(workload) / wall,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mib": rss_before,
            "streamed": bool(streamed),
            "result": (s["completed"], s["p90_ttft_ms"], s["p90_tpot_ms"], s["mean_decode_batch"])}


def _run_one(args: argparse.Namespace) -> None:
    row = {"prefill128k": _prefill128k, "full8k": _full8k, "explore": _explore, "serve": _serve,
           "moe128k": _moe128k}[args.runner](args)
    print(json.dumps(row))


# ------------------------------------------------------------------------ driver
def _side(tree: Path, figure: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--runner", figure,
               "--serve-requests", str(args.serve_requests)]
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{figure} on {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _git(*argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD~1", help="commit to compare against (default HEAD~1)")
    parser.add_argument("--figures", default=",".join(FIGURES[:4]))
    parser.add_argument("--repeats", type=int, default=3, help="runs per side, alternating (minimum reported)")
    parser.add_argument("--serve-requests", type=int, default=100_000)
    parser.add_argument("--out", type=Path, help="CSV of every run")
    parser.add_argument("--runner", choices=FIGURES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.runner:
        _run_one(args)
        return
    base = _git("rev-parse", "--short", args.base)
    head = _git("rev-parse", "--short", "HEAD")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "base"
        base_tree.mkdir()
        archive = subprocess.run(["git", "archive", base], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive, check=True)
        for figure in args.figures.split(","):
            runs: dict[str, list[dict]] = {"base": [], "this": []}
            for _ in range(args.repeats):
                for side, tree in (("base", base_tree), ("this", ROOT)):
                    load = os.getloadavg()[0]
                    row = _side(tree, figure, args) | {"load_before": load, "load_after": os.getloadavg()[0]}
                    runs[side].append(row)
                    rows.append({"figure": figure, "side": side, "commit": base if side == "base" else head} | row)
            best = {side: min(r["wall_s"] for r in rs) for side, rs in runs.items()}
            same = runs["base"][0]["result"] == runs["this"][0]["result"]
            loads = [r[k] for rs in runs.values() for r in rs for k in ("load_before", "load_after")]
            print(f"{figure}: base {base} min {best['base']:.3f} s, this {head} min {best['this']:.3f} s, "
                  f"speed-up x{best['base'] / best['this']:.2f}; same result: {same}; "
                  f"load {min(loads):.1f}-{max(loads):.1f}", flush=True)
            for side, rs in runs.items():
                extra = {k: v for k, v in min(rs, key=lambda r: r["wall_s"]).items()
                         if k not in ("wall_s", "result", "load_before", "load_after")}
                print(f"    {side}: {json.dumps(extra)} result {rs[0]['result']}", flush=True)
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=sorted({k for r in rows for k in r}))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
