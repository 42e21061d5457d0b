"""Self-speculation with DeepSeek-R1's MTP module: ``speculative: {draft: mtp}``."""

from __future__ import annotations

import pytest
import yaml

from rdusim.analysis.result import simulate
from rdusim.errors import ConfigError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.memory import memory_report
from rdusim.model.speculative import expected_accepted
from tests.synthetic import two_kernel_layers, write_mapping, write_node

MTP = {"draft": "mtp", "k": 2, "acceptance": {"rate": 0.85, "source": "DeepSeek-V3 report s5.4.3: 85-90%"}}


def _deepseek(folder, name, *, speculative=None, accepted=None):
    node = write_node(folder, 4)
    workload = {"seq_len": 1024, "batch": 4} | ({"accepted_tokens_per_step": accepted} if accepted else {})
    return write_mapping(folder, name, model="deepseek-r1", hardware=node, phase="decode",
                           layers=two_kernel_layers("deepseek-r1", "decode"), workload=workload,
                           defaults={"tp": 4, "chunk_tokens": 1, "kv_block_tokens": 512}, speculative=speculative)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("mtp")


def test_a_draft_step_is_the_mtp_layer_with_the_targets_kernels(folder):
    sd = simulate(_deepseek(folder, "mtp", speculative=MTP), record_events=False)
    plain = simulate(_deepseek(folder, "plain"), record_events=False)
    rows = sd.kernels.set_index(["layer_type", "kernel"])
    # k = 2 draft steps, each one MoE layer (mtp_layers: 1) with the target's MoE kernels at 1 query
    assert list(rows.loc["draft moe", "calls"]) == [2, 2]
    one = plain.kernels.set_index(["layer_type", "kernel"]).loc["moe"]
    per_call = rows.loc["draft moe", "latency_s"] / 2
    assert list(per_call) == pytest.approx(list(one["latency_s"] / one["calls"]), rel=1e-12)
    assert sd.accepted_tokens_per_step == pytest.approx(expected_accepted(0.85, 2))
    assert sd.speculative_split()["draft_s"] + sd.speculative_split()["verify_s"] == pytest.approx(sd.total_s)


def test_mtp_drafting_holds_the_same_memory_as_the_mtp_switch(folder):
    """The MTP layer's weights and KV, once: as ``workload.accepted_tokens_per_step`` counts them."""
    drafting = memory_report(build_plan(load_mapping(_deepseek(folder, "mem-sd", speculative=MTP))))
    switch = memory_report(build_plan(load_mapping(_deepseek(folder, "mem-switch", accepted=2.4))))
    plain = memory_report(build_plan(load_mapping(_deepseek(folder, "mem-plain"))))
    assert drafting["hbm"]["weights"] == pytest.approx(switch["hbm"]["weights"], rel=1e-12)
    assert drafting["hbm"]["kv_cache"] == pytest.approx(switch["hbm"]["kv_cache"], rel=1e-12)
    assert drafting["hbm"]["weights"] > plain["hbm"]["weights"]


def test_mtp_k_0_is_plain_decoding(folder):
    sd = simulate(_deepseek(folder, "mtp0", speculative=MTP | {"k": 0}), record_events=False)
    plain = simulate(_deepseek(folder, "plain0"), record_events=False)
    assert sd.total_s == plain.total_s and sd.memory == plain.memory


def test_mtp_needs_a_model_with_an_mtp_module(tmp_path):
    node = write_node(tmp_path, 4)
    path = write_mapping(tmp_path, "llama", model="llama-3.1-8b", hardware=node, phase="decode",
                           layers=two_kernel_layers("llama-3.1-8b", "decode"), workload={"seq_len": 256})
    data = yaml.safe_load(path.read_text())
    data["speculative"] = MTP
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError, match="mtp_layers: 0"):
        load_mapping(path)
