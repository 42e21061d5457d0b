"""The mapping core against oracles computed without it: textbook collective volumes,
brute-force causal (query, key) pair counts, Monte Carlo distinct-expert counts.

Plans are built through ``load_mapping`` + ``build_plan`` on the synthetic node of
``tests/synthetic.py`` (not the calibrated shipped hardware); expected values are closed
forms over the model's dimensions (hardware-and-models.md sections B and C), brute-force
enumeration or Monte Carlo.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rdusim.config.schema import KvPolicySpec
from rdusim.mapping.build import build_plan
from rdusim.mapping.bundle import load_mapping
from rdusim.mapping.routing import expected_distinct_experts
from rdusim.model.transformer import Shape, layer_graph
from tests.conftest import ROOT
from tests.synthetic import two_kernel_layers, write_mapping, write_node

DEEPSEEK_DECODE = ROOT / "mappings" / "deepseek-r1" / "decode.yaml"

BF16 = 2
LLAMA_HIDDEN = 4096                      # hardware-and-models.md C
LLAMA_HEADS, LLAMA_KV_HEADS, LLAMA_HEAD_DIM = 32, 8, 128
DS_HIDDEN, DS_HEADS = 7168, 128          # hardware-and-models.md B.1
DS_KV_DIM, DS_KV_RANK = 512 + 64, 512    # latent + rope key; the absorbed output is the latent
DS_EXPERTS, DS_TOP_K = 256, 8

ATTN_OPS = ["attn_norm", "q_proj", "kv_proj", "rope", "attention", "o_proj"]
FFN_OPS = ["ffn_norm", "ffn_up", "ffn_act", "ffn_down", "residual_add"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("oracles")


def _llama_prefill(folder, name, *, sockets=16, topology="all_to_all", tp=1, seq=64, batch=2,
                   chunk=32, block=8192, attn_shard=None, ffn_shard=None, mha_alone=False):
    """Llama-3.1-8B prefill in two kernels (attention block, FFN block), or three with the
    attention op alone in its kernel (``mha_alone``, as the shipped mapping has it)."""
    node = write_node(folder, sockets, topology)
    attn = [{"kernel": "Attn", "ops": ATTN_OPS, "shard": attn_shard or {}}]
    if mha_alone:
        attn = [{"kernel": "QKV", "ops": ATTN_OPS[:4], "shard": attn_shard or {}},
                {"kernel": "MHA", "ops": ["attention"]}, {"kernel": "O", "ops": ["o_proj"]}]
    layers = {"dense": [*attn, {"kernel": "FFN", "ops": FFN_OPS, "shard": ffn_shard or {}}]}
    path = write_mapping(folder, name, model="llama-3.1-8b", hardware=node, phase="prefill", layers=layers,
                         workload={"seq_len": seq, "batch": batch},
                         defaults={"tp": tp, "chunk_tokens": chunk, "kv_block_tokens": block})
    return build_plan(load_mapping(path))


def _collective_stages(plan) -> dict[str, list]:
    """``{stage name: [stage, ...]}`` over every kernel of every layer type."""
    found: dict[str, list] = {}
    for kernels in plan.kernels.values():
        for kernel in kernels:
            for stage in kernel.stages:
                if stage.op_class == "collective":
                    found.setdefault(stage.name, []).append(stage)
    return found


# ------------------------------------------------------------------------------ collectives
# Per socket, for a tensor of F bytes split n ways (textbook, e.g. Thakur et al. 2005; NCCL docs):
#   all-reduce sends 2(n-1)/n F; reduce-scatter and all-gather (n-1)/n F;
#   all-to-all sends (n-1)/n of its local shard F/n.
# Latency steps per phase: 1 on an all-to-all topology, n-1 on a ring; all-reduce has 2 phases.
DEGREES = (2, 4, 8, 16)


@pytest.mark.parametrize("n", DEGREES)
@pytest.mark.parametrize("topology", ["all_to_all", "ring"])
def test_tp_contracted_dimension_is_all_reduced(folder, n, topology):
    # TP over heads (o_proj contracts heads) and over the FFN width (ffn_down contracts it);
    # the norm and the residual add read the full hidden vector: one all-reduce each, nothing else
    seq, batch = 64, 2
    plan = _llama_prefill(folder, f"ar-{n}-{topology}", tp=n, topology=topology, seq=seq, batch=batch)
    full = batch * seq * LLAMA_HIDDEN * BF16
    found = _collective_stages(plan)
    assert sorted(found) == ["all_reduce(ffn_y)", "all_reduce(o)"]
    steps = 2 * (1 if topology == "all_to_all" else n - 1)
    for (stage,) in found.values():
        assert stage.p2p_bytes == pytest.approx(2 * (n - 1) / n * full, rel=1e-12)
        assert {c.p2p_steps for c in stage.chunks} == {steps}


@pytest.mark.parametrize("n", DEGREES)
def test_sequence_parallel_norms_reduce_scatter_then_all_gather(folder, n):
    # Megatron sequence parallelism: norms and the residual split by sequence, so each
    # partial-sum output is reduce-scattered and each norm output all-gathered for the next GEMM
    seq, batch = 64, 2
    plan = _llama_prefill(folder, f"sp-{n}", tp=n, seq=seq, batch=batch,
                          attn_shard={"attn_norm": {"seq": n}},
                          ffn_shard={"ffn_norm": {"seq": n}, "residual_add": {"seq": n}})
    full = batch * seq * LLAMA_HIDDEN * BF16
    found = _collective_stages(plan)
    assert sorted(found) == ["all_gather(hn)", "all_gather(xn)", "reduce_scatter(ffn_y)", "reduce_scatter(o)"]
    for (stage,) in found.values():
        assert stage.p2p_bytes == pytest.approx((n - 1) / n * full, rel=1e-12)
        assert {c.p2p_steps for c in stage.chunks} == {1}


@pytest.mark.parametrize("n", DEGREES)
def test_tp_projections_then_dp_attention_exchange_all_to_all(folder, n):
    # DeepSeek decode as published: projections TP over heads, attention DP over the batch.
    # q_abs goes from head-split to batch-split and o_lat back: two all-to-alls per layer
    batch = 16
    node = write_node(folder, 16)
    model = load_mapping(DEEPSEEK_DECODE).model
    layers = {}
    for layer_type in ("dense", "moe"):
        ops = list(layer_graph(model, layer_type, Shape("decode", batch, 1, 64), KvPolicySpec()).nodes)
        layers[layer_type] = [{"kernel": "Layer", "ops": ops, "shard": {"attention": {"batch": n}}}]
    path = write_mapping(folder, f"a2a-{n}", model="deepseek-r1", hardware=node, phase="decode", layers=layers,
                         workload={"seq_len": 64, "batch": batch}, defaults={"tp": n, "chunk_tokens": 1})
    found = _collective_stages(build_plan(load_mapping(path)))
    q_abs_shard = batch * DS_HEADS * DS_KV_DIM * BF16 / n      # one decode token per sequence
    o_lat_shard = batch * DS_HEADS * DS_KV_RANK * BF16 / n
    hidden = batch * DS_HIDDEN * BF16
    expected = {"all_to_all(q_abs)": (n - 1) / n * q_abs_shard, "all_to_all(o_lat)": (n - 1) / n * o_lat_shard,
                "all_reduce(o)": 2 * (n - 1) / n * hidden, "all_reduce(ffn_y)": 2 * (n - 1) / n * hidden,
                "all_reduce(moe_y)": 2 * (n - 1) / n * hidden}
    assert sorted(found) == sorted(expected)
    for name, stages in found.items():
        for stage in stages:
            assert stage.p2p_bytes == pytest.approx(expected[name], rel=1e-12), name


def test_pure_data_parallel_needs_no_collective(folder):
    node = write_node(folder, 4)
    layers = {"dense": [{"kernel": "Layer", "ops": ATTN_OPS + FFN_OPS}]}
    path = write_mapping(folder, "dp4", model="llama-3.1-8b", hardware=node, phase="prefill", layers=layers,
                         workload={"seq_len": 64, "batch": 8}, defaults={"dp": 4, "chunk_tokens": 64})
    plan = build_plan(load_mapping(path))
    assert _collective_stages(plan) == {}
    (kernel,) = plan.kernels["dense"]
    # each socket runs 2 of the 8 sequences: 2 x 64 rows in chunks of 64
    assert kernel.n_chunks == 2


# --------------------------------------------------------------------- causal attention pairs
def _brute_force_blocks(batch: int, seq: int, kv_seq: int, chunk_tokens: int, block: int,
                        causal: bool) -> list[list[tuple[int, int]]]:
    """Per chunk, per K/V block it reads: (query-key pairs, keys), by enumeration.

    The chunking rule (from docs/design.md): rows are (sequence, query) pairs in order, cut into
    ceil(rows / chunk_tokens) contiguous chunks, chunk i holding rows [i R / n, (i+1) R / n);
    each chunk reads, per sequence it touches, the keys up to its last query (all keys if not
    causal) in blocks of ``block`` from key 0.
    """
    rows = batch * seq
    n = math.ceil(rows / chunk_tokens)
    chunks = []
    for i in range(n):
        items = []
        for s in range(batch):
            queries = [r - s * seq for r in range(i * rows // n, (i + 1) * rows // n) if s * seq <= r < (s + 1) * seq]
            if not queries:
                continue
            last_key = max(queries) + 1 if causal else kv_seq
            for k0 in range(0, last_key, block):
                keys = range(k0, min(k0 + block, last_key))
                pairs = sum(1 for q in queries for k in keys if k <= q or not causal)
                items.append((pairs, len(keys)))
        chunks.append(items)
    return chunks


def _attention_stage(plan):
    (stage,) = [s for k in plan.kernels["dense"] for s in k.stages if s.op is not None and s.op.name == "attention"]
    return stage


@pytest.mark.parametrize("batch, seq, chunk, block, tp", [
    (1, 100, 32, 16, 1),     # 4 chunks of 25 queries; blocks of 16 cut inside the chunk
    (3, 37, 16, 8, 1),       # 111 rows in 7 unequal chunks that straddle sequences
    (2, 64, 64, 64, 8),      # everything a multiple; TP8 (4 heads, 1 KV head per socket)
    (1, 50, 7, 64, 1),       # a block longer than the sequence
    (2, 33, 100, 5, 1),      # one chunk holding both sequences
])
def test_causal_prefill_pairs_match_brute_force(folder, batch, seq, chunk, block, tp):
    # attention alone in its kernel: it streams K/V blocks from HBM (flash attention)
    plan = _llama_prefill(folder, f"pairs-{batch}-{seq}-{chunk}-{block}-{tp}", sockets=8, tp=tp, seq=seq,
                          batch=batch, chunk=chunk, block=block, mha_alone=True)
    stage = _attention_stage(plan)
    flop_per_pair = 4 * LLAMA_HEAD_DIM * LLAMA_HEADS // tp        # QK^T and PV, 2 FLOP per MAC
    key_bytes = 2 * LLAMA_KV_HEADS // tp * LLAMA_HEAD_DIM * BF16     # K and V of one key
    expected = _brute_force_blocks(batch, seq, seq, chunk, block, causal=True)
    assert len(stage.chunks) == len(expected)
    for chunk_plan, blocks in zip(stage.chunks, expected, strict=True):
        assert [item.work for item in chunk_plan.items] == pytest.approx([p * flop_per_pair for p, _ in blocks],
                                                                         rel=1e-12)
        # each item's last load is its K/V block (a chunk's first item also streams the queries)
        assert [item.loads[-1] for item in chunk_plan.items] == [("hbm", pytest.approx(k * key_bytes, rel=1e-12))
                                                                 for _, k in blocks]
    # and in total, T(T+1)/2 pairs per sequence
    assert stage.work == pytest.approx(batch * seq * (seq + 1) / 2 * flop_per_pair, rel=1e-12)


@pytest.mark.parametrize("batch, kv_len, chunk, block", [(4, 100, 1, 32), (6, 64, 4, 64), (3, 17, 2, 5)])
def test_decode_attention_reads_each_cache_once(folder, batch, kv_len, chunk, block):
    node = write_node(folder, 1)
    layers = {"dense": [{"kernel": "Attn", "ops": ATTN_OPS}, {"kernel": "FFN", "ops": FFN_OPS}]}
    path = write_mapping(folder, f"dec-{batch}-{kv_len}-{chunk}-{block}", model="llama-3.1-8b", hardware=node,
                         phase="decode", layers=layers, workload={"seq_len": kv_len, "batch": batch},
                         defaults={"chunk_tokens": chunk, "kv_block_tokens": block})
    stage = _attention_stage(build_plan(load_mapping(path)))
    flop_per_pair = 4 * LLAMA_HEAD_DIM * LLAMA_HEADS
    expected = _brute_force_blocks(batch, 1, kv_len, chunk, block, causal=False)
    assert [[item.work for item in c.items] for c in stage.chunks] == [
        [pytest.approx(p * flop_per_pair, rel=1e-12) for p, _ in blocks] for blocks in expected]


# ----------------------------------------------------------------------------- MoE routing
# hardware-and-models.md B.3: E[distinct experts of 256 touched by B tokens, top-8 uniform]
CARD_DISTINCT = {8: 57, 16: 102, 32: 163, 64: 222, 128: 252}


def _monte_carlo_distinct(tokens: int, trials: int, rng: np.random.Generator) -> np.ndarray:
    """Distinct experts touched in each trial: every token picks 8 distinct experts of 256."""
    keys = rng.random((trials, tokens, DS_EXPERTS), dtype=np.float32)
    picks = np.argpartition(keys, DS_TOP_K, axis=-1)[..., :DS_TOP_K].reshape(trials, -1)
    hit = np.zeros((trials, DS_EXPERTS), dtype=bool)
    np.put_along_axis(hit, picks, True, axis=1)
    return hit.sum(axis=1)


def test_expected_distinct_experts_matches_monte_carlo_and_the_card():
    rng = np.random.default_rng(2024)
    for tokens, card in CARD_DISTINCT.items():
        samples = _monte_carlo_distinct(tokens, 16000 // tokens, rng)
        standard_error = samples.std() / math.sqrt(len(samples))
        expected = expected_distinct_experts(tokens, DS_EXPERTS, DS_TOP_K)
        assert abs(expected - samples.mean()) < 4 * standard_error, (tokens, expected, samples.mean())
        assert round(expected) == card


def _deepseek_decode_plan(folder, name, batch, *, chunk=4096, routing="expected", seed=0):
    node = write_node(folder, 1)
    path = write_mapping(folder, name, model="deepseek-r1", hardware=node, phase="decode",
                         layers=two_kernel_layers("deepseek-r1", "decode"),
                         workload={"seq_len": 64, "batch": batch, "routing": routing, "seed": seed},
                         defaults={"chunk_tokens": chunk})
    return build_plan(load_mapping(path))


def _expert_stage(plan, op="moe_up"):
    (stage,) = [s for k in plan.kernels["moe"] for s in k.stages if s.op is not None and s.op.name == op]
    return stage


@pytest.mark.parametrize("batch", sorted(CARD_DISTINCT))
def test_a_decode_batch_streams_the_experts_it_touches(folder, batch):
    # one chunk holds the whole batch: the shared expert plus the card's distinct routed experts,
    # each streamed once (3 x 7168 x 2048 FP8 bytes), and batch x (8 + 1) token-slots of work
    stage = _expert_stage(_deepseek_decode_plan(folder, f"moe-{batch}", batch))
    (chunk,) = stage.chunks
    assert len(chunk.items) == 1 + CARD_DISTINCT[batch]
    flop_per_slot = 2 * 2 * DS_HIDDEN * 2048                   # gate and up projections, 2 FLOP per MAC
    assert sum(item.work for item in chunk.items) == pytest.approx(batch * 9 * flop_per_slot, rel=1e-12)
    assert chunk.items[0].work == pytest.approx(batch * flop_per_slot, rel=1e-12)      # the shared expert
    up_bytes = 2 * DS_HIDDEN * 2048                              # gate + up of one expert, FP8
    assert all(item.loads[-1] == ("hbm", up_bytes) for item in chunk.items)


def test_sampled_routing_is_seeded_and_uniform(folder):
    # 1024 sequences in 64 chunks of 16 tokens: each chunk draws its tokens' top-8
    plans = {seed: _deepseek_decode_plan(folder, f"sampled-{seed}", 1024, chunk=16, routing="sampled", seed=seed)
             for seed in (3, 4)}
    again = _deepseek_decode_plan(folder, "sampled-3-again", 1024, chunk=16, routing="sampled", seed=3)
    assert _expert_stage(again).chunks == _expert_stage(plans[3]).chunks
    assert _expert_stage(plans[4]).chunks != _expert_stage(plans[3]).chunks
    flop_per_slot = 2 * 2 * DS_HIDDEN * 2048
    touched = []
    for chunk in _expert_stage(plans[3]).chunks:
        tokens = [item.work / flop_per_slot for item in chunk.items]
        assert tokens[0] == pytest.approx(16)                              # shared expert: every token
        assert sum(tokens[1:]) == pytest.approx(16 * DS_TOP_K)              # 8 routed slots per token
        assert max(tokens[1:]) <= 16 + 1e-9                                  # an expert at most once per token
        touched.append(len(tokens) - 1)
    # the mean over 64 chunks agrees with a Monte Carlo of the same routing (4 standard errors)
    reference = _monte_carlo_distinct(16, 1000, np.random.default_rng(7))
    assert abs(np.mean(touched) - reference.mean()) < 4 * reference.std() / math.sqrt(len(touched))


@pytest.mark.parametrize("batch, seq, chunk", [(1, 100, 32), (3, 37, 16)])
def test_causal_pairs_when_the_kernel_makes_its_own_keys(folder, batch, seq, chunk):
    # attention fused with the projections that produce K/V: chunk i's queries still see only
    # the keys up to their own position, so its work is its causal pairs, not 1/n of the total
    plan = _llama_prefill(folder, f"fused-{batch}-{seq}-{chunk}", sockets=1, seq=seq, batch=batch, chunk=chunk)
    stage = _attention_stage(plan)
    flop_per_pair = 4 * LLAMA_HEAD_DIM * LLAMA_HEADS
    expected = [sum(p for p, _ in blocks) * flop_per_pair
                for blocks in _brute_force_blocks(batch, seq, seq, chunk, 8192, causal=True)]
    assert [sum(item.work for item in c.items) for c in stage.chunks] == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------- PCU allocation
def _min_max_stage_time(works: list[float], caps: list[int], pcus: int, rate_per_pcu: float) -> float:
    """The smallest bottleneck (max over stages of work / (n x rate per PCU)) over integer PCU
    counts n >= 1, n <= cap, sum n <= pcus: give each next PCU to the current bottleneck
    (optimal for a min-max of decreasing functions)."""
    n = [1] * len(works)
    for _ in range(pcus - len(works)):
        open_ = [i for i in range(len(works)) if n[i] < caps[i]]
        if not open_:
            break
        worst = max(open_, key=lambda i: works[i] / n[i])
        n[worst] += 1
    return max(w / (k * rate_per_pcu) for w, k in zip(works, n, strict=True))


def _pcu_plan(folder):
    # Llama prefill with the SIMD lanes at 1/16 of the matrix peak (SN40L: 39.9 vs 638 TFLOP/s,
    # hardware-and-models.md A.7), so norms and activations need a few PCUs each
    node = write_node(folder / "slow-simd", 1, simd_peak="62.5 MFLOP/s")
    path = write_mapping(folder / "slow-simd", "pcus", model="llama-3.1-8b", hardware=node, phase="prefill",
                         layers=two_kernel_layers("llama-3.1-8b", "prefill"), workload={"seq_len": 4096},
                         defaults={"chunk_tokens": 1024})
    return build_plan(load_mapping(path))


def test_pcu_allocation_fits_the_socket(folder):
    from tests.synthetic import PCUS
    plan = _llama_prefill(folder, "pcus-fit", sockets=1, seq=4096, batch=1, chunk=1024, mha_alone=True)
    for kernel in plan.kernels["dense"]:
        assert sum(s.pcus for s in kernel.stages) <= PCUS, kernel.name


def test_pcu_allocation_balances_the_pipeline(folder):
    # the spatial pipeline runs at the pace of its slowest stage: the allocation should make that
    # stage as fast as integer PCU counts allow
    from tests.synthetic import PCUS
    for kernel in _pcu_plan(folder).kernels["dense"]:
        stages = [s for s in kernel.stages if s.pcus]
        rate_per_pcu = {s.name: s.rate_ops_per_s / s.pcus for s in stages}
        times = [s.work / rate_per_pcu[s.name] for s in stages]          # seconds on one PCU
        caps = [s.op.max_pcus(s.shard) or PCUS for s in stages]
        best = _min_max_stage_time(times, caps, PCUS, 1.0)
        actual = max(s.work / s.rate_ops_per_s for s in stages)
        assert actual == pytest.approx(best, rel=1e-9), kernel.name
