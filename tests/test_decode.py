"""P4: KV bytes closed forms, maximum batch against an independent capacity calculation,
the published 128K decode row, and sweep behaviour."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rdusim.analysis.result import simulate
from rdusim.analysis.sweep import sweep
from rdusim.cli import main
from rdusim.config.loader import load_spec, model_path
from rdusim.config.schema import ModelSpec
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.capacity import max_batch, reservations
from rdusim.model.kv_cache import kv_bytes_per_token_layer
from tests.conftest import ROOT

DECODE = ROOT / "mappings" / "deepseek-r1" / "decode.yaml"
DECODE_SNAP = ROOT / "mappings" / "deepseek-r1" / "decode-snapstream.yaml"
GiB = 2**30


def test_kv_bytes_per_token_closed_forms():
    deepseek = load_spec(model_path("deepseek-r1"), ModelSpec)
    llama = load_spec(model_path("llama-3.1-8b"), ModelSpec)
    # MLA: latent 512 + decoupled RoPE key 64, BF16, per layer (hardware-and-models.md B.3)
    assert kv_bytes_per_token_layer(deepseek) == (512 + 64) * 2
    assert kv_bytes_per_token_layer(deepseek) * 61 == 70_272
    # GQA: K and V for 8 KV heads of 128, BF16, 32 layers = 128 KiB per token (section C)
    assert kv_bytes_per_token_layer(llama) * 32 == 131_072


def _weights_per_socket() -> float:
    """DeepSeek-R1 weights on one of 16 sockets, by hand from the model card (FP8 = 1 B):
    q_a, kv_a, norms and the BF16 router replicated; q_b, kv_b, o_proj, experts, dense FFN and
    the BF16 embedding + head split 16 ways; MTP adds one more MoE layer."""
    hidden, experts = 7168, 256 + 1
    replicated = hidden * 1536 + hidden * 576 + (hidden + 1536 + 512 + hidden)
    split = (1536 * 128 * 192 + 512 * 128 * 256 + 128 * 128 * hidden) / 16
    attention = replicated + split
    moe_layer = attention + hidden * 256 * 2 + experts * 3 * hidden * 2048 / 16
    dense_layer = attention + 3 * hidden * 18432 / 16
    head = 2 * 129280 * hidden * 2 / 16
    return 3 * dense_layer + 58 * moe_layer + head + moe_layer


def _independent_max_batch(seq_len: int, kept: int, prefill_kept_fraction: float) -> int:
    """Capacity by hand, per socket: HBM 64 GiB; KV per sequence = kept tokens x 1152 B x 62
    layers (61 + MTP), attention DP16 putting batch/16 sequences on each socket; the
    co-located prefill of one prompt of ``seq_len`` (the longest admitted) keeps its KV
    (replicated by TP16, plus one layer at full length while compressing) and two live BF16
    hidden-state tensors."""
    kv_per_sequence = kept * 1152 * 62
    prompt_kv = seq_len * 1152 * (62 * prefill_kept_fraction + (1 - prefill_kept_fraction))
    activations = 2 * seq_len * 7168 * 2
    free = 64 * GiB - _weights_per_socket() - prompt_kv - activations
    per_socket = math.floor(free / kv_per_sequence)
    return 16 * 2 ** int(math.log2(per_socket)) if per_socket >= 1 else 0


@pytest.mark.parametrize(("path", "seq_len", "max_prompt", "kept", "fraction"), [
    (DECODE, 131072, 131072, 131072, 1.0), (DECODE_SNAP, 131072, 131072, 32768, 0.25),
    (DECODE, 32768, 32768, 32768, 1.0), (DECODE, 32768, 131072, 32768, 1.0), (DECODE_SNAP, 32768, 131072, 8192, 0.25),
])
def test_max_batch_matches_an_independent_calculation(path, seq_len, max_prompt, kept, fraction):
    """The reserve follows the longest admitted prompt (deployment.max_prompt), not the request."""
    overrides = [f"workload.seq_len={seq_len}", f"deployment.max_prompt={max_prompt}"]
    assert max_batch(path, overrides=overrides)[0] == _independent_max_batch(max_prompt, kept, fraction)


def test_remote_prefill_reserves_one_incoming_compressed_cache():
    """deployment.prefill=remote: no prefill activations, one compressed prompt's cache
    (kept tokens x 1152 B x 62 layers) instead; the runtime reserve adds as given."""
    loaded = load_mapping(DECODE_SNAP, overrides=["deployment.prefill=remote", "deployment.runtime_reserve=1 GiB"])
    assert reservations(loaded) == {"incoming cache": 32768 * 1152 * 62, "runtime reserve": GiB}


def test_published_maximum_batches():
    """methods.md section 1: 16 without SnapStream, 64 with it, at a 128K prompt."""
    assert max_batch(DECODE, overrides=["workload.seq_len=131072"])[0] == 16
    assert max_batch(DECODE_SNAP, overrides=["workload.seq_len=131072"])[0] == 64


@pytest.mark.parametrize(("path", "batch", "published"), [(DECODE, 16, 434.0), (DECODE_SNAP, 64, 1832.0)])
def test_published_throughput_within_15_percent(path, batch, published):
    result = simulate(path, batch=batch, record_events=False)
    tokens_per_s = batch * 2.4 / result.total_s
    assert tokens_per_s == pytest.approx(published, rel=0.15)


def test_decode_step_never_beats_its_roofline():
    result = simulate(DECODE_SNAP, batch=64, record_events=False)
    assert (result.kernels["latency_s"] >= result.kernels["roofline_s"]).all()


def test_sweep_rows_and_determinism():
    a = sweep(DECODE, [131072], ["none", "snapstream"], "auto", workers=2)
    b = sweep(DECODE, [131072], ["none", "snapstream"], "auto", workers=1)
    assert a.equals(b)
    full = a[a["policy"] == "full"]
    assert list(full["batch"]) == [16, 32] and list(full["fits"]) == [True, False]
    assert "HBM per socket" in full.iloc[-1]["reason"] and set(full["max_batch"]) == {16}
    snap = a[a["policy"] == "snapstream"]
    assert set(snap["max_batch"]) == {64} and snap["kv_len"].iloc[0] == 32768
    ok = a[a["fits"]]
    assert (ok["tokens_per_s"] == ok["batch"] * 2.4 / ok["step_s"]).all()
    assert (ok["tpot_s"] == ok["step_s"] / 2.4).all()


@pytest.mark.parametrize(("argv", "message"), [
    (["--batch", "sixteen"], "--batch: expected comma-separated positive integers, got 'sixteen'"),
    (["--batch", "0"], "--batch: expected comma-separated positive integers, got '0'"),
    (["--policy", "snapstrem"], "unknown KV policy 'snapstrem'"),
])
def test_sweep_bad_arguments_exit_2(capsys, argv, message):
    assert main(["sweep", str(DECODE), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_simulate_bad_batch_exit_2(capsys):
    assert main(["simulate", str(DECODE), "--batch", "24"]) == 2
    err = capsys.readouterr().err
    assert "degree 16 does not divide batch=24" in err and "Traceback" not in err


def test_summaries_at_max_batch_and_gain():
    from rdusim.analysis.sweep import SWEEP_COLUMNS, at_max_batch, policy_gain  # noqa: PLC0415

    hbm = {"hbm_weights_bytes": 40, "hbm_kv_bytes": 20, "hbm_activations_bytes": 1, "hbm_reserved_bytes": 5,
           "hbm_capacity_bytes": 64}
    rows = [{"seq_len": 8, "policy": "full", "batch": 16, "fits": True, "tokens_per_s": 100.0},
            {"seq_len": 8, "policy": "full", "batch": 32, "fits": False, "reason": "HBM", **hbm},
            {"seq_len": 8, "policy": "snapstream", "batch": 16, "fits": True, "tokens_per_s": 120.0},
            {"seq_len": 8, "policy": "snapstream", "batch": 32, "fits": True, "tokens_per_s": 210.0},
            {"seq_len": 8, "policy": "snapstream", "batch": 64, "fits": False, "reason": "SRAM"}]
    frame = pd.DataFrame(rows, columns=SWEEP_COLUMNS)
    best = at_max_batch(frame).set_index("policy")
    assert best.loc["full", "max_batch"] == 16 and best.loc["full", "over_bytes"] == 2
    assert best.loc["snapstream", "limit"] == "SRAM" and math.isnan(best.loc["snapstream", "over_bytes"])
    gain = policy_gain(frame).iloc[0]
    assert gain["batch_gain"] == 2 and gain["throughput_gain"] == pytest.approx(2.1)


def test_simulate_diagnoses_hbm_overflow_with_the_numbers(capsys):
    assert main(["simulate", str(DECODE), "--batch", "32"]) == 2
    err = capsys.readouterr().err
    assert "does not fit: HBM per socket: weights 40.85 GiB + KV 17.44 GiB (batch 32 x 131072 tokens)" in err
    assert "> 64.00 GiB" in err and "Traceback" not in err
    assert main(["simulate", str(DECODE), "--batch", "32", "--ignore-capacity"]) == 0


def test_a_stated_prefill_reserve_replaces_the_derived_one(capsys):
    """deployment.prefill_reserve is an explicit input; simulate's budget and JSON show it."""
    assert reservations(load_mapping(DECODE_SNAP, overrides=["deployment.prefill_reserve=2 GiB"]))["prefill reserve"] == 2 * GiB
    assert main(["simulate", str(DECODE_SNAP), "--set", "deployment.prefill_reserve=2 GiB", "--format", "json"]) == 0
    budget = json.loads(capsys.readouterr().out)["memory"]["hbm_budget"]
    assert budget["prefill_reserve"] == 2 * GiB
    assert budget["free"] == pytest.approx(budget["capacity"] - budget["weights"] - budget["kv_cache"]
                                           - budget["activations"] - 2 * GiB - budget["runtime_reserve"])
    assert main(["simulate", str(DECODE_SNAP)]) == 0
    table = capsys.readouterr().out
    assert "prefill reserve" in table and "next batch (128) does not fit: margin -0.05 GiB" in table
