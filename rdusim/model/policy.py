"""What each KV-cache policy does to a layer: how many tokens it keeps, and the ops it adds.

Owns: ``kv_length``, ``kascade_topk``, ``kascade_anchor_layers``, ``policy_sizes``,
``add_policy_ops``. Imports: builder, config, kv_policy (the sizes: one definition shared with
``rdusim.kernels``). Semantics: ../shared/reference/methods.md.

- full: keeps the prompt; no extra work.
- snapstream: keeps ``ceil(T / compression)`` slots (sink + ring + top-K, split as
  ``rdusim.kv_policy.snapstream_slots``). Prefill adds the
  Streaming Ring Buffer and SnapKV Compression kernels; decode only moves the write index.
- streamingllm: SnapStream with K = 0 (sink + ring): the ring gather at prefill.
- snapkv: one-time prefill compression (window votes, top-K gather); appends at decode.
- h2o: fixed budget; prefill computes accumulated attention (a QK pass) and picks heavy
  hitters; every decode step accumulates this step's attention and evicts the lowest score.
- longflow: static cache; prompts longer than C are compressed with SnapKV first; every
  decode step scores alpha * |v|_1 per slot and takes the argmin as the next victim.
- kascade: keeps everything (sparse attention, not a memory saving). Decode: anchor
  layers run a score pass, pool it, select top-k and attend sparsely; reuse layers attend
  to the anchor's k keys only. k = min(max(0.1 L, 128), L).
Ops a policy adds at decode (and H2O's prefill pass) join the kernel of ``attention``.
"""

from __future__ import annotations

import dataclasses
import math

from rdusim.config.schema import KvPolicySpec
from rdusim.errors import MappingError
from rdusim.kv_policy import (
    RING_BUFFER,
    compressed_budget,
    kascade_k,
    kept_tokens,
    snapstream_slots,
)
from rdusim.model.builder import LayerBuilder
from rdusim.model.ops import TensorUse

FP32 = 4


def kv_length(seq_len: int, policy: KvPolicySpec) -> int:
    """Tokens of KV each sequence keeps after prefill."""
    return kept_tokens(policy.name, seq_len, compressed_budget(seq_len, policy.compression))


def kascade_topk(kv_len: int, policy: KvPolicySpec) -> int:
    """Kascade's top-k budget: ``min(max(fraction * L, minimum), L)`` (methods.md section 6)."""
    return kascade_k(kv_len, policy.topk_fraction, policy.topk_min)


def kascade_anchor_layers(layers: int, policy: KvPolicySpec) -> list[int]:
    """Anchor layers: layer 0 plus evenly spaced ones, ``policy.anchors`` in all.

    The default count scales the published 5 anchors of 32 layers (Llama-3.1-8B and Qwen3-8B
    in the Kascade release, kv-compression-implementations.md section 1.8) [A].
    """
    count = policy.anchors or max(1, round(layers * 5 / 32))
    return sorted({round(i * layers / count) for i in range(count)})


def policy_sizes(prompt: int | None, kv_seq: int, policy: KvPolicySpec) -> dict[str, int]:
    """Sizes of the compressed cache's parts, as ``rdusim.kv_policy`` defines them.

    At prefill (``prompt`` tokens): ``capacity`` slots in all; ``ring`` the sink + recent
    slots a ring gather copies (StreamingLLM: every slot); ``topk_slots`` the tokens SnapKV's
    selection gathers (SnapStream: its top-K share; SnapKV and LongFlow: the budget less the
    observation window, which is always kept). At decode (``prompt=None``) the cache is what
    prefill kept: ``kv_seq`` slots. ``kascade_k``: the keys a Kascade reuse layer attends to.
    """
    sizes = {"kascade_k": kascade_topk(kv_seq, policy)}
    if prompt is None:
        return sizes | {"window": min(policy.window, kv_seq), "capacity": kv_seq, "ring": kv_seq, "topk_slots": 1}
    capacity = compressed_budget(prompt, policy.compression)
    window = min(policy.window, prompt)
    ring, topk = capacity, capacity - min(window, capacity)
    if policy.name == "snapstream":
        sink, recent, topk = ring_slots(capacity, policy)
        ring = sink + recent
    return sizes | {"window": window, "capacity": capacity, "ring": ring, "topk_slots": max(topk, 1)}


def ring_slots(capacity: int, policy: KvPolicySpec) -> tuple[int, int, int]:
    """(sink, recent, top-K) slots of a SnapStream (or StreamingLLM: no top-K) cache of ``capacity``."""
    share = policy.topk_share if policy.name == "snapstream" else 0.0
    try:
        return snapstream_slots(capacity, policy.sink, share)
    except ValueError as error:
        raise MappingError(f"kv_policy: {error} (compression {policy.compression:g})") from None


def add_policy_ops(b: LayerBuilder, policy: KvPolicySpec, phase: str, latent: bool, variant: str) -> None:
    if phase == "prefill":
        if policy.name in ("snapstream", "streamingllm", "snapkv", "longflow"):
            _snapkv_prefill(b, latent, policy.name)
        elif policy.name == "h2o":
            _h2o_prefill(b, latent)
    elif policy.name in RING_BUFFER:
        _ring_update(b, policy, latent)
    elif policy.name == "h2o":
        _scan_ops(b, "h2o", latent)
    elif policy.name == "longflow":
        _scan_ops(b, "longflow", latent)
    elif policy.name == "kascade" and variant == "anchor":
        _kascade_anchor(b, latent)


def _kv_row(latent: bool) -> tuple[tuple[str, ...], float]:
    return (("kv_dim",), 1.0) if latent else (("kv_heads", "head_dim"), 2.0)


def _snapkv_prefill(b: LayerBuilder, latent: bool, policy: str) -> None:
    row, factor = _kv_row(latent)

    def kv(name: str, rows: str) -> TensorUse:
        return TensorUse(name, ("batch", rows, *row), "kv", b.dt.kv, factor)

    if policy in RING_BUFFER:
        # four gathers (two index ranges of K and V) + the sink slice
        b.add("ring_gather", "elementwise", ("batch", "ring", *row), factor, (kv("kv_cache", "ring"),),
              (kv("kv_ring", "ring"),))
    if policy == "streamingllm":
        return
    qk, heads = ("qk_dim", "heads") if latent else ("head_dim", "kv_heads")
    b.gemm("snapkv_score", b.act("q_obs", "batch", "window", "heads", qk), b.act("k_obs", "batch", "kv_seq", heads, qk),
           b.act("obs_logits", "batch", "heads", "window", "kv_seq", nbytes=FP32), (qk,), tp_dim="heads")
    # softmax over candidates, sum over window rows (and heads), average pool
    b.add("snapkv_vote", "elementwise", ("batch", "heads", "window", "kv_seq"), 5.0,
          (b.act("obs_logits", "batch", "heads", "window", "kv_seq", nbytes=FP32),),
          (b.act("votes", "batch", "kv_seq", nbytes=FP32),), reduce=("heads", "window"), tp_dim="heads")
    # a global selection over one vector per sequence: it needs every candidate's vote (a
    # pipeline barrier) and, as one sort network, runs on one PCU per sequence
    b.add("snapkv_topk", "sort", ("batch", "kv_seq"), _sort_passes(b.sizes["kv_seq"]),
          (b.act("votes", "batch", "kv_seq", nbytes=FP32),), (b.act("keep_idx", "batch", "topk_slots", nbytes=4),),
          is_barrier=True, parallel_dims=("batch",))
    b.add("snapkv_gather", "elementwise", ("batch", "topk_slots", *row), factor,
          (kv("kv_cache", "topk_slots"), b.act("keep_idx", "batch", "topk_slots", nbytes=4)),
          (kv("kv_topk", "topk_slots"),))
    if policy == "snapstream":
        b.add("snapkv_concat", "elementwise", ("batch", "capacity", *row), factor,
              (kv("kv_topk", "topk_slots"), kv("kv_ring", "ring")), (kv("kv_compressed", "capacity"),))


def _ring_update(b: LayerBuilder, policy: KvPolicySpec, latent: bool) -> None:
    """The decode-step cache update of a fixed-size [sink | recent | top-K] cache.

    ``ring`` (methods.md section 1, decode): the new token's entry goes to slot ``t`` (sink)
    or ``S + (t - S) mod R``: an index computation, the entry itself is the one the QKV ops
    write anyway. ``naive``: the recent run shifted by one with the new token appended, both
    candidate caches ([sink | recent shifted | top-K] and [sink | recent | top-K], for a token
    that lands in the recent run or in a sink) built from slices and concatenated, and one
    selected per sample, then written back: the whole cache is read, built twice on chip and
    rewritten every step.
    """
    capacity = b.sizes["kv_seq"]
    sink, recent, topk = ring_slots(capacity, policy)
    b.sizes |= {"upd_sink": max(sink, 1), "upd_recent": recent, "upd_topk": max(topk, 1),
                "upd_capacity": capacity, "candidates": 2}
    if policy.kv_update == "ring":
        b.add("ring_slot", "elementwise", ("batch", "seq"), 4.0,
              (b.act("step_position", "batch", "seq", nbytes=4),), (b.act("slot_index", "batch", "seq", nbytes=4),),
              attach_to="attention")
        return
    row, factor = _kv_row(latent)

    def kv(name: str, rows: str, role: str = "kv") -> TensorUse:
        return TensorUse(name, ("batch", rows, *row), role, b.dt.kv, factor)

    new = TensorUse("kv_cache", ("batch", "seq", *row), "kv", b.dt.kv, factor)
    b.add("naive_shift", "elementwise", ("batch", "upd_recent", *row), factor,
          (kv("kv_recent", "upd_recent"), new), (kv("recent_shifted", "upd_recent", "activation"),),
          attach_to="attention")
    candidates = TensorUse("kv_candidates", ("batch", "candidates", "upd_capacity", *row), "activation", b.dt.kv, factor)
    b.add("naive_concat", "elementwise", ("batch", "candidates", "upd_capacity", *row), factor,
          (kv("kv_sink", "upd_sink"), kv("kv_recent", "upd_recent"), kv("recent_shifted", "upd_recent", "activation"),
           kv("kv_topk_slots", "upd_topk")), (candidates,), attach_to="attention", whole_operand=True)
    b.add("naive_select", "elementwise", ("batch", "upd_capacity", *row), factor,
          (candidates,), (kv("kv_rebuilt", "upd_capacity"),), attach_to="attention", whole_operand=True)


def _h2o_prefill(b: LayerBuilder, latent: bool) -> None:
    """H2O needs every key's attention summed over all prompt queries: a second QK pass
    (the softmax normaliser is known only after the first), then the heavy-hitter top-K."""
    qk = "qk_dim" if latent else "head_dim"
    heads = "heads" if latent else "kv_heads"
    b.add("h2o_scores", "attention", ("batch", "heads", "seq", "kv_seq"), 2.0 * b.sizes[qk] + 3.0,
          (b.act("q_rot", "batch", "seq", "heads", qk), b.act("k_obs", "batch", "kv_seq", heads, qk)),
          (b.act("h2o_acc", "batch", "kv_seq", nbytes=FP32),), reduce=("seq", "heads"), tp_dim="heads",
          causal=True, attach_to="attention")
    b.add("h2o_select", "sort", ("batch", "kv_seq"), _sort_passes(b.sizes["kv_seq"]),
          (b.act("h2o_acc", "batch", "kv_seq", nbytes=FP32),), (b.act("keep_idx", "batch", "capacity", nbytes=4),),
          is_barrier=True, parallel_dims=("batch",), attach_to="attention")


def _scan_ops(b: LayerBuilder, name: str, latent: bool) -> None:
    """Per decode step: score every slot from this step's attention, then an argmin scan.

    H2O adds the step's probabilities to each slot's accumulated score (an fp32 state per
    slot read and written in HBM); LongFlow weighs them by the slot's cached |v|_1.
    """
    kv_heads = "one" if latent else "kv_heads"
    state = TensorUse(f"{name}_state", ("batch", kv_heads, "kv_seq"), "kv", FP32)
    b.add(f"{name}_score", "elementwise", ("batch", "heads", "seq", "kv_seq"), 2.0, (state,),
          (TensorUse(f"{name}_state", ("batch", kv_heads, "kv_seq"), "kv", FP32),), reduce=("heads",),
          tp_dim="heads", attach_to="attention")
    b.add(f"{name}_evict", "sort", ("batch", kv_heads, "kv_seq"), 1.0,
          (TensorUse(f"{name}_state", ("batch", kv_heads, "kv_seq"), "activation", FP32),),
          (b.act(f"{name}_victim", "batch", kv_heads, nbytes=8),), attach_to="attention")


def _kascade_anchor(b: LayerBuilder, latent: bool) -> None:
    """Anchor layer at decode: score pass over every key, pooled softmax, top-k, then the
    attention itself runs over the k selected keys only."""
    qk = "kv_dim" if latent else "head_dim"
    row, factor = _kv_row(latent)
    past = TensorUse("kv_past", ("batch", "kv_seq", *row), "kv", b.dt.kv, factor / 2 if not latent else 1.0)
    q = "q_abs" if latent else "q_rot"
    b.add("kascade_score", "attention", ("batch", "heads", "seq", "kv_seq"), 2.0 * b.sizes[qk] + 3.0,
          (b.act(q, "batch", "seq", "heads", qk), past),
          (b.act("kascade_pooled", "batch", "kv_heads", "kv_seq", nbytes=FP32),), reduce=("heads",),
          tp_dim="heads", attach_to="attention")
    b.add("kascade_select", "sort", ("batch", "kv_heads", "kv_seq"), _sort_passes(b.sizes["kv_seq"]),
          (b.act("kascade_pooled", "batch", "kv_heads", "kv_seq", nbytes=FP32),),
          (b.act("kascade_idx", "batch", "kv_heads", "kascade_k", nbytes=4),),
          parallel_dims=("batch", "kv_heads"), attach_to="attention")
    index = next(i for i, op in enumerate(b.ops) if op.name == "attention")
    attention = b.ops[index]
    loop = tuple("kascade_k" if d == "kv_seq" else d for d in attention.loop)
    reads = tuple(dataclasses.replace(t, dims=tuple("kascade_k" if d == "kv_seq" else d for d in t.dims))
                  for t in attention.reads) + (b.act("kascade_idx", "batch", "kv_heads", "kascade_k", nbytes=4),)
    b.ops[index] = dataclasses.replace(attention, loop=loop, reads=reads, reduce=("kascade_k",))
    b.ops.append(b.ops.pop(index))  # after the selection it depends on


def _sort_passes(n: int) -> float:
    """Compare-exchange passes per element of a bitonic sort of ``n`` elements."""
    log = math.log2(max(n, 2))
    return log * (log + 1) / 2
