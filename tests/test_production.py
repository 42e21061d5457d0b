"""The shipped production mappings (docs/calibration.md, "Production configurations") run
through the CLI as a user would run them: ``rdusim simulate`` and ``rdusim sweep``, with the
behaviour each configuration is built for."""

from __future__ import annotations

import csv
import json

import pytest

from rdusim.analysis.result import simulate
from rdusim.cli import main
from tests.conftest import ROOT

SPEED = ROOT / "mappings/deepseek-r1/decode-high-speed.yaml"
THROUGHPUT = ROOT / "mappings/deepseek-r1/decode-high-throughput.yaml"
LATENT_BYTES = (512 + 64) * 2       # one BF16 latent + rope key per token and layer (B.3)


@pytest.mark.parametrize(("path", "batch", "kernels"), [
    (SPEED, 1, {"Decoder", "Embedding", "Classifier", "Sampling"}),
    (THROUGHPUT, 256, {"MLA", "FFN", "Embedding", "Classifier", "Sampling"}),
])
def test_simulate_runs_each_production_mapping(path, batch, kernels, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["simulate", str(path), "--format", "json", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["phase"], data["batch"], data["seq_len"]) == ("decode", batch, 8192)
    assert {row["kernel"] for row in data["kernels"]} == kernels
    assert abs(sum(r["latency_s"] for r in data["kernels"]) - data["total_s"]) < 1e-12
    budget = data["memory"]["hbm_budget"]
    assert budget["free"] > 0 and budget["capacity"] == 64 * 2**30   # fits one SN40L's HBM, reserves included
    assert main(["simulate", str(path)]) == 0                          # the table a user reads
    assert "decode step:" in capsys.readouterr().out


def test_sweep_defaults_to_the_mappings_own_prompt_length(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["sweep", str(SPEED), "--batch", "1,2,4", "--workers", "1", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [int(r["seq_len"]) for r in rows] == [8192] * 3 and all(r["fits"] == "True" for r in rows)
    aggregate = [float(r["tokens_per_s"]) for r in rows]
    per_user = [a / b for a, b in zip(aggregate, (1, 2, 4), strict=True)]
    # configured for speed: a larger batch buys aggregate throughput with per-user speed
    assert aggregate == sorted(aggregate) and per_user == sorted(per_user, reverse=True)


def test_sweep_the_throughput_configuration_up_to_its_users(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["sweep", str(THROUGHPUT), "--batch", "64,256", "--workers", "1", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(int(r["seq_len"]), int(r["batch"]), r["fits"]) for r in rows] == [(8192, 64, "True"), (8192, 256, "True")]
    assert float(rows[1]["tokens_per_s"]) > 2 * float(rows[0]["tokens_per_s"])


def test_the_high_speed_step_is_one_looped_call_per_layer_type_with_a_replicated_latent_cache():
    result = simulate(SPEED)
    moe = [r for r in result.trace.kernels if r.layer_type == "moe"]
    assert len(moe) == 58 and moe[0].launch_sync_s == 1e-6                  # one hardware launch for the loop
    assert all(r.launch_sync_s == 0 for r in moe[1:-1])                        # no barrier between iterations
    attention = next(s for k in result.plan.kernels["moe"] for s in k.stages if s.name == "attention")
    assert attention.shard == {"heads": 16} and attention.load_bytes("hbm") == 8192 * LATENT_BYTES
    routed = {s.name for k in result.plan.kernels["moe"] for s in k.stages if s.loads_follow_inputs}
    assert routed == {"moe_up", "moe_down"}                                    # experts load after the router


def test_the_throughput_configuration_splits_sequences_over_the_sockets():
    result = simulate(THROUGHPUT, record_events=False)
    attention = next(s for k in result.plan.kernels["moe"] for s in k.stages if s.name == "attention")
    assert attention.shard == {"batch": 16}
    assert attention.load_bytes("hbm") == 16 * 8192 * LATENT_BYTES           # its 16 sequences' caches, once
