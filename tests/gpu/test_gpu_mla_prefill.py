"""DeepSeek-R1 prefill on GPUs (``gpu_mla.mla_prefill_attention_kernels``) and its serving file.

vLLM's compute-friendly MLA prefill: the kernels in order with their GEMM shapes, FA2's
head-dim-192 kernel (the tile run bm's profile named), the head on each prompt's last position,
the experts fed by the group's tokens, rooflines, the TP layout beating DP at batch 1, and the
disaggregated 8 x H200 deployment served beside the SN40L one."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import load_gpu_mapping, simulate_gpu_mapping
from rdusim.analysis.serving.deployment import load_deployment
from rdusim.analysis.serving.run import run_serving
from rdusim.analysis.serving.workload import GeneratedWorkload, parse_distribution
from rdusim.cli import main
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import ModelSpec
from rdusim.hw.gpu import load_gpu_node
from rdusim.mapping.gpu import (
    BF16,
    FA2_CTAS_PER_SM,
    fa2_fwd_tile,
    fa2_fwd_warps,
    flash_prefill,
    gemm,
)
from rdusim.mapping.gpu_mla import (
    ffn_kernels,
    head_kernels,
    mla_prefill_attention_kernels,
    mla_shape,
)

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "mappings/deepseek-r1"
PREFILL = FOLDER / "prefill-h200x8.yaml"
SERVE = FOLDER / "serve-h200x8.yaml"


@pytest.fixture(scope="module")
def model() -> ModelSpec:
    return load_spec(model_path("deepseek-r1"), ModelSpec)


@pytest.fixture(scope="module")
def gpu():
    return load_gpu_node(ROOT / "hw_configs/h200-8.yaml").gpu


def test_fa2_head_dim_192_kernel(gpu):
    """FA2's run_mha_fwd_hdim192 (no dropout): 128 query rows, 64 key columns, 8 warps, each warp
    reading the whole K and V tile (run bm profiled Flash_fwd_kernel_traits<192, 128, 64, 8>);
    the other head dims keep their tiles and 4 warps."""
    assert (fa2_fwd_tile(192), fa2_fwd_warps(192)) == ((128, 64), 8)
    assert (fa2_fwd_tile(128), fa2_fwd_warps(128)) == ((128, 64), 4)
    assert (fa2_fwd_tile(256), fa2_fwd_warps(256), fa2_fwd_tile(64)) == ((64, 64), 4, (128, 128))
    kernel = flash_prefill("a", 1, 16, 16, 1024, 192, gpu)[0]
    assert kernel.ctas_per_sm == FA2_CTAS_PER_SM and len(kernel.groups) == 1024 // 128
    last = kernel.groups[-1]  # the last query block sees all 1024 keys: 16 tiles of 64
    assert last.tiles == 16 and last.count == 16
    assert last.smem_bytes == pytest.approx(16 * (128 * 192 + 8 * 2 * 64 * 192) * BF16)
    assert last.flops == pytest.approx(4.0 * 128 * 192 * 1024)


def test_prefill_kernels_in_vllm_order_with_their_shapes(model, gpu):
    """TP8, one prompt of 4096 tokens: 16 heads a GPU; kv_b_proj lifts the 512-wide latent to 16
    heads x (128 + 128); causal FA2 over 16 heads of 192 (MHA); one all-reduce of the hidden
    states; under DP the same GPU holds all 128 heads and no all-reduce."""
    t = 4096
    s = mla_shape(model, 1, t, 8, query_tokens=t)
    kernels = mla_prefill_attention_kernels(s, gpu)
    names = [k.name for k in kernels]
    assert names == ["attn_norm", "q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_norm_rope_append",
                     "q_rope", "kv_b_proj", "k_assemble", "v_pad", "mla_attention", "o_slice", "o_proj",
                     "attn_all_reduce"]
    by = {k.name: k for k in kernels}
    w = 1  # fp8 weights
    for name, (m, n, k) in {"q_b_proj": (t, 16 * 192, 1536), "kv_b_proj": (t, 16 * 256, 512),
                            "o_proj": (t, 7168, 16 * 128), "q_a_proj": (t, 1536, 7168), "kv_a_proj": (t, 576, 7168)}.items():
        assert by[name].flops == gemm(name, m, n, k, gpu, dtype_bytes=w)[0].flops
        assert by[name].flops >= 2.0 * m * n * k
    attention = by["mla_attention"]
    assert attention.flops == flash_prefill("x", 1, 16, 16, t, 192, gpu)[0].flops
    exact = 4.0 * 16 * 192 * t * (t + 1) / 2  # causal: query i sees i + 1 keys
    assert exact <= attention.flops <= exact * (1 + 64 / t * 2)  # whole 64-key tiles
    assert by["attn_all_reduce"].collective.nbytes == t * 7168 * BF16
    dp = mla_prefill_attention_kernels(mla_shape(model, 1, t, 8, attention="dp", query_tokens=t), gpu)
    assert all(k.math != "nvlink" for k in dp)
    assert next(k for k in dp if k.name == "mla_attention").flops == pytest.approx(8 * attention.flops)


def test_prefill_head_runs_on_each_prompts_last_position(model, gpu):
    s = mla_shape(model, 1, 8192, 8, query_tokens=8192)
    head = {k.name: k for k in head_kernels(s, gpu, prefill=True)}
    assert head["lm_head"].flops == gemm("x", 1, model.vocab // 8, model.hidden, gpu)[0].flops
    assert head["embedding"].bytes == pytest.approx(2 * 8192 * model.hidden * BF16)


def test_experts_see_the_groups_tokens(model, gpu):
    """The routed experts' tokens are the group's: under DP one prompt brings its own tokens, not
    one per GPU (as the old rows x tp counted); for a batch the group divides, the same as before."""
    one = mla_shape(model, 1, 2048, 8, attention="dp", query_tokens=2048)
    assert (one.rows, one.group_rows) == (2048, 2048)
    decode = mla_shape(model, 64, 8192, 8, attention="dp", query_tokens=2)
    assert decode.group_rows == decode.rows * 8 == 128
    tp = mla_shape(model, 1, 2048, 8, query_tokens=2048)
    assert tp.group_rows == tp.rows == 2048

    def experts(s) -> float:
        return sum(k.flops for k in ffn_kernels(s, gpu, moe=True) if k.name.startswith("experts_"))

    assert experts(one) == pytest.approx(experts(tp))  # the same tokens reach the same 32 local experts


def test_prefill_step_respects_rooflines_and_tp_beats_dp_at_batch_1():
    spec, model, node = load_gpu_mapping(PREFILL)
    result = simulate_gpu_mapping(spec, model, node, seq_len=4096)
    step, peak = result.step, node.gpu.spec.compute.tensor_peak.bf16_flops_per_s
    assert step.seconds >= step.flops / peak
    assert step.seconds >= step.hbm_bytes / node.gpu.spec.memory.hbm_bytes_per_s
    assert result.tokens_per_s == pytest.approx(4096 / step.seconds)
    assert {"mla_attention", "kv_b_proj", "experts_gate_up", "attn_all_reduce"} <= set(step.kernels)
    assert not any(k.startswith("mtp.") for k in step.kernels)
    dp, _, _ = load_gpu_mapping(PREFILL, overrides=["attention=dp"])
    assert simulate_gpu_mapping(dp, model, node, seq_len=4096).step.seconds > 2 * step.seconds
    # the prompt's latent KV whole on every GPU (TP: MLA has one latent "head"): 61 layers (no MTP
    # module at prefill) x 576 bf16 elements a token
    assert result.kv_bytes == 61 * 576 * BF16 * 4096


def test_a_prefill_mapping_takes_no_mtp_tokens(tmp_path, capsys):
    bad = tmp_path / "p.yaml"
    bad.write_text(PREFILL.read_text().replace("../../", f"{ROOT}/").replace(
        "  batch: 1\n", "  batch: 1\n  accepted_tokens_per_step: 1.875\n"))
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "accepted_tokens_per_step" in t)
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}" in err and "needs a decode mapping" in err


SNAPSTREAM = [FOLDER / f"{name}-snapstream-h200x8.yaml" for name in ("prefill", "decode", "serve")]


def test_shipped_documents_validate(capsys):
    assert main(["validate", str(PREFILL), str(SERVE), *map(str, SNAPSTREAM)]) == 0
    assert "5 file(s) valid" in capsys.readouterr().out


def test_snapstream_deployment_holds_a_quarter_of_the_cache():
    """The same nodes with SnapStream (1/4 of the prompt kept): each decode GPU holds four times
    the sequences at 128K, so the largest compiled batch grows about fourfold."""
    full, snap = load_deployment(SERVE).model, load_deployment(SNAPSTREAM[2]).model
    assert snap.kv_groups == full.kv_groups == 8
    assert 3.5 * full.batch_buckets[-1] <= snap.batch_buckets[-1] <= 4.5 * full.batch_buckets[-1]


def test_disaggregated_h200_deployment_serves_deterministically():
    """Six prefill nodes (one TP8 replica each) and one DP8 decode node: the prefill table is the
    GPU model at batch 1 bit for bit, every request completes, the same seed gives the same run."""
    deployment = load_deployment(SERVE)
    spec, model, node = load_gpu_mapping(PREFILL)
    table = deployment.prefill_table
    for tokens, seconds in list(zip(table.tokens, table.seconds, strict=True))[::4]:
        assert seconds == simulate_gpu_mapping(spec, model, node, seq_len=tokens, batch=1, check_fit=False).step.seconds
    m = deployment.model
    assert (m.layout, m.prefill_nodes, m.decode_nodes, m.kv_groups) == ("disaggregated", 6, 1, 8)
    workload = GeneratedWorkload(parse_distribution("fixed:8192", "prompt"), parse_distribution("fixed:64", "output"),
                                 duration_s=None, requests=60, seed=1).at(1.0)
    first = run_serving(deployment, workload, record_events=False)
    assert first.summary == run_serving(load_deployment(SERVE), workload, record_events=False).summary
    assert first.summary["completed"] == 60 and first.summary["total_output_tokens"] == 60 * 64
    assert first.summary["kv_bytes_shipped"] == 60 * 8192 * m.shipped_bytes_per_token
    assert first.summary["median_ttft_ms"] >= deployment.prefill_table(8192) * 1e3 - 1e-9  # ms, rounding


def test_run_bm_ran_the_kernel_the_model_prices():
    """Run bm's profile (committed): every FA2 call at head_dim 192 ran FA2_HD192's traits."""
    import csv
    import gzip
    import re

    from rdusim.mapping.gpu import FA2_HD192

    with gzip.open(ROOT / "benchmarks/gpu/h200-20261129bm-mla-prefill-kernels.csv.gz", "rt") as fh:
        traits = {m.group(1) for r in csv.DictReader(fh)
                  if (m := re.search(r"Flash_fwd_kernel_traits<(\d+, \d+, \d+, \d+),", r["kernel"]))}
    assert traits == {"192, {}, {}, {}".format(*FA2_HD192)}


def test_run_bm_frozen_predictions_are_todays():
    """Run bm was predicted and frozen before it ran (mla_prefill_compare.py --frozen): the model
    gives every frozen row again to the printed 0.1 us, and compares with the committed run."""
    from rdusim.analysis.gpu.measured import read_frozen
    from tests.gpu.scripts import bench_script

    compare = bench_script("mla_prefill_compare")
    frozen = read_frozen(ROOT / "benchmarks/gpu/h200-20261129bm-mla-prefill-predicted.txt")
    now = compare.predictions(compare.h200())
    assert len(frozen) == len(now) == 23
    for name, us in now.items():
        assert round(us, 1) == frozen[name], name
