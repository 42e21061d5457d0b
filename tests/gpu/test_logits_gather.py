"""benchmarks/gpu/logits_gather.py (run cp): the TP step's logits all-gather in the step, its frozen
table and committed comparison, and how the fidelity table predicts a step timed without it."""

from __future__ import annotations

import csv

import pytest

from .scripts import ROOT, bench_script

GPU = ROOT / "benchmarks/gpu"
CP = "h200x2-20261130cp"


def test_run_cp_as_committed() -> None:
    """Run cp's comparison is what logits_gather.py prints from the frozen table and the CSV: the
    gather's measured cost in the step 0.85-1.39 of the model's (G1 fails at batch 128, where the
    all-gather's 32 MiB runs 20% over the model as run co's did alone; G2 passes, median 1.13)."""
    lg = bench_script("logits_gather")
    lines = lg.compare(str(GPU / f"{CP}-predicted.txt"), str(GPU / f"{CP}-tp2.csv"))
    assert "\n".join(lines) + "\n" == (GPU / f"{CP}-compare.txt").read_text()
    assert lines[-2].startswith("- G1") and ": no (" in lines[-2]
    assert lines[-1] == "- G2 their median within 20%: yes (median 1.13)"
    frozen = lg.read_frozen(str(GPU / f"{CP}-predicted.txt"))
    assert list(frozen) == [lg.row_name(b, kv) for b, kv in lg.POINTS]
    assert frozen["tp2_decode_b1024_l128_graph"] == (23330.2, 22833.2)


def test_a_step_timed_without_its_gather_is_predicted_without_it() -> None:
    """compare_tp_steps predicts a ``*_nogather`` row (collectives.py --without-gather) with the head
    less logits_gather: the two predictions of a point differ by the frozen table's difference."""
    from rdusim.analysis.gpu.collectives import NO_GATHER_SUFFIX, compare_tp_steps
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec
    from rdusim.hw.gpu import load_gpu_node

    gpu = load_gpu_node(ROOT / "hw_configs/h200.yaml").gpu
    model = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    rows = [r for r in csv.DictReader(open(GPU / f"{CP}-tp2.csv", newline="")) if "b512" in r["name"]]
    assert [r["name"].endswith(NO_GATHER_SUFFIX) for r in rows] == [False, True]
    with_, without = compare_tp_steps(rows, gpu, model)
    assert (with_["pred"] - without["pred"]) * 1e6 == pytest.approx(256.0, abs=0.1)
