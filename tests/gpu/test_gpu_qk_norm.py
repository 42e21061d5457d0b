"""Qwen3's per-head QK-RMSNorm on the GPU model (``attention.qk_norm``): the kernels the measured
forward launches for it, their host ops, the layer it belongs to, and the harness's numerics."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import (
    MEASURED_LAYER,
    decoder_layer,
    llama_shape,
    simulate_gpu_step,
)
from rdusim.cli import main
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import BF16, layer_kernels, rt_strided

from .scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]


def qwen3() -> ModelSpec:
    return load_spec(model_path("qwen3-8b"), ModelSpec)


def h200() -> Gpu:
    return Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))


def test_the_qk_norm_follows_the_qkv_gemm_in_a_qwen3_layer_only() -> None:
    llama = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    assert decoder_layer(llama) == MEASURED_LAYER
    layer = decoder_layer(qwen3())
    assert layer[layer.index("qkv_gemm") + 1] == "qk_norm"
    assert [k for k in layer if k != "qk_norm"] == MEASURED_LAYER


@pytest.mark.parametrize(("batch", "tp"), [(1, 1), (8, 1), (64, 2)])
def test_qk_norm_kernels(batch: int, tp: int) -> None:
    """One norm of rows x heads rows of head_dim for q, then for k; with more than one row each is
    preceded by the strided copy that makes the slice contiguous, launched by the same call."""
    g = h200()
    s = llama_shape(qwen3(), batch=batch, tokens=1, kv_len=2048, tp=tp)
    ks = layer_kernels(["qk_norm"], s, g, phase="decode")
    hq, hkv = 32 // tp, 8 // tp
    if batch == 1:
        assert [k.name for k in ks] == ["qk_norm", "qk_norm"]
        assert [k.groups[0].count for k in ks] == [hq, hkv]  # one CTA a head row
        assert all(k.host_ops == ("rms_norm", "transpose") and not k.host_paid for k in ks)
        return
    assert [k.name for k in ks] == ["qk_norm.copy", "qk_norm"] * 2
    for copy, norm, heads in ((ks[0], ks[1], hq), (ks[2], ks[3], hkv)):
        elements = batch * heads * 128
        assert copy.strided and copy.round_trips == (rt_strided(elements),)
        assert copy.bytes == pytest.approx(2 * elements * BF16)  # read and written once
        assert norm.groups[0].count == batch * heads and norm.bytes == pytest.approx(2 * elements * BF16)
        assert copy.host_ops == ("rms_norm", "transpose") and norm.host_paid and not norm.host_ops


def test_qwen3_layer_dispatches_the_ops_of_the_measured_forward() -> None:
    """measure.py's forward with qk_norm: Llama's ops plus two F.rms_norm calls and two transposes
    (q and k normalised before their transposes; v's transpose in place of the whole QKV's)."""
    g = h200()
    model = qwen3()
    s = llama_shape(model, batch=8, tokens=1, kv_len=2048)

    def ops(layer: list[str]) -> Counter:
        return Counter(op for k in layer_kernels(layer, s, g, phase="decode") for op in k.host_ops)

    assert ops(decoder_layer(model)) - ops(MEASURED_LAYER) == Counter(rms_norm=2, transpose=2)


def test_a_step_without_its_qk_norm_is_refused_and_the_norm_costs_time() -> None:
    model = qwen3()
    plain = model.model_copy(update={"attention": model.attention.model_copy(update={"qk_norm": False})})
    common = dict(head=["embedding", "lm_head"], phase="decode", batch=8, seq_len=8192, mode="graph")
    with pytest.raises(ValueError, match="add qk_norm after qkv_gemm"):
        simulate_gpu_step(model, h200(), layer=MEASURED_LAYER, **common)
    with pytest.raises(ValueError, match="remove qk_norm"):
        simulate_gpu_step(plain, h200(), layer=decoder_layer(model), **common)
    with_norm = simulate_gpu_step(model, h200(), layer=decoder_layer(model), **common)
    without = simulate_gpu_step(plain, h200(), layer=MEASURED_LAYER, **common)
    added = with_norm.seconds - without.seconds
    per_layer = (with_norm.kernels["qk_norm"] + with_norm.kernels["qk_norm.copy"]) / model.layers
    assert added == pytest.approx(per_layer * model.layers, rel=0.02)
    assert 4 * 1e-6 < per_layer < 20e-6  # four small kernels a layer


def test_a_gpu_mapping_of_qwen3_without_its_qk_norm_exits_2_located(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "mappings/llama-3.1-8b/decode-h100.yaml").read_text().replace("../../", f"{ROOT}/")
    bad = tmp_path / "q.yaml"
    bad.write_text(text.replace("model: llama-3.1-8b", "model: qwen3-8b"))
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if t.startswith("layer:"))
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}" in err and "add qk_norm after qkv_gemm" in err and "Traceback" not in err
    bad.write_text(bad.read_text().replace("qkv_gemm, rope", "qkv_gemm, qk_norm, rope"))
    assert main(["simulate", str(bad)]) == 0


def test_the_harness_normalises_each_head_before_the_rotary_embedding() -> None:
    """measure.py's Llama with qk_norm (unit norm weights): every q and k head reaching the rotary
    embedding has RMS 1 over head_dim; v is the QKV output's v slice, as without the norm."""
    torch = pytest.importorskip("torch")
    measure = bench_script("measure")
    s = measure.LlamaShape(layers=1, hidden=64, q_heads=4, kv_heads=2, head_dim=16, ffn=96, vocab=32, qk_norm=True)
    torch.manual_seed(0)
    model = measure.Llama(s, torch.device("cpu"))
    seen: list = []
    rope = model.rope
    model.rope = lambda x, cos, sin: seen.append(x.float()) or rope(x, cos, sin)
    b, t = 2, 3
    ck = [torch.zeros(b, s.kv_heads, 8, s.head_dim, dtype=measure.BF16)]
    cv = [torch.zeros_like(ck[0])]
    pos = torch.arange(t)
    cos, sin = measure.rope_tables(s, pos)
    tokens = torch.randint(0, s.vocab, (b, t))
    model.forward(tokens, ck, cv, pos, cos, sin, prefill=True)
    q, k = seen
    assert q.shape == (b, s.q_heads, t, s.head_dim) and k.shape == (b, s.kv_heads, t, s.head_dim)
    for x in (q, k):
        assert torch.allclose(x.pow(2).mean(-1).sqrt(), torch.ones(x.shape[:-1]), atol=0.02)
    F = torch.nn.functional
    h = F.rms_norm(F.embedding(tokens, model.embed), (s.hidden,), model.layers[0]["norm1"], 1e-5)
    qkv = F.linear(h, model.layers[0]["wqkv"]).view(b, t, -1, s.head_dim)
    assert torch.equal(cv[0][:, :, :t], qkv[:, :, s.q_heads + s.kv_heads:].transpose(1, 2))
    assert not torch.allclose(q, qkv[:, :, :s.q_heads].transpose(1, 2).float(), atol=0.02)  # normalised


@pytest.mark.parametrize(("run", "groups"), [
    ("bk", {"qwen3-8b decode graph": ("2.0%", "+4.6%"), "qwen3-8b-noqk decode graph": ("2.1%", "+4.9%"),
            "qwen3-8b prefill eager": ("5.9%", "-6.9%"), "qwen3-8b-noqk prefill eager": ("5.5%", "-7.0%")}),
    ("bl", {"qwen3-1.7b decode graph": ("2.6%", "+3.6%"), "qwen3-1.7b prefill eager": ("3.9%", "+10.0%")}),
])
def test_runs_bk_bl_frozen_figures(run: str, groups: dict, capsys: pytest.CaptureFixture[str]) -> None:
    """qk_norm_compare.py on the committed runs: every planned point was measured and frozen, and the
    frozen predictions' group figures are docs/gpu.md's ("Run bk", "Run bl")."""
    qk = bench_script("qk_norm_compare")
    gpu_dir = ROOT / "benchmarks/gpu"
    frozen = qk.read_predicted(gpu_dir / f"h200-20261129{run}-qk-norm-predicted.txt")
    assert set(frozen) == {p[0] for p in qk.points(qk.QK_RUNS[run])}
    assert qk.main(["--run", run, "--compare", str(gpu_dir / f"h200-20261129{run}-qk-norm.csv"),
                    "--predicted", str(gpu_dir / f"h200-20261129{run}-qk-norm-predicted.txt")]) == 0
    out = capsys.readouterr().out
    assert "| - |" not in out  # no planned point missing
    for group, (median, worst) in groups.items():
        line = next(x for x in out.splitlines() if x.startswith(f"| {group} |"))
        assert line.endswith(f"| {median} | {worst} |"), line
