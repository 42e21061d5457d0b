"""FlashAttention-3's forward (``mapping.gpu.flash3_prefill``) and a mapping's ``attention_kernel``.

FA3's tiles as flash-attention's hopper/tile_size.h gives them, the kernel's CTAs (longest query
blocks first, the exponentials and the output rescale per key block), the persistent grid's
later tiles exposing only their output store (closed form), the two constants fitted to the
FlashAttention-3 paper's figures and the figures held out, and the mapping option: FA3 prices
a prefill's attention on a GPU document that calibrates it, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from rdusim.analysis.gpu.measured import compare_fa3_published, error_stats, read_csv
from rdusim.analysis.gpu.predict import (
    FA3_PUBLISHED_CSV,
    fa3_loss,
    load_gpu_mapping,
    simulate_gpu_mapping,
)
from rdusim.cli import main
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import GpuSpec, ModelSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import BF16, CtaGroup, GpuKernel, fa3_fwd_tile, flash3_prefill
from rdusim.mapping.gpu_mla import mla_prefill_attention_kernels, mla_shape
from rdusim.sim.gpu import elapsed_s, simulate_gpu
from tests.gpu.scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "hw_configs/h100.yaml"
ROWS = read_csv(ROOT / "benchmarks/gpu" / FA3_PUBLISHED_CSV)


@pytest.fixture(scope="module")
def gpu() -> Gpu:
    return Gpu(load_spec(H100, GpuSpec))


@pytest.mark.parametrize(("head_dim", "head_dim_v", "causal", "tile"), [
    (64, 64, True, (192, 128)), (64, 64, False, (192, 192)), (96, 96, True, (192, 144)),
    (128, 128, True, (128, 128)), (128, 128, False, (128, 176)), (192, 128, True, (128, 128)),
    (192, 192, True, (128, 112)), (256, 256, True, (128, 80)),
])
def test_tiles_are_tile_size_fwd_sm90s(head_dim, head_dim_v, causal, tile):
    assert fa3_fwd_tile(head_dim, head_dim_v, causal) == tile


def test_kernel_ctas_longest_first_with_their_work(gpu):
    """One head of 1024 causal queries at head_dim 128: eight 128-row tiles visiting 1024, 896, ...,
    128 keys, longest first; each with its MMAs (2 x rows x keys x (d + dv)), one exponential a
    score, the output rescale of every key block at the FP32 rate plus the per-tile cost, Q read
    before and O written after."""
    kernel = flash3_prefill("a", 1, 1, 1, 1024, 128, gpu)[0]
    assert (kernel.ctas_per_sm, kernel.math, kernel.persistent) == (1, "fa3", True)
    keys = [g.tiles * 128 for g in kernel.groups]
    assert keys == [1024 - 128 * i for i in range(8)]
    rescale = 128 * 128 / (gpu.fp32_flops_per_s / 2 / gpu.sms)
    for g, k in zip(kernel.groups, keys, strict=True):
        assert g.flops == pytest.approx(2.0 * 128 * k * 256)
        assert g.sfu == 128 * k
        assert g.stall_s == pytest.approx(k // 128 * rescale + gpu.launch_s("fa3_tile"))
        assert g.prologue_bytes == g.epilogue_bytes == 128 * 128 * BF16
    mla = flash3_prefill("a", 1, 1, 1, 1024, 192, gpu, head_dim_v=128)[0].groups[0]
    assert (mla.flops, mla.prologue_bytes, mla.epilogue_bytes) == (2.0 * 128 * 1024 * 320, 128 * 192 * BF16,
                                                                   128 * 128 * BF16)


def test_a_persistent_grids_later_tiles_expose_only_their_store(gpu):
    """Two waves of identical tiles (one an SM each): the first waits a DRAM round trip and reads
    its Q before its main loop; the second's loads were issued while the first computed, so it runs
    its main loop, then stores O (the next tile's V waits for that shared memory). Closed form,
    against the same grid launched one CTA a tile."""
    steps, flops, q, o = 8, 4.0e8, 64 * 1024.0, 32 * 1024.0
    group = CtaGroup(2 * gpu.sms, q + o, flops, steps, prologue_bytes=q, epilogue_bytes=o)
    kernel = GpuKernel("fa3", (group,), 1, math="fa3", persistent=True)
    bw = gpu.hbm_bytes_per_s
    main_loop = flops / (gpu.math_flops_per_s("fa3") / gpu.sms)
    load, store = gpu.sms * q / bw, gpu.sms * o / bw
    fixed = gpu.launch_s("graph") + gpu.launch_s("pipeline")
    first = gpu.hbm_latency_s + load + main_loop + store
    assert load < main_loop  # the second wave's Q hides under its main loop
    assert elapsed_s(simulate_gpu([(kernel, 0)], gpu, mode="graph")) == pytest.approx(
        fixed + first + main_loop + store, rel=1e-9)
    plain = GpuKernel("fa3", (group,), 1, math="fa3")
    assert elapsed_s(simulate_gpu([(plain, 0)], gpu, mode="graph")) == pytest.approx(fixed + 2 * first, rel=1e-9)


def test_shipped_constants_minimise_the_calibration_loss():
    """fit_fa3's result (efficiency.fa3_overlap 0.23, launch.fa3_tile 1.08 us, both h100.yaml's):
    a step of either constant's rounding either way does not lower the loss on the calibration
    figures (the fit itself, ``benchmarks/gpu/fa3_d2.py --fit``, takes half a minute)."""
    spec = load_spec(H100, GpuSpec)
    overlap, tile = spec.efficiency.fa3_overlap, spec.launch.fa3_tile_s
    assert (overlap, tile) == (0.23, pytest.approx(1.08e-6))
    cal = [r for r in ROWS if r["set"] == "calibration"]
    best = fa3_loss(cal, spec, overlap, tile)
    for o, t in ((overlap - 0.01, tile), (overlap + 0.01, tile), (overlap, tile - 1e-8), (overlap, tile + 1e-8)):
        assert fa3_loss(cal, spec, o, t) >= best


def test_published_figures_calibration_and_prediction(gpu):
    """G4 Fig. 5: the hd-128 and hd-64 causal columns fitted (12 figures), the hd-128 non-causal
    and hd-256 causal columns predicted (12): the figures docs/gpu.md quotes."""
    assert len(ROWS) == 24 and {(r["head_dim"], r["mode"]) for r in ROWS if r["set"] == "calibration"} == {
        ("128", "causal"), ("64", "causal")}
    compared = compare_fa3_published(ROWS, gpu)
    cal = error_stats(c["err"] for c in compared if c["cal"])
    pred = error_stats(c["err"] for c in compared if not c["cal"])
    assert (cal[0], round(cal[1], 3), round(cal[2], 3)) == (12, 0.018, 0.036)
    assert (pred[0], round(pred[1], 3), round(pred[2], 3)) == (12, 0.064, 0.159)
    hd256 = [c["err"] for c in compared if c["head_dim"] == "256"]
    assert max(map(abs, hd256)) < 0.06  # the held-out head dim: no ping-pong in FA3 above 128, within 5%


def test_committed_table_is_todays(gpu, capsys):
    bench_script("fa3_d2").table(gpu)
    assert capsys.readouterr().out == (ROOT / "benchmarks/gpu/fa3_d2.txt").read_text()


def test_fa3_prices_a_gqa_prefill_and_beats_fa2():
    """``--set attention_kernel=fa3`` on the Llama-3.1-8B prefill: the attention kernel is FA3's and
    shorter than FA2's at 16K (every other kernel the same), and within its rooflines."""
    path = ROOT / "mappings/llama-3.1-8b/prefill-h100.yaml"
    spec, model, node = load_gpu_mapping(path)
    fa2 = simulate_gpu_mapping(spec, model, node, seq_len=16384).step
    spec3, _, _ = load_gpu_mapping(path, overrides=["attention_kernel=fa3"])
    fa3 = simulate_gpu_mapping(spec3, model, node, seq_len=16384).step
    assert fa3.kernels["attention"] < 0.75 * fa2.kernels["attention"]
    assert {k: v for k, v in fa3.kernels.items() if k != "attention"} == pytest.approx(
        {k: v for k, v in fa2.kernels.items() if k != "attention"}, rel=0.02)
    assert fa3.seconds >= fa3.flops / node.gpu.spec.compute.tensor_peak.bf16_flops_per_s


def test_mla_prefill_with_fa3_keeps_v_at_its_width():
    model = load_spec(model_path("deepseek-r1"), ModelSpec)
    gpu = Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))
    s = mla_shape(model, 1, 4096, 8, query_tokens=4096, attention_kernel="fa3")
    kernels = {k.name: k for k in mla_prefill_attention_kernels(s, gpu)}
    assert "v_pad" not in kernels and "o_slice" not in kernels
    att = kernels["mla_attention"]
    assert att.math == "fa3" and att.flops == pytest.approx(
        sum(2.0 * 128 * g.tiles * 128 * 320 * g.count for g in att.groups))


def _doc(tmp_path: Path, src: Path, text: str) -> Path:
    bad = tmp_path / src.name
    bad.write_text(text.replace("../../", f"{ROOT}/"))
    return bad


def test_fa3_at_decode_is_refused_at_its_line(tmp_path, capsys):
    src = ROOT / "mappings/deepseek-r1/decode-h200x8.yaml"
    bad = _doc(tmp_path, src, src.read_text().replace("phase: decode\n", "phase: decode\nattention_kernel: fa3\n"))
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if t.startswith("attention_kernel"))
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}" in err and "fa3 prices prefill attention" in err


def test_fa3_on_a_gpu_document_without_its_constants_is_refused(tmp_path, capsys):
    h100 = H100.read_text()
    gpu_doc = tmp_path / "h100.yaml"
    gpu_doc.write_text("\n".join(t for t in h100.splitlines() if not t.lstrip().startswith(("fa3_tile:", "fa3_overlap:"))))
    node = tmp_path / "node.yaml"
    node.write_text(f"kind: gpu_node\nname: one\ngpu: {gpu_doc}\ngpus: 1\n")
    src = ROOT / "mappings/llama-3.1-8b/prefill-h100.yaml"
    bad = _doc(tmp_path, src, src.read_text().replace("phase: prefill\n", "phase: prefill\nattention_kernel: fa3\n")
               .replace("../../hw_configs/h100.yaml", str(node)))
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if t.startswith("attention_kernel"))
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:{line}" in err and "needs FlashAttention-3's constants" in err


def test_fa3_constants_go_together(tmp_path, capsys):
    bad = tmp_path / "h100.yaml"
    bad.write_text("\n".join(t for t in H100.read_text().splitlines() if not t.lstrip().startswith("fa3_tile:")))
    assert main(["validate", str(bad)]) == 2
    assert "fa3_overlap and launch.fa3_tile go together" in capsys.readouterr().err


def test_docs_quote_the_committed_table():
    """docs/gpu.md's FA3 table (between its fa3-d2 markers) has the signed errors of
    benchmarks/gpu/fa3_d2.txt, column by column."""
    import re

    from tests.gpu.scripts import doc_block

    def errors(lines: list[str]) -> list[list[str]]:
        return [re.findall(r"[+-]\d+\.\d%", line) for line in lines if line.startswith("| hd")]

    committed = (ROOT / "benchmarks/gpu/fa3_d2.txt").read_text().splitlines()
    assert errors(doc_block("fa3-d2")) == errors(committed) != []


RUN_BN = ROOT / "benchmarks/gpu/h200-20261129bn-fa3"


def test_run_bn_ran_the_tiles_the_model_prices():
    """Run bn's profile (committed): every FA3 forward kernel's (kBlockM, kBlockN), read from its
    template arguments, is ``fa3_fwd_tile``'s for the row's head dims and mask."""
    import csv
    import gzip
    import re

    rows = {r["name"]: r for r in read_csv(Path(f"{RUN_BN}.csv"))}
    seen = 0
    with gzip.open(f"{RUN_BN}-kernels.csv.gz", "rt") as fh:
        for k in csv.DictReader(fh):
            if "FlashAttnFwdSm90" not in k["kernel"]:
                continue
            tile = re.findall(r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)>", k["kernel"])[1]
            r = rows[k["row"]]
            hd, hdv = int(r["head_dim"]), int(r["extra"].split("head_dim_v=")[1].split(";")[0])
            assert (int(tile[0]), int(tile[1])) == fa3_fwd_tile(hd, hdv, r["mode"] == "causal"), k["row"]
            seen += 1
    assert seen == 7


def test_run_bn_frozen_predictions_are_todays_and_its_comparison_committed(capsys):
    """Run bn was predicted and frozen before it ran (``fa3_compare.py --frozen``): the model gives
    every frozen row again to the printed 0.1 us, and ``--compare``'s output is committed."""
    from rdusim.analysis.gpu.measured import read_frozen

    compare = bench_script("fa3_compare")
    frozen = read_frozen(Path(f"{RUN_BN}-predicted.txt"))
    gpu = Gpu(load_spec(ROOT / "hw_configs/h200.yaml", GpuSpec))
    from rdusim.analysis.gpu.predict import predict_row

    for point in compare.f3.POINTS:
        row = compare.point_row(point)
        assert round(predict_row(row, gpu) * 1e6, 1) == frozen[row["name"]]
    compare.compare(Path(f"{RUN_BN}.csv"), Path(f"{RUN_BN}-kernels.csv.gz"), Path(f"{RUN_BN}-predicted.txt"))
    assert capsys.readouterr().out == Path(f"{RUN_BN}-compare.txt").read_text()


def test_the_clock_model_treats_fa3_as_attention():
    """Under the opt-in SM clock an FA3 kernel draws power by its tensor rate against the FA2
    anchor of its key span, and its time scales as 1/f, as FA2's does (``ATTENTION_CLASSES``); a
    class the clock model does not know would draw only its DRAM rate's power and never slow."""
    from rdusim.hw.gpu_clock import clock_scale, kernel_power_w

    clock = load_spec(H100, GpuSpec).clock
    anchor = clock.attention[0]
    for cls in ("attention", "fa3"):
        assert kernel_power_w(clock, cls, anchor.rate, 0.0, 1.0, keys=anchor.tokens) == pytest.approx(
            kernel_power_w(clock, "attention", anchor.rate, 0.0, 1.0, keys=anchor.tokens))
        assert clock_scale(clock, cls, 0.8) == pytest.approx(1.25)
    assert kernel_power_w(clock, "fa3", 2 * anchor.rate, 0.0, 1.0, keys=anchor.tokens) > \
        kernel_power_w(clock, "fa3", anchor.rate, 0.0, 1.0, keys=anchor.tokens)


def test_run_bo_reading_is_committed(capsys):
    """Run bo's Nsight Compute profiles read into the committed table (``fa3_ncu_read.py``); from
    head_dim 128 up the tensor pipe is the busy one, at head_dim 64 the XU pipe is as busy."""
    bench_script("fa3_ncu_read").main()
    out = capsys.readouterr().out
    assert out == (ROOT / "benchmarks/gpu/h200-20261129bo-fa3-ncu.txt").read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in out.splitlines()[2:]}
    tensor, xu = (lambda r: float(r[4])), (lambda r: float(r[5]))
    assert tensor(rows["fa3_func_causal_b1_h16x16x128v128_l16384"]) > 1.9 * xu(rows["fa3_func_causal_b1_h16x16x128v128_l16384"])
    assert xu(rows["fa3_func_causal_b1_h32x32x64v64_l16384"]) >= tensor(rows["fa3_func_causal_b1_h32x32x64v64_l16384"])


def test_run_bp_reading_is_committed_and_the_pipe_law_within_5_points(capsys):
    """Run bp (registered before it): the four kernels' tensor pipe against u = 1 - 0.42 rho^2, rho
    the exponentials' time over the MMAs' a score (one MUFU.EX2 at 16 a clock, 4096 FLOP a clock)."""
    bench_script("fa3_ncu_read").main("h200-20261129bp")
    out = capsys.readouterr().out
    assert out == (ROOT / "benchmarks/gpu/h200-20261129bp-fa3-ncu.txt").read_text()
    for line in out.splitlines()[2:]:
        cells = line.split(" | ")
        d, dv = (int(x) for x in cells[0].split("x")[2].split("_")[0].split("v"))
        rho = (1 / 16) / (2 * (d + dv) / 4096)
        assert abs(float(cells[4]) - 100 * (1 - 0.42 * rho**2)) < 5.0, cells[0]
