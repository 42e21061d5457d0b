"""docs/gpu.md's "KV policies on the GPU model" table is what benchmarks/gpu/kv_policies.py renders
from the model, line for line (regenerate it with ``kv_policies.py --write``)."""

from __future__ import annotations

from .scripts import bench_script, doc_block


def test_kv_policies_table_in_the_doc_is_the_model_s_rendering() -> None:
    kv = bench_script("kv_policies")
    assert kv.table() == doc_block(kv.MARKER)


def test_attention_is_the_attention_and_kascade_kernels() -> None:
    kv = bench_script("kv_policies")
    kernels = {"rms_norm": 1.0, "attention": 2.0, "attention.combine": 4.0, "o_gemm": 8.0,
               "kascade.score": 16.0, "kascade.gather": 32.0, "kascade.attention": 64.0}
    assert kv.attention_seconds(kernels) == 2.0 + 4.0 + 16.0 + 32.0 + 64.0
