"""FlashAttention-2 prefill on the GPU model (P12): MMAs, exponentials and shared-memory reads in
series, the L2 working set of K/V, the Q/O tiles outside the main loop, and the fit of the one
constant (``attention_tensor``) to its named calibration rows only."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rdusim.analysis.gpu.predict import ATTENTION_CALIBRATION, fit_attention
from rdusim.config.loader import load_spec
from rdusim.config.schema import GpuSpec
from rdusim.hw.gpu import Gpu, load_gpu_node
from rdusim.mapping.gpu import (
    FA2_TILE_WAITS,
    CtaGroup,
    GpuKernel,
    fa2_combine_chain_s,
    fa2_combine_round_trips,
    fa2_combine_rows,
    fa2_dram_tile_wait_s,
    fa2_first_read_share,
    fa2_fwd_tile,
    fa2_smem_bytes,
    fa2_splitkv_block_n,
    fa2_splits,
    flash_decode,
    flash_prefill,
    l2_hit_fraction,
)
from rdusim.sim.gpu import elapsed_s, simulate_gpu

from .scripts import bench_script

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "hw_configs/h100.yaml"
SWEEP = ROOT / "benchmarks/gpu/h100-20261125-sweep.csv"
RUN_D = ROOT / "benchmarks/gpu/h100-20261125d-sweep.csv"


def gpu() -> Gpu:
    return Gpu(load_spec(H100, GpuSpec))


def test_l2_hit_fraction_closed_form() -> None:
    """All hits while the working set fits; past it, the random-replacement fixed point
    h = exp(-(W/C)(1 - h)) (0.2032 at W = 2C), falling as W grows."""
    assert l2_hit_fraction(10.0, 50.0) == 1.0
    assert l2_hit_fraction(50.0, 50.0) == 1.0
    h = l2_hit_fraction(100.0, 50.0)
    assert h == pytest.approx(math.exp(-2.0 * (1.0 - h)), abs=1e-9)
    assert h == pytest.approx(0.2032, abs=1e-3)


@given(st.floats(1.01, 20.0), st.floats(1.01, 20.0))
def test_l2_hit_fraction_falls_with_the_working_set(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    assert 0.0 <= l2_hit_fraction(hi, 1.0) <= l2_hit_fraction(lo, 1.0) <= 1.0


def test_one_cta_pays_mma_exponentials_and_shared_reads_in_series() -> None:
    """A lone attention CTA (no bytes): launch + FA's fixed cost + F / SM tensor rate + S / SM
    special-function rate + B / SM shared-memory rate, less the overlapped share of the shorter
    of the MMAs and the shared reads."""
    g = gpu()
    f, s, b = 4e9, 2e7, 3e8
    kernel = GpuKernel("a", (CtaGroup(1, 0.0, f, 4, sfu=s, smem_bytes=b),), 2, math="attention")
    t = elapsed_s(simulate_gpu([(kernel, 0)], g, mode="stream"))
    sms = g.sms
    mma, smem = f / (g.math_flops_per_s("attention") / sms), b / (g.shared_bytes_per_s / sms)
    expected = (g.launch_s("stream") + g.launch_s("pipeline") + mma + s / (g.sfu_per_s / sms) + smem
                - g.attention_overlap * min(mma, smem))
    assert t == pytest.approx(expected, rel=1e-9)


def test_output_tile_is_written_after_the_main_loop() -> None:
    """A CTA's epilogue bytes are not overlapped with its math: they add their transfer time."""
    g = gpu()
    base = CtaGroup(1, 1e6, 4e9, 4, prologue_bytes=0.0)
    with_o = CtaGroup(1, 1.5e6, 4e9, 4, epilogue_bytes=5e5)  # the same loop bytes and an O tile
    t0, t1 = (elapsed_s(simulate_gpu([(GpuKernel("a", (grp,), 2, math="attention"), 0)], g, mode="stream"))
              for grp in (base, with_o))
    # the loop's 1 MB streams under the math either way; the 0.5 MB epilogue follows it alone
    assert t1 - t0 == pytest.approx(5e5 / g.hbm_bytes_per_s, rel=1e-6)


def test_fa2_tiles_by_head_dim_and_shared_reads() -> None:
    assert fa2_fwd_tile(64) == (128, 128) and fa2_fwd_tile(128) == (128, 64) and fa2_fwd_tile(256) == (64, 64)
    # 4 warps: each reads its quarter of Q and the whole K and V tile, 2 bytes an element
    assert fa2_smem_bytes(128, 64, 128) == (128 * 128 + 4 * 2 * 64 * 128) * 2


def test_causal_kv_past_l2_misses_and_stalls_noncausal_does_not() -> None:
    """One KV head's K/V is L x hd x 4 bytes: 16.8 MB at 32K x 128 fits the 50 MB L2 (no miss); at
    128K (67 MB) causal CTAs read part of their K/V from HBM and wait on those round trips;
    without the mask the CTAs move in lockstep and nothing misses."""
    g = gpu()
    fits = flash_prefill("a", 1, 8, 1, 32768, 128, g)[0]
    spills = flash_prefill("a", 1, 8, 1, 131072, 128, g)[0]
    full = flash_prefill("a", 1, 8, 1, 131072, 128, g, causal=False)[0]
    def first(length: int, causal: bool) -> float:  # first reads of the one KV head's tiles
        reads = sum(_keys(i, 128, 64, length, causal) for i in range(length // 128)) / 64 * 8
        return (length // 64) / reads

    wait = fa2_dram_tile_wait_s(g)
    for kernel, length, causal in ((fits, 32768, True), (full, 131072, False)):
        assert all(grp.stall_s == pytest.approx(first(length, causal) * wait * grp.tiles) for grp in kernel.groups)
    last = spills.groups[-1]
    miss = 1.0 - l2_hit_fraction(2 * 131072 * 128 * 2, g.l2_capacity_bytes)
    assert 0.3 < miss < 0.6
    assert last.stall_s == pytest.approx((2 * miss * g.hbm_latency_s + first(131072, True) * wait) * last.tiles)
    assert last.bytes > full.groups[-1].bytes  # the missed K/V bytes come from HBM


def _keys(block: int, rows: int, cols: int, length: int, causal: bool) -> int:
    return math.ceil(min(length, (block + 1) * rows) / cols) * cols if causal else length


def test_dram_tile_wait_is_two_waits_of_the_latency_beyond_an_l2_hit() -> None:
    """FA2's loop waits on its K copy, then on its V copy, every key tile: a tile from DRAM
    waits hbm_latency - l2_latency longer at each than the L2 hit the prefill-fitted rate holds
    (H100: 2 x (352 - 188) ns); a document without an L2 latency adds nothing."""
    g = gpu()
    assert FA2_TILE_WAITS == 2
    assert fa2_dram_tile_wait_s(g) == pytest.approx(2 * (0.352e-6 - 0.188e-6))
    spec = load_spec(H100, GpuSpec)
    bare = Gpu(spec.model_copy(update={"memory": spec.memory.model_copy(update={"l2_latency_s": None})}))
    assert fa2_dram_tile_wait_s(bare) == 0.0


@pytest.mark.parametrize(("kv_tiles", "reads", "share"), [(64, 64, 1.0), (64, 128, 0.5), (8, 8 * 33, 1 / 33),
                                                         (10, 0, 0.0)])
def test_first_read_share_closed_form(kv_tiles: int, reads: float, share: float) -> None:
    assert fa2_first_read_share(kv_tiles, reads) == pytest.approx(share)


def test_one_split_decode_waits_on_every_tile_split_kv_does_not() -> None:
    """Batch 64 x 8 KV heads (512 CTAs >= 0.8 x 264 slots): one split, FA2's forward kernel, one
    CTA per (sequence, KV head) reading its K/V alone: every one of its 4096 / 64 tiles is a first
    read and waits fa2_dram_tile_wait_s. Batch 4 splits the KV (split-KV kernel): no wait."""
    g = gpu()
    (one,) = flash_decode("a", 64, 32, 8, 4096, 128, g)
    assert one.ctas == 512 and one.groups[0].tiles == 64
    assert one.groups[0].stall_s == pytest.approx(64 * fa2_dram_tile_wait_s(g))
    split = flash_decode("a", 4, 32, 8, 4096, 128, g)
    assert len(split) == 2 and split[0].groups[0].stall_s == 0.0


def test_splitkv_block_follows_fa2_source_by_head_dim() -> None:
    """FA2's split-KV kBlockN (set_params_splitkv / run_mha_fwd_splitkv_dispatch): 256 keys up to
    head_dim 64, 128 up to 128, 64 above. Llama-3.2-1B at batch 1 x 2048 (8 KV heads, GQA 4, hd
    64): 8 (sequence, KV head) rows over ceil(2048 / 256) = 8 key blocks on 2 x 132 slots; the
    wave efficiency grows with the splits up to the 8 blocks, so FA2 takes 8 splits (16 with
    128-key blocks): 64 split CTAs of one 256-key tile each. Llama-3.1-8B (hd 128) keeps 16."""
    assert [fa2_splitkv_block_n(d) for d in (64, 128, 256, 32, 96, 192)] == [256, 128, 64, 256, 128, 64]
    assert fa2_splits(8, 264, math.ceil(2048 / fa2_splitkv_block_n(64))) == 8
    assert fa2_splits(8, 264, math.ceil(2048 / 128)) == 16  # what the 128-key block gave
    main, _ = flash_decode("a", 1, 32, 8, 2048, 64, gpu())
    assert main.ctas == 8 * 8 and main.groups[0].tiles == 1
    assert main.groups[0].flops == pytest.approx(4.0 * 64 * 64 * 256)
    main8, _ = flash_decode("a", 1, 32, 8, 2048, 128, gpu())
    assert main8.ctas == 8 * 16 and main8.groups[0].tiles == 1


def test_run_l_profiles_name_the_splitkv_block_and_splits_of_each_head_dim() -> None:
    """Run l's profiled SDPA calls (H100, 132 SMs) name FA2's split-KV traits
    ``Flash_fwd_kernel_traits<hd, 64, kBlockN, 4, ...>`` and the combine's ``<..., kBlockM,
    Log_max_splits, ...>``: Llama-3.2-1B (hd 64) runs 64 x 256 tiles and at most 8 splits at
    batch 1 x 2048 (Log_max_splits 3), the hd-128 models 64 x 128 and 16 (4): the model's block
    and splits give the same names."""
    runs = {r["name"]: r for r in csv.DictReader((ROOT / "benchmarks/gpu/h100-20261125l-small.csv").open())
            if r["kind"] == "sk_sdpa"}
    seen = 0
    for k in csv.DictReader((ROOT / "benchmarks/gpu/h100-20261125l-small-kernels.csv").open()):
        m = re.search(r"splitkv_combine_kernel<Flash_fwd_kernel_traits<(\d+), (\d+), (\d+), 4,.*>, (\d+), (\d+), true>",
                      k["kernel"])
        if not m or k["row"] not in runs:
            continue
        r = runs[k["row"]]
        hd, batch, kv_heads, kv_len = int(r["head_dim"]), int(r["batch"]), int(r["kv_heads"]), int(r["kv_len"])
        assert int(m[1]) == hd and (int(m[2]), int(m[3])) == (64, fa2_splitkv_block_n(hd))
        splits = fa2_splits(batch * kv_heads, 264, math.ceil(kv_len / fa2_splitkv_block_n(hd)))
        assert (int(m[4]), int(m[5])) == (fa2_combine_rows(hd), math.ceil(math.log2(splits))), k["row"]
        seen += 1
    assert seen == 8  # four models at batch 1 and 16 (batch 64: one split, no combine)


@pytest.mark.parametrize(("batch", "kv_len", "splits", "log_max_splits", "ctas"),
                         [(1, 8192, 64, 6, 2), (8, 8192, 32, 5, 16), (32, 8192, 7, 3, 64), (64, 4096, 4, 2, 128),
                          (128, 2048, 2, 1, 256)])
def test_fa2_combine_of_run_ap_splits_and_grid(batch: int, kv_len: int, splits: int, log_max_splits: int,
                                              ctas: int) -> None:
    """Run ap's 70B TP8 shard (8 query heads, 1 KV head, hd 128): FA2's heuristic gives 64, 32, 7,
    4, 2 splits at batch 1-128 (the profiled combine kernels' Log_max_splits 6, 5, 3, 2, 1), and the
    combine's grid is batch x 8 rows / 4 rows a CTA: 2-256 CTAs, one wave."""
    assert fa2_splits(batch, 264, math.ceil(kv_len / fa2_splitkv_block_n(128))) == splits
    assert math.ceil(math.log2(splits)) == log_max_splits
    assert math.ceil(batch * 8 / fa2_combine_rows(128)) == ctas


def test_fa2_combine_chain_closed_form() -> None:
    """The combine's floor: kernel_fixed + (1 + splits) L2 round trips (the log-sum-exps, then one
    partial per split); kBlockM 4 / 8 / 16 by head_dim. H100: 1.106 + 65 x 0.188 = 13.33 us at 64
    splits (run ap measured 14.3 on the H200), 1.106 + 3 x 0.188 = 1.67 at 2 (3.4)."""
    g = gpu()
    assert [fa2_combine_rows(d) for d in (128, 256, 64, 192, 96)] == [4, 4, 8, 8, 16]
    assert fa2_combine_round_trips(64) == 65
    assert fa2_combine_chain_s(64, g) == pytest.approx(1.106e-6 + 65 * 0.188e-6)
    assert fa2_combine_chain_s(2, g) == pytest.approx(1.106e-6 + 3 * 0.188e-6)


H200 = ROOT / "hw_configs/h200.yaml"
#: fa2_combine.py --fit's constants (benchmarks/gpu/h200-20261128as-fa2combine-fit.txt), us
FA2_FIT = {"fa2_split_fixed": 2.05, "fa2_combine_fixed": 1.57}


def h200_fa2_fixed() -> Gpu:
    """The H200 with FA2's split-KV pair's fitted fixed times."""
    spec = load_spec(H200, GpuSpec)
    launch = spec.launch.model_copy(update={f"{k}_s": v * 1e-6 for k, v in FA2_FIT.items()})
    return Gpu(spec.model_copy(update={"launch": launch}))


@pytest.mark.parametrize(("batch", "kv_len", "splits"), [(1, 1024, 8), (1, 8192, 64), (1, 32768, 128), (64, 4096, 4)])
def test_fa2_split_kv_pair_with_its_own_fixed_times(batch: int, kv_len: int, splits: int) -> None:
    """H200 (launch.fa2_split_fixed, fa2_combine_fixed): the split kernel pays fa2_split_fixed in place
    of launch.pipeline; the combine is its chain (kernel_fixed + (1 + splits) L2 round trips) plus
    fa2_combine_fixed and its partials' bytes, one CTA per 4 query rows (70B TP8 shard: 8 x 1 heads)."""
    g = h200_fa2_fixed()
    assert (g.launch_s("fa2_split"), g.launch_s("fa2_combine")) == pytest.approx((2.05e-6, 1.57e-6))
    main, combine = flash_decode("attn", batch, 8, 1, kv_len, 128, g)
    assert (main.fixed, combine.fixed, combine.host_paid) == ("fa2_split", "fa2_combine", True)
    assert combine.ctas == math.ceil(batch * 8 / 4) and combine.round_trips == (1 + splits,) and combine.resident
    graph = g.launch_s("graph")
    trace = simulate_gpu([(main, 0), (combine, 0)], g, mode="graph")
    alone = simulate_gpu([(replace(main, fixed=""), 0)], g, mode="graph").kernels[0]
    m, c = trace.kernels
    # the split kernel: its grid as before, fa2_split_fixed where it paid pipeline (7.02 us)
    assert (m.end_s - m.start_s) - (alone.end_s - alone.start_s) == pytest.approx(2.05e-6 - 7.02e-6, abs=1e-12)
    partials = splits * batch * 8 * 128 * 4 + batch * 8 * 128 * 2
    device = c.end_s - c.start_s - graph
    chain = fa2_combine_chain_s(splits, g) + 1.57e-6
    assert chain < device < chain + partials / g.hbm_bytes_per_s * 1.01 + 1e-12


def test_fa2_pair_unchanged_without_its_fixed_times_and_at_one_split() -> None:
    """A document that gives neither constant (the H100's with both taken out, as it was before
    h100fa2): the pair keeps launch.pipeline on the split kernel and its combine as one DRAM round
    trip; a one-split call (no combine) is the forward kernel with or without them; the two keys go
    together."""
    spec, h200 = gpu().spec, h200_fa2_fixed()
    with pytest.raises(ValueError, match="go together"):
        type(spec.launch).model_validate({"stream": "4 us", "graph": "0.5 us", "eager_host": "8 us",
                                          "pipeline": "7 us", "fa2_split_fixed": "2 us"})
    launch = spec.launch.model_copy(update={"fa2_split_fixed_s": None, "fa2_combine_fixed_s": None})
    h100 = Gpu(spec.model_copy(update={"launch": launch}))
    assert not h100.fa2_pair_calibrated and h100.launch_s("fa2_split") == h100.launch_s("pipeline")
    main, combine = flash_decode("attn", 1, 8, 1, 8192, 128, h100)
    assert (main.fixed, combine.fixed, combine.round_trips) == ("", "", ())
    one = flash_decode("attn", 64, 32, 8, 4096, 128, h200)
    assert len(one) == 1 and one[0].fixed == ""


def test_fa2_fit_reproduces_the_h200_constants() -> None:
    """fa2_combine.py --fit on run as's 24 split-KV rows gives the constants used above, which are
    the H200 document's."""
    fc = bench_script("fa2_combine")
    kernels = str(ROOT / "benchmarks/gpu/h200-20261128as-fa2combine-kernels.csv.gz")
    assert len(fc.CALIBRATION) == 24
    f = fc.fit(kernels)
    assert {k: round(f[k], 2) for k in FA2_FIT} == FA2_FIT
    launch = load_spec(H200, GpuSpec).launch
    assert (launch.fa2_split_fixed_s, launch.fa2_combine_fixed_s) == pytest.approx((2.05e-6, 1.57e-6))
    assert Gpu(load_spec(H200, GpuSpec)).fa2_pair_calibrated


def test_fa2_fit_output_is_committed(capsys) -> None:
    fc = bench_script("fa2_combine")
    kernels = ROOT / "benchmarks/gpu/h200-20261128as-fa2combine-kernels.csv.gz"
    assert fc.main(["--fit", str(kernels.relative_to(ROOT))]) == 0
    assert capsys.readouterr().out == (ROOT / "benchmarks/gpu/h200-20261128as-fa2combine-fit.txt").read_text()


#: fa2_combine.py --fit --gpu h100's constants (benchmarks/gpu/h100-20261125l-fa2combine-fit.txt), us
FA2_FIT_H100 = {"fa2_split_fixed": 2.27, "fa2_combine_fixed": 1.63}
RUN_L = ROOT / "benchmarks/gpu/h100-20261125l-small"


def test_fa2_fit_reproduces_the_h100_constants() -> None:
    """fa2_combine.py --fit --gpu h100 on run l's 8 split-KV sk_sdpa rows (b1 / b16 x 2048 of four
    models; FA2's heuristic gives 16 / 2 splits, 8 / 2 at head_dim 64, 16 / 4 for Qwen2.5-7B's 4 KV
    heads, as the profiled combines' Log_max_splits say): within 0.25 us of the H200's, as the same
    SMs and FA2 code should give; the plain least-squares split constant is lower (the large rows)."""
    fc = bench_script("fa2_combine")
    kernels, steps = f"{RUN_L}-kernels.csv", f"{RUN_L}.csv"
    assert len(fc.CALIBRATION_H100) == 8
    meas, base = inputs = fc.fit_inputs(kernels, "h100", steps)
    assert [base[r]["splits"] for r in fc.CALIBRATION_H100] == [16, 2, 16, 2, 8, 2, 16, 4]
    assert [2 ** meas[r]["log_max_splits"] for r in fc.CALIBRATION_H100] == [16, 2, 16, 2, 8, 2, 16, 4]
    f = fc.fit(kernels, inputs, "h100")
    assert {k: round(f[k], 2) for k in FA2_FIT_H100} == FA2_FIT_H100
    assert all(abs(f[k] - FA2_FIT[k]) < 0.25 for k in FA2_FIT)
    assert f["fa2_split_fixed_plain"] == pytest.approx(1.28, abs=0.01)
    assert f["fa2_combine_fixed_plain"] == pytest.approx(1.64, abs=0.01)


def test_fa2_fit_h100_is_the_documents() -> None:
    """hw_configs/h100.yaml carries the H100 fit (h100fa2); h100-8.yaml builds on it (``gpu: h100.yaml``)."""
    for doc in ("h100.yaml", "h100-8.yaml"):
        g = load_gpu_node(ROOT / "hw_configs" / doc).gpu
        assert g.fa2_pair_calibrated
        assert (g.launch_s("fa2_split"), g.launch_s("fa2_combine")) == pytest.approx((2.27e-6, 1.63e-6))


def test_fa2_fit_h100_output_is_committed(capsys) -> None:
    fc = bench_script("fa2_combine")
    args = ["--fit", f"{RUN_L.relative_to(ROOT)}-kernels.csv", "--gpu", "h100", "--shapes",
            f"{RUN_L.relative_to(ROOT)}.csv"]
    assert fc.main(args) == 0
    assert capsys.readouterr().out == (ROOT / "benchmarks/gpu/h100-20261125l-fa2combine-fit.txt").read_text()


def test_fa2_combine_script_rows_and_run_ap_kernels() -> None:
    """fa2_combine.py (run as): 32 rows, K/V copies spanning 2x L2; its reader finds run ap's b1
    row's split kernel (5.9 us) and combine (14.3 us, Log_max_splits 6) by name."""
    fc = bench_script("fa2_combine")
    assert len(fc.rows()) == 32
    assert fc.copies_for(1, 1, 1024) == 200 and fc.copies_for(64, 8, 32768) == 1
    assert fc.calls_for(64, 8, 32768) == 4
    ap = fc.measured(str(ROOT / "benchmarks/gpu/h200-20261128ap-tpshard70-kernels.csv.gz"))
    b1 = ap["tp8_b1_l8192:flash:graph"]
    assert b1["log_max_splits"] == 6
    assert b1["main"] == pytest.approx(5.9, abs=0.2) and b1["combine"] == pytest.approx(14.3, abs=0.2)


def test_a_short_query_block_over_its_own_kv_waits_like_one_split_decode() -> None:
    """128 queries per (sequence, head), MHA, no mask: one CTA per KV head, so its K/V tiles are
    all first reads (run p's fa2_fullq rows); the 4-row decode of the same grid costs the same
    waits (measured alike: 450 vs 445 us on the H100)."""
    g = gpu()
    (fullq,) = flash_prefill("a", 64, 8, 8, 128, 128, g, causal=False, kv_len=4096)
    (dec,) = flash_decode("a", 64, 32, 8, 4096, 128, g)
    assert fullq.ctas == dec.ctas == 512
    assert fullq.groups[0].stall_s == pytest.approx(dec.groups[0].stall_s)
    t_full = elapsed_s(simulate_gpu([(fullq, 0)], g, mode="graph"))
    t_dec = elapsed_s(simulate_gpu([(dec, 0)], g, mode="graph"))
    assert t_full == pytest.approx(t_dec, rel=0.05)


def test_attention_fit_reads_only_its_calibration_rows_and_gives_the_committed_constants() -> None:
    """The four calibration rows (one per FA2 tile) of runs a and d give h100.yaml's tensor share
    and overlap; every other row poisoned, the fit is the same."""
    rows = list(csv.DictReader(SWEEP.open())) + list(csv.DictReader(RUN_D.open()))
    spec = load_spec(H100, GpuSpec)
    assert sum(r["name"] in ATTENTION_CALIBRATION for r in rows) == 4
    poisoned = [r if r["name"] in ATTENTION_CALIBRATION else dict(r, median_us="1.0") for r in rows]
    fit = fit_attention(poisoned, spec)
    assert fit["attention_tensor"] == pytest.approx(spec.efficiency.attention_tensor)
    assert fit["attention_overlap"] == pytest.approx(spec.efficiency.attention_overlap)


def test_overlap_hides_its_share_of_the_shorter_of_mma_and_shared_reads() -> None:
    """One CTA alone on an SM: MMA time m, shared reads b, exponentials e: its main loop takes
    m + b + e - overlap x min(m, b) (closed form, two overlaps)."""
    spec = load_spec(H100, GpuSpec)
    for overlap in (0.0, 0.55):
        g = Gpu(spec.model_copy(update={"efficiency": spec.efficiency.model_copy(update={"attention_overlap": overlap})}))
        grp = CtaGroup(1, 0.0, flops=2e9, tiles=1, sfu=1e6, smem_bytes=64e6)
        t = elapsed_s(simulate_gpu([(GpuKernel("a", (grp,), 2, math="attention"), 0)], g, mode="graph"))
        m = 2e9 / (g.math_flops_per_s("attention") / g.sms)
        b = 64e6 / (g.shared_bytes_per_s / g.sms)
        e = 1e6 / (g.sfu_per_s / g.sms)
        fixed = g.launch_s("graph") + g.launch_s("pipeline")
        assert t == pytest.approx(fixed + m + b + e - overlap * min(m, b), rel=1e-9)


def test_eager_step_lets_the_host_run_ahead_across_layers() -> None:
    """Eager: two identical layers, each a host op then a GPU kernel as long as the op. Simulated
    whole, the second layer's host op overlaps the first layer's kernel (host, then both
    kernels back to back: 3 units); a layer alone from idle would take 2 units a layer (4)."""
    from rdusim.analysis.gpu.predict import _run_parts

    spec = load_spec(H100, GpuSpec)
    ops = dict.fromkeys(("gemm", "view", "transpose", "slice", "reshape_view", "elementwise_add", "elementwise_mul",
                         "elementwise_neg", "silu", "cat", "index_copy", "rms_norm", "embedding", "sdpa"), 1e-4)
    g = Gpu(spec.model_copy(update={"launch": spec.launch.model_copy(update={"eager_ops": ops, "eager_sequence": 1.0})}))
    kernel = GpuKernel("k", (CtaGroup(1, 0.0, 1e-4 * g.math_flops_per_s("gemm") / g.sms),), 1,
                       math="gemm", host_ops=("gemm",))
    one = elapsed_s(simulate_gpu([(kernel, 0)], g, mode="eager"))
    two = _run_parts([([kernel], 2)], g, "eager").seconds
    assert two < 2 * one
    assert two == pytest.approx(one + (one - 1e-4), rel=1e-6)  # the second host op hides under kernel 1


def test_site_host_costs_average_each_kind_over_its_call_sites_timed_behind() -> None:
    """Each kind's mean over its sites' loops with the GPU behind; the idle pass is not a host cost
    (run dq) and is ignored."""
    from rdusim.analysis.gpu.predict import site_host_costs
    from rdusim.config.schema import HOST_OPS

    def row(op: str, mode: str, us: float) -> dict:
        return {"set": "host", "kind": "site", "mode": mode, "median_us": str(us), "extra": f"op={op}"}
    rows = [row(op, mode, 10.0) for op in HOST_OPS for mode in ("behind", "idle")]
    rows += [row("gemm", "behind", 30.0), row("gemm", "idle", 400.0)]
    costs = site_host_costs(rows)
    assert costs == {"eager_ops": pytest.approx({**dict.fromkeys(HOST_OPS, 10e-6), "gemm": 20e-6})}
    with pytest.raises(ValueError, match="sdpa"):
        site_host_costs([r for r in rows if "op=sdpa" not in r["extra"]])


def test_pooled_host_costs_median_over_runs_and_the_sequence_ratio() -> None:
    """Each run's median over its groups, then the median over runs; ``eager_sequence`` is the median
    over the runs that timed a layer in sequence of each run's median sequence / loops ratio."""
    from rdusim.analysis.gpu.predict import pooled_host_costs, sequence_pairs, sequence_ratio
    from rdusim.config.schema import HOST_OPS

    def run(gemm: list[float], depth: int, sequences: tuple[float, ...] = ()) -> list[dict]:
        rows = [{"set": "host", "kind": "queue", "mode": "", "median_us": "1", "n": str(depth), "extra": ""}]
        for rnd, us in enumerate(gemm):
            tag = f"family=x;round={rnd};where=layer"
            rows += [{"set": "host", "kind": "site", "mode": mode, "batch": "1", "kv_len": "8",
                      "median_us": str(us if op == "gemm" and mode == "behind" else 10.0), "extra": f"op={op};{tag}"}
                     for op in HOST_OPS for mode in ("behind", "idle")]
            if rnd < len(sequences):  # the layer's loops sum to us + 130 (13 other kinds at 10)
                rows.append({"set": "host", "kind": "site_sequence", "mode": "behind", "batch": "1", "kv_len": "8",
                             "median_us": str(sequences[rnd] * (us + 130.0)), "extra": tag})
        return rows

    runs = {"a": run([20.0, 22.0, 30.0], 1018, (1.1, 1.3, 1.2)), "b": run([10.0], 1021),
            "c": run([40.0, 50.0], 1021, (1.5, 1.4))}
    assert sequence_ratio(sequence_pairs(runs["a"])) == pytest.approx(1.2)
    pooled = pooled_host_costs(runs)
    assert pooled["eager_ops"]["gemm"] == pytest.approx(22e-6)          # median of 22, 10, 45
    assert pooled["eager_ops"]["view"] == pytest.approx(10e-6)
    assert pooled["eager_sequence"] == pytest.approx(1.325)             # median of a's 1.2 and c's 1.45
    assert [r["eager_sequence"] for r in pooled["runs"].values()] == [pytest.approx(1.2), None, pytest.approx(1.45)]
    assert pooled["queue_depth"] == 1021
    assert [r["groups"] for r in pooled["runs"].values()] == [3, 1, 2]
    assert pooled_host_costs({"b": runs["b"]})["eager_sequence"] is None
    with pytest.raises(ValueError, match="pairs"):
        sequence_ratio([])


@pytest.mark.parametrize("gpu", ["h100", "h200"])
def test_eager_host_is_the_committed_site_measurement(gpu: str) -> None:
    """h100.yaml's and h200.yaml's per-op host costs are what benchmarks/gpu/host_costs.py derives
    from the committed runs beside each GPU (d-j; k) to its printed 0.1 us, and their
    ``eager_sequence`` its printed ratio (runs d, e, e pinned; run dq), not numbers typed in or
    fitted; the H200's run has no queue rows, so its queue depth is the H100 runs'. The same for
    the eager step's per-kernel gap (``eager_gap``: runs h, j against l; k against m)."""
    module = bench_script("host_costs")
    pooled = module.measured(gpu)
    launch = load_spec(ROOT / f"hw_configs/{gpu}.yaml", GpuSpec).launch
    assert launch.eager_ops == pytest.approx({op: round(v * 1e6, 1) * 1e-6 for op, v in pooled["eager_ops"].items()})
    assert launch.eager_sequence == round(pooled["eager_sequence"], 2) == {"h100": 1.21, "h200": 1.13}[gpu]
    assert launch.queue_depth == (pooled["queue_depth"] or module.measured("h100")["queue_depth"])
    assert launch.eager_gap_s == pytest.approx(round(module.measured_gap(gpu)["eager_gap"] * 1e6, 2) * 1e-6)
