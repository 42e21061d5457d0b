"""The GQA layer graph with and without Qwen3's per-head QK-RMSNorm (``attention.qk_norm``).

Qwen3 (hardware-and-models.md C, "extras"; HF ``Qwen3Attention``) applies ``q_norm`` and
``k_norm``, an RMSNorm over head_dim with a head_dim-wide weight, to each query and key head
after the projections and before the rotary embedding. Llama has neither: its graph is the
one it always was.
"""

from __future__ import annotations

import pytest

from rdusim.config.loader import model_path, read_document, validate
from rdusim.config.schema import KvPolicySpec, ModelSpec
from rdusim.model.transformer import Shape, layer_graph

SHAPES = [Shape("prefill", 2, 16, 16), Shape("decode", 4, 1, 64)]


def _model(name: str) -> ModelSpec:
    return validate(read_document(model_path(name)), ModelSpec)


def _graph(model: ModelSpec, shape: Shape):
    return layer_graph(model, "dense", shape, KvPolicySpec())


def _edges(graph) -> dict[tuple[str, str], list[str]]:
    return {(u, v): d["tensors"] for u, v, d in graph.edges(data=True)}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.phase)
def test_qwen3_normalises_q_and_k_between_the_projections_and_rope(shape):
    graph = _graph(_model("qwen3-8b"), shape)
    assert list(graph.nodes)[:6] == ["attn_norm", "q_proj", "kv_proj", "q_norm", "k_norm", "rope"]
    edges = _edges(graph)
    # q_norm reads the queries, k_norm the keys; rope the normed q and k and the values
    assert edges[("q_proj", "q_norm")] == ["q"] and edges[("kv_proj", "k_norm")] == ["kv_new"]
    assert edges[("q_norm", "rope")] == ["q_n"] and edges[("k_norm", "rope")] == ["k_n"]
    assert edges[("kv_proj", "rope")] == ["kv_new"] and ("q_proj", "rope") not in edges
    ops = {n: graph.nodes[n]["op"] for n in graph.nodes}
    sizes = ops["rope"].sizes
    tokens = shape.batch * shape.seq
    for name, heads, tp_dim in (("q_norm", 32, "heads"), ("k_norm", 8, "kv_heads")):
        op = ops[name]
        assert op.op_class == "elementwise" and op.tp_dim == tp_dim
        assert op.work() == 4.0 * tokens * heads * 128          # RMSNorm: 4 element ops per element
        weight = next(t for t in op.reads if t.role == "weight")
        assert (weight.name, weight.dims, weight.nbytes(sizes)) == (f"w_{name}", ("head_dim",), 128 * 2)
    # k_norm reads half of kv_new (the keys), rope the other half (the values): kv_proj's
    # output is read once, as before
    kv_new = ops["kv_proj"].tensor("kv_new").nbytes(sizes)
    k_read = ops["k_norm"].tensor("kv_new").nbytes(sizes)
    v_read = ops["rope"].tensor("kv_new").nbytes(sizes)
    assert k_read == v_read == kv_new / 2 == ops["k_norm"].tensor("k_n").nbytes(sizes)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.phase)
def test_llama_graph_has_no_qk_norm_and_qk_norm_only_adds_its_two_ops(shape):
    llama = _model("llama-3.1-8b")
    plain = _graph(llama, shape)
    assert "q_norm" not in plain.nodes and "k_norm" not in plain.nodes
    assert _edges(plain)[("q_proj", "rope")] == ["q"] and _edges(plain)[("kv_proj", "rope")] == ["kv_new"]
    normed = _graph(llama.model_copy(update={"attention": llama.attention.model_copy(update={"qk_norm": True})}),
                    shape)
    assert [n for n in normed.nodes if n not in plain.nodes] == ["q_norm", "k_norm"]
    # every other op is the same op; rope reads what the norms made instead
    assert all(normed.nodes[n]["op"] == plain.nodes[n]["op"] for n in plain.nodes if n != "rope")
    rope, plain_rope = normed.nodes["rope"]["op"], plain.nodes["rope"]["op"]
    assert rope.writes == plain_rope.writes and rope.work() == plain_rope.work()
    sizes = rope.sizes
    assert sum(t.nbytes(sizes) for t in rope.reads) == sum(t.nbytes(sizes) for t in plain_rope.reads)
