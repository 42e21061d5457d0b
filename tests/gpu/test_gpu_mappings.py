"""The node-scale GPU mappings of compare-hw: DeepSeek-R1 on 8 x H200 (DP attention, EP experts
over all-to-all, MTP, FP8) and Llama-3.1-70B TP8; capacity with numbers, located bad values,
compare-hw through the CLI."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import load_gpu_mapping, simulate_gpu_mapping
from rdusim.cli import main
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import KvPolicySpec, ModelSpec
from rdusim.hw.gpu import load_gpu_node
from rdusim.mapping.gpu_mla import (
    expected_gpus_per_token,
    ffn_kernels,
    mla_attention_kernels,
    mla_kv_bytes_per_token,
    mla_shape,
    mla_weight_bytes,
)

ROOT = Path(__file__).resolve().parents[2]
DEEPSEEK = ROOT / "mappings/deepseek-r1/decode-h200x8.yaml"
LLAMA70 = [ROOT / f"mappings/llama-3.1-70b/decode-{g}x8.yaml" for g in ("h100", "h200")]
SN40L70 = ROOT / "mappings/llama-3.1-70b/decode-tp16.yaml"


def deepseek() -> ModelSpec:
    return load_spec(model_path("deepseek-r1"), ModelSpec)


def test_new_documents_validate(capsys: pytest.CaptureFixture[str]) -> None:
    docs = [DEEPSEEK, *LLAMA70, SN40L70]
    assert main(["validate", *map(str, docs)]) == 0
    assert f"{len(docs)} file(s) valid" in capsys.readouterr().out


def test_expected_gpus_per_token_closed_form() -> None:
    model = deepseek()
    assert expected_gpus_per_token(model, 1) == pytest.approx(1.0)
    # 8 of 256 experts, 32 per GPU: 8 x (1 - C(224, 8) / C(256, 8))
    from math import comb

    assert expected_gpus_per_token(model, 8) == pytest.approx(8 * (1 - comb(224, 8) / comb(256, 8)))
    assert 1 < expected_gpus_per_token(model, 8) < 8


def test_dp_layout_holds_only_its_sequences_and_exchanges_by_all_to_all() -> None:
    model, gpu = deepseek(), load_gpu_node(ROOT / "hw_configs/h200-8.yaml").gpu
    dp = mla_shape(model, 64, 32768, 8, attention="dp")
    tp = mla_shape(model, 64, 32768, 8)
    assert dp.seqs == 8 and tp.seqs == 64 and dp.heads == 128 and tp.heads == 16

    def ops(kernels: list) -> list[str]:
        return [k.collective.op for k in kernels if k.math == "nvlink"]

    assert ops(mla_attention_kernels(dp, gpu)) == [] and ops(mla_attention_kernels(tp, gpu)) == ["all_reduce"]
    assert ops(ffn_kernels(dp, gpu, moe=True)) == ["all_to_all", "all_to_all"]
    assert ops(ffn_kernels(tp, gpu, moe=True)) == ["all_reduce"]
    assert ops(ffn_kernels(dp, gpu, moe=False)) == []  # dense layers whole on every GPU
    dispatch = next(k for k in ffn_kernels(dp, gpu, moe=True) if k.name == "moe_dispatch")
    sent = 8 * expected_gpus_per_token(model, 8) * model.hidden * 2
    assert dispatch.collective.nbytes == pytest.approx(sent) and dispatch.bytes == pytest.approx(sent * 7 / 8)


def test_deepseek_capacity_with_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """FP8 weights ~671 GB over 8 x 141 GB: DP attention replicates attention and the dense
    parts but each GPU keeps only its own sequences' KV, so far more sequences fit than
    with TP attention (every GPU the whole latent cache)."""
    model = deepseek()
    assert mla_weight_bytes(model, 1) == pytest.approx(671e9, rel=0.02)
    dp_w = mla_weight_bytes(model, 8, attention="dp", mtp=True)
    assert mla_weight_bytes(model, 8) < dp_w < 141e9
    spec, model, node = load_gpu_mapping(DEEPSEEK)
    result = simulate_gpu_mapping(spec, model, node, seq_len=32768, batch=8)
    per_seq = mla_kv_bytes_per_token(model, mtp=True) * 32768
    assert result.max_batch == 8 * int((141e9 - dp_w) // per_seq)
    tp_fit = int((141e9 - mla_weight_bytes(model, 8)) // mla_kv_bytes_per_token(model) // 32768)
    assert result.max_batch > 4 * tp_fit
    assert result.kv_bytes == pytest.approx(per_seq)  # 8 sequences over 8 GPUs: one each
    assert main(["simulate", str(DEEPSEEK), "--batch", str(result.max_batch + 8)]) == 2
    err = capsys.readouterr().err
    assert "does not fit on 8 x H200-SXM-141GB" in err and "GB of fp8 weights" in err and "max batch" in err


def test_mtp_throughput_counts_accepted_tokens() -> None:
    spec, model, node = load_gpu_mapping(DEEPSEEK)
    with_mtp = simulate_gpu_mapping(spec, model, node, seq_len=8192, batch=64)
    assert with_mtp.tokens_per_s == pytest.approx(64 * 1.875 / with_mtp.step.seconds)
    plain, _, _ = load_gpu_mapping(DEEPSEEK, overrides=["workload.accepted_tokens_per_step=1.0"])
    without = simulate_gpu_mapping(plain, model, node, seq_len=8192, batch=64)
    assert without.step.seconds < with_mtp.step.seconds  # two query rows and the MTP module
    assert "mtp.eh_proj" in with_mtp.step.kernels and "mtp.eh_proj" not in without.step.kernels


@pytest.mark.parametrize(("key", "value", "expect"), [
    ("workload.accepted_tokens_per_step", "2.5", "at most 1 + mtp_layers"),
    ("attention", "xp", "attention"),
])
def test_bad_deepseek_values_exit_2_located(key: str, value: str, expect: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "m.yaml"
    text = DEEPSEEK.read_text().replace("../../", f"{ROOT}/")
    old = {"workload.accepted_tokens_per_step": "accepted_tokens_per_step: 1.875", "attention": "attention: dp"}[key]
    new = old.split(":")[0] + ": " + value
    bad.write_text(text.replace(old, new))
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if t.strip().startswith(new))
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}" in err and expect in err


def test_layout_rules_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llama = LLAMA70[1].read_text().replace("../../", f"{ROOT}/")
    bad = tmp_path / "l.yaml"
    bad.write_text(llama.replace("tp: 8\n", "tp: 8\nattention: dp\n"))
    assert main(["simulate", str(bad)]) == 2
    assert f"{bad}:" in capsys.readouterr().err
    bad.write_text(DEEPSEEK.read_text().replace("../../", f"{ROOT}/") + "layer: [rms_norm]\n")
    assert main(["simulate", str(bad)]) == 2
    assert "takes its kernels from" in capsys.readouterr().err
    assert main(["validate", str(bad)]) == 2  # validate applies the same cross-document rules
    assert "takes its kernels from" in capsys.readouterr().err


def test_llama_70b_tp8_pays_its_all_reduces() -> None:
    spec, model, node = load_gpu_mapping(LLAMA70[1])
    result = simulate_gpu_mapping(spec, model, node, seq_len=8192, batch=32)
    assert result.tp == 8 and "all_reduce" in result.step.kernels
    assert result.weight_bytes == pytest.approx(141e9 / 8, rel=0.01)
    one = simulate_gpu_mapping(spec, model, node, seq_len=8192, batch=32,
                               policy=KvPolicySpec(name="snapstream", compression=4.0))
    assert one.step.kernels["all_reduce"] == pytest.approx(result.step.kernels["all_reduce"])  # same bytes


def test_single_gpu_mapping_has_no_collective() -> None:
    """A one-GPU run has no collective, even with all_reduce in its layer list (the single-GPU
    figures of docs/gpu.md do not move)."""
    from rdusim.analysis.gpu.predict import llama_shape
    from rdusim.mapping.gpu import layer_kernels

    spec, model, node = load_gpu_mapping(ROOT / "mappings/llama-3.1-8b/decode-h100.yaml")
    shape = llama_shape(model, batch=4, tokens=1, kv_len=1024, tp=1)
    kernels = layer_kernels([*spec.layer, "all_reduce"], shape, node.gpu, phase="decode")
    assert len(kernels) >= len(spec.layer) and not any(k.math == "nvlink" for k in kernels)
    assert "all_reduce" not in simulate_gpu_mapping(spec, model, node).step.kernels


@pytest.mark.parametrize(("mapping", "hws"), [
    ("mappings/deepseek-r1/decode.yaml", ["hw_configs/sn40l-16.yaml", "mappings/deepseek-r1/decode-h200x8.yaml"]),
    ("mappings/llama-3.1-70b/decode-tp16.yaml", ["hw_configs/sn40l-16.yaml", "mappings/llama-3.1-70b/decode-h100x8.yaml",
                                                 "mappings/llama-3.1-70b/decode-h200x8.yaml"]),
])
def test_compare_hw_cli_with_gpu_mappings(mapping: str, hws: list[str], tmp_path: Path) -> None:
    out = tmp_path / "cmp.csv"
    assert main(["compare-hw", str(ROOT / mapping), "--hw", ",".join(str(ROOT / h) for h in hws),
                 "--seq-len", "8192", "--policy", "none,snapstream", "--batch", "auto", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2 * len(hws)
    gpu = [r for r in rows if not r["hardware"].startswith("SN40L")]
    assert all(int(r["batch"]) > 0 and float(r["tokens_per_s"]) > 0 for r in gpu)
    full, snap = gpu[0], gpu[1]
    assert int(snap["max_batch"]) > int(full["max_batch"])  # equal policy on both sides
    if "deepseek" in mapping:
        assert "MTP 1.875" in full["note"] and "DP8 attention + EP8" in full["note"]


def test_compare_hw_refuses_a_gpu_mapping_of_another_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare-hw", str(ROOT / "mappings/deepseek-r1/decode.yaml"), "--hw", str(LLAMA70[0]),
                 "--seq-len", "4096"]) == 2
    assert "llama-3.1-70b" in capsys.readouterr().err


def test_a_node_too_small_is_a_row_with_the_numbers(tmp_path: Path) -> None:
    """DeepSeek-R1 DP8/EP8 on 8 x H100 80GB: 102.5 GB of FP8 weights per GPU do not fit; the
    comparison row says so with the numbers instead of failing."""
    small = tmp_path / "ds-h100.yaml"
    small.write_text(DEEPSEEK.read_text().replace("../../", f"{ROOT}/").replace("h200-8.yaml", "h100-8.yaml"))
    out = tmp_path / "cmp.csv"
    assert main(["compare-hw", str(ROOT / "mappings/deepseek-r1/decode.yaml"), "--hw", str(small),
                 "--seq-len", "8192", "--out", str(out)]) == 0
    (row,) = csv.DictReader(out.open())
    assert row["batch"] == "0" and "102.5 GB on each GPU" in row["note"] and "of 80 GB" in row["note"]


def _without_custom_all_reduce(tmp_path: Path) -> Path:
    """An 8 x H200 node whose GPU document lacks vLLM's custom all-reduce (h200.yaml less its section)."""
    lines = (ROOT / "hw_configs/h200.yaml").read_text().splitlines(keepends=True)
    start = next(i for i, t in enumerate(lines) if t.startswith("  custom_all_reduce:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("    "))
    (tmp_path / "h200.yaml").write_text("".join(lines[:start] + lines[end:]))
    node = tmp_path / "h200-8.yaml"
    node.write_text((ROOT / "hw_configs/h200-8.yaml").read_text())
    return node


def test_custom_all_reduce_needs_the_document_and_is_located(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """all_reduce_kernel: custom on a document without nvlink.custom_all_reduce: exit 2 at the key; a
    misspelt value: exit 2 naming the choices."""
    node = _without_custom_all_reduce(tmp_path)
    bad = tmp_path / "m.yaml"
    text = LLAMA70[1].read_text().replace("../../", f"{ROOT}/").replace(f"{ROOT}/hw_configs/h200-8.yaml", str(node))
    bad.write_text(text.replace("tp: 8\n", "tp: 8\nall_reduce_kernel: custom\n"))
    line = bad.read_text().splitlines().index("all_reduce_kernel: custom") + 1
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}" in err and "nvlink.custom_all_reduce" in err
    bad.write_text(text.replace("tp: 8\n", "tp: 8\nall_reduce_kernel: vllm\n"))
    assert main(["simulate", str(bad)]) == 2
    assert "'nccl'" in capsys.readouterr().err


def test_custom_all_reduce_replaces_nccls_under_8_mib() -> None:
    """Llama-3.1-70B TP8 decode at batch 32 (512 KiB all-reduces): with all_reduce_kernel: custom each
    is vLLM's two-stage kernel, no NCCL event nodes in the graph; at batch 1024 (16 MiB) NCCL's
    again; the rest of the step is the same."""
    spec, model, gpus = load_gpu_mapping(LLAMA70[1])
    custom = spec.model_copy(update={"all_reduce_kernel": "custom"})
    for batch, vllms in ((32, True), (1024, False)):
        nccl = simulate_gpu_mapping(spec, model, gpus, seq_len=1024, batch=batch, check_fit=False)
        ours = simulate_gpu_mapping(custom, model, gpus, seq_len=1024, batch=batch, check_fit=False)
        assert (ours.step.kernels["all_reduce"] != nccl.step.kernels["all_reduce"]) == vllms
        assert ours.step.kernels["o_gemm"] == pytest.approx(nccl.step.kernels["o_gemm"])
