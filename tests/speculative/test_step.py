"""A speculative decode step: its event log, its verification kernels, k = 0, and HBM with the draft."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from rdusim.analysis.result import simulate
from rdusim.errors import ConfigError
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.capacity import hbm_fit, max_batch
from rdusim.mapping.memory import memory_report
from rdusim.mapping.plan import Chunk, Item, KernelPlan, SpeculativePlan, Stage
from rdusim.sim.engine import simulate_plan
from tests.synthetic import (
    FLOP_PER_S,
    LAUNCH_HW_S,
    P2P_LATENCY_S,
    two_kernel_layers,
    write_mapping,
    write_node,
)

US = 1e-6
SD = {"draft": "llama-3.2-1b", "k": 3, "acceptance": {"rate": 0.5, "source": "test input"}}


def _mapping(folder, name, *, speculative=None, batch=1, seq_len=256, tp=4):
    node = write_node(folder, 4)
    return write_mapping(folder, name, model="llama-3.1-8b", hardware=node, phase="decode",
                           layers=two_kernel_layers("llama-3.1-8b", "decode"),
                           workload={"seq_len": seq_len, "batch": batch},
                           defaults={"tp": tp, "chunk_tokens": 1, "kv_block_tokens": 128}, speculative=speculative)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("speculative")


# ----------------------------------------------------------------------------- event log
def _kernel(name, layer_type, work):
    stage = Stage("S", "gemm", 1, FLOP_PER_S, (), (Chunk((Item(work),)),))
    return KernelPlan(name=name, layer_type=layer_type, stages=(stage,), sram_bytes=0.0, chunk_tokens=1,
                      weights_tier="hbm")


def test_one_step_runs_k_draft_steps_then_the_verification(folder):
    base = build_plan(load_mapping(_mapping(folder, "events")))
    draft = dataclasses.replace(base, kernels={"draft dense": (_kernel("Draft", "draft dense", 1e3),)},
                                layer_counts={"draft dense": 1})
    plan = dataclasses.replace(base, kernels={"dense": (_kernel("Verify", "dense", 5e3),)}, layer_counts={"dense": 1},
                               speculative=SpeculativePlan(draft, 2, 0.5, 1.75))
    trace = simulate_plan(plan)
    # each call: launch 10 us, compute (draft 1 kFLOP = 1 us, verify 5 kFLOP = 5 us), barrier 1 us
    # (4 sockets all-to-all: one P2P latency step); the draft's layers are numbered after the target's
    assert (LAUNCH_HW_S, P2P_LATENCY_S) == pytest.approx((10 * US, 1 * US))
    got = [(r.kernel, r.layer_type, r.layer, round(r.start_s / US, 9), round(r.end_s / US, 9)) for r in trace.kernels]
    assert got == [("Draft", "draft dense", 1, 0.0, 12.0), ("Draft", "draft dense", 2, 12.0, 24.0),
                   ("Verify", "dense", 0, 24.0, 40.0)]
    computes = [(e.track, e.kernel, round(e.start_s / US, 9), round(e.end_s / US, 9)) for e in trace.events]
    assert computes == [("compute:S", "Draft", 10.0, 11.0), ("compute:S", "Draft", 22.0, 23.0),
                        ("compute:S", "Verify", 34.0, 39.0)]


# ------------------------------------------------------------------------- verification
def _stage(plan, layer_type, op):
    return next(s for k in plan.kernels[layer_type] for s in k.stages if s.op is not None and s.op.name == op)


def test_verification_is_not_decode_at_batch_k_plus_1(folder):
    k = SD["k"]
    verify = build_plan(load_mapping(_mapping(folder, "verify", speculative=SD)))
    plain = build_plan(load_mapping(_mapping(folder, "plain")))
    wide = build_plan(load_mapping(_mapping(folder, "wide", batch=k + 1)))
    attention = _stage(verify, "dense", "attention")
    assert attention.op.sizes["seq"] == k + 1 and attention.op.sizes["batch"] == 1
    # k + 1 queries of one sequence read its cache once, like one plain decode query
    assert attention.load_bytes("hbm") == _stage(plain, "dense", "attention").load_bytes("hbm")
    # ... where k + 1 sequences read k + 1 caches
    assert _stage(wide, "dense", "attention").load_bytes("hbm") == pytest.approx((k + 1) * attention.load_bytes("hbm"))
    # with k + 1 times the (query, key) work of a plain step
    assert attention.work == pytest.approx((k + 1) * _stage(plain, "dense", "attention").work)
    # GEMMs of batch x (k + 1) rows: the same work as batch k + 1, the same weights as batch 1
    for op in ("q_proj", "ffn_up", "ffn_down"):
        assert _stage(verify, "dense", op).work == pytest.approx(_stage(wide, "dense", op).work)
        assert _stage(verify, "dense", op).work == pytest.approx((k + 1) * _stage(plain, "dense", op).work)
    # k + 1 new KV entries written per sequence
    assert _stage(verify, "dense", "rope").store_bytes("hbm") == pytest.approx(
        (k + 1) * _stage(plain, "dense", "rope").store_bytes("hbm"))
    assert verify.speculative is not None and verify.speculative.k == k
    assert verify.speculative.accepted == pytest.approx(1 + 0.5 + 0.25 + 0.125)


def test_k_0_is_plain_decoding_bit_for_bit(folder):
    sd = simulate(_mapping(folder, "k0", speculative=SD | {"k": 0}))
    plain = simulate(_mapping(folder, "plain0"))
    assert sd.total_s == plain.total_s
    assert sd.kernels.equals(plain.kernels)
    assert sd.memory == plain.memory
    assert sd.trace.event_count == plain.trace.event_count
    assert sd.accepted_tokens_per_step == 1.0 and sd.tokens_per_s_per_user == 1.0 / plain.total_s


def test_result_reports_accepted_tokens_over_the_step(folder):
    result = simulate(_mapping(folder, "report", speculative=SD))
    split = result.speculative_split()
    assert split["draft_s"] > 0 and split["verify_s"] > 0
    assert split["draft_s"] + split["verify_s"] == pytest.approx(result.total_s, rel=1e-12)
    draft_rows = result.kernels[result.kernels["layer_type"] == "draft dense"]
    # the derived draft: one fused Decoder call per layer, k steps x 16 layers of Llama-3.2-1B
    assert list(draft_rows["kernel"]) == ["Decoder"] and list(draft_rows["calls"]) == [3 * 16]
    assert result.tokens_per_s_per_user == pytest.approx(1.875 / result.total_s)
    assert result.to_dict()["speculative"]["accepted_tokens_per_step"] == pytest.approx(1.875)


# ---------------------------------------------------------------------------------- HBM
def test_hbm_holds_the_drafts_weights_and_kv_cache(folder):
    seq_len, batch = 4096, 2
    target = build_plan(load_mapping(_mapping(folder, "hbm-plain", batch=batch, seq_len=seq_len)))
    loaded = load_mapping(_mapping(folder, "hbm-sd", speculative=SD, batch=batch, seq_len=seq_len))
    plan = build_plan(loaded)
    with_draft, alone = memory_report(plan)["hbm"], memory_report(target)["hbm"]
    # Llama-3.2-1B at TP 4: 16 layers x (q 2048x2048 + kv 2x2048x512 + o 2048x2048 + FFN 3x2048x8192) bf16,
    # norms 2 x 2048 per layer, one tied vocab x hidden matrix, each split 4 ways
    layer = 2048 * 2048 * 2 + 2 * 2048 * 512 + 3 * 2048 * 8192
    draft_weights = (16 * (layer * 2 / 4 + 2 * 2048 * 2) + 128256 * 2048 * 2 / 4)
    assert with_draft["weights"] - alone["weights"] == pytest.approx(draft_weights, rel=1e-3)
    # its KV cache: batch x seq_len x 16 layers x 8 KV heads x 64 x K,V x bf16, split by KV heads over 4
    draft_kv = batch * seq_len * 16 * 2 * 8 * 64 * 2 / 4
    assert with_draft["kv_cache"] - alone["kv_cache"] == pytest.approx(draft_kv)
    fit = hbm_fit(plan, loaded)
    assert fit.kv_bytes == pytest.approx(alone["kv_cache"] + draft_kv)


def test_max_batch_counts_the_draft(tmp_path):
    # a socket with just enough HBM for plain decode at batch 4 but not with the draft's KV beside it
    node = write_node(tmp_path / "small", 4)
    socket = yaml.safe_load((node.parent / "socket.yaml").read_text())
    plain_path = _mapping(tmp_path / "small", "mb-plain", seq_len=8192)
    sd_path = _mapping(tmp_path / "small", "mb-sd", seq_len=8192, speculative=SD)  # (rewrites socket.yaml)
    plain = build_plan(load_mapping(plain_path, batch=4))
    need = sum(memory_report(plain)["hbm"].values())
    socket["memory"]["hbm"]["capacity"] = f"{need * 1.02:.0f} B"
    (node.parent / "socket.yaml").write_text(yaml.safe_dump(socket, sort_keys=False))
    assert max_batch(plain_path)[0] == 4
    best, reason = max_batch(sd_path)
    assert best < 4 and "HBM per socket" in reason


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("change", "message"), [
    ({"k": -1}, "speculative.k: Input should be greater than or equal to 0"),
    ({"acceptance": {"rate": 1.5, "source": "x"}}, "speculative.acceptance.rate: Input should be less than or equal to 1"),
    ({"acceptance": {"rate": 0.5}}, "speculative.acceptance.source: required key is missing"),
    ({"drafts": 3}, "unknown key 'drafts'; did you mean 'draft'?"),
    ({"draft": "llama-3.2-1"}, "did you mean 'llama-3.2-1b'?"),
    ({"draft": "qwen3-8b"}, "a draft must share the target's tokenizer"),
    ({"mapping": "missing.yaml"}, "speculative.mapping"),
])
def test_bad_speculative_input_is_located(folder, change, message):
    path = _mapping(folder, "bad", speculative=SD | change)
    with pytest.raises(ConfigError) as error:
        build_plan(load_mapping(path))
    text = str(error.value)
    assert message in text
    assert str(path) in text and "speculative" in text


# ------------------------------------------------------------------------- the draft mapping
def test_a_named_draft_mapping_is_used_on_the_targets_node(folder):
    node = write_node(folder, 4)
    draft = write_mapping(folder, "draft-1b", model="llama-3.2-1b", hardware=node, phase="decode",
                            layers=two_kernel_layers("llama-3.2-1b", "decode"), workload={"seq_len": 64},
                            defaults={"tp": 2, "chunk_tokens": 1, "kv_block_tokens": 128})
    plan = build_plan(load_mapping(_mapping(folder, "named", speculative=SD | {"mapping": draft.name})))
    kernels = plan.speculative.draft.kernels["draft dense"]
    assert [k.name for k in kernels] == ["Attention", "FFN"]           # the named mapping's two kernels
    q_proj = next(s for s in kernels[0].stages if s.op is not None and s.op.name == "q_proj")
    assert q_proj.shard["heads"] == 2                                   # its own TP degree
    assert plan.speculative.draft.kv_len == plan.kv_len                 # at the target's prompt length


def test_a_draft_that_does_not_split_over_the_node_is_derived_at_a_smaller_tp(tmp_path):
    """Llama-3.2-3B's 24 heads do not split 16 ways: the derived draft runs at TP8, replicated."""
    node = write_node(tmp_path, 16)
    path = write_mapping(tmp_path, "t16", model="llama-3.1-8b", hardware=node, phase="decode",
                           layers=two_kernel_layers("llama-3.1-8b", "decode"), workload={"seq_len": 256},
                           defaults={"tp": 16, "chunk_tokens": 1, "kv_block_tokens": 128})
    data = yaml.safe_load(path.read_text())
    data["speculative"] = SD | {"draft": "llama-3.2-3b"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    draft = build_plan(load_mapping(path)).speculative.draft
    assert draft.mapping.defaults.tp == 8
    (decoder,) = draft.kernels["draft dense"]
    attention = next(s for s in decoder.stages if s.op is not None and s.op.name == "attention")
    assert attention.shard["heads"] == 8


def test_each_more_draft_token_costs_a_draft_step_and_a_wider_verification(folder):
    path = _mapping(folder, "ks", speculative=SD)
    results = [simulate(path, overrides=[f"speculative.k={k}"], record_events=False) for k in range(5)]
    drafts = [r.speculative_split()["draft_s"] for r in results]
    verifies = [r.speculative_split()["verify_s"] for r in results]
    assert drafts[0] == 0.0
    per_step = drafts[1]
    assert drafts == pytest.approx([k * per_step for k in range(5)], rel=1e-12)  # k identical draft steps
    assert all(b >= a for a, b in zip(verifies, verifies[1:], strict=False))       # k + 1 queries cost more
    assert [r.accepted_tokens_per_step for r in results] == pytest.approx([2 - 0.5**k for k in range(5)])
