"""Run dq's analysis (benchmarks/gpu/eager_backlog.py): closed forms on synthetic records, and the
committed run's report and sequence ratio reproduced from its records."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import sequence_ratio
from tests.gpu.scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]
GPU_DIR = ROOT / "benchmarks/gpu"


def _records(module, idle_us: float, behind_us: float) -> list[dict]:
    """Every call of ``positions`` at ``idle_us`` in the idle states and ``behind_us`` in the behind
    ones; one sequence trial whose 16 layers of 2 calls take 3 us a call, its loops 2 us a call."""
    recs = []
    for op in module.POSITION_OPS:
        for state in module.STATES:
            us = idle_us if state.startswith("idle") else behind_us
            recs += [{"section": "positions", "case": op, "state": state, "trial": t, "pos": p, "op": op,
                      "ns": int(us * 1e3)} for t in range(3) for p in range(module.CALLS)]
    for state in module.STATES:
        recs += [{"section": "sequence", "case": "b1_l2048", "state": state, "trial": 0, "pos": p, "op": "gemm",
                  "ns": 3000} for p in range(2 * module.SEQUENCE_LAYERS)]
    recs += [{"section": "loop", "case": "b1_l2048", "state": mode, "trial": 0, "pos": p, "op": "gemm",
              "ns": 2000 if mode == "behind" else 9000} for p in range(2) for mode in ("behind", "idle")]
    return recs


def test_checks_tell_the_engines_rule_from_the_hosts_state() -> None:
    """Equal costs idle and behind: C2 (the host's state) holds and C1 (the engine's rule) does not;
    idle 20% dearer: C1 holds and C2 does not."""
    module = bench_script("eager_backlog")
    refs = {(op, mode): 1.0 for op in module.POSITION_OPS for mode in ("behind", "idle")}
    same = "\n".join(module.checks(module.position_table(_records(module, 10.0, 10.0)), refs))
    assert "| C1 (the engine's rule)" in same and same.count("| no |") == 1 and same.count("| yes |") == 1
    assert [line.rsplit("|", 2)[1].strip() for line in same.splitlines() if line.startswith("| C1 ") or
            line.startswith("| C2 ")] == ["no", "yes"]
    dearer = "\n".join(module.checks(module.position_table(_records(module, 12.0, 10.0)), refs))
    assert [line.rsplit("|", 2)[1].strip() for line in dearer.splitlines() if line.startswith("| C1 ") or
            line.startswith("| C2 ")] == ["yes", "no"]


def test_sequence_pairs_are_a_layer_in_sequence_against_its_loops() -> None:
    """16 layers of 2 calls at 3 us in sequence against loops of 2 calls at 2 us: 6 us against 4 us
    a layer, one pair per state; the idle loops are not used."""
    module = bench_script("eager_backlog")
    pairs = module.sequence_pairs(_records(module, 10.0, 10.0))
    assert pairs == [pytest.approx((6e-6, 4e-6))] * len(module.STATES)
    assert sequence_ratio(pairs) == pytest.approx(1.5)


@pytest.mark.parametrize("run", ["dq", "dr"])
def test_the_committed_runs_reproduce_their_reports_and_h200s_sequence_ratio(run: str) -> None:
    """Run dq's report (and run dr's, the same microbenchmark frozen on a new lease) regenerates
    byte-identical from its records; its checks say the host's state, not the GPU's backlog (C2 holds,
    C1 does not), and its sequence ratio is h200.yaml's 1.13 (dr: 1.1295, the registered check F3)."""
    module = bench_script("eager_backlog")
    prefix = GPU_DIR / f"h200-20261201{run}-"
    records = prefix.with_name(prefix.name + "backlog.csv.gz")
    text = module.analyse(str(records), str(prefix.with_name(prefix.name + "dispatch.csv")))
    assert text == prefix.with_name(prefix.name + "backlog.txt").read_text()
    verdicts = {line.split(" (", 1)[0].strip("| "): line.rsplit("|", 2)[1].strip()
                for line in text.splitlines() if line.startswith("| C1 ") or line.startswith("| C2 ")}
    assert verdicts == {"C1": "no", "C2": "yes"}
    assert round(sequence_ratio(module.sequence_pairs(module.read(str(records)))), 2) == 1.13
    with gzip.open(records, "rt", newline="") as fh:
        assert next(csv.reader(fh)) == list(module.FIELDS)
