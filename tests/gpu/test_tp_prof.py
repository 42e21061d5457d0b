"""benchmarks/gpu/tp_prof.py (run ax): the trace reader, the kernel classes and the frozen table."""

from __future__ import annotations

import json

from .scripts import ROOT, bench_script


def _tp_prof():
    return bench_script("tp_prof")


def _ev(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def test_trace_rows_keep_the_recorded_step_only(tmp_path):
    """The step's GPU activities are those launched inside the ``tp_step`` annotation, plus a
    library's kernel whose launch the trace lacks when it starts inside the step's kernels (NCCL's);
    the barrier's kernel before the step is left out; CPU ops are the top-level ones."""
    trace = {"traceEvents": [
        _ev("cuda_runtime", "cudaLaunchKernel", 5, 1, correlation=1),
        _ev("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, 2, correlation=1, stream=20),
        _ev("user_annotation", "tp_step", 100, 50),
        _ev("cpu_op", "aten::linear", 101, 10),
        _ev("cpu_op", "aten::mm", 102, 8),
        _ev("cuda_runtime", "cudaLaunchKernel", 103, 2, correlation=2),
        _ev("kernel", "nvjet_sm90_tst_256x128", 110, 30, correlation=2, stream=7),
        _ev("kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_SIMPLE", 145, 20, correlation=3, stream=20),
        _ev("cuda_runtime", "cudaLaunchKernel", 120, 2, correlation=4),
        _ev("kernel", "void at::native::vectorized_elementwise_kernel<4>", 170, 5, correlation=4, stream=7),
        _ev("cpu_op", "aten::add", 119, 4),
    ]}
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace))
    rows = _tp_prof()._trace_rows(str(path), "tp2_prefill_b1_l8", 1)
    gpu = [(r["name"][:14], r["ts_us"], r["launch_ts_us"]) for r in rows if r["cat"] == "kernel"]
    assert gpu == [("nvjet_sm90_tst", 110, 103), ("ncclDevKernel_", 145, ""), ("void at::nativ", 170, 120)]
    assert [r["name"] for r in rows if r["cat"] == "cpu_op"] == ["aten::linear", "aten::add"]
    assert [(r["cat"], r["dur_us"]) for r in rows][-1] == ("annotation", 50)


def test_classify_a_tp_layer_and_the_head():
    """One TP layer as collectives.py's ``_tp_step`` launches it, then the head: NCCL's kernels by
    collective, the copy after the attention kernel is the O transpose."""
    names = ["indexSelectLargeIndex", "vectorized_layer_norm_kernel", "nvjet_tst_qkv", "elementwise_kernel neg",
             "CatArrayBatchedCopy", "elementwise_kernel mul", "index_elementwise_kernel", "pytorch_flash::flash_fwd_kernel",
             "elementwise_kernel copy", "nvjet_tst_o", "ncclDevKernel_AllReduce_Sum_bf16_RING_SIMPLE",
             "vectorized_elementwise_kernel add", "vectorized_layer_norm_kernel", "nvjet_tst_gu",
             "vectorized_elementwise_kernel silu", "vectorized_elementwise_kernel mul", "nvjet_tst_down",
             "ncclDevKernel_AllReduce_Sum_bf16_RING_SIMPLE", "vectorized_elementwise_kernel add",
             "vectorized_layer_norm_kernel", "nvjet_tst_lm", "ncclDevKernel_AllGather_RING_LL"]
    assert _tp_prof().classify(names, layers=1) == [
        "other", "rms_norm", "gemm_qkv", "rope", "rope", "rope", "kv_append", "attention", "o_transpose", "gemm_o",
        "all_reduce", "residual_add", "rms_norm", "gemm_gate_up", "silu_mul", "silu_mul", "gemm_down", "all_reduce",
        "residual_add", "rms_norm", "lm_head", "all_gather"]


def test_frozen_table_has_every_row():
    """The frozen table (committed before run ax) holds both columns and the all-reduce of each row,
    and its classes add up to its kernels' sum."""
    tp_prof = _tp_prof()
    frozen = tp_prof.read_predicted(ROOT / tp_prof.FROZEN)
    for model, length in tp_prof.ROWS:
        name = tp_prof.row_name(model, length)
        for col in ("model", "slew"):
            row = frozen[(name, col)]
            assert abs(sum(row[c] for c in tp_prof.CLASSES) - row["kernels"]) <= len(tp_prof.CLASSES)
            assert abs(row["kernels"] + row["gaps"] - row["step"]) <= 1
        assert frozen[(name, "ar")]["calls"] == 2 * (80 if "70b" in name else 32)


def test_compare_reprints_the_committed_comparison(capsys):
    """``tp_prof.py --compare`` on run ax's committed files prints the committed comparison."""
    tp_prof = _tp_prof()
    prefix = ROOT / "benchmarks/gpu/h200x2-20261128ax"
    assert tp_prof.main(["--compare", "benchmarks/gpu/h200x2-20261128ax"]) == 0
    assert capsys.readouterr().out == (ROOT / f"{prefix}-tp2prof-compare.txt").read_text()
