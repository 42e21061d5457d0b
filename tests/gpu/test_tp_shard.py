"""benchmarks/gpu/tp_shard.py (run ab): its kernel classes and the committed comparison."""

from __future__ import annotations

import csv

import pytest

from .scripts import ROOT, bench_script


def _tp_shard():
    return bench_script("tp_shard")


def test_tp_shard_classes_match_the_profiled_step():
    """tp_shard.py's classes of run ab's FA2 shard step (b64 x 2048): one attention kernel, one
    QKV / O / gate-up / down GEMM and two RMSNorms a layer, then the LM head; and the frozen
    model step is within 1% of the measured FA2 graph step."""
    tp_shard = _tp_shard()
    with open(ROOT / "benchmarks/gpu/h200-20261128ab-tpshard-kernels.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["row"] == "tp2_b64_l2048:flash:graph"]
    classes = tp_shard.classify([r["kernel"] for r in rows])
    expected = {
        "attention": 32,
        "gemm_qkv": 32,
        "gemm_o": 32,
        "gemm_gate_up": 32,
        "gemm_down": 32,
        "rms_norm": 65,
        "kv_append": 64,
        "lm_head": 1,
    }
    for cls, count in expected.items():
        assert classes.count(cls) == count, cls
    frozen = (ROOT / "benchmarks/gpu/h200-20261128ab-tpshard-predicted.txt").read_text()
    step = float(
        next(
            line.split("|")[3] for line in frozen.splitlines() if "| h200 | tp2_b64_l2048 |" in line
        )
    )
    with open(ROOT / "benchmarks/gpu/h200-20261128ab-tpshard.csv") as fh:
        measured = next(
            float(r["graph_median_us"])
            for r in csv.DictReader(fh)
            if r["row"] == "tp2_b64_l2048:flash"
        )
    assert step == pytest.approx(measured, rel=0.01)
