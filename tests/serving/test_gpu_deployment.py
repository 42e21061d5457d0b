"""GPU deployments in serving: a serving file whose mappings are ``gpu_mapping`` documents.

The engine's inputs must be the GPU model's own figures (step times bit for bit, HBM in closed
form), the replicas of a node separate engines, and every rule that spans the two mappings a
located error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rdusim.analysis.gpu.predict import load_gpu_mapping, model_bytes, simulate_gpu_mapping
from rdusim.analysis.serving.deployment import interpolation_error, load_deployment
from rdusim.analysis.serving.metrics import Slo
from rdusim.analysis.serving.run import run_serving
from rdusim.analysis.serving.sweep import nodes_needed
from rdusim.analysis.serving.workload import GeneratedWorkload, parse_distribution
from rdusim.cli import main
from rdusim.errors import ConfigError
from tests.cli_edits import line_of, run

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "mappings/llama-3.1-8b"
GPU_SERVE = FOLDER / "serve-h100.yaml"
SN40L_SERVE = FOLDER / "serve.yaml"


@pytest.fixture(scope="module")
def deployment():
    return load_deployment(GPU_SERVE)


def test_step_tables_are_the_gpu_model_bit_for_bit(deployment):
    """Every grid point is ``simulate_gpu_mapping`` of the mapping at that point (batch 1 for the
    prefill; the bucket and the KV length for the decode), the same floats."""
    prefill, model, node = load_gpu_mapping(FOLDER / "prefill-h100.yaml")
    for tokens, seconds in zip(deployment.prefill_table.tokens, deployment.prefill_table.seconds, strict=True):
        assert seconds == simulate_gpu_mapping(prefill, model, node, seq_len=tokens, batch=1,
                                               check_fit=False).step.seconds
    decode, model, node = load_gpu_mapping(FOLDER / "decode-h100.yaml")
    table = deployment.decode_table
    for bucket, row in zip(table.buckets, table.seconds, strict=True):
        for kv, seconds in zip(table.kv_tokens, row, strict=True):
            assert seconds == simulate_gpu_mapping(decode, model, node, seq_len=kv, batch=bucket,
                                                   check_fit=False).step.seconds


def test_hbm_and_buckets_in_closed_form(deployment):
    """Llama-3.1-8B on one H100: bf16 KV of 32 layers x 2 x 8 heads x 128 = 131,072 bytes a token;
    free HBM = 80 GB less the weights; at 8192 tokens 59 sequences fit, so the buckets are the
    powers of two to 32 and 56 (the largest multiple of 8: vLLM's capture sizes)."""
    _, model, _ = load_gpu_mapping(FOLDER / "decode-h100.yaml")
    m = deployment.model
    assert m.kv_bytes_per_token == m.shipped_bytes_per_token == 2 * 32 * 2 * 8 * 128
    assert m.kv_bytes_per_group == 80e9 - model_bytes(model)
    assert math.floor(m.kv_bytes_per_group / (131072 * 8192)) == 59
    assert m.batch_buckets == (1, 2, 4, 8, 16, 32, 56)
    assert m.kv_groups == 1 and m.decode_nodes == 8 and m.layout == "colocated"
    assert deployment.info["hardware"] == "H100-SXM5-80GB" and deployment.info["replicas_per_node"] == 1


def test_interpolation_follows_the_model(deployment):
    """Decode steps are linear in the KV length on the GPU too: the table's midpoints within 1%;
    the prefill's power law within 5% above 1K tokens (host-paced eager prefill below)."""
    frame = interpolation_error(deployment)
    decode = frame[frame.phase == "decode"]
    assert decode.error.abs().max() < 0.01
    prefill = frame[(frame.phase == "prefill") & (frame.tokens > 1024)]
    assert prefill.error.abs().max() < 0.05


def test_a_run_is_served_and_deterministic(deployment):
    """Requests at a rate the eight replicas carry: all finish, every replica works, the same
    workload and seed give the same summary twice."""
    workload = GeneratedWorkload(parse_distribution("fixed:2048", "prompt"), parse_distribution("fixed:64", "output"),
                                 duration_s=None, requests=200, seed=3).at(8.0)
    first = run_serving(deployment, workload, record_events=False)
    again = run_serving(load_deployment(GPU_SERVE), workload, record_events=False)
    assert first.summary == again.summary
    assert first.summary["completed"] == 200 and first.summary["rejected"] == 0
    assert first.summary["total_output_tokens"] == 200 * 64
    assert len(first.nodes) == 8 and (first.nodes["busy_decode_s"] > 0).all()


def _serving(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(text)
    return path


def _gpu_node_mapping(tmp_path: Path) -> Path:
    """decode-h100.yaml on the 8-GPU H100 node: eight TP1 replicas a node."""
    text = (FOLDER / "decode-h100.yaml").read_text().replace("../../hw_configs/h100.yaml",
                                                             str(ROOT / "hw_configs/h100-8.yaml"))
    path = tmp_path / "decode-h100x8.yaml"
    path.write_text(text)
    return path


def test_a_node_holds_gpus_over_tp_engines(tmp_path):
    """Disaggregated: two 8-GPU nodes of TP1 decode replicas are 16 engines, one single-GPU
    prefill node one; the KV cache a prompt ships is the whole cache, once."""
    decode = _gpu_node_mapping(tmp_path)
    path = _serving(tmp_path, f"""kind: serving
name: gpu-disaggregated
layout: disaggregated
prefill:
  mapping: {FOLDER / 'prefill-h100.yaml'}
  nodes: 1
  grid: [1024, 2048, 4096, 8192]
decode:
  mapping: {decode}
  nodes: 2
  kv_grid: [1024, 8192]
interconnect: {{bandwidth: "50 GB/s", latency: "10 us"}}
""")
    m = load_deployment(path).model
    assert (m.prefill_nodes, m.decode_nodes) == (1, 16)
    assert m.shipped_bytes_per_token == 131072
    # capacity planning counts the file's nodes, not their engines: one decode node (8 engines)
    # and, in the file's ratio of 1 to 2, one prefill node
    workload = GeneratedWorkload(parse_distribution("fixed:1024", "prompt"), parse_distribution("fixed:16", "output"),
                                 duration_s=None, requests=20)
    row = nodes_needed(path, 1.0, workload, Slo(10.0, 1.0), max_decode_nodes=1).iloc[0]
    assert (row.decode_nodes, row.prefill_nodes, row.nodes, row.meets) == (1, 1, 2, True)


@pytest.mark.parametrize(("change", "key", "message"), [
    ("prefill-h100.yaml|decode.yaml", "decode", "a mapping (SN40L) beside a gpu_mapping prefill mapping"),
    ("prefill-h100.yaml|decode-h100.yaml", "prefill", "is a decode mapping; the prefill side needs phase: prefill"),
])
def test_rules_across_the_two_mappings_are_located(tmp_path, capsys, change, key, message):
    prefill, decode = change.split("|")
    path = _serving(tmp_path, f"""kind: serving
name: bad
layout: colocated
prefill:
  mapping: {FOLDER / (decode if key == 'prefill' else prefill)}
decode:
  mapping: {FOLDER / decode}
  nodes: 1
""")
    code, err = run(capsys, "serve", str(path), "--rate", "1", "--requests", "2")
    assert code == 2
    assert f"{path}:{line_of(path, key + ':') + 1}: {key}.mapping: " in err
    assert message in err


def test_colocated_needs_one_replica_for_both_phases(tmp_path):
    decode = _gpu_node_mapping(tmp_path)
    path = _serving(tmp_path, f"""kind: serving
name: bad
layout: colocated
prefill:
  mapping: {FOLDER / 'prefill-h100.yaml'}
decode:
  mapping: {decode}
  nodes: 1
""")
    with pytest.raises(ConfigError, match=r"serve.yaml:5: prefill.mapping: co-located: the prefill mapping runs "
                                          r"on 1 x H100-SXM5-80GB where the decode mapping runs on 1 x 8xH100"):
        load_deployment(path)


def test_policies_must_agree(tmp_path):
    with pytest.raises(ConfigError, match=r"decode.mapping: its KV policy snapkv .* differs from the prefill "
                                          r"mapping's full"):
        load_deployment(GPU_SERVE, decode_overrides=["kv_policy.name=snapkv"])


def test_sn40l_against_gpus_in_one_sweep(capsys):
    """The shipped pair: at a low rate both serve every request within the SLO; the SN40L node's
    tokens come faster (its decode step is shorter at small batch), the eight H100s carry more."""
    code = main(["serve-sweep", f"{SN40L_SERVE},{GPU_SERVE}", "--rate", "2,32", "--requests", "400",
                 "--prompt-tokens", "lognormal:2048,0.5", "--output-tokens", "lognormal:256,0.6", "--workers", "1"])
    out = capsys.readouterr().out
    assert code == 0
    rows = {(line.split()[0], line.split()[1]): line.split() for line in out.splitlines()
            if line.startswith("llama-3.1-8b-")}
    sn40l, gpu = rows[("llama-3.1-8b-sn40l8", "2")], rows[("llama-3.1-8b-h100x8", "2")]
    assert float(sn40l[5]) < float(gpu[5])          # p90 TPOT ms at 2 req/s
    assert float(rows[("llama-3.1-8b-h100x8", "32")][2]) > 2 * float(rows[("llama-3.1-8b-sn40l8", "32")][2])


def test_one_tp8_replica_splits_the_cache_over_its_gpus():
    """serve-h100x8-tp8.yaml: one 8 x H100 node running one TP8 replica is one engine; each GPU
    holds an eighth of every sequence's KV (16,384 bytes a token) next to an eighth of the weights,
    so at 8192 tokens floor((80 GB - weights / 8) / (8192 x 16,384)) sequences fit: 581, bucket 576."""
    deployment = load_deployment(FOLDER / "serve-h100x8-tp8.yaml")
    _, model, _ = load_gpu_mapping(FOLDER / "decode-h100x8-tp8.yaml")
    m = deployment.model
    assert (m.decode_nodes, m.kv_groups) == (1, 1)
    assert m.kv_bytes_per_token == 131072 / 8 and m.shipped_bytes_per_token == 131072
    assert m.kv_bytes_per_group == 80e9 - model_bytes(model) / 8
    assert math.floor(m.kv_bytes_per_group / (16384 * 8192)) == 581
    assert m.batch_buckets[-2:] == (512, 576)


@pytest.mark.parametrize(("key", "value"), [("decode.max_context", "200000"), ("prefill.grid", "[1024, 262144]")])
def test_a_context_past_the_model_is_refused(key, value):
    """Llama-3.1-8B's context is 131,072 tokens: a longer max_context or prefill grid point is located."""
    with pytest.raises(ConfigError, match=rf"serve-h100.yaml:\d+: {key}: \d+ tokens exceed llama-3.1-8b's context of "
                                          r"131072 tokens"):
        load_deployment(GPU_SERVE, [f"{key}={value}"])
