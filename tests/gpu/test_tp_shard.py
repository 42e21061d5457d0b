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


@pytest.mark.parametrize("name, attr", [("llama-3.1-8b", "LLAMA_8B"), ("llama-3.1-70b", "LLAMA_70B")])
def test_tp_shard_splits_are_the_model_documents(name, attr):
    """tp_shard.py's literal shapes (the device has no rdusim) are rdusim's model documents', and
    run ap's TP8 shard of Llama-3.1-70B is 8 heads, 1 KV head, FFN 3584, vocabulary 16032."""
    from rdusim.config.loader import load_spec, model_path
    from rdusim.config.schema import ModelSpec

    tp_shard = _tp_shard()
    m = load_spec(model_path(name), ModelSpec)
    assert getattr(tp_shard, attr) == {
        "layers": m.layers,
        "hidden": m.hidden,
        "heads": m.attention.heads,
        "kv_heads": m.attention.kv_heads,
        "head_dim": m.attention.head_dim,
        "ffn": m.ffn.intermediate,
        "vocab": m.vocab,
    }
    assert tp_shard.MODELS[name][0] is getattr(tp_shard, attr)
    if name == "llama-3.1-70b":
        sh = tp_shard.shard_shape(tp_shard.LLAMA_70B, 8)
        assert (sh["heads"], sh["kv_heads"], sh["ffn"], sh["vocab"]) == (8, 1, 3584, 16032)
        sh = tp_shard.shard_shape(tp_shard.LLAMA_70B, 4)
        assert (sh["heads"], sh["kv_heads"], sh["ffn"], sh["vocab"]) == (16, 2, 7168, 32064)
    else:  # run aw's shards of Llama-3.1-8B
        sh = tp_shard.shard_shape(tp_shard.LLAMA_8B, 4)
        assert (sh["heads"], sh["kv_heads"], sh["ffn"], sh["vocab"]) == (8, 2, 3584, 32064)
        sh = tp_shard.shard_shape(tp_shard.LLAMA_8B, 2)
        assert (sh["heads"], sh["kv_heads"], sh["ffn"], sh["vocab"]) == (16, 4, 7168, 64128)


def test_tp_shard_classes_of_run_ap_70b_shard():
    """Run ap's TP8 shard of Llama-3.1-70B at compare-hw's b32 x 8192, one graph replay: 80 layers
    of FA2's split-KV kernel and its combine, one O and one down GEMM a layer, 161 RMSNorms, the
    LM head once; and the committed step is the CSV's."""
    import gzip

    tp_shard = _tp_shard()
    with gzip.open(ROOT / "benchmarks/gpu/h200-20261128ap-tpshard70-kernels.csv.gz", "rt") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if r["row"] == "tp8_b32_l8192:flash:graph" and r["replay"] == "1"
        ]
    classes = tp_shard.classify([r["kernel"] for r in rows], tp_shard.LLAMA_70B["layers"])
    expected = {"attention": 160, "gemm_o": 80, "gemm_down": 80, "rms_norm": 161, "lm_head": 1}
    for cls, count in expected.items():
        assert classes.count(cls) == count, cls
    with open(ROOT / "benchmarks/gpu/h200-20261128ap-tpshard70.csv") as fh:
        step = next(r for r in csv.DictReader(fh) if r["row"] == "tp8_b32_l8192:flash")
    assert float(step["graph_median_us"]) == 13886.5


def test_tp_shard_run_aw_rows():
    """Run aw's set: Llama-3.1-8B's document, the TP4 shard at run an's b1 / b8 x 8192 and its two
    controls, the TP2 shard at the same long-KV points, run an's b32 x 4096 and b64 x 2048 TP4
    points, FlashAttention forced, files tpshard8tp4*;
    the model gives 64 and 16 KV splits at TP4 b1 / b8 x 8192 (2 KV heads, FA2's heuristic)."""
    tp_shard = _tp_shard()
    full, rows, runs, tag, run, document = tp_shard.MODELS["llama-3.1-8b-tp4"]
    assert full is tp_shard.LLAMA_8B and document == "llama-3.1-8b"
    assert (tag, run) == ("8tp4", "aw")
    assert [(tp, b, kv) for _, tp, b, kv in rows] == [
        (4, 1, 8192), (4, 8, 8192), (4, 1, 1024), (4, 128, 1024), (2, 1, 8192), (2, 8, 8192),
        (4, 32, 4096), (4, 64, 2048),
    ]
    assert {backend for _, backend in runs} == {"flash"}
    pairs = tp_shard.attention_pairs("llama-3.1-8b-tp4")
    assert [pairs[n]["splits"] for n, *_ in rows] == [64, 16, 8, 1, 64, 7, 4, 2]
    assert [pairs[n]["split_ctas"] for n, *_ in rows] == [128, 256, 16, 256, 256, 224, 256, 256]


def test_log_max_splits_of_run_ap_combine():
    """The combine's ``Log_max_splits`` read from its name: 6 at the 70B TP8 shard's b1 (64 splits)."""
    tp_shard = _tp_shard()
    name = (
        "void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4,"
        " false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4,"
        " cutlass::bfloat16_t> >, 4, 6, true>(pytorch_flash::Flash_fwd_params)"
    )
    assert tp_shard._log_max_splits(name) == 6
    assert tp_shard._log_max_splits("nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT") is None


AW = ROOT / "benchmarks/gpu/h200-20261128aw-tpshard8tp4"


def _documents_then(monkeypatch, *, pair_under_pipeline: bool) -> None:
    """GPU documents as run aw was compared with: the H200's strided kernels at the H100's share of
    HBM peak (``strided_stream`` 0.539; its absolute rate came after), and with
    ``pair_under_pipeline`` FA2's split-KV pair under ``launch.pipeline`` (the H200's
    ``fa2_split_fixed`` / ``fa2_combine_fixed`` came after too, then the H100's); and the model as it was then:
    every RMSNorm's weight in L2 (its round trips from DRAM, ``cold_round_trips``, came after:
    run aw's analysis priced them as a candidate), and every non-vectorised kernel charged a full
    4-element chain (the chain at its elements, ``rt_strided``, came after run bc)."""
    from dataclasses import replace

    import rdusim.hw.gpu as hw
    import rdusim.mapping.gpu as mapping

    real = hw.load_gpu_node
    real_norm = mapping.rms_norm
    monkeypatch.setattr(mapping, "rms_norm", lambda *a: replace(real_norm(*a), cold_round_trips=0))
    monkeypatch.setattr(mapping, "rt_strided", lambda elements: mapping.RT_STRIDED)

    def load(path, what=""):
        node = real(path, what)
        spec = node.gpu.spec
        spec = spec.model_copy(update={"efficiency": spec.efficiency.model_copy(update={"strided_stream": 0.539})})
        if pair_under_pipeline:
            launch = spec.launch.model_copy(update={"fa2_split_fixed_s": None, "fa2_combine_fixed_s": None})
            spec = spec.model_copy(update={"launch": launch})
        return replace(node, gpu=replace(node.gpu, spec=spec))

    monkeypatch.setattr(hw, "load_gpu_node", load)


@pytest.mark.parametrize(("suffix", "then"), [("-compare.txt", True), ("-compare-fa2fixed.txt", False)])
def test_run_aw_committed_comparison_is_what_compare_prints(capsys, monkeypatch, suffix, then):
    """Run aw's committed comparisons (per class, FA2's split-KV pair, the step's budget) are what
    ``tp_shard.py --model llama-3.1-8b-tp4 --compare`` prints from the committed CSVs: the model as
    run aw was compared with (``-compare.txt``) and with the H200's split-KV pair at its own fixed
    times (``-compare-fa2fixed.txt``), both before the H200's strided kernels took the H100's
    absolute rate."""
    monkeypatch.chdir(ROOT)
    _documents_then(monkeypatch, pair_under_pipeline=then)
    tp_shard = _tp_shard()
    args = ["--model", "llama-3.1-8b-tp4", "--compare", f"{AW}-kernels.csv.gz", f"{AW}.csv"]
    assert tp_shard.main(args) == 0
    assert capsys.readouterr().out == (ROOT / f"{AW}{suffix}").read_text()


def test_run_aw_fa2_grids_are_the_model_splits():
    """Run aw's profiled FA2 kernels: the split kernel's grid is (1, splits, batch x KV heads) and
    the combine's ``Log_max_splits`` is ceil(log2(splits)), with the model's splits at every row
    (``fa2_splits``: 64, 16, 8, 1, 64, 7, 4, 2); the combine's grid is batch x query heads / 4."""
    import gzip
    import math

    tp_shard = _tp_shard()
    pairs = tp_shard.attention_pairs("llama-3.1-8b-tp4")
    shapes = {name: (tp, b) for name, tp, b, _ in tp_shard.ROWS_8B_TP4}
    seen: dict[str, dict[str, str]] = {}
    with gzip.open(f"{AW}-kernels.csv.gz", "rt") as fh:
        for r in csv.DictReader(fh):
            name, _, mode = r["row"].split(":")
            low = r["kernel"].lower()
            if mode == "graph" and "flash" in low:
                seen.setdefault(name, {})["combine" if "combine" in low else "split"] = r["grid"]
                if "combine" in low:
                    seen[name]["log"] = str(tp_shard._log_max_splits(r["kernel"]))
    assert set(seen) == set(pairs)
    for name, a in pairs.items():
        tp, batch = shapes[name]
        sh = tp_shard.shard_shape(tp_shard.LLAMA_8B, tp)
        if a["splits"] == 1:  # FA2's forward kernel: grid (m blocks, batch, KV heads)
            assert seen[name] == {"split": f"1x{batch}x{sh['kv_heads']}"}
            continue
        assert seen[name]["split"] == f"1x{a['splits']}x{batch * sh['kv_heads']}"
        assert seen[name]["combine"] == f"{a['combine_ctas']}x1x1"
        assert seen[name]["log"] == str(math.ceil(math.log2(a["splits"])))


@pytest.mark.parametrize("suffix", ["", "-repeat"])
def test_run_aw_types_is_what_types_prints(capsys, monkeypatch, suffix):
    """Run aw's residual by kernel type and path (``-types.txt``, docs/gpu.md "Run aw ... by kernel
    type") is what ``tp_shard.py --model llama-3.1-8b-tp4 --types`` prints from the committed
    kernels, for the first process and its repeat, with the documents as it was analysed (before the
    H200's strided kernels took the H100's absolute rate, which its candidate column prices)."""
    monkeypatch.chdir(ROOT)
    _documents_then(monkeypatch, pair_under_pipeline=False)
    tp_shard = _tp_shard()
    assert tp_shard.main(["--model", "llama-3.1-8b-tp4", "--types", f"{AW}{suffix}-kernels.csv.gz"]) == 0
    assert capsys.readouterr().out == (ROOT / f"{AW}{suffix}-types.txt").read_text()


def test_run_aw_kernel_types_and_chains():
    """One replay of run aw's TP4 b1 x 8192 graph step typed as the model's launches: ten RoPE
    kernels, two ``index_copy_`` and two SiLU * up kernels a layer, each type the model's too; at
    b1 the k-side negation runs 1 element a thread, the k-side products and ``index_copy_`` 2 (one
    CTA of 128 threads: PyTorch's ``elementwise_kernel<128, 4>``), the q side 4; from b2 every one
    but the negation of k runs 4, from b4 all."""
    import gzip

    from rdusim.hw.gpu import load_gpu_node

    tp_shard = _tp_shard()
    with gzip.open(f"{AW}-kernels.csv.gz", "rt") as fh:
        rows = [r for r in csv.DictReader(fh) if r["row"] == "tp4_b1_l8192:flash:graph" and r["replay"] == "1"]
    labels = tp_shard.kernel_types([r["kernel"] for r in rows])
    for kind in tp_shard.SLOT_TYPES["rope"]:
        assert labels.count(f"rope: {kind}") == 32, kind
    assert labels.count("kv_append: index_copy k") == labels.count("silu_mul: silu") == 32
    assert labels.count("rms_norm: rms_norm") == 65 and labels.count("other: embedding") == 1
    gpu = load_gpu_node(str(ROOT / "hw_configs/h200.yaml")).gpu
    model = tp_shard.model_types("llama-3.1-8b-tp4", gpu, [(4, 1, 8192)])[(4, 1, 8192)]
    assert set(labels) - set(model) == {f"{c}: split-K reduce" for c in ("gemm_qkv", "gemm_gate_up", "gemm_down")}
    chains = {k: tp_shard.legacy_chain(f"rope: {k}", 4, 1) for k in ("neg k", "mul k cos", "neg q", "mul q sin")}
    assert chains == {"neg k": 1, "mul k cos": 2, "neg q": 4, "mul q sin": 4}
    assert tp_shard.legacy_chain("kv_append: index_copy v", 4, 1) == 2
    assert tp_shard.legacy_chain("rope: neg k", 4, 2) == 2
    assert tp_shard.legacy_chain("kv_append: index_copy v", 4, 2) == 4
    assert tp_shard.legacy_chain("rope: neg k", 4, 4) == 4
    assert tp_shard.legacy_chain("silu_mul: silu", 4, 1) is None
    assert tp_shard.legacy_chain("silu_mul: silu", 4, 8) == 4


def test_in_step_norms_is_what_norms_prints(capsys, monkeypatch):
    """Every profiled in-step RMSNorm (runs l, m, aw, ap) against the model (its weight from DRAM,
    adopted in P12) and the kernel with its weight in L2 (the model before) (``-norms.txt``) is
    what ``tp_shard.py --norms`` prints."""
    monkeypatch.chdir(ROOT)
    tp_shard = _tp_shard()
    assert tp_shard.main(["--norms"]) == 0
    assert capsys.readouterr().out == (ROOT / f"{AW}-norms.txt").read_text()


def test_norm_weight_candidate_is_the_second_pass_at_dram_latency():
    """The candidate's extra time of an RMSNorm: width / 512 round trips (its second pass) at the
    H200's DRAM latency less its L2 latency, 0.352 - 0.188 us: 1.31 us at 4096, 2.62 at 8192."""
    from rdusim.hw.gpu import load_gpu_node

    tp_shard = _tp_shard()
    gpu = load_gpu_node(str(ROOT / "hw_configs/h200.yaml")).gpu
    assert tp_shard.norm_weight_s(4096, gpu) * 1e6 == pytest.approx(8 * 0.164)
    assert tp_shard.norm_weight_s(8192, gpu) * 1e6 == pytest.approx(16 * 0.164)


def test_model_norm_waits_on_its_weight_from_dram_in_the_first_wave():
    """The model's RMSNorm in a step (``rms_norm``, P12) is the same kernel with its weight in L2
    plus ``norm_weight_s`` while its rows fit one wave (a decode step's); a grid of several waves
    (prefill) pays it once, its later waves finding the weight in L2."""
    from dataclasses import replace

    from rdusim.analysis.gpu.predict import kernels_device_s
    from rdusim.hw.gpu import load_gpu_node
    from rdusim.mapping.gpu import rms_norm, rt_rms_norm_weight

    tp_shard = _tp_shard()
    gpu = load_gpu_node(str(ROOT / "hw_configs/h200.yaml")).gpu
    for rows, width in ((1, 4096), (64, 8192)):
        k = rms_norm("n", rows, width, gpu)
        assert k.cold_round_trips == rt_rms_norm_weight(width) == width // 512
        cold, warm = kernels_device_s([k], gpu), kernels_device_s([replace(k, cold_round_trips=0)], gpu)
        assert cold - warm == pytest.approx(tp_shard.norm_weight_s(width, gpu))
    k = rms_norm("n", 8 * gpu.sms * 16, 4096, gpu)  # eight waves of 16 CTAs an SM
    cold, warm = kernels_device_s([k], gpu), kernels_device_s([replace(k, cold_round_trips=0)], gpu)
    assert 0 < cold - warm < 2 * tp_shard.norm_weight_s(4096, gpu)
