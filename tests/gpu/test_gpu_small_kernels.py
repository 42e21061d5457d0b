"""Small kernels of a decode step (runs l and m, docs/gpu.md "Small kernels of a decode step"):
the latency-bound floor in closed form, the round trips by kernel class, the constants fitted
from run l's calibration rows only, the clean-L2 GEMM stream inside a step, FA2's forward kernel
for one KV split, the frozen H200 predictions, and compare_sweep.py's ``run_spec``."""

from __future__ import annotations

import csv
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import (
    GEMM_CLEAN_CALIBRATION,
    SMALL_CALIBRATION_PREFIXES,
    fit_gemm_clean,
    fit_small_kernels,
    micro_device_us,
    micro_kernel,
)
from rdusim.cli import main
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu
from rdusim.mapping.gpu import (
    RT_INDEX,
    RT_STRIDED,
    RT_VECTORIZED,
    LayerShape,
    fa2_fwd_tile,
    flash_decode,
    gemm,
    layer_kernels,
    rt_index,
    rt_rms_norm,
    rt_strided,
    streaming,
)
from rdusim.sim.gpu import elapsed_s, simulate_gpu

from .scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "hw_configs/h100.yaml"
H200 = ROOT / "hw_configs/h200.yaml"
RUN_L = ROOT / "benchmarks/gpu/h100-20261125l-small.csv"
RUN_L_KERNELS = ROOT / "benchmarks/gpu/h100-20261125l-small-kernels.csv"
RUN_M = ROOT / "benchmarks/gpu/h200-20261125m-small.csv"
RUN_M_FROZEN = ROOT / "benchmarks/gpu/h200-20261125m-small-predicted.txt"


def gpu(path: Path = H100) -> Gpu:
    return Gpu(load_spec(path, GpuSpec))


def test_small_kernel_floor_closed_form() -> None:
    """In a graph a resident small kernel costs the graph launch + kernel_fixed per launch, then its
    round trips at L2's latency, then its bytes at the stream rate; timed alone (stream) the stream
    launch holds the fixed time and the round trips are the same."""
    g = gpu()
    nbytes = 4096.0
    rate = g.hbm_bytes_per_s
    for trips in ((1,), (4, 4, 1)):
        k = streaming("k", nbytes, g, rows=1, launches=len(trips), round_trips=trips, resident=True)
        graph = elapsed_s(simulate_gpu([(k, 0)], g, mode="graph"))
        assert graph == pytest.approx(len(trips) * (g.launch_s("graph") + g.kernel_fixed_s)
                                      + sum(trips) * g.l2_latency_s + nbytes / rate, rel=1e-9)
        stream = elapsed_s(simulate_gpu([(k, 0)], g, mode="stream"))
        assert stream == pytest.approx(len(trips) * g.launch_s("stream") + sum(trips) * g.l2_latency_s
                                       + nbytes / rate, rel=1e-9)
    # not resident: each round trip is a DRAM one; no round trips given: one DRAM round trip, no fixed time
    cold = streaming("k", nbytes, g, rows=1, round_trips=(4,))
    assert elapsed_s(simulate_gpu([(cold, 0)], g, mode="graph")) == pytest.approx(
        g.launch_s("graph") + g.kernel_fixed_s + 4 * g.hbm_latency_s + nbytes / rate, rel=1e-9)
    plain = streaming("k", nbytes, g, rows=1)
    assert elapsed_s(simulate_gpu([(plain, 0)], g, mode="graph")) == pytest.approx(
        g.launch_s("graph") + g.hbm_latency_s + nbytes / rate, rel=1e-9)
    with pytest.raises(ValueError, match="2 round-trip counts for 1 launches"):
        streaming("k", nbytes, g, round_trips=(1, 1))


def test_round_trips_by_kernel_class_in_a_decode_layer() -> None:
    """RMSNorm: two passes of width / 512 loads a thread; the rotary embedding's ten kernels are
    four strided-path kernels and one vectorised sum per q and k; index_copy_ the strided path plus
    the index; SiLU-and-multiply vectorised at one row and strided above."""
    assert [rt_rms_norm(w) for w in (2048, 3072, 4096, 8192)] == [8, 12, 16, 32]
    g = gpu()
    for rows, silu in ((1, RT_VECTORIZED), (16, RT_STRIDED)):
        shape = LayerShape(batch=rows, tokens=1, kv_len=2048, hidden=4096, q_heads=32, kv_heads=8, head_dim=128,
                           ffn=14336, vocab=128256)
        ks = {k.name: k for k in layer_kernels(["rms_norm", "rope", "kv_append", "residual_add", "silu_mul"], shape,
                                               g, phase="decode")}
        assert ks["rms_norm"].round_trips == (16,)
        assert ks["rope"].round_trips == (4, 4, 4, 4, 1) * 2 and ks["rope"].launches == 10
        assert ks["kv_append"].round_trips == (RT_INDEX, RT_INDEX) == (5, 5)
        assert ks["residual_add"].round_trips == (1,)
        assert ks["silu_mul"].round_trips == (silu, silu)
        assert all(k.resident for k in ks.values())


def test_a_strided_kernel_chains_as_many_elements_as_its_last_cta_gives_a_thread() -> None:
    """elementwise_kernel<128, 4>: min(4, ceil(N / 128)) elements a thread; index_copy_ one more (the index)."""
    assert [rt_strided(n) for n in (1, 64, 128, 129, 256, 384, 385, 512, 4096, 10**6)] == [1, 1, 1, 2, 2, 3, 4, 4, 4, 4]
    assert [rt_index(n) for n in (128, 256, 4096)] == [2, 3, RT_INDEX]
    # Llama-3.1-8B at TP4, one row: 8 q heads (512-element halves: full chains), 2 KV heads (128 and 256)
    shape = LayerShape(batch=1, tokens=1, kv_len=2048, hidden=4096, q_heads=32, kv_heads=8, head_dim=128,
                       ffn=14336, vocab=128256, tp=4)
    ks = {k.name: k for k in layer_kernels(["rope", "kv_append"], shape, gpu(), phase="decode")}
    assert ks["rope"].round_trips == (4, 4, 4, 4, 1, 1, 4, 2, 2, 1)
    assert ks["kv_append"].round_trips == (3, 3)
    # from two rows the k negation runs two elements, from four every chain is full
    ks = {k.name: k for k in layer_kernels(["rope"], replace(shape, batch=2), gpu(), phase="decode")}
    assert ks["rope"].round_trips[5:] == (2, 4, 4, 4, 1)


def test_small_kernel_constants_come_from_run_l_calibration_rows_only() -> None:
    """fit_small_kernels reproduces h100.yaml's kernel_fixed and l2_latency from the 23 named rows,
    and poisoning every other row's device time changes nothing; a kernel 1 us slower on every
    calibration row moves kernel_fixed by 1 us. h200.yaml carries the same constants."""
    rows = list(csv.DictReader(RUN_L.open()))
    device = micro_device_us(csv.DictReader(RUN_L_KERNELS.open()))
    spec = load_spec(H100, GpuSpec)
    fit = fit_small_kernels(rows, device, spec)
    assert fit["rows"] == 23
    assert fit["kernel_fixed"] == pytest.approx(spec.launch.kernel_fixed_s, abs=5e-10)
    assert fit["l2_latency"] == pytest.approx(spec.memory.l2_latency_s, abs=5e-10)
    poisoned = {n: (v if n.startswith(SMALL_CALIBRATION_PREFIXES) else 1e3) for n, v in device.items()}
    assert fit_small_kernels(rows, poisoned, spec) == fit
    slower = {n: v + 1.0 if n.startswith(SMALL_CALIBRATION_PREFIXES) else v for n, v in device.items()}
    assert fit_small_kernels(rows, slower, spec)["kernel_fixed"] == pytest.approx(fit["kernel_fixed"] + 1e-6, abs=1e-10)
    h200 = load_spec(H200, GpuSpec)
    assert h200.launch.kernel_fixed_s == spec.launch.kernel_fixed_s
    assert h200.memory.l2_latency_s == spec.memory.l2_latency_s


def test_micro_rows_map_to_the_model_kernels() -> None:
    """Every site of the microbenchmark is priced as its kernel class; the sleep kernel that
    queued the calls is not part of a row's device time."""
    rows = list(csv.DictReader(RUN_L.open()))
    g = gpu()
    sites = [r for r in rows if r["kind"] == "sk_site"]
    assert len(sites) == 4 * 3 * 18
    by = {r["name"]: micro_kernel(r, g) for r in sites}
    assert by["llama3.1-8b_b1_site0_rms_norm"].round_trips == (16,)
    assert by["llama3.1-8b_b1_site8_cat"].round_trips == (4,)
    assert by["llama3.1-8b_b1_site11_elementwise_add"].round_trips == (1,)
    assert by["llama3.1-8b_b1_site33_elementwise_mul"].round_trips == (1,)
    assert by["llama3.1-8b_b16_site33_elementwise_mul"].round_trips == (4,)
    device = micro_device_us(csv.DictReader(RUN_L_KERNELS.open()))
    assert 1.0 < device["llama3.1-8b_b1_site11_elementwise_add"] < 1.2


def test_gemm_stream_clean_inside_a_step_only() -> None:
    """A decode GEMM is priced at gemm_stream_clean in graph and eager steps and at gemm_stream when
    timed alone (the flushed sweep rows), so the same kernel is faster inside a step; the fit
    reproduces h100.yaml's value from its 15 calibration rows."""
    g = gpu()
    kernels = gemm("down", 1, 4096, 14336, g)
    graph = elapsed_s(simulate_gpu([(k, 0) for k in kernels], g, mode="graph"))
    stream = elapsed_s(simulate_gpu([(k, 0) for k in kernels], g, mode="stream"))
    launches = len(kernels) * (g.launch_s("stream") - g.launch_s("graph"))
    assert graph < stream - launches
    eff = g.spec.efficiency
    assert g.gemm_stream_derate_in("graph") == g.gemm_stream_derate_in("eager") == eff.gemm_stream_clean / eff.hbm_stream
    assert g.gemm_stream_derate_in("stream") == g.gemm_stream_derate
    rows = list(csv.DictReader(RUN_L.open()))
    assert sum(r["name"] in GEMM_CLEAN_CALIBRATION for r in rows) == 15
    assert fit_gemm_clean(rows, load_spec(H100, GpuSpec))["gemm_stream_clean"] == pytest.approx(eff.gemm_stream_clean)


def test_fa2_decode_with_one_split_runs_the_forward_kernel() -> None:
    """Batch 64 fills the GPU without splitting the keys: one kernel with the forward kernel's tile
    (128 x 64 at head_dim 128, 64 x 8 KV heads of one 128-row tile each); batch 1 splits and
    combines."""
    g = gpu()
    [main_kernel] = flash_decode("a", 64, 32, 8, 1024, 128, g)
    rows, cols = fa2_fwd_tile(128)
    (group,) = main_kernel.groups
    assert group.count == 64 * 8
    assert group.tiles == 1024 // cols
    assert group.flops == 4.0 * rows * 128 * 1024
    assert len(flash_decode("a", 1, 32, 8, 2048, 128, g)) == 2


def test_frozen_h200_predictions_match_the_code_that_wrote_them_for_the_unchanged_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Run m's frozen file predates two changes: FA2's forward kernel for one split (batch 64) and
    gemm_stream_clean refitted with the split-K reduction's own floor (0.892 -> 0.895), FA2's
    attention constants (refitted with the MMA / operand-read overlap after run q; taken as they
    were), the GEMM refit with the flush's write-backs (taken as they were) and the split-KV key
    block (128 keys at every head_dim then; FA2's source gives 256 at head_dim 64, which moves
    Llama-3.2-1B's rows: taken as it was) and the H200's split-KV pair's own fixed times (taken out)
    and RMSNorm's weight from DRAM in a step (P12; taken out: the norms' weight in L2):
    the batch-1 and batch-16 steps (split-KV) are predicted now as they were frozen, to 0.5%."""
    from dataclasses import replace

    import rdusim.mapping.gpu as mapping_gpu

    monkeypatch.setattr(mapping_gpu, "fa2_splitkv_block_n", lambda head_dim: 128)
    warm = mapping_gpu.rms_norm
    monkeypatch.setattr(mapping_gpu, "rms_norm", lambda *a: replace(warm(*a), cold_round_trips=0))
    mod = bench_script("small_predicted")
    from rdusim.config.loader import model_path
    from rdusim.config.schema import ModelSpec

    lines = [line for line in RUN_M_FROZEN.open() if not line.startswith("#")]
    frozen = {r["name"]: float(r["predicted_us"]) for r in csv.DictReader(lines)}
    rows = [r for r in csv.DictReader(RUN_M.open()) if r["kind"] == "e2e_decode" and r["batch"] in ("1", "16")]
    now = mod.predictions(rows, _gemm_as_frozen(_as_frozen(gpu(H200))), load_spec(model_path("llama-3.1-8b"), ModelSpec))
    assert len(now) == 8
    for _, name, t in now:
        assert t * 1e6 == pytest.approx(frozen[name], rel=5e-3)


def test_run_spec_picks_the_document_of_the_device_a_run_names() -> None:
    mod = bench_script("compare_sweep")
    assert mod.run_spec([{"device": "NVIDIA H200"}] * 2).name == load_spec(H200, GpuSpec).name
    assert mod.run_spec([{"device": "NVIDIA H100 80GB HBM3"}]).name == load_spec(H100, GpuSpec).name
    with pytest.raises(SystemExit, match="GPU_DOCS knows"):
        mod.run_spec([{"device": "NVIDIA H100 80GB HBM3"}, {"device": "NVIDIA H200"}])
    with pytest.raises(SystemExit, match="A100"):
        mod.run_spec([{"device": "NVIDIA A100"}])


@pytest.mark.parametrize(("old", "new", "key"), [
    ('l2_latency: "0.188 us"', 'l2_latency: "-0.188 us"', "memory.l2_latency"),
    ('kernel_fixed: "1.106 us"', 'kernel_fixed: "soon"', "launch.kernel_fixed"),
    ("gemm_stream_clean: 0.881", "gemm_stream_clean: 1.881", "efficiency.gemm_stream_clean"),
    ("attention_overlap: 0.55", "attention_overlap: 1.55", "efficiency.attention_overlap"),
    ("attention_overlap: 0.55", "attention_overlap: half", "efficiency.attention_overlap"),
])
def test_bad_small_kernel_constants_exit_2_located(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   old: str, new: str, key: str) -> None:
    text = H100.read_text()
    assert old in text
    bad = tmp_path / "h100.yaml"
    bad.write_text(text.replace(old, new, 1))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    line = text[: text.index(old)].count("\n") + 1
    assert f"h100.yaml:{line}: {key}" in err


def _as_frozen(g: Gpu) -> Gpu:
    """The document as runs n and q were predicted with: FA2's MMAs and operand reads in series
    at the old effective share (before the overlap was fitted, after run q), and FA2's split-KV
    pair under ``launch.pipeline`` (its own fixed times came after run as)."""
    eff = g.spec.efficiency.model_copy(update={"attention_tensor": 0.982, "attention_overlap": 0.0})
    launch = g.spec.launch.model_copy(update={"fa2_split_fixed_s": None, "fa2_combine_fixed_s": None})
    return Gpu(g.spec.model_copy(update={"efficiency": eff, "launch": launch}))


def _gemm_as_frozen(g: Gpu) -> Gpu:
    """The GEMM constants run m was predicted with (fit_gemm before the flush's write-backs were
    separated from the operand stream, 2026-11-28; gemm_stream_clean as refitted after it)."""
    eff = g.spec.efficiency.model_copy(update={"gemm_stream": 0.75, "gemm_flush_writeback": None,
                                               "gemm_stream_clean": 0.895})
    launch = g.spec.launch.model_copy(update={"gemm_pipeline_s": 2e-6, "gemm_step_s": 4e-8})
    memory = g.spec.memory.model_copy(update={"l2_bytes_per_s": 14e12})
    return Gpu(g.spec.model_copy(update={"efficiency": eff, "launch": launch, "memory": memory}))


def test_run_n_frozen_fa2_predictions_are_todays() -> None:
    """Run n's FA2 decode predictions were frozen before the forward kernel's DRAM tile wait and
    the fitted MMA / operand-read overlap: with the attention constants of then, the model gives its
    split-KV rows again to 1 ns and its one-split rows later (the wait), and the profile names the
    kernel the model builds (forward kernel for one split)."""
    lines = [line for line in (ROOT / "benchmarks/gpu/h200-20261125n-fa2-predicted.txt").open() if not line.startswith("#")]
    frozen = {r["name"]: float(r["predicted_us"]) for r in csv.DictReader(lines)}
    rows = [r for r in csv.DictReader((ROOT / "benchmarks/gpu/h200-20261125n-fa2.csv").open()) if r["kind"] == "sk_fa2"]
    assert len(rows) == len(frozen) == 14
    g = _as_frozen(gpu(H200))
    from rdusim.analysis.gpu.predict import micro_device_s, micro_kernels

    names = {k["row"]: k["kernel"] for k in csv.DictReader((ROOT / "benchmarks/gpu/h200-20261125n-fa2-kernels.csv").open())
             if k["index"] == "0"}
    for r in rows:
        one_split = len(micro_kernels(r, g)) == 1
        assert one_split == ("flash_fwd_kernel<" in names[r["name"]])
        if one_split:
            assert micro_device_s(r, g) * 1e6 > frozen[r["name"]] * 1.05
        else:
            assert micro_device_s(r, g) * 1e6 == pytest.approx(frozen[r["name"]], abs=1e-3)


def test_run_q_frozen_predictions_are_todays() -> None:
    """Run q (fa2_mech.py on an H200) was predicted with the one-split decode's DRAM tile wait and
    frozen before it ran: with the attention constants of then (the overlap was fitted after it),
    the model gives its decode rows again to 1 ns; the first-read share
    came after (from run p's H100 rows): the short query blocks over their own KV (``fa2_fullq``)
    are later by the waits, prefill moves under 0.1%; every FA2 row ran the forward kernel of the
    tile ``fa2_fwd_tile`` gives its head_dim."""
    sys.path.insert(0, str(ROOT / "benchmarks/gpu"))
    from fa2_mech_predicted import predicted_s, rows

    from rdusim.mapping.gpu import fa2_fwd_tile

    lines = [line for line in (ROOT / "benchmarks/gpu/h200-20261125q-fa2mech-predicted.txt").open()
             if not line.startswith("#")]
    frozen = {r["name"]: float(r["predicted_us"]) for r in csv.DictReader(lines)}
    g = _as_frozen(gpu(H200))
    mine = rows()
    assert len(mine) == len(frozen) == 37
    for r in mine:
        now, then = predicted_s(r, g) * 1e6, frozen[r["name"]]
        if r["kind"] == "fa2_fullq":
            assert now > then * 1.05 or r["head_dim"] == 256 and now > then
        elif r["kind"] == "attn_prefill_l2":
            assert now == pytest.approx(then, rel=1e-3)
        else:
            assert now == pytest.approx(then, abs=1e-3)
    kernels = list(csv.DictReader((ROOT / "benchmarks/gpu/h200-20261125q-fa2mech-kernels.csv").open()))
    measured = {r["name"] for r in csv.DictReader((ROOT / "benchmarks/gpu/h200-20261125q-fa2mech.csv").open())}
    assert measured == set(frozen)
    for k in kernels:
        r = next(x for x in mine if x["name"] == k["row"])
        m, n = fa2_fwd_tile(r["head_dim"])
        assert f"Flash_fwd_kernel_traits<{r['head_dim']}, {m}, {n}, 4," in k["kernel"]


def test_run_r_frozen_holdout_predictions_are_todays() -> None:
    """Run r's held-out shapes were predicted with today's model and frozen before the run: the
    model gives every row again to 1 ns, and each row ran the tile ``fa2_fwd_tile`` gives its
    head_dim (96 included: 128 x 64)."""
    sys.path.insert(0, str(ROOT / "benchmarks/gpu"))
    from fa2_mech_predicted import predicted_s, rows

    from rdusim.mapping.gpu import fa2_fwd_tile

    lines = [line for line in (ROOT / "benchmarks/gpu/h100-20261125r-fa2mech-holdout-predicted.txt").open()
             if not line.startswith("#")]
    frozen = {r["name"]: float(r["predicted_us"]) for r in csv.DictReader(lines)}
    g = gpu(H100)
    mine = rows(holdout=True)
    assert len(mine) == len(frozen) == 16
    for r in mine:
        assert predicted_s(r, g) * 1e6 == pytest.approx(frozen[r["name"]], abs=1e-3)
    for k in csv.DictReader((ROOT / "benchmarks/gpu/h100-20261125r-fa2mech-holdout-kernels.csv").open()):
        r = next(x for x in mine if x["name"] == k["row"])
        m, n = fa2_fwd_tile(r["head_dim"])
        assert f"Flash_fwd_kernel_traits<{r['head_dim']}, {m}, {n}, 4," in k["kernel"]
